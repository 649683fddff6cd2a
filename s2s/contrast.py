"""Why this word and not that one: contrastive attribution (Yin and Neubig 2022).

The plain attributions (s2s.attributions) explain log p(y_T | y_<T, x). Asking "why *une* and
not *un*?" explains the difference between the chosen piece y_T and a foil f at the same step,
with the same prefix forced:

    D(x) = log p(y_T | y_<T, x) - log p(f | y_<T, x)        (= logit(y_T) - logit(f): the
                                                               normaliser cancels)

attributed to the source pieces x_1..x_m (</s> included), e_i the embedding of x_i before
positions are added (as the plain ones):

    gradient x input      a_i = (dD / de_i) . e_i
    integrated gradients  a_i = e_i . int_0^1 dD(t e) / de_i dt, from the zero embedding, by
                          Gauss-Legendre quadrature (captum), IG_STEPS points per segment of
                          [0, 1], a segment halved (at most IG_SPLITS times) while its
                          completeness error exceeds its share of IG_TOLERANCE (1 + |D(e) - D(0)|);
                          sum_i a_i = D(e) - D(0)
    leave-one-out         a_i = D(x) - D(x with x_i -> <unk>)

A positive a_i pushes toward y_T, a negative one toward the foil. The foil is one piece of the
target vocabulary (a word of several pieces is refused in one line). Without a foil (foil None)
the same code attributes log p(y_T) alone, the plain attribution at that step by the same method
(`step_attribution`): what the contrast is read against, on the same scale.

With `head_mask` both read the model with those heads knocked out (s2s.hooks.knocked_out): the
greedy output explained is the knocked-out model's, and D, its gradients and its integral are
taken under the mask (python -m s2s.explain --contrast-step T --foil PIECE --mask-heads ...).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .attributions import IG_SPLITS, IG_STEPS, IG_TOLERANCE, row_log_probs, source_ids, target_ids, unk_id
from .checkpoint import Translator
from .hooks import HeadMask, decoder_input, format_head_mask, knocked_out, read_head_mask
from .model import Seq2Seq
from .text import InputError, check_range
from .tokenizer import HubTokenizer

METHODS = {"grad-x-input": "grad_x_input", "ig": "integrated_gradients", "loo": "leave_one_out"}


def foil_id(tr: Translator, text: str, what: str = "foil") -> int:
    """The id of the foil: a piece as the vocabulary writes it ("▁un"), or a word that is one
    piece as the decoder writes it ("un"); InputError, one line, for anything else (`what` names
    the piece in it: the lens's "watched piece" is read the same way)."""
    tok = tr.tokenizer
    piece = (text or "").strip()
    if not piece:
        raise InputError(f"The {what} is empty: give one piece of the vocabulary (a step's top tokens are pieces).")
    i = tok.piece_id(piece)
    if i != tok.unk_id or piece == tok.piece(tok.unk_id):
        return int(i)
    ids = tok.encode(piece, target=True) if isinstance(tok, HubTokenizer) else tok.encode(piece)
    if len(ids) == 1 and ids[0] != tok.unk_id:
        return int(ids[0])
    if tok.unk_id in ids:     # a character the vocabulary lacks (read as <unk>): no piece of it, one or several
        raise InputError(f"The {what} {piece!r} is not a piece of {tr.name}'s vocabulary.")
    if len(ids) > 1:
        raise InputError(f"The {what} {piece!r} is {len(ids)} pieces ({' '.join(tok.pieces(ids))}): a {what} is one "
                         "piece; pick one of the step's top tokens or type a single piece.")
    raise InputError(f"The {what} {piece!r} is not a piece of {tr.name}'s vocabulary.")


def log_probs_at(model, x: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, step: int,
                 pieces: Sequence[int]) -> torch.Tensor:
    """(R, P): log p(piece | y_<step, x_r) for each of `pieces` at `step` (from 0) of the forced output
    tgt (T,), source embeddings x (R, S, E) of the ids src (R, S) (or (1, S)). The pieces share
    the prefix y_<step, so they share one distribution: a Transformer (ours or a hub model's)
    reads them all from one teacher-forced pass up to `step`, its output head run there only
    (logits_at); a recurrent model decodes its steps once per piece (row_log_probs)."""
    R = x.size(0)
    src = src.expand(R, -1)
    last = torch.full((R,), step, dtype=torch.long, device=x.device)
    if isinstance(model, Seq2Seq):
        rows = []
        for piece in pieces:
            with_piece = tgt.clone()
            with_piece[step] = piece
            rows.append(row_log_probs(model, x, src, with_piece, last))
        return torch.stack(rows, 1)
    tgt_in = decoder_input(model, tgt)[:, :step + 1].expand(R, -1)
    logits = model.logits_at(src, torch.full((R,), src.size(1), device=x.device), tgt_in, last, embedded=x)
    logp = F.log_softmax(logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits, dim=-1)
    return logp[:, torch.as_tensor(list(pieces), device=x.device)]


def contrast_difference(model, x: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, step: int,
                        foil: int | None) -> torch.Tensor:
    """(R,): D = log p(y_step | y_<step, x_r) - log p(foil | y_<step, x_r) for source embeddings
    x (R, S, E) of the source ids src (R, S) (or (1, S)), the forced output tgt (T,), step
    counted from 0 (foil None: log p(y_step | y_<step, x_r) alone), read by log_probs_at."""
    lp = log_probs_at(model, x, src, tgt, step, [int(tgt[step])] + ([foil] if foil is not None else []))
    return lp[:, 0] if foil is None else lp[:, 0] - lp[:, 1]


def _embeddings(model, src: torch.Tensor) -> torch.Tensor:
    return model.embed(src).detach()            # (R, S, E): before positions are added, as the plain ones


def grad_x_input(model, src: torch.Tensor, tgt: torch.Tensor, step: int, foil: int | None) -> np.ndarray:
    """(S,): a_i = (dD / de_i) . e_i, one forward and one backward pass."""
    e = _embeddings(model, src)
    x = e.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(contrast_difference(model, x, src, tgt, step, foil).sum(), x)
    return (grad * e).sum(-1)[0].detach().double().cpu().numpy()


def integrated_gradients(model, src: torch.Tensor, tgt: torch.Tensor, step: int, foil: int | None,
                         steps: int = IG_STEPS, splits: int = IG_SPLITS) -> tuple[np.ndarray, float]:
    """(S,) integrated gradients of D from the zero embedding, and the completeness error
    sum_i a_i - (D(e) - D(0)); the path's segments halved where it is steep, as the plain
    integrated gradients do (each round one captum call over the open segments)."""
    from captum.attr import IntegratedGradients  # imported here: it pulls in matplotlib
    e = _embeddings(model, src)[0]                                            # (S, E)
    ig = IntegratedGradients(lambda emb: contrast_difference(model, emb, src, tgt, step, foil))

    @torch.no_grad()
    def at(t: torch.Tensor) -> torch.Tensor:                                 # D(t_r e) per row
        return contrast_difference(model, t.to(e)[:, None, None] * e, src, tgt, step, foil).double()

    ends = at(torch.tensor([1.0, 0.0]))
    budget = IG_TOLERANCE * (1 + (ends[0] - ends[1]).abs())
    total = torch.zeros(e.size(0), dtype=torch.float64, device=e.device)
    error = 0.0
    a, b = torch.zeros(1).to(e), torch.ones(1).to(e)
    f_a, f_b = ends[1:], ends[:1]
    for round_ in range(splits + 1):
        piece = ig.attribute(b[:, None, None] * e, baselines=a[:, None, None] * e, n_steps=steps,
                             method="gausslegendre").sum(-1).detach().double()          # (segments, S)
        err = piece.sum(1) - (f_b - f_a)
        done = (err.abs() <= budget * (b - a)) | (round_ == splits)
        total += piece[done].sum(0)
        error += float(err[done].sum())
        if bool(done.all()):
            break
        a, b, f_a, f_b = a[~done], b[~done], f_a[~done], f_b[~done]
        mid = (a + b) / 2
        f_mid = at(mid)
        a, b = torch.cat([a, mid]), torch.cat([mid, b])
        f_a, f_b = torch.cat([f_a, f_mid]), torch.cat([f_mid, f_b])
    return total.cpu().numpy(), error


@torch.no_grad()
def leave_one_out(model, src: torch.Tensor, tgt: torch.Tensor, step: int, foil: int | None) -> np.ndarray:
    """(S,): a_i = D(x) - D(x with x_i -> <unk>), the sentence and its S variants in one batch."""
    S = src.size(1)
    rows = src.repeat(S + 1, 1)
    rows[torch.arange(1, S + 1), torch.arange(S)] = unk_id(model)     # row i + 1 lacks piece i, as in the plain one
    d = contrast_difference(model, _embeddings(model, rows), rows, tgt, step, foil).double()
    return (d[0] - d[1:]).cpu().numpy()


@dataclass
class Contrast:
    """One step's contrastive attribution: scores (S,) of D = log p(y_T) - log p(foil)."""
    source_tokens: list[str]
    target_tokens: list[str]
    forced_from: str
    step: int                       # counted from 1
    target: str
    foil: str
    method: str
    scores: np.ndarray
    log_prob_target: float
    log_prob_foil: float
    completeness_error: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    head_mask: str = ""
    """the heads knocked out while it was read, as --mask-heads writes them ("": none)"""

    def to_json(self) -> dict:
        toward = [t for t, v in zip(self.source_tokens, self.scores) if v > 0]
        away = [t for t, v in zip(self.source_tokens, self.scores) if v < 0]
        return {"source_tokens": self.source_tokens, "target_tokens": self.target_tokens,
                "forced_from": self.forced_from, "contrast_step": self.step, "target": self.target, "foil": self.foil,
                "method": self.method, "scores": [float(v) for v in self.scores],
                "log_prob_target": self.log_prob_target, "log_prob_foil": self.log_prob_foil,
                "difference": self.log_prob_target - self.log_prob_foil,
                "toward_target": toward, "toward_foil": away,
                "completeness_error": self.completeness_error,
                "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
                **({"head_mask": self.head_mask} if self.head_mask else {})}


def explain_contrast(tr: Translator, text: str, step: int, foil: str, reference: str | None = None,
                     method: str = "grad-x-input", ig_steps: int = IG_STEPS,
                     target: Sequence[int] | None = None, head_mask: HeadMask | str = ()) -> Contrast:
    """The contrastive attribution of the greedy translation of `text` (or `reference`, or the
    piece ids `target`: a page's own decoding, whatever its search), forced, at `step` (counted
    from 1) against `foil` (one piece), by `method` (METHODS' names); with the heads of
    `head_mask` knocked out throughout (s2s.hooks.knocked_out)."""
    mask = read_head_mask(head_mask)
    with knocked_out(tr.model, mask):             # a bad mask: one line, before anything is computed
        c = _contrast(tr, text, step, foil, reference, method, ig_steps, target)
    c.head_mask = format_head_mask(mask)
    return c


def _contrast(tr: Translator, text: str, step: int, foil: str, reference: str | None, method: str, ig_steps: int,
              target: Sequence[int] | None) -> Contrast:
    t0 = time.perf_counter()
    src_list, tgt_list, frm = _pieces(tr, text, step, method, ig_steps, reference, target)
    j = int(step) - 1
    f = foil_id(tr, foil)
    if f == tgt_list[j]:
        raise InputError(f"The foil {tr.tokenizer.piece(f)!r} is the piece chosen at step {step}: pick another.")
    model = tr.model
    src = torch.tensor([src_list], device=tr.device)
    tgt = torch.tensor(tgt_list, device=tr.device)
    with torch.no_grad():       # both from one distribution: one pass (log_probs_at)
        target_lp, foil_lp = log_probs_at(model, model.embed(src), src, tgt, j, [tgt_list[j], f])[0].double().tolist()
    seconds = {"decode": time.perf_counter() - t0}
    t = time.perf_counter()
    scores, error = _attribute(model, src, tgt, j, f, method, ig_steps)
    seconds[METHODS[method]] = time.perf_counter() - t
    pieces = tr.tokenizer.pieces
    return Contrast(pieces(src_list), pieces(tgt_list), frm, int(step), tr.tokenizer.piece(tgt_list[j]),
                    tr.tokenizer.piece(f), method, scores, target_lp, foil_lp, error, seconds)


def step_attribution(tr: Translator, text: str, step: int, reference: str | None = None,
                     method: str = "grad-x-input", ig_steps: int = IG_STEPS,
                     target: Sequence[int] | None = None, head_mask: HeadMask | str = ()
                     ) -> tuple[np.ndarray, float | None]:
    """The plain attribution of log p(y_T) alone at `step` (counted from 1) to the source pieces,
    by the same method and code as explain_contrast with the foil's term dropped (the output and
    the head mask as there), and integrated gradients' completeness error (else None): what a
    contrast is read against. Equal to the row T of s2s.attributions' method (tests/test_contrast.py)."""
    with knocked_out(tr.model, head_mask):
        src_list, tgt_list, _ = _pieces(tr, text, step, method, ig_steps, reference, target)
        src = torch.tensor([src_list], device=tr.device)
        tgt = torch.tensor(tgt_list, device=tr.device)
        return _attribute(tr.model, src, tgt, int(step) - 1, None, method, ig_steps)


def _pieces(tr: Translator, text: str, step: int, method: str, ig_steps: int, reference: str | None,
            target: Sequence[int] | None) -> tuple[list[int], list[int], str]:
    """The source ids, the output's ids and where the output comes from, the step and method checked."""
    if method not in METHODS:
        raise InputError(f"Unknown method {method!r}: use {', '.join(METHODS)}.")
    check_range("Integration steps", ig_steps, 2, 256)
    src_list = source_ids(tr, text)
    if target is not None:
        tgt_list, frm = [int(i) for i in target], "given"
    else:
        tgt_list, frm = target_ids(tr, text, reference)
    if not 1 <= int(step) <= len(tgt_list):
        what = "translation" if reference is None else "reference"
        raise InputError(f"Step {step} is out of range: the {what} has {len(tgt_list)} pieces "
                         f"(steps 1 to {len(tgt_list)}).")
    return src_list, tgt_list, frm


def _attribute(model, src: torch.Tensor, tgt: torch.Tensor, j: int, foil: int | None, method: str,
               ig_steps: int) -> tuple[np.ndarray, float | None]:
    """(S,) scores of D at step j (from 0) by `method`, and integrated gradients' completeness error."""
    if method == "grad-x-input":
        return grad_x_input(model, src, tgt, j, foil), None
    if method == "ig":
        return integrated_gradients(model, src, tgt, j, foil, ig_steps)
    return leave_one_out(model, src, tgt, j, foil), None
