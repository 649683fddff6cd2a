"""Why this word and not that one: one step's contrastive attribution (s2s.contrast) beside the
plain attribution of the same step and its attention, over the source pieces."""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .screen import LABEL_PX, display_token

TOWARD_TARGET = "#225ea8"    # a positive score: the piece pushes toward the chosen word
TOWARD_FOIL = "#e6550d"      # a negative one: toward the foil
ATTENTION = "#41b6c4"


def contrast_figure(source_tokens: Sequence[str], contrast: Sequence[float], plain: Sequence[float],
                    attention: Sequence[float] | None, target: str, foil: str, method: str) -> go.Figure:
    """Three panels side by side, one row per source piece (top to bottom, shared): the step's
    attention α (0 to 1), the plain attribution of log p(target), then the contrastive one of
    log p(target) − log p(foil) by `method` (its name as shown), those two on one scale, both in
    nats and symmetric about 0. A bar is blue where the piece pushes toward `target` (or raises
    its log p), orange where it pushes toward `foil` (or lowers it). Without attention (a
    fixed-vector model) the first panel is left out."""
    from plotly.subplots import make_subplots
    ys = [display_token(t) for t in source_tokens]
    rows = list(range(len(ys)))
    c, p = np.asarray(contrast, dtype=float), np.asarray(plain, dtype=float)
    t, f = display_token(target), display_token(foil)
    titles = [f"log p({t}) alone", f"why {t}, not {f}"]
    widths = [0.5, 0.5]
    if attention is not None:
        titles, widths = ["attention α", *titles], [0.2, 0.4, 0.4]
    fig = make_subplots(rows=1, cols=len(titles), shared_yaxes=True, horizontal_spacing=0.04,
                        column_widths=widths, subplot_titles=titles)
    col = 1
    if attention is not None:
        a = np.asarray(attention, dtype=float)
        fig.add_trace(go.Bar(x=a, y=rows, orientation="h", marker=dict(color=ATTENTION), hovertext=ys,
                             hovertemplate="%{hovertext}: α = %{x:.3f}<extra></extra>", showlegend=False),
                      row=1, col=1)
        fig.update_xaxes(range=[0, 1], tickvals=[0, 0.5, 1], row=1, col=1)
        col = 2
    name = html.escape(method, quote=False)
    for k, (values, what) in enumerate(((p, f"log p({t})"), (c, f"toward {t} (+) or {f} (−)"))):
        fig.add_trace(go.Bar(x=values, y=rows, orientation="h", showlegend=False,
                             marker=dict(color=[TOWARD_TARGET if v >= 0 else TOWARD_FOIL for v in values]),
                             hovertext=ys,
                             hovertemplate="%{hovertext}: %{x:+.3f} " + what + f", {name}<extra></extra>"),
                      row=1, col=col + k)
    most = float(max(np.abs(c).max(initial=0), np.abs(p).max(initial=0))) or 1.0
    for k in range(2):      # one scale for both attributions, 0 in the middle
        fig.update_xaxes(range=[-1.1 * most, 1.1 * most], zeroline=True, zerolinecolor="#888888",
                         title=dict(text="nats"), row=1, col=col + k)
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=ys, autorange="reversed",
                     tickfont=dict(size=LABEL_PX), row=1, col=1)
    # the top margin: the toolbar's row (shown on hover) above the panels' titles, at the Projector's
    # size too, so that for_screen need not make the chart taller than the step's first screen allows
    fig.update_layout(plot_bgcolor="white", showlegend=False, bargap=0.25,
                      height=max(260, 110 + 26 * len(ys)), margin=dict(l=10, r=10, t=60, b=10))
    fig.update_annotations(font=dict(size=15))
    return fig
