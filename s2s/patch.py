"""Patch a state across an edit: which layer and position carry the change (activation patching).

Two sentences of the same number of source pieces, the original (the clean run) and an edit of
one word (the corrupted run); the metric is the forced log-probability of the original's
translation (or a reference), sum_j log p(y_j | y_<j, x). For every encoder layer l and source
position i, the edited sentence is run again with that one activation, layer l's output at
position i, replaced by the clean run's:

    patched[l][i] = log p(y | edited x, h_l,i := clean h_l,i)

patched == clean_log_prob: that state alone carries the whole change; == corrupt_log_prob:
none of it. (patched - corrupt) / (clean - corrupt) is the share restored. A Transformer's
cross-attention heads are patched too, each head's output (its slice of the attention output
before W_O) replaced by the clean run's at every output step: patched_heads (decoder layers
x heads). A recurrent model has one encoder layer, its bidirectional RNN: position i's output
(both directions), with the forward direction's final state at the last position and the
backward direction's at the first (the decoder's initial state is read from those). A copying
model's pointer writes the source's pieces themselves, so its encoder output at position i is
the state and the piece: patching the last encoder layer at i gives the pointer the clean piece
there too (the encoder still reads the edited one).

Patching every position of the last encoder layer gives the clean log p; patching nothing, the
corrupted one (tests/test_patch.py holds both, and one cell against a hooked transformers run).

With `head_mask` (--mask-heads) both runs and every patched one read the model with those heads
knocked out (s2s.hooks.knocked_out): a knocked-out head's slice is 0 in the clean run too, so
patching it restores nothing (tests/test_mask_instruments.py holds the patch against a copy of
the model whose knocked-out heads' W_O input columns are zeroed).

    python -m s2s.patch --model checkpoints/en-fr-transformer --edited "The boy is happy." -- "The girl is happy."

    python -m s2s.patch --model checkpoints/en-fr-transformer --mask-heads encoder:2.1 \
        --edited "The boy is happy." -- "The girl is happy."

--json prints source_tokens, edited_tokens, target_tokens, forced_from, layers, patched (layers x
source positions), clean_log_prob, corrupt_log_prob, patched_heads (decoder layers x heads; null
for a recurrent model) and restored (the share, layers x positions; null where clean = corrupt);
with --mask-heads, head_mask (the heads knocked out, as the option writes them).
Bad input (an edit of another length, an empty edit) gives one line on stderr starting with
"error:" and exit status 2.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .attributions import MAX_TARGET_PIECES, source_ids, target_ids
from .checkpoint import CheckpointError, Translator, load_translator
from .hooks import (
    MASK_HELP,
    HeadMask,
    attached,
    decoder_input,
    first,
    format_head_mask,
    is_recurrent,
    knocked_out,
    layer_modules,
    parse_head_mask,
    per_head,
    read_head_mask,
    recorded,
    sites,
)
from .hub import MODEL_HELP
from .piece_words import word_spans
from .text import InputError, OneLineErrorParser, clean_text, text_argument

LOGIT_ELEMENTS = 2 ** 24      # rows x steps x vocabulary of one batched pass: at most 64 MB of fp32 logits


@torch.inference_mode()
def sequence_log_probs(model, src_rows: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """(R,): sum_j log p(y_j | y_<j, x_r) of the forced output tgt (T,) for each source row (R, S)."""
    R, T = src_rows.size(0), tgt.numel()
    logits, _ = model(src_rows, torch.full((R,), src_rows.size(1), device=src_rows.device),
                      decoder_input(model, tgt).expand(R, -1))
    logp = F.log_softmax(logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits, dim=-1)
    return logp[:, torch.arange(T, device=tgt.device), tgt].double().sum(1)


def _with_first(output, new: torch.Tensor):
    """A module's output with its main tensor replaced (transformers' layers may return tuples)."""
    return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new


def _patch_positions(clean: torch.Tensor, rows: Sequence[tuple[int, int]]) -> Callable:
    """A forward hook: in row r of the batch, position i of the output's main tensor becomes
    clean[0, i], for each (r, i) of `rows`."""
    def hook(module, args, output):
        x = first(output).clone()
        for r, i in rows:
            x[r, i] = clean[0, i]
        return _with_first(output, x)
    return hook


def _patch_rnn(clean, rows: Sequence[tuple[int, int]]) -> Callable:
    """A forward hook on a bidirectional RNN (batch first): row r's position i takes the clean
    run's output there, and its final state where position i ends a direction (the forward
    direction at the last position, the backward one at the first)."""
    clean_out, clean_final = clean

    def hook(module, args, output):
        out, final = output
        out = out.clone()
        finals = [f.clone() for f in (final if isinstance(final, tuple) else (final,))]
        cleans = clean_final if isinstance(clean_final, tuple) else (clean_final,)
        S = out.size(1)
        for r, i in rows:
            out[r, i] = clean_out[0, i]
            for f, c in zip(finals, cleans):
                if i == S - 1:
                    f[0::2, r] = c[0::2, 0]         # forward direction(s)
                if i == 0:
                    f[1::2, r] = c[1::2, 0]         # backward direction(s)
        return out, (tuple(finals) if isinstance(final, tuple) else finals[0])
    return hook


def _patch_heads(clean: torch.Tensor, heads: int, rows: Sequence[tuple[int, int]]) -> Callable:
    """A pre-hook on an output projection W_O: in row r, head h's slice of its input becomes the
    clean run's at every step, for each (r, h) of `rows`."""
    clean_heads = per_head(clean, heads)

    def hook(module, args):
        x = args[0].clone()
        x_heads = per_head(x, heads)        # a view: writing it writes x
        for r, h in rows:
            x_heads[r, ..., h, :] = clean_heads[0, ..., h, :]
        return (x,) + tuple(args[1:])
    return hook


def _encoder_sites(model) -> list[nn.Module]:
    """The modules whose output is each encoder layer's states: a Transformer's layers; a
    recurrent model's RNN."""
    return [model.encoder] if is_recurrent(model) else layer_modules(model)[0]


def _batched(model, edited: torch.Tensor, tgt: torch.Tensor, cells: list, hooks_for: Callable) -> list[float]:
    """log p of the forced output for the edited source, one row per cell, in batches small
    enough for their logits; hooks_for(cells of a batch, the batch's source rows) -> the hooks
    that patch them (it may change the rows' ids: copying models, _copied_pieces)."""
    vocab = model.cfg.vocab_size
    size = max(1, LOGIT_ELEMENTS // max(1, tgt.numel() * vocab))
    out: list[float] = []
    for start in range(0, len(cells), size):
        batch = cells[start:start + size]
        rows = edited.expand(len(batch), -1).clone()
        with attached(hooks_for(batch, rows)):
            out += sequence_log_probs(model, rows, tgt).tolist()
    return out


def _copied_pieces(model, clean_src: torch.Tensor, rows: torch.Tensor, cells_by_row: Sequence[tuple[int, int, int]]
                   ) -> list:
    """A copying model's pointer writes the source's pieces themselves: the encoder's output at
    position i, as its decoder reads it, is the state h_i and the piece x_i. So where the last
    encoder layer's state at i is patched, the row's id at i becomes the clean one (in place, in
    `rows`: the pointer and the location cue read it), while its embedding stays the edited
    one's (the hook returned, on the encoder's embedding of exactly these rows)."""
    if getattr(model, "copy_gate", None) is None or getattr(model, "hf", None) is not None:
        return []
    last = len(_encoder_sites(model)) - 1
    edited = rows.clone()
    changed = False
    for r, l, i in cells_by_row:
        if l == last:
            rows[r, i] = clean_src[0, i]
            changed = True
    if not changed:
        return []
    with torch.inference_mode():
        embedded = model.embed(edited)

    def keep_edited(module, args, output):
        return embedded if args[0] is rows else None
    return [(model.embed, "forward", keep_edited)]


@dataclass
class CleanRun:
    """What the patches take from the clean run, read in one pass: its log p, each encoder
    layer's output (a recurrent model's RNN: its whole output) and each cross-attention layer's
    input of W_O (its heads' outputs; none for a recurrent model, or when not asked)."""
    log_prob: float
    encoder: dict[int, object]
    heads: dict[int, torch.Tensor]


def clean_run(model, clean_src: torch.Tensor, tgt: torch.Tensor, heads: bool = True) -> CleanRun:
    """One forced pass of the clean source recording every state the patches replace."""
    modules = _encoder_sites(model)
    recurrent = is_recurrent(model)
    cross = sites(model)[2] if heads and not recurrent else []
    watched = {("encoder", l): m for l, m in enumerate(modules)}
    watched.update({("heads", l): s.o for l, s in enumerate(cross)})
    with torch.inference_mode(), recorded(watched) as seen:
        log_prob = float(sequence_log_probs(model, clean_src, tgt)[0])
    encoder = {l: seen["encoder", l][1] if recurrent else first(seen["encoder", l][1]) for l in range(len(modules))}
    return CleanRun(log_prob, encoder, {l: seen["heads", l][0] for l in range(len(cross))})


def _layer_hooks(model, clean_src: torch.Tensor, clean: dict, cells_by_row: Sequence[tuple[int, int, int]],
                 rows: torch.Tensor) -> list:
    """The editors for (row, layer, position) triples: that row's state there from the clean run
    (and a copying model's piece there, at the last layer: _copied_pieces)."""
    patch = _patch_rnn if is_recurrent(model) else _patch_positions
    hooks = _copied_pieces(model, clean_src, rows, cells_by_row)
    for l, module in enumerate(_encoder_sites(model)):
        at = [(r, i) for r, ll, i in cells_by_row if ll == l]     # (batch row, position): not `rows`, the ids
        if at:
            hooks.append((module, "forward", patch(clean[l], at)))
    return hooks


def patch_layers(model, clean_src: torch.Tensor, edited: torch.Tensor, tgt: torch.Tensor,
                 clean_states: CleanRun | None = None) -> list[list[float]]:
    """(layers, S): the edited run with one encoder layer's output at one position from the clean
    run (`clean_states`: that run, read already)."""
    clean = (clean_states or clean_run(model, clean_src, tgt, heads=False)).encoder
    S = clean_src.size(1)
    cells = [(l, i) for l in range(len(clean)) for i in range(S)]
    flat = _batched(model, edited, tgt, cells, lambda batch, rows: _layer_hooks(
        model, clean_src, clean, [(r, l, i) for r, (l, i) in enumerate(batch)], rows))
    return [flat[l * S:(l + 1) * S] for l in range(len(clean))]


def patched_log_prob(model, clean_src: torch.Tensor, edited: torch.Tensor, tgt: torch.Tensor,
                     cells: Sequence[tuple[int, int]]) -> float:
    """log p of the forced output for the edited source with every (layer, position) of `cells`
    from the clean run at once, in one run (no cells: the corrupted run; every position of the
    last layer: the clean one)."""
    clean = clean_run(model, clean_src, tgt, heads=False).encoder
    rows = edited.clone()
    with attached(_layer_hooks(model, clean_src, clean, [(0, l, i) for l, i in cells], rows)):
        return float(sequence_log_probs(model, rows, tgt)[0])


def patch_heads(model, clean_src: torch.Tensor, edited: torch.Tensor, tgt: torch.Tensor,
                clean_states: CleanRun | None = None) -> list[list[float]]:
    """(decoder layers, heads): the edited run with one cross-attention head's output, at every
    step, from the clean run (`clean_states`: that run, read already with its heads)."""
    cross = sites(model)[2]
    clean = (clean_states or clean_run(model, clean_src, tgt)).heads
    cells = [(l, h) for l, s in enumerate(cross) for h in range(s.heads)]

    def hooks_for(batch, rows):
        hooks = []
        for l, s in enumerate(cross):
            at = [(r, h) for r, (ll, h) in enumerate(batch) if ll == l]      # (batch row, head)
            if at:
                hooks.append((s.o, "pre", _patch_heads(clean[l], s.heads, at)))
        return hooks
    flat = _batched(model, edited, tgt, cells, hooks_for)
    out, k = [], 0
    for s in cross:
        out.append(flat[k:k + s.heads])
        k += s.heads
    return out


@dataclass
class Patching:
    source_tokens: list[str]
    edited_tokens: list[str]
    target_tokens: list[str]
    forced_from: str
    layers: list[str]
    patched: list[list[float]]                  # (layers, S)
    clean_log_prob: float
    corrupt_log_prob: float
    patched_heads: list[list[float]] | None     # (decoder layers, heads)
    seconds: dict[str, float] = field(default_factory=dict)
    head_mask: str = ""                         # the heads knocked out throughout, as --mask-heads writes them

    def restored(self) -> list[list[float]] | None:
        """(patched - corrupt) / (clean - corrupt), layers x positions; None where clean = corrupt."""
        gap = self.clean_log_prob - self.corrupt_log_prob
        if abs(gap) < 1e-9:
            return None
        return [[(v - self.corrupt_log_prob) / gap for v in row] for row in self.patched]

    def restored_heads(self) -> list[list[float]] | None:
        """The same share for each cross-attention head (decoder layers x heads); None for a
        recurrent model, or where clean = corrupt."""
        gap = self.clean_log_prob - self.corrupt_log_prob
        if self.patched_heads is None or abs(gap) < 1e-9:
            return None
        return [[(v - self.corrupt_log_prob) / gap for v in row] for row in self.patched_heads]

    def to_json(self) -> dict:
        return {"source_tokens": self.source_tokens, "edited_tokens": self.edited_tokens,
                "target_tokens": self.target_tokens, "forced_from": self.forced_from, "layers": self.layers,
                "patched": self.patched, "clean_log_prob": self.clean_log_prob,
                "corrupt_log_prob": self.corrupt_log_prob, "patched_heads": self.patched_heads,
                "restored": self.restored(), "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
                **({"head_mask": self.head_mask} if self.head_mask else {})}


def shares_by_word(source_tokens: Sequence[str], edited_tokens: Sequence[str], shares: Sequence[Sequence[float]]
                   ) -> tuple[list[str], list[str], list[list[float]]]:
    """Rows of shares restored over the source pieces as rows over the original's words
    (s2s.piece_words.word_spans). Each piece is patched alone, so a word's pieces' shares do not
    add: a word of several pieces takes the share of its piece that moves the log p most (the
    largest in size, its sign kept). Returns the original's words, the edited sentence's pieces
    at the same positions read as words (several joined by spaces where the edit splits them
    otherwise), and the rows."""
    spans = word_spans(source_tokens)
    edited = [" ".join(w for w, _ in word_spans(edited_tokens[idx[0]:idx[-1] + 1])) for _, idx in spans]
    rows = [[max((row[i] for i in idx), key=abs) for _, idx in spans] for row in shares]
    return [w for w, _ in spans], edited, rows


def patch(tr: Translator, text: str, edited: str, reference: str | None = None, heads: bool = True,
          output_ids: Sequence[int] | None = None, head_mask: HeadMask | str = ()) -> Patching:
    """Activation patching from `text` (clean) into `edited` (corrupted), the metric the forced
    log p of `text`'s greedy translation (or `reference`, or `output_ids`: the pieces of an output
    decoded already, a page's own, which spares the greedy decoding); with the heads of `head_mask`
    knocked out in every run (s2s.hooks.knocked_out; the greedy translation decoded so too)."""
    mask = read_head_mask(head_mask)
    with knocked_out(tr.model, mask):     # a head the model lacks: InputError before any work
        out = _patch(tr, text, edited, reference, heads, output_ids)
    out.head_mask = format_head_mask(mask)
    return out


def _patch(tr: Translator, text: str, edited: str, reference: str | None, heads: bool,
           output_ids: Sequence[int] | None) -> Patching:
    t0 = time.perf_counter()
    clean_text(edited, what="edit")
    src_list, edit_list = source_ids(tr, text), source_ids(tr, edited)
    if len(src_list) != len(edit_list):
        raise InputError(f"The edit is {len(edit_list)} source pieces and the original {len(src_list)}: patching "
                         "needs the same number (swap a word for one of as many pieces).")
    if output_ids is not None:
        tgt_list, frm = [int(i) for i in output_ids], "given"
        if not tgt_list or len(tgt_list) > MAX_TARGET_PIECES:
            raise InputError(f"The output is {len(tgt_list)} pieces long; patching takes 1 to {MAX_TARGET_PIECES}.")
    else:
        tgt_list, frm = target_ids(tr, text, reference)
    model = tr.model
    src = torch.tensor([src_list], device=tr.device)
    edit = torch.tensor([edit_list], device=tr.device)
    tgt = torch.tensor(tgt_list, device=tr.device)
    recurrent = is_recurrent(model)
    seconds = {"decode": time.perf_counter() - t0}
    t = time.perf_counter()
    clean = clean_run(model, src, tgt, heads=heads and not recurrent)      # one clean pass for both patches
    corrupt_lp = float(sequence_log_probs(model, edit, tgt)[0])
    seconds["clean"] = time.perf_counter() - t
    t = time.perf_counter()
    layers = patch_layers(model, src, edit, tgt, clean)
    seconds["layers"] = time.perf_counter() - t
    by_head = None
    if heads and not recurrent:
        t = time.perf_counter()
        by_head = patch_heads(model, src, edit, tgt, clean)
        seconds["heads"] = time.perf_counter() - t
    names = (["encoder (its RNN)"] if recurrent
             else [f"encoder layer {l + 1}" for l in range(len(layers))])
    seconds["total"] = time.perf_counter() - t0
    pieces = tr.tokenizer.pieces
    return Patching(pieces(src_list), pieces(edit_list), pieces(tgt_list), frm, names, layers, clean.log_prob,
                    corrupt_lp, by_head, seconds)


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineErrorParser(prog="python -m s2s.patch", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a translation model: " + MODEL_HELP)
    p.add_argument("--edited", required=True, metavar="ENGLISH2",
                   help="the edited sentence (the corrupted run), as many source pieces as the original")
    p.add_argument("--reference", metavar="FRENCH",
                   help="the metric's French (default: the original's greedy translation)")
    p.add_argument("--mask-heads", metavar="KIND:LAYER.HEAD", default="",
                   help="read the model with these heads knocked out in every run: " + MASK_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("text", nargs="*", help="the original English text (after --, if it starts with a dash)")
    a = p.parse_args(argv)
    try:
        mask = parse_head_mask(a.mask_heads)
        tr = load_translator(a.model)
        out = patch(tr, text_argument(a.text), a.edited, a.reference, head_mask=mask)
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(out.to_json(), ensure_ascii=False, allow_nan=False))
        return 0
    if out.head_mask:
        print(f"heads knocked out: {out.head_mask}")
    print(f"log p of {' '.join(out.target_tokens)!r}: clean {out.clean_log_prob:.3f}, "
          f"corrupted {out.corrupt_log_prob:.3f}")
    share = out.restored()
    print(f"{'':>24}" + "".join(f"{t[:8]:>9}" for t in out.source_tokens))
    for name, row, srow in zip(out.layers, out.patched, share or out.patched):
        cells = "".join(f"{v:>9.2f}" for v in (srow if share else row))
        print(f"{name[:24]:>24}{cells}")
    if share:
        print("(the share of the change each state restores: (patched - corrupt) / (clean - corrupt))")
    if out.patched_heads is not None:
        for l, row in enumerate(out.restored_heads() or out.patched_heads, 1):
            values = row
            print(f"cross-attention layer {l}, each head's output patched: " + " ".join(f"{v:.2f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
