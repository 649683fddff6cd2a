"""The neuron view (s2s/heads.py): one head's query, keys, products, scores and weights, held
to the model's own attention row (as s2s.decode reports it) for every family and every kind of
attention: the shipped Transformer's code, tiny Marian, T5 and M2M100 built offline (random
nonzero biases on every projection), and a tiny recurrent model per scoring function."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from s2s import heads
from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, decode

TEXT = "the cat sat on the mat ."
TOL = 1e-5


def _random_biases(tr, seed: int):
    """Every Linear's bias drawn at random (Hugging Face models start with zeros): the view must
    carry b_Q and b_K into q and k."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in tr.model.modules():
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.5)
    return tr


@pytest.fixture(scope="module")
def transformers_(untrained_translators, hub_models):
    """Fresh copies (biases changed here must not reach the session's shared models)."""
    out = {"ours": _random_biases(load_translator(untrained_translators["transformer"].path), 1)}
    for i, (name, path) in enumerate(hub_models.items()):
        # float32 on the CPU: on a GPU a hub model loads in bf16, and the view (float64 from its q and
        # k) then agrees with the model's own bf16 row to 2.7e-4, not 1e-5 (an H200, 2026-11-28)
        out[name] = _random_biases(load_translator(path, device="cpu"), 2 + i)
    return out


@pytest.fixture(scope="module")
def recurrent_(untrained_translators):
    return {name: untrained_translators[name] for name in ("dot", "general", "additive", "scaled-dot", "copy")}


def _greedy(tr):
    return decode(tr, TEXT, DecodeSettings("greedy", max_len=8))


KIND_OF = {"cross": "cross_attention", "encoder": "encoder_self_attention", "decoder": "decoder_self_attention"}


@pytest.mark.parametrize("which", ["ours", "marian", "t5", "m2m100"])
@pytest.mark.parametrize("kind", ["cross", "encoder", "decoder"])
def test_the_weights_are_the_models_own_attention_row(transformers_, which, kind):
    """Every layer, head and query: softmax of the reported scores is the row s2s.decode reports
    (the incremental decoding's, not the forced pass the view reads), to 1e-5."""
    tr = transformers_[which]
    d = _greedy(tr)
    w = getattr(d, KIND_OF[kind])                       # (layers, heads, rows, cols)
    L, H, rows, _ = w.shape
    for layer in range(L):
        for head in range(H):
            for i in range(rows):
                v = heads.neuron_view(tr, TEXT, kind, layer, head, i, target_ids=d.target_ids)
                J = i + 1 if kind == "decoder" else w.shape[-1]
                assert len(v.weights) == len(v.key_tokens) == J
                np.testing.assert_allclose(v.weights, w[layer, head, i, :J], atol=TOL, err_msg=f"{which} {kind}")
                if kind == "decoder":       # causal: what the view leaves out had weight 0
                    assert np.abs(w[layer, head, i, J:]).max(initial=0) == 0


@pytest.mark.parametrize("which", ["ours", "marian", "t5", "m2m100"])
def test_the_steps_add_up(transformers_, which):
    """q·k_j is the sum of the products q ∘ k_j; the scores are scale × q·k_j + bias; the
    weights their softmax; the products are the query times each key."""
    tr = transformers_[which]
    for kind in heads.KINDS:
        v = heads.neuron_view(tr, TEXT, kind, 1, 2, 1)
        np.testing.assert_allclose(v.dots, v.products.sum(-1), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(v.products, v.query[None] * v.keys, rtol=1e-12)
        np.testing.assert_allclose(v.scores, v.scale * v.dots + (0 if v.bias is None else v.bias), rtol=1e-12)
        np.testing.assert_allclose(v.weights, np.exp(v.scores) / np.exp(v.scores).sum(), rtol=1e-9)
        assert v.keys.shape == v.products.shape == (len(v.key_tokens), len(v.query))


def test_each_family_scales_and_biases_as_it_does(transformers_):
    """Ours and the BART family divide by √d_k; T5 does not, and adds its relative position bias
    in self-attention only."""
    for which in ("ours", "marian", "m2m100"):
        v = heads.neuron_view(transformers_[which], TEXT, "encoder", 0, 0, 0)
        assert v.scale == pytest.approx(1 / np.sqrt(len(v.query))) and v.bias is None
    t5 = transformers_["t5"]
    for kind in ("encoder", "decoder"):
        v = heads.neuron_view(t5, TEXT, kind, 1, 0, 1)
        assert v.scale == 1 and v.bias is not None and np.abs(v.bias).max() > 0
        assert "position bias" in v.labels["bias_name"] and any("√d_k" in n for n in v.notes)
    assert heads.neuron_view(t5, TEXT, "cross", 0, 0, 0).bias is None


@pytest.mark.parametrize("score", ["dot", "general", "additive", "scaled-dot", "copy"])
def test_a_recurrent_models_view_is_its_scoring_function(recurrent_, score):
    """Each output step's weights are Decoding.attention's row; the parts are the formula's."""
    tr = recurrent_[score]
    d = _greedy(tr)
    for t in range(len(d.target_ids)):
        v = heads.neuron_view(tr, TEXT, "cross", 0, 0, t, target_ids=d.target_ids)
        np.testing.assert_allclose(v.weights, d.attention[t], atol=TOL, err_msg=f"{score} step {t}")
        np.testing.assert_allclose(v.dots, v.products.sum(-1), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(v.scores, v.scale * v.dots + (0 if v.bias is None else v.bias), rtol=1e-12)
    scorer = tr.model.scorer
    if score in ("additive", "copy"):
        assert v.hidden is not None and v.v is not None
        np.testing.assert_allclose(v.hidden, np.tanh(v.keys + v.query[None]), rtol=1e-12)
        np.testing.assert_allclose(v.products, v.v[None] * v.hidden, rtol=1e-12)
        assert np.abs(scorer.W2.bias.detach().numpy()).min() > 0       # the bias b is in the query
    else:
        np.testing.assert_allclose(v.products, v.query[None] * v.keys, rtol=1e-12)
    assert (v.scale != 1) == (score == "scaled-dot")
    assert (v.bias is not None) == (score == "copy")           # the copying model's location cue


def test_the_command_writes_every_part(transformers_, hub_models, capsys):
    rc = heads.main(["--model", str(hub_models["marian"]), "--kind", "decoder", "--layer", "2", "--head", "3",
                     "--query", "2", "--json", TEXT])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("query_token", "key_tokens", "query", "keys", "products", "scores", "weights"):
        assert key in out
    assert (out["layer"], out["head"], out["query_position"], out["kind"]) == (2, 3, 2, "decoder")
    assert len(out["key_tokens"]) == len(out["keys"]) == len(out["products"]) == len(out["weights"]) == 2
    assert len(out["query"]) == len(out["keys"][0]) == 8          # d_model 32 over 4 heads
    np.testing.assert_allclose(np.array(out["products"]).sum(-1), out["dots"], atol=1e-5)
    assert abs(sum(out["weights"]) - 1) < 1e-5


def test_the_command_reads_a_reference_and_prints_a_table(untrained_translators, capsys):
    path = str(untrained_translators["transformer"].path)
    assert heads.main(["--model", path, "--query", "1", "--reference", "ab", TEXT]) == 0
    text = capsys.readouterr().out
    assert "softmax" in text and "weight" in text
    assert heads.main(["--model", path, "--reference", "ab", "--json", TEXT]) == 0
    assert json.loads(capsys.readouterr().out)["forced_from"] == "reference"


def _run(args: list[str]) -> int:
    """heads.main's exit status, argparse's own errors (SystemExit) included."""
    try:
        return heads.main(args)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("args, says", [
    (["--query", "99"], "Query 99 is out of range"),
    (["--query", "0"], "Query 0 is out of range"),
    (["--layer", "3"], "Layer 3 is out of range"),
    (["--kind", "encoder", "--layer", "0"], "Layer 0 is out of range"),
    (["--head", "5"], "Head 5 is out of range"),
    (["--kind", "sideways"], "invalid choice"),
    (["--layer", "two"], "invalid int value"),
])
def test_bad_input_is_one_line(untrained_translators, capsys, args, says):
    rc = _run(["--model", str(untrained_translators["transformer"].path), *args, TEXT])
    err = capsys.readouterr().err
    assert rc == 2 and says in err and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def test_bad_input_for_a_recurrent_model_or_no_text(untrained_translators, capsys):
    dot = str(untrained_translators["dot"].path)
    for args, says in ((["--kind", "encoder"], "recurrent model"), (["--layer", "2"], "Layer 2 is out of range"),
                       (["--query", "999"], "Output step 999 is out of range"), ([], "empty")):
        assert _run(["--model", dot, *args, TEXT if args else "   "]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert _run(["--model", str(untrained_translators["none"].path), TEXT]) == 2
    assert "no attention" in capsys.readouterr().err
