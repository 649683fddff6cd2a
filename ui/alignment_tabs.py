"""The Alignment & Explanation page's three tabs, one function each, in the page's order, and
the cached measurements they share.

Each tab gets `tr` the loaded model, `info` its registry row (name, kind, architecture) and
`path` its checkpoint (the caches' key). A tab's widgets keep their state in
st.session_state under the keys the page's address and the tests use. The page runs only
the open tab. The measurements are s2s.alignment (against human word alignments),
s2s.attributions and s2s.contributions (against attributions) and s2s.counterfactual
(counterfactual attention); the figures s2s.figures.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

import ui.address
import ui.models
import ui.show
from s2s.alignment import (
    DEFAULT_RULE,
    RULES,
    GoldError,
    GoldPair,
    best_head,
    head_scores,
    links,
    method_summary,
    pairs_that_fit,
    read_gold,
    score,
    shifted,
    skipped_note,
    word_attention,
)
from s2s.alignment.corpus import (
    corpus_head_scores,
    corpus_weights,
    parse_pharaoh_file,
    pharaoh_gold,
    pharaoh_lines,
    upload_corpus,
    weights_links,
)
from s2s.attention import head_or_mean
from s2s.attributions import METHODS, agreement
from s2s.contributions import ALIGN_METHODS, applies, explain_contributions, normalised
from s2s.contributions import METHODS as CONTRIBUTION_METHODS
from s2s.counterfactual import EPSILON, KINDS, counterfactual
from s2s.export import file_stem, matrix_json, plotly_config
from s2s.figures import (
    contribution_map,
    counterfactual_figure,
    gold_alignment_figure,
    head_aer_figure,
    label_px,
)
from s2s.piece_words import merge_to_words, word_spans
from s2s.text import MAX_CORPUS_BYTES, MAX_CORPUS_PAIRS, InputError, clean_text

ROOT = Path(__file__).resolve().parent.parent
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
RULE_HELP = {"argmax": "each French word linked to the English word it attends to most",
             "threshold": "every link whose weight is at least τ",
             "ratio": "for each French word, the English words that hold the given share of its weight",
             "grow-diag": "links both directions' argmax agree on, grown to neighbours (as statistical aligners "
                          "symmetrise)",
             "shift": "argmax of the attention one step later, where the French word is the decoder's input "
                      "(Chen et al. 2020)"}
KIND_HELP = {"uniform": "every source piece weighted equally",
             "permute": "the model's own weights, shuffled over the source pieces",
             "adversarial": "as different from α_j as possible (Jensen-Shannon) while the next-token distribution "
                            "moves by at most ε (total variation)"}
METHOD_LABELS = {"weights": "weights", "norm": "norm", "alti": "ALTI+", "rollout": "rollout",
                 "value-zeroing": "value zeroing", "grad-x-input": "grad × input", "ig": "integrated gradients",
                 "loo": "leave-one-out"}
METHOD_HELP = {"weights": "the cross-attention α_ij (the heatmap's), the mean of the heads.",
               "norm": "‖α_ij f(x_j)‖: the weight times the size of what source piece j sends (Kobayashi et al. "
                       "2020), summed over the heads.",
               "alti": "each source piece's share of the output through attention, the residual and the layer norms, "
                       "rolled out through the encoder and the decoder (Ferrando et al. 2022).",
               "rollout": "the head-mean weights with the residual as ½ I, multiplied through the encoder and the "
                          "decoder (Abnar & Zuidema 2020). Its share from the source is 1 − 0.5^l after decoder "
                          "layer l for every word of every sentence, by the method's construction (each cross block "
                          "keeps half of the residual), not a measurement: no bars.",
               "value-zeroing": "how far the layer's output turns (1 − cos) when source piece j's value is set to "
                                "zero in that layer (Mohebbi et al. 2023); under 1e-5 counts as 0 (float noise, "
                                "inseq's floor).",
               "grad-x-input": "∂ log p(y_j)/∂x_i · x_i, one batched backward pass.",
               "ig": "gradient × input along the path from zero embeddings (Sundararajan et al. 2017, captum).",
               "loo": "the fall in log p(y_j) when piece i becomes <unk>."}
# attribution_estimate's calibration: an on-demand run's seconds per unit of attribution_work (one-pass
# trace second x output piece for integrated gradients, x source piece + 1 for leave-one-out), by kind
# of model: the medians of `python tools/calibrate_attributions.py --sentences 4` (en-fr-additive,
# en-fr-transformer, the opus-mt-shaped Marian; four sentences each, one thread), 2-core machine,
# 2026-11-28, with other work beside it (docs/speed.md)
IG_PASSES = {"recurrent": 3.0, "transformer": 18.0, "hub": 4.6}
LOO_PASSES = {"recurrent": 0.78, "transformer": 0.73, "hub": 0.57}
CORPUS_SOURCES = {"example": "Example: the 37 Hansards trial pairs and their gold", "upload": "Upload a file",
                  "paste": "Paste a few pairs"}
# a link scrolls the tab bar just below the header (~64-104 px at 1280 x 720): the gold figure, the
# tab's first element beside the choices (from ~136 px), has what is left of 720 px
GOLD_PX = 576
EXAMPLE = "She has a big black dog."
EXAMPLE_REFERENCE = "Elle a un gros chien noir."


def pair_export(model: str, english, french, weights, rule: str, predicted, gold, what: str) -> str:
    """One pair's word attention, links and (with gold) scores, as JSON that says what it is."""
    out = {"model": model, "english": list(english), "french": list(french), "rule": rule, "matrix": what,
           "attention": matrix_json(weights, french, english),
           "links": sorted([e, f] for e, f in predicted), "links_format": "[English word, French word], from 0"}
    if gold is not None:
        s = score([predicted], [gold])
        out |= {"gold_sure": sorted(map(list, gold.sure)), "gold_possible": sorted(map(list, gold.possible)),
                "aer": round(s.aer, 6), "precision": round(s.precision, 6), "recall": round(s.recall, 6)}
    return json.dumps(out, ensure_ascii=False, indent=1)


@st.cache_data(show_spinner=False)
def gold_pairs(folder: str, split: str) -> list[GoldPair]:
    return read_gold(folder, split)


@st.cache_data(max_entries=256, show_spinner=False)
def word_attention_cached(path: str, english: tuple, french: tuple, shift: bool = False):
    return word_attention(ui.models.load_path(path), english, french, shift=shift)


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
    heads = [word_attention(tr, g.english, g.french, heads=True, shift=shifted(rule)) for g in pairs]
    table = head_scores(heads, pairs, rule)
    mean = score([links(head_or_mean(w), rule) for w in heads], pairs)
    return {"aer": [[s.aer for s in row] for row in table], "best": best_head(table), "mean_aer": mean.aer,
            "pairs": len(pairs), "note": note}


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


def one_pass(path: str, text: str, reference: str | None, hub: bool, method: str):
    """contributions_cached for the page: for a hub model all but DEFERRED, joined by `method`'s
    own run when `method` is one of them."""
    if not hub:
        return contributions_cached(path, text, reference)
    tr = ui.models.load_path(path)
    first = tuple(m for m in CONTRIBUTION_METHODS if m not in DEFERRED and applies(tr, m))
    c = contributions_cached(path, text, reference, first)
    if method in DEFERRED and applies(tr, method):
        late = contributions_cached(path, text, reference, (method,))
        c = replace(c, layers={**c.layers, **late.layers}, seconds={**c.seconds, method: late.seconds[method]})
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
    src = attr.torch.tensor([attr.source_ids(tr, text)], device=tr.device)
    tgt = attr.torch.tensor(c.target_ids, device=tr.device)
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


PACE_FROM = 0.25     # the progress bar's time left: from the run's own pace too, once this share is done


def progress_text(label: str, done: float, stage: str, spent: float, estimate: float) -> str:
    """The progress bar's line: the method, what it is doing (s2s.attributions' stage text), the
    share done and the time left: the estimate's remainder, or the run's own pace once PACE_FROM
    of it is done, whichever is longer (the shares are typical, not this run's: a trained
    Transformer's integrated gradients spend most of their time refining after the first round,
    which the share gives 90%); at least 1 s."""
    left = estimate - spent
    if done >= PACE_FROM:
        left = max(left, spent / done * (1 - done))
    return f"{label}: {stage} · {done:.0%}, about {max(1, round(left))} s left"


def explanation_taus(c, offered, loo: np.ndarray, ran: dict[str, np.ndarray]) -> dict[str, float]:
    """Is it an explanation: the median Kendall τ per output piece between each method's map and
    leave-one-out's `loo` (|a_ij|, rows normalised), by label, in the order of `offered` (the
    method list's names): every one-pass method `c` holds (its last layer) and every gradient
    attribution in `ran` ({method: map}, those run so far); leave-one-out not against itself."""
    taus = {}
    for m in offered:
        method = ALIGN_METHODS[m]
        shown = c.matrix(method) if method in c.layers else ran.get(method) if method != "leave_one_out" else None
        if shown is not None:
            taus[METHOD_LABELS[m]] = float(pd.Series(agreement(shown, loo)[0]).median())
    return taus


def tau_caption(taus: dict[str, float]) -> str:
    """The line under the map that gives explanation_taus."""
    return ("Is it an explanation? Median Kendall τ per output piece between each method's row (the last layer) "
            "and leave-one-out's |a_ij| on this sentence: " + ", ".join(f"{k} {v:+.2f}" for k, v in taus.items())
            + ".")


@st.cache_data(max_entries=64, show_spinner="Replacing the attention…")
def counterfactual_cached(path: str, text: str, step: int, kind: str, epsilon: float, target: tuple):
    return counterfactual(ui.models.load_path(path), text, step, kind, epsilon=epsilon, target=list(target))


def attention_models() -> list:
    """The shipped models with attention, and the hub models the operator offers."""
    return [i for i in ui.models.translation_models() + ui.models.hub_models() if i.has_attention]


def within(value, low, high):
    """`value` clamped to [low, high] (a link's number, or one kept from a longer list)."""
    return max(low, min(value, high))


def words_of(text: str, what: str) -> tuple[str, ...]:
    words = tuple(clean_text(text, what=what).split())
    if len(words) > 80:
        raise InputError(f"The {what} has {len(words)} words; keep it under 80.")
    return words


def heads_of_model(name: str, path: str, source: str, english, french, rule: str, gold) -> None:
    """A Transformer's every layer x head scored as an aligner on the chosen gold set (a
    layers x heads AER heatmap, the best head outlined), and that head's links on this pair."""
    folder = str(TRIAL if source == "trial" else hansards_test_folder())
    n = len(gold_pairs(folder, source))
    with st.spinner(f"Scoring every layer × head on the {n} {source} pairs…"):
        try:
            h = head_aer_cached(path, folder, source, rule)
        except InputError as e:
            st.error(str(e))
            return
    l, k = h["best"]
    c1, c2 = st.columns([2, 3])
    with c1:
        ui.show.plotly_chart(head_aer_figure(np.array(h["aer"]), (l, k)), key="head_aer", width="stretch",
                        config=plotly_config(file_stem("head-aer", name, source, rule)))
        st.caption(f"AER of each layer × head's cross-attention read as links ({rule}) over the {h['pairs']} "
                   f"{source} pairs; lower is better. Outlined: the best, layer {l + 1} · head {k + 1} "
                   f"(AER {h['aer'][l][k]:.3f}); the last layer's head mean, the matrix the other views show: "
                   f"{h['mean_aer']:.3f}." + (f" {h['note']}" if h["note"] else ""))
    with c2:
        try:
            w = word_attention_heads_cached(path, tuple(english), tuple(french), shifted(rule))[l, k]
        except InputError:      # this pair is longer than the model's positions: said above, by the pair's view
            return
        predicted = links(w, rule)
        ui.show.plotly_chart(gold_alignment_figure(english, french, w, set(gold.sure), set(gold.possible), predicted,
                                              words="gold words"), width="stretch", key="best_head_figure",
                        config=plotly_config(file_stem("alignment", name, f"L{l + 1}H{k + 1}", rule,
                                                       " ".join(english)[:40])))
        st.caption(f"Layer {l + 1} · head {k + 1} alone on this pair: {score([predicted], [gold]).aer:.3f} AER "
                   "(crosses: its links; red: the annotators').")


@st.cache_data(max_entries=256, show_spinner=False)
def word_attention_heads_cached(path: str, english: tuple, french: tuple, shift: bool = False):
    return word_attention(ui.models.load_path(path), english, french, heads=True, shift=shift)


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


# Your corpus runs at once when it should take at most CORPUS_ASK_S; past that, or for a Hugging
# Face model, it waits for a button that says how long. Before a model's first corpus the time
# is estimated from its size: CORPUS_S_PER_PARAM_WORD seconds per parameter per word (English +
# French), from an opus-mt-sized Marian (75 M parameters) on the 37 trial pairs (1,382 words):
# 11.5 s on the 2-core machine (issue #54; 7.6 s measured here, 2026-11-28, one thread beside
# other work). The shipped models: 0.25-0.45 s measured, 0.6-1.2 s estimated.
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
    # a hub model's count as the sidebar and s2s.fetch give it (hub_config.count_parameters: 74.7 M for
    # opus-mt-en-fr's shape, not model.parameters()'s 75.1 M); a shipped model's from its parameters
    params = (getattr(tr, "config", None) or {}).get("parameters") or sum(t.numel() for t in tr.model.parameters())
    return CORPUS_S_PER_PARAM_WORD * params * words, f"from its size, {params / 1e6:,.1f} M parameters"


def about(seconds: float) -> str:
    """A duration as a button says it: "about 12 s", "about 3 min", "under 1 s"."""
    return ("under 1 s" if seconds < 1 else f"about {seconds:.0f} s" if seconds < 90
            else f"about {seconds / 60:.0f} min")


@st.cache_data(max_entries=8, show_spinner=False)
def corpus_head_aer_cached(path: str, pairs: tuple, gold: tuple, rule: str) -> dict:
    table = corpus_head_scores(corpus_weights_cached(path, pairs, shifted(rule), True), gold, rule)
    return {"aer": [[s.aer for s in row] for row in table], "best": best_head(table)}


MATRIX_WHAT = ("word-level cross-attention, French words (rows) x English words (columns): each English word "
               "the sum of its pieces, each French word the mean of its pieces' rows")


def reading_of(head, transformer: bool) -> str:
    if not transformer:
        return ""
    return "; the last decoder layer's head mean" if head is None else f"; layer {head[0] + 1}, head {head[1] + 1}"


def method_table(model: str) -> None:
    """Is each method an alignment, is it an explanation: the measured table for this model."""
    aligned, explained = ui.models.results_file(METHOD_RESULTS), ui.models.results_file(METHOD_EXPLANATION_RESULTS)
    rows = method_summary(aligned, explained, model)
    st.subheader("Each method: an alignment? an explanation?")
    if not rows:
        st.caption(f"Measured for the shipped models only (`results/alignment_methods.json`). For {model}: "
                   f"`python -m s2s.alignment --model MODEL --gold DIR --method norm --layers` (any method).")
        return
    label = {name: METHOD_LABELS.get(name, name) for name in ALIGN_METHODS}
    dash = "—"       # text columns: a missing figure reads as a dash, not "None"
    fmt = lambda v, f: dash if v is None else format(v, f)       # noqa: E731
    table = pd.DataFrame([{"method": label[r["method"]], "best layer": str(r["layer"] or dash),
                           "AER grow-diag": fmt(r["aer_grow_diag"], ".3f"), "AER argmax": fmt(r["aer_argmax"], ".3f"),
                           "τ vs leave-one-out": fmt(r["tau_vs_loo"], "+.2f"),
                           "same top": dash if r["same_top_as_loo"] is None else f"{100 * r['same_top_as_loo']:.0f}%"}
                          for r in rows])
    ui.show.table(table, width="stretch")
    eflomal = next((r["aer"] for r in (ui.models.results_file(ALIGNMENT_RESULTS) or {}).get("rows", [])
                    if r.get("model") == "eflomal" and r.get("rule") == "grow-diag"), None)
    head = next((r.get("best_head") for r in aligned.get("rows", []) if r.get("model") == model
                 and r.get("best_head")), None) if aligned else None
    missing = [label[m] for mod, m in (aligned or {}).get("not_measured", {}).get("rows", []) if mod == model]
    st.caption(
        f"**AER** (lower: closer to the human links) on the {aligned['sentences']} Hansards test pairs, at each "
        "method's best decoder layer; "
        + (f"the weights' best single head: {head['aer']:.3f} grow-diag (layer {head['layer']}, head {head['head']}); "
           if head else "")
        + (f"eflomal, a statistical aligner: {eflomal:.3f}. " if eflomal is not None else "")
        + "**τ vs leave-one-out**: median Kendall τ per output piece between the method's row (last layer) and "
          "what removing each source piece costs; **same top**: steps where both rank the same piece first"
        + (f", over {explained['rows'][0]['sentences']} Tatoeba test sentences. " if explained else ". ")
        + ("A dash: not measured" + (f" ({', '.join(missing)}: see the file)" if missing else "")
           + ", or leave-one-out against itself. " if (table == dash).any().any() else "")
        + "Published, on their own pair: Kobayashi et al. (2020), German–English, layer 2, norm 25.4 vs weights "
          f"30.3 AER. Written by `{aligned['command']}`"
        + (f" and `{explained['command']}`." if explained else "."))


def contributions_export(model: str, text: str, c, method: str, xs, ys, shown, share, layer: int | None) -> str:
    """The map shown (words), and every one-pass method's piece-level matrices and source
    shares, as JSON that says what it is."""
    out = {"model": model, "english": text, "french": c.translation, "forced_from": c.forced_from,
           "shown": {"method": method, "layer": None if layer is None else layer + 1,
                     "matrix": "output words (rows) x source words (columns), merged from the pieces as the "
                               "heatmap merges them, each row a distribution over the source",
                     "values": matrix_json(shown, ys, xs),
                     "source_share": None if share is None else [round(float(v), 6) for v in share]},
           "pieces": "below: output pieces (rows) x source pieces (columns), each row a distribution over the "
                     "source; layers: one per decoder layer, from 1",
           **c.to_json()}
    return json.dumps(out, ensure_ascii=False, indent=1)


def uploaded_corpus() -> tuple[list, list | None, str] | None:
    """The pairs of the uploaded file, its gold if one is uploaded too, and the file's stem; an
    error shown (and None) for a file over the limits or not in the format."""
    up = st.file_uploader("Pairs: `English<TAB>French`, a pair a line", key="corpus_file",
                          help="The words are each side's whitespace tokens, as in the Pharaoh format's "
                               "numbering. A line without a tab or with an empty side is left unaligned.")
    gold_up = st.file_uploader("Gold links (optional): a line per pair, `i-j` sure, `i?j` possible",
                               key="corpus_gold", help="English word i, French word j, from 0 (the Pharaoh "
                                                       "format, as fast_align and eflomal write it).")
    if up is None:
        st.info("Upload a file of pairs, or choose the example above.")
        return None
    try:
        pairs = upload_corpus(up.getvalue(), up.name)
        gold = None
        if gold_up is not None:
            raw = gold_up.getvalue()
            if len(raw) > MAX_CORPUS_BYTES:
                raise InputError(f"{gold_up.name} is {len(raw) / 1000:,.0f} KB; the limit here is "
                                 f"{MAX_CORPUS_BYTES / 1000:,.0f} KB")
            gold = pharaoh_gold(parse_pharaoh_file(raw, gold_up.name), pairs, gold_up.name)
    except InputError as e:
        st.error(str(e))
        return None
    return pairs, gold, Path(up.name).stem


def pasted_corpus() -> tuple[list, None, str] | None:
    """The pairs pasted in the box (a tab, as a spreadsheet's two columns paste, or ` ||| `
    between the sides), within the same limits as a file; an error shown (and None) otherwise."""
    text = st.text_area("Pairs: English, a tab (or ` ||| `), French; a pair a line", key="corpus_text", height=120,
                        placeholder="The cat sleeps.\tLe chat dort.\nI like tea. ||| J'aime le thé.",
                        help="Two columns copied from a spreadsheet paste with a tab between them; a typed tab "
                             "moves to the next field, so type ` ||| ` instead.")
    if not text.strip():
        st.info("Paste pairs in the box, a pair a line.")
        return None
    lines = [line.replace(" ||| ", "\t") if "\t" not in line else line for line in text.strip("\n").split("\n")]
    try:
        pairs = upload_corpus("\n".join(lines).encode("utf-8"), "the pasted text")
    except InputError as e:
        st.error(str(e))
        return None
    return pairs, None, "pasted-pairs"


def corpus_view(name: str, path: str, transformer: bool, tr=None, hub: bool = False) -> None:
    """Your corpus: links for every pair of a file, a download, a sentence browser and, with
    gold links, AER (also per layer x head for a Transformer). A corpus that should take over
    CORPUS_ASK_S, or any for a Hugging Face model (`hub`), waits for a button that says how
    long (corpus_estimate, from `tr`); one run before, by any reader, is not asked again."""
    S = st.session_state
    shown = ui.models.display_name(name)      # a hub model by its name, not the server's folder
    left, right = st.columns([1, 3])
    with left:
        source = st.radio("Corpus", list(CORPUS_SOURCES), key="corpus_source", format_func=CORPUS_SOURCES.get)
        rule = st.selectbox("Links from attention", RULES, index=RULES.index(DEFAULT_RULE), key="corpus_rule",
                            help="How weights become links: " + "; ".join(f"**{r}**: {h}"
                                                                        for r, h in RULE_HELP.items()))
        if source == "upload":
            got = uploaded_corpus()
        elif source == "paste":
            got = pasted_corpus()
        else:
            gold = gold_pairs(str(TRIAL), "trial")
            got = [(g.english, g.french) for g in gold], gold, "hansards-trial"
        st.caption(f"Limits here: {MAX_CORPUS_PAIRS:,} pairs and {MAX_CORPUS_BYTES // 1000:,} KB, a file or a paste "
                   "(the uploader's own 1 MB is the smallest limit Streamlit can set). The command line has none: "
                   "docs/corpus-alignment.md.")
    if got is None:
        return
    pairs, gold, stem = got
    with right:
        seconds = None
        if tr is not None and (path, tuple(pairs), shifted(rule), transformer) not in corpus_runs()["done"]:
            seconds, basis = corpus_estimate(path, tr, pairs)
            if hub or seconds > CORPUS_ASK_S:        # issue #54: 37 pairs took 11.5 s on opening the tab
                st.info(f"Aligning these {len(pairs)} pairs forces each through {shown}: {about(seconds)} on this "
                        f"server ({basis}).")
                if not st.button(f"Align {len(pairs)} pairs ({about(seconds)})", key="corpus_run", type="primary"):
                    return
        with st.spinner(f"Forcing {len(pairs)} pairs through {shown}…"
                        + (f" ({about(seconds)})" if seconds is not None and seconds >= 1 else "")):
            weights = corpus_weights_cached(path, tuple(pairs), shifted(rule), transformer)
        head = None
        if transformer:
            L, H = next(w.shape[:2] for w in weights if w is not None)
            choices = ["mean"] + [f"{l}-{h}" for l in range(L) for h in range(H)]
            if S.get("corpus_head") not in choices:
                S["corpus_head"] = "mean"
            reading = st.selectbox("Attention read", choices, key="corpus_head",
                                   format_func=lambda c: "last layer, head mean" if c == "mean" else
                                   f"layer {int(c.split('-')[0]) + 1} · head {int(c.split('-')[1]) + 1}")
            if reading != "mean":
                head = tuple(int(x) for x in reading.split("-"))
        found = weights_links(weights, rule, head)
        what = "mean" if head is None else f"L{head[0] + 1}H{head[1] + 1}"
        skipped = sum(f is None for f in found)
        corpus_stem = file_stem(stem, name, rule, what if transformer else "")
        rows = [{"pair": n, "English": " ".join(p[0]) if p else "", "French": " ".join(p[1]) if p else "",
                 "links": None if f is None else len(f)} for n, (p, f) in enumerate(zip(pairs, found), 1)]
        if gold is not None:
            s = score([f or set() for f in found], gold)
            c = st.columns(4)
            c[0].metric("AER (whole corpus)", f"{s.aer:.3f}", help="1 − (|A∩S| + |A∩P|) / (|A| + |S|), summed "
                                                                   "over every pair before dividing")
            c[1].metric("Precision", f"{s.precision:.3f}", help="|A∩P| / |A|")
            c[2].metric("Recall", f"{s.recall:.3f}", help="|A∩S| / |S|")
            c[3].metric("Links: model / sure", f"{s.links:,} / {s.sure:,}")
            for r, f, g in zip(rows, found, gold):
                one = score([f or set()], [g])
                r.update(AER=one.aer, precision=one.precision, recall=one.recall)
        st.caption(f"{len(pairs) - skipped} of {len(pairs)} lines aligned by {shown} ({rule}"
                   + ("" if not transformer else ", " + ("the last layer's head mean" if head is None else
                                                         f"layer {head[0] + 1} · head {head[1] + 1}")) + ")"
                   + (f"; {skipped} could not be (no tab, an empty side, not UTF-8 or too long): empty lines "
                      "in the download" if skipped else "") + ".")
        d = st.columns([3, 3, 2], vertical_alignment="bottom")
        d[0].download_button("⬇ Links (Pharaoh)", pharaoh_lines(found),
                             file_name=f"{corpus_stem}_links.txt", mime="text/plain", key="corpus_links_download")
        d[1].download_button("⬇ Per-pair table (CSV)", pd.DataFrame(rows).to_csv(index=False),
                             file_name=f"{corpus_stem}_pairs.csv", mime="text/csv", key="corpus_table_download")
        S["corpus_pair"] = within(S.get("corpus_pair", 1), 1, len(pairs))      # a link's, or another corpus's
        n = d[2].number_input(f"Pair (1–{len(pairs)})", 1, len(pairs), key="corpus_pair")
        i = int(n) - 1
        if found[i] is None:
            st.warning(f"Line {i + 1} could not be aligned: no tab, an empty side, not UTF-8, or too long for "
                       f"{shown}.")
        else:
            w = head_or_mean(weights[i], *(head or ()))
            g = gold[i] if gold is not None else None
            if g is not None:
                st.caption(f"Pair {i + 1}: AER {rows[i]['AER']:.3f}, precision {rows[i]['precision']:.3f}, "
                           f"recall {rows[i]['recall']:.3f}.")
            fig = gold_alignment_figure(pairs[i][0], pairs[i][1], w, set(g.sure) if g else set(),
                                        set(g.possible) if g else set(), found[i],
                                        words="gold words" if g else "your words")
            pair_stem = f"{corpus_stem}_pair{i + 1}"
            ui.show.plotly_chart(fig, width="stretch", key="corpus_figure", config=plotly_config(pair_stem))
            ui.show.chart_downloads(fig, pair_stem, "corpus_pair",
                                    pair_export(name, pairs[i][0], pairs[i][1], w, rule, found[i], g,
                                                MATRIX_WHAT + reading_of(head, transformer)))
    # the scores first: the sentences are long, and at 1280 px they pushed the scores off-screen
    table = pd.DataFrame(rows)
    table = table[[c for c in ("pair", "links", "AER", "precision", "recall") if c in table] + ["English", "French"]]
    ui.show.table(table, width="stretch", height=ui.show.grid_height(len(table), 250),
                  formats={k: "%.3f" for k in ("AER", "precision", "recall")})
    if transformer and gold is not None:
        st.subheader("Every layer × head as an aligner, on this corpus")
        with st.spinner("Scoring every layer × head…"):
            h = corpus_head_aer_cached(path, tuple(pairs), tuple(gold), rule)
        l, k = h["best"]
        c1, _ = st.columns([2, 3])
        ui.show.plotly_chart(head_aer_figure(np.array(h["aer"]), (l, k)), key="corpus_head_aer", width="stretch",
                        config=plotly_config(file_stem("head-aer", stem, name, rule)), where=c1, share=0.5)
        c1.caption(f"AER of each layer × head's links ({rule}) over these {len(pairs)} pairs; lower is better. "
                   f"Outlined: the best, layer {l + 1} · head {k + 1} (AER {h['aer'][l][k]:.3f}).")


# ------------------------------------------------------------------ gold alignments
def human_alignments(tr, info, path: str) -> None:
    """Against human alignments: one pair's attention over its gold links, the pair's AER; a
    Transformer's every head as an aligner; every model on the test set."""
    S, name = st.session_state, info.name
    is_transformer = info.arch == "transformer"
    sources = {"trial": "Trial set (37 pairs)", "typed": "Type a pair"}
    if (hansards_test_folder() / "test.wa").is_file():
        sources = {"trial": sources["trial"], "test": "Test set (447 pairs)", "typed": sources["typed"]}
    if S.get("gold_source") not in sources:
        S["gold_source"] = "trial"
    left, right = st.columns([1, 3])
    with left:
        source = st.radio("Sentence pairs", list(sources), key="gold_source", format_func=sources.get,
                          help="Hansards English–French, hand-aligned by Och & Ney (HLT-NAACL 2003 shared task)."
                               + ("" if "test" in sources else " The 447 test pairs are not in the repository; "
                                  "set S2S_HANSARDS to their folder to browse them here."))
        gold = None
        try:
            if source == "typed":
                # no max_chars: its counter covers the end of the text in a column this narrow;
                # words_of refuses a text over 80 words (or the app's character limit) instead
                en_text = st.text_input("English words", "the house is small .", key="typed_en")
                fr_text = st.text_input("French words", "la maison est petite .", key="typed_fr")
                english, french = words_of(en_text, "English"), words_of(fr_text, "French")
            else:
                pairs = gold_pairs(str(TRIAL if source == "trial" else hansards_test_folder()), source)
                S["gold_pair"] = within(S.get("gold_pair", 4), 1, len(pairs))
                n = st.number_input(f"Pair (1–{len(pairs)})", 1, len(pairs), key="gold_pair")
                gold = pairs[int(n) - 1]
                english, french = gold.english, gold.french
            rule = st.selectbox("Links from attention", RULES, index=RULES.index(DEFAULT_RULE), key="rule",
                                help="How weights become links: " + "; ".join(f"**{r}**: {h}"
                                                                            for r, h in RULE_HELP.items()))
        except (InputError, GoldError) as e:
            st.error(str(e))
            english = None
        scores = st.container()      # this pair's AER and co., under the choices: the figure gets the height
    with right:
        if english:
            try:
                w = word_attention_cached(path, tuple(english), tuple(french), shifted(rule))
            except InputError as e:
                st.error(str(e))
                w = None
            if w is not None:
                predicted = links(w, rule)
                sure = set(gold.sure) if gold else set()
                possible = set(gold.possible) if gold else set()
                if gold is not None:
                    s = score([predicted], [gold])
                    c = scores.columns(2, gap="small")
                    c[0].metric("AER", f"{s.aer:.3f}", help="This pair's alignment error rate, "
                                                            "1 − (|A∩S| + |A∩P|) / (|A| + |S|); 0 is perfect")
                    c[1].metric("Links A/S", f"{len(predicted)}/{len(sure)}",
                                help="|A|, the model's links, and |S|, the annotators' Sure links")
                    c[0].metric("Precision", f"{s.precision:.3f}", help="|A∩P| / |A|")
                    c[1].metric("Recall", f"{s.recall:.3f}", help="|A∩S| / |S|")
                else:
                    st.caption("A typed pair has no human links: only the model's are drawn.")
                # as tall as a link's first screen has room for below the tab bar (the tab's first
                # thing, beside the choices): GOLD_PX
                fig = gold_alignment_figure(english, french, w, sure, possible, predicted,
                                            words="gold words" if gold else "your words",
                                            height=GOLD_PX - (40 if gold is None else 0),
                                            label_size=label_px(ui.show.projector()))
                pair_stem = file_stem("alignment", name, f"{source}{int(n) if gold else ''}", rule,
                                      "" if gold else " ".join(english)[:40])
                with st.container(key="point_gold"):
                    ui.show.plotly_chart(fig, share=0.75, width="stretch", key="gold_figure",
                                         config=plotly_config(pair_stem))
                st.caption(f"Shaded: {ui.models.display_name(name)}'s attention, forced to read "
                           f"{'the gold' if gold else 'your'} French, "
                           "summed over each English word's pieces and averaged over each French word's"
                           + (", each French word read at the step that has it as input (shift)" if shifted(rule)
                              else "") + ". Black "
                           f"crosses: its links ({rule})."
                           + (" Red squares: the annotators' Sure links; light red: Possible." if gold else ""))
                ui.show.chart_downloads(fig, pair_stem, "gold_pair",
                                        pair_export(name, english, french, w, rule, predicted, gold,
                                                    MATRIX_WHAT + reading_of(None, is_transformer)))
    if is_transformer and source != "typed" and english:
        st.subheader("Every layer × head as an aligner")
        heads_of_model(name, path, source, english, french, rule, gold)
    st.subheader("Every model on the test set")
    table = ui.models.results_file(ALIGNMENT_RESULTS)
    if table is None:
        st.info("No `results/alignment.json` yet: `python -m s2s.alignment --gold DIR --table "
                "results/alignment.json` writes it.")
    else:
        rows = [{"aligner": r["model"], "kind": r["kind"], "rule": r["rule"], "AER": r["aer"],
                 "precision": r["precision"], "recall": r["recall"]} for r in table["rows"]]
        # a static table: its cells wrap, where a data grid cut the baseline's long "kind" at 1280 px
        st.table(pd.DataFrame(rows).style.hide(axis="index").format("{:.3f}", subset=["AER", "precision", "recall"]))
        st.caption(f"{table['sentences']} test pairs, lower AER is better. Written by `{table['command']}`.")


# ------------------------------------------------------------------ attention vs attribution
def attention_vs_attribution(tr, info, path: str) -> None:
    """Attention vs attribution: one sentence's contributions by the chosen method beside
    leave-one-out, counterfactual attention at one step, and the test-set figures."""
    S, name = st.session_state, info.name
    left, right = st.columns([1, 3])
    with left:
        text = st.text_area("English", EXAMPLE, key="explain_text", height=90, max_chars=600)
        # the French box follows the English: the example's French left in it after new
        # English is typed translates nothing of it (forcing that pair would explain a
        # mismatch), so it is emptied and the model's own output explained
        S.setdefault("explain_reference", EXAMPLE_REFERENCE)
        if S["explain_reference"].strip() == EXAMPLE_REFERENCE and text.strip() != EXAMPLE:
            S["explain_reference"] = ""
        # no max_chars: its counter covers the end of the text in a column this narrow; a
        # reference over the app's character limit gets clean_text's message instead
        reference = st.text_input("French (optional: explain this instead of the model's translation)",
                                  key="explain_reference")
        offered = [m for m in ALIGN_METHODS if applies(tr, ALIGN_METHODS[m])]
        if S.get("explain_method") not in offered:
            if S.get("explain_method") is not None:
                st.caption(f"{METHOD_LABELS.get(S['explain_method'], S['explain_method'])} does not apply to "
                           f"{name} (a recurrent model: one attention, no stack of blocks); showing the weights.")
            S["explain_method"] = "weights"
        method_name = st.radio("Method", offered, key="explain_method", format_func=METHOD_LABELS.get,
                               help="; ".join(f"**{METHOD_LABELS[m]}**: {METHOD_HELP[m]}" for m in offered))
    method = ALIGN_METHODS[method_name]
    ref = reference.strip() or None
    with right:
        if ref is None:
            st.caption("This explains the model's own greedy output. Type a French translation of your text "
                       "to explain that instead.")
        try:
            c = one_pass(path, text, ref, info.is_hub, method)
        except InputError as err:
            st.error(str(err))
            c = None
        if c is not None:
            ui.show.escaped(c.translation, "1.3rem")
            for typed, whose, target in ((text, "the English", False), (ref, "the French", True)):
                if typed and (unknown := tr.tokenizer.unknown_characters(typed, target)):
                    st.caption(ui.show.unknown_characters_note(unknown, whose))
    e = c           # the counterfactual below reads its tokens
    if c is not None:
        layered = method in c.layers and c.layers[method].shape[0] > 1
        layer = None
        if layered:
            n_layers = c.layers[method].shape[0]
            S["explain_layer"] = int(within(S.get("explain_layer", n_layers), 1, n_layers))
            layer = left.select_slider("Decoder layer", list(range(1, n_layers + 1)), key="explain_layer",
                                       help="The contributions read at this decoder layer's output (ALTI+ and "
                                            "rollout: everything up to it, rolled out).") - 1
        matrix, seconds = None, None
        if method in c.layers:
            matrix = c.matrix(method, layer)
            seconds = c.seconds.get(method, c.seconds.get("trace"))
        else:
            at_once = method == "grad_x_input" or (method == "leave_one_out" and not info.is_hub)
            if at_once or (path, text, ref, method) in attribution_store():
                with st.spinner(f"{METHOD_LABELS[method_name]}…"):
                    a = attribution(path, text, ref, method)
                matrix, seconds = a["matrix"], a["seconds"]
            else:
                kind = "hub" if info.is_hub else ("transformer" if info.arch == "transformer"
                                                              else "recurrent")
                estimate = attribution_estimate(c, method, kind)
                with right:
                    ask = st.empty()          # the offer goes once the run starts: the bar takes its place
                    with ask.container():
                        st.info(f"{METHOD_LABELS[method_name]} runs the model many times: about {estimate:.0f} s "
                                f"for this sentence on this server. The other methods are drawn at once.")
                        clicked = st.button(f"Run {METHOD_LABELS[method_name]}", key="explain_run", type="primary")
                    if clicked:
                        ask.empty()
                        label = METHOD_LABELS[method_name]
                        bar = st.progress(0.0, text=progress_text(label, 0.0, "getting ready", 0.0, estimate))
                        t0 = time.perf_counter()

                        def progress(done: float, stage: str) -> None:     # what the run does, from its start
                            bar.progress(min(done, 1.0),
                                         text=progress_text(label, done, stage, time.perf_counter() - t0, estimate))
                        a = attribution(path, text, ref, method, on_progress=progress)
                        bar.empty()
                        matrix, seconds = a["matrix"], a["seconds"]
        if matrix is not None:
            share = c.source_share.get(method)
            share = None if share is None else share[-1 if layer is None else layer]
            # whole words on both axes, merged as the attention heatmap merges them: a source word
            # the sum of its pieces' columns, an output word the mean of its pieces' rows
            xs, ys, shown = merge_to_words(c.source_tokens, c.target_tokens, matrix)
            if share is not None:
                share = [float(np.mean([share[k] for k in idx])) for _, idx in word_spans(c.target_tokens)]
            # a row of zeros is no distribution: no source piece had a measurable effect there
            unmoved = [y for y, row in zip(ys, np.asarray(shown)) if not np.asarray(row).sum() > 0]
            px = label_px(ui.show.projector())
            longest = max((len(t) for t in xs), default=1)
            fig = contribution_map(xs, ys, shown, METHOD_LABELS[method_name], share,
                                   height=round(60 + 0.62 * px * longest + 1.45 * px * len(ys)))
            stem = file_stem("contributions", name, text[:40], method_name,
                             f"layer{layer + 1}" if layer is not None else "", c.forced_from)
            with right:
                where = (f", decoder layer {layer + 1}" if layer is not None else "")
                st.caption(f"**{METHOD_LABELS[method_name]}**{where}: {METHOD_HELP[method_name]} Forced "
                           f"decoding of the {'reference' if c.forced_from == 'reference' else 'greedy output'} "
                           f"({len(c.target_tokens)} steps, words merged from their pieces); "
                           f"this map took {1000 * (seconds or 0):,.0f} ms."
                           + (" Bars: each output word's share that came from the source; the rest came from "
                              "the French written before it." if share is not None else "")
                           + (f" No measurable effect at this layer for {', '.join(map(repr, unmoved))}: "
                              "those rows are blank." if unmoved else ""))
            # in the right column, beside the method list: on a link's first 1280 x 720 screen
            with right, st.container(key="point_attribution"):
                ui.show.plotly_chart(fig, share=0.75, width="stretch", key="contribution_map",
                                     config=plotly_config(stem))
            with right:
                ui.show.chart_downloads(fig, stem, "attribution", contributions_export(name, text, c, method_name,
                                                                                       xs, ys, shown, share, layer))
            loo = (attribution(path, text, ref, "leave_one_out")
                   if not info.is_hub or (path, text, ref, "leave_one_out") in attribution_store()
                   else None)
            if loo is not None:
                # every gradient attribution that has run on this sentence: grad × input (one pass, run
                # here), integrated gradients once asked for (issue #54: it was left out after its run)
                ran = {m: attribution(path, text, ref, m)["matrix"] for m in ("grad_x_input", "integrated_gradients")
                       if m == "grad_x_input" or (path, text, ref, m) in attribution_store()}
                right.caption(tau_caption(explanation_taus(c, offered, loo["matrix"], ran)))
    if e is not None:         # no heading over nothing when the model or the text cannot be explained
        st.subheader("Counterfactual attention at one step")
        c = st.columns([2, 2, 1])
        if S.get("cf_step") not in range(len(e.target_tokens)):       # a link's step past this output
            S["cf_step"] = 0
        S["cf_eps"] = float(within(S.get("cf_eps", EPSILON), 0.0, 1.0))
        step = c[0].selectbox("Step", range(len(e.target_tokens)), key="cf_step",
                              format_func=lambda j: f"{j}: {e.target_tokens[j]}")
        kind = c[1].radio("Replace α_j by", KINDS, key="cf_kind", horizontal=True,
                          help="; ".join(f"**{k}**: {h}" for k, h in KIND_HELP.items()))
        eps = c[2].number_input("ε (adversarial)", 0.0, 1.0, step=0.01, key="cf_eps", format="%.2f",
                                disabled=kind != "adversarial")
        try:
            cf = counterfactual_cached(path, text, int(step), kind, float(eps), tuple(e.target_ids))
        except InputError as err:
            st.error(str(err))
            cf = None
        if cf is not None:
            ui.show.plotly_chart(counterfactual_figure(e.source_tokens, cf.alpha_before, cf.alpha_after,
                                                  cf.top_before, cf.top_after, kind),
                            width="stretch", key="counterfactual_figure",
                            config=plotly_config(file_stem("counterfactual", name, text[:40], f"step{int(step)}",
                                                           kind)))
            verdict = "stays" if cf.argmax_survives else "changes"
            st.markdown(f"The attention moved by **JSD = {cf.jsd:.3f} bits**; the next-token distribution by "
                        f"**TV = {cf.tv:.3f}**, and its most likely token **{verdict}**.")
            st.markdown("Continuing greedily from this step:")
            ui.show.escaped("before: " + cf.translation_before, "1.1rem")
            ui.show.escaped("after: " + cf.translation_after, "1.1rem")
    summary = ui.models.results_file(EXPLANATION_RESULTS)
    if summary is not None:
        st.subheader("Over the test set")
        # two narrow tables, not one of ten columns: at 1280 px its last columns were off-screen
        abbr = {"grad_x_input": "grad×input", "integrated_gradients": "IG", "leave_one_out": "LOO"}
        c1, c2 = st.columns(2)
        c1.markdown("**Median Kendall τ**: attention against each attribution, per step")
        ui.show.table(pd.DataFrame([{"model": r["model"]} | {abbr[m]: r["kendall_tau"][m]["median"] for m in METHODS}
                                    for r in summary["rows"]]),
                      where=c1, width="stretch", formats={abbr[m]: "%+.2f" for m in METHODS})
        c2.markdown("**Same top source piece** as attention (% of steps); and the top kept when α is **permuted**")
        ui.show.table(pd.DataFrame([{"model": r["model"]} | {abbr[m]: 100 * r["argmax_agreement"][m] for m in METHODS}
                                    # text, so that a Transformer's missing figure reads "—", not "None"
                                    | {"permuted": "—" if r["permutation_survival"] is None else
                                       f"{100 * r['permutation_survival']:.0f}%"} for r in summary["rows"]]),
                      where=c2, width="stretch", formats={k: "%.0f%%" for k in abbr.values()})
        sizes = sorted({(r["sentences"], r["steps"]) for r in summary["rows"]})
        unpermuted = [r["model"] for r in summary["rows"] if r["permutation_survival"] is None]
        st.caption(", ".join(f"{n} sentences ({k:,} steps)" for n, k in sizes) + " per model. IG: integrated "
                   "gradients; LOO: leave-one-out. "
                   + (f"{', '.join(unpermuted)}: no permuted figure, as a Transformer has layers × heads of "
                      "attention, not one α per step; its τ is against the last layer's head mean. "
                      if unpermuted else "") + f"Written by `{summary['command']}`.")
    method_table(name)


# ------------------------------------------------------------------ your corpus
def your_corpus(tr, info, path: str) -> None:
    """Your corpus: links for a file or pasted pairs, scored against gold links if given."""
    corpus_view(info.name, path, info.arch == "transformer", tr, info.is_hub)
