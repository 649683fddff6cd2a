"""Long work beside the page (issue #67 item 3): the server's one registry of jobs (s2s.jobs), and a
fragment that watches a running job, redrawing what it has measured every POLL_S seconds.

A button starts or joins a job (one per model per server, shared by every session); the page's
script run only reads it, so it stays whole, a Stop keeps what was measured, and a browser tab
closed meanwhile loses nothing: the job runs on and the next visit finds it.

    ui.jobs.jobs().start(key, work)      # work(job) streamlit-free: it runs in the job's thread
    ui.jobs.watch(key, draw)             # while it runs: draw(snapshot) every POLL_S s; once it has
                                         # ended, the page reruns once and draws it as it stands
"""
from __future__ import annotations

from typing import Callable, Hashable

import streamlit as st

from s2s.jobs import Jobs, Snapshot
from ui.alignment.common import about

POLL_S = 1.5            # often enough to see a point arrive; each poll reruns this fragment alone


@st.cache_resource(show_spinner=False)
def jobs() -> Jobs:
    """The server's jobs, shared by every session."""
    return Jobs()


def snapshot(key: Hashable) -> Snapshot | None:
    """The job of `key` as it stands, None if this server has none."""
    job = jobs().get(key)
    return None if job is None else job.snapshot()


def stop(key: Hashable) -> None:
    job = jobs().get(key)
    if job is not None:
        job.stop()


def stopping(key: Hashable) -> bool:
    job = jobs().get(key)
    return job is not None and job.running and job.stopping()


def steps_left(snap: Snapshot, unit: str) -> str:
    """"k of N UNIT, about T left", T from the steps this run has done; before the first, "timing
    the first" (never a guess)."""
    left = "timing the first" if snap.left is None else f"{about(snap.left)} left"
    return f"{snap.done} of {snap.total} {unit}, {left}"


@st.fragment(run_every=POLL_S)
def watch(key: Hashable, draw: Callable[[Snapshot], None]) -> None:
    """While the job of `key` runs: draw(snapshot), again every POLL_S s (this fragment alone);
    once it has ended, the page reruns once, to draw it as it stands (outside this fragment)."""
    snap = snapshot(key)
    if snap is None or snap.status != "running":
        st.rerun(scope="app")
    draw(snap)
