"""One decoding's options (`DecodeSettings`), checked against the app's limits, and the
length penalty beam search divides by."""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Sequence

from ..hooks import HeadMask, format_head_mask, normal_head_mask, parse_head_mask
from ..loaded import Translator
from ..text import MAX_BEAM, MAX_DECODE_LEN, MAX_NO_REPEAT, MAX_TOP_K, TEMPERATURE_RANGE, InputError, check_range
from .processors import LogitsProcessor, NoRepeatNGram, Temperature, TopK, model_processors

LENGTH_PENALTY = 0.6     # the length penalty's exponent beam search uses unless told otherwise


def lp(length: int, exponent: float = LENGTH_PENALTY) -> float:
    """The length penalty lp(|y|) = ((5 + |y|) / 6)^exponent (Wu et al. 2016): beam search ranks
    finished hypotheses by log p(y) / lp(|y|), so that short ones do not win for being short."""
    return ((5 + length) / 6) ** exponent



METHOD_NAMES = ("greedy", "beam", "sample", "forced")


@dataclass(frozen=True)
class DecodeSettings:
    """One decoding's options: what `decode` runs, and the key a page caches its result by.

        method       greedy | beam | sample | forced
        width        beam search: hypotheses kept;  n_best: how many it returns (None: width)
        length_penalty   beam search: lp's exponent (transformers' name; 0: rank by log p alone)
        max_len      output pieces at most (None: 2 x source + 10)
        no_repeat    greedy and beam search: block repeated n-grams of this size (0: off)
        temperature, top_k, seed                    sampling
        target_prefix    every method: what the output must start with (steering), French text
                     (tokenised by the model's target tokenizer) or target piece ids; the
                     search continues from it (beam search: every hypothesis shares it). A
                     list of ids is kept as a tuple, so that settings stay a hashable cache key
        head_mask    every method: the heads knocked out (s2s.hooks: xi_h = 0 on the head's slice of
                     the attention output before W_O), as text ("cross:2.3,encoder:1.*", from 1)
                     or ((kind, layer, head or None), ...) 0-based; kept as the latter, sorted.
                     Empty: no head, exactly the plain decoding
    """
    method: str = "greedy"
    width: int = 5
    n_best: int | None = None
    length_penalty: float = LENGTH_PENALTY
    max_len: int | None = None
    no_repeat: int = 0
    temperature: float = 1.0
    top_k: int = 0
    seed: int = 0
    target_prefix: str | Sequence[int] | None = None
    head_mask: HeadMask | str = ()

    def __post_init__(self):
        mask = self.head_mask
        try:            # a malformed one is kept as it came, for checked() to refuse in one line
            mask = parse_head_mask(mask) if isinstance(mask, str) or mask is None else normal_head_mask(mask)
        except (InputError, TypeError, ValueError):
            pass
        object.__setattr__(self, "head_mask", mask)
        if self.target_prefix is not None and not isinstance(self.target_prefix, str):
            try:        # numpy's and torch's integers too; anything else is left for checked() to refuse
                prefix = tuple(operator.index(i) for i in self.target_prefix)
            except TypeError:
                prefix = tuple(self.target_prefix)
            object.__setattr__(self, "target_prefix", prefix)      # frozen, hashed: a list is no key

    def checked(self) -> "DecodeSettings":
        """Itself, if every option is in range; else InputError saying which is not."""
        if self.method not in METHOD_NAMES:
            raise InputError(f"Unknown decoding method {self.method!r}: use greedy, beam, sample or forced.")
        check_range("Beam width", self.width, 1, MAX_BEAM)
        if self.n_best is not None:
            check_range("N-best", self.n_best, 1, self.width)
        check_range("No-repeat n-gram size", self.no_repeat, 0, MAX_NO_REPEAT)
        check_range("Temperature", self.temperature, *TEMPERATURE_RANGE)
        check_range("Top-k", self.top_k, 0, MAX_TOP_K)
        if self.max_len is not None:
            check_range("Max length", self.max_len, 1, MAX_DECODE_LEN)
        prefix = self.target_prefix
        if prefix is not None and not isinstance(prefix, str):
            if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in prefix):
                raise InputError("A target prefix is French text or a list of target piece ids (whole numbers >= 0).")
            check_range("The target prefix's length in pieces", len(prefix), 0, MAX_DECODE_LEN)
        if isinstance(self.head_mask, str):
            parse_head_mask(self.head_mask)          # raises, saying what is wrong
        if not isinstance(self.head_mask, tuple):
            raise InputError("A head mask is text such as 'cross:2.3,encoder:1.*' or a list of (kind, layer, head).")
        return self

    @property
    def steered(self) -> bool:
        """Whether a non-empty target prefix is set (an empty or blank one steers nothing)."""
        p = self.target_prefix
        return bool(p.strip() if isinstance(p, str) else p)

    def canonical(self) -> "DecodeSettings":
        """The same decoding with the options its method does not read at their defaults (and
        n_best at most width), so that two settings which decode alike are equal: a page's
        cache key, never split by a slider the method ignores. The target prefix and the head
        mask are kept for every method (an empty prefix is None: it steers nothing)."""
        prefix = self.target_prefix if self.steered else None
        mask = self.head_mask
        if self.method == "beam":
            n_best = None if self.n_best is None else min(self.n_best, self.width)
            return DecodeSettings("beam", self.width, n_best, self.length_penalty, self.max_len, self.no_repeat,
                                  target_prefix=prefix, head_mask=mask)
        if self.method == "sample":
            return DecodeSettings("sample", max_len=self.max_len, temperature=self.temperature, top_k=self.top_k,
                                  seed=self.seed, target_prefix=prefix, head_mask=mask)
        if self.method == "forced":
            return DecodeSettings("forced", target_prefix=prefix, head_mask=mask)
        return DecodeSettings(self.method, max_len=self.max_len, no_repeat=self.no_repeat, target_prefix=prefix,
                              head_mask=mask)

    def command_options(self) -> str:
        """These settings as `python -m s2s.translate` takes them ("--beam 5 --max-len 120
        --mask-heads cross:1.2"), so that a page naming that command as its equal names the same
        length limit (one rule, s2s.decode.length_limit, fed the same max_len) and search. A
        target prefix is left out (the page writes its own)."""
        s = self.canonical()
        out = []
        if s.method == "beam":
            out += ["--beam", str(s.width)]
        elif s.method == "sample":
            out += ["--sample"] + (["--temperature", f"{s.temperature:g}"] if s.temperature != 1.0 else []) + (
                ["--top-k", str(s.top_k)] if s.top_k else []) + (["--seed", str(s.seed)] if s.seed else [])
        if s.max_len is not None and s.method != "forced":
            out += ["--max-len", str(s.max_len)]
        if s.no_repeat and s.method in ("greedy", "beam"):
            out += ["--no-repeat", str(s.no_repeat)]
        if s.head_mask:
            out += ["--mask-heads", format_head_mask(s.head_mask)]
        return " ".join(out)

    def processors(self, tr: Translator) -> list[LogitsProcessor]:
        """What rules the choice of each token: the model's own constraints, then the settings'."""
        if self.method == "forced":
            return []           # the reference is decoded whatever the model would choose
        out = model_processors(tr)
        if self.no_repeat and self.method != "sample":
            out.insert(0, NoRepeatNGram(self.no_repeat))
        if self.method == "sample":
            if self.temperature != 1.0:
                out.append(Temperature(self.temperature))
            if self.top_k > 0:
                out.append(TopK(self.top_k))
        return out


