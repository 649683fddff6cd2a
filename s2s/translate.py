"""Translate one text from the command line.

    python -m s2s.translate --model checkpoints/en-fr-additive "I went to the lecture."
    python -m s2s.translate --model DIR --beam 5 --json -- "Where is the station?"
    python -m s2s.translate --model DIR --sample --temperature 0.8 --top-k 20 --seed 3 -- "Hello."
    python -m s2s.translate --model DIR --reference "Je suis allé au cours." -- "I went to the lecture."

--json prints one object: translation, source_tokens, target_tokens, attention
(len(target_tokens) rows of len(source_tokens) weights, null without attention), log_prob.
Bad input gives a message on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import sys

from .checkpoint import CheckpointError, load_translator
from .decode import translate
from .text import InputError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.translate", description="Translate English to French with a checkpoint.",
                                epilog="Text may also come on standard input.")
    p.add_argument("--model", required=True, help="checkpoint folder, e.g. checkpoints/en-fr-additive")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--beam", type=int, metavar="N", help="beam search of width N (1-16)")
    mode.add_argument("--sample", action="store_true", help="ancestral sampling")
    mode.add_argument("--reference", metavar="TEXT", help="forced decoding of this reference translation")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0.05-5)")
    p.add_argument("--top-k", type=int, default=0, help="sample from the k most likely tokens (0 = all)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--max-len", type=int, help="most target pieces to generate (1-250)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("text", nargs="*", help="the English text (after --, if it starts with a dash)")
    a = p.parse_args(argv)
    if a.text:
        text = " ".join(a.text)
    elif not sys.stdin.isatty():
        text = sys.stdin.read()
    else:
        text = ""
    try:
        tr = load_translator(a.model)
        if a.reference is not None:
            d = translate(tr, text, "forced", reference=a.reference)
        elif a.sample:
            d = translate(tr, text, "sample", temperature=a.temperature, top_k=a.top_k, seed=a.seed, max_len=a.max_len)
        elif a.beam is not None:
            d = translate(tr, text, "beam", width=a.beam, n_best=1, max_len=a.max_len)
        else:
            d = translate(tr, text, "greedy", max_len=a.max_len)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(d.to_json(), ensure_ascii=False) if a.json else d.translation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
