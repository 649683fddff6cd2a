"""The models side by side: one colour per attention function, length curves (altair), the
softmax-scaling curves and a model's diagram."""
from __future__ import annotations

import html

import plotly.graph_objects as go

from .screen import altair_for_screen, figure, label_px

# ---------------------------------------------------------------- altair (line charts)

# One colour per translation model, by its attention function (read from its config), on
# every page: no two are shades of one hue, and the fixed-vector model is the neutral grey.
ATTENTION_COLORS = {"none": "#7f7f7f", "dot": "#ff7f0e", "general": "#9467bd", "additive": "#1f77b4",
                    "scaled-dot": "#2ca02c", "transformer": "#d62728"}   # (a Transformer by its arch)


def model_colors(attention_of: dict[str, str | None]) -> dict[str, str]:
    """model name -> colour, from each model's attention function; models sharing one (or
    an unknown one) get the next unused colour of a fixed list."""
    spare = ["#e377c2", "#8c564b", "#17becf", "#bcbd22", "#393b79"]
    out, used = {}, set()
    for name, att in attention_of.items():
        c = ATTENTION_COLORS.get(att or "")
        if c is None or c in used:
            c = next((x for x in spare if x not in used), "#000000")
        out[name] = c
        used.add(c)
    return out


def length_chart(df, x: str, y: str, color: str = "model", x_title: str = "", y_title: str = "",
                 highlight_x: float | None = None, highlight_label: str = "", colors: dict[str, str] | None = None,
                 projector: bool = False):
    """A line chart per model (altair); an optional vertical rule marks where something happens.
    `colors` fixes each model's colour (model_colors), so a model looks the same in every chart."""
    import altair as alt
    scale = alt.Scale(domain=list(colors), range=list(colors.values())) if colors else alt.Undefined
    base = alt.Chart(df).encode(
        # integer ticks: lengths in words (one point alone got ticks such as "8.000000")
        x=alt.X(f"{x}:Q", title=x_title, axis=alt.Axis(format="d", tickMinStep=1)), y=alt.Y(f"{y}:Q", title=y_title),
        color=alt.Color(f"{color}:N", title=None, scale=scale,
                        legend=alt.Legend(orient="bottom")),
        tooltip=list(df.columns))
    chart = base.mark_line(point=alt.OverlayMarkDef(size=70), strokeWidth=3)
    if highlight_x is not None:
        import pandas as pd
        rule = alt.Chart(pd.DataFrame({x: [highlight_x], "label": [highlight_label]})).mark_rule(
            color="#d7301f", strokeDash=[6, 4], strokeWidth=2).encode(x=f"{x}:Q")
        text = rule.mark_text(align="left", dx=6, dy=-8, color="#d7301f", fontSize=label_px(projector)).encode(
            text="label:N", y=alt.value(300))     # at the bottom: the lines near 100 stay clear
        chart = chart + rule + text
    return altair_for_screen(chart.properties(height=320), projector)


def scaling_figure(stats: dict, compact: bool = False, height: int = 190) -> go.Figure:
    """Softmax entropy of random dot-product scores against d, with and without 1/sqrt(d)
    (s2s.attention.scaling_statistics), beside the entropy of uniform weights. `compact`: a
    small multiple `height` px tall, its title naming the curves in their colours."""
    d = stats["d"]
    hover = "d = %{x}<br>entropy %{y:.2f} nats<br>score std %{customdata:.1f}<extra></extra>"
    traces = [
        go.Scatter(x=d, y=stats["entropy_unscaled"], name="e = q·k", mode="lines+markers",
                   line=dict(width=3, color="#d95f02"), customdata=stats["std_unscaled"], hovertemplate=hover),
        go.Scatter(x=d, y=stats["entropy_scaled"], name="e = q·k / √d", mode="lines+markers",
                   line=dict(width=3, color="#1f4e9c"), customdata=stats["std_scaled"], hovertemplate=hover),
        go.Scatter(x=[d[0], d[-1]], y=[stats["max_entropy"]] * 2, name=f"uniform over {stats['n_keys']} keys",
                   mode="lines", line=dict(dash="dot", color="gray"), hoverinfo="skip"),
    ]
    if compact:      # the title names the two curves in their colours: no room for a legend
        title = (f"<span style='color:#1f4e9c'>q·k / √d</span> vs <span style='color:#d95f02'>q·k</span>, "
                 f"{stats['n_keys']} keys")
        return figure(traces, title=dict(text=title, x=0.02, xanchor="left", y=0.98, yanchor="top"),
                      xaxis=dict(title="d (log scale)", type="log", tickvals=d),
                      yaxis=dict(title="entropy (nats)", range=[0, 1.1 * stats["max_entropy"]]),
                      # the top margin holds the toolbar's row and the title under it (for_screen)
                      height=height, margin=dict(l=50, r=8, t=58, b=50), showlegend=False)
    return figure(traces, title=f"Softmax entropy of random scores over {stats['n_keys']} keys",
                  xaxis=dict(title="dimension d of queries and keys", type="log", tickvals=d),
                  yaxis=dict(title="mean entropy of α (nats)", rangemode="tozero"),
                  height=360, margin=dict(l=60, r=20, t=50, b=50), font=dict(size=15),
                  legend=dict(orientation="h", y=-0.25))


def model_diagram(cfg: dict, parameters: int | None = None) -> go.Figure:
    """The encoder-decoder of a translation checkpoint drawn with its real sizes (from its
    config: vocabulary, embedding, encoder and decoder sizes, cell, attention function; for
    a Transformer, layers, heads and feed-forward size)."""
    V = cfg["vocab_size"]
    if cfg.get("arch") == "transformer":
        d, H, ffn = cfg["d_model"], cfg["heads"], cfg["ffn"]
        copy = " + copy from α (head mean)" if cfg.get("copy") else ""
        enc = [("source pieces x_1..x_m", "#f0f0f0"),
               (f"√d E x + positions: {V:,} × {d} (shared)", "#c7e9b4"),
               (f"{cfg['encoder_layers']} × [self-attention, {H} heads of {d // H} ; FFN {d}→{ffn}→{d}]", "#a1dab4")]
        dec = [("previous pieces y_1..y_(j−1)", "#f0f0f0"),
               (f"√d E y + positions ({d})", "#c7e9b4"),
               (f"{cfg['decoder_layers']} layers, each: causal self-attention over y_≤j, {H} heads", "#a1dab4"),
               (f"then cross-attention over the encoder, {H} heads ; FFN {d}→{ffn}→{d}", "#fee391"),
               (f"p(y_j) = softmax(E z_j) over {V:,} pieces (E tied){copy}", "#f0f0f0")]
    else:
        E, H, cell = cfg["emb_dim"], cfg["hidden"], cfg["cell"].upper()
        att = cfg["attention"]
        if att == "none":
            reads = f"c = [h→_m ; h←_1]: the final encoder state ({H}), the same at every step"
        else:
            reads = f"attention ({att}): α_j = softmax(e_·j), c_j = Σ_i α_ij h_i ({H})"
        enc = [("source pieces x_1..x_m", "#f0f0f0"),
               (f"embedding E: {V:,} × {E} (shared)", "#c7e9b4"),
               (f"bidirectional {cell} encoder: 2 × {H // 2} → h_i ({H})", "#a1dab4")]
        dec = [(f"previous piece y_(j−1) and h̃_(j−1): [E y ; h̃] ({2 * E})", "#f0f0f0"),
               (f"{cell} decoder: s_j ({H})", "#a1dab4"),
               (reads, "#fee391" if att != "none" else "#fdae6b"),
               (f"h̃_j = tanh(W_c [c_j ; s_j]) ({E})", "#c7e9b4"),
               (f"p(y_j) = softmax(E h̃_j + b) over {V:,} pieces (E tied)", "#f0f0f0")]
    shapes, notes = [], []

    def box(x: float, y: float, w: float, text: str, color: str) -> None:
        shapes.append(dict(type="rect", x0=x - w / 2, x1=x + w / 2, y0=y - 0.32, y1=y + 0.32,
                           fillcolor=color, line=dict(color="#444", width=1)))
        notes.append(dict(x=x, y=y, text=html.escape(text, quote=False), showarrow=False,
                          font=dict(size=15, color="#111")))

    def arrow(x0: float, y0: float, x1: float, y1: float) -> None:
        notes.append(dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="",
                          showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor="#444"))
    for k, (text, color) in enumerate(enc):
        box(0.0, k * 1.0, 2.6, text, color)
        if k:
            arrow(0.0, k - 1 + 0.32, 0.0, k - 0.32)
    for k, (text, color) in enumerate(dec):
        box(3.4, k * 1.0, 3.6, text, color)
        if k:
            arrow(3.4, k - 1 + 0.32, 3.4, k - 0.32)
    # the encoder states feed what the decoder reads: its attention (a Transformer's cross-attention)
    arrow(1.3, 2.0, 1.6, 3.0 if cfg.get("arch") == "transformer" else 2.0)
    title = "The selected model" + (f": {parameters:,} parameters" if parameters else "")
    return figure([], shapes=shapes, annotations=notes, title=title, height=420, showlegend=False,
                  xaxis=dict(visible=False, range=[-1.4, 5.3]), yaxis=dict(visible=False, range=[-0.6, 4.6]),
                  margin=dict(l=10, r=10, t=50, b=10))
