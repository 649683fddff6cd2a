"""Translate one text, or a file of sentences, from the command line.

    python -m s2s.translate --model checkpoints/en-fr-additive "I went to the lecture."
    python -m s2s.translate --model DIR --beam 5 --json -- "Where is the station?"
    python -m s2s.translate --model DIR --sample --temperature 0.8 --top-k 20 --seed 3 -- "Hello."
    python -m s2s.translate --model DIR --reference "Je suis allé au cours." -- "I went to the lecture."
    python -m s2s.translate --model DIR --target-prefix "Je suis venu" -- "I went to the lecture."
    python -m s2s.translate --model DIR --mask-heads cross:3.1,encoder:1.* -- "I went to the lecture."

--json prints one object: translation, source_tokens, target_tokens, attention
(len(target_tokens) rows of len(source_tokens) weights, null without attention), log_prob,
token_log_probs, cut (true where the output ran to the length limit: s2s.decode.length_limit,
the same rule as the page's; without --json a note on stderr says so); with --target-prefix
also prefix_length, the prefix's length in target pieces (the translation, its tokens and
log-probs include the prefix's); with --mask-heads also head_mask, the heads knocked out as
the command line writes them. Bad input gives a message on stderr and exit status 2.

--mask-heads KIND:LAYER.HEAD[,...] knocks heads out for any decoding (greedy, --beam, --sample,
--reference, --target-prefix, --input): head h's slice of the attention output is multiplied by
0 before the output projection (Michel et al. 2019; s2s/hooks.py). KIND is cross, encoder or
decoder, LAYER and HEAD count from 1 as `python -m s2s.heads` does, KIND:LAYER.* is a whole
layer. A recurrent model has one attention and no heads: its knockout is the counterfactual
attention (python -m s2s.explain).

A file, one sentence per line:

    python -m s2s.translate --model DIR --input FILE [--output FILE] [--beam N] [--json] [--batch-size B]

writes one line per input line, so output line n is the translation of input line n
(`--input -` reads standard input; without --output the lines go to standard output).
Lines are decoded in batches (sorted by length, `decode.beam_search_batch`): greedy without
--beam (a beam of width 1 is greedy), else beam search of width N; the result is the same
as translating each line on its own. A progress bar goes to stderr when it is a terminal.
  - an empty (or blank) line gives an empty line; with --json an object with translation
    "" and empty token lists (attention null, log_prob 0);
  - a line that cannot be translated (too long, only control characters) gives a message
    on stderr naming its line number, and an empty line in its place (with --json the same
    object as for an empty line, plus "error": the message); the other lines are translated
    and the exit status stays 0.
Exit status 2 means nothing was translated: a missing or unreadable input file, an output
file that cannot be written, a missing or broken checkpoint, an out-of-range setting, or
--input combined with a text, --sample, --reference or --target-prefix (those translate one text).
"""
from __future__ import annotations

import argparse
import json
import sys

from .checkpoint import CheckpointError, load_translator
from .decode import DecodeSettings, beam_search_batch, decode, encode_source
from .hooks import format_head_mask, resolve_head_mask
from .hub import MODEL_HELP, add_model_options, model_options
from .text import MAX_BEAM, MAX_DECODE_LEN, MAX_NO_REPEAT, InputError, check_range, read_text_file

CHUNK_LINES = 1000     # lines sorted and decoded together before they are written out
MAX_BATCH = 512


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.translate",
                                description="Translate English to French with a checkpoint.",
                                epilog="Text may also come on standard input.")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    add_model_options(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--beam", type=int, metavar="N", help="beam search of width N (1-16)")
    mode.add_argument("--sample", action="store_true", help="ancestral sampling")
    mode.add_argument("--reference", metavar="TEXT", help="forced decoding of this reference translation")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0.05-5)")
    p.add_argument("--top-k", type=int, default=0, help="sample from the k most likely tokens (0 = all)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--max-len", type=int, help="most target pieces to generate (1-250)")
    p.add_argument("--no-repeat", type=int, default=0, metavar="N",
                   help="greedy and beam search: block any N-gram from occurring twice in a translation (0 = off)")
    p.add_argument("--target-prefix", metavar="FRENCH",
                   help="steer: the translation starts with this French text and the decoding (greedy, --beam or "
                        "--sample) continues from it")
    p.add_argument("--mask-heads", metavar="KIND:LAYER.HEAD", default="",
                   help="knock these heads out (comma-separated; KIND cross, encoder or decoder; layer and head "
                        "from 1; KIND:LAYER.* a whole layer): each head's output is multiplied by 0 before W_O")
    p.add_argument("--json", action="store_true", help="print one JSON object (one per line with --input)")
    p.add_argument("--input", metavar="FILE", help="translate every line of FILE ('-': standard input), batched")
    p.add_argument("--output", metavar="FILE", help="with --input: write the translations here (default: stdout)")
    p.add_argument("--batch-size", type=int, default=32, metavar="B",
                   help=f"with --input: sentences decoded together (1-{MAX_BATCH})")
    p.add_argument("text", nargs="*", help="the English text (after --, if it starts with a dash)")
    a = p.parse_args(argv)
    if a.input is not None:
        return translate_file(a)
    if a.text:
        text = " ".join(a.text)
    elif not sys.stdin.isatty():
        text = sys.stdin.read()
    else:
        text = ""
    try:
        tr = load_translator(a.model, **model_options(a))
        prefix, mask = a.target_prefix, a.mask_heads
        if a.reference is not None:
            settings = DecodeSettings("forced", target_prefix=prefix, head_mask=mask)
        elif a.sample:
            settings = DecodeSettings("sample", temperature=a.temperature, top_k=a.top_k, seed=a.seed,
                                      max_len=a.max_len, target_prefix=prefix, head_mask=mask)
        elif a.beam is not None:
            settings = DecodeSettings("beam", width=a.beam, n_best=1, max_len=a.max_len, no_repeat=a.no_repeat,
                                      target_prefix=prefix, head_mask=mask)
        else:
            settings = DecodeSettings("greedy", max_len=a.max_len, no_repeat=a.no_repeat, target_prefix=prefix,
                                      head_mask=mask)
        d = decode(tr, text, settings, reference=a.reference)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if d.prefix_unknown:      # as the app's note on typed text: <unk> would look like characters dropped
        n = len(d.prefix_unknown)
        print(f"note: {n} character{'s' if n > 1 else ''} of the target prefix {'are' if n > 1 else 'is'} not in "
              f"this model's vocabulary and read as <unk>: {' '.join(d.prefix_unknown[:20])}", file=sys.stderr)
    if d.cut and not a.json:     # the JSON says "cut": true; plain text would look finished
        print(f"note: the translation was cut at the length limit ({len(d.target_tokens)} pieces, without </s>"
              " from the model); --max-len sets the limit", file=sys.stderr)
    if a.json:
        out = d.to_json()
        if prefix is not None:
            out["prefix_length"] = d.prefix_length      # 0 for an empty prefix, which steers nothing
        if settings.head_mask:
            out["head_mask"] = format_head_mask(settings.head_mask)
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(d.translation)
    return 0


def empty_json(error: str | None = None) -> dict:
    """What --json writes for an empty line (and, with `error`, for a line it could not translate)."""
    out = {"translation": "", "source_tokens": [], "target_tokens": [], "attention": None,
           "log_prob": 0.0, "token_log_probs": [], "cut": False}
    return out if error is None else dict(out, error=error)


def input_lines(text: str) -> list[str]:
    """Lines as `wc -l` and editors count them: split on \\n only (not on the other
    characters str.splitlines breaks at), a final newline ending the last line."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def translate_file(a) -> int:
    """--input: every line of a file, in batches, one output line per input line."""
    from tqdm import tqdm
    try:
        if a.text:
            raise InputError("give either --input FILE or a text to translate, not both")
        if a.sample or a.reference is not None or a.target_prefix is not None:
            raise InputError("--input translates greedily or with --beam N; --sample, --reference and "
                             "--target-prefix take one text")
        width = 1 if a.beam is None else check_range("Beam width", a.beam, 1, MAX_BEAM)
        if a.max_len is not None:
            check_range("Max length", a.max_len, 1, MAX_DECODE_LEN)
        check_range("--batch-size", a.batch_size, 1, MAX_BATCH)
        check_range("--no-repeat", a.no_repeat, 0, MAX_NO_REPEAT)
        mask = DecodeSettings(head_mask=a.mask_heads).checked().head_mask
        tr = load_translator(a.model, **model_options(a))
        resolve_head_mask(tr.model, mask)       # a head the model lacks: said before any line is read
        lines = input_lines(read_text_file(a.input))
        try:
            out = sys.stdout if a.output is None else open(a.output, "w", encoding="utf-8", newline="\n")
        except OSError as e:
            raise InputError(f"cannot write {a.output}: {e.strerror}") from None
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    bar = tqdm(total=len(lines), unit="line", file=sys.stderr, disable=None)   # None: off unless a terminal
    try:
        for c0 in range(0, len(lines), CHUNK_LINES):
            chunk = lines[c0:c0 + CHUNK_LINES]
            results: list = [empty_json() if a.json else ""] * len(chunk)
            good = []
            for i, line in enumerate(chunk):
                if not line.strip():
                    continue
                try:
                    encode_source(tr, line)        # the checks beam_search_batch would stop the batch with
                    good.append(i)
                except InputError as e:
                    bar.write(f"line {c0 + i + 1}: {e} (an empty line is written in its place)", file=sys.stderr)
                    if a.json:
                        results[i] = empty_json(str(e))
            bar.update(len(chunk) - len(good))
            done = [0]

            def progress(n: int, total: int) -> None:
                bar.update(n - done[0])
                done[0] = n

            decodings = beam_search_batch(tr, [chunk[i] for i in good],
                                          DecodeSettings("beam", width, max_len=a.max_len, no_repeat=a.no_repeat,
                                                         head_mask=mask),
                                          batch_size=a.batch_size, attention=a.json, progress=progress)
            for i, d in zip(good, decodings):
                results[i] = d.to_json() if a.json else d.translation
            # a translation never spans lines (the tokenizer has no newline piece), but make sure
            out.write("".join((json.dumps(r, ensure_ascii=False) if a.json else r.replace("\n", " ")) + "\n"
                              for r in results))
            out.flush()
    finally:
        bar.close()
        if out is not sys.stdout:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
