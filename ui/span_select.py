"""LSTMVis's select-a-span on the Cell States page (Strobelt et al. 2018; issue #56 part 2):
the widgets and the drawing. What is computed is s2s.cells (select_span, span_matches).

A stretch is chosen with a range slider over the positions (Streamlit cannot report a text
selection made with the mouse), or by typing a piece of it; the coloured text above shows it
underlined. Under it: the cells on throughout it and off just around it (or, where none is, the
cells that come closest and how much of the span each covers), every other stretch of the passage
and of held-out text where they are on, each with a button that moves the selection (or the
passage) there, and their values around the span (cells x characters).

The held-out text's states are read once per server (held_out_states, a resource); ui.warm reads
the Start page's select-a-span link's before anyone clicks it (warm_held_out).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st

import ui.models
import ui.show
from s2s.cells import (
    EXAMPLES_DIR,
    SPAN_AROUND,
    SPAN_SIGNALS,
    SPAN_THRESHOLD,
    SpanCell,
    SpanCoverage,
    closest_cells,
    held_out_source,
    in_context,
    long_states,
    matched_cells,
    select_span,
    shortest_match,
    span_matches,
)
from s2s.figures import span_heatmap
from s2s.text import InputError

AROUND = 12          # positions drawn either side of the span in the heatmap
MAX_MATCHES = 12     # matches listed per text (the count says how many there are)
CONTEXT = 30         # positions of context either side of a match


@dataclass
class Corpus:
    """Held-out text to search: its positions (characters, or pieces), their states
    (T, L, H), what it is, and what a jump to one of its matches does."""
    tokens: str | list[str]
    states: np.ndarray
    label: str
    jump: Callable[[int, int], None] | None = None


# what a character model's held-out matches are searched in where no held-out text is on this
# machine (s2s.cells.held_out_source): the page's shipped example of the same kind, never trained on
HELD_OUT_EXAMPLES = {"code": "kernel_heldout.c", "prose": "war_and_peace_heldout.txt"}


@st.cache_resource(max_entries=2, show_spinner="Reading the held-out text once for this model…")
def held_out_states(path: str, signal: str) -> tuple[str, np.ndarray, str]:
    """The held-out text a character model's span matches are searched in, its states (T, L, H,
    float16) and what it is: s2s.cells.held_out_source (shipped for War and Peace), else the shipped
    example passage of its kind. A resource: 100 MB, shared by every session, never copied
    (st.cache_data would pickle it on every read)."""
    lm = ui.models.load_charlm_path(path)
    found = held_out_source(lm.metrics)
    if found is None:
        code = "linux" in lm.metrics.get("train", {}).get("data", "")
        text = (EXAMPLES_DIR / HELD_OUT_EXAMPLES["code" if code else "prose"]).read_text(encoding="utf-8")
        found = text, f"the shipped held-out example ({len(text):,} characters; the training text is not on " \
                      "this machine)"
    return found[0], long_states(lm.model, found[0], signal), found[1]


def warm_held_out(model: str, signal: str) -> bool:
    """For the warm-up (ui.warm): the character model `model` loaded and its held-out states for
    `signal` read, as held_out_states caches them for the page; False if it is not here or fails."""
    if model not in {i.name for i in ui.models.charlm_models() if i.error is None}:
        return False
    try:
        held_out_states(ui.models.model_path(model), signal)
    except Exception:         # the page will say what is wrong when someone opens it
        return False
    return True


def default_span(text: str) -> tuple[int, int]:
    """Something to look at before anything is chosen: the first quotation whole, its quotes
    included (it may run over lines; up to 400 characters), or line, whichever comes first, at
    least a 30th of the text long, so that the slider opens with its two handles apart (the first
    ten characters of a 1,264-character passage put them 5 px apart). Else the first characters."""
    import re
    shortest = max(3, len(text) // 30)
    for m in re.finditer(r'"[^"]{1,400}"|[^\n]+', text):
        if m.end() - m.start() >= shortest:
            return m.start(), m.end()
    return 0, min(len(text), max(shortest, 10))


def controls(prefix: str, tokens: str | list[str], signals: dict[str, str], memory: str) -> tuple:
    """The span slider, a find box (characters only), the threshold and the signal; returns
    (start, end, threshold, signal). Keys start with `prefix` (one set per tab)."""
    S = st.session_state
    n = len(tokens)
    key = f"{prefix}_span"
    span = S.get(key)
    if not (isinstance(span, (tuple, list)) and len(span) == 2 and 0 <= span[0] < span[1] <= n):
        S[key] = default_span(tokens) if isinstance(tokens, str) else (0, min(2, n))
    if isinstance(tokens, str):
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        c1.slider("Selected characters (drag either end)", 0, n, key=key,
                  help="Characters counted from 0, the end excluded. The selection is underlined in the text above.")
        c2.text_input("…or find", key=f"{prefix}_find", placeholder="a word or phrase", max_chars=200,
                      on_change=_find, args=(prefix, tokens),
                      help="Selects the first place (after the current selection, then from the start) where "
                           "these characters occur.")
    else:
        st.select_slider("Selected pieces", options=list(range(n + 1)), key=key,
                         format_func=lambda i: f"{i}" + (f" · {tokens[i]}" if i < n else " · end"))
    c1, c2, c3 = st.columns([2, 2, 1])
    # no default beside a value the address (or a jump) may have set: Streamlit warns of both
    S.setdefault(f"{prefix}_threshold", SPAN_THRESHOLD)
    S.setdefault(f"{prefix}_margin", 1)
    threshold = c1.slider("Threshold: a cell is on where its value ≥", 0.05, 0.95, step=0.05,
                          key=f"{prefix}_threshold",
                          help="LSTMVis's default is 0.3. A cell also counts as on where its value is ≤ minus this "
                               "(listed as negative), as LSTMVis's signed_to_unsigned tool does.")
    options = [s for s in SPAN_SIGNALS if s in signals]
    if S.get(f"{prefix}_signal") not in options:
        S[f"{prefix}_signal"] = memory if memory in options else options[0]
    signal = c2.selectbox("Cells read by", options, key=f"{prefix}_signal", format_func=lambda s: signals[s],
                          help="LSTMVis reads h; an LSTM's memory tanh(c) is what its output gate sees.")
    margin = c3.number_input("Off margin", 1, 20, key=f"{prefix}_margin",
                             help="Positions just before and just after the span where the cells must be off.")
    start, end = S[key]
    return int(start), int(end), float(threshold), signal, int(margin)


def _find(prefix: str, text: str) -> None:
    S = st.session_state
    what = S.get(f"{prefix}_find") or ""
    if not what:
        return
    start = S.get(f"{prefix}_span", (0, 0))[0]
    at = text.find(what, start + 1)
    at = text.find(what) if at < 0 else at
    if at >= 0:
        S[f"{prefix}_span"] = (at, max(at + len(what), at + 2))
    else:
        S[f"{prefix}_not_found"] = what


def jump_to(prefix: str, start: int, end: int) -> None:
    st.session_state[f"{prefix}_span"] = (start, end)


TABLE_ROWS = 3       # rows of the cells' table in sight (it scrolls; with the Projector, a static table of these)


def show(prefix: str, tokens: str | list[str], states: np.ndarray, span: tuple[int, int], threshold: float,
         signal: str, margin: int, layer_names: list[str] | None = None, held_out: Corpus | None = None,
         value_name: str = "h") -> None:
    """The selection's cells (or the closest ones), the matches (passage, then held-out text,
    ranked alike) and the heatmap around it: what a Start link lands on first."""
    S = st.session_state
    if (missing := S.pop(f"{prefix}_not_found", None)) is not None:
        st.info(f"{ui.show.code_span(missing)} does not occur in this text.")
    try:
        cells = select_span(states, *span, threshold, margin=margin)
        closest = [] if cells else closest_cells(states, *span, threshold)
    except InputError as e:
        st.warning(str(e))
        return
    start, end = span
    shown = tokens[start:end] if isinstance(tokens, str) else " ".join(tokens[start:end])
    quoted = ui.show.code_span(shown[:40] + ("…" if len(shown) > 40 else ""))
    if not cells and not closest:
        st.info(f"No cell is on (≥ {threshold:g}, or ≤ −{threshold:g}) anywhere in {quoted}. Lower the threshold, "
                "or select another stretch.")
        return

    def name(c: SpanCell | SpanCoverage) -> str:
        layer = layer_names[c.layer] if layer_names else f"layer {c.layer}"
        return f"{layer} cell {c.cell}" + (" (negative)" if c.sign < 0 else "")

    def on_where(c: SpanCell | SpanCoverage) -> str:
        return f"{'≥ ' if c.sign > 0 else '≤ −'}{threshold:g}"

    rows = TABLE_ROWS if ui.show.projector() else 20
    listed: list[SpanCell] | list[SpanCoverage] = cells or closest
    if cells:
        st.markdown(f"**{len(cells)} cell{'s' if len(cells) != 1 else ''}** on throughout {quoted} "
                    f"({end - start} positions, {start}:{end}) and off just around it, the cleanest switch first "
                    f"(its lowest value inside minus its highest within {SPAN_AROUND} positions around):")
        # values as the text is shaded (a negative cell's are negative): the weakest inside, the nearest to on around
        frame = pd.DataFrame([{"cell": name(c), "on where": on_where(c), "weakest inside": round(c.sign * c.inside, 3),
                               "nearest to on around": round(c.sign * c.outside, 3), "score": round(c.score, 3)}
                              for c in cells[:rows]])
    else:
        width = max(end - start, SPAN_AROUND)
        st.markdown(f"No cell is on throughout {quoted} ({start}:{end}) and off just around it. **The closest** "
                    f"(LSTMVis's threshold view), by the share of the span each covers minus its share of the {width} "
                    "positions either side; the matches are the first one's:")
        frame = pd.DataFrame([{"cell": name(c), "on where": on_where(c), "covers the span": f"{c.covers:.0%}",
                               "on around it": f"{c.around:.0%}", "score": round(c.score, 3)} for c in closest[:rows]])
    ui.show.table(frame, height=ui.show.grid_height(min(len(frame), TABLE_ROWS), 260))
    if len(listed) > len(frame):
        st.caption(f"The first {len(frame)} of {len(listed)}.")
    # the matches: every matched cell on together (span_matches), in this text and in the held-out one, both
    # ranked by closeness to the selection's length
    matched = matched_cells(cells, closest)
    # the closest cell's matches: as long as it is on in the selection, or nearly (not 2-character bits)
    shortest = shortest_match(matched, end - start)
    long_enough = "" if cells else f" for at least {shortest} positions in a row (half as many as in the selection)"
    corpora = [Corpus(tokens, states, "this text", lambda s, e: jump_to(prefix, s, e))]
    if held_out is not None:
        corpora.append(held_out)
    for ci, corpus in enumerate(corpora):
        matches = span_matches(corpus.states, matched, corpus.tokens, threshold,
                               exclude=span if ci == 0 else None, length=end - start)
        count = f"{len(matches):,} stretch{'es' if len(matches) != 1 else ''}" if matches else "no stretch"
        who = (f"all {len(matched)} cells are" if len(matched) > 1 else f"{name(matched[0])} is")
        st.markdown(f"**Matches in {corpus.label}:** {count} where {who} on{long_enough}"
                    + (f" (the {MAX_MATCHES} closest in length to the selection first)"
                       if len(matches) > MAX_MATCHES else "") + ".")
        with st.container(key=f"{prefix}_matches_{ci}"):
            for k, m in enumerate(matches[:MAX_MATCHES]):
                before, inside, after = in_context(corpus.tokens, m.start, m.end, CONTEXT)
                c1, c2 = st.columns([6, 1], vertical_alignment="center")
                c1.html(_match_html(before, inside, after))
                if corpus.jump is not None:
                    c2.button("Go", key=f"{prefix}_go_{ci}_{k}", on_click=corpus.jump, args=(m.start, m.end),
                              help=f"Select {m.start}:{m.end}" + ("" if ci == 0 else " (its passage replaces the "
                                                                   "text above)"))
    # below the matches: the listed cells' values around the span
    a, b = max(0, start - AROUND), min(len(tokens), end + AROUND)
    top = listed[:12]
    values = np.stack([states[a:b, c.layer, c.cell].astype(float) for c in top])
    fig = span_heatmap(list(tokens[a:b]), values, [name(c) for c in top], a, span, value_name=value_name,
                       projector=ui.show.projector())
    with st.container(key=f"span_heat_{prefix}"):
        ui.show.plotly_chart(fig, key=f"{prefix}_heatmap", config=ui.show.camera(f"{prefix}-span", f"{start}-{end}"))
    st.caption(f"The {'selected' if cells else 'closest'} cells' {value_name} over the span (outlined) and {AROUND} "
               "positions either side" + (f"; the first {len(top)} of {len(listed)}" if len(listed) > len(top) else "")
               + ".")


def _match_html(before: str, inside: str, after: str) -> str:
    """One match in its context, monospace, the match in bold on a yellow ground."""
    import html

    def esc(s: str) -> str:
        return html.escape(s).replace("\n", "↵").replace("\t", "⇥")
    return ("<div style='font-family:ui-monospace,Menlo,Consolas,monospace;white-space:pre;overflow:hidden;"
            "text-overflow:ellipsis;color:#111'>"
            f"<span style='color:#555'>{esc(before)}</span><b style='background:#ffe08a'>{esc(inside)}</b>"
            f"<span style='color:#555'>{esc(after)}</span></div>")
