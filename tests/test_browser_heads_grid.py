"""A real Chromium at 1280 x 720: the Heads tab's grid of every layer x head, opened by the Start
page's self-attention link, is drawn once. Plotly's automargin draws a chart, measures the labels
that overflow its margins and draws it all again; the grid's margins (s2s.figures.heads_grid) hold
its token labels and colour bar, so that plotly keeps them as they are (issue #62, the Heads link's
time). Automargin stays on, so a label wider than reckoned is still drawn whole, only twice: the
margins asked for and those drawn are compared, for the weights and the norm view, with the
Projector switch off (the maps labelled) and on (unlabelled). Screenshots go to $S2S_SHOTS."""

import pytest

from browser import exceptions, need_chromium_and_shipped_checkpoints, settle, shot, streamlit_server, watched_page
from conftest import ROOT

need_chromium_and_shipped_checkpoints()
if not (ROOT / "checkpoints" / "en-fr-transformer" / "metrics.json").is_file():
    pytest.skip("the shipped Transformer is not in checkpoints/", allow_module_level=True)

WIDTH, HEIGHT = 1280, 720
PAGE = "/translate?model=en-fr-transformer&text=She+has+a+big+black+dog.&method=greedy&tab=Heads"
VIEWS = {"weights": "&heads=decoder&heads_layer=2&heads_head=3&heads_query=5",      # the Start page's link
         "norm": "&heads=cross&heads_view=norm"}
GRID = ".st-key-heads_grid .js-plotly-plot"
# the margins the figure asked for and those plotly drew it with, and the grid's tick labels drawn
MARGINS = f"""() => {{ const g = document.querySelector('{GRID}'), s = g._fullLayout._size;
  return {{asked: g.layout.margin, drawn: {{l: s.l, r: s.r, t: s.t, b: s.b}},
          labels: [...g.querySelectorAll('.xtick text, .ytick text')].filter(t => t.textContent.trim()).length}}; }}"""


@pytest.fixture(scope="module")
def app():
    from browser import browser
    with streamlit_server() as url, browser() as b:
        yield url, b


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("projector", ["off", "on"])
def test_the_heads_grid_is_drawn_once(app, projector, view):
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(f"{url}{PAGE}{VIEWS[view]}&projector={projector}")
        page.wait_for_selector(GRID + " .main-svg", timeout=180_000)
        settle(page)
        shot(page, f"heads-grid-{view}-projector-{projector}")
        assert exceptions(page) == []
        m = page.evaluate(MARGINS)
        assert all(abs(m["asked"][k] - m["drawn"][k]) <= 1 for k in "lrtb"), m     # automargin moved none
        assert (m["labels"] > 0) == (projector == "off"), m      # the maps labelled on a screen only
    finally:
        page.close()
