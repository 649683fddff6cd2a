"""Are all heads needed? The Heads tab's knockout (issue #60): a click on a head of the layers x
heads matrix (ui.head_overview) knocks it out (a layer's or a head's number, the corner: a whole
layer, head h of every layer, every head of the kind shown), and the page
re-decodes at once with those heads' outputs multiplied by 0 before W_O, through the one decode
API (DecodeSettings.head_mask, s2s.hooks.knocked_out), drawn beside the model's own output with
ui.what_if.two_outputs. The matrix can show each head's importance, its role tags listed (the shipped
Transformer's from results/head_importance.json; a hub model's measured on demand), and the
BLEU-as-heads-are-pruned chart sits beside the grid (ui.pruning).

The mask lives in the session as the command line writes it (`python -m s2s.translate
--mask-heads`, KIND:LAYER.HEAD counted from 1) and in the address as mask=, so a copied link
reproduces it; a link's malformed or out-of-range mask is said in one line and knocks nothing out.
"""
from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import numpy as np
import streamlit as st

import ui.address
import ui.decoded
import ui.head_overview
import ui.intervention
import ui.models
import ui.pruning
import ui.show
import ui.what_if
from s2s.checkpoint import Translator
from s2s.decode import DecodeSettings, Decoding
from s2s.head_importance import POSITIONAL, TO_EOS
from s2s.hooks import (
    KINDS,
    HeadMask,
    format_head_mask,
    head_counts,
    normal_head_mask,
)
from s2s.piece_words import HEAD_KINDS, changed_words
from s2s.text import InputError

MASK, CLICK = ui.intervention.MASK, ui.intervention.CLICK      # the mask (text), what a click does
current, knocking = ui.intervention.current, ui.intervention.knocking
CLICKS = {"enlarge": "Click: enlarge", "knock": "Click: knock out"}
IMPORTANCE_FILE = Path(__file__).resolve().parents[1] / "results" / "head_importance.json"
PRUNING_HEIGHT = 260         # beside the matrix, under the knocked-out translation: one 1280 x 720 screen


# ------------------------------------------------------------------ the address
def arrive(arrival: dict) -> None:
    """A link (any of the page's own fields in its query) sets the mask it holds, or none; a link
    with a mask opens the grid in knockout mode (the page keeps CLICK while the tab is closed)."""
    if not ({"model", "text", "tab", "mask"} & set(arrival)):
        return
    st.session_state[MASK] = arrival.get("mask", "")[:400]
    st.session_state[CLICK] = "knock" if st.session_state[MASK].strip() else "enlarge"


def address() -> dict:
    """mask= while the grid knocks heads out and some are (None drops it)."""
    S = st.session_state
    return {"mask": (S.get(MASK) or None) if S.get(CLICK) == "knock" else None}


# ------------------------------------------------------------------ the mask
def heads_of(mask: HeadMask, counts: dict[str, tuple[int, int]]) -> set[tuple[str, int, int]]:
    """Every (kind, layer, head) the mask knocks out, a whole layer expanded."""
    out = set()
    for kind, layer, head in mask:
        out |= {(kind, layer, h) for h in (range(counts[kind][1]) if head is None else [head])}
    return out


def mask_text(heads: set[tuple[str, int, int]], counts: dict[str, tuple[int, int]]) -> str:
    """The mask as the command line writes it, a layer whose every head is out as KIND:LAYER.*."""
    entries = []
    for kind in KINDS:
        if kind not in counts:
            continue
        layers, n = counts[kind]
        for layer in range(layers):
            out = [h for h in range(n) if (kind, layer, h) in heads]
            entries += [(kind, layer, None)] if len(out) == n else [(kind, layer, h) for h in out]
    return format_head_mask(normal_head_mask(entries))


def _set(heads: set[tuple[str, int, int]], counts: dict[str, tuple[int, int]]) -> None:
    st.session_state[MASK] = mask_text(heads, counts)


def _known(tr: Translator, counts: dict[str, tuple[int, int]]) -> set[tuple[str, int, int]]:
    """The session's mask as heads (a mask this model cannot take: none)."""
    return heads_of(current(tr, warn=False), counts)


def toggle_clicked(tr: Translator, kind: str, counts: dict[str, tuple[int, int]]) -> None:
    """A click on the matrix knocks its head out, or brings a knocked-out one back; a layer's
    number (a head's, the corner) does the same for the whole layer (that head of every layer,
    every head of the kind): all of them out, or back in if all were out."""
    layers, n = counts[kind]
    hit = ui.head_overview.picked("knockout_grid", layers, n)
    if hit is None:
        return
    what = {"head": lambda l, h: l == hit[1] and h == hit[2], "layer": lambda l, h: l == hit[1],
            "index": lambda l, h: h == hit[1], "all": lambda l, h: True}[hit[0]]
    chosen = {(kind, l, h) for l in range(layers) for h in range(n) if what(l, h)}
    heads = _known(tr, counts)
    _set(heads - chosen if chosen <= heads else heads | chosen, counts)


def knock_many(tr: Translator, kind: str, counts: dict[str, tuple[int, int]]) -> None:
    """The row / column / all choice: those heads out too; the box goes back to its placeholder."""
    S = st.session_state
    choice = S.get("knock_many")
    S["knock_many"] = None
    if not choice:
        return
    layers, n = counts[kind]
    what, _, number = choice.partition(":")
    chosen = {(kind, l, h) for l in range(layers) for h in range(n)
              if what == "all" or (what == "layer" and l == int(number)) or (what == "head" and h == int(number))}
    _set(_known(tr, counts) | chosen, counts)


def clear() -> None:
    st.session_state[MASK] = ""


def _keep_click() -> None:
    if st.session_state.get(CLICK) is None:       # its selected option clicked again
        st.session_state[CLICK] = "enlarge"


def click_mode() -> None:
    """The control "a click on the matrix: enlarge | knock out", at the top of the column
    beside the grid in both modes."""
    S = st.session_state
    if S.get(CLICK) not in CLICKS:
        S[CLICK] = "enlarge"
    st.segmented_control(
        "A click on the matrix", list(CLICKS), format_func=CLICKS.get, key=CLICK, on_change=_keep_click,
        label_visibility="collapsed",
        help="**enlarge**: a click on a head of the matrix (or a small map) shows it enlarged, with its query and "
             "keys below. **knock out**: a click knocks that head out (its slice of the attention output times 0 "
             "before W_O, Michel et al. 2019) and the sentence is translated again beside the model's own; a second "
             "click brings it back. A layer's number (a head's) knocks out the whole layer (that head of every "
             "layer).")


# ------------------------------------------------------------------ importance and role tags
def _pairs_of(command: str) -> str:
    words = shlex.split(command)
    return words[words.index("--pairs") + 1] if "--pairs" in words[:-1] else "held-out pairs"


def measured(tr: Translator, model: str) -> dict | None:
    """This model's importance and role tags as results/head_importance.json writes them: the
    shipped file when it names this model (and its shape fits), else one measured on this server;
    None: not measured."""
    counts = head_counts(tr.model)
    shipped = ui.models.results_file(IMPORTANCE_FILE)
    if (shipped and not tr.config.get("hub") and shipped.get("model") == tr.name
            and all(np.shape(shipped["importance_normalised"].get(k)) == counts[k] for k in counts)):
        return shipped
    return ui.pruning.measured_importance(model)


def legend(result: dict | None, kind: str) -> str:
    """What the importance and the role tags mean, and on what they were measured."""
    if result is None:
        return ""
    tagged = sum(bool(h["tags"]) for k in result["roles"] for row in result["roles"][k] for h in row)
    positional = f"pos ±k (the largest weight k pieces away for ≥ {POSITIONAL:.0%} of queries)"
    eos = f"`</s>` (on the closing `</s>` for ≥ {TO_EOS:.0%}: reads nothing)"
    tags = {"encoder": f"{positional}, rare (on the sentence's rarest piece), {eos}", "decoder": positional,
            "cross": eos}[kind]
    return (f"**Importance**: |∂L/∂ξ_h| at the head's output (Michel et al. 2019; each layer scaled to norm 1), "
            f"the mean over {result['pairs']} held-out pairs ({ui.show.code_span(_pairs_of(result.get('command', '')))}"
            f"). Tags (Voita et al. 2019, same pairs): {tags}. "
            + ("No head of this model earned one." if not tagged else
               f"{tagged} head{'s' if tagged != 1 else ''} of this model earned one."))


# ------------------------------------------------------------------ the view
def recurrent_note() -> None:
    """Where heads are offered to a recurrent model: it has one attention, and its knockout is
    the counterfactual attention of the Alignment page."""
    st.caption("Knocking heads out needs heads: a recurrent model has one attention. Its knockout is the "
               "**counterfactual attention** of Alignment & Explanation › Attention vs attribution: the weights "
               "replaced (uniform, permuted, adversarial) and what the output does.")
    st.page_link("pages/alignment.py", label="Alignment › Attention vs attribution",
                 query_params={"tab": "Attention vs attribution"}, icon=":material/compare_arrows:")


def masked(tr: Translator, model: str, text: str, settings: DecodeSettings, mask: HeadMask, by_sentence: bool
           ) -> tuple[Decoding, float]:
    """The page's decoding of `text` with the heads of `mask` knocked out (cached as the page's own)."""
    return ui.decoded.decode_cached(ui.models.model_path(model), text, replace(settings, head_mask=mask).canonical(),
                                    by_sentence)


@st.fragment
def view(tr: Translator, d: Decoding, words: bool, model: str, text: str, kind: str,
         settings: DecodeSettings | None = None, by_sentence: bool = False) -> None:
    """The knockout: the layers x heads matrix (ui.head_overview), knocked-out heads greyed and
    crossed, a click on a head knocking it out or back in (a layer's number, a head's number, the
    corner: the whole layer, that head of every layer, every head); beside it the choices of a
    whole row, column or kind, Clear, the knocked-out translation in one line and the pruning
    chart; under them, when some head is out, both translations side by side
    (ui.what_if.two_outputs). No small maps: the matrix is the click target at every size.

    A fragment: a click on the matrix (or the box, or Clear, or the metric) reruns this view
    alone, not the page above it, and writes the address's mask= itself; back to "enlarge", the
    whole page reruns."""
    if not knocking():
        st.rerun(scope="app")
    ui.address.update_address(**address())
    settings = settings or DecodeSettings("greedy")
    mask = current(tr)
    counts = head_counts(tr.model)
    out = heads_of(mask, counts)
    other, ms = None, 0.0
    if mask:
        try:
            other, ms = masked(tr, model, text, settings, mask, by_sentence)
        except InputError as e:
            st.warning(str(e))
    L, H = counts[kind]
    result = measured(tr, model)
    # the matrix and the answer each a point (what the Start link promises on the first screen); the
    # legend and the pruning chart's sentence below them may run past it
    grid, side = st.columns([3, 2])
    with side:
        click_mode()
        pick, wipe = st.columns([3, 1.2], vertical_alignment="bottom")
        name = HEAD_KINDS[kind].name
        options = [f"layer:{l}" for l in range(L)] + [f"head:{h}" for h in range(H)] + ["all"]
        # a short placeholder: the box is a third of the screen wide beside the sidebar (issue #69 item 4)
        pick.selectbox("Knock out more", options, index=None, key="knock_many", on_change=knock_many,
                       args=(tr, kind, counts), label_visibility="collapsed", placeholder="Knock out more…",
                       help="A whole layer, one head of every layer, or every head of the kind (the matrix's "
                            "numbers and its corner do the same)",
                       format_func=lambda o: (f"All {L * H} heads of the {name}" if o == "all" else
                                              f"Layer {int(o[6:]) + 1}: its {H} heads" if o.startswith("layer") else
                                              f"Head {int(o[5:]) + 1} of every layer"))
        wipe.button("Clear", key="knockout_clear", on_click=clear, disabled=not st.session_state.get(MASK),
                    width="stretch", help="Knock no head out")
        with ui.show.point("knockout_answer"):
            if other is None:
                st.caption("No head knocked out: click a head in the matrix to knock it out (its output times 0), "
                           "a layer's or a head's number for the whole row or column; a second click brings them "
                           "back.")
            else:
                answer(d, other, mask, len(out), sum(a * b for a, b in counts.values()))
        pruning_slot(tr, model)
    with grid:
        with ui.show.point("knockout"):
            ui.head_overview.matrix(d, kind, result, "knockout_grid", lambda: toggle_clicked(tr, kind, counts),
                                    share=0.6, knocked=[(l, h) for k, l, h in sorted(out) if k == kind],
                                    corner="all")
        tagged = ui.head_overview.tag_line(ui.head_overview.tags(result, kind, L, H))
        if result is not None:
            st.caption(legend(result, kind) + (f" Tagged: {tagged}." if tagged else ""))
        elif tr.config.get("hub"):
            ui.pruning.importance_button(tr, model)
        else:
            st.caption("Importance not measured for this model (python -m s2s.heads importance measures it).")
    if other is None:
        return
    n = len(out)
    ui.what_if.two_outputs(d, other, ("The model's own", f"{n} head{'s' if n != 1 else ''} knocked out"), words,
                           model, text, key="knockout")
    st.caption(f"Decoded again in {ms:.0f} ms with the heads knocked out, as "
               f"{ui.show.code_span('python -m s2s.translate ' + replace(settings, head_mask=mask).command_options())}"
               " does.")


def answer(d: Decoding, other: Decoding, mask: HeadMask, n: int, of: int) -> None:
    """Beside the grid, where the click was: the translation without the knocked-out heads, its
    changed words marked (the comparison in full is below)."""
    before, _ = ui.what_if.words_of(d)
    after, _ = ui.what_if.words_of(other)
    marks = changed_words(before, after)[1]
    st.caption(f"Without {ui.show.code_span(format_head_mask(mask))} ({n} of {of} heads): log p "
               f"{other.log_prob:.2f}, the model's own {d.log_prob:.2f}"
               + (". **The same translation**, word for word." if other.translation == d.translation else
                  f"; {sum(marks)} word{'s' if sum(marks) != 1 else ''} changed (amber):"))
    if other.translation != d.translation:
        st.markdown(ui.what_if.marked_html(after, marks, size="1.05rem"), unsafe_allow_html=True)


def pruning_slot(tr: Translator, model: str) -> None:
    """BLEU as heads are pruned (ui.pruning), beside the grid: its heads ranked by the importance
    measured here already, if it was (a hub model's 50 pairs: not measured again for 20)."""
    # the Projector's larger type runs the lines above the chart longer: 12 px less keeps it on the screen
    ui.pruning.pruning_panel(tr, model, height=PRUNING_HEIGHT - (12 if ui.show.projector() else 0), share=0.4,
                             measured=ui.pruning.measured_importance(model))
