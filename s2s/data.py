"""Sentence pairs: reading, splitting by source sentence, long-pair joining, copy
augmentation, batching.

A Tatoeba line is `english<TAB>french`. One English sentence can have several French
translations, so train/valid/test are split by *English sentence*: no source sentence is
in two splits. Tatoeba sentences are short (median 6 words), so besides single pairs we
build long pairs by joining 2-4 random pairs (source with source, target with target):
without them an attention model never sees a long input and fails on one.

Copy augmentation. Tatoeba calls almost every person Tom or Mary, so a model trained on
it learns two names instead of learning to copy one. While training (never on the
validation or test data) `Augmenter` rewrites a share of the pairs on the fly, on both
sides at once:
    names    every person's name (Tom, Mary, ...) -> a name drawn from ~39k first and
             last names of many languages (s2s/names.tsv, from Faker, MIT licence)
    numbers  every digit run -> a random one with as many digits; a number written as a
             word on both sides ("two"/"deux") -> the same random digits
    casing   the whole pair in ALL CAPS or in lower case
A name or number is swapped only where it occurs as often in the French as in the
English, so the pair stays a translation. One name list is split in two by a hash:
training draws from nine tenths, the held-out copy test (`copy_test_lines`) from the rest.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import torch

from .tokenizer import EOS, PAD

Pair = tuple[str, str]


def read_pairs(path: str | Path) -> list[Pair]:
    """Read a TSV of `source<TAB>target[<TAB>...]` lines (extra columns are ignored)."""
    with open(path, encoding="utf-8") as f:
        return parse_pairs(f)


def parse_pairs(lines: Iterable[str]) -> list[Pair]:
    """The `source<TAB>target` pairs of TSV lines, NFC-normalised; lines without both are skipped."""
    pairs = []
    for line in lines:
        cols = line.rstrip("\r\n").split("\t")
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


# ---------------------------------------------------------------- copy augmentation

NAMES_FILE = Path(__file__).with_name("names.tsv")
# The persons Tatoeba's pairs name, found as capitalised words present on both sides of the
# training split and in a first- or last-name list (Tom 13.9k pairs, Mary 1.4k, John 71, ...).
TATOEBA_PERSONS = {
    "first": ("Tom", "Mary", "John", "Alice", "Bill", "Helen", "Harry", "Marie", "Maria", "Michael",
              "George", "Patrick", "Frank", "Roger", "Ann", "Albert", "Teresa"),
    "last": ("Jackson", "Smith", "Miller", "Wilson", "Scott", "Graham"),
}
_NUMBER = re.compile(r"(?<!\d)\d+(?!\d)")
_VOWEL_START = re.compile(r"^[AEIOUÀÂÄÆÉÈÊËÎÏÔÖŒÙÛÜaeiouàâäæéèêëîïôöœùûü]")   # Y is a consonant: "de Yann"
# French elides "de", "que" (and "lorsque", "puisque", "jusque") before a vowel: "le chien
# d'Olga" but "le chien de Tom". A swapped name must take the form its first letter needs.
ELIDABLE = ("de", "que", "lorsque", "puisque", "jusque")


def load_names(path: str | Path = NAMES_FILE) -> dict[str, list[str]]:
    """{"first": [...], "last": [...]} from a `kind<TAB>name[<TAB>...]` file (# comments)."""
    names: dict[str, list[str]] = {"first": [], "last": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            kind, name = line.rstrip("\n").split("\t")[:2]
            names.setdefault(kind, []).append(name)
    return names


# Characters a copied number or amount uses. The shipped tokenizer cannot spell 6, 7, 8, $, %,
# ( ) or ; (its character coverage dropped them as rare in Tatoeba), so "I paid 678 euros."
# reads "I paid <unk> euros.": no model can copy a number it cannot see.
NUMBER_CHARACTERS = set("0123456789") | set("$€£¥%&()[];:+-/*#@")


def name_characters(names: dict[str, list[str]]) -> set[str]:
    """Every letter the names use, in both cases, plus French capitals ("OÙ EST ..."), digits
    and the signs of amounts: what a tokenizer must spell to copy names and numbers
    (tokenizer.add_characters)."""
    chars = {ch for v in names.values() for n in v for ch in n} | set("àâäæçéèêëîïôöœùûüÿ")
    return {c for ch in chars for c in (ch, ch.upper(), ch.lower()) if len(c) == 1} | NUMBER_CHARACTERS


def is_held_out(name: str) -> bool:
    """One name in ten, chosen by a hash of its spelling, is kept for the held-out copy test."""
    return zlib.crc32(name.encode("utf-8")) % 10 == 0


def split_names(names: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(training names, held-out names), each {"first": [...], "last": [...]}; disjoint."""
    train = {k: [n for n in v if not is_held_out(n)] for k, v in names.items()}
    held = {k: [n for n in v if is_held_out(n)] for k, v in names.items()}
    return train, held


def _count(word: str, text: str, flags: int = 0) -> int:
    """How often `word` stands in `text` as a whole word."""
    return len(re.findall(rf"(?<!\w){re.escape(word)}(?!\w)", text, flags=flags))


def substitute(pair: Pair, mapping: dict[str, str]) -> Pair:
    """Replace whole words of both sides by `mapping` in one pass (so Tom->Mary and
    Mary->Tom together work), fixing French elision in front of each swapped word:
    "de Tom" -> "d'Olga", "qu'Anna" -> "que Tom"."""
    if not mapping:
        return pair
    words = "|".join(re.escape(w) for w in sorted(mapping, key=len, reverse=True))
    en = re.sub(rf"(?<!\w)(?:{words})(?!\w)", lambda m: mapping[m.group(0)], pair[0])

    def french(m: re.Match) -> str:
        new, el = mapping[m.group("w")], m.group("el")
        if not el:
            return new
        base = el.rstrip("'’ ")
        if base.lower() in ELIDABLE:
            base = base[:-1]                      # "de" -> "d", "que" -> "qu"
        apostrophe = "’" if "’" in el else "'"
        return base + (apostrophe if _VOWEL_START.match(new) else "e ") + new
    fr = re.sub(rf"(?P<el>\b(?i:(?:d|qu|lorsqu|puisqu|jusqu)['’]|(?:{'|'.join(ELIDABLE)}) ))?"
                rf"(?<!\w)(?P<w>{words})(?!\w)", french, pair[1])
    return en, fr


def shared_names(pair: Pair) -> list[str]:
    """The Tatoeba persons named as often in the French as in the English (at least once)."""
    return [n for kind in TATOEBA_PERSONS.values() for n in kind
            if (c := _count(n, pair[0])) and c == _count(n, pair[1])]


def _count_number(run: str, text: str) -> int:
    return len(re.findall(rf"(?<!\d){run}(?!\d)", text))


def shared_numbers(pair: Pair) -> list[str]:
    """The digit runs that occur as often in the French as in the English (at least once)."""
    return [r for r in dict.fromkeys(_NUMBER.findall(pair[0]))
            if _count_number(r, pair[0]) == _count_number(r, pair[1])]


# English number words and their French translations: a pair that uses exactly one of them,
# on both sides, can carry digits instead ("I have two dogs." -> "I have 47 dogs."), which
# makes pairs with numbers to copy five times as common (Tatoeba writes most numbers out).
NUMBER_WORDS = {"two": "deux", "three": "trois", "four": "quatre", "five": "cinq", "six": "six", "seven": "sept",
                "eight": "huit", "nine": "neuf", "ten": "dix", "eleven": "onze", "twelve": "douze",
                "fifteen": "quinze", "twenty": "vingt", "thirty": "trente", "forty": "quarante",
                "fifty": "cinquante", "hundred": "cent"}


def number_word(pair: Pair) -> tuple[str, str] | None:
    """(english word, french word) when the pair names exactly one number in words, once on
    each side (and no digits, no other number word), else None."""
    if _NUMBER.search(pair[0]) or _NUMBER.search(pair[1]):
        return None
    en = [w for w in NUMBER_WORDS if _count(w, pair[0], re.IGNORECASE)]
    fr = [w for w in set(NUMBER_WORDS.values()) if _count(w, pair[1], re.IGNORECASE)]
    if len(en) == 1 and fr == [NUMBER_WORDS[en[0]]] and _count(en[0], pair[0], re.IGNORECASE) == 1 \
            and _count(fr[0], pair[1], re.IGNORECASE) == 1:
        return en[0], fr[0]
    return None


def random_number(like: str, rng: random.Random) -> str:
    """A digit run as long as `like`, not starting with 0 unless `like` does."""
    first = "0" if like[0] == "0" else str(rng.randint(1, 9))
    return first + "".join(str(rng.randint(0, 9)) for _ in range(len(like) - 1))


@dataclass
class Augmenter:
    """Copy augmentation of training pairs (see the module docstring). Each rate is the
    probability that a pair which can take the change gets it."""
    names: dict[str, list[str]]     # the names to draw from: {"first": [...], "last": [...]}
    p_name: float = 0.5
    p_number: float = 0.5
    p_upper: float = 0.04
    p_lower: float = 0.04

    def swap_names(self, pair: Pair, rng: random.Random) -> tuple[Pair, list[str]]:
        """Every shared person -> a different drawn name; returns the pair and the new names."""
        mapping: dict[str, str] = {}
        for old in shared_names(pair):
            pool = self.names["first" if old in TATOEBA_PERSONS["first"] else "last"]
            new = rng.choice(pool)
            while new in mapping.values() or _count(new, pair[0] + " " + pair[1]):
                new = rng.choice(pool)          # two persons stay two; no clash with other words
            mapping[old] = new
        return substitute(pair, mapping), list(mapping.values())

    def swap_numbers(self, pair: Pair, rng: random.Random) -> tuple[Pair, list[str]]:
        """Every shared digit run -> a different random run as long; returns the pair and the new runs."""
        mapping: dict[str, str] = {}
        for old in shared_numbers(pair):
            new = random_number(old, rng)
            while new in mapping.values() or new in mapping or _count_number(new, pair[0] + " " + pair[1]):
                new = random_number(old + "0", rng)    # one digit longer: always room to differ
            mapping[old] = new
        swap = lambda m: mapping.get(m.group(0), m.group(0))   # noqa: E731
        return (_NUMBER.sub(swap, pair[0]), _NUMBER.sub(swap, pair[1])), list(mapping.values())

    def digits_for_words(self, pair: Pair, rng: random.Random) -> tuple[Pair, list[str]]:
        """The pair's one number word -> the same random digits on both sides (1-4 digits)."""
        words = number_word(pair)
        if words is None:
            return pair, []
        new = random_number("1" * rng.randint(1, 4), rng)
        en = re.sub(rf"(?<!\w){words[0]}(?!\w)", new, pair[0], flags=re.IGNORECASE)
        fr = re.sub(rf"(?<!\w){words[1]}(?!\w)", new, pair[1], flags=re.IGNORECASE)
        return (en, fr), [new]

    def __call__(self, pair: Pair, rng: random.Random) -> Pair:
        if rng.random() < self.p_name and shared_names(pair):
            pair = self.swap_names(pair, rng)[0]
        if rng.random() < self.p_number:
            if shared_numbers(pair):
                pair = self.swap_numbers(pair, rng)[0]
            elif number_word(pair):
                pair = self.digits_for_words(pair, rng)[0]
        r = rng.random()
        if r < self.p_upper:
            pair = (pair[0].upper(), pair[1].upper())
        elif r < self.p_upper + self.p_lower:
            pair = (pair[0].lower(), pair[1].lower())
        return pair


def augment_pairs(pairs: Sequence[Pair], augmenter: Augmenter, seed: int) -> list[Pair]:
    """One epoch's augmented copy of the training pairs (deterministic for a seed)."""
    rng = random.Random(seed)
    return [augmenter(p, rng) for p in pairs]


def can_copy(pair: Pair) -> bool:
    """Does the pair name a person or hold a number that the augmentation can swap?"""
    return bool(shared_names(pair) or shared_numbers(pair) or number_word(pair))


def copy_pairs(pairs: Sequence[Pair], pool: Sequence[int], n: int, augmenter: Augmenter, seed: int) -> list[Pair]:
    """`n` extra pairs for one epoch, drawn from `pairs[pool]` (the ones that `can_copy`),
    every name and number swapped: Tatoeba has few of them (1 pair in 10 names a person,
    1 in 50 holds a number), so copying is otherwise seen too rarely to be learned fast."""
    rng = random.Random(seed)
    every = Augmenter(augmenter.names, 1.0, 1.0, augmenter.p_upper, augmenter.p_lower)
    return [every(pairs[rng.choice(pool)], rng) for _ in range(n if pool else 0)]


# ---------------------------------------------------------------- the held-out copy test

CopyLine = tuple[str, str, str, list[str]]   # kind ("name" | "number"), english, french, tokens to keep


def copy_test_lines(test: Sequence[Pair], held_out: dict[str, list[str]], exclude: set[str],
                    seed: int = 7, number_variants: int = 6) -> list[CopyLine]:
    """The held-out copy check built from test pairs.

    kind "name": each test pair naming a Tatoeba person, every person swapped for a
    held-out name that is no word of the training data (`exclude`). kind "number": each
    test pair with shared digit runs, as it is and `number_variants` times with the runs
    swapped (the test split has few numbers, so each is tried with several), and each test
    pair with one number word on both sides ("two"/"deux"), twice with random digits
    instead.
    """
    rng = random.Random(seed)
    swapper = Augmenter({k: [n for n in v if n not in exclude] for k, v in held_out.items()})
    lines: list[CopyLine] = []
    for pair in test:
        if shared_names(pair):
            (en, fr), kept = swapper.swap_names(pair, rng)
            lines.append(("name", en, fr, kept))
    for pair in test:
        if numbers := shared_numbers(pair):
            lines.append(("number", pair[0], pair[1], numbers))
            for _ in range(number_variants):
                (en, fr), kept = swapper.swap_numbers(pair, rng)
                lines.append(("number", en, fr, kept))
    for pair in test:
        if number_word(pair):
            for _ in range(2):
                (en, fr), kept = swapper.digits_for_words(pair, rng)
                lines.append(("number", en, fr, kept))
    return list({(k, en, fr, tuple(keep)): (k, en, fr, keep) for k, en, fr, keep in lines}.values())   # no repeats


def read_copy_test(path: str | Path) -> list[CopyLine]:
    """Read `kind<TAB>english<TAB>french<TAB>tokens` lines. ValueError names a malformed line."""
    lines: list[CopyLine] = []
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 4 or cols[0] not in ("name", "number") or not cols[1].strip() or not cols[3].split():
                raise ValueError(f"{path}, line {no}: expected kind<TAB>english<TAB>french<TAB>tokens to keep, "
                                 "kind 'name' or 'number', at least one token")
            lines.append((cols[0], cols[1], cols[2], cols[3].split()))
    return lines


def write_copy_test(lines: Sequence[CopyLine], path: str | Path, header: str = "") -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"# {h}\n" for h in header.splitlines()))
        for kind, en, fr, keep in lines:
            f.write(f"{kind}\t{en}\t{fr}\t{' '.join(keep)}\n")


def kept_verbatim(token: str, text: str) -> bool:
    """Does `text` contain `token` as a whole word (a number: not inside a longer number,
    so "7" is kept in "7h45")?"""
    if token.isdigit():
        return _count_number(token, text) > 0
    return _count(token, text) > 0


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


# ---------------------------------------------------------------------------------------
# The words a model was trained on: a shipped checkpoint's train_words.json, so the app can
# say which words of a text the model never saw (and will guess)

WORDS_FILE = "train_words.json"
_WORD = re.compile(r"[^\W\d_]+")       # runs of letters: numbers are copied, not known


def text_words(text: str) -> list[str]:
    """The words of `text` as the counts key them: lower-case runs of letters, in order."""
    return _WORD.findall(text.lower())


def write_word_counts(pairs: Sequence[Pair], path: str | Path, command: str) -> dict:
    """Count the English words of `pairs` (a training split) into `path` (JSON: pairs, the
    command that wrote it, and {word: count}, most frequent first)."""
    from collections import Counter
    counts = Counter(w for s, _ in pairs for w in text_words(s))
    out = {"pairs": len(pairs), "command": command, "words": dict(counts.most_common())}
    Path(path).write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    return out


def unseen_words(text: str, counts: dict[str, int]) -> list[str]:
    """The distinct words of `text` (as typed, in order) that never occur in `counts`."""
    seen, out = set(), []
    for m in _WORD.finditer(text):
        w = m.group()
        if w.lower() not in counts and w.lower() not in seen:
            seen.add(w.lower())
            out.append(w)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description="Write the deterministic train/valid/test split of a TSV corpus.")
    p.add_argument("--data", required=True, help="english<TAB>french file, e.g. ../shared/data/tatoeba-en-fr/fra.txt")
    p.add_argument("--out", default="data/tatoeba", help="output folder for train/valid/test*.tsv")
    p.add_argument("--valid-pairs", type=int, default=1000, help="English sentences held out for validation")
    p.add_argument("--test-pairs", type=int, default=2000, help="English sentences held out for testing")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--copy-test", metavar="FILE.tsv",
                   help="also write the held-out copy test (names and numbers) built from the test split")
    p.add_argument("--word-counts", metavar="CHECKPOINT", nargs="+",
                   help=f"also write the training split's English word counts as CHECKPOINT/{WORDS_FILE} for "
                        "each checkpoint trained on it (the app names the words of a text a model never saw)")
    a = p.parse_args()
    splits = split_pairs(read_pairs(a.data), a.valid_pairs, a.test_pairs, seed=a.seed)
    write_splits(splits, a.out)
    for name in ("train", "valid", "test", "test_joined3", "test_long"):
        print(f"{name}: {len(getattr(splits, name))} pairs -> {Path(a.out) / (name + '.tsv')}")
    if a.copy_test:
        train_words = {w for s, t in splits.train for w in re.findall(r"\w+", s + " " + t)}
        lines = copy_test_lines(splits.test, split_names(load_names())[1], train_words)
        write_copy_test(lines, a.copy_test, header=(
            "Held-out copy test: Tatoeba test-split pairs (tatoeba.org, CC-BY 2.0 FR; via manythings.org/anki)\n"
            "with persons swapped for held-out names that are no word of the training split, and pairs with\n"
            "numbers as they are and with the numbers swapped. Made by: python -m s2s.data --data fra.txt "
            "--copy-test FILE\nkind<TAB>english<TAB>french<TAB>tokens the translation must keep verbatim"))
        kinds = [k for k, *_ in lines]
        print(f"copy test: {kinds.count('name')} name lines, {kinds.count('number')} number lines -> {a.copy_test}")
    for folder in a.word_counts or []:
        command = f"python -m s2s.data --data {Path(a.data).name} --word-counts CHECKPOINT"
        out = write_word_counts(splits.train, Path(folder) / WORDS_FILE, command)
        print(f"{len(out['words'])} English words of {out['pairs']} training pairs -> {Path(folder) / WORDS_FILE}")


if __name__ == "__main__":
    main()
