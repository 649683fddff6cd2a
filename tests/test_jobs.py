"""Long work as a job (issue #67 item 3): the streamlit-free runner (s2s.jobs) and the resumable,
stoppable prune_curves (s2s.head_importance). One job per key shared by every caller; a stop keeps
what was measured and a later start continues from it, to the same result as a run never stopped;
an exception inside is kept as a line, never raised; the time per step is measured, never guessed;
a job's knocked-out heads never reach another thread's pass on the same model object."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from s2s.head_importance import importance, prune_curves, prune_plan, prune_result, read_scored_pairs
from s2s.jobs import Job, Jobs

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "checkpoints" / "en-fr-transformer"
HELD_OUT = ROOT / "examples" / "test_first100.tsv"
CROSS = ("cross",)
WAIT = 300          # generous: a loaded machine


def counting_work(total: int, gate: threading.Event | None = None, calls: list | None = None):
    """A job of `total` steps, each adding its square to a sum kept in job.kept (so that a resume
    continues it); each step after the first waits on `gate` if given (the test holds it)."""
    def work(job: Job) -> int:
        if calls is not None:
            calls.append(threading.get_ident())
        kept = job.kept.setdefault("squares", {})
        job.begin("counting", len(kept), total)
        for i in range(total):
            if i in kept:
                continue
            if job.stopping():
                return None
            if gate is not None and kept:
                assert gate.wait(WAIT)
            kept[i] = i * i
            job.step(len(kept))
            job.keep(sum(kept.values()))
        return sum(kept.values())
    return work


def test_two_callers_share_one_job_and_its_thread():
    jobs, gate, calls = Jobs(), threading.Event(), []
    a = jobs.start(("count", "model", 5), counting_work(5, gate, calls))
    b = jobs.start(("count", "model", 5), counting_work(5, gate, calls))      # another session asks
    assert a is b and jobs.get(("count", "model", 5)) is a
    gate.set()
    assert a.wait(WAIT)
    snap = a.snapshot()
    assert snap.status == "done" and snap.result == sum(i * i for i in range(5)) and len(calls) == 1
    assert jobs.start(("count", "model", 5), counting_work(5)) is a and len(calls) == 1      # done: not run again
    other = jobs.start(("count", "other model", 5), counting_work(3))
    assert other is not a and other.wait(WAIT) and other.snapshot().result == 5


def test_time_per_step_is_measured_never_guessed_before_the_first():
    jobs, gate = Jobs(), threading.Event()
    job = jobs.start("k", counting_work(4, gate))
    # the first step does not wait on the gate; wait for it, then the job waits before the second
    for _ in range(WAIT * 100):
        if job.snapshot().done >= 1:
            break
        threading.Event().wait(0.01)
    snap = job.snapshot()
    assert snap.status == "running" and snap.done == 1 and snap.total == 4 and snap.stage == "counting"
    assert snap.per_step is not None and snap.per_step >= 0 and snap.left == pytest.approx(3 * snap.per_step)
    assert snap.partial == 0 and snap.share == 0.25
    gate.set()
    assert job.wait(WAIT)
    fresh = Job("new")
    fresh.begin("stage", 0, 10)
    assert fresh.snapshot().per_step is None and fresh.snapshot().left is None        # no step yet: no guess


def test_stop_keeps_what_was_measured_and_a_later_start_resumes_to_the_same_result():
    jobs, gate = Jobs(), threading.Event()
    job = jobs.start("k", counting_work(6, gate))
    for _ in range(WAIT * 100):
        if job.snapshot().done >= 1:
            break
        threading.Event().wait(0.01)
    job.stop()
    gate.set()
    assert job.wait(WAIT)
    snap = job.snapshot()
    assert snap.status == "stopped" and snap.result is None and 1 <= snap.done < 6
    assert snap.partial == sum(i * i for i in range(snap.done))          # what was measured, kept
    kept = dict(job.kept["squares"])
    again = jobs.start("k", counting_work(6))                            # a later press
    assert again is job and job.wait(WAIT)
    snap = job.snapshot()
    assert snap.status == "done" and snap.result == sum(i * i for i in range(6)) and snap.starts == 2
    assert all(job.kept["squares"][i] == v for i, v in kept.items())


def test_an_exception_inside_is_kept_as_a_line_not_raised():
    jobs = Jobs()

    def broken(job: Job):
        job.begin("breaking", 0, 1)
        raise ValueError("no pairs fit this model")
    job = jobs.start("bad", broken)          # does not raise here
    assert job.wait(WAIT)
    snap = job.snapshot()
    assert snap.status == "failed" and snap.error == "no pairs fit this model" and snap.result is None
    again = jobs.start("bad", counting_work(2))          # a later press tries again
    assert again is job and job.wait(WAIT) and job.snapshot().status == "done" and job.snapshot().error is None


def test_forget_drops_a_finished_job():
    jobs = Jobs()
    job = jobs.start("k", counting_work(2))
    assert job.wait(WAIT)
    jobs.forget("k")
    assert jobs.get("k") is None and jobs.start("k", counting_work(2)) is not job


# ------------------------------------------------------------------ prune_curves, resumable

need_shipped = pytest.mark.skipif(not (SHIPPED / "metrics.json").is_file() or not HELD_OUT.is_file(),
                                  reason="the shipped Transformer or examples/test_first100.tsv is missing")


@pytest.fixture(scope="module")
def shipped():
    """The shipped Transformer, 3 held-out pairs and their importance; torch on one thread, as the
    app runs it (ui/models.py): two threads on a loaded 2-core machine took 20x as long."""
    import torch

    from s2s.checkpoint import load_translator
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tr = load_translator(SHIPPED, device="cpu")
    pairs = read_scored_pairs(HELD_OUT, 3)
    yield tr, pairs, importance(tr, pairs)
    torch.set_num_threads(threads)


def without_seconds(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "seconds"}


@need_shipped
def test_a_stopped_prune_resumed_equals_one_never_stopped(shipped, monkeypatch):
    """The shipped 3 x 4 Transformer on 3 held-out pairs, its cross-attention heads 3 steps (few heads
    out: decodings that end, so the test is quick): stopped after 3 decodings, the
    result so far has each curve's measured points only (the first ones) and says it is not
    complete; resumed from its scores it equals the run never stopped, which is complete and whose
    every point is the BLEU of that mask's own greedy decoding."""
    import s2s.head_importance
    from s2s.decode import DecodeSettings, greedy_batch
    from s2s.evaluate import bleu
    tr, pairs, ranked = shipped
    whole = prune_curves(tr, pairs, ranked, steps=3, scopes=CROSS)
    assert whole["complete"] and whole["decoded"] == whole["decodings"] > 3 and whole["bleu"] > 0
    monkeypatch.setattr(s2s.head_importance, "PRUNE_ROWS", len(pairs))     # one mask a batch: stop asked after each
    scores: dict = {}
    seen = []
    part = prune_curves(tr, pairs, ranked, steps=3, scopes=CROSS, scores=scores, stop=lambda: len(scores) >= 3,
                        progress=lambda share, what: seen.append(share))
    assert len(scores) == 3 and part["decoded"] == 3 and not part["complete"] and len(seen) == 3
    assert part["bleu"] == whole["bleu"]                 # the mask with no head out is decoded first
    for got, full in zip(part["curves"], whole["curves"]):
        assert got["points"] == full["points"][:len(got["points"])] and len(got["points"]) < len(full["points"])
    assert sum(len(c["points"]) for c in part["curves"]) >= len(part["curves"])   # every curve has its start
    resumed = prune_curves(tr, pairs, ranked, steps=3, scopes=CROSS, scores=scores,
                           progress=lambda share, what: seen.append(share))
    assert without_seconds(resumed) == without_seconds(whole)
    assert seen[3] == pytest.approx(4 / whole["decodings"]) and seen[-1] == 1.0      # kept ones counted
    plan = prune_plan(tr, pairs, ranked, steps=3, scopes=CROSS)
    assert [len(m) for m in plan.masks] == sorted(len(m) for m in plan.masks)    # fewest heads first
    c = whole["curves"][0]                                # least important first
    mask = tuple(sorted(plan.curves[0][2][:c["points"][1]["heads"]]))
    hyps = greedy_batch(tr, plan.sources, DecodeSettings("greedy", head_mask=mask))
    assert c["points"][1]["bleu"] == round(bleu(hyps, plan.refs), 2)
    nothing = prune_result(plan, {})
    assert nothing["bleu"] is None and not nothing["complete"] and all(not c["points"] for c in nothing["curves"])


@need_shipped
def test_a_jobs_knocked_out_heads_never_reach_the_pages_pass_on_the_same_model(shipped):
    """A job decodes with a head knocked out, over and over, while this thread decodes the same
    model object plain: each thread gets its own translation every time (s2s.hooks gates its hooks
    per thread)."""
    from s2s.decode import DecodeSettings, decode
    tr = shipped[0]
    text, mask = "She has a big black dog.", (("encoder", 1, 0),)
    plain = decode(tr, text).translation
    knocked = decode(tr, text, DecodeSettings("greedy", head_mask=mask)).translation
    assert plain != knocked                        # the test could fail: the head changes the output
    looping, page_done, outputs = threading.Event(), threading.Event(), []

    def work(job: Job) -> int:
        while not page_done.is_set():
            outputs.append(decode(tr, text, DecodeSettings("greedy", head_mask=mask)).translation)
            looping.set()
        return len(outputs)
    job = Jobs().start("knocked", work)
    assert looping.wait(WAIT)
    mine = [decode(tr, text).translation for _ in range(8)]
    page_done.set()
    assert job.wait(WAIT) and job.snapshot().status == "done"
    assert mine == [plain] * 8 and set(outputs) == {knocked}


@need_shipped
def test_a_prune_of_masks_side_by_side_stops_between_batches_and_resumes_the_same(shipped, monkeypatch):
    """Two masks a decoder batch (PRUNE_ROWS = 2 x the pairs), encoder heads (which the copying
    model's pointer does not read, so they batch): stop is asked between batches, so a stop after the
    first keeps 2 masks, and the run resumed from them equals one never stopped, one batch each."""
    import s2s.head_importance
    tr, pairs, ranked = shipped
    monkeypatch.setattr(s2s.head_importance, "PRUNE_ROWS", 2 * len(pairs))
    calls = []
    real = s2s.head_importance.greedy_batch_masks
    monkeypatch.setattr(s2s.head_importance, "greedy_batch_masks",
                        lambda tr, texts, masks, *a, **k: calls.append(len(masks)) or real(tr, texts, masks, *a, **k))
    whole = prune_curves(tr, pairs, ranked, steps=3, scopes=("encoder",))
    assert whole["complete"] and calls == [2] * (whole["decodings"] // 2) + [1] * (whole["decodings"] % 2)
    scores: dict = {}
    part = prune_curves(tr, pairs, ranked, steps=3, scopes=("encoder",), scores=scores, stop=lambda: len(scores) >= 1)
    assert len(scores) == 2 and part["decoded"] == 2 and not part["complete"]
    resumed = prune_curves(tr, pairs, ranked, steps=3, scopes=("encoder",), scores=scores)
    assert without_seconds(resumed) == without_seconds(whole)
