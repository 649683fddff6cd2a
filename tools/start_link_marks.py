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
    drawn              the run is over and every chart is drawn (bench_browser's start_link, in the page's clock)
    busy_ms            the browser's main thread in tasks over 50 ms (Long Tasks API) until drawn
    busy_share         busy_ms / drawn: near 1, the page waits on Chromium's one main thread
    charts             Plotly charts, Vega-Lite charts and element containers on the page
    drawn_twice        Plotly charts whose drawn margins differ from their layout's: automargin
                       measured their labels after a first draw and drew them again

With --profile, a CPU profile of the page (the DevTools protocol's Profiler) from the click until
drawn adds `profile`: ms of the main thread's samples by where they fell (Plotly's script,
React's, Streamlit's other scripts, "native": the browser's own work outside JavaScript, style
and layout among it) and, within Plotly, the ms under a few of its functions (automargin, tick
labels drawn and measured, labels hidden past the edge). A profiled run is slower: compare its
shares, not its times.

With several --app checkouts the runs alternate between them, fresh servers each, so that a
machine's drift hits all alike; each checkout gets the median of each mark per link. On a busy
machine the marks measure that contention.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tools")]
from bench_browser import RAN, WATCH_RUN, start_link_labels, start_page  # noqa: E402

from browser import browser, streamlit_server  # noqa: E402

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
READ_MARKS = """() => { const t0 = window.__s2sT0, end = window.__s2sDrawn, after = x => x - t0;
  // what happened from the click until drawn (a message or a long task after it is not this link's)
  const messages = window.__s2sMessages.filter(x => x <= end).map(after);
  const states = window.__s2sStates.filter(([, t]) => t <= end).map(([s, t]) => [s, after(t)]);
  const when = s => { const m = states.find(([x]) => x === s); return m ? m[1] : null; };
  const ended = states.filter(([s]) => s === 'notRunning').map(([, t]) => t);
  return {first_message: messages.length ? messages[0] : null, run_start: when('running'),
          last_message: messages.length ? messages[messages.length - 1] : null,
          run_end: ended.length ? ended[ended.length - 1] : null,
          drawn: after(end),
          busy_ms: window.__s2sLong.reduce((sum, [s, d]) => sum + Math.max(0, Math.min(s + d, end) - Math.max(s, t0)),
                                           0),
          charts: [document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot').length,
                   document.querySelectorAll('[data-testid="stMain"] [data-testid="stVegaLiteChart"]').length,
                   document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]').length],
          drawn_twice: [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')]
            .filter(g => g._fullLayout && g.layout).filter(g => {
              const s = g._fullLayout._size, asked = {l: 80, r: 80, t: 100, b: 80, ...(g.layout.margin || {})};
              return ['l', 'r', 't', 'b'].some(k => Math.abs(s[k] - asked[k]) > 1); }).length}; }"""
# Plotly's functions whose time --profile reports (their names survive its minifying)
PLOTLY_PARTS = {"automargin": "doAutoMargin", "tick labels": "drawLabels", "labels hidden past the edge":
                "_adjustTickLabelsOverflow"}
# bench_browser's RAN (given), and the moment it first held, in the page's clock (the other marks')
RAN_AT = "() => { if (!(RAN)()) return false; window.__s2sDrawn ??= performance.now(); return true; }"
MARKS = ("first_message", "run_start", "last_message", "run_end", "drawn", "busy_ms", "busy_share", "drawn_twice")


def profile_summary(profile: dict) -> dict:
    """A DevTools CPU profile's samples in ms: by the script they ran under (a browser function a
    script called, such as measuring text, counts as that script's) and under Plotly's PLOTLY_PARTS."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {c: n["id"] for n in profile["nodes"] for c in n.get("children", [])}
    by_script = dict.fromkeys(("plotly", "react", "other scripts", "native"), 0.0)
    parts = dict.fromkeys(PLOTLY_PARTS, 0.0)
    for node_id, dt in zip(profile["samples"], profile["timeDeltas"]):
        stack, up = [], node_id
        while up is not None:
            stack.append(nodes[up]["callFrame"])
            up = parent.get(up)
        if stack[0]["functionName"] == "(idle)":
            continue
        ms, script = dt / 1000, next((f["url"].rsplit("/", 1)[-1] for f in stack if f["url"]), "")
        kind = ("plotly" if script.startswith("PlotlyChart") else "react" if script.startswith("react-dom")
                else "other scripts" if script else "native")
        by_script[kind] += ms
        names = {f["functionName"].rsplit(".", 1)[-1] for f in stack}
        for part, name in PLOTLY_PARTS.items():
            parts[part] += ms if name in names else 0.0
    return {"by_script": {k: round(v) for k, v in by_script.items()},
            "within_plotly": {k: round(v) for k, v in parts.items()}}


def one_run(app: Path, only: str | None, profile: bool = False) -> dict[str, dict]:
    """Every Start link of the app in `app` (whose label contains `only`, if given), marked once
    (and with `profile`, its CPU profile summed: profile_summary). The browser is driven by this
    checkout's helpers whatever `app` is, so that every checkout is measured alike."""
    ran_at, marks = RAN_AT.replace("(RAN)", "(" + RAN + ")"), {}
    with streamlit_server(app=app) as url, browser() as b:
        for label in start_link_labels(b, url):
            if only and only not in label:
                continue
            page = start_page(b, url, WATCH_SOCKET)
            try:
                link = page.locator('[data-testid="stMain"] [data-testid="stPageLink"] a', has_text=label).first
                time.sleep(3.0)                # the outline read, as bench_browser's start_link does
                page.evaluate(WATCH_RUN)
                page.evaluate(WATCH_CLICK)
                if profile:
                    cdp = page.context.new_cdp_session(page)
                    cdp.send("Profiler.enable")
                    cdp.send("Profiler.start")
                link.click()
                page.wait_for_function(ran_at, timeout=120_000)
                m = page.evaluate(READ_MARKS)
                if profile:
                    m["profile"] = profile_summary(cdp.send("Profiler.stop")["profile"])
                m["busy_share"] = m["busy_ms"] / m["drawn"]
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
        if "profile" in rows[-1]:
            out[label]["profile"] = {part: {k: round(statistics.median(row["profile"][part][k] for row in rows))
                                            for k in rows[-1]["profile"][part]} for part in rows[-1]["profile"]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=2, help="fresh servers per checkout (default 2)")
    p.add_argument("--link", help="only the Start links whose label contains this (e.g. Heads)")
    p.add_argument("--app", type=Path, action="append", help="a checkout of this app (default: this one); repeatable")
    p.add_argument("--profile", action="store_true", help="a CPU profile of each link too (slower: read its shares)")
    a = p.parse_args(argv)
    apps = [x.resolve() for x in (a.app or [ROOT])]
    runs: dict[str, list] = {str(x): [] for x in apps}
    for _ in range(a.runs):
        for app in apps:        # alternating, so that drift hits every checkout alike
            runs[str(app)].append(one_run(app, a.link, a.profile))
    print(json.dumps({"runs": a.runs, "apps": {app: medians(r) for app, r in runs.items() if r and r[0]}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
