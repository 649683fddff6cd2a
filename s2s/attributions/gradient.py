"""The gradient attributions: gradient x input (one batched backward pass for a Transformer)
and integrated gradients (captum, adaptive Gauss-Legendre quadrature from zero embeddings);
the formulas are in the package's docstring."""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ..hooks import attached, decoder_input
from ..model import Seq2Seq
from ..transformer import Transformer
from .forced import row_log_probs
from .progress import PROGRESS_CHUNKS, Progress

IG_STEPS = 16             # Gauss-Legendre points per segment of the path (integrated_gradients)
IG_SPLITS = 3             # a segment is halved at most this often: up to 8 segments, 128 points
IG_TOLERANCE = 0.01       # completeness budget per token, in nats: 1% of (1 + |log p(y|x) - log p(y|0)|)
# integrated_gradients' progress: the share of the whole done when each stage ends, by how the first
# round runs (a Transformer's: one forward and one batched backward; a recurrent model's, or any with
# fast_first_round=False: captum in chunks); the later rounds share what is left, as many as there
# are. The medians of the stages' times (tools/calibrate_attributions.py: `stages`), 2-core machine,
# 2026-11-28: en-fr-additive 0.12 / 0.96; the opus-mt-shaped model 0.01 / 0.11 / 1.0 (nothing to
# refine with random weights); en-fr-transformer 0.01 / 0.05 / 0.19 (its refinement rounds, through
# captum, are most of its 3.5-14 s: the bar then moves by their text, the page's time left by its estimate)
IG_SHARES = {"transformer": {"end_points": 0.02, "first_forward": 0.12, "first_round": 0.9},
             "recurrent": {"end_points": 0.12, "first_round": 0.9}}
ROW_GRAD_ELEMENTS = 2 ** 26   # a batched backward's (rows, points, S, E) gradient: at most 256 MB in fp32


def _share(shares: dict[str, float], start: str, end: str, f: float) -> float:
    """The share of integrated gradients done `f` of the way from stage `start`'s end to stage
    `end`'s (`shares`: one plan of IG_SHARES)."""
    return shares[start] + (shares[end] - shares[start]) * f


def _round_share(shares: dict[str, float], round_: int, f: float, splits: int) -> float:
    """The share done `f` of the way through refinement round `round_` (1 .. splits) of integrated gradients."""
    return shares["first_round"] + (1 - shares["first_round"]) * (round_ - 1 + f) / max(1, splits)


def _source_embeddings(model: Seq2Seq, src: torch.Tensor) -> torch.Tensor:
    return model.embed(src)[0].detach()           # (S, E)


def _split_head(model, x: torch.Tensor, src: torch.Tensor, tgt_in: torch.Tensor):
    """Teacher-forced logits (P, T, V) of one sentence from P rows of source embeddings x (P, S, E),
    with the graph cut just before the output head: returns (logits, cut, leaves, dims),
    where `cut` are the head's inputs as functions of x, `leaves` detached copies of them
    from which the logits were computed, and dims the position (target step) dimension of
    each. Every head input is position-wise (the head at step j reads position j only):
    a Transformer's s_j, and with the pointer its context and last-layer cross-attention
    (transformer.Transformer.forward); a hub model's last decoder state s_j, from which its
    own head (lm_head, Marian's final_logits_bias, T5's rescaling) runs as usual, a forward
    hook on the decoder handing it the leaf."""
    if isinstance(model, Transformer):
        memory, _ = model.encode(src, torch.full((src.size(0),), src.size(1)), embedded=x)
        s, context, last, _, _ = model.decode_all(tgt_in, memory)
        cut = [s, context, last] if model.copy_gate is not None else [s]
        leaves = [c.detach().requires_grad_(True) for c in cut]
        logits = model.output(model.drop(leaves[0]))
        if model.copy_gate is not None:
            logits = model.point(logits, model.copied_alpha(leaves[2]), memory.src, leaves[1], leaves[0])
        return logits, cut, leaves, [1, 1, 2][:len(cut)]
    cut, leaves = [], []

    def cut_here(module, args, output):     # hooks.attached: this thread's pass only (the model is shared)
        s = output[0] if isinstance(output, tuple) else output.last_hidden_state
        leaf = s.detach().requires_grad_(True)
        cut.append(s), leaves.append(leaf)
        if isinstance(output, tuple):
            return (leaf,) + output[1:]
        output.last_hidden_state = leaf
        return output

    with attached([(model.hf.get_decoder(), "forward", cut_here)]):
        out = model.hf(inputs_embeds=x, attention_mask=torch.ones_like(src), decoder_input_ids=tgt_in,
                       return_dict=True)
    return model.pieces_only(out.logits), cut, leaves, [1]      # the adapter's own logits (hub_model)


def _row_gradients(model, e: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor,
                   t: torch.Tensor | None = None, w: torch.Tensor | None = None,
                   on_rows: Callable[[float], None] | None = None) -> torch.Tensor:
    """(T, S, E): row j is d log p(y_j | y_<j, x) / d e for a Transformer (ours or a hub
    model's), from ONE forward pass of the sentence and one batched backward pass; with
    points t (P,) and weights w (P,), row j is sum_p w_p d log p(y_j | y_<j, t_p e) / d x at
    x = t_p e (the quadrature sum of integrated gradients, all P points in the same passes).

    The forward pass scores every step at once (teacher forcing; grad_x_input). Backward in
    two stages, cut at the output head's inputs (_split_head): (1) one ordinary backward of
    sum_p w_p sum_j log p(y_j | t_p e) from the logits to the head inputs: the head is
    position-wise and the P points are independent rows, so position j of point p of that
    gradient is row j's own, w_p d log p(y_j) / d s_j (the T x T x V Jacobian of the
    log-softmax, costly for a 60k vocabulary, is never formed); (2) one backward from the
    head inputs to the embeddings, batched over rows (vmap: is_grads_batched), row j seeded
    with its own gradient at position j and zeros elsewhere; rows in chunks of at most
    ROW_GRAD_ELEMENTS / (P S E), so that a long sentence's (rows, P, S, E) fits in memory.
    `on_rows(f)` hears 0 once the forward pass and stage (1) are done, then the fraction of rows
    done after each chunk (then PROGRESS_CHUNKS chunks)."""
    T = tgt.numel()
    t = torch.ones(1, device=e.device, dtype=e.dtype) if t is None else t.to(e)
    w = torch.ones_like(t) if w is None else w.to(e)
    P = t.numel()
    x = (t[:, None, None] * e[None]).requires_grad_(True)                  # (P, S, E)
    tgt_in = decoder_input(model, tgt).expand(P, -1)
    logits, cut, leaves, dims = _split_head(model, x, src.expand(P, -1), tgt_in)
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    logp = F.log_softmax(logits, dim=-1)[:, torch.arange(T, device=tgt.device), tgt]      # (P, T)
    own = torch.autograd.grad((w.to(logp.dtype)[:, None] * logp).sum(), leaves)
    eye = torch.eye(T, device=x.device)
    size = max(1, ROW_GRAD_ELEMENTS // max(1, x.numel()))
    if on_rows is not None:                   # heard PROGRESS_CHUNKS times (a page's bar, its stop button)
        size = min(size, -(-T // PROGRESS_CHUNKS))
        on_rows(0.0)
    parts = []
    for rows in torch.arange(T, device=x.device).split(size):
        seeds = []
        for c, g, d in zip(cut, own, dims):    # row j: g at position j (dimension d of c), 0 elsewhere
            shape = [rows.numel()] + [1] * c.dim()
            shape[d + 1] = T
            seeds.append(g[None] * eye[rows].to(g.dtype).view(shape))
        (grad,) = torch.autograd.grad(cut, x, seeds, is_grads_batched=True, retain_graph=True)
        parts.append(grad.sum(1))                                           # over the P points
        if on_rows is not None:
            on_rows(float(rows[-1] + 1) / T)
    return torch.cat(parts)


def grad_x_input(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> np.ndarray:
    """(T, S): a_ij = (d log p(y_j | y_<j, x) / d e_i) . e_i: for each target step j its own
    gradient, so T gradients of a sentence (T, S, E), each dotted with the embeddings.

    A recurrent model: T rows of the sentence, row j scored at step j only (step_log_probs),
    in one forward and one backward pass of sum_j log p(y_j) (rows share nothing, so row j's
    gradient is that of log p(y_j) alone). A Transformer, ours or a hub model's: T copies
    are wasted work, as teacher forcing scores every step of ONE row in one pass; the T
    gradients then come from one backward pass batched over rows (_row_gradients). Same
    numbers to float rounding as T copies; measured (one sentence, T = 12 and 33) 4x faster
    on en-fr-transformer and 2x on an opus-mt-sized Marian on one CPU thread, 4-5x on a GPU,
    with less memory. The batched backward is most of what remains. (Grouping the rows by
    step, each group decoding only as far as it is scored, as row_log_probs does, measured no
    faster: the backward is batched over rows either way, and each group adds a pass.)"""
    e = _source_embeddings(model, src)
    if isinstance(model, Seq2Seq):
        T = tgt.numel()
        x = e.expand(T, -1, -1).clone().requires_grad_(True)
        logp = row_log_probs(model, x, src, tgt, torch.arange(T, device=x.device))
        (grad,) = torch.autograd.grad(logp.sum(), x)
    else:
        grad = _row_gradients(model, e, src, tgt)
    return (grad * e).sum(-1).detach().double().cpu().numpy()


def integrated_gradients(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor, steps: int = IG_STEPS,
                         splits: int = IG_SPLITS, on_progress: Progress | None = None,
                         fast_first_round: bool = True) -> tuple[np.ndarray, np.ndarray]:
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
    batched forward of (segments x steps) interpolated sentences and one backward pass.
    A Transformer's first round, most of the work, shares its points across tokens: `steps`
    sentences forward and one backward batched over tokens (_row_gradients), not T x `steps`
    rows. Only the forward is saved: the batched backward still costs about T x `steps`
    backward passes, the bulk of integrated gradients. An ad-hoc timing, not a benchmark
    (en-fr-transformer, 2 CPU cores, Hansards test pairs 101-106, both settings alternated):
    the first round 1.4x faster, the whole run 1.12x (the split rounds go through captum).
    `fast_first_round=False` runs the first round through captum too (the tests compare the two).

    `on_progress(share done, what it is doing)` hears from the start: the path's end points, then
    the first round's forward pass, then each chunk of its batched backward (a recurrent model: each chunk of the first
    round), then each later round. The shares are the stages' typical parts of the whole
    (IG_SHARES), so that a page's bar moves from its first second and ends at 1."""
    fast = fast_first_round and not isinstance(model, Seq2Seq)      # the first round in one batched backward
    shares = IG_SHARES["transformer" if fast else "recurrent"]
    report = on_progress
    if report is not None and "captum.attr" not in sys.modules:
        report(0.0, "loading captum, the integration's library (once per process)")
    from captum.attr import IntegratedGradients  # imported here: it pulls in matplotlib (~0.7 s)
    from captum.attr._utils.approximation_methods import approximation_parameters
    ig = IntegratedGradients(lambda emb, rows_last: row_log_probs(model, emb, src, tgt, rows_last))
    e = _source_embeddings(model, src)
    T, S = tgt.numel(), src.size(1)

    @torch.no_grad()
    def logp_at(t: torch.Tensor, j: torch.Tensor) -> torch.Tensor:       # log p(y_j | t e), row by row
        return row_log_probs(model, t[:, None, None] * e, src, tgt, j).double()

    every = torch.arange(T, device=e.device)

    @torch.no_grad()
    def logp_end(t_end: float) -> torch.Tensor:     # log p(y_j | t_end e) for every j
        if isinstance(model, Seq2Seq):
            return logp_at(torch.full((T,), t_end).to(e), every)
        # a Transformer scores every step of one row in one teacher-forced pass: 0.25 s against 1.76 s for
        # T rows in TRANSFORMER_GROUPS groups (opus-mt-sized, 23 pieces out, one thread, 2-core machine)
        tgt_in = decoder_input(model, tgt)
        logits, _ = model(src, torch.full((1,), S), tgt_in, embedded=(t_end * e)[None])
        logp = F.log_softmax(logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits, dim=-1)
        return logp[0, every, tgt].double()

    ends = []           # log p(y_j) at the path's end points: t = 1 (the sentence), t = 0 (zero embeddings)
    for k, (t_end, what) in enumerate(((1.0, "the sentence"), (0.0, "zero embeddings"))):
        if report is not None:
            report(shares["end_points"] * k / 2, f"the path's end points: {what}, {T} output pieces scored")
        ends.append(logp_end(t_end))
    ends = torch.cat(ends)
    budget = IG_TOLERANCE * (1 + (ends[:T] - ends[T:]).abs())
    attr = torch.zeros(T, S, dtype=torch.float64, device=e.device)
    error = torch.zeros(T, dtype=torch.float64, device=e.device)
    # the open segments: token j, path from t = a to t = b, log p(y_j) at both ends
    j, a, b, f_a, f_b = every, torch.zeros(T).to(e), torch.ones(T).to(e), ends[T:], ends[:T]
    for round_ in range(splits + 1):
        # in PROGRESS_CHUNKS calls over the open segments, so that `on_progress` hears as it goes
        # (a caller that stops the run, as a page does for a new sentence, waits for one chunk at
        # most); the segments are independent rows, so the numbers are the same
        parts, finished = [], 0
        if round_ == 0 and fast:
            # a Transformer's first round: every token on [0, 1], so all share the same points t_k e;
            # one forward of the `steps` points and one backward batched over tokens (_row_gradients),
            # not T x steps teacher-forced rows through captum (same sums to float rounding)
            sizes, alphas = approximation_parameters("gausslegendre")
            on_rows = None
            if report is not None:
                report(shares["end_points"], f"first round: the model at {steps} points along the path")

                def on_rows(f: float) -> None:
                    report(_share(shares, "first_forward", "first_round", f),
                           f"first round: gradients for {round(f * T)} of {T} output pieces")
            g = _row_gradients(model, e, src, tgt, torch.tensor(alphas(steps)), torch.tensor(sizes(steps)),
                               on_rows=on_rows)
            parts.append((g * e).sum(-1).detach().double())
        elif report is not None:
            report(shares["end_points"] if round_ == 0 else _round_share(shares, round_, 0.0, splits),
                   f"first round: 0 of {T} output pieces" if round_ == 0 else
                   f"round {round_ + 1}: {j.numel()} segments where the path is steep, halved")
        for rows in (torch.arange(j.numel(), device=e.device).tensor_split(PROGRESS_CHUNKS if report else 1)
                     if not parts else []):
            if not rows.numel():
                continue
            parts.append(ig.attribute(b[rows, None, None] * e, baselines=a[rows, None, None] * e,
                                      additional_forward_args=(j[rows],), n_steps=steps,
                                      method="gausslegendre").sum(-1).detach().double())
            finished += rows.numel()
            if report is not None:     # the first round is most of the work; the later rounds share the rest
                done = finished / j.numel()
                if round_ == 0:
                    report(_share(shares, "end_points", "first_round", done),
                           f"first round: {finished} of {T} output pieces")
                else:
                    report(_round_share(shares, round_, done, splits),
                           f"round {round_ + 1}: {finished} of {j.numel()} steep segments")
        piece = torch.cat(parts)
        err = piece.sum(1) - (f_b - f_a)
        done = (err.abs() <= budget[j] * (b - a)) | (round_ == splits)
        attr.index_add_(0, j[done], piece[done])
        error.index_add_(0, j[done], err[done])
        if bool(done.all()):
            if report is not None:
                report(1.0, "done")
            break
        open_ = ~done
        j, a, b, f_a, f_b = j[open_], a[open_], b[open_], f_a[open_], f_b[open_]
        mid = (a + b) / 2
        f_mid = logp_at(mid, j)
        j, a, b = j.repeat(2), torch.cat([a, mid]), torch.cat([mid, b])
        f_a, f_b = torch.cat([f_a, f_mid]), torch.cat([f_mid, f_b])
    return attr.cpu().numpy(), error.cpu().numpy()
