"""Reading an attention matrix: words instead of pieces, entropy, argmax alignment.

A sentencepiece piece that starts with "▁" starts a word; the pieces after it, up to
the next "▁", belong to the same word ("▁lect" "ure" "." is one word, "lecture.").
Merging pieces into words keeps each row a distribution:

    source side: the weight of a word is the SUM over its pieces   (mass is preserved)
    target side: the row of a word is the MEAN over its pieces     (still sums to 1)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

WORD_START = "\u2581"
SPECIALS = {"</s>", "<s>", "<pad>", "<unk>"}


def word_spans(pieces: Sequence[str]) -> list[tuple[str, list[int]]]:
    """Group piece indices into words: [(word, [piece indices])]. Special tokens stand alone."""
    spans: list[tuple[str, list[int]]] = []
    for i, p in enumerate(pieces):
        starts = p.startswith(WORD_START) or p in SPECIALS or not spans or spans[-1][0] in SPECIALS
        if starts:
            spans.append((p, [i]))
        else:
            word, idx = spans[-1]
            spans[-1] = (word + p, idx + [i])
    return [(w.lstrip(WORD_START) or w, idx) for w, idx in spans]


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


def argmax_alignment(source_tokens: Sequence[str], target_tokens: Sequence[str], attention: np.ndarray
                     ) -> list[tuple[str, str, float]]:
    """For each target token, the source token it attends to most: (target, source, weight)."""
    a = np.asarray(attention)
    best = a.argmax(1)
    return [(t, source_tokens[i], float(a[j, i])) for j, (t, i) in enumerate(zip(target_tokens, best))]
