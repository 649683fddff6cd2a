"""The command: `python -m s2s.neighbours` (a query), `... build` (an index), `... sample` (the
shipped sample of a training split)."""
from __future__ import annotations

import json
import sys
from typing import Sequence

from ..checkpoint import CheckpointError, load_translator
from ..data import read_pairs, write_pairs
from ..hub import MODEL_HELP, add_model_options, model_options
from ..text import InputError, OneLineErrorParser, check_range, clean_text, text_argument
from .build import BATCH_PAIRS, SAMPLE, SAMPLE_PAIRS, SAMPLE_SEED, build_index, sample_pairs
from .identity import ROOT
from .index import INDEX_JSON, INDEX_TENSORS, NeighbourIndex, load_index
from .search import MAX_K, Neighbours, marked, search


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
                           description="Build a model's neighbours index (int8 codes, safetensors + JSON).")
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
