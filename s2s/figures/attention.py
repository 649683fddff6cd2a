"""Attention as pictures: a weight matrix as a heatmap or as lines, one vector as bars, the
context vectors' path."""
from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .screen import LABEL_PX, PROJECTOR_SCALE, display_token, figure, label_step

TALL_ROWS = 25      # a heatmap of more output rows than this repeats its column labels below it


def matrix_heatmap(x_tokens: Sequence[str], y_tokens: Sequence[str], z: np.ndarray, value_name: str = "α",
                   zmin: float = 0.0, zmax: float = 1.0, colorscale: str = PROJECTOR_SCALE,
                   x_title: str = "source (English)", y_title: str = "output (French)",
                   title: str | None = None, height: int | None = None, compact: bool = False,
                   label_size: int = LABEL_PX, x_labels: bool = True, colorbar: bool = True,
                   keep_x: Sequence[int] = (), keep_y: Sequence[int] = ()) -> go.Figure:
    """A (len(y) x len(x)) matrix with tokens on both axes; hover shows the exact value.

    `compact`, for small multiples: no axis titles, no colour bar (the panel's colour says the
    scale), a top margin just tall enough for the source tokens drawn at `label_size` px (14, or
    18 once for_screen scales the labels for the projector), none without `x_labels` (small
    multiples sharing the source tokens of the map above), and `height` (if given) the rows'
    height alone.

    `colorbar` False: none (a map beside another that shows the same scale, or whose caption
    says it), its width left to the columns' labels. `keep_x`, `keep_y`: the columns and rows
    whose labels are never thinned for the screen (the words an edit changed: for_screen)."""
    z = np.asarray(z, dtype=float)
    xs = [display_token(t) for t in x_tokens]
    ys = [display_token(t) for t in y_tokens]
    hover = [[f"{ys[j]} ← {xs[i]}<br>{value_name} = {z[j, i]:.4f}" for i in range(len(xs))] for j in range(len(ys))]
    heat = go.Heatmap(z=z, x=list(range(len(xs))), y=list(range(len(ys))), zmin=zmin, zmax=zmax,
                      colorscale=colorscale, text=hover, hovertemplate="%{text}<extra></extra>",
                      # the title along the bar: above it, it sat on the top tick's label
                      colorbar=dict(title=dict(text=html.escape(value_name, quote=False), side="right"), thickness=14),
                      showscale=None if colorbar else False)
    keep = {"xaxis": [int(i) for i in keep_x], "yaxis": [int(i) for i in keep_y]} if len(keep_x) or len(keep_y) \
        else None
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
    x_axis = dict(tickmode="array", tickvals=list(range(len(xs))), ticktext=xs, tickangle=-60,
                  title=dict(text=x_title), side="top", tickfont=dict(size=14 if len(xs) <= 25 else 11))
    traces, below, bottom = [heat], {}, 10
    if len(ys) > TALL_ROWS:
        # a map taller than a screen: its column labels again at the bottom, so that the rows
        # read there still say which source word each column is (an empty trace draws the axis)
        traces.append(go.Scatter(x=[], y=[], xaxis="x2", showlegend=False, hoverinfo="skip"))
        below = dict(xaxis2=dict(x_axis, side="bottom", overlaying="x", matches="x"))
        bottom = 110
    return figure(
        traces, xaxis=x_axis, **below,
        yaxis=dict(tickmode="array", tickvals=list(range(len(ys))), ticktext=ys, autorange="reversed",
                   title=dict(text=y_title), tickfont=dict(size=14)),
        # the source tokens sit on top, so a title needs room above them
        title=dict(text=html.escape(title, quote=False), y=0.995, yanchor="top") if title else None,
        height=(height or max(320, 120 + 26 * len(ys))) + (40 if title else 0) + bottom - 10,
        margin=dict(l=10, r=10, t=150 if title else 110, b=bottom), **({"meta": {"keep": keep}} if keep else {}))


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
    return figure([path], title=dict(text=html.escape(title, quote=False)), height=360,
                  margin=dict(l=10, r=10, t=50, b=10), xaxis=xaxis, yaxis=yaxis, annotations=notes)
