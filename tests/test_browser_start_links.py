"""In front of a class (issue #34): every Start link lands on its point, readable from the back row.

A real Chromium at a projector's 1280 x 720 follows every link on the Start page (pages/start.py,
its OUTLINE), once as is and once with the Projector switch on (`projector=on` in the address,
added to the link's own query). On each page, once its run is over, its charts drawn and its
scroll into view settled, it checks:

1. the header ends at H (about 60 px) and the tab the link opens is selected and wholly inside
   [H, 720] (not hidden under the header);
2. every visible `point_…` container (the chart, table or line the Start topic promises) is wholly
   inside [H, 720], and there is at least one (with the Projector on, a map that grew to label all
   its rows may run past the bottom, starting in the screen's top half; not the Heads grid and the
   enlarged head beside it, nor Compare attention's maps and √d view, WHOLE_ON_PROJECTOR);
3. every chart label (Plotly ticks, colorbar ticks, legend, annotations, titles; Vega axis labels,
   axis titles, legends, titles) is at least 14 px (18 px with the projector on) and no lighter
   than the page's body text;
4. no two tick labels of an axis overlap, nor a tick label and another text of its chart;
5. no toolbar (plotly's, shown on hover, or Streamlit's) over a chart's title;
6. with the Projector on, every row and column of every token map (heatmaps: the attention, the
   gold alignment, the heads grid) labelled: a map that draws some of an axis's labels draws all;
7. every table (st.table, st.dataframe) within its column, its content within its box;
8. no spinner drawn over other text while the page ran (tests/browser.py's RUNS watches it).

Every failure of every link is collected and reported together. Screenshots of each view go
to the folder $S2S_SHOTS when it is set (to look at).
"""
import math
import os
import re
import time
from pathlib import Path

import pytest

from browser import (
    browser,
    exceptions,
    need_chromium_and_shipped_checkpoints,
    settle,
    spinner_overlaps,
    streamlit_server,
    watched_page,
)
from conftest import ROOT

need_chromium_and_shipped_checkpoints()
CKPT = ROOT / "checkpoints"

WIDTH, HEIGHT = 1280, 720
HEADER_PX = 60            # Streamlit's header: what lies above its bottom is hidden under it
LABEL_PX = {"off": 14, "on": 18}
LUMINANCE_EPS = 0.02      # a label's colour may be this much lighter than the body text (rounding)
OVERLAP_PX = 1            # two texts overlap when they share more than this many pixels each way
SLACK_PX = 0.5            # sub-pixel layout: a box 0.3 px under the header still counts as inside
LONG_POINTS = {"point_colored"}  # point_ containers longer than a screen (a passage): in sight from the top half down
# point_ containers wholly on the first screen with the Projector on too (no map there grows past it): the
# Heads grid beside the enlarged head (issue #54: every layer of the grid labelled at 18 px ended at 953 px);
# Compare attention's small multiples and √d view (issue #69: 785 px, the second row and the √d axis cut)
WHOLE_ON_PROJECTOR = {"point_heads", "point_compare"}


@pytest.fixture(scope="module")
def app():
    """One server and one browser for the module (a cold server imports torch)."""
    with streamlit_server() as url, browser() as b:
        yield url, b


@pytest.fixture(scope="module")
def links(app):
    """[(label, href)] of every link on the Start page, in its order."""
    url, b = app
    page = open_view(b, url + "/")
    try:
        page.wait_for_selector('[data-testid="stPageLink"] a', timeout=180_000)
        settle(page)
        found = page.eval_on_selector_all(
            '[data-testid="stPageLink"] a',
            "els => els.map(a => [(a.querySelector('[data-testid=\"stMarkdownContainer\"]') || a).textContent.trim(),"
            " a.href])")
    finally:
        page.close()
    assert found, "no link on the Start page"
    return found


def open_view(b, address: str):
    """A new page (a new session) on `address`, watching for its script's runs."""
    page = watched_page(b, WIDTH, HEIGHT)
    page.goto(address)
    return page


# ------------------------------------------------------------------ what a view shows
MEASURE = (r"""() => {
  const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left,
                                                                   right: r.right, w: r.width, h: r.height}; };
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const parse = c => { const m = (c || '').match(/rgba?\(([^)]+)\)/); if (!m) return null;
                       const v = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
                       return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const app = document.querySelector('[data-testid="stApp"]');
  const bg = (parse(getComputedStyle(app).backgroundColor) || [255, 255, 255, 0]);
  const background = bg[3] > 0 ? bg.slice(0, 3) : [255, 255, 255];
  const over = (rgba, alpha) => rgba.slice(0, 3).map((c, i) => c * alpha + background[i] * (1 - alpha));
  // the body text: a paragraph of st.markdown's in the main area (not a widget's label, a tab's
  // name, a slider's value, a button's, nor a caption's, which is meant to be light); else the app's
  const ps = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMarkdown"] p')]
      .filter(p => !p.closest('[data-testid="stCaptionContainer"], [data-testid="stTab"], summary, label, button'));
  const bodyEl = ps[0] || app, bodyRgba = parse(getComputedStyle(bodyEl).color);
  const body = {css: getComputedStyle(bodyEl).color, rgb: over(bodyRgba, bodyRgba[3])};
  const header = document.querySelector('header[data-testid="stHeader"]');
  const tabs = [...document.querySelectorAll('[data-testid="stTabs"] [role="tab"]')].filter(shown)
      .map(t => ({text: t.textContent.trim(), selected: t.getAttribute('aria-selected') === 'true', ...box(t)}));
  const points = [...document.querySelectorAll('[class*="st-key-point_"]')].filter(shown)
      .map(e => ({key: [...e.classList].find(c => c.startsWith('st-key-point_')).slice(7), ...box(e)}));
  const opacity = (el, stop) => { let a = 1;
      for (let e = el; e && e !== stop.parentElement; e = e.parentElement) {
        const cs = getComputedStyle(e);
        if (cs.visibility === 'hidden' || cs.display === 'none') return 0;
        a *= parseFloat(cs.opacity || '1');
      }
      return a; };
  const corners = t => { const b = t.getBBox(), m = t.getScreenCTM();
      return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
          .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]); };
  const text = (t, root, kind, axis) => {
      if (!shown(t) || !t.textContent.trim()) return null;
      const cs = getComputedStyle(t), a = opacity(t, root);
      const fill = parse(cs.fill); const alpha = (fill ? fill[3] : 1) * parseFloat(cs.fillOpacity || '1') * a;
      if (alpha <= 0.01) return null;
      return {kind, axis, txt: t.textContent.trim().slice(0, 40), size: parseFloat(cs.fontSize), css: cs.fill,
              rgb: fill ? over(fill, alpha) : null, poly: corners(t), ...box(t)};
  };
  const charts = [];
  for (const root of document.querySelectorAll('.js-plotly-plot')) {
    if (!shown(root) || root.closest('[data-stale="true"]')) continue;
    const key = root.closest('[class*="st-key-"]');
    const name = key ? [...key.classList].find(c => c.startsWith('st-key-')).slice(7) : 'plotly';
    const texts = [];
    for (const t of root.querySelectorAll('g[class$="tick"] > text'))
      texts.push(text(t, root, 'tick', t.parentElement.getAttribute('class')));
    for (const t of root.querySelectorAll('text.legendtext, text.legendtitletext'))
      texts.push(text(t, root, 'legend', null));
    for (const t of root.querySelectorAll('text.annotation-text')) texts.push(text(t, root, 'annotation', null));
    for (const t of root.querySelectorAll('text[class$="title"]'))      // xtitle, ytitle, gtitle, a colorbar's
      texts.push(text(t, root, 'title', t.getAttribute('class')));
    // each heatmap's rows and columns, and the axes it is drawn on (their tick classes: ytick, y2tick, …)
    const maps = (root.data || []).filter(t => t.type === 'heatmap' && t.z && t.z.length)
        .map(t => ({x: (t.xaxis || 'x') + 'tick', y: (t.yaxis || 'y') + 'tick', rows: t.z.length,
                    cols: t.z[0].length}));
    // what may lie over the chart's title: its toolbar (plotly's modebar, shown on hover), and
    // Streamlit's element toolbar above the chart
    const title = root.querySelector('text.gtitle');
    const bars = [...root.querySelectorAll('.modebar-container')].map(box);
    const frame = root.closest('[data-testid="stElementContainer"]');
    const st_bar = frame && frame.querySelector('[data-testid="stElementToolbar"]');
    if (st_bar) bars.push(box(st_bar));
    charts.push({lib: 'plotly', name, top: box(root).top, texts: texts.filter(Boolean), maps,
                 title: title && shown(title) ? {txt: title.textContent.trim().slice(0, 40), ...box(title)} : null,
                 bars});
  }
  for (const root of document.querySelectorAll('.vega-embed svg')) {
    if (!shown(root) || root.closest('[data-stale="true"]') || root.closest('.st-key-vega_early')) continue;
    const key = root.closest('[class*="st-key-"]');
    const name = key ? [...key.classList].find(c => c.startsWith('st-key-')).slice(7) : 'vega';
    const texts = [], axes = [...root.querySelectorAll('.role-axis')];
    for (const t of root.querySelectorAll('.role-axis-label text'))
      texts.push(text(t, root, 'tick', 'axis' + axes.indexOf(t.closest('.role-axis'))));
    for (const t of root.querySelectorAll('.role-axis-title text')) texts.push(text(t, root, 'title', 'axis-title'));
    for (const t of root.querySelectorAll('.role-legend-label text, .role-legend-title text'))
      texts.push(text(t, root, 'legend', null));
    for (const t of root.querySelectorAll('.role-title-text text, .role-title-subtitle text'))
      texts.push(text(t, root, 'title', 'chart-title'));
    for (const t of root.querySelectorAll('.role-mark text')) {       // a text layer (mark_text): not sized here
      const m = text(t, root, 'mark', null); if (m) texts.push(m); }
    charts.push({lib: 'vega', name, top: box(root).top, texts: texts.filter(Boolean)});
  }
  const main = document.querySelector('[data-testid="stMain"]');
  const column = document.querySelector('[data-testid="stMainBlockContainer"]');
  // every table: its box, the column it sits in, and whether its content runs past its own box
  const tables = [...document.querySelectorAll('[data-testid="stTable"], [data-testid="stDataFrame"]')]
      .filter(e => shown(e) && !e.closest('[data-stale="true"]'))
      .map(e => { const inner = e.querySelector('table') || e;
                  const holder = e.parentElement.closest('[data-testid="stColumn"], """
                                                     r"""[data-testid="stMainBlockContainer"]');
                  return {kind: e.getAttribute('data-testid'), ...box(e), holder: holder ? box(holder).right : null,
                          overflow: inner.scrollWidth - e.clientWidth,
                          txt: (e.querySelector('th') || e).textContent.trim().slice(0, 30)}; });
  return {header: header ? box(header).bottom : null, scroll: main ? main.scrollTop : null,
          body, tabs, points, charts, tables, column: column ? box(column) : null,
          path: location.pathname + location.search};
}""")


def luminance(rgb) -> float:
    """WCAG relative luminance of an sRGB colour (0-255 channels)."""
    def lin(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def overlap(p, q) -> float:
    """How far two convex quadrilaterals (texts' boxes, rotated as drawn) overlap, in px: the
    least overlap of their projections on their edges' normals (the separating axis theorem);
    0 when some axis separates them."""
    depth = math.inf
    for poly in (p, q):
        for i in range(4):
            (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % 4]
            nx, ny = y2 - y1, x1 - x2
            n = math.hypot(nx, ny)
            if n == 0:
                continue
            nx, ny = nx / n, ny / n
            a = [x * nx + y * ny for x, y in p]
            b = [x * nx + y * ny for x, y in q]
            depth = min(depth, min(max(a), max(b)) - max(min(a), min(b)))
            if depth <= 0:
                return 0.0
    return depth if depth != math.inf else 0.0


def where(e) -> str:
    return f"y {e['top']:.0f}–{e['bottom']:.0f}"


def check(view: dict, link_tab: str | None, projector: str) -> list[str]:
    """Every failure of one view, as readable lines."""
    fails = []
    h = view["header"]
    if h is None:
        fails.append("no header[data-testid=stHeader]")
        h = HEADER_PX
    elif abs(h - HEADER_PX) > 8:
        fails.append(f"header ends at {h:.0f} px, not ≈{HEADER_PX}")
    inside = lambda e: e["top"] >= h - SLACK_PX and e["bottom"] <= HEIGHT + SLACK_PX  # noqa: E731

    # 1. the tab the link opens: selected, and in sight below the header
    if view["tabs"]:
        named = [t for t in view["tabs"] if link_tab and t["text"] == link_tab]
        tab = named[0] if named else next((t for t in view["tabs"] if t["selected"]), None)
        if link_tab and not named:
            fails.append(f"tab '{link_tab}' not on the page (tabs: {[t['text'] for t in view['tabs']]})")
        elif tab is None:
            fails.append("no tab selected")
        else:
            if not tab["selected"]:
                fails.append(f"tab '{tab['text']}' is not the selected one")
            if not inside(tab):
                fails.append(f"tab '{tab['text']}' at {where(tab)}, outside [{h:.0f}, {HEIGHT}]"
                             + (" (under the header)" if tab["top"] < h else ""))

    # 2. the points the Start topic promises: there, and wholly in sight (LONG_POINTS: in sight)
    if not view["points"]:
        fails.append("no visible st-key-point_… container")
    for p in view["points"]:
        # a passage (Cell States' colored text) is longer than any screen: it must start in the
        # screen's top half and fill the rest of it
        # With the Projector on, a map grows until every row has its 18 px label (check 6), so it may
        # run past the screen's bottom: it too must start in the top half
        may_run_on = p["key"] in LONG_POINTS or (projector == "on" and p["key"] not in WHOLE_ON_PROJECTOR)
        starts = may_run_on and h <= p["top"] <= h + (HEIGHT - h) / 2 and p["bottom"] >= HEIGHT
        if not inside(p) and not starts:
            fails.append(f"point '{p['key']}' at {where(p)} (height {p['h']:.0f}), outside [{h:.0f}, {HEIGHT}]")

    # 3. label sizes and colours; 4. overlaps
    need = LABEL_PX[projector]
    body_lum = luminance(view["body"]["rgb"])
    for chart in view["charts"]:
        name = f"{chart['lib']} chart '{chart['name']}' (top {chart['top']:.0f})"
        sized = [t for t in chart["texts"] if t["kind"] != "mark"]
        small = [t for t in sized if t["size"] < need - 0.05]
        if small:
            sizes = sorted({round(t["size"], 1) for t in small})
            fails.append(f"{name}: {len(small)} label(s) under {need} px (sizes {sizes}; e.g. "
                         + ", ".join(f"{t['kind']} '{t['txt']}' {t['size']:g}px" for t in small[:3]) + ")")
        light = [t for t in sized if t["rgb"] and luminance(t["rgb"]) > body_lum + LUMINANCE_EPS]
        if light:
            colours = sorted({t["css"] for t in light})
            fails.append(f"{name}: {len(light)} label(s) lighter than the body text {view['body']['css']} "
                         f"(luminance {body_lum:.3f}): {colours} (e.g. {light[0]['kind']} '{light[0]['txt']}', "
                         f"luminance {luminance(light[0]['rgb']):.3f})")
        ticks = [t for t in chart["texts"] if t["kind"] == "tick"]
        others = [t for t in chart["texts"] if t["kind"] != "tick"]
        clashes = []
        for i, a in enumerate(ticks):
            for b in ticks[i + 1:]:
                if a["axis"] == b["axis"] and (d := overlap(a["poly"], b["poly"])) > OVERLAP_PX:
                    clashes.append(f"'{a['txt']}' × '{b['txt']}' ({a['axis']}, {d:.1f} px)")
            for b in others:
                if (d := overlap(a["poly"], b["poly"])) > OVERLAP_PX:
                    clashes.append(f"tick '{a['txt']}' × {b['kind']} '{b['txt']}' ({d:.1f} px)")
        if clashes:
            fails.append(f"{name}: {len(clashes)} overlapping label pair(s): " + "; ".join(clashes[:4])
                         + (" …" if len(clashes) > 4 else ""))
        # 5. nothing over a chart's title: its toolbars (shown on hover) keep clear of it
        if chart.get("title"):
            t = chart["title"]
            for bar in chart["bars"]:
                if min(t["right"], bar["right"]) - max(t["left"], bar["left"]) > OVERLAP_PX and \
                        min(t["bottom"], bar["bottom"]) - max(t["top"], bar["top"]) > OVERLAP_PX:
                    fails.append(f"{name}: a toolbar at x {bar['left']:.0f}–{bar['right']:.0f}, {where(bar)} lies "
                                 f"over its title '{t['txt']}' (x {t['left']:.0f}–{t['right']:.0f}, {where(t)})")
        # 6. with the Projector on, every row and column of a token map labelled (no row skipped)
        if projector == "on":
            for m in chart.get("maps", []):
                for axis, n in ((m["y"], m["rows"]), (m["x"], m["cols"])):
                    drawn = sum(1 for t in ticks if t["axis"] == axis)
                    if 0 < drawn < n:
                        fails.append(f"{name}: {drawn} of {n} {'rows' if axis == m['y'] else 'columns'} labelled "
                                     f"({axis})")
    # 7. every table within its column: its box, and its content within its box
    for t in view.get("tables", []):
        right = t["holder"] if t["holder"] is not None else (view["column"] or {}).get("right", WIDTH)
        # (a data grid scrolls inside its own box: only a static table's content can run past it)
        if t["right"] > right + SLACK_PX or (t["kind"] == "stTable" and t["overflow"] > 1):
            fails.append(f"{t['kind']} '{t['txt']}' runs past its column: right edge {t['right']:.0f} > "
                         f"{right:.0f}, content {t['overflow']:.0f} px wider than its box")
    return fails


def with_projector(href: str) -> str:
    return href + ("&" if "?" in href else "?") + "projector=on"


@pytest.mark.parametrize("projector", ["off", "on"])
def test_every_start_link_lands_on_its_point_readable(app, links, projector):
    url, b = app
    shots = os.environ.get("S2S_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
    report = {}
    for i, (label, href) in enumerate(links, 1):
        start = time.perf_counter()
        address = with_projector(href) if projector == "on" else href
        link_tab = label.split("›", 1)[1].strip() if "›" in label else None
        page = open_view(b, address)
        try:
            try:
                settle(page)
            except Exception as e:  # noqa: BLE001 (reported with the others)
                state = page.evaluate("() => [window.__s2sRan, window.__s2sSig]")   # path|state|fonts|frames|undrawn|…
                report[label] = [f"did not settle: {type(e).__name__} (ran, last state: {state})"]
                continue
            view = page.evaluate(MEASURE)
            if "select a span" in label:
                # the span's link lands on the span switch, its cells and matches, below the tab and the passage
                # it has scrolled past (tests/test_browser_span.py holds that landing whole): its point is the
                # switch, in sight under the header
                switch = page.evaluate("() => { const e = document.querySelector('.st-key-span_on');"
                                       " if (!e) return null; const r = e.getBoundingClientRect();"
                                       " return {key: 'span_on', top: r.top, bottom: r.bottom, h: r.height}; }")
                view = {**view, "tabs": [], "points": [switch] if switch else []}
                link_tab = None
            if "the lens" in label:
                # the lens link lands on its panel under the step's charts (ui/lens_panel.py), the tab bar
                # scrolled past (tests/test_browser_lens.py holds the landing): its point is the panel
                view = {**view, "tabs": [], "points": [p for p in view["points"] if p["key"] == "point_lens"]}
                link_tab = None
            if "a foil" in label:
                # the foil's link lands on the contrast panel under the step's charts (ui/contrast_panel.py), the
                # tab bar scrolled past (tests/test_browser_contrast.py holds the landing): its point is the bars
                bars = page.evaluate("() => { const e = document.querySelector('.st-key-contrast_bars');"
                                     " if (!e) return null; const r = e.getBoundingClientRect();"
                                     " return {key: 'contrast_bars', top: r.top, bottom: r.bottom, h: r.height}; }")
                view = {**view, "tabs": [], "points": [bars] if bars else []}
                link_tab = None
            if "knock heads out" in label:
                # the knockout link's points are the grid and the answer beside it, the pruning chart under the
                # answer; both outputs in full lie below them (tests/test_browser_knockout.py holds the landing)
                view = {**view, "points": [p for p in view["points"] if p["key"] != "point_what_if_knockout"]}
            fails = check(view, link_tab, projector)
            fails += [f"exception on the page: {x[:200]}" for x in exceptions(page)]
            fails += spinner_overlaps(page)      # 8. no spinner over other text (a link's first run)
            if shots:
                slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
                page.screenshot(path=str(Path(shots) / f"projector-{projector}-{i:02d}-{slug}.png"))
            later = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollTop")
            if view["scroll"] is not None and abs(later - view["scroll"]) > 1:      # measured too early
                fails.append(f"the view still moved after it settled: scroll {view['scroll']:.0f} → {later:.0f}")
            if fails:
                report[label] = fails
        finally:
            page.close()
            print(f"{label}: {time.perf_counter() - start:.1f} s")
    assert not report, f"projector={projector}: {len(report)} of {len(links)} Start links fail:\n" + "\n".join(
        f"- {label}:\n" + "\n".join(f"    · {f}" for f in fails) for label, fails in report.items())


def test_one_back_press_returns_to_the_start_page(app, links):
    """Issue #47: a Start link, then the browser's Back once, is the Start page again. The page
    writes its address on arriving (and on every change), which Streamlit made a new history
    entry each time, so Back first went from the page's address to the link's; now an address
    written on the same page replaces the entry (ui.address.history_replaces_same_page)."""
    url, b = app
    failures = []
    for label, _ in links[:4]:          # a Translate tab, with the address the page rewrites
        page, arrived, step = watched_page(b, WIDTH, HEIGHT), None, "open the Start page"
        try:
            page.goto(url + "/")
            page.wait_for_selector('[data-testid="stMain"] [data-testid="stPageLink"] a', timeout=180_000)
            settle(page)
            step = "follow the link"
            page.locator('[data-testid="stMain"] [data-testid="stPageLink"] a', has_text=label).first.click()
            page.wait_for_function("() => location.pathname !== '/'", timeout=60_000)
            step = "let the linked page settle"
            settle(page)
            arrived = page.url
            step = "press Back"
            page.go_back()
            page.wait_for_function("() => location.pathname === '/'", timeout=30_000)
            step = "see the Start page's heading"
            page.get_by_role("heading", name="Start here").wait_for(timeout=60_000)
        except Exception as e:  # noqa: BLE001 (reported with the others)
            first_line = (str(e).strip().splitlines() or [""])[0][:200]
            failures.append(f"{label}: at '{step}', from {page.url} (arrived at {arrived}): "
                            f"{type(e).__name__}: {first_line}")
        finally:
            page.close()
    assert not failures, "one Back press did not return to the Start page:\n" + "\n".join(failures)


def test_no_spinner_over_other_text(app):
    """Issue #47: a spinner takes its own line; the old result (faded) stays below it, never under
    it. A Transformer's every layer x head scored on the 37 trial pairs (about a second here, over
    Streamlit's half-second before a spinner shows), for the page's first rule and two more."""
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(url + "/alignment?tab=Against+human+alignments&model=en-fr-transformer")
        settle(page)
        for rule in ("argmax", "shift"):
            box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Links from attention")
            box.locator("input").click()
            page.get_by_role("option", name=rule, exact=True).click()
            settle(page)
        seen = page.evaluate("() => window.__s2sSpinners")
        overlaps = spinner_overlaps(page)
    finally:
        page.close()
    assert not overlaps, "\n".join(overlaps)
    if not any("layer × head" in s for s in seen):
        pytest.skip(f"the scoring was too quick for a spinner to show (seen: {seen})")
