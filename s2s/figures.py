"""Pure figure builders: data in, plotly figure out (no Streamlit, no model calls).

Token labels are HTML-escaped: plotly renders a subset of HTML in labels, and user text
must always show as text, never as markup. Axes are positional (0..n-1) with the tokens
as tick labels, because two equal tokens ("the" ... "the") must stay two columns.
"""
from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .piece_words import HEAD_KINDS  # a Transformer's kinds of attention: the heads grid's titles

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


def label_px(projector: bool = False) -> int:
    return PROJECTOR_LABEL_PX if projector else LABEL_PX


def _fits(n: int, length_px: float, pitch_px: float) -> list[int]:
    """Indices of n evenly spaced labels kept so that neighbours stand >= pitch_px apart."""
    k = max(1, math.ceil(n * pitch_px / max(length_px, 1.0)))
    return list(range(0, n, k))


def for_screen(fig: go.Figure, projector: bool = False, width: int = 760) -> go.Figure:
    """The figure as a class reads it: every label at least `label_px(projector)` (the
    projector scales the sizes a figure chose by 18/14 too) and in BODY_TEXT, and the
    token labels of a crowded axis thinned to every k-th so that neighbours never overlap
    (hover still names every cell). `width` is the pixel width the figure will get on the
    page (Streamlit sizes it to its column), `fig.layout.height` its height.

    A label's pitch along its axis: upright or rotated text needs its line height (1.3 font
    sizes; 1.5 at -60 degrees); horizontal text on x needs its longest label's width, taken
    as 0.62 font sizes per character. Changes `fig` in place and returns it."""
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
    # (compact small multiples, where the panel's colour says the scale)
    beside = 0 if fig.data and all(t.type == "heatmap" and t.showscale is False for t in fig.data) else 70
    plot_w = width - (margin.l if margin.l is not None else 80) - (margin.r if margin.r is not None else 80) - beside
    # the other axis's labels and title take room from the plot area too (plotly's automargin)
    def band(axis, px: int) -> float:
        longest = max((len(html.unescape(str(t))) for t in axis.ticktext or ()), default=3)
        return (0.62 * px * longest if axis.showticklabels is not False else 0) + (25 if axis.title.text else 0)
    x_px, y_px = size(lay.xaxis.tickfont.size), size(lay.yaxis.tickfont.size)
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
    for name in [k for k in lay.to_plotly_json() if k.startswith(("xaxis", "yaxis"))] or ["xaxis", "yaxis"]:
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
        keep = _fits(len(texts), length, pitch)
        if len(keep) < len(texts):
            axis.tickvals, axis.ticktext = [axis.tickvals[i] for i in keep], [texts[i] for i in keep]
    for trace in fig.data:
        if getattr(trace, "colorbar", None) is not None and trace.type in ("heatmap", "contour", "scatter"):
            bar = trace.colorbar
            bar.tickfont.size, bar.tickfont.color = size(bar.tickfont.size), BODY_TEXT
            bar.title.font.size, bar.title.font.color = size(bar.title.font.size), BODY_TEXT
        font = getattr(trace, "textfont", None)
        if font is not None and not isinstance(font.size, (tuple, list)):
            font.size = size(font.size)    # a list of sizes was placed label by label (beam_tree_figure)
    for note in lay.annotations:
        note.font.size = size(note.font.size)
        if note.font.color is None:
            note.font.color = BODY_TEXT
    return fig


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


def matrix_heatmap(x_tokens: Sequence[str], y_tokens: Sequence[str], z: np.ndarray, value_name: str = "α",
                   zmin: float = 0.0, zmax: float = 1.0, colorscale: str = PROJECTOR_SCALE,
                   x_title: str = "source (English)", y_title: str = "output (French)",
                   title: str | None = None, height: int | None = None, compact: bool = False,
                   label_size: int = LABEL_PX, x_labels: bool = True) -> go.Figure:
    """A (len(y) x len(x)) matrix with tokens on both axes; hover shows the exact value.

    `compact`, for small multiples: no axis titles, no colour bar (the panel's colour says the
    scale), a top margin just tall enough for the source tokens drawn at `label_size` px (14, or
    18 once for_screen scales the labels for the projector), none without `x_labels` (small
    multiples sharing the source tokens of the map above), and `height` (if given) the rows'
    height alone."""
    z = np.asarray(z, dtype=float)
    xs = [display_token(t) for t in x_tokens]
    ys = [display_token(t) for t in y_tokens]
    hover = [[f"{ys[j]} ← {xs[i]}<br>{value_name} = {z[j, i]:.4f}" for i in range(len(xs))] for j in range(len(ys))]
    heat = go.Heatmap(z=z, x=list(range(len(xs))), y=list(range(len(ys))), zmin=zmin, zmax=zmax,
                      colorscale=colorscale, text=hover, hovertemplate="%{text}<extra></extra>",
                      # the title along the bar: above it, it sat on the top tick's label
                      colorbar=dict(title=dict(text=html.escape(value_name, quote=False), side="right"), thickness=14))
    if compact:
        # rotated -60 degrees, the longest source token stands about 0.52 sizes a character tall
        # (for_screen reckons 0.62 x sin 60): plotly's automargin makes that room above the map
        longest = max((len(html.unescape(t)) for t in xs), default=1)
        words_px = label_size * max(0.52 * longest + 0.5, 0.62 * longest * math.sin(math.radians(60))) + 6 \
            if x_labels else 0
        heat.showscale = False
        return figure(
            [heat],
            xaxis=dict(tickmode="array", tickvals=list(range(len(xs))), ticktext=xs, tickangle=-60, side="top",
                       tickfont=dict(size=LABEL_PX), showticklabels=x_labels),
            yaxis=dict(tickmode="array", tickvals=list(range(len(ys))), ticktext=ys, autorange="reversed",
                       tickfont=dict(size=LABEL_PX)),
            height=round(4 + words_px + (height or round(1.45 * label_size) * len(ys)) + 4),
            margin=dict(l=4, r=round(0.3 * label_size * len(html.unescape(xs[-1]))) + 4 if xs else 4, t=4, b=4))
    return figure(
        [heat],
        xaxis=dict(tickmode="array", tickvals=list(range(len(xs))), ticktext=xs, tickangle=-60,
                   title=dict(text=x_title), side="top", tickfont=dict(size=14 if len(xs) <= 25 else 11)),
        yaxis=dict(tickmode="array", tickvals=list(range(len(ys))), ticktext=ys, autorange="reversed",
                   title=dict(text=y_title), tickfont=dict(size=14)),
        # the source tokens sit on top, so a title needs room above them
        title=dict(text=html.escape(title, quote=False), y=0.995, yanchor="top") if title else None,
        height=(height or max(320, 120 + 26 * len(ys))) + (40 if title else 0),
        margin=dict(l=10, r=10, t=150 if title else 110, b=10))


def attention_heatmap(source_tokens: Sequence[str], target_tokens: Sequence[str], attention: np.ndarray,
                      title: str | None = None, height: int | None = None) -> go.Figure:
    """Alignment heatmap: source tokens on x, target tokens on y (first at the top),
    hover shows the exact weight alpha_ij."""
    return matrix_heatmap(source_tokens, target_tokens, attention, title=title, height=height)


def alignment_lines(source_tokens: Sequence[str], target_tokens: Sequence[str], attention: np.ndarray,
                    min_weight: float = 0.02) -> go.Figure:
    """Source tokens on a top row, target tokens on a bottom row, joined by lines whose
    opacity is the attention weight (as in distill.pub's attention figure)."""
    a = np.asarray(attention, dtype=float)
    n_src, n_tgt = len(source_tokens), len(target_tokens)
    width = max(n_src, n_tgt) - 1 or 1
    xs = np.linspace(0, width, n_src) if n_src > 1 else np.array([width / 2])
    xt = np.linspace(0, width, n_tgt) if n_tgt > 1 else np.array([width / 2])
    traces = []
    # lines grouped into 10 opacity levels: 10 traces instead of one per pair
    for level in range(10):
        lo, hi = level / 10, (level + 1) / 10
        x, y = [], []
        for j in range(n_tgt):
            for i in range(n_src):
                w = a[j, i]
                if w >= min_weight and lo <= w < hi + (1e-9 if level == 9 else 0):
                    x += [xs[i], xt[j], None]
                    y += [1, 0, None]
        if x:
            traces.append(go.Scatter(x=x, y=y, mode="lines", hoverinfo="skip", showlegend=False,
                                     line=dict(color=f"rgba(8,64,129,{max(hi, 0.08):.2f})", width=1 + 3 * hi)))
    for xx, yy, toks, pos in ((xs, 1, source_tokens, "top center"), (xt, 0, target_tokens, "bottom center")):
        traces.append(go.Scatter(x=xx, y=[yy] * len(toks), mode="markers+text", text=[display_token(t) for t in toks],
                                 textposition=pos, textfont=dict(size=15), marker=dict(size=7, color="#253494"),
                                 hoverinfo="text", showlegend=False))
    return figure(traces, xaxis=dict(visible=False, range=[-0.8, width + 0.8]),
                  yaxis=dict(visible=False, range=[-0.35, 1.35]), height=260, margin=dict(l=10, r=10, t=10, b=10),
                  annotations=[dict(x=-0.8, y=1.22, text="English", showarrow=False, xanchor="left"),
                               dict(x=-0.8, y=-0.22, text="French", showarrow=False, xanchor="left")])


def token_bars(tokens: Sequence[str], values: Sequence[float], value_title: str, highlight: int | None = None,
               height: int | None = None, value_format: str = ".3f", horizontal: bool = True,
               value_range: tuple[float, float] | None = None, texts: Sequence[str] | None = None) -> go.Figure:
    """One bar per token, in order; `highlight` is drawn darker. Horizontal bars list the
    tokens top to bottom (short lists); vertical bars put them along x (long outputs).
    `value_range` fixes the value axis, so that two charts side by side compare; `texts`
    writes on each horizontal bar instead of its value."""
    labels = [display_token(t) for t in tokens]
    pos = list(range(len(tokens)))
    colors = ["#c7e9b4" if i != highlight else "#225ea8" for i in pos]
    bars = go.Bar(x=list(values) if horizontal else pos, y=pos if horizontal else list(values),
                  orientation="h" if horizontal else "v", marker=dict(color=colors),
                  text=(list(texts) if texts is not None else [f"{v:{value_format}}" for v in values])
                  if horizontal else None,
                  textposition="auto", hovertext=labels,
                  hovertemplate="%{hovertext}: %{" + ("x" if horizontal else "y") + ":" + value_format
                  + "}<extra></extra>")
    # Vertical bars: labels stand upright (-90 degrees), so neighbours never overlap as long as
    # the font is no taller than a bar is wide; half a column at 1280 px is ~380 px wide. Past
    # 30 pieces that font would be unreadable on a projector: every k-th piece and the
    # highlighted one are labelled instead, at a readable size (hover names every bar).
    size = 14 if horizontal or len(tokens) <= 20 else 11 if len(tokens) <= 30 else 12
    shown = pos
    if not horizontal and len(tokens) > 30:
        k = label_step(len(tokens), 15)           # at most 15 regular labels, and the highlighted one,
        near = k          # which pushes out any label closer than k to it (k/2 let two labels touch at 14 px)
        shown = [i for i in pos[::k] if highlight is None or abs(i - highlight) >= near]
        shown = sorted(shown + ([highlight] if highlight is not None else []))
    token_axis = dict(tickmode="array", tickvals=shown, ticktext=[labels[i] for i in shown], tickfont=dict(size=size))
    value_axis = dict(title=dict(text=value_title), range=list(value_range) if value_range else None)
    if horizontal:
        axes = dict(yaxis=dict(autorange="reversed", **token_axis), xaxis=value_axis)
        height = height or max(220, 60 + 28 * len(tokens))
    else:
        axes = dict(xaxis=dict(tickangle=-90, **token_axis), yaxis=value_axis)
        height = height or 320
    return figure([bars], height=height, margin=dict(l=10, r=10, t=10, b=40), **axes)


# ---------------------------------------------------------------- beam search

# The final n-best paths, best first: darkest and widest for the winner. One colour per
# rank, so a path can be followed through the crossings of the others; from #6 on (up to 16
# with the widest beam) one dashed style for all, as more colours would not be told apart.
NBEST_STYLES = [("#081d58", 4.0), ("#1d91c0", 3.0), ("#ec7014", 2.5), ("#7fbc41", 2.0), ("#ae017e", 2.0)]
NBEST_REST = ("#807dba", 1.5)
FINISHED_COLOR = "#d7301f"     # a hypothesis that emitted </s>
HALO = "1px 1px 1px white, -1px -1px 1px white, 1px -1px 1px white, -1px 1px 1px white"   # text over lines


def beam_tree_positions(tree: Sequence[dict]) -> list[tuple[int, int]]:
    """(x, y) of every tree node: x = step + 1 (the root <s> is at x = 0), y = its rank
    among the nodes kept at that step (0 = the highest log p(prefix); beam_search lists
    each step's nodes in that order)."""
    rank: dict[int, int] = {}
    pos = []
    for node in tree:
        r = rank.get(node["step"], 0)
        rank[node["step"]] = r + 1
        pos.append((node["step"] + 1, r))
    return pos


def beam_paths(tree: Sequence[dict], final_nodes: Sequence[int]) -> list[list[int]]:
    """The node indices of each final hypothesis's path, from its first token to its last."""
    paths = []
    for n in final_nodes:
        path = []
        while n >= 0:
            path.append(n)
            n = tree[n]["parent"]
        paths.append(path[::-1])
    return paths


def _text_em(text: str) -> float:
    """A label's width in font sizes, on the wide side: plotly asks for Open Sans, which the
    app does not ship, so browsers fall back to Verdana (wide) or Arial; "▁" and capitals
    are wide, "i", "l", "'" narrow."""
    return sum(0.3 if c in "ijlft.,;:'!|() " else 0.8 if c in "▁mwMW" or c.isupper() else 0.6 for c in text)


def _place_labels(candidates: Sequence[tuple[float, float, str]], px_per_x: float, px_per_y: float,
                  font_px: int) -> list[tuple[float, float] | None]:
    """Where each label goes, as (its centre's offset from its point in pixels, negative
    above; its font size), or None where no place is free: no two labels overlap.

    Candidates (x, y, text) in data units are placed greedily in the order given (the most
    important first): just above the point, just below, then the same at four fifths of the
    font size; a point on the top row (y = 0), with nothing above it, may also take a second
    line above. A label is a box `_text_em(text)` font sizes wide and one line high, centred
    on its point's x; px_per_x and px_per_y convert data units to pixels (y grows downwards
    here, as ranks do). Placed boxes are kept in 64-pixel columns, so a box is checked
    against its neighbours only (a 250-step tree has thousands of labels)."""
    columns: dict[int, list[tuple[float, float, float, float]]] = {}
    gap = 0.55 * font_px                               # a marker's radius and a little air
    out: list[tuple[float, float] | None] = []
    for x, y, text in candidates:
        cx, cy = x * px_per_x, y * px_per_y
        choice = None
        for size in [s for s in (font_px, 0.8 * font_px) if s >= LABEL_PX] or [font_px]:   # never under LABEL_PX
            h, half = 1.25 * size, (_text_em(text) * size + 4) / 2
            for dy in [-gap - h / 2, gap + h / 2] + ([-gap - 1.5 * h] if y == 0 else []):
                box = (cx - half, cy + dy - h / 2, cx + half, cy + dy + h / 2)
                near = range(int(box[0] // 64), int(box[2] // 64) + 1)
                if all(box[2] <= b[0] or b[2] <= box[0] or box[3] <= b[1] or b[3] <= box[1]
                       for c in near for b in columns.get(c, ())):
                    for c in near:
                        columns.setdefault(c, []).append(box)
                    choice = (dy, size)
                    break
            if choice:
                break
        out.append(choice)
    return out


def beam_tree_figure(tree: Sequence[dict], final_nodes: Sequence[int], plot_width: int = 750,
                     font_px: int = LABEL_PX, height: int | None = None) -> go.Figure:
    """The beam search tree: every hypothesis kept at every step, linked to its parent.

    x = step, y = rank within the step (beam_tree_positions); one thin grey edge per node,
    from its parent. The final n-best paths (`final_nodes`, best first, as Decoding.nbest)
    are drawn over them, one colour each, the winner darkest and widest; finished
    hypotheses (</s>) are red. Only the n-best paths' tokens are written on the tree,
    above or below their node wherever the label fits without touching another, if need be
    a little smaller (_place_labels: the winner's first, assuming a plot area `plot_width`
    pixels wide, the Translate page's at 1280 x 720); hovering any node shows its token,
    step, rank and log p(prefix). `height` caps the figure's height (a first screen's room):
    the ranks then stand closer, and a label that no longer fits is left to the hover."""
    pos = beam_tree_positions(tree)
    root = (0, 0)
    paths = beam_paths(tree, final_nodes)
    on_paths: dict[int, list[int]] = {}           # node -> the n-best ranks whose path runs through it
    for k, path in enumerate(paths):
        for n in path:
            on_paths.setdefault(n, []).append(k)
    tokens = [display_token(t["token"]) for t in tree]
    # every edge, parent -> child, in one trace: (x0, x1, None) per node
    ex, ey = [], []
    for n, node in enumerate(tree):
        (x0, y0), (x1, y1) = root if node["parent"] < 0 else pos[node["parent"]], pos[n]
        ex += [x0, x1, None]
        ey += [y0, y1, None]
    traces = [go.Scatter(x=ex, y=ey, mode="lines", line=dict(color="#c8c8c8", width=1), hoverinfo="skip",
                         name="every hypothesis kept", legendrank=len(paths) + 1)]
    # the n-best paths over them; the best drawn last, on top where paths share a prefix
    styled = len(NBEST_STYLES)
    for k in reversed(range(len(paths))):
        color, width = NBEST_STYLES[k] if k < styled else NBEST_REST
        pts = [root] + [pos[n] for n in paths[k]]
        if k < styled:
            name, more = ("#1, the best" if k == 0 else f"#{k + 1}"), {}
        else:                                     # one legend entry for them all
            name = f"#{k + 1}" if len(paths) == styled + 1 else f"#{styled + 1}–#{len(paths)}"
            more = dict(legendgroup="rest", showlegend=k == styled)
        traces.append(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines", name=name,
                                 line=dict(color=color, width=width, dash="solid" if k < styled else "dash"),
                                 hoverinfo="skip", legendrank=k + 1, **more))
    # every node with its hover, larger on an n-best path
    hover = [f"<b>{tokens[n]}</b><br>step {pos[n][0]}, rank {pos[n][1] + 1}<br>log p(prefix) = {t['log_prob']:.3f}"
             + ("<br>finished (&lt;/s&gt;)" if t["finished"] else "")
             + ("<br>on n-best " + ", ".join(f"#{k + 1}" for k in on_paths[n]) if n in on_paths else "")
             for n, t in enumerate(tree)]
    colors = [FINISHED_COLOR if t["finished"] else
              (NBEST_STYLES + [NBEST_REST])[min(on_paths[n][0], styled)][0] if n in on_paths else "#969696"
              for n, t in enumerate(tree)]
    traces.append(go.Scatter(x=[0] + [p[0] for p in pos], y=[0] + [p[1] for p in pos], mode="markers",
                             name="hypotheses", showlegend=False, customdata=list(range(-1, len(tree))),
                             marker=dict(size=[10] + [10 if n in on_paths else 6 for n in range(len(tree))],
                                         color=["#081d58"] + colors, line=dict(color="white", width=1)),
                             hovertext=["&lt;s&gt;: the start"] + hover, hovertemplate="%{hovertext}<extra></extra>"))
    # the labels: the root's, then the n-best paths' tokens, the winner's first
    steps = max((p[0] for p in pos), default=0)
    ranks = max((p[1] for p in pos), default=0) + 1
    x_range, y_range = (-0.6, steps + 0.6), (ranks - 0.5, -1.0)        # ranks grow downwards
    margin = dict(l=10, r=10, t=40, b=round(3.6 * font_px))
    row_px = round(50 * font_px / 13)             # room for one label above and one below a rank
    if height is not None:
        row_px = max(10, min(row_px, (height - margin["t"] - margin["b"]) / (y_range[0] - y_range[1])))
    labelled = [-1] + list(dict.fromkeys(n for path in paths for n in path))   # each node once, by importance
    where = _place_labels([(*(root if n < 0 else pos[n]), "<s>" if n < 0 else tree[n]["token"]) for n in labelled],
                          plot_width / (x_range[1] - x_range[0]), row_px, font_px)
    shown = [(n, w) for n, w in zip(labelled, where) if w]
    traces.append(go.Scatter(
        x=[(root if n < 0 else pos[n])[0] for n, _ in shown],
        y=[(root if n < 0 else pos[n])[1] + dy / row_px for n, (dy, _) in shown], mode="text", name="labels",
        text=[display_token("<s>") if n < 0 else tokens[n] for n, _ in shown], customdata=[n for n, _ in shown],
        textposition="middle center", textfont=dict(size=[size for _, (_, size) in shown], color="#111111",
                                                    shadow=HALO),
        hoverinfo="skip", showlegend=False))
    return figure(traces,
                  xaxis=dict(title=dict(text="decoding step"), dtick=1 if steps <= 30 else 5, range=list(x_range),
                             showgrid=False, zeroline=False),
                  yaxis=dict(title=dict(text="rank in the beam"), range=list(y_range), tickmode="array",
                             tickvals=list(range(ranks)), ticktext=[str(r + 1) for r in range(ranks)],
                             showgrid=False, zeroline=False),
                  height=round(row_px * (y_range[0] - y_range[1])) + margin["t"] + margin["b"], margin=margin,
                  legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"), hoverlabel=dict(font=dict(size=14)))


def context_scatter(points: np.ndarray, tokens: Sequence[str], title: str) -> go.Figure:
    """2-D projection of the context vectors c_1..c_t, joined in decoding order."""
    labels = [display_token(t) for t in tokens]
    same = len(points) > 0 and not np.any(points)          # a fixed vector: every step one point
    # labels on at most ~20 points (hover names every step), none where they would all pile up
    k = label_step(len(labels), 20)
    shown = ["" if same or j % k else t for j, t in enumerate(labels)]
    path = go.Scatter(
        x=points[:, 0], y=points[:, 1], mode="lines+markers+text", text=shown, textposition="top center",
        marker=dict(size=9, color=list(range(len(labels))), colorscale="Viridis", showscale=False),
        line=dict(color="#bbbbbb", width=1), hovertext=[f"step {j + 1}: {t}" for j, t in enumerate(labels)],
        hovertemplate="%{hovertext}<extra></extra>")
    xaxis, yaxis, notes = dict(title=dict(text="PC 1")), dict(title=dict(text="PC 2")), []
    if same:
        xaxis["range"] = yaxis["range"] = [-1, 1]
        notes = [dict(x=0, y=-0.5, showarrow=False, font=dict(size=14),
                      text=f"one point: the same vector at all {len(points)} steps")]
    return figure([path], title=dict(text=html.escape(title, quote=False)), height=360, margin=dict(l=10, r=10, t=50, b=10),
                  xaxis=xaxis, yaxis=yaxis, annotations=notes)


# ---------------------------------------------------------------- LSTM cells

def _shade(v: float, lo: float, hi: float) -> str:
    """Diverging blue-white-red for signed values (tanh c in [-1, 1]); white-to-blue for
    values in [0, 1] (gates). The colours of Karpathy et al.'s figures."""
    if lo < 0:
        t = max(-1.0, min(1.0, v / max(abs(lo), abs(hi))))
        r, g, b = (178, 24, 43) if t > 0 else (33, 102, 172)
        t = abs(t)
    else:
        t = max(0.0, min(1.0, (v - lo) / ((hi - lo) or 1)))
        r, g, b = (8, 81, 156)
    t *= 0.85                                    # the strongest shade still leaves black text readable
    mix = lambda c: round(255 + (c - 255) * t)   # noqa: E731  white at t = 0
    return f"rgb({mix(r)},{mix(g)},{mix(b)})"


def colored_text_html(text: str, values: Sequence[float], lo: float = -1.0, hi: float = 1.0,
                      value_name: str = "tanh(c)", font_size: str = "1.05rem") -> str:
    """The text with every character's background shaded by its value; hovering shows it.
    Every character is HTML-escaped: the text is shown, never interpreted. New lines stay
    new lines (and get a faint ↵ so their colour is visible), tabs stay tabs."""
    spans = []
    name = html.escape(value_name, quote=True)
    for ch, v in zip(text, values):
        shown = "↵\n" if ch == "\n" else html.escape(ch)
        spans.append(f'<span style="background:{_shade(float(v), lo, hi)}" title="{name} = {float(v):+.3f}">{shown}</span>')
    return ("<div class='s2s-cells' style=\"font-family:ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;"
            f"tab-size:4;line-height:1.45;font-size:{font_size};color:#111;padding:0.4rem 0;word-break:break-all\">"
            + "".join(spans) + "</div>")


def cell_traces_figure(text: str, traces: dict[str, Sequence[float]], feature: Sequence[float] | None = None,
                       feature_name: str = "", y_title: str = "tanh(c)",
                       y_range: tuple[float, float] = (-1.05, 1.05)) -> go.Figure:
    """Activation of a few cells over the characters of `text`, with the feature shaded
    behind them; hover names the character."""
    x = list(range(len(text)))
    chars = [("↵" if c == "\n" else "⇥" if c == "\t" else "␣" if c == " " else html.escape(c, quote=False)) for c in text]
    lines = []
    if feature is not None:
        f = np.asarray(feature, dtype=float)
        span = (f.max() - f.min()) or 1.0
        lo, hi = y_range
        lines.append(go.Scatter(x=x, y=lo + (f - f.min()) / span * (hi - lo), mode="lines",
                                 line=dict(color="#999999", dash="dot", shape="hv", width=2),
                                 name=html.escape(feature_name or "feature", quote=False) + " (scaled)", hoverinfo="skip"))
    for name, values in traces.items():
        lines.append(go.Scatter(x=x, y=np.asarray(values, dtype=float), mode="lines", name=html.escape(name, quote=False),
                                 customdata=chars, line=dict(width=2),
                                 hovertemplate="%{customdata}: %{y:.3f}<extra>" + html.escape(name, quote=False) + "</extra>"))
    return figure(lines, height=300, margin=dict(l=10, r=10, t=10, b=40), legend=dict(orientation="h", y=1.12, x=0),
                  xaxis=dict(title=dict(text="character")),
                  yaxis=dict(title=dict(text=y_title), range=list(y_range), gridcolor="#eeeeee"))


def saturation_scatter(saturation: dict[str, dict[str, np.ndarray]], title: str = "") -> go.Figure:
    """The paper's Fig. 3: for each gate of each unit, the fraction of time it is
    left-saturated (< 0.1, x) against right-saturated (> 0.9, y)."""
    colors = {"input_gate": "#1b9e77", "forget_gate": "#d95f02", "output_gate": "#7570b3",
              "update_gate": "#d95f02", "reset_gate": "#1b9e77"}
    traces = []
    for gate, sat in saturation.items():
        traces.append(go.Scatter(x=sat["low"], y=sat["high"], mode="markers", name=gate.replace("_", " "),
                                 marker=dict(size=6, opacity=0.7, color=colors.get(gate)),
                                 text=[f"cell {i}" for i in range(len(sat["low"]))],
                                 hovertemplate="%{text}<br>below 0.1: %{x:.0%}<br>above 0.9: %{y:.0%}<extra></extra>"))
    traces.append(go.Scatter(x=[0, 1], y=[1, 0], mode="lines", line=dict(color="#cccccc", dash="dot"),
                             hoverinfo="skip", showlegend=False))
    return figure(traces, title=dict(text=html.escape(title, quote=False)) if title else None, height=360,
                  margin=dict(l=10, r=10, t=40 if title else 10, b=40), legend=dict(orientation="h", y=-0.22, x=0),
                  xaxis=dict(title=dict(text="fraction of time < 0.1 (left-saturated)"), range=[-0.02, 1.02],
                             tickformat=".0%"),
                  yaxis=dict(title=dict(text="fraction of time > 0.9 (right-saturated)"), range=[-0.02, 1.02],
                             tickformat=".0%"))


def state_heatmap(tokens: Sequence[str], states: np.ndarray, title: str, value_name: str = "tanh(c)",
                  height: int = 360, x_title: str = "source piece", highlight: int | None = None) -> go.Figure:
    """Cell dimensions (y) x tokens (x) of a translation model's LSTM, diverging colours;
    `highlight` outlines one cell's row."""
    z = np.asarray(states, dtype=float).T          # (H, T)
    labels = [display_token(t) for t in tokens]
    heat = go.Heatmap(z=z, x=list(range(len(labels))), y=list(range(z.shape[0])), zmin=-1, zmax=1,
                      colorscale="RdBu_r", colorbar=dict(title=dict(text=html.escape(value_name, quote=False)), thickness=12),
                      customdata=np.array([labels] * z.shape[0]),
                      hovertemplate="%{customdata} · cell %{y}: %{z:.3f}<extra></extra>")
    shapes = [] if highlight is None else [dict(type="rect", x0=-0.5, x1=len(labels) - 0.5, y0=highlight - 0.5,
                                                 y1=highlight + 0.5, line=dict(color="black", width=2))]
    return figure([heat],
                  xaxis=dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels, tickangle=-60,
                             side="top", tickfont=dict(size=13 if len(labels) <= 30 else 10),
                             title=dict(text=html.escape(x_title, quote=False), standoff=4)),
                  yaxis=dict(title=dict(text=f"cell (0–{z.shape[0] - 1})"), autorange="reversed"),
                  title=dict(text=html.escape(title, quote=False), y=0.99, yanchor="top"), height=height, shapes=shapes,
                  margin=dict(l=10, r=10, t=140, b=10))


# ---------------------------------------------------------------- altair (line charts)

# One colour per translation model, by its attention function (read from its config), on
# every page: no two are shades of one hue, and the fixed-vector model is the neutral grey.
ATTENTION_COLORS = {"none": "#7f7f7f", "dot": "#ff7f0e", "general": "#9467bd", "additive": "#1f77b4",
                    "scaled-dot": "#2ca02c", "transformer": "#d62728"}   # (a Transformer by its arch)


def model_colors(attention_of: dict[str, str | None]) -> dict[str, str]:
    """model name -> colour, from each model's attention function; models sharing one (or
    an unknown one) get the next unused colour of a fixed list."""
    spare = ["#e377c2", "#8c564b", "#17becf", "#bcbd22", "#393b79"]
    out, used = {}, set()
    for name, att in attention_of.items():
        c = ATTENTION_COLORS.get(att or "")
        if c is None or c in used:
            c = next((x for x in spare if x not in used), "#000000")
        out[name] = c
        used.add(c)
    return out


def length_chart(df, x: str, y: str, color: str = "model", x_title: str = "", y_title: str = "",
                 highlight_x: float | None = None, highlight_label: str = "", colors: dict[str, str] | None = None,
                 projector: bool = False):
    """A line chart per model (altair); an optional vertical rule marks where something happens.
    `colors` fixes each model's colour (model_colors), so a model looks the same in every chart."""
    import altair as alt
    scale = alt.Scale(domain=list(colors), range=list(colors.values())) if colors else alt.Undefined
    base = alt.Chart(df).encode(
        # integer ticks: lengths in words (one point alone got ticks such as "8.000000")
        x=alt.X(f"{x}:Q", title=x_title, axis=alt.Axis(format="d", tickMinStep=1)), y=alt.Y(f"{y}:Q", title=y_title),
        color=alt.Color(f"{color}:N", title=None, scale=scale,
                        legend=alt.Legend(orient="bottom")),
        tooltip=list(df.columns))
    chart = base.mark_line(point=alt.OverlayMarkDef(size=70), strokeWidth=3)
    if highlight_x is not None:
        import pandas as pd
        rule = alt.Chart(pd.DataFrame({x: [highlight_x], "label": [highlight_label]})).mark_rule(
            color="#d7301f", strokeDash=[6, 4], strokeWidth=2).encode(x=f"{x}:Q")
        text = rule.mark_text(align="left", dx=6, dy=-8, color="#d7301f", fontSize=label_px(projector)).encode(
            text="label:N", y=alt.value(300))     # at the bottom: the lines near 100 stay clear
        chart = chart + rule + text
    return altair_for_screen(chart.properties(height=320), projector)


def scaling_figure(stats: dict, compact: bool = False, height: int = 190) -> go.Figure:
    """Softmax entropy of random dot-product scores against d, with and without 1/sqrt(d)
    (s2s.attention.scaling_statistics), beside the entropy of uniform weights. `compact`: a
    small multiple `height` px tall, its title naming the curves in their colours."""
    d = stats["d"]
    hover = "d = %{x}<br>entropy %{y:.2f} nats<br>score std %{customdata:.1f}<extra></extra>"
    traces = [
        go.Scatter(x=d, y=stats["entropy_unscaled"], name="e = q·k", mode="lines+markers",
                   line=dict(width=3, color="#d95f02"), customdata=stats["std_unscaled"], hovertemplate=hover),
        go.Scatter(x=d, y=stats["entropy_scaled"], name="e = q·k / √d", mode="lines+markers",
                   line=dict(width=3, color="#1f4e9c"), customdata=stats["std_scaled"], hovertemplate=hover),
        go.Scatter(x=[d[0], d[-1]], y=[stats["max_entropy"]] * 2, name=f"uniform over {stats['n_keys']} keys",
                   mode="lines", line=dict(dash="dot", color="gray"), hoverinfo="skip"),
    ]
    if compact:      # the title names the two curves in their colours: no room for a legend
        title = (f"<span style='color:#1f4e9c'>q·k / √d</span> vs <span style='color:#d95f02'>q·k</span>, "
                 f"{stats['n_keys']} keys")
        return figure(traces, title=dict(text=title, x=0.02, xanchor="left", y=0.98, yanchor="top"),
                      xaxis=dict(title="d (log scale)", type="log", tickvals=d),
                      yaxis=dict(title="entropy (nats)", range=[0, 1.1 * stats["max_entropy"]]),
                      height=height, margin=dict(l=50, r=8, t=34, b=50), showlegend=False)
    return figure(traces, title=f"Softmax entropy of random scores over {stats['n_keys']} keys",
                  xaxis=dict(title="dimension d of queries and keys", type="log", tickvals=d),
                  yaxis=dict(title="mean entropy of α (nats)", rangemode="tozero"),
                  height=360, margin=dict(l=60, r=20, t=50, b=50), font=dict(size=15),
                  legend=dict(orientation="h", y=-0.25))


def model_diagram(cfg: dict, parameters: int | None = None) -> go.Figure:
    """The encoder-decoder of a translation checkpoint drawn with its real sizes (from its
    config: vocabulary, embedding, encoder and decoder sizes, cell, attention function; for
    a Transformer, layers, heads and feed-forward size)."""
    V = cfg["vocab_size"]
    if cfg.get("arch") == "transformer":
        d, H, ffn = cfg["d_model"], cfg["heads"], cfg["ffn"]
        copy = " + copy from α (head mean)" if cfg.get("copy") else ""
        enc = [("source pieces x_1..x_m", "#f0f0f0"),
               (f"√d E x + positions: {V:,} × {d} (shared)", "#c7e9b4"),
               (f"{cfg['encoder_layers']} × [self-attention, {H} heads of {d // H} ; FFN {d}→{ffn}→{d}]", "#a1dab4")]
        dec = [("previous pieces y_1..y_(j−1)", "#f0f0f0"),
               (f"√d E y + positions ({d})", "#c7e9b4"),
               (f"{cfg['decoder_layers']} layers, each: causal self-attention over y_≤j, {H} heads", "#a1dab4"),
               (f"then cross-attention over the encoder, {H} heads ; FFN {d}→{ffn}→{d}", "#fee391"),
               (f"p(y_j) = softmax(E z_j) over {V:,} pieces (E tied){copy}", "#f0f0f0")]
    else:
        E, H, cell = cfg["emb_dim"], cfg["hidden"], cfg["cell"].upper()
        att = cfg["attention"]
        if att == "none":
            reads = f"c = [h→_m ; h←_1]: the final encoder state ({H}), the same at every step"
        else:
            reads = f"attention ({att}): α_j = softmax(e_·j), c_j = Σ_i α_ij h_i ({H})"
        enc = [("source pieces x_1..x_m", "#f0f0f0"),
               (f"embedding E: {V:,} × {E} (shared)", "#c7e9b4"),
               (f"bidirectional {cell} encoder: 2 × {H // 2} → h_i ({H})", "#a1dab4")]
        dec = [(f"previous piece y_(j−1) and h̃_(j−1): [E y ; h̃] ({2 * E})", "#f0f0f0"),
               (f"{cell} decoder: s_j ({H})", "#a1dab4"),
               (reads, "#fee391" if att != "none" else "#fdae6b"),
               (f"h̃_j = tanh(W_c [c_j ; s_j]) ({E})", "#c7e9b4"),
               (f"p(y_j) = softmax(E h̃_j + b) over {V:,} pieces (E tied)", "#f0f0f0")]
    shapes, notes = [], []

    def box(x: float, y: float, w: float, text: str, color: str) -> None:
        shapes.append(dict(type="rect", x0=x - w / 2, x1=x + w / 2, y0=y - 0.32, y1=y + 0.32,
                           fillcolor=color, line=dict(color="#444", width=1)))
        notes.append(dict(x=x, y=y, text=html.escape(text, quote=False), showarrow=False, font=dict(size=15, color="#111")))

    def arrow(x0: float, y0: float, x1: float, y1: float) -> None:
        notes.append(dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="",
                          showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor="#444"))
    for k, (text, color) in enumerate(enc):
        box(0.0, k * 1.0, 2.6, text, color)
        if k:
            arrow(0.0, k - 1 + 0.32, 0.0, k - 0.32)
    for k, (text, color) in enumerate(dec):
        box(3.4, k * 1.0, 3.6, text, color)
        if k:
            arrow(3.4, k - 1 + 0.32, 3.4, k - 0.32)
    # the encoder states feed what the decoder reads: its attention (a Transformer's cross-attention)
    arrow(1.3, 2.0, 1.6, 3.0 if cfg.get("arch") == "transformer" else 2.0)
    title = "The selected model" + (f": {parameters:,} parameters" if parameters else "")
    return figure([], shapes=shapes, annotations=notes, title=title, height=420, showlegend=False,
                  xaxis=dict(visible=False, range=[-1.4, 5.3]), yaxis=dict(visible=False, range=[-0.6, 4.6]),
                  margin=dict(l=10, r=10, t=50, b=10))


def memory_gap_figure(experiment: dict) -> go.Figure:
    """Held-out accuracy vs gap (log x) for each cell of a memory_gap experiment
    (s2s/memory_gap.py, results/memory_gap.json), with chance as a dashed line."""
    names = {"rnn": "Elman RNN (tanh)", "gru": "GRU", "lstm": "LSTM"}
    # drawn in this order, each thinner and smaller than the one before: where the cells
    # agree (all at 100%) every one of them still shows, nested, instead of the last hiding the rest
    styles = {"rnn": (CELL_COLORS["rnn"], "circle", 7, 22), "gru": (CELL_COLORS["gru"], "square", 4.5, 15),
              "lstm": (CELL_COLORS["lstm"], "diamond", 2, 9)}
    rows = experiment["results"]
    chance = float(experiment["chance"])
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    gaps = sorted({r["gap"] for r in rows})
    traces = []
    for cell in cells:
        mine = sorted((r for r in rows if r["cell"] == cell), key=lambda r: r["gap"])
        color, symbol, width, size = styles.get(cell, ("#7f7f7f", "x", 2, 9))
        name = html.escape(names.get(cell, cell), quote=False)
        params = f"{mine[0]['parameters']:,}" if "parameters" in mine[0] else "?"
        traces.append(go.Scatter(
            x=[r["gap"] for r in mine], y=[r["accuracy"] for r in mine], mode="lines+markers",
            name=f"{name} ({params} parameters)", line=dict(color=color, width=width),
            marker=dict(color=color, symbol=symbol, size=size, line=dict(color="white", width=1)),
            customdata=[[r["steps"], r["seconds"], r.get("stopped", "")] for r in mine],
            hovertemplate=(f"{name}<br>gap %{{x}}: %{{y:.1%}} right<br>"
                           "%{customdata[0]:,} training steps, %{customdata[1]:.0f} s, %{customdata[2]}<extra></extra>")))
    return figure(
        traces,
        title=dict(text="Remembering one symbol across a gap of distractors: held-out accuracy", x=0.5, xanchor="center"),
        xaxis=dict(type="log", tickmode="array", tickvals=gaps, ticktext=[str(g) for g in gaps],
                   title=dict(text="gap (distractor symbols between the symbol and the query, time steps; log scale)"),
                   showgrid=True, gridcolor="#e5e5e5", linecolor="#444", mirror=True),
        yaxis=dict(range=[0, 1.08], tickformat=".0%", dtick=0.2,
                   title=dict(text=f"held-out accuracy (% of {experiment.get('settings', {}).get('held_out', 2000):,} sequences)"),
                   showgrid=True, gridcolor="#e5e5e5", linecolor="#444", mirror=True, zeroline=False),
        shapes=[dict(type="line", xref="paper", x0=0, x1=1, yref="y", y0=chance, y1=chance,
                     line=dict(color="#555", width=2, dash="dash"))],
        annotations=[dict(xref="paper", x=0.01, xanchor="left", yref="y", y=chance, yanchor="bottom",
                          text=f"chance = {chance:.1%} (guessing)", showarrow=False, font=dict(size=16, color="#555"))],
        font=dict(size=18), legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.2, yanchor="top"),
        margin=dict(l=90, r=30, t=80, b=150), hovermode="closest")


CELL_NAMES = {"rnn": "Elman RNN", "gru": "GRU", "lstm": "LSTM"}
CELL_COLORS = {"rnn": "#d62728", "gru": "#1f77b4", "lstm": "#2ca02c"}     # one colour per cell type, every figure


def _positive(values: Sequence[float]) -> list[float | None]:
    """Values for a log axis: an exact 0 (below float precision) or inf (past float range)
    becomes a gap."""
    return [v if 0 < v < math.inf else None for v in values]


REASONS = {"0": "below float precision", "∞": "past float range"}    # why a log axis loses a line there


def float_limit_marks(lines: Sequence[tuple[Sequence[float], Sequence[float], str, str]], label: str
                      ) -> tuple[list[go.Scatter], list[dict]]:
    """A line on a log axis whose float32 values reach 0 (underflow) or inf (overflow) leaves
    the chart there, as if the data ended. For lines (x, y, name, colour): a cross where each
    such line ends (its hover says where and why, "from k = 3"), and a note saying what the
    crosses mean, beside the plot under a legend placed there (no corner of the plot is free of
    lines at every setting). Returns the crosses' traces and the note's annotations (none when
    every line stays in range)."""
    marks, limits = [], set()
    for x, y, name, color in lines:
        out = next((k for k, v in enumerate(y) if not 0 < v < math.inf), None)
        if not out:                     # in range throughout, or nothing drawn at all
            continue
        limit = "0" if y[out] == 0 else "∞"
        limits.add(limit)
        marks.append(go.Scatter(x=[x[out - 1]], y=[y[out - 1]], mode="markers", showlegend=False,
                                marker=dict(symbol="x-thin", size=14, line=dict(width=3, color=color)),
                                hovertemplate=f"{html.escape(name, quote=False)}: {limit} ({REASONS[limit]}) "
                                              f"from {label} = {x[out]:g}<extra></extra>"))
    if not limits:
        return marks, []
    note = (f"× value reached {' or '.join(sorted(limits))}<br>"
            f"({', '.join(REASONS[l] for l in sorted(limits))}):<br>the line stops there")
    return marks, [dict(xref="paper", yref="paper", x=1.01, y=0.02, xanchor="left", yanchor="bottom", showarrow=False,
                        align="left", text=note, font=dict(size=14))]


def _log_axis(title: str) -> dict:
    return dict(type="log", exponentformat="power", title=dict(text=title), showgrid=True, gridcolor="#e5e5e5",
                linecolor="#444", mirror=True)


def untrained_flow_figure(flows: Sequence, title: str) -> go.Figure:
    """||d(u.m_T)/dm_t|| against T - t (log y) for untrained cells (s2s.gradients.UntrainedFlow;
    m is the memory: an LSTM's c, a GRU's or RNN's h), with the product of the keep gates
    (prod f, prod (1 - z)) dashed in the cell's colour."""
    traces, ends = [], []
    for f in flows:
        color, name = CELL_COLORS.get(f.cell, "#555"), CELL_NAMES.get(f.cell, f.cell)
        traces.append(go.Scatter(x=f.distances, y=_positive(f.grad_norm), mode="lines", name=f"{name}: gradient",
                                 line=dict(color=color, width=4),
                                 hovertemplate=f"{name}<br>T - t = %{{x}}<br>‖∂(u·m_T)/∂m_t‖ = %{{y:.2e}}<extra></extra>"))
        ends.append((f.distances, f.grad_norm, f"{name}: gradient", color))
        if f.keep_product is not None:
            gate = "f" if f.cell == "lstm" else "(1 − z)"
            traces.append(go.Scatter(x=f.distances, y=_positive(f.keep_product), mode="lines",
                                     name=f"{name}: ∏ {gate}", line=dict(color=color, width=3, dash="dash"),
                                     hovertemplate=f"{name}<br>T - t = %{{x}}<br>mean ∏ {gate} = %{{y:.2e}}<extra></extra>"))
            ends.append((f.distances, f.keep_product, f"{name}: ∏ {gate}", color))
    marks, note = float_limit_marks(ends, "T − t")
    return figure(traces + marks, title=dict(text=html.escape(title, quote=False), x=0.01, font=dict(size=18)),
                  annotations=note,
                  xaxis=dict(title=dict(text="steps back, T − t"), showgrid=True, gridcolor="#e5e5e5",
                             linecolor="#444", mirror=True),
                  yaxis=_log_axis("‖∂(u·m_T)/∂m_t‖ (log scale)"), font=dict(size=16), height=390,
                  legend=dict(x=1.02, y=1, yanchor="top", font=dict(size=15)), margin=dict(l=80, r=10, t=45, b=60))


def gradient_flow_figure(flows: dict, title: str) -> go.Figure:
    """g(k) / g(0) against k (log y) for trained models {label: s2s.gradients.GradientFlow}:
    how much of the gradient of a prediction reaches the state k characters back."""
    traces, ends = [], []
    for label, f in flows.items():
        g0 = f.grad_norm[0]
        ratios = [g / g0 for g in f.grad_norm] if g0 > 0 else []
        ends.append((f.distances, ratios, label, CELL_COLORS.get(f.cell, "#555")))
        traces.append(go.Scatter(
            x=f.distances, y=_positive(ratios), mode="lines",
            name=html.escape(label, quote=False), line=dict(color=CELL_COLORS.get(f.cell, "#555"), width=4),
            customdata=f.grad_norm,
            hovertemplate=(f"{html.escape(label, quote=False)}<br>k = %{{x}}<br>g(k)/g(0) = %{{y:.2e}}"
                           "<br>g(k) = %{customdata:.2e}<extra></extra>")))
    # a gradient that underflows to exactly 0 leaves the log axis: say so where its line ends,
    # or the line looks as if the measurement stopped there
    marks, note = float_limit_marks(ends, "k")
    return figure(traces + marks, title=dict(text=html.escape(title, quote=False), x=0.01, font=dict(size=18)),
                  annotations=note,
                  xaxis=dict(title=dict(text="k, characters back"), showgrid=True, gridcolor="#e5e5e5",
                             linecolor="#444", mirror=True),
                  yaxis=_log_axis("g(k) / g(0) (log scale)"), font=dict(size=16), height=390,
                  # beside the plot, top right: under the axis it falls below the fold of a 1280 x 720
                  # projector, and inside the plot no corner is free of the curves for every passage
                  legend=dict(x=1.01, xanchor="left", y=1, yanchor="top", font=dict(size=14)),
                  margin=dict(l=70, r=10, t=50, b=50))


def memory_span_figure(half_lives: Sequence[int], max_distance: int, title: str) -> go.Figure:
    """Histogram of the LSTM cells' memory half-lives (the distance at which the mean
    forget-gate product falls below 1/2); the last bar holds the cells beyond max_distance."""
    values = np.minimum(np.asarray(half_lives), max_distance + 1)
    edges = [0, 1, 2, 5, 10, 20, 50, 100, max_distance + 1, max_distance + 2]
    edges = sorted({e for e in edges if e <= max_distance + 2})
    counts = [int(((values >= lo) & (values < hi)).sum()) for lo, hi in zip(edges[:-1], edges[1:])]
    labels = [f"{lo}" if hi - lo == 1 else f"{lo}–{hi - 1}" for lo, hi in zip(edges[:-1], edges[1:])]
    labels[-1] = f"> {max_distance}"
    bar = go.Bar(x=labels, y=counts, marker_color=CELL_COLORS["lstm"], text=counts, textposition="outside",
                 hovertemplate="half-life %{x} characters: %{y} cells<extra></extra>")
    return figure([bar], title=dict(text=html.escape(title, quote=False), x=0.01, font=dict(size=18)),
                  xaxis=dict(title=dict(text="memory half-life (characters until ∏ f < ½)"), type="category"),
                  yaxis=dict(title=dict(text="cells"), showgrid=True, gridcolor="#e5e5e5",
                             range=[0, max(counts) * 1.2 + 1]),
                  font=dict(size=16), height=400, margin=dict(l=70, r=20, t=50, b=80))


# ---------------------------------------------------------------------------------------
# Alignment and explanation (s2s.alignment, s2s.attributions, s2s.counterfactual)

GOLD_SURE = "#d62728"        # red squares: links every annotator drew
GOLD_POSSIBLE = "#ff9896"    # light red: links some annotators drew
MODEL_LINK = "#111111"       # black crosses: the model's links


def gold_alignment_figure(english: Sequence[str], french: Sequence[str], weights: np.ndarray,
                          sure: set, possible: set, predicted: set, title: str | None = None,
                          words: str = "gold words", height: int | None = None,
                          label_size: int = LABEL_PX) -> go.Figure:
    """The model's word-level attention (French words x English words) with the human links
    drawn on it: Sure links as red squares, Possible-only links as light-red squares, the
    model's links (a rule applied to the weights) as black crosses. A cross inside a red
    square is a hit; a cross alone is a wrong link; a square alone is a missed one.
    Links are (English word, French word) pairs counted from 0. `words` names the words in
    the axis titles ("your words" for a typed pair, which has no gold links).

    The legend sits at the bottom, under the map. `height`: the most pixels the figure
    may take (what a first screen has left): its rows shrink to fit, down to the height of a
    label drawn at `label_size` px (14, or 18 once for_screen scales it for the projector);
    past that, to less than for_screen's pitch, so that it labels every k-th French word."""
    fig = matrix_heatmap(english, french, weights, value_name="attention", x_title=f"English ({words})",
                         y_title=f"French ({words})", title=title)
    longest = max((len(html.unescape(display_token(w))) for w in english), default=1)
    # plotly's automargin makes room above for the axis title and the English words, upright (as
    # for_screen reckons them: 0.62 sizes a character); the legend has the bottom margin
    top, bottom = 10 + (40 if title else 0), round(2.2 * label_size)
    words_px = 0.62 * label_size * longest + 25 + 0.6 * label_size      # upright: see the x axis below
    need = 1.45 * label_size          # a label's box is ~1.42 sizes tall
    row = 26.0
    if height:
        row = min(row, (height - top - bottom - words_px) / max(len(french), 1))
        if row < need:
            row = min(row, 1.25 * label_size)     # for_screen thins labels closer than 1.3 sizes
    size = min(24 if max(len(english), len(french)) <= 25 else 15, round(0.9 * row))
    # the English words stand upright: at -60 degrees two neighbours need 1.6 sizes between them,
    # upright 1.45 (the map's columns are as narrow as its rows are short)
    fig.update_xaxes(tickangle=-90)
    layers = [("gold Sure", sorted(sure), "square-open", GOLD_SURE, size, 3),
              ("gold Possible", sorted(possible - sure), "square-open", GOLD_POSSIBLE, size, 2),
              ("model", sorted(predicted), "x-thin-open", MODEL_LINK, size * 0.6, 3)]
    for name, pts, symbol, color, s, width in layers:
        fig.add_trace(go.Scatter(x=[e for e, _ in pts], y=[f for _, f in pts], mode="markers", name=name,
                                 marker=dict(symbol=symbol, size=s, color=color, line=dict(width=width, color=color)),
                                 hoverinfo="skip"))
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=0, yref="container", yanchor="bottom",
                                  font=dict(size=LABEL_PX)),
                      height=round(top + words_px + row * len(french) + bottom),
                      margin=dict(l=10, r=10, t=top, b=bottom))
    return fig


def contribution_map(source_tokens: Sequence[str], target_tokens: Sequence[str], z: np.ndarray, value_name: str,
                     share: Sequence[float] | None = None, height: int | None = None) -> go.Figure:
    """One method's (target x source) contributions, each row a distribution over the source
    (s2s.contributions), on the attention heatmap's axes; with `share`, the source share of
    each output token (ALTI+, rollout) as bars beside its row: what came from the source, the
    rest from the French written so far."""
    from plotly.subplots import make_subplots
    z = np.asarray(z, dtype=float)
    xs = [display_token(t) for t in source_tokens]
    ys = [display_token(t) for t in target_tokens]
    name = html.escape(value_name, quote=False)
    hover = [[f"{ys[j]} ← {xs[i]}<br>{name}: {z[j, i]:.3f} of the row" for i in range(len(xs))]
             for j in range(len(ys))]
    cols = 2 if share is not None else 1
    fig = make_subplots(rows=1, cols=cols, shared_yaxes=True, horizontal_spacing=0.03,
                        column_widths=[0.8, 0.2] if cols == 2 else [1.0])
    # the colour bar right of everything (beside the bars, not on the row labels)
    fig.add_trace(go.Heatmap(z=z, x=list(range(len(xs))), y=list(range(len(ys))), zmin=0, zmax=1,
                             colorscale=PROJECTOR_SCALE, text=hover, hovertemplate="%{text}<extra></extra>",
                             colorbar=dict(title=dict(text="share of row", side="right"), thickness=14, x=1.01,
                                           xanchor="left")),
                  row=1, col=1)
    if share is not None:
        v = np.clip(np.asarray(share, dtype=float), 0, 1)
        fig.add_trace(go.Bar(x=v, y=list(range(len(ys))), orientation="h", marker=dict(color="#225ea8"),
                             text=[f"{x:.0%}" for x in v], textposition="auto", hovertext=ys,
                             hovertemplate="%{hovertext}: %{x:.1%} from the source<extra></extra>",
                             showlegend=False), row=1, col=2)
        # its axis below, titled: above, its ticks sat on the source words' row
        fig.update_xaxes(range=[0, 1], tickformat=".0%", tickvals=[0, 1], side="bottom",
                         title=dict(text="from the source"), row=1, col=2)
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(xs))), ticktext=xs, tickangle=-60, side="top",
                     tickfont=dict(size=14 if len(xs) <= 25 else 11), row=1, col=1)
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(ys))), ticktext=ys, autorange="reversed",
                     tickfont=dict(size=14), row=1, col=1)
    longest = max((len(html.unescape(t)) for t in xs), default=1)
    fig.update_layout(plot_bgcolor="white", showlegend=False,
                      height=(height or round(40 + 0.62 * LABEL_PX * longest + 26 * len(ys)))
                      + (round(2.5 * LABEL_PX) if cols == 2 else 0),
                      margin=dict(l=10, r=10, t=round(20 + 0.62 * LABEL_PX * longest), b=10))
    return fig


def counterfactual_figure(source_tokens: Sequence[str], alpha_before: Sequence[float], alpha_after: Sequence[float],
                          top_before: Sequence[tuple[str, float]], top_after: Sequence[tuple[str, float]],
                          kind: str) -> go.Figure:
    """Left: alpha_j as the model computed it and as replaced, over the source pieces.
    Right: the next-token distribution's top tokens before and after."""
    from plotly.subplots import make_subplots
    tokens = list(dict.fromkeys([t for t, _ in top_before] + [t for t, _ in top_after]))
    labels = [display_token(t) for t in tokens]
    # The right panel's token labels live in the gap between the panels, which automargin does
    # not widen: size it for the longest one at the projector's 18 px (0.62 sizes a character)
    # on a page-wide chart (~1200 px), so that a long piece is neither cut nor drawn over α.
    longest = max((len(html.unescape(t)) for t in labels), default=1)
    gap = min(0.4, max(0.12, (0.62 * PROJECTOR_LABEL_PX * longest + 30) / 1200))
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=gap,
                        subplot_titles=["attention α_j over the source", "next token p(y_j | …)"])
    xs = [display_token(t) for t in source_tokens]
    after = f"{kind}"
    for name, values, color in (("model's α", alpha_before, "#253494"), (after, alpha_after, "#ff7f0e")):
        fig.add_trace(go.Bar(x=list(range(len(xs))), y=list(values), name=html.escape(name, quote=False),
                             marker_color=color, customdata=xs,
                             hovertemplate="%{customdata}: %{y:.3f}<extra></extra>"), row=1, col=1)
    pb, pa = dict(top_before), dict(top_after)
    for name, p, color in (("before", pb, "#253494"), ("after", pa, "#ff7f0e")):
        fig.add_trace(go.Bar(y=labels, x=[p.get(t) for t in tokens], orientation="h", showlegend=False,
                             marker_color=color, name=name, hovertemplate="%{y}: %{x:.3f}<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(xs))), ticktext=xs, tickangle=-60,
                     tickfont=dict(size=12 if len(xs) <= 25 else 10), row=1, col=1)
    fig.update_yaxes(range=[0, 1], title=dict(text="α"), row=1, col=1)
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=14), row=1, col=2)
    fig.update_xaxes(range=[0, 1], title=dict(text="probability"), row=1, col=2)
    # the legend at the figure's top edge, above the subplot titles (not on them): the 85 px
    # margin holds both
    fig.update_layout(plot_bgcolor="white", barmode="group", height=350,
                      legend=dict(orientation="h", x=0, y=1.0, yanchor="top", yref="container", font=dict(size=14)),
                      margin=dict(l=10, r=10, t=85, b=10))
    fig.update_annotations(font=dict(size=15))
    return fig


def heads_grid(weights: np.ndarray, x_tokens: Sequence[str], y_tokens: Sequence[str], kind: str = "cross",
               selected: tuple[int, int] | None = None, width: int = 1200, height: int | None = None,
               value_name: str = "α") -> go.Figure:
    """Every layer x head of one attention kind as small heatmaps (BertViz's model view, for
    an encoder-decoder): weights (layers, heads, len(y), len(x)), rows summing to 1; row l,
    column h is layer l's head h. Tokens label the left column's rows and the bottom row's
    columns (too small to read elsewhere; hover names them everywhere); `selected` (l, h)
    is framed in red, the one shown enlarged beside it.

    Over each small map lies a grid of invisible markers, one per cell, carrying its hover
    text: a heatmap cannot be selected by a click in plotly, a marker can, so a click reports
    the marker's trace, L*H + l*H + h for layer l's head h (`head_of_trace`). `value_name`
    names what the maps show (colour bar, hover, title) when it is not the weights α: the
    norm view ‖α f(x)‖, rows scaled to sum to 1 as well."""
    from plotly.subplots import make_subplots

    w = np.asarray(weights, dtype=float)
    L, H = w.shape[:2]
    name = HEAD_KINDS[kind].name
    # labels cut at 12 characters (hover shows them whole): a long word would squeeze the maps
    short = lambda t: display_token(t if len(t) <= 12 else t[:11] + "…")  # noqa: E731
    xs, ys = [short(t) for t in x_tokens], [short(t) for t in y_tokens]
    # small multiples: a head's number once over its column, a layer's once beside its row (a
    # title over each map would not fit a map ~100 px wide at a readable size); a hub model has
    # up to 16 heads a layer, whose columns get "H2" instead of "head 2"
    fig = make_subplots(rows=L, cols=H, horizontal_spacing=0.02, vertical_spacing=0.04,
                        column_titles=[f"head {h + 1}" if H <= 4 else f"H{h + 1}" for h in range(H)],
                        row_titles=[f"layer {l + 1}" for l in range(L)])
    hover = [[f"{display_token(y_tokens[j])} ← {display_token(x_tokens[i])}" for i in range(len(xs))]
             for j in range(len(ys))]
    # a small map is ~100 px a side on a projector: upright labels, at most 12 per axis (every
    # k-th token past that; hover names every cell), so neighbours never run into each other
    xt, yt = (list(range(0, n, label_step(n, 12))) for n in (len(xs), len(ys)))
    for l in range(L):
        for h in range(H):
            fig.add_trace(go.Heatmap(z=w[l, h], zmin=0, zmax=1, colorscale=PROJECTOR_SCALE, showscale=(l, h) == (0, 0),
                                     colorbar=dict(title=dict(text=value_name), thickness=12, len=0.6, x=1.05),
                                     hoverinfo="skip"),     # x: right of the row titles
                          row=l + 1, col=h + 1)
            fig.update_xaxes(showticklabels=l == L - 1, tickmode="array", tickvals=xt, ticktext=[xs[i] for i in xt],
                             tickangle=-90, tickfont=dict(size=10), row=l + 1, col=h + 1)
            fig.update_yaxes(showticklabels=h == 0, tickmode="array", tickvals=yt, ticktext=[ys[j] for j in yt],
                             autorange="reversed", tickfont=dict(size=10), row=l + 1, col=h + 1)
    jj, ii = np.meshgrid(range(len(ys)), range(len(xs)), indexing="ij")
    for l in range(L):
        for h in range(H):
            fig.add_trace(go.Scatter(x=ii.ravel(), y=jj.ravel(), mode="markers", showlegend=False,
                                     marker=dict(size=14, opacity=0, symbol="square"), customdata=w[l, h].ravel(),
                                     text=np.array(hover).ravel(), hovertemplate=f"layer {l + 1} head {h + 1}<br>"
                                     f"%{{text}}<br>{value_name} = %{{customdata:.3f}}<extra></extra>"),
                          row=l + 1, col=h + 1)
    if selected is not None:
        l, h = selected
        ref = "" if l * H + h == 0 else str(l * H + h + 1)
        fig.add_shape(type="rect", xref=f"x{ref} domain", yref=f"y{ref} domain", x0=-0.02, x1=1.02, y0=-0.02, y1=1.02,
                      line=dict(color="#d62728", width=3))
    cell = max(140, min(260, (width - 120) // H))
    natural = 60 + L * int(cell * min(1.0, max(0.45, len(ys) / max(len(xs), 1)))) + 90
    fig.update_layout(height=min(natural, height) if height else natural,      # `height`: a first screen's room
                      margin=dict(l=10, r=60, t=60, b=10), plot_bgcolor="white",
                      title=dict(text=f"{name}{'' if value_name == 'α' else ', ' + value_name}: {L} layers × {H} heads",
                                 font=dict(size=15)))
    fig.update_layout(clickmode="event+select", dragmode=False)
    return fig


def head_of_trace(trace: int, layers: int, heads: int) -> tuple[int, int] | None:
    """(layer, head) of a heads_grid trace (a click's curve number), or None if it is none of them."""
    if not 0 <= trace < 2 * layers * heads:     # L*H heatmaps, then L*H grids of markers
        return None
    return divmod(trace % (layers * heads), heads)


def head_aer_figure(aer: np.ndarray, best: tuple[int, int], mean_aer: float | None = None,
                    title: str = "") -> go.Figure:
    """Every layer (rows) x head (columns) of a Transformer's cross-attention scored as an
    aligner: AER of each, lower is better (darker), the best head outlined, each cell labelled."""
    aer = np.asarray(aer, dtype=float)
    L, H = aer.shape
    text = [[f"{aer[l, h]:.2f}".removeprefix("0") for h in range(H)] for l in range(L)]    # ".41": fits a cell
    hover = [[f"layer {l + 1} · head {h + 1}<br>AER = {aer[l, h]:.3f}" for h in range(H)] for l in range(L)]
    heat = go.Heatmap(z=aer, x=list(range(H)), y=list(range(L)), zmin=float(np.nanmin(aer)), zmax=float(np.nanmax(aer)),
                      colorscale=PROJECTOR_SCALE, reversescale=True, text=text, texttemplate="%{text}",
                      textfont=dict(size=14), customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                      colorbar=dict(title=dict(text="AER"), thickness=14))
    l, h = best
    box = dict(type="rect", x0=h - 0.5, x1=h + 0.5, y0=l - 0.5, y1=l + 0.5, line=dict(color="#d62728", width=4))
    subtitle = title or f"AER of each layer × head (best: layer {l + 1} · head {h + 1})"
    if mean_aer is not None:
        subtitle += f"; head mean {mean_aer:.3f}"
    return figure(
        [heat], shapes=[box],
        title=dict(text=html.escape(subtitle, quote=False), font=dict(size=15)),
        xaxis=dict(tickmode="array", tickvals=list(range(H)), ticktext=[str(k + 1) for k in range(H)],
                   title=dict(text="head"), tickfont=dict(size=14)),
        yaxis=dict(tickmode="array", tickvals=list(range(L)), ticktext=[str(k + 1) for k in range(L)],
                   title=dict(text="layer"), autorange="reversed", tickfont=dict(size=14)),
        height=max(260, 120 + 44 * L), margin=dict(l=10, r=10, t=50, b=10))
