"""Forced decoding of one output as a differentiable function of the source embeddings: the
rows the gradient attributions score (row_log_probs: a recurrent model step by step, a
Transformer in one teacher-forced pass), the decoder's start and unknown ids, and cuDNN paused
where a recurrent model's backward pass needs it."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn.functional as F

from ..hooks import decoder_input, decoder_start
from ..interface import Memory
from ..model import Seq2Seq
from ..tokenizer import BOS, UNK

TRANSFORMER_GROUPS = 8    # a Transformer's rows decode in this many groups, each only as far as it is scored


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


bos_id = decoder_start     # the decoder's start token, as s2s.hooks reads it (one place)


def unk_id(model) -> int:
    """What leave-one-out puts in a piece's place: <unk> (a hub model's own; its <pad> if it has none)."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return UNK
    return tok.unk_id if tok.unk_id is not None else tok.pad_id


_cudnn_lock = threading.Lock()
_cudnn_paused = 0          # passes now running with cuDNN off
_cudnn_was = True          # the flag they found


@contextmanager
def cudnn_paused() -> Iterator[None]:
    """cuDNN off while this runs, however many threads enter at once.

    cuDNN's RNN backward runs only in training mode ("cudnn RNN backward can only be called
    in training mode"), and the shipped models are in eval mode (no dropout) when
    attributions differentiate through their encoder's nn.LSTM on a GPU. PyTorch's own
    kernels have no such rule. The flag is global and a classroom server runs sessions on
    threads, so a count, not a save-and-restore per pass: the first pass in turns cuDNN
    off, the last one out puts back what the first found (another thread's forward in the
    meantime takes the native kernels: slower, the same numbers)."""
    global _cudnn_paused, _cudnn_was
    with _cudnn_lock:
        if _cudnn_paused == 0:
            _cudnn_was = torch.backends.cudnn.enabled
            torch.backends.cudnn.enabled = False
        _cudnn_paused += 1
    try:
        yield
    finally:
        with _cudnn_lock:
            _cudnn_paused -= 1
            if _cudnn_paused == 0:
                torch.backends.cudnn.enabled = _cudnn_was


def row_log_probs(model, x: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """log p(y_{last_r} | y_<last_r, x_r) for each row r, from source embeddings x (R, S, E):
    a recurrent model decodes step by step (step_log_probs); a Transformer, ours or a hub
    model's, decodes each row in one teacher-forced pass (no recurrence: nothing waits for
    the previous step) and runs its output layer only at the step the row asks for (logits_at).
    A recurrent model on a GPU runs with cuDNN paused, so that its gradient can be taken."""
    if isinstance(model, Seq2Seq):
        if x.is_cuda and x.requires_grad:
            with cudnn_paused():
                return step_log_probs(model, x, src, tgt, last)
        return step_log_probs(model, x, src, tgt, last)
    tgt_in = decoder_input(model, tgt)[0]
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
