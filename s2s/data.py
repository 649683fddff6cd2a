"""Sentence pairs: reading, splitting by source sentence, long-pair joining, batching.

A Tatoeba line is `english<TAB>french`. One English sentence can have several French
translations, so train/valid/test are split by *English sentence*: no source sentence is
in two splits. Tatoeba sentences are short (median 6 words), so besides single pairs we
build long pairs by joining 2-4 random pairs (source with source, target with target):
without them an attention model never sees a long input and fails on one.
"""
from __future__ import annotations

import argparse
import random
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import torch

from .tokenizer import EOS, PAD

Pair = tuple[str, str]


def read_pairs(path: str | Path) -> list[Pair]:
    """Read a TSV of `source<TAB>target[<TAB>...]` lines (extra columns are ignored)."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 2 and cols[0].strip() and cols[1].strip():
                pairs.append((unicodedata.normalize("NFC", cols[0].strip()),
                              unicodedata.normalize("NFC", cols[1].strip())))
    return pairs


def write_pairs(pairs: Sequence[Pair], path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for s, t in pairs:
            f.write(f"{s}\t{t}\n")


def join_pairs(pairs: Sequence[Pair]) -> Pair:
    return " ".join(p[0] for p in pairs), " ".join(p[1] for p in pairs)


def joined_pairs(pairs: Sequence[Pair], n: int, k_min: int, k_max: int, seed: int) -> list[Pair]:
    """`n` long pairs, each `k` random pairs joined, `k` uniform in [k_min, k_max]."""
    rng = random.Random(seed)
    return [join_pairs(rng.sample(pairs, rng.randint(k_min, k_max))) for _ in range(n)]


@dataclass
class Splits:
    train: list[Pair]
    valid: list[Pair]      # one reference per English sentence
    test: list[Pair]       # one reference per English sentence
    test_joined3: list[Pair]   # 3 test pairs joined: the "long input" check
    test_long: list[Pair]      # 1-8 test pairs joined: BLEU by source length up to 60 words


def split_pairs(pairs: Sequence[Pair], n_valid: int = 1000, n_test: int = 2000,
                seed: int = 1234) -> Splits:
    """Deterministic split by English sentence (the same data and seed give the same split)."""
    by_source: dict[str, list[str]] = {}
    for s, t in pairs:
        by_source.setdefault(s, []).append(t)
    sources = sorted(by_source)
    random.Random(seed).shuffle(sources)
    test_src, valid_src, train_src = sources[:n_test], sources[n_test:n_test + n_valid], sources[n_test + n_valid:]
    train = [(s, t) for s in train_src for t in by_source[s]]
    valid = [(s, by_source[s][0]) for s in valid_src]
    test = [(s, by_source[s][0]) for s in test_src]
    return Splits(train, valid, test,
                  test_joined3=joined_pairs(test, min(500, n_test), 3, 3, seed + 1),
                  test_long=joined_pairs(test, min(1200, n_test), 1, 8, seed + 2))


def write_splits(splits: Splits, out_dir: str | Path) -> None:
    for name in ("train", "valid", "test", "test_joined3", "test_long"):
        write_pairs(getattr(splits, name), Path(out_dir) / f"{name}.tsv")


# ---------------------------------------------------------------- batching

@dataclass
class Batch:
    src: torch.Tensor       # (B, S) source ids ending in EOS, PAD-padded
    src_len: torch.Tensor   # (B,)
    tgt_in: torch.Tensor    # (B, T) BOS + target   (teacher forcing input)
    tgt_out: torch.Tensor   # (B, T) target + EOS   (what the decoder must predict)

    def to(self, device) -> "Batch":
        return Batch(self.src.to(device), self.src_len, self.tgt_in.to(device), self.tgt_out.to(device))

    @property
    def n_tokens(self) -> int:
        return int((self.tgt_out != PAD).sum())


def make_batch(examples: Sequence[tuple[list[int], list[int]]], bos: int) -> Batch:
    """Pad a list of (source ids, target ids) into a Batch (EOS/BOS added here)."""
    S = max(len(s) for s, _ in examples) + 1
    T = max(len(t) for _, t in examples) + 1
    B = len(examples)
    src = torch.full((B, S), PAD, dtype=torch.long)
    tgt_in = torch.full((B, T), PAD, dtype=torch.long)
    tgt_out = torch.full((B, T), PAD, dtype=torch.long)
    lens = []
    for b, (s, t) in enumerate(examples):
        src[b, :len(s) + 1] = torch.tensor(s + [EOS])
        tgt_in[b, :len(t) + 1] = torch.tensor([bos] + t)
        tgt_out[b, :len(t) + 1] = torch.tensor(t + [EOS])
        lens.append(len(s) + 1)
    return Batch(src, torch.tensor(lens), tgt_in, tgt_out)


def token_batches(examples: Sequence[tuple[list[int], list[int]]], max_tokens: int, bos: int,
                  seed: int, shuffle: bool = True) -> Iterator[Batch]:
    """Length-bucketed batches of at most `max_tokens` padded target tokens.

    Sorting by length inside large random chunks keeps padding low while still giving
    every epoch a different order.
    """
    rng = random.Random(seed)
    order = list(range(len(examples)))
    if shuffle:
        rng.shuffle(order)
    chunk = 100 * 64
    batches: list[list[int]] = []
    for c in range(0, len(order), chunk):
        idx = sorted(order[c:c + chunk], key=lambda i: (len(examples[i][1]), len(examples[i][0])))
        cur: list[int] = []
        longest = 0
        for i in idx:
            longest_new = max(longest, len(examples[i][1]) + 1)
            if cur and longest_new * (len(cur) + 1) > max_tokens:
                batches.append(cur)
                cur, longest_new = [], len(examples[i][1]) + 1
            cur.append(i)
            longest = longest_new
        if cur:
            batches.append(cur)
    if shuffle:
        rng.shuffle(batches)
    for b in batches:
        yield make_batch([examples[i] for i in b], bos)


def main() -> None:
    p = argparse.ArgumentParser(description="Write the deterministic train/valid/test split of a TSV corpus.")
    p.add_argument("--data", required=True, help="english<TAB>french file, e.g. ../shared/data/tatoeba-en-fr/fra.txt")
    p.add_argument("--out", default="data/tatoeba", help="output folder for train/valid/test*.tsv")
    p.add_argument("--valid-pairs", type=int, default=1000, help="English sentences held out for validation")
    p.add_argument("--test-pairs", type=int, default=2000, help="English sentences held out for testing")
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    splits = split_pairs(read_pairs(a.data), a.valid_pairs, a.test_pairs, seed=a.seed)
    write_splits(splits, a.out)
    for name in ("train", "valid", "test", "test_joined3", "test_long"):
        print(f"{name}: {len(getattr(splits, name))} pairs -> {Path(a.out) / (name + '.tsv')}")


if __name__ == "__main__":
    main()
