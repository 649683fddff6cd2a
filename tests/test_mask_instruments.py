"""The lens and the contrast of a knocked-out model (head_mask, --mask-heads: s2s.hooks.knocked_out),
held against an independent construction written here: the same instrument on a copy of the
model whose knocked-out heads' columns of W_O (their slice of its input) are zeroed in the
weights, found by the modules' own names. A tiny hub Marian (tests/hub_models.py, random biases,
sharpened attention so that a head weighs) and the shipped Transformer, on heads its pointer
does not read (the lens reads each layer's pointer from that layer's heads: no cross-attention
head for it; the contrast reads the last layer's). Every comparison also asserts that the mask
changed something."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from biased_models import randomise, shipped

from s2s.checkpoint import load_translator
from s2s.contrast import explain_contrast, step_attribution
from s2s.hooks import parse_head_mask
from s2s.lens import lens, watched

HUB_TEXT = "the cat sat on the mat ."
EN_FR_TEXT = "The little girl is happy because her mother is here."
LENS_MASKS = {"marian": "cross:1.2,encoder:1.3,decoder:2.1", "shipped": "encoder:2.4,decoder:1.2,decoder:3.1"}
CONTRAST_MASKS = {"marian": "cross:2.2,encoder:1.3", "shipped": "cross:2.*,encoder:2.4"}
# the Marian in float64 (an untrained model's near-uniform outputs move little: float32 would blur
# them), the shipped one in its own float32
TOL = {"marian": 1e-7, "shipped": 1e-4}


def sharp_hub(path, seed: int):
    """A hub model in float64, randomised, its attention peaked so that its output weighs in the
    residual stream (q, k, v and output projections x 4)."""
    tr = load_translator(path, device="cpu")
    tr.model.to(torch.float64)
    randomise(tr.model, seed)
    with torch.no_grad():
        for name, m in tr.model.named_modules():
            if isinstance(m, torch.nn.Linear) and name.split(".")[-1] in ("q_proj", "k_proj", "v_proj", "out_proj",
                                                                          "q", "k", "v", "o"):
                m.weight.mul_(4.0)
    tr.model.eval()
    return tr


@pytest.fixture(scope="module")
def models(hub_models):
    return {"marian": sharp_hub(hub_models["marian"], 3), "shipped": shipped()}


@pytest.fixture(scope="module")
def more_hub(hub_models):
    """T5 and M2M100, as the Marian is made."""
    return {name: sharp_hub(hub_models[name], 4 + i) for i, name in enumerate(("t5", "m2m100"))}


def output_projection(model, kind: str, layer: int) -> torch.nn.Linear:
    """A layer's W_O of one kind, by the modules' own names (not through s2s.hooks)."""
    if hasattr(model, "hf") and model.hf.config.model_type == "t5":
        blocks = model.hf.encoder.block if kind == "encoder" else model.hf.decoder.block
        return blocks[layer].layer[1].EncDecAttention.o if kind == "cross" else blocks[layer].layer[0].SelfAttention.o
    if hasattr(model, "hf"):
        m = model.hf.model
        layers = m.encoder.layers if kind == "encoder" else m.decoder.layers
        return layers[layer].encoder_attn.out_proj if kind == "cross" else layers[layer].self_attn.out_proj
    layers = model.encoder if kind == "encoder" else model.decoder
    return layers[layer].cross_attn.w_o if kind == "cross" else layers[layer].self_attn.w_o


def heads_of(model) -> tuple[int, int]:
    """(layers, heads) of every kind (the same in these models)."""
    if hasattr(model, "hf"):
        c = model.hf.config
        return (c.num_decoder_layers, c.num_heads) if c.model_type == "t5" else (c.decoder_layers,
                                                                                  c.decoder_attention_heads)
    return model.cfg.decoder_layers, model.cfg.heads


def zeroed_copy(tr, mask: str):
    """A copy of the translator whose knocked-out heads' W_O input columns are 0."""
    out = copy.deepcopy(tr)
    _, H = heads_of(out.model)
    with torch.no_grad():
        for kind, layer, head in parse_head_mask(mask):
            w = output_projection(out.model, kind, layer).weight
            d_k = w.shape[1] // H
            for h in range(H) if head is None else [head]:
                w[:, h * d_k:(h + 1) * d_k] = 0
    return out


def text_of(name: str) -> str:
    return EN_FR_TEXT if name == "shipped" else HUB_TEXT


@pytest.mark.parametrize("name", ["marian", "shipped"])
def test_the_lens_of_a_knocked_out_model_is_the_lens_of_the_zeroed_copy(models, name):
    tr, mask, tol = models[name], LENS_MASKS[name], TOL[name]
    masked = lens(tr, text_of(name), head_mask=mask)
    reference = lens(zeroed_copy(tr, mask), text_of(name))
    assert masked.target_ids == reference.target_ids          # the greedy output read is the knocked-out model's
    np.testing.assert_allclose(masked.log_probs, reference.log_probs, atol=tol, rtol=0)
    assert masked.ranks == reference.ranks
    assert masked.head_mask == mask and masked.to_json()["head_mask"] == mask
    plain = lens(tr, text_of(name), target=masked.target_ids)
    assert "head_mask" not in plain.to_json()
    assert np.abs(np.array(plain.log_probs) - np.array(masked.log_probs)).max() > 1e-3
    # another piece watched, under the same mask
    piece = next(i for i in range(5, 50) if i not in masked.target_ids[:2])
    got = watched(tr, text_of(name), masked.target_ids, 1, piece, head_mask=mask)
    want = watched(zeroed_copy(tr, mask), text_of(name), masked.target_ids, 1, piece)
    np.testing.assert_allclose([v for v, _ in got], [v for v, _ in want], atol=tol, rtol=0)
    assert [r for _, r in got] == [r for _, r in want]


@pytest.mark.parametrize("name", ["marian", "shipped"])
@pytest.mark.parametrize("method", ["grad-x-input", "loo"])
def test_the_contrast_of_a_knocked_out_model_is_the_contrast_of_the_zeroed_copy(models, name, method):
    tr, mask, tol = models[name], CONTRAST_MASKS[name], TOL[name]
    zeroed = zeroed_copy(tr, mask)
    output = lens(zeroed, text_of(name)).target_ids               # the zeroed copy's greedy output
    foil = tr.tokenizer.piece(next(i for i in range(5, 50) if i != output[1]))
    masked = explain_contrast(tr, text_of(name), 2, foil, method=method, head_mask=mask)
    reference = explain_contrast(zeroed, text_of(name), 2, foil, method=method)
    assert masked.target_tokens == reference.target_tokens == tr.tokenizer.pieces(output)
    np.testing.assert_allclose(masked.scores, reference.scores, atol=tol, rtol=0)
    assert masked.log_prob_target == pytest.approx(reference.log_prob_target, abs=tol)
    assert masked.log_prob_foil == pytest.approx(reference.log_prob_foil, abs=tol)
    assert masked.to_json()["head_mask"] == mask
    plain = explain_contrast(tr, text_of(name), 2, foil, method=method, target=output)
    assert np.abs(plain.scores - masked.scores).max() > 0.05 * np.abs(masked.scores).max() > 0
    assert "head_mask" not in plain.to_json()
    scores, _ = step_attribution(tr, text_of(name), 2, method=method, target=output, head_mask=mask)
    want, _ = step_attribution(zeroed, text_of(name), 2, method=method, target=output)
    np.testing.assert_allclose(scores, want, atol=tol, rtol=0)


@pytest.mark.parametrize("name", ["marian", "shipped"])
def test_the_neuron_view_of_a_knocked_out_model_is_the_zeroed_copys(models, name):
    """A cross-attention head downstream of the knocked-out ones: its keys read the encoder's
    output, which the encoder's knocked-out head no longer feeds."""
    from s2s.heads import neuron_view
    tr, mask, tol = models[name], LENS_MASKS[name], TOL[name]
    layer = heads_of(tr.model)[0] - 1
    masked = neuron_view(tr, text_of(name), "cross", layer, 1, 1, head_mask=mask)
    reference = neuron_view(zeroed_copy(tr, mask), text_of(name), "cross", layer, 1, 1)
    assert masked.target_tokens == reference.target_tokens and masked.head_mask == mask
    for field in ("query", "keys", "scores", "weights"):
        np.testing.assert_allclose(getattr(masked, field), getattr(reference, field), atol=tol, rtol=0)
    plain = neuron_view(tr, text_of(name), "cross", layer, 1, 1)     # the keys: the source's alone
    assert "head_mask" not in plain.to_json() and masked.to_json()["head_mask"] == mask
    assert np.abs(np.asarray(plain.keys) - np.asarray(masked.keys)).max() > 1e-4


@pytest.mark.parametrize("name", ["marian", "shipped"])
def test_the_contributions_of_a_knocked_out_model_are_the_zeroed_copys(models, name):
    """Norm, ALTI+ (with its source share), rollout and value zeroing, each layer's and each
    head's: a knocked-out head moves nothing, as in the copy whose W_O columns of it are 0."""
    from s2s.contributions import explain_contributions
    tr, mask, tol = models[name], LENS_MASKS[name], TOL[name]
    masked = explain_contributions(tr, text_of(name), head_mask=mask)
    reference = explain_contributions(zeroed_copy(tr, mask), text_of(name))
    assert masked.target_tokens == reference.target_tokens and masked.head_mask == mask
    assert masked.to_json()["head_mask"] == mask and set(masked.layers) == set(reference.layers) >= {
        "norm", "alti", "value_zeroing"}
    for m in masked.layers:
        np.testing.assert_allclose(masked.layers[m], reference.layers[m], atol=max(tol, 1e-5), rtol=0, err_msg=m)
    for m in masked.heads:
        np.testing.assert_allclose(masked.heads[m], reference.heads[m], atol=max(tol, 1e-5), rtol=0, err_msg=m)
    for m in masked.source_share:
        np.testing.assert_allclose(masked.source_share[m], reference.source_share[m], atol=max(tol, 1e-5), rtol=0)
    # the whole model on the same output: a knocked-out cross-attention head's norm is 0 only under the
    # mask, and ALTI+ moves
    from s2s.attributions import source_ids
    from s2s.contributions import contributions
    src = torch.tensor([source_ids(tr, text_of(name))])
    tgt = torch.tensor(masked.target_ids)
    layers, heads, _, _ = contributions(tr.model, src, tgt, ["norm", "alti"])
    assert "head_mask" not in explain_contributions(tr, text_of(name), methods=["norm"]).to_json()
    for kind, layer, head in parse_head_mask(mask):
        if kind == "cross":
            assert np.abs(masked.heads["norm"][layer, head]).max() == 0 < np.abs(heads["norm"][layer, head]).max()
    assert np.abs(layers["alti"] - masked.layers["alti"]).max() > 1e-4


# the patch: one word swapped for one of as many pieces; on the shipped model, heads its pointer
# (the last layer's cross-attention) does not read
PATCH_MASKS = {"marian": "cross:2.2,encoder:1.3,decoder:1.1", "t5": "cross:2.2,encoder:1.3,decoder:1.1",
               "m2m100": "cross:2.2,encoder:1.3,decoder:1.1", "shipped": "cross:2.*,encoder:2.4,decoder:1.2"}


def an_edit(tr, text: str) -> str:
    """`text` with one word swapped for another of as many source pieces (patching needs as many)."""
    from s2s.attributions import source_ids
    words, n = text.split(), len(source_ids(tr, text))
    for i in range(len(words)):
        for other in ("dog", "boy", "man", "hat", "mat", "sun", "cat", "red", "big", "the", "sad"):
            edit = " ".join(words[:i] + [other] + words[i + 1:])
            if edit != text and len(source_ids(tr, edit)) == n:
                return edit
    raise AssertionError(f"no edit of {text!r} keeps its {n} pieces")


@pytest.mark.parametrize("name", ["marian", "t5", "m2m100", "shipped"])
def test_the_patch_of_a_knocked_out_model_is_the_patch_of_the_zeroed_copy(models, more_hub, name):
    from s2s.patch import patch
    tr, mask = {**models, **more_hub}[name], PATCH_MASKS[name]
    tol = TOL.get(name, TOL["marian"])
    text = text_of(name) if name == "shipped" else "the cat sat on the mat ."
    edit = "The little boy is happy because her mother is here." if name == "shipped" else an_edit(tr, text)
    zeroed = zeroed_copy(tr, mask)
    masked = patch(tr, text, edit, head_mask=mask)
    reference = patch(zeroed, text, edit)
    assert masked.target_tokens == reference.target_tokens       # the greedy output forced: the knocked-out one's
    assert masked.clean_log_prob == pytest.approx(reference.clean_log_prob, abs=tol)
    assert masked.corrupt_log_prob == pytest.approx(reference.corrupt_log_prob, abs=tol)
    np.testing.assert_allclose(masked.patched, reference.patched, atol=tol, rtol=0)
    np.testing.assert_allclose(masked.patched_heads, reference.patched_heads, atol=tol, rtol=0)
    assert masked.to_json()["head_mask"] == mask
    # a knocked-out cross-attention head, patched, restores nothing: it carries nothing
    layer, head = next((l, h) for k, l, h in parse_head_mask(mask) if k == "cross")
    for h in range(heads_of(tr.model)[1]) if head is None else [head]:
        assert masked.patched_heads[layer][h] == pytest.approx(masked.corrupt_log_prob, abs=tol)
    # and the mask changed something: the plain model on the same output differs
    from s2s.decode import DecodeSettings, decode
    output = decode(tr, text, DecodeSettings("greedy", head_mask=mask)).target_ids
    assert tr.tokenizer.pieces(list(output)) == masked.target_tokens
    plain = patch(tr, text, edit, output_ids=output)
    assert "head_mask" not in plain.to_json()
    assert abs(plain.clean_log_prob - masked.clean_log_prob) > 1e-6 or \
        np.abs(np.array(plain.patched) - np.array(masked.patched)).max() > 1e-6


@pytest.mark.parametrize("name", ["marian", "shipped"])
def test_attention_against_attributions_of_a_knocked_out_model_is_the_zeroed_copys(models, name):
    """s2s.explain's comparison (explain: the greedy output, its attention, gradient x input and
    leave-one-out) with head_mask, against the same on the zeroed copy; and the summary over pairs
    (summarize, --test) likewise."""
    from s2s.attributions import explain
    from s2s.explain import summarize
    tr, mask, tol = models[name], CONTRAST_MASKS[name], TOL[name]
    zeroed = zeroed_copy(tr, mask)
    methods = ("grad_x_input", "leave_one_out")
    masked = explain(tr, text_of(name), methods=methods, head_mask=mask)
    reference = explain(zeroed, text_of(name), methods=methods)
    assert masked.target_tokens == reference.target_tokens
    np.testing.assert_allclose(masked.attention, reference.attention, atol=tol, rtol=0)
    np.testing.assert_allclose(masked.token_log_probs, reference.token_log_probs, atol=tol, rtol=0)
    for m in methods:
        np.testing.assert_allclose(masked.attributions[m], reference.attributions[m], atol=10 * tol, rtol=0)
    assert masked.to_json()["head_mask"] == mask
    plain = explain(tr, text_of(name), methods=methods)
    assert "head_mask" not in plain.to_json()
    assert (plain.target_tokens != masked.target_tokens        # the mask changed what is explained
            or np.abs(np.array(plain.token_log_probs) - np.array(masked.token_log_probs)).max() > 1e-3)
    pairs = [(text_of(name), masked.translation), (text_of(name).replace(".", "!"), masked.translation)]
    got, want = summarize(tr, pairs, ig_steps=4, head_mask=mask), summarize(zeroed, pairs, ig_steps=4)
    assert got.pop("head_mask") == mask and "head_mask" not in want
    assert got["steps"] == want["steps"] and got["sentences"] == want["sentences"] == 2
    assert got["argmax_agreement"] == pytest.approx(want["argmax_agreement"], abs=1e-3)
    for m, quantiles in want["kendall_tau"].items():
        assert got["kendall_tau"][m] == pytest.approx(quantiles, abs=1e-3), m


def test_the_test_summary_command_takes_mask_heads(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("The girl is happy.\tLa fille est heureuse.\nThe boy is here.\tLe garçon est ici.\n",
                     encoding="utf-8")
    r = run_cli("s2s.explain", "--model", "en-fr-transformer", "--test", str(pairs), "--ig-steps", "4",
                "--mask-heads", "encoder:2.4", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["head_mask"] == "encoder:2.4" and out["sentences"] == 2
    plain = json.loads(run_cli("s2s.explain", "--model", "en-fr-transformer", "--test", str(pairs), "--ig-steps", "4",
                               "--json").stdout)
    assert "head_mask" not in plain and plain["kendall_tau"] != out["kendall_tau"]


def run_cli(*args):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


def test_the_commands_take_mask_heads(models):
    tr = models["shipped"]
    mask = LENS_MASKS["shipped"]
    r = run_cli("s2s.lens", "--model", "en-fr-transformer", "--mask-heads", mask, "--json", "--", EN_FR_TEXT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["head_mask"] == mask
    np.testing.assert_allclose(out["log_probs"], lens(tr, EN_FR_TEXT, head_mask=mask).log_probs, atol=1e-5)
    mask = CONTRAST_MASKS["shipped"]
    r = run_cli("s2s.explain", "--model", "en-fr-transformer", "--contrast-step", "2", "--foil", "▁garçon",
                "--mask-heads", mask, "--json", "--", EN_FR_TEXT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    want = explain_contrast(tr, EN_FR_TEXT, 2, "▁garçon", head_mask=mask)
    assert out["head_mask"] == mask and out["target_tokens"] == want.target_tokens
    np.testing.assert_allclose(out["scores"], want.scores, atol=1e-5)
    mask = LENS_MASKS["shipped"]
    r = run_cli("s2s.explain", "--model", "en-fr-transformer", "--method", "norm", "--method", "grad-x-input",
                "--mask-heads", mask, "--json", "--", EN_FR_TEXT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    from s2s.attributions import grad_x_input, source_ids
    from s2s.contributions import explain_contributions
    from s2s.hooks import knocked_out
    want = explain_contributions(tr, EN_FR_TEXT, methods=["norm"], head_mask=mask)
    assert out["head_mask"] == mask and out["target_tokens"] == want.target_tokens
    norms = [m["matrix"] for m in out["matrices"] if m["method"] == "norm"]
    np.testing.assert_allclose(norms, want.layers["norm"], atol=1e-5)
    with knocked_out(tr.model, mask):
        gxi = grad_x_input(tr.model, torch.tensor([source_ids(tr, EN_FR_TEXT)]), torch.tensor(want.target_ids))
    np.testing.assert_allclose([m["matrix"] for m in out["matrices"] if m["method"] == "grad-x-input"][0], gxi,
                               atol=1e-4)
    mask = PATCH_MASKS["shipped"]
    edit = "The little boy is happy because her mother is here."
    r = run_cli("s2s.patch", "--model", "en-fr-transformer", "--edited", edit, "--mask-heads", mask, "--json", "--",
                EN_FR_TEXT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    from s2s.patch import patch
    want = patch(tr, EN_FR_TEXT, edit, head_mask=mask)
    assert out["head_mask"] == mask and out["target_tokens"] == want.target_tokens
    np.testing.assert_allclose(out["patched"], want.patched, atol=1e-4)


@pytest.mark.parametrize("command", [
    ["s2s.lens", "--mask-heads", "cross:4.1"], ["s2s.lens", "--mask-heads", "cross:1"],
    ["s2s.explain", "--contrast-step", "2", "--foil", "▁garçon", "--mask-heads", "decoder:1.5"],
    ["s2s.explain", "--contrast-step", "2", "--foil", "▁garçon", "--mask-heads", "self:1.1"],
    ["s2s.explain", "--mask-heads", "cross:1.9"],
    ["s2s.explain", "--counterfactual", "2", "--mask-heads", "cross:1.1"],
    ["s2s.heads", "--mask-heads", "encoder:1.9"],
    ["s2s.explain", "--method", "norm", "--mask-heads", "cross:1.9"],
    ["s2s.patch", "--edited", "The little boy is happy because her mother is here.", "--mask-heads", "cross:1.9"],
    ["s2s.patch", "--edited", "The little boy is happy because her mother is here.", "--mask-heads", "x"]])
def test_a_bad_mask_is_one_line_and_nothing_is_computed(command):
    r = run_cli(*command[:1], "--model", "en-fr-transformer", *command[1:], "--json", "--", EN_FR_TEXT)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert any(m in r.stderr for m in ("out of range", "Cannot read the head", "Unknown attention kind",
                                        "not with --counterfactual")), r.stderr


def test_a_recurrent_model_is_told_its_knockout(untrained_translators):
    from s2s.text import InputError
    with pytest.raises(InputError, match="counterfactual attention"):
        lens(untrained_translators["additive"], "a b c", head_mask="cross:1.1")
    with pytest.raises(InputError, match="counterfactual attention"):
        explain_contrast(untrained_translators["additive"], "a b c", 1, "a", head_mask="cross:1.1")
