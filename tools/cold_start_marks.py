"""Where a cold start's time goes, in a real browser, as JSON: marks from spawning the server.

    python tools/cold_start_marks.py [--runs 3] [--app DIR ...]

Each run spawns `streamlit run app.py` (tests/browser.py) and, in headless Chromium at
1280 x 720, takes the path tools/bench_browser.py times as cold_start, marking each stage:
`health` (the server answers), `root_nav` (the app's own address drawn, its sidebar
links there), `translate_app` (/translate loaded), `heatmap` (its heatmap drawn) and
`settled` (the run over and every chart drawn: bench_browser's cold_start). With several
--app checkouts (e.g. a `git worktree` of an earlier commit beside this one) the runs
alternate between them, so that a machine's drift hits both alike. On a machine busy with
other work the marks measure that contention.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_run(app: Path) -> dict:
    """A cold start of the app in `app` (its own tests/browser.py starts it), in this process."""
    sys.path[:0] = [str(app / "tests"), str(app / "tools")]
    from bench_browser import DRAWN, SETTLED, VIEWPORT, goto

    from browser import browser, streamlit_server
    marks = {}
    with browser() as b:
        page = b.new_page(viewport=VIEWPORT)
        t0 = time.perf_counter()

        def mark(stage: str) -> None:
            marks[stage] = round(1000 * (time.perf_counter() - t0))

        with streamlit_server() as url:
            mark("health")
            goto(page, url)
            page.wait_for_selector('[data-testid="stSidebarNav"] a', timeout=120_000)
            mark("root_nav")
            goto(page, url + "/translate")
            mark("translate_app")
            page.wait_for_function(DRAWN, arg="heatmap", timeout=120_000)
            mark("heatmap")
            page.wait_for_function(SETTLED, timeout=120_000)
            mark("settled")
    return marks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="cold starts per app")
    p.add_argument("--app", type=Path, action="append", help="a checkout of this app (default: this one)")
    p.add_argument("--one", type=Path, help=argparse.SUPPRESS)     # a child process: one run of this app
    a = p.parse_args()
    if a.one:
        print(json.dumps(one_run(a.one.resolve())))
        return 0
    apps = [x.resolve() for x in (a.app or [ROOT])]
    out = {str(x): [] for x in apps}
    for _ in range(a.runs):
        for x in apps:          # each run in its own process: nothing of one app's imports leaks into another's
            child = subprocess.run([sys.executable, __file__, "--one", str(x)], capture_output=True, text=True,
                                   check=True)
            out[str(x)].append(json.loads(child.stdout.strip().splitlines()[-1]))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
