"""From a model's pieces to the gold's words: attention (or any piece matrix) summed and averaged into words."""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..checkpoint import Translator
from ..decode import forced, positions
from ..hub_config import beyond_positions
from ..text import InputError, clean_text
from ..tokenizer import Tokenizer

# ---------------------------------------------------------------------------------------
# Pieces -> the gold's words


def word_pieces(tokenizer: Tokenizer, words: Sequence[str], target: bool = False) -> tuple[list[int], list[int]]:
    """Encode `words` joined by spaces, as the model reads them: the piece ids, and for each
    piece the index of the word it belongs to.

    Sentencepiece reports the byte offset where each piece begins in the text, so the
    mapping is exact whatever the pieces look like: "l'" is "▁l" "'", "peut-être" is
    "▁peut" "-" "être", an unknown "$" is "▁" "<unk>" (its surface is still "$"), and "…" is
    normalised into three "." pieces, the first two of them zero characters long. A lone
    "▁" piece (the space before a word that starts with a rare character) begins at that
    space and goes to the word after it, as every "▁" does."""
    text = clean_text(" ".join(words))           # what forced decoding will encode (NFC, no control characters)
    cleaned = text.split(" ")
    if len(cleaned) != len(words):
        raise InputError(f"a word of {' '.join(words)[:60]!r} is nothing but control characters")
    if hasattr(tokenizer, "word_pieces"):         # a hub model's tokenizer (tokenizer.HubTokenizer)
        return tokenizer.word_pieces(cleaned, target)     # `target`: its decoder's side (Marian's own)
    ends, pos = [], 0                             # byte offset where each word ends
    for w in cleaned:
        pos += len(w.encode("utf-8"))
        ends.append(pos)
        pos += 1                                  # the space
    ids, owner = [], []
    for piece in tokenizer.sp.encode(text, return_type="proto").pieces:
        ids.append(piece.id)
        # the first word that ends after the piece begins; a piece starting at the space
        # before a word (every "▁" piece) begins exactly where the previous word ends
        owner.append(min(bisect.bisect_right(ends, piece.begin), len(words) - 1))
    return ids, owner


def pieces_to_words(attention: np.ndarray, french_of: Sequence[int], english_of: Sequence[int],
                    n_french: int, n_english: int) -> np.ndarray:
    """(French pieces x English pieces) weights -> (French words x English words):

        W[f, e] = (1 / |f|) * sum_{j in f} sum_{i in e} alpha_ij

    columns summed over an English word's pieces, rows averaged over a French word's pieces
    (a word with no pieces, which cannot happen with real text, gets zeros)."""
    a = np.asarray(attention, dtype=float)
    cols = np.zeros((len(english_of), n_english))
    cols[np.arange(len(english_of)), english_of] = 1.0
    rows = np.zeros((n_french, len(french_of)))
    rows[french_of, np.arange(len(french_of))] = 1.0
    rows /= np.maximum(rows.sum(1, keepdims=True), 1.0)
    return rows @ a @ cols


@dataclass(frozen=True)
class WordPieces:
    """A pair of word sequences as the model reads and writes them: the source and target
    ids (with </s>, and a hub model's prefix or language codes), each piece's word, and
    where the words' pieces start in the source (e0) and the target (f0)."""
    source: list[int]
    target: list[int]
    english_of: list[int]
    french_of: list[int]
    e0: int
    f0: int
    n_english: int
    n_french: int


def word_inputs(tr: Translator, english: Sequence[str], french: Sequence[str]) -> WordPieces:
    """The ids to force for a pair of word sequences, and which word each piece belongs to.

    The words are fed as they are, joined with spaces ("de les", "l' homme", mostly lower
    case for the Hansards gold), although the models were trained on natural, cased,
    untokenised text: the attention is read on slightly unnatural input, as it would be for
    any aligner given these tokens. Around the words go what the model reads and writes
    around a text: </s>, and for a hub model a task prefix or language codes (what it puts
    around an empty text); the words' own pieces are fed as they are, so the mapping holds
    whatever the tokenizer would do across words."""
    tok = tr.tokenizer
    en_ids, english_of = word_pieces(tok, english)
    fr_ids, french_of = word_pieces(tok, french, target=True)
    around_src, around_tgt = tok.source_ids(""), tok.target_ids("")
    return WordPieces(around_src[:-1] + en_ids + around_src[-1:], around_tgt[:-1] + fr_ids + around_tgt[-1:],
                      english_of, french_of, len(around_src) - 1, len(around_tgt) - 1, len(english), len(french))


def too_long(tr: Translator, wp: WordPieces) -> str | None:
    """Why the pair cannot be forced through `tr` whole, in one line, or None where it can: a
    side longer than a hub model's positions (max_position_embeddings; 128 for some listed
    Marians, where the Hansards have longer pairs). Translating keeps within them by its length
    limit; a forced pair's length is the pair's own, so every caller that forces one asks first,
    and a set of pairs leaves it out with a count (scores.pairs_that_fit, corpus.word_weights)."""
    reason = beyond_positions(positions(tr), len(wp.source), len(wp.target))
    return None if reason is None else (f"The pair does not fit: {reason}; {tr.name} reads at most "
                                        f"{positions(tr)} pieces a side (its position embeddings).")


def fitting_inputs(tr: Translator, english: Sequence[str], french: Sequence[str]) -> WordPieces:
    """word_inputs, refused in one line (InputError) where the pair is too long for `tr` (too_long)."""
    wp = word_inputs(tr, english, french)
    reason = too_long(tr, wp)
    if reason is not None:
        raise InputError(reason)
    return wp


def to_words(attention: np.ndarray, wp: WordPieces, shift: bool = False) -> np.ndarray:
    """(..., target pieces, source pieces) attention of a forced decoding -> (..., French
    words, English words), leaving out the </s> column (a parking place, not a word), the row
    that predicts </s>, and a hub model's prefix and language codes.

    With `shift` (Chen et al. 2020, "shift-att"), French piece j is read at the step that has
    it as *input*, the one that predicts the piece after it, rather than at the step that
    predicts it: a Transformer's cross-attention at that step is where it looks to decide
    what follows the word it was given, and it aligns better (measured: docs)."""
    first = wp.f0 + (1 if shift else 0)
    rows = slice(first, first + len(wp.french_of))
    cols = slice(wp.e0, wp.e0 + len(wp.english_of))
    a = np.asarray(attention)
    flat = a.reshape(-1, *a.shape[-2:])
    out = [pieces_to_words(m[rows, cols], wp.french_of, wp.english_of, wp.n_french, wp.n_english) for m in flat]
    return np.array(out).reshape(*a.shape[:-2], wp.n_french, wp.n_english)


def word_attention(tr: Translator, english: Sequence[str], french: Sequence[str], heads: bool = False,
                   shift: bool = False) -> np.ndarray:
    """The model's attention over the gold's words under forced decoding of the gold French:
    a (len(french) x len(english)) matrix, each row the French word's mean attention row
    without </s> (rows sum to a little under 1); `shift`: read one step later (to_words).

    With `heads`, a Transformer's every layer and head instead: (layers, heads, len(french),
    len(english)); None for a recurrent model (it has one attention). A pair longer than the
    model's positions is an InputError (too_long)."""
    wp = fitting_inputs(tr, english, french)
    d = forced(tr, " ".join(english), reference_ids=wp.target, source_ids=wp.source)
    if d.attention is None:
        raise InputError(f"{tr.name} has no attention to read (a fixed-vector model)")
    if heads:
        return None if d.cross_attention is None else to_words(d.cross_attention, wp, shift)
    return to_words(d.attention, wp, shift)


def word_method(tr: Translator, english: Sequence[str], french: Sequence[str], method: str,
                shift: bool = False) -> np.ndarray:
    """(layers, len(french), len(english)): a method of s2s.contributions (weights, norm,
    ALTI+, rollout, value zeroing per decoder layer; an attribution as one layer) over the
    gold's words under forced decoding of the gold French, merged as word_attention merges."""
    from ..contributions import method_matrices
    wp = fitting_inputs(tr, english, french)
    return to_words(method_matrices(tr, wp.source, wp.target, method), wp, shift)
