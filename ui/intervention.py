"""The page's one intervention (issue #68): the heads the Heads tab's matrix knocks out, read by
every panel that runs the model, not only the knockout's own decoding. Step by step's lens and
contrast, Forced decoding's contrast and Compare an edit's patch run with the same heads out
(each through the library's head_mask, s2s.hooks.knocked_out), each cached per mask, and each
says so in one line above what it draws.

The mask lives in the session as the command line writes it (`--mask-heads`, KIND:LAYER.HEAD
counted from 1) and in the address as mask= (ui.knockout.address), so a copied link carries it
to every tab. It is in force while the matrix's clicks knock heads out ("Click: knock out");
back to "enlarge", every panel reads the whole model again.
"""
from __future__ import annotations

import streamlit as st

import ui.show
from s2s.checkpoint import Translator
from s2s.hooks import HeadMask, format_head_mask, is_recurrent, parse_head_mask, resolve_head_mask
from s2s.text import InputError

MASK = "heads_mask"          # session state: the mask as text ("cross:2.1,encoder:1.*"), the address's mask=
CLICK = "heads_click"        # the widget: what a click on the matrix does ("enlarge" | "knock")


def knocking() -> bool:
    """Whether a click on the matrix knocks its head out (the control's value, read before the
    grid is laid out: each mode lays the tab out its own way)."""
    return st.session_state.get(CLICK) == "knock"


def current(tr: Translator, warn: bool = True) -> HeadMask:
    """The session's mask, checked against `tr`; a malformed or out-of-range one is said in one
    line (`warn`) and knocks nothing out."""
    raw = st.session_state.get(MASK) or ""
    try:
        mask = parse_head_mask(raw)
        resolve_head_mask(tr.model, mask)
        return mask
    except InputError as e:
        if warn:        # the parts the message quotes (repr) as code, never as markup
            said = str(e)
            for part in {p.strip() for p in raw.split(",")} | {p.strip().lower() for p in raw.split(",")}:
                said = said.replace(repr(part), ui.show.code_span(part))
            st.warning(f"Ignored the mask {ui.show.code_span(raw[:60])}: {said} No head is knocked out.")
        return ()


def active(tr: Translator) -> HeadMask:
    """The mask every panel reads `tr` with: the session's while the matrix knocks heads out; ()
    otherwise, for a recurrent model (no heads), or for a mask that does not fit `tr` (the Heads
    tab says why in its one line)."""
    if not knocking() or is_recurrent(tr.model):
        return ()
    return current(tr, warn=False)


def note(mask: HeadMask, tr: Translator | None = None) -> None:
    """The line above a panel that reads the model with heads knocked out (`mask`, from active);
    with `tr`, a mask in force that does not fit it is said in one line too (the whole model is
    read); nothing otherwise."""
    if mask:
        st.caption(f":material/block: Read with {ui.show.code_span(format_head_mask(mask))} knocked out, as the "
                   "Heads tab's knockout has it (back to *Click: enlarge* there to read the whole model).")
        return
    raw = (st.session_state.get(MASK) or "").strip()
    if tr is None or not raw or not knocking() or is_recurrent(tr.model):
        return
    try:
        resolve_head_mask(tr.model, parse_head_mask(raw))
    except InputError as e:
        st.caption(f"Ignored the mask {ui.show.code_span(raw[:60])}: {ui.show.literal_label(str(e))} "
                   "The whole model is read.")
