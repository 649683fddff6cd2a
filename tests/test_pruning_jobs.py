"""AppTest: the Heads tab's pruning as a job beside the page (issue #67 item 3, ui/pruning.py and
ui/jobs.py), on the tiny Marian (tests/hub_models.py) over 3 held-out pairs. The button starts the
server's one job for the model; its progress says how many decodings of how many are done and, from
those, how long is left; the curves so far are drawn; Stop keeps what was measured and the tab stays
whole (its grid, the curves so far, a button to go on); another session sees the same job; a press
there resumes it, to the same curves as a run never stopped. The job's decodings are held by a gate
the test opens one at a time, so every state is seen without a timing assumption."""
from __future__ import annotations

import threading

import pytest

from test_app import chart, texts, translate_page

WAIT = 300
HUB_TEXT = "the cat sat on the mat ."


@pytest.fixture
def gated(hub_models, tmp_path, monkeypatch):
    """The tiny Marian served (S2S_HUB_MODELS), 3 held-out pairs, a fresh server's jobs, and a gate:
    each of the pruning job's decoder batches, one mask each here, waits for one release of the
    returned semaphore."""
    import s2s.head_importance
    import ui.jobs
    import ui.pruning
    pairs = tmp_path / "held_out.tsv"
    pairs.write_text("the cat sat on the mat .\tle chat est assis sur le tapis .\n"
                     "hello world !\tbonjour le monde !\nthe house is red .\tla maison est rouge .\n",
                     encoding="utf-8")
    marian = str(hub_models["marian"])
    monkeypatch.setenv("S2S_HUB_MODELS", marian)
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    monkeypatch.setattr(ui.pruning, "HELD_OUT", pairs)
    gate, real = threading.Semaphore(0), s2s.head_importance.greedy_batch_masks

    def one_at_a_time(*args, **kwargs):
        assert gate.acquire(timeout=WAIT), "the test never opened the gate"
        return real(*args, **kwargs)
    monkeypatch.setattr(s2s.head_importance, "greedy_batch_masks", one_at_a_time)
    monkeypatch.setattr(s2s.head_importance, "PRUNE_ROWS", 3)      # the 3 pairs of one mask a batch
    ui.jobs.jobs().clear()
    yield marian, gate
    gate.release(10_000)          # a job left running ends


def heads_tab(marian: str):
    """The Translate page's Heads tab in knock-out mode (a mask in the link): the grid, and beside
    it the pruning panel."""
    return translate_page(timeout=WAIT, model=marian, text=HUB_TEXT, view="pieces", maxlen="12", tab="Heads",
                          mask="cross:1.1")


def progress_text(at) -> str:
    return " ".join(p.proto.text for p in at.get("progress"))


def until(condition, what: str):
    done = threading.Event()
    for _ in range(WAIT * 20):
        if condition():
            return
        done.wait(0.05)
    pytest.fail(f"waited {WAIT} s for {what}")


def test_prune_runs_beside_the_page_stops_keeping_its_points_and_resumes_from_another_session(gated):
    import ui.jobs
    import ui.pruning
    from s2s.head_importance import prune_curves, read_scored_pairs
    marian, gate = gated
    key = ui.pruning.pruning_key(marian)
    at = heads_tab(marian)
    assert not at.exception, at.exception
    assert chart(at, "knockout_grid") is not None and chart(at, "pruning_chart") is None
    assert "Not measured for this model yet" in texts(at)
    at.button(key="pruning_run").click().run()
    assert not at.exception, at.exception
    job = ui.jobs.jobs().get(key)
    assert job is not None and job.running
    gate.release(2)                                    # two decodings: the whole model's, one with a head out
    until(lambda: job.snapshot().done == 2, "two decodings")
    at.run()
    assert not at.exception, at.exception
    snap = job.snapshot()
    said = progress_text(at)
    assert f"2 of {snap.total} decodings" in said and " left" in said and "timing" not in said, said
    assert chart(at, "knockout_grid") is not None
    partial = chart(at, "pruning_chart")                # the curves so far: each has its first point
    assert partial is not None and "The curves so far: 2 of" in texts(at)
    at.button(key="pruning_stop").click().run()         # stop: after the decoding under way
    assert not at.exception, at.exception
    assert job.stopping()
    gate.release(1)
    assert job.wait(WAIT) and job.snapshot().status == "stopped"
    at.run()
    assert not at.exception, at.exception
    kept = job.snapshot()
    assert kept.partial["decoded"] == 3 and not kept.partial["complete"]
    assert chart(at, "knockout_grid") is not None and chart(at, "pruning_chart") is not None     # the tab whole
    assert f"The curves so far: 3 of {kept.total}" in texts(at) and not at.get("progress")
    assert at.button(key="pruning_run").label == "Go on pruning"

    other = heads_tab(marian)                           # another browser: the same job, as it stands
    assert not other.exception, other.exception
    assert chart(other, "pruning_chart") is not None and f"3 of {kept.total}" in texts(other)
    gate.release(10_000)
    other.button(key="pruning_run").click().run()       # a press there resumes it
    assert not other.exception, other.exception
    assert job.wait(WAIT)
    other.run()
    done = job.snapshot()
    assert done.status == "done" and done.result["complete"] and done.starts == 2
    assert "Least important first" in texts(other) and "The curves so far" not in texts(other)
    pairs = read_scored_pairs(ui.pruning.HELD_OUT, ui.pruning.ON_DEMAND_PAIRS)
    whole = prune_curves(ui_model(marian), pairs, job.kept["ranked"])
    strip = (lambda r: {k: v for k, v in r.items() if k != "seconds"})
    assert strip(done.result) == strip(whole)           # the same as a run never stopped
    at.run()                                            # and the first session, at its next run
    assert "Least important first" in texts(at) and not [b for b in at.button if b.key == "pruning_run"]


def ui_model(marian: str):
    import ui.models
    return ui.models.get_model(marian)


def test_a_run_that_would_take_too_long_stops_after_its_first_decoding_and_says_so(gated, monkeypatch):
    """The estimate before the run goes on: after the first decoding (timed), a run whose rest would
    take more than TOO_LONG stops, keeping it, with a line giving the estimate; told to go on, it
    finishes."""
    import ui.jobs
    import ui.pruning
    from s2s.checkpoint import load_translator
    marian, gate = gated
    monkeypatch.setattr(ui.pruning, "TOO_LONG", -1.0)          # any estimate is too long
    gate.release(10_000)
    tr = load_translator(marian, device="cpu")
    key = ui.pruning.pruning_key(marian)
    job = ui.jobs.jobs().start(key, ui.pruning.pruning_work(tr, 3, None))
    assert job.wait(WAIT)
    snap = job.snapshot()
    assert snap.status == "stopped" and snap.done == 1 and snap.partial["decoded"] == 1
    assert snap.note.startswith("Pruning this model would take") and f"({snap.total - 1} decodings left at" in snap.note
    job.kept["go_on"] = True
    assert ui.jobs.jobs().start(key, ui.pruning.pruning_work(tr, 3, None)) is job and job.wait(WAIT)
    assert job.snapshot().status == "done" and job.snapshot().result["complete"]
