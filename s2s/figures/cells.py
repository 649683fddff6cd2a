"""LSTM cells (Karpathy et al. 2015): text shaded by one cell, traces, gate saturation, states."""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .screen import TOOLBAR_PX, display_token, figure, label_px

# ---------------------------------------------------------------- LSTM cells

def _shade(v: float, lo: float, hi: float) -> str:
    """Diverging blue-white-red for signed values (tanh c in [-1, 1]); white-to-blue for
    values in [0, 1] (gates). The colours of Karpathy et al.'s figures."""
    if lo < 0:
        t = max(-1.0, min(1.0, v / max(abs(lo), abs(hi))))
        r, g, b = (178, 24, 43) if t > 0 else (33, 102, 172)
        t = abs(t)
    else:
        t = max(0.0, min(1.0, (v - lo) / ((hi - lo) or 1)))
        r, g, b = (8, 81, 156)
    t *= 0.85                                    # the strongest shade still leaves black text readable
    mix = lambda c: round(255 + (c - 255) * t)   # noqa: E731  white at t = 0
    return f"rgb({mix(r)},{mix(g)},{mix(b)})"


def colored_text_html(text: str, values: Sequence[float], lo: float = -1.0, hi: float = 1.0,
                      value_name: str = "tanh(c)", font_size: str = "1.05rem",
                      mark: tuple[int, int] | None = None) -> str:
    """The text with every character's background shaded by its value; hovering shows it.
    Every character is HTML-escaped: the text is shown, never interpreted. New lines stay
    new lines (and get a faint ↵ so their colour is visible), tabs stay tabs. `mark`
    (start, end), end excluded: characters underlined with a thick black bar (a selected span),
    the bar drawn inside each character's box so that the line height stays as it is."""
    spans = []
    name = html.escape(value_name, quote=True)
    a, b = mark if mark is not None else (0, 0)
    for t, (ch, v) in enumerate(zip(text, values)):
        shown = "↵\n" if ch == "\n" else html.escape(ch)
        bar = ";box-shadow:inset 0 -4px 0 #111" if a <= t < b else ""
        spans.append(f'<span style="background:{_shade(float(v), lo, hi)}{bar}" '
                     f'title="{name} = {float(v):+.3f}">{shown}</span>')
    return ("<div class='s2s-cells' style=\"font-family:ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;"
            f"tab-size:4;line-height:1.45;font-size:{font_size};color:#111;padding:0.4rem 0;word-break:break-all\">"
            + "".join(spans) + "</div>")


def cell_traces_figure(text: str, traces: dict[str, Sequence[float]], feature: Sequence[float] | None = None,
                       feature_name: str = "", y_title: str = "tanh(c)",
                       y_range: tuple[float, float] = (-1.05, 1.05)) -> go.Figure:
    """Activation of a few cells over the characters of `text`, with the feature shaded
    behind them; hover names the character."""
    x = list(range(len(text)))
    chars = [("↵" if c == "\n" else "⇥" if c == "\t" else "␣" if c == " " else html.escape(c, quote=False))
             for c in text]
    lines = []
    if feature is not None:
        f = np.asarray(feature, dtype=float)
        span = (f.max() - f.min()) or 1.0
        lo, hi = y_range
        lines.append(go.Scatter(x=x, y=lo + (f - f.min()) / span * (hi - lo), mode="lines",
                                 line=dict(color="#999999", dash="dot", shape="hv", width=2),
                                 name=html.escape(feature_name or "feature", quote=False) + " (scaled)",
                                 hoverinfo="skip"))
    for name, values in traces.items():
        lines.append(go.Scatter(x=x, y=np.asarray(values, dtype=float), mode="lines",
                                name=html.escape(name, quote=False),
                                customdata=chars, line=dict(width=2),
                                hovertemplate="%{customdata}: %{y:.3f}<extra>" + html.escape(name, quote=False)
                                + "</extra>"))
    # the legend in the figure's top margin, below the row where the chart's toolbar shows on hover
    # (TOOLBAR_PX): drawn at the top edge, the toolbar covered its last entry (issue #54). A legend
    # placed in the figure's frame (yref "container") takes its own room from the plot, a second row
    # of entries (the Projector's 18 px) included
    height = 330
    return figure(lines, height=height, margin=dict(l=10, r=10, t=TOOLBAR_PX + 30, b=40),
                  legend=dict(orientation="h", x=0, xanchor="left", y=1 - TOOLBAR_PX / height, yref="container",
                              yanchor="top"),
                  xaxis=dict(title=dict(text="character")),
                  yaxis=dict(title=dict(text=y_title), range=list(y_range), gridcolor="#eeeeee"))


def saturation_scatter(saturation: dict[str, dict[str, np.ndarray]], title: str = "") -> go.Figure:
    """The paper's Fig. 3: for each gate of each unit, the fraction of time it is
    left-saturated (< 0.1, x) against right-saturated (> 0.9, y)."""
    colors = {"input_gate": "#1b9e77", "forget_gate": "#d95f02", "output_gate": "#7570b3",
              "update_gate": "#d95f02", "reset_gate": "#1b9e77"}
    traces = []
    for gate, sat in saturation.items():
        traces.append(go.Scatter(x=sat["low"], y=sat["high"], mode="markers", name=gate.replace("_", " "),
                                 marker=dict(size=6, opacity=0.7, color=colors.get(gate)),
                                 text=[f"cell {i}" for i in range(len(sat["low"]))],
                                 hovertemplate="%{text}<br>below 0.1: %{x:.0%}<br>above 0.9: %{y:.0%}<extra></extra>"))
    traces.append(go.Scatter(x=[0, 1], y=[1, 0], mode="lines", line=dict(color="#cccccc", dash="dot"),
                             hoverinfo="skip", showlegend=False))
    return figure(traces, title=dict(text=html.escape(title, quote=False)) if title else None, height=360,
                  margin=dict(l=10, r=10, t=40 if title else 10, b=40), legend=dict(orientation="h", y=-0.22, x=0),
                  xaxis=dict(title=dict(text="fraction of time < 0.1 (left-saturated)"), range=[-0.02, 1.02],
                             tickformat=".0%"),
                  yaxis=dict(title=dict(text="fraction of time > 0.9 (right-saturated)"), range=[-0.02, 1.02],
                             tickformat=".0%"))


def state_heatmap(tokens: Sequence[str], states: np.ndarray, title: str, value_name: str = "tanh(c)",
                  height: int = 360, x_title: str = "source piece", highlight: int | None = None) -> go.Figure:
    """Cell dimensions (y) x tokens (x) of a translation model's LSTM, diverging colours;
    `highlight` outlines one cell's row."""
    z = np.asarray(states, dtype=float).T          # (H, T)
    labels = [display_token(t) for t in tokens]
    heat = go.Heatmap(z=z, x=list(range(len(labels))), y=list(range(z.shape[0])), zmin=-1, zmax=1,
                      colorscale="RdBu_r",
                      colorbar=dict(title=dict(text=html.escape(value_name, quote=False)), thickness=12),
                      customdata=np.array([labels] * z.shape[0]),
                      hovertemplate="%{customdata} · cell %{y}: %{z:.3f}<extra></extra>")
    shapes = [] if highlight is None else [dict(type="rect", x0=-0.5, x1=len(labels) - 0.5, y0=highlight - 0.5,
                                                 y1=highlight + 0.5, line=dict(color="black", width=2))]
    return figure([heat],
                  xaxis=dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels, tickangle=-60,
                             side="top", tickfont=dict(size=13 if len(labels) <= 30 else 10),
                             title=dict(text=html.escape(x_title, quote=False), standoff=4)),
                  yaxis=dict(title=dict(text=f"cell (0–{z.shape[0] - 1})"), autorange="reversed"),
                  title=dict(text=html.escape(title, quote=False), y=0.99, yanchor="top"), height=height, shapes=shapes,
                  margin=dict(l=10, r=10, t=140, b=10))


def span_heatmap(tokens: Sequence[str], values: np.ndarray, cell_labels: Sequence[str], offset: int,
                 span: tuple[int, int], value_name: str = "h", projector: bool = False) -> go.Figure:
    """LSTMVis's selection view: the selected cells (rows, best first) x the positions around a
    selected span (columns, the characters on top), diverging colours from -1 to 1; the span
    outlined. `tokens` and the columns of `values` (k, W) start at position `offset` of the
    text; `span` is in the text's positions, end excluded. Labels at label_px(projector); no
    title (the page says what it is under it: a title above the characters crowded them)."""
    z = np.asarray(values, dtype=float)
    px = label_px(projector)
    labels = [("↵" if c == "\n" else "⇥" if c == "\t" else "␣" if c == " " else display_token(c)) for c in tokens]
    x = list(range(offset, offset + len(labels)))
    rows = [html.escape(r, quote=False) for r in cell_labels]
    heat = go.Heatmap(z=z, x=x, y=list(range(len(rows))), zmin=-1, zmax=1, colorscale="RdBu_r",
                      # the title along the bar: above a full-height bar it sat on the top tick's label
                      colorbar=dict(title=dict(text=html.escape(value_name, quote=False), side="right"), thickness=12,
                                    tickvals=[-1, 0, 1], len=1, lenmode="fraction"),
                      customdata=np.array([labels] * len(rows)), text=np.array([[r] * len(x) for r in rows]),
                      hovertemplate="%{text} · position %{x} %{customdata}: %{z:.3f}<extra></extra>")
    shapes = [dict(type="rect", x0=span[0] - 0.5, x1=span[1] - 0.5, y0=-0.5, y1=len(rows) - 0.5,
                   line=dict(color="black", width=3))]
    return figure([heat], height=max(220, 70 + int(2.2 * px) * len(rows)),
                  xaxis=dict(tickmode="array", tickvals=x, ticktext=labels, side="top",
                             tickfont=dict(size=px, family="ui-monospace, Menlo, Consolas, monospace")),
                  yaxis=dict(tickmode="array", tickvals=list(range(len(rows))), ticktext=rows, autorange="reversed",
                             tickfont=dict(size=px)),
                  shapes=shapes, margin=dict(l=10, r=10, t=50, b=10))
