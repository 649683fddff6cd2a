"""What a class sees of the Translate & Align page's layout (issue #62), in a real Chromium at a
projector's 1280 x 720: with the sidebar open (as the page opens without the Projector), with
the Projector on (which collapses the sidebar), and with the Projector on and the sidebar opened
again beside it.

- every button's label whole (Forced decoding's "Score this translation" was cut to "Score this
  transl…" beside the sidebar);
- the tab bar inside the main column, on at most two rows, with no scroll chevron, as drawn
  (nine tabs) and with three more tabs added to it (the twelve the next views bring);
- Compare an edit labels the words the edit changed in both heatmaps, and the Heads tab's
  enlarged head labels every column;
- the "0" atop the log p bar charts (steer, compare) drawn with the Projector on;
- plotly's toolbar, shown on hover, clear of a heatmap's column labels and axis title on top;
- Start here's outline on one screen in every view, no link's label cut.

One server and one browser for the module. Screenshots of each view go to the folder $S2S_SHOTS
when it is set (to look at).
"""

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
VIEWS = {"sidebar": "", "projector": "&projector=on", "projector+sidebar": "&projector=on"}
DOG = "text=She+has+a+big+black+dog."
EDIT = ("text=My+grandmother+lives+in+a+small+house+near+the+sea."
        "&edit=My+grandfather+lives+in+a+big+house+near+the+sea.")
# labels of the views issues #60 and #61 add, the longest first: the tab bar must hold them too
MORE_TABS = ["What carries the change", "Why X not Y", "Head knockout"]


@pytest.fixture(scope="module")
def app():
    """One server and one browser for the module (a cold server imports torch)."""
    with streamlit_server() as url, browser() as b:
        yield url, b


def open_view(app, query: str, view: str, path: str = "/translate"):
    """`path?query` at 1280 x 720 in `view` (a key of VIEWS), once its run is over and drawn."""
    url, b = app
    page = watched_page(b, WIDTH, HEIGHT)
    page.goto(f"{url}{path}?{query}{VIEWS[view]}")
    settle(page)
    if view == "projector+sidebar":        # the Projector collapsed the sidebar: open it again, as a user does
        page.click('[data-testid="stExpandSidebarButton"]')
        page.wait_for_function("() => document.querySelector('[data-testid=\"stSidebar\"]')"
                               ".getBoundingClientRect().right > 200")
        settle(page)
    assert exceptions(page) == []
    return page


def scroll_to(page, selector: str) -> None:
    page.locator(selector).first.scroll_into_view_if_needed()
    settle(page)


# ------------------------------------------------------------------ buttons and the tab bar
CUT_BUTTONS = """() => [...document
  .querySelectorAll('[data-testid="stMain"] button [data-testid="stMarkdownContainer"]')]
  .filter(e => e.getBoundingClientRect().width > 0 && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent.trim() + ': ' + e.clientWidth + ' of ' + e.scrollWidth + ' px')"""


@pytest.mark.parametrize("view", list(VIEWS))
def test_buttons_are_whole(app, view):
    """Forced decoding's two buttons and the what-if views' buttons show their whole labels."""
    for query in ("tab=Forced+decoding", "tab=Forced+decoding&reference=Elle+a+un&cont=1",
                  f"tab=Step+by+step&{DOG}&steer=Elle+a+une", f"tab=Compare+an+edit&{EDIT}"):
        page = open_view(app, query, view)
        try:
            scroll_to(page, '[data-testid="stTabs"]')
            shot(page, f"layout buttons {view} {query[:40]}")
            names = page.evaluate("() => [...document.querySelectorAll('[data-testid=\"stMain\"] button')]"
                                  ".map(b => b.textContent.trim())")
            if query.startswith("tab=Forced"):
                assert {"Score this translation", "Continue from this French"} <= set(names), names
            assert page.evaluate(CUT_BUTTONS) == [], query
        finally:
            page.close()


TAB_BAR = """(more) => {
  const bar = document.querySelector('[data-testid="stTabs"] [role="tablist"]');
  for (const label of more) {        // a tab like the others: the same element, another label
    const tab = bar.querySelector('[role="tab"]').cloneNode(true);
    tab.setAttribute('aria-selected', 'false');
    tab.querySelector('p').textContent = label;
    bar.appendChild(tab);
  }
  const column = document.querySelector('[data-testid="stTabs"]').getBoundingClientRect();   // the main column
  const tabs = [...bar.querySelectorAll('[role="tab"]')].map(t => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent.trim(), left: r.left, right: r.right, top: Math.round(r.top),
            cut: [...t.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1)}; });
  const chevrons = [...document.querySelectorAll('[data-testid^="stTabsScroll"]')]
      .filter(e => e.getBoundingClientRect().width > 0).length;
  return {tabs, column: {left: column.left, right: column.right}, chevrons, scroll: bar.scrollWidth - bar.clientWidth,
          rows: new Set(tabs.map(t => t.top)).size};
}"""


@pytest.mark.parametrize("view", list(VIEWS))
def test_tab_bar_holds_twelve_tabs(app, view):
    """The nine tabs, and twelve, wrap within the main column (at most two rows), every label
    whole and in sight, no scroll chevron; the bar as drawn after a tab is chosen (Compare an
    edit, near the end: Streamlit's chevron stayed drawn there)."""
    page = open_view(app, "tab=Compare+an+edit", view)
    try:
        for more in ([], MORE_TABS):
            bar = page.evaluate(TAB_BAR, more)
            shot(page, f"layout tabs {view} {len(bar['tabs'])}")
            assert len(bar["tabs"]) == 9 + len(more)
            assert bar["scroll"] <= 0 and bar["chevrons"] == 0, bar
            assert bar["rows"] <= 2, bar
            for t in bar["tabs"]:
                assert bar["column"]["left"] - 0.5 <= t["left"] and t["right"] <= bar["column"]["right"] + 0.5, t
                assert not t["cut"], t
    finally:
        page.close()


# ------------------------------------------------------------------ labels of the maps
def tick_texts(page, chart: str, axis: str = "xtick") -> list[dict]:
    return page.evaluate("""([chart, axis]) => [...document.querySelectorAll(chart + ' .' + axis + ' text')]
        .map(e => { const r = e.getBoundingClientRect();
                    return {text: e.textContent, shown: getComputedStyle(e).display !== 'none' && r.width > 0,
                            left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })""", [chart, axis])


@pytest.mark.parametrize("view", list(VIEWS))
def test_compare_an_edit_labels_the_changed_words(app, view):
    """The two maps of Compare an edit label every source word at 1280 px, the changed ones
    (grandmother/grandfather, small/big) whatever else is thinned."""
    page = open_view(app, f"tab=Compare+an+edit&{EDIT}", view)
    try:
        scroll_to(page, '[class*="st-key-edit_map0"]')
        shot(page, f"layout compare edit {view}")
        for i, changed in ((0, {"grandmother", "small"}), (1, {"grandfather", "big"})):
            shown = [t["text"] for t in tick_texts(page, f'[class*="st-key-edit_map{i}"]') if t["shown"]]
            assert changed <= set(shown), shown
            assert len(shown) == 11, shown           # 10 words and </s>
    finally:
        page.close()


@pytest.mark.parametrize("view", ["sidebar", "projector"])
def test_enlarged_head_labels_every_column(app, view):
    """The Heads tab's enlarged head, 40 % of the column: all 8 source pieces labelled, apart."""
    page = open_view(app, f"tab=Heads&model=en-fr-transformer&{DOG}&view=pieces", view)
    try:
        scroll_to(page, '[data-testid="stTabs"]')
        shot(page, f"layout enlarged head {view}")
        labels = [t for t in tick_texts(page, ".st-key-head_enlarged") if t["shown"]]
        assert [t["text"] for t in labels] == ["▁She", "▁has", "▁a", "▁big", "▁black", "▁dog", ".", "</s>"]
        ys = [t for t in tick_texts(page, ".st-key-head_enlarged", "ytick") if t["shown"]]
        assert len(ys) == 8, ys
        for a, b in zip(labels, labels[1:]):
            assert b["left"] - a["left"] >= 17, (a, b)      # a line's height apart along the axis, at 14 px
    finally:
        page.close()


@pytest.mark.parametrize("query", [f"tab=Step+by+step&{DOG}&steer=Elle+a+une",
                                   f"tab=Compare+an+edit&{DOG}&edit=He+has+a+big+black+dog."])
@pytest.mark.parametrize("view", ["projector", "projector+sidebar", "sidebar"])
def test_log_p_bars_keep_their_zero(app, view, query):
    """The value axis of the log p bars ends at 0: its "0" is drawn, at 18 px too."""
    page = open_view(app, query, view)
    try:
        bars = page.locator('[class*="_lp0"] .js-plotly-plot, [class*="_lp1"] .js-plotly-plot')
        assert bars.count() == 2
        bars.first.scroll_into_view_if_needed()
        settle(page)
        shot(page, f"layout log p bars {view} {query[:30]}")
        for i in (0, 1):
            key = page.evaluate("(i) => [...document.querySelectorAll('[class*=\"_lp' + i + '\"]')]"
                                ".map(e => [...e.classList].find(c => c.startsWith('st-key-')))[0]", i)
            zero = [t for t in tick_texts(page, f".{key}", "ytick") if t["text"] == "0"]
            assert zero and zero[0]["shown"], (key, tick_texts(page, f".{key}", "ytick"))
    finally:
        page.close()


# ------------------------------------------------------------------ the toolbar on hover
TOOLBAR_OVER = """(plot) => {
  const bar = plot.querySelector('.modebar');
  if (!bar || bar.getBoundingClientRect().width === 0) return null;
  const m = bar.getBoundingClientRect();
  return [...plot.querySelectorAll('.xtick text, .x2tick text, .g-xtitle text, .g-gtitle text')]
    .filter(e => getComputedStyle(e).display !== 'none')
    .filter(e => { const r = e.getBoundingClientRect();
                   return Math.min(r.right, m.right) - Math.max(r.left, m.left) > 1
                       && Math.min(r.bottom, m.bottom) - Math.max(r.top, m.top) > 1; })
    .map(e => e.textContent);
}"""


@pytest.mark.parametrize("view", ["sidebar", "projector"])
def test_toolbar_clear_of_top_labels(app, view):
    """Hovering a heatmap shows plotly's toolbar in its top right corner: never over its slanted
    column labels or its axis title (the page's heatmap, the two maps of Compare an edit), with
    long words under it. Compare attention's small maps have no toolbar (issue #69: its row above
    their labels ran the tab past a projector's first screen): hovered, they show none."""
    long_words = "text=We+were+waiting+for+my+grandmother+yesterday."
    for query, charts in ((long_words, [".st-key-heatmap .js-plotly-plot"]),
                          (f"tab=Compare+attention&{long_words}",
                           [f'[data-testid="stTabPanel"]:not([inert]) .js-plotly-plot >> nth={i}' for i in range(4)]),
                          (f"tab=Compare+an+edit&{EDIT}", ['[class*="st-key-edit_map0"] .js-plotly-plot',
                                                          '[class*="st-key-edit_map1"] .js-plotly-plot'])):
        page = open_view(app, query, view)
        try:
            for chart in charts:
                target = page.locator(chart).first
                target.scroll_into_view_if_needed()
                box = target.bounding_box()
                page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] - 20)
                handle = target.element_handle()
                if "Compare+attention" in query:
                    page.wait_for_function("(p) => p.querySelector('.hoverlayer text')", arg=handle)   # hovered
                    shot(page, f"layout toolbar {view} {query[:20]} {chart[-12:]}")
                    assert page.evaluate("(p) => !p.querySelector('.modebar')", handle), (query, chart)
                    continue
                page.wait_for_function("(p) => { const b = p.querySelector('.modebar');"
                                       " return b && getComputedStyle(b).opacity === '1'; }", arg=handle)
                shot(page, f"layout toolbar {view} {query[:20]} {chart[-12:]}")
                assert page.evaluate(TOOLBAR_OVER, handle) == [], (query, chart)
        finally:
            page.close()


# ------------------------------------------------------------------ Start here
@pytest.mark.parametrize("view", list(VIEWS))
def test_start_outline_with_the_projector(app, view):
    """In every view the outline's last link is on the first screen and no link's label is cut:
    with the Projector on, the sidebar collapsed (as the switch leaves it) or opened again beside
    it (the outline then keeps the screen's text size and narrower margins)."""
    page = open_view(app, "", view, path="/")
    try:
        page.wait_for_selector('[data-testid="stPageLink"] a')
        shot(page, f"layout start {view}")
        links = page.evaluate("""() => [...document
            .querySelectorAll('[data-testid="stMain"] [data-testid="stPageLink"]')]
            .map(l => ({text: l.textContent.trim(), bottom: l.getBoundingClientRect().bottom,
                        cut: [...l.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1)}))""")
        assert len(links) >= 9
        assert [link["text"] for link in links if link["cut"]] == []
        assert links[-1]["bottom"] <= HEIGHT, links[-1]
    finally:
        page.close()

