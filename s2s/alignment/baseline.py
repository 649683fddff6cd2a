"""A statistical aligner as the baseline (eflomal), and the AER table of every attention model beside it."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ..checkpoint import Translator
from ..text import InputError
from .gold import GoldPair, Link
from .rules import DEFAULT_RULE, links, symmetrize
from .scores import best_head, head_scores, score
from .words import word_attention

# ---------------------------------------------------------------------------------------
# A statistical aligner as the baseline: eflomal (Östling & Tiedemann 2017), as documented:
# align the corpus in both directions, then symmetrise (grow-diag-final-and)

# The gold's tokenisation: lower case, punctuation apart, French contractions and elisions
# written out ("des" -> "de les", "l'homme" -> "le homme"), English "'s" apart.
_CONTRACTIONS = {"du": "de le", "des": "de les", "au": "à le", "aux": "à les"}
_ELISIONS = {"l": "le", "d": "de", "j": "je", "m": "me", "t": "te", "s": "se", "n": "ne", "c": "ce", "qu": "que",
             "jusqu": "jusque", "lorsqu": "lorsque", "puisqu": "puisque", "quoiqu": "quoique"}
_TOKEN = re.compile(r"\w+(?:'\w+)*|[^\w\s]", re.UNICODE)


def gold_tokens(text: str, language: str) -> list[str]:
    """Text written as the Hansards gold writes it ("Je n'aime pas l'été." ->
    "je ne aime pas le été ."), so that a statistical aligner trained on Tatoeba sees the
    gold's words."""
    out = []
    for tok in _TOKEN.findall(text.lower().replace("’", "'")):
        if language == "fr":
            head, sep, rest = tok.partition("'")
            if sep and head in _ELISIONS and rest:
                out += [_ELISIONS[head]] + gold_tokens(rest, language)
                continue
            if sep and rest:                      # "aujourd'hui" -> "aujourd'" "hui", as the gold has it
                out += [head + "'"] + gold_tokens(rest, language)
                continue
            out += _CONTRACTIONS.get(tok, tok).split()
        else:
            head, sep, rest = tok.rpartition("'")
            out += [head, "'" + rest] if sep and rest == "s" and head else [tok]
    return out


def statistical_links(gold: Sequence[GoldPair], extra: Sequence[tuple[Sequence[str], Sequence[str]]],
                      how: str | Sequence[str] = "grow-diag-final-and") -> list[set[Link]] | dict[str, list[set[Link]]]:
    """eflomal's links for the gold pairs, aligned together with `extra` (English words,
    French words) pairs, as word aligners are used: unsupervised, on as much parallel text
    as there is. English is eflomal's source, French its target; the forward and reverse
    alignments are `symmetrize`d with `how` (with a list of ways: a dict, way -> links, from
    one alignment run). eflomal samples (Gibbs) with no seed to set: two runs differ a little."""
    try:
        from eflomal import Aligner
    except ImportError:
        raise InputError("the baseline needs eflomal (pip install eflomal==2.0.0, which compiles with a C "
                         "compiler)") from None
    import tempfile
    english = [" ".join(g.english) for g in gold] + [" ".join(e) for e, _ in extra]
    french = [" ".join(g.french) for g in gold] + [" ".join(f) for _, f in extra]
    with tempfile.TemporaryDirectory() as tmp:
        fwd, rev = Path(tmp) / "fwd", Path(tmp) / "rev"
        Aligner().align([l + "\n" for l in english], [l + "\n" for l in french],
                        links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True)
        pairs = [fwd.read_text().splitlines(), rev.read_text().splitlines()]

    def parse(line: str) -> set[Link]:     # "e-f e-f ..." (Pharaoh format, from 0)
        return {(int(e), int(f)) for e, f in (x.split("-") for x in line.split())}
    both = [(parse(a), parse(b)) for a, b in zip(pairs[0][:len(gold)], pairs[1][:len(gold)])]
    if isinstance(how, str):
        return [symmetrize(a, b, how) for a, b in both]
    return {h: [symmetrize(a, b, h) for a, b in both] for h in how}


def aer_table(gold: Sequence[GoldPair], models: Sequence[Translator],
              baseline_pairs: Sequence[tuple[str, str]] | None = None) -> list[dict]:
    """One row per (aligner, rule): every attention model read with argmax and with the
    default rule, and eflomal (if `baseline_pairs`, Tatoeba (English, French), are given)."""
    rows = []

    def row(name: str, kind: str, rule: str, predicted: list[set[Link]]) -> dict:
        s = score(predicted, gold)
        return {"model": name, "kind": kind, "rule": rule, "aer": round(s.aer, 4), "precision": round(s.precision, 4),
                "recall": round(s.recall, 4), "links": s.links}
    for tr in models:
        weights = [word_attention(tr, g.english, g.french) for g in gold]
        kind = (f"{tr.model.cfg.attention} attention" if getattr(tr.model.cfg, "arch", "rnn") == "rnn" else
                "Transformer: last layer's cross-attention, mean of the heads")
        for rule in ("argmax", DEFAULT_RULE):
            rows.append(row(tr.name, kind, rule, [links(w, rule) for w in weights]))
        if tr.arch == "transformer":      # every layer x head as an aligner, with the default rule
            table = head_scores([word_attention(tr, g.english, g.french, heads=True) for g in gold], gold)
            l, h = best_head(table)
            rows[-1]["heads_aer"] = [[round(s.aer, 4) for s in r] for r in table]
            rows[-1]["best_head"] = {"layer": l + 1, "head": h + 1, "aer": round(table[l][h].aer, 4)}
    if baseline_pairs is not None:
        extra = [(gold_tokens(e, "en"), gold_tokens(f, "fr")) for e, f in baseline_pairs]
        extra = [(e, f) for e, f in extra if e and f]
        ways = statistical_links(gold, extra, ("grow-diag", "grow-diag-final-and"))
        for how, predicted in ways.items():
            # eflomal learns from sentence pairs alone: the gold's sentences join its training text
            # (their links are never read), as an unsupervised aligner is used on a corpus
            rows.append(row("eflomal", f"statistical (IBM-style), trained on {len(extra):,} Tatoeba pairs and "
                                       f"these {len(gold)} pairs' sentences (not their links)", how, predicted))
    return rows
