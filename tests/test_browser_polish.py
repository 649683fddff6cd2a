"""Issue #69's small items, in Chromium at 1280 x 720: the toolbar over no label (item 2), no
404 of ours on a page load (item 10).

Screenshots go to $S2S_SHOTS when it is set (tests/browser.py's shot).
"""
import urllib.parse

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

need_chromium_and_shipped_checkpoints()
WIDTH, HEIGHT = 1280, 720


@pytest.fixture(scope="module")
def app():
    with streamlit_server() as url, browser() as b:
        yield url, b


def translate(**query) -> str:
    return "/translate?" + urllib.parse.urlencode({"method": "greedy", **query})


# the pruning chart's key (a two-line title) and the contrast bars' panel titles, under the toolbar before
TOOLBAR_CASES = {
    "pruning_chart": translate(model="en-fr-transformer", text="She has a big black dog.", tab="Heads",
                               heads="encoder", mask="encoder:2.1"),
    "contrast_bars": translate(model="en-fr-additive", text="The little girl is happy because her mother is here.",
                               tab="Step by step", step="1", foil="▁Le"),
}
# the toolbar's box (shown on hover) against every title, legend entry and annotation of the chart
UNDER_TOOLBAR = """key => {
  const root = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  if (!root) return null;
  const bar = root.querySelector('.modebar');
  const b = bar.getBoundingClientRect(), style = getComputedStyle(bar);
  const texts = [...root.querySelectorAll('text.gtitle, text.legendtext, text.annotation-text, '
                                          + 'text[class$="title"]')].filter(t => t.textContent.trim());
  return {shown: style.opacity !== '0' && b.width > 0, count: texts.length,
          under: texts.filter(t => { const r = t.getBoundingClientRect();
                   return Math.min(r.right, b.right) - Math.max(r.left, b.left) > 1
                          && Math.min(r.bottom, b.bottom) - Math.max(r.top, b.top) > 1; })
                 .map(t => t.textContent.trim().slice(0, 40))};
}"""


@pytest.mark.parametrize("projector", ["off", "on"])
@pytest.mark.parametrize("key", list(TOOLBAR_CASES))
def test_the_toolbar_on_hover_covers_no_title_or_legend(app, key, projector):
    """Issue #69 item 2: hovering the pruning chart showed its toolbar over the key ("encoder
    decoder"), hovering the contrast bars over "why ▁La, not ▁Le"."""
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    try:
        page.goto(url + TOOLBAR_CASES[key] + ("&projector=on" if projector == "on" else ""))
        settle(page)
        assert not exceptions(page), exceptions(page)[0][:400]
        chart = page.locator(f".st-key-{key} .js-plotly-plot").first
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_timeout(800)
        found = page.evaluate(UNDER_TOOLBAR, key)
        shot(page, f"polish-toolbar-{key}-{projector}")
        assert found and found["shown"] and found["count"] > 0, found
        assert found["under"] == [], f"the toolbar covers {found['under']}"
    finally:
        page.close()


# Streamlit's own frontend, on a page's address (/translate), first looks for its server under that
# path (/translate/_stcore/health and host-config, which Streamlit's server answers 404 by design:
# its _RESERVED_STATIC_PATH_SUFFIXES), then at the root: no code of ours asks for them (issue #69
# item 10). Every other 404 would be ours.
STREAMLIT_PROBES = ("/_stcore/health", "/_stcore/host-config")


@pytest.mark.parametrize("path", ["/translate", "/cells", "/"])
def test_a_page_load_asks_for_nothing_missing(app, path):
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    missing, errors = [], []
    page.on("response", lambda r: missing.append(r.url.removeprefix(url)) if r.status == 404 else None)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(url + path)
        settle(page)
        ours = [m for m in missing if not (path != "/" and m in {path + p for p in STREAMLIT_PROBES})]
        assert ours == [], f"404 on loading {path}: {ours}"
        assert len([e for e in errors if "404" in e]) == len(missing), errors      # no 404 but those
    finally:
        page.close()
