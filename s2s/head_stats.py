"""One number per head: what each of a Transformer's heads does in one decoding, the numbers the
Heads tab's overview draws as a layers x heads matrix per kind of attention (Michel et al. 2019
and Voita et al. 2019 draw their tables so). A pure function of the decoding's weights.

For one kind's weights w (layers L, heads H, queries I, keys J), each row a distribution over
the keys, and e the closing </s> among the keys (encoder and cross-attention; decoder
self-attention reads no </s>: e is None there):

    confidence   c_lh = 1/I sum_i max_{j != e} w_lh[i, j]        Voita et al.'s, </s> excluded as a key
    entropy      H_lh = 1/I sum_i -sum_j w_lh[i, j] log w_lh[i, j]     nats (0 log 0 = 0; s2s.piece_words)
    to </s>      s_lh = 1/I sum_i w_lh[i, e]                      NaN without a </s> key
    one key      k_lh = max_j 1/I sum_i w_lh[i, j]                the key the head weighs most over
                                                                  all its queries (</s> included): 1 when
                                                                  every query reads that one key
    agreement    (given the aligner's weights A, I x J: cross-attention)
                 a_lh = 2 |L(w_lh) ∩ L(A)| / (|L(w_lh)| + |L(A)|)
                 1 - AER of the head's links against the aligner's, its links taken as both Sure
                 and Possible (s2s.alignment.score); L is the Alignment page's rule
                 (s2s.alignment.links, DEFAULT_RULE: grow-diag) on the matrix without the </s> key

The Alignment page's aligner, for a Transformer, is its last layer's mean over heads (what
d.attention holds), read with that rule: `agreement` says how far each head alone links the
words as the heads together do.
"""
from __future__ import annotations

import numpy as np

from .alignment import DEFAULT_RULE, GoldPair, links, score
from .piece_words import entropy

STATISTICS = ("confidence", "entropy", "to_eos", "one_key", "agreement")


def head_statistics(weights: np.ndarray, eos_key: int | None = None, aligner: np.ndarray | None = None,
                    which: tuple[str, ...] = STATISTICS) -> dict[str, np.ndarray]:
    """{statistic: (layers, heads)} of weights (layers, heads, I, J) as the module docstring
    writes them; `eos_key` the column of the closing </s> (None: there is none), `aligner`
    (I, J) the weights whose links `agreement` is measured against (None: no agreement).
    `which`: the statistics wanted (agreement runs the link rule once per head)."""
    w = np.asarray(weights, dtype=float)
    L, H, I, J = w.shape
    out: dict[str, np.ndarray] = {}
    keep = [j for j in range(J) if j != eos_key]
    if "confidence" in which:
        out["confidence"] = w[..., keep].max(-1).mean(-1) if keep else np.full((L, H), np.nan)
    if "entropy" in which:
        out["entropy"] = entropy(w.reshape(-1, J)).reshape(L, H, I).mean(-1)
    if "to_eos" in which:
        out["to_eos"] = w[..., eos_key].mean(-1) if eos_key is not None else np.full((L, H), np.nan)
    if "one_key" in which:
        out["one_key"] = w.mean(-2).max(-1)
    if "agreement" in which and aligner is not None and keep:
        reference = frozenset(links(np.asarray(aligner, dtype=float)[:, keep], DEFAULT_RULE))
        gold = [GoldPair((), (), reference, reference)]
        out["agreement"] = np.array([[1 - score([links(w[l, h][:, keep], DEFAULT_RULE)], gold).aer
                                      for h in range(H)] for l in range(L)])
    return out


def eos_key(tokens: list[str], eos: str = "</s>") -> int | None:
    """The closing </s> among a kind's keys: its last occurrence (None: none)."""
    return max((j for j, t in enumerate(tokens) if t == eos), default=None)
