"""Leave-one-out: the forced output scored again with each source piece replaced by <unk>,
all variants decoded as one batch (the inference path: no gradient)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..hooks import decoder_input
from ..model import Seq2Seq
from ..tokenizer import BOS
from .forced import unk_id
from .progress import PROGRESS_CHUNKS, Progress


@torch.inference_mode()
def forced_log_probs(model: Seq2Seq, src_rows: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """(R, T) log p(y_j | y_<j, x_r) of one forced target for R source rows of one length,
    decoded together (decode_step: the inference path)."""
    R, T = src_rows.size(0), tgt.numel()
    lengths = torch.full((R,), src_rows.size(1))
    if not isinstance(model, Seq2Seq):      # a Transformer: every position in one pass
        tgt_in = decoder_input(model, tgt).expand(R, -1)
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


def leave_one_out(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor,
                  on_progress: Progress | None = None) -> np.ndarray:
    """(T, S): a_ij = log p(y_j | y_<j, x) - log p(y_j | y_<j, x with x_i -> <unk>) for
    every piece, </s> included; the sentence and its S variants decoded as one batch (in
    PROGRESS_CHUNKS batches when `on_progress(share done[, what it is doing])` listens: heard
    before the first batch too)."""
    S = src.size(1)
    rows = src.repeat(S + 1, 1)
    rows[torch.arange(1, S + 1), torch.arange(S)] = unk_id(model)   # row i + 1 lacks piece i
    report = on_progress
    if report is None:
        logp = forced_log_probs(model, rows, tgt).double()
    else:
        parts, decoded = [], 0
        report(0.0, f"the sentence and its {S} variants, each without one piece: 0 of {S + 1}")
        for k, chunk in enumerate(rows.tensor_split(PROGRESS_CHUNKS)):
            if chunk.size(0):
                parts.append(forced_log_probs(model, chunk, tgt).double())
            decoded += chunk.size(0)
            report((k + 1) / PROGRESS_CHUNKS, f"the sentence and its {S} variants, each without one piece: "
                                              f"{decoded} of {S + 1}")
        logp = torch.cat(parts)
    return (logp[0:1] - logp[1:]).t().cpu().numpy()
