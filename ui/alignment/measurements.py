"""The Alignment & Explanation page's measurements, cached once per server, and what they cost.

The gold pairs and the word attention read from them (s2s.alignment), every layer x head scored
as an aligner, one sentence's contributions (s2s.contributions) and gradient attributions
(s2s.attributions), counterfactual attention (s2s.counterfactual), a corpus's weights; and the
time estimates of the runs that wait for a button (integrated gradients and a hub model's
leave-one-out; a long or a hub model's corpus, or head scoring). The tabs (gold.py,
attribution.py, corpus.py) draw them.
"""
from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import streamlit as st
import torch

import ui.models
from s2s.alignment import (
    GoldPair,
    best_head,
    head_scores,
    links,
    pairs_that_fit,
    read_gold,
    score,
    shifted,
    skipped_note,
    word_attention,
)
from s2s.alignment.corpus import corpus_head_scores, corpus_weights
from s2s.attention import head_or_mean
from s2s.contributions import METHODS as CONTRIBUTION_METHODS
from s2s.contributions import applies, explain_contributions, normalised
from s2s.counterfactual import counterfactual
from s2s.hub_config import parameters_text
from s2s.text import InputError

ROOT = Path(__file__).resolve().parent.parent.parent
TRIAL = ROOT / "examples" / "hansards_trial"
# the full gold standard is not in the repository; the test set is offered where it exists


def hansards_test_folder() -> Path:
    """The folder of the 447 Hansards test pairs: $S2S_HANSARDS, read on every run (an operator,
    or a test, may set it after this module was imported), else ../shared's."""
    return Path(os.environ.get("S2S_HANSARDS", ROOT.parent / "shared" / "data" / "hansards-en-fr-align"))


ALIGNMENT_RESULTS = ROOT / "results" / "alignment.json"
EXPLANATION_RESULTS = ROOT / "results" / "explanation.json"
METHOD_RESULTS = ROOT / "results" / "alignment_methods.json"            # each method as an aligner
METHOD_EXPLANATION_RESULTS = ROOT / "results" / "explanation_methods.json"   # ... and against leave-one-out


def attention_models() -> list:
    """The shipped models with attention, and the hub models the operator offers."""
    return [i for i in ui.models.translation_models() + ui.models.hub_models() if i.has_attention]


@st.cache_data(show_spinner=False)
def gold_pairs(folder: str, split: str) -> list[GoldPair]:
    return read_gold(folder, split)


@st.cache_data(max_entries=256, show_spinner=False)
def word_attention_cached(path: str, english: tuple, french: tuple, shift: bool = False):
    return word_attention(ui.models.load_path(path), english, french, shift=shift)


@st.cache_data(max_entries=256, show_spinner=False)
def word_attention_heads_cached(path: str, english: tuple, french: tuple, shift: bool = False):
    return word_attention(ui.models.load_path(path), english, french, heads=True, shift=shift)


@st.cache_data(max_entries=32, show_spinner=False)
def head_aer_cached(path: str, folder: str, split: str, rule: str) -> dict:
    """AER of every layer x head of a Transformer on a gold set, with `rule` (s2s.alignment.head_scores);
    the pairs longer than the model's positions left out, said in `note`."""
    tr = ui.models.load_path(path)
    every = gold_pairs(folder, split)
    pairs, skipped = pairs_that_fit(tr, every)
    note = skipped_note(tr, skipped, len(every)) + "." if skipped else ""
    if not pairs:
        raise InputError(note)
    t0 = time.perf_counter()
    heads = [word_attention(tr, g.english, g.french, heads=True, shift=shifted(rule)) for g in pairs]
    runs = head_scoring_runs()
    runs["rate"][path] = (time.perf_counter() - t0) / max(1, gold_words(pairs))
    runs["done"][(path, folder, split, rule)] = True
    while len(runs["done"]) > 32:                  # as many as the cache keeps
        runs["done"].pop(next(iter(runs["done"])))
    table = head_scores(heads, pairs, rule)
    mean = score([links(head_or_mean(w), rule) for w in heads], pairs)
    return {"aer": [[s.aer for s in row] for row in table], "best": best_head(table), "mean_aer": mean.aer,
            "pairs": len(pairs), "note": note}


@st.cache_resource
def head_scoring_runs() -> dict:
    """What head_aer_cached has run, shared by every session: "done", its keys (path, folder,
    split, rule) run (not asked again); "rate", each model's measured seconds per gold word."""
    return {"done": {}, "rate": {}}


def gold_words(pairs) -> int:
    """Words of both sides of every gold pair."""
    return sum(len(g.english) + len(g.french) for g in pairs)


def head_scoring_estimate(path: str, tr, pairs) -> tuple[float, str]:
    """Seconds scoring every layer x head on the gold `pairs` should take (each pair forced through
    the model once, every head kept), and what the figure comes from: the model's rate measured
    on an earlier scoring, else its size (size_estimate: the same cost per word as a corpus, 11.6 s
    for the opus-mt-shaped Marian on the 37 trial pairs, measured 2026-11-28 beside other work)."""
    words = gold_words(pairs)
    rate = head_scoring_runs()["rate"].get(path)
    if rate is not None:
        return rate * words, "from its speed on an earlier scoring here"
    return size_estimate(tr, words)


@st.cache_data(max_entries=64, show_spinner="Reading the model's contributions…")
def contributions_cached(path: str, text: str, reference: str | None, methods: tuple[str, ...] | None = None):
    """The one-pass methods (s2s.contributions) for the sentence, every one or `methods`: what
    draws at once."""
    return explain_contributions(ui.models.load_path(path), text, reference, methods)


# Value zeroing recomputes each decoder layer's FFN for every (output, source) pair: S x T rows,
# where the other methods cost about one pass. On an opus-mt-sized model that is most of the
# time before the first map (2.5 of 4.4 s on the bench sentence, docs/speed.md), so a Hugging
# Face model's value zeroing runs when it is chosen, not before the weights are drawn.
DEFERRED = ("value_zeroing",)


@st.cache_resource
def deferred_runs() -> dict:
    """The DEFERRED methods run so far, by (path, text, reference, method), shared by every
    session: once run on a sentence, a method stays in its contributions (the τ line names it)
    when another method is shown. As many as contributions_cached keeps."""
    return {}


def one_pass(path: str, text: str, reference: str | None, hub: bool, method: str):
    """contributions_cached for the page: for a hub model all but DEFERRED, joined by `method`'s
    own run when `method` is one of them, and by every other of them already run on this sentence."""
    if not hub:
        return contributions_cached(path, text, reference)
    tr = ui.models.load_path(path)
    first = tuple(m for m in CONTRIBUTION_METHODS if m not in DEFERRED and applies(tr, m))
    c = contributions_cached(path, text, reference, first)
    runs = deferred_runs()
    for late_method in DEFERRED:
        key = (path, text, reference, late_method)
        if applies(tr, late_method) and (late_method == method or key in runs):
            late = contributions_cached(path, text, reference, (late_method,))
            c = replace(c, layers={**c.layers, **late.layers},
                        seconds={**c.seconds, late_method: late.seconds[late_method]})
            runs[key] = True
            while len(runs) > 64:
                runs.pop(next(iter(runs)))
    return c


@st.cache_resource
def attribution_store() -> dict:
    """The gradient attributions run so far, shared by every session (a run asked for once is
    there for the next reader of the same sentence), the STORED most recent."""
    return {}


STORED = 64


def attribution(path: str, text: str, reference: str | None, method: str, on_progress=None) -> dict:
    """One gradient attribution of the forced output contributions_cached explains, as the
    map shows it (|a_ij| over its row's sum), and its seconds; `on_progress(share done, stage)`
    is called as it goes (s2s.attributions: what the run is doing, from its start). Not
    st.cache_data: a progress bar drawn from inside a cached function cannot be replayed, so the
    results are kept in attribution_store instead."""
    from s2s import attributions as attr
    store = attribution_store()
    key = (path, text, reference, method)
    if key in store:
        return store[key]
    tr = ui.models.load_path(path)
    c = one_pass(path, text, reference, hasattr(tr.model, "hf"), "weights")     # the forced output, cached
    src = torch.tensor([attr.source_ids(tr, text)], device=tr.device)
    tgt = torch.tensor(c.target_ids, device=tr.device)
    t0 = time.perf_counter()
    if method == "grad_x_input":
        a = attr.grad_x_input(tr.model, src, tgt)
    elif method == "integrated_gradients":
        a, _ = attr.integrated_gradients(tr.model, src, tgt, on_progress=on_progress)
    else:
        a = attr.leave_one_out(tr.model, src, tgt, on_progress=on_progress)
    store[key] = {"matrix": normalised(np.abs(a)), "raw": a, "seconds": time.perf_counter() - t0}
    while len(store) > STORED:
        store.pop(next(iter(store)))
    return store[key]


# attribution_estimate's calibration: an on-demand run's seconds per unit of attribution_work (one-pass
# trace second x output piece for integrated gradients, x source piece + 1 for leave-one-out), by kind
# of model: the medians of `python tools/calibrate_attributions.py --sentences 4` (en-fr-additive,
# en-fr-transformer, the opus-mt-shaped Marian; four sentences each, one thread), 2-core machine,
# 2026-11-28, with other work beside it (docs/speed.md)
IG_PASSES = {"recurrent": 3.0, "transformer": 18.0, "hub": 4.6}
LOO_PASSES = {"recurrent": 0.78, "transformer": 0.73, "hub": 0.57}


def attribution_work(c, method: str) -> float:
    """What an on-demand attribution's time grows with, in trace seconds x pieces: the sentence's
    one-pass trace by the same model (its size and this server's speed in one number, from
    `c`, the page's contributions) times its output pieces for integrated gradients (a backward
    pass per output piece and point on the path), times its source pieces + 1 for leave-one-out
    (one forced pass of the sentence and of each variant without one piece)."""
    trace_s = c.seconds.get("trace", 0.1)
    if method == "integrated_gradients":
        return trace_s * len(c.target_tokens)
    return trace_s * (len(c.source_tokens) + 1)


def attribution_estimate(c, method: str, kind: str) -> float:
    """Seconds an on-demand attribution should take here: attribution_work times the factor
    measured for this kind of model ("recurrent", "transformer" or "hub"), IG_PASSES[kind] for
    integrated gradients, LOO_PASSES[kind] for leave-one-out."""
    return (IG_PASSES if method == "integrated_gradients" else LOO_PASSES)[kind] * attribution_work(c, method)


@st.cache_data(max_entries=64, show_spinner="Replacing the attention…")
def counterfactual_cached(path: str, text: str, step: int, kind: str, epsilon: float, target: tuple):
    return counterfactual(ui.models.load_path(path), text, step, kind, epsilon=epsilon, target=list(target))


@st.cache_data(max_entries=8, show_spinner=False)
def corpus_weights_cached(path: str, pairs: tuple, shift: bool, heads: bool) -> list:
    """corpus_weights, its run recorded: the key in corpus_runs, the model's seconds a word in
    its rate."""
    t0 = time.perf_counter()
    out = corpus_weights(ui.models.load_path(path), pairs, shift, heads)
    runs = corpus_runs()
    runs["done"][(path, pairs, shift, heads)] = True
    while len(runs["done"]) > 8:                   # as many as the cache keeps
        runs["done"].pop(next(iter(runs["done"])))
    runs["rate"][path] = (time.perf_counter() - t0) / max(1, corpus_words(pairs))
    return out


@st.cache_resource
def corpus_runs() -> dict:
    """What Your corpus has run, shared by every session: "done", the corpus_weights_cached keys
    run (a reader who asked for a corpus, or another reader of it, is not asked again); "rate",
    each model's measured seconds per word on this server."""
    return {"done": {}, "rate": {}}


# Your corpus, and the gold tab's every layer x head, run at once when they should take at most
# CORPUS_ASK_S; past that, or for a Hugging Face model, they wait for a button that says how long.
# Before a model's first run the time is estimated from its size: CORPUS_S_PER_PARAM_WORD seconds
# per parameter per word (English + French), from an opus-mt-sized Marian (75 M parameters) on the
# 37 trial pairs (1,382 words): 11.5 s on the 2-core machine (issue #54; 7.6 s measured here,
# 2026-11-28, one thread beside other work). The shipped models: 0.25-0.45 s measured, 0.6-1.2 s
# estimated. Every head of each trial pair forced one by one (head_aer_cached), the same day:
# 11.6 s for that Marian, 0.57 s for en-fr-transformer (7.6 M parameters; 1.2 s estimated).
CORPUS_ASK_S = 2.0
CORPUS_S_PER_PARAM_WORD = 1.1e-10


def corpus_words(pairs) -> int:
    """Words of both sides of every pair (a line that could not be read has none)."""
    return sum(len(p[0]) + len(p[1]) for p in pairs if p)


def corpus_estimate(path: str, tr, pairs) -> tuple[float, str]:
    """Seconds Your corpus should take to force `pairs` through the model, and what the figure
    comes from: the model's rate measured on an earlier corpus, else its size."""
    words = corpus_words(pairs)
    rate = corpus_runs()["rate"].get(path)
    if rate is not None:
        return rate * words, "from its speed on an earlier corpus here"
    return size_estimate(tr, words)


def size_estimate(tr, words: int) -> tuple[float, str]:
    """Seconds forcing `words` words (English + French) through the model should take, from its
    size (CORPUS_S_PER_PARAM_WORD), and what the figure comes from."""
    # a hub model's count as the sidebar and s2s.fetch give it (hub_config.count_parameters: 74.7 M for
    # opus-mt-en-fr's shape, not model.parameters()'s 75.1 M); a shipped model's from its parameters
    params = (getattr(tr, "config", None) or {}).get("parameters") or sum(t.numel() for t in tr.model.parameters())
    return CORPUS_S_PER_PARAM_WORD * params * words, f"from its size, {parameters_text(params)}"


@st.cache_data(max_entries=8, show_spinner=False)
def corpus_head_aer_cached(path: str, pairs: tuple, gold: tuple, rule: str) -> dict:
    table = corpus_head_scores(corpus_weights_cached(path, pairs, shifted(rule), True), gold, rule)
    return {"aer": [[s.aer for s in row] for row in table], "best": best_head(table)}
