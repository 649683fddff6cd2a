"""The logit lens (s2s.lens) against transformers' own forward and hooks written here: each
decoder layer's row is that layer's output (caught by a hook of this file) read through the
family's head as this file writes it (Marian: lm_head + final_logits_bias; M2M100: its final
layer_norm, then lm_head; T5: final_layer_norm, the tied embedding's d_model**-0.5, lm_head), on
tiny models with random nonzero biases and norms; the last row is the model's own logits and
forced decoding's token_log_probs; ours on its own modules, its pointer included."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from biased_models import HUB, biased, hub_parts, main_tensor, shipped

from s2s.attributions import source_ids, target_ids
from s2s.checkpoint import load_translator
from s2s.decode import forced
from s2s.hooks import decoder_input
from s2s.lens import ONE_LAYER, layer_log_probs, lens, main

TEXT = "the cat sat on the mat ."
FR = "le chat est assis sur le tapis ."
REVERSAL = "a c f b"


@pytest.fixture(scope="module")
def models(untrained_translators, hub_models):
    return biased(untrained_translators, hub_models) | {"shipped": shipped()}


def pair(tr, text, reference):
    src = torch.tensor([source_ids(tr, text)])
    tgt = torch.tensor(target_ids(tr, text, reference)[0])
    return src, tgt


@pytest.mark.parametrize("name", HUB)
def test_each_row_is_the_family_head_on_that_layer_and_the_last_is_the_model(models, name):
    tr = models[name]
    hf = tr.model.hf
    src, tgt = pair(tr, TEXT, FR)
    _, decoder_layers, head = hub_parts(tr)
    seen = {}
    handles = [m.register_forward_hook(lambda mod, a, out, l=l: seen.__setitem__(l, main_tensor(out)))
               for l, m in enumerate(decoder_layers)]
    try:
        with torch.no_grad():
            out = hf(input_ids=src, attention_mask=torch.ones_like(src), decoder_input_ids=decoder_input(tr.model, tgt))
    finally:
        for h in handles:
            h.remove()
    with torch.no_grad():
        got = layer_log_probs(tr.model, src, tgt)                              # (L, T, V)
        assert got.shape[0] == len(decoder_layers) == 2
        for l in range(len(decoder_layers)):
            want = F.log_softmax(tr.model.pieces_only(head(seen[l])[0]), dim=-1)
            finite = torch.isfinite(want)
            assert torch.equal(finite, torch.isfinite(got[l]))
            assert torch.allclose(got[l][finite], want[finite], atol=1e-5), (name, l)
        own = F.log_softmax(tr.model.pieces_only(out.logits[0]), dim=-1)
        finite = torch.isfinite(own)
        assert torch.allclose(got[-1][finite], own[finite], atol=1e-5)
        # the layers differ (a lens that read the same state twice would pass the above for the last)
        assert (got[0] - got[1])[finite].abs().max() > 1e-3
    result = lens(tr, TEXT, FR)
    d = forced(tr, TEXT, reference_ids=result.target_ids)
    assert result.log_probs[-1] == pytest.approx(d.token_log_probs, abs=1e-4)


def test_t5s_scaling_and_final_norm_are_read(models):
    """Without T5's d_model**-0.5 (or without its final norm) the last row would not be the model's."""
    tr = models["t5"]
    hf = tr.model.hf
    src, tgt = pair(tr, TEXT, FR)
    with torch.no_grad():
        got = layer_log_probs(tr.model, src, tgt)[-1]
        h = {}
        handle = hf.decoder.block[-1].register_forward_hook(lambda m, a, o: h.__setitem__(0, main_tensor(o)))
        try:
            hf(input_ids=src, decoder_input_ids=decoder_input(tr.model, tgt))
        finally:
            handle.remove()
        unscaled = F.log_softmax(tr.model.pieces_only(hf.lm_head(hf.decoder.final_layer_norm(h[0]))[0]), -1)
        finite = torch.isfinite(got)
        assert (unscaled[finite] - got[finite]).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["ours", "ours-copy", "shipped"])
def test_ours_each_row_is_its_output_layer_on_that_layer(models, name):
    """Ours, on its own modules: LN_dec then E s + b at each decoder layer; with the pointer, the
    mix from that layer's own cross-attention (head mean) and its output, as forward mixes the last."""
    tr = models[name]
    model = tr.model
    src, tgt = pair(tr, REVERSAL, None)
    seen = {}
    handles = [layer.register_forward_hook(lambda m, a, o, l=l: seen.__setitem__(l, o))
               for l, layer in enumerate(model.decoder)]
    try:
        with torch.no_grad():
            logits, _ = model(src, torch.tensor([src.size(1)]), decoder_input(model, tgt))
    finally:
        for h in handles:
            h.remove()
    with torch.no_grad():
        got = layer_log_probs(model, src, tgt)
        for l, (x, context, _, cross_w) in seen.items():
            s = model.decoder_norm(x)
            want = s @ model.embed.weight.T + model.out_bias
            if model.copy_gate is not None:      # See et al.'s mix; </s> (id 3) and below are not copied
                p_gen = torch.sigmoid(model.copy_gate(torch.cat([context, s], -1)))
                index = src[:, None, :].expand(-1, s.size(1), -1)
                copied = (1 - p_gen) * cross_w.mean(1) * (index > 3)
                p = (p_gen * F.softmax(want, -1)).scatter_add(-1, index, copied)
                want = torch.log(p / p.sum(-1, keepdim=True))
            assert torch.allclose(got[l], F.log_softmax(want[0], -1), atol=1e-5), l
        assert torch.allclose(got[-1], F.log_softmax(logits[0], -1), atol=1e-5)


def test_a_recurrent_model_has_one_row_and_says_so(models):
    tr = models["lstm-copy"]
    result = lens(tr, REVERSAL)
    assert len(result.log_probs) == 1 and result.note == ONE_LAYER
    d = forced(tr, REVERSAL, reference_ids=result.target_ids)
    assert result.log_probs[0] == pytest.approx(d.token_log_probs, abs=1e-4)
    assert all(r == 1 for r in result.ranks[0])            # greedy: the chosen piece is the likeliest


def test_the_shipped_transformer(capsys):
    """The shipped model: its last row is forced decoding's, to 1e-4; ranks and tops agree."""
    assert main(["--model", "en-fr-transformer", "--json", "--", "The little girl is happy."]) == 0
    out = json.loads(capsys.readouterr().out)
    tr = load_translator("en-fr-transformer")
    d = forced(tr, "The little girl is happy.", reference_ids=[tr.tokenizer.piece_id(p) for p in out["target_tokens"]])
    assert out["log_probs"][-1] == pytest.approx(d.token_log_probs, abs=1e-4)
    assert len(out["log_probs"]) == len(out["layers"]) == 3
    for l, row in enumerate(out["top"]):
        for j, step in enumerate(row):
            assert len(step) == 5 and [v for _, v in step] == sorted((v for _, v in step), reverse=True)
            assert (out["ranks"][l][j] == 1) == (step[0][0] == out["target_tokens"][j])
    assert out["ranks"][-1] == [1] * len(out["target_tokens"])      # greedy


def test_bad_input_is_one_line(capsys):
    assert main(["--model", "en-fr-transformer", "--", "   "]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    assert main(["--model", "en-fr-transformer", "--top", "0", "--", "Hello."]) == 2
    assert capsys.readouterr().err.count("\n") == 1
