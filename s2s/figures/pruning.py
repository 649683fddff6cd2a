"""Are all heads needed: BLEU as a Transformer's heads are knocked out (s2s.head_importance.prune_curves,
results/head_pruning.json), one line per scope and order."""
from __future__ import annotations

import plotly.graph_objects as go

from .screen import TOOLBAR_PX, figure

# One colour per scope (colour-blind-safe Dark2, all heads in the body text's near-black); the order
# is the line's dash: solid least important first (Michel's order), dotted the seeded random one.
SCOPE_COLORS = {"all": "#2F2D2B", "cross": "#d95f02", "encoder": "#1b9e77", "decoder": "#7570b3"}
SCOPE_LABELS = {"all": "all", "cross": "cross", "encoder": "encoder self", "decoder": "decoder self"}
ORDER_DASH = {"importance": "solid", "random": "dot"}
ORDER_LABELS = {"importance": "least important first", "random": "random order"}
KEY_WORDS = {"all": "all", "cross": "cross", "encoder": "encoder", "decoder": "decoder",
             "importance": "least important first", "random": "random"}
ORDER_KEY = {"importance": "—", "random": "···"}


def pruning_figure(result: dict, height: int = 260) -> go.Figure:
    """BLEU (y) against the share of the scope's heads knocked out (x, %) for every curve of a
    pruning run: each scope in its colour (SCOPE_COLORS), each order in its dash, and a thin grey
    dashed line 1 BLEU below the whole model's. Compact, for a column beside the Heads grid (~330 px
    wide): no legend beside the plot, its two-line title names the scopes in their colours and the
    dashes; hover names the scope, the order, the heads gone of how many, and the BLEU."""
    base = float(result["bleu"])
    curves = result.get("curves", [])
    traces = []
    for c in curves:
        scope, order = c["scope"], c["order"]
        pts = c["points"]
        traces.append(go.Scatter(
            x=[100 * p["share"] for p in pts], y=[p["bleu"] for p in pts], mode="lines+markers",
            name=f"{SCOPE_LABELS.get(scope, scope)}, {ORDER_LABELS.get(order, order)}", legendgroup=scope,
            showlegend=False,
            line=dict(color=SCOPE_COLORS.get(scope, "#888888"), width=3 if order == "importance" else 2.5,
                      dash=ORDER_DASH.get(order, "dash")),
            marker=dict(size=5), cliponaxis=False, customdata=[[p["heads"], c["of"]] for p in pts],
            hovertemplate=(f"{SCOPE_LABELS.get(scope, scope)}, {ORDER_LABELS.get(order, order)}<br>"
                           "%{customdata[0]} of %{customdata[1]} heads gone: BLEU %{y:.1f}<extra></extra>")))
    scopes = list(dict.fromkeys(c["scope"] for c in curves))
    orders = list(dict.fromkeys(c["order"] for c in curves))
    key = " ".join(f"<span style='color:{SCOPE_COLORS.get(s, '#888888')}'><b>{KEY_WORDS.get(s, s)}</b></span>"
                   for s in scopes)
    dashes = " · ".join(f"{ORDER_KEY.get(o, o)} {KEY_WORDS.get(o, o)}" for o in orders)
    top = max([base] + [p["bleu"] for c in curves for p in c["points"]])
    shapes = [dict(type="line", xref="paper", x0=0, x1=1, y0=base - 1, y1=base - 1, layer="below",
                   line=dict(color="#999999", width=1, dash="dash"))] if base >= 1 else []
    return figure(traces, height=height, shapes=shapes, hovermode="closest", showlegend=False,
                  title=dict(text=f"{key}<br>{dashes}", x=0.01, xanchor="left"),
                  xaxis=dict(title="heads knocked out", range=[-3, 103], ticksuffix="%",
                             tick0=0, dtick=20, showgrid=True, gridcolor="#eeeeee", zeroline=False),
                  # from 0 (BLEU is never below it) to just above the highest point
                  # at most one label per 36 px of plot: 5 labels in a 248 px chart overlapped at the
                  # Projector's 18 px (0, 20, 40 instead of 0, 10, …, 40)
                  yaxis=dict(title="BLEU", range=[0, max(1.08 * top, 1.0)], showgrid=True, gridcolor="#eeeeee",
                             zeroline=False, nticks=max(2, (height - TOOLBAR_PX - 52 - 46) // 36)),
                  # the top margin: the toolbar's row and the title's two lines at the Projector's 18 px
                  margin=dict(l=52, r=26, t=TOOLBAR_PX + 52, b=46))    # (r: half of "100%" at 18 px)
