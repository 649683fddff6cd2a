"""Gates and gradients: memory-gap accuracy, gradient flow on log axes (with where float
precision gives out), memory half-lives."""
from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .screen import figure


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
                           "%{customdata[0]:,} training steps, %{customdata[1]:.0f} s, %{customdata[2]}"
                           "<extra></extra>")))
    return figure(
        traces,
        title=dict(text="Remembering one symbol across a gap of distractors: held-out accuracy", x=0.5,
                   xanchor="center"),
        xaxis=dict(type="log", tickmode="array", tickvals=gaps, ticktext=[str(g) for g in gaps],
                   title=dict(text="gap (distractor symbols between the symbol and the query, time steps; log scale)"),
                   showgrid=True, gridcolor="#e5e5e5", linecolor="#444", mirror=True),
        yaxis=dict(range=[0, 1.08], tickformat=".0%", dtick=0.2,
                   title=dict(text=f"held-out accuracy (% of "
                                   f"{experiment.get('settings', {}).get('held_out', 2000):,} sequences)"),
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


def _flow_figure(traces: list, title: str, note: list, x_title: str, y_title: str, legend: dict,
                 margin: dict) -> go.Figure:
    """The gradient-flow charts' one frame: steps back on x, a log y axis, the title at the left."""
    return figure(traces, title=dict(text=html.escape(title, quote=False), x=0.01, font=dict(size=18)),
                  annotations=note,
                  xaxis=dict(title=dict(text=x_title), showgrid=True, gridcolor="#e5e5e5", linecolor="#444",
                             mirror=True),
                  yaxis=_log_axis(y_title), font=dict(size=16), height=390, legend=legend, margin=margin)


def untrained_flow_figure(flows: Sequence, title: str) -> go.Figure:
    """||d(u.m_T)/dm_t|| against T - t (log y) for untrained cells (s2s.gradients.UntrainedFlow;
    m is the memory: an LSTM's c, a GRU's or RNN's h), with the product of the keep gates
    (prod f, prod (1 - z)) dashed in the cell's colour."""
    traces, ends = [], []
    for f in flows:
        color, name = CELL_COLORS.get(f.cell, "#555"), CELL_NAMES.get(f.cell, f.cell)
        traces.append(go.Scatter(x=f.distances, y=_positive(f.grad_norm), mode="lines", name=f"{name}: gradient",
                                 line=dict(color=color, width=4),
                                 hovertemplate=f"{name}<br>T - t = %{{x}}<br>‖∂(u·m_T)/∂m_t‖ = %{{y:.2e}}"
                                               "<extra></extra>"))
        ends.append((f.distances, f.grad_norm, f"{name}: gradient", color))
        if f.keep_product is not None:
            gate = "f" if f.cell == "lstm" else "(1 − z)"
            traces.append(go.Scatter(x=f.distances, y=_positive(f.keep_product), mode="lines",
                                     name=f"{name}: ∏ {gate}", line=dict(color=color, width=3, dash="dash"),
                                     hovertemplate=f"{name}<br>T - t = %{{x}}<br>mean ∏ {gate} = %{{y:.2e}}"
                                                   "<extra></extra>"))
            ends.append((f.distances, f.keep_product, f"{name}: ∏ {gate}", color))
    marks, note = float_limit_marks(ends, "T − t")
    return _flow_figure(traces + marks, title, note, "steps back, T − t", "‖∂(u·m_T)/∂m_t‖ (log scale)",
                        legend=dict(x=1.02, y=1, yanchor="top", font=dict(size=15)),
                        margin=dict(l=80, r=10, t=45, b=60))


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
    # the legend beside the plot, top right: under the axis it falls below the fold of a 1280 x 720
    # projector, and inside the plot no corner is free of the curves for every passage
    return _flow_figure(traces + marks, title, note, "k, characters back", "g(k) / g(0) (log scale)",
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
