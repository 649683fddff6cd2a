"""A real Chromium at 1280 x 720, the sidebar open, the Projector off and on: the Heads tab's head
overview (ui/head_overview.py, s2s.figures.head_matrix) on stand-ins of the shapes people study,
3 x 4 (the shipped Transformer's), 6 x 8 (opus-mt), 12 x 12 (T5-base), 12 x 16 and 24 x 16 (NLLB,
mBART's 12 + 12 x 16, and twice as deep), built offline at a small width (tests/hub_models.py).

At each shape: every cell of the matrix answers a pointer at its centre AND at its right edge with
its own head (what a click there reports: the point plotly hovers), over the plot's drag area
and no axis drag handle; every label (header numbers, the numbers in the cells) is whole inside
the chart and overlaps no other; a click on a cell's right edge enlarges that head, on a layer's
number shows that layer's heads; in knock-out mode a click on a cell knocks it out (greyed and
crossed, mask= in the address) and the box's placeholder is whole. Screenshots go to $S2S_SHOTS."""
import os
import re

import pytest

from browser import CHROMIUM, exceptions, settle, shot, streamlit_server, watched_page

if not os.path.exists(CHROMIUM):
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium for the browser tests: apt-get install -y chromium")
    pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)

WIDTH, HEIGHT = 1280, 720
MATRIX = ".st-key-{key} .js-plotly-plot"
# page coordinates of the centre and the right edge (2 px inside) of every cell, the header cells too
CELLS = """key => { const g = document.querySelector(`.st-key-${key} .js-plotly-plot`), f = g._fullLayout;
  const xa = f.xaxis, ya = f.yaxis, r = g.getBoundingClientRect(), L = f.yaxis.range[0] + 0.5,
        H = f.xaxis.range[1] + 0.5;
  const at = (x, y) => [r.left + xa._offset + xa.l2p(x), r.top + ya._offset + ya.l2p(y)];
  const half = Math.abs(xa.l2p(1) - xa.l2p(0)) / 2;
  const out = [];
  for (let l = -1; l < L; l++) for (let h = -1; h < H; h++) {
    const [x, y] = at(h, l); out.push({l, h, centre: [x, y], edge: [x + half - 2, y]}); }
  return {cells: out, layers: L, heads: H}; }"""
# what the pointer at (x, y) reaches: the element there and the point plotly hovers
UNDER = """([key, x, y]) => { const g = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  const e = document.elementFromPoint(x, y), d = (g._hoverdata || [])[0];
  return {cls: e ? (e.getAttribute('class') || '') : '', curve: d ? d.curveNumber : null,
          index: d ? d.pointNumber : null}; }"""
TEXTS = """key => [...document.querySelectorAll(`.st-key-${key} .js-plotly-plot text`)]
  .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0 && !t.closest('.hoverlayer'))
  .map(t => { const r = t.getBoundingClientRect(); return {text: t.textContent, l: r.left, r: r.right, t: r.top,
                                                            b: r.bottom}; })"""
# whether the select box's placeholder is drawn whole: an input's placeholder measured in its font
# against the room inside it, or the element that draws it against its own box
PLACEHOLDER_FITS = """e => { const i = e.querySelector('input');
  if (i && i.placeholder) { const s = getComputedStyle(i), c = document.createElement('canvas').getContext('2d');
    c.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    return {text: i.placeholder, width: c.measureText(i.placeholder).width,
            room: i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)}; }
  const d = [...e.querySelectorAll('div')].find(d => !d.children.length && d.textContent.startsWith('Knock out'));
  return d ? {text: d.textContent, width: d.scrollWidth, room: d.clientWidth} : {text: null}; }"""
BOX = """key => { const r = document.querySelector(`.st-key-${key} .js-plotly-plot`).getBoundingClientRect();
  return {l: r.left, r: r.right, t: r.top, b: r.bottom}; }"""


def expected(l: int, h: int, heads: int) -> tuple[int, int] | None:
    """(curve, point) that a pointer over cell (l, h) must hover (s2s.figures.heads: CELLS, ROWS, ...)."""
    if l >= 0 and h >= 0:
        return 1, l * heads + h
    if h < 0 <= l:
        return 2, l
    if l < 0 <= h:
        return 3, h
    return 4, 0


def overlapping(texts: list[dict]) -> list[tuple[str, str]]:
    return [(a["text"], b["text"]) for i, a in enumerate(texts) for b in texts[i + 1:]
            if min(a["r"], b["r"]) - max(a["l"], b["l"]) > 1 and min(a["b"], b["b"]) - max(a["t"], b["t"]) > 1]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    import hub_models
    root = tmp_path_factory.mktemp("head_shapes")
    return {name: hub_models.marian_heads(root / f"m{name}", L, H) for name, (L, H) in hub_models.HEAD_SHAPES.items()}


@pytest.fixture(scope="module")
def app(shapes):
    from browser import browser
    with streamlit_server({"S2S_HUB_MODELS": ",".join(str(p) for p in shapes.values())}) as url, browser() as b:
        yield url, b


def check_matrix(page, key: str, L: int, H: int) -> None:
    """Every cell's centre and right edge hovers its own head over the drag area; labels whole, apart."""
    page.locator(f".st-key-{key}").scroll_into_view_if_needed()
    geometry = page.evaluate(CELLS, key)
    assert (geometry["layers"], geometry["heads"]) == (L, H)
    for c in geometry["cells"]:
        want = expected(c["l"], c["h"], H)
        for where in ("centre", "edge"):
            x, y = c[where]
            page.mouse.move(x, y)
            page.wait_for_function(f"""([k, c, i]) => {{ const d = (document.querySelector(
                `.st-key-${{k}} .js-plotly-plot`)._hoverdata || [])[0]; return d && d.curveNumber === c
                && d.pointNumber === i; }}""", arg=[key, *want], timeout=10_000)
            under = page.evaluate(UNDER, [key, x, y])
            assert "nsewdrag" in under["cls"], (c, where, under)        # the plot's area, not an axis handle
    page.mouse.move(2, HEIGHT - 2)                                    # no hover label over the texts read
    box = page.evaluate(BOX, key)
    assert 0 <= box["t"] and box["b"] <= HEIGHT, box                 # the whole matrix on the screen
    texts = page.evaluate(TEXTS, key)
    assert {str(n) for n in range(1, H + 1)} <= {t["text"] for t in texts}      # every header number drawn
    assert overlapping(texts) == []
    for t in texts:
        assert box["l"] - 0.5 <= t["l"] and t["r"] <= box["r"] + 0.5 and box["t"] - 0.5 <= t["t"] \
            and t["b"] <= box["b"] + 0.5, (t, box)


def click_cell(page, key: str, l: int, h: int, where: str = "edge") -> None:
    c = next(c for c in page.evaluate(CELLS, key)["cells"] if (c["l"], c["h"]) == (l, h))
    page.mouse.move(*c[where])
    page.mouse.click(*c[where])


def click_until(page, key: str, l: int, h: int, where: str, done: str, tries: int = 3) -> None:
    """Click a cell until `done` (a JS function's text) holds. Under load one full run (2 workers,
    2 cores) lost a click: the page's scroll-to-tabs may still move the matrix between reading a
    cell's place and the press (the press itself ends that hold). A click is tried again only when
    the page has settled without `done`, so a slow answer is never clicked twice."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    for _ in range(tries):
        click_cell(page, key, l, h, where)
        try:
            page.wait_for_function(done, timeout=30_000)
            return
        except PlaywrightTimeout:
            settle(page)                    # a run under way ends before the click is tried again
            if page.evaluate(done):
                return
    page.wait_for_function(done, timeout=60_000)


@pytest.mark.parametrize("projector", ["off", "on"])
@pytest.mark.parametrize("shape", ["3x4", "6x8", "12x12", "12x16", "24x16"])
def test_every_cell_of_the_head_matrix_is_a_whole_click_target(app, shapes, shape, projector):
    import hub_models
    url, b = app
    L, H = hub_models.HEAD_SHAPES[shape]
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(f"{url}/translate?model={shapes[shape]}&text=the+cat+sat+on+the+mat+.&maxlen=12&tab=Heads"
                  f"&projector={projector}")
        page.wait_for_selector(MATRIX.format(key="head_matrix") + " .main-svg", timeout=240_000)
        settle(page)
        shot(page, f"head-overview-{shape}-projector-{projector}")
        assert exceptions(page) == []
        check_matrix(page, "head_matrix", L, H)
        # the small maps: every head's where few, else the chosen layer's (the last first)
        title = page.evaluate("document.querySelector('.st-key-heads_grid .js-plotly-plot').layout.title.text")
        maps = page.locator(".st-key-heads_grid .nsewdrag").count()
        if L * H <= 12:
            assert maps == L * H and f"{L} layers × {H} heads" in title
        else:
            assert maps >= H and f"layer {L}'s {H} heads" in title
        # a click on the last column's right edge of the first layer enlarges that head
        click_until(page, "head_matrix", 0, H - 1, "edge", f"""() => (document.querySelector(
            '.st-key-head_enlarged .js-plotly-plot') || {{}}).layout?.title?.text?.includes('layer 1 · head {H}')""")
        settle(page)
        # a click on the second layer's number shows its heads' maps
        if L * H > 12:
            click_until(page, "head_matrix", 1, -1, "centre", """() => (document.querySelector(
                '.st-key-heads_grid .js-plotly-plot') || {}).layout?.title?.text?.includes("layer 2's")""")
            settle(page)
        shot(page, f"head-overview-{shape}-projector-{projector}-clicked")
        assert exceptions(page) == []

        # knock-out mode: the same matrix, a click knocks the head out, greyed and crossed
        page.locator(".st-key-heads_click button", has_text="Click: knock out").click()
        page.wait_for_selector(MATRIX.format(key="knockout_grid") + " .main-svg", timeout=120_000)
        settle(page)
        check_matrix(page, "knockout_grid", L, H)
        holder = page.locator(".st-key-knock_many").evaluate(PLACEHOLDER_FITS)
        assert holder["text"] == "Knock out more…" and holder["width"] <= holder["room"], holder   # whole
        click_until(page, "knockout_grid", L - 1, H - 1, "edge", "() => /mask=cross(%3A|:)/.test(location.href)")
        settle(page)
        assert re.search(rf"mask=cross(%3A|:){L}\.{H}", page.url), page.url
        grid = page.evaluate("document.querySelector('.st-key-knockout_grid .js-plotly-plot').layout.shapes.length")
        assert grid >= 2 + 2                       # the headers' two bands, the knocked head's grey and cross
        shot(page, f"head-overview-{shape}-projector-{projector}-knocked")
        assert exceptions(page) == []
    finally:
        page.close()
