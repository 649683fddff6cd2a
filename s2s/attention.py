"""Attention: one interface over the course's scoring functions.

Given encoder states h_1..h_m (the memory) and the decoder state s_j, a scoring function
gives a score e_ij for every source position i; softmax turns scores into weights

    alpha_ij = exp(e_ij) / sum_k exp(e_kj)

and the context vector is their weighted average: c_j = sum_i alpha_ij h_i.

Every scorer splits into `keys(memory)`, computed once per sentence, and
`score(keys, query)`, computed at every decoder step, so decoding never recomputes the
encoder-side projections.

    dot         e_ij = h_i . s_j                         (Luong et al. 2015)
    general     e_ij = h_i^T W s_j                       (multiplicative / bilinear)
    additive    e_ij = v^T tanh(W1 h_i + W2 s_j)         (Bahdanau et al. 2015, an MLP)
    scaled-dot  e_ij = (W h_i)^T (U s_j) / sqrt(d)       (Vaswani et al. 2017)
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

SCORES = ("dot", "general", "additive", "scaled-dot")
ATTENTIONS = ("none",) + SCORES


class Scorer(nn.Module):
    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """(B, S, De) encoder states -> (B, S, Dk) keys, once per sentence."""
        return memory

    def score(self, keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """(B, S, Dk) keys, (B, Dd) decoder state -> (B, S) scores e_ij."""
        return torch.bmm(keys, query.unsqueeze(2)).squeeze(2)


class DotScore(Scorer):
    """e_ij = h_i . s_j (needs encoder and decoder states of the same size)."""


class GeneralScore(Scorer):
    """e_ij = h_i^T W s_j; the keys h_i^T W are precomputed."""

    def __init__(self, enc_dim: int, dec_dim: int):
        super().__init__()
        self.W = nn.Linear(enc_dim, dec_dim, bias=False)

    def keys(self, memory):
        return self.W(memory)


class AdditiveScore(Scorer):
    """e_ij = v^T tanh(W1 h_i + W2 s_j); W1 h_i is precomputed."""

    def __init__(self, enc_dim: int, dec_dim: int, attn_dim: int):
        super().__init__()
        self.W1 = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W2 = nn.Linear(dec_dim, attn_dim, bias=True)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def keys(self, memory):
        return self.W1(memory)

    def score(self, keys, query):
        return torch.matmul((keys + self.W2(query).unsqueeze(1)).tanh_(), self.v.weight[0])


class ScaledDotScore(Scorer):
    """e_ij = (W h_i)^T (U s_j) / sqrt(d); W h_i is precomputed."""

    def __init__(self, enc_dim: int, dec_dim: int, attn_dim: int):
        super().__init__()
        self.W = nn.Linear(enc_dim, attn_dim, bias=False)
        self.U = nn.Linear(dec_dim, attn_dim, bias=False)
        self.scale = 1.0 / math.sqrt(attn_dim)

    def keys(self, memory):
        return self.W(memory)

    def score(self, keys, query):
        return torch.bmm(keys, self.U(query).unsqueeze(2)).squeeze(2) * self.scale


def make_scorer(name: str, enc_dim: int, dec_dim: int, attn_dim: int) -> Scorer:
    if name == "dot":
        if enc_dim != dec_dim:
            raise ValueError(f"dot attention needs enc_dim == dec_dim, got {enc_dim} and {dec_dim}")
        return DotScore()
    if name == "general":
        return GeneralScore(enc_dim, dec_dim)
    if name == "additive":
        return AdditiveScore(enc_dim, dec_dim, attn_dim)
    if name == "scaled-dot":
        return ScaledDotScore(enc_dim, dec_dim, attn_dim)
    raise ValueError(f"unknown attention {name!r}; choose one of {', '.join(SCORES)}")


def mask_bias(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(B, S) True at real positions -> 0 there and -inf at padding, added to the scores
    (once per sentence, instead of a masked_fill at every decoder step)."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def attend(scorer: Scorer, keys: torch.Tensor, memory: torch.Tensor, bias: torch.Tensor,
           query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One attention step: alpha_j = softmax_i(e_ij) over real positions (`bias` from
    mask_bias) and c_j = sum_i alpha_ij h_i. Returns (context (B, De), alpha (B, S))."""
    alpha = F.softmax(scorer.score(keys, query) + bias, dim=-1)
    return torch.bmm(alpha.unsqueeze(1), memory).squeeze(1), alpha


def head_or_mean(weights, layer: int | None = None, head: int | None = None):
    """(layers, heads, T, S) attention weights -> (T, S): head `head` of layer `layer` (None: the
    last layer), or with no head that layer's mean over heads, alpha_ji = 1/H sum_h alpha^h_ji
    (still a distribution per row): what a Transformer's views and aligners read when told
    neither. A (T, S) matrix (one attention, a recurrent model's) is returned as it is. NumPy
    arrays and tensors alike."""
    if weights.ndim == 2:
        return weights
    w = weights[-1 if layer is None else layer]
    return w.mean(0) if head is None else w[head]


def scaling_statistics(dims: list[int], n_keys: int = 20, samples: int = 2000, seed: int = 0) -> dict:
    """Why scaled dot-product attention divides by sqrt(d): measured on random vectors.

    For a query q and keys k_1..k_n with independent N(0, 1) entries, e_i = q . k_i has
    variance d, so the scores spread as sqrt(d) and softmax(e) saturates towards a one-hot
    vector (entropy -> 0, vanishing gradients) as d grows; e_i / sqrt(d) has variance 1
    whatever d, and the softmax keeps the same shape. Returns, per d in `dims`, the
    standard deviation of the scores and the mean softmax entropy (nats), without and with
    the 1/sqrt(d), beside the entropy of uniform weights, log n.
    """
    gen = torch.Generator().manual_seed(seed)
    out = {"d": list(dims), "n_keys": n_keys, "max_entropy": math.log(n_keys),
           "std_unscaled": [], "std_scaled": [], "entropy_unscaled": [], "entropy_scaled": []}
    for d in dims:
        q = torch.randn(samples, 1, d, generator=gen)
        k = torch.randn(samples, n_keys, d, generator=gen)
        e = (q * k).sum(-1)                                   # (samples, n) e_i = q . k_i
        for name, scores in (("unscaled", e), ("scaled", e / math.sqrt(d))):
            p = F.softmax(scores, -1)
            out[f"std_{name}"].append(float(scores.std()))
            out[f"entropy_{name}"].append(float(-(p * p.clamp_min(1e-30).log()).sum(-1).mean()))
    return out
