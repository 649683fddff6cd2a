"""The neighbours map (s2s.neighbours): the training decoder states nearest to a sentence's,
in 2-D, with the sentence's own path through them.

Its words are placed, not just drawn: each label goes on the side of its point where it
overlaps no other label, no point and no edge of the plot (place_labels), the chosen step's
own first, above its ring; a label with no such side is left to hover, and the figure says
how many were drawn (layout.meta["labels"]: [drawn, in all]) for the page to say so."""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .screen import LABEL_PX, display_token, figure

PATH_COLOR = "#1d4ed8"       # this sentence's decoder states
NEIGHBOUR_COLOR = "#9ca3af"  # every neighbour state
CHOSEN_COLOR = "#d97706"     # the chosen step's own neighbours

# marker sizes (diameters, px): a neighbour, one of the chosen step's, a step of the path, the ring
NEIGHBOUR_PX, CHOSEN_PX, PATH_PX, RING_PX, RING_LINE_PX = 8, 11, 8, 20, 3
# the plot area inside the figure, in font sizes (LABEL_PX, 18 px with the Projector): the y axis's
# tick labels and title on the left, the x axis's and the legend's rows below (the legend is placed
# from the figure's bottom, so the plot area is what the margins leave, whatever the legend's rows)
LEFT_EM = 0.62 * 5 + 1.8      # "−0.5" and the title "PC 2"
BELOW_EM = 1.4 + 1.7          # the tick labels and the title "PC 1"
LEGEND_ROW_EM, LEGEND_SYMBOL_PX = 1.7, 46
CHAR_EM, LINE_EM = 0.62, 1.3  # a label's width per character and its height, in font sizes
EDGE_PX = 6                  # labels keep this far inside the plot area's edges
# plotly's sides for a point's text, in the order tried: above, below, right, left, then the diagonals
SIDES = ("top center", "bottom center", "middle right", "middle left", "top right", "top left", "bottom right",
         "bottom left")


@dataclass(frozen=True)
class Box:
    """A rectangle in the plot area's pixels, y downward."""
    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: "Box") -> bool:
        return self.left < other.right and other.left < self.right and self.top < other.bottom and \
            other.top < self.bottom

    def inside(self, other: "Box") -> bool:
        return other.left <= self.left and self.right <= other.right and other.top <= self.top and \
            self.bottom <= other.bottom


def text_box(x: float, y: float, radius: float, side: str, width: float, height: float) -> Box:
    """Where plotly draws a point's text on `side` of a marker of `radius` at pixel (x, y): offset
    from the centre by about radius / 0.8 + 1 (plotly.js's Drawing.textPointPosition) each way
    the side names."""
    v, h = side.split()
    gap = radius / 0.8 + 1
    cx = x + {"left": -gap - width / 2, "center": 0.0, "right": gap + width / 2}[h]
    cy = y + {"top": -gap - height / 2, "middle": 0.0, "bottom": gap + height / 2}[v]
    return Box(cx - width / 2, cy - height / 2, cx + width / 2, cy + height / 2)


def place_labels(xy: np.ndarray, labels: Sequence[str], radii: Sequence[float], area: Box,
                 obstacles: Sequence[Box] = (), font_px: float = LABEL_PX) -> list[str | None]:
    """A side (plotly's textposition) for each label of the points `xy` (n, 2), in pixels of the
    plot area, or None where it has none: the labels in the order given (most wanted first), each
    on the first of SIDES where its box lies inside `area` and overlaps no label placed before it
    and no box of `obstacles` (the markers). "" labels are not drawn (None)."""
    placed: list[Box] = []
    out: list[str | None] = []
    height = LINE_EM * font_px + 2
    for (x, y), text, r in zip(np.asarray(xy, dtype=float).reshape(-1, 2), labels, radii):
        side = None
        if text:
            width = CHAR_EM * font_px * len(html.unescape(text)) + 2     # (plotly's text is escaped HTML)
            for s in SIDES:
                box = text_box(x, y, r, s, width, height)
                if box.inside(area) and not any(box.overlaps(b) for b in placed) and \
                        not any(box.overlaps(b) for b in obstacles):
                    side = s
                    placed.append(box)
                    break
        out.append(side)
    return out


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


def legend_rows(names: Sequence[str], width: float, font_px: float) -> int:
    """How many rows a horizontal legend of `names` takes in `width` px (each item its symbol and
    its text, packed left to right)."""
    rows, used = 1, 0.0
    for name in names:
        item = LEGEND_SYMBOL_PX + 0.55 * font_px * len(name)
        if used and used + item > width:
            rows, used = rows + 1, 0.0
        used += item
    return rows


def map_margins(width: int, font_px: float, names: Sequence[str]) -> dict:
    """The map's margins in px: room for the axes' labels and titles, and below them the legend."""
    below = BELOW_EM * font_px + legend_rows(names, width, font_px) * LEGEND_ROW_EM * font_px + 8
    return dict(l=round(LEFT_EM * font_px), r=10, t=14, b=round(below))


def neighbours_map(projection, target_tokens: Sequence[str], highlight: int | None = None,
                   chosen_rows: Sequence[int] = (), height: int = 430, width: int = 360,
                   font_px: int = LABEL_PX) -> go.Figure:
    """The PCA map of `projection` (s2s.neighbours.Projection): each neighbour state a grey dot,
    hover naming the piece it was trained to emit; the states in `chosen_rows` (the step
    `highlight`'s own neighbours) orange and labelled; this sentence's states, one per output
    piece of `target_tokens`, joined in order, the step `highlight` ringed and its word written
    above the ring. Both axes are the map's first two principal components, on one scale (a
    cosine map: distances compare), their ranges set so that every point has room for a label.

    `width` (px, the chart's column) and `font_px` (its labels' size once on screen: 18 with the
    Projector) size the placement: the ringed step's word first, then the chosen neighbours'
    words, then the path's in order, each where it overlaps nothing (place_labels); the rest
    are named on hover, and layout.meta["labels"] is [drawn, in all]."""
    pts = np.asarray(projection.points, dtype=float).reshape(-1, 2)
    path = np.asarray(projection.trajectory, dtype=float).reshape(-1, 2)
    pieces = [display_token(p) for p in projection.pieces]
    words = [word_of(p) for p in projection.pieces]         # on the map: the piece as text, ▁ dropped
    chosen = set(int(r) for r in chosen_rows)
    is_chosen = [int(r) in chosen for r in projection.rows]
    rest = [i for i, c in enumerate(is_chosen) if not c]
    near = [i for i, c in enumerate(is_chosen) if c]
    tokens = list(target_tokens[:len(path)])
    labels = [display_token(t) for t in tokens]
    ring = highlight if highlight is not None and 0 <= highlight < len(path) else None

    # one scale on both axes, the points filling the plot area less a label's height at each edge
    names = ("training states (neighbours)", "this step's neighbours", "this sentence, step by step")
    margin = map_margins(width, font_px, names)
    pw, ph = width - margin["l"] - margin["r"], max(80.0, height - margin["t"] - margin["b"])
    both = np.concatenate([pts, path]) if len(pts) else path
    lo, hi = both.min(0), both.max(0)
    centre, span = (lo + hi) / 2, np.maximum(hi - lo, 1e-9)
    pad_x, pad_y = 1.2 * font_px, 1.2 * font_px
    scale = min((pw - 2 * pad_x) / span[0], (ph - 2 * pad_y) / span[1])      # px per unit
    if not np.isfinite(scale) or scale <= 0:
        scale = 1.0
    x_range = [centre[0] - pw / 2 / scale, centre[0] + pw / 2 / scale]
    y_range = [centre[1] - ph / 2 / scale, centre[1] + ph / 2 / scale]

    def px(p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, dtype=float).reshape(-1, 2)
        return np.stack([(p[:, 0] - x_range[0]) * scale, (y_range[1] - p[:, 1]) * scale], 1)

    def marker_box(x: float, y: float, size: float) -> Box:
        return Box(x - size / 2, y - size / 2, x + size / 2, y + size / 2)

    path_px, pts_px = px(path), px(pts)
    # a label may lie over a grey neighbour's dot (hover names it), never over a marker that is read
    obstacles = [marker_box(x, y, CHOSEN_PX) for (x, y), c in zip(pts_px, is_chosen) if c]
    obstacles += [marker_box(x, y, PATH_PX) for x, y in path_px]
    if ring is not None:
        obstacles.append(marker_box(*path_px[ring], RING_PX + RING_LINE_PX))
    # the labels wanted, most wanted first: the ringed step's, the chosen neighbours' words (each once), the path's
    order = ([("ring", ring, word_of(tokens[ring]), (RING_PX + RING_LINE_PX) / 2)] if ring is not None else [])
    order += [("near", i, w, CHOSEN_PX / 2) for i, w in zip(near, once([words[i] for i in near])) if w]
    order += [("path", j, word_of(t), PATH_PX / 2) for j, t in enumerate(tokens) if j != ring]
    where = [path_px[j] if kind in ("ring", "path") else pts_px[j] for kind, j, _, _ in order]
    sides = place_labels(np.array(where).reshape(-1, 2), [w for _, _, w, _ in order], [r for *_, r in order],
                         Box(EDGE_PX, EDGE_PX, pw - EDGE_PX, ph - EDGE_PX), obstacles, font_px)
    side_of = {(kind, j): (w, s) for (kind, j, w, _), s in zip(order, sides)}

    def text_and_sides(kind: str, ids: Sequence[int]) -> tuple[list[str], list[str]]:
        got = [side_of.get((kind, j), ("", None)) for j in ids]
        return [w if s else "" for w, s in got], [s or "top center" for _, s in got]

    near_text, near_sides = text_and_sides("near", near)
    path_text, path_sides = text_and_sides("path", range(len(path)))
    traces = [
        go.Scatter(x=pts[rest, 0], y=pts[rest, 1], mode="markers", name=names[0],
                   marker=dict(size=NEIGHBOUR_PX, color=NEIGHBOUR_COLOR, opacity=0.7),
                   hovertext=[f"trained to emit {pieces[i]}" for i in rest],
                   hovertemplate="%{hovertext}<extra></extra>"),
        go.Scatter(x=pts[near, 0], y=pts[near, 1], mode="markers+text", name=names[1],
                   marker=dict(size=CHOSEN_PX, color=CHOSEN_COLOR), text=near_text, textposition=near_sides,
                   cliponaxis=False, hovertext=[f"trained to emit {pieces[i]}" for i in near],
                   hovertemplate="%{hovertext}<extra></extra>"),
        go.Scatter(x=path[:, 0], y=path[:, 1], mode="lines+markers+text", name=names[2],
                   line=dict(color=PATH_COLOR, width=2), marker=dict(size=PATH_PX, color=PATH_COLOR),
                   text=path_text, textposition=path_sides, textfont=dict(color=PATH_COLOR), cliponaxis=False,
                   hovertext=[f"step {j + 1}: {t}" for j, t in enumerate(labels)],
                   hovertemplate="%{hovertext}<extra></extra>"),
    ]
    if ring is not None:
        word, side = side_of[("ring", ring)]
        # the ring carries its step's word: plotly sets text off by the ring's size, so it sits clear of it
        traces.append(go.Scatter(x=[path[ring, 0]], y=[path[ring, 1]], mode="markers+text", showlegend=False,
                                 marker=dict(size=RING_PX, color="rgba(0,0,0,0)",
                                             line=dict(color=CHOSEN_COLOR, width=RING_LINE_PX)),
                                 text=[word if side else ""], textposition=side or "top center", cliponaxis=False,
                                 textfont=dict(color=PATH_COLOR), hoverinfo="skip"))
    drawn = sum(s is not None for s in sides)
    return figure(traces, height=height, margin=margin, font=dict(size=LABEL_PX),
                  meta=dict(labels=[drawn, len(order)], plot_px=[round(pw), round(ph)]),
                  xaxis=dict(title=dict(text="PC 1"), zeroline=False, range=x_range),
                  yaxis=dict(title=dict(text="PC 2"), zeroline=False, range=y_range, scaleanchor="x", scaleratio=1),
                  # from the figure's bottom, in the margin kept for it: its rows never move the plot area
                  legend=dict(orientation="h", x=0, xanchor="left", y=0, yref="container", yanchor="bottom"))
