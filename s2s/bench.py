"""Speed and memory figures for this machine, as JSON.

    python -m s2s.bench --json

greedy_ms_p50 / beam5_ms_p50: one 20-word sentence, batch 1, attention captured, median
(transformer_greedy_ms_p50 / transformer_beam5_ms_p50: the same for the first Transformer among
the checkpoints, every layer's and head's attention captured)
of --runs runs; batch_sentences_per_s: batched greedy over 1,000 sentences; load_s: loading
every checkpoint; cells_ms_2000_chars: the full trace (every layer, cell state, hidden
state and gate) of 2,000 characters by the first character-level model, median of 10;
sample_ms_800_chars: the Cell States page's "Sample from the model" at its opening settings
(800 characters, temperature 0.8) by the same model, median of 5;
span_match_ms: LSTMVis's span matches (s2s.cells.span_matches) of one selection over 100,000 characters of
held-out text by span_model (the character model whose held-out text ships, else the first), from states
already read (span_states_ms, once: the page caches them), median
of 20 (target: <= 1,000);
gradient_flow_ms: one gradient-flow measurement (s2s.gradients, 2,000 characters, K = 200,
64 end positions) per cell type of the character models, median of 5, on one thread as the
app runs it; live_demo_ms: one
update of the Gates & Gradients page's live demonstration (all three untrained cells at the
page's opening settings) and live_demo_ms_largest (at the sliders' largest hidden size and
length), median of 10; explain_ms: one s2s.attributions.explain of the 20-word sentence (attention
against gradient x input, integrated gradients and leave-one-out), median of 3, one thread,
for every model with attention (a Transformer's too: explain_ms of en-fr-transformer).
align_pairs_per_s: the 447 Hansards test pairs (--align-gold) aligned by en-fr-general (--align-model) with
grow-diag, batched as `python -m s2s.alignment --input` aligns a corpus, median of 3.
contrib_ms: every one-pass contribution method (s2s.contributions: weights, norm, ALTI+,
rollout, value zeroing) of the 20-word sentence forced with its French (REFERENCE_20), by
--model if it is a Transformer (ours or a hub model) else by the shipped Transformer, median
of 5 (contrib_model, contrib_pieces: source and target pieces); forced_ms, one forced decoding
of the same pair by the same model, and contrib_vs_forced = contrib_ms / forced_ms (target: <= 3);
grad_x_input_ms, gradient x input of the same pair, median of 3.
steer_ms: steering (DecodeSettings.target_prefix) as the Translate page's "steer a step" runs it, a greedy
decoding of the 20-word sentence by --model given its own first 4 greedy pieces and continuing from the 5th,
and steer_vs_greedy, its time over plain greedy's on the same sentence, the two alternated run by run
(medians of --runs; target: <= 1.2).
neuron_view_ms: the Heads tab's neuron view (s2s.heads, and its figure) of one head and one query (the last
decoder layer's cross-attention, head 1, the 5th output piece) for the 20-word sentence's greedy output by the
first Transformer among the checkpoints, median of 10 (target: <= 1,000).
peak_rss_mb: the process's peak resident memory.
lens_ms, lens_vs_forced: the logit lens (s2s.lens, every decoder layer read through the output head) of the
20-word sentence forced with its French by the first Transformer among the checkpoints, and over one forced
decoding of the same pair, alternated, medians of 3 (target: <= 2); contrast_ms, contrast_vs_grad: the
contrastive grad x input (s2s.contrast) at the 5th output piece against the first, and over the plain grad x
input of log p of the same step alone, alternated, medians of 3 (target: <= 1.5); patch_ms: activation
patching (s2s.patch) of PATCH_PAIR, every encoder layer x position and every cross-attention head, without
its two reference passes, median of 3 (target: <= 2,000).
mask_vs_greedy: greedy decoding of the 20-word sentence by the first Transformer among the checkpoints with three heads
knocked out (MASKED_HEADS: one of each kind, DecodeSettings.head_mask) over plain greedy, alternated run by run
(mask_ms, medians of --runs; target: <= 1.2). importance_s: Michel et al.'s importance of every head, with
confidence and roles (s2s.head_importance.importance, one thread as python -m s2s.heads runs it), of the same
model on the first 200 held-out pairs (--held-out; importance_frequencies_s, counting the training corpus's
pieces, once per process, apart; target: <= 60); importance_vs_forced: importance_s over forced_s, the forced
passes of the same pairs one at a time (s2s.hooks.forced_pass, no gradient; target: <= 1.5; --importance-pairs
sets how many); prune_s: its whole pruning curve (importance and every curve of python -m s2s.heads prune
--steps 10, prune_decodings decodings) on the first --prune-pairs held-out pairs, reported. --heads-only times
these alone for --model (ours or a hub Transformer, the opus-shaped stand-in: its generation config caps every
decoding at 24 pieces, own_cap).
With a Hugging Face model (--model hf:NAME or a save_pretrained folder): generate_greedy_ms_p50 and
generate_beam5_ms_p50, transformers' own generate() on the same sentence at the same settings,
and greedy_vs_generate / beam5_vs_generate, s2s.decode's times (attention captured) over them.
threads: torch's intra-op threads (all cores by default; the app uses one per request, see ui/models.py).
What the Translate page adds per press: heatmap_ms_p50, building the attention heatmap of the
20-word sentence (s2s.figures); cached_result_kb, that decoding as the page caches it
(Decoding.without_states, pickled) and result_with_states_kb, the whole Decoding;
cached_result_kb_longest, the largest input the limits allow (200 pieces in, 250 out).

The memory floor. Decoding speed differs fourfold between machines of this kind, so absolute
targets mislead; each decode time is also printed as a multiple of a floor measured in the
same run. At batch 1 a decoding step multiplies one vector by each of the decoder's matrices,
one multiply-add per weight read, so no implementation can step faster than it reads them:

    bytes_per_step  = what one step of the 20-word sentence reads (step_reads; by part in
                      bytes_per_step_parts): in full, the output layer E^T and b, the LSTM's
                      [W_feed W_h] by gate, W_c and the attention's query side; per hypothesis,
                      its token's row of the embedding-gate table, the sentence's keys and
                      encoder states
    read_gb_per_s   = 1e9 bytes / s summing a float32 buffer of bytes_per_step (one pass,
                      memory-bound), median of 50 passes, on the threads decoding uses
    floor_ms        = bytes_per_step x greedy_steps / read_gb_per_s
    greedy_vs_floor = greedy_ms_p50 / floor_ms          (target: <= 1.5 on any machine)
    beam5_vs_floor  = beam5_ms_p50 / beam5_floor_ms, the floor of the beam's own beam5_steps
                      (each reads the weights once for the whole beam, and its rows per hypothesis)

The buffer is as large as one step's reads, not larger than every cache, on purpose: decoding
re-reads the same weights at every step, so they sit in whichever cache level holds that many
bytes, and so does the buffer (the shipped models read 11 MB a step, which a 32 MB L3 holds;
where the cache is smaller, both come from DRAM). A buffer larger than every cache would time
DRAM instead (dram_read_gb_per_s, a 256 MB buffer, printed for comparison): a floor that decoding from cache
can beat, and a ratio that flatters it. Where the rest of the greedy time goes,
greedy_parts_ms: `encode`, the encoder over the source, once; `steps`, the decoder's
steps alone (step_ms each, against step_floor_ms: the excess is launching a step's 35 small
operations, each of which pays a fixed dispatch cost however little it reads); `rest`,
tokenising, recording each step, and the final log-softmax and top-k. And the largest read
alone: output_layer_ms, the output layer's product for one row as a step makes it, against
output_layer_floor_ms, the time to read its bytes at read_gb_per_s.
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

from .attributions import explain
from .cells import HELD_OUT_CHARS, SHIPPED_HELD_OUT, held_out_text, long_states, select_span, span_matches
from .charlm import sample_text
from .checkpoint import CheckpointError, Translator, checkpoint_root, list_checkpoints, load_charlm, load_translator
from .decode import (
    Decoding,
    beam_search,
    encode_source,
    forced,
    greedy,
    greedy_batch,
    length_limit,
    own_cap,
    positions,
)
from .figures import attention_heatmap
from .gradients import DEMO_DEFAULTS, DEMO_RANGES, gradient_flow, untrained_flow
from .model import Seq2Seq
from .text import MAX_DECODE_LEN, MAX_SOURCE_TOKENS, InputError
from .tokenizer import BOS

SENTENCE_20 = "My grandmother told me that she would visit us next week if the weather was good enough for the drive."
# its French, forced where a fixed output is timed (contrib_ms, grad_x_input_ms): an untrained model's own
# greedy output would run to the length limit
REFERENCE_20 = ("Ma grand-mère m'a dit qu'elle nous rendrait visite la semaine prochaine si le temps était assez "
                "beau pour la route.")
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


def timed_ms(fn, runs: int, digits: int = 2) -> float:
    fn()   # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), digits)


def kb(obj) -> float:
    return round(len(pickle.dumps(obj)) / 1024, 1)


def longest_decoding(tr):
    """The biggest Decoding the limits allow: MAX_SOURCE_TOKENS pieces in (whole words of
    the bench sentences), MAX_DECODE_LEN pieces out (teacher-forced, so it cannot stop early);
    both within a hub model's positions."""
    words = " ".join(SENTENCES).split()
    most_in = min(MAX_SOURCE_TOKENS, positions(tr) - 2) if positions(tr) else MAX_SOURCE_TOKENS  # + </s>, a code
    n = 1
    while n < len(words) * 8 and len(tr.tokenizer.encode(" ".join(words[i % len(words)] for i in range(n + 1)))) \
            < most_in:
        n += 1
    text = " ".join(words[i % len(words)] for i in range(n))
    most_out = min(MAX_DECODE_LEN, positions(tr) - 1) if positions(tr) else MAX_DECODE_LEN
    return forced(tr, text, reference_ids=[tr.tokenizer.encode("a")[-1]] * (most_out - 1) + [tr.tokenizer.eos_id])


def against_generate(tr: Translator, d: Decoding, runs: int) -> dict:
    """A hub model's decoding by s2s.decode (attention captured, every step recorded) against
    transformers' own generate() at the same settings, on the same sentence, in this run:
    greedy with as many new tokens as ours wrote, and beam search of width 5 with our length
    limit (2 x source + 10 pieces, within the model's positions). Ratios over 1 are our cost of
    recording what the views show."""
    ids = torch.tensor([encode_source(tr, SENTENCE_20)], device=tr.device)
    mask = torch.ones_like(ids)
    hf = tr.model.hf
    kw = dict(forced_bos_token_id=tr.model.forced_bos)
    n_new = len(d.target_ids)

    @torch.inference_mode()
    def gen(**extra):
        return hf.generate(input_ids=ids, attention_mask=mask, **kw, **extra)

    out = {"hub_model": tr.config.get("hub", tr.name), "dtype": str(next(hf.parameters()).dtype).removeprefix("torch."),
           "device": tr.device.type,
           "generate_greedy_ms_p50": timed_ms(lambda: gen(num_beams=1, do_sample=False, max_new_tokens=n_new,
                                                          min_new_tokens=n_new), runs),
           "generate_beam5_ms_p50": timed_ms(lambda: gen(num_beams=5, do_sample=False,
                                                         max_new_tokens=length_limit(tr, ids.size(1), None)),
                                             runs)}
    out["greedy_vs_generate"] = round(timed_ms(lambda: greedy(tr, SENTENCE_20, max_len=n_new), runs)
                                      / out["generate_greedy_ms_p50"], 2)
    out["beam5_vs_generate"] = round(timed_ms(lambda: beam_search(tr, SENTENCE_20, width=5), runs)
                                     / out["generate_beam5_ms_p50"], 2)
    return out


def alternating_ms(fns: dict, runs: int, digits: int = 2) -> dict[str, float]:
    """The median time in ms of each of `fns` (name -> callable), run in turn within each of
    `runs` rounds (after one warm-up round), every other round in the reverse order, so that a
    machine's drift (another process, the clock) and going first or second weigh on each alike:
    the ratio of two of them is then a fair one."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(runs):
        for name, fn in (list(fns.items()) if r % 2 == 0 else reversed(fns.items())):
            t = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t) * 1000)
    return {name: round(statistics.median(ts), digits) for name, ts in times.items()}


STEER_FROM = 5      # steer_ms: the output is given up to this piece, the decoding continues from it


def steer_timing(tr: Translator, d: Decoding, runs: int) -> dict:
    """steer_ms: greedy decoding of SENTENCE_20 given the first STEER_FROM - 1 pieces of its own
    greedy output `d` (fewer where `d` is shorter: never its </s>), so that it continues from
    the STEER_FROM-th, as steering one step does; steer_vs_greedy: that over plain greedy's time,
    the two alternated (alternating_ms), medians of `runs`. The prefix's steps cost a decoder
    step each, as greedy's do: the target is <= 1.2."""
    prefix = d.target_ids[:min(STEER_FROM - 1, max(len(d.target_ids) - 1, 0))]
    ms = alternating_ms({"greedy": lambda: greedy(tr, SENTENCE_20),
                         "steer": lambda: greedy(tr, SENTENCE_20, target_prefix=prefix)}, runs)
    return {"steer_ms": ms["steer"], "steer_vs_greedy": round(ms["steer"] / ms["greedy"], 2)}


NEIGHBOURS_PAIRS = 1000     # neighbours_ms without a built index: one of this many pairs of the shipped sample


def neighbours_timing(tr: Translator, d: Decoding, runs: int) -> dict:
    """neighbours_ms: one s2s.neighbours.search of SENTENCE_20 read along its greedy output `d` (the
    page has that decoding already): its forced pass, the 5 nearest training sentences, every step's
    5 nearest training decoder states and the 2-D projection, median of `runs`. Against the model's
    own index where one is built (python -m s2s.neighbours build), else against one built here, in a
    temporary folder, of the first NEIGHBOURS_PAIRS pairs of the shipped sample (no ../shared needed);
    neighbours_pairs and neighbours_states say which: how many pairs and decoder states were searched.
    On one thread, as the app runs it (ui/models.py): a second thread only waits on a busy machine."""
    import tempfile

    from .neighbours import SAMPLE, IndexNotReady, build_index, load_index, search
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                index = load_index(tr)
            except IndexNotReady:
                index = build_index(tr, SAMPLE, tmp, pairs=NEIGHBOURS_PAIRS)
            ms = timed_ms(lambda: search(tr, index, SENTENCE_20, 5, d.target_ids), runs)
    finally:
        torch.set_num_threads(threads)
    return {"neighbours_ms": ms, "neighbours_pairs": index.n_pairs, "neighbours_states": index.n_states}


def span_timing(lm, runs: int = 20, chars: int = HELD_OUT_CHARS) -> dict:
    """span_match_ms: the matches of one LSTMVis span selection (s2s.cells.span_matches, every
    stretch where all the selected cells are on) over `chars` characters of held-out text, from
    their states as the Cell States page caches them, median of `runs`; span_states_ms: reading
    those states (h of every layer, s2s.cells.long_states), once, which the page does once per
    model. The held-out text is the test part of the model's training file, as the page reads it
    (s2s.cells.held_out_source: the slice shipped in examples/ for War and Peace, else the file
    under ../shared), else the shipped example passage of its kind repeated (span_text says which). The
    selection: the first short stretch, from the start of the text on, that selects any cell."""
    text = held_out_text(lm.metrics, chars=chars)
    source = "test part"
    if text is None:
        code = "linux" in lm.metrics.get("train", {}).get("data", "")
        example = Path(__file__).resolve().parent.parent / "examples" / ("kernel_heldout.c" if code
                                                                        else "war_and_peace_heldout.txt")
        text, source = (example.read_text(encoding="utf-8") * (chars // 500 + 1))[:chars], "example repeated"
    t = time.perf_counter()
    states = long_states(lm.model, text)
    states_ms = round((time.perf_counter() - t) * 1000, 1)
    span, cells = next(((s, s + k), c) for s in range(0, 2000, 7) for k in (4, 8, 12)
                       if (c := select_span(states, s, s + k)))
    ms = timed_ms(lambda: span_matches(states, cells, text, exclude=span), runs)
    return {"span_match_ms": ms, "span_states_ms": states_ms, "span_chars": len(text), "span_text": source,
            "span_cells": len(cells), "span_matches": len(span_matches(states, cells, text, exclude=span))}


def nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def step_reads(model: Seq2Seq, source_len: int, rows: int = 1) -> dict[str, int]:
    """Bytes one decoding step (Seq2Seq.decode_step) reads, by part, for `rows` hypotheses
    of a source of `source_len` pieces. The weights are read once per step whatever the
    number of rows (one batched product); each row adds its own reads.

    output     the tied output layer, as decode_step holds it: E^T (E x V, V padded to
               OUTPUT_CHUNKS equal slices) and b
    decoder    an LSTM's [W_feed W_h] by gate, 4 x (E + H) x H (its embedding share is a table
               looked up per row, below); a GRU's or RNN's whole cell
    combine    W_c, 2H x E
    attention  the scorer's query side (additive: W2, b2, v; scaled-dot: U; dot and general
               none: their projections are in the keys, computed once per sentence)
    copy       the pointer-generator's gate and location cue
    rows       per hypothesis: its token's row of the embedding-gate table (LSTM) or of the
               embedding, the sentence's keys, encoder states and padding bias (S x (Dk + H + 1)),
               and a copying model's source ids and alpha_{j-1}
    """
    w = model._decode_weights()
    E, H, S, f = model.cfg.emb_dim, model.cfg.hidden, source_len, model.embed.weight.element_size()
    out = {"output": nbytes(w.output, w.output_bias), "combine": nbytes(w.combine)}
    if w.decoder is not None:
        gates, _ = w.decoder.by_gate()                    # its bias is in the table's rows
        out["decoder"] = nbytes(gates[:, -(E + H):])
        row = w.embed_gates[0].numel() * w.embed_gates.element_size()
    else:
        out["decoder"] = nbytes(*model.decoder.parameters())
        row = E * f
    out["attention"] = 0
    if model.scorer is not None:
        # the key side (W1, W) was applied once, at encoding: Memory.keys
        query_side = [p for n, p in model.scorer.named_parameters() if n.split(".")[0] not in ("W1", "W")]
        out["attention"] = nbytes(*query_side)
        key_dim = model.scorer.keys(torch.zeros(1, 1, H)).size(-1)
        row += S * (key_dim + H + 1) * f
    out["copy"] = 0
    if model.copy_gate is not None:
        out["copy"] = nbytes(*model.copy_gate.parameters(), *model.next_piece.parameters())
        row += S * (8 + f)                                # source ids (int64) and alpha_{j-1}
    out["rows"] = rows * row
    return out


def step_bytes(model: Seq2Seq, source_len: int, rows: int = 1) -> int:
    return sum(step_reads(model, source_len, rows).values())


def beam_rows(tree: list[dict]) -> list[int]:
    """The batch size of each step of a beam search, read from its tree: 1 at the first step,
    then the hypotheses the previous step kept alive (its nodes that did not finish)."""
    steps = max(node["step"] for node in tree) + 1
    alive = [0] * steps
    for node in tree:
        alive[node["step"]] += not node["finished"]
    return [1] + alive[:-1]


def read_gb_per_s(n_bytes: int, runs: int = 50) -> float:
    """GB/s (1e9 bytes) reading a float32 buffer of `n_bytes` once: torch.sum, one add per
    4 bytes, which the memory, not the arithmetic, limits. Median of `runs` passes after a
    warm-up pass (which leaves the buffer wherever the cache keeps it, as decoding's weights
    stay between steps), on torch's current threads."""
    x = torch.ones(max(n_bytes // 4, 1))
    x.sum()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        x.sum()
        times.append(time.perf_counter() - t)
    return sig(x.numel() * 4 / max(statistics.median(times), 1e-9) / 1e9)


def sig(x: float, digits: int = 4) -> float:
    """x to `digits` significant digits (a tiny test model's floor is a few microseconds)."""
    return float(f"{x:.{digits}g}")


def floor_ms(bytes_per_step: list[int], gb_per_s: float) -> float:
    """The memory floor of a decode: sum_j bytes_j / bandwidth, in ms."""
    return sum(bytes_per_step) / (gb_per_s * 1e9) * 1000


@torch.inference_mode()
def greedy_parts_ms(tr: Translator, text: str, d: Decoding, runs: int) -> dict[str, float]:
    """Where greedy decoding's time goes, medians of `runs`: `encode`, the encoder over the
    source (once per sentence); `steps`, every decode_step of the decode `d`, its own tokens
    fed back as greedy feeds them (the same steps greedy runs, without its bookkeeping)."""
    model, dev = tr.model, tr.device
    src = torch.tensor([encode_source(tr, text)], device=dev)
    length = torch.tensor([src.size(1)])
    memory, state0 = model.encode(src, length)

    def steps() -> None:
        state, feed, y = state0, model.initial_feed(1), torch.tensor([BOS], device=dev)
        for token in d.target_ids:
            st = model.decode_step(y, state, feed, memory)
            state, feed, y = st.state, st.feed, torch.tensor([token], device=dev)
        if dev.type == "cuda":
            torch.cuda.synchronize()

    return {"encode": timed_ms(lambda: model.encode(src, length), runs), "steps": timed_ms(steps, runs)}


def contributions_timing(tr: Translator, runs: int = 5) -> dict:
    """contrib_ms: every one-pass method of s2s.contributions (weights, norm, ALTI+, rollout,
    value zeroing) for SENTENCE_20 forced with REFERENCE_20, median of `runs`; forced_ms: one
    forced decoding of the same pair by the same model (decode.forced, every layer's and
    head's attention recorded), and their ratio contrib_vs_forced; grad_x_input_ms: gradient
    x input of the same pair (s2s.attributions), median of 3."""
    from .attributions import grad_x_input
    from .contributions import contributions
    src_ids = encode_source(tr, SENTENCE_20)
    ids = tr.tokenizer.target_ids(REFERENCE_20)
    src, tgt = torch.tensor([src_ids], device=tr.device), torch.tensor(ids, device=tr.device)
    forced_ms = timed_ms(lambda: forced(tr, SENTENCE_20, reference_ids=ids), runs)
    contrib_ms = timed_ms(lambda: contributions(tr.model, src, tgt), runs)
    return {"contrib_model": tr.name, "contrib_pieces": [len(src_ids), len(ids)], "contrib_ms": contrib_ms,
            "forced_ms": forced_ms, "contrib_vs_forced": round(contrib_ms / forced_ms, 2),
            "grad_x_input_ms": timed_ms(lambda: grad_x_input(tr.model, src, tgt), 3)}


def neuron_view_timing(tr: Translator, runs: int = 10) -> float:
    """neuron_view_ms: one head's row computed and drawn as the Heads tab does, for the page's
    (cached) greedy output of SENTENCE_20: a forced pass read by hooks, then the figure."""
    from .figures import neuron_figure
    from .heads import neuron_view
    ids = greedy(tr, SENTENCE_20).target_ids
    last = tr.config["model"]["decoder_layers"] - 1
    return timed_ms(lambda: neuron_figure(neuron_view(tr, SENTENCE_20, "cross", last, 0, min(4, len(ids) - 1),
                                                      target_ids=ids)), runs)


PATCH_PAIR = ("The little girl is happy because her mother is here.",       # patch_ms: a 10-word pair,
              "The little boy is happy because his mother is here.")        # one word swapped


def interpretability_timing(tr: Translator) -> dict:
    """lens_ms and lens_vs_forced, contrast_ms and contrast_vs_grad, patch_ms (see above)."""
    from .attributions import row_log_probs
    from .contrast import grad_x_input as contrast_grad
    from .lens import lens
    from .patch import patch
    ids = tr.tokenizer.target_ids(REFERENCE_20)
    src = torch.tensor([encode_source(tr, SENTENCE_20)], device=tr.device)
    tgt = torch.tensor(ids, device=tr.device)
    step = torch.tensor([4], device=tr.device)

    def plain_grad() -> None:              # grad x input of log p(y_5) alone, as the plain attribution takes it
        e = tr.model.embed(src).detach()
        x = e.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(row_log_probs(tr.model, x, src, tgt, step).sum(), x)
        (g * e).sum(-1)

    times = alternating_ms({"lens": lambda: lens(tr, SENTENCE_20, REFERENCE_20),
                            "forced": lambda: forced(tr, SENTENCE_20, reference_ids=ids),
                            "contrast": lambda: contrast_grad(tr.model, src, tgt, 4, ids[0]),
                            "grad": plain_grad}, 3)
    out = {"lens_ms": times["lens"], "lens_vs_forced": round(times["lens"] / times["forced"], 2),
           "contrast_ms": times["contrast"], "contrast_vs_grad": round(times["contrast"] / times["grad"], 2)}
    try:                # a model whose pieces split the pair's two words differently cannot patch it
        patch_s = [patch(tr, PATCH_PAIR[0], PATCH_PAIR[1]).seconds for _ in range(3)]
    except InputError:
        return out
    out["patch_ms"] = round(1000 * sorted(s["layers"] + s.get("heads", 0.0) for s in patch_s)[1], 1)
    return out


MASKED_HEADS = "cross:1.1,encoder:1.1,decoder:1.1"     # mask_vs_greedy: one head of each kind knocked out
HELD_OUT = Path(__file__).resolve().parents[1] / "data" / "tatoeba" / "test.tsv"    # python -m s2s.data writes it


def forced_one_at_a_time_s(tr: Translator, pairs) -> float:
    """Seconds to force `pairs` through the model one at a time (s2s.hooks.forced_pass, every weight
    kept, no gradient): what importance_vs_forced divides by."""
    from .decode import usable_pairs
    from .hooks import decoder_input, forced_pass
    _, srcs, tgts = usable_pairs(tr, pairs)
    t = time.perf_counter()
    with torch.inference_mode():
        for s, g in zip(srcs, tgts):
            forced_pass(tr.model, torch.tensor([s], device=tr.device),
                        decoder_input(tr.model, torch.tensor(g, device=tr.device)))
    return time.perf_counter() - t


def heads_timing(tr: Translator, runs: int, held_out: str | Path | None, prune_pairs: int,
                 importance_pairs: int = 200) -> dict:
    """mask_vs_greedy, importance_s, importance_vs_forced and prune_s (the module docstring) for a
    Transformer; the last three only with held-out pairs."""
    from .decode import DecodeSettings, decode
    from .head_importance import importance, prune_curves, read_scored_pairs
    masked = DecodeSettings("greedy", head_mask=MASKED_HEADS)
    ms = alternating_ms({"greedy": lambda: greedy(tr, SENTENCE_20), "masked": lambda: decode(tr, SENTENCE_20, masked)},
                        runs)
    out: dict = {"heads_model": tr.name, "mask_ms": ms["masked"],
                 "mask_vs_greedy": round(ms["masked"] / ms["greedy"], 2)}
    if held_out is None or not Path(held_out).is_file():
        out["heads_declined"] = (f"no held-out pairs at {held_out} (python -m s2s.data writes data/tatoeba/test.tsv)"
                                 if held_out else "no held-out pairs given (--held-out)")
        return out
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # as python -m s2s.heads runs it (its --threads)
    try:
        pairs = read_scored_pairs(held_out, importance_pairs)
        forced_one_at_a_time_s(tr, pairs[:2])           # warm-up
        forced_s = forced_one_at_a_time_s(tr, pairs)
        ranked = importance(tr, pairs)
        out["importance_s"] = round(ranked.seconds["importance"], 2)
        out["importance_frequencies_s"] = round(ranked.seconds["frequencies"], 2)
        out["importance_pairs"], out["forced_s"] = ranked.pairs, round(forced_s, 3)
        out["importance_vs_forced"] = round(ranked.seconds["importance"] / forced_s, 2)
        if prune_pairs > 0:
            t = time.perf_counter()
            pairs = read_scored_pairs(held_out, prune_pairs)
            result = prune_curves(tr, pairs, importance(tr, pairs), steps=10)
            out["prune_s"], out["prune_pairs"] = round(time.perf_counter() - t, 1), len(pairs)
            out["prune_decodings"] = result["decodings"]
    finally:
        torch.set_num_threads(threads)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.bench", description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(checkpoint_root() / "en-fr-additive"), help="translation checkpoint to time")
    p.add_argument("--checkpoints", default=str(checkpoint_root()), help="folder whose checkpoints load_s loads")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--batch-sentences", type=int, default=1000)
    p.add_argument("--align-gold",
                   default=str(Path(__file__).resolve().parents[2] / "shared/data/hansards-en-fr-align"),
                   help="gold folder whose 447 test pairs align_pairs_per_s aligns (skipped where it is absent)")
    p.add_argument("--align-model", default=str(checkpoint_root() / "en-fr-general"),
                   help="the model align_pairs_per_s times")
    p.add_argument("--held-out", help="held-out English<TAB>French pairs of importance_s and prune_s (default: "
                   "data/tatoeba/test.tsv when --checkpoints is the shipped folder; skipped where there is none)")
    p.add_argument("--prune-pairs", type=int, default=200, help="pairs of prune_s's whole pruning curve (0: skip it)")
    p.add_argument("--importance-pairs", type=int, default=200,
                   help="held-out pairs of importance_s and importance_vs_forced (default 200)")
    p.add_argument("--heads-only", action="store_true",
                   help="only the heads' figures (mask_vs_greedy, importance_vs_forced, prune_s) of --model, a "
                        "Transformer (ours or a hub model): what the opus-shaped stand-in is timed by")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.heads_only:
        return heads_main(a)
    try:
        t = time.perf_counter()
        charlms, transformers = [], []
        for info in list_checkpoints(a.checkpoints):
            if info.kind == "translation":
                loaded = load_translator(info.path)
                if info.arch == "transformer":
                    transformers.append(loaded)
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
    for t_tr in transformers[:1]:     # the shipped Transformer (config arch), the same sentence
        out["transformer_model"] = t_tr.name
        out["transformer_greedy_ms_p50"] = timed_ms(lambda: greedy(t_tr, SENTENCE_20), a.runs)
        out["transformer_beam5_ms_p50"] = timed_ms(lambda: beam_search(t_tr, SENTENCE_20, width=5), a.runs)
        out["neuron_view_ms"] = neuron_view_timing(t_tr)
        out.update(interpretability_timing(t_tr))
        shipped = Path(a.checkpoints).resolve() == checkpoint_root().resolve()
        out.update(heads_timing(t_tr, a.runs, a.held_out or (HELD_OUT if shipped else None), a.prune_pairs,
                                a.importance_pairs))
    # contributions: of this model if it is a Transformer (ours or a hub model), else of the shipped Transformer
    contrib_of = tr if not isinstance(tr.model, Seq2Seq) else (transformers[0] if transformers else None)
    if contrib_of is not None:
        out.update(contributions_timing(contrib_of))
    d = greedy(tr, SENTENCE_20)
    out.update(steer_timing(tr, d, a.runs))
    if hasattr(tr.model, "hf"):                   # a Hugging Face model: against its own generate()
        out.update(against_generate(tr, d, a.runs))
    if isinstance(tr.model, Seq2Seq):             # the memory floor, measured in this run (see above)
        b = beam_search(tr, SENTENCE_20, width=5)
        S = len(d.source_tokens)
        out["bytes_per_step"] = step_bytes(tr.model, S)
        out["bytes_per_step_parts"] = step_reads(tr.model, S)
        out["read_gb_per_s"] = read_gb_per_s(out["bytes_per_step"])
        out["dram_read_gb_per_s"] = read_gb_per_s(256 << 20, 10)
        out["greedy_steps"], out["beam5_steps"] = len(d.target_ids), len(beam_rows(b.beam_tree))
        floor = floor_ms([out["bytes_per_step"]] * len(d.target_ids), out["read_gb_per_s"])
        beam_floor = floor_ms([step_bytes(tr.model, S, k) for k in beam_rows(b.beam_tree)], out["read_gb_per_s"])
        out["floor_ms"], out["beam5_floor_ms"] = sig(floor), sig(beam_floor)
        out["greedy_vs_floor"] = round(out["greedy_ms_p50"] / floor, 2)
        out["beam5_vs_floor"] = round(out["beam5_ms_p50"] / beam_floor, 2)
        parts = greedy_parts_ms(tr, SENTENCE_20, d, a.runs)
        out["step_ms"] = round(parts["steps"] / len(d.target_ids), 4)
        out["step_floor_ms"] = sig(floor / len(d.target_ids))
        out["greedy_parts_ms"] = {**parts, "rest": round(out["greedy_ms_p50"] - parts["encode"] - parts["steps"], 2)}
        # the biggest read of a step alone: the output layer's product for one row, as decode_step makes it
        w, feed = tr.model._decode_weights(), torch.zeros(1, tr.model.cfg.emb_dim)
        with torch.inference_mode():
            out["output_layer_ms"] = timed_ms(lambda: tr.model._decode_output(feed, w), 200, digits=4)
        out["output_layer_floor_ms"] = sig(out["bytes_per_step_parts"]["output"] / out["read_gb_per_s"] / 1e6)
    if d.attention is not None:
        out["heatmap_ms_p50"] = timed_ms(lambda: attention_heatmap(d.source_tokens, d.target_tokens, d.attention),
                                         a.runs)
    out["cached_result_kb"] = kb(d.without_states())
    out["result_with_states_kb"] = kb(d)
    out["cached_result_kb_longest"] = kb(longest_decoding(tr).without_states())
    out.update(neighbours_timing(tr, d, a.runs))
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
        out["sample_ms_800_chars"] = timed_ms(lambda: sample_text(lm.model, "\n", 800, 0.8, 0), 5)
        # the model whose held-out text ships (examples/, s2s.cells.SHIPPED_HELD_OUT): the same text on every machine
        span_lm = next((m for m in charlms if m.metrics.get("train", {}).get("data") in SHIPPED_HELD_OUT), lm)
        out["span_model"] = span_lm.name
        out.update(span_timing(span_lm))
    general = Path(a.align_model)
    if (Path(a.align_gold) / "test.wa").is_file() and general.is_dir():     # corpus alignment, batched
        from .alignment import read_gold
        from .alignment.corpus import align_corpus
        pairs = [(g.english, g.french) for g in read_gold(a.align_gold, "test")]
        g_tr = load_translator(general)
        out["align_model"] = general.name
        out["align_pairs_per_s"] = round(len(pairs) / (timed_ms(lambda: align_corpus(g_tr, pairs, "grow-diag"), 3)
                                                       / 1000), 1)
    # the Gates & Gradients page's computations, on one thread as the app runs them (ui/models.py):
    # their many small steps gain nothing from a second thread and lose to its overhead
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    if charlms:
        by_cell = {m.model.cfg.cell: m for m in reversed(charlms)}       # the first model of each cell type
        out["gradient_flow_ms"] = {cell: timed_ms(lambda: gradient_flow(m.model, text, 200, 64), 5)
                                   for cell, m in sorted(by_cell.items())}
    if d.attention is not None:      # one explain of the 20-word sentence: all three attributions, any attention model
        try:
            out["explain_ms"] = timed_ms(lambda: explain(tr, SENTENCE_20), 3)
        except InputError as e:      # e.g. an untrained model's translation longer than explain takes
            out["explain_ms"], out["explain_declined"] = None, str(e)
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


def heads_main(a) -> int:
    """--heads-only: heads_timing of --model alone, one JSON object (or a line per key)."""
    try:
        tr = load_translator(a.model)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if isinstance(tr.model, Seq2Seq):
        print(f"error: {tr.name} is a recurrent model: it has no heads to time", file=sys.stderr)
        return 2
    out = {"model": tr.name, "threads": torch.get_num_threads(), "own_cap": own_cap(tr)}
    try:
        out.update(heads_timing(tr, a.runs, a.held_out, a.prune_pairs, a.importance_pairs))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out) if a.json else "\n".join(f"{k:>24}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
