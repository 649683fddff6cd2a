"""One sentence explained: its source and output checked and limited, attention and the
attributions of the chosen methods under forced decoding of the same output (`explain`), and
the `Explanation` they make, with its agreement and its JSON."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..checkpoint import Translator
from ..decode import encode_source, forced, greedy, positions
from ..hooks import HeadMask, format_head_mask, knocked_out, read_head_mask
from ..hub_config import beyond_positions
from ..text import InputError, check_range, clean_text
from .gradient import IG_STEPS, grad_x_input, integrated_gradients
from .perturbation import leave_one_out
from .tau import agreement

METHODS = ("grad_x_input", "integrated_gradients", "leave_one_out")
SHORT = {"grad_x_input": "grad x input", "integrated_gradients": "integrated grad.", "leave_one_out": "leave-one-out"}
MAX_SOURCE_PIECES = 100   # attributions cost ~ (target length)^2: a few sentences, not a page
MAX_TARGET_PIECES = 150


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
    head_mask: str = ""                   # the heads knocked out throughout, as --mask-heads writes them

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
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
                **({"head_mask": self.head_mask} if self.head_mask else {})}


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None        # JSON has no NaN


def check_model(tr: Translator) -> None:
    """Attributions need attention to compare with: any model but the fixed-vector one."""
    if tr.model.cfg.attention == "none":
        raise InputError(f"{tr.name} has no attention to compare (a fixed-vector model): pick an attention model.")


def source_ids(tr: Translator, text: str) -> list[int]:
    """The source pieces ending in </s>, refused beyond MAX_SOURCE_PIECES."""
    src = encode_source(tr, text)
    if len(src) > MAX_SOURCE_PIECES:
        raise InputError(f"The text is {len(src)} pieces long; explaining is limited to {MAX_SOURCE_PIECES}. "
                         "Try one or two sentences.")
    return src


def target_ids(tr: Translator, text: str, reference: str | None) -> tuple[list[int], str]:
    """The output to explain: the reference's pieces, or the model's greedy translation (which
    stops within the model's positions); a reference longer than them is refused in one line."""
    if reference is not None:
        ids = tr.tokenizer.target_ids(clean_text(reference, what="reference"))
        frm = "reference"
        limit = positions(tr)
        if beyond_positions(limit, 0, len(ids)) is not None:
            raise InputError(f"The reference is {len(ids)} pieces long; {tr.name} reads at most {limit} "
                             "(its position embeddings).")
    else:
        ids = greedy(tr, text).target_ids
        frm = "greedy"
    if len(ids) > MAX_TARGET_PIECES:
        raise InputError(f"The {'reference' if reference is not None else 'translation'} is {len(ids)} pieces long; "
                         f"explaining is limited to {MAX_TARGET_PIECES}.")
    return ids, frm


def explain(tr: Translator, text: str, reference: str | None = None, methods: Sequence[str] = METHODS,
            ig_steps: int = IG_STEPS, head_mask: HeadMask | str = ()) -> Explanation:
    """Attention and the attributions of `methods` for the greedy translation of `text`
    (or for `reference`), both under forced decoding of that output; with `head_mask`, of the
    model with those heads knocked out throughout (s2s.hooks.knocked_out: the greedy output, the
    attention and every attribution; InputError, one line, before any work, for a head the model
    lacks or a recurrent model)."""
    check_model(tr)
    check_range("Integration steps", ig_steps, 2, 256)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InputError(f"Unknown attribution {unknown[0]!r}: use {', '.join(METHODS)}.")
    mask = read_head_mask(head_mask)
    with knocked_out(tr.model, mask):
        out = _explain(tr, text, reference, methods, ig_steps)
    out.head_mask = format_head_mask(mask)
    return out


def _explain(tr: Translator, text: str, reference: str | None, methods: Sequence[str], ig_steps: int
             ) -> Explanation:
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
