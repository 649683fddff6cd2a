"""Are all heads needed? Rank a Transformer's heads, tag their roles, prune them and watch BLEU.

Importance (Michel, Levy and Neubig 2019, "Are Sixteen Heads Really Better than One?"): a gate
xi_h multiplies head h's slice of the attention output before the output projection W_O
(s2s.hooks.scaled_heads), and

    I_h = mean over the pairs of |dL/dxi_h| at xi = 1,   L = -sum_t log p(y_t | y_<t, x)

the pair's summed teacher-forced loss (the log p forced decoding reports). Michel normalises
per layer: I_h / ||I_layer||_2, each kind's layer on its own; heads are pruned in order of
increasing normalised importance.

Confidence and roles (Voita, Talbot, Moiseev, Sennrich and Titov 2019, "Analyzing Multi-Head
Self-Attention: Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned"), measured on
the same pairs, every query of every pair counted once:

    confidence    the mean over queries of the head's largest weight, the closing </s> excluded
                  as a key (Voita's "excluding the end of sentence symbol")
    positional    (self-attention) one relative offset j - i takes the largest weight for at
                  least POSITIONAL (90%) of the queries; the offset is said (-1: the previous piece)
    rare-word     (encoder self-attention) the largest weight lands on the sentence's least
                  frequent source piece (by frequency in the model's training corpus; ties all
                  count) for at least RARE_SHARE (50%) of the queries AND at least RARE_OVER_CHANCE
                  (3) times what a head picking its key at random would score (the rare pieces'
                  share of the keys, averaged over queries). A majority, so the tag names the
                  head's habit rather than one sentence; three times chance, so that short
                  sentences, where the rare piece is one of four keys, cannot earn it alone
    to </s>       (encoder and cross-attention) the largest weight on the closing </s> for at
                  least TO_EOS (90%) of the queries: a head that reads nothing (Clark et al. 2019
                  call it a no-op); decoder self-attention has no </s> among its keys

Pruning: greedy decoding of held-out pairs (s2s.decode.greedy_batch_masks: several masks side by
side in one decoder batch, each row its own) scored by sacrebleu's BLEU
as heads are knocked out (s2s.hooks.knocked_out: xi_h = 0) 10% at a time, of all heads and of
each kind alone, in order of increasing importance and in a seeded random order.

    python -m s2s.heads importance --model checkpoints/en-fr-transformer --pairs data/tatoeba/test.tsv \\
        --limit 200 --json
    python -m s2s.heads prune --model checkpoints/en-fr-transformer --pairs data/tatoeba/test.tsv \\
        --limit 200 --steps 10 --json

A recurrent model has one attention and no heads: its knockout is the counterfactual attention
(s2s.counterfactual), and these commands say so.
"""
from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .checkpoint import Translator
from .data import Pair, read_pairs, split_pairs
from .decode import MASK_BATCH_ROWS, DecodeSettings, encode_source, greedy_batch_masks, pad_batch, usable_pairs
from .evaluate import bleu
from .hooks import (
    KINDS,
    RECURRENT_KNOCKOUT,
    decoder_input,
    decoder_start,
    forced_batch_pass,
    forced_pass,
    head_counts,
    is_recurrent,
    scaled_heads,
)
from .text import InputError

POSITIONAL = 0.9
TO_EOS = 0.9
RARE_SHARE = 0.5
RARE_OVER_CHANCE = 3.0
MAX_OFFSET = 512           # relative offsets counted (a source has at most 200 pieces, a decoding 250)
SCOPES = ("all", *KINDS)
ORDERS = ("importance", "random")
PRUNE_ROWS = MASK_BATCH_ROWS   # rows of one pruning batch: several masks side by side (docs/speed.md)

Progress = Callable[[float, str], None]      # (share done, what), as the attributions' progress


# ---------------------------------------------------------------------------------------
# The pairs


def read_scored_pairs(path: str | Path, limit: int | None = None) -> list[Pair]:
    """The first `limit` English<TAB>French pairs of a TSV; InputError, one line, for a missing,
    unreadable or empty file."""
    try:
        pairs = read_pairs(path)
    except FileNotFoundError:
        raise InputError(f"No pairs file at {path}.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"Cannot read the pairs file {path}: {getattr(e, 'strerror', None) or e}.") from None
    if limit is not None:
        if limit < 1:
            raise InputError(f"--limit must be at least 1, not {limit}.")
        pairs = pairs[:limit]
    if not pairs:
        raise InputError(f"{path} holds no English<TAB>French pairs.")
    return pairs


# ---------------------------------------------------------------------------------------
# Training-corpus frequencies (the rare-word role)


def training_corpus(tr: Translator) -> Path | None:
    """The training pairs of a shipped checkpoint, as its metrics.json records them: the split's
    train.tsv if it is on this machine, else the corpus the split is made from."""
    try:
        train = json.loads((Path(tr.path) / "metrics.json").read_text(encoding="utf-8"))["train"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    split = Path(train.get("split_dir") or "") / "train.tsv"
    if train.get("split_dir") and split.is_file():
        return split
    data = Path(train.get("data") or "")
    return data if train.get("data") and data.is_file() else None


@lru_cache(maxsize=4)
def _counts(path: str, split: bool, tokenizer) -> Counter:
    pairs = read_pairs(path)
    if split:               # the corpus itself: its train split, as s2s.train makes it
        pairs = split_pairs(pairs).train
    counts: Counter = Counter()
    for en, _ in pairs:         # every pair, as training read it (an English sentence with two translations: twice)
        counts.update(tokenizer.encode(en))
    return counts


def piece_frequencies(tr: Translator, frequencies: str | Path | None = None,
                      fallback: Sequence[Pair] = ()) -> tuple[Counter, str]:
    """(piece id -> count over English sentences, where the counts come from): `frequencies` (a
    TSV of pairs), else the checkpoint's training corpus, else `fallback` (the scored pairs
    themselves: a hub model's training corpus is not on this machine)."""
    if frequencies is not None:
        path = Path(frequencies)
        if not path.is_file():
            raise InputError(f"No frequencies file at {path}.")
        return _counts(str(path), False, tr.tokenizer), str(path)
    corpus = training_corpus(tr)
    if corpus is not None:
        split = corpus.name != "train.tsv"
        where = f"{corpus} (its train split)" if split else str(corpus)
        return _counts(str(corpus), split, tr.tokenizer), where
    counts: Counter = Counter()
    for en, _ in fallback:
        counts.update(tr.tokenizer.encode(en))
    return counts, "the scored pairs themselves (no training corpus on this machine)"


# ---------------------------------------------------------------------------------------
# One pair: the gradients with respect to the gates, and the weights


def pair_gradients(model, src_ids: Sequence[int], tgt_ids: Sequence[int]
                   ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """({kind: |dL/dxi| (layers, heads)}, {kind: weights (layers, heads, queries, keys)}) for one
    pair, L = -sum_t log p(y_t | y_<t, x) teacher-forced, xi = 1 (the model's own output)."""
    device = next(model.parameters()).device
    src = torch.tensor([list(src_ids)], device=device)
    tgt = torch.tensor(list(tgt_ids), device=device)
    gates = {k: torch.ones(n, device=device, requires_grad=True) for k, n in head_counts(model).items()}
    with torch.enable_grad(), scaled_heads(model, gates):
        p = forced_pass(model, src, decoder_input(model, tgt))
        logp = F.log_softmax(p.logits[0].float(), -1)
        loss = -logp[torch.arange(tgt.numel(), device=device), tgt].sum()
        grads = torch.autograd.grad(loss, list(gates.values()))
    return ({k: g.abs().detach() for k, g in zip(gates, grads)},
            {k: p.weights(k).detach().float() for k in KINDS})


class Stopped(Exception):
    """importance() stopped between two batches because its `stop` said so (a job's Stop): what
    was measured is not a ranking of the whole set, so nothing is returned."""


def batch_gradients(model, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int
                    ) -> tuple[dict[str, torch.Tensor], dict[str, list[torch.Tensor]]]:
    """pair_gradients of many pairs in one forward and one backward: ({kind: |dL_b/dxi_b|
    (B, layers, heads)}, {kind: [pair b's weights (layers, heads, queries, keys), unpadded]}).

    The pairs are padded on the right (s2s.hooks.forced_batch_pass: the source's padding masked
    out, the target's after every real position) and each row b has its own gates xi_b (B,
    layers, heads) (s2s.hooks.scaled_heads), so that the gradient of the summed loss
    sum_b L_b with respect to xi_b is L_b's alone, each L_b summed over its real positions:
    the same numbers as pair_gradients one pair at a time, up to float rounding."""
    device = next(model.parameters()).device
    srcs, tgts = [list(s) for s, _ in pairs], [list(t) for _, t in pairs]
    B = len(pairs)
    src = pad_batch(srcs, pad_id, device)
    src_len = torch.tensor([len(s) for s in srcs])
    start = decoder_start(model)
    tgt_in = pad_batch([[start] + t[:-1] for t in tgts], pad_id, device)
    tgt = pad_batch(tgts, 0, device)
    real = (torch.arange(tgt.size(1), device=device)[None, :]
            < torch.tensor([len(t) for t in tgts], device=device)[:, None])          # (B, T)
    gates = {k: torch.ones(B, *n, device=device, requires_grad=True) for k, n in head_counts(model).items()}
    with torch.enable_grad(), scaled_heads(model, gates):
        p = forced_batch_pass(model, src, src_len, tgt_in)
        logits = p.logits.float()
        # -log p(y_t) = logsumexp(logits_t) - logits_t[y_t]: the (B, T, V) log-softmax never made whole
        picked = logits.gather(-1, tgt[..., None])[..., 0]
        nll = (torch.logsumexp(logits, -1) - picked) if not _gives_log_probs(model) else -picked
        loss = nll.masked_fill(~real, 0.0).sum()
        grads = torch.autograd.grad(loss, list(gates.values()))
    weights = {}
    for k in KINDS:
        w = p.weights(k).detach()
        weights[k] = [w[b, :, :, :q, :n] for b, (q, n) in enumerate(_axes(k, len(s), len(t)) for s, t in pairs)]
    return {k: g.abs().detach() for k, g in zip(gates, grads)}, weights


def _gives_log_probs(model) -> bool:
    """A copying Transformer's forced pass gives log-probabilities (its pointer mixed in), not logits."""
    return getattr(model, "copy_gate", None) is not None


def _axes(kind: str, S: int, T: int) -> tuple[int, int]:
    """(queries, keys) of one pair's weights of `kind`: encoder (S, S), decoder (T, T), cross (T, S)."""
    return {"encoder": (S, S), "decoder": (T, T), "cross": (T, S)}[kind]


def length_batches(ids: Sequence[tuple[Sequence[int], Sequence[int]]], batch_size: int) -> list[list[int]]:
    """Indexes of `ids` (source, target) in batches of at most `batch_size`, sorted by length so
    that little of a batch is padding."""
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i][0]) + len(ids[i][1]), len(ids[i][0])))
    return [order[b:b + batch_size] for b in range(0, len(order), batch_size)]


@dataclass
class _RoleCounts:
    """Per kind, sums over every query of every pair, (layers, heads) each."""
    queries: torch.Tensor
    confidence: torch.Tensor
    to_eos: torch.Tensor
    offsets: torch.Tensor          # (layers, heads, 2 MAX_OFFSET + 1) counts of argmax offsets
    rare: torch.Tensor
    rare_chance: torch.Tensor

    @classmethod
    def zeros(cls, layers: int, heads: int) -> "_RoleCounts":
        z = (lambda *extra: torch.zeros(layers, heads, *extra, dtype=torch.float64))
        return cls(z(), z(), z(), z(2 * MAX_OFFSET + 1), z(), z())


def _count_roles(c: _RoleCounts, kind: str, w: torch.Tensor, src_ids: Sequence[int], eos: int,
                 rare_keys: torch.Tensor | None) -> None:
    """Add one pair's weights w (L, H, I, J) of one kind to the counts."""
    L, H, I, J = w.shape
    w = w.double().cpu()
    top = w.argmax(-1)                                                   # (L, H, I)
    c.queries += I
    if kind in ("encoder", "cross"):
        eos_key = max(j for j, i in enumerate(src_ids) if i == eos) if eos in src_ids else J - 1
        others = w.clone()
        others[..., eos_key] = -1.0
        c.confidence += others.max(-1).values.sum(-1)
        c.to_eos += (top == eos_key).sum(-1)
    else:
        c.confidence += w.max(-1).values.sum(-1)
    if kind in ("encoder", "decoder"):
        offset = (top - torch.arange(I)[None, None]).clamp(-MAX_OFFSET, MAX_OFFSET) + MAX_OFFSET
        c.offsets.scatter_add_(-1, offset, torch.ones_like(offset, dtype=torch.float64))
    if kind == "encoder" and rare_keys is not None:
        c.rare += rare_keys[top].sum(-1)
        c.rare_chance += float(rare_keys.sum()) / J * I


def _rare_keys(src_ids: Sequence[int], counts: Counter, skip: set[int]) -> torch.Tensor | None:
    """(J,) 1 at the sentence's least frequent source pieces (</s>, codes and prefixes' special
    ids left out), or None if it has no ordinary piece."""
    ids = [i for i in src_ids if i not in skip]
    if not ids:
        return None
    least = min(counts.get(i, 0) for i in ids)
    return torch.tensor([float(i not in skip and counts.get(i, 0) == least) for i in src_ids], dtype=torch.float64)


@dataclass
class HeadImportance:
    """What `importance` measures, every array {kind: (layers, heads)} as nested lists in to_json."""
    model: str
    pairs: int
    skipped: int
    importance: dict[str, np.ndarray]
    normalised: dict[str, np.ndarray]
    confidence: dict[str, np.ndarray]
    roles: dict[str, list[list[dict]]]
    frequency_source: str
    seconds: dict[str, float] = field(default_factory=dict)

    def order(self) -> list[tuple[str, int, int]]:
        """Every head, least important first (normalised importance; ties in kind, layer, head order)."""
        heads = [(float(self.normalised[k][l, h]), KINDS.index(k), l, h) for k in self.normalised
                 for l in range(self.normalised[k].shape[0]) for h in range(self.normalised[k].shape[1])]
        return [(KINDS[k], l, h) for _, k, l, h in sorted(heads)]

    @classmethod
    def from_json(cls, data: dict) -> HeadImportance:
        """Back from to_json's dict (results/head_importance.json, the Heads tab's measured one),
        its arrays as rounded there."""
        arrays = (lambda d: {k: np.asarray(v, dtype=float) for k, v in d.items()})
        return cls(data["model"], data["pairs"], data["skipped"], arrays(data["importance"]),
                   arrays(data["importance_normalised"]), arrays(data["confidence"]), data["roles"],
                   data["frequency_source"], dict(data.get("seconds", {})))

    def to_json(self, digits: int = 6) -> dict:
        r = (lambda d: {k: np.round(v, digits).tolist() for k, v in d.items()})
        return {"model": self.model, "pairs": self.pairs, "skipped": self.skipped,
                "importance": r(self.importance), "importance_normalised": r(self.normalised),
                "confidence": r(self.confidence), "roles": self.roles,
                "thresholds": {"positional": POSITIONAL, "to_eos": TO_EOS, "rare_word_share": RARE_SHARE,
                               "rare_word_over_chance": RARE_OVER_CHANCE},
                "frequency_source": self.frequency_source,
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()}}


def check_heads(tr: Translator) -> None:
    """InputError for a model without heads (a recurrent one)."""
    if is_recurrent(tr.model):
        raise InputError(RECURRENT_KNOCKOUT)


def importance(tr: Translator, pairs: Sequence[Pair], frequencies: str | Path | None = None,
               progress: Progress | None = None, *, batch_size: int = 16,
               stop: Callable[[], bool] | None = None) -> HeadImportance:
    """Michel's importance, Voita's confidence and the role tags of every head over `pairs`,
    `batch_size` pairs of similar lengths at a time in one forward and one backward
    (batch_gradients: the same numbers as pair_gradients one at a time). `stop`, asked between
    batches: when it says True, Stopped is raised."""
    check_heads(tr)
    if batch_size < 1:
        raise InputError(f"The batch size must be at least 1, not {batch_size}.")
    t0 = time.perf_counter()
    kept, srcs, tgts = usable_pairs(tr, pairs)
    ids, skipped = list(zip(srcs, tgts)), len(pairs) - len(kept)
    if not ids:
        raise InputError(f"None of the {len(pairs)} pairs fits this model (each side within its limits).")
    counts, source = piece_frequencies(tr, frequencies, pairs)
    t1 = time.perf_counter()
    tok = tr.tokenizer
    skip = {tok.eos_id, tok.bos_id, tok.pad_id} | set(getattr(tok, "hidden", ()))
    hf_tok = getattr(tok, "hf", None)
    if hf_tok is not None:
        skip |= {int(i) for i in hf_tok.all_special_ids}
    shapes = head_counts(tr.model)
    total = {k: torch.zeros(n, dtype=torch.float64) for k, n in shapes.items()}
    roles = {k: _RoleCounts.zeros(*n) for k, n in shapes.items()}
    done = 0
    for batch in length_batches(ids, batch_size):
        if stop is not None and stop():
            raise Stopped(f"stopped after {done} of {len(ids)} pairs")
        grads, weights = batch_gradients(tr.model, [ids[i] for i in batch], tok.pad_id)
        for k in KINDS:
            total[k] += grads[k].double().sum(0).cpu()
        for b, i in enumerate(batch):
            src = ids[i][0]
            rare = _rare_keys(src, counts, skip)
            for k in KINDS:
                _count_roles(roles[k], k, weights[k][b], src, tok.eos_id, rare)
        done += len(batch)
        if progress is not None:
            progress(done / len(ids), "importance")
    raw = {k: (v / len(ids)).numpy() for k, v in total.items()}
    norm = {k: v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-20) for k, v in raw.items()}
    conf = {k: (c.confidence / c.queries.clamp(min=1)).numpy() for k, c in roles.items()}
    tags = {k: _tags(k, c) for k, c in roles.items()}
    t2 = time.perf_counter()
    return HeadImportance(tr.name, len(ids), skipped, raw, norm, conf, tags, source,
                          {"frequencies": t1 - t0, "importance": t2 - t1, "total": t2 - t0})


# ---------------------------------------------------------------------------------------
# Before a long run: how long it will take, and whether the model fits in memory

MEMORY_FACTOR = 3.0     # importance holds the weights, a batch's activations and their gradients: ~3x the weights


def available_memory() -> int:
    """Bytes of memory this machine has free now (MemAvailable; all of it where /proc is absent)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import os
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def memory_line(parameters: int, available: int | None = None, bytes_per: int = 4) -> str | None:
    """One line saying why a model of `parameters` (fp32 on the CPU: `bytes_per` 4) cannot be
    measured here, with the estimate, or None where it fits (needed: MEMORY_FACTOR x its weights)."""
    need = parameters * bytes_per * MEMORY_FACTOR
    free = available_memory() if available is None else available
    if need <= free:
        return None
    return (f"This model has {parameters / 1e6:,.0f} M parameters: measuring its heads needs about {need / 2**30:,.1f} "
            f"GB of memory, and this machine has {free / 2**30:,.1f} GB free. Use a smaller model or a larger machine.")


def estimate_seconds(tr: Translator, pairs: Sequence[Pair], decodings: int = 0, batch_size: int = 16) -> dict:
    """How long importance() of `pairs` and `decodings` greedy decodings of them (prune_curves:
    prune_decodings of the model's heads) will take, from a timed first step of each: one batch
    of importance (its time per piece, scaled to every pair's pieces) and one decoder batch of at
    most `batch_size` of the pairs, as pruning decodes them (greedy_batch_masks: as many copies as
    fill PRUNE_ROWS rows; its time per row scaled to every pair, times `decodings`). An estimate, off
    by what batching gains or loses, made to tell minutes from hours before a run starts:
    {"importance", "pruning", "total", "measuring"} (seconds; "measuring": what it cost)."""
    check_heads(tr)
    t0 = time.perf_counter()
    _, srcs, tgts = usable_pairs(tr, pairs)
    ids = list(zip(srcs, tgts))
    if not ids:
        raise InputError(f"None of the {len(pairs)} pairs fits this model (each side within its limits).")
    first = length_batches(ids, batch_size)[0]
    t = time.perf_counter()
    batch_gradients(tr.model, [ids[i] for i in first], tr.tokenizer.pad_id)
    per_piece = (time.perf_counter() - t) / max(1, sum(len(ids[i][0]) + len(ids[i][1]) for i in first))
    out = {"importance": per_piece * sum(len(s) + len(t) for s, t in ids), "pruning": 0.0}
    if decodings > 0:
        texts = [en for en, _ in pairs][:batch_size]
        usable = [x for x in texts if _fits(tr, x)]
        if usable:      # one decoder batch as prune_curves runs it: masks side by side, about PRUNE_ROWS rows
            per = max(1, PRUNE_ROWS // len(usable))
            t = time.perf_counter()
            greedy_batch_masks(tr, usable, [()] * per)
            out["pruning"] = (time.perf_counter() - t) / (per * len(usable)) * len(pairs) * decodings
    out["total"] = out["importance"] + out["pruning"]
    out["measuring"] = time.perf_counter() - t0
    return out


def _fits(tr: Translator, text: str) -> bool:
    try:
        encode_source(tr, text)
        return True
    except InputError:
        return False


def duration(seconds: float) -> str:
    """"40 s", "12 min", "3.2 hours"."""
    return (f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400
            else f"{seconds / 3600:.1f} hours")


def _tags(kind: str, c: _RoleCounts) -> list[list[dict]]:
    """Per layer, per head: {"tags": [...], and each measured role's share (and offset, chance)}."""
    L, H = c.queries.shape
    out = []
    for l in range(L):
        row = []
        for h in range(H):
            q = max(float(c.queries[l, h]), 1.0)
            head: dict = {"tags": []}
            if kind in ("encoder", "decoder"):
                best = int(c.offsets[l, h].argmax())
                share = float(c.offsets[l, h, best]) / q
                head["positional"] = {"offset": best - MAX_OFFSET, "share": round(share, 4)}
                if share >= POSITIONAL:
                    head["tags"].append(f"positional ({best - MAX_OFFSET:+d})")
            if kind in ("encoder", "cross"):
                share = float(c.to_eos[l, h]) / q
                head["to_eos"] = {"share": round(share, 4)}
                if share >= TO_EOS:
                    head["tags"].append("to </s>")
            if kind == "encoder":
                share, chance = float(c.rare[l, h]) / q, float(c.rare_chance[l, h]) / q
                head["rare_word"] = {"share": round(share, 4), "chance": round(chance, 4)}
                if share >= RARE_SHARE and share >= RARE_OVER_CHANCE * chance:
                    head["tags"].append("rare word")
            row.append(head)
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------
# Pruning


def _scope_heads(order: Sequence[tuple[str, int, int]], scope: str) -> list[tuple[str, int, int]]:
    return [h for h in order if scope == "all" or h[0] == scope]


def prune_decodings(counts: dict[str, tuple[int, int]], steps: int = 10, scopes: Sequence[str] = SCOPES) -> int:
    """At most how many greedy decodings prune_curves runs for a model of `counts` ({kind: (layers,
    heads)}, hooks.head_counts): one with no head knocked out, one with all of each scope's, and one
    per step between for each order (fewer only where two orders' first heads coincide)."""
    total = 1
    for scope in scopes:
        n = sum(l * h for k, (l, h) in counts.items() if scope in ("all", k))
        knocked = {min(n, round(n * k / 10)) for k in range(steps + 1)}
        total += 2 * len(knocked - {0, n}) + (n > 0 and n in knocked)
    return total


@dataclass(frozen=True)
class PrunePlan:
    """What a pruning run decodes: the usable pairs (`sources`, `refs`; `skipped` did not fit),
    each curve's (scope, order, heads in the order they go, heads knocked out at each point), and
    every distinct mask, fewest heads first, so that every curve advances together."""
    model: str
    sources: list[str]
    refs: list[str]
    skipped: int
    steps: int
    seed: int
    curves: list[tuple[str, str, list[tuple[str, int, int]], list[int]]]
    masks: list[tuple]


def prune_plan(tr: Translator, pairs: Sequence[Pair], ranked: HeadImportance, steps: int = 10, seed: int = 0,
               scopes: Sequence[str] = SCOPES) -> PrunePlan:
    """The masks prune_curves decodes and the curves they make (InputError, one line, for a model
    without heads, steps out of 1-10, an unknown scope, or no pair that fits)."""
    check_heads(tr)
    if not 1 <= steps <= 10:
        raise InputError(f"--steps is how many 10% steps to take, 1 to 10, not {steps}.")
    for s in scopes:
        if s not in SCOPES:
            raise InputError(f"Unknown scope {s!r}: use {', '.join(SCOPES)}.")
    usable = []
    for en, fr in pairs:
        try:
            encode_source(tr, en)
            usable.append((en, fr))
        except InputError:
            pass
    if not usable:
        raise InputError(f"None of the {len(pairs)} pairs fits this model.")
    order = ranked.order()
    plans = []
    for scope in scopes:
        heads = _scope_heads(order, scope)
        shuffled = list(heads)
        random.Random(seed).shuffle(shuffled)
        for name, seq in (("importance", heads), ("random", shuffled)):
            counts = sorted({min(len(seq), round(len(seq) * k / 10)) for k in range(steps + 1)})
            plans.append((scope, name, seq, counts))
    masks = {tuple(sorted(seq[:n])) for _, _, seq, counts in plans for n in counts}
    return PrunePlan(tr.name, [en for en, _ in usable], [fr for _, fr in usable], len(pairs) - len(usable), steps,
                     seed, plans, sorted(masks, key=len))


def prune_result(plan: PrunePlan, scores: dict[tuple, float], seconds: float = 0.0) -> dict:
    """prune_curves' result from the masks decoded so far (`scores`: mask -> BLEU): each curve's
    points only where measured (a curve's masks are decoded fewest heads first, so its points are
    the first ones), `bleu` None until the mask with no head out is decoded, `complete` whether
    every mask is."""
    base = scores.get(())
    curves = []
    for scope, name, seq, counts in plan.curves:
        points = [{"share": round(n / len(seq), 4), "heads": n, "bleu": round(scores[tuple(sorted(seq[:n]))], 2)}
                  for n in counts if tuple(sorted(seq[:n])) in scores]
        curves.append({"scope": scope, "order": name, "of": len(seq), "points": points,
                       "heads_before_drop_of_1": first_drop(points, base) if base is not None else 0,
                       "pruned_order": [f"{k}:{l + 1}.{h + 1}" for k, l, h in seq]})
    return {"model": plan.model, "pairs": len(plan.sources), "skipped": plan.skipped,
            "bleu": None if base is None else round(base, 2), "steps": plan.steps, "seed": plan.seed,
            "decodings": len(plan.masks), "curves": curves, "seconds": round(seconds, 2),
            "decoded": sum(m in scores for m in plan.masks), "complete": all(m in scores for m in plan.masks)}


def prune_curves(tr: Translator, pairs: Sequence[Pair], ranked: HeadImportance, steps: int = 10, seed: int = 0,
                 scopes: Sequence[str] = SCOPES, progress: Progress | None = None, *,
                 scores: dict[tuple, float] | None = None, stop: Callable[[], bool] | None = None) -> dict:
    """BLEU of greedy decoding of `pairs` as heads are knocked out 10% at a time (of the scope's
    heads, rounded), `steps` steps, in order of increasing importance (`ranked`) and in a
    random order (seeded). One decoding per distinct mask (no head knocked out: once), fewest
    heads first.

    Resumable and stoppable: `scores` (mask tuple -> BLEU) holds masks decoded already, which are
    skipped, and is filled in place as each mask is decoded; `stop()` is asked between decoder
    batches (about PRUNE_ROWS rows: several masks side by side, greedy_batch_masks),
    and once it says True the result so far is returned (prune_result: `complete` False).
    `progress(share, "pruning")`: the share of the masks decoded, those kept included."""
    plan = prune_plan(tr, pairs, ranked, steps, seed, scopes)
    scores = {} if scores is None else scores
    t0 = time.perf_counter()
    todo = [m for m in plan.masks if m not in scores]
    # several masks side by side in one decoder batch of about PRUNE_ROWS rows (greedy_batch_masks):
    # on a CPU the output layer's weights are read once a step for all of them
    per = max(1, PRUNE_ROWS // len(plan.sources))
    for start in range(0, len(todo), per):
        if stop is not None and stop():
            break
        chunk = todo[start:start + per]
        for mask, hyps in zip(chunk, greedy_batch_masks(tr, plan.sources, chunk, DecodeSettings("greedy"),
                                                        rows=PRUNE_ROWS)):
            scores[mask] = bleu(hyps, plan.refs)
        if progress is not None:
            progress(sum(m in scores for m in plan.masks) / len(plan.masks), "pruning")
    return prune_result(plan, scores, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------
# What a pruning run says, against the published claims

# Michel, Levy and Neubig 2019: up to 20% of a WMT Transformer's heads pruned "without incurring any
# noticeable negative impact", encoder-decoder attention the most dependent on multi-headedness.
# Voita et al. 2019: 38 of 48 encoder heads of a WMT En-Ru model pruned for 0.15 BLEU.
MICHEL_SHARE = 0.2
VOITA_HEADS, VOITA_OF, VOITA_BLEU = 38, 48, 0.15
KIND_NAMES = {"all": "all heads", "cross": "cross-attention", "encoder": "encoder self-attention",
              "decoder": "decoder self-attention"}


def first_drop(points: Sequence[dict], base: float, drop: float = 1.0) -> int:
    """The most heads knocked out before BLEU first falls more than `drop` below `base` (points in
    order of heads knocked out, the first with none)."""
    kept = 0
    for p in points:
        if p["bleu"] < base - drop:
            break
        kept = p["heads"]
    return kept


def drop_at(points: Sequence[dict], base: float, drop: float = 1.0) -> int | None:
    """How many heads are knocked out at the first point whose BLEU is more than `drop` below
    `base`, None if none is."""
    return next((p["heads"] for p in points if p["bleu"] < base - drop), None)


def most_within(points: Sequence[dict], base: float, drop: float = 1.0) -> int:
    """The most heads knocked out at any point whose BLEU is still within `drop` of `base` (a curve
    that dips and recovers counts its recovery)."""
    return max((p["heads"] for p in points if p["bleu"] >= base - drop), default=0)


def _compared(heads: int, of: int, share: float) -> str:
    """"more", "as many" or "fewer" heads than `share` of `of`, rounded to a whole head."""
    target = round(share * of)
    return "more" if heads > target else "as many" if heads == target else "fewer"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _pct(n: int, of: int) -> str:
    return f"{100 * n / max(of, 1):.0f}%"


def pruning_summary(result: dict) -> dict:
    """What a pruning run (prune_curves' result, or results/head_pruning.json) says against Michel
    et al.'s and Voita et al.'s claims, every figure read from its curves: {"sentence": the text,
    "bleu", "all": {order: {"heads", "of", "share"}} (heads knocked out before BLEU first falls
    more than 1), "kinds": {kind: {"mean_bleu" (over its least-important-first curve),
    "first_drop", "drop_at", "most_within_1", "of"}}, "needs_heads_most", "spares_heads_most"
    (the kinds with the lowest and highest mean, None with fewer than two kinds), "michel" and
    "voita" (how many heads go here against their claims: "more", "as many", "fewer"; None where
    the curve they need is missing)}."""
    base = float(result["bleu"])
    curves = {(c["scope"], c["order"]): c for c in result.get("curves", [])}
    out: dict = {"bleu": base, "all": {}, "kinds": {}, "needs_heads_most": None, "spares_heads_most": None,
                 "michel": None, "voita": None}
    for order in ORDERS:
        c = curves.get(("all", order))
        if c is not None:
            n = first_drop(c["points"], base)
            out["all"][order] = {"heads": n, "of": c["of"], "share": round(n / max(c["of"], 1), 4)}
    for kind in KINDS:
        c = curves.get((kind, "importance"))
        if c is not None:
            out["kinds"][kind] = {"mean_bleu": round(float(np.mean([p["bleu"] for p in c["points"]])), 2),
                                  "first_drop": first_drop(c["points"], base), "drop_at": drop_at(c["points"], base),
                                  "most_within_1": most_within(c["points"], base), "of": c["of"]}
    said = []
    ranked = out["all"].get("importance")
    if ranked is not None:
        out["michel"] = _compared(ranked["heads"], ranked["of"], MICHEL_SHARE)
        rand = out["all"].get("random")
        said.append(f"Least important first, {ranked['heads']} of the {ranked['of']} heads "
                    f"({_pct(ranked['heads'], ranked['of'])}) go before BLEU falls more than 1 below the whole "
                    f"model's {base:.1f}"
                    + (f" (random order: {rand['heads']}, {_pct(rand['heads'], rand['of'])})" if rand else "")
                    + f"; Michel et al. lost nothing noticeable with {MICHEL_SHARE:.0%} gone: {out['michel']} go here.")
    kinds = out["kinds"]
    if len(kinds) >= 2:
        by_mean = sorted(kinds, key=lambda k: (kinds[k]["mean_bleu"], KINDS.index(k)))
        most, least = by_mean[0], by_mean[-1]
        out["needs_heads_most"], out["spares_heads_most"] = most, least
        agree = ("as Michel et al. found for encoder-decoder attention" if most == "cross" else
                 "where Michel et al. found encoder-decoder attention the most dependent: not so here")
        said.append(f"{_capital(KIND_NAMES[most])} needs its heads most (mean BLEU {kinds[most]['mean_bleu']:.1f} "
                    f"over its curve; {KIND_NAMES[least]} {kinds[least]['mean_bleu']:.1f}), {agree}.")
    elif len(kinds) == 1 and "encoder" not in kinds:       # one kind alone: its own count, no comparison
        (kind, k), = kinds.items()
        said.append(f"{_capital(KIND_NAMES[kind])}: {k['first_drop']} of its {k['of']} heads "
                    f"({_pct(k['first_drop'], k['of'])}) go before BLEU falls more than 1 below the whole model's "
                    f"{base:.1f}.")
    enc = kinds.get("encoder")
    if enc is not None:
        n, at, m, of = enc["first_drop"], enc["drop_at"], enc["most_within_1"], enc["of"]
        out["voita"] = _compared(m, of, VOITA_HEADS / VOITA_OF)
        held = (f"{m} of its {of} heads ({_pct(m, of)}) go before BLEU falls more than 1" if n == m else
                f"BLEU falls more than 1 with {at} of its {of} heads gone, yet is within 1 with {m} ({_pct(m, of)}) "
                "gone")
        said.append(f"Encoder self-attention: {held}; Voita et al. pruned {VOITA_HEADS} of {VOITA_OF} "
                    f"({_pct(VOITA_HEADS, VOITA_OF)}) for {VOITA_BLEU} BLEU: {out['voita']} go here.")
    out["sentence"] = " ".join(said)
    return out
