"""Every chart readable from the back row (s2s.figures.for_screen): no label under 14 px (18 px
with the Projector switch on), none lighter than the body text, and crowded token axes
thinned so that neighbouring labels never overlap."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from s2s import figures as F


def labels(fig) -> list[tuple[str, int, str | None]]:
    """(where, font size, colour) of every label the figure draws: ticks, axis titles, colour
    bars, legend, annotations, text on marks."""
    lay = fig.layout
    out = []
    for name in lay.to_plotly_json():
        if name.startswith(("xaxis", "yaxis")):
            axis = lay[name]
            if axis.visible is not False:
                out.append((f"{name} ticks", axis.tickfont.size, axis.tickfont.color))
                if axis.title.text:
                    out.append((f"{name} title", axis.title.font.size, axis.title.font.color))
    for trace in fig.data:
        if trace.type == "heatmap" and trace.showscale is not False:
            out.append(("colorbar", trace.colorbar.tickfont.size, trace.colorbar.tickfont.color))
        font = getattr(trace, "textfont", None)
        if font is not None and getattr(trace, "text", None) is not None and trace.type != "heatmap":
            sizes = font.size if isinstance(font.size, (list, tuple)) else [font.size or lay.font.size]
            out += [(f"{trace.type} text", s, font.color or lay.font.color) for s in sizes]
    out += [("annotation", a.font.size, a.font.color) for a in lay.annotations]
    if lay.showlegend is not False and any(t.showlegend for t in fig.data):
        out.append(("legend", lay.legend.font.size, lay.legend.font.color))
    return out


SCALING = {"d": [4, 16], "entropy_unscaled": [1.0, 0.5], "entropy_scaled": [1.2, 1.2], "max_entropy": 1.6,
           "n_keys": 5, "std_unscaled": [2.0, 4.0], "std_scaled": [1.0, 1.0]}


def figures(projector: bool = False) -> dict:
    rng = np.random.default_rng(0)
    words = [f"word{i}" for i in range(43)]
    a = rng.dirichlet(np.ones(43), size=30)
    tree = [{"step": 0, "token": "▁Je", "log_prob": -0.1, "parent": -1, "finished": False},
            {"step": 0, "token": "▁J", "log_prob": -2.0, "parent": -1, "finished": False},
            {"step": 1, "token": "</s>", "log_prob": -0.3, "parent": 0, "finished": True}]
    return {
        "43-word heatmap": F.attention_heatmap(words, words[:30], a),
        "short heatmap": F.attention_heatmap(["I", "went", "</s>"], ["Je", "suis", "</s>"], np.eye(3)),
        "bars": F.token_bars(["▁Je", "▁suis", "."], [0.5, 0.3, 0.2], "probability", highlight=0),
        "long vertical bars": F.token_bars(words, rng.random(43), "log p", horizontal=False, highlight=7),
        "heads grid": F.heads_grid(rng.dirichlet(np.ones(7), size=(3, 4, 7)), words[:7], words[:7]),
        "beam tree": F.beam_tree_figure(tree, [2], font_px=F.label_px(projector)),   # places its labels itself
        "scaling": F.scaling_figure(SCALING),
        "head AER": F.head_aer_figure(rng.random((3, 4)), (0, 1)),
    }


@pytest.mark.parametrize("projector", [False, True])
def test_no_label_is_small_or_grey(projector):
    small = 18 if projector else 14
    for name, fig in figures(projector).items():
        F.for_screen(fig, projector=projector)
        found = labels(fig)
        assert found, name
        for where, size, color in found:
            assert size is not None and size >= small, (name, where, size)
            assert color in (None, F.BODY_TEXT) or not color.startswith("#8"), (name, where, color)
        assert fig.layout.font.color == F.BODY_TEXT and fig.layout.font.size >= small, name


def test_the_projector_scales_a_chosen_size_up():
    fig = F.for_screen(F.scaling_figure(SCALING), projector=True)
    assert fig.layout.font.size == round(15 * 18 / 14)      # the figure chose 15 px: 19 on a projector


def pitch(fig, axis: str, width: int) -> float:
    """Pixels between neighbouring kept tick labels along `axis`."""
    lay = fig.layout
    ax = lay[axis]
    vals = list(ax.tickvals)
    n = len(fig.data[0].z[0]) if axis.startswith("x") else len(fig.data[0].z)
    if axis.startswith("y"):
        length = lay.height - lay.margin.t - lay.margin.b
    else:
        length = width - lay.margin.l - lay.margin.r - 70
    return (vals[1] - vals[0]) * length / n


@pytest.mark.parametrize("projector", [False, True])
def test_a_crowded_heatmap_labels_every_kth_token_and_none_overlap(projector):
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(43)]
    fig = F.for_screen(F.attention_heatmap(words, words[:40], rng.dirichlet(np.ones(43), size=40), height=420),
                       projector=projector, width=760)
    px = fig.layout.xaxis.tickfont.size
    assert 1 < len(fig.layout.xaxis.ticktext) < 43
    # the Projector never thins the rows: the map grows until all 40 have their label
    assert (len(fig.layout.yaxis.ticktext) == 40 and fig.layout.height > 420) if projector else \
        1 < len(fig.layout.yaxis.ticktext) < 40
    assert pitch(fig, "xaxis", 760) >= 1.5 * px - 1e-9 and pitch(fig, "yaxis", 760) >= 1.3 * px - 1e-9
    # what was thinned is recorded for the page to say (ui.show.thinned_note)
    assert ["source (English)", len(fig.layout.xaxis.ticktext), 43, "x"] in fig.layout.meta["thinned"]
    # every kept label still names its own column
    assert all(fig.layout.xaxis.ticktext[k] == f"w{v}" for k, v in enumerate(fig.layout.xaxis.tickvals))
    # a short input keeps every label
    short = F.for_screen(F.attention_heatmap(words[:6], words[:5], np.eye(5, 6)), projector=projector)
    assert list(short.layout.xaxis.ticktext) == words[:6] and list(short.layout.yaxis.ticktext) == words[:5]


def test_a_value_on_a_bar_is_never_shrunk_under_the_smallest_label():
    fig = F.for_screen(F.token_bars(["a", "b"], [0.001, 0.999], "p"))
    assert fig.layout.uniformtext.minsize == 14 and fig.layout.uniformtext.mode == "show"


def test_the_heads_grid_names_heads_over_columns_and_layers_beside_rows():
    rng = np.random.default_rng(2)
    fig = F.heads_grid(rng.dirichlet(np.ones(5), size=(2, 3, 5)), list("abcde"), list("vwxyz"))
    assert [a.text for a in fig.layout.annotations] == ["head 1", "head 2", "head 3", "layer 1", "layer 2"]
    wide = F.heads_grid(rng.dirichlet(np.ones(5), size=(1, 8, 5)), list("abcde"), list("vwxyz"))
    assert [a.text for a in wide.layout.annotations][:2] == ["H1", "H2"]


@pytest.mark.parametrize("projector", [False, True])
def test_altair_charts_follow_the_same_rule(projector):
    chart = F.length_chart(pd.DataFrame({"model": ["a", "a"], "words": [1, 2], "BLEU": [3.0, 4.0]}), "words", "BLEU",
                           highlight_x=1.5, highlight_label="here", projector=projector).to_dict()
    small = 18 if projector else 14
    axis, legend = chart["config"]["axis"], chart["config"]["legend"]
    assert axis["labelFontSize"] == axis["titleFontSize"] == legend["labelFontSize"] == small
    assert axis["labelColor"] == axis["titleColor"] == legend["labelColor"] == F.BODY_TEXT


@pytest.mark.parametrize("piece", ["▁la", "▁l'aéroport-international"])
def test_the_counterfactual_next_token_labels_have_room_between_the_panels(piece):
    """The right panel's token labels sit in the gap between the two panels (no automargin
    there): the gap holds the longest one at the projector's 18 px on a 1200 px chart."""
    fig = F.for_screen(F.counterfactual_figure(["▁a", "▁b"], [0.3, 0.7], [0.5, 0.5],
                                               [(piece, 0.6), ("▁le", 0.2)], [("▁le", 0.5)], "uniform"),
                       projector=True, width=1200)
    gap_px = (fig.layout.xaxis2.domain[0] - fig.layout.xaxis.domain[1]) * 1200
    assert fig.layout.yaxis2.tickfont.size == 18
    assert gap_px >= 0.62 * 18 * len(piece)
    assert fig.layout.xaxis.domain[1] - fig.layout.xaxis.domain[0] > 0.3      # α still gets most of the room


@pytest.mark.parametrize("projector", [False, True])
def test_labels_that_fit_in_their_margin_take_nothing_from_the_plot(projector):
    """A contribution map whose top margin holds its column labels (as Attention vs attribution
    sizes it): for_screen must not count those labels again against the rows' room, so a
    6-row map at the page's height keeps all 6 row labels (it kept 3)."""
    xs, ys = ["I", "went", "to", "the", "lecture.", "</s>"], ["Je", "suis", "allé", "au", "cours.", "</s>"]
    px = F.label_px(projector)
    fig = F.contribution_map(xs, ys, np.full((6, 6), 1 / 6), "weights",
                             height=round(60 + 0.62 * px * len("lecture.") + 1.45 * px * len(ys)))
    F.for_screen(fig, projector, width=600)
    shown = lambda tokens: [F.display_token(t) for t in tokens]       # noqa: E731  (escaped, as drawn)
    assert list(fig.layout.yaxis.ticktext) == shown(ys) and list(fig.layout.xaxis.ticktext) == shown(xs)


def test_the_projector_labels_every_row_of_the_gold_map_and_the_heads_grid():
    """#47: with the Projector on, the gold map at the page's height (21 French rows in 576 px)
    and the heads map (7 rows) label every row: the figure grows rather than thin them."""
    rng = np.random.default_rng(3)
    en, fr = [f"e{i}" for i in range(15)], [f"f{i}" for i in range(21)]
    gold = F.gold_alignment_figure(en, fr, rng.random((21, 15)), set(), set(), set(), height=576, label_size=18)
    F.for_screen(gold, True, width=840)
    assert list(gold.layout.yaxis.ticktext) == fr and gold.layout.height > 576
    thin = F.for_screen(F.gold_alignment_figure(en, fr, rng.random((21, 15)), set(), set(), set(), height=576,
                                                label_size=18), True, width=840, grow=False)
    assert len(thin.layout.yaxis.ticktext) < 21          # what the old Projector drew: 10 or 11 of 21
    ys = ["Elle", "a", "un", "gros", "chien", "noir.", "</s>"]
    grid = F.for_screen(F.heads_grid(rng.dirichlet(np.ones(7), size=(3, 4, 7)), ys, ys, height=300), True, 1120)
    for name in [k for k in grid.layout.to_plotly_json() if k.startswith("yaxis")]:
        axis = grid.layout[name]
        if axis.ticktext is not None and axis.showticklabels is not False:
            assert list(axis.ticktext) == [F.display_token(t) for t in ys], name


def test_a_tall_heatmap_repeats_its_column_labels_below():
    """#47: a map of more rows than fit a screen names its columns at the bottom too."""
    words = [f"w{i}" for i in range(12)]
    tall = F.attention_heatmap(words, [f"f{i}" for i in range(F.TALL_ROWS + 1)], np.full((F.TALL_ROWS + 1, 12), 1 / 12))
    assert tall.layout.xaxis2.side == "bottom" and list(tall.layout.xaxis2.ticktext) == list(tall.layout.xaxis.ticktext)
    assert tall.layout.xaxis2.overlaying == "x" and any(t.xaxis == "x2" for t in tall.data)
    short = F.attention_heatmap(words, words, np.eye(12))
    assert "xaxis2" not in short.layout.to_plotly_json() and len(short.data) == 1


@pytest.mark.parametrize("projector", [False, True])
def test_a_title_starts_below_the_toolbars_row(projector):
    """#47: a chart's toolbar shows on hover in its top right corner (TOOLBAR_PX tall); a title
    starts below that row, so a narrow chart's title is never drawn under it. A figure with room
    in its top margin keeps its height; one without grows by what it lacks."""
    small = F.figure([], title=dict(text="a title"), height=190, margin=dict(l=10, r=10, t=20, b=10))   # too little
    F.for_screen(small, projector, width=400)
    compact = F.for_screen(F.scaling_figure(SCALING, compact=True, height=190), projector, width=400)
    assert compact.layout.height == 190          # a small multiple sized for the first screen: room in its margin
    title_px = small.layout.title.font.size
    assert small.layout.margin.t >= F.TOOLBAR_PX + 1.4 * title_px - 1 and small.layout.height > 190
    assert small.layout.title.yref == "container" and small.layout.title.yanchor == "top"
    assert small.layout.title.y * small.layout.height == pytest.approx(small.layout.height - F.TOOLBAR_PX)
    roomy = F.attention_heatmap(["a", "b"], ["c", "d"], np.eye(2), title="a title", height=300)   # top margin 150
    before = roomy.layout.height
    F.for_screen(roomy, projector)
    assert roomy.layout.height == before and roomy.layout.margin.t == 150


@pytest.mark.parametrize("projector", [False, True])
def test_a_titles_every_line_and_a_panels_title_start_below_the_toolbars_row(projector):
    """Issue #69 item 2: on hover the toolbar covered the pruning chart's key, a two-line title
    (plotly lifts a top-anchored title's first line by about a line per extra line), and the
    contrast chart's panel title "why ▁La, not ▁Le" (make_subplots' titles: annotations on the
    plot's top edge). The title is placed a line lower per extra line, the margin holds every
    line, and a panel title where the toolbar reaches gets the toolbar's row above it."""
    two = F.figure([], title=dict(text="first<br>second"), height=260, margin=dict(l=10, r=10, t=20, b=10))
    F.for_screen(two, projector, width=320)
    px = two.layout.title.font.size
    lift = 1.3 * px
    assert two.layout.title.y * two.layout.height == pytest.approx(two.layout.height - F.TOOLBAR_PX - lift)
    assert two.layout.margin.t >= F.TOOLBAR_PX + lift + 2 * 1.4 * px
    bars = F.contrast_figure(["▁a", "▁b"], [0.1, -0.2], [0.1, 0.2], [0.5, 0.5], "▁La", "▁Le", "grad")
    bars.layout.margin.t = 20            # as the chart was: its panel titles at 20-40 px, under the toolbar
    F.for_screen(bars, projector, width=786)
    note_px = max(a.font.size for a in bars.layout.annotations)
    assert bars.layout.margin.t >= F.TOOLBAR_PX + 1.4 * note_px
    left_only = F.figure([], height=200, margin=dict(l=10, r=10, t=20, b=10),
                         annotations=[dict(text="left", x=0, xref="paper", y=1, yref="paper", yanchor="bottom",
                                           xanchor="left", showarrow=False)])
    F.for_screen(left_only, projector, width=786)
    assert left_only.layout.margin.t == 20 and left_only.layout.height == 200      # far from the toolbar: as it was


def test_a_projector_table_shows_numbers_in_the_format_asked_for():
    """ui.show.table with the Projector on (a static st.table): a column given a printf format
    shows every value in it (-2.650, where repr would show -2.65 beside -2.058); the others as
    the data grid would (-0.916, not pandas' -0.916000)."""
    import pyarrow as pa
    from streamlit.testing.v1 import AppTest

    def script():
        import pandas as pd
        import streamlit as st

        import ui.show
        st.session_state["projector"] = True
        ui.show.table(pd.DataFrame({"score": [-2.65, -2.058], "log p": [-0.916, -3.5], "rank": [1, 2]}),
                      formats={"score": "%.3f"})

    at = AppTest.from_function(script).run()
    assert not at.exception and not at.dataframe and len(at.table) == 1
    shown = pa.ipc.open_stream(at.table[0].proto.arrow_data.styler.display_values).read_all().to_pandas()
    assert list(shown["score"]) == ["-2.650", "-2.058"]
    assert list(shown["log p"]) == ["-0.916", "-3.5"] and list(shown["rank"]) == ["1", "2"]


@pytest.mark.parametrize("projector,width", [(False, 410), (True, 560), (False, 205), (True, 280)])
def test_a_value_on_a_bar_is_written_whole(projector, width):
    """Issue #54: "0.093" on a short bar lost its first digit: plotly wrote it inside a bar too
    short for it (at the smallest size, uniformtext "show") and the plot's edge cut it. A value
    goes inside a bar long enough for it, else past the bar's end (the value axis reaching past
    that text) when it takes at most half the axis, else where plotly puts it; nothing clipped at
    the axis. Widths: the page's half and quarter columns (the step bars, forced decoding's log p)."""
    px = F.label_px(projector)
    cases = [F.token_bars(list("abcdef"), [0.093, 0.008, 0.001, 0.0, 0.024, 0.874], "α", value_range=(0, 1)),
             F.token_bars(list("abc"), [0.97, 0.96, 0.02], "p", value_range=(0, 1)),
             F.token_bars(list("abc"), [-5.2, -0.3, -1.1], "log p", texts=["-5.20 #3", "-0.30 #1", "-1.10 #2"])]
    for fig in cases:
        F.for_screen(fig, projector, width)
        bars, axis = fig.data[0], fig.layout.xaxis
        assert bars.cliponaxis is False
        length = width - 20 - 70 - max(0.0, 0.62 * px - 10)      # as for_screen reckons the plot area: margins, a
        # colour bar or legend beside it (none here: a conservative 70 px), the one-letter row labels
        lo, hi = axis.range if axis.range is not None else (min(0, *bars.x), max(0, *bars.x))
        unit = length / (hi - lo)
        for v, t, where in zip(bars.x, bars.text, bars.textposition):
            need = 0.62 * px * len(t) + 6
            if where == "inside":      # long enough for its text
                assert abs(v) * unit >= need, (t, v)
            elif where == "outside":   # past the bar's end, within the axis
                end = (v - lo) * unit + need if v >= 0 else (hi - v) * unit + need
                assert end <= length + 1e-6, (t, v, end, length)
            else:                      # neither sure: plotly's own choice, from the text as drawn
                assert where == "auto" and need > length / 2, (t, v)
    first = cases[0].data[0]
    assert first.textposition[0] == "outside" and first.textposition[-1] == "inside"   # 0.093 past its bar


@pytest.mark.parametrize("projector", [False, True])
def test_the_find_cells_legend_is_below_the_toolbars_row(projector):
    """Issue #54: the chart's toolbar (TOOLBAR_PX tall, top right, on hover) covered the legend's
    last entry on Find cells. The legend starts below that row, in the figure's top margin."""
    fig = F.for_screen(F.cell_traces_figure("ab{c}", {f"layer 0 cell {i} (r=+0.8{i})": [0.1] * 5 for i in range(3)},
                                            feature=[0, 1, 1, 0, 0], feature_name="brace depth"), projector, 1120)
    legend, height = fig.layout.legend, fig.layout.height
    assert legend.yref == "container" and legend.yanchor == "top" and legend.orientation == "h"
    assert (1 - legend.y) * height >= F.TOOLBAR_PX - 1e-6                # its top below the toolbar's row
    assert fig.layout.margin.t >= F.TOOLBAR_PX + 1.3 * legend.font.size     # and a row of entries above the plot


def test_the_projectors_heads_grid_is_unlabelled_and_keeps_its_height():
    """Issue #54: with the Projector on, every row of three layers labelled at 18 px ran the Heads
    grid to 953 px, past the first screen; unlabelled (labels=False), it keeps the height the page
    gives it, and no axis draws some of its labels (the enlarged head beside it names them)."""
    rng = np.random.default_rng(4)
    ys = ["Elle", "a", "un", "grand", "chien", "noir.", "</s>"]
    xs = ["She", "has", "a", "big", "black", "dog.", "</s>"]
    grid = F.for_screen(F.heads_grid(rng.dirichlet(np.ones(7), size=(3, 4, 7)), xs, ys, width=760, height=480,
                                     labels=False), True, 672)
    assert grid.layout.height == 480
    axes = [k for k in grid.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))]
    assert len(axes) == 24 and all(grid.layout[k].showticklabels is False for k in axes)
    labelled = F.for_screen(F.heads_grid(rng.dirichlet(np.ones(7), size=(3, 4, 7)), xs, ys, width=760, height=480),
                            True, 672)
    assert labelled.layout.height > 720                                   # what the Projector drew before
