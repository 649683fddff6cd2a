"""A real Chromium at a projector's 1280 x 720: LSTMVis's select-a-span on Cell States (issue #56
part 2), Projector off and on. The Start page's link opens the War and Peace LSTM with a span
selected on *Colored text*: the span is underlined in the text, its cells listed and drawn as a
heatmap (labels at least 14 px, 18 with the Projector), its matches listed in the passage and in
held-out text; a match's *Go* moves the selection there. Screenshots go to $S2S_SHOTS if set."""
import os
import re
from pathlib import Path

import pytest

from browser import browser, exceptions, need_chromium_and_shipped_checkpoints, settle, streamlit_server, watched_page
from conftest import ROOT

need_chromium_and_shipped_checkpoints()
if not (ROOT / "checkpoints" / "charlm-war-and-peace" / "metrics.json").is_file():
    pytest.skip("the shipped War and Peace model is not in checkpoints/", allow_module_level=True)

LINK = "/cells?model=charlm-war-and-peace&tab=Colored+text&span=0:12&read=cell"
SMALLEST = """() => {
  const sizes = [...document.querySelectorAll('[class*="st-key-span_heat"] .js-plotly-plot text')]
      .filter(e => e.textContent.trim() && e.getBoundingClientRect().width > 0)
      .map(e => parseFloat(getComputedStyle(e).fontSize));
  return sizes.length ? Math.min(...sizes) : 0;
}"""


def shot(page, name: str) -> None:
    if os.environ.get("S2S_SHOTS"):
        Path(os.environ["S2S_SHOTS"]).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(os.environ["S2S_SHOTS"]) / f"{name}.png"))


def underlined(page) -> int:
    return page.locator('[class*="st-key-point_colored"] span[style*="box-shadow"]').count()


@pytest.fixture(scope="module")
def app():
    with streamlit_server(timeout=120) as url, browser() as b:
        yield url, b


@pytest.mark.parametrize("projector", ["off", "on"])
def test_a_span_selected_on_colored_text_draws_its_cells_and_matches(app, projector):
    url, b = app
    page = watched_page(b, 1280, 720)
    page.goto(url + LINK + ("&projector=on" if projector == "on" else ""))
    settle(page, 300_000)
    assert not exceptions(page)
    assert underlined(page) == 12                                   # characters 0..11
    shot(page, f"span-{projector}-1-text")
    heat = page.locator('[class*="st-key-span_heat_chars"]')
    heat.scroll_into_view_if_needed()
    assert heat.locator(".js-plotly-plot").count() == 1
    assert page.evaluate(SMALLEST) >= (18 if projector == "on" else 14)
    body = page.locator('[data-testid="stMain"]').inner_text()
    assert re.search(r"\d+ cells? on throughout", body)
    assert "Matches in this text:" in body and "Matches in 100,000 held-out characters" in body \
        or "Matches in the shipped held-out example" in body
    page.locator('[class*="st-key-chars_span"]').first.scroll_into_view_if_needed()     # the controls, then the cells
    shot(page, f"span-{projector}-2-controls")
    heat.evaluate("e => e.scrollIntoView({block: 'end'})")
    shot(page, f"span-{projector}-3-cells")
    matches = page.locator('[class*="st-key-chars_matches_0"]')
    matches.scroll_into_view_if_needed()
    shot(page, f"span-{projector}-4-matches")
    go = matches.get_by_role("button", name="Go").first
    first_match = matches.locator("b").first.inner_text()
    go.click()
    settle(page, 300_000)
    assert not exceptions(page)
    page.locator('[class*="st-key-point_colored"]').evaluate("e => e.scrollIntoView()")
    shot(page, f"span-{projector}-5-jumped")
    marked = "".join(page.locator('[class*="st-key-point_colored"] span[style*="box-shadow"]').all_inner_texts())
    assert marked.replace("↵", "") == first_match.replace("↵", "\n") and underlined(page) == len(first_match)
    page.close()
