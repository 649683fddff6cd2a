"""A real Chromium at a projector's 1280 x 720: the Heads tab's knockout (ui/knockout.py) on the
shipped Transformer. The Start page's "are all heads needed?" link lands with encoder
self-attention's layer 2 head 1 knocked out: the grid, the translation without that head (its
changed words marked) and the pruning chart all wholly on the first screen, Projector off and on;
and a click on a head in the matrix knocks it out, and a second brings it back, the address
following. Screenshots go to $S2S_SHOTS when it is set (to look at)."""

import pytest

from browser import exceptions, need_chromium_and_shipped_checkpoints, settle, shot, streamlit_server, watched_page
from conftest import ROOT

need_chromium_and_shipped_checkpoints()
if not (ROOT / "checkpoints" / "en-fr-transformer" / "metrics.json").is_file():
    pytest.skip("the shipped Transformer is not in checkpoints/", allow_module_level=True)

WIDTH, HEIGHT = 1280, 720
LINK = "Translate & Align · knock heads out › Heads"
ANSWER = ".st-key-point_knockout_answer"
# what the Start link promises on the first screen: the grid, the answer beside it, the pruning chart
FIRST_SCREEN = [".st-key-point_knockout", ANSWER, ".st-key-pruning_chart .js-plotly-plot"]
# the centre of one head's cell of the knockout's matrix (ui/head_overview.py), in page coordinates
MAP_CENTRE = """([layer, head, heads]) => {
  const g = document.querySelector('.st-key-knockout_grid .js-plotly-plot');
  if (!g || !g._fullLayout) return null;
  const f = g._fullLayout, r = g.getBoundingClientRect();
  return [r.left + f.xaxis._offset + f.xaxis.l2p(head), r.top + f.yaxis._offset + f.yaxis.l2p(layer)]; }"""
BOXES = """sels => sels.map(s => { const e = document.querySelector(s);
  if (!e) return null; const r = e.getBoundingClientRect(); return {sel: s, top: r.top, bottom: r.bottom}; })"""
HEADER = """() => { const h = document.querySelector('header[data-testid="stHeader"]');
  return h ? h.getBoundingClientRect().bottom : 60; }"""


@pytest.fixture(scope="module")
def app():
    from browser import browser
    with streamlit_server() as url, browser() as b:
        yield url, b


@pytest.mark.parametrize("projector", ["off", "on"])
def test_the_start_link_lands_on_a_knocked_out_head_and_the_pruning_chart(app, projector):
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(f"{url}/?projector={projector}")
        page.get_by_role("link", name=LINK).click(timeout=180_000)
        page.wait_for_selector(f"{ANSWER} .s2s-text", timeout=180_000)
        page.wait_for_selector(FIRST_SCREEN[2], timeout=180_000)
        settle(page)
        shot(page, f"knockout-start-link-projector-{projector}")
        assert exceptions(page) == []
        assert page.get_by_role("tab", name="Heads").get_attribute("aria-selected") == "true"
        answer = page.locator(ANSWER).inner_text()
        assert "encoder:2.1" in answer and "Elle a une grosse chien noire." in " ".join(answer.split())
        assert "mask=encoder%3A2.1" in page.url or "mask=encoder:2.1" in page.url
        top = page.evaluate(HEADER)
        for box in page.evaluate(BOXES, FIRST_SCREEN):
            assert box is not None and top - 0.5 <= box["top"] and box["bottom"] <= HEIGHT + 0.5, (box, top)
    finally:
        page.close()


def test_a_click_on_a_head_knocks_it_out_and_back(app):
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(f"{url}/translate?model=en-fr-transformer&text=She+has+a+big+black+dog.&method=greedy"
                  "&tab=Heads&heads=encoder")
        page.locator(".st-key-heads_click button", has_text="Click: knock out").click(timeout=180_000)
        page.wait_for_selector(".st-key-knockout_grid .draglayer .nsewdrag", timeout=60_000)
        settle(page)
        assert "No head knocked out" in page.locator(ANSWER).inner_text()
        x, y = page.evaluate(MAP_CENTRE, [1, 0, 4])           # encoder self-attention, layer 2, head 1
        page.mouse.click(x, y)
        page.wait_for_function(f"() => (document.querySelector('{ANSWER}') || {{}}).innerText?.includes('grosse')",
                               timeout=60_000)
        settle(page)
        assert "mask=encoder%3A2.1" in page.url or "mask=encoder:2.1" in page.url
        assert page.locator(".st-key-knockout_grid .shapelayer path").count() >= 2 + 2   # bands, greyed and crossed
        x, y = page.evaluate(MAP_CENTRE, [1, 0, 4])           # again: back
        page.mouse.click(x, y)
        page.wait_for_function(f"() => (document.querySelector('{ANSWER}') || {{}}).innerText?.includes("
                               "'No head knocked out')", timeout=60_000)
        settle(page)
        assert "mask=" not in page.url
        assert exceptions(page) == []
    finally:
        page.close()
