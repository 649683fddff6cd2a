"""The figure builders' layout for the screen (issue #62), without a browser: for_screen keeps
the labels of changed words, gives a narrow map's columns the room its long row labels took,
keeps the "0" atop a log p bar chart at 18 px and its toolbar clear of the labels on top.
tests/test_browser_layout.py sees the same on the page."""
import html

import numpy as np

from s2s.figures import TOOLBAR_PX, clickable_cells, for_screen, label_px, matrix_heatmap, token_bars
from s2s.figures.screen import MODEBAR_PX

MAIN_PX = {False: 820, True: 1120}       # ui.show.MAIN_PX: the main column at 1280 x 720


def shown(axis) -> list[str]:
    return [html.unescape(t) for t in axis.ticktext]


def test_changed_words_are_always_labelled():
    """Compare an edit's maps, half the column: 24 source words thinned, the changed ones kept."""
    words = [f"w{i}" for i in range(24)]
    for changed in ([5], [6, 7], [0, 23], [11]):
        fig = matrix_heatmap(words, ["x"] * 6, np.zeros((6, 24)), colorbar=False, keep_x=changed)
        for_screen(fig, False, MAIN_PX[False] // 2)
        kept = shown(fig.layout.xaxis)
        assert len(kept) < 24                          # thinned ...
        assert {words[i] for i in changed} <= set(kept)    # ... but never the changed words
        step = 24 // len(kept)
        index = [words.index(w) for w in kept]
        # the others evenly spaced and clear of the kept ones
        assert all(b - a >= min(step, 1) for a, b in zip(index, index[1:]))


def test_ten_words_all_labelled_without_a_colour_bar():
    """11 columns (10 words and </s>) at half the column beside the sidebar: every one labelled."""
    src = "My grandmother lives in a small house near the sea. </s>".split()
    fig = matrix_heatmap(src, ["Ma", "grand-mère", "vit"], np.zeros((3, 11)), colorbar=False)
    for_screen(fig, False, MAIN_PX[False] // 2)
    assert shown(fig.layout.xaxis) == src


def enlarged_head(x, y, projector: bool):
    """The Heads tab's enlarged head as ui/translate_tabs.py draws it: 40 % of the column."""
    fig = matrix_heatmap(x, y, np.zeros((len(y), len(x))), x_title="source (English)", y_title="output (French)",
                         title="Cross-attention, layer 1 · head 1", height=min(400, max(300, 150 + 24 * len(y))),
                         colorbar=False)
    clickable_cells(fig)
    return for_screen(fig, projector, int(0.4 * MAIN_PX[projector]))


def test_enlarged_head_labels_seven_columns_even_with_long_pieces():
    """Seven columns labelled at 1280 px, with the Projector on and off, for a hub model whose
    pieces are long: its long row labels are shortened with "…", not the columns thinned."""
    x = ["▁Die", "▁Lebensversicherung", "▁wurde", "▁international", "isiert", ".", "</s>"]
    y = ["▁The", "▁life", "▁insurance", "▁was", "▁internationalised", "<unused123>", ".", "</s>"]
    for projector in (False, True):
        fig = enlarged_head(x, y, projector)
        assert shown(fig.layout.xaxis) == x
        rows = shown(fig.layout.yaxis)
        assert len(rows) == len(y)
        assert any(r.endswith("…") for r in rows) and "▁The" in rows
        assert not fig.layout.meta or not fig.layout.meta.get("thinned")


def test_short_row_labels_are_left_whole():
    fig = enlarged_head(list("abcdefg"), ["▁Elle", "▁a", "▁un", "▁grand"], False)
    assert shown(fig.layout.yaxis) == ["▁Elle", "▁a", "▁un", "▁grand"]


def test_log_p_bars_keep_room_for_their_zero():
    """Vertical log p bars whose axis ends at 0: the "0" is centred on the plot's top edge, half
    its height above it; the top margin holds that half at 18 px (plotly drops a cut label)."""
    for projector in (False, True):
        fig = token_bars(["Elle", "a", "un"], [-0.1, -2.0, -0.5], "log p", horizontal=False,
                         value_range=(-2.2, 0), height=220)
        for_screen(fig, projector, MAIN_PX[projector] // 2)
        px = fig.layout.yaxis.tickfont.size
        assert fig.layout.margin.t >= 0.7 * px
        assert fig.layout.height >= 220


def test_toolbar_row_clear_of_top_labels():
    """A narrow map with its column labels on top (Compare attention's small maps): the toolbar's
    row above them; the page's wide heatmap of short words keeps its height (the toolbar, at its
    right, is over no label)."""
    small = matrix_heatmap("My lives a house the sea".split(), list("abcdefg"), np.zeros((7, 6)), compact=True)
    height = small.layout.height
    for_screen(small, False, 205)
    assert small.layout.margin.t >= TOOLBAR_PX + 0.62 * 14 * 5 * np.sin(np.radians(60))
    assert TOOLBAR_PX <= small.layout.height - height <= TOOLBAR_PX + 1     # the toolbar's row, no more
    wide = matrix_heatmap("She has a big black dog. </s>".split(), list("abcdefg"), np.zeros((7, 7)))
    height = wide.layout.height
    for_screen(wide, False, MAIN_PX[False])
    assert wide.layout.height == height and wide.layout.margin.t == 110
    assert MODEBAR_PX < MAIN_PX[False] / 2      # the toolbar reaches over the right part only


def test_small_map_without_toolbar_keeps_its_rows():
    """Issue #69: Compare attention's small maps are drawn without a toolbar (toolbar=False) and
    with the rows the page sized for their labels (grow=False): no toolbar's row above their column
    labels, and no taller rows with the Projector on (the second row of maps and the √d axis ran
    past a projector's first screen), yet every row and column still labelled at 18 px."""
    src, tgt = "She has a big black dog. </s>".split(), "Elle a un gros chien noir. </s>".split()
    for projector, row_px in ((False, 20), (True, 25)):
        for x_labels in (True, False):
            fig = matrix_heatmap(src, tgt, np.random.default_rng(0).random((7, 7)), compact=True,
                                 height=row_px * 7, label_size=label_px(projector), x_labels=x_labels)
            height, top = fig.layout.height, fig.layout.margin.t
            for_screen(fig, projector, MAIN_PX[projector] // 3, grow=False, toolbar=False)
            assert (fig.layout.height, fig.layout.margin.t) == (height, top)
            assert fig.layout.yaxis.tickfont.size == label_px(projector) and len(fig.layout.yaxis.ticktext) == 7
            assert len(fig.layout.xaxis.ticktext) == 7
            kept = matrix_heatmap(src, tgt, np.zeros((7, 7)), compact=True, height=row_px * 7,
                                  label_size=label_px(projector), x_labels=x_labels)
            for_screen(kept, projector, MAIN_PX[projector] // 3)      # with its toolbar: a row above the labels
            assert kept.layout.height >= height + (TOOLBAR_PX if x_labels else 0)
