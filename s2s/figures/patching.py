"""What carries a change (s2s.patch): the share of an edit's effect that each patched state
restores, encoder layers x source words and, beside it, cross-attention layers x heads, on one
diverging scale (0: nothing restored, white; 1: the original's log p, blue; beyond either end,
red or a deeper blue)."""
from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .screen import PROJECTOR_LABEL_PX, TOOLBAR_PX, display_token

# white at 0, blue toward 1 (restores the original), red below 0 (pushes further the edit's way)
RESTORED_SCALE = [[0.0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1.0, "#2166ac"]]
VALUES_IN_CELLS = 12        # the most columns whose cells carry their value written in them


def _cells(z: np.ndarray, columns: int) -> list[list[str]] | None:
    """Each cell's value as text (".91"), or None where the columns are too many to hold it."""
    if columns > VALUES_IN_CELLS:
        return None
    def short(v: float) -> str:         # ".91", "−.05": the leading 0 dropped, as the heads' AER map writes it
        text = f"{v:.2f}".replace("-0.00", "0.00")
        return (text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text).replace("-", "−")
    return [[short(v) for v in row] for row in z]


def patching_figure(columns: Sequence[str], layers: Sequence[str], shares: np.ndarray,
                    heads: np.ndarray | None = None, changed: Sequence[int] = (),
                    column_title: str = "source word") -> go.Figure:
    """The share restored, (patched − corrupt) / (clean − corrupt), per encoder layer (rows,
    named by `layers`) and source column (`columns`: words or pieces, the edited ones at the
    indices `changed`, their labels never thinned); with `heads` (decoder layers x heads), each
    cross-attention head's share in a second map to the right. One colour scale for both, 0 and
    1 marked on its bar, symmetric about 0 and reaching past 1 only when a value does."""
    z = np.asarray(shares, dtype=float)
    h = None if heads is None else np.asarray(heads, dtype=float)
    values = [z] + ([h] if h is not None else [])
    bound = max(1.0, *(float(np.nanmax(np.abs(v))) if v.size else 0.0 for v in values))
    xs = [display_token(t) for t in columns]
    ys = [html.escape(name, quote=False) for name in layers]
    scale = dict(zmin=-bound, zmax=bound, colorscale=RESTORED_SCALE)
    ticks = [-1.0, 0.0, 1.0] + ([math.floor(10 * bound) / 10] if bound >= 1.5 else [])    # (inside the bar: drawn)
    names = {-1.0: "−1", 0.0: "0: none", 1.0: "1: all"}
    bar = dict(title=dict(text="share restored", side="right"), thickness=14, tickvals=ticks,
               ticktext=[names.get(t, f"{t:g}") for t in ticks])
    text = _cells(z, len(xs))
    hover = [[f"{ys[l]} · {xs[i]}<br>share restored = {z[l, i]:.3f}" for i in range(len(xs))] for l in range(len(ys))]
    traces = [go.Heatmap(z=z, x=list(range(len(xs))), y=list(range(len(ys))), colorbar=bar, customdata=hover,
                         hovertemplate="%{customdata}<extra></extra>", xgap=1, ygap=1, **scale,
                         **({"text": text, "texttemplate": "%{text}"} if text else {}))]
    split = 1.0
    layout: dict = {}
    if h is not None:
        L, H = h.shape
        # the words' map as wide as its columns ask, the heads' map the rest (at least a third)
        split = min(0.7, max(0.45, len(xs) / (len(xs) + H)))
        htext = _cells(h, H)
        hhover = [[f"decoder layer {l + 1} · head {k + 1}<br>share restored = {h[l, k]:.3f}" for k in range(H)]
                  for l in range(L)]
        traces.append(go.Heatmap(z=h, x=list(range(H)), y=list(range(L)), xaxis="x2", yaxis="y2", showscale=False,
                                 customdata=hhover, hovertemplate="%{customdata}<extra></extra>", xgap=1, ygap=1,
                                 **scale, **({"text": htext, "texttemplate": "%{text}"} if htext else {})))
        layout = dict(
            xaxis2=dict(domain=[split + 0.12, 1.0], tickmode="array", tickvals=list(range(H)),
                        ticktext=[str(k + 1) for k in range(H)], title=dict(text="cross-attention head"),
                        tickfont=dict(size=14)),
            # short row labels and a title: the gap between the maps holds them at the projector's size
            yaxis2=dict(anchor="x2", tickmode="array", tickvals=list(range(L)), ticktext=[str(l + 1) for l in range(L)],
                        title=dict(text="decoder layer"), autorange="reversed", tickfont=dict(size=14)))
    rows = max(len(ys), h.shape[0] if h is not None else 0)
    # the words stand at -60 degrees below the map: room for the longest at the projector's size
    longest = max((len(html.unescape(t)) for t in xs), default=1)
    below = round(0.62 * PROJECTOR_LABEL_PX * longest * math.sin(math.radians(60)) + 2.2 * PROJECTOR_LABEL_PX)
    keep = [int(i) for i in changed]
    return go.Figure(data=traces, layout=dict(
        plot_bgcolor="white",
        xaxis=dict(domain=[0.0, split], tickmode="array", tickvals=list(range(len(xs))), ticktext=xs, tickangle=-60,
                   title=dict(text=column_title), tickfont=dict(size=14)),
        yaxis=dict(tickmode="array", tickvals=list(range(len(ys))), ticktext=ys, autorange="reversed",
                   tickfont=dict(size=14)),
        height=TOOLBAR_PX + 10 + max(90, 46 * rows) + below, margin=dict(l=10, r=10, t=TOOLBAR_PX + 10, b=below),
        **({"meta": {"keep": {"xaxis": keep}}} if keep else {}), **layout))
