"""The head overview (issue #67): one kind of attention's layers x heads as one matrix, one number
per head (s2s.head_stats, or a measured importance), the Heads tab's click target at any size
from the shipped 3 x 4 to NLLB's 24 x 16."""
from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .screen import LABEL_PX, PROJECTOR_SCALE, figure

KNOCKED_FILL = "rgba(120, 120, 120, 0.6)"     # a knocked-out head's cell: greyed
KNOCKED_LINE = "#333333"                      # and crossed
SELECTED_LINE = "#d62728"                     # the head shown enlarged: framed in red
# the traces of head_matrix, in order: a click's curve number says which was hit (matrix_pick)
CELLS, ROWS, COLUMNS, CORNER = 1, 2, 3, 4


def head_matrix(values: np.ndarray, name: str, value_range: tuple[float, float] = (0.0, 1.0),
                selected: tuple[int, int] | None = None, knocked: Sequence[tuple[int, int]] = (),
                notes: Sequence[Sequence[str]] | None = None, corner: str = "", width: int = 490,
                height: int = 520, font_px: int = LABEL_PX, title: str = "") -> go.Figure:
    """values (layers, heads), one number per head (NaN: none), as a heatmap whose every cell is
    the click target for its head, layer 1 on top. Each cell shows its number (".42") where the
    cell holds it at `font_px`; `name` says what it is (hover, title); `notes[l][h]` (a head's
    role tags) join its hover. Left of the rows a header column (the layer's number), above the
    columns a header row (the head's), and `corner` (e.g. "all") in the corner between them: each
    its own click target too.

    Every cell is clickable over its whole area, with no drag handle anywhere: the axes' ranges
    are fixed (no zoom, no axis drag), dragmode off, and under each cell an unseen marker; with
    no cut-off on the distance plotly looks for a point (hoverdistance -1), a click anywhere in
    the plot area reports the marker nearest to it, which on a grid of equal cells is the one
    of the cell under the pointer (matrix_pick reads it). `knocked` (layer, head) cells are
    greyed and crossed, `selected` framed in red; both are shapes, which take no clicks.

    `width` and `height`: the pixels the chart gets and the most it may take: rows of at most
    44 px, at least 14 (a click target still), where rows are shorter than a label every k-th
    layer's number is written (each is still a target, and hover names it)."""
    v = np.asarray(values, dtype=float)
    L, H = v.shape
    lo, hi = value_range
    label = html.escape(name, quote=False)
    # no toolbar over it (the page draws it without): the top margin holds the one line above the columns
    # (the header numbers may rise a little above their row when rows are shorter than a label: the
    # line above them is lifted half a size clear, and the last layer's number has room below)
    margin = dict(l=4, r=4, t=round(2.1 * font_px + 6) + (round(1.6 * font_px) if title else 0),
                  b=round(0.3 * font_px) + 4)
    cell_w = (width - margin["l"] - margin["r"]) / (H + 1)
    row = max(14.0, min(44.0, (height - margin["t"] - margin["b"]) / (L + 1)))
    # rows too short for a label each: every k-th layer named (k, 2k, ..., clear of the corner's text)
    every = math.ceil(1.3 * font_px / row)
    fits = cell_w >= 0.62 * font_px * 3 + 4 and row >= 1.3 * font_px       # ".42" at font_px
    text = [[("" if np.isnan(x) else f"{x:.2f}".replace("0.", ".", 1) if abs(x) < 1 else f"{x:.1f}")
             for x in r] for r in v]
    hover = [[f"layer {l + 1} · head {h + 1}<br>{label}: {'—' if np.isnan(v[l, h]) else f'{v[l, h]:.3f}'}"
              + (f"<br>{html.escape(notes[l][h])}" if notes and notes[l][h] else "") for h in range(H)]
             for l in range(L)]
    heat = go.Heatmap(z=v, x=list(range(H)), y=list(range(L)), zmin=lo, zmax=hi, colorscale=PROJECTOR_SCALE,
                      showscale=False, hoverinfo="skip", xgap=1, ygap=1,
                      **(dict(text=text, texttemplate="%{text}", textfont=dict(size=font_px)) if fits else {}))
    ll, hh = np.meshgrid(range(L), range(H), indexing="ij")
    unseen = dict(mode="markers", marker=dict(size=6, opacity=0), showlegend=False)
    cells = go.Scatter(x=hh.ravel(), y=ll.ravel(), customdata=np.array(hover).ravel(),
                       hovertemplate="%{customdata}<extra></extra>", **unseen)
    head_font = dict(size=font_px, color="#2F2D2B")
    rows = go.Scatter(x=[-1] * L, y=list(range(L)), text=[str(l + 1) if (l + 1) % every == 0 else "" for l in range(L)],
                      customdata=[str(l + 1) for l in range(L)], mode="text",
                      textfont=head_font, showlegend=False,
                      hovertemplate=f"layer %{{customdata}}: its {H} heads<extra></extra>")
    columns = go.Scatter(x=list(range(H)), y=[-1] * H, text=[str(h + 1) for h in range(H)], mode="text",
                         textfont=head_font, showlegend=False,
                         hovertemplate=f"head %{{text}} of every layer ({L} heads)<extra></extra>")
    end = go.Scatter(x=[-1], y=[-1], text=[corner], mode="text", textfont=head_font, showlegend=False,
                     hovertemplate=(f"every head ({L * H})" if corner else "layer ↓ · head →") + "<extra></extra>")
    shapes = [dict(type="rect", x0=-1.5, x1=H - 0.5, y0=-0.5, y1=-1.5, fillcolor="#f0f2f6", line=dict(width=0),
                   layer="below"),
              dict(type="rect", x0=-1.5, x1=-0.5, y0=-1.5, y1=L - 0.5, fillcolor="#f0f2f6", line=dict(width=0),
                   layer="below")]
    for l, h in knocked:
        if 0 <= l < L and 0 <= h < H:
            shapes.append(dict(type="rect", x0=h - 0.5, x1=h + 0.5, y0=l - 0.5, y1=l + 0.5, fillcolor=KNOCKED_FILL,
                               line=dict(width=0), layer="above"))
            shapes.append(dict(type="path", path=f"M {h - 0.4} {l - 0.4} L {h + 0.4} {l + 0.4} M {h - 0.4} {l + 0.4} "
                                                 f"L {h + 0.4} {l - 0.4}", line=dict(color=KNOCKED_LINE, width=2),
                               layer="above"))
    if selected is not None and 0 <= selected[0] < L and 0 <= selected[1] < H:
        l, h = selected
        shapes.append(dict(type="rect", x0=h - 0.5, x1=h + 0.5, y0=l - 0.5, y1=l + 0.5,
                           line=dict(color=SELECTED_LINE, width=3), layer="above"))
    axis = dict(showgrid=False, zeroline=False, showticklabels=False, fixedrange=True, ticks="")
    return figure([heat, cells, rows, columns, end],
                  xaxis=dict(range=[-1.5, H - 0.5], **axis),
                  yaxis=dict(range=[L - 0.5, -1.5], **axis),
                  shapes=shapes, height=round(margin["t"] + margin["b"] + row * (L + 1)), margin=margin,
                  annotations=[dict(text="layer ↓  head →", x=0, y=1, xref="paper", yref="paper", xanchor="left",
                                    yanchor="bottom", yshift=round(0.5 * font_px), showarrow=False,
                                    font=dict(size=font_px))],
                  title=dict(text=html.escape(title, quote=False), x=0, xanchor="left", font=dict(size=font_px))
                  if title else None,
                  hovermode="closest", hoverdistance=-1, clickmode="event+select", dragmode=False,
                  meta=dict(fits=fits))


def matrix_pick(curve: int, index: int, layers: int, heads: int) -> tuple | None:
    """What a click on head_matrix hit: ("head", layer, head), ("layer", layer), ("index", head),
    ("all",), or None (the heatmap, which takes no clicks, or a number out of range)."""
    if curve == CELLS and 0 <= index < layers * heads:
        return ("head", *divmod(index, heads))
    if curve == ROWS and 0 <= index < layers:
        return ("layer", index)
    if curve == COLUMNS and 0 <= index < heads:
        return ("index", index)
    if curve == CORNER and index == 0:
        return ("all",)
    return None
