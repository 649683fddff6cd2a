"""Reading an attention matrix: words instead of pieces, entropy, argmax alignment, and what
each of a Transformer's kinds of attention matrix holds (HEAD_KINDS).

Tokenizers mark word boundaries in one of five ways (the convention is read off the pieces):
    "▁"     sentencepiece (the shipped models, Marian, T5, NLLB, mBART): "▁lect" "ure" = "lecture"
    "Ġ"     byte-level BPE (BART): "Ġlect" "ure"
    "##"    WordPiece: "lect" "##ure"
    "@@"    subword-nmt BPE (older fairseq models): "lect@@" "ure"
    "</w>"  BPE with end-of-word marks (XLM, FSMT): "lect" "ure</w>"
Special tokens (</s>, <pad>, language codes such as __fr__ or fra_Latn) stand alone.
Merging pieces into words keeps each row a distribution:

    source side: the weight of a word is the SUM over its pieces   (mass is preserved)
    target side: the row of a word is the MEAN over its pieces     (still sums to 1)
"""
from __future__ import annotations

import difflib
import re
from typing import NamedTuple, Sequence

import numpy as np

WORD_START = "\u2581"
SPECIALS = {"</s>", "<s>", "<pad>", "<unk>"}
CONVENTIONS = ("\u2581", "Ġ", "##", "@@", "</w>")
_SPECIAL = re.compile(r"<[^<>\s]+>|__[a-z]{2,3}(_[A-Za-z]+)?__|[a-z]{2,3}_[A-Z][a-z]{3}|[a-z]{2}_[A-Z]{2}")


def is_special(piece: str) -> bool:
    """</s>, <pad>, <extra_id_0>, and language codes (__fr__, fra_Latn, fr_XX): never part of a word."""
    return piece in SPECIALS or bool(_SPECIAL.fullmatch(piece))


def piece_convention(pieces: Sequence[str]) -> str:
    """Which of CONVENTIONS marks word boundaries in `pieces` ("▁" when none shows)."""
    words = [p for p in pieces if not is_special(p)]
    if any(p.startswith(WORD_START) for p in words):
        return WORD_START
    if any(p.startswith("Ġ") for p in words):
        return "Ġ"
    if any(p.endswith("</w>") for p in words):
        return "</w>"
    if any(p.endswith("@@") for p in words):
        return "@@"
    if any(p.startswith("##") for p in words):
        return "##"
    return WORD_START


def _bare(piece: str, convention: str) -> str:
    """A piece without its boundary mark."""
    if convention in (WORD_START, "Ġ", "##"):
        return piece[len(convention):] if piece.startswith(convention) else piece
    return piece[:-len(convention)] if piece.endswith(convention) else piece


def word_spans(pieces: Sequence[str], convention: str | None = None) -> list[tuple[str, list[int]]]:
    """Group piece indices into words: [(word, [piece indices])]. Special tokens stand alone."""
    c = convention or piece_convention(pieces)
    spans: list[tuple[str, list[int]]] = []
    for i, p in enumerate(pieces):
        if is_special(p) or not spans or is_special(pieces[i - 1]):
            starts = True
        elif c in (WORD_START, "Ġ"):
            starts = p.startswith(c)
        elif c == "##":
            starts = not p.startswith("##")
        elif c == "@@":
            starts = not pieces[i - 1].endswith("@@")
        else:                                      # "</w>": the previous piece ended its word
            starts = pieces[i - 1].endswith("</w>")
        if starts:
            spans.append((p, [i]))
        else:
            word, idx = spans[-1]
            spans[-1] = (word + p, idx + [i])
    out = []
    for w, idx in spans:
        if is_special(w):
            out.append((w, idx))
            continue
        text = "".join(_bare(pieces[i], c) for i in idx)
        out.append((text or w, idx))
    return out


def changed_words(before: Sequence[str], after: Sequence[str]) -> tuple[list[bool], list[bool]]:
    """Which words of `before` and of `after` a word diff marks as changed (difflib's longest
    matching blocks: a word kept in order is unchanged, one replaced, dropped or added is not),
    one flag per word of each: what steering or an edited source changed in a translation."""
    old, new = [False] * len(before), [False] * len(after)
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=list(before), b=list(after), autojunk=False).get_opcodes():
        if op != "equal":
            old[i1:i2] = [True] * (i2 - i1)
            new[j1:j2] = [True] * (j2 - j1)
    return old, new


def merge_to_words(source_tokens: Sequence[str], target_tokens: Sequence[str], attention: np.ndarray
                   ) -> tuple[list[str], list[str], np.ndarray]:
    """(target pieces x source pieces) weights -> (target words x source words) weights."""
    a = np.asarray(attention, dtype=float)
    src, tgt = word_spans(source_tokens), word_spans(target_tokens)
    cols = np.stack([a[:, idx].sum(1) for _, idx in src], axis=1)          # sum over source pieces
    rows = np.stack([cols[idx].mean(0) for _, idx in tgt], axis=0)         # mean over target pieces
    return [w for w, _ in src], [w for w, _ in tgt], rows


def entropy(attention: np.ndarray) -> np.ndarray:
    """Per-row entropy H_j = -sum_i alpha_ij log alpha_ij, in nats (0 = all on one token)."""
    a = np.clip(np.asarray(attention, dtype=float), 1e-12, 1.0)
    return -(a * np.log(a)).sum(1)


def mean_entropy(attention: np.ndarray) -> float:
    return float(entropy(attention).mean())


def uniform_entropy(attention: np.ndarray) -> tuple[float, bool]:
    """The mean entropy a uniform head would have over what each row may read, the baseline of
    mean_entropy: (1/I) sum_i log |{j: alpha_ij > 0}|, in nats; and whether every row reads every
    key (then it is log J). A masked key has weight exactly 0 (decoder self-attention's row i
    reads i + 1 tokens, not all of them)."""
    a = np.asarray(attention, dtype=float)
    support = (a > 0).sum(axis=1)
    if (support == a.shape[1]).all():
        return float(np.log(a.shape[1])), True
    return float(np.log(np.maximum(support, 1)).mean()), False


def argmax_alignment(source_tokens: Sequence[str], target_tokens: Sequence[str], attention: np.ndarray
                     ) -> list[tuple[str, str, float]]:
    """For each target token, the source token it attends to most: (target, source, weight)."""
    a = np.asarray(attention)
    best = a.argmax(1)
    return [(t, source_tokens[i], float(a[j, i])) for j, (t, i) in enumerate(zip(target_tokens, best))]


class HeadKind(NamedTuple):
    """One of a Transformer's kinds of attention: what its matrices are called and what their
    axes hold (each row y is a distribution over the columns x)."""
    name: str       # "cross-attention": a heads grid's title
    reads: str      # which tokens a row reads: "output → source"
    x_title: str
    y_title: str

    @property
    def label(self) -> str:
        """The name and what it reads, "Cross-attention: output → source" (the Heads tab's choice)."""
        return f"{self.name.capitalize()}: {self.reads}"


# A Transformer's three kinds of attention, whose weights s2s.decode.attention_heads returns.
# Defined here, not in s2s/decode/, because the figures and a page's address read them
# before torch is imported.
HEAD_KINDS = {
    "cross": HeadKind("cross-attention", "output → source", "source (English)", "output (French)"),
    "encoder": HeadKind("encoder self-attention", "source → source", "source (English)", "source (English)"),
    "decoder": HeadKind("decoder self-attention", "output → earlier output", "earlier output (decoder input)",
                        "output (French)"),
}
# what the Heads grid shows of cross-attention: each head's weights, or its norm view (s2s.contributions)
HEADS_VIEWS = {"weights": "weights", "norm": "norm"}   # short: the choice sits in a narrow box


def word_log_prob(token_log_probs: Sequence[float], pieces: Sequence[int]) -> float:
    """A word's log p from its pieces' (the chain rule: p(word) = Π_k p(piece_k | the pieces before)),
    so log p(word) = Σ_k log p(piece_k); `pieces` are the word's piece indices (word_spans). A
    word of one piece has that piece's log p; the pages' word views all read it from here."""
    return float(sum(token_log_probs[j] for j in pieces))
