"""Speed and memory figures for this machine, as JSON.

    python -m s2s.bench --json

greedy_ms_p50 / beam5_ms_p50: one 20-word sentence, batch 1, attention captured, median
of --runs runs; batch_sentences_per_s: batched greedy over 1,000 sentences; load_s: loading
every checkpoint; cells_ms_2000_chars: the full trace (every layer, cell state, hidden
state and gate) of 2,000 characters by the first character-level model, median of 10;
gradient_flow_ms: one gradient-flow measurement (s2s.gradients, 2,000 characters, K = 200,
64 end positions) per cell type of the character models, median of 5, on one thread as the
app runs it; live_demo_ms: one
update of the Gates & Gradients page's live demonstration (all three untrained cells at the
page's opening settings) and live_demo_ms_largest (at the sliders' largest hidden size and
length), median of 10; explain_ms: one s2s.explain of the 20-word sentence (attention
against gradient x input, integrated gradients and leave-one-out), median of 3, one thread.
peak_rss_mb: the process's peak resident memory. threads: torch's intra-op threads (all
cores by default; the app uses one per request, see ui.py).
What the Translate page adds per press: heatmap_ms_p50, building the attention heatmap of the
20-word sentence (s2s.figures); cached_result_kb, that decoding as the page caches it
(Decoding.without_states, pickled) and result_with_states_kb, the whole Decoding;
cached_result_kb_longest, the largest input the limits allow (200 pieces in, 250 out).
"""
from __future__ import annotations

import argparse
import json
import pickle
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

from .checkpoint import CheckpointError, checkpoint_root, list_checkpoints, load_charlm, load_translator
from .decode import beam_search, forced, greedy, greedy_batch
from .explain import explain
from .figures import attention_heatmap
from .gradients import DEMO_DEFAULTS, DEMO_RANGES, gradient_flow, untrained_flow
from .text import MAX_DECODE_LEN, MAX_SOURCE_TOKENS
from .tokenizer import EOS

SENTENCE_20 = "My grandmother told me that she would visit us next week if the weather was good enough for the drive."
SENTENCES = [
    "I went to the lecture.", "Where is the nearest train station?", "She has a big black dog.",
    "I think it's going to rain tomorrow.", "Tom didn't want to go to school today.",
    "We should have left earlier, but we were waiting for my brother.", "Can you help me carry this box?",
    "My grandmother lives in a small house near the sea.", "The children are playing in the garden.",
    "He forgot his keys at the office again.", "Do you know what time the museum opens?",
    "I have never seen such a beautiful sunset.", "Please turn off the lights when you leave.",
    "They bought a new car last year.", "Why are you always late?", "This book is more interesting than that one.",
    "The agreement on the European Economic Area was signed in August 1992.",
    "We ate dinner at a small restaurant near the river.", "It is too cold to swim today.",
    "I would like a cup of coffee, please.",
]


def timed_ms(fn, runs: int) -> float:
    fn()   # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 2)


def kb(obj) -> float:
    return round(len(pickle.dumps(obj)) / 1024, 1)


def longest_decoding(tr):
    """The biggest Decoding the limits allow: MAX_SOURCE_TOKENS pieces in (whole words of
    the bench sentences), MAX_DECODE_LEN pieces out (teacher-forced, so it cannot stop early)."""
    words = " ".join(SENTENCES).split()
    n = 1
    while n < len(words) * 8 and len(tr.tokenizer.encode(" ".join(words[i % len(words)] for i in range(n + 1)))) \
            < MAX_SOURCE_TOKENS:
        n += 1
    text = " ".join(words[i % len(words)] for i in range(n))
    return forced(tr, text, reference_ids=[tr.tokenizer.encode("a")[-1]] * (MAX_DECODE_LEN - 1) + [EOS])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.bench", description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(checkpoint_root() / "en-fr-additive"), help="translation checkpoint to time")
    p.add_argument("--checkpoints", default=str(checkpoint_root()), help="folder whose checkpoints load_s loads")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--batch-sentences", type=int, default=1000)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        t = time.perf_counter()
        charlms = []
        for info in list_checkpoints(a.checkpoints):
            if info.kind == "translation":
                load_translator(info.path)
            elif info.kind == "charlm":
                charlms.append(load_charlm(info.path))
        load_s = round(time.perf_counter() - t, 3)
        tr = load_translator(a.model)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = {
        "model": Path(a.model).name,
        "threads": torch.get_num_threads(),
        "greedy_ms_p50": timed_ms(lambda: greedy(tr, SENTENCE_20), a.runs),
        "beam5_ms_p50": timed_ms(lambda: beam_search(tr, SENTENCE_20, width=5), a.runs),
    }
    d = greedy(tr, SENTENCE_20)
    if d.attention is not None:
        out["heatmap_ms_p50"] = timed_ms(lambda: attention_heatmap(d.source_tokens, d.target_tokens, d.attention),
                                         a.runs)
    out["cached_result_kb"] = kb(d.without_states())
    out["result_with_states_kb"] = kb(d)
    out["cached_result_kb_longest"] = kb(longest_decoding(tr).without_states())
    texts = [SENTENCES[i % len(SENTENCES)] for i in range(a.batch_sentences)]
    t = time.perf_counter()
    greedy_batch(tr, texts)
    out["batch_sentences_per_s"] = round(len(texts) / (time.perf_counter() - t), 1)
    out["load_s"] = load_s
    if charlms:
        lm = charlms[0]
        text = ("\n".join(f'"{s}" he said.' for s in SENTENCES) * 5)[:2000]
        out["cells_model"] = lm.name
        out["cells_ms_2000_chars"] = timed_ms(lambda: lm.model.trace(text), 10)
    # the Gates & Gradients page's computations, on one thread as the app runs them (ui.py):
    # their many small steps gain nothing from a second thread and lose to its overhead
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    if charlms:
        by_cell = {m.model.cfg.cell: m for m in reversed(charlms)}       # the first model of each cell type
        out["gradient_flow_ms"] = {cell: timed_ms(lambda: gradient_flow(m.model, text, 200, 64), 5)
                                   for cell, m in sorted(by_cell.items())}
    if d.attention is not None:      # one explain of the 20-word sentence: all three attributions
        out["explain_ms"] = timed_ms(lambda: explain(tr, SENTENCE_20), 3)
    largest = dict(DEMO_DEFAULTS, hidden=DEMO_RANGES["hidden"][1], length=DEMO_RANGES["length"][1])
    out["live_demo_ms"] = timed_ms(lambda: [untrained_flow(c, **DEMO_DEFAULTS) for c in ("rnn", "gru", "lstm")], 10)
    out["live_demo_ms_largest"] = timed_ms(lambda: [untrained_flow(c, **largest) for c in ("rnn", "gru", "lstm")], 10)
    torch.set_num_threads(threads)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>24}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
