"""The neuron view (Vig 2019): one head's path from a query and its keys to one row of weights,
drawn left to right as the equation reads, one row per key:

    [ q above k_j ]  [ q ∘ k_j ]  [ Σ_d = q·k_j ]  [ × scale (+ bias) = e_j ]  [ softmax → α_j ]
      (J x d_k)        (J x d_k)      bars (J)           bars (J)                  bars (J)

The vectors are drawn with a diverging scale centred on 0 (blue positive, red negative), so a
reader sees which dimensions pull a key's score up or down; the additive score of a recurrent
model has one panel more, tanh(W1 h_j + W2 s + b) with v above it, before v ∘ tanh(...).
Data in, figure out: `view` is an s2s.heads.NeuronView (read by its fields only)."""
from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from .screen import BODY_TEXT, LABEL_PX, ROW_PITCH, TOOLBAR_PX, display_token, figure, label_px

if TYPE_CHECKING:
    from ..heads import NeuronView

DIVERGING = "RdBu"               # red negative, white 0, blue positive: a projector keeps both ends
BAR_POSITIVE, BAR_NEGATIVE = "#2166ac", "#b2182b"     # the scale's own ends, for the q·k and score bars
WEIGHT_BAR, WEIGHT_TOP = "#7fb6d9", "#08306b"         # the weights; the largest one darker


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def neuron_figure(view: NeuronView, projector: bool = False) -> go.Figure:
    """The figure of one NeuronView, its panels' titles naming each step's part of the
    equation (view.labels); labels at label_px(projector) (for_screen keeps them there), rows
    ROW_PITCH label sizes apart so that every key is named. Fonts are set at LABEL_PX, which
    for_screen scales for the projector; the geometry is reckoned at the size drawn."""
    px = label_px(projector)        # the rows, strips and margins: as tall as the labels will be
    font = LABEL_PX
    keys = [display_token(t) for t in view.key_tokens]
    J = len(keys)
    lab = view.labels
    # the heatmap panels: (title, matrix (J, d), strip above it (title, vector) or None, colour range)
    kv = max(float(np.abs(view.query).max(initial=0)), float(np.abs(view.keys).max(initial=0)), 1e-9)
    maps = [(lab["keys"], view.keys, (lab["query"], view.query), kv)]
    if view.hidden is not None:     # additive: tanh(...) in [-1, 1], then v ∘ tanh(...)
        maps.append(("tanh(…)", view.hidden, ("v", view.v), 1.0))
    maps.append((lab["products"], view.products, None, max(float(np.abs(view.products).max(initial=0)), 1e-9)))
    # the step from q·k_j to the logits, a line each: its scaling, its bias, then "= e_j"
    step = ([_esc(lab["scale"])] if view.scale != 1 else []) + ([_esc(lab["bias"])] if view.bias is not None else [])
    # (the sum's own name where it fits the panel's width: q·k_j, s_t·h_j)
    bars = [("Σ over d" + (f"<br>= {_esc(lab['dots'])}" if len(lab["dots"]) <= 7 else ""), view.dots, "dots")]
    if step:
        bars.append(("<br>".join(step + ["= e_j"]), view.scores, "scores"))
    bars.append(("softmax<br>→ α_j", view.weights, "weights"))
    lines = max(2, len(step) + 1)
    # widths: a map 2.6 parts, a bar panel 1; gaps 0.35 (the bar panels' tick labels), 0.5 before a map
    # whose strip has its own label (v, left of it)
    parts = [2.6] * len(maps) + [1.0] * len(bars)
    gaps = [0.5 if n + 1 < len(maps) and maps[n + 1][2] is not None else 0.35 for n in range(len(parts) - 1)]
    total = sum(parts) + sum(gaps)
    edges, at = [], 0.0
    for n, p in enumerate(parts):
        edges.append((at / total, (at + p) / total))
        at += p + (gaps[n] if n < len(gaps) else 0)
    pitch = ROW_PITCH * px
    rows_px = J * pitch + 1
    strip_px, strip_gap = round(1.3 * px), round(1.9 * px)     # the query's row, and the space under it
    plot_h = rows_px + strip_gap + strip_px
    key_top = rows_px / plot_h
    strip = (1 - strip_px / plot_h, 1.0)
    # the panel titles' lines, under the row a chart's toolbar takes on hover
    title_px = TOOLBAR_PX + round(lines * 1.35 * px) + 8
    traces, layout, notes = [], {}, []
    for n, (title, z, above, vmax) in enumerate(maps):
        x, y = f"x{n + 1}" if n else "x", "y"
        d = z.shape[1]
        hover = [[f"{keys[j]} · dimension {i + 1}<br>{_esc(title)} = {z[j, i]:.4f}" for i in range(d)]
                 for j in range(J)]
        traces.append(go.Heatmap(z=z, x=list(range(d)), y=list(range(J)), zmin=-vmax, zmax=vmax, zmid=0,
                                 colorscale=DIVERGING, showscale=False, xaxis=x, yaxis=y, text=hover,
                                 hovertemplate="%{text}<extra></extra>"))
        layout["xaxis" + (str(n + 1) if n else "")] = dict(
            # no tick per dimension (a map of 64 columns would label a few of them): the title says how many
            domain=edges[n], anchor=y, showticklabels=False, ticks="",
            title=dict(text=f"{d} dimensions →", font=dict(size=font), standoff=4), showgrid=False,
            zeroline=False, **({"matches": "x"} if n and d == maps[0][1].shape[1] else {}))
        if above is not None:
            name, vec = above
            ya = f"y{10 + n}"
            traces.append(go.Heatmap(z=[vec], x=list(range(d)), y=[0], zmin=-vmax, zmax=vmax, zmid=0,
                                     colorscale=DIVERGING, showscale=False, xaxis=x, yaxis=ya,
                                     text=[[f"{_esc(name)}, dimension {i + 1} = {vec[i]:.4f}" for i in range(d)]],
                                     hovertemplate="%{text}<extra></extra>"))
            layout[f"yaxis{10 + n}"] = dict(domain=strip, anchor=x, tickmode="array", tickvals=[0],
                                            ticktext=[_esc(name)], tickfont=dict(size=font), showgrid=False,
                                            zeroline=False)
        notes.append(dict(text=_esc(title), x=sum(edges[n]) / 2, xref="paper", y=1, yref="paper", yanchor="bottom",
                          yshift=4, showarrow=False, font=dict(size=font, color=BODY_TEXT)))
    for m, (title, values, what) in enumerate(bars):
        n = len(maps) + m
        x = f"x{n + 1}"
        v = np.asarray(values, dtype=float)
        if what == "weights":
            top = int(v.argmax())
            colors = [WEIGHT_TOP if j == top else WEIGHT_BAR for j in range(J)]
            text = [f"{w:.2f}" for w in v]
            rng = [0, 1.0]
        else:
            colors = [BAR_POSITIVE if w >= 0 else BAR_NEGATIVE for w in v]
            text = None
            lo, hi = min(0.0, float(v.min())), max(0.0, float(v.max()))
            pad = 0.08 * (hi - lo or 1.0)
            rng = [lo - (pad if lo < 0 else 0), hi + (pad if hi > 0 else 0)]
        hover = [f"{keys[j]}<br>{_esc(html.unescape(title.replace('<br>', ' ')))}: {v[j]:.4f}" for j in range(J)]
        traces.append(go.Bar(x=v, y=list(range(J)), orientation="h", marker=dict(color=colors), xaxis=x, yaxis="y",
                             text=text, textposition="outside" if text else None, cliponaxis=False,
                             textfont=dict(size=font), hovertext=hover, hoverinfo="text", showlegend=False))
        layout[f"xaxis{n + 1}"] = dict(domain=edges[n], anchor="y", range=rng, nticks=3, tickfont=dict(size=font),
                                       showgrid=True, gridcolor="#e5e5e5", zeroline=True, zerolinecolor="#888",
                                       **({"showticklabels": False} if what == "weights" else {}))
        notes.append(dict(text=title, x=sum(edges[n]) / 2, xref="paper", y=1, yref="paper", yanchor="bottom",
                          yshift=4, showarrow=False, font=dict(size=font, color=BODY_TEXT)))
    layout["yaxis"] = dict(domain=(0, key_top), tickmode="array", tickvals=list(range(J)), ticktext=keys,
                           autorange="reversed", tickfont=dict(size=font), showgrid=False, zeroline=False)
    return figure(traces, **layout, annotations=notes, bargap=0.25, showlegend=False,
                  height=round(plot_h + title_px + 3.2 * px + 10),
                  margin=dict(l=10, r=40, t=title_px, b=round(3.2 * px)))


def clickable_cells(fig: go.Figure) -> go.Figure:
    """A heatmap (matrix_heatmap's) made clickable: plotly selects no heatmap cell on a click, a
    marker it does, so an invisible marker lies over each cell, with the cell's hover text; a
    click reports the marker's x and y, the cell's column and row (the Heads tab's enlarged head:
    a row picks the neuron view's query). Changes `fig` in place and returns it."""
    heat = fig.data[0]
    z = np.asarray(heat.z)
    rows, cols = np.meshgrid(range(z.shape[0]), range(z.shape[1]), indexing="ij")
    text = np.asarray(heat.text).ravel() if heat.text is not None else None
    fig.add_trace(go.Scatter(x=cols.ravel(), y=rows.ravel(), mode="markers", showlegend=False, text=text,
                             marker=dict(size=18, opacity=0, symbol="square"), hovertemplate=heat.hovertemplate))
    # the axes keep the heatmap's own extent: autorange would pad them for the markers, narrowing
    # the columns under labels that for_screen spaced for the heatmap alone (they overlapped by 3 px)
    fig.update_xaxes(range=[-0.5, z.shape[1] - 0.5], autorange=False)
    fig.update_yaxes(range=[z.shape[0] - 0.5, -0.5], autorange=False)
    return fig
