"""What may be chosen at a step: logits processors, each (prefix, scores, last) -> scores, the
interface of transformers' LogitsProcessor plus `last`, the rows at their final allowed step.
Every search applies one list of them (DecodeSettings.processors)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..loaded import Translator


class LogitsProcessor:
    """scores (R, V) of R rows whose chosen tokens so far are `prefix` (R, j) -> scores with some
    tokens ruled out (-inf) or reshaped. `last` (R,) bool: rows at their final allowed step."""

    def __call__(self, prefix: torch.Tensor, scores: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class NoRepeatNGram(LogitsProcessor):
    n: int

    def __call__(self, prefix, scores, last):
        return block_repeats(scores, prefix, self.n)


@dataclass(frozen=True)
class Temperature(LogitsProcessor):
    """softmax(logits / T): T < 1 sharpens, T > 1 flattens."""
    t: float

    def __call__(self, prefix, scores, last):
        return scores / self.t


@dataclass(frozen=True)
class TopK(LogitsProcessor):
    """Only the k highest-scoring tokens may be chosen."""
    k: int

    def __call__(self, prefix, scores, last):
        kth = scores.topk(min(self.k, scores.size(-1)), dim=-1).values[:, -1:]
        return scores.masked_fill(scores < kth, float("-inf"))


@dataclass(frozen=True)
class SuppressTokens(LogitsProcessor):
    """These tokens are never chosen (`first_only`: not as the first token)."""
    ids: tuple[int, ...]
    first_only: bool = False

    def __call__(self, prefix, scores, last):
        if self.first_only and prefix.size(1) > 0:
            return scores
        ids = [i for i in self.ids if 0 <= i < scores.size(-1)]
        return scores.index_fill(-1, torch.tensor(ids, device=scores.device), float("-inf")) if ids else scores


@dataclass(frozen=True)
class BadWords(LogitsProcessor):
    """No row may write one of these token sequences: the last token of each is ruled out
    where the row's prefix ends with the sequence's other tokens."""
    sequences: tuple[tuple[int, ...], ...]

    def __call__(self, prefix, scores, last):
        rows = prefix.tolist()
        ban = torch.zeros(scores.shape, dtype=torch.bool)
        for seq in self.sequences:
            *head, banned = seq
            if not 0 <= banned < scores.size(-1):
                continue
            for r, row in enumerate(rows):
                if not head or row[len(row) - len(head):] == head:
                    ban[r, banned] = True
        # out of place, as every processor: `scores` may be the step's own logits, whose
        # log-probs the Decoding reports
        return scores.masked_fill(ban.to(scores.device), float("-inf"))


@dataclass(frozen=True)
class ForceToken(LogitsProcessor):
    """Every other token is ruled out: at the first step (`at="first"`: a multilingual model's
    target language code), or at a row's last allowed step (`at="last"`: </s>)."""
    token: int
    at: str = "first"

    def __call__(self, prefix, scores, last):
        if self.at == "first":
            if prefix.size(1) > 0:
                return scores
            rows = torch.ones_like(last)
        else:
            rows = last
        if not bool(rows.any()):
            return scores
        forced = torch.full_like(scores, float("-inf"))
        # finite even where another processor ruled the token out: a row is never all -inf
        forced[:, self.token] = scores[:, self.token].clamp_min(torch.finfo(scores.dtype).min)
        return torch.where(rows[:, None], forced, scores)


def apply_processors(processors: Sequence[LogitsProcessor], prefix: torch.Tensor, scores: torch.Tensor,
                     last: torch.Tensor) -> torch.Tensor:
    for proc in processors:
        scores = proc(prefix, scores, last)
    return scores


def model_processors(tr: Translator) -> list[LogitsProcessor]:
    """A hub model's own constraints on which token is chosen (hub_model.HubSeq2Seq.constraints),
    as generate() applies them; none for the shipped models."""
    c = tr.model.constraints()
    if c is None:
        return []
    out: list[LogitsProcessor] = []
    single = tuple(w[0] for w in c["bad_words"] if len(w) == 1)
    longer = tuple(tuple(w) for w in c["bad_words"] if len(w) > 1)
    if single or c["suppress"]:
        out.append(SuppressTokens(single + tuple(c["suppress"])))
    if longer:
        out.append(BadWords(longer))
    if c["begin_suppress"]:
        out.append(SuppressTokens(tuple(c["begin_suppress"]), first_only=True))
    if c["forced_bos"] is not None:
        out.append(ForceToken(int(c["forced_bos"]), "first"))
    if c["forced_eos"] is not None:
        out.append(ForceToken(int(c["forced_eos"]), "last"))
    return out



def repeated_ngram_mask(prefix: torch.Tensor, n: int, vocab: int) -> torch.Tensor | None:
    """(R, j) token prefixes -> (R, V) True where the next token would repeat an n-gram:
    y is blocked after y_<j iff (y_{j-n+1}, ..., y_{j-1}, y) occurs in y_<j already.
    None when nothing can be blocked yet (n < 1 means off; a prefix shorter than n)."""
    R, j = prefix.shape
    if n < 1 or j < n:
        return None
    if n == 1:
        seen = prefix
    else:   # windows of n-1 tokens that a token follows, compared with the last n-1 tokens
        windows = prefix[:, :j - 1].unfold(1, n - 1, 1)                     # (R, j-n+1, n-1)
        match = (windows == prefix[:, None, j - n + 1:]).all(-1)             # (R, j-n+1)
        seen = prefix[:, n - 1:].masked_fill(~match, -1)                    # the tokens that followed
    mask = torch.zeros(R, vocab + 1, dtype=torch.bool, device=prefix.device)
    mask.scatter_(1, torch.where(seen < 0, vocab, seen), True)              # column V collects "none"
    return mask[:, :vocab]


def block_repeats(logp: torch.Tensor, prefix: torch.Tensor, n: int) -> torch.Tensor:
    """`logp` (R, V) with the tokens that would repeat an n-gram of `prefix` at -inf."""
    mask = repeated_ngram_mask(prefix, n, logp.size(-1))
    return logp if mask is None else logp.masked_fill(mask, float("-inf"))


