"""The neighbours map (s2s.neighbours): the training decoder states nearest to a sentence's,
in 2-D, with the sentence's own path through them."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .screen import display_token, figure, label_step

PATH_COLOR = "#1d4ed8"       # this sentence's decoder states
NEIGHBOUR_COLOR = "#9ca3af"  # every neighbour state
CHOSEN_COLOR = "#d97706"     # the chosen step's own neighbours


def word_of(piece: str) -> str:
    """A piece as a label on the map: its text without the word-start mark (hover names the piece)."""
    bare = piece.lstrip("\u2581\u0120")
    return display_token(bare or piece)


def once(labels: Sequence[str]) -> list[str]:
    """Each distinct label written once, at its first point: five neighbours that all emitted
    "Elle" sit together, and five labels on them were one black smudge."""
    seen: set[str] = set()
    out = []
    for t in labels:
        out.append("" if t in seen else t)
        seen.add(t)
    return out


def neighbours_map(projection, target_tokens: Sequence[str], highlight: int | None = None,
                   chosen_rows: Sequence[int] = (), height: int = 430) -> go.Figure:
    """The PCA map of `projection` (s2s.neighbours.Projection): each neighbour state a grey dot,
    hover naming the piece it was trained to emit; the states in `chosen_rows` (the step
    `highlight`'s own neighbours) orange and labelled; this sentence's states, one per output
    piece of `target_tokens`, joined in order, the step `highlight` ringed. Both axes are the
    map's first two principal components, on one scale (a cosine map: distances compare)."""
    pts = np.asarray(projection.points, dtype=float).reshape(-1, 2)
    path = np.asarray(projection.trajectory, dtype=float).reshape(-1, 2)
    pieces = [display_token(p) for p in projection.pieces]
    words = [word_of(p) for p in projection.pieces]         # on the map: the piece as text, ▁ dropped
    chosen = set(int(r) for r in chosen_rows)
    is_chosen = [int(r) in chosen for r in projection.rows]
    rest = [i for i, c in enumerate(is_chosen) if not c]
    near = [i for i, c in enumerate(is_chosen) if c]
    traces = [
        go.Scatter(x=pts[rest, 0], y=pts[rest, 1], mode="markers", name="training states (neighbours)",
                   marker=dict(size=8, color=NEIGHBOUR_COLOR, opacity=0.7),
                   hovertext=[f"trained to emit {pieces[i]}" for i in rest],
                   hovertemplate="%{hovertext}<extra></extra>"),
        go.Scatter(x=pts[near, 0], y=pts[near, 1], mode="markers+text", name="this step's neighbours",
                   marker=dict(size=11, color=CHOSEN_COLOR), text=once([words[i] for i in near]),
                   textposition="bottom center", hovertext=[f"trained to emit {pieces[i]}" for i in near],
                   hovertemplate="%{hovertext}<extra></extra>"),
    ]
    labels = [display_token(t) for t in target_tokens][:len(path)]
    k = label_step(len(labels), 16)      # hover names every step; at most ~16 written on the map
    shown = ["" if j % k and j != highlight else word_of(t) for j, t in enumerate(target_tokens[:len(path)])]
    traces.append(go.Scatter(x=path[:, 0], y=path[:, 1], mode="lines+markers+text", name="this sentence, step by step",
                             line=dict(color=PATH_COLOR, width=2), marker=dict(size=8, color=PATH_COLOR),
                             # above and below in turn: two steps close on the map keep their labels apart
                             text=shown, textposition=["top center" if j % 2 == 0 else "bottom center"
                                                       for j in range(len(shown))], textfont=dict(color=PATH_COLOR),
                             hovertext=[f"step {j + 1}: {t}" for j, t in enumerate(labels)],
                             hovertemplate="%{hovertext}<extra></extra>"))
    if highlight is not None and 0 <= highlight < len(path):
        traces.append(go.Scatter(x=[path[highlight, 0]], y=[path[highlight, 1]], mode="markers", showlegend=False,
                                 marker=dict(size=20, color="rgba(0,0,0,0)", line=dict(color=CHOSEN_COLOR, width=3)),
                                 hoverinfo="skip"))
    return figure(traces, height=height, margin=dict(l=10, r=10, t=10, b=10),
                  xaxis=dict(title=dict(text="PC 1"), zeroline=False),
                  yaxis=dict(title=dict(text="PC 2"), zeroline=False, scaleanchor="x", scaleratio=1),
                  legend=dict(orientation="h", x=0, y=-0.3, yanchor="top"))      # under the axis title
