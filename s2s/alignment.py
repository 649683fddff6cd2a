"""Is attention an alignment? Attention under forced decoding, read as word links and scored
against human word alignments with the alignment error rate (Och & Ney 2003).

    python -m s2s.alignment --model checkpoints/en-fr-additive --gold ../shared/data/hansards-en-fr-align --json
    python -m s2s.alignment --model DIR --gold examples/hansards_trial --split trial --rule argmax
    python -m s2s.alignment --model DIR --gold DIR --split trial --sweep     # how the default rule was chosen
    python -m s2s.alignment --model hf:Helsinki-NLP/opus-mt-en-fr --gold DIR --heads   # every layer x head
    python -m s2s.alignment --gold DIR --table results/alignment.json --baseline-data data/tatoeba/train.tsv
                            # every attention model and the eflomal baseline: docs/attention.md's table
    python -m s2s.alignment --model DIR --input PAIRS.tsv --output LINKS.txt [--gold G]
                            # a whole corpus, Pharaoh links (s2s.corpus_alignment; torchrun splits it)

The gold standard (HLT-NAACL 2003, Canadian Hansards) marks each link Sure (S: every
annotator agrees) or Possible (P: some annotators, or an ambiguous case); S links count
as P too (P ⊇ S). For predicted links A, summed over the whole corpus:

    precision = |A ∩ P| / |A|          a link is right if it is at least possible
    recall    = |A ∩ S| / |S|          a sure link must be found
    AER       = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)     0 is perfect

The words are the gold's whitespace tokens, not the model's pieces: each sentencepiece
piece is given to the token its characters come from (sentencepiece reports where in the
text each piece starts), and a (French pieces x English pieces) attention matrix becomes a
(French words x English words) one as in s2s.align: an English word weighs the SUM of its
pieces' columns (mass is preserved; </s> is left out), a French word's row is the MEAN of
its pieces' rows. Rules then turn the weights into links.

--json prints aer, precision, recall, sentences, rule, params, model (the checkpoint's
name), split, links (|A|), sure (|S|) and seconds (the forced decodings). --heads (a
Transformer, ours or a Hugging Face model) scores every layer x head as an aligner instead:
heads_aer [layer][head], best_head, and the last layer's head mean. Bad input (missing
files, mismatched line counts, a link out of range, a model without attention) gives one
line on stderr starting with "error:" and exit status 2.
"""
from __future__ import annotations

import argparse
import bisect
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .checkpoint import CheckpointError, Translator, load_translator
from .contributions import ALIGN_METHODS
from .decode import forced
from .hub import MODEL_HELP, add_model_options, model_options
from .text import InputError, OneLineErrorParser, clean_text
from .tokenizer import Tokenizer

Link = tuple[int, int]    # (English word, French word), both counted from 0 (the .wa files count from 1)
SPLITS = ("test", "trial")


# ---------------------------------------------------------------------------------------
# The gold standard


class GoldError(ValueError):
    """The gold alignment files are missing or inconsistent (the message names file and line)."""


@dataclass(frozen=True)
class GoldPair:
    english: tuple[str, ...]
    french: tuple[str, ...]
    sure: frozenset[Link]
    possible: frozenset[Link]    # includes every sure link: P ⊇ S


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GoldError(f"{path} is missing") from None
    except OSError as e:
        raise GoldError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise GoldError(f"{path.name} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":           # the newline that ends the last line
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def read_gold(folder: str | Path, split: str = "test") -> list[GoldPair]:
    """Read {split}.en, {split}.fr (one tokenised sentence a line) and {split}.wa (lines
    `sentence english_position french_position S|P`, positions from 1; NULL links absent).
    Raises GoldError, naming file and line, for anything that does not fit together."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GoldError(f"gold folder {folder} does not exist")
    names = {side: f"{split}.{side}" for side in ("en", "fr", "wa")}
    if not (folder / names["en"]).exists():      # say which split the folder does hold
        held = [s for s in SPLITS if s != split and (folder / f"{s}.en").exists()]
        if held:
            raise GoldError(f"{folder} has no {names['en']} but has {held[0]}.en: give --split {held[0]}")
    en, fr, wa = (_read_lines(folder / names[side]) for side in ("en", "fr", "wa"))
    if len(en) != len(fr):
        raise GoldError(f"{names['en']} has {len(en)} lines but {names['fr']} has {len(fr)}")
    words = {}
    for side, lines in (("en", en), ("fr", fr)):
        words[side] = [tuple(line.split()) for line in lines]
        for n, w in enumerate(words[side], 1):
            if not w:
                raise GoldError(f"{names[side]} line {n} is empty")
    sure: list[set[Link]] = [set() for _ in en]
    possible: list[set[Link]] = [set() for _ in en]
    for n, line in enumerate(wa, 1):
        where = f"{names['wa']} line {n}"
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4 or fields[3] not in ("S", "P") or not all(f.isascii() and f.isdigit() for f in fields[:3]):
            raise GoldError(f"{where}: expected `sentence english_position french_position S|P`, got {line!r}")
        s, e, f = (int(x) for x in fields[:3])
        if not 1 <= s <= len(en):
            raise GoldError(f"{where}: sentence {s} is out of range (there are {len(en)} sentence pairs)")
        n_en, n_fr = len(words["en"][s - 1]), len(words["fr"][s - 1])
        if not 1 <= e <= n_en:
            raise GoldError(f"{where}: English position {e} is out of range (sentence {s} has {n_en} English words)")
        if not 1 <= f <= n_fr:
            raise GoldError(f"{where}: French position {f} is out of range (sentence {s} has {n_fr} French words)")
        possible[s - 1].add((e - 1, f - 1))
        if fields[3] == "S":
            sure[s - 1].add((e - 1, f - 1))
    return [GoldPair(e, f, frozenset(s), frozenset(p))
            for e, f, s, p in zip(words["en"], words["fr"], sure, possible)]


# ---------------------------------------------------------------------------------------
# Pieces -> the gold's words


def word_pieces(tokenizer: Tokenizer, words: Sequence[str], target: bool = False) -> tuple[list[int], list[int]]:
    """Encode `words` joined by spaces, as the model reads them: the piece ids, and for each
    piece the index of the word it belongs to.

    Sentencepiece reports the byte offset where each piece begins in the text, so the
    mapping is exact whatever the pieces look like: "l'" is "▁l" "'", "peut-être" is
    "▁peut" "-" "être", an unknown "$" is "▁" "<unk>" (its surface is still "$"), and "…" is
    normalised into three "." pieces, the first two of them zero characters long. A lone
    "▁" piece (the space before a word that starts with a rare character) begins at that
    space and goes to the word after it, as every "▁" does."""
    text = clean_text(" ".join(words))           # what forced decoding will encode (NFC, no control characters)
    cleaned = text.split(" ")
    if len(cleaned) != len(words):
        raise InputError(f"a word of {' '.join(words)[:60]!r} is nothing but control characters")
    if hasattr(tokenizer, "word_pieces"):         # a hub model's tokenizer (tokenizer.HubTokenizer)
        return tokenizer.word_pieces(cleaned, target)     # `target`: its decoder's side (Marian's own)
    ends, pos = [], 0                             # byte offset where each word ends
    for w in cleaned:
        pos += len(w.encode("utf-8"))
        ends.append(pos)
        pos += 1                                  # the space
    ids, owner = [], []
    for piece in tokenizer.sp.encode(text, return_type="proto").pieces:
        ids.append(piece.id)
        # the first word that ends after the piece begins; a piece starting at the space
        # before a word (every "▁" piece) begins exactly where the previous word ends
        owner.append(min(bisect.bisect_right(ends, piece.begin), len(words) - 1))
    return ids, owner


def pieces_to_words(attention: np.ndarray, french_of: Sequence[int], english_of: Sequence[int],
                    n_french: int, n_english: int) -> np.ndarray:
    """(French pieces x English pieces) weights -> (French words x English words):

        W[f, e] = (1 / |f|) * sum_{j in f} sum_{i in e} alpha_ij

    columns summed over an English word's pieces, rows averaged over a French word's pieces
    (a word with no pieces, which cannot happen with real text, gets zeros)."""
    a = np.asarray(attention, dtype=float)
    cols = np.zeros((len(english_of), n_english))
    cols[np.arange(len(english_of)), english_of] = 1.0
    rows = np.zeros((n_french, len(french_of)))
    rows[french_of, np.arange(len(french_of))] = 1.0
    rows /= np.maximum(rows.sum(1, keepdims=True), 1.0)
    return rows @ a @ cols


@dataclass(frozen=True)
class WordPieces:
    """A pair of word sequences as the model reads and writes them: the source and target
    ids (with </s>, and a hub model's prefix or language codes), each piece's word, and
    where the words' pieces start in the source (e0) and the target (f0)."""
    source: list[int]
    target: list[int]
    english_of: list[int]
    french_of: list[int]
    e0: int
    f0: int
    n_english: int
    n_french: int


def word_inputs(tr: Translator, english: Sequence[str], french: Sequence[str]) -> WordPieces:
    """The ids to force for a pair of word sequences, and which word each piece belongs to.

    The words are fed as they are, joined with spaces ("de les", "l' homme", mostly lower
    case for the Hansards gold), although the models were trained on natural, cased,
    untokenised text: the attention is read on slightly unnatural input, as it would be for
    any aligner given these tokens. Around the words go what the model reads and writes
    around a text: </s>, and for a hub model a task prefix or language codes (what it puts
    around an empty text); the words' own pieces are fed as they are, so the mapping holds
    whatever the tokenizer would do across words."""
    tok = tr.tokenizer
    en_ids, english_of = word_pieces(tok, english)
    fr_ids, french_of = word_pieces(tok, french, target=True)
    around_src, around_tgt = tok.source_ids(""), tok.target_ids("")
    return WordPieces(around_src[:-1] + en_ids + around_src[-1:], around_tgt[:-1] + fr_ids + around_tgt[-1:],
                      english_of, french_of, len(around_src) - 1, len(around_tgt) - 1, len(english), len(french))


def to_words(attention: np.ndarray, wp: WordPieces, shift: bool = False) -> np.ndarray:
    """(..., target pieces, source pieces) attention of a forced decoding -> (..., French
    words, English words), leaving out the </s> column (a parking place, not a word), the row
    that predicts </s>, and a hub model's prefix and language codes.

    With `shift` (Chen et al. 2020, "shift-att"), French piece j is read at the step that has
    it as *input*, the one that predicts the piece after it, rather than at the step that
    predicts it: a Transformer's cross-attention at that step is where it looks to decide
    what follows the word it was given, and it aligns better (measured: docs)."""
    first = wp.f0 + (1 if shift else 0)
    rows = slice(first, first + len(wp.french_of))
    cols = slice(wp.e0, wp.e0 + len(wp.english_of))
    a = np.asarray(attention)
    flat = a.reshape(-1, *a.shape[-2:])
    out = [pieces_to_words(m[rows, cols], wp.french_of, wp.english_of, wp.n_french, wp.n_english) for m in flat]
    return np.array(out).reshape(*a.shape[:-2], wp.n_french, wp.n_english)


def word_attention(tr: Translator, english: Sequence[str], french: Sequence[str], heads: bool = False,
                   shift: bool = False) -> np.ndarray:
    """The model's attention over the gold's words under forced decoding of the gold French:
    a (len(french) x len(english)) matrix, each row the French word's mean attention row
    without </s> (rows sum to a little under 1); `shift`: read one step later (to_words).

    With `heads`, a Transformer's every layer and head instead: (layers, heads, len(french),
    len(english)); None for a recurrent model (it has one attention)."""
    wp = word_inputs(tr, english, french)
    d = forced(tr, " ".join(english), reference_ids=wp.target, source_ids=wp.source)
    if d.attention is None:
        raise InputError(f"{tr.name} has no attention to read (a fixed-vector model)")
    if heads:
        return None if d.cross_attention is None else to_words(d.cross_attention, wp, shift)
    return to_words(d.attention, wp, shift)


def word_method(tr: Translator, english: Sequence[str], french: Sequence[str], method: str,
                shift: bool = False) -> np.ndarray:
    """(layers, len(french), len(english)): a method of s2s.contributions (weights, norm,
    ALTI+, rollout, value zeroing per decoder layer; an attribution as one layer) over the
    gold's words under forced decoding of the gold French, merged as word_attention merges."""
    from .contributions import method_matrices
    wp = word_inputs(tr, english, french)
    return to_words(method_matrices(tr, wp.source, wp.target, method), wp, shift)


# ---------------------------------------------------------------------------------------
# Weights -> links


def argmax_links(w: np.ndarray) -> set[Link]:
    """Each French word f linked to the English word it attends to most: (argmax_e W[f, e], f)."""
    return {(int(e), f) for f, e in enumerate(w.argmax(1)) if w[f].max() > 0}


def threshold_links(w: np.ndarray, tau: float) -> set[Link]:
    """Every (e, f) with W[f, e] >= tau: none, one or several English words per French word."""
    return {(int(e), int(f)) for f, e in zip(*np.nonzero(w >= tau))}


def ratio_links(w: np.ndarray, fraction: float) -> set[Link]:
    """argmax, plus every English word weighing at least `fraction` of the row's maximum:
    W[f, e] >= fraction * max_e' W[f, e'] (fraction 1 is argmax)."""
    return {(int(e), int(f)) for f, e in zip(*np.nonzero(w >= fraction * w.max(1, keepdims=True))) if w[f].max() > 0}


NEIGHBOURS = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def grow_diag_links(w: np.ndarray, final: bool = False) -> set[Link]:
    """Argmax in both directions, symmetrised as statistical aligners combine theirs
    (grow-diag, and grow-diag-final with `final`; Koehn et al. 2003):

        F->E  each French word to the English word it attends to most (the argmax rule)
        E->F  each English word to the French word that attends to it most: argmax_f W[f, e]

    then `symmetrize`d."""
    n_fr, n_en = w.shape
    f2e = argmax_links(w)
    e2f = {(e, int(w[:, e].argmax())) for e in range(n_en) if w[:, e].max() > 0}
    return symmetrize(f2e, e2f, "grow-diag-final" if final else "grow-diag")


SYMMETRIZATIONS = ("intersection", "grow-diag", "grow-diag-final", "grow-diag-final-and", "union")


def symmetrize(one: set[Link], other: set[Link], how: str = "grow-diag") -> set[Link]:
    """Two directional alignments made one, as fast_align's atools does (Koehn et al. 2003):
    start from one ∩ other (links both directions agree on), then repeatedly add a link of
    one ∪ other that touches a kept link (one of its 8 neighbours) and aligns a word not
    yet aligned (grow-diag); -final then adds any union link that aligns a word still
    unaligned, -final-and only one whose two words are both unaligned."""
    if how not in SYMMETRIZATIONS:
        raise ValueError(f"unknown symmetrization {how!r}; use one of {', '.join(SYMMETRIZATIONS)}")
    union, kept = one | other, one & other
    if how in ("intersection", "union"):
        return kept if how == "intersection" else union

    def aligned(e: int | None = None, f: int | None = None) -> bool:
        return any(ke == e or kf == f for ke, kf in kept)

    grown = True
    while grown:
        grown = False
        for e, f in sorted(kept):
            for de, df in NEIGHBOURS:
                new = (e + de, f + df)
                if new in union and new not in kept and not (aligned(e=new[0]) and aligned(f=new[1])):
                    kept.add(new)
                    grown = True
    if how != "grow-diag":
        for e, f in sorted(union - kept):
            free_e, free_f = not aligned(e=e), not aligned(f=f)
            if (free_e and free_f) if how == "grow-diag-final-and" else (free_e or free_f):
                kept.add((e, f))
    return kept


RULES = ("argmax", "threshold", "ratio", "grow-diag", "shift")

# Chosen on the 37 trial pairs only, never the test set: `--split trial --sweep` for each of
# the four attention models, and per rule the setting with the lowest mean AER over them.
# Trial AER (dot, general, additive, scaled-dot; mean):
#     argmax                  .579 .496 .517 .566   .539
#     threshold tau=0.2       .555 .487 .517 .537   .524   (0.15: .536, 0.25: .555)
#     ratio fraction=0.9      .584 .492 .520 .550   .536   (0.8: .542; lower is worse)
#     grow-diag               .473 .395 .446 .472   .447   <- the default
#     grow-diag-final         .519 .448 .471 .510   .487
#     shift (Chen et al. 2020): argmax of the attention one step later (to_words); for Transformers
RULE_PARAMS = {"argmax": {}, "threshold": {"tau": 0.2}, "ratio": {"fraction": 0.9}, "grow-diag": {"final": False},
               "shift": {}}
DEFAULT_RULE = "grow-diag"
SWEEP = [("argmax", {})] + [("threshold", {"tau": t}) for t in (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)] \
    + [("ratio", {"fraction": r}) for r in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)] \
    + [("grow-diag", {"final": False}), ("grow-diag", {"final": True})]


def shifted(rule: str) -> bool:
    """Whether `rule` reads the attention one step later (to_words(..., shift=True))."""
    return rule == "shift"


def links(w: np.ndarray, rule: str = DEFAULT_RULE, **params) -> set[Link]:
    """Word links of a (French words x English words) weight matrix under a named rule,
    with its parameters from RULE_PARAMS unless given. "shift" is argmax on weights read one
    step later: the caller reads them so (word_attention(..., shift=shifted(rule)))."""
    if rule not in RULES:
        raise InputError(f"Unknown rule {rule!r}: use one of {', '.join(RULES)}.")
    params = {**RULE_PARAMS[rule], **params}
    if rule == "threshold":
        return threshold_links(w, params["tau"])
    if rule == "ratio":
        return ratio_links(w, params["fraction"])
    if rule == "grow-diag":
        return grow_diag_links(w, params["final"])
    return argmax_links(w)


# ---------------------------------------------------------------------------------------
# Scores


@dataclass
class Scores:
    aer: float
    precision: float
    recall: float
    links: int         # |A|
    sure: int          # |S|
    sentences: int


def score(predicted: Sequence[set[Link]], gold: Sequence[GoldPair]) -> Scores:
    """Precision, recall and AER of predicted links against gold S and P, summed over the
    corpus before dividing (micro averages, the standard definition). An empty A has
    precision 1 (no wrong link), an empty S recall 1, and both empty AER 0."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments for {len(gold)} gold pairs")
    a = sum(len(p) for p in predicted)
    s = sum(len(g.sure) for g in gold)
    a_s = sum(len(p & g.sure) for p, g in zip(predicted, gold))
    a_p = sum(len(p & g.possible) for p, g in zip(predicted, gold))
    return Scores(aer=1 - (a_s + a_p) / (a + s) if a + s else 0.0,
                  precision=a_p / a if a else 1.0, recall=a_s / s if s else 1.0,
                  links=a, sure=s, sentences=len(gold))


def head_scores(head_weights: Sequence[np.ndarray], gold: Sequence[GoldPair], rule: str = DEFAULT_RULE,
                **params) -> list[list[Scores]]:
    """A Transformer's every layer x head scored as an aligner: `head_weights` holds one
    (layers, heads, French, English) array per gold pair (word_attention(..., heads=True));
    the result is [layer][head] -> Scores with `rule`."""
    L, H = head_weights[0].shape[:2]
    return [[score([links(w[l, h], rule, **params) for w in head_weights], gold) for h in range(H)]
            for l in range(L)]


def best_head(table: Sequence[Sequence[Scores]]) -> tuple[int, int]:
    """(layer, head), 0-based, of the lowest AER in a head_scores table (the first on a tie)."""
    aer = np.array([[s.aer for s in row] for row in table])
    l, h = np.unravel_index(int(aer.argmin()), aer.shape)
    return int(l), int(h)


def method_scores(tr: Translator, gold: Sequence[GoldPair], method: str, rules: Sequence[str] = (DEFAULT_RULE,),
                  layers: bool = True, on_pair: Callable[[int], None] | None = None) -> dict[str, list[Scores]]:
    """A method of s2s.contributions as an aligner: for each rule, one Scores per decoder
    layer (the last only, unless `layers`). A shifted rule reads the matrices one step later:
    the same piece matrices, computed once per pair for every rule (integrated gradients of
    447 pairs is the longest run here). `on_pair(n)` hears after each pair."""
    from .contributions import method_matrices
    shifts = sorted({shifted(r) for r in rules})
    mats: dict[bool, list[np.ndarray]] = {shift: [] for shift in shifts}
    for n, g in enumerate(gold, 1):
        try:
            wp = word_inputs(tr, g.english, g.french)
            pieces = method_matrices(tr, wp.source, wp.target, method)
        except InputError as e:
            raise InputError(f"pair {n}: {e}") from None
        for shift in shifts:
            m = to_words(pieces, wp, shift)
            mats[shift].append(m if layers else m[-1:])
        if on_pair is not None:
            on_pair(n)
    return {rule: [score([links(m[l], rule) for m in mats[shifted(rule)]], gold)
                   for l in range(len(mats[shifted(rule)][0]))] for rule in rules}


def evaluate(tr: Translator, gold: Sequence[GoldPair], rule: str = DEFAULT_RULE, **params) -> Scores:
    """Score a model's attention, read with `rule`, against the gold alignments."""
    return score([links(word_attention(tr, g.english, g.french, shift=shifted(rule)), rule, **params) for g in gold],
                 gold)


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


# ---------------------------------------------------------------------------------------
# Command line


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineErrorParser(prog="python -m s2s.alignment", description=__doc__.splitlines()[0])
    p.add_argument("--model", help=MODEL_HELP)
    add_model_options(p)
    p.add_argument("--gold", help="folder of SPLIT.en, SPLIT.fr, SPLIT.wa (with --input: or a Pharaoh file, "
                                  "a line of links per input pair)")
    p.add_argument("--input", metavar="PAIRS.tsv",
                   help="align a corpus: English<TAB>French a line; the links go to --output (s2s.corpus_alignment)")
    p.add_argument("--output", metavar="LINKS.txt", help="with --input: one line of Pharaoh links (i-j, from 0) per pair")
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
        from .corpus_alignment import main as align_corpus_main
        return align_corpus_main(a)
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
        if a.method is not None:
            return _print_method(a, tr, gold)
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
        return _print_heads(a, tr.name, weights, gold, seconds)
    for rule, params in SWEEP if a.sweep else [(a.rule, RULE_PARAMS[a.rule])]:
        s = score([links(w, rule, **params) for w in weights], gold)
        r = {"aer": round(s.aer, 4), "precision": round(s.precision, 4), "recall": round(s.recall, 4),
             "sentences": s.sentences, "rule": rule, "params": params, "model": tr.name, "split": a.split,
             "links": s.links, "sure": s.sure, "seconds": round(seconds, 1)}
        if a.json:
            print(json.dumps(r))
        else:
            setting = " ".join(f"{k}={v}" for k, v in params.items())
            print(f"{tr.name}  {a.split}  {rule} {setting}".rstrip()
                  + f"  AER {s.aer:.3f}  precision {s.precision:.3f}  recall {s.recall:.3f}"
                  f"  ({s.sentences} sentences, {s.links} links, {s.sure} sure)")
    return 0


def _print_heads(a: argparse.Namespace, name: str, weights: list[np.ndarray], gold: list[GoldPair],
                 seconds: float) -> int:
    """--heads: AER of every layer x head (rows: layers), the best head, and the head mean."""
    table = head_scores(weights, gold, a.rule, **RULE_PARAMS[a.rule])
    l, h = best_head(table)
    mean = score([links(w[-1].mean(0), a.rule, **RULE_PARAMS[a.rule]) for w in weights], gold)
    r = {"model": name, "split": a.split, "rule": a.rule, "sentences": len(gold),
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
    print(f"best: layer {l + 1} head {h + 1}, AER {table[l][h].aer:.3f}; the last layer's head mean: AER {mean.aer:.3f}")
    return 0


def _scores_json(s: Scores) -> dict:
    return {"aer": round(s.aer, 4), "precision": round(s.precision, 4), "recall": round(s.recall, 4), "links": s.links}


def _print_method(a: argparse.Namespace, tr: Translator, gold: list[GoldPair]) -> int:
    """--method: the AER, precision and recall of that method's links, per decoder layer with --layers."""
    method = ALIGN_METHODS[a.method]
    t = time.perf_counter()
    with _pair_bar(len(gold), f"{tr.name} {a.method}") as bar:
        scores = method_scores(tr, gold, method, (a.rule,), a.layers, on_pair=lambda n: bar.update())[a.rule]
    n = len(scores)
    numbers = range(1, n + 1) if a.layers else [_layers_of(tr, method)]
    rows = [{"layer": k, **_scores_json(s)} for k, s in zip(numbers, scores)]
    best = min(rows, key=lambda r: r["aer"])
    r = {"model": tr.name, "split": a.split, "rule": a.rule, "params": RULE_PARAMS[a.rule], "method": a.method,
         "sentences": len(gold), "sure": scores[0].sure, "layers": rows, "best_layer": best,
         "seconds": round(time.perf_counter() - t, 1)}
    if a.json:
        print(json.dumps(r))
        return 0
    print(f"{tr.name}  {a.split}  {a.method}  {a.rule}  ({len(gold)} sentences, {scores[0].sure} sure links)")
    for row in rows:
        print(f"  layer {row['layer']:>2}  AER {row['aer']:.3f}  precision {row['precision']:.3f}  "
              f"recall {row['recall']:.3f}  ({row['links']} links)")
    return 0


def _pair_bar(total: int, what: str):
    """Progress on stderr, pairs done of the gold's (integrated gradients take minutes to hours
    on a CPU); quiet between updates ten seconds apart, so a log file stays short."""
    from tqdm import tqdm
    return tqdm(total=total, desc=what, unit="pair", file=sys.stderr, mininterval=10, leave=False)


def _layers_of(tr: Translator, method: str) -> int:
    """The layer a method's last matrix belongs to: the last decoder layer, or 1 for a recurrent
    model and for an attribution (one matrix)."""
    from .contributions import ATTRIBUTIONS
    if method in ATTRIBUTIONS or tr.arch != "transformer":
        return 1
    cfg = tr.model.cfg
    return int(getattr(cfg, "decoder_layers", None) or getattr(cfg, "layers", 1))


TABLE_RULES = ("argmax", "grow-diag", "shift")


def _write_method_table(a: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """--method-table: every attention checkpoint x method x layer x rule in TABLE_RULES. Rows
    already in OUT.json (same split) are kept, so an interrupted run goes on where it stopped."""
    from .checkpoint import attention_checkpoints, checkpoint_root
    from .contributions import applies
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
        kept = []
        if out_path.is_file():
            old = json.loads(out_path.read_text(encoding="utf-8"))
            if old.get("split") == a.split:
                kept = old.get("rows", [])
        done = {(r["model"], r["method"]) for r in kept}
        rows = list(kept)
        for info in infos:
            tr = load_translator(info.path)
            for name in wanted:
                method = ALIGN_METHODS[name]
                if (tr.name, name) in done or not applies(tr, method):
                    continue
                t = time.perf_counter()
                with _pair_bar(len(gold), f"{tr.name} {name}") as bar:
                    scores = method_scores(tr, gold, method, TABLE_RULES, layers=True,
                                           on_pair=lambda n: bar.update())
                rows.append({"model": tr.name, "method": name, "seconds": round(time.perf_counter() - t, 1),
                             **{rule: [_scores_json(s) for s in per_layer] for rule, per_layer in scores.items()}})
                if name == "weights" and tr.arch == "transformer":      # beside the layers: the best single head
                    rows[-1]["best_head"] = best_head_row(tr, gold)
                body = {"command": "python -m s2s.alignment " + " ".join(args), "split": a.split,
                        "sentences": len(gold), "rules": list(TABLE_RULES), "rows": rows}
                out_path.parent.mkdir(parents=True, exist_ok=True)
                out_path.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
                best = {rule: min(s.aer for s in per_layer) for rule, per_layer in scores.items()}
                print(f"{tr.name:<20} {name:<14} best layer AER " + "  ".join(f"{r} {v:.3f}" for r, v in best.items()),
                      flush=True)
    except (CheckpointError, InputError, GoldError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def best_head_row(tr: Translator, gold: Sequence[GoldPair], rule: str = "grow-diag") -> dict:
    """A Transformer's best single cross-attention head on `gold` under `rule` (as --heads finds it)."""
    weights = [word_attention(tr, g.english, g.french, heads=True) for g in gold]
    table = head_scores(weights, gold, rule, **RULE_PARAMS[rule])
    l, h = best_head(table)
    return {"layer": l + 1, "head": h + 1, "rule": rule, **_scores_json(table[l][h])}


def method_summary(aligned: dict | None, explained: dict | None, model: str) -> list[dict]:
    """One row per method for `model`, from the method table (results/alignment_methods.json:
    is it an alignment?) and the explanation table (results/explanation_methods.json: is it an
    explanation?): the best layer's AER under grow-diag and argmax (and that layer), the median
    Kendall tau against leave-one-out and the share of steps with the same top source piece.
    A figure a file does not hold is None; a method neither file holds for `model` is left out."""
    a_rows = {r["method"]: r for r in (aligned or {}).get("rows", []) if r.get("model") == model}
    e_row = next((r for r in (explained or {}).get("rows", []) if r.get("model") == model), {})
    taus, tops = e_row.get("kendall_tau_vs_loo", {}), e_row.get("same_top_as_loo", {})
    out = []
    for name in ALIGN_METHODS:
        r = a_rows.get(name)
        if r is None and name not in taus and name != "loo":
            continue
        row = {"method": name, "layer": None, "aer_grow_diag": None, "aer_argmax": None,
               "tau_vs_loo": taus.get(name, {}).get("median"), "same_top_as_loo": tops.get(name)}
        if r is not None:
            layers = r["grow-diag"]
            best = min(range(len(layers)), key=lambda k: layers[k]["aer"])
            row |= {"layer": best + 1 if len(layers) > 1 else None, "aer_grow_diag": layers[best]["aer"],
                    "aer_argmax": min(s["aer"] for s in r["argmax"])}
        if name == "loo" and r is None:
            continue
        out.append(row)
    return out


def _write_table(a: argparse.Namespace, argv: Sequence[str] | None) -> int:
    from .checkpoint import attention_checkpoints, checkpoint_root
    from .data import read_pairs
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


if __name__ == "__main__":
    sys.exit(main())
