"""s2s.attributions (A; its gradient module G), s2s.counterfactual (C) and s2s.explain (X): each attribution checked
against an independent computation on tiny models, Kendall's tau on vectors with a known
answer, the counterfactuals, the CLI."""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT
from s2s import attributions as A
from s2s import counterfactual as C
from s2s import explain as X
from s2s.attributions import gradient as G
from s2s.checkpoint import Translator, load_translator
from s2s.decode import _left_to_right, forced
from s2s.text import InputError
from s2s.tokenizer import BOS, UNK

TEXT = "c a f b e"
REFERENCE = "e b f a c"


def ids(tr: Translator, text: str = TEXT, reference: str | None = None):
    src = torch.tensor([A.source_ids(tr, text)])
    tgt = torch.tensor(A.target_ids(tr, text, reference)[0])
    return src, tgt


def double(tr: Translator) -> Translator:
    """The same model in float64, so that finite differences are exact to ~1e-9."""
    return replace(tr, model=copy.deepcopy(tr.model).double().eval())     # eval() drops the fp32 decode cache


# ------------------------------------------------------------------ the differentiable forward

@pytest.mark.parametrize("kind", ["dot", "general", "additive", "scaled-dot", "copy"])
def test_the_batched_forward_is_forced_decoding(untrained_translators, kind):
    tr = untrained_translators[kind]
    src, tgt = ids(tr, reference=REFERENCE)
    memory, state = tr.model.encode(src, torch.tensor([src.size(1)]))
    memory2, state2 = tr.model.encode(src, torch.tensor([src.size(1)]), embedded=tr.model.embed(src))
    assert torch.allclose(memory.states, memory2.states, atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(state, state2))
    # every step scored by its own row, rows in a scrambled order, against the inference path
    T = tgt.numel()
    last = torch.randperm(T, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        x = tr.model.embed(src)[0].expand(T, -1, -1)
        logp = A.step_log_probs(tr.model, x, src, tgt, last)
    want = forced(tr, TEXT, reference=REFERENCE).token_log_probs
    assert np.allclose(logp.numpy(), np.array(want)[last.numpy()], atol=1e-5)


@pytest.mark.parametrize("kind", ["general", "copy"])
def test_a_step_given_its_own_attention_is_the_same_step(untrained_translators, kind):
    m = untrained_translators[kind].model
    src, tgt = ids(untrained_translators[kind], reference=REFERENCE)
    with torch.no_grad():
        memory, state = m.encode(src, torch.tensor([src.size(1)]))
        feed = m.initial_feed(1)
        own = m.step(tgt[:1], state, feed, memory)
        given = m.step(tgt[:1], state, feed, memory, alpha=own.alpha)
    assert torch.equal(own.logits, given.logits) and torch.equal(own.context, given.context)


# ------------------------------------------------------------------ attributions

def f_at(model, emb: torch.Tensor, src, tgt) -> torch.Tensor:
    """log p(y_j | y_<j, emb) for every j, with the source embeddings (S, E) given."""
    T = tgt.numel()
    return A.step_log_probs(model, emb.expand(T, -1, -1), src, tgt, torch.arange(T))


@pytest.mark.parametrize("kind", ["additive", "dot", "copy"])
def test_integrated_gradients_are_complete(untrained_translators, kind):
    tr = untrained_translators[kind]
    src, tgt = ids(tr)
    ig, delta = A.integrated_gradients(tr.model, src, tgt)
    assert ig.shape == (tgt.numel(), src.size(1))
    # independently: log p(y_j | x) from the inference path, log p(y_j | 0) from the zero embeddings
    logp_x = np.array(forced(tr, TEXT, reference_ids=tgt.tolist()).token_log_probs)
    with torch.no_grad():
        logp_0 = f_at(tr.model, torch.zeros(src.size(1), tr.model.cfg.emb_dim), src, tgt).double().numpy()
    gap = logp_x - logp_0
    assert np.abs(ig.sum(1) - gap).max() <= 0.01 * np.abs(gap).max() + 1e-4
    assert np.allclose(delta, ig.sum(1) - gap, atol=1e-4)


def test_integrated_gradients_are_complete_on_a_trained_model(tiny_additive):
    from s2s.checkpoint import load_translator
    tr = load_translator(tiny_additive)
    e = A.explain(tr, "j i h g f e d")
    assert e.translation == "d e f g h i j"                     # it learned to reverse
    src, tgt = ids(tr, "j i h g f e d")
    with torch.no_grad():
        logp_0 = f_at(tr.model, torch.zeros(src.size(1), tr.model.cfg.emb_dim), src, tgt).double().numpy()
    gap = np.array(e.token_log_probs) - logp_0
    assert np.abs(e.attributions["integrated_gradients"].sum(1) - gap).max() <= 0.01 * np.abs(gap).max()


def test_integrated_gradients_split_where_the_path_is_steep(tiny_additive):
    """The adaptive quadrature (coarse segments, halved where their completeness fails)
    gives the integral a fine uniform one does, and closer than the coarse one alone."""
    from s2s.checkpoint import load_translator
    tr = double(load_translator(tiny_additive))
    src, tgt = ids(tr, "j i h g f e d")
    fine, fine_error = A.integrated_gradients(tr.model, src, tgt, steps=64, splits=0)
    coarse, coarse_error = A.integrated_gradients(tr.model, src, tgt, steps=4, splits=0)
    split, split_error = A.integrated_gradients(tr.model, src, tgt, steps=4, splits=4)
    assert np.abs(fine_error).max() < 1e-3
    assert np.abs(split - fine).max() < 0.2 * np.abs(coarse - fine).max()
    assert np.abs(split_error).max() < np.abs(coarse_error).max()


@pytest.mark.parametrize("kind", ["additive", "general", "scaled-dot"])   # (the copy path computes in float32)
def test_grad_x_input_is_the_directional_derivative_along_each_embedding(untrained_translators, kind):
    tr = double(untrained_translators[kind])
    src, tgt = ids(tr)
    a = A.grad_x_input(tr.model, src, tgt)
    emb = tr.model.embed(src)[0].detach()
    h = 1e-5
    with torch.no_grad():
        for i in range(src.size(1)):
            # d/dh f(e with e_i -> (1 + h) e_i) at h = 0 is grad_{e_i} f . e_i
            up, down = emb.clone(), emb.clone()
            up[i] *= 1 + h
            down[i] *= 1 - h
            fd = (f_at(tr.model, up, src, tgt) - f_at(tr.model, down, src, tgt)) / (2 * h)
            assert np.allclose(a[:, i], fd.numpy(), rtol=1e-5, atol=1e-8), i


@pytest.mark.parametrize("kind", ["scaled-dot", "copy"])
def test_leave_one_out_is_the_drop_in_log_prob_without_each_piece(untrained_translators, kind):
    tr = untrained_translators[kind]
    src, tgt = ids(tr, reference=REFERENCE)
    loo = A.leave_one_out(tr.model, src, tgt)
    ref = tgt.tolist()

    def logp(src_ids):     # s2s.decode's own forced loop, one sentence at a time
        return np.array(_left_to_right(tr, src_ids, lambda j, logits: ref[j], len(ref)).token_log_probs)

    base = logp(src[0].tolist())
    for i in range(src.size(1)):
        without = src[0].tolist()
        without[i] = UNK
        assert np.allclose(loo[:, i], base - logp(without), atol=1e-5), i


def test_explain_returns_every_method_per_target_token(untrained_translators):
    tr = untrained_translators["general"]
    e = A.explain(tr, TEXT, reference=REFERENCE)
    T, S = len(e.target_tokens), len(e.source_tokens)
    assert e.source_tokens[-1] == "</s>" and e.target_tokens[-1] == "</s>" and e.forced_from == "reference"
    assert e.attention.shape == (T, S) and np.allclose(e.attention.sum(1), 1, atol=1e-5)
    assert set(e.attributions) == set(A.METHODS)
    assert all(a.shape == (T, S) and np.isfinite(a).all() for a in e.attributions.values())
    assert all(len(t) == T for t in e.kendall_tau().values())
    greedy = A.explain(tr, TEXT, methods=["leave_one_out"])
    assert greedy.forced_from == "greedy" and list(greedy.attributions) == ["leave_one_out"]


# ------------------------------------------------------------------ agreement

def test_kendall_tau_on_vectors_with_a_known_answer():
    assert A.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert A.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # pairs (1,2) (1,3) concordant, (2,3) discordant: (2 - 1) / 3
    assert A.kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    # one pair tied in x: tau-b = 2 / sqrt((3 - 1) * (3 - 0))
    assert A.kendall_tau([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(A.kendall_tau([1, 1, 1], [1, 2, 3]))       # nothing to rank
    attention = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    taus, same = A.agreement(attention, np.array([[-3.0, 1.0, 0.5], [0.0, 2.0, 1.0]]))
    assert taus == pytest.approx([1.0, 1 / 3]) and same == [True, False]   # magnitudes |a| are compared


def test_kendall_tau_equals_scipy_with_ties():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, y = rng.integers(0, 4, 12), rng.normal(size=12).round(1)
        assert A.kendall_tau(x, y) == pytest.approx(stats.kendalltau(x, y).statistic)


# ------------------------------------------------------------------ counterfactual attention

def test_uniform_attention_changes_the_next_token_as_computed_by_hand(untrained_translators):
    tr = untrained_translators["additive"]
    m, j = tr.model, 2
    c = C.counterfactual(tr, TEXT, j, "uniform", reference=REFERENCE)
    S = len(c.alpha_before)
    assert len(set(c.alpha_after)) == 1 and c.alpha_after[0] == pytest.approx(1 / S, rel=1e-7)   # exactly uniform
    # by hand: the decoder state s_j from teacher forcing, c_j = mean_i h_i, h~ = tanh(W_c [c; s])
    src, tgt = ids(tr, reference=REFERENCE)
    with torch.no_grad():
        _, attn = m(src, torch.tensor([src.size(1)]), torch.cat([torch.tensor([[BOS]]), tgt[None, :-1]], 1))
        memory, state = m.encode(src, torch.tensor([src.size(1)]))
        feed = m.initial_feed(1)
        y = [BOS] + tgt.tolist()
        for k in range(j + 1):
            st = m.step(torch.tensor([y[k]]), state, feed, memory)
            state, feed = st.state, st.feed
        s = state[0]
        h_tilde = torch.tanh(m.combine(torch.cat([memory.states.mean(1), s], -1)))
        p_uniform = F.softmax(m.output(h_tilde), -1)[0]
        p = F.softmax(st.logits, -1)[0]
    assert np.allclose(c.alpha_before, attn[0, j].numpy(), atol=1e-6)
    for tok, prob in c.top_after:
        assert prob == pytest.approx(float(p_uniform[tr.tokenizer.sp.piece_to_id(tok)]), abs=1e-5)
    assert c.tv == pytest.approx(float((p_uniform - p).abs().sum() / 2), abs=1e-5) and c.tv > 0
    assert c.top_after[0][0] == c.continuation_after[0]          # greedy from there on
    assert c.translation_before.startswith(tr.tokenizer.decode(tgt[:j].tolist()))


def test_a_permutation_keeps_the_weights_and_moves_them(untrained_translators):
    tr = untrained_translators["dot"]
    c = C.counterfactual(tr, TEXT, 1, "permute", reference=REFERENCE, seed=3)
    assert sorted(c.alpha_after) == pytest.approx(sorted(c.alpha_before))
    assert c.alpha_after != c.alpha_before
    assert c.jsd == pytest.approx(float(C.jsd(torch.tensor(c.alpha_after), torch.tensor(c.alpha_before))))


def test_the_adversary_moves_attention_further_than_a_permutation_within_epsilon(untrained_translators):
    tr = untrained_translators["additive"]
    eps, j = 0.01, 1
    adv = C.counterfactual(tr, TEXT, j, "adversarial", reference=REFERENCE, epsilon=eps)
    perm = C.counterfactual(tr, TEXT, j, "permute", reference=REFERENCE)
    assert adv.tv <= eps + 1e-6
    assert adv.jsd > perm.jsd and adv.jsd > 0.1
    assert sum(adv.alpha_after) == pytest.approx(1.0) and min(adv.alpha_after) >= 0


def test_permutation_survival_is_one_answer_per_step(untrained_translators):
    tr = untrained_translators["general"]
    src, tgt = ids(tr, reference=REFERENCE)
    t = C.trace(tr.model, src, tgt)
    assert np.allclose(t.log_probs.gather(1, tgt[:, None])[:, 0].numpy(),
                       forced(tr, TEXT, reference=REFERENCE).token_log_probs, atol=1e-5)
    kept = C.permutation_survival(tr.model, t, seed=0)
    assert len(kept) == tgt.numel() and all(isinstance(k, bool) for k in kept)


# ------------------------------------------------------------------ command line

def run(argv, capsys) -> tuple[int, str, str]:
    try:
        rc = X.main(argv)
    except SystemExit as e:        # argparse's own errors
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_json_contract(untrained_translators, capsys):
    path = str(untrained_translators["scaled-dot"].path)
    rc, out, err = run(["--model", path, "--json", "--counterfactual", "1", "--kind", "permute", "--", TEXT], capsys)
    assert rc == 0, err
    d = json.loads(out)
    T, S = len(d["target_tokens"]), len(d["source_tokens"])
    assert d["source_tokens"][-1] == "</s>"
    assert len(d["attention"]) == T and all(len(r) == S for r in d["attention"])
    assert set(d["attributions"]) == set(A.METHODS) == set(d["kendall_tau"])
    for m in A.METHODS:
        assert len(d["attributions"][m]) == T and all(len(r) == S for r in d["attributions"][m])
        assert len(d["kendall_tau"][m]) == T
    cf = d["counterfactual"]
    assert cf["step"] == 1 and cf["kind"] == "permute" and len(cf["alpha_after"]) == S
    rc, out, _ = run(["--model", path, "--reference", REFERENCE, "--json", "--", TEXT], capsys)
    d = json.loads(out)
    tok = untrained_translators["scaled-dot"].tokenizer
    assert rc == 0 and d["forced_from"] == "reference"
    assert d["target_tokens"] == tok.pieces(tok.encode(REFERENCE)) + ["</s>"]


def test_cli_summary_over_a_test_file(untrained_translators, tmp_path, capsys):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("# a comment\na b c\tc b a\na b c d e f g h i j a b\tx\n\nd e\te d\n", encoding="utf-8")
    rc, out, err = run(["--model", str(untrained_translators["dot"].path), "--test", str(tsv), "--limit", "5",
                        "--max-words", "5", "--json"], capsys)
    assert rc == 0, err
    d = json.loads(out)
    assert d["sentences"] == 2 and d["steps"] == 4 + 3          # "c b a </s>", "e d </s>"
    assert set(d["kendall_tau"]) == set(A.METHODS)
    assert all(-1 <= d["kendall_tau"][m]["median"] <= 1 for m in A.METHODS)
    assert 0 <= d["permutation_survival"] <= 1


def test_cli_bad_input(untrained_translators, tmp_path, capsys):
    path = str(untrained_translators["additive"].path)
    cases = [["--model", str(tmp_path / "nope"), "--", TEXT],
             ["--model", str(untrained_translators["none"].path), "--", TEXT],
             ["--model", path, "--", "   "],
             ["--model", path, "--", " ".join("abcdefghij" * 12)],                 # 121 pieces
             ["--model", path, "--counterfactual", "99", "--", TEXT],
             ["--model", path, "--test", str(tmp_path / "missing.tsv")]]
    for argv in cases:
        rc, out, err = run(argv, capsys)
        assert rc == 2 and out == "", argv
        assert err.startswith("error:") and err.count("\n") == 1, err
    with pytest.raises(SystemExit) as exit_:                   # argparse's own errors: the same one line
        X.main(["--model", path, "--kind", "sideways", "--", TEXT])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("error:") and err.count("\n") == 1


def test_python_dash_m_entry_point(untrained_translators):
    p = subprocess.run([sys.executable, "-m", "s2s.explain", "--model", str(untrained_translators["dot"].path),
                        "--json", "--", TEXT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["source_tokens"][-1] == "</s>"
    p = subprocess.run([sys.executable, "-m", "s2s.explain", "--model", str(untrained_translators["dot"].path),
                        "--", ""], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("error:")


def test_table_summarises_every_attention_model(untrained_translators, tmp_path, capsys):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("a b c\tc b a\nd e\te d\n", encoding="utf-8")
    out = tmp_path / "explanation.json"
    root = untrained_translators["dot"].path.parent
    rc, printed, err = run(["--test", str(tsv), "--table", str(out), "--models", str(root), "--ig-steps", "4"],
                           capsys)
    assert rc == 0, err
    table = json.loads(out.read_text())
    assert [r["model"] for r in table["rows"]] == ["additive", "copy", "dot", "general", "scaled-dot",
                                                  "transformer", "transformer-copy"]   # Transformers too
    assert all(r["sentences"] == 2 and r["steps"] == 7 for r in table["rows"])
    assert table["command"].startswith("python -m s2s.explain --test")
    rc, printed, err = run(["--table", str(out)], capsys)                      # --table needs --test
    assert rc == 2 and err.startswith("error:") and "--test" in err


# ------------------------------------------------------------------ Transformers: ours and a hub model's

def transformer_cases(tiny_transformer, hub_models):
    return {"ours": load_translator(tiny_transformer), "marian": load_translator(hub_models["marian"]),
            "t5": load_translator(hub_models["t5"])}


@pytest.mark.parametrize("which", ["ours", "marian", "t5"])
def test_a_transformers_attributions(tiny_transformer, hub_models, which):
    """grad x input, integrated gradients and leave-one-out for a Transformer: every position
    scored in one teacher-forced pass from the source embeddings, the same log-probs as
    forced decoding; integrated gradients complete; leave-one-out the log-prob each piece's
    <unk> costs."""
    tr = transformer_cases(tiny_transformer, hub_models)[which]
    text = "a b c d" if which == "ours" else "the cat sat ."
    e = A.explain(tr, text, reference=None if which == "ours" else "le chat .")   # a random model would not stop
    T, S = len(e.target_tokens), len(e.source_tokens)
    assert e.attention.shape == (T, S)
    for m in A.METHODS:
        assert e.attributions[m].shape == (T, S) and np.isfinite(e.attributions[m]).all()
    src = torch.tensor([A.source_ids(tr, text)])
    tgt = torch.tensor(e.target_ids)
    with torch.no_grad():
        logp = A.row_log_probs(tr.model, tr.model.embed(src)[0].expand(T, -1, -1), src, tgt, torch.arange(T))
    np.testing.assert_allclose(logp.numpy(), e.token_log_probs, atol=1e-4)
    gap = e.attributions["integrated_gradients"].sum(1) - e.ig_delta
    if which != "t5":    # T5 normalises by RMS: from the zero baseline its path is steep near t = 0, and the
        # quadrature's error is reported (ig_delta) rather than bounded
        assert np.median(np.abs(e.ig_delta) / (1 + np.abs(gap))) <= A.IG_TOLERANCE
    assert np.isfinite(e.ig_delta).all()
    # leave-one-out by hand for one piece
    i = 1
    rows = src.clone()
    rows[0, i] = A.unk_id(tr.model)
    other = forced(tr, text, reference_ids=e.target_ids, source_ids=rows[0].tolist())
    assert e.forced_from == ("greedy" if which == "ours" else "reference")
    np.testing.assert_allclose(e.attributions["leave_one_out"][:, i],
                               np.array(e.token_log_probs) - np.array(other.token_log_probs), atol=1e-4)
    with pytest.raises(InputError, match="counterfactual"):
        C.counterfactual(tr, text, 0, "uniform")


@pytest.mark.parametrize("which", ["ours", "marian", "t5"])
def test_logits_at_one_position_per_row_are_the_forward_passes(tiny_transformer, hub_models, which):
    """logits_at runs the output layer at one position per row (and decodes no further): the
    same logits as the full teacher-forced pass at those positions, rows in any order, and
    row_log_probs's grouping by step gives every row its own log-prob back in place."""
    tr = transformer_cases(tiny_transformer, hub_models)[which]
    src = torch.tensor([A.source_ids(tr, "the cat sat on the mat .")])
    tgt = torch.tensor(tr.tokenizer.target_ids("le chat est assis sur le tapis ."))
    T, R = tgt.numel(), 11
    tgt_in = torch.cat([tgt.new_tensor([A.bos_id(tr.model)]), tgt[:-1]]).expand(R, -1)
    positions = torch.randint(0, T, (R,), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full, _ = tr.model(src.expand(R, -1), torch.full((R,), src.size(1)), tgt_in)
        at = tr.model.logits_at(src.expand(R, -1), torch.full((R,), src.size(1)), tgt_in, positions)
        x = tr.model.embed(src)[0].expand(R, -1, -1)
        logp = A.row_log_probs(tr.model, x, src, tgt, positions)
    assert at.shape == (R, full.size(-1))
    np.testing.assert_allclose(at.numpy(), full[torch.arange(R), positions].numpy(), atol=1e-4)
    expected = F.log_softmax(full, -1)[torch.arange(R), positions, tgt[positions]]
    np.testing.assert_allclose(logp.numpy(), expected.numpy(), atol=1e-4)


def grad_x_input_row_by_row(model, src: torch.Tensor, tgt: torch.Tensor) -> np.ndarray:
    """The definition, a_ij = (d log p(y_j | y_<j, x) / d e_i) . e_i, one token at a time:
    for each j a teacher-forced pass of the whole model (its forward) and one ordinary backward."""
    e = model.embed(src)[0].detach()
    tgt_in = torch.cat([tgt.new_tensor([A.bos_id(model)]), tgt[:-1]])[None]
    rows = []
    for j in range(tgt.numel()):
        x = e[None].clone().requires_grad_(True)
        logits, _ = model(src, torch.tensor([src.size(1)]), tgt_in, embedded=x)
        (g,) = torch.autograd.grad(F.log_softmax(logits[0, j], -1)[tgt[j]], x)
        rows.append((g[0] * e).sum(-1))
    return torch.stack(rows).detach().numpy()


@pytest.mark.parametrize("which", ["transformer", "transformer-copy", "ours", "marian", "t5", "m2m100"])
def test_a_transformers_grad_x_input_is_each_tokens_own_gradient(untrained_translators, tiny_transformer,
                                                                  hub_models, which):
    """A Transformer's grad x input (one forward pass, one backward batched over target steps,
    cut at the output head: s2s.attributions.gradient._row_gradients) is the per-token definition, in
    float64 to rounding: ours without and with the pointer (untrained, and trained), and one hub
    model of each family."""
    if which in untrained_translators:
        tr = untrained_translators[which]
    else:
        tr = load_translator(tiny_transformer if which == "ours" else hub_models[which])
    tr = double(tr)
    if which in ("transformer", "transformer-copy", "ours"):
        src, tgt = ids(tr, reference=REFERENCE)
    else:
        src = torch.tensor([A.source_ids(tr, "the cat sat on the mat .")])
        tgt = torch.tensor(tr.tokenizer.target_ids("le chat est assis sur le tapis ."))
    a = A.grad_x_input(tr.model, src, tgt)
    want = grad_x_input_row_by_row(tr.model, src, tgt)
    assert a.shape == want.shape == (tgt.numel(), src.size(1)) and np.abs(want).max() > 1e-8
    np.testing.assert_allclose(a, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())


def test_progress_is_reported_and_changes_no_number(untrained_translators):
    """integrated_gradients and leave_one_out with on_progress (in chunks, for a page's progress
    bar) give the same numbers as without, and report a rising share that ends at 1."""
    tr = untrained_translators["transformer-copy"]
    src, tgt = ids(tr, reference=REFERENCE)
    for fn in (A.integrated_gradients, A.leave_one_out):
        heard = []
        with_bar = fn(tr.model, src, tgt, on_progress=lambda done, stage: heard.append(done))
        without = fn(tr.model, src, tgt)
        for got, want in zip(with_bar if isinstance(with_bar, tuple) else [with_bar],
                             without if isinstance(without, tuple) else [without]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert heard == sorted(heard) and heard[-1] == 1.0 and len(heard) >= 4


def test_progress_says_what_it_does_from_the_start(untrained_translators, monkeypatch):
    """Issue #54: on an opus-mt-sized model a page's bar read "starting…" at 0% for the first 6 s of
    a 35 s run. A two-argument on_progress hears (share, what it is doing) from the start: the
    path's end points, then the first round's forward pass before that round's gradients are taken,
    then each chunk of its batched backward; every call with a stage text, the share never falling,
    ending at 1.0. Leave-one-out is heard before its first batch too."""
    tr = untrained_translators["transformer"]
    src, tgt = ids(tr, reference=REFERENCE)
    heard: list[tuple[float | None, str]] = []
    row_gradients = G._row_gradients           # the first round's work: its start marked among what is heard
    monkeypatch.setattr(G, "_row_gradients", lambda *a, **k: (heard.append((None, "<first round runs>")),
                                                             row_gradients(*a, **k))[1])
    A.integrated_gradients(tr.model, src, tgt, on_progress=lambda done, stage: heard.append((done, stage)))
    shares = [d for d, _ in heard if d is not None]
    assert shares == sorted(shares) and shares[0] == 0.0 and shares[-1] == 1.0
    assert all(isinstance(s, str) and s and "starting" not in s for _, s in heard)
    first = [s for _, s in heard].index("<first round runs>")
    before = [s for _, s in heard[:first]]
    assert any(s.startswith("the path's end points: the sentence") for s in before)
    assert any(s.startswith("the path's end points: zero embeddings") for s in before)
    assert before[-1].startswith("first round: the model at 16 points")
    chunks = [(d, s) for d, s in heard[first + 1:] if s.startswith("first round: gradients")]
    assert len(chunks) >= 3 and all(d <= A.IG_SHARES["transformer"]["first_round"] for d, _ in chunks)
    assert chunks[-1][1] == f"first round: gradients for {tgt.numel()} of {tgt.numel()} output pieces"
    heard.clear()
    A.leave_one_out(tr.model, src, tgt, on_progress=lambda done, stage: heard.append((done, stage)))
    assert heard[0][0] == 0.0 and heard[-1][0] == 1.0 and all(s for _, s in heard)
    assert heard[-1][1].endswith(f"{src.size(1) + 1} of {src.size(1) + 1}")


def test_cudnn_is_paused_while_any_pass_runs_and_then_restored():
    """Attributions through the recurrent encoder on a GPU run with cuDNN off (its RNN backward
    refuses eval mode); overlapping passes on two threads must not leave it off, nor turn it
    back on while one still runs."""
    import threading

    from s2s.attributions import cudnn_paused
    was = torch.backends.cudnn.enabled
    inside, release = threading.Event(), threading.Event()
    seen = []

    def other():
        with cudnn_paused():
            inside.set()
            release.wait(10)
            seen.append(torch.backends.cudnn.enabled)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with cudnn_paused():
        assert torch.backends.cudnn.enabled is False
    assert torch.backends.cudnn.enabled is False        # the other thread's pass still runs
    release.set()
    t.join(10)
    assert seen == [False]
    assert torch.backends.cudnn.enabled is was


@pytest.mark.parametrize("which", ["ours", "marian"])
def test_a_transformers_first_ig_round_shares_its_points_and_gives_captums_numbers(tiny_transformer, hub_models,
                                                                                    which):
    """Integrated gradients' first round for a Transformer: the points t_k e are the same for
    every token, so one forward of the points and one backward batched over tokens
    (_row_gradients with points and weights) must give what captum gives from T x points
    teacher-forced rows; the rounds after it run through captum either way; rows in chunks
    (a long sentence's memory bound) change nothing."""
    tr = transformer_cases(tiny_transformer, hub_models)[which]
    text = "a b c d" if which == "ours" else "the cat sat ."
    src = torch.tensor([A.source_ids(tr, text)])
    tgt = torch.tensor(tr.tokenizer.target_ids("b c d a") if which == "ours" else tr.tokenizer.target_ids("le chat ."))
    fast, fast_err = A.integrated_gradients(tr.model, src, tgt)
    slow, slow_err = A.integrated_gradients(tr.model, src, tgt, fast_first_round=False)
    np.testing.assert_allclose(fast, slow, atol=1e-4)
    np.testing.assert_allclose(fast_err, slow_err, atol=1e-4)
    e = G._source_embeddings(tr.model, src)
    t, w = torch.tensor([0.2, 0.7, 1.0]), torch.tensor([0.5, 0.25, 0.25])
    whole = G._row_gradients(tr.model, e, src, tgt, t, w)
    by_hand = sum(wk * G._row_gradients(tr.model, tk * e, src, tgt) for tk, wk in zip(t, w))
    np.testing.assert_allclose(whole.numpy(), by_hand.numpy(), atol=1e-5)
    old = G.ROW_GRAD_ELEMENTS
    try:
        G.ROW_GRAD_ELEMENTS = 1                 # one row per chunk
        np.testing.assert_allclose(G._row_gradients(tr.model, e, src, tgt, t, w).numpy(), whole.numpy(),
                                   rtol=1e-5, atol=1e-5)    # float32: another batching, another rounding
    finally:
        G.ROW_GRAD_ELEMENTS = old
