"""The bottleneck, measured: a fixed vector vs attention as inputs get longer.

"You can't cram the meaning of a whole sentence into a single vector": the `none` model
reads the same vector c at every step, however long the source; an attention model reads
c_j = sum_i alpha_ij h_i, a new mixture of all m encoder states at each of its t steps.
Attention costs m*t weights (O(mt) time) where the fixed vector costs O(m + t).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .checkpoint import CheckpointInfo, Translator
from .decode import Decoding, forced
from .evaluate import bleu, chrf
from .text import check_range

# Everyday sentences with our own reference translations, joined 1-6 at a time for the
# stress test (about 10 words each, so six make ~60 words, the longest the models saw).
STRESS_PAIRS = [
    ("My brother bought a red car last week.", "Mon frère a acheté une voiture rouge la semaine dernière."),
    ("The children are playing in the garden.", "Les enfants jouent dans le jardin."),
    ("I would like a cup of coffee, please.", "Je voudrais une tasse de café, s'il vous plaît."),
    ("We ate dinner at a small restaurant near the river.",
     "Nous avons dîné dans un petit restaurant près de la rivière."),
    ("She reads a book every evening before going to bed.", "Elle lit un livre chaque soir avant d'aller se coucher."),
    ("Tom forgot his keys at the office again.", "Tom a encore oublié ses clés au bureau."),
]
STRESS_DEFAULT = 4      # sentences joined at most when the Bottleneck page opens (its slider's default)


def joined_example(k: int, pairs: Sequence[tuple[str, str]] = STRESS_PAIRS) -> tuple[str, str]:
    """The first k example pairs joined into one long pair (1 <= k <= len(pairs))."""
    check_range("Joined sentences", k, 1, len(pairs))
    chosen = pairs[:k]
    return " ".join(s for s, _ in chosen), " ".join(t for _, t in chosen)


def repetition_rate(words: Sequence[str], n: int = 2) -> float:
    """Share of n-grams that already occurred earlier in the output (0 = no repetition).
    A fixed-vector decoder that has lost track of the source tends to loop."""
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


@dataclass
class StressRow:
    sentences: int
    source_words: int
    output_words: int
    reference_words: int
    bleu: float
    chrf: float
    repetition: float
    translation: str

    @property
    def length_ratio(self) -> float:
        """Output length / reference length: well below 1 means content was dropped."""
        return self.output_words / max(1, self.reference_words)


def stress_row(d: Decoding, k: int, source: str, reference: str) -> StressRow:
    out = d.translation.split()
    return StressRow(k, len(source.split()), len(out), len(reference.split()),
                     round(bleu([d.translation], [reference]), 2), round(chrf([d.translation], [reference]), 2),
                     round(repetition_rate(out), 3), d.translation)


def first_failure(rows: Sequence[StressRow], keep: float = 0.6, max_repetition: float = 0.15) -> int | None:
    """The first number of joined sentences at which a model breaks down: chrF below
    `keep` times its one-sentence chrF, repetition above `max_repetition`, or an output
    shorter than 60% of the reference (dropped content). None if it never does."""
    if not rows:
        return None
    base = rows[0].chrf
    for r in rows:
        if r.chrf < keep * base or r.repetition > max_repetition or r.length_ratio < 0.6:
            return r.sentences
    return None


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(T, H) x (S, H) -> (T, S) cosine similarities."""
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-9)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-9)
    return a @ b.T


def pca_2d(x: np.ndarray) -> np.ndarray:
    """Project the rows of x on their first two principal components."""
    scale = max(float(np.abs(x).max()) if x.size else 0.0, 1e-12)
    x = x - x.mean(0, keepdims=True)
    if len(x) < 2 or float(np.abs(x).max()) < 1e-6 * scale:    # one vector repeated: a single point
        return np.zeros((len(x), 2))
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    out = x @ vt[:2].T
    return np.pad(out, ((0, 0), (0, 2 - out.shape[1])))


def decode_ms(tr: Translator, text: str, reference: str, runs: int = 3) -> float:
    """Fastest of `runs` wall times, in ms, of decoding `reference` (forced, so every model
    produces the same t tokens: a recurrent model in t steps, a Transformer in one pass over
    all t positions). The minimum, not the median: another session's work on the same cores
    only ever adds time."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        forced(tr, text, reference)
        times.append((time.perf_counter() - t) * 1000)
    return float(min(times))


def timing_rows(tr: Translator, model: str) -> list[dict]:
    """The cost view's rows for one model: for the first k = 1..len(STRESS_PAIRS) examples
    joined, m source and t target pieces (with </s>), m*t, and decode_ms of the pair. Pieces
    are the model's own (a Hugging Face model's tokenizer, its task prefix or language code
    included), so each model's m*t counts the weights its own attention computes."""
    rows = []
    for k in range(1, len(STRESS_PAIRS) + 1):
        src, ref = joined_example(k)
        m, t = len(tr.tokenizer.source_ids(src)), len(tr.tokenizer.target_ids(ref))
        rows.append({"model": model, "sentences": k, "m": m, "t": t, "m·t": m * t,
                     "ms": round(decode_ms(tr, src, ref), 2)})
    return rows


def measured_models(infos: Sequence[CheckpointInfo], attention_model: str) -> list[str]:
    """The models the bottleneck views put side by side, chosen by their configs: the first
    fixed-vector model, `attention_model`, and the first Transformer if there is one."""
    fixed = [i.name for i in infos if i.attention == "none"][:1]
    transformers = [i.name for i in infos if i.arch == "transformer"][:1]
    return fixed + [attention_model] + transformers
