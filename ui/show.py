"""Small display helpers every page uses: people's and models' text shown as text, tokens as
code spans, and charts' downloads.

Their own module because they belong to none of the others: they load nothing (ui/models.py),
read no address (ui/address.py) and warm nothing (ui/warm.py); they only draw.
"""
from __future__ import annotations

import html

import streamlit as st

from s2s.export import (
    file_stem,
    plotly_config,
    plotly_data,
    plotly_html,
    plotly_js_mb,
    vega_html,
    vega_png,
    vega_svg,
)


def escaped(text: str, size: str = "1.5rem", above: str = "") -> None:
    """Show user or model text large, always as text (HTML-escaped), never as markup; under the
    line of markdown `above` if given, in the same element (no gap between elements)."""
    line = f"<div class='s2s-text' style='font-size:{size};line-height:1.35'>{html.escape(text)}</div>"
    st.markdown(f"{above}\n{line}" if above else line, unsafe_allow_html=True)


def point(name: str):
    """A container around what a Start-here topic promises on the tab's first screen (a link
    scrolls the tab bar to the top; tests/test_browser_start_links.py checks the screen)."""
    return st.container(key=f"point_{name}")


def literal_label(text: str) -> str:
    """Text for a widget's label (Streamlit renders labels as markdown), shown as typed: every
    markdown character backslash-escaped, so a token "**" or "[x](y)" is itself, not markup."""
    return "".join("\\" + ch if ch in "\\`*_{}[]()#+-.!|<>~$:" else ch for ch in text)


def code_span(piece: str) -> str:
    """A token as a markdown code span: shown literally, whatever characters it holds."""
    return "`" + piece.replace("`", "ˋ") + "`"


def unknown_characters_note(unknown: list[str], of_what: str, why: str = "") -> str:
    """A caption naming the characters of `of_what` ("your text", "the reference") that the model's
    vocabulary lacks: each is read as <unk>, which would otherwise look like the app dropping them.
    `why`, if given, follows `<unk>` (", a symbol it learned almost nothing about")."""
    n = len(unknown)
    return (f"{n} character{'s' if n > 1 else ''} of {of_what} {'are' if n > 1 else 'is'} not in this model's "
            f"vocabulary and read as `<unk>`{why}: " + " ".join(code_span(ch) for ch in unknown[:20])
            + (" …" if n > 20 else ""))


def camera(*what) -> dict:
    """st.plotly_chart's config: the camera button saves SVG, at the drawn size, named for what
    the chart shows (its kind, the model, the input)."""
    return plotly_config(file_stem(*what))


def chart_downloads(fig, stem: str, key: str, data: str | None = None, about: dict | None = None) -> None:
    """Below a page's main Plotly chart: the chart as one interactive HTML file that works
    offline, and its data as JSON (`data`, or what the chart draws with `about` it), both named
    `stem` and built only when clicked (the HTML carries plotly.js: its size is on the button)."""
    c = st.columns(2)
    c[0].download_button(f"⬇ Chart (HTML, offline, {plotly_js_mb():.1f} MB)", lambda: plotly_html(fig, stem),
                         file_name=f"{stem}.html", mime="text/html", key=f"{key}_html", on_click="ignore")
    c[1].download_button("⬇ Data (JSON)", data if data is not None else lambda: plotly_data(fig, about),
                         file_name=f"{stem}.json", mime="application/json", key=f"{key}_data", on_click="ignore")


def vega_downloads(chart, data, stem: str, key: str) -> None:
    """Below a Vega-Lite chart (Streamlit gives it no export menu): SVG, PNG, an offline HTML
    file and its data as CSV, all named `stem`, each built only when clicked."""
    c = st.columns(4)
    for col, (label, ext, make, mime) in zip(c, (
            ("⬇ SVG", "svg", lambda: vega_svg(chart), "image/svg+xml"),
            ("⬇ PNG", "png", lambda: vega_png(chart), "image/png"),
            ("⬇ HTML", "html", lambda: vega_html(chart), "text/html"),
            ("⬇ Data (CSV)", "csv", lambda: data.to_csv(index=False), "text/csv"))):
        col.download_button(label, make, file_name=f"{stem}.{ext}", mime=mime, on_click="ignore", key=f"{key}_{ext}")


# ------------------------------------------------------------------ readable from the back row
# The main column's width at 1280 x 720: beside the sidebar, and with the sidebar collapsed
# (the Projector switch collapses it). A chart's labels are thinned for the width it will get.
MAIN_PX = {False: 820, True: 1120}


def projector() -> bool:
    """Whether the Projector switch (app.py's sidebar, `projector=on` in the address) is on."""
    return bool(st.session_state.get("projector", False))


def screen_figure(fig, share: float = 1.0, **screen):
    """`fig` as a class reads it (s2s.figures.for_screen, `screen` its other arguments: grow,
    toolbar) in a chart `share` of the main column's width wide, for a caller that must see its
    final size before drawing it (plotly_chart(..., ready=True))."""
    from s2s.figures import for_screen
    on = projector()
    return for_screen(fig, on, int(share * MAIN_PX[on]), **screen)


def same_rows(*figs) -> None:
    """Figures drawn side by side whose rows are the same words (a heatmap and its log p bars):
    the same top margin and so the same height, after for_screen gave one of them room for its
    toolbar or its column labels, so that each bar stays beside its row."""
    from s2s.figures.screen import TOOLBAR_PX
    top = max(f.layout.margin.t or 0 for f in figs)
    below = max((f.layout.height or 450) - (f.layout.margin.t or 0) for f in figs)   # the plot and bottom margin
    for f in figs:
        f.layout.height = top + below
        f.layout.margin.t = top
        if f.layout.title.text and f.layout.title.yref == "container":   # for_screen's place, under the toolbar
            f.layout.title.y = 1 - TOOLBAR_PX / f.layout.height


def plotly_chart(fig, share: float = 1.0, where=None, notes: bool = True, ready: bool = False, **kwargs):
    """st.plotly_chart (or `where`.plotly_chart, e.g. an st.empty slot) of `fig` as a class
    reads it (s2s.figures.for_screen): no label under 14 px, 18 with the Projector switch
    on, none lighter than the body text, crowded token axes thinned. `share`: the fraction
    of the main column's width the chart gets (0.5 in one of two columns); `ready`: `fig`
    came from screen_figure already. Under it, unless `notes` is False (a caller that places
    thinned_note itself) or it is drawn into a slot (`where`), a line on any token labels
    that did not fit."""
    if not ready:
        fig = screen_figure(fig, share)
    out = (where or st).plotly_chart(fig, **kwargs)
    if where is None and notes:
        thinned_note(fig)
    return out


def table(df, where=None, formats: dict[str, str] | None = None, wrap: bool = False, **dataframe_kwargs):
    """A table a class can read. On a screen st.dataframe (sortable, scrolling), with
    `formats` ({column: "%.3f"}, printf style) as its number columns' formats. With the
    Projector switch on a static st.table instead: HTML, so its text is enlarged with the
    page's and its cells wrap within the column (a data grid is drawn on a canvas: zoomed,
    it ran past the column's right edge and cut its last columns). `wrap`: the static table
    on a screen too, for a few rows of sentences that must be read whole (the grid cuts a
    cell at its column's width: "Où est l'église la plus proc…")."""
    if wrap or projector():
        # numbers as the data grid shows them (-0.916, not pandas' -0.916000), unless `formats` says.
        # One format call for every column: a second call with a dict resets the columns it omits.
        def shown(f: str | None):
            if f is None:
                return lambda v: repr(v) if isinstance(v, float) else v
            return lambda v: f % v if isinstance(v, (int, float)) else v
        styler = df.style.hide(axis="index").format({c: shown((formats or {}).get(c)) for c in df.columns})
        return (where or st).table(styler)
    if formats:
        dataframe_kwargs["column_config"] = {c: st.column_config.NumberColumn(format=f) for c, f in formats.items()}
    return (where or st).dataframe(df, hide_index=True, **dataframe_kwargs)


# A tab bar that holds a dozen tabs (issue #62): Streamlit's scrolls sideways past the column's
# edge, its last tabs reached by a chevron (which stayed drawn once the fonts had loaded and the
# tabs fitted). Here the tabs wrap onto a second row instead, 8 px apart, every label in sight
# and no chevron: twelve labels (about 1,200 px) take two rows beside the sidebar at 1280 x 720
# and two without it (tests/test_browser_layout.py adds three tabs to the nine and measures)
TABS_CSS = ("[data-testid='stTabs'] [role='tablist']{column-gap:0.5rem;row-gap:0;flex-wrap:wrap;overflow-x:visible}"
            "[data-testid='stTabsScrollLeft'],[data-testid='stTabsScrollRight']{display:none}")


def tabs(labels: list[str], **kwargs):
    """st.tabs (its keyword arguments) in a tab bar that wraps (TABS_CSS), never scrolls."""
    st.markdown(f"<style>{TABS_CSS}</style>", unsafe_allow_html=True)
    return st.tabs(labels, **kwargs)


GRID_ROW_PX = 35       # a data grid's row, and its header row, in px (Streamlit's st.dataframe)


def grid_height(rows: int, most: int) -> int:
    """The height of a data grid of `rows` rows: its rows and header (and its 1 px borders), at
    most `most` (past it the grid scrolls). A fixed height over the rows drew blank rows under
    a short table (issue #54: 3 pairs in 250 px)."""
    return min(most, (rows + 1) * GRID_ROW_PX + 3)


def thinned_note(fig, where=None) -> None:
    """One line under a chart whose token labels for_screen thinned (in `where`, a container
    right under a chart drawn into a slot): which axis, how many of its labels are drawn, and
    that hovering names the rest (never a silent gap)."""
    thinned = fig.layout.meta.get("thinned", []) if isinstance(fig.layout.meta, dict) else []
    seen = set()
    for title, kept, total, side in thinned:
        noun = f"“{title}” labels" if title else ("row labels" if side == "y" else "column labels")
        if (noun, total) not in seen:     # a tall map repeats its column labels below; small maps share axes
            seen.add((noun, total))
            (where or st).caption(f"{kept} of {total} {noun} shown (evenly spaced, to fit); hover over the "
                                  "chart to name the rest.")
