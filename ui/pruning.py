"""Are all heads needed (issue #60, 3): the Heads tab's chart of BLEU as a Transformer's heads are
knocked out, least important first and in a seeded random order, of all heads and of each kind
alone, with the sentence that reads it against Michel et al. and Voita et al.
(s2s.head_importance.pruning_summary); and the importance of every head that the grid's badges show.

The shipped Transformer's curve is read from results/head_pruning.json (python -m s2s.heads prune,
100 held-out pairs), once the file's recorded weights are this model's. Any other Transformer (a hub
model, a retrained checkpoint) is pruned on demand, as a job beside the page (ui.jobs, s2s.jobs: one
per model per server, shared by every session): Michel's importance over the first ON_DEMAND_PAIRS
pairs of the shipped held-out file, then one greedy decoding of them per mask, fewest heads first, so
that every curve grows together and is drawn as its points arrive. A Stop keeps the decodings done and
a later press resumes from them; the time left is measured from the decodings done, and a run whose
first decoding says it would take more than TOO_LONG stops there and says so, until asked to go on.
Where the importance button has measured this model on this server already, its ranking is used
instead of measuring it again, and the chart says so. A recurrent model has one attention and no
heads: nothing is offered (the Heads tab says so).

The importance button (importance_button, placed by ui/knockout.py under the grid) is a job too, of
HUB_PAIRS pairs, measured whole (stopping it would keep nothing: it takes seconds to a minute).

Placed by the Heads tab (ui/knockout.py): pruning_panel(tr, model, height=..., share=..., measured=...),
importance_button(tr, model), measured_importance(model)."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

import ui.jobs
import ui.models
import ui.show
from s2s.checkpoint import Translator
from s2s.figures import pruning_figure
from s2s.head_importance import (
    HeadImportance,
    importance,
    prune_curves,
    prune_decodings,
    prune_plan,
    prune_result,
    pruning_summary,
    read_scored_pairs,
)
from s2s.hooks import head_counts, is_recurrent
from s2s.jobs import Job, Snapshot
from s2s.neighbours.identity import model_identity, same_model
from ui.alignment.common import about, asked_to_run

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_CURVES = ROOT / "results" / "head_pruning.json"
HELD_OUT = ROOT / "examples" / "test_first100.tsv"     # data/tatoeba/test.tsv's first 100 pairs, shipped
ON_DEMAND_PAIRS = 20          # BLEU on 20 pairs is coarse (a sentence moves it by a point or more), but a
                              # hub model's 100-odd masks each decode them: minutes, not a quarter of an hour
HUB_PAIRS = 50                # a hub model's importance, measured on demand: the first 50 held-out pairs
TOO_LONG = 3600.0             # s: a pruning run that would take longer stops after its first decoding and asks


def shipped_curves(tr: Translator) -> dict | None:
    """results/head_pruning.json if it was measured on `tr`'s very weights (its model_identity),
    else None."""
    data = ui.models.results_file(SHIPPED_CURVES)
    # the name first: a hub model's weights (hundreds of MB) are never hashed for a file that is not its
    if not data or data.get("model") != tr.name or not same_model(data.get("model_identity") or {},
                                                                     model_identity(tr)):
        return None
    return data


# ------------------------------------------------------------------ the importance button
def importance_key(model: str) -> tuple:
    """The importance job's: one per model per server."""
    return ("importance", ui.models.model_path(model), HUB_PAIRS)


def importance_work(tr: Translator, model: str, pairs: int):
    """The importance job: Michel's importance and Voita's tags of every head on the first `pairs`
    held-out pairs, as results/head_importance.json writes them (with the command that measures
    the same). Measured whole: a stop asked meanwhile keeps nothing."""
    def work(job: Job) -> dict | None:
        held_out = read_scored_pairs(HELD_OUT, pairs)
        job.begin("importance", 0, len(held_out))
        result = importance(tr, held_out, progress=lambda share, what: job.step(round(share * len(held_out))))
        if job.stopping():
            return None
        return dict(result.to_json(), command=f"python -m s2s.heads importance --model {model} --pairs "
                                              f"examples/{HELD_OUT.name} --limit {pairs} --json")
    return work


def measured_importance(model: str) -> dict | None:
    """This model's importance measured on this server by the button (to_json's dict), None if not (yet)."""
    snap = ui.jobs.snapshot(importance_key(model))
    return snap.result if snap is not None and snap.status == "done" else None


def _importance_progress(snap: Snapshot) -> None:
    st.progress(snap.share, text=f"Measuring each head's importance: {ui.jobs.steps_left(snap, 'pairs')}")


def importance_button(tr: Translator, model: str) -> None:
    """A hub model's importance: not measured until asked, then a job of HUB_PAIRS held-out pairs
    (one per model per server): its progress while it runs; once done, the grid's badges
    (ui.knockout reads measured_importance)."""
    if not HELD_OUT.is_file():
        st.caption(f"Importance not measured for this model: no held-out pairs at {HELD_OUT.name}.")
        return
    key = importance_key(model)
    snap = ui.jobs.snapshot(key)
    if snap is not None and snap.status == "running":
        ui.jobs.watch(key, _importance_progress)
        return
    if snap is not None and snap.status == "failed":
        st.warning(f"Measuring the importance failed: {snap.error}")
    if not st.button(f"Measure each head's importance ({HUB_PAIRS} held-out pairs)", key="knockout_measure",
                     help="Michel et al.'s importance and Voita et al.'s role tags of every head "
                          "(python -m s2s.heads importance), on the first held-out Tatoeba pairs, beside the "
                          "page: one run per model on this server, shared by every browser"):
        st.caption("Importance not measured for this model yet (the button measures it; the time left is shown "
                   "once the first pairs are timed).")
        return
    ui.jobs.jobs().start(key, importance_work(tr, model, HUB_PAIRS))
    ui.jobs.watch(key, _importance_progress)


# ------------------------------------------------------------------ the pruning job
def pruning_key(model: str, pairs: int = ON_DEMAND_PAIRS) -> tuple:
    """The pruning job's: one per model per server (per number of pairs)."""
    return ("prune", ui.models.model_path(model), pairs)


def pruning_work(tr: Translator, pairs: int, measured: dict | None):
    """The pruning job: the heads ranked (by `measured`, an importance already measured, else on
    the pairs), then one greedy decoding per mask (several side by side in a batch), each BLEU
    kept in job.kept["scores"] as it comes, the curves so far published after each batch
    (job.keep). A later start continues from the ranking and the scores kept. After this start's
    first batch, a run that would take more than TOO_LONG stops itself with a note, unless
    job.kept["go_on"]."""
    def work(job: Job) -> dict | None:
        held_out = read_scored_pairs(HELD_OUT, pairs)
        kept = job.kept
        if "ranked" not in kept:
            if measured is not None:
                kept["ranked"] = HeadImportance.from_json(measured)
                kept["said"] = dict(ranking="the importance measured for the grid",
                                    importance_on=f"{measured['pairs']} held-out pairs, measured by the importance "
                                                  "button on this server (not measured again here)")
            else:
                job.begin("ranking", 0, len(held_out))
                ranked = importance(tr, held_out, progress=lambda share, what: job.step(round(share * len(held_out))))
                if job.stopping():
                    return None
                kept["ranked"], kept["said"] = ranked, {}
        plan = prune_plan(tr, held_out, kept["ranked"])
        scores = kept.setdefault("scores", {})
        job.begin("decoding", len(scores), len(plan.masks))
        first = len(scores)

        def progress(share: float, what: str) -> None:
            job.step(len(scores))
            job.keep(dict(prune_result(plan, scores), **kept["said"]))
            snap = job.snapshot()
            if job.kept.get("timed_from") != first:      # this start's first batch of decodings: the estimate
                job.kept["timed_from"] = first
                if snap.left is not None and snap.left > TOO_LONG and not kept.get("go_on"):
                    just = len(scores) - first
                    job.stop(note=f"Pruning this model would take {about(snap.left)} more ({snap.total - snap.done} "
                                  f"decodings left at {about(snap.per_step)} each, timed on the "
                                  f"{'one' if just == 1 else just} just done): stopped.")
        result = prune_curves(tr, held_out, kept["ranked"], scores=scores, stop=job.stopping, progress=progress)
        return dict(result, **kept["said"])
    return work


def _pruning_progress(height: int, share: float, model: str):
    def draw(snap: Snapshot) -> None:
        if snap.stage == "ranking":
            text = f"Ranking the heads: {ui.jobs.steps_left(snap, 'pairs')}, then the decodings"
        else:
            text = f"Decoding with heads knocked out: {ui.jobs.steps_left(snap, 'decodings')}"
        bar, halt = st.columns([4, 1], vertical_alignment="bottom")
        bar.progress(snap.share, text=text)
        if ui.jobs.stopping(snap.key):
            halt.caption("Stopping after the decodings under way…")
        else:
            halt.button("Stop", key="pruning_stop", on_click=ui.jobs.stop, args=(snap.key,), width="stretch",
                        help="Stop after the decodings under way (a few masks decode side by side); the points "
                             "measured are kept, and the button that appears goes on from them")
        if snap.partial and snap.partial.get("bleu") is not None:
            chart(snap.partial, height, share, model)
    return draw


def chart(result: dict, height: int, share: float, model: str) -> None:
    """The curves of `result` (prune_curves' result, complete or not) and what they say: the
    sentence against the published claims once complete; before that, how far they go."""
    fig = pruning_figure(result, height=height)
    ui.show.plotly_chart(fig, share=share, key="pruning_chart", notes=False,
                         config=ui.show.camera("pruning", model))
    if not result.get("complete", True):
        st.caption(f"The curves so far: {result['decoded']} of {result['decodings']} decodings (fewest heads out "
                   f"first), greedy BLEU on {result['pairs']} held-out pairs; dashed grey: 1 below the whole model. "
                   "What they say against Michel et al. and Voita et al. is written once every point is measured.")
        return
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


def pruning_panel(tr: Translator, model: str, height: int = 260, share: float = 1.0,
                  pairs: int = ON_DEMAND_PAIRS, measured: dict | None = None) -> None:
    """The pruning chart of `tr` (the sidebar's `model`), `height` px tall and `share` of the main
    column wide, and under it the sentence that reads it against the published claims. The shipped
    curve where it is this model's; else the job's (pruning_work, on the first `pairs` held-out
    pairs, its heads ranked by `measured`, the importance this server measured for this model, where
    given): a button until it runs, its progress, a Stop and the curves so far while it runs, the
    curves kept and a button to go on once stopped. Nothing for a recurrent model."""
    if is_recurrent(tr.model):
        return
    st.markdown("**Are all heads needed?** BLEU as they go")
    result = shipped_curves(tr)
    if result is not None:
        chart(result, height, share, model)
        return
    key = pruning_key(model, pairs)
    snap = ui.jobs.snapshot(key)
    draw = _pruning_progress(height, share, model)
    if snap is not None and snap.status == "running":
        ui.jobs.watch(key, draw)
        return
    if snap is not None and snap.status == "done":
        chart(snap.result, height, share, model)
        return
    if snap is None:
        heads = sum(l * h for l, h in head_counts(tr.model).values())
        decodings = prune_decodings(head_counts(tr.model))
        ranking = (f"ranked by the importance measured for the grid (on {measured['pairs']} held-out pairs, "
                   f"not measured again), then up to {decodings} greedy decodings of the first {pairs}" if measured else
                   f"ranked on {pairs} held-out pairs, then up to {decodings} greedy decodings of them")
        note = (f"Not measured for this model yet: its {heads} heads {ranking}, 10% more heads out a step, "
                "beside the page (one run per model on this server; the time left is measured as it runs).")
        pressed = asked_to_run(note, "Prune and watch BLEU", "pruning_run")
    else:                   # stopped or failed: what was measured, and a press goes on from it
        if snap.status == "failed":
            st.warning(f"Pruning failed: {snap.error}")
        elif snap.note:
            st.warning(snap.note)
        label = ("Go on anyway" if snap.note and snap.status == "stopped" else
                 "Try again" if snap.status == "failed" else "Go on pruning")
        said, press = st.columns([3, 2], vertical_alignment="center")
        said.caption(f"{snap.done} of {snap.total} decodings done and kept." if snap.stage == "decoding"
                     else "Stopped while ranking the heads: nothing kept yet.")
        pressed = press.button(label, key="pruning_run", type="primary", width="stretch",
                               help="Continue from the decodings kept (one run per model on this server)")
        if not pressed and snap.partial and snap.partial.get("bleu") is not None:
            chart(snap.partial, height, share, model)
    if not pressed:
        return
    if snap is not None and snap.note:          # asked to go on past the estimate
        ui.jobs.jobs().get(key).kept["go_on"] = True
    ui.jobs.jobs().start(key, pruning_work(tr, pairs, measured))
    if snap is not None:            # the curves kept are drawn above: the page again, with the job running
        st.rerun()
    ui.jobs.watch(key, draw)
