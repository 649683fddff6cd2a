"""A model's neighbours index: its tensors and pairs in memory (NeighbourIndex), written to and
read from its folder (index.safetensors + index.json, never pickle), checked to be its model's."""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..data import Pair
from ..loaded import Translator
from ..text import InputError
from .identity import build_command, index_dir, model_identity, same_model

FORMAT = 2              # index.json's "format": an index of another format is rebuilt, never misread
CODES = ("each row scaled so that its largest |entry| is 127 and rounded to int8; a cosine reads the codes "
         "as they are (a row's scale cancels in it)")
INDEX_JSON, INDEX_TENSORS = "index.json", "index.safetensors"


class IndexNotReady(InputError):
    """There is no usable neighbours index for this model: none at the place looked, one built for
    another model, or one that cannot be read. `reason` is "missing", "other model" or "unreadable";
    the message says which and how to build one (the page offers to)."""

    def __init__(self, message: str, reason: str, where: Path | None = None):
        super().__init__(message)
        self.reason, self.where = reason, where


@dataclass
class NeighbourIndex:
    """One model's index, ready to search: N training pairs, M = the sum of their target lengths.

    sentence_keys  (N, H) fp32  each pair's pooled encoder state (POOLING), scaled to length 1
    state_keys     (M, D) fp32  the decoder state at every step of every pair, forced on its French
                                (STATE), scaled to length 1
    offsets        (N + 1,) int64  pair i's states are rows offsets[i] .. offsets[i + 1] - 1, in step order
    pieces         (M,) int32   the training target piece y_j at each state (teacher forcing)
    predicted      (M,) int32   the model's own argmax at each state
    pairs          N (English, French) texts; meta: index.json less the pairs; where: its folder

    On disk the states are int8 codes (CODES; index.safetensors: sentences, states: 33 MB for
    the shipped models' 10,000 pairs, where fp16 took 65); in memory they are unit rows in
    fp32, made once at load, so that one matrix product is every cosine, exactly, over what is
    stored (docs/neighbours.md: the measured choices; 115 MB for 112,513 states)."""
    meta: dict
    pairs: list[Pair]
    sentence_keys: torch.Tensor
    state_keys: torch.Tensor
    offsets: torch.Tensor
    pieces: torch.Tensor
    predicted: torch.Tensor
    where: Path | None = None
    state_pair: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self):
        self.state_pair = torch.repeat_interleave(torch.arange(len(self.pairs)), self.offsets[1:] - self.offsets[:-1])

    @classmethod
    def from_tensors(cls, meta: dict, pairs: list[Pair], tensors: dict[str, torch.Tensor],
                     where: Path | None = None) -> "NeighbourIndex":
        """From index.safetensors' tensors (sentences, states, offsets, pieces, predicted)."""
        return cls(meta, pairs, unit_rows(tensors["sentences"]), unit_rows(tensors["states"]), tensors["offsets"],
                   tensors["pieces"], tensors["predicted"], where)

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    @property
    def n_states(self) -> int:
        return int(self.state_keys.size(0))

    def pair_piece_ids(self, pair: int) -> list[int]:
        """The target piece ids of training pair `pair`, one per indexed state (</s> last)."""
        return self.pieces[int(self.offsets[pair]):int(self.offsets[pair + 1])].tolist()

    def row(self, pair: int, step: int) -> int:
        """The state row of step `step` of pair `pair`."""
        return int(self.offsets[pair]) + step

    def check(self, tr: Translator) -> None:
        """IndexNotReady unless this index was built for `tr`'s weights."""
        current = model_identity(tr)
        if not same_model(self.meta.get("model", {}), current):
            built = self.meta.get("model", {})
            raise IndexNotReady(f"The neighbours index{_at(self.where)} was built for another model "
                                f"({built.get('name', '?')}, {built.get('path', '?')}), not for {tr.name}: "
                                f"rebuild it with `{build_command(tr)}`.", "other model", self.where)


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """(n, d) -> the same rows scaled to length 1, in fp32 (a zero row stays zero)."""
    x = x.float()
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def int8_codes(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> int8 codes of each row (CODES): the row over its largest |entry|, times 127,
    rounded. A zero row stays zero. Only cosines are read from them, so no scale is kept."""
    x = x.float()
    return torch.round(x / x.abs().amax(-1, keepdim=True).clamp_min(1e-12) * 127).to(torch.int8)


def _at(where: Path | None) -> str:
    return f" at {where}" if where is not None else ""


def write_index(folder: Path, meta: dict, pairs: list[Pair], tensors: dict[str, torch.Tensor]) -> None:
    """index.safetensors and index.json into `folder`, each written under a name of this build's
    own and then renamed: two builds of one index at once (two sessions) never write one file,
    and a build cut short leaves its part files, removed here, never half an index. Tensors are
    renamed first: an older JSON beside the new tensors fails load_index's checks, never the
    other way round."""
    from safetensors.torch import save_file
    part = f".{os.getpid()}-{uuid.uuid4().hex[:8]}.part"
    tmp_t, tmp_j = folder / (INDEX_TENSORS + part), folder / (INDEX_JSON + part)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp_t), metadata={"format": "pt"})
        tmp_j.write_text(json.dumps({**meta, "pairs": pairs}, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp_t, folder / INDEX_TENSORS)
        os.replace(tmp_j, folder / INDEX_JSON)
    except OSError as e:
        raise InputError(f"cannot write the neighbours index to {folder}: {e.strerror or e} "
                         "(set S2S_NEIGHBOURS_DIR to a writable folder)") from None
    finally:
        for f in (tmp_t, tmp_j):
            f.unlink(missing_ok=True)


def load_index(tr: Translator, where: str | Path | None = None) -> NeighbourIndex:
    """`tr`'s index from folder `where` (default index_dir(tr)), checked to be this model's:
    IndexNotReady (an InputError) if it is missing, built for another model, of another format,
    or unreadable; the message says which and the command that builds it."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    folder = Path(where) if where is not None else index_dir(tr)
    command = f"`{build_command(tr)}" + (f" --index {folder}`" if where is not None else "`")
    if not (folder / INDEX_JSON).is_file() or not (folder / INDEX_TENSORS).is_file():
        raise IndexNotReady(f"No neighbours index for {tr.name} at {folder}: build it with {command}.", "missing",
                            folder)
    try:
        meta = json.loads((folder / INDEX_JSON).read_text(encoding="utf-8"))
        tensors = load_file(str(folder / INDEX_TENSORS))
        pairs = [tuple(p) for p in meta.pop("pairs")]
        index = NeighbourIndex.from_tensors(meta, pairs, tensors, folder)
        consistent = (index.sentence_keys.size(0) == len(pairs) == index.offsets.numel() - 1
                      and int(index.offsets[-1]) == index.n_states == index.pieces.numel() == index.predicted.numel())
    except (OSError, ValueError, KeyError, TypeError, AttributeError, SafetensorError, RuntimeError) as e:
        raise IndexNotReady(f"The neighbours index at {folder} cannot be read ({type(e).__name__}): rebuild it with "
                            f"{command}.", "unreadable", folder) from None
    if meta.get("format") != FORMAT or not consistent:
        raise IndexNotReady(f"The neighbours index at {folder} is of another format or inconsistent: rebuild it with "
                            f"{command}.", "unreadable", folder)
    index.check(tr)
    return index
