"""Where a Start link's time goes, in a real browser, as JSON: server and browser marks from the click.

    python tools/start_link_marks.py [--runs 2] [--link "Heads"] [--app DIR ...]

On a fresh `streamlit run app.py` (tests/browser.py) and headless Chromium at 1280 x 720, each
Start link is followed as tools/bench_browser.py times it (start_link_<label>: the Start page in
a new tab, drawn and read for 3 s, then the link, until the run is over and every chart is
drawn), and marked, in ms from the click:

    first_message      the first message of the server's run reached the page (its websocket)
    run_start          the page shows the script running
    last_message       the run's last message arrived (what the server computes ends about here)
    run_end            the page shows the script no longer running
    drawn              the run is over and every chart is drawn: bench_browser's start_link
    busy_ms            the browser's main thread in tasks over 50 ms (Long Tasks API) until drawn
    busy_share         busy_ms / drawn: near 1, the page waits on Chromium's one main thread
    charts             Plotly charts, Vega-Lite charts and element containers on the page

With several --app checkouts the runs alternate between them, fresh servers each, so that a
machine's drift hits all alike; each checkout gets the median of each mark per link. On a busy
machine the marks measure that contention.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# installed before the app's scripts: every message the app's websocket receives, timed
WATCH_SOCKET = """(() => { const Socket = window.WebSocket; window.__s2sMessages = [];
  window.WebSocket = function (...args) { const ws = new Socket(...args);
    ws.addEventListener('message', () => window.__s2sMessages.push(performance.now())); return ws; };
  window.WebSocket.prototype = Socket.prototype; Object.assign(window.WebSocket, Socket); })();"""
# from the click on: long tasks and the script's state changes
WATCH_CLICK = """() => { window.__s2sT0 = performance.now(); window.__s2sMessages.length = 0;
  window.__s2sLong = []; window.__s2sStates = [];
  new PerformanceObserver(list => {
    for (const e of list.getEntries()) window.__s2sLong.push([e.startTime, e.duration]); }).observe({type: 'longtask'});
  const app = document.querySelector('[data-testid="stApp"]');
  new MutationObserver(() => window.__s2sStates.push([app.dataset.testScriptState, performance.now()]))
    .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']}); }"""
READ_MARKS = """() => { const t0 = window.__s2sT0, after = x => x - t0;
  const messages = window.__s2sMessages.map(after), states = window.__s2sStates.map(([s, t]) => [s, after(t)]);
  const when = s => { const m = states.find(([x]) => x === s); return m ? m[1] : null; };
  const ended = states.filter(([s]) => s === 'notRunning').map(([, t]) => t);
  return {first_message: messages.length ? messages[0] : null, run_start: when('running'),
          last_message: messages.length ? messages[messages.length - 1] : null,
          run_end: ended.length ? ended[ended.length - 1] : null,
          busy_ms: window.__s2sLong.reduce((sum, [s, d]) => sum + (s + d > t0 ? Math.min(d, s + d - t0) : 0), 0),
          charts: [document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot').length,
                   document.querySelectorAll('[data-testid="stMain"] [data-testid="stVegaLiteChart"]').length,
                   document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]').length]}; }"""
MARKS = ("first_message", "run_start", "last_message", "run_end", "drawn", "busy_ms", "busy_share")


def one_run(app: Path, only: str | None) -> dict[str, dict]:
    """Every Start link of the app in `app` (whose label contains `only`, if given), marked once."""
    sys.path[:0] = [str(app / "tests"), str(app / "tools")]
    from bench_browser import RAN, SETTLED, VIEWPORT, WATCH_RUN, goto, start_link_labels

    from browser import browser, streamlit_server
    marks = {}
    with streamlit_server(app=app) as url, browser() as b:
        for label in start_link_labels(b, url):
            if only and only not in label:
                continue
            page = b.new_page(viewport=VIEWPORT)
            try:
                page.add_init_script(WATCH_SOCKET)
                goto(page, url)
                link = page.locator('[data-testid="stMain"] [data-testid="stPageLink"] a', has_text=label).first
                link.wait_for(timeout=120_000)
                page.wait_for_function(SETTLED, timeout=120_000)
                time.sleep(3.0)                # the outline read, as bench_browser's start_link does
                page.evaluate(WATCH_RUN)
                page.evaluate(WATCH_CLICK)
                t = time.perf_counter()
                link.click()
                page.wait_for_function(RAN, timeout=120_000)
                drawn = (time.perf_counter() - t) * 1000
                m = page.evaluate(READ_MARKS)
                m["drawn"] = drawn
                m["busy_share"] = m["busy_ms"] / drawn
                marks[label] = {k: (round(v, 2) if k == "busy_share" else round(v)) if isinstance(v, float) else v
                                for k, v in m.items()}
            finally:
                page.close()
    return marks


def medians(runs: list[dict[str, dict]]) -> dict[str, dict]:
    """Per link, the median of each mark over the runs (charts: the last run's)."""
    out = {}
    for label in runs[0]:
        rows = [r[label] for r in runs if label in r]
        out[label] = {k: round(statistics.median(row[k] for row in rows if row[k] is not None), 2 if k == "busy_share"
                                                 else None)
                      for k in MARKS if any(row[k] is not None for row in rows)}
        out[label]["charts"] = rows[-1]["charts"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=2, help="fresh servers per checkout (default 2)")
    p.add_argument("--link", help="only the Start links whose label contains this (e.g. Heads)")
    p.add_argument("--app", type=Path, action="append", help="a checkout of this app (default: this one); repeatable")
    p.add_argument("--one", type=Path, help=argparse.SUPPRESS)     # a child process: one run of this app
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(one_run(a.one.resolve(), a.link)))
        return 0
    apps = [x.resolve() for x in (a.app or [ROOT])]
    runs: dict[str, list] = {str(x): [] for x in apps}
    for _ in range(a.runs):
        for app in apps:        # alternating, so that drift hits every checkout alike
            # each run in its own process: nothing of one checkout's imports leaks into another's
            only = ["--link", a.link] if a.link else []
            child = subprocess.run([sys.executable, __file__, "--one", str(app), *only], capture_output=True, text=True,
                                   check=True)
            runs[str(app)].append(json.loads(child.stdout.strip().splitlines()[-1]))
    print(json.dumps({"runs": a.runs, "apps": {app: medians(r) for app, r in runs.items() if r and r[0]}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
