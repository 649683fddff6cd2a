"""Agreement of attention with an attribution, per output token: Kendall's tau-b between
alpha_j and |a_j|, and whether both rank the same source piece first."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b: (concordant - discordant pairs) / sqrt((n0 - n_x)(n0 - n_y)), where
    n0 = n(n - 1)/2 and n_x, n_y are the pairs tied in x, in y. NaN when x or y is constant
    (no ranking to compare); equal to scipy.stats.kendalltau's default."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"kendall_tau needs two vectors of one length, got {x.shape} and {y.shape}")
    i, j = np.triu_indices(len(x), 1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    n0 = len(i)
    denominator = math.sqrt((n0 - np.count_nonzero(dx == 0)) * (n0 - np.count_nonzero(dy == 0)))
    return float((dx * dy).sum() / denominator) if denominator > 0 else float("nan")


def agreement(attention: np.ndarray, attribution: np.ndarray) -> tuple[list[float], list[bool]]:
    """Per target token j: Kendall tau-b between alpha_j and |a_j|, and whether argmax_i
    alpha_ij = argmax_i |a_ij|."""
    magnitude = np.abs(attribution)
    taus = [kendall_tau(a, m) for a, m in zip(attention, magnitude)]
    same = [bool(a.argmax() == m.argmax()) for a, m in zip(attention, magnitude)]
    return taus, same
