"""Knocking heads out (s2s/hooks.py, DecodeSettings.head_mask), held against code not written
here: transformers' own generate() and forward pass with a forward pre-hook, written in this
file, that zeroes the heads' slices of the output projection's input (o_proj / out_proj / T5's
`o`), on tiny Marian, T5 and M2M100 models with random nonzero biases and sharpened attention
(so that one head knocked out changes the output); the shipped Transformer's code likewise
against its own modules (w_o). Every comparison also asserts that the mask changed something."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from s2s import decode as D
from s2s import hooks
from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, decode
from s2s.text import InputError

HUB_TEXT = "the cat sat on the mat ."
OURS_TEXT = "c a f b d"
FAMILIES = ["marian", "t5", "m2m100"]
# per family: the heads knocked out, 0-based (kind, layer, head), one of each kind, each of which alone
# changes that model's greedy output (and all three its beam search's) once sharpened as below
MASKS = {"ours": (("cross", 1, 1), ("decoder", 1, 0), ("encoder", 1, 3)),
         "marian": (("cross", 1, 1), ("decoder", 1, 0), ("encoder", 1, 3)),
         "t5": (("cross", 1, 1), ("decoder", 1, 0), ("encoder", 1, 3)),
         "m2m100": (("cross", 1, 1), ("decoder", 1, 0), ("encoder", 1, 1))}


def run_cli(*args):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


def sharpened(tr, seed: int, gain: float = 4.0):
    """Every Linear's bias drawn at random and every query, key, value and output projection
    scaled by `gain`: peaked attention whose output weighs in the residual stream, so that a
    head's slice carries something the output depends on (at their init, std 0.02, it hardly does)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, m in tr.model.named_modules():
            if isinstance(m, torch.nn.Linear):
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.5)
                if name.split(".")[-1] in ("q_proj", "k_proj", "v_proj", "out_proj", "q", "k", "v", "o", "w_q", "w_k",
                                           "w_v", "w_o"):
                    m.weight.mul_(gain)
    return tr


@pytest.fixture(scope="module")
def models(untrained_translators, hub_models):
    """Fresh float32 CPU copies (the session's shared models stay as they are)."""
    out = {"ours": sharpened(load_translator(untrained_translators["transformer"].path), 1)}
    for i, (name, path) in enumerate(hub_models.items()):
        out[name] = sharpened(load_translator(path, device="cpu"), 2 + i)
    return out


def output_projections(model, kind: str) -> list[torch.nn.Module]:
    """Each layer's output projection of one kind of attention, found here by the modules'
    own names (not through s2s.hooks)."""
    if hasattr(model, "hf"):
        hf = model.hf
        if hf.config.model_type == "t5":
            blocks = hf.encoder.block if kind == "encoder" else hf.decoder.block
            return [b.layer[1].EncDecAttention.o if kind == "cross" else b.layer[0].SelfAttention.o for b in blocks]
        layers = hf.model.encoder.layers if kind == "encoder" else hf.model.decoder.layers
        return [l.encoder_attn.out_proj if kind == "cross" else l.self_attn.out_proj for l in layers]
    layers = model.encoder if kind == "encoder" else model.decoder
    return [l.cross_attn.w_o if kind == "cross" else l.self_attn.w_o for l in layers]


def n_heads(model) -> int:
    if hasattr(model, "hf"):
        c = model.hf.config
        return getattr(c, "num_heads", None) or c.decoder_attention_heads
    return model.cfg.heads


@contextmanager
def zeroed(model, mask):
    """The reference knockout: a forward pre-hook on each output projection that zeroes the
    masked heads' slices of its input, (..., H * d_k) read as (..., H, d_k)."""
    H = n_heads(model)
    handles = []
    for kind, layer, head in mask:
        def pre(module, args, head=head):
            x = args[0].clone()
            d_k = x.shape[-1] // H
            x[..., head * d_k:(head + 1) * d_k] = 0
            return (x,) + args[1:]
        handles.append(output_projections(model, kind)[layer].register_forward_pre_hook(pre))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def generate(tr, text: str, **kw) -> list[int]:
    """transformers' generate() (as tests/test_hub.py calls it), told the adapter's one extra
    rule: never an id its tokenizer lacks."""
    ids = torch.tensor([D.encode_source(tr, text)])
    unwritable = [] if tr.model.unwritable is None else tr.model.unwritable.tolist()
    kw.setdefault("suppress_tokens", list(tr.model.hf.generation_config.suppress_tokens or []) + unwritable)
    out = tr.model.hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                               forced_bos_token_id=tr.model.forced_bos, **kw)
    tokens = out[0, 1:].tolist()
    return tokens[:tokens.index(tr.tokenizer.eos_id) + 1] if tr.tokenizer.eos_id in tokens else tokens


def hub_forced_log_probs(tr, text: str, target: list[int]) -> torch.Tensor:
    """log p(y_t | y_<t, x) by transformers' own forward (teacher forcing), unwritable ids at -inf."""
    src = torch.tensor([D.encode_source(tr, text)])
    tgt_in = torch.tensor([[tr.tokenizer.bos_id] + target[:-1]])
    with torch.no_grad():
        logits = tr.model.hf(input_ids=src, attention_mask=torch.ones_like(src), decoder_input_ids=tgt_in).logits[0]
    if tr.model.unwritable is not None:
        logits[:, tr.model.unwritable] = float("-inf")
    return F.log_softmax(logits.float(), -1)[torch.arange(len(target)), torch.tensor(target)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("entry", range(3))
def test_masked_greedy_equals_generate_with_the_slices_zeroed(models, family, entry):
    """One head of each kind knocked out: our greedy decoding equals generate() with a pre-hook
    zeroing that head's slice, and differs from the unmasked output (the mask does something)."""
    tr = models[family]
    mask = (MASKS[family][entry],)
    plain = decode(tr, HUB_TEXT, DecodeSettings("greedy", max_len=12))
    masked = decode(tr, HUB_TEXT, DecodeSettings("greedy", max_len=12, head_mask=mask))
    assert plain.target_ids == generate(tr, HUB_TEXT, num_beams=1, do_sample=False, max_new_tokens=12)
    with zeroed(tr.model, mask):
        reference = generate(tr, HUB_TEXT, num_beams=1, do_sample=False, max_new_tokens=12)
    assert masked.target_ids == reference
    assert masked.target_ids != plain.target_ids, f"knocking out {mask} changed nothing: the test cannot fail"


@pytest.mark.parametrize("family", FAMILIES)
def test_masked_forced_log_probs_equal_the_hooked_forward(models, family):
    """Forced decoding under the mask gives transformers' own log-probs with the slices zeroed."""
    tr = models[family]
    target = decode(tr, HUB_TEXT, DecodeSettings("greedy", max_len=10)).target_ids
    mask = MASKS[family]
    masked = decode(tr, HUB_TEXT, DecodeSettings("forced", head_mask=mask), reference_ids=target)
    with zeroed(tr.model, mask):
        reference = hub_forced_log_probs(tr, HUB_TEXT, target)
    torch.testing.assert_close(torch.tensor(masked.token_log_probs), reference, atol=1e-4, rtol=0)
    plain = hub_forced_log_probs(tr, HUB_TEXT, target)
    assert (plain - reference).abs().max() > 1e-2


@pytest.mark.parametrize("family", FAMILIES)
def test_masked_beam_equals_generate_with_the_slices_zeroed(models, family):
    tr, mask = models[family], MASKS[family]
    s = DecodeSettings("beam", width=3, n_best=1, max_len=10, length_penalty=1.0, head_mask=mask)
    masked = decode(tr, HUB_TEXT, s)
    with zeroed(tr.model, mask):
        reference = generate(tr, HUB_TEXT, num_beams=3, do_sample=False, max_new_tokens=10, length_penalty=1.0,
                             early_stopping=True)
    with zeroed(tr.model, mask):
        plain_hooked = decode(tr, HUB_TEXT, DecodeSettings("beam", width=3, n_best=1, max_len=10,
                                                           length_penalty=1.0))
    # our beam under the mask is our beam under the test's hook, and agrees with generate()'s best
    assert masked.target_ids == plain_hooked.target_ids
    assert masked.target_ids == reference
    assert masked.target_ids != decode(tr, HUB_TEXT, DecodeSettings("beam", width=3, n_best=1, max_len=10,
                                                                     length_penalty=1.0)).target_ids


@pytest.mark.parametrize("family", ["ours", *FAMILIES])
def test_sampling_and_steering_honour_the_mask(models, family):
    """Sampling and a steered greedy decoding under the mask are those of the hooked model:
    same tokens, same log-probs; and they score as forced decoding under the mask scores them."""
    tr, mask = models[family], MASKS[family]
    text = OURS_TEXT if family == "ours" else HUB_TEXT
    for s in (DecodeSettings("sample", seed=5, max_len=10, temperature=1.5),
              DecodeSettings("greedy", max_len=10, target_prefix=decode(tr, text, DecodeSettings(
                  "greedy", max_len=3, head_mask=mask)).target_ids[:2])):
        masked = decode(tr, text, DecodeSettings(**{**s.__dict__, "head_mask": mask}))
        with zeroed(tr.model, mask):
            hooked = decode(tr, text, s)
        assert masked.target_ids == hooked.target_ids
        torch.testing.assert_close(torch.tensor(masked.token_log_probs), torch.tensor(hooked.token_log_probs),
                                   atol=1e-5, rtol=0)
        forced = decode(tr, text, DecodeSettings("forced", head_mask=mask), reference_ids=masked.target_ids)
        torch.testing.assert_close(torch.tensor(forced.token_log_probs), torch.tensor(masked.token_log_probs),
                                   atol=1e-4, rtol=0)
        unmasked = decode(tr, text, DecodeSettings("forced"), reference_ids=masked.target_ids)
        assert max(abs(a - b) for a, b in zip(unmasked.token_log_probs, masked.token_log_probs)) > 1e-2


@pytest.mark.parametrize("method", ["greedy", "beam", "forced"])
def test_the_shipped_transformer_against_its_own_modules(models, method):
    """Ours: the mask is the model run with the test's pre-hooks on its w_o, step by step
    (greedy, beam) and in one pass (forced); and it changes the output."""
    tr, mask = models["ours"], MASKS["ours"]
    plain = decode(tr, OURS_TEXT, DecodeSettings("greedy", max_len=10))
    s = DecodeSettings(method, width=3, n_best=1, max_len=10)
    ref = {"reference_ids": plain.target_ids} if method == "forced" else {}
    masked = decode(tr, OURS_TEXT, DecodeSettings(**{**s.__dict__, "head_mask": mask}), **ref)
    with zeroed(tr.model, mask):
        hooked = decode(tr, OURS_TEXT, s, **ref)
    assert masked.target_ids == hooked.target_ids
    torch.testing.assert_close(torch.tensor(masked.token_log_probs), torch.tensor(hooked.token_log_probs),
                               atol=1e-5, rtol=0)
    unmasked = decode(tr, OURS_TEXT, s, **ref)
    if method == "forced":
        assert max(abs(a - b) for a, b in zip(unmasked.token_log_probs, masked.token_log_probs)) > 1e-2
    else:
        assert masked.target_ids != unmasked.target_ids


@pytest.mark.parametrize("family", ["ours", *FAMILIES])
def test_each_single_head_and_a_whole_layer(models, family):
    """Every head of every kind one at a time: the mask equals the test's hook (greedy)."""
    tr = models[family]
    text = OURS_TEXT if family == "ours" else HUB_TEXT
    counts = hooks.head_counts(tr.model)
    changed = 0
    plain = decode(tr, text, DecodeSettings("greedy", max_len=8)).target_ids
    for kind, (layers, heads) in counts.items():
        for layer in range(layers):
            for head in range(heads):
                mask = ((kind, layer, head),)
                masked = decode(tr, text, DecodeSettings("greedy", max_len=8, head_mask=mask)).target_ids
                with zeroed(tr.model, mask):
                    assert masked == decode(tr, text, DecodeSettings("greedy", max_len=8)).target_ids
                changed += masked != plain
        whole = decode(tr, text, DecodeSettings("greedy", max_len=8, head_mask=f"{kind}:1.*")).target_ids
        with zeroed(tr.model, [(kind, 0, h) for h in range(heads)]):
            assert whole == decode(tr, text, DecodeSettings("greedy", max_len=8)).target_ids
    assert changed > 0


def test_masking_nothing_is_exactly_plain_decoding(models):
    """An empty mask attaches nothing; gates of 1 change no bit of the logits."""
    tr = models["marian"]
    a = decode(tr, HUB_TEXT, DecodeSettings("greedy", max_len=10))
    b = decode(tr, HUB_TEXT, DecodeSettings("greedy", max_len=10, head_mask=""))
    assert a.target_ids == b.target_ids and a.token_log_probs == b.token_log_probs
    src = torch.tensor([D.encode_source(tr, HUB_TEXT)])
    tgt_in = hooks.decoder_input(tr.model, torch.tensor(a.target_ids))
    with torch.no_grad():
        plain = hooks.forced_pass(tr.model, src, tgt_in).logits
        ones = {k: torch.ones(n) for k, n in hooks.head_counts(tr.model).items()}
        with hooks.scaled_heads(tr.model, ones):
            gated = hooks.forced_pass(tr.model, src, tgt_in).logits
    assert torch.equal(plain, gated)


def test_a_masked_decoding_walks_the_models_attention_blocks_once(models, monkeypatch):
    """knocked_out runs on every masked decoding: the mask's range check, the gates' shapes and
    the hooks all read one list of the model's attention sites, built once."""
    built = []
    sites = hooks.sites
    monkeypatch.setattr(hooks, "sites", lambda model: built.append(1) or sites(model))
    tr = models["marian"]
    with hooks.knocked_out(tr.model, hooks.parse_head_mask("cross:1.1,encoder:2.*")):
        pass
    assert len(built) == 1
    with hooks.knocked_out(tr.model, ()):       # nothing knocked out: nothing walked
        pass
    assert len(built) == 1


def test_the_mask_is_parsed_and_written_back():
    m = hooks.parse_head_mask(" cross:2.3, encoder:1.* ,cross:2.3")
    assert m == (("cross", 1, 2), ("encoder", 0, None))
    assert hooks.format_head_mask(m) == "cross:2.3,encoder:1.*"
    assert DecodeSettings(head_mask="cross:2.3,encoder:1.*") == DecodeSettings(head_mask=m)
    assert DecodeSettings(head_mask=m).canonical().head_mask == m
    assert DecodeSettings("beam", head_mask=m).canonical().head_mask == m
    assert hooks.parse_head_mask("") == ()


@pytest.mark.parametrize("text, message", [
    ("cross:2", "Cannot read the head"), ("heads:1.1", "Unknown attention kind"), ("cross:0.1", "counted from 1"),
    ("cross:1.0", "counted from 1"), ("cross:1.1,", "Cannot read the head"), ("cross:a.b", "Cannot read")])
def test_a_malformed_mask_is_refused_in_one_line(text, message):
    with pytest.raises(InputError, match=message):
        DecodeSettings(head_mask=text).checked()


def test_out_of_range_heads_and_recurrent_models_are_refused(models, untrained_translators):
    tr = models["ours"]
    with pytest.raises(InputError, match="Layer 3 is out of range: its cross-attention has layers 1 to 2"):
        decode(tr, OURS_TEXT, DecodeSettings(head_mask="cross:3.1"))
    with pytest.raises(InputError, match="Head 5 is out of range"):
        decode(tr, OURS_TEXT, DecodeSettings(head_mask="decoder:1.5"))
    with pytest.raises(InputError, match="counterfactual attention"):
        decode(untrained_translators["additive"], OURS_TEXT, DecodeSettings(head_mask="cross:1.1"))
    # a recurrent model decodes as ever without a mask
    assert decode(untrained_translators["additive"], OURS_TEXT, DecodeSettings(max_len=4)).target_ids


def test_the_batched_searches_honour_the_mask(models):
    tr = models["ours"]
    texts = [OURS_TEXT, "a b", "j i h g f e"]
    s = DecodeSettings("greedy", max_len=10, head_mask=MASKS["ours"])
    assert D.greedy_batch(tr, texts, s) == [decode(tr, t, s).translation for t in texts]
    assert D.greedy_batch(tr, texts, s) != D.greedy_batch(tr, texts, DecodeSettings("greedy", max_len=10))
    b = DecodeSettings("beam", width=3, max_len=10, head_mask=MASKS["ours"])
    assert [d.translation for d in D.beam_search_batch(tr, texts, b)] == [decode(tr, t, b).translation
                                                                         for t in texts]


@pytest.mark.parametrize("family", ["ours", *FAMILIES])
def test_masks_side_by_side_in_one_batch_decode_as_each_alone(models, family):
    """greedy_batch_masks (pruning's decoder batch, each row its own mask through
    hooks.knocked_out_rows) gives, mask by mask, what decode() gives with that mask alone; a
    copying Transformer's cross-attention masks go one at a time (its pointer reads the heads in)."""
    tr = models[family]
    texts = [OURS_TEXT, "a b", "j i h g f e"] if family == "ours" else [HUB_TEXT, "the dog ran .", "a b c"]
    masks = [(), *[(m,) for m in MASKS[family]], MASKS[family]]
    s = DecodeSettings("greedy", max_len=10)
    together = D.greedy_batch_masks(tr, texts, masks, s, rows=7)       # 2 masks (6 rows) a batch
    alone = [[decode(tr, t, DecodeSettings("greedy", max_len=10, head_mask=m)).translation for t in texts]
             for m in masks]
    assert together == alone
    assert len({tuple(h) for h in together}) > 2        # the masks decode differently


def test_a_batch_of_masks_refuses_the_pointers_heads_and_bad_masks(models, untrained_translators):
    tr = models["ours"]
    copying = untrained_translators["transformer-copy"]
    with pytest.raises(InputError, match="pointer"):
        with hooks.knocked_out_rows(copying.model, [(), (("cross", 0, 0),)]):
            pass
    masks = [(), (("cross", 0, 0),), (("encoder", 1, 1),), (("cross", 1, None),)]
    texts = [OURS_TEXT, "a b c"]
    assert D.greedy_batch_masks(copying, texts, masks, DecodeSettings(max_len=8)) == [
        [decode(copying, t, DecodeSettings(max_len=8, head_mask=m)).translation for t in texts] for m in masks]
    with pytest.raises(InputError, match="out of range"):
        D.greedy_batch_masks(tr, [OURS_TEXT], [(), (("encoder", 9, 0),)])
    with hooks.knocked_out_rows(tr.model, [(), ()]):        # no head out: nothing attached
        assert D.greedy_batch(tr, [OURS_TEXT]) == D.greedy_batch(tr, [OURS_TEXT], DecodeSettings())


def test_translate_command_masks_heads(untrained_translators, tmp_path):
    path = str(untrained_translators["transformer"].path)
    r = run_cli("s2s.translate", "--model", path, "--json", "--mask-heads", "cross:1.2,encoder:2.*", "--", OURS_TEXT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["head_mask"] == "cross:1.2,encoder:2.*"
    tr = untrained_translators["transformer"]
    assert out["translation"] == decode(tr, OURS_TEXT, DecodeSettings(head_mask="cross:1.2,encoder:2.*")).translation
    lines = tmp_path / "in.txt"
    lines.write_text(OURS_TEXT + "\n", encoding="utf-8")
    r = run_cli("s2s.translate", "--model", path, "--input", str(lines), "--mask-heads", "cross:1.2")
    assert r.returncode == 0, r.stderr
    for bad, message in [("cross:9.1", "Layer 9 is out of range"), ("cross:1", "Cannot read the head"),
                         ("self:1.1", "Unknown attention kind")]:
        for what in (["--", OURS_TEXT], ["--input", str(lines)]):
            r = run_cli("s2s.translate", "--model", path, "--mask-heads", bad, *what)
            assert r.returncode == 2 and "Traceback" not in r.stderr
            assert r.stderr.strip().count("\n") == 0 and message in r.stderr, r.stderr
    r = run_cli("s2s.translate", "--model", str(untrained_translators["additive"].path), "--mask-heads", "cross:1.1",
                "--", OURS_TEXT)
    assert r.returncode == 2 and "counterfactual attention" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------------------------------
# Importance (Michel et al. 2019) against autograd, roles on made-up weights, the commands

PAIRS = {"ours": [("c a f b d", "d b f a c"), ("j i h", "h i j")],
         "hub": [(HUB_TEXT, "le chat est assis sur le tapis ."), ("hello world !", "bonjour le monde !")]}


def autograd_importance(tr, pairs) -> dict[str, torch.Tensor]:
    """mean over pairs of |dL/dxi|, xi multiplying each head's slice of the output projection's
    input by a pre-hook written here, L the summed teacher-forced loss from the model's own forward."""
    model = tr.model
    H = n_heads(model)
    total: dict[str, torch.Tensor] = {}
    for en, fr in pairs:
        src = torch.tensor([D.encode_source(tr, en)])
        tgt = tr.tokenizer.target_ids(fr)
        tgt_in = torch.tensor([[tr.tokenizer.bos_id] + tgt[:-1]])
        xi = {k: torch.ones(len(output_projections(model, k)), H, requires_grad=True) for k in hooks.KINDS}
        handles = []
        for kind, gate in xi.items():
            for layer, proj in enumerate(output_projections(model, kind)):
                def pre(module, args, g=gate[layer]):
                    x = args[0]
                    return (x * g.repeat_interleave(x.shape[-1] // H),) + args[1:]
                handles.append(proj.register_forward_pre_hook(pre))
        try:
            if hasattr(model, "hf"):
                logits = model.hf(input_ids=src, attention_mask=torch.ones_like(src),
                                  decoder_input_ids=tgt_in).logits[0]
                if model.unwritable is not None:
                    logits = logits.index_fill(-1, model.unwritable, float("-inf"))
            else:
                logits = model(src, torch.tensor([src.size(1)]), tgt_in)[0][0]
            loss = -F.log_softmax(logits.float(), -1)[torch.arange(len(tgt)), torch.tensor(tgt)].sum()
            grads = torch.autograd.grad(loss, list(xi.values()))
        finally:
            for h in handles:
                h.remove()
        for k, g in zip(xi, grads):
            total[k] = total.get(k, 0) + g.abs() / len(pairs)
    return total


@pytest.mark.parametrize("family", ["ours", *FAMILIES])
def test_importance_equals_autograd_through_hooks_written_here(models, family):
    from s2s.head_importance import importance
    tr = models[family]
    pairs = PAIRS["ours" if family == "ours" else "hub"]
    r = importance(tr, pairs)
    expected = autograd_importance(tr, pairs)
    for k in hooks.KINDS:
        torch.testing.assert_close(torch.tensor(r.importance[k], dtype=torch.float32), expected[k], rtol=1e-4,
                                   atol=1e-6)
        assert expected[k].min() > 0 and expected[k].std() > 0      # the gates do something, and not alike
        norms = np.linalg.norm(r.normalised[k], axis=1)
        np.testing.assert_allclose(norms, 1, atol=1e-6)          # Michel's per-layer l2 normalisation
        np.testing.assert_allclose(r.normalised[k], r.importance[k] / np.linalg.norm(r.importance[k], axis=1,
                                                                                    keepdims=True), atol=1e-9)
    assert r.pairs == 2 and r.skipped == 0
    order = r.order()
    assert len(order) == sum(L * H for L, H in hooks.head_counts(tr.model).values())
    values = [r.normalised[k][l, h] for k, l, h in order]
    assert values == sorted(values)


def test_confidence_and_roles_on_weights_made_up_here():
    """The counting itself: a head whose every query looks one piece back is positional (-1); one
    that looks at </s> is a to-</s> head; one that looks at the least frequent piece is a
    rare-word head; a uniform head is none of them, with confidence 1/J."""
    from s2s.head_importance import _count_roles, _rare_keys, _RoleCounts, _tags
    src = [10, 11, 12, 13, 3]                 # 3 is </s>; 12 the rarest piece
    counts = {10: 100, 11: 50, 12: 2, 13: 70}
    J = len(src)
    w = torch.full((1, 4, J, J), 1.0 / J)
    for i in range(J):
        w[0, 0, i] = 0.0
        w[0, 0, i, max(i - 1, 0) if i else 0] = 1.0     # one back (the first query: itself)
        w[0, 1, i] = 0.0
        w[0, 1, i, J - 1] = 1.0                         # </s>
        w[0, 2, i] = 0.05
        w[0, 2, i, 2] = 1 - 0.05 * (J - 1)              # the rare piece
    c = _RoleCounts.zeros(1, 4)
    for _ in range(3):
        _count_roles(c, "encoder", w, src, 3, _rare_keys(src, counts, {3}))
    tags = _tags("encoder", c)[0]
    assert tags[0]["positional"] == {"offset": -1, "share": 0.8}     # 4 of 5 queries (the first reads itself)
    assert "positional (-1)" not in tags[0]["tags"]                   # 80% < 90%
    assert tags[1]["tags"] == ["to </s>"] and tags[1]["to_eos"]["share"] == 1.0
    assert tags[2]["tags"] == ["rare word"] and tags[2]["rare_word"] == {"share": 1.0, "chance": 0.2}
    assert tags[3]["tags"] == [] and tags[3]["rare_word"]["share"] == 0.0        # uniform: argmax is key 0
    conf = (c.confidence / c.queries).numpy()[0]
    assert conf[1] == pytest.approx(0.0)                               # all its weight on </s>, excluded
    assert conf[3] == pytest.approx(1 / J)
    # 9 of 10 queries one back: positional
    w10 = torch.zeros(1, 1, 10, 10)
    for i in range(10):
        w10[0, 0, i, max(i - 1, 0)] = 1.0
    c = _RoleCounts.zeros(1, 1)
    _count_roles(c, "decoder", w10, list(range(10)), 3, None)
    assert _tags("decoder", c)[0][0]["tags"] == ["positional (-1)"]


def write_pairs(path, pairs):
    path.write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    return path


def test_importance_and_prune_commands(untrained_translators, tmp_path):
    path = str(untrained_translators["transformer"].path)
    tsv = write_pairs(tmp_path / "pairs.tsv", PAIRS["ours"] + [("a b c d e", "e d c b a"), ("f g", "g f")])
    r = run_cli("s2s.heads", "importance", "--model", path, "--pairs", str(tsv), "--limit", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["pairs"] == 3 and set(out["importance"]) == set(hooks.KINDS)
    assert np.array(out["importance"]["cross"]).shape == (2, 4)
    assert np.array(out["importance_normalised"]["encoder"]).shape == (2, 4)
    assert set(out["roles"]["encoder"][0][0]) >= {"tags", "positional", "to_eos", "rare_word"}
    # an untrained checkpoint has no metrics.json naming its corpus: the pairs themselves are counted
    assert out["frequency_source"] == "the scored pairs themselves (no training corpus on this machine)"
    r = run_cli("s2s.heads", "prune", "--model", path, "--pairs", str(tsv), "--steps", "2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {(c["scope"], c["order"]) for c in out["curves"]} == {(s, o) for s in ("all", *hooks.KINDS)
                                                                 for o in ("importance", "random")}
    for c in out["curves"]:
        assert [p["heads"] for p in c["points"]] == [0, round(c["of"] * 0.1), round(c["of"] * 0.2)]
        assert c["points"][0]["bleu"] == out["bleu"]
    allc = next(c for c in out["curves"] if c["scope"] == "all" and c["order"] == "importance")
    assert allc["of"] == 24 and len(allc["pruned_order"]) == 24


@pytest.mark.parametrize("family, scope", [("ours", "cross"), ("ours", "encoder"), ("marian", "all")])
def test_the_pruning_curve_is_greedy_bleu_under_the_masks(untrained_translators, models, family, scope):
    """Every point recomputed by hand: greedy decoding with the first n heads of the order knocked
    out, one sentence at a time, scored by sacrebleu (the curve decodes several masks side by side
    in one batch, except a copying model's cross-attention masks)."""
    from s2s.evaluate import bleu
    from s2s.head_importance import importance, prune_curves
    tr = untrained_translators["transformer"] if family == "ours" else models[family]
    pairs = (PAIRS["ours"] + [("a b c d e", "e d c b a")]) if family == "ours" else PAIRS["hub"]
    ranked = importance(tr, pairs)
    out = prune_curves(tr, pairs, ranked, steps=3, scopes=[scope])
    for curve in out["curves"]:
        for point in curve["points"]:
            n = point["heads"]
            mask = hooks.parse_head_mask(",".join(curve["pruned_order"][:n])) if n else ()
            hyps = [decode(tr, en, DecodeSettings("greedy", head_mask=mask)).translation for en, _ in pairs]
            assert point["bleu"] == round(bleu(hyps, [fr for _, fr in pairs]), 2)
    curve = next(c for c in out["curves"] if c["order"] == "importance")
    n = curve["points"][-1]["heads"]
    assert set([h for h in ranked.order() if scope in ("all", h[0])][:n]) == set(
        hooks.parse_head_mask(",".join(curve["pruned_order"][:n]))) and n > 0


@pytest.mark.parametrize("args, message", [
    (["--pairs", "MISSING"], "No pairs file"), (["--pairs", "EMPTY"], "holds no English"),
    (["--pairs", "GOOD", "--limit", "0"], "--limit must be at least 1"),
    (["--pairs", "GOOD", "--model", "RECURRENT"], "counterfactual attention"),
    (["--pairs", "GOOD", "--steps", "0"], "--steps")])
def test_the_ranking_commands_refuse_bad_input_in_one_line(untrained_translators, tmp_path, args, message):
    good = write_pairs(tmp_path / "good.tsv", PAIRS["ours"])
    (tmp_path / "empty.tsv").write_text("no tab here\n", encoding="utf-8")
    files = {"MISSING": str(tmp_path / "missing.tsv"), "EMPTY": str(tmp_path / "empty.tsv"), "GOOD": str(good),
             "RECURRENT": str(untrained_translators["additive"].path)}
    args = [files.get(a, a) for a in args]
    model = [] if "--model" in args else ["--model", str(untrained_translators["transformer"].path)]
    command = "prune" if "--steps" in args else "importance"
    r = run_cli("s2s.heads", command, *model, *args, "--json")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr


def test_bench_times_knockout_importance_and_pruning(untrained_translators, tmp_path):
    """s2s.bench's mask_vs_greedy, importance_s and prune_s (their keys and that they ran), and
    heads_declined without a held-out file."""
    from s2s.bench import heads_timing
    tr = untrained_translators["transformer"]
    held_out = write_pairs(tmp_path / "held_out.tsv", PAIRS["ours"] + [("a b c d e", "e d c b a")])
    out = heads_timing(tr, 3, held_out, prune_pairs=3)
    assert out["mask_ms"] > 0 and out["mask_vs_greedy"] > 0
    assert out["importance_s"] > 0 and out["importance_frequencies_s"] >= 0
    assert out["prune_s"] > 0 and out["prune_pairs"] == 3
    out = heads_timing(tr, 1, tmp_path / "missing.tsv", prune_pairs=3)
    assert "no held-out pairs" in out["heads_declined"] and "importance_s" not in out
    assert heads_timing(tr, 1, None, prune_pairs=3)["heads_declined"] == "no held-out pairs given (--held-out)"


def test_one_cut_of_a_heads_slice():
    """hooks.per_head: head h of an attention output (B, T, H * d_h) at [..., h, :], equal to the
    slice [h * d_h:(h + 1) * d_h], and a view (the patch writes a clean head through it)."""
    x = torch.randn(2, 3, 4 * 5)
    seen = hooks.per_head(x, 4)
    assert seen.shape == (2, 3, 4, 5)
    for h in range(4):
        assert torch.equal(seen[..., h, :], x[..., h * 5:(h + 1) * 5])
    seen[1, :, 2, :] = 0.0
    assert torch.all(x[1, :, 10:15] == 0) and torch.all(x[0, :, 10:15] != 0)
