"""Is attention an explanation? Attention against attributions, and counterfactual attention.

Attention says where the decoder read the source at step j. Whether those weights say what
*drove* the output y_j is a separate question (Jain & Wallace 2019, "Attention is not
Explanation", asked it for text classifiers; here it is asked of translation). Three
attributions of log p(y_j | y_<j, x) to the source pieces x_1..x_m (</s> included), with
e_i the embedding of x_i, measure that directly:

    gradient x input      a_ij = (d log p(y_j | y_<j, x) / d e_i) . e_i
                          (the gradient with respect to x_i's one-hot input, first order)
    integrated gradients  a_ij = (e_i - e'_i) . int_0^1 d log p(y_j | y_<j, e' + t (e - e')) / d e_i dt
                          (Sundararajan et al. 2017) from the all-zero baseline e' = 0, by
                          Gauss-Legendre quadrature (captum), IG_STEPS points per segment of
                          [0, 1], segments halved where the path is steep; completeness:
                          sum_i a_ij = log p(y_j | x) - log p(y_j | e' = 0)
    leave-one-out         a_ij = log p(y_j | y_<j, x) - log p(y_j | y_<j, x with x_i -> <unk>)
                          (the same output y forced in both: how much worse y_j gets without x_i)

The output y is the model's own greedy translation, or a given reference, forced either
way. Agreement of attention alpha_j with each attribution, per target token, is Kendall's
tau-b between alpha_ij and |a_ij| over i (the magnitude: attention cannot be negative, and
Jain & Wallace compare importance the same way), and whether both put their maximum on the
same source piece.

Counterfactual attention at step j (everything before j as decoded, the decoder state s_j
unchanged): replace alpha_j by

    uniform       1/m on every source piece
    permute       a random permutation of alpha_j (the same multiset of weights)
    adversarial   argmax_a JSD(a, alpha_j)  subject to  TV(p(. | a), p(. | alpha_j)) <= epsilon

and read the next-token distribution, the Jensen-Shannon divergence moved (bits, 0..1),
the total variation TV(p, q) = 1/2 sum_y |p_y - q_y| it caused, and the greedy continuation
from there (later steps attend as the model does). The adversary is found by gradient
ascent (Adam) on the logits z of a = softmax(z) from ADV_RESTARTS random starts, with the
penalty ADV_PENALTY * max(0, TV - epsilon); the last iterate is then pulled back towards alpha_j
along (1 - t) alpha_j + t a (bisection on t) until TV <= epsilon holds, so the answer
always satisfies the constraint.

    python -m s2s.explain --model checkpoints/en-fr-additive --json -- "I went to the lecture."
    python -m s2s.explain --model DIR --reference "Je suis allé au cours." -- "I went to the lecture."
    python -m s2s.explain --model DIR --counterfactual 2 --kind adversarial -- "I went to the lecture."
    python -m s2s.explain --model DIR --test examples/test_long.tsv --limit 200 --max-words 30 --json

--json prints source_tokens, target_tokens, attention (len(target_tokens) rows of
len(source_tokens) weights), attributions (per method, rows of the same shape), kendall_tau
(per method, one value per target token; null where a row is constant), argmax_agreement,
token_log_probs, the integration settings and completeness error, and with --counterfactual
a counterfactual object. --test prints, over the first --limit pairs of a TSV (English, French)
whose English has at most --max-words words, each forced with its French: the quantiles of
tau per method, the argmax agreement shares, the share of steps whose argmax survives a
random permutation of alpha_j, and the integration's completeness.

Bad input (a missing model, a model without attention, empty or too long text) gives one
line on stderr starting with "error:" and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .checkpoint import CheckpointError, Translator, load_translator
from .decode import encode_source, forced, greedy
from .model import Memory, Seq2Seq, State
from .text import MAX_DECODE_LEN, InputError, check_range, clean_text
from .tokenizer import BOS, EOS, UNK

METHODS = ("grad_x_input", "integrated_gradients", "leave_one_out")
SHORT = {"grad_x_input": "grad x input", "integrated_gradients": "integrated grad.", "leave_one_out": "leave-one-out"}
KINDS = ("uniform", "permute", "adversarial")
IG_STEPS = 16             # Gauss-Legendre points per segment of the path (integrated_gradients)
IG_SPLITS = 3             # a segment is halved at most this often: up to 8 segments, 128 points
IG_TOLERANCE = 0.01       # completeness budget per token, in nats: 1% of (1 + |log p(y|x) - log p(y|0)|)
TRANSFORMER_GROUPS = 8    # a Transformer's rows decode in this many groups, each only as far as it is scored
MAX_SOURCE_PIECES = 100   # attributions cost ~ (target length)^2: a few sentences, not a page
MAX_TARGET_PIECES = 150
EPSILON = 0.01            # the adversary's TV budget: no set of tokens gains or loses more than 1 point
ADV_RESTARTS, ADV_ITERATIONS, ADV_LR, ADV_PENALTY = 8, 150, 0.1, 100.0
TOP = 5                   # next tokens shown before / after a counterfactual


# ---------------------------------------------------------------------------------------
# Forced decoding as a differentiable function of the source embeddings


def _prefix(memory: Memory, n: int) -> Memory:
    """The first n rows of a Memory, as views (no copy)."""
    return Memory(memory.states[:n], None if memory.keys is None else memory.keys[:n], memory.mask[:n],
                  memory.summary[:n], memory.mask_bias[:n], None if memory.src is None else memory.src[:n])


def step_log_probs(model: Seq2Seq, x: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor,
                   last: torch.Tensor) -> torch.Tensor:
    """log p(y_{last_r} | y_<last_r, x_r) for each row r: source embeddings x (R, S, E) of
    the sentence src (1, S), the forced target tgt (T,) and the step last (R,) to score.

    Row r needs only decoder steps 0..last_r, so rows are sorted by last (descending) and
    the batch shrinks as rows finish: the work is about half of R full decodings. The
    output layer (8000 x 256) runs only for the rows that end at each step. (Shrinking at
    every step costs a full-size gradient buffer per step for the memory's slices in the
    backward pass, and still beats shrinking in fewer, bigger steps: measured.)"""
    R = x.size(0)
    order = torch.argsort(last, descending=True, stable=True)
    x, last_sorted = x[order], last[order].tolist()
    memory, state = model.encode(src.expand(R, -1), torch.full((R,), src.size(1)), embedded=x)
    feed = model.initial_feed(R)
    y_in = torch.cat([tgt.new_tensor([BOS]), tgt[:-1]])
    chunks, n = [], R                   # the batch: rows [0, n) still decode
    for k in range(last_sorted[0] + 1):
        st = model.step(y_in[k].expand(n), state, feed, memory, with_logits=False)
        going_on = sum(1 for v in last_sorted if v > k)
        if going_on < n:                # rows [going_on, n) end here (sorted descending)
            a, b = going_on, n
            logits = model.output(st.feed[a:b])
            if model.copy_gate is not None:
                logits = model.point(logits, st.alpha[a:b], memory.src[a:b], st.context[a:b], st.state[0][a:b])
            chunks.append(F.log_softmax(logits, dim=-1)[:, tgt[k]])       # in the model's precision (tests: float64)
        n = going_on
        state, feed, memory = tuple(s[:n] for s in st.state), st.feed[:n], _prefix(memory, n)
    out_sorted = torch.cat(chunks[::-1])          # the chunks cover the rows from the last to the first
    return out_sorted[torch.argsort(order)]


def _bos(model) -> int:
    """The decoder's start token: a hub model's own (its tokenizer's), else the shipped BOS."""
    return getattr(getattr(model, "tokenizer", None), "bos_id", BOS)


def _unk(model) -> int:
    """What leave-one-out puts in a piece's place: <unk> (a hub model's own; its <pad> if it has none)."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return UNK
    return tok.unk_id if tok.unk_id is not None else tok.pad_id


def row_log_probs(model, x: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """log p(y_{last_r} | y_<last_r, x_r) for each row r, from source embeddings x (R, S, E):
    a recurrent model decodes step by step (step_log_probs); a Transformer, ours or a hub
    model's, decodes each row in one teacher-forced pass (no recurrence: nothing waits for
    the previous step) and runs its output layer only at the step the row asks for (logits_at)."""
    if isinstance(model, Seq2Seq):
        return step_log_probs(model, x, src, tgt, last)
    tgt_in = torch.cat([tgt.new_tensor([_bos(model)]), tgt[:-1]])
    order = torch.argsort(last, stable=True)
    out = []
    for rows in order.tensor_split(TRANSFORMER_GROUPS):     # rows sorted by step, so a group decodes only
        if rows.numel() == 0:                               # up to its own last step (causal: later ones
            continue                                        # cannot change it)
        R = rows.numel()
        logits = model.logits_at(src.expand(R, -1), torch.full((R,), src.size(1)), tgt_in.expand(R, -1), last[rows],
                                 embedded=x[rows])
        logp = F.log_softmax(logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits, dim=-1)
        out.append(logp[torch.arange(R, device=x.device), tgt[last[rows]]])
    return torch.cat(out)[torch.argsort(order)]


# ---------------------------------------------------------------------------------------
# Attributions


def _source_embeddings(model: Seq2Seq, src: torch.Tensor) -> torch.Tensor:
    return model.embed(src)[0].detach()           # (S, E)


def grad_x_input(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> np.ndarray:
    """(T, S): a_ij = (d log p(y_j | y_<j, x) / d e_i) . e_i, one backward pass for all j
    (row j of the batch is a copy of the sentence scored at step j, so its gradient is
    that of log p(y_j) alone)."""
    T = tgt.numel()
    x = _source_embeddings(model, src).expand(T, -1, -1).clone().requires_grad_(True)
    logp = row_log_probs(model, x, src, tgt, torch.arange(T, device=x.device))
    (grad,) = torch.autograd.grad(logp.sum(), x)
    return (grad * x).sum(-1).detach().double().cpu().numpy()


def integrated_gradients(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor, steps: int = IG_STEPS,
                         splits: int = IG_SPLITS) -> tuple[np.ndarray, np.ndarray]:
    """(T, S) integrated gradients from the zero embedding, and per target token the
    completeness error sum_i a_ij - (log p(y_j | x) - log p(y_j | 0)).

    The baseline is all zeros rather than the <pad> embedding. <pad> never enters the
    encoder (padding is packed away), and as the output layer is tied to the embedding, its
    row (not zero: entries up to 0.54 in en-fr-additive) was trained only to make <pad>
    an unlikely output: it means no more "no input" than zero does, and zero keeps IG what
    the paper defines on embeddings, the input scaled up from nothing. </s> is scaled like
    every piece, so completeness holds over all S.

    The integral is adaptive Gauss-Legendre quadrature. Along the path t e, log p(y_j)
    mostly changes smoothly, but late in long outputs it can rise by nats within a few
    hundredths of t (attention snapping onto the source as the embeddings grow), which
    `steps` points over [0, 1] miss (on test_long.tsv, 16 points leave a median error of 3%
    and 10% of the tokens above 45% with en-fr-dot). IG is additive over pieces of the path,
    so each token starts as one segment [0, 1], and a segment [a, b] whose own error
    sum_i a_ij - (log p(y_j | b e) - log p(y_j | a e)) exceeds its share of the budget,
    IG_TOLERANCE * (1 + |log p(y_j | x) - log p(y_j | 0)|) * (b - a), is halved, at most
    `splits` times. Each round is one captum call over all open segments of all tokens: a
    batched forward of (segments x steps) interpolated sentences and one backward pass."""
    from captum.attr import IntegratedGradients  # imported here: it pulls in matplotlib (~0.7 s)
    ig = IntegratedGradients(lambda emb, rows_last: row_log_probs(model, emb, src, tgt, rows_last))
    e = _source_embeddings(model, src)
    T, S = tgt.numel(), src.size(1)

    @torch.no_grad()
    def logp_at(t: torch.Tensor, j: torch.Tensor) -> torch.Tensor:       # log p(y_j | t e), row by row
        return row_log_probs(model, t[:, None, None] * e, src, tgt, j).double()

    every = torch.arange(T, device=e.device)
    ends = logp_at(torch.cat([torch.ones(T), torch.zeros(T)]).to(e), torch.cat([every, every]))
    budget = IG_TOLERANCE * (1 + (ends[:T] - ends[T:]).abs())
    attr = torch.zeros(T, S, dtype=torch.float64, device=e.device)
    error = torch.zeros(T, dtype=torch.float64, device=e.device)
    # the open segments: token j, path from t = a to t = b, log p(y_j) at both ends
    j, a, b, f_a, f_b = every, torch.zeros(T).to(e), torch.ones(T).to(e), ends[T:], ends[:T]
    for round_ in range(splits + 1):
        piece = ig.attribute(b[:, None, None] * e, baselines=a[:, None, None] * e, additional_forward_args=(j,),
                             n_steps=steps, method="gausslegendre").sum(-1).detach().double()
        err = piece.sum(1) - (f_b - f_a)
        done = (err.abs() <= budget[j] * (b - a)) | (round_ == splits)
        attr.index_add_(0, j[done], piece[done])
        error.index_add_(0, j[done], err[done])
        if bool(done.all()):
            break
        open_ = ~done
        j, a, b, f_a, f_b = j[open_], a[open_], b[open_], f_a[open_], f_b[open_]
        mid = (a + b) / 2
        f_mid = logp_at(mid, j)
        j, a, b = j.repeat(2), torch.cat([a, mid]), torch.cat([mid, b])
        f_a, f_b = torch.cat([f_a, f_mid]), torch.cat([f_mid, f_b])
    return attr.cpu().numpy(), error.cpu().numpy()


@torch.inference_mode()
def forced_log_probs(model: Seq2Seq, src_rows: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """(R, T) log p(y_j | y_<j, x_r) of one forced target for R source rows of one length,
    decoded together (decode_step: the inference path)."""
    R, T = src_rows.size(0), tgt.numel()
    lengths = torch.full((R,), src_rows.size(1))
    if not isinstance(model, Seq2Seq):      # a Transformer: every position in one pass
        tgt_in = torch.cat([tgt.new_tensor([_bos(model)]), tgt[:-1]]).expand(R, -1)
        logits, _ = model(src_rows, lengths, tgt_in)
        return F.log_softmax(logits.float(), dim=-1)[:, torch.arange(T, device=tgt.device), tgt]
    memory, state = model.encode(src_rows, lengths)
    feed = model.initial_feed(R)
    y = torch.full((R,), BOS, dtype=torch.long, device=src_rows.device)
    out = []
    for j in range(T):
        st = model.decode_step(y, state, feed, memory)
        state, feed = st.state, st.feed
        out.append(F.log_softmax(st.logits.float(), dim=-1)[:, tgt[j]])
        y = tgt[j].expand(R)
    return torch.stack(out, 1)


def leave_one_out(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> np.ndarray:
    """(T, S): a_ij = log p(y_j | y_<j, x) - log p(y_j | y_<j, x with x_i -> <unk>) for
    every piece, </s> included; the sentence and its S variants decoded as one batch."""
    S = src.size(1)
    rows = src.repeat(S + 1, 1)
    rows[torch.arange(1, S + 1), torch.arange(S)] = _unk(model)   # row i + 1 lacks piece i
    logp = forced_log_probs(model, rows, tgt).double()
    return (logp[0:1] - logp[1:]).t().cpu().numpy()


# ---------------------------------------------------------------------------------------
# Agreement


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


# ---------------------------------------------------------------------------------------
# One explanation


@dataclass
class Explanation:
    source_tokens: list[str]
    target_tokens: list[str]
    target_ids: list[int]
    translation: str
    forced_from: str                      # "greedy" (the model's own output) or "reference"
    token_log_probs: list[float]
    attention: np.ndarray                 # (T, S)
    attributions: dict[str, np.ndarray]   # method -> (T, S)
    ig_delta: np.ndarray | None           # (T,) completeness error of integrated gradients
    ig_steps: int
    seconds: dict[str, float] = field(default_factory=dict)

    def kendall_tau(self) -> dict[str, list[float]]:
        return {m: agreement(self.attention, a)[0] for m, a in self.attributions.items()}

    def argmax_agreement(self) -> dict[str, list[bool]]:
        return {m: agreement(self.attention, a)[1] for m, a in self.attributions.items()}

    def to_json(self) -> dict:
        return {"source_tokens": self.source_tokens, "target_tokens": self.target_tokens,
                "translation": self.translation, "forced_from": self.forced_from,
                "token_log_probs": self.token_log_probs, "attention": self.attention.tolist(),
                "attributions": {m: a.tolist() for m, a in self.attributions.items()},
                "kendall_tau": {m: [_finite(t) for t in ts] for m, ts in self.kendall_tau().items()},
                "argmax_agreement": self.argmax_agreement(),
                "integrated_gradients": {
                    "baseline": "zero embeddings", "steps": self.ig_steps, "method": "gausslegendre",
                    "completeness_error": None if self.ig_delta is None else self.ig_delta.tolist()},
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()}}


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None        # JSON has no NaN


def check_model(tr: Translator) -> None:
    """Attributions need attention to compare with: any model but the fixed-vector one."""
    if tr.model.cfg.attention == "none":
        raise InputError(f"{tr.name} has no attention to compare (a fixed-vector model): pick an attention model.")


def check_counterfactual(tr: Translator) -> None:
    """Counterfactual attention replaces a recurrent decoder's one attention per step."""
    check_model(tr)
    if getattr(tr.model.cfg, "arch", "rnn") != "rnn":
        raise InputError(f"{tr.name} is a Transformer: a counterfactual replaces a recurrent decoder's one "
                         "attention per step, and a Transformer has layers × heads of it; pick a recurrent "
                         "attention model for this part.")


def source_ids(tr: Translator, text: str) -> list[int]:
    """The source pieces ending in </s>, refused beyond MAX_SOURCE_PIECES."""
    src = encode_source(tr, text)
    if len(src) > MAX_SOURCE_PIECES:
        raise InputError(f"The text is {len(src)} pieces long; explaining is limited to {MAX_SOURCE_PIECES}. "
                         "Try one or two sentences.")
    return src


def target_ids(tr: Translator, text: str, reference: str | None) -> tuple[list[int], str]:
    """The output to explain: the reference's pieces, or the model's greedy translation."""
    if reference is not None:
        ids = tr.tokenizer.target_ids(clean_text(reference, what="reference"))
        frm = "reference"
    else:
        ids = greedy(tr, text).target_ids
        frm = "greedy"
    if len(ids) > MAX_TARGET_PIECES:
        raise InputError(f"The {'reference' if reference is not None else 'translation'} is {len(ids)} pieces long; "
                         f"explaining is limited to {MAX_TARGET_PIECES}.")
    return ids, frm


def explain(tr: Translator, text: str, reference: str | None = None, methods: Sequence[str] = METHODS,
            ig_steps: int = IG_STEPS) -> Explanation:
    """Attention and the attributions of `methods` for the greedy translation of `text`
    (or for `reference`), both under forced decoding of that output."""
    check_model(tr)
    check_range("Integration steps", ig_steps, 2, 256)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InputError(f"Unknown attribution {unknown[0]!r}: use {', '.join(METHODS)}.")
    seconds, t = {}, time.perf_counter()
    src_list = source_ids(tr, text)
    tgt_list, frm = target_ids(tr, text, reference)
    d = forced(tr, text, reference_ids=tgt_list)
    seconds["decode"] = time.perf_counter() - t
    model, device = tr.model, tr.device
    src = torch.tensor([src_list], device=device)
    tgt = torch.tensor(tgt_list, device=device)
    attributions, delta = {}, None
    for m in methods:
        t = time.perf_counter()
        if m == "grad_x_input":
            attributions[m] = grad_x_input(model, src, tgt)
        elif m == "integrated_gradients":
            attributions[m], delta = integrated_gradients(model, src, tgt, ig_steps)
        else:
            attributions[m] = leave_one_out(model, src, tgt)
        seconds[m] = time.perf_counter() - t
    seconds["total"] = sum(seconds.values())
    return Explanation(d.source_tokens, d.target_tokens, list(tgt_list), d.translation, frm, d.token_log_probs,
                       d.attention, attributions, delta, ig_steps, seconds)


# ---------------------------------------------------------------------------------------
# Counterfactual attention


def jsd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence in bits over the last axis: 1/2 KL(p||m) + 1/2 KL(q||m), m = (p + q)/2."""
    m = (p + q) / 2

    def kl(a):
        return (a * (a.clamp_min(1e-30).log() - m.clamp_min(1e-30).log())).sum(-1)

    return (kl(p) + kl(q)) / (2 * math.log(2))


def tv(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Total variation distance over the last axis: 1/2 sum_y |p_y - q_y|."""
    return (p - q).abs().sum(-1) / 2


@dataclass
class Trace:
    """A forced decoding through model.step, with what each step j started from, so that
    any step can be run again with other attention weights."""
    memory: Memory              # one sentence
    y_prev: torch.Tensor        # (T,) y_{j-1} (BOS at j = 0)
    state: State                # each (T, ...): the state before step j (a copying model: alpha_{j-1} too)
    feed: torch.Tensor          # (T, E): h~_{j-1}
    alpha: torch.Tensor         # (T, S)
    log_probs: torch.Tensor     # (T, V)


@torch.no_grad()
def trace(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> Trace:
    memory, state = model.encode(src, torch.tensor([src.size(1)]))
    feed = model.initial_feed(1)
    y_prev = torch.cat([tgt.new_tensor([BOS]), tgt[:-1]])
    states, feeds, alphas, logps = [], [], [], []
    for j in range(tgt.numel()):
        states.append(state)
        feeds.append(feed)
        st = model.step(y_prev[j:j + 1], state, feed, memory)
        alphas.append(st.alpha)
        logps.append(F.log_softmax(st.logits.float(), dim=-1))
        state, feed = st.state, st.feed
    return Trace(memory, y_prev, tuple(torch.cat(s) for s in zip(*states)), torch.cat(feeds),
                 torch.cat(alphas), torch.cat(logps))


def step_with_attention(model: Seq2Seq, run: Trace, steps: torch.Tensor, alpha: torch.Tensor):
    """Steps `steps` (K,) of a traced decoding run again, each with its own attention
    weights alpha (K, S) in place of the model's: model.step's outputs for the K rows."""
    memory = run.memory.select(torch.zeros(steps.numel(), dtype=torch.long, device=steps.device))
    return model.step(run.y_prev[steps], tuple(s[steps] for s in run.state), run.feed[steps], memory, alpha=alpha)


def adversarial_attention(model: Seq2Seq, run: Trace, j: int, epsilon: float = EPSILON, seed: int = 0,
                          restarts: int = ADV_RESTARTS, iterations: int = ADV_ITERATIONS) -> torch.Tensor:
    """The attention a (S,) at step j that maximises JSD(a, alpha_j) with the output kept
    within TV epsilon (see the module docstring): Adam on z, a = softmax(z), from
    `restarts` random logits at once, loss -JSD + ADV_PENALTY * max(0, TV - epsilon);
    then each restart's last iterate pulled back to the constraint by bisection on the
    line towards alpha_j, and the best of those and of every feasible iterate returned."""
    gen = torch.Generator().manual_seed(seed)
    alpha, p = run.alpha[j:j + 1], run.log_probs[j:j + 1].exp()
    S = alpha.size(1)
    steps = torch.full((restarts,), j, dtype=torch.long, device=alpha.device)
    z = (torch.randn(restarts, S, generator=gen) * 2.0).to(alpha.device).requires_grad_(True)
    opt = torch.optim.Adam([z], lr=ADV_LR)
    best, best_jsd = alpha[0].clone(), 0.0

    def measure(a):
        q = F.log_softmax(step_with_attention(model, run, steps[:a.size(0)], a).logits.float(), dim=-1).exp()
        return jsd(a, alpha), tv(q, p)

    for _ in range(iterations):
        with torch.enable_grad():
            a = F.softmax(z, dim=-1)
            div, dist = measure(a)
            loss = (-div + ADV_PENALTY * F.relu(dist - epsilon)).sum()
            (z.grad,) = torch.autograd.grad(loss, z)     # z only: the model's weights collect nothing
        a, div, dist = a.detach(), div.detach(), dist.detach()
        ok = dist <= epsilon                      # keep the best feasible point seen
        if ok.any() and float(div[ok].max()) > best_jsd:
            k = int(torch.where(ok, div, torch.full_like(div, -1.0)).argmax())
            best, best_jsd = a[k].clone(), float(div[k])
        opt.step()
    with torch.no_grad():                         # projection: the largest t with TV <= epsilon
        a = F.softmax(z, dim=-1)
        lo, hi = alpha.new_zeros(restarts, 1), alpha.new_ones(restarts, 1)
        feasible = measure(a)[1] <= epsilon
        lo[feasible] = 1.0
        for _ in range(20):
            mid = (lo + hi) / 2
            ok = measure((1 - mid) * alpha + mid * a)[1] <= epsilon
            lo = torch.where(ok[:, None], mid, lo)
            hi = torch.where(ok[:, None], hi, mid)
        cand = (1 - lo) * alpha + lo * a
        div, dist = measure(cand)
        div = torch.where(dist <= epsilon, div, torch.full_like(div, -1.0))
        k = int(div.argmax())
        if float(div[k]) > best_jsd:
            best = cand[k]
    return best


@dataclass
class Counterfactual:
    step: int
    kind: str
    token: str                            # y_j, the output token at that step in the explained decoding
    alpha_before: list[float]
    alpha_after: list[float]
    top_before: list[tuple[str, float]]   # next tokens and probabilities
    top_after: list[tuple[str, float]]
    jsd: float                            # JSD(alpha_after, alpha_before), bits
    tv: float                             # TV(p_after, p_before)
    argmax_survives: bool
    continuation_before: list[str]        # greedy from step j on, the model's own attention
    continuation_after: list[str]         # the same with alpha_j replaced
    translation_before: str
    translation_after: str
    epsilon: float | None = None          # the adversary's budget

    def to_json(self) -> dict:
        d = dict(vars(self))
        d["top_before"] = [[t, p] for t, p in self.top_before]
        d["top_after"] = [[t, p] for t, p in self.top_after]
        return d


@torch.inference_mode()
def _greedy_from(model: Seq2Seq, memory: Memory, state: State, feed: torch.Tensor, first: int,
                 max_steps: int) -> list[int]:
    """Greedy decoding on from a decoder state whose last output was `first`."""
    ids = [first]
    while ids[-1] != EOS and len(ids) < max_steps:
        st = model.decode_step(feed.new_tensor([ids[-1]], dtype=torch.long), state, feed, memory)
        state, feed = st.state, st.feed
        ids.append(int(st.logits[0].argmax()))
    return ids


def new_attention(kind: str, model: Seq2Seq, run: Trace, j: int, epsilon: float = EPSILON, seed: int = 0
                  ) -> torch.Tensor:
    """The replacement for alpha_j (S,) of a counterfactual `kind`."""
    alpha = run.alpha[j]
    if kind == "uniform":
        return torch.full_like(alpha, 1.0 / alpha.numel())
    if kind == "permute":
        return alpha[torch.randperm(alpha.numel(), generator=torch.Generator().manual_seed(seed))]
    if kind == "adversarial":
        return adversarial_attention(model, run, j, epsilon, seed)
    raise InputError(f"Unknown counterfactual {kind!r}: use {', '.join(KINDS)}.")


def counterfactual(tr: Translator, text: str, step: int, kind: str, reference: str | None = None,
                   epsilon: float = EPSILON, seed: int = 0, target: Sequence[int] | None = None) -> Counterfactual:
    """Replace alpha_j at step `step` of the decoding of `text` (its greedy output, or the
    reference, or the piece ids `target`) and report what changes (see Counterfactual)."""
    check_counterfactual(tr)
    check_range("Epsilon", epsilon, 0.0, 1.0)
    model, tok = tr.model, tr.tokenizer
    src = torch.tensor([source_ids(tr, text)], device=tr.device)
    tgt_list = list(target) if target is not None else target_ids(tr, text, reference)[0]
    check_range("The counterfactual step", step, 0, len(tgt_list) - 1)
    tgt = torch.tensor(tgt_list, device=tr.device)
    run = trace(model, src, tgt)
    a = new_attention(kind, model, run, step, epsilon, seed).detach()
    with torch.no_grad():
        steps = torch.tensor([step, step], device=tr.device)
        st = step_with_attention(model, run, steps, torch.stack([run.alpha[step], a]))
        logp = F.log_softmax(st.logits.float(), dim=-1)
    p_before, p_after = logp[0].exp(), logp[1].exp()
    max_steps = min(2 * src.size(1) + 10, MAX_DECODE_LEN) - step     # decode.py's length limit
    cont = []
    for row in (0, 1):
        state = tuple(s[row:row + 1] for s in st.state)
        cont.append(_greedy_from(model, run.memory, state, st.feed[row:row + 1], int(logp[row].argmax()), max_steps))

    def top(p):
        v, i = p.topk(TOP)
        return [(tok.piece(k), round(float(x), 6)) for x, k in zip(v, i.tolist())]

    prefix = tgt_list[:step]
    return Counterfactual(step, kind, tok.piece(tgt_list[step]), run.alpha[step].tolist(), a.tolist(),
                          top(p_before), top(p_after), float(jsd(a, run.alpha[step])), float(tv(p_after, p_before)),
                          bool(p_after.argmax() == p_before.argmax()), tok.pieces(cont[0]), tok.pieces(cont[1]),
                          tok.decode(prefix + cont[0]), tok.decode(prefix + cont[1]),
                          epsilon if kind == "adversarial" else None)


@torch.no_grad()
def permutation_survival(model: Seq2Seq, run: Trace, seed: int = 0) -> list[bool]:
    """For every step j at once: does argmax_y p(y | ...) stay the same when alpha_j is
    replaced by a random permutation of itself?"""
    gen = torch.Generator().manual_seed(seed)
    T, S = run.alpha.shape
    perm = torch.argsort(torch.rand(T, S, generator=gen), dim=1).to(run.alpha.device)   # one permutation per step
    st = step_with_attention(model, run, torch.arange(T, device=perm.device), run.alpha.gather(1, perm))
    return (st.logits.argmax(-1) == run.log_probs.argmax(-1)).tolist()


# ---------------------------------------------------------------------------------------
# Over a test set


def read_pairs(path: str | Path, limit: int, max_words: int) -> list[tuple[str, str]]:
    """The first `limit` lines of a TSV (English, French) whose English has at most
    `max_words` whitespace words (lines starting with # are comments)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {path}: {e}") from None
    pairs = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 2 or not cols[0].strip() or not cols[1].strip():
            raise InputError(f"{path.name} line {n}: expected `English<TAB>French`")
        if len(cols[0].split()) <= max_words:
            pairs.append((cols[0], cols[1]))
            if len(pairs) == limit:
                break
    if not pairs:
        raise InputError(f"{path.name} has no pair with at most {max_words} English words")
    return pairs


def summarize(tr: Translator, pairs: Sequence[tuple[str, str]], ig_steps: int = IG_STEPS, seed: int = 0) -> dict:
    """Over (English, French) pairs, each forced with its French: the distribution of tau
    per attribution, the share of steps whose argmax agrees with attention's, and the share
    of steps whose argmax token survives a random permutation of alpha_j."""
    check_model(tr)
    taus = {m: [] for m in METHODS}
    same = {m: [] for m in METHODS}
    survives, deltas, steps, t0 = [], [], 0, time.perf_counter()
    recurrent = isinstance(tr.model, Seq2Seq)        # permuting alpha_j replaces a recurrent decoder's one attention
    for n, (en, fr) in enumerate(pairs):
        e = explain(tr, en, reference=fr, ig_steps=ig_steps)
        for m in METHODS:
            ts, ss = agreement(e.attention, e.attributions[m])
            taus[m] += ts
            same[m] += ss
        gap = e.attributions["integrated_gradients"].sum(1) - e.ig_delta     # log p(y_j | x) - log p(y_j | 0)
        deltas += (np.abs(e.ig_delta) / (1 + np.abs(gap))).tolist()
        steps += len(e.target_ids)
        if recurrent:
            run = trace(tr.model, torch.tensor([source_ids(tr, en)], device=tr.device),
                        torch.tensor(e.target_ids, device=tr.device))
            survives += permutation_survival(tr.model, run, seed + n)

    def dist(v):
        v = np.asarray(v, dtype=float)
        v = v[np.isfinite(v)]
        q = np.percentile(v, [10, 25, 50, 75, 90]).round(4).tolist()
        return {"median": q[2], "mean": round(float(v.mean()), 4), "q10": q[0], "q25": q[1], "q75": q[3],
                "q90": q[4], "steps": int(v.size)}

    return {"model": tr.name, "sentences": len(pairs), "steps": steps,
            "kendall_tau": {m: dist(taus[m]) for m in METHODS},
            "argmax_agreement": {m: round(float(np.mean(same[m])), 4) for m in METHODS},
            "permutation_survival": round(float(np.mean(survives)), 4) if recurrent else None,
            # |sum_i a_ij - gap_j| / (1 + |gap_j|): the share of tokens within IG_TOLERANCE, and the worst
            "ig_completeness": {"within_tolerance": round(float(np.mean(np.array(deltas) <= IG_TOLERANCE)), 4),
                                "median": round(float(np.median(deltas)), 5),
                                "q99": round(float(np.percentile(deltas, 99)), 5),
                                "max": round(float(np.max(deltas)), 5)},
            "ig_steps": ig_steps, "ig_splits": IG_SPLITS, "seconds": round(time.perf_counter() - t0, 1)}


# ---------------------------------------------------------------------------------------
# Command line


class _Parser(argparse.ArgumentParser):
    def error(self, message):            # one line and exit 2, like every other bad input
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv: Sequence[str] | None = None) -> int:
    p = _Parser(prog="python -m s2s.explain", description=__doc__.splitlines()[0])
    p.add_argument("--model", help="checkpoint folder with attention, e.g. checkpoints/en-fr-additive")
    p.add_argument("--reference", metavar="TEXT", help="explain this French translation (default: the greedy one)")
    p.add_argument("--ig-steps", type=int, default=IG_STEPS, help=f"integrated-gradients points (default {IG_STEPS})")
    p.add_argument("--counterfactual", type=int, metavar="STEP",
                   help="replace the attention at this target step (counted from 0)")
    p.add_argument("--kind", choices=KINDS, default="uniform", help="what replaces it (default uniform)")
    p.add_argument("--epsilon", type=float, default=EPSILON, help=f"the adversary's TV budget (default {EPSILON})")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutation and the adversary's starts")
    p.add_argument("--test", metavar="FILE", help="summary over a TSV of English<TAB>French pairs instead of one text")
    p.add_argument("--limit", type=int, default=200, help="with --test: this many pairs (default 200)")
    p.add_argument("--max-words", type=int, default=30, help="with --test: skip pairs with longer English (default 30)")
    p.add_argument("--table", metavar="OUT.json",
                   help="with --test: the summary of every attention checkpoint under --models, written to OUT.json")
    p.add_argument("--models", help="with --table: the checkpoints folder (default checkpoints/)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("text", nargs="*", help="the English text (after --, if it starts with a dash)")
    a = p.parse_args(argv)
    if a.table is not None:
        if a.test is None:
            p.error("--table needs --test FILE")
        return _write_table(a, argv)
    if a.model is None:
        p.error("the following arguments are required: --model")
    try:
        tr = load_translator(a.model)
        check_model(tr)
        if a.test is not None:
            check_range("--limit", a.limit, 1, 100_000)
            out = summarize(tr, read_pairs(a.test, a.limit, a.max_words), a.ig_steps, a.seed)
            out["file"], out["max_words"] = str(a.test), a.max_words
            print(json.dumps(out) if a.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
            return 0
        text = " ".join(a.text) if a.text else ("" if sys.stdin.isatty() else sys.stdin.read())
        e = explain(tr, text, a.reference, ig_steps=a.ig_steps)
        cf = None
        if a.counterfactual is not None:
            cf = counterfactual(tr, text, a.counterfactual, a.kind, epsilon=a.epsilon, seed=a.seed,
                                target=e.target_ids)
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        out = e.to_json()
        if cf is not None:
            out["counterfactual"] = cf.to_json()
        print(json.dumps(out, ensure_ascii=False, allow_nan=False))
        return 0
    print(f"{e.translation}   ({e.forced_from}, forced)")
    taus = e.kendall_tau()
    print(f"{'target':>14}  {'attention':>12}  " + "  ".join(f"{SHORT[m]:>16}" for m in METHODS)
          + "   (the source piece each one ranks first; tau with attention)")
    for j, y in enumerate(e.target_tokens):
        cols = [f"{e.source_tokens[int(np.abs(e.attributions[m][j]).argmax())][:12]:>12} {taus[m][j]:+.2f}"
                for m in METHODS]
        print(f"{y[:14]:>14}  {e.source_tokens[int(e.attention[j].argmax())][:12]:>12}  " + "  ".join(cols))
    if cf is not None:
        print(f"\nstep {cf.step} ({cf.token!r}), attention {cf.kind}: JSD {cf.jsd:.3f} bits, TV {cf.tv:.4f}, "
              f"argmax {'kept' if cf.argmax_survives else 'changed'}")
        print("  before:", ", ".join(f"{t} {q:.3f}" for t, q in cf.top_before), "->", cf.translation_before)
        print("  after: ", ", ".join(f"{t} {q:.3f}" for t, q in cf.top_after), "->", cf.translation_after)
    return 0


def _write_table(a: argparse.Namespace, argv: Sequence[str] | None) -> int:
    from .checkpoint import attention_checkpoints, checkpoint_root
    try:
        check_range("--limit", a.limit, 1, 100_000)
        pairs = read_pairs(a.test, a.limit, a.max_words)
        infos = attention_checkpoints(a.models)
        if not infos:
            raise InputError(f"no checkpoint with attention in {a.models or checkpoint_root()}")
        rows = [summarize(load_translator(i.path), pairs, a.ig_steps, a.seed) for i in infos]
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args = sys.argv[1:] if argv is None else list(argv)
    out = {"command": "python -m s2s.explain " + " ".join(args), "file": str(a.test), "max_words": a.max_words,
           "rows": rows}
    Path(a.table).parent.mkdir(parents=True, exist_ok=True)
    Path(a.table).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for r in rows:
        print(f"{r['model']:<20} median tau " + "  ".join(f"{SHORT[m]} {r['kendall_tau'][m]['median']:+.2f}"
                                                       for m in METHODS)
              + ("" if r["permutation_survival"] is None else f"  permutation survival {r['permutation_survival']:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
