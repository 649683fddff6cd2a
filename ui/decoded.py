"""The Translate & Align page's decodings, cached once per server, and their attention as the
page shows it (pieces, or merged into words): what the page, its tabs (ui/translate_tabs.py),
the knockout (ui/knockout.py) and the what-if (ui/what_if.py) share.

Their own module because they draw nothing: the tabs' module draws the Heads tab with the
knockout, and the knockout draws with the what-if, so neither of them can import the tabs'
module for these without an import circle.

Importing this module imports torch (s2s.decode): the page imports it after drawing its form.
"""
from __future__ import annotations

import time

import numpy as np
import streamlit as st

import ui.models
from s2s.checkpoint import Translator
from s2s.decode import (
    DecodeSettings,
    Decoding,
    decode,
    decode_by_sentence,
    encode_source,
    length_limit,
    own_cap,
    positions,
)
from s2s.piece_words import merge_to_words, word_spans
from s2s.text import InputError


# Cached results are shared by every session of the server, so they keep only what this page
# shows: without the state vectors a result is ~9 KB for a 20-word sentence and at most
# ~0.42 MB (200 pieces in, 250 out; `python -m s2s.bench`), so a full cache stays ~110 MB.
@st.cache_data(max_entries=256, show_spinner=False)
def decode_cached(path: str, text: str, settings: DecodeSettings, by_sentence: bool = False
                  ) -> tuple[Decoding, float]:
    """One decoding, keyed by the model, the text and the settings object (`by_sentence`: each
    sentence decoded on its own, the results joined, s2s.decode.decode_by_sentence)."""
    tr = ui.models.load_path(path)
    t = time.perf_counter()
    d = decode_by_sentence(tr, text, settings) if by_sentence else decode(tr, text, settings)
    return d.without_states(), (time.perf_counter() - t) * 1000


def cut_note(tr: Translator, d: Decoding, text: str, max_len: int | None, by_sentence: bool = False) -> str:
    """"" if the decoder ended `d` itself; else where it was cut, read from the decoding's own
    flag (Decoding.cut, what the commands' JSON says as "cut"): at the length limit, either
    without </s>, or with the </s> a hub model's generation config forces there (Marian's
    forced_eos) where the model itself would have written another piece. Which limit
    (s2s.decode.length_limit, the command's rule too): the page's max length, the model's own
    cap (its generation config) or its positions, whichever is fewest. `by_sentence`: `d` joins
    sentences decoded one by one, each with its own limit."""
    if not d.cut:
        return ""
    if by_sentence:
        return "a sentence was cut at its length limit"
    eos = bool(d.target_tokens) and d.target_tokens[-1] == "</s>"
    try:
        limit = length_limit(tr, len(encode_source(tr, text)), max_len)
    except InputError:
        return "cut at the max length"
    n, cap = positions(tr), own_cap(tr)
    if n > 1 and limit == n - 1 and (max_len is None or n - 1 < max_len) and not 0 < cap < n - 1:
        why = f"the model's maximum length (its {n} positions)"
    elif 0 < cap == limit and (max_len is None or cap < max_len):
        why = f"the model's own cap (its generation config's {cap} pieces)"
    else:
        why = "the max length"
    return f"cut at {limit} pieces, {why}" + (", its </s> forced there" if eos else "")


# ------------------------------------------------------------------ attention as shown
def as_words(x: list[str], y: list[str], a: np.ndarray, words: bool) -> tuple[list[str], list[str], np.ndarray]:
    """A (len(y) x len(x)) attention matrix as pieces, or merged into whole words."""
    return merge_to_words(x, y, a) if words else (list(x), list(y), a)


def output_steps(tokens: list[str], words: bool) -> list[tuple[str, list[int]]]:
    """The output as the page shows it: (word, its pieces' indices) per word, or one piece a step."""
    return word_spans(tokens) if words else [(tok, [j]) for j, tok in enumerate(tokens)]


def view_of(d: Decoding, words: bool, attention: np.ndarray | None = None) -> tuple[list[str], list[str], np.ndarray]:
    """The (target x source) attention, d.attention unless another is given, as pieces or words."""
    return as_words(d.source_tokens, d.target_tokens, d.attention if attention is None else attention, words)
