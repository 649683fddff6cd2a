"""In a real Chromium at 1280 x 720: Start here's lens link (the decoding topic) lands on Step by
step's panel of each layer's guess (ui/lens_panel.py), Projector off and on: the panel wholly on the
first screen under the header (with the Projector on, starting in its top half), at the link's step,
its table showing a word that flips between layers (layer 1's likeliest piece is not the last's)."""
import pytest

from browser import (
    browser,
    exceptions,
    need_chromium_and_shipped_checkpoints,
    settle,
    shot,
    streamlit_server,
    watched_page,
)
from conftest import ROOT

need_chromium_and_shipped_checkpoints()
if not (ROOT / "checkpoints" / "en-fr-transformer" / "metrics.json").is_file():
    pytest.skip("the shipped Transformer is not in checkpoints/", allow_module_level=True)

WIDTH, HEIGHT = 1280, 720
LINK = "Translate & Align · the lens › Step by step"

# what the panel shows once drawn: its box, the step slider's value and the table's cells (a row per layer)
READ = """() => {
  const panel = document.querySelector('.st-key-point_lens');
  const header = document.querySelector('header[data-testid="stHeader"]');
  const slider = document.querySelector('.st-key-step input[type="range"]');
  const plot = document.querySelector('.st-key-lens_top .js-plotly-plot');
  const r = panel ? panel.getBoundingClientRect() : null;
  return {top: r && r.top, bottom: r && r.bottom, header: header ? header.getBoundingClientRect().bottom : 60,
          step: slider ? slider.value : null,
          cells: plot && plot.data ? plot.data[0].text : null};
}"""


@pytest.fixture(scope="module")
def app():
    """One server and one browser for the module (a cold server imports torch)."""
    with streamlit_server() as url, browser() as b:
        yield url, b


@pytest.mark.parametrize("projector", ["off", "on"])
def test_the_lens_link_lands_on_the_panel(app, projector):
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(url + "/" + ("?projector=on" if projector == "on" else ""))
        page.get_by_role("link", name=LINK).wait_for(timeout=180_000)
        settle(page)
        page.get_by_role("link", name=LINK).click()
        page.wait_for_selector(".st-key-lens_top .js-plotly-plot", timeout=180_000)
        settle(page)
        shot(page, f"lens link projector {projector}")
        seen = page.evaluate(READ)
        assert exceptions(page) == []
        assert seen["step"] == "5", seen
        top_half = seen["header"] + (HEIGHT - seen["header"]) / 2
        assert seen["header"] - 0.5 <= seen["top"] <= (top_half if projector == "on" else HEIGHT), seen
        if projector == "off":
            assert seen["bottom"] <= HEIGHT + 0.5, seen
        first, last = (row[0].split("<br>")[0].replace("<b>", "").replace("</b>", "")
                       for row in (seen["cells"][0], seen["cells"][-1]))
        assert last == "▁heureux" and first != last, seen["cells"]
    finally:
        page.close()
