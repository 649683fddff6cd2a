"""Building a model's neighbours index: its pooled encoder states and its decoder states under
teacher forcing on each training pair's French, in batches; and the shipped sample it is built
from (one pair per English sentence of the training split)."""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import torch

from ..data import Pair, read_pairs
from ..decode import pad_batch, usable_pairs
from ..loaded import Translator
from ..text import InputError, check_range
from .identity import ROOT, build_command, file_sha256, index_dir, model_identity
from .index import CODES, FORMAT, IndexNotReady, NeighbourIndex, int8_codes, load_index, write_index

SAMPLE = ROOT / "examples" / "neighbours" / "tatoeba-train-10k.tsv"   # the shipped models' index corpus
SAMPLE_PAIRS, SAMPLE_SEED = 10_000, 1
BATCH_PAIRS = 64        # pairs encoded and forced together while building (sorted by length: little padding)
POOLING = "mean of the encoder states over the real source positions (source pieces and </s>)"
STATE = {"rnn": "the attentional hidden state h~_j = tanh(W_c [c_j ; s_j]) the output layer reads",
         "transformer": "the last decoder layer's output after the final layer norm (what the output layer reads)",
         "hub": "the last decoder layer's hidden state (transformers' decoder_hidden_states[-1]), what the output "
                "layer reads"}

Progress = Callable[[int, int], None]      # (pairs done, pairs in all)


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


def forced_states(tr: Translator, srcs: Sequence[Sequence[int]], tgts: Sequence[Sequence[int]],
                  batch_size: int = BATCH_PAIRS, on_progress: Progress | None = None, progress_bar: bool = False,
                  keep: Callable[[torch.Tensor], torch.Tensor] = int8_codes) -> dict[str, torch.Tensor]:
    """The index's tensors for pairs of (source ids, target ids): `sentences` (N, H) and `states`
    (M, D) as `keep` stores them (int8 codes; tools/bench_neighbours_storage.py keeps fp32 to
    measure what storing costs), `offsets` (N + 1,), `pieces` and `predicted` (M,) int32.

    Pairs go through in batches of `batch_size`, sorted by length (little padding); each batch's
    states are stored as soon as they are made (int8: a quarter of fp32's memory while building).
    After each batch on_progress(pairs done, pairs in all) is called, and with `progress_bar` a
    tqdm bar goes to stderr."""
    order = sorted(range(len(srcs)), key=lambda i: (len(srcs[i]), len(tgts[i])))
    sentences: list[torch.Tensor | None] = [None] * len(srcs)
    states: list[torch.Tensor | None] = [None] * len(srcs)
    argmax: list[torch.Tensor | None] = [None] * len(srcs)
    bar = None
    if progress_bar:
        from tqdm import tqdm
        bar = tqdm(total=len(srcs), unit="pair", desc=f"neighbours of {tr.name}", file=sys.stderr)
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        pooled_b, states_b, argmax_b = encode_pairs(tr, [srcs[i] for i in idx], [tgts[i] for i in idx])
        kept_pooled, kept_states = keep(pooled_b), [keep(x) for x in states_b]
        for r, i in enumerate(idx):
            sentences[i], states[i], argmax[i] = kept_pooled[r], kept_states[r], argmax_b[r]
        if bar is not None:
            bar.update(len(idx))
        if on_progress is not None:
            on_progress(min(b + batch_size, len(order)), len(order))
    if bar is not None:
        bar.close()
    lengths = torch.tensor([len(t) for t in tgts])
    return {"sentences": torch.stack(sentences), "states": torch.cat(states),
            "offsets": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]),
            "pieces": torch.tensor([p for t in tgts for p in t], dtype=torch.int32),
            "predicted": torch.cat(argmax).to(torch.int32)}


def build_index(tr: Translator, corpus: str | Path | None = None, out: str | Path | None = None,
                pairs: int | None = None, batch_size: int = BATCH_PAIRS, on_progress: Progress | None = None,
                progress_bar: bool = False) -> NeighbourIndex:
    """Build `tr`'s index from `corpus` (English<TAB>French; default: the shipped sample, the
    shipped models' own training pairs; a hub model has no default: InputError), its first `pairs`
    pairs if given, and write it to `out` (default index_dir(tr)); returns it, ready to search.

    The states are stored as int8 codes (CODES; docs/neighbours.md measures what that costs).
    Pairs go through in batches of `batch_size` (forced_states); after each batch
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
    tensors = forced_states(tr, srcs, tgts, batch_size, on_progress, progress_bar)
    arch = "hub" if tr.config.get("hub") is not None else getattr(tr.model.cfg, "arch", "rnn")
    kept_pairs = [text_pairs[i] for i in kept]
    meta = {"format": FORMAT, "model": model_identity(tr),
            "corpus": {"path": str(corpus), "sha256": file_sha256(str(corpus.resolve()), corpus.stat().st_size,
                                                                    corpus.stat().st_mtime_ns),
                       "pairs_read": len(text_pairs), "pairs": len(kept_pairs),
                       "left_out": len(text_pairs) - len(kept_pairs)},
            "pooling": POOLING, "state": STATE[arch], "piece": "the training target piece at each step (teacher "
            "forcing); `predicted`: the model's own argmax there",
            "sentence_dim": int(tensors["sentences"].size(1)), "state_dim": int(tensors["states"].size(1)),
            "states": int(tensors["states"].size(0)), "dtype": "int8", "codes": CODES,
            "build_seconds": round(time.perf_counter() - t0, 1), "built": time.strftime("%Y-%m-%d"),
            "command": build_command(tr)}
    folder = Path(out) if out is not None else index_dir(tr)
    write_index(folder, meta, kept_pairs, tensors)
    return NeighbourIndex.from_tensors(meta, kept_pairs, tensors, folder)


def ensure_index(tr: Translator, where: str | Path | None = None, corpus: str | Path | None = None,
                 on_progress: Progress | None = None) -> NeighbourIndex:
    """`tr`'s index, built (and kept) first if there is none or it is another model's."""
    try:
        return load_index(tr, where)
    except IndexNotReady:
        return build_index(tr, corpus, where, on_progress=on_progress)


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
