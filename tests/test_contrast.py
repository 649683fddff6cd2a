"""Contrastive attribution (s2s.contrast, python -m s2s.explain --contrast-step T --foil PIECE)
against autograd on transformers' own forward (and on our models' own modules), written here:
D = log p(y_T) - log p(foil) at step T with the same prefix forced; grad x input is
(dD/de_i) . e_i, e the token embeddings before positions; leave-one-out D(x) - D(x_i -> <unk>);
integrated gradients against a 64-point Gauss-Legendre integral of this file's own, and complete.
Tiny models with random nonzero biases and norms (tests/biased_models.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from biased_models import HUB, biased, shipped

from s2s.attributions import source_ids, target_ids
from s2s.contrast import explain_contrast, foil_id, grad_x_input, integrated_gradients, leave_one_out
from s2s.explain import main
from s2s.hooks import decoder_input
from s2s.text import InputError

TEXT = "the cat sat on the mat ."
FR = "le chat est assis sur le tapis ."
REVERSAL = "a c f b"
GIRL = "The little girl is happy because her mother is here."


@pytest.fixture(scope="module")
def models(untrained_translators, hub_models):
    return biased(untrained_translators, hub_models, torch.float64) | {"shipped": shipped(torch.float64)}


def setup(tr, step=2):
    text, ref = (TEXT, FR) if hasattr(tr.model, "hf") else (REVERSAL, "b f c a")
    src = torch.tensor([source_ids(tr, text)])
    tgt = torch.tensor(target_ids(tr, text, ref)[0])
    foil = int(next(t for t in tgt.tolist() if t != int(tgt[step])))
    return src, tgt, step, foil


def difference(tr, x, src_ids, tgt, step, foil):
    """D per row from this file's own forward: transformers' (inputs_embeds), ours' forward, or a
    recurrent model's encode and decode_step loop."""
    model = tr.model
    R = x.size(0)
    tgt_in = decoder_input(model, tgt)[:, :step + 1].expand(R, -1)
    if hasattr(model, "hf"):
        logits = model.hf(inputs_embeds=x, attention_mask=torch.ones(R, x.size(1), dtype=torch.long),
                          decoder_input_ids=tgt_in).logits[:, step]
    elif hasattr(model, "decode_all"):
        logits = model(src_ids.expand(R, -1), torch.full((R,), x.size(1)), tgt_in, embedded=x)[0][:, step]
    else:
        memory, state = model.encode(src_ids.expand(R, -1), torch.full((R,), x.size(1)), embedded=x)
        feed = model.initial_feed(R)
        for k in range(step + 1):
            st = model.decode_step(tgt_in[:, k], state, feed, memory)
            state, feed = st.state, st.feed
        logits = st.logits
    logp = F.log_softmax(logits.double(), dim=-1)
    return logp[:, tgt[step]] - logp[:, foil]


NAMES = [*HUB, "ours", "ours-copy", "lstm-copy", "dot", "shipped"]


@pytest.mark.parametrize("name", NAMES)
def test_grad_x_input_is_autograds(models, name):
    tr = models[name]
    src, tgt, step, foil = setup(tr)
    e = tr.model.embed(src).detach()
    if hasattr(tr.model, "hf"):       # the embeddings are the model's own inputs: the same logits as from ids
        with torch.no_grad():
            a = tr.model.hf(inputs_embeds=e, decoder_input_ids=decoder_input(tr.model, tgt)).logits
            b = tr.model.hf(input_ids=src, decoder_input_ids=decoder_input(tr.model, tgt)).logits
        assert torch.allclose(a, b, atol=1e-5)
    x = e.clone().requires_grad_(True)
    difference(tr, x, src, tgt, step, foil).sum().backward()
    want = (x.grad * e).sum(-1)[0].double().numpy()
    got = grad_x_input(tr.model, src, tgt, step, foil)
    assert got.shape == (src.size(1),)
    # relative to the largest score (random tiny models' gradients to the source are small)
    assert np.abs(want).max() > 1e-7
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), (got, want)


@pytest.mark.parametrize("name", NAMES)
def test_leave_one_out_is_the_difference_without_each_piece(models, name):
    tr = models[name]
    src, tgt, step, foil = setup(tr)
    unk = tr.tokenizer.unk_id
    want = []
    with torch.no_grad():
        whole = float(difference(tr, tr.model.embed(src), src, tgt, step, foil)[0])
        for i in range(src.size(1)):
            row = src.clone()
            row[0, i] = unk
            want.append(whole - float(difference(tr, tr.model.embed(row), row, tgt, step, foil)[0]))
    got, want = leave_one_out(tr.model, src, tgt, step, foil), np.array(want)
    assert np.abs(want).max() > 1e-7
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max() + 1e-7, (got, want)


@pytest.mark.parametrize("name", ["marian", "m2m100", "t5", "ours-copy", "lstm-copy"])
def test_integrated_gradients_are_the_integral_and_complete(models, name):
    tr = models[name]
    src, tgt, step, foil = setup(tr)
    e = tr.model.embed(src).detach()
    nodes, weights = np.polynomial.legendre.leggauss(64)
    total = torch.zeros(src.size(1), dtype=torch.float64)
    for t, w in zip((nodes + 1) / 2, weights / 2):
        x = (float(t) * e).clone().requires_grad_(True)
        difference(tr, x, src, tgt, step, foil).sum().backward()
        total += w * (x.grad * e).sum(-1)[0].double()
    got, error = integrated_gradients(tr.model, src, tgt, step, foil)
    with torch.no_grad():
        gap = float(difference(tr, e, src, tgt, step, foil)[0] - difference(tr, 0 * e, src, tgt, step, foil)[0])
    assert abs(error - (got.sum() - gap)) < 1e-5          # the completeness error reported is the real one
    if name == "t5":
        # T5's RMS norm, x / sqrt(mean(x^2) + 1e-6), makes D(t e) jump within t ~ 1e-3 of the zero
        # baseline: no fixed quadrature resolves it, and the error says so (as the plain one's does)
        pytest.skip("T5: the completeness error reported is checked above; completeness and the 64-point "
                    "integral are not, as T5's RMS norm makes D(t e) jump within t ~ 1e-3 of the zero baseline")
    assert abs(got.sum() - gap) <= 0.01 * (1 + abs(gap)) + 1e-6
    assert np.allclose(got, total.numpy(), atol=2e-3 * (1 + abs(gap)))


def test_the_command_on_the_shipped_transformer(capsys):
    assert main(["--model", "en-fr-transformer", "--contrast-step", "5", "--foil", "▁heureuse", "--json", "--",
                 GIRL]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target_tokens"][4] == out["target"] == "▁heureux" and out["foil"] == "▁heureuse"
    assert len(out["scores"]) == len(out["source_tokens"])
    assert out["difference"] == pytest.approx(out["log_prob_target"] - out["log_prob_foil"])
    assert set(out["toward_target"]) | set(out["toward_foil"]) <= set(out["source_tokens"])
    # the foil typed as a word is the same piece; loo's scores from the same command
    assert main(["--model", "en-fr-transformer", "--contrast-step", "5", "--foil", "heureuse", "--method", "loo",
                 "--json", "--", GIRL]) == 0
    loo = json.loads(capsys.readouterr().out)
    assert loo["foil"] == "▁heureuse" and loo["method"] == "loo" and len(loo["scores"]) == len(out["scores"])


@pytest.mark.parametrize("args", [
    ["--contrast-step", "5", "--foil", "anticonstitutionnellement"],      # several pieces
    ["--contrast-step", "0", "--foil", "▁heureuse"],                      # steps count from 1
    ["--contrast-step", "99", "--foil", "▁heureuse"],
    ["--contrast-step", "5", "--foil", "▁heureux"],                       # the chosen piece itself
    ["--contrast-step", "5", "--foil", " "],
    ["--contrast-step", "5", "--foil", "▁heureuse", "--method", "weights"],
    ["--contrast-step", "5", "--foil", "▁heureuse", "--method", "ig", "--method", "loo"],
    ["--foil", "▁heureuse"],
    ["--contrast-step", "5"],
])
def test_bad_input_is_one_line(capsys, args):
    try:
        code = main(["--model", "en-fr-transformer", *args, "--", GIRL])
    except SystemExit as stop:               # the parser's own errors exit
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1, err


def test_a_foil_of_several_pieces_is_refused(models):
    with pytest.raises(InputError, match="one piece"):
        foil_id(models["marian"], "représentations")
    with pytest.raises(InputError, match="step 3"):
        src, tgt, _, _ = setup(models["marian"])
        explain_contrast(models["marian"], TEXT, 3, models["marian"].tokenizer.piece(int(tgt[2])), FR)


@pytest.mark.parametrize("name", ["marian", "ours", "dot"])
def test_without_a_foil_it_is_the_plain_attribution_at_that_step(models, name):
    """step_attribution (the bars a page draws beside the contrast) is row T of s2s.attributions'
    grad x input and leave-one-out, for an output given as piece ids (a page's own decoding)."""
    from s2s import attributions
    from s2s.contrast import step_attribution
    tr = models[name]
    text, ref = (TEXT, FR) if hasattr(tr.model, "hf") else (REVERSAL, "b f c a")
    src, tgt, step, foil = setup(tr)
    plain = {"grad-x-input": attributions.grad_x_input(tr.model, src, tgt),
             "loo": attributions.leave_one_out(tr.model, src, tgt)}
    for method, rows in plain.items():
        got, error = step_attribution(tr, text, step + 1, method=method, target=tgt.tolist())
        assert error is None and np.abs(rows[step]).max() > 1e-7
        # (+1e-6: the plain leave-one-out's log p are float32 differences of values near -10)
        assert np.abs(got - rows[step]).max() <= 1e-4 * np.abs(rows[step]).max() + 1e-6, (method, got, rows[step])
        assert np.allclose(step_attribution(tr, text, step + 1, ref, method=method)[0], got)
    # the output given as ids is the one explained: the same scores as the reference it tokenizes to
    given = explain_contrast(tr, text, step + 1, tr.tokenizer.piece(foil), target=tgt.tolist())
    assert given.forced_from == "given"
    assert np.allclose(given.scores, explain_contrast(tr, text, step + 1, tr.tokenizer.piece(foil), ref).scores)
    with pytest.raises(InputError, match="out of range"):
        step_attribution(tr, text, len(tgt) + 1, target=tgt.tolist())
