"""Why this word and not that one (issue #61 item 2), in Step by step and Forced decoding: at the
tab's current step, a foil picked from the step's top tokens or typed, and the attribution of
log p(y_T) − log p(foil) to the source pieces (s2s.contrast) beside the plain attribution of
log p(y_T) and the attention of that step.

The panel is an expander, computed only while open; a link opens it with ?foil=PIECE (and
?step=N, ?foil_method=ig|loo), and lands on it (`landing`). In Step by step's word view a step
is a word, maybe of several pieces: the reader picks which piece is explained (?foil_piece=K,
from 1; the first by default), and the foil list is that piece's step's top tokens (issue #69
item 5: "elle, not il" at "qu'elle" is its third piece, not its first, ▁qu). The foil's widget keeps what the
reader typed, a piece or a word of one piece; what is not one piece is said in one line.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

import ui.address
import ui.intervention
import ui.models
import ui.show
from s2s import figures
from s2s.checkpoint import Translator
from s2s.contrast import Contrast, explain_contrast, step_attribution
from s2s.decode import Decoding
from s2s.hooks import format_head_mask
from s2s.text import InputError

METHODS = {"grad-x-input": "gradient × input", "ig": "integrated gradients", "loo": "leave-one-out"}
DEFAULT_METHOD = "grad-x-input"
OPEN_KEY = "contrast_open"       # the expander's state
FOIL_KEY = "foil"                # the foil as typed or picked (?foil=)
METHOD_KEY = "foil_method"       # ?foil_method=
FORCED_STEP_KEY = "foil_step"    # Forced decoding's step (Step by step has its own slider, "step")
PIECE_KEY = "foil_piece"         # which piece of Step by step's word is explained, from 1 (?foil_piece=)
TABS = ("Step by step", "Forced decoding")
MOST = 3                         # the summary line names this many pushes each way
LANDING = ".st-key-contrast_panel"
WIDGETS = (OPEN_KEY, FOIL_KEY, METHOD_KEY, FORCED_STEP_KEY, PIECE_KEY)     # pages/translate.py keeps them across tabs
AUTO_KEY = "_foil_runner_up"     # the foil the panel chose itself (the step's runner-up), not the reader
WORD_KEY = "_foil_piece_word"    # the word (its first piece) whose piece PIECE_KEY picked: another word, the first


# ------------------------------------------------------------------ the address
def read_address(query: dict) -> list[str]:
    """A link's foil, method, Forced decoding's step and Step by step's piece of the word
    (pages/translate.py, on arrival): the panel opened on them. A bad method, step or piece is
    ignored, with a note to show; the foil is checked by the panel, and the piece's upper end.
    (The page keeps the panel's widgets, WIDGETS, while their tab is closed.)"""
    S = st.session_state
    notes = []
    if not query.get(FOIL_KEY) or query.get("tab") not in TABS:
        return notes
    S[OPEN_KEY] = True
    S[FOIL_KEY] = query[FOIL_KEY]
    method = query.get(METHOD_KEY, DEFAULT_METHOD)
    S[METHOD_KEY] = method if method in METHODS else DEFAULT_METHOD
    if method not in METHODS:
        notes.append(f"Ignored the link's {METHOD_KEY}={ui.show.code_span(method[:40])}: not a valid value.")
    if "step" in query and query["tab"] == TABS[1]:     # (Step by step's step= is the page's own)
        if query["step"].isdigit() and int(query["step"]) >= 1:    # its upper end is the output's (the panel checks)
            S[FORCED_STEP_KEY] = int(query["step"])
        else:
            notes.append(f"Ignored the link's step={ui.show.code_span(query['step'][:40])}: not a valid value.")
    if PIECE_KEY in query and query["tab"] == TABS[0]:
        S.pop(WORD_KEY, None)       # the link's piece is of the link's word
        if query[PIECE_KEY].isdigit() and int(query[PIECE_KEY]) >= 1:     # beyond the word's pieces: its first
            S[PIECE_KEY] = int(query[PIECE_KEY])
        else:
            notes.append(f"Ignored the link's {PIECE_KEY}={ui.show.code_span(query[PIECE_KEY][:40])}: "
                         "not a valid value.")
    return notes


def address(tab: str) -> dict:
    """The address's foil and its method while the panel is open on `tab`, Forced decoding's step
    (Step by step's is the page's own step=), and Step by step's piece of the word past its first."""
    S = st.session_state
    if tab not in TABS or not S.get(OPEN_KEY) or not S.get(FOIL_KEY):
        return {}
    method = S.get(METHOD_KEY, DEFAULT_METHOD)
    return {FOIL_KEY: S[FOIL_KEY], METHOD_KEY: None if method == DEFAULT_METHOD else method,
            **({"step": S.get(FORCED_STEP_KEY)} if tab == TABS[1] else {}),
            PIECE_KEY: S[PIECE_KEY] if tab == TABS[0] and S.get(PIECE_KEY, 1) > 1 else None}


def landing(query: dict) -> str | None:
    """Where a link to the panel lands (its selector), or None: not such a link."""
    return LANDING if query.get(FOIL_KEY) and query.get("tab") in TABS else None


# ------------------------------------------------------------------ measured once per server
@st.cache_data(max_entries=512, show_spinner=False)
def contrast_cached(path: str, text: str, target: tuple[int, ...], step: int, foil: str, method: str,
                    mask: str = "") -> Contrast:
    """One contrast, per (model, text, output, step, foil, method, heads knocked out)."""
    return explain_contrast(ui.models.load_path(path), text, step, foil, method=method, target=list(target),
                            head_mask=mask)


@st.cache_data(max_entries=512, show_spinner=False)
def plain_cached(path: str, text: str, target: tuple[int, ...], step: int, method: str, mask: str = "") -> np.ndarray:
    """The plain attribution of log p(y_step) by the same method, per (model, text, output, step,
    method, heads knocked out)."""
    return step_attribution(ui.models.load_path(path), text, step, method=method, target=list(target),
                            head_mask=mask)[0]


# ------------------------------------------------------------------ the panel
def pushes_line(tokens: list[str], scores: np.ndarray, target: str, foil: str, most: int = MOST) -> str:
    """Which source pieces push toward `target` (positive scores) and which toward `foil`
    (negative), the `most` largest each way, from the scores given (the bars drawn)."""
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    toward = [i for i in order if scores[i] > 0][:most]
    away = [i for i in order[::-1] if scores[i] < 0][:most]

    def named(idx: list[int]) -> str:
        return ", ".join(f"{ui.show.code_span(tokens[i])} ({scores[i]:+.2f})" for i in idx) or "none"
    return (f"Pushing toward {ui.show.code_span(target)}: {named(toward)}. "
            f"Toward {ui.show.code_span(foil)}: {named(away)}.")


def ordinal(k: int) -> str:
    """1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, … 21st."""
    return f"{k}{'th' if k % 100 in (11, 12, 13) else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def contrast_panel(tr: Translator, d: Decoding, j: int | None, model: str, text: str,
                   word: tuple[str, list[int]] | None = None) -> None:
    """The panel under a tab's view of `d`: at its output piece `j` (from 0; Step by step's
    current step), or, with j None (Forced decoding), at a step the panel offers itself. `word`,
    Step by step's current word (its text and its pieces' indices, j the first): of several
    pieces, the reader picks which one is explained."""
    with st.container(key="contrast_panel"):
        box = st.expander("Why this word and not another? Contrastive attribution", key=OPEN_KEY,
                          on_change="rerun", icon=":material/compare:")
    if not box.open:
        return
    with box:
        panel(tr, d, j, model, text, word)


@st.fragment
def panel(tr: Translator, d: Decoding, j: int | None, model: str, text: str,
          word: tuple[str, list[int]] | None = None) -> None:
    """The open panel, a fragment: a foil, method, (Forced decoding's) step or piece of the word
    picked reruns it alone, not the page, and it writes them to the address itself."""
    S = st.session_state
    n = len(d.target_tokens)
    forced_step = j is None
    pieces = word[1] if word and j is not None and len(word[1]) > 1 else []     # a word of several pieces
    if j is None:
        if S.get(FORCED_STEP_KEY, 1) not in range(1, n + 1):     # another reference: back in range
            S[FORCED_STEP_KEY] = min(max(1, S.get(FORCED_STEP_KEY, 1)), n)
        c_step, c_foil, c_method = st.columns(3, vertical_alignment="bottom")
        j = c_step.selectbox("Step", range(1, n + 1), key=FORCED_STEP_KEY,
                             format_func=lambda k: f"{k} · {d.target_tokens[k - 1]}") - 1
    elif pieces:
        # the word's first piece by default, and again on another word (or a link's piece beyond it)
        if S.get(WORD_KEY, pieces[0]) != pieces[0] or S.get(PIECE_KEY, 1) not in range(1, len(pieces) + 1):
            S[PIECE_KEY] = 1
        S[WORD_KEY] = pieces[0]
        c_piece, c_foil, c_method = st.columns(3, vertical_alignment="bottom")
        j = pieces[c_piece.selectbox("Piece of the word", range(1, len(pieces) + 1), key=PIECE_KEY,
                                     format_func=lambda k: f"{k} · {d.target_tokens[pieces[k - 1]]}",
                                     help="Which of the word's pieces to explain: each piece is a step of "
                                          "its own, with its own most likely tokens") - 1]
    else:
        S[PIECE_KEY] = 1         # one piece a step (Pieces, or a word of one piece): nothing to pick
        c_foil, c_method = st.columns(2, vertical_alignment="bottom")
    chosen = d.target_tokens[j]
    top = [tok for tok, _ in (d.step_top[j] if j < len(d.step_top) else []) if tok != chosen]
    # the runner-up first, and again at each step until the reader picks or types a foil
    if top and (S.get(FOIL_KEY) is None or S[FOIL_KEY] == S.get(AUTO_KEY)):
        S[FOIL_KEY] = S[AUTO_KEY] = top[0]
    options = list(dict.fromkeys(top + ([S[FOIL_KEY]] if S.get(FOIL_KEY) else [])))
    foil = c_foil.selectbox(f"Why {ui.show.literal_label(chosen)}, not …", options, key=FOIL_KEY,
                            accept_new_options=True, placeholder="a piece, picked or typed",
                            help="The foil: one of the step's most likely tokens, or type one piece of the "
                                 "vocabulary (a word of one piece, e.g. “une”)")
    if S.get(METHOD_KEY) not in METHODS:
        S[METHOD_KEY] = DEFAULT_METHOD
    # (a select box, not buttons: it fits the row of three boxes beside the sidebar, Projector on too)
    method = c_method.selectbox("Attribution", list(METHODS), key=METHOD_KEY, format_func=METHODS.get,
                                help="How each source piece's share of the difference is measured "
                                     "(the plain bars use the same)")
    ui.address.update_address(foil=foil or None, foil_method=None if method == DEFAULT_METHOD else method,
                              **({"step": j + 1} if forced_step else {}),     # a run of the panel alone
                              **({PIECE_KEY: S[PIECE_KEY] if S[PIECE_KEY] > 1 else None} if not forced_step else {}))
    if not foil:
        st.caption("Pick or type a foil: the word the model did not choose at this step.")
        return
    path, target = ui.models.model_path(model), tuple(int(i) for i in d.target_ids)
    mask = ui.intervention.active(tr)
    ui.intervention.note(mask, tr)
    mask = format_head_mask(mask)
    try:
        with st.spinner(f"Attributing by {METHODS[method]}…"):
            c = contrast_cached(path, text, target, j + 1, foil, method, mask)
            plain = plain_cached(path, text, target, j + 1, method, mask)
    except InputError as e:
        st.info(str(e))
        return
    if c.source_tokens != list(d.source_tokens):     # sentence by sentence: another source than the text's
        st.info("The contrast explains one decoding of the whole text; this one was translated sentence by "
                "sentence. Turn *Sentence by sentence* off to explain it.")
        return
    attention = None if d.attention is None else d.attention[j]
    which = (f"Explaining {ui.show.code_span(chosen)}, the {ordinal(pieces.index(j) + 1)} piece of the word "
             f"{ui.show.code_span(word[0])}: " if pieces else "")
    st.markdown(which + f"log p({ui.show.code_span(c.target)}) = **{c.log_prob_target:.2f}**, "
                f"log p({ui.show.code_span(c.foil)}) = **{c.log_prob_foil:.2f}** (difference "
                f"{c.log_prob_target - c.log_prob_foil:+.2f}). "
                + pushes_line(c.source_tokens, c.scores, c.target, c.foil))
    fig = figures.contrast_figure(c.source_tokens, c.scores, plain, attention, c.target, c.foil, METHODS[method])
    ui.show.plotly_chart(fig, key="contrast_bars", config=ui.show.camera("contrast", model, text[:40]))
    sum_note = ("" if method == "loo" else
                f" The contrast's bars sum to {float(np.sum(c.scores)):+.2f}"
                + (": the difference less its value at the zero embedding (integrated gradients are complete)."
                   if method == "ig" else ": gradient × input is a first-order share, not the difference."))
    st.caption(f"Each source piece's share, by {METHODS[method]}, of log p({ui.show.code_span(c.target)}) − "
               f"log p({ui.show.code_span(c.foil)}) at this step, the same prefix forced (right), and of "
               f"log p({ui.show.code_span(c.target)}) alone (middle), on one scale in nats: blue pushes toward "
               "the chosen piece, orange toward the foil (Yin and Neubig 2022). Left: the attention at this step."
               + sum_note)
