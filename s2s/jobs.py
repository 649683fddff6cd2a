"""Long work beside the pages: a background thread per job, one job per key per server process.

A page's script run is the wrong place for minutes of work: it blocks the session, a Stop ends it
with nothing kept, and a second browser asking for the same thing starts it again. A job instead
runs in a thread of its own and every session reads the same one:

    jobs = Jobs()                         # one per server process (the app keeps it in st.cache_resource)
    job = jobs.start(key, work)           # key: (what, model path, pairs, ...); a running job is joined,
                                          # a stopped or failed one resumed from what it kept
    job.snapshot()                        # thread-safe: status, stage, steps done of total, seconds per
                                          # step, time left, the partial result, the error
    job.stop()                            # cooperative: the work sees job.stopping() between steps

`work(job)` runs in the thread and returns the result. It reports with `job.begin(stage, done,
total)` and `job.step(done)`, publishes what it has so far with `job.keep(partial)`, and keeps
what must survive a stop in `job.kept` (a dict the same job hands to every later start), so that
resuming continues from it. The time per step is measured from the steps this start has done,

    per_step = (time of the last step - time the stage began) / (steps done since it began)

and is None before the first step: never a guess. An exception inside is kept as one line
(`error`, status "failed") and logged; it is never raised into the page.

The work must not touch Streamlit (it has no script run), and a model it shares with the pages
must be read through s2s.hooks: hooks there are gated per thread (hooks.attached), so a job's
knocked-out heads never reach a page's forward pass on the same model object, nor the page's
its. Grad mode is per thread in torch too.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable

log = logging.getLogger(__name__)

STATUSES = ("running", "stopped", "done", "failed")


@dataclass(frozen=True)
class Snapshot:
    """A job as it stands, read at once under its lock.

    status    running, stopped (by a stop: what was measured is kept), done, failed (error says why)
    stage     what runs ("ranking", "decoding", ...), as the work names it
    done      steps of this stage done, those kept from earlier starts included; total: of how many
    per_step  seconds a step, measured on this start's steps of this stage; None before the first
    left      per_step x the steps to come; None before the first step
    partial   the work's latest job.keep(...); result: the work's return value once done
    note      a line the work left (why it stopped itself, say)"""
    key: Hashable
    status: str
    stage: str
    done: int
    total: int
    per_step: float | None
    left: float | None
    partial: Any
    result: Any
    error: str | None
    note: str | None
    starts: int

    @property
    def share(self) -> float:
        """The stage's share done, 0 to 1."""
        return min(1.0, self.done / self.total) if self.total else 0.0


class Job:
    """One piece of long work and what it has measured (see the module's docstring)."""

    def __init__(self, key: Hashable):
        self.key = key
        self.kept: dict = {}           # what survives a stop, for the next start to continue from
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status = "new"          # until the registry launches it
        self._stage, self._done, self._total = "", 0, 0
        self._began: tuple[int, float] | None = None      # (steps done, time) when this stage began in this start
        self._last: tuple[int, float] | None = None       # (steps done, time) at the latest step
        self._partial = self._result = None
        self._error = self._note = None
        self._starts = 0

    # -- from the work's thread
    def stopping(self) -> bool:
        """Whether a stop was asked for: the work checks it between steps."""
        return self._stop.is_set()

    def begin(self, stage: str, done: int, total: int) -> None:
        """A stage starts with `done` of `total` steps already done (kept from an earlier start):
        its time per step is measured from here."""
        now = time.perf_counter()
        with self._lock:
            self._stage, self._done, self._total = stage, done, total
            self._began, self._last = (done, now), None

    def step(self, done: int) -> None:
        """`done` steps of the stage are done now."""
        now = time.perf_counter()
        with self._lock:
            self._done = done
            self._last = (done, now)

    def keep(self, partial: Any) -> None:
        """Publish the result so far, readable by every session while the job runs and after a stop."""
        with self._lock:
            self._partial = partial

    def stop(self, note: str | None = None) -> None:
        """Ask the work to stop after its current step (what it measured is kept); `note`: why,
        when the work stops itself."""
        with self._lock:
            if note is not None:
                self._note = note
        self._stop.set()

    # -- from anywhere
    def snapshot(self) -> Snapshot:
        with self._lock:
            per_step = left = None
            if self._began is not None and self._last is not None and self._last[0] > self._began[0]:
                per_step = (self._last[1] - self._began[1]) / (self._last[0] - self._began[0])
                left = per_step * max(self._total - self._done, 0)
            return Snapshot(self.key, self._status, self._stage, self._done, self._total, per_step, left,
                            self._partial, self._result, self._error, self._note, self._starts)

    @property
    def running(self) -> bool:
        return self._status == "running"

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (tests, the command line); True once it has."""
        t = self._thread
        if t is not None:
            t.join(timeout)
        return t is None or not t.is_alive()

    # -- the registry's
    def _launch(self, work: Callable[["Job"], Any]) -> None:
        """Start (or resume) the work in a new thread; the caller holds the registry's lock."""
        with self._lock:
            self._stop.clear()
            self._status, self._error, self._note, self._result = "running", None, None, None
            self._began = self._last = None
            self._starts += 1
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True,
                                        name=f"s2s-job-{self._starts}")
        self._thread.start()

    def _run(self, work: Callable[["Job"], Any]) -> None:
        try:
            result = work(self)
        except Exception as e:              # kept and shown, never raised into a page
            log.exception("job %r failed", self.key)
            with self._lock:
                self._status, self._error = "failed", str(e) or type(e).__name__
            return
        with self._lock:
            if self._stop.is_set():
                self._status = "stopped"
                if result is not None:
                    self._partial = result
            else:
                self._status, self._result = "done", result


class Jobs:
    """The registry: one Job per key, shared by every caller of this process."""

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs: dict[Hashable, Job] = {}

    def get(self, key: Hashable) -> Job | None:
        with self._lock:
            return self._jobs.get(key)

    def start(self, key: Hashable, work: Callable[[Job], Any]) -> Job:
        """The job of `key`: joined if it runs, as it is if done, else started, or resumed from
        what it kept (a stopped or failed one)."""
        with self._lock:
            job = self._jobs.setdefault(key, Job(key))
            if job._status not in ("running", "done"):
                job._launch(work)
            return job

    def forget(self, key: Hashable) -> None:
        """Drop a job that is not running (its next start begins afresh)."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and not job.running:
                del self._jobs[key]

    def clear(self) -> None:
        """Drop every job that is not running (the tests' fresh server)."""
        with self._lock:
            for key in [k for k, j in self._jobs.items() if not j.running]:
                del self._jobs[key]
