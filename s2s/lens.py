"""Each layer's guess: the logit lens on an encoder-decoder's decoder.

The decoder's output layer reads its last layer. Read every decoder layer l's hidden state x_l
through that same output layer, with the family's own final norm, scaling and bias
(s2s.hooks.output_head), and each layer gives a distribution over the next piece:

    log p_l(y_j | y_<j, x) = log_softmax(head(x_l,j))[y_j]

The last layer's is the model's own, so the last row is forced decoding's token_log_probs.
A copying Transformer mixes in its pointer as its forward does, from layer l's own
cross-attention (head mean: Transformer.copied_alpha, the heads still in under a knockout) and
its output, as if the decoder ended at layer l. A recurrent model's decoder is one layer (its
cell): one row, the model's own.

    python -m s2s.lens --model checkpoints/en-fr-transformer --json -- "The cat is black."
    python -m s2s.lens --model DIR --reference "Le chat est noir." --json -- "The cat is black."
    python -m s2s.lens --model checkpoints/en-fr-transformer --mask-heads cross:2.* --json -- "The cat is black."

With --mask-heads (head_mask) the lens reads the model with those heads knocked out
(s2s.hooks.knocked_out, as s2s.translate --mask-heads decodes): the greedy translation read is
the knocked-out model's, and every layer's row is read under the mask.

--json prints source_tokens, target_tokens, forced_from, layers (their names), log_probs (one row
per decoder layer, one value per output piece), top (per layer, per step, the TOP likeliest
pieces as [piece, log p]), ranks (per layer, per step, the chosen piece's rank, 1 the likeliest),
enters_top (per step, the first layer, from 1, from which on the chosen piece stays in the
top TOP; null if it is not in the last layer's), note (a recurrent model: it has one layer) and,
with --mask-heads, head_mask (the heads knocked out, as the option writes them).
Bad input gives one line on stderr starting with "error:" and exit status 2.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from .attributions import MAX_TARGET_PIECES, source_ids, target_ids
from .checkpoint import CheckpointError, Translator, load_translator
from .hooks import (
    MASK_HELP,
    HeadMask,
    decoder_input,
    first,
    format_head_mask,
    is_recurrent,
    knocked_out,
    layer_modules,
    output_head,
    parse_head_mask,
    read_head_mask,
    recorded,
)
from .hub import MODEL_HELP
from .text import InputError, OneLineErrorParser, text_argument
from .transformer import Transformer

TOP = 5
ONE_LAYER = ("A recurrent model's decoder is one layer (its cell, read by its output layer): "
             "one row, the model's own distribution.")


@dataclass
class Lens:
    """One forced output read at every decoder layer: log_probs (L, T) of the chosen pieces,
    top (L, T, TOP) of (piece, log p), ranks (L, T) of the chosen pieces (1: the likeliest)."""
    source_tokens: list[str]
    target_tokens: list[str]
    target_ids: list[int]
    forced_from: str
    layers: list[str]
    log_probs: list[list[float]]
    top: list[list[list[tuple[str, float]]]]
    ranks: list[list[int]]
    note: str | None = None
    head_mask: str = ""
    """the heads knocked out while it was read, as --mask-heads writes them ("": none)"""

    def enters_top(self, k: int = TOP) -> list[int | None]:
        """Per step, the first layer (from 1) from which on the chosen piece stays within the
        top k; None if the last layer does not have it there."""
        out: list[int | None] = []
        for j in range(len(self.target_tokens)):
            first_in = None
            for l in range(len(self.layers) - 1, -1, -1):
                if self.ranks[l][j] > k:
                    break
                first_in = l + 1
            out.append(first_in)
        return out

    def to_json(self) -> dict:
        return {"source_tokens": self.source_tokens, "target_tokens": self.target_tokens,
                "forced_from": self.forced_from, "layers": self.layers, "log_probs": self.log_probs,
                "top": self.top, "ranks": self.ranks, "enters_top": self.enters_top(), "note": self.note,
                **({"head_mask": self.head_mask} if self.head_mask else {})}


def layer_log_probs(model, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """(L, T, V): log p_l(. | y_<j, x) at every decoder layer l and step j of the forced output
    tgt (T,) for the source src (1, S), every layer read by the model's own output head; L = 1
    for a recurrent model (its forward's own log-probabilities)."""
    tgt_in = decoder_input(model, tgt)
    lengths = torch.full((1,), src.size(1), device=src.device)
    if is_recurrent(model):
        logits, _ = model(src, lengths, tgt_in)
        return F.log_softmax(logits.float(), dim=-1)
    head = output_head(model)
    _, decoder = layer_modules(model)
    with recorded(dict(enumerate(decoder))) as seen:
        if isinstance(model, Transformer):          # the decoder's layers only: its output layer runs below
            memory, _ = model.encode(src, lengths)
            model.decode_all(tgt_in, memory)
        else:
            model(src, lengths, tgt_in)
    rows = []
    for l in range(len(decoder)):
        output = seen[l][1]
        x = first(output)
        logits = head(x)
        if isinstance(model, Transformer) and model.copy_gate is not None:
            # the pointer as forward mixes it, from this layer's own cross-attention and its output
            _, context, _, cross_w = output
            s = model.decoder_norm(x)
            logits = model.point(logits, model.copied_alpha(cross_w, l), src, context, s)
        rows.append(F.log_softmax(logits[0].float(), dim=-1))
    return torch.stack(rows)


def _forced_ids(tr: Translator, text: str, reference: str | None,
                target: Sequence[int] | None) -> tuple[list[int], list[int], str]:
    """The source ids, the output ids read (`target` if given, else the reference's or the greedy
    translation's) and where they came from."""
    src_list = source_ids(tr, text)
    if target is None:
        tgt_list, frm = target_ids(tr, text, reference)
    else:
        tgt_list, frm = list(target), "given"
        if len(tgt_list) > MAX_TARGET_PIECES:
            raise InputError(f"The output is {len(tgt_list)} pieces long; the lens reads at most {MAX_TARGET_PIECES}.")
    if not tgt_list:
        raise InputError("The output is empty: there is no step to read.")
    return src_list, tgt_list, frm


@torch.inference_mode()
def lens(tr: Translator, text: str, reference: str | None = None, top: int = TOP,
         target: Sequence[int] | None = None, head_mask: HeadMask | str = ()) -> Lens:
    """The logit lens on the greedy translation of `text` (or `reference`, or the output piece
    ids `target`: a steered or sampled one, read as it is), forced; with the heads of `head_mask`
    knocked out (s2s.hooks.knocked_out) for the greedy decoding and every layer's reading."""
    mask = read_head_mask(head_mask)
    with knocked_out(tr.model, mask):             # a bad mask: one line, before anything is computed
        src_list, tgt_list, frm = _forced_ids(tr, text, reference, target)
        src = torch.tensor([src_list], device=tr.device)
        tgt = torch.tensor(tgt_list, device=tr.device)
        logp = layer_log_probs(tr.model, src, tgt)                          # (L, T, V)
    L, T, _ = logp.shape
    chosen = logp[:, torch.arange(T, device=tgt.device), tgt]              # (L, T)
    ranks = (logp > chosen[..., None]).sum(-1) + 1
    values, ids = logp.topk(min(top, logp.size(-1)), dim=-1)
    piece = tr.tokenizer.piece
    tops = [[[(piece(i), round(float(v), 6)) for v, i in zip(values[l, j].tolist(), ids[l, j].tolist())]
             for j in range(T)] for l in range(L)]
    recurrent = is_recurrent(tr.model)
    names = ["decoder (one layer)"] if recurrent else [f"decoder layer {l + 1}" for l in range(L)]
    return Lens(tr.tokenizer.pieces(src_list), tr.tokenizer.pieces(tgt_list), list(tgt_list), frm, names,
                chosen.double().tolist(), tops, ranks.tolist(), ONE_LAYER if recurrent else None,
                format_head_mask(mask))


@torch.inference_mode()
def watched(tr: Translator, text: str, target: Sequence[int], step: int, piece: int,
            head_mask: HeadMask | str = ()) -> list[tuple[float, int]]:
    """Another piece watched beside the chosen one: at `step` (from 0) of the output piece ids
    `target` forced for `text`, its (log p, rank) at every decoder layer, as `lens` reads the
    chosen piece's (rank 1: the likeliest; ties counted in its favour), under `head_mask` as there."""
    with knocked_out(tr.model, head_mask):
        src_list, tgt_list, _ = _forced_ids(tr, text, None, target)
        if not 0 <= step < len(tgt_list):
            raise InputError(f"Step {step + 1} is out of range: the output has {len(tgt_list)} pieces.")
        src = torch.tensor([src_list], device=tr.device)
        tgt = torch.tensor(tgt_list, device=tr.device)
        logp = layer_log_probs(tr.model, src, tgt)[:, step]                  # (L, V)
    if not 0 <= piece < logp.size(-1):
        raise InputError(f"Piece id {piece} is not in {tr.name}'s vocabulary.")
    mine = logp[:, piece]
    ranks = (logp > mine[:, None]).sum(-1) + 1
    return [(float(v), int(r)) for v, r in zip(mine.double().tolist(), ranks.tolist())]


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineErrorParser(prog="python -m s2s.lens", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a translation model: " + MODEL_HELP)
    p.add_argument("--reference", metavar="FRENCH", help="read this French translation (default: the greedy one)")
    p.add_argument("--top", type=int, default=TOP, help=f"each layer's likeliest pieces per step (default {TOP})")
    p.add_argument("--mask-heads", metavar="KIND:LAYER.HEAD", default="",
                   help="read the model with these heads knocked out: " + MASK_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("text", nargs="*", help="the English text (after --, if it starts with a dash)")
    a = p.parse_args(argv)
    try:
        if not 1 <= a.top <= 50:
            raise InputError(f"--top must be between 1 and 50, not {a.top}.")
        mask = parse_head_mask(a.mask_heads)
        tr = load_translator(a.model)
        out = lens(tr, text_argument(a.text), a.reference, a.top, head_mask=mask)
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(out.to_json(), ensure_ascii=False, allow_nan=False))
        return 0
    if out.note:
        print(out.note)
    if out.head_mask:
        print(f"heads knocked out: {out.head_mask}")
    enters = out.enters_top()
    for j, y in enumerate(out.target_tokens):
        ranks = " ".join(f"{out.ranks[l][j]:>5}" for l in range(len(out.layers)))
        where = "never" if enters[j] is None else f"layer {enters[j]}"
        print(f"{y[:14]:>14}  ranks by layer {ranks}   in the top {a.top} from {where}; "
              f"last layer's top: {', '.join(t for t, _ in out.top[-1][j][:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
