"""A real Chromium at a projector's 1280 x 720: the Heads tab's neuron view of the shipped
Transformer (the Start page's self-attention link: decoder self-attention, layer 2, head 3, the
query ▁chien), with the Projector switch off and on. The view is drawn whole once scrolled to,
every one of its labels at least 14 px (18 with the Projector) and no two overlapping, and a
click on a row of the enlarged head above picks that row's query. Screenshots go to $S2S_SHOTS
when it is set (to look at)."""

import pytest

from browser import exceptions, need_chromium_and_shipped_checkpoints, settle, shot, streamlit_server, watched_page
from conftest import ROOT

need_chromium_and_shipped_checkpoints()
if not (ROOT / "checkpoints" / "en-fr-transformer" / "metrics.json").is_file():
    pytest.skip("the shipped Transformer is not in checkpoints/", allow_module_level=True)

WIDTH, HEIGHT = 1280, 720
LINK = ("/translate?model=en-fr-transformer&text=She+has+a+big+black+dog.&method=greedy&tab=Heads"
        "&heads=decoder&heads_layer=2&heads_head=3&heads_query=5")
VIEW = ".st-key-neuron_view .js-plotly-plot"

# every text of the neuron view's chart: its size and its box
TEXTS = """() => [...document.querySelectorAll('.st-key-neuron_view .js-plotly-plot text')]
  .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0)
  .map(t => { const r = t.getBoundingClientRect();
              return {txt: t.textContent.trim(), size: parseFloat(getComputedStyle(t).fontSize),
                      kind: t.getAttribute('class') || '', l: r.left, r: r.right, t: r.top, b: r.bottom}; })"""


@pytest.fixture(scope="module")
def app():
    from browser import browser
    with streamlit_server() as url, browser() as b:
        yield url, b


@pytest.mark.parametrize("projector", ["off", "on"])
def test_the_neuron_view_is_drawn_whole_and_readable(app, projector):
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(f"{url}{LINK}&projector={projector}")
        page.wait_for_selector(VIEW, timeout=180_000)
        settle(page)
        page.mouse.move(WIDTH / 2, HEIGHT / 2)
        page.mouse.wheel(0, 400)             # the reader scrolls: the link's own scroll to the tabs stops
        page.wait_for_timeout(500)
        page.locator(VIEW).evaluate("e => e.scrollIntoView({block: 'center'})")
        page.wait_for_function(f"""(() => {{ const r = document.querySelector('{VIEW}').getBoundingClientRect();
                                              return r.top >= 0 && r.bottom <= {HEIGHT}; }})()""", timeout=10_000)
        shot(page, f"neuron-view-projector-{projector}")
        assert exceptions(page) == []
        assert "for query 5" in page.locator(".st-key-neuron").inner_text()     # ▁chien, from the address
        box = page.locator(VIEW).bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT, box           # the whole chart in sight
        texts = page.evaluate(TEXTS)
        need = 18 if projector == "on" else 14
        small = [t for t in texts if t["size"] < need - 0.05]
        assert not small, small[:5]
        # the keys (rows), each panel's title and the weights' values are all drawn
        names = {t["txt"] for t in texts}
        assert {"<s>", "▁Elle", "▁a", "▁un", "▁grand"} <= names and "q" in names, names
        assert any("softmax" in t["txt"] for t in texts) and "0.91" in names
        labels = [t for t in texts if "bartext" not in t["kind"]]
        clashes = [(a["txt"], c["txt"]) for i, a in enumerate(labels) for c in labels[i + 1:]
                   if min(a["r"], c["r"]) - max(a["l"], c["l"]) > 1 and min(a["b"], c["b"]) - max(a["t"], c["t"]) > 1]
        assert not clashes, clashes
    finally:
        page.close()


def test_a_click_on_a_row_of_the_enlarged_head_picks_the_query(app):
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(url + LINK)
        page.wait_for_selector(VIEW, timeout=180_000)
        settle(page)
        big = page.locator(".st-key-head_enlarged")
        big.scroll_into_view_if_needed()
        rows = page.evaluate("document.querySelector('.st-key-head_enlarged .js-plotly-plot').layout.yaxis.ticktext"
                             ".length")
        area = big.locator(".nsewdrag").first.bounding_box()
        # the map shows whole words, "Elle a un grand chien noir. </s>": its third row is ▁un, the 3rd piece
        page.mouse.click(area["x"] + area["width"] / 2, area["y"] + (2.5 / rows) * area["height"])
        page.wait_for_function("document.querySelector('.st-key-neuron').innerText.includes('for query 3')",
                               timeout=60_000)
        assert exceptions(page) == []
    finally:
        page.close()
