"""The beam search tree: every hypothesis kept, the n-best paths drawn through it."""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from .screen import LABEL_PX, display_token, figure

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
