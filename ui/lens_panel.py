"""Step by step's "each layer's guess" panel (issue #61): the logit lens (s2s.lens) at the step
the slider shows. Each decoder layer read through the model's own output layer: its top pieces
(a row per layer), the chosen piece's rank layer by layer, and a watched alternative's beside it.

The lens of a (model, text, output) is computed once per server (every step's rows at once), so
moving the step only redraws; a watched piece costs one more forward pass per step, cached too.
The address keeps the watched piece (watch=); a link with lens=on lands on the panel.
"""
from __future__ import annotations

import streamlit as st

import ui.address
import ui.intervention
import ui.models
import ui.show
from s2s import figures
from s2s.checkpoint import Translator
from s2s.contrast import foil_id
from s2s.decode import Decoding
from s2s.hooks import format_head_mask
from s2s.lens import TOP, Lens, lens, watched
from s2s.text import InputError

WATCH = "lens_watch"         # the watched piece as typed or picked (session state, the address's watch=)
LANDED = "_lens_landed"      # whether this page was entered by a link to the panel (lens=on)
LANDING = ".st-key-point_lens"     # the panel as a Start topic's point: only when a link landed on it


@st.cache_data(max_entries=64, show_spinner=False)
def lens_cached(path: str, text: str, target: tuple[int, ...], mask: str = "") -> Lens:
    """Every step's lens of this output (its piece ids) forced for `text`, with the heads of
    `mask` knocked out (ui.intervention), once per server."""
    return lens(ui.models.load_path(path), text, target=target, head_mask=mask)


@st.cache_data(max_entries=256, show_spinner=False)
def watched_cached(path: str, text: str, target: tuple[int, ...], step: int, piece: int, mask: str = ""
                   ) -> list[tuple[float, int]]:
    """A watched piece's (log p, rank) at every decoder layer at `step` (from 0), under `mask`."""
    return watched(ui.models.load_path(path), text, target, step, piece, head_mask=mask)


def from_address(arrival: dict) -> bool:
    """Read a link's watch= into the panel's state (the page keeps WATCH across pages and closed
    tabs); whether the link asks to land on the panel (lens=on), for the page to scroll to
    LANDING instead of the tab bar."""
    if "watch" in arrival:
        st.session_state[WATCH] = arrival["watch"][:100] or None
    if arrival:      # a link: the panel is its point only if it lands here (another Step by step link's is above)
        st.session_state[LANDED] = arrival.get("lens") == "on"
    return arrival.get("lens") == "on"


def address() -> dict:
    """The panel's part of the page's address: the watched piece, if any."""
    return {"watch": st.session_state.get(WATCH) or None}


def step_line(lens_: Lens, j: int, top: int = TOP) -> str:
    """What the layers say at step j (from 0), from the lens: the chosen piece's rank layer by
    layer, where it enters the top `top`, and each layer whose likeliest piece is another."""
    chosen = lens_.target_tokens[j]
    ranks = [lens_.ranks[l][j] for l in range(len(lens_.layers))]
    if len(ranks) == 1:
        return f"{ui.show.code_span(chosen)} is rank {ranks[0]} of the decoder's one layer."
    enters = lens_.enters_top(top)[j]
    where = (f"in the top {top} from layer {enters} on" if enters is not None
             else f"not in the last layer's top {top}")
    line = f"{ui.show.code_span(chosen)}: rank " + " → ".join(f"{r:,}" for r in ranks) + f" by layer, {where}."
    others = [(l, lens_.top[l][j][0][0]) for l in range(len(ranks)) if lens_.top[l][j][0][0] != chosen]
    if others:
        line += " Likeliest instead: " + "; ".join(f"layer {l + 1} {ui.show.code_span(p)}" for l, p in others) + "."
    return line


def watch_options(lens_: Lens, j: int, current: str | None) -> list[str]:
    """The pieces offered to watch at step j: every layer's top pieces there, the last layer's
    first, but the chosen one; and the current watched piece (typed, or from another step)."""
    chosen = lens_.target_tokens[j]
    seen: list[str] = []
    for l in range(len(lens_.layers) - 1, -1, -1):
        for piece, _ in lens_.top[l][j]:
            if piece != chosen and piece not in seen:
                seen.append(piece)
    if current and current not in seen:
        seen.insert(0, current)
    return seen


def lens_panel(tr: Translator, d: Decoding, first: int, model: str, text: str) -> None:
    """The panel at the output piece `first` (from 0: the step's piece, or its word's first)."""
    S = st.session_state
    with ui.show.point("lens") if S.get(LANDED) else st.container(key="lens_panel"):
        # the step named with the French before it: a link lands here, below the step's own charts
        before = "".join(d.target_tokens[:first]).replace("▁", " ").strip()
        st.markdown(f"**Each layer's guess** at step {first + 1}"
                    + (f", after {ui.show.code_span(before[-60:])}" if before else ", the first")
                    + " (the logit lens): every decoder layer read through the model's own output layer.")
        mask = ui.intervention.active(tr)
        ui.intervention.note(mask, tr)
        mask = format_head_mask(mask)
        try:
            found = lens_cached(ui.models.model_path(model), text, tuple(d.target_ids), mask)
        except InputError as err:
            st.caption(ui.show.literal_label(str(err)))
            return
        if found.source_tokens != d.source_tokens or found.target_tokens != d.target_tokens:
            st.caption("The lens reads one decoding of the whole text: turn *Sentence by sentence* off to see it.")
            return
        j = first
        rows = figures.layer_labels(len(found.layers), one_layer=found.note is not None)
        chosen = found.target_tokens[j]
        S.setdefault(WATCH, None)
        pick = st.selectbox("Watch another piece", watch_options(found, j, S.get(WATCH)), key=WATCH,
                            accept_new_options=True, placeholder="Watch another piece: pick one or type it",
                            label_visibility="collapsed",
                            help="One piece of the vocabulary (as the top tokens write it, or a word that is one "
                                 "piece): its rank at each layer is drawn beside the chosen piece's")
        other = other_ranks = other_lps = None
        if pick:
            try:
                piece = foil_id(tr, pick, "watched piece")
                if piece == d.target_ids[j]:
                    raise InputError(f"{tr.tokenizer.piece(piece)!r} is the piece chosen at this step: "
                                     "watch another.")
                pairs = watched_cached(ui.models.model_path(model), text, tuple(d.target_ids), j, piece, mask)
                other = tr.tokenizer.piece(piece)
                other_lps, other_ranks = [lp for lp, _ in pairs], [r for _, r in pairs]
            except InputError as err:
                st.warning(ui.show.literal_label(str(err)))
        top = [found.top[l][j] for l in range(len(rows))]
        font_px = figures.label_px(ui.show.projector())
        table = ui.show.screen_figure(figures.layer_top_figure(rows, top, chosen, other, font_px),
                                      share=1.0 if found.note else 0.55)
        if found.note:      # a recurrent model: one layer, the model's own distribution
            st.caption(found.note)
            ui.show.plotly_chart(table, ready=True, key="lens_top",
                                 config=ui.show.camera("lens_top", model, text[:40]))
        else:
            ranks = [found.ranks[l][j] for l in range(len(rows))]
            lps = [found.log_probs[l][j] for l in range(len(rows))]
            chart = ui.show.screen_figure(figures.layer_rank_figure(rows, chosen, ranks, lps, TOP, other, other_ranks,
                                                                    other_lps, font_px), share=0.45)
            ui.show.same_rows(table, chart)
            left, right = st.columns([0.55, 0.45])
            ui.show.plotly_chart(table, ready=True, where=left, key="lens_top",
                                 config=ui.show.camera("lens_top", model, text[:40]))
            ui.show.plotly_chart(chart, ready=True, where=right, key="lens_rank",
                                 config=ui.show.camera("lens_rank", model, text[:40]))
        line = step_line(found, j)
        if other is not None:
            line += (f" Watched {ui.show.code_span(other)}: rank " + " → ".join(f"{r:,}" for r in other_ranks)
                     + (" by layer." if len(other_ranks) > 1 else "."))
        st.caption(line + " Each cell: a piece and its own p (a piece's, where the step line above gives a "
                   "word's, its pieces' p multiplied); bold: the chosen piece"
                   + ("; italics: the watched one." if other else "."))
