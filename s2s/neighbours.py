"""Neighbours: the training sentences and training decoder states nearest to a sentence's own.

A student types "She has a big black dog." and sees where its vectors sit among the training
data's, in two ways, both by cosine similarity cos(u, v) = u . v / (|u| |v|):

    by sentence   the sentence's pooled encoder state, the MEAN of the encoder states h_i over its
                  real source positions (every source piece and the closing </s>; padding left out),
                  against the same pooled state of every indexed training sentence
    by step       at each output step j, the decoder state the output layer reads (the recurrent
                  models' attentional hidden state h~_j = tanh(W_c [c_j ; s_j]), the fixed-vector
                  model's too; the Transformer's last decoder layer output after the final layer norm;
                  a hub model's last decoder hidden state), against the decoder states of every step
                  of every indexed training pair, each shown with the piece at that step and its
                  sentence: "chien" here comes from states like those

The training states are taken under teacher forcing on the training French: at step j the
decoder has read the reference's pieces y_<j, and the piece an indexed state is shown with is
the TRAINING TARGET piece y_j (what it was trained to emit there); the model's own argmax at that
state is kept beside it (`predicted`). The query sentence's states come from a forced pass over
its translation (the greedy one unless given), the same states its decoding had.

The index: a sample of each model's own training split (the shipped models':
examples/neighbours/tatoeba-train-10k.tsv, 10,000 pairs of data/tatoeba/train.tsv, one per English
sentence; docs/data.md), its pooled encoder states and its decoder states in fp16, written by

    python -m s2s.neighbours build --model en-fr-additive

as index.safetensors (tensors) + index.json (the pairs, the model's identity, the corpus) in the
cache folder (`index_dir`): $S2S_NEIGHBOURS_DIR/NAME, else $XDG_CACHE_HOME/s2s-neighbours/NAME, else
~/.cache/s2s-neighbours/NAME (the six shipped models' indexes take 392 MB: built on first use). An index
records the model it was built for (its path and the SHA-256 of its weights file, or of its config
where there is no single file), so an index of another model is refused (IndexNotReady, an
InputError, as a missing one is), never searched.

Search is exact: one matrix product against the whole index and a top-k (docs/neighbours.md says
why, with the measurements). The 2-D map is a PCA of the neighbours' unit-length decoder states,
with the sentence's own trajectory placed on it.

    python -m s2s.neighbours --model en-fr-additive "She has a big black dog." [--k 5] [--json]
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from .checkpoint import CheckpointError, load_translator
from .data import Pair, read_pairs, write_pairs
from .decode import encode_source, greedy, pad_batch
from .hub import MODEL_HELP, add_model_options, model_options
from .loaded import Translator
from .text import MAX_DECODE_LEN, InputError, OneLineErrorParser, check_range, clean_text, text_argument

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "neighbours" / "tatoeba-train-10k.tsv"   # the shipped models' index corpus
SAMPLE_PAIRS, SAMPLE_SEED = 10_000, 1
FORMAT = 1              # index.json's "format": an index of another format is rebuilt, never misread
INDEX_JSON, INDEX_TENSORS = "index.json", "index.safetensors"
MAX_K = 50
BATCH_PAIRS = 64        # pairs encoded and forced together while building (sorted by length: little padding)
POOLING = "mean of the encoder states over the real source positions (source pieces and </s>)"
STATE = {"rnn": "the attentional hidden state h~_j = tanh(W_c [c_j ; s_j]) the output layer reads",
         "transformer": "the last decoder layer's output after the final layer norm (what the output layer reads)",
         "hub": "the last decoder layer's hidden state (transformers' decoder_hidden_states[-1]), what the output "
                "layer reads"}

Progress = Callable[[int, int], None]      # (pairs done, pairs in all)


class IndexNotReady(InputError):
    """There is no usable neighbours index for this model: none at the place looked, one built for
    another model, or one that cannot be read. `reason` is "missing", "other model" or "unreadable";
    the message says which and how to build one (the page offers to)."""

    def __init__(self, message: str, reason: str, where: Path | None = None):
        super().__init__(message)
        self.reason, self.where = reason, where


# ------------------------------------------------------------------ where an index lives, whose it is

def cache_root() -> Path:
    """Where indexes are kept: $S2S_NEIGHBOURS_DIR, else $XDG_CACHE_HOME/s2s-neighbours, else
    ~/.cache/s2s-neighbours. Not in checkpoints/: the six shipped models' indexes take 65 MB each
    (docs/neighbours.md), far over what the repository ships, so each is built on first use."""
    if os.environ.get("S2S_NEIGHBOURS_DIR"):
        return Path(os.environ["S2S_NEIGHBOURS_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "s2s-neighbours"


def index_dir(tr: Translator, root: str | Path | None = None) -> Path:
    """The folder of `tr`'s index: root / its name (a hub name's "/" made "_")."""
    return Path(root if root is not None else cache_root()) / re.sub(r"[^A-Za-z0-9._-]+", "_", tr.name)


@lru_cache(maxsize=64)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file, remembered for as long as its size and time stamp stay (a page searching
    again does not hash 15 MB again)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def weights_file(tr: Translator) -> Path | None:
    """The one file `tr`'s weights were read from, where there is one: a shipped checkpoint's
    model.safetensors, a save_pretrained folder's, a hub model's in huggingface-hub's cache."""
    hub = tr.config.get("hub")
    if hub is None or not str(hub).startswith("hf:"):
        folder = Path(hub) if hub is not None else Path(tr.path)
        for name in ("model.safetensors", "pytorch_model.bin"):
            if (folder / name).is_file():
                return folder / name
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
        for name in ("model.safetensors", "pytorch_model.bin"):
            found = try_to_load_from_cache(str(hub)[3:], name)
            if isinstance(found, str) and Path(found).is_file():
                return Path(found)
    except (ImportError, ValueError):
        pass
    return None


def model_identity(tr: Translator) -> dict:
    """What an index records of its model: {"name", "path", "weights_sha256"} (the weights file's
    hash), or {"name", "path", "config_sha256"} where there is no single weights file. Two loads of
    the same weights are the same model, wherever the folder is; a retrained one is another."""
    f = weights_file(tr)
    out = {"name": tr.name, "path": str(tr.path)}
    if f is not None:
        st = f.stat()
        out["weights_sha256"] = _file_sha256(str(f.resolve()), st.st_size, st.st_mtime_ns)
    else:
        out["config_sha256"] = hashlib.sha256(json.dumps(tr.config, sort_keys=True, default=str).encode()).hexdigest()
    return out


def same_model(recorded: dict, current: dict) -> bool:
    key = "weights_sha256" if "weights_sha256" in current else "config_sha256"
    return recorded.get(key) is not None and recorded.get(key) == current.get(key)


def build_command(tr: Translator) -> str:
    """The command that builds `tr`'s index (named in every IndexNotReady)."""
    hub = tr.config.get("hub")
    spec = hub if hub is not None else (tr.name if Path(tr.path).parent == ROOT / "checkpoints" else str(tr.path))
    return f"python -m s2s.neighbours build --model {spec}" + (" --corpus PAIRS.tsv" if hub is not None else "")


# ------------------------------------------------------------------ the index

@dataclass
class NeighbourIndex:
    """One model's index, ready to search: N training pairs, M = the sum of their target lengths.

    sentence_keys  (N, H) fp32  each pair's pooled encoder state (POOLING), scaled to length 1
    state_keys     (M, D) fp32  the decoder state at every step of every pair, forced on its French
                                (STATE), scaled to length 1
    offsets        (N + 1,) int64  pair i's states are rows offsets[i] .. offsets[i + 1] - 1, in step order
    pieces         (M,) int64   the training target piece y_j at each state (teacher forcing)
    predicted      (M,) int64   the model's own argmax at each state
    pairs          N (English, French) texts; meta: index.json less the pairs; where: its folder

    On disk the states are fp16 as the model gave them (index.safetensors: sentences, states);
    in memory they are unit rows in fp32, made once at load, so that one matrix product is every
    cosine (docs/neighbours.md: the measured choice; 115 MB for the shipped models' 112,513 states)."""
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


def _at(where: Path | None) -> str:
    return f" at {where}" if where is not None else ""


def output_states(step) -> torch.Tensor:
    """(B, D) the vector the output layer reads at a Step: a recurrent model's feed h~_j, else
    (a Transformer, a hub model: no feed) the first part of its state, the last layer's output."""
    return step.feed if step.feed.size(-1) > 0 else step.state[0]


def pooled(memory) -> torch.Tensor:
    """(B, H) the mean of memory.states (B, S, H) over each row's real positions (memory.mask)."""
    m = memory.mask[..., None].to(memory.states.dtype)
    return (memory.states * m).sum(1) / m.sum(1).clamp_min(1)


@torch.inference_mode()
def encode_pairs(tr: Translator, srcs: Sequence[Sequence[int]], tgts: Sequence[Sequence[int]]
                 ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """One batch of (source ids, target ids) pairs, forced: (B, H) pooled encoder states, and per
    pair its (T_i, D) decoder states and (T_i,) argmax pieces, fp32 on the CPU. Sources and targets
    are padded to the longest (the padding is masked out of attention and comes after every real
    target token, as in decode.forced_batch_attention)."""
    model, tok, dev = tr.model, tr.tokenizer, tr.device
    src = pad_batch(srcs, tok.pad_id, dev)
    tgt_in = pad_batch([[tok.bos_id] + list(t[:-1]) for t in tgts], tok.pad_id, dev)
    memory, state = model.encode(src, torch.tensor([len(s) for s in srcs]))
    steps = model.forced_steps(tgt_in, memory, state)
    states = torch.stack([output_states(st) for st in steps], 1).float().cpu()          # (B, T, D)
    argmax = torch.stack([st.logits.argmax(-1) for st in steps], 1).cpu()              # (B, T)
    return (pooled(memory).float().cpu(), [states[r, :len(t)] for r, t in enumerate(tgts)],
            [argmax[r, :len(t)] for r, t in enumerate(tgts)])


def usable_pairs(tr: Translator, pairs: Sequence[Pair]) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """(indexes of the pairs kept, their source ids, their target ids): a pair whose English or
    French is empty or over the limits is left out (an operator's corpus may hold some)."""
    kept, srcs, tgts = [], [], []
    positions = tr.model.cfg.max_positions or 0
    for i, (en, fr) in enumerate(pairs):
        try:
            s = encode_source(tr, en)
            t = list(tr.tokenizer.target_ids(clean_text(fr, what="French")))
        except InputError:
            continue
        if len(t) > MAX_DECODE_LEN or (positions and len(t) > positions):   # a decoder position per piece
            continue
        kept.append(i), srcs.append(s), tgts.append(t)
    return kept, srcs, tgts


def build_index(tr: Translator, corpus: str | Path | None = None, out: str | Path | None = None,
                pairs: int | None = None, batch_size: int = BATCH_PAIRS, on_progress: Progress | None = None,
                progress_bar: bool = False) -> NeighbourIndex:
    """Build `tr`'s index from `corpus` (English<TAB>French; default: the shipped sample, the
    shipped models' own training pairs; a hub model has no default: InputError), its first `pairs`
    pairs if given, and write it to `out` (default index_dir(tr)); returns it, ready to search.

    Pairs go through in batches of `batch_size`, sorted by length; after each batch
    on_progress(pairs done, pairs in all) is called (the page's bar), and with `progress_bar` a
    tqdm bar goes to stderr. The files are written under temporary names and renamed, so a
    build cut short leaves no half index. Unwritable `out`: InputError."""
    if corpus is None:
        if tr.config.get("hub") is not None:
            raise InputError(f"{tr.name} is a Hugging Face model: its training data is not ours. Give a corpus of "
                             "English<TAB>French pairs to index (--corpus PAIRS.tsv).")
        corpus = SAMPLE
    corpus = Path(corpus)
    try:
        text_pairs = read_pairs(corpus)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the corpus {corpus}: {getattr(e, 'strerror', None) or e}") from None
    if pairs is not None:
        text_pairs = text_pairs[:check_range("--pairs", pairs, 1, 1_000_000)]
    check_range("--batch-size", batch_size, 1, 1024)
    t0 = time.perf_counter()
    kept, srcs, tgts = usable_pairs(tr, text_pairs)
    if not kept:
        raise InputError(f"The corpus {corpus} has no usable English<TAB>French pair.")
    order = sorted(range(len(kept)), key=lambda i: (len(srcs[i]), len(tgts[i])))
    sentences: list[torch.Tensor | None] = [None] * len(kept)
    states: list[torch.Tensor | None] = [None] * len(kept)
    argmax: list[torch.Tensor | None] = [None] * len(kept)
    bar = None
    if progress_bar:
        from tqdm import tqdm
        bar = tqdm(total=len(kept), unit="pair", desc=f"neighbours of {tr.name}", file=sys.stderr)
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        pooled_b, states_b, argmax_b = encode_pairs(tr, [srcs[i] for i in idx], [tgts[i] for i in idx])
        for r, i in enumerate(idx):
            # fp16 as soon as they are made: what is stored, at half the memory while building
            sentences[i], states[i], argmax[i] = pooled_b[r].half(), states_b[r].half(), argmax_b[r]
        if bar is not None:
            bar.update(len(idx))
        if on_progress is not None:
            on_progress(min(b + batch_size, len(order)), len(order))
    if bar is not None:
        bar.close()
    lengths = torch.tensor([len(t) for t in tgts])
    tensors = {"sentences": torch.stack(sentences), "states": torch.cat(states),
               "offsets": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]),
               "pieces": torch.tensor([p for t in tgts for p in t], dtype=torch.long),
               "predicted": torch.cat(argmax).long()}
    arch = "hub" if tr.config.get("hub") is not None else getattr(tr.model.cfg, "arch", "rnn")
    kept_pairs = [text_pairs[i] for i in kept]
    meta = {"format": FORMAT, "model": model_identity(tr),
            "corpus": {"path": str(corpus), "sha256": _file_sha256(str(corpus.resolve()), corpus.stat().st_size,
                                                                    corpus.stat().st_mtime_ns),
                       "pairs_read": len(text_pairs), "pairs": len(kept_pairs),
                       "left_out": len(text_pairs) - len(kept_pairs)},
            "pooling": POOLING, "state": STATE[arch], "piece": "the training target piece at each step (teacher "
            "forcing); `predicted`: the model's own argmax there",
            "sentence_dim": int(tensors["sentences"].size(1)), "state_dim": int(tensors["states"].size(1)),
            "states": int(tensors["states"].size(0)), "dtype": "float16",
            "build_seconds": round(time.perf_counter() - t0, 1), "built": time.strftime("%Y-%m-%d"),
            "command": build_command(tr)}
    folder = Path(out) if out is not None else index_dir(tr)
    _write(folder, meta, kept_pairs, tensors)
    return NeighbourIndex.from_tensors(meta, kept_pairs, tensors, folder)


def _write(folder: Path, meta: dict, pairs: list[Pair], tensors: dict[str, torch.Tensor]) -> None:
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


def ensure_index(tr: Translator, where: str | Path | None = None, corpus: str | Path | None = None,
                 on_progress: Progress | None = None) -> NeighbourIndex:
    """`tr`'s index, built (and kept) first if there is none or it is another model's."""
    try:
        return load_index(tr, where)
    except IndexNotReady:
        return build_index(tr, corpus, where, on_progress=on_progress)


# ------------------------------------------------------------------ the search

@dataclass
class SentenceNeighbour:
    pair: int               # its row in the index (the corpus's order, pairs left out skipped)
    english: str
    french: str
    similarity: float       # cosine of the pooled encoder states


@dataclass
class StateNeighbour:
    pair: int
    step: int               # the step of that pair's decoding (from 0)
    piece: str              # the training target piece at that step (teacher forcing)
    predicted: str          # the model's own argmax at that state
    similarity: float       # cosine of the decoder states
    english: str
    french: str


@dataclass
class StepNeighbours:
    step: int
    piece: str              # this sentence's output piece at the step
    neighbours: list[StateNeighbour]


@dataclass
class Projection:
    """A 2-D map of the neighbours' decoder states (PCA of their unit-length vectors, centred on
    their mean) with this sentence's trajectory placed on it.

    points      (P, 2)  each distinct neighbour state, in order of first appearance
    rows        P       its state row in the index; steps: the first query step it is a neighbour of
    pieces      P       its training target piece
    trajectory  (T, 2)  this sentence's decoder state at each step, on the same axes
    explained   (2,)    the share of the neighbours' variance along each axis"""
    points: np.ndarray
    rows: list[int]
    steps: list[int]
    pieces: list[str]
    trajectory: np.ndarray
    explained: np.ndarray

    def to_json(self) -> dict:
        return {"points": np.round(self.points, 5).tolist(), "rows": self.rows, "steps": self.steps,
                "pieces": self.pieces, "trajectory": np.round(self.trajectory, 5).tolist(),
                "explained": np.round(self.explained, 5).tolist()}


@dataclass
class Neighbours:
    """One sentence's neighbours: `sentences` (k nearest training sentences, best first), `steps`
    (per output step, the k nearest training decoder states), and their `projection`."""
    model: str
    text: str
    translation: str
    source_tokens: list[str]
    target_tokens: list[str]
    target_ids: list[int]
    k: int
    sentences: list[SentenceNeighbour]
    steps: list[StepNeighbours]
    projection: Projection
    index: dict             # where the index is, its corpus and size

    def to_json(self) -> dict:
        out = asdict(self)
        out["projection"] = self.projection.to_json()
        return out


def sentence_states(tr: Translator, src_ids: Sequence[int], target_ids: Sequence[int]
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(H,) the pooled encoder state of one sentence and (T, D) its decoder states forced on
    `target_ids` (what the index holds for a training pair, computed the same way)."""
    p, states, _ = encode_pairs(tr, [list(src_ids)], [list(target_ids)])
    return p[0], states[0]


def top_k(keys: torch.Tensor, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact search: (n, d) unit keys, (q, d) queries -> (q, k) cosines and rows, best first."""
    sims = unit_rows(queries) @ keys.T                          # (q, n): every cosine, one product
    return sims.topk(min(k, keys.size(0)), dim=-1)


@torch.inference_mode()
def search(tr: Translator, index: NeighbourIndex, text: str, k: int = 5,
           target_ids: Sequence[int] | None = None) -> Neighbours:
    """The k training sentences nearest to `text` and, at each step of its translation, the k
    nearest training decoder states, with the 2-D projection. `target_ids` is the translation to
    read the steps of (e.g. the page's own decoding; it ends in </s>); default its greedy one.
    InputError for unusable text or k; IndexNotReady if `index` is not `tr`'s."""
    check_range("k", k, 1, MAX_K)
    index.check(tr)
    src = encode_source(tr, text)
    if target_ids is None:
        target_ids = greedy(tr, text).target_ids
    target_ids = [int(i) for i in target_ids]
    if not 0 < len(target_ids) <= MAX_DECODE_LEN:
        raise InputError(f"The translation is {len(target_ids)} pieces long; it must have 1 to {MAX_DECODE_LEN}.")
    sent, states = sentence_states(tr, src, target_ids)
    s_sim, s_row = top_k(index.sentence_keys, sent[None], k)
    d_sim, d_row = top_k(index.state_keys, states, k)           # (T, k)
    tok = tr.tokenizer
    piece = tok.piece
    pairs, rows_pair = index.pairs, index.state_pair[d_row].tolist()
    offsets = index.offsets.tolist()
    sentences = [SentenceNeighbour(r, *pairs[r], round(s, 5)) for s, r in zip(s_sim[0].tolist(), s_row[0].tolist())]
    steps = []
    for j, (sims, rows, prs) in enumerate(zip(d_sim.tolist(), d_row.tolist(), rows_pair)):
        steps.append(StepNeighbours(j, piece(target_ids[j]), [
            StateNeighbour(p, r - offsets[p], piece(int(index.pieces[r])), piece(int(index.predicted[r])), round(s, 5),
                           *pairs[p]) for s, r, p in zip(sims, rows, prs)]))
    return Neighbours(tr.name, text, tok.decode(target_ids), tok.pieces(src), tok.pieces(target_ids), target_ids, k,
                      sentences, steps, project(index, d_row, states, tok),
                      {"path": str(index.where) if index.where else None, "corpus": index.meta.get("corpus", {}),
                       "pairs": index.n_pairs, "states": index.n_states})


def project(index: NeighbourIndex, rows: torch.Tensor, trajectory: torch.Tensor, tok) -> Projection:
    """PCA to 2-D of the distinct neighbour states `rows` (T, k) (unit-length, as searched),
    fitted on them alone (the map is the training data's; the sentence is placed on it), by an
    exact SVD in float64 (deterministic, unlike a randomised low-rank PCA; torch's, which keeps to
    torch's threads, where numpy's OpenBLAS starts its own and stalls on a busy machine). Each
    axis's sign is set so that its largest loading is positive: the same neighbours always draw
    the same map."""
    flat = rows.reshape(-1).tolist()
    first: dict[int, int] = {}
    for n, r in enumerate(flat):
        first.setdefault(r, n // rows.size(1))
    uniq = list(first)
    x = index.state_keys[uniq].double()                              # (P, D)
    q = unit_rows(trajectory).double()                               # (T, D)
    mean = x.mean(0)
    _, s, vt = torch.linalg.svd(x - mean, full_matrices=False)
    axes = torch.zeros(2, x.size(1), dtype=torch.float64)
    n_axes = min(2, vt.size(0))
    axes[:n_axes] = vt[:n_axes]
    for a in range(n_axes):
        if axes[a, axes[a].abs().argmax()] < 0:
            axes[a] = -axes[a]
    var = s ** 2
    explained = torch.zeros(2, dtype=torch.float64)
    if float(var.sum()) > 0:
        explained[:n_axes] = var[:n_axes] / var.sum()
    pieces = index.pieces[uniq].tolist()
    return Projection(((x - mean) @ axes.T).numpy(), uniq, [first[r] for r in uniq], [tok.piece(p) for p in pieces],
                      ((q - mean) @ axes.T).numpy(), explained.numpy())


def marked(tok, ids: Sequence[int], step: int) -> str:
    """A target sentence's pieces as text with the piece at `step` in [brackets] (the CLI's view:
    sentencepiece's ▁ and byte-level BPE's Ġ read as spaces; special pieces left out)."""
    out = []
    for j, i in enumerate(ids):
        p = tok.piece(i)
        if p in ("</s>", "<s>", "<pad>") and j != step:
            continue
        bare = p.lstrip("▁Ġ")
        lead = " " if bare != p else ""
        out.append(f"{lead}[{bare}]" if j == step else lead + bare)
    return "".join(out).strip()


# ------------------------------------------------------------------ the shipped sample

def sample_pairs(train: Sequence[Pair], n: int = SAMPLE_PAIRS, seed: int = SAMPLE_SEED) -> list[Pair]:
    """`n` pairs of a training split, one per English sentence: the distinct English sentences,
    sorted and shuffled with `seed`, the first `n`, each with its first French translation in the
    file (as the split's valid and test sets take theirs), in the shuffled order. One per sentence,
    so that a sentence's neighbours are other sentences, not its other translations."""
    first: dict[str, str] = {}
    for en, fr in train:
        first.setdefault(en, fr)
    sources = sorted(first)
    random.Random(seed).shuffle(sources)
    return [(s, first[s]) for s in sources[:n]]


# ------------------------------------------------------------------ command line

def print_neighbours(n: Neighbours, index: NeighbourIndex, tok) -> None:
    print(f"{n.translation}   ({n.model}; index of {n.index['pairs']:,} training pairs, {n.index['states']:,} states)")
    print("\nNearest training sentences (cosine of the mean encoder states):")
    for s in n.sentences:
        print(f"  {s.similarity:6.3f}  {s.english}  →  {s.french}")
    print("\nStep by step: the nearest training decoder states, with the training piece at that step:")
    for st in n.steps:
        print(f"  {st.step + 1:>3} {st.piece}")
        for x in st.neighbours:
            note = "" if x.predicted == x.piece else f" (model: {x.predicted})"
            print(f"        {x.similarity:6.3f}  {x.piece}{note}  {marked(tok, index.pair_piece_ids(x.pair), x.step)}")


def query_main(argv: Sequence[str]) -> int:
    p = OneLineErrorParser(prog="python -m s2s.neighbours",
                           description="The training sentences and decoder states nearest to a sentence's own.",
                           epilog="Build a model's index first: python -m s2s.neighbours build --model NAME "
                                  "(see docs/neighbours.md).")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    add_model_options(p)
    p.add_argument("--k", type=int, default=5, help=f"neighbours per sentence and per step (1-{MAX_K}; default 5)")
    p.add_argument("--reference", metavar="FRENCH", help="read the steps of this translation (default: the greedy one)")
    p.add_argument("--index", metavar="DIR", help="the index folder (default: the cache folder, docs/neighbours.md)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("text", nargs="*", help="the English text (after --, if it starts with a dash)")
    a = p.parse_args(argv)
    text = text_argument(a.text)
    try:
        check_range("--k", a.k, 1, MAX_K)
        tr = load_translator(a.model, **model_options(a))
        clean_text(text)                            # an empty text is refused before the index is read
        index = load_index(tr, a.index)
        target = None if a.reference is None else tr.tokenizer.target_ids(clean_text(a.reference, what="reference"))
        n = search(tr, index, text, a.k, target)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(n.to_json(), ensure_ascii=False, allow_nan=False))
    else:
        print_neighbours(n, index, tr.tokenizer)
    return 0


def build_main(argv: Sequence[str]) -> int:
    p = OneLineErrorParser(prog="python -m s2s.neighbours build",
                           description="Build a model's neighbours index (fp16 states, safetensors + JSON).")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    add_model_options(p)
    p.add_argument("--corpus", metavar="PAIRS.tsv",
                   help=f"English<TAB>French pairs to index (default: {SAMPLE.relative_to(ROOT)}, the shipped "
                        "models' training sample; a Hugging Face model needs one)")
    p.add_argument("--pairs", type=int, metavar="N", help="index only the corpus's first N pairs")
    p.add_argument("--index", metavar="DIR", help="where to write it (default: the cache folder)")
    p.add_argument("--batch-size", type=int, default=BATCH_PAIRS, metavar="B", help="pairs forced together")
    p.add_argument("--json", action="store_true", help="print the index's description as JSON")
    a = p.parse_args(argv)
    try:
        tr = load_translator(a.model, **model_options(a))
        index = build_index(tr, a.corpus, a.index, a.pairs, a.batch_size, progress_bar=True)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    folder = index.where
    sizes = {name: (folder / name).stat().st_size for name in (INDEX_TENSORS, INDEX_JSON)}
    out = {"index": str(folder), **{k: index.meta[k] for k in ("model", "corpus", "states", "state_dim",
                                                               "sentence_dim", "build_seconds")},
           "bytes": sizes}
    if a.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(f"{index.n_pairs:,} pairs, {index.n_states:,} decoder states -> {folder} "
              f"({sum(sizes.values()) / 1e6:.1f} MB, {index.meta['build_seconds']} s)")
    return 0


def sample_main(argv: Sequence[str]) -> int:
    p = OneLineErrorParser(prog="python -m s2s.neighbours sample",
                           description="Write the shipped sample of a training split (one pair per English sentence).")
    p.add_argument("--train", default="data/tatoeba/train.tsv", help="the training split (python -m s2s.data)")
    p.add_argument("--out", default=str(SAMPLE.relative_to(ROOT)), help="the sample TSV to write")
    p.add_argument("--pairs", type=int, default=SAMPLE_PAIRS, help=f"how many (default {SAMPLE_PAIRS:,})")
    p.add_argument("--seed", type=int, default=SAMPLE_SEED, help=f"the shuffle's seed (default {SAMPLE_SEED})")
    a = p.parse_args(argv)
    try:
        train = read_pairs(a.train)
    except OSError as e:
        print(f"error: cannot read {a.train}: {e.strerror}", file=sys.stderr)
        return 2
    out = sample_pairs(train, a.pairs, a.seed)
    write_pairs(out, a.out)
    print(f"{len(out):,} pairs of {len(train):,} -> {a.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`build ...` and `sample ...` are their own commands; anything else is a query."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["build"]:
        return build_main(argv[1:])
    if argv[:1] == ["sample"]:
        return sample_main(argv[1:])
    return query_main(argv)


if __name__ == "__main__":
    sys.exit(main())
