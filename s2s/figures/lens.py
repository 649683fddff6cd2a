"""Each layer's guess at one step (the logit lens, s2s.lens): the decoder's layers as rows, their
top pieces as a table of cells, and the chosen piece's rank layer by layer (a watched one beside it)."""
from __future__ import annotations

import html
import math
from typing import Sequence

import plotly.graph_objects as go

from .screen import LABEL_PX, PROJECTOR_SCALE, display_token, figure

CHOSEN_COLOR = "#225ea8"     # the chosen piece (the darker blue of token_bars' highlight)
WATCHED_COLOR = "#d95f02"    # the watched piece (orange: apart from the blues of the scale)
ROW_LINES = 3.3              # a layer's row, in label sizes: a piece and its p, two lines with room around them
CELL_CHARS = 9               # a piece longer than this is cut with "…" in its cell (hover names it whole)
MARGIN_TOP = 40              # the legend's row above the rank chart (and the same top margin for the table)


def layer_labels(layers: int, one_layer: bool = False) -> list[str]:
    """The rows' labels: "layer 1" … "layer L (last)"; a recurrent decoder's one row, "decoder"."""
    if one_layer:
        return ["decoder"]
    return [f"layer {l + 1}" + (" (last)" if l == layers - 1 and layers > 1 else "") for l in range(layers)]


def _cell(piece: str) -> str:
    """A piece as a cell's text, HTML-escaped, cut to CELL_CHARS characters."""
    return display_token(piece if len(piece) <= CELL_CHARS else piece[:CELL_CHARS - 1] + "…")


def _bottom(font_px: int) -> int:
    """The bottom margin: the rank labels and the axis title under them, apart (1 + 1.5 + 1.7 sizes)."""
    return round(4.2 * font_px)


def _height(layers: int, font_px: int) -> int:
    return MARGIN_TOP + round(ROW_LINES * font_px) * layers + _bottom(font_px)


def layer_top_figure(rows: Sequence[str], top: Sequence[Sequence[tuple[str, float]]], chosen: str,
                     watched: str | None = None, font_px: int = LABEL_PX) -> go.Figure:
    """One step's top pieces at each decoder layer: a row per layer (`rows` its labels, the first
    layer at the top), a cell per rank (`top[l]`: (piece, log p), best first), shaded by p and
    written "piece / p"; the chosen piece in bold, the watched one in italics. `font_px`: the
    labels' size on screen (label_px), which the rows' height follows."""
    L = len(rows)
    k = max((len(t) for t in top), default=0)
    z = [[math.exp(lp) for _, lp in t] + [None] * (k - len(t)) for t in top]

    def text(piece: str, lp: float) -> str:
        shown = _cell(piece)
        if piece == chosen:
            shown = f"<b>{shown}</b>"
        elif watched is not None and piece == watched:
            shown = f"<i>{shown}</i>"
        return f"{shown}<br>{math.exp(lp):.2f}"

    cells = [[text(p, lp) for p, lp in t] + [""] * (k - len(t)) for t in top]
    hover = [[f"{html.escape(rows[l], quote=False)}, rank {r + 1}: {display_token(p)}<br>p = {math.exp(lp):.4f} "
              f"(log p {lp:.3f})" for r, (p, lp) in enumerate(t)] + [""] * (k - len(t)) for l, t in enumerate(top)]
    heat = go.Heatmap(z=z, x=list(range(k)), y=list(range(L)), zmin=0.0, zmax=1.0, colorscale=PROJECTOR_SCALE,
                      showscale=False, text=cells, texttemplate="%{text}", textfont=dict(size=LABEL_PX),
                      customdata=hover, hovertemplate="%{customdata}<extra></extra>", xgap=2, ygap=2)
    return figure([heat], height=_height(L, font_px), margin=dict(l=10, r=10, t=MARGIN_TOP, b=_bottom(font_px)),
                  xaxis=dict(tickmode="array", tickvals=list(range(k)), ticktext=[str(r + 1) for r in range(k)],
                             title=dict(text="rank at this layer", standoff=round(0.6 * font_px)), fixedrange=True),
                  yaxis=dict(tickmode="array", tickvals=list(range(L)), ticktext=list(rows), autorange="reversed",
                             fixedrange=True))


def layer_rank_figure(rows: Sequence[str], chosen: str, ranks: Sequence[int], log_probs: Sequence[float],
                      top: int = 5, watched: str | None = None, watched_ranks: Sequence[int] | None = None,
                      watched_log_probs: Sequence[float] | None = None, font_px: int = LABEL_PX) -> go.Figure:
    """The chosen piece's rank at each decoder layer (rows as in layer_top_figure, rank on a log
    axis, 1 at the left), the top `top` shaded and the layer from which on it stays there
    ringed; a watched piece's ranks beside it. Hover gives each rank's log p."""
    L = len(rows)
    ys = list(range(L))
    lines = [(chosen, ranks, log_probs, CHOSEN_COLOR, "circle")]
    if watched is not None and watched_ranks is not None:
        lines.append((watched, watched_ranks, watched_log_probs or [math.nan] * L, WATCHED_COLOR, "diamond"))
    traces = []
    for name, rs, lps, color, symbol in lines:
        traces.append(go.Scatter(
            x=list(rs), y=ys, mode="lines+markers+text", name=display_token(name),
            marker=dict(color=color, size=12, symbol=symbol), line=dict(color=color, width=2),
            text=["\u2002" + str(r) for r in rs], textposition="middle right",      # (clear of the ring)
            textfont=dict(color=color, size=LABEL_PX),
            customdata=[[html.escape(rows[l], quote=False), lps[l]] for l in range(L)],
            hovertemplate=display_token(name) + ", %{customdata[0]}: rank %{x}, log p %{customdata[1]:.3f}"
                          "<extra></extra>"))
    worst = max([1, *ranks, *(watched_ranks or [])])
    upper = math.log10(max(worst, top) * 4)      # room for the rank written right of its marker
    ticks = [v for v in (1, top, 100, 1000, 10000, 100000) if v <= max(worst, top) * 4]
    enters = None
    for l in range(L - 1, -1, -1):           # the first layer from which on the chosen piece stays in the top
        if ranks[l] > top:
            break
        enters = l
    if enters is not None:
        traces.append(go.Scatter(x=[ranks[enters]], y=[enters], mode="markers", name=f"enters the top {top}",
                                 marker=dict(symbol="circle-open", size=24, color=CHOSEN_COLOR, line=dict(width=2)),
                                 hoverinfo="skip"))
    band = dict(type="rect", xref="x", yref="paper", x0=0.7, x1=top + 0.5, y0=0, y1=1,
                fillcolor="#e0f3db", line=dict(width=0), layer="below")
    return figure(traces, height=_height(L, font_px), margin=dict(l=10, r=10, t=MARGIN_TOP, b=_bottom(font_px)),
                  shapes=[band], showlegend=True,
                  legend=dict(orientation="h", x=0, y=1, xanchor="left", yanchor="bottom"),
                  xaxis=dict(type="log", range=[math.log10(0.7), upper], tickmode="array", tickvals=ticks,
                             ticktext=[str(v) for v in ticks],
                             title=dict(text=f"rank (shaded: the top {top})", standoff=round(0.6 * font_px)),
                             fixedrange=True),
                  yaxis=dict(tickmode="array", tickvals=ys, ticktext=list(rows), range=[L - 0.5, -0.5],
                             fixedrange=True, showticklabels=False))
