"""Is attention an explanation? Attention against attributions, and counterfactual attention.

Two questions, one part each: s2s/attributions/ compares attention alpha_j with three
attributions of log p(y_j | y_<j, x) to the source pieces (gradient x input, integrated
gradients, leave-one-out) by Kendall's tau-b; s2s/counterfactual.py replaces alpha_j
(uniform, permuted, adversarial) and reads what the output does. This file is the command
over both, and their summary over a test set (summarize).

    python -m s2s.explain --model checkpoints/en-fr-additive --json -- "I went to the lecture."
    python -m s2s.explain --model DIR --reference "Je suis allé au cours." -- "I went to the lecture."
    python -m s2s.explain --model DIR --counterfactual 2 --kind adversarial -- "I went to the lecture."
    python -m s2s.explain --model DIR --test examples/test_long.tsv --limit 200 --max-words 30 --json
    python -m s2s.explain --model DIR --contrast-step 5 --foil ▁heureuse --method ig --json -- "The girl is happy."
    python -m s2s.explain --model DIR --contrast-step 5 --foil ▁heureuse --mask-heads cross:2.* -- "The girl is happy."
    python -m s2s.explain --model DIR --test examples/test_long.tsv --limit 20 --mask-heads cross:2.* --json

--json prints source_tokens, target_tokens, attention (len(target_tokens) rows of
len(source_tokens) weights), attributions (per method, rows of the same shape), kendall_tau
(per method, one value per target token; null where a row is constant), argmax_agreement,
token_log_probs, the integration settings and completeness error, and with --counterfactual
a counterfactual object. --contrast-step T --foil PIECE (s2s/contrast.py) prints instead the
attribution of log p(y_T) - log p(foil) at step T (from 1) to the source pieces: scores (one per
source piece), target, foil, their log-probs, the pieces pushing toward each, by --method
grad-x-input (default), ig or loo. With --mask-heads KIND:LAYER.HEAD[,...] every one of these
(the comparison, --test, --contrast-step, --method) reads the model with those heads knocked out
(s2s.hooks.knocked_out), and head_mask says which. --test prints,
over the first --limit pairs of a TSV (English, French) whose English has at most --max-words
words, each forced with its French: the quantiles of tau per method, the argmax agreement
shares, the share of steps whose argmax survives a random permutation of alpha_j, and the
integration's completeness; a pair longer than a hub model's positions is left out, counted in
`skipped`.

Bad input (a missing model, a model without attention, empty or too long text) gives one
line on stderr starting with "error:" and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .attributions import IG_SPLITS, IG_STEPS, IG_TOLERANCE, METHODS, SHORT, agreement, check_model, explain, source_ids
from .checkpoint import CheckpointError, Translator, load_translator
from .contributions import ALIGN_METHODS, ATTRIBUTIONS, NOT_APPLICABLE, ROLLOUT_SHARE, applies, explain_contributions
from .counterfactual import EPSILON, KINDS, counterfactual, permutation_survival, trace
from .decode import positions
from .hooks import (
    MASK_HELP,
    HeadMask,
    format_head_mask,
    knocked_out,
    parse_head_mask,
    read_head_mask,
    resolve_head_mask,
)
from .hub import MODEL_HELP
from .hub_config import beyond_positions
from .model import Seq2Seq
from .text import InputError, OneLineErrorParser, check_range, clean_text, text_argument

# ---------------------------------------------------------------------------------------
# Over a test set


def read_test_pairs(path: str | Path, limit: int, max_words: int) -> list[tuple[str, str]]:
    """The first `limit` lines of a TSV (English, French) whose English has at most
    `max_words` whitespace words (lines starting with # are comments). Stricter than
    data.read_pairs, which skips a malformed line of a training corpus: a test file named on
    the command line with a line that is not `English<TAB>French` is an InputError naming it."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {path}: {e}") from None
    pairs = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 2 or not cols[0].strip() or not cols[1].strip():
            raise InputError(f"{path.name} line {n}: expected `English<TAB>French`")
        if len(cols[0].split()) <= max_words:
            pairs.append((cols[0], cols[1]))
            if len(pairs) == limit:
                break
    if not pairs:
        raise InputError(f"{path.name} has no pair with at most {max_words} English words")
    return pairs


def fits_positions(tr: Translator, english: str, french: str) -> bool:
    """Whether the pair, forced, fits the model's positions (a hub model's max_position_embeddings;
    the shipped models have no limit). A test set's pair that does not is left out of the
    summary and counted (`skipped`); one sentence too long is refused in one line instead
    (decode.encode_source, attributions.target_ids)."""
    limit = positions(tr)
    return not limit or beyond_positions(limit, len(tr.tokenizer.source_ids(clean_text(english))),
                                         len(tr.tokenizer.target_ids(clean_text(french, what="reference")))) is None


def summarize(tr: Translator, pairs: Sequence[tuple[str, str]], ig_steps: int = IG_STEPS, seed: int = 0,
              head_mask: HeadMask | str = ()) -> dict:
    """Over (English, French) pairs, each forced with its French: the distribution of tau
    per attribution, the share of steps whose argmax agrees with attention's, and the share
    of steps whose argmax token survives a random permutation of alpha_j; with `head_mask`, each
    pair explained with those heads knocked out (explain's head_mask), and head_mask in the result."""
    check_model(tr)
    mask = read_head_mask(head_mask)
    resolve_head_mask(tr.model, mask)       # a head the model lacks (or a recurrent model): one line, no work
    taus = {m: [] for m in METHODS}
    same = {m: [] for m in METHODS}
    survives, deltas, steps, t0 = [], [], 0, time.perf_counter()
    recurrent = isinstance(tr.model, Seq2Seq)        # permuting alpha_j replaces a recurrent decoder's one attention
    fitting = [(en, fr) for en, fr in pairs if fits_positions(tr, en, fr)]
    if not fitting:
        raise InputError(f"none of the {len(pairs)} pairs fits {tr.name}'s {positions(tr)} positions")
    for n, (en, fr) in enumerate(fitting):
        e = explain(tr, en, reference=fr, ig_steps=ig_steps, head_mask=mask)
        for m in METHODS:
            ts, ss = agreement(e.attention, e.attributions[m])
            taus[m] += ts
            same[m] += ss
        gap = e.attributions["integrated_gradients"].sum(1) - e.ig_delta     # log p(y_j | x) - log p(y_j | 0)
        deltas += (np.abs(e.ig_delta) / (1 + np.abs(gap))).tolist()
        steps += len(e.target_ids)
        if recurrent:
            run = trace(tr.model, torch.tensor([source_ids(tr, en)], device=tr.device),
                        torch.tensor(e.target_ids, device=tr.device))
            survives += permutation_survival(tr.model, run, seed + n)

    def dist(v):
        v = np.asarray(v, dtype=float)
        v = v[np.isfinite(v)]
        q = np.percentile(v, [10, 25, 50, 75, 90]).round(4).tolist()
        return {"median": q[2], "mean": round(float(v.mean()), 4), "q10": q[0], "q25": q[1], "q75": q[3],
                "q90": q[4], "steps": int(v.size)}

    return {"model": tr.name, "sentences": len(fitting), "skipped": len(pairs) - len(fitting), "steps": steps,
            "kendall_tau": {m: dist(taus[m]) for m in METHODS},
            "argmax_agreement": {m: round(float(np.mean(same[m])), 4) for m in METHODS},
            "permutation_survival": round(float(np.mean(survives)), 4) if recurrent else None,
            # |sum_i a_ij - gap_j| / (1 + |gap_j|): the share of tokens within IG_TOLERANCE, and the worst
            "ig_completeness": {"within_tolerance": round(float(np.mean(np.array(deltas) <= IG_TOLERANCE)), 4),
                                "median": round(float(np.median(deltas)), 5),
                                "q99": round(float(np.percentile(deltas, 99)), 5),
                                "max": round(float(np.max(deltas)), 5)},
            "ig_steps": ig_steps, "ig_splits": IG_SPLITS, "seconds": round(time.perf_counter() - t0, 1),
            **({"head_mask": format_head_mask(mask)} if mask else {})}


def summarize_methods(tr: Translator, pairs: Sequence[tuple[str, str]]) -> dict:
    """Is each method an explanation? Over (English, French) pairs, each forced with its
    French: per output piece, Kendall's tau-b between each method's row (its last layer:
    s2s.contributions, and gradient x input) and leave-one-out's |a_j| (what removing each
    piece does to log p(y_j)), and the share of pieces where both rank the same source piece
    first. Leave-one-out is the reference here, not a method under test."""
    from .attributions import grad_x_input, leave_one_out
    from .contributions import contributions
    names = [n for n in ALIGN_METHODS if applies(tr, ALIGN_METHODS[n]) and n not in ("ig", "loo")]
    taus = {n: [] for n in names}
    same = {n: [] for n in names}
    steps, t0 = 0, time.perf_counter()
    for en, fr in pairs:
        src = torch.tensor([source_ids(tr, en)], device=tr.device)
        tgt = torch.tensor(tr.tokenizer.target_ids(fr), device=tr.device)
        layers, _, _, _ = contributions(tr.model, src, tgt, [ALIGN_METHODS[n] for n in names if n != "grad-x-input"])
        loo = leave_one_out(tr.model, src, tgt)
        for n in names:
            m = grad_x_input(tr.model, src, tgt) if n == "grad-x-input" else layers[ALIGN_METHODS[n]][-1]
            ts, ss = agreement(np.abs(m), loo)
            taus[n] += ts
            same[n] += ss
        steps += tgt.numel()

    def median(v):
        v = np.asarray(v, dtype=float)
        v = v[np.isfinite(v)]
        return {"median": round(float(np.median(v)), 4), "q25": round(float(np.percentile(v, 25)), 4),
                "q75": round(float(np.percentile(v, 75)), 4), "steps": int(v.size)}

    return {"model": tr.name, "sentences": len(pairs), "steps": steps,
            "kendall_tau_vs_loo": {n: median(taus[n]) for n in names},
            "same_top_as_loo": {n: round(float(np.mean(same[n])), 4) for n in names},
            "seconds": round(time.perf_counter() - t0, 1)}


# ---------------------------------------------------------------------------------------
# Command line


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineErrorParser(prog="python -m s2s.explain", description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a model with attention: " + MODEL_HELP)
    p.add_argument("--reference", metavar="TEXT", help="explain this French translation (default: the greedy one)")
    p.add_argument("--ig-steps", type=int, default=IG_STEPS, help=f"integrated-gradients points (default {IG_STEPS})")
    p.add_argument("--counterfactual", type=int, metavar="STEP",
                   help="replace the attention at this target step (counted from 0)")
    p.add_argument("--kind", choices=KINDS, default="uniform", help="what replaces it (default uniform)")
    p.add_argument("--epsilon", type=float, default=EPSILON, help=f"the adversary's TV budget (default {EPSILON})")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutation and the adversary's starts")
    p.add_argument("--test", metavar="FILE", help="summary over a TSV of English<TAB>French pairs instead of one text")
    p.add_argument("--limit", type=int, default=200, help="with --test: this many pairs (default 200)")
    p.add_argument("--max-words", type=int, default=30, help="with --test: skip pairs with longer English (default 30)")
    p.add_argument("--table", metavar="OUT.json",
                   help="with --test: the summary of every attention checkpoint under --models, written to OUT.json")
    p.add_argument("--models", help="with --table: the checkpoints folder (default checkpoints/)")
    p.add_argument("--method", action="append", choices=[*ALIGN_METHODS, "all"], metavar="METHOD",
                   help="instead of the comparison with attention: this method's matrices, one per decoder layer "
                        "where it has layers, and ALTI+'s source share (rollout's is 1 - 0.5^l by construction); "
                        f"one of {', '.join(ALIGN_METHODS)} or all; may be given more than once")
    p.add_argument("--contrast-step", type=int, metavar="T",
                   help="contrastive attribution at this output step (counted from 1): why y_T and not --foil; "
                        "--method grad-x-input (default), ig or loo")
    p.add_argument("--foil", metavar="PIECE", help="with --contrast-step: the alternative, one piece of the vocabulary")
    p.add_argument("--mask-heads", metavar="KIND:LAYER.HEAD", default="",
                   help="read the model with these heads knocked out (the comparison, --test, --contrast-step, "
                        "--method): " + MASK_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("text", nargs="*", help="the English text (after --, if it starts with a dash)")
    a = p.parse_args(argv)
    if (a.contrast_step is None) != (a.foil is None):
        p.error("--contrast-step T and --foil PIECE go together")
    if a.contrast_step is not None and (a.test is not None or a.table is not None or a.counterfactual is not None):
        p.error("--contrast-step explains one text: not with --test, --table or --counterfactual")
    if a.mask_heads and (a.counterfactual is not None or a.table is not None):
        p.error("--mask-heads knocks heads out of one model: not with --counterfactual (a recurrent model's, which "
                "has no heads) or --table (every checkpoint)")
    if a.table is not None:
        if a.test is None:
            p.error("--table needs --test FILE")
        return _write_table(a, argv)
    if a.test is not None and a.method:
        p.error("--method with --test goes with --table OUT.json (every attention checkpoint)")
    if a.model is None:
        p.error("the following arguments are required: --model")
    try:
        tr = load_translator(a.model)
        check_model(tr)
        if a.test is not None:
            check_range("--limit", a.limit, 1, 100_000)
            out = summarize(tr, read_test_pairs(a.test, a.limit, a.max_words), a.ig_steps, a.seed,
                            head_mask=parse_head_mask(a.mask_heads))
            out["file"], out["max_words"] = str(a.test), a.max_words
            print(json.dumps(out) if a.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
            return 0
        text = text_argument(a.text)
        if a.contrast_step is not None:
            return _print_contrast(tr, text, a)
        if a.method:
            return _print_methods(tr, text, a)
        e = explain(tr, text, a.reference, ig_steps=a.ig_steps, head_mask=parse_head_mask(a.mask_heads))
        cf = None
        if a.counterfactual is not None:
            cf = counterfactual(tr, text, a.counterfactual, a.kind, epsilon=a.epsilon, seed=a.seed,
                                target=e.target_ids)
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        out = e.to_json()
        if cf is not None:
            out["counterfactual"] = cf.to_json()
        print(json.dumps(out, ensure_ascii=False, allow_nan=False))
        return 0
    print(f"{e.translation}   ({e.forced_from}, forced)")
    if e.head_mask:
        print(f"heads knocked out: {e.head_mask}")
    taus = e.kendall_tau()
    print(f"{'target':>14}  {'attention':>12}  " + "  ".join(f"{SHORT[m]:>16}" for m in METHODS)
          + "   (the source piece each one ranks first; tau with attention)")
    for j, y in enumerate(e.target_tokens):
        cols = [f"{e.source_tokens[int(np.abs(e.attributions[m][j]).argmax())][:12]:>12} {taus[m][j]:+.2f}"
                for m in METHODS]
        print(f"{y[:14]:>14}  {e.source_tokens[int(e.attention[j].argmax())][:12]:>12}  " + "  ".join(cols))
    if cf is not None:
        print(f"\nstep {cf.step} ({cf.token!r}), attention {cf.kind}: JSD {cf.jsd:.3f} bits, TV {cf.tv:.4f}, "
              f"argmax {'kept' if cf.argmax_survives else 'changed'}")
        print("  before:", ", ".join(f"{t} {q:.3f}" for t, q in cf.top_before), "->", cf.translation_before)
        print("  after: ", ", ".join(f"{t} {q:.3f}" for t, q in cf.top_after), "->", cf.translation_after)
    return 0


def method_json(tr: Translator, text: str, reference: str | None, names: Sequence[str], ig_steps: int = IG_STEPS,
                head_mask: HeadMask | str = ()) -> dict:
    """--method: every matrix of the named methods (ALIGN_METHODS' names) for the forced output,
    each named by method and layer (from 1), with the rows and columns as positions and tokens,
    and the source share where the method has one; with `head_mask` (--mask-heads) of the model
    with those heads knocked out (the contributions through their own head_mask, the gradient
    attributions under s2s.hooks.knocked_out). A method that does not apply is an InputError."""
    mask = read_head_mask(head_mask)
    resolve_head_mask(tr.model, mask)       # a head the model lacks (or a recurrent model): one line, no work
    return _method_json(tr, text, reference, names, ig_steps, mask)


def _method_json(tr: Translator, text: str, reference: str | None, names: Sequence[str], ig_steps: int,
                 mask: HeadMask) -> dict:
    from .attributions import grad_x_input, integrated_gradients, leave_one_out, source_ids
    if "all" in names:           # every method that applies to this model
        names = [n for n in ALIGN_METHODS if applies(tr, ALIGN_METHODS[n])]
    names = list(dict.fromkeys(names))
    for n in names:
        if not applies(tr, ALIGN_METHODS[n]):
            raise InputError(NOT_APPLICABLE.format(method=n))
    wanted = [ALIGN_METHODS[n] for n in names]
    c = explain_contributions(tr, text, reference, methods=[m for m in wanted if m not in ATTRIBUTIONS] or ["weights"],
                              head_mask=mask)
    out = c.to_json()
    del out["methods"], out["source_share"]
    r = (lambda m: np.round(np.asarray(m, dtype=float), 6).tolist())
    out |= {"model": tr.name, "matrices": [], "heads": [], "source_share": []}
    src = torch.tensor([source_ids(tr, text)], device=tr.device)
    tgt = torch.tensor(c.target_ids, device=tr.device)
    for name, m in zip(names, wanted):
        if m in ATTRIBUTIONS:
            t0 = time.perf_counter()
            with knocked_out(tr.model, mask):
                raw = (grad_x_input(tr.model, src, tgt) if m == "grad_x_input" else
                       integrated_gradients(tr.model, src, tgt, ig_steps)[0] if m == "integrated_gradients" else
                       leave_one_out(tr.model, src, tgt))
            out["seconds"][m] = round(time.perf_counter() - t0, 4)
            out["matrices"].append({"method": name, "layer": None, "values": "raw a_ij (log p units)",
                                    "matrix": r(raw)})
            continue
        for layer, matrix in enumerate(c.layers[m], 1):
            out["matrices"].append({"method": name, "layer": layer, "values": "each row a distribution over the source",
                                    "matrix": r(matrix)})
        for layer, heads in enumerate(c.heads.get(m, []), 1):
            out["heads"].append({"method": name, "layer": layer, "matrices": r(heads)})
        for layer, share in enumerate(c.source_share.get(m, []), 1):
            out["source_share"].append({"method": name, "layer": layer, "share": r(share)})
        if m == "rollout":
            out.setdefault("notes", {})[name] = ROLLOUT_SHARE
    return out


def _print_methods(tr: Translator, text: str, a: argparse.Namespace) -> int:
    try:
        out = method_json(tr, text, a.reference, a.method, a.ig_steps, head_mask=parse_head_mask(a.mask_heads))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(out, ensure_ascii=False, allow_nan=False))
        return 0
    print(f"{out['translation']}   ({out['forced_from']}, forced)")
    src = out["source_tokens"]
    for m in out["matrices"]:
        where = f" layer {m['layer']}" if m["layer"] is not None else ""
        # a row of zeros (value zeroing under its floor): no source piece had a measurable effect
        tops = [src[int(np.abs(row).argmax())] if np.abs(row).sum() > 0 else "(none)" for row in m["matrix"]]
        print(f"{m['method']}{where}: " + ", ".join(f"{y}<-{x}" for y, x in zip(out["target_tokens"], tops)))
    for s in out["source_share"]:
        print(f"{s['method']} layer {s['layer']} source share: " + " ".join(f"{v:.2f}" for v in s["share"]))
    for name, note in out.get("notes", {}).items():
        print(f"{name}: {note}")
    return 0


def _print_contrast(tr: Translator, text: str, a: argparse.Namespace) -> int:
    from .contrast import METHODS as CONTRAST_METHODS
    from .contrast import explain_contrast
    methods = list(dict.fromkeys(a.method or ["grad-x-input"]))
    if len(methods) > 1 or methods[0] not in CONTRAST_METHODS:
        raise InputError(f"--contrast-step takes one --method of {', '.join(CONTRAST_METHODS)}, "
                         f"not {', '.join(methods)}.")
    c = explain_contrast(tr, text, a.contrast_step, a.foil, a.reference, methods[0], a.ig_steps,
                         head_mask=parse_head_mask(a.mask_heads))
    out = c.to_json()
    if a.json:
        print(json.dumps(out, ensure_ascii=False, allow_nan=False))
        return 0
    print(f"step {c.step}: {c.target!r} (log p {c.log_prob_target:.3f}) and not {c.foil!r} "
          f"(log p {c.log_prob_foil:.3f}), {c.method}")
    if c.head_mask:
        print(f"heads knocked out: {c.head_mask}")
    for tok, v in zip(c.source_tokens, c.scores):
        side = f"toward {c.target!r}" if v > 0 else f"toward {c.foil!r}" if v < 0 else ""
        print(f"{tok[:14]:>14}  {v:+.4f}  {side}")
    return 0


def _write_table(a: argparse.Namespace, argv: Sequence[str] | None) -> int:
    from .checkpoint import attention_checkpoints, checkpoint_root
    try:
        check_range("--limit", a.limit, 1, 100_000)
        pairs = read_test_pairs(a.test, a.limit, a.max_words)
        infos = attention_checkpoints(a.models)
        if not infos:
            raise InputError(f"no checkpoint with attention in {a.models or checkpoint_root()}")
        if a.method:             # each method against leave-one-out, not the attributions against attention
            rows = [summarize_methods(load_translator(i.path), pairs) for i in infos]
        else:
            rows = [summarize(load_translator(i.path), pairs, a.ig_steps, a.seed) for i in infos]
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args = sys.argv[1:] if argv is None else list(argv)
    out = {"command": "python -m s2s.explain " + " ".join(args), "file": str(a.test), "max_words": a.max_words,
           "rows": rows}
    Path(a.table).parent.mkdir(parents=True, exist_ok=True)
    Path(a.table).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if a.method:
        for r in rows:
            print(f"{r['model']:<20} median tau vs leave-one-out "
                  + "  ".join(f"{n} {v['median']:+.2f}" for n, v in r["kendall_tau_vs_loo"].items()))
        return 0
    for r in rows:
        print(f"{r['model']:<20} median tau " + "  ".join(f"{SHORT[m]} {r['kendall_tau'][m]['median']:+.2f}"
                                                       for m in METHODS)
              + ("" if r["permutation_survival"] is None
                 else f"  permutation survival {r['permutation_survival']:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
