"""Links against the gold: precision, recall and AER, per head and per method, and the tables' rows."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..checkpoint import Translator
from ..contributions import ALIGN_METHODS
from ..decode import positions
from ..text import InputError
from .gold import GoldPair, Link
from .rules import DEFAULT_RULE, Rule, links, shifted
from .words import fitting_inputs, to_words, too_long, word_attention, word_inputs

# ---------------------------------------------------------------------------------------
# Scores


@dataclass
class Scores:
    aer: float
    precision: float
    recall: float
    links: int         # |A|
    sure: int          # |S|
    sentences: int


def score(predicted: Sequence[set[Link]], gold: Sequence[GoldPair]) -> Scores:
    """Precision, recall and AER of predicted links against gold S and P, summed over the
    corpus before dividing (micro averages, the standard definition). An empty A has
    precision 1 (no wrong link), an empty S recall 1, and both empty AER 0."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments for {len(gold)} gold pairs")
    a = sum(len(p) for p in predicted)
    s = sum(len(g.sure) for g in gold)
    a_s = sum(len(p & g.sure) for p, g in zip(predicted, gold))
    a_p = sum(len(p & g.possible) for p, g in zip(predicted, gold))
    return Scores(aer=1 - (a_s + a_p) / (a + s) if a + s else 0.0,
                  precision=a_p / a if a else 1.0, recall=a_s / s if s else 1.0,
                  links=a, sure=s, sentences=len(gold))


def pairs_that_fit(tr: Translator, gold: Sequence[GoldPair]) -> tuple[list[GoldPair], int]:
    """The gold pairs `tr` can be forced through whole, and how many it cannot: a pair longer
    than a hub model's positions (words.too_long) is left out of the scores, counted, as a corpus
    line too long is (corpus.py). The shipped models have no such limit: every pair, 0."""
    if not positions(tr):
        return list(gold), 0
    kept = []
    for n, g in enumerate(gold, 1):
        try:
            wp = word_inputs(tr, g.english, g.french)
        except InputError as e:
            raise InputError(f"pair {n}: {e}") from None
        if too_long(tr, wp) is None:
            kept.append(g)
    return kept, len(gold) - len(kept)


def skipped_note(tr: Translator, skipped: int, total: int) -> str:
    """The one line that says how many pairs pairs_that_fit left out, and why."""
    return (f"{skipped} of the {total} pairs left out: longer than {tr.name}'s {positions(tr)} positions "
            "(its position embeddings)")


def head_scores(head_weights: Sequence[np.ndarray], gold: Sequence[GoldPair], rule: str | Rule = DEFAULT_RULE
                ) -> list[list[Scores]]:
    """A Transformer's every layer x head scored as an aligner: `head_weights` holds one
    (layers, heads, French, English) array per gold pair (word_attention(..., heads=True));
    the result is [layer][head] -> Scores with `rule`."""
    L, H = head_weights[0].shape[:2]
    return [[score([links(w[l, h], rule) for w in head_weights], gold) for h in range(H)]
            for l in range(L)]


def best_head(table: Sequence[Sequence[Scores]]) -> tuple[int, int]:
    """(layer, head), 0-based, of the lowest AER in a head_scores table (the first on a tie)."""
    aer = np.array([[s.aer for s in row] for row in table])
    l, h = np.unravel_index(int(aer.argmin()), aer.shape)
    return int(l), int(h)


def method_scores(tr: Translator, gold: Sequence[GoldPair], method: str, rules: Sequence[str] = (DEFAULT_RULE,),
                  layers: bool = True, on_pair: Callable[[int], None] | None = None) -> dict[str, list[Scores]]:
    """A method of s2s.contributions as an aligner: for each rule, one Scores per decoder
    layer (the last only, unless `layers`). A shifted rule reads the matrices one step later:
    the same piece matrices, computed once per pair for every rule (integrated gradients of
    447 pairs is the longest run here). `on_pair(n)` hears after each pair."""
    from ..contributions import method_matrices
    shifts = sorted({shifted(r) for r in rules})
    mats: dict[bool, list[np.ndarray]] = {shift: [] for shift in shifts}
    for n, g in enumerate(gold, 1):
        try:
            wp = fitting_inputs(tr, g.english, g.french)
            pieces = method_matrices(tr, wp.source, wp.target, method)
        except InputError as e:
            raise InputError(f"pair {n}: {e}") from None
        for shift in shifts:
            m = to_words(pieces, wp, shift)
            mats[shift].append(m if layers else m[-1:])
        if on_pair is not None:
            on_pair(n)
    return {rule: [score([links(m[l], rule) for m in mats[shifted(rule)]], gold)
                   for l in range(len(mats[shifted(rule)][0]))] for rule in rules}


def evaluate(tr: Translator, gold: Sequence[GoldPair], rule: str = DEFAULT_RULE, **params) -> Scores:
    """Score a model's attention, read with `rule`, against the gold alignments."""
    return score([links(word_attention(tr, g.english, g.french, shift=shifted(rule)), rule, **params) for g in gold],
                 gold)


def scores_json(s: Scores) -> dict:
    return {"aer": round(s.aer, 4), "precision": round(s.precision, 4), "recall": round(s.recall, 4), "links": s.links}


def pair_progress(total: int, what: str):
    """Progress on stderr, pairs done of the gold's (integrated gradients take minutes to hours
    on a CPU); quiet between updates ten seconds apart, so a log file stays short."""
    from tqdm import tqdm
    return tqdm(total=total, desc=what, unit="pair", file=sys.stderr, mininterval=10, leave=False)


def last_layer(tr: Translator, method: str) -> int:
    """The layer a method's last matrix belongs to: the last decoder layer, or 1 for a recurrent
    model and for an attribution (one matrix)."""
    from ..contributions import ATTRIBUTIONS
    if method in ATTRIBUTIONS or tr.arch != "transformer":
        return 1
    cfg = tr.model.cfg
    return int(getattr(cfg, "decoder_layers", None) or getattr(cfg, "layers", 1))


TABLE_RULES = ("argmax", "grow-diag", "shift")


def best_head_row(tr: Translator, gold: Sequence[GoldPair], rule: str = "grow-diag") -> dict:
    """A Transformer's best single cross-attention head on `gold` under `rule` (as --heads finds it)."""
    weights = [word_attention(tr, g.english, g.french, heads=True) for g in gold]
    table = head_scores(weights, gold, rule)
    l, h = best_head(table)
    return {"layer": l + 1, "head": h + 1, "rule": rule, **scores_json(table[l][h])}


def method_summary(aligned: dict | None, explained: dict | None, model: str) -> list[dict]:
    """One row per method for `model`, from the method table (results/alignment_methods.json:
    is it an alignment?) and the explanation table (results/explanation_methods.json: is it an
    explanation?): the best layer's AER under grow-diag and argmax (and that layer), the median
    Kendall tau against leave-one-out and the share of steps with the same top source piece.
    A figure a file does not hold is None; a method neither file holds for `model` is left out."""
    a_rows = {r["method"]: r for r in (aligned or {}).get("rows", []) if r.get("model") == model}
    e_row = next((r for r in (explained or {}).get("rows", []) if r.get("model") == model), {})
    taus, tops = e_row.get("kendall_tau_vs_loo", {}), e_row.get("same_top_as_loo", {})
    out = []
    for name in ALIGN_METHODS:
        r = a_rows.get(name)
        if r is None and name not in taus and name != "loo":
            continue
        row = {"method": name, "layer": None, "aer_grow_diag": None, "aer_argmax": None,
               "tau_vs_loo": taus.get(name, {}).get("median"), "same_top_as_loo": tops.get(name)}
        if r is not None:
            layers = r["grow-diag"]
            best = min(range(len(layers)), key=lambda k: layers[k]["aer"])
            row |= {"layer": best + 1 if len(layers) > 1 else None, "aer_grow_diag": layers[best]["aer"],
                    "aer_argmax": min(s["aer"] for s in r["argmax"])}
        if name == "loo" and r is None:
            continue
        out.append(row)
    return out
