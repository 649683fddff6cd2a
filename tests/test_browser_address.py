"""A copied link reproduces the view, in a real Chromium: on each page, change what is shown,
read the address bar, open that address in a fresh browser context, and compare."""
from contextlib import contextmanager

import pytest
from playwright.sync_api import expect

from browser import browser, exceptions, need_chromium_and_shipped_checkpoints, streamlit_server
from conftest import ROOT

need_chromium_and_shipped_checkpoints()
CKPT = ROOT / "checkpoints"


@pytest.fixture(scope="module")
def app():
    with streamlit_server() as url, browser() as b:
        yield url, b


def settled(page, timeout_ms: int = 120_000) -> None:
    """The script's run is over (data-test-script-state leaves "initial" only once a run starts).
    The browser draws what the run sent a moment later, so a check of what is shown waits for
    it (Playwright's expect) instead of reading at once."""
    page.wait_for_function("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
                           " return a && a.dataset.testScriptState === 'notRunning'; }", timeout=timeout_ms)


def address_holds(page, timeout_ms: int = 60_000, **want: str | None) -> str:
    """The address once its query string holds each parameter `want` names with exactly that
    value (None: present, any value): a parameter is matched by name, never as a substring of
    another (pair=7 is not corpus_pair=7)."""
    page.wait_for_function("want => { const q = new URLSearchParams(location.search);"
                           " return Object.entries(want).every(([k, v]) => v === null ? q.has(k) : q.get(k) === v); }",
                           arg=want, timeout=timeout_ms)
    return page.url


def drawn(page, chart: str, unlike: list[str] | None = None, timeout_ms: int = 60_000) -> list[str]:
    """The axis labels of the chart `chart` (its element's selector) once the run is over and the
    chart is drawn, none of it stale (while a run draws, Streamlit keeps the old chart beside the
    new one, marked stale), and they differ from `unlike` when given (the chart was redrawn)."""
    page.wait_for_function("""([chart, unlike]) => {
        const app = document.querySelector('[data-testid="stApp"]'), boxes = [...document.querySelectorAll(chart)];
        if (!app || app.dataset.testScriptState !== 'notRunning' || boxes.some(b => b.dataset.stale === 'true'))
            return false;
        const t = boxes.flatMap(b => [...b.querySelectorAll('.xtick text, .ytick text')].map(e => e.textContent));
        return t.length > 0 && (unlike === null || JSON.stringify(t) !== JSON.stringify(unlike)); }""",
                           arg=[chart, unlike], timeout=timeout_ms)
    return ticks(page, chart).all_text_contents()


def ticks(page, chart: str):
    """The axis labels of the chart `chart`, its stale copy left out."""
    live = f"{chart}:not([data-stale='true'])"
    return page.locator(f"{live} .xtick text, {live} .ytick text")


@contextmanager
def reopened(b, address: str):
    """The address opened in a new browser context (no cookies, no session, nothing shared):
    the block compares what it shows; no exception may be on the page at the end."""
    context = b.new_context(viewport={"width": 1280, "height": 720})
    try:
        page = context.new_page()
        page.goto(address)
        page.wait_for_selector("[data-testid='stMain']", timeout=90_000)
        settled(page)
        yield page
        assert not exceptions(page)
    finally:
        context.close()


def selected_tab(page):
    return page.locator("[role='tab'][aria-selected='true']").first


HEATMAP = "[class*='st-key-heatmap']"
GOLD = "[class*='st-key-gold_figure']"


def test_translate(app):
    url, b = app
    text = "The cat sleeps on the red sofa."
    context = b.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(url + "/translate")
    address_holds(page, model=None)                        # the page has run to its end
    page.get_by_role("textbox", name="English text").fill(text)
    page.get_by_role("button", name="Translate", exact=True).click()
    address_holds(page, text=text)
    words = drawn(page, HEATMAP)                            # the heatmap of this text, in words
    page.get_by_role("radio", name="Pieces").click()
    address_holds(page, view="pieces")
    drawn(page, HEATMAP, unlike=words)                      # redrawn in pieces
    page.get_by_role("tab", name="Beam tree").click()
    address = address_holds(page, text=text, view="pieces", tab="Beam tree")
    pieces = drawn(page, HEATMAP, unlike=words)
    context.close()
    with reopened(b, address) as other:
        expect(other.get_by_role("textbox", name="English text")).to_have_value(text, timeout=60_000)
        expect(selected_tab(other)).to_have_text("Beam tree", timeout=60_000)
        expect(other.get_by_role("radio", name="Pieces")).to_have_attribute("aria-checked", "true", timeout=60_000)
        expect(ticks(other, HEATMAP)).to_have_text(pieces, timeout=60_000)     # the same pieces


def test_alignment(app):
    url, b = app
    context = b.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(url + "/alignment")
    address_holds(page, pair="4")                          # the default pair, drawn
    four = drawn(page, GOLD)
    box = page.get_by_role("spinbutton", name="Pair (1–37)")
    box.fill("7")
    box.press("Enter")
    address = address_holds(page, pair="7", model="en-fr-additive", pairs="trial", tab="Against human alignments")
    seven = drawn(page, GOLD, unlike=four)                 # pair 7's words
    context.close()
    with reopened(b, address) as other:
        # the number box first paints its minimum, then the value the server set: wait for it
        expect(other.get_by_role("spinbutton", name="Pair (1–37)")).to_have_value("7", timeout=60_000)
        expect(selected_tab(other)).to_have_text("Against human alignments", timeout=60_000)
        expect(ticks(other, GOLD)).to_have_text(seven, timeout=60_000)            # pair 7 drawn


def test_bottleneck(app):
    url, b = app
    context = b.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(url + "/bottleneck")
    address_holds(page, model=None)                        # the page has run to its end
    page.get_by_text("Show both models' context vectors").click()
    address = address_holds(page, contexts="on", model=None)
    context.close()
    with reopened(b, address) as other:
        expect(other.get_by_role("switch", name="Show both models' context vectors")).to_be_checked(timeout=60_000)
        other.wait_for_selector("[class*='st-key-sim_'] .js-plotly-plot", timeout=60_000)


@pytest.mark.parametrize("path,tab", [("/gradients", "Trained models"), ("/cells", "Gates")])
def test_gradients_and_cells(app, path, tab):
    url, b = app
    context = b.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(url + path)
    address_holds(page, tab=None)                          # the page has run to its end
    page.get_by_role("tab", name=tab).click()
    address = address_holds(page, tab=tab)
    context.close()
    with reopened(b, address) as other:
        expect(selected_tab(other)).to_have_text(tab, timeout=60_000)
