"""Evaluation: BLEU and chrF (sacrebleu, one reference), perplexity, and BLEU by source length.

    python -m s2s.evaluate --model checkpoints/en-fr-additive --test data/tatoeba/test.tsv --beam 5 --json

BLEU by length bins the test pairs by source words (1-10, 11-20, ..., 51-60), the
analogue of Bahdanau et al. (2015), Fig. 2.

    python -m s2s.evaluate --model checkpoints/charlm-war-and-peace --text-file FILE --json

gives a character-level model's bits per character on a text file.

    python -m s2s.evaluate --model checkpoints/en-fr-additive --copy-test examples/copy_test.tsv --json

scores the held-out copy test (data.copy_test_lines): the share of unseen person names and
of numbers that the translation keeps verbatim (greedy unless --beam is given).
`--loops` adds how often greedy decoding of 20-60-word inputs runs to the length limit;
`--no-repeat N` blocks repeated N-grams in the search (decode.block_repeats), for both.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Callable, Sequence

import sacrebleu
import torch

from .charlm import bits_per_char
from .checkpoint import CheckpointError, Translator, load_charlm, load_translator
from .data import CopyLine, Pair, kept_verbatim, read_copy_test, read_pairs, token_batches
from .decode import DecodeSettings, beam_search_batch, greedy_batch, greedy_batch_stopped
from .hub import MODEL_HELP, add_model_options, model_options
from .model import sequence_loss
from .text import MAX_NO_REPEAT, InputError, check_range
from .tokenizer import BOS

LENGTH_BINS = [(lo, lo + 9) for lo in range(1, 61, 10)]


def bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    return float(sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score) if hyps else 0.0


def bleu_breakdown(hypothesis: str, reference: str) -> dict:
    """Sentence BLEU with its parts, from sacrebleu's own statistics (13a tokenisation):

        p_n     = clipped matching n-grams / n-grams of the hypothesis
        BP      = min(1, exp(1 - r / c))            r, c: reference and hypothesis lengths
        BLEU-N  = BP * (p_1 * ... * p_N)^(1/N)

    `bleu4` is the usual BLEU (with sacrebleu's exponential smoothing when a p_n is 0),
    `bleu2` stops at bigrams. Scores are on sacrebleu's 0-100 scale.
    """
    from sacrebleu.metrics import BLEU
    b4 = BLEU(max_ngram_order=4, effective_order=True).sentence_score(hypothesis, [reference])
    b2 = BLEU(max_ngram_order=2, effective_order=True).sentence_score(hypothesis, [reference])
    return {"matches": list(b4.counts), "totals": list(b4.totals),
            "precisions": [m / t if t else None for m, t in zip(b4.counts, b4.totals)],
            "bp": b4.bp, "hyp_len": b4.sys_len, "ref_len": b4.ref_len, "bleu4": b4.score, "bleu2": b2.score,
            "chrf": float(sacrebleu.sentence_chrf(hypothesis, [reference]).score)}


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> float:
    return float(sacrebleu.corpus_chrf(list(hyps), [list(refs)]).score) if hyps else 0.0


def translate_all(tr: Translator, sources: Sequence[str], beam: int = 1,
                  progress: Callable[[int, int], None] | None = None, no_repeat: int = 0) -> list[str]:
    """Greedy (beam 1) or beam-search translations of `sources`, both batched (the beam
    search is `beam_search(tr, s, beam, n_best=1)` for each source, a batch at a time),
    blocking repeated n-grams of size `no_repeat` if it is > 0."""
    if beam <= 1:
        out = greedy_batch(tr, sources, DecodeSettings(no_repeat=no_repeat))
        if progress:
            progress(len(sources), len(sources))
        return out
    return [d.translation for d in beam_search_batch(tr, sources, DecodeSettings("beam", beam, no_repeat=no_repeat),
                                                     progress=progress)]


def by_length(sources: Sequence[str], hyps: Sequence[str], refs: Sequence[str]) -> list[dict]:
    rows = []
    for lo, hi in LENGTH_BINS:
        idx = [i for i, s in enumerate(sources) if lo <= len(s.split()) <= hi]
        rows.append({"min_words": lo, "max_words": hi, "n": len(idx),
                     "bleu": round(bleu([hyps[i] for i in idx], [refs[i] for i in idx]), 2) if idx else None})
    return rows


@torch.inference_mode()
def perplexity(tr: Translator, pairs: Sequence[Pair], max_tokens: int = 4000) -> float:
    """exp( -1/N sum_j log p(y_j | y_<j, x) ) over the target tokens (teacher forcing)."""
    model, tok = tr.model, tr.tokenizer
    if hasattr(model, "hf"):             # a Hugging Face model scores with its own special tokens
        return _hub_perplexity(tr, pairs)
    examples = [(tok.encode(s), tok.encode(t)) for s, t in pairs]
    nll, n = 0.0, 0
    for batch in token_batches(examples, max_tokens, BOS, seed=0, shuffle=False):
        batch = batch.to(tr.device)
        logits, _ = model(batch.src, batch.src_len, batch.tgt_in)
        nll += float(sequence_loss(logits.float(), batch.tgt_out))
        n += batch.n_tokens
    return math.exp(nll / max(n, 1))


def _hub_perplexity(tr: Translator, pairs: Sequence[Pair], batch_size: int = 16) -> float:
    """perplexity() for a hub model: its own source and target ids (task prefix, language
    codes, </s>), its own loss (labels padded with -100, which it ignores), summed over tokens."""
    tok, hf = tr.tokenizer, tr.model.hf
    nll, n = 0.0, 0
    for b in range(0, len(pairs), batch_size):
        chunk = pairs[b:b + batch_size]
        src = [tok.source_ids(s) for s, _ in chunk]
        tgt = [tok.target_ids(t) for _, t in chunk]
        S, T = max(map(len, src)), max(map(len, tgt))
        ids = torch.full((len(chunk), S), tok.pad_id, dtype=torch.long)
        mask = torch.zeros(len(chunk), S, dtype=torch.long)
        labels = torch.full((len(chunk), T), -100, dtype=torch.long)
        for r, (x, y) in enumerate(zip(src, tgt)):
            ids[r, :len(x)], mask[r, :len(x)], labels[r, :len(y)] = torch.tensor(x), 1, torch.tensor(y)
        logits = hf(input_ids=ids.to(tr.device), attention_mask=mask.to(tr.device), labels=labels.to(tr.device)).logits
        logp = torch.log_softmax(tr.model.pieces_only(logits).float(), -1)    # over its pieces, as forced decoding
        keep = labels.to(tr.device) != -100
        nll -= float(logp.gather(-1, labels.clamp_min(0).to(tr.device)[..., None])[..., 0][keep].sum())
        n += int(keep.sum())
    return math.exp(nll / max(n, 1))


def evaluate_pairs(tr: Translator, pairs: Sequence[Pair], beam: int = 1,
                   progress: Callable[[int, int], None] | None = None, no_repeat: int = 0) -> dict:
    sources, refs = [p[0] for p in pairs], [p[1] for p in pairs]
    hyps = translate_all(tr, sources, beam, progress, no_repeat)
    out = {"bleu": round(bleu(hyps, refs), 2), "chrf": round(chrf(hyps, refs), 2), "n": len(pairs),
           "beam": beam, "by_length": by_length(sources, hyps, refs)}
    if no_repeat:
        out["no_repeat"] = no_repeat
    return out


def copy_scores(tr: Translator, lines: Sequence[CopyLine], beam: int = 1) -> dict:
    """The share of names and of numbers each translation keeps verbatim (as whole words).

    names_kept = kept name tokens / name tokens over the `name` lines, likewise numbers_kept;
    n is the number of lines, names and numbers the number of tokens checked.
    """
    hyps = translate_all(tr, [en for _, en, _, _ in lines], beam)
    kept = {"name": [0, 0], "number": [0, 0]}
    for (kind, _, _, keep), hyp in zip(lines, hyps):
        kept[kind][0] += sum(kept_verbatim(t, hyp) for t in keep)
        kept[kind][1] += len(keep)
    share = lambda k: round(kept[k][0] / kept[k][1], 4) if kept[k][1] else None   # noqa: E731
    return {"names_kept": share("name"), "numbers_kept": share("number"), "n": len(lines),
            "names": kept["name"][1], "numbers": kept["number"][1], "beam": beam}


def loop_rate(tr: Translator, sources: Sequence[str], beam: int = 1, no_repeat: int = 0) -> dict:
    """How often decoding never ends: the share of `sources` whose translation runs to the
    length limit (2 x source pieces + 10) without producing </s>, which on these inputs
    means the decoder repeats itself. Greedy, or beam search of width `beam` (its best
    hypothesis by log p / lp(|y|): a beam ends early when `beam` hypotheses have finished);
    with `no_repeat` > 0, blocking repeated n-grams of that size."""
    if beam == 1:
        stopped = greedy_batch_stopped(tr, sources, DecodeSettings(no_repeat=no_repeat))[1]
    else:
        stopped = [d.target_tokens[-1:] == ["</s>"]
                   for d in beam_search_batch(tr, sources, DecodeSettings("beam", beam, no_repeat=no_repeat))]
    loops = sum(not s for s in stopped)
    out = {"loops": loops, "n": len(sources), "share": round(loops / len(sources), 4) if sources else None,
           "beam": beam}
    if no_repeat:
        out["no_repeat"] = no_repeat
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help=MODEL_HELP)
    add_model_options(p)
    p.add_argument("--test", help="TSV of source<TAB>reference pairs")
    p.add_argument("--text-file", help="plain text, for character-level models (bits per character)")
    p.add_argument("--copy-test",
                   help="kind<TAB>english<TAB>french<TAB>tokens TSV: the share of names and numbers kept")
    p.add_argument("--loops", action="store_true",
                   help="with --test: the share of 20-60-word sources whose decoding (greedy, or --beam N) runs to the "
                        "length limit")
    p.add_argument("--beam", type=int, default=1, help="beam width (1 = greedy, batched)")
    p.add_argument("--no-repeat", type=int, default=0, metavar="N",
                   help="block any n-gram of N tokens from occurring twice in a translation (0 = off)")
    p.add_argument("--limit", type=int, default=0,
                   help="only the first N pairs, or characters with --text-file (0 = all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    try:
        if a.text_file:
            return _evaluate_text(a)
        if a.copy_test:
            return _evaluate_copy(a)
        if not a.test:
            raise InputError("--test FILE.tsv (or --copy-test FILE.tsv) is required for a translation model")
        check_range("--beam", a.beam, 1, 16)
        check_range("--no-repeat", a.no_repeat, 0, MAX_NO_REPEAT)
        tr = load_translator(a.model, **model_options(a))
        pairs = _read_rows(a.test, read_pairs, a.limit, "source<TAB>reference")
        result = evaluate_pairs(tr, pairs, a.beam, no_repeat=a.no_repeat)
        result["perplexity"] = round(perplexity(tr, pairs), 3)
        if a.loops:
            result["loops"] = loop_rate(tr, [s for s, _ in pairs if 20 <= len(s.split()) <= 60], a.beam,
                                        a.no_repeat)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(result))
    else:
        print(f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  perplexity {result['perplexity']:.2f}  "
              f"n {result['n']}  beam {a.beam}")
        for r in result["by_length"]:
            if r["n"]:
                print(f"  {r['min_words']:>2}-{r['max_words']:<2} words  n {r['n']:>5}  BLEU {r['bleu']:.2f}")
        if "loops" in result:
            lp = result["loops"]
            how = "greedy decodings" if a.beam == 1 else f"beam-{a.beam} decodings"
            print(f"{how} of 20-60-word sources that run to the length limit: {lp['loops']} of {lp['n']}")
    return 0


def _read_rows(path: str, reader: Callable, limit: int, form: str) -> list:
    """`reader(path)`, its first `limit` rows (all if 0); InputError if unreadable or empty."""
    try:
        rows = reader(path)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(str(e)) from None
    rows = rows[:limit] if limit else rows
    if not rows:
        raise InputError(f"{path} holds no {form} lines")
    return rows


def _evaluate_copy(a) -> int:
    """The held-out copy test of a translation model."""
    check_range("--beam", a.beam, 1, 16)
    tr = load_translator(a.model, **model_options(a))
    lines = _read_rows(a.copy_test, read_copy_test, a.limit, "kind<TAB>english<TAB>french<TAB>tokens")
    result = dict(copy_scores(tr, lines, a.beam), model=tr.name)
    if a.json:
        print(json.dumps(result))
    else:
        pct = lambda x: "–" if x is None else f"{100 * x:.1f}%"   # noqa: E731
        print(f"names kept {pct(result['names_kept'])} of {result['names']}  "
              f"numbers kept {pct(result['numbers_kept'])} of {result['numbers']}  "
              f"({result['n']} lines, beam {a.beam})")
    return 0


def _evaluate_text(a) -> int:
    """Bits per character of a character-level model on a text file."""
    lm = load_charlm(a.model)
    try:
        text = Path(a.text_file).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError(f"cannot read {a.text_file}: {e.strerror}") from None
    if a.limit:
        text = text[:a.limit]
    if len(text) < 2:
        raise InputError(f"{a.text_file} needs at least 2 characters")
    result = {"bits_per_char": round(bits_per_char(lm.model, text), 4), "chars": len(text), "model": lm.name}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"bits per character {result['bits_per_char']:.4f}  ({result['chars']:,} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
