"""Input checks shared by the CLIs and the app: what text a model will accept.

Users paste anything. Control characters (NUL, escape codes) and invisible bidi
controls are removed, text is NFC-normalised, and anything empty or too long is
refused with a message a person can act on (InputError), never a traceback. On the
command line that message is one line on stderr starting with "error:" and exit status 2,
and so is a bad option (OneLineErrorParser).
"""
from __future__ import annotations

import argparse
import re
import sys
import unicodedata
from typing import NoReturn

MAX_CHARS = 1000          # a paragraph; the models were trained on inputs up to ~60 words
MAX_SOURCE_TOKENS = 200   # subword pieces after tokenization
MAX_DECODE_LEN = 250      # hard cap on generated pieces
MAX_PASSAGE_CHARS = 5000  # characters traced by a character-level model at once
MAX_SAMPLE_CHARS = 2000   # characters sampled from a character-level model
MAX_BEAM = 16
MAX_TOP_K = 1000
MAX_NO_REPEAT = 10      # longest n-gram whose repeats decoding can block
MAX_CORPUS_BYTES = 200_000   # a corpus uploaded to the app (pairs, or their gold links)
MAX_CORPUS_PAIRS = 500       # pairs of an uploaded corpus: ~10 s on 2 CPU cores
TEMPERATURE_RANGE = (0.05, 5.0)


class InputError(ValueError):
    """The user's input cannot be used; the message says why and what to do."""


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse whose own errors (an unknown option, a bad choice) look like every other
    bad input: one line on stderr, "error: ...", and exit status 2, not a usage block."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def text_argument(words: list[str] | None) -> str:
    """A command's English text: its words joined, else standard input when it is not a
    terminal (piped text), else empty (which clean_text then refuses in one line)."""
    return " ".join(words) if words else ("" if sys.stdin.isatty() else sys.stdin.read())


def clean_text(text: str, max_chars: int = MAX_CHARS, what: str = "text") -> str:
    """NFC-normalise, drop control and format (bidi) characters, collapse white space."""
    if not isinstance(text, str):
        raise InputError(f"The {what} must be a string.")
    if len(text) > 20 * max_chars:   # don't even normalise a whole book
        raise InputError(f"The {what} is {len(text):,} characters long; the limit is {max_chars:,}. "
                         "Try one or a few sentences.")
    text = unicodedata.normalize("NFC", text)
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "\t\n\r" or cat == "Zs":
            kept.append(" ")
        elif cat in ("Cc", "Cf", "Cs", "Co", "Cn"):
            continue     # NUL, escapes, zero-width and bidi controls, surrogates, unassigned
        else:
            kept.append(ch)
    text = " ".join("".join(kept).split())
    if not text:
        raise InputError(f"The {what} is empty: type a sentence.")
    if len(text) > max_chars:
        raise InputError(f"The {what} is {len(text):,} characters long; the limit is {max_chars:,}. "
                         "Try one or a few sentences.")
    return text


def clean_passage(text: str, max_chars: int = MAX_PASSAGE_CHARS, what: str = "text") -> str:
    """Like clean_text, but keep the layout a character model reads: new lines and tabs
    stay (indentation is a feature), Windows line ends become \\n; other control and
    bidi characters are removed."""
    if not isinstance(text, str):
        raise InputError(f"The {what} must be a string.")
    if len(text) > 4 * max_chars:
        raise InputError(f"The {what} is {len(text):,} characters long; the limit is {max_chars:,}. "
                         "Paste a shorter passage.")
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = "".join(ch for ch in text if ch in "\t\n" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn"))
    if not text.strip():
        raise InputError(f"The {what} is empty: paste a passage or pick an example.")
    if len(text) > max_chars:
        raise InputError(f"The {what} is {len(text):,} characters long; the limit is {max_chars:,}. "
                         "Paste a shorter passage.")
    return text


# A sentence ends at . ! ? or … (and any closing quotes or brackets after it) before a space:
# "Mr. Smith" splits wrongly, which costs a sentence-by-sentence translation one odd seam, no more.
SENTENCE_END = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"'”’)\]]))\s+")


def split_sentences(text: str) -> list[str]:
    """`text`'s sentences, in order, each stripped (none empty). The models were trained on
    Tatoeba's one or two sentences a pair: a paragraph is better translated one at a time."""
    return [s.strip() for s in SENTENCE_END.split(text) if s.strip()]


def read_text_file(path: str) -> str:
    """A CLI's text file ('-' for standard input), undecodable bytes replaced; a file that
    cannot be read is an InputError naming it."""
    from pathlib import Path
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None


def check_range(name: str, value, lo, hi):
    """Return `value` if lo <= value <= hi, else raise InputError naming the setting."""
    if value is None or not (lo <= value <= hi):
        raise InputError(f"{name} must be between {lo} and {hi} (got {value}).")
    return value
