"""Seconds per training step of the shipped Transformer's shape, as JSON: fp32 against bf16
autocast (`s2s.train --bf16`), each with glibc's default allocator settings and with the ones
train_transformer.sh sets (freed memory kept in the process, MALLOC_MMAP_MAX_=0 and friends).

    python tools/bench_train_step.py [--steps 8] [--max-tokens 4000] [--inner-dropout 0] [--profile]

Batches are random ids with Tatoeba-like lengths (a quarter of them 2-6 sentences joined),
so the figure measures the arithmetic and the memory traffic, not the data. Each setting runs
in its own process (the allocator reads its settings at start), two threads, after one
warm-up step. Also prints the time of one 4000x256 by 256x1024 product in fp32 and in bf16.
Dropout is 0.1 on sub-layer outputs and embeddings; `--inner-dropout` sets it on the attention
weights and inside the feed-forward block (0.1 by default, as the first shipped run trained;
train_transformer.sh now uses 0). `--profile` adds each setting's share of step time spent in
`aten::bernoulli_`, the random numbers behind dropout (torch.profiler, over the timed steps).
On a machine busy with other work the figures measure that contention.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MALLOC_KEPT = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "20000000000", "MALLOC_TOP_PAD_": "1000000000"}


def one_setting(steps: int, max_tokens: int, bf16: bool, inner_dropout: float = 0.1, profile: bool = False) -> dict:
    import torch
    sys.path.insert(0, str(ROOT))
    from s2s.data import token_batches
    from s2s.model import sequence_loss
    from s2s.tokenizer import BOS
    from s2s.transformer import Transformer, TransformerConfig
    torch.set_num_threads(2)
    torch.manual_seed(0)
    vocab, rng = 8134, random.Random(0)
    examples = []
    for _ in range(20000):
        sentences = rng.randint(2, 6) if rng.random() < 0.25 else 1
        src = [rng.randint(4, vocab - 1) for _ in range(sentences * rng.randint(5, 14))]
        examples.append((src, [rng.randint(4, vocab - 1) for _ in range(int(len(src) * 1.15))]))
    model = Transformer(TransformerConfig(vocab, 256, 4, 3, 3, 1024, 0.1, copy=True, attention_dropout=inner_dropout,
                                          ffn_dropout=inner_dropout)).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches = [b for _, b in zip(range(steps + 1), token_batches(examples, max_tokens, BOS, seed=1))]

    def step(b) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            logits, _ = model(b.src, b.src_len, b.tgt_in)
        loss = sequence_loss(logits.float(), b.tgt_out, 0.1)
        opt.zero_grad()
        (loss / b.n_tokens).backward()
        opt.step()

    step(batches[0])
    with torch.profiler.profile() if profile else contextlib.nullcontext() as prof:
        t = time.perf_counter()
        for b in batches[1:]:
            step(b)
        seconds = (time.perf_counter() - t) / steps
    out = {"s_per_step": round(seconds, 3),
           "target_tokens_per_s": round(sum(b.n_tokens for b in batches[1:]) / steps / seconds)}
    if profile:
        ops = prof.key_averages()
        share = (sum(e.self_cpu_time_total for e in ops if e.key == "aten::bernoulli_")
                 / sum(e.self_cpu_time_total for e in ops))
        out["bernoulli_share"] = float(f"{share:.3g}")   # significant digits: a tiny share is not 0
    return out


def product_ms() -> dict:
    import torch
    torch.set_num_threads(2)
    a, w, out = torch.randn(4000, 256), torch.randn(1024, 256), {}
    for dtype in (torch.float32, torch.bfloat16):
        x, y = a.to(dtype), w.to(dtype)
        for _ in range(3):
            x @ y.T
        t = time.perf_counter()
        for _ in range(20):
            x @ y.T
        out[str(dtype).split(".")[1]] = round((time.perf_counter() - t) / 20 * 1000, 2)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--inner-dropout", type=float, default=0.1,
                   help="dropout on attention weights and inside the FFN (train_transformer.sh: 0)")
    p.add_argument("--profile", action="store_true", help="also the share of step time in aten::bernoulli_")
    p.add_argument("--one", choices=["fp32", "bf16"], help=argparse.SUPPRESS)     # a child process's setting
    a = p.parse_args()
    if a.one:
        print(json.dumps(one_setting(a.steps, a.max_tokens, a.one == "bf16", a.inner_dropout, a.profile)))
        return 0
    out = {"product_4000x256x1024_ms": product_ms()}
    for precision in ("fp32", "bf16"):
        for allocator, env in (("default", {}), ("kept", MALLOC_KEPT)):
            child = subprocess.run([sys.executable, __file__, "--one", precision, "--steps", str(a.steps),
                                    "--max-tokens", str(a.max_tokens), "--inner-dropout", str(a.inner_dropout)]
                                   + ["--profile"] * a.profile, capture_output=True, text=True,
                                   env={**os.environ, **env}, check=True)
            out[f"{precision}_malloc_{allocator}"] = json.loads(child.stdout.strip().splitlines()[-1])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
