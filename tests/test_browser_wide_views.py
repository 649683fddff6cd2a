"""A real Chromium at 1280 x 720, the sidebar open, the Projector off and on: the head views other
than the Heads tab's grid on a model of NLLB's and mBART's shape, 12 + 12 layers x 16 heads
(tests/hub_models.py's wide_marian: d = 64, random weights, its output capped at 24 pieces by its
generation_config): the neuron view under the grid, Compare an edit's map of what carries the
change (its 12 x 16 cross-attention heads beside the encoder's layers), Alignment & Explanation's
AER of every layer x head (the whole column's width at 16 heads: every cell's AER written, every
head named, upright) and the pruning chart's figure. Every label whole and apart from its
neighbours, inside its chart. With S2S_SHOTS=DIR each view's screenshot is kept there."""
import os
from pathlib import Path
from urllib.parse import urlencode

import pytest

from browser import CHROMIUM, browser, exceptions, settle, shot, streamlit_server, watched_page

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium for the browser tests: apt-get install -y chromium")
    pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)

TEXT, EDIT = "the cat sat on the mat .", "the cat sat in the mat ."     # as many pieces each (16)
WAIT = 600_000          # a 24-layer model's views under a loaded machine's suite: minutes, not seconds

# Per axis of a chart (plotly's tick groups: xtick, ytick, x2tick, ...) and for the text written in
# its heatmaps' cells: how many pairs of labels overlap, and which labels stand outside the chart.
LABELS = r"""sel => {
  const root = document.querySelector(sel), svg = root.querySelector('.main-svg').getBoundingClientRect();
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 ? r : null; };
  const hit = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
                     && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const groups = {}, turned = {};
  for (const t of root.querySelectorAll('g[class$="tick"] > text')) {
    const r = shown(t), name = t.parentNode.getAttribute('class');
    const angle = /rotate\((-?[0-9.]+)/.exec(t.getAttribute('transform') || '');
    if (angle && Math.abs(+angle[1]) >= 30)       // a turned label: its neighbour's line, not its box, must clear it
      turned[name] = [Math.abs(+angle[1]) * Math.PI / 180, parseFloat(getComputedStyle(t).fontSize)];
    if (r) (groups[name] ||= []).push([t.textContent, r]);
  }
  const cells = [...root.querySelectorAll('.heatmaplayer text')].map(t => [t.textContent, shown(t)]).filter(c => c[1]);
  if (cells.length) groups.cells = cells;
  const out = {counts: {}, overlaps: [], outside: []};
  for (const [name, list] of Object.entries(groups)) {
    out.counts[name] = list.length;
    for (let i = 0; i < list.length; i++) {
      const [t, r] = list[i];
      if (r.left < svg.left - 1 || r.right > svg.right + 1 || r.top < svg.top - 1 || r.bottom > svg.bottom + 1)
        out.outside.push(name + ': ' + t);
      for (let j = i + 1; j < list.length; j++) {
        const other = list[j][1];
        const apart = turned[name] ? Math.abs(other.right - r.right) * Math.sin(turned[name][0]) >= turned[name][1]
                                   : !hit(r, other);
        if (!apart) out.overlaps.push(name + ': ' + t + ' / ' + list[j][0]);
      }
    }
  }
  out.width = svg.width;
  const main = document.querySelector('[data-testid="stMain"] [data-testid="stVerticalBlock"]');
  out.main = main.getBoundingClientRect().width;
  return out; }"""


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> Path:
    import hub_models
    return hub_models.wide_marian(tmp_path_factory.mktemp("wide") / "wide-12x16")


@pytest.fixture(scope="module")
def server(wide):
    with streamlit_server({"S2S_HUB_MODELS": str(wide)}, timeout=180) as url, browser() as b:
        yield url, b


def legible(page, key: str) -> dict:
    """The chart st-key-`key`'s labels, asserted whole: none overlapping, none outside the chart."""
    got = page.evaluate(LABELS, f".st-key-{key} .js-plotly-plot")
    assert got["overlaps"] == [] and got["outside"] == [], (key, got)
    return got


def translate_link(url: str, wide: Path, projector: bool, **fields) -> str:
    query = {"model": str(wide), "text": TEXT, "method": "greedy", "maxlen": 24, **fields}
    return url + "/translate?" + urlencode(query | ({"projector": "on"} if projector else {}))


@pytest.mark.parametrize("projector", [False, True], ids=["screen", "projector"])
def test_the_neuron_view_of_a_head_of_layer_12(server, wide, projector):
    url, b = server
    page = watched_page(b, 1280, 720)
    page.goto(translate_link(url, wide, projector, tab="Heads"))
    page.wait_for_selector(".st-key-neuron_view .js-plotly-plot", timeout=WAIT)
    settle(page, WAIT)
    assert "head 1 of layer 12" in page.locator(".st-key-neuron").inner_text()    # the last layer's, first
    page.locator(".st-key-neuron_view").scroll_into_view_if_needed()
    got = legible(page, "neuron_view")
    assert got["counts"]["ytick"] == 16          # every key of the 16 source pieces named
    shot(page, f"wide_neuron_view_{'projector' if projector else 'screen'}")
    assert exceptions(page) == []
    page.close()


@pytest.mark.parametrize("projector", [False, True], ids=["screen", "projector"])
def test_what_carries_the_change_over_12_by_16_heads(server, wide, projector):
    url, b = server
    page = watched_page(b, 1280, 720)
    page.goto(translate_link(url, wide, projector, tab="Compare an edit", edit=EDIT))
    page.wait_for_selector(".st-key-patch_map .js-plotly-plot", timeout=WAIT)
    settle(page, WAIT)
    page.locator(".st-key-patch_map").scroll_into_view_if_needed()
    got = legible(page, "patch_map")
    assert got["counts"]["ytick"] == 12 and got["counts"]["y2tick"] == 12    # every encoder and decoder layer named
    assert got["counts"]["x2tick"] >= 8           # the heads: every other one at least, upright
    shot(page, f"wide_patch_map_{'projector' if projector else 'screen'}")
    assert exceptions(page) == []
    page.close()


@pytest.mark.parametrize("projector", [False, True], ids=["screen", "projector"])
def test_every_layer_by_head_as_an_aligner_takes_the_whole_column(server, wide, projector):
    url, b = server
    page = watched_page(b, 1280, 720)
    page.goto(url + "/alignment?" + urlencode({"model": str(wide)} | ({"projector": "on"} if projector else {})))
    settle(page, WAIT)
    ask = page.get_by_role("button", name="Score every layer", exact=False)
    if ask.count():         # (scored once on this server, by any reader: not asked again)
        ask.click()
    page.wait_for_selector(".st-key-head_aer .js-plotly-plot", timeout=WAIT)
    settle(page, WAIT)
    page.locator(".st-key-head_aer").scroll_into_view_if_needed()
    got = legible(page, "head_aer")
    assert got["counts"]["xtick"] == 16 and got["counts"]["ytick"] == 12     # every head and layer named
    assert got["counts"].get("cells") == 12 * 16                              # every cell's AER written
    assert got["width"] > 0.9 * got["main"]                                   # the column's whole width
    shot(page, f"wide_head_aer_{'projector' if projector else 'screen'}")
    assert exceptions(page) == []
    page.close()
