"""Figures out of the app, in a real Chromium: a Plotly chart's camera button saves SVG
named for what it shows, and a main chart's HTML download draws offline, fetching nothing."""
import os
import re
import shutil
from pathlib import Path

import pytest

from browser import CHROMIUM, browser, exceptions, streamlit_server
from conftest import ROOT

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium for the browser tests: apt-get install -y chromium")
    pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)

SHIPPED = (ROOT / "checkpoints" / "en-fr-additive" / "metrics.json").is_file()
PAIR_FIGURE = "[class*='st-key-corpus_figure'] .js-plotly-plot"


@pytest.fixture(scope="module")
def corpus_page(tmp_path_factory, tiny_additive):
    """The Alignment page's Your corpus tab, on the trial pairs, in a 1280 x 720 window."""
    env = {}
    if not SHIPPED:
        zoo = tmp_path_factory.mktemp("zoo")
        shutil.copytree(tiny_additive, zoo / "en-fr-additive")
        env["S2S_CHECKPOINTS"] = str(zoo)
    with streamlit_server(env) as url, browser() as b:
        context = b.new_context(viewport={"width": 1280, "height": 720}, accept_downloads=True)
        page = context.new_page()
        page.goto(url + "/alignment?tab=Your+corpus")
        page.wait_for_selector(PAIR_FIGURE + " .xtick text", timeout=120_000)
        yield b, page
        context.close()


def test_the_camera_button_saves_an_svg_named_for_the_chart(corpus_page):
    _, page = corpus_page
    page.locator(PAIR_FIGURE).hover()
    with page.expect_download(timeout=30_000) as d:
        page.locator(PAIR_FIGURE + " .modebar-btn[data-title^='Download plot']").click()
    name = d.value.suggested_filename
    assert name.endswith(".svg") and name.startswith("hansards-trial_en-fr-additive_grow-diag_pair1")
    svg = Path(d.value.path()).read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<svg") and "chacun" in svg          # vector, with the pair's words
    assert not exceptions(page)


def test_the_html_download_draws_its_chart_offline(corpus_page, tmp_path):
    b, page = corpus_page
    button = page.get_by_role("button", name=re.compile(r"^⬇ Chart \(HTML, offline, [0-9.]+ MB\)$"))
    said = float(re.search(r"([0-9.]+) MB", button.inner_text()).group(1))
    with page.expect_download(timeout=60_000) as d:
        button.click()
    assert d.value.suggested_filename == "hansards-trial_en-fr-additive_grow-diag_pair1.html"
    html = tmp_path / "chart.html"
    d.value.save_as(html)
    assert abs(html.stat().st_size / 1e6 - said) <= 0.1 * said           # the button says what it weighs
    offline = b.new_context(viewport={"width": 1280, "height": 720})
    requests = []
    offline.route("**/*", lambda route: (requests.append(route.request.url), route.abort())
                  if not route.request.url.startswith("file:") else route.continue_())
    try:
        p = offline.new_page()
        p.goto(html.as_uri())
        p.wait_for_selector(".js-plotly-plot .xtick text", timeout=30_000)
        ticks = [t.text_content() for t in p.query_selector_all(".js-plotly-plot .xtick text")]
        assert "each" in ticks and "confusing" in ticks                     # the pair's English words, drawn
        assert requests == []                                               # nothing fetched
    finally:
        offline.close()
