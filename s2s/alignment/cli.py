"""The command line: python -m s2s.alignment (its options: --help)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..attention import head_or_mean
from ..checkpoint import CheckpointError, Translator, load_translator
from ..contributions import ALIGN_METHODS
from ..hub import MODEL_HELP, add_model_options, model_options
from ..text import InputError, OneLineErrorParser
from .baseline import aer_table
from .gold import SPLITS, GoldError, GoldPair, read_gold
from .rules import DEFAULT_RULE, RULES, SWEEP, Rule, links, shifted
from .scores import (
    TABLE_RULES,
    best_head,
    best_head_row,
    head_scores,
    last_layer,
    method_scores,
    pair_progress,
    pairs_that_fit,
    score,
    scores_json,
    skipped_note,
)
from .words import word_attention

# the package docstring's first line, as --help has always shown it
DESCRIPTION = "Is attention an alignment? Attention under forced decoding, read as word links and scored"


# ---------------------------------------------------------------------------------------
# Command line


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineErrorParser(prog="python -m s2s.alignment", description=DESCRIPTION)
    p.add_argument("--model", help=MODEL_HELP)
    add_model_options(p)
    p.add_argument("--gold", help="folder of SPLIT.en, SPLIT.fr, SPLIT.wa (with --input: or a Pharaoh file, "
                                  "a line of links per input pair)")
    p.add_argument("--input", metavar="PAIRS.tsv",
                   help="align a corpus: English<TAB>French a line; the links go to --output (s2s.alignment.corpus)")
    p.add_argument("--output", metavar="LINKS.txt",
                   help="with --input: one line of Pharaoh links (i-j, from 0) per pair")
    p.add_argument("--layer", type=int, help="with --input, a Transformer: read this layer (from 1) ...")
    p.add_argument("--head", type=int, help="... and this head (from 1), not the last layer's head mean")
    p.add_argument("--choose-on", metavar="GOLD_DIR",
                   help="with --input, a Transformer: read the layer x head with the lowest AER on this gold's "
                        "--choose-split")
    p.add_argument("--choose-split", default="trial", choices=SPLITS,
                   help="with --choose-on: the gold split the head is chosen on (default trial: never the test)")
    p.add_argument("--batch-size", type=int, default=32, help="with --input: pairs forced through the model at once")
    p.add_argument("--split", default="test", choices=SPLITS, help="test (447 pairs) or trial (37 pairs)")
    p.add_argument("--rule", default=DEFAULT_RULE, choices=RULES, help=f"attention -> links (default {DEFAULT_RULE})")
    p.add_argument("--sweep", action="store_true",
                   help="score every rule and setting of SWEEP, one line each (how the defaults were chosen on trial)")
    p.add_argument("--table", metavar="OUT.json",
                   help="instead of one model: every attention checkpoint under --models (argmax and the default "
                        "rule), and eflomal with --baseline-data, written to OUT.json")
    p.add_argument("--models", help="with --table: the checkpoints folder (default checkpoints/)")
    p.add_argument("--baseline-data", metavar="TSV",
                   help="with --table: English<TAB>French pairs eflomal aligns along with the gold "
                        "(e.g. data/tatoeba/train.tsv)")
    p.add_argument("--heads", action="store_true",
                   help="a Transformer (ours or a Hugging Face model): the AER of every layer x head with --rule, "
                        "and the best head")
    p.add_argument("--method", choices=list(ALIGN_METHODS), default=None,
                   help="read links from this method of s2s.contributions instead of the weights of the heatmap: "
                        "weights, norm, alti (ALTI+), rollout, value-zeroing, grad-x-input, ig, loo")
    p.add_argument("--layers", action="store_true", help="with --method: score every decoder layer, not only the last")
    p.add_argument("--method-table", metavar="OUT.json",
                   help="every attention checkpoint under --models x every method that applies x every layer, "
                        "with argmax, grow-diag and shift, written to OUT.json (kept rows are not recomputed)")
    p.add_argument("--json", action="store_true", help="print one JSON object (one a line with --sweep)")
    a = p.parse_args(argv)
    if a.input is not None:
        if a.model is None:
            p.error("give --model for the links of --input")
        from .corpus import align_file
        return align_file(a.model, a.input, a.output, rule=a.rule, gold=a.gold, split=a.split, layer=a.layer,
                          head=a.head, choose_on=a.choose_on, choose_split=a.choose_split, batch_size=a.batch_size,
                          as_json=a.json, model_options=model_options(a))
    if a.gold is None:
        p.error("give --gold GOLD_DIR (or --input PAIRS.tsv to align a corpus)")
    if a.method_table is not None:
        return _write_method_table(a, argv)
    if (a.model is None) == (a.table is None):
        p.error("give --model (one model) or --table OUT.json (every model)")
    if a.table is not None:
        return _write_table(a, argv)
    try:
        gold = read_gold(a.gold, a.split)
        tr = load_translator(a.model, **model_options(a))
        if tr.model.cfg.attention == "none":
            raise InputError(f"{tr.name} has no attention to read (a fixed-vector model)")
        if a.heads and tr.arch != "transformer":
            raise InputError(f"{tr.name} is a recurrent model: it has one attention, not layers x heads")
        total = len(gold)
        gold, skipped = pairs_that_fit(tr, gold)
        if skipped:
            note = f"{a.split}: {skipped_note(tr, skipped, total)}"
            if not gold:
                raise InputError(note)
            print(note, file=sys.stderr)
        if a.method is not None:
            return _print_method(a, tr, gold, skipped)
        t = time.perf_counter()
        weights = []
        for n, g in enumerate(gold, 1):
            try:
                weights.append(word_attention(tr, g.english, g.french, heads=a.heads, shift=shifted(a.rule)))
            except InputError as e:
                raise InputError(f"{a.split} pair {n}: {e}") from None
        seconds = time.perf_counter() - t          # the forced decodings: all the work
    except (CheckpointError, InputError, GoldError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.heads:
        return _print_heads(a, tr.name, weights, gold, seconds, skipped)
    for rule in SWEEP if a.sweep else [Rule.of(a.rule)]:
        s = score([links(w, rule) for w in weights], gold)
        r = {"aer": round(s.aer, 4), "precision": round(s.precision, 4), "recall": round(s.recall, 4),
             "sentences": s.sentences, "skipped": skipped, "rule": rule.name, "params": rule.params, "model": tr.name,
             "split": a.split, "links": s.links, "sure": s.sure, "seconds": round(seconds, 1)}
        if a.json:
            print(json.dumps(r))
        else:
            print(f"{tr.name}  {a.split}  {rule.name} {rule.setting}".rstrip()
                  + f"  AER {s.aer:.3f}  precision {s.precision:.3f}  recall {s.recall:.3f}"
                  f"  ({s.sentences} sentences, {s.links} links, {s.sure} sure)")
    return 0


def _print_heads(a: argparse.Namespace, name: str, weights: list[np.ndarray], gold: list[GoldPair],
                 seconds: float, skipped: int) -> int:
    """--heads: AER of every layer x head (rows: layers), the best head, and the head mean."""
    table = head_scores(weights, gold, a.rule)
    l, h = best_head(table)
    mean = score([links(head_or_mean(w), a.rule) for w in weights], gold)
    r = {"model": name, "split": a.split, "rule": a.rule, "sentences": len(gold), "skipped": skipped,
         "heads_aer": [[round(s.aer, 4) for s in row] for row in table],
         "best_head": {"layer": l + 1, "head": h + 1, "aer": round(table[l][h].aer, 4),
                       "precision": round(table[l][h].precision, 4), "recall": round(table[l][h].recall, 4)},
         "last_layer_mean_aer": round(mean.aer, 4), "seconds": round(seconds, 1)}
    if a.json:
        print(json.dumps(r))
        return 0
    print(f"{name}  {a.split}  {a.rule}: AER of each layer (rows) x head (columns)")
    for k, row in enumerate(table, 1):
        print(f"  layer {k:>2}  " + " ".join(f"{s.aer:.3f}" for s in row))
    print(f"best: layer {l + 1} head {h + 1}, AER {table[l][h].aer:.3f}; "
          f"the last layer's head mean: AER {mean.aer:.3f}")
    return 0


def _print_method(a: argparse.Namespace, tr: Translator, gold: list[GoldPair], skipped: int) -> int:
    """--method: the AER, precision and recall of that method's links, per decoder layer with --layers."""
    method = ALIGN_METHODS[a.method]
    t = time.perf_counter()
    with pair_progress(len(gold), f"{tr.name} {a.method}") as bar:
        scores = method_scores(tr, gold, method, (a.rule,), a.layers, on_pair=lambda n: bar.update())[a.rule]
    n = len(scores)
    numbers = range(1, n + 1) if a.layers else [last_layer(tr, method)]
    rows = [{"layer": k, **scores_json(s)} for k, s in zip(numbers, scores)]
    best = min(rows, key=lambda r: r["aer"])
    r = {"model": tr.name, "split": a.split, "rule": a.rule, "params": Rule.of(a.rule).params, "method": a.method,
         "sentences": len(gold), "skipped": skipped, "sure": scores[0].sure, "layers": rows, "best_layer": best,
         "seconds": round(time.perf_counter() - t, 1)}
    if a.json:
        print(json.dumps(r))
        return 0
    print(f"{tr.name}  {a.split}  {a.method}  {a.rule}  ({len(gold)} sentences, {scores[0].sure} sure links)")
    for row in rows:
        print(f"  layer {row['layer']:>2}  AER {row['aer']:.3f}  precision {row['precision']:.3f}  "
              f"recall {row['recall']:.3f}  ({row['links']} links)")
    return 0


def _write_method_table(a: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """--method-table: every attention checkpoint x method x layer x rule in TABLE_RULES. Rows
    already in OUT.json (same split) are kept, so an interrupted run goes on where it stopped."""
    from ..checkpoint import attention_checkpoints, checkpoint_root
    from ..contributions import applies
    out_path = Path(a.method_table)
    args = sys.argv[1:] if argv is None else list(argv)
    if "--method" in args:        # one method at a time fills the same table: the command without it makes all
        k = args.index("--method")
        args = args[:k] + args[k + 2:]
    try:
        gold = read_gold(a.gold, a.split)
        infos = attention_checkpoints(a.models)
        if not infos:
            raise InputError(f"no checkpoint with attention in {a.models or checkpoint_root()}")
        wanted = [a.method] if a.method else list(ALIGN_METHODS)
        kept, notes = [], {}
        if out_path.is_file():
            old = json.loads(out_path.read_text(encoding="utf-8"))
            if old.get("split") == a.split:
                kept = old.get("rows", [])
                # what a person wrote beside the rows (a seconds_note, computed_on's story) stays
                notes = {k: v for k, v in old.items() if k not in ("command", "split", "sentences", "rules", "rows")}
        done = {(r["model"], r["method"]) for r in kept}
        rows = list(kept)
        for info in infos:
            tr = load_translator(info.path)
            for name in wanted:
                method = ALIGN_METHODS[name]
                if (tr.name, name) in done or not applies(tr, method):
                    continue
                t = time.perf_counter()
                with pair_progress(len(gold), f"{tr.name} {name}") as bar:
                    scores = method_scores(tr, gold, method, TABLE_RULES, layers=True,
                                           on_pair=lambda n: bar.update())
                rows.append({"model": tr.name, "method": name, "seconds": round(time.perf_counter() - t, 1),
                             **{rule: [scores_json(s) for s in per_layer] for rule, per_layer in scores.items()}})
                if name == "weights" and tr.arch == "transformer":      # beside the layers: the best single head
                    rows[-1]["best_head"] = best_head_row(tr, gold)
                body = {"command": "python -m s2s.alignment " + " ".join(args), "split": a.split,
                        "sentences": len(gold), "rules": list(TABLE_RULES), "rows": rows, **notes}
                out_path.parent.mkdir(parents=True, exist_ok=True)
                out_path.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
                best = {rule: min(s.aer for s in per_layer) for rule, per_layer in scores.items()}
                print(f"{tr.name:<20} {name:<14} best layer AER " + "  ".join(f"{r} {v:.3f}" for r, v in best.items()),
                      flush=True)
    except (CheckpointError, InputError, GoldError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _write_table(a: argparse.Namespace, argv: Sequence[str] | None) -> int:
    from ..checkpoint import attention_checkpoints, checkpoint_root
    from ..data import read_pairs
    try:
        gold = read_gold(a.gold, a.split)
        infos = attention_checkpoints(a.models)
        if not infos:
            raise InputError(f"no checkpoint with attention in {a.models or checkpoint_root()}")
        baseline = None
        if a.baseline_data is not None:
            try:
                baseline = read_pairs(a.baseline_data)
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"cannot read {a.baseline_data}: {e}") from None
            if not baseline:
                raise InputError(f"{a.baseline_data} has no English<TAB>French pair")
        t = time.perf_counter()
        rows = aer_table(gold, [load_translator(i.path) for i in infos], baseline)
    except (CheckpointError, InputError, GoldError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args = sys.argv[1:] if argv is None else list(argv)
    out = {"command": "python -m s2s.alignment " + " ".join(args), "split": a.split, "sentences": len(gold),
           "rows": rows, "seconds": round(time.perf_counter() - t, 1)}
    Path(a.table).parent.mkdir(parents=True, exist_ok=True)
    Path(a.table).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for r in rows:
        print(f"{r['model']:<20} {r['rule']:<20} AER {r['aer']:.3f}  precision {r['precision']:.3f}  "
              f"recall {r['recall']:.3f}")
    return 0
