"""Contributions beyond the weights (s2s/contributions.py): norm, ALTI+, rollout, value zeroing,
checked against their definitions on tiny models: the shipped Transformer's code and tiny
Marian (post-LN), T5 (RMSNorm, relative positions) and M2M100 (pre-LN) built offline."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from s2s.checkpoint import load_translator
from s2s.contributions import (
    METHODS,
    Block,
    alti_block,
    decomposition,
    explain_contributions,
    linearised_norm,
    norm_per_head,
    norm_summed,
    roll_out,
    trace,
    value_zeroing,
)
from s2s.text import InputError

TEXT = "the cat sat on the mat ."
FR = "le chat est assis sur le tapis ."


def _pair(tr, text=TEXT, reference=FR):
    from s2s.attributions import source_ids
    src = torch.tensor([source_ids(tr, text)], device=tr.device)
    tgt = torch.tensor(tr.tokenizer.target_ids(reference), device=tr.device)
    return src, tgt


@pytest.fixture(scope="module")
def transformers_(untrained_translators, hub_models):
    return {"ours": untrained_translators["transformer"], "ours-copy": untrained_translators["transformer-copy"],
            **{name: load_translator(path) for name, path in hub_models.items()}}


WHICH = ["ours", "ours-copy", "marian", "t5", "m2m100"]


@pytest.mark.parametrize("which", WHICH)
def test_each_block_decomposes_exactly_into_its_inputs(transformers_, which):
    """sum_k T_i(x_k) + rest is the block's real output: residual + attention before a pre-LN
    model's next norm, the post-LN norm's output through its linearisation (Marian)."""
    tr = transformers_[which]
    src, tgt = _pair(tr)
    t = trace(tr.model, src, tgt)
    post = 0
    for blocks, self_block in ((t.encoder, True), (t.decoder, True), (t.cross, False)):
        for b in blocks:
            parts, rest = decomposition(b, self_block)
            real = b.normed if b.post_norm is not None else b.residual + b.out
            assert torch.allclose(parts.sum(1) + rest, real, atol=1e-4), (which, self_block)
            post += b.post_norm is not None
    assert (post > 0) == (which == "marian")      # Marian is post-LN, the others pre-LN


def test_the_linearised_norm_equals_the_real_one_at_the_point():
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(8)
    torch.nn.init.normal_(norm.weight), torch.nn.init.normal_(norm.bias)
    parts = torch.randn(3, 5, 8)
    total = parts.sum(1)
    lin = linearised_norm(norm, parts, total).sum(1) + norm.bias
    assert torch.allclose(lin, norm(total), atol=1e-5)


def test_the_values_the_trace_reads_give_the_attention_output(transformers_):
    """f^h(x_j) weighted by alpha^h_ij and summed, plus b_O, is what the model's attention returned."""
    for which in WHICH:
        tr = transformers_[which]
        t = trace(tr.model, *_pair(tr))
        for b in t.encoder + t.decoder + t.cross:
            bias = 0 if b.b_o is None else b.b_o
            assert torch.allclose(b.vectors().sum(1) + bias, b.out, atol=1e-5), which


def test_rollout_of_identity_attention_is_the_identity():
    S, T = 4, 3
    eye = (lambda n: torch.eye(n))
    enc = [eye(S)] * 2
    dec = [eye(T)] * 2
    # a cross block that keeps all of the residual: nothing comes from the source
    cross = [torch.cat([torch.ones(T, 1), torch.zeros(T, S)], 1)] * 2
    for r in roll_out(enc, dec, cross):
        assert torch.allclose(r, torch.cat([torch.zeros(T, S), eye(T)], 1))
    # one that reads token i of the source at position i (identity cross-attention), residual none:
    # the encoder's identity rollout passes it straight through
    cross = [torch.cat([torch.zeros(S, 1), eye(S)], 1)]
    r = roll_out(enc, [eye(S)], cross)[-1]
    assert torch.allclose(r, torch.cat([eye(S), torch.zeros(S, S)], 1))


def test_rows_of_a_rollout_stay_distributions():
    torch.manual_seed(1)
    rnd = (lambda *s: torch.softmax(torch.randn(*s), -1))
    causal = rnd(3, 3).tril()
    r = roll_out([rnd(5, 5), rnd(5, 5)], [causal / causal.sum(1, keepdim=True)] * 2, [rnd(3, 6), rnd(3, 6)])
    for m in r:
        assert torch.allclose(m.sum(1), torch.ones(3), atol=1e-6)


def test_the_norm_view_equals_the_weights_when_every_vector_has_one_length():
    torch.manual_seed(2)
    H, I, J, dk, d = 2, 3, 4, 4, 8
    w_o = torch.eye(d)
    values = torch.randn(H, J, dk)
    values = values / values.norm(dim=-1, keepdim=True)              # ||f^h(x_j)|| = 1 for every j, h
    weights = torch.softmax(torch.randn(H, I, J), -1)
    b = Block(values, weights, w_o, None, torch.zeros(I, d), torch.zeros(I, d))
    assert torch.allclose(norm_per_head(b), weights, atol=1e-6)
    # one head: the summed view is the weights too
    b1 = Block(values[:1], weights[:1], w_o[:, :dk], None, torch.zeros(I, d), torch.zeros(I, d))
    assert torch.allclose(norm_summed(b1), weights[0], atol=1e-6)


def test_alti_of_a_block_that_only_copies_its_residual_is_the_identity():
    I, d = 3, 6
    residual = torch.randn(I, d)
    values = torch.zeros(1, I, d)                                   # every value vector 0: nothing mixes in
    b = Block(values, torch.softmax(torch.randn(1, I, I), -1), torch.eye(d), None, residual, torch.zeros(I, d))
    assert torch.allclose(alti_block(b, True), torch.eye(I))


def test_value_zeroing_of_one_token_is_a_hand_recomputation_of_that_layer(untrained_translators):
    """Zero v_j in decoder layer l's cross-attention by hand, rerun the layer, compare its output."""
    tr = untrained_translators["transformer"]
    model = tr.model
    src, tgt = _pair(tr)
    t = trace(model, src, tgt)
    vz = value_zeroing(model, t)                                          # (L, T, S)
    S = src.size(1)
    with torch.no_grad():
        memory, _ = model.encode(src, torch.tensor([S]))
        tgt_in = torch.cat([tgt.new_tensor([2]), tgt[:-1]])[None]
        x = model.embed_at(tgt_in)
        T = tgt_in.size(1)
        self_bias = torch.full((T, T), float("-inf")).triu(1)
        cross_bias = memory.mask_bias[:, None, None, :]
        for l, layer in enumerate(model.decoder):
            kv = layer.self_attn.keys_values(layer.norm_self(x))
            ck, cv = memory.cross_keys[:, l], memory.cross_values[:, l]
            real, *_ = layer(x, kv, self_bias, (ck, cv), cross_bias)
            for j in (0, S - 1):
                cv0 = cv.clone()
                cv0[:, :, j] = 0                                          # v_j = 0 in every head
                zeroed, *_ = layer(x, kv, self_bias, (ck, cv0), cross_bias)
                expect = (1 - torch.nn.functional.cosine_similarity(zeroed[0], real[0], dim=-1)).clamp(min=0)
                assert torch.allclose(vz[l, :, j], expect, atol=1e-5), (l, j)
            x = real


def rerun_with_each_value_zeroed(model, src, tgt, t):
    """Value zeroing the long way: the whole decoder rerun on a batch of L x S rows, row (l, j)
    with v_j set to 0 in layer l's cross-attention by a hook on its value projection."""
    from s2s.hooks import first, sites
    _, _, sites = sites(model)
    L, S = len(sites), src.size(1)
    rows_l, rows_j = torch.arange(L).repeat_interleave(S), torch.arange(S).repeat(L)
    B, outs, handles = L * S, {}, []

    def zero(l):
        def hook(module, args, output):
            out = output.clone()
            pick = (rows_l == l).nonzero()[:, 0]
            out[pick, rows_j[pick]] = 0
            return out
        return hook

    def keep(l):
        def hook(module, args, output):
            outs[l] = first(output)[rows_l == l].float()
        return hook

    for l, s in enumerate(sites):
        handles += [s.v.register_forward_hook(zero(l)), s.layer.register_forward_hook(keep(l))]
    bos = getattr(getattr(model, "tokenizer", None), "bos_id", 2)
    tgt_in = torch.cat([tgt.new_tensor([bos]), tgt[:-1]])[None].expand(B, -1)
    with torch.no_grad():
        try:
            if hasattr(model, "hf"):
                model.hf.get_decoder()(input_ids=tgt_in, encoder_hidden_states=t.encoder_out[None].expand(B, -1, -1),
                                       encoder_attention_mask=torch.ones(B, S, dtype=torch.long), use_cache=False)
            else:
                memory, _ = model.encode(src.expand(B, -1), torch.full((B,), S))
                model.decode_all(tgt_in, memory)
        finally:
            for h in handles:
                h.remove()
    cos = [torch.nn.functional.cosine_similarity(outs[l].view(S, *t.layer_out[l].shape), t.layer_out[l][None], dim=-1)
           for l in range(L)]
    return torch.stack([(1 - c).clamp(min=0).t() for c in cos])


@pytest.mark.parametrize("which", WHICH)
def test_value_zeroing_equals_rerunning_the_decoder_with_each_value_zeroed(transformers_, which):
    tr = transformers_[which]
    src, tgt = _pair(tr)
    t = trace(tr.model, src, tgt)
    assert torch.allclose(value_zeroing(tr.model, t), rerun_with_each_value_zeroed(tr.model, src, tgt, t), atol=1e-5)


@pytest.mark.parametrize("which", WHICH)
def test_every_method_gives_a_distribution_per_row_for_every_layer(transformers_, which):
    tr = transformers_[which]
    c = explain_contributions(tr, TEXT, FR)
    L = len(c.layers["weights"])
    T, S = len(c.target_tokens), len(c.source_tokens)
    assert c.methods == METHODS
    for m in METHODS:
        assert c.layers[m].shape == (L, T, S), m
        sums = c.layers[m].sum(-1)      # a distribution, or zeros where nothing had a measurable effect
        assert (np.isclose(sums, 1, atol=1e-5) | (sums == 0)).all(), m
        # tiny hub models at their init (weights of std 0.02): value zeroing's effect is below float
        # precision everywhere (<= 1.1e-6 on the Marian), so no row has a measurable effect
        assert (sums > 0).any() or (m == "value_zeroing" and which in ("marian", "m2m100")), m
        assert np.isfinite(c.layers[m]).all()
    for m in ("weights", "norm"):
        assert c.heads[m].shape[:1] == (L,) and c.heads[m].shape[2:] == (T, S)
        assert np.allclose(c.heads[m].sum(-1), 1, atol=1e-5)
    share = c.source_share["alti"]
    assert share.shape == (L, T) and (share >= -1e-6).all() and (share <= 1 + 1e-6).all()
    # rollout's share is no measurement (1 - 0.5^l by construction): not reported as one
    assert "rollout" not in c.source_share
    assert c.matrix("weights").shape == (T, S)
    with pytest.raises(InputError, match="out of range"):
        c.matrix("norm", layer=L)


def test_the_weights_are_the_cross_attention_the_decoding_reports(transformers_):
    from s2s.decode import forced
    for which in WHICH:
        tr = transformers_[which]
        c = explain_contributions(tr, TEXT, FR)
        d = forced(tr, TEXT, FR)
        assert np.allclose(c.heads["weights"], d.cross_attention, atol=1e-5), which
        assert np.allclose(c.matrix("weights"), d.attention, atol=1e-5), which


def test_a_recurrent_model_gets_weights_and_norm_and_is_told_about_the_rest(untrained_translators):
    tr = untrained_translators["additive"]
    c = explain_contributions(tr, TEXT, FR)
    assert c.methods == ("weights", "norm")
    from s2s.decode import forced
    d = forced(tr, TEXT, FR)
    assert np.allclose(c.matrix("weights"), d.attention, atol=1e-5)
    assert np.allclose(c.matrix("norm").sum(1), 1)
    # norm = alpha_ij ||W_c^ctx h_j|| renormalised: the weights reweighted by one positive size per source piece
    ratio = c.matrix("norm") / c.matrix("weights")
    scale = ratio / ratio[:, :1]
    assert np.allclose(scale, scale[:1], rtol=1e-4)
    with pytest.raises(InputError, match="recurrent model"):
        explain_contributions(tr, TEXT, FR, methods=["alti"])
    with pytest.raises(InputError, match="no attention"):
        explain_contributions(untrained_translators["none"], TEXT, FR)


def test_json_names_every_matrix(transformers_):
    c = explain_contributions(transformers_["marian"], TEXT, FR)
    out = c.to_json()
    assert [r["token"] for r in out["rows"]] == c.target_tokens
    assert [col["token"] for col in out["columns"]] == c.source_tokens
    assert set(out["methods"]) == set(METHODS)
    assert len(out["methods"]["alti"]["layers"]) == 2 and "heads" in out["methods"]["norm"]
    assert len(out["source_share"]["alti"][0]) == len(c.target_tokens)
    assert all(math.isfinite(v) for v in out["seconds"].values())


def test_explain_method_json_names_each_matrix_by_method_and_layer(transformers_, capsys):
    from s2s.explain import main
    tr = transformers_["ours"]
    assert main(["--model", str(tr.path), "--method", "alti", "--method", "grad-x-input", "--reference", FR,
                 "--json", "--", TEXT]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    c = explain_contributions(tr, TEXT, FR)
    assert [(m["method"], m["layer"]) for m in out["matrices"]] == [("alti", 1), ("alti", 2), ("grad-x-input", None)]
    np.testing.assert_allclose(out["matrices"][1]["matrix"], c.matrix("alti"), atol=1e-5)
    assert [s["layer"] for s in out["source_share"]] == [1, 2]
    np.testing.assert_allclose(out["source_share"][1]["share"], c.source_share["alti"][-1], atol=1e-5)
    assert [r["token"] for r in out["rows"]] == c.target_tokens and out["forced_from"] == "reference"


def test_explain_method_on_a_recurrent_model_says_what_applies(untrained_translators, capsys):
    from s2s.explain import main
    path = str(untrained_translators["additive"].path)
    assert main(["--model", path, "--method", "rollout", "--", TEXT]) == 2
    assert "rollout needs a Transformer" in capsys.readouterr().err
    assert main(["--model", path, "--method", "all", "--json", "--", TEXT]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert {m["method"] for m in out["matrices"]} == {"weights", "norm", "grad-x-input", "ig", "loo"}


def test_alignment_scores_a_method_per_layer(untrained_translators, tmp_path, capsys):
    """--method scores a method's links per decoder layer, the last one as the library reads it."""
    import json

    from test_alignment import reversal_gold

    from s2s.alignment import links, main, read_gold, score, word_method
    gold_dir = reversal_gold(tmp_path / "gold")
    tr = untrained_translators["transformer"]
    assert main(["--model", str(tr.path), "--gold", str(gold_dir), "--method", "norm", "--layers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    gold = read_gold(gold_dir, "test")
    mats = [word_method(tr, g.english, g.french, "norm") for g in gold]
    assert [r["layer"] for r in out["layers"]] == [1, 2]
    for layer in (0, 1):
        assert out["layers"][layer]["aer"] == round(score([links(m[layer]) for m in mats], gold).aer, 4)
    assert out["best_layer"]["aer"] == min(r["aer"] for r in out["layers"])
    assert main(["--model", str(untrained_translators["additive"].path), "--gold", str(gold_dir),
                 "--method", "alti"]) == 2
    assert "needs a Transformer" in capsys.readouterr().err


def test_the_method_table_keeps_its_rows_and_its_command(untrained_translators, tmp_path, capsys):
    import json
    import shutil

    from test_alignment import reversal_gold

    from s2s.alignment import main
    gold_dir = reversal_gold(tmp_path / "gold")
    zoo = tmp_path / "zoo"
    shutil.copytree(untrained_translators["transformer"].path, zoo / "transformer")
    shutil.copytree(untrained_translators["dot"].path, zoo / "dot")
    out = tmp_path / "methods.json"
    assert main(["--gold", str(gold_dir), "--models", str(zoo), "--method-table", str(out), "--method", "rollout"]) == 0
    first = json.loads(out.read_text())
    assert [(r["model"], r["method"]) for r in first["rows"]] == [("transformer", "rollout")]   # not for "dot"
    assert "--method " not in first["command"] and "--method-table" in first["command"]
    assert len(first["rows"][0]["grow-diag"]) == 2 and set(first["rules"]) == {"argmax", "grow-diag", "shift"}
    out.write_text(json.dumps(first | {"seconds_note": "written by hand"}))      # a note beside the rows stays
    assert main(["--gold", str(gold_dir), "--models", str(zoo), "--method-table", str(out), "--method", "norm"]) == 0
    assert json.loads(out.read_text())["seconds_note"] == "written by hand"
    rows = json.loads(out.read_text())["rows"]
    assert rows[0] == first["rows"][0] and {(r["model"], r["method"]) for r in rows[1:]} == {
        ("transformer", "norm"), ("dot", "norm")}
    assert main(["--gold", str(gold_dir), "--models", str(zoo), "--method-table", str(out), "--method", "weights"]) == 0
    rows = {(r["model"], r["method"]): r for r in json.loads(out.read_text())["rows"]}
    head = rows[("transformer", "weights")]["best_head"]        # a Transformer's weights: its best single head too
    from s2s.alignment import best_head, head_scores, read_gold, word_attention
    from s2s.checkpoint import load_translator
    tr, gold = load_translator(zoo / "transformer"), read_gold(gold_dir)
    table = head_scores([word_attention(tr, g.english, g.french, heads=True) for g in gold], gold, "grow-diag")
    l, h = best_head(table)
    assert (head["layer"], head["head"], head["aer"]) == (l + 1, h + 1, round(table[l][h].aer, 4))
    assert "best_head" not in rows[("dot", "weights")]


def test_rollout_share_is_the_constant_its_construction_gives(transformers_):
    """Why rollout's share is not drawn: after decoder layer l it is 1 - 0.5^l for every word."""
    from s2s.contributions import roll_out
    tr = transformers_["ours"]
    t = trace(tr.model, *_pair(tr))
    half = (lambda w: 0.5 * w.mean(0) + 0.5 * torch.eye(w.size(-1)))
    cross = [torch.cat([torch.full((b.weights.size(1), 1), 0.5), 0.5 * b.weights.mean(0)], 1) for b in t.cross]
    rolled = roll_out([half(b.weights) for b in t.encoder], [half(b.weights) for b in t.decoder], cross)
    S = t.cross[0].weights.size(-1)
    for layer, r in enumerate(rolled, 1):
        assert torch.allclose(r[:, :S].sum(-1), torch.full((r.size(0),), 1 - 0.5 ** layer), atol=1e-5)


def test_value_zeroing_leaves_float_noise_at_zero(transformers_):
    """A score under VZ_FLOOR is no effect: a cross-attention whose values are all ~0 moves nothing,
    and its rows stay zero instead of being normalised into a distribution of noise (as inseq's floor)."""
    import copy

    from s2s.contributions import VZ_FLOOR, contributions
    tr = transformers_["ours"]
    model = copy.deepcopy(tr.model)
    with torch.no_grad():
        for layer in model.decoder:             # what each source piece sends: below float precision
            layer.cross_attn.w_v.weight.mul_(1e-9)
            layer.cross_attn.w_v.bias.zero_()
    src, tgt = _pair(tr)
    t = trace(model, src, tgt)
    raw = value_zeroing(model, t)
    assert (raw == 0).all() and VZ_FLOOR == 1e-5
    layers, _, _, _ = contributions(model, src, tgt, ["value_zeroing"])
    assert (layers["value_zeroing"] == 0).all()
