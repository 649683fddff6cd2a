"""Word links for a whole corpus from a model's attention, in the Pharaoh format aligners use.

    python -m s2s.alignment --model checkpoints/en-fr-general --input PAIRS.tsv --output LINKS.txt
    python -m s2s.alignment --model checkpoints/en-fr-transformer --input PAIRS.tsv --output LINKS.txt \
        --rule argmax --choose-on ../shared/data/hansards-en-fr-align --gold GOLD.txt
    torchrun --nproc_per_node 2 -m s2s.alignment --model M --input PAIRS.tsv --output LINKS.txt

PAIRS.tsv holds `English<TAB>French` a line; the words are each side's whitespace tokens, fed
to the model as they are (s2s.alignment.word_inputs). LINKS.txt gets one line per input line:
`i-j` pairs, English word i linked to French word j, both from 0, sorted (the Pharaoh format
of fast_align, eflomal and GIZA++'s converters). A line that cannot be aligned (no tab, an
empty side, too long for the model or for its positions, not UTF-8) gets an empty line, and their
count goes to stderr; every other line stays where it is.

The attention is read as s2s.alignment reads it (pieces summed and averaged into words, a
rule turning weights into links). A Transformer's attention is its last layer's head mean,
or the layer and head given by --layer/--head (from 1), or the head with the lowest AER on a
gold set (--choose-on). With --gold (a folder like the Hansards one, whose pairs are the
input's, or a Pharaoh file with one line per input pair, `i-j` sure and `i?j` possible), AER,
precision and recall are printed too.

Pairs are forced through the model in batches (decode.forced_batch_attention), on the GPU
when there is one. The batches are fixed by the file alone (pairs sorted by length, then cut
every --batch-size), and under torchrun process r takes batches r, r + N, r + 2N...: each
batch is the same computation as in a single process, so the file written is the same.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..attention import head_or_mean
from ..checkpoint import CheckpointError, Translator, load_translator
from ..decode import forced_batch_attention
from ..text import MAX_CORPUS_BYTES, MAX_CORPUS_PAIRS, MAX_DECODE_LEN, MAX_SOURCE_TOKENS, InputError
from .gold import GoldError, GoldPair, Link, read_gold
from .rules import links, shifted
from .scores import Scores, best_head, head_scores, pairs_that_fit, score, skipped_note
from .words import to_words, too_long, word_attention, word_inputs

Pair = tuple[tuple[str, ...], tuple[str, ...]]
BATCH_SIZE = 32


# ---------------------------------------------------------------------------------------
# The Pharaoh format


def format_pharaoh(found: set[Link]) -> str:
    """{(0, 0), (2, 1)} -> "0-0 2-1": English-French pairs from 0, sorted."""
    return " ".join(f"{e}-{f}" for e, f in sorted(found))


def parse_pharaoh(line: str, where: str = "") -> tuple[set[Link], set[Link]]:
    """"0-0 1?2" -> (sure, possible): `i-j` is a sure link, `i?j` (or `ipj`) a possible one;
    every sure link is possible too (P ⊇ S, as in the Hansards gold)."""
    sure, possible = set(), set()
    for item in line.split():
        sep = next((c for c in "-?p" if c in item), None)
        e, _, f = item.partition(sep) if sep else (item, "", "")
        if not (e.isascii() and e.isdigit() and f.isascii() and f.isdigit()):
            raise InputError(f"{where}expected links like 0-1 (sure) or 0?1 (possible), got {item!r}")
        link = (int(e), int(f))
        possible.add(link)
        if sep == "-":
            sure.add(link)
    return sure, possible


def _read_bytes(path: str | Path) -> bytes:
    """A file's bytes, or an InputError that says why they cannot be read."""
    path = Path(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None


def read_pharaoh(path: str | Path) -> list[tuple[set[Link], set[Link]]]:
    """One (sure, possible) pair of link sets per line of a Pharaoh file."""
    return parse_pharaoh_file(_read_bytes(path), Path(path).name)


def parse_pharaoh_file(raw: bytes, name: str) -> list[tuple[set[Link], set[Link]]]:
    """read_pharaoh on a file's bytes (`name` for messages)."""
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError(f"{name} is not UTF-8 text") from None
    return [parse_pharaoh(line, f"{name} line {n}: ") for n, line in enumerate(lines, 1)]


def read_corpus(path: str | Path) -> list[Pair | None]:
    """`English<TAB>French` lines -> (English words, French words) each, or None for a line
    that cannot be aligned (no tab, an empty side, not UTF-8). Every line counts, blank ones too,
    so the output has as many lines as the input."""
    return parse_corpus(_read_bytes(path))


def parse_corpus(raw: bytes) -> list[Pair | None]:
    """read_corpus on a file's bytes (an upload in the app)."""
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":           # the newline that ends the last line
        lines.pop()
    out: list[Pair | None] = []
    for line in lines:
        try:
            text = line.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError:
            out.append(None)
            continue
        english, tab, french = text.partition("\t")
        en, fr = tuple(english.split()), tuple(french.split("\t")[0].split())
        out.append((en, fr) if tab and en and fr else None)
    return out


def upload_corpus(raw: bytes, name: str, max_bytes: int = MAX_CORPUS_BYTES, max_pairs: int = MAX_CORPUS_PAIRS
                  ) -> list[Pair | None]:
    """An uploaded file of pairs within the app's limits, or an InputError that says which."""
    if len(raw) > max_bytes:
        raise InputError(f"{name} is {len(raw) / 1000:,.0f} KB; the limit here is {max_bytes / 1000:,.0f} KB "
                         f"(the command line has none: python -m s2s.alignment --input)")
    pairs = parse_corpus(raw)
    if len(pairs) > max_pairs:
        raise InputError(f"{name} has {len(pairs):,} lines; the limit here is {max_pairs:,} pairs "
                         f"(the command line has none: python -m s2s.alignment --input)")
    if not any(pairs):
        raise InputError(f"no line of {name} is English<TAB>French (UTF-8 text, a tab between the two sides)")
    return pairs


# ---------------------------------------------------------------------------------------
# Aligning


def batches(pairs: Sequence[Pair | None], batch_size: int) -> list[list[int]]:
    """The alignable pairs' indices, sorted by length (little padding) and cut every
    `batch_size`: fixed by the pairs alone, whichever process computes them."""
    order = sorted((i for i, p in enumerate(pairs) if p is not None),
                   key=lambda i: (len(pairs[i][0]) + len(pairs[i][1]), i))
    return [order[k:k + batch_size] for k in range(0, len(order), batch_size)]


def word_weights(tr: Translator, pairs: Sequence[Pair], shift: bool = False, heads: bool = False
                 ) -> list[np.ndarray | None]:
    """Each pair's attention over its words, forced as one batch: (French words x English
    words), or with `heads` a Transformer's (layers, heads, French, English); None for a pair
    the model cannot take (too long for the limits or for the model's positions, a word of
    nothing but control characters)."""
    inputs: list = []
    for en, fr in pairs:
        try:
            wp = word_inputs(tr, en, fr)
        except InputError:
            wp = None
        if wp is not None and (len(wp.source) > MAX_SOURCE_TOKENS + 16 or len(wp.target) > MAX_DECODE_LEN
                               or too_long(tr, wp) is not None):
            wp = None
        inputs.append(wp)
    ok = [i for i, wp in enumerate(inputs) if wp is not None]
    out: list[np.ndarray | None] = [None] * len(pairs)
    if ok:
        att = forced_batch_attention(tr, [inputs[i].source for i in ok], [inputs[i].target for i in ok], heads)
        for i, a in zip(ok, att):
            out[i] = to_words(a, inputs[i], shift)
    return out


def corpus_weights(tr: Translator, pairs: Sequence[Pair | None], shift: bool = False, heads: bool = False,
                   batch_size: int = BATCH_SIZE) -> list[np.ndarray | None]:
    """word_weights of every pair, in the batches align_corpus uses (None where a pair has none)."""
    out: list[np.ndarray | None] = [None] * len(pairs)
    for idx in batches(pairs, batch_size):
        for i, w in zip(idx, word_weights(tr, [pairs[i] for i in idx], shift, heads)):
            out[i] = w
    return out


def weights_links(weights: Sequence[np.ndarray | None], rule: str, head: tuple[int, int] | None = None
                  ) -> list[set[Link] | None]:
    """Links of each pair's word weights under `rule`. Weights with heads, (layers, heads,
    French, English), are read at `head` (layer, head from 0), or as the last layer's head mean."""
    return [None if w is None else links(head_or_mean(w, *(head or ())), rule) for w in weights]


def corpus_head_scores(weights: Sequence[np.ndarray | None], gold: Sequence[GoldPair], rule: str
                       ) -> list[list[Scores]]:
    """Every layer x head scored as an aligner over a corpus (weights with heads, as
    corpus_weights(..., heads=True) gives them): [layer][head] -> Scores, a pair without
    weights counting as no links, as in the file written."""
    L, H = next(w.shape[:2] for w in weights if w is not None)
    return [[score([f or set() for f in weights_links(weights, rule, (l, h))], gold) for h in range(H)]
            for l in range(L)]


def pharaoh_lines(found: Sequence[set[Link] | None]) -> str:
    """The output file: a line per pair, empty where a pair could not be aligned."""
    return "".join((format_pharaoh(f) if f is not None else "") + "\n" for f in found)


def align_batch(tr: Translator, pairs: Sequence[Pair], rule: str, head: tuple[int, int] | None = None
                ) -> list[set[Link] | None]:
    """Links of a batch of pairs (None where word_weights has none). `head` (layer, head),
    from 0: that head of a Transformer instead of its last layer's head mean."""
    weights = word_weights(tr, pairs, shifted(rule), heads=head is not None)
    return [None if w is None else links(head_or_mean(w, *(head or ())), rule) for w in weights]


def align_corpus(tr: Translator, pairs: Sequence[Pair | None], rule: str, head: tuple[int, int] | None = None,
                 batch_size: int = BATCH_SIZE, rank: int = 0, world: int = 1, progress: bool = False
                 ) -> dict[int, set[Link] | None]:
    """index -> links for this process's share of the pairs (batches rank, rank + world, ...);
    unalignable pairs (None) are left out."""
    from tqdm import tqdm
    mine = batches(pairs, batch_size)[rank::world]
    out: dict[int, set[Link] | None] = {}
    with tqdm(total=sum(map(len, mine)), unit="pair", file=sys.stderr, disable=not progress) as bar:
        for idx in mine:
            out.update(zip(idx, align_batch(tr, [pairs[i] for i in idx], rule, head)))
            bar.update(len(idx))
    return out


def choose_head(tr: Translator, gold: Sequence[GoldPair], rule: str) -> tuple[tuple[int, int], float, int]:
    """The (layer, head), from 0, whose links under `rule` have the lowest AER on `gold`, that AER,
    and how many of the gold's pairs were left out, longer than the model's positions
    (scores.pairs_that_fit); an InputError where none is left."""
    total = len(gold)
    gold, skipped = pairs_that_fit(tr, gold)
    if not gold:
        raise InputError(f"--choose-on: {skipped_note(tr, skipped, total)}")
    table = head_scores([word_attention(tr, g.english, g.french, heads=True, shift=shifted(rule)) for g in gold],
                        gold, rule)
    l, h = best_head(table)
    return (l, h), table[l][h].aer, skipped


def gold_for(path: str, split: str, pairs: Sequence[Pair | None]) -> list[GoldPair]:
    """--gold: a gold folder whose pairs are the input's, or a Pharaoh file with a line per pair."""
    if Path(path).is_dir():
        gold = read_gold(path, split)
        if len(gold) != len(pairs):
            raise InputError(f"the gold has {len(gold)} pairs but the input has {len(pairs)} lines")
        for n, (g, p) in enumerate(zip(gold, pairs), 1):
            if p is not None and (len(g.english), len(g.french)) != (len(p[0]), len(p[1])):
                raise InputError(f"input line {n} has {len(p[0])} English and {len(p[1])} French words, "
                                 f"the gold's pair {n} {len(g.english)} and {len(g.french)}")
        return gold
    return pharaoh_gold(read_pharaoh(path), pairs, Path(path).name)


def pharaoh_gold(gold_links: Sequence[tuple[set[Link], set[Link]]], pairs: Sequence[Pair | None],
                 name: str) -> list[GoldPair]:
    """Gold pairs from Pharaoh (sure, possible) links, a line per pair of `pairs` (the file `name`)."""
    if len(gold_links) != len(pairs):
        raise InputError(f"{name} has {len(gold_links)} lines but the pairs are {len(pairs)}")
    gold = []
    for n, ((sure, possible), p) in enumerate(zip(gold_links, pairs), 1):
        en, fr = p if p is not None else ((), ())
        if p is not None and any(not (0 <= e < len(en) and 0 <= f < len(fr)) for e, f in possible):
            raise InputError(f"{name} line {n}: a link is out of range ({len(en)} English and {len(fr)} French words)")
        gold.append(GoldPair(en, fr, frozenset(sure), frozenset(possible)))
    return gold


# ---------------------------------------------------------------------------------------
# Command line (s2s.alignment's main hands --input here)


def _distributed() -> tuple[int, int]:
    """(rank, world size): under torchrun, after joining its process group (gloo: CPU or GPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    return dist.get_rank(), world


def align_file(model: str, input: str, output: str | None, *, rule: str, gold: str | None = None,
               split: str = "test", layer: int | None = None, head: int | None = None, choose_on: str | None = None,
               choose_split: str = "trial", batch_size: int = BATCH_SIZE, as_json: bool = False,
               model_options: dict | None = None) -> int:
    """python -m s2s.alignment --input: write the links of every pair of `input` to `output`;
    with `gold`, print the scores. `layer`/`head` (from 1) or `choose_on` pick a Transformer's
    head; `model_options`: a hub model's languages and prefix. Returns the exit status."""
    rank, world = _distributed()
    try:
        if output is None:
            raise InputError("give --output LINKS.txt for the links of --input")
        if batch_size < 1:
            raise InputError(f"--batch-size must be at least 1, not {batch_size}")
        pairs = read_corpus(input)
        if not pairs:
            raise InputError(f"{input} is empty")
        tr = load_translator(model, **(model_options or {}))
        if tr.model.cfg.attention == "none":
            raise InputError(f"{tr.name} has no attention to read (a fixed-vector model)")
        gold_pairs = gold_for(gold, split, pairs) if gold else None
        picked, chosen = None, None
        if choose_on is not None or layer is not None or head is not None:
            if tr.arch != "transformer":
                raise InputError(f"{tr.name} is a recurrent model: it has one attention, not layers x heads")
            L, H = tr.model.cfg.decoder_layers, tr.model.cfg.heads
            if choose_on is not None:
                picked, aer, left_out = choose_head(tr, read_gold(choose_on, choose_split), rule)
                chosen = {"layer": picked[0] + 1, "head": picked[1] + 1, "aer": round(aer, 4), "on": choose_split,
                          "skipped": left_out}
            else:
                if layer is None or head is None:
                    raise InputError("give both --layer and --head (from 1), or --choose-on GOLD_DIR")
                if not (1 <= layer <= L and 1 <= head <= H):
                    raise InputError(f"{tr.name} has layers 1-{L} and heads 1-{H}; got layer {layer} head {head}")
                picked = (layer - 1, head - 1)
    except (CheckpointError, InputError, GoldError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t = time.perf_counter()
    mine = align_corpus(tr, pairs, rule, picked, batch_size, rank, world, progress=rank == 0)
    if world > 1:
        import torch.distributed as dist
        every = [None] * world
        dist.all_gather_object(every, mine)
        dist.destroy_process_group()
        if rank != 0:
            return 0
        mine = {k: v for part in every for k, v in part.items()}
    seconds = time.perf_counter() - t
    found = [mine.get(i) for i in range(len(pairs))]
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(pharaoh_lines(found), encoding="utf-8")
    skipped = sum(f is None for f in found)
    done = len(pairs) - skipped
    print(f"aligned {done} pairs in {seconds:.1f} s ({done / max(seconds, 1e-9):.1f} pairs/s, {world} process"
          f"{'es' if world > 1 else ''}); {skipped} line{'s' if skipped != 1 else ''} could not be aligned "
          "(empty lines in the output)", file=sys.stderr)
    report = {"model": tr.name, "rule": rule, "pairs": len(pairs), "aligned": done, "skipped": skipped,
              "head": chosen or (None if picked is None else {"layer": picked[0] + 1, "head": picked[1] + 1}),
              "pairs_per_s": round(done / max(seconds, 1e-9), 1), "output": str(output)}
    if gold_pairs is not None:
        s = score([f if f is not None else set() for f in found], gold_pairs)
        report.update(aer=round(s.aer, 4), precision=round(s.precision, 4), recall=round(s.recall, 4),
                      links=s.links, sure=s.sure)
    if as_json:
        print(json.dumps(report))
    elif gold_pairs is not None:
        print(f"{tr.name}  {rule}  AER {report['aer']:.3f}  precision {report['precision']:.3f}  "
              f"recall {report['recall']:.3f}  "
              f"({len(gold_pairs)} pairs, {report['links']} links, {report['sure']} sure)")
    return 0


__all__ = ["format_pharaoh", "parse_pharaoh", "read_pharaoh", "read_corpus", "parse_corpus", "word_weights",
           "corpus_weights", "weights_links", "pharaoh_lines",
           "corpus_head_scores", "upload_corpus", "parse_pharaoh_file",
           "align_batch", "align_corpus", "choose_head", "batches", "gold_for", "pharaoh_gold", "align_file"]
