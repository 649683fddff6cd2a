"""The Heads tab's head overview (issue #67): one kind of attention's layers x heads as one
matrix of one number per head, picked from a short menu (importance where measured, Voita's
confidence, entropy, weight on </s>, the largest weight on one key, and for cross-attention
agreement with the Alignment page's aligner; s2s.head_stats), the tab's click target in both of
its modes; and the small maps drawn only where each is legible: every head when a model has at
most SMALL_GRID of a kind, else the chosen layer's heads, at most HEADS_A_ROW a row.

The translation tab (ui.translate_tabs.heads) and the knockout (ui.knockout.view) place it."""
from __future__ import annotations

import math

import numpy as np
import streamlit as st

import ui.show
from s2s import figures
from s2s.decode import Decoding, attention_heads
from s2s.head_stats import eos_key, head_statistics

METRIC = "heads_metric"      # session state: the matrix's number
METRICS = {"importance": "importance (Michel et al.)", "confidence": "confidence (Voita et al.)",
           "entropy": "entropy (nats)", "to_eos": "weight on </s>", "one_key": "largest weight on one key",
           "agreement": "agreement with the aligner"}
SMALL_GRID = 12              # at most this many heads of a kind: every head's small map (the shipped 3 x 4)
HEADS_A_ROW = 8              # else the chosen layer's heads, this many a row: ~100 px a map on a 1280 px screen
MATRIX_HEIGHT = 460          # the most the matrix takes: below the tab bar and the menu, on a 1280 x 720 screen


def metrics(kind: str, measured: bool) -> list[str]:
    """The numbers offered for `kind`: importance where it was measured; no </s> among decoder
    self-attention's keys; agreement with the aligner for cross-attention only."""
    return [m for m in METRICS if (m != "importance" or measured) and (m != "to_eos" or kind != "decoder")
            and (m != "agreement" or kind == "cross")]


def metric_menu(kind: str, result: dict | None) -> str:
    """The matrix's number, kept across kinds where the kind offers it (importance first where measured)."""
    S = st.session_state
    offered = metrics(kind, result is not None)
    if S.get(METRIC) not in offered:
        S[METRIC] = offered[0]
    return st.selectbox("Each head's number", offered, format_func=METRICS.get, key=METRIC,
                        label_visibility="collapsed",
                        help="One number per head, the matrix's colour and text: **importance** |∂L/∂ξ_h| (Michel et "
                             "al. 2019, measured on held-out pairs, each layer scaled to norm 1); **confidence**, "
                             "the mean over queries of the largest weight, `</s>` excluded (Voita et al. 2019); "
                             "**entropy** of each query's weights, averaged; **weight on </s>**, the mean weight on "
                             "the closing `</s>` (a head that reads nothing); **largest weight on one key**, the "
                             "key that gets most of the head's weight over all queries; **agreement with the "
                             "aligner**, 1 − AER of the head's links against those of the Alignment page's aligner "
                             "(the last layer's mean over heads, grow-diag). All but importance are of this "
                             "sentence, in pieces.")


def values(d: Decoding, kind: str, metric: str, result: dict | None) -> tuple[np.ndarray, tuple[float, float]]:
    """(layers, heads) of the chosen number for the decoding `d` (importance: the measured one), and its range."""
    if metric == "importance":
        return np.asarray(result["importance_normalised"][kind], dtype=float), (0.0, 1.0)
    x, _, w = attention_heads(d, kind)
    stats = head_statistics(w, eos_key(x) if kind != "decoder" else None,
                            d.attention if metric == "agreement" else None, which=(metric,))
    return stats[metric], ((0.0, float(np.log(len(x)))) if metric == "entropy" else (0.0, 1.0))


def _short_tag(tag: str) -> str:
    if tag.startswith("positional"):
        return "pos " + tag.removeprefix("positional").strip(" ()").replace("-", "−")
    return {"rare word": "rare", "to </s>": "</s>"}.get(tag, tag)


def tags(result: dict | None, kind: str, layers: int, heads: int) -> list[list[str]] | None:
    """Each head's role tags (Voita et al., where measured) as short words: "pos −1", "rare", "</s>"."""
    if result is None:
        return None
    roles = result["roles"][kind]
    return [[" · ".join(_short_tag(t) for t in roles[l][h]["tags"]) for h in range(heads)] for l in range(layers)]


def tag_line(notes: list[list[str]] | None) -> str:
    """The tagged heads beside the matrix, as text ("pos −1: 1.2, 2.3 · </s>: 3.4"; layer.head), or ""."""
    if not notes:
        return ""
    by: dict[str, list[str]] = {}
    for l, row in enumerate(notes):
        for h, note in enumerate(row):
            for t in filter(None, note.split(" · ")):
                by.setdefault(t, []).append(f"{l + 1}.{h + 1}")
    return " · ".join(f"**{t}**: {', '.join(heads)}" for t, heads in by.items())


def matrix(d: Decoding, kind: str, result: dict | None, key: str, on_select, share: float,
           selected: tuple[int, int] | None = None, knocked=(), corner: str = "", height: int = MATRIX_HEIGHT,
           where=None) -> dict:
    """The metric menu and the matrix (keyed `key`, `on_select` its click), `share` of the main
    column wide; returns what a caption needs: the metric and whether the cells hold their numbers."""
    metric = metric_menu(kind, result)
    v, value_range = values(d, kind, metric, result)
    L, H = v.shape
    on = ui.show.projector()
    fig = figures.head_matrix(v, METRICS[metric], value_range, selected=selected, knocked=knocked,
                              notes=tags(result, kind, L, H), corner=corner, height=height,
                              width=int(share * ui.show.MAIN_PX[on]), font_px=figures.label_px(on))
    ui.show.plotly_chart(fig, share=share, key=key, notes=False, on_select=on_select, selection_mode="points",
                         where=where, config={"displayModeBar": False})
    return {"metric": metric, "fits": fig.layout.meta["fits"], "shape": (L, H)}


def picked(key: str, layers: int, heads: int) -> tuple | None:
    """What a click on the matrix keyed `key` hit (s2s.figures.matrix_pick), or None."""
    S = st.session_state
    points = S[key].selection.points if S.get(key) else []
    if not points:
        return None
    p = points[0]
    return figures.matrix_pick(int(p["curve_number"]), int(p.get("point_index", p.get("point_number", -1))),
                               layers, heads)


def whole_grid(layers: int, heads: int) -> bool:
    """Whether every head gets its small map (few heads), or only the chosen layer's."""
    return layers * heads <= SMALL_GRID


def head_rows(heads: int) -> tuple[int, int]:
    """One layer's heads laid out as (rows, per row): at most HEADS_A_ROW a row, rows equally full."""
    rows = math.ceil(heads / HEADS_A_ROW)
    return rows, math.ceil(heads / rows)
