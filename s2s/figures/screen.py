"""The screen every figure is drawn for: one-pass figures, labels readable from the back row
(14 px, 18 with the Projector switch), tokens shown as text."""
from __future__ import annotations

import html
import math
from typing import Sequence

import plotly.graph_objects as go

# A sequential scale with strong contrast from near-white to near-black: it survives a
# washed-out classroom projector better than scales whose ends are both dark.
PROJECTOR_SCALE = "YlGnBu"


def figure(traces: Sequence[go.BasePlotlyType], **layout) -> go.Figure:
    """A figure built in one pass: plotly validates the whole layout once here, where each
    fig.update_xaxes / update_layout call would validate again (3x the CPU per figure,
    which a class of 30 pressing Translate at once pays on a shared server)."""
    return go.Figure(data=list(traces), layout=dict(plot_bgcolor="white", **layout))


# ---------------------------------------------------------------- readable from the back row

# Streamlit's body text colour (its default theme): a chart's labels are never lighter than the text
# (its theme draws ticks in #808495, which a washed-out projector loses).
BODY_TEXT = "#2F2D2B"
# The smallest label a chart draws, on a screen and with the Projector switch on.
LABEL_PX = 14
PROJECTOR_LABEL_PX = 18
ROW_PITCH = 1.6      # font sizes from one row's label to the next when a chart grows to label every row
TOOLBAR_PX = 28      # the row a chart's toolbar takes on hover, kept clear of its title and top labels
MODEBAR_PX = 230     # how far from a chart's right edge its toolbar (plotly's and Streamlit's buttons) reaches
LABEL_SHARE = 0.3    # the most of a chart's width its row labels take: longer ones are shortened with "…"


def label_px(projector: bool = False) -> int:
    return PROJECTOR_LABEL_PX if projector else LABEL_PX


def _fits(n: int, length_px: float, pitch_px: float, keep: Sequence[int] = ()) -> list[int]:
    """Indices of n evenly spaced labels kept so that neighbours stand >= pitch_px apart; the
    indices in `keep` (the words an edit changed) always, the evenly spaced ones clear of them."""
    k = max(1, math.ceil(n * pitch_px / max(length_px, 1.0)))
    must = sorted({i for i in keep if 0 <= i < n})
    return sorted(set(must) | {i for i in range(0, n, k) if all(abs(i - j) >= k for j in must)})


def _shortened(label: str, most: int) -> str:
    """A (HTML-escaped) tick label cut to `most` characters, the last one "…"."""
    text = html.unescape(label)
    return label if len(text) <= most else html.escape(text[:most - 1] + "…", quote=False)


def _top_labels_px(axis, px: int, width: float, left: float, plot_w: float) -> tuple[float, float]:
    """How tall the band of a top x axis's tick labels and title stands (what plotly's automargin
    makes room for), and how tall it stands under the toolbar (MODEBAR_PX from the right edge of
    a chart `width` wide, its plot `plot_w` wide from `left`): (0, 0) for an axis whose labels
    are not on top. A label as for_screen reckons one: 0.62 font sizes a character, 1.2 a line,
    turned by its angle, rising to the right of its tick."""
    if axis.side != "top" or axis.visible is False or axis.showticklabels is False or not axis.ticktext \
            or axis.tickvals is None:
        return 0.0, 0.0
    turn = math.radians(abs(axis.tickangle or 0))
    vals = [float(v) for v in axis.tickvals]
    lo, hi = (list(axis.range) if axis.range is not None else [min(vals) - 0.5, max(vals) + 0.5])[:2]
    lo, hi = min(lo, hi), max(lo, hi)
    toolbar = width - MODEBAR_PX
    tall, under = 0.0, 0.0
    for v, t in zip(vals, axis.ticktext):
        run = 0.62 * px * len(html.unescape(str(t)))
        up = run * math.sin(turn) + 1.2 * px * math.cos(turn) + 20        # (20: the gap under the labels)
        x = left + plot_w * (v - lo) / max(hi - lo, 1e-9)
        tall = max(tall, up)
        if x + (run * math.cos(turn) if turn else run / 2) >= toolbar:
            under = max(under, up)
    if axis.title.text:
        title_px = axis.title.font.size or px
        tall += 1.4 * title_px
        half = 0.31 * title_px * len(html.unescape(str(axis.title.text)))
        if left + plot_w / 2 + half >= toolbar:        # the axis title, centred above the labels: under it too
            under = tall
    return tall, under


def _top_notes_px(lay, px: int, width: float, left: float, plot_w: float) -> float:
    """How tall the annotations that stand on the plot's top edge (yref paper or an axis's
    domain, y >= 1, anchored at their bottom: make_subplots' titles) rise above it where the
    toolbar reaches (MODEBAR_PX from the right edge of a chart `width` wide, its plot `plot_w`
    wide from `left`); 0 where none does. A note as for_screen reckons a label: 0.62 font sizes
    a character, 1.4 a line."""
    toolbar, tall = width - MODEBAR_PX, 0.0
    for note in lay.annotations:
        if note.text is None or note.y is None or float(note.y) < 1 or note.yanchor not in ("bottom", None) \
                or not str(note.yref or "paper").startswith(("paper", "y")) or note.xref not in ("paper", None) \
                and not str(note.xref).endswith("domain"):
            continue
        size = note.font.size or px
        lines = str(note.text).split("<br>")
        run = 0.62 * size * max(len(html.unescape(line)) for line in lines)
        x = left + plot_w * float(note.x if note.x is not None else 0.5)
        reach = x + {"left": run, "right": 0.0}.get(note.xanchor, run / 2)
        if reach >= toolbar:
            tall = max(tall, 1.4 * size * len(lines) + 4 + (note.yshift or 0))     # (4: plotly's gap under it)
    return tall


def for_screen(fig: go.Figure, projector: bool = False, width: int = 760, grow: bool | None = None,
               toolbar: bool = True) -> go.Figure:
    """The figure as a class reads it: every label at least `label_px(projector)` (the
    projector scales the sizes a figure chose by 18/14 too) and in BODY_TEXT, and the
    token labels of a crowded axis thinned to every k-th so that neighbours never overlap
    (hover still names every cell). `width` is the pixel width the figure will get on the
    page (Streamlit sizes it to its column), `fig.layout.height` its height.

    A label's pitch along its axis: upright or rotated text needs its line height (1.3 font
    sizes; 1.5 at -60 degrees); horizontal text on x needs its longest label's width, taken
    as 0.62 font sizes per character.

    `grow` (the default with the Projector switch on): a token axis down the side is never
    thinned; the figure grows taller until every row has its label, as a screen's maps are
    sized. What is still thinned (columns, which the column's width bounds) is recorded in
    fig.layout.meta["thinned"] as [axis title, labels kept, labels in all, "x" or "y"], for the
    page to say; the tick indices in fig.layout.meta["keep"][axis name] (the words an edit
    changed) are never thinned. Row labels longer than LABEL_SHARE of `width` are shortened with
    "…" (hover names them whole), so that long pieces leave the columns room for their labels.

    A toolbar shows on hover in a chart's top right corner, TOOLBAR_PX tall: the top margin
    keeps it clear of the title and of column labels drawn on top. A value axis's end label
    (the "0" atop a bar chart of log p) gets the room above the plot that its own size needs.
    `toolbar` False: the chart is drawn without one (config displayModeBar False), so no row is
    kept for it. Changes `fig` in place and returns it."""
    grow = projector if grow is None else grow
    small, scale = label_px(projector), (PROJECTOR_LABEL_PX / LABEL_PX if projector else 1.0)

    def size(current) -> int:
        return max(small, round(current * scale)) if current else small

    lay = fig.layout
    fig.update_layout(font=dict(color=BODY_TEXT, size=size(lay.font.size)),
                      legend=dict(font=dict(size=size(lay.legend.font.size), color=BODY_TEXT)),
                      hoverlabel=dict(font=dict(size=size(lay.hoverlabel.font.size))),
                      uniformtext=dict(minsize=small, mode="show"))     # values on bars: never shrunk under it
    if lay.title.text:
        lay.title.font.size, lay.title.font.color = size(lay.title.font.size), BODY_TEXT
    height = lay.height or 450
    margin = lay.margin
    plot_h = height - (margin.t if margin.t is not None else 100) - (margin.b if margin.b is not None else 80)
    # 70 px for a colour bar or legend on the right; none beside heatmaps that show no colour bar
    # (compact small multiples, where the panel's colour says the scale), nor beside the unseen
    # markers that make a heatmap's cells clickable (clickable_cells)
    def nothing_beside(t) -> bool:
        return (t.type == "heatmap" and t.showscale is False) or \
            (t.type == "scatter" and t.showlegend is False and not (t.marker and t.marker.showscale))
    beside = 0 if fig.data and all(nothing_beside(t) for t in fig.data) else 70
    plot_w = width - (margin.l if margin.l is not None else 80) - (margin.r if margin.r is not None else 80) - beside
    # the other axis's labels and title take room from the plot area too (plotly's automargin)
    def band(axis, px: int) -> float:
        longest = max((len(html.unescape(str(t))) for t in axis.ticktext or ()), default=3)
        return (0.62 * px * longest if axis.showticklabels is not False else 0) + (25 if axis.title.text else 0)
    x_px, y_px = size(lay.xaxis.tickfont.size), size(lay.yaxis.tickfont.size)
    names = [k for k in lay.to_plotly_json() if k.startswith(("xaxis", "yaxis"))] or ["xaxis", "yaxis"]
    for name in names:      # row labels that would take more than their share of the width: shortened
        axis = lay[name]
        if name.startswith("y") and axis.ticktext is not None and axis.showticklabels is not False:
            most = max(6, int(LABEL_SHARE * width / (0.62 * size(axis.tickfont.size))))
            axis.ticktext = [_shortened(str(t), most) for t in axis.ticktext]
    # ... beyond the margin on their side: labels that fit in the margin the figure set leave the
    # plot area as it is (automargin grows a margin only when they overflow it; counting them in
    # full thinned a 6-row map whose top margin held its column labels to 3 row labels)
    def margin_of(side: str | None, default_side: str) -> float:
        value = getattr(margin, side or default_side)
        return value if value is not None else {"t": 100, "b": 80, "l": 80, "r": 80}[side or default_side]
    if lay.xaxis.visible is not False:
        angle = abs(math.sin(math.radians(lay.xaxis.tickangle or 0)))
        need = band(lay.xaxis, x_px) * angle + (1.3 * x_px if angle < 0.5 else 0)
        plot_h -= max(0.0, need - margin_of({"top": "t"}.get(lay.xaxis.side), "b"))
    if lay.yaxis.visible is not False:
        plot_w -= max(0.0, band(lay.yaxis, y_px) - margin_of({"right": "r"}.get(lay.yaxis.side), "l"))
    if grow:        # every row labelled: the plot as tall as its most crowded token axis down the side needs,
        # at ROW_PITCH (a label's box is ~1.42 sizes tall, and automargin takes a little of the plot)
        need = max((len(lay[n].ticktext) * ROW_PITCH * size(lay[n].tickfont.size)
                    / ((lay[n].domain[1] - lay[n].domain[0]) if lay[n].domain else 1.0)
                    for n in names if n.startswith("y") and lay[n].ticktext is not None
                    and lay[n].tickvals is not None and lay[n].showticklabels is not False), default=0.0)
        if need > plot_h:
            lay.height = math.ceil(height + need + 1 - plot_h)      # (1 px: no rounding thins a row)
            plot_h = need + 1
    thinned = []
    for name in names:
        axis = lay[name]
        px = size(axis.tickfont.size)
        axis.tickfont.size, axis.tickfont.color = px, BODY_TEXT
        axis.title.font.size, axis.title.font.color = size(axis.title.font.size), BODY_TEXT
        if axis.ticktext is None or axis.tickvals is None or axis.showticklabels is False:
            continue
        span = (axis.domain[1] - axis.domain[0]) if axis.domain else 1.0
        texts = list(axis.ticktext)
        if name.startswith("y"):
            pitch, length = 1.3 * px, plot_h * span
        elif axis.tickangle not in (None, 0) and abs(axis.tickangle) >= 30:
            pitch, length = (1.3 if abs(axis.tickangle) >= 80 else 1.6) * px, plot_w * span
        else:
            pitch, length = 0.62 * px * max((len(html.unescape(t)) for t in texts), default=1) + 6, plot_w * span
        keep = _fits(len(texts), length, pitch, keep=((lay.meta or {}).get("keep") or {}).get(name, ())
                     if isinstance(lay.meta, dict) else ())
        if len(keep) < len(texts):
            axis.tickvals, axis.ticktext = [axis.tickvals[i] for i in keep], [texts[i] for i in keep]
            thinned.append([html.unescape(str(axis.title.text or "")), len(keep), len(texts), name[0]])
    if thinned:
        fig.update_layout(meta=dict(lay.meta or {}, thinned=thinned))
    # (a colour bar not shown and text not drawn are left alone: each property set costs ~0.3 ms
    # in a figure of many axes, and the heads grid's 24 traces have neither)
    for trace in fig.data:
        if getattr(trace, "colorbar", None) is not None and trace.type in ("heatmap", "contour", "scatter") \
                and getattr(trace, "showscale", None) is not False:
            bar = trace.colorbar
            bar.tickfont.size, bar.tickfont.color = size(bar.tickfont.size), BODY_TEXT
            bar.title.font.size, bar.title.font.color = size(bar.title.font.size), BODY_TEXT
        font = getattr(trace, "textfont", None)
        draws_text = ("text" in (trace.mode or "") if trace.type == "scatter" else
                      trace.texttemplate is not None or trace.text is not None if trace.type == "heatmap" else True)
        if font is not None and draws_text and not isinstance(font.size, (tuple, list)):
            font.size = size(font.size)    # a list of sizes was placed label by label (beam_tree_figure)
    _values_on_bars(fig, plot_w, size(lay.font.size))
    for note in lay.annotations:
        note.font.size = size(note.font.size)
        if note.font.color is None:
            note.font.color = BODY_TEXT
    # a chart's toolbars (plotly's, Streamlit's full-screen button) show on hover in its top
    # right corner, TOOLBAR_PX tall: the title and the column labels on top start below them, so
    # that they are never drawn under its toolbar. The top margin grows (and the figure with it)
    # only where it has no room for them all (plotly's automargin makes room for the labels
    # alone); a figure sized to a first screen keeps its height
    top = margin.t if margin.t is not None else 100
    left = width - (margin.r if margin.r is not None else 80) - beside - plot_w
    labels_top, under = _top_labels_px(lay.xaxis, lay.xaxis.tickfont.size or x_px, width, left, plot_w)  # (sized)
    # a title of several lines ("<br>", the pruning chart's key): plotly lifts its first line by
    # about a line per extra line when anchored at its top, up under the toolbar (issue #69 item 2);
    # it is placed that much lower, and the margin holds every line
    title_font = lay.title.font.size or small
    lift = 1.3 * title_font * str(lay.title.text or "").count("<br>")
    title_px = math.ceil(1.4 * title_font * (1 + str(lay.title.text or "").count("<br>")) + lift) \
        if lay.title.text else 0
    # ... and, in a figure without a title (one keeps what stands under it below the toolbar's row),
    # texts standing on the plot's top edge where the toolbar reaches: subplot titles ("why ▁La,
    # not ▁Le" of the contrast bars), any annotation above the plot
    if not lay.title.text:
        under = max(under, _top_notes_px(lay, small, width, left, plot_w))
    bar, under = (TOOLBAR_PX, under) if toolbar else (0, 0.0)    # (without one, automargin holds the labels)
    if title_px or under:
        need = bar + title_px + math.ceil(under)
        if max(top, labels_top) < need:
            lay.height = math.ceil((lay.height or 450) + need - max(top, labels_top))
            lay.margin.t = top = need
    if lay.title.text:
        lay.title.update(yref="container", y=1 - (bar + lift) / (lay.height or 450), yanchor="top")
    # a value axis's labels are centred on their ticks: the one at the top end (the "0" of log p)
    # stands half its height above the plot, and plotly drops a label the figure's edge would cut
    for name in names:
        axis = lay[name]
        if name.startswith("y") and axis.tickmode != "array" and axis.visible is not False \
                and axis.showticklabels is not False and top < (need := math.ceil(0.7 * (axis.tickfont.size or small))):
            lay.height = (lay.height or 450) + need - top
            lay.margin.t = top = need
    return fig


def _values_on_bars(fig: go.Figure, plot_w: float, font_px: int) -> None:
    """Values written on horizontal bars (textposition "auto") placed where they are read whole.
    Plotly writes a value inside a bar it measured as just long enough (in whatever font had
    loaded), uniformtext keeps it at the smallest size, and the axis cut what ran past the bar's
    base: "0.093" on a short bar lost its "0" (issue #54). Here, reckoning a character at 0.62
    font sizes and 3 px each side in a plot `plot_w` wide (as for_screen reckons it), a value
    goes inside a bar long enough for it; past the end of a bar too short for it, when it takes
    at most half the axis (the axis reaching past it); and where neither is sure (a long text on
    a narrow chart), plotly's own "auto", from the text and bar as drawn. No value is clipped at
    the axis (cliponaxis off)."""
    lay = fig.layout
    for trace in fig.data:
        if trace.type != "bar" or trace.orientation != "h" or trace.textposition != "auto" or trace.text is None \
                or isinstance(trace.text, str) or trace.x is None or not len(trace.x):
            continue
        axis = lay["xaxis" + (trace.xaxis or "x")[1:]]
        length = plot_w * ((axis.domain[1] - axis.domain[0]) if axis.domain else 1.0)
        values = [float(v) if v is not None else 0.0 for v in trace.x]
        data = (min(0.0, *values), max(0.0, *values))
        lo, hi = list(axis.range) if axis.range is not None else data
        if hi <= lo or length <= 0:
            continue
        px = trace.textfont.size or font_px
        need = [0.62 * px * len(html.unescape(str(t))) + 6 for t in trace.text]
        where = ["inside" if abs(v) * length / (hi - lo) >= n else "outside" if n <= length / 2 else "auto"
                 for v, n in zip(values, need)]
        for v, n, w in zip(values, need, where):
            if w == "outside":      # the axis long enough that the bar and its text fit (solved for its end)
                if v >= 0:
                    hi = max(hi, lo + (v - lo) * length / (length - n))
                else:
                    lo = min(lo, hi - (hi - v) * length / (length - n))
        trace.update(textposition=where, cliponaxis=False)
        if axis.range is not None or (lo, hi) != data:
            axis.range = [lo, hi]


def altair_for_screen(chart, projector: bool = False):
    """An altair chart with the same rule as for_screen: labels at least label_px, in BODY_TEXT."""
    small = label_px(projector)
    return chart.configure_axis(labelFontSize=small, titleFontSize=small, labelColor=BODY_TEXT,
                                titleColor=BODY_TEXT).configure_legend(
        labelFontSize=small, titleFontSize=small, labelColor=BODY_TEXT, titleColor=BODY_TEXT).configure_title(
        fontSize=small + 2, color=BODY_TEXT)


def label_step(n: int, most: int) -> int:
    """Label every k-th of n tokens so that at most `most` are labelled (hover names the rest)."""
    return max(1, -(-n // most))


def display_token(piece: str) -> str:
    """A token for a plotly label, HTML-escaped (plotly renders a subset of HTML in labels).
    Subword pieces keep their word-start marker "▁", so "▁lect" "ure" reads as one word."""
    return html.escape(piece, quote=False)
