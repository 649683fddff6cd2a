"""Alignment and explanation (s2s.alignment, s2s.attributions, s2s.counterfactual): gold links
over weights, contribution maps, counterfactual attention, the heads grid and its AER."""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ..piece_words import HEAD_KINDS  # a Transformer's kinds of attention: the heads grid's titles
from .attention import matrix_heatmap
from .screen import LABEL_PX, PROJECTOR_LABEL_PX, PROJECTOR_SCALE, TOOLBAR_PX, display_token, figure, label_step

# ---------------------------------------------------------------------------------------
# Alignment and explanation (s2s.alignment, s2s.attributions, s2s.counterfactual)

GOLD_SURE = "#d62728"        # red squares: links every annotator drew
GOLD_POSSIBLE = "#ff9896"    # light red: links some annotators drew
MODEL_LINK = "#111111"       # black crosses: the model's links


def gold_alignment_figure(english: Sequence[str], french: Sequence[str], weights: np.ndarray,
                          sure: set, possible: set, predicted: set, title: str | None = None,
                          words: str = "gold words", height: int | None = None,
                          label_size: int = LABEL_PX) -> go.Figure:
    """The model's word-level attention (French words x English words) with the human links
    drawn on it: Sure links as red squares, Possible-only links as light-red squares, the
    model's links (a rule applied to the weights) as black crosses. A cross inside a red
    square is a hit; a cross alone is a wrong link; a square alone is a missed one.
    Links are (English word, French word) pairs counted from 0. `words` names the words in
    the axis titles ("your words" for a typed pair, which has no gold links).

    The legend sits at the bottom, under the map. `height`: the most pixels the figure
    may take (what a first screen has left): its rows shrink to fit, down to the height of a
    label drawn at `label_size` px (14, or 18 once for_screen scales it for the projector);
    past that, to less than for_screen's pitch, so that it labels every k-th French word."""
    fig = matrix_heatmap(english, french, weights, value_name="attention", x_title=f"English ({words})",
                         y_title=f"French ({words})", title=title)
    longest = max((len(html.unescape(display_token(w))) for w in english), default=1)
    # room above for the axis title and the English words, upright, as for_screen reckons them
    # (0.62 sizes a character, 20 px under them, 1.4 sizes of title), and above them the row where
    # the toolbar shows on hover (for_screen would grow the figure past `height` for it); the
    # legend has the bottom margin
    top, bottom = 10 + (40 if title else 0), round(2.2 * label_size)
    words_px = 0.62 * label_size * longest + 20 + 2.0 * label_size + TOOLBAR_PX     # upright: see the x axis below
    need = 1.45 * label_size          # a label's box is ~1.42 sizes tall
    row = 26.0
    if height:
        row = min(row, (height - top - bottom - words_px) / max(len(french), 1))
        if row < need:
            row = min(row, 1.25 * label_size)     # for_screen thins labels closer than 1.3 sizes
    size = min(24 if max(len(english), len(french)) <= 25 else 15, round(0.9 * row))
    # the English words stand upright: at -60 degrees two neighbours need 1.6 sizes between them,
    # upright 1.45 (the map's columns are as narrow as its rows are short)
    fig.update_xaxes(tickangle=-90)
    layers = [("gold Sure", sorted(sure), "square-open", GOLD_SURE, size, 3),
              ("gold Possible", sorted(possible - sure), "square-open", GOLD_POSSIBLE, size, 2),
              ("model", sorted(predicted), "x-thin-open", MODEL_LINK, size * 0.6, 3)]
    for name, pts, symbol, color, s, width in layers:
        fig.add_trace(go.Scatter(x=[e for e, _ in pts], y=[f for _, f in pts], mode="markers", name=name,
                                 marker=dict(symbol=symbol, size=s, color=color, line=dict(width=width, color=color)),
                                 hoverinfo="skip"))
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=0, yref="container", yanchor="bottom",
                                  font=dict(size=LABEL_PX)),
                      height=round(top + words_px + row * len(french) + bottom),
                      margin=dict(l=10, r=10, t=round(top + words_px), b=bottom))
    return fig


def contribution_map(source_tokens: Sequence[str], target_tokens: Sequence[str], z: np.ndarray, value_name: str,
                     share: Sequence[float] | None = None, height: int | None = None) -> go.Figure:
    """One method's (target x source) contributions, each row a distribution over the source
    (s2s.contributions), on the attention heatmap's axes; with `share`, the source share of
    each output token (ALTI+, rollout) as bars beside its row: what came from the source, the
    rest from the French written so far."""
    from plotly.subplots import make_subplots
    z = np.asarray(z, dtype=float)
    xs = [display_token(t) for t in source_tokens]
    ys = [display_token(t) for t in target_tokens]
    name = html.escape(value_name, quote=False)
    hover = [[f"{ys[j]} ← {xs[i]}<br>{name}: {z[j, i]:.3f} of the row" for i in range(len(xs))]
             for j in range(len(ys))]
    cols = 2 if share is not None else 1
    fig = make_subplots(rows=1, cols=cols, shared_yaxes=True, horizontal_spacing=0.03,
                        column_widths=[0.8, 0.2] if cols == 2 else [1.0])
    # the colour bar right of everything (beside the bars, not on the row labels)
    fig.add_trace(go.Heatmap(z=z, x=list(range(len(xs))), y=list(range(len(ys))), zmin=0, zmax=1,
                             colorscale=PROJECTOR_SCALE, text=hover, hovertemplate="%{text}<extra></extra>",
                             colorbar=dict(title=dict(text="share of row", side="right"), thickness=14, x=1.01,
                                           xanchor="left")),
                  row=1, col=1)
    if share is not None:
        v = np.clip(np.asarray(share, dtype=float), 0, 1)
        fig.add_trace(go.Bar(x=v, y=list(range(len(ys))), orientation="h", marker=dict(color="#225ea8"),
                             text=[f"{x:.0%}" for x in v], textposition="auto", hovertext=ys,
                             hovertemplate="%{hovertext}: %{x:.1%} from the source<extra></extra>",
                             showlegend=False), row=1, col=2)
        # its axis below, titled: above, its ticks sat on the source words' row
        fig.update_xaxes(range=[0, 1], tickformat=".0%", tickvals=[0, 1], side="bottom",
                         title=dict(text="from the source"), row=1, col=2)
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(xs))), ticktext=xs, tickangle=-60, side="top",
                     tickfont=dict(size=14 if len(xs) <= 25 else 11), row=1, col=1)
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(ys))), ticktext=ys, autorange="reversed",
                     tickfont=dict(size=14), row=1, col=1)
    longest = max((len(html.unescape(t)) for t in xs), default=1)
    fig.update_layout(plot_bgcolor="white", showlegend=False,
                      height=(height or round(40 + 0.62 * LABEL_PX * longest + 26 * len(ys)))
                      + (round(2.5 * LABEL_PX) if cols == 2 else 0),
                      margin=dict(l=10, r=10, t=round(20 + 0.62 * LABEL_PX * longest), b=10))
    return fig


def counterfactual_figure(source_tokens: Sequence[str], alpha_before: Sequence[float], alpha_after: Sequence[float],
                          top_before: Sequence[tuple[str, float]], top_after: Sequence[tuple[str, float]],
                          kind: str) -> go.Figure:
    """Left: alpha_j as the model computed it and as replaced, over the source pieces.
    Right: the next-token distribution's top tokens before and after."""
    from plotly.subplots import make_subplots
    tokens = list(dict.fromkeys([t for t, _ in top_before] + [t for t, _ in top_after]))
    labels = [display_token(t) for t in tokens]
    # The right panel's token labels live in the gap between the panels, which automargin does
    # not widen: size it for the longest one at the projector's 18 px (0.62 sizes a character)
    # on a page-wide chart (~1200 px), so that a long piece is neither cut nor drawn over α.
    longest = max((len(html.unescape(t)) for t in labels), default=1)
    gap = min(0.4, max(0.12, (0.62 * PROJECTOR_LABEL_PX * longest + 30) / 1200))
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=gap,
                        subplot_titles=["attention α_j over the source", "next token p(y_j | …)"])
    xs = [display_token(t) for t in source_tokens]
    after = f"{kind}"
    for name, values, color in (("model's α", alpha_before, "#253494"), (after, alpha_after, "#ff7f0e")):
        fig.add_trace(go.Bar(x=list(range(len(xs))), y=list(values), name=html.escape(name, quote=False),
                             marker_color=color, customdata=xs,
                             hovertemplate="%{customdata}: %{y:.3f}<extra></extra>"), row=1, col=1)
    pb, pa = dict(top_before), dict(top_after)
    for name, p, color in (("before", pb, "#253494"), ("after", pa, "#ff7f0e")):
        fig.add_trace(go.Bar(y=labels, x=[p.get(t) for t in tokens], orientation="h", showlegend=False,
                             marker_color=color, name=name, hovertemplate="%{y}: %{x:.3f}<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(xs))), ticktext=xs, tickangle=-60,
                     tickfont=dict(size=12 if len(xs) <= 25 else 10), row=1, col=1)
    fig.update_yaxes(range=[0, 1], title=dict(text="α"), row=1, col=1)
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=14), row=1, col=2)
    fig.update_xaxes(range=[0, 1], title=dict(text="probability"), row=1, col=2)
    # the legend at the figure's top edge, above the subplot titles (not on them): the 85 px
    # margin holds both
    fig.update_layout(plot_bgcolor="white", barmode="group", height=350,
                      legend=dict(orientation="h", x=0, y=1.0, yanchor="top", yref="container", font=dict(size=14)),
                      margin=dict(l=10, r=10, t=85, b=10))
    fig.update_annotations(font=dict(size=15))
    return fig


GRID_BAR_PAD = 20     # px from the heads grid's maps to its colour bar: the layers' titles between them


def heads_grid(weights: np.ndarray, x_tokens: Sequence[str], y_tokens: Sequence[str], kind: str = "cross",
               selected: tuple[int, int] | None = None, width: int = 1200, height: int | None = None,
               value_name: str = "α", labels: bool = True, knocked: Sequence[tuple[int, int]] = (),
               badges: Sequence[Sequence[str]] | None = None, names: Sequence[Sequence[str]] | None = None,
               title: str | None = None) -> go.Figure:
    """Every layer x head of one attention kind as small heatmaps (BertViz's model view, for
    an encoder-decoder): weights (layers, heads, len(y), len(x)), rows summing to 1; row l,
    column h is layer l's head h. Tokens label the left column's rows and the bottom row's
    columns (too small to read elsewhere; hover names them everywhere); `selected` (l, h)
    is framed in red, the one shown enlarged beside it.

    Over each small map lies a grid of invisible markers, one per cell, carrying its hover
    text: a heatmap cannot be selected by a click in plotly, a marker can, so a click reports
    the marker's trace, L*H + l*H + h for layer l's head h (`head_of_trace`). `value_name`
    names what the maps show (colour bar, hover, title) when it is not the weights α: the
    norm view ‖α f(x)‖, rows scaled to sum to 1 as well.

    `labels=False` (the Projector's grid): no token labels at all. Three layers of 7 rows at
    the projector's 18 px, every row labelled, are ~750 px tall: past a 1280 x 720 screen with
    the enlarged head beside it. Unlabelled, the small maps keep `height` and show the
    patterns (BertViz's thumbnails have no labels either); the enlarged head names its rows
    and columns, and hover names every cell.

    `knocked` and `badges`: the knockout's marks (head_marks), laid out with the rest in the one
    figure call (added afterwards with update_layout, plotly validated the grid's layout again:
    30 ms of a knockout click's run, as long as building the grid).

    `names[r][c]` (e.g. "H9"): each map's own title over it and in its hover, instead of the
    column's head and the row's layer: one layer's heads laid out in rows (the Heads tab's
    small maps of a large model, head_rows), with `title` saying which layer."""
    w = np.asarray(weights, dtype=float)
    L, H = w.shape[:2]
    name = HEAD_KINDS[kind].name
    # labels cut at 12 characters (hover shows them whole): a long word would squeeze the maps
    short = lambda t: display_token(t if len(t) <= 12 else t[:11] + "…")  # noqa: E731
    xs, ys = [short(t) for t in x_tokens], [short(t) for t in y_tokens]
    hover = np.array([[f"{display_token(y_tokens[j])} ← {display_token(x_tokens[i])}" for i in range(len(xs))]
                      for j in range(len(ys))]).ravel()
    # a small map is ~100 px a side on a projector: upright labels, at most 12 per axis (every
    # k-th token past that; hover names every cell), so neighbours never run into each other
    xt, yt = (list(range(0, n, label_step(n, 12))) for n in (len(xs), len(ys)))
    # Built in one pass (figure), the layout plotly.subplots.make_subplots would give: one pair
    # of axes per map, layer l's head h the (l * H + h + 1)-th, the first layer on top, head
    # titles over the columns and layer titles right of the rows (12 maps set one by one with
    # make_subplots and update_xaxes took 0.2 s of the Heads link's run, issue #62). Small
    # multiples: a head's number once over its column, a layer's once beside its row (a title
    # over each map would not fit a map ~100 px wide at a readable size); a hub model has up to
    # 16 heads a layer, whose columns get "H2" instead of "head 2"
    gap_x, right = 0.02, 0.98        # (make_subplots leaves 0.02 right of the maps for row titles)
    gap_y = 0.04 if names is None else 0.1 / max(L - 1, 1) ** 0.5      # room for every row's titles
    map_w, map_h = (right - gap_x * (H - 1)) / H, (1.0 - gap_y * (L - 1)) / L
    xdom = [[h * (map_w + gap_x), h * (map_w + gap_x) + map_w] for h in range(H)]
    ydom = [[(L - 1 - l) * (map_h + gap_y), (L - 1 - l) * (map_h + gap_y) + map_h] for l in range(L)]
    title_font = dict(size=16)
    if names is None:
        notes = [dict(text=f"head {h + 1}" if H <= 4 else f"H{h + 1}", x=sum(xdom[h]) / 2, y=ydom[0][1],
                      xref="paper", yref="paper", showarrow=False, font=title_font, xanchor="center",
                      yanchor="bottom") for h in range(H)]
        notes += [dict(text=f"layer {l + 1}", x=right, y=sum(ydom[l]) / 2, xref="paper", yref="paper",
                       showarrow=False, font=title_font, xanchor="left", yanchor="middle", textangle=90)
                  for l in range(L)]
    else:
        notes = [dict(text=html.escape(names[l][h]), x=sum(xdom[h]) / 2, y=ydom[l][1], xref="paper", yref="paper",
                      showarrow=False, font=title_font, xanchor="center", yanchor="bottom")
                 for l in range(L) for h in range(H) if names[l][h]]
    axes, maps, markers = {}, [], []
    jj, ii = np.meshgrid(range(len(ys)), range(len(xs)), indexing="ij")
    for l in range(L):
        for h in range(H):
            n = "" if l * H + h == 0 else str(l * H + h + 1)
            axes[f"xaxis{n}"] = dict(anchor=f"y{n}", domain=xdom[h], showticklabels=labels and l == L - 1,
                                     tickmode="array", tickvals=xt, ticktext=[xs[i] for i in xt], tickangle=-90,
                                     tickfont=dict(size=10))
            axes[f"yaxis{n}"] = dict(anchor=f"x{n}", domain=ydom[l], showticklabels=labels and h == 0,
                                     tickmode="array", tickvals=yt, ticktext=[ys[j] for j in yt],
                                     autorange="reversed", tickfont=dict(size=10))
            # one colour bar, the first map's (xpad: right of the row titles)
            maps.append(go.Heatmap(z=w[l, h], zmin=0, zmax=1, colorscale=PROJECTOR_SCALE, showscale=(l, h) == (0, 0),
                                   hoverinfo="skip", xaxis=f"x{n}", yaxis=f"y{n}",
                                   **(dict(colorbar=dict(title=dict(text=value_name), thickness=12, len=0.6, x=1.0,
                                                         xanchor="left", xpad=GRID_BAR_PAD))
                                      if (l, h) == (0, 0) else {})))
            markers.append(go.Scatter(x=ii.ravel(), y=jj.ravel(), mode="markers", showlegend=False,
                                      marker=dict(size=14, opacity=0, symbol="square"), customdata=w[l, h].ravel(),
                                      text=hover, hovertemplate=(f"layer {l + 1} head {h + 1}" if names is None
                                                                 else html.escape(names[l][h])) + "<br>"
                                      f"%{{text}}<br>{value_name} = %{{customdata:.3f}}<extra></extra>",
                                      xaxis=f"x{n}", yaxis=f"y{n}"))
    shapes = []
    if selected is not None:
        l, h = selected
        ref = "" if l * H + h == 0 else str(l * H + h + 1)
        shapes.append(dict(type="rect", xref=f"x{ref} domain", yref=f"y{ref} domain", x0=-0.02, x1=1.02, y0=-0.02,
                           y1=1.02, line=dict(color="#d62728", width=3)))
    cell = max(140, min(260, (width - 120) // H))
    natural = 60 + L * int(cell * min(1.0, max(0.45, len(ys) / max(len(xs), 1)))) + (90 if labels else 20)

    # Margins that hold what is drawn beside the maps, so that plotly draws the grid once: its
    # automargin draws a chart, measures what overflows its margins and draws it all again (a
    # third of the Heads link's time in the browser, issue #62). Reckoned for the token labels
    # at LABEL_PX (for_screen's size on a screen; the Projector's grid has none) and the colour
    # bar's at PROJECTOR_LABEL_PX, 0.7 font sizes a character (its title's, 0.5: "‖α f(x)‖" is
    # narrow): a wider label still fits, drawn twice.
    def band(texts: Sequence[str], px: int, em: float = 0.7) -> int:
        return round(em * px * max((len(html.unescape(t)) for t in texts), default=0))
    bar = 2 * GRID_BAR_PAD + max(12 + band(["0.8"], PROJECTOR_LABEL_PX), band([value_name], PROJECTOR_LABEL_PX, 0.5))
    margin = dict(l=band([ys[j] for j in yt], LABEL_PX) + 20 if labels else 20, r=bar, t=84,
                  b=band([xs[i] for i in xt], LABEL_PX) + 20 if labels else 20)
    marked, badged = head_marks(L, H, knocked, badges)
    return figure(maps + markers, **axes, annotations=notes + badged, shapes=shapes + marked,
                  height=min(natural, height) if height else natural,      # `height`: a first screen's room
                  # the title below the toolbar's row (for_screen), the heads' names below it
                  margin=margin,
                  title=dict(text=html.escape(title, quote=False) if title is not None else
                             f"{name}{'' if value_name == 'α' else ', ' + value_name}: {L} layers × {H} heads",
                             font=dict(size=15)),
                  clickmode="event+select", dragmode=False)


def head_of_trace(trace: int, layers: int, heads: int) -> tuple[int, int] | None:
    """(layer, head) of a heads_grid trace (a click's curve number), or None if it is none of them."""
    if not 0 <= trace < 2 * layers * heads:     # L*H heatmaps, then L*H grids of markers
        return None
    return divmod(trace % (layers * heads), heads)


KNOCKED_SHADE = "rgba(120, 120, 120, 0.55)"     # a knocked-out head's map: greyed
KNOCKED_CROSS = "#444444"                       # and crossed


def head_marks(layers: int, heads: int, knocked: Sequence[tuple[int, int]] = (),
               badges: Sequence[Sequence[str]] | None = None, badge_px: int = 11) -> tuple[list[dict], list[dict]]:
    """A heads_grid's knockout marks, (shapes, annotations): each knocked-out (layer, head)
    greyed and crossed (the map is still drawn under it: the head's weights stay, its output is
    gone), and `badges[l][h]` (e.g. "I .42 · pos −1"; "" for none) in the top left corner of
    each small map. Shapes and annotations take no clicks: a click on a greyed map still
    reaches its markers."""
    def ref(l: int, h: int) -> str:
        n = l * heads + h
        return "" if n == 0 else str(n + 1)
    shapes, notes = [], []
    for l, h in knocked:
        if not (0 <= l < layers and 0 <= h < heads):
            continue
        box = dict(xref=f"x{ref(l, h)} domain", yref=f"y{ref(l, h)} domain", layer="above")
        shapes.append(dict(type="rect", x0=0, x1=1, y0=0, y1=1, fillcolor=KNOCKED_SHADE, line=dict(width=0), **box))
        for y0, y1 in ((0, 1), (1, 0)):
            shapes.append(dict(type="line", x0=0, x1=1, y0=y0, y1=y1, line=dict(color=KNOCKED_CROSS, width=3), **box))
    for l in range(layers) if badges is not None else ():
        for h in range(heads):
            if badges[l][h]:
                notes.append(dict(text=html.escape(badges[l][h]), xref=f"x{ref(l, h)} domain",
                                  yref=f"y{ref(l, h)} domain", x=0, y=1, xanchor="left", yanchor="top",
                                  showarrow=False, align="left", font=dict(size=badge_px, color="#111111"),
                                  bgcolor="rgba(255, 255, 255, 0.85)", borderpad=1))
    return shapes, notes


AER_CELL_CHARS = 3            # a cell's AER as written in it: ".41"
AER_ROW_PX = 44               # a layer's row; 34 for a deep model (12 + layers), whose map stands under the pair


def head_aer_columns_fit(heads: int, width: int) -> bool:
    """Whether `heads` columns in a map `width` px wide (its colour bar and labels taken off)
    hold each cell's AER written at the Projector's label size: else the cells go unlabelled
    (hover names each) and the page gives the map the main column's whole width."""
    return (width - 120) / max(heads, 1) >= 0.62 * PROJECTOR_LABEL_PX * AER_CELL_CHARS + 6


def head_aer_figure(aer: np.ndarray, best: tuple[int, int], mean_aer: float | None = None,
                    title: str = "", width: int = 330) -> go.Figure:
    """Every layer (rows) x head (columns) of a Transformer's cross-attention scored as an
    aligner: AER of each, lower is better (darker), the best head outlined, each cell labelled
    where the columns of a map `width` px wide hold it (head_aer_columns_fit; 12 layers x 16
    heads fit at the main column's width, not in a third of it). Every head and layer named,
    upright."""
    aer = np.asarray(aer, dtype=float)
    L, H = aer.shape
    written = head_aer_columns_fit(H, width)
    text = [[f"{aer[l, h]:.2f}".removeprefix("0") for h in range(H)] for l in range(L)]    # ".41": fits a cell
    hover = [[f"layer {l + 1} · head {h + 1}<br>AER = {aer[l, h]:.3f}" for h in range(H)] for l in range(L)]
    heat = go.Heatmap(z=aer, x=list(range(H)), y=list(range(L)), zmin=float(np.nanmin(aer)), zmax=float(np.nanmax(aer)),
                      colorscale=PROJECTOR_SCALE, reversescale=True, customdata=hover,
                      hovertemplate="%{customdata}<extra></extra>", colorbar=dict(title=dict(text="AER"), thickness=14),
                      **(dict(text=text, texttemplate="%{text}", textfont=dict(size=14)) if written else {}))
    l, h = best
    box = dict(type="rect", x0=h - 0.5, x1=h + 0.5, y0=l - 0.5, y1=l + 0.5, line=dict(color="#d62728", width=4))
    subtitle = title or f"AER of each layer × head (best: layer {l + 1} · head {h + 1})"
    if mean_aer is not None:
        subtitle += f"; head mean {mean_aer:.3f}"
    row_px = AER_ROW_PX if L <= 6 else 34
    return figure(
        [heat], shapes=[box],
        title=dict(text=html.escape(subtitle, quote=False), font=dict(size=15)),
        xaxis=dict(tickmode="array", tickvals=list(range(H)), ticktext=[str(k + 1) for k in range(H)],
                   title=dict(text="head"), tickfont=dict(size=14), tickangle=0),
        yaxis=dict(tickmode="array", tickvals=list(range(L)), ticktext=[str(k + 1) for k in range(L)],
                   title=dict(text="layer"), autorange="reversed", tickfont=dict(size=14)),
        height=max(260, 120 + row_px * L), margin=dict(l=10, r=10, t=50, b=10))
