"""Are all heads needed (issue #60, 3): the Heads tab's chart of BLEU as a Transformer's heads are
knocked out, least important first and in a seeded random order, of all heads and of each kind
alone, with the sentence that reads it against Michel et al. and Voita et al.
(s2s.head_importance.pruning_summary).

The shipped Transformer's curve is read from results/head_pruning.json (python -m s2s.heads prune,
100 held-out pairs), once the file's recorded weights are this model's. Any other Transformer (a hub
model, a retrained checkpoint) is pruned on demand, behind a button: Michel's importance over the
first ON_DEMAND_PAIRS pairs of the shipped held-out file, then one greedy decoding of them per mask,
a progress bar saying how long is left (the steps done, timed, times the steps to come); where the
Heads tab's importance button has measured this model on this server already, its ranking is used
instead of measuring it again, and the chart says so. The result is kept once per server per model
(pruning_store). A recurrent model has one attention and no heads: nothing is offered (the Heads
tab says so).

Placed by the Heads tab (ui/knockout.py): pruning_panel(tr, model, height=..., share=..., measured=...)."""
from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

import ui.models
import ui.show
from s2s.checkpoint import Translator
from s2s.figures import pruning_figure
from s2s.head_importance import (
    HeadImportance,
    importance,
    prune_curves,
    prune_decodings,
    pruning_summary,
    read_scored_pairs,
)
from s2s.hooks import head_counts, is_recurrent
from s2s.neighbours.identity import model_identity, same_model
from s2s.text import InputError
from ui.alignment.common import about, asked_to_run

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_CURVES = ROOT / "results" / "head_pruning.json"
HELD_OUT = ROOT / "examples" / "test_first100.tsv"     # data/tatoeba/test.tsv's first 100 pairs, shipped
ON_DEMAND_PAIRS = 20          # BLEU on 20 pairs is coarse (a sentence moves it by a point or more), but a
                              # hub model's 100-odd masks each decode them: minutes, not a quarter of an hour
IMPORTANCE_SHARE = 0.1        # of the progress bar: the ranking before the decodings


@st.cache_resource
def pruning_store() -> dict:
    """Curves computed on demand, shared by every session: (model path, pairs) -> prune_curves' result."""
    return {}


def shipped_curves(tr: Translator) -> dict | None:
    """results/head_pruning.json if it was measured on `tr`'s very weights (its model_identity),
    else None."""
    data = ui.models.results_file(SHIPPED_CURVES)
    # the name first: a hub model's weights (hundreds of MB) are never hashed for a file that is not its
    if not data or data.get("model") != tr.name or not same_model(data.get("model_identity") or {},
                                                                     model_identity(tr)):
        return None
    return data


def prune_with_progress(tr: Translator, pairs: int, bar, measured: dict | None = None) -> dict:
    """Rank the heads on the first `pairs` held-out pairs (or by `measured`, an importance already
    measured, as to_json writes it) and prune them, every step timed: `bar` (st.progress) says what
    runs and, from the steps done, about how long is left."""
    held_out = read_scored_pairs(HELD_OUT, pairs)
    decodings = prune_decodings(head_counts(tr.model))
    t0 = time.perf_counter()
    timing = {"ranked": None}

    def progress(share: float, stage: str) -> None:
        spent = time.perf_counter() - t0
        if stage == "importance":
            per_pair = spent / max(share * len(held_out), 1e-9)
            left = per_pair * len(held_out) * (1 - share)
            bar.progress(IMPORTANCE_SHARE * share, text=f"Ranking the heads on {len(held_out)} pairs: "
                         f"{about(left)} left for this, then {decodings} decodings of them")
            return
        if timing["ranked"] is None:
            timing["ranked"] = spent
        done = round(share * decodings)
        per_decoding = (spent - timing["ranked"]) / max(done, 1)
        bar.progress(min(1.0, IMPORTANCE_SHARE + (1 - IMPORTANCE_SHARE) * share),
                     text=f"Decoding with heads knocked out: {done} of about {decodings}, "
                          f"{about(per_decoding * max(decodings - done, 0))} left")

    if measured is not None:
        return dict(prune_curves(tr, held_out, HeadImportance.from_json(measured), progress=progress),
                    ranking="the importance measured for the grid",
                    importance_on=f"{measured['pairs']} held-out pairs, measured by the importance button on "
                                  "this server (not measured again here)")
    bar.progress(0.0, text=f"Ranking the heads on {len(held_out)} pairs: timing the first…")
    ranked = importance(tr, held_out, progress=progress)
    return prune_curves(tr, held_out, ranked, progress=progress)


def pruning_panel(tr: Translator, model: str, height: int = 260, share: float = 1.0,
                  pairs: int = ON_DEMAND_PAIRS, measured: dict | None = None) -> None:
    """The pruning chart of `tr` (the sidebar's `model`), `height` px tall and `share` of the main
    column wide, and under it the sentence that reads it against the published claims. The shipped
    curve where it is this model's; else a button that computes one on the first `pairs` held-out
    pairs, its heads ranked by `measured` (the importance this server measured for this model,
    ui.knockout) where given, else on those pairs. Nothing for a recurrent model."""
    if is_recurrent(tr.model):
        return
    st.markdown("**Are all heads needed?** BLEU as they go")
    result = shipped_curves(tr)
    key = (ui.models.model_path(model), pairs)
    if result is None:
        result = pruning_store().get(key)
    if result is None:
        heads = sum(l * h for l, h in head_counts(tr.model).values())
        decodings = prune_decodings(head_counts(tr.model))
        ranking = (f"ranked by the importance measured for the grid (on {measured['pairs']} held-out pairs, "
                   f"not measured again), then up to {decodings} greedy decodings of the first {pairs}" if measured else
                   f"ranked on {pairs} held-out pairs, then up to {decodings} greedy decodings of them")
        note = (f"Not measured for this model yet: its {heads} heads {ranking}, 10% more heads out a step "
                "(the time left is shown as it runs).")
        if not asked_to_run(note, "Prune and watch BLEU", "pruning_run"):
            return
        bar = st.progress(0.0)
        try:
            result = prune_with_progress(tr, pairs, bar, measured)
        except InputError as e:
            bar.empty()
            st.error(str(e))
            return
        bar.empty()
        pruning_store()[key] = result
    fig = pruning_figure(result, height=height)
    ui.show.plotly_chart(fig, share=share, key="pruning_chart", notes=False,
                         config=ui.show.camera("pruning", model))
    ranked_on = result.get("importance_on") or f"the same {result['pairs']} pairs"
    st.caption(f"{pruning_summary(result)['sentence']} Greedy BLEU on {result['pairs']} held-out pairs, heads "
               "knocked out 10% of the scope's at a time; dashed grey: 1 below the whole model."
               + (f" Heads ranked by {result['ranking']}." if result.get("ranking") else ""),
               help=f"Sacrebleu's BLEU of greedy decoding; the heads ranked by Michel et al.'s importance on "
                    f"{ranked_on}, the random order seeded ({result.get('seed', 0)})."
                    + (f" Measured by `{result['command']}`" + (f" on {result['machine']}" if result.get("machine")
                                                                  else "") + "."
                       if result.get("command") else
                       f" Measured on this server on the first {result['pairs']} pairs of examples/{HELD_OUT.name}."))
