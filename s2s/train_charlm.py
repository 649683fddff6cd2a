"""Train a character-level LSTM language model on one text file.

    python -m s2s.train_charlm --data ../shared/data/war-and-peace/input.txt \\
        --out checkpoints/charlm-war-and-peace --steps 6000

What it does, top to bottom:
 1. split the text into contiguous train / validation / test parts (90 / 5 / 5 %), so
    the test text is never seen, and take the vocabulary from the train part;
 2. cut the train part into --batch parallel streams and read them --seq characters at a
    time, carrying the LSTM state from one window to the next (truncated backprop through
    time), so cells can learn to remember across windows (quotes, braces, indentation);
 3. Adam with warm-up and cosine decay, gradient clipping; every --eval-every steps the
    validation bits per character and a resumable state in --work (safetensors + JSON);
 4. at the end: fp16 weights to --out, test bits per character and the most
    interpretable cells found on the test text into metrics.json.
Run it again with the same --work to resume after an interruption.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from .cells import best_cells
from .charlm import CharLM, CharLMConfig, bits_per_char
from .checkpoint import CheckpointError, load_charlm, save_checkpoint
from .train import load_state, lr_at, save_state

# What Karpathy, Johnson and Fei-Fei (2015, arXiv:1506.02078) report for the same two corpora:
# test cross-entropy per character of their best recurrent network and of a 20-gram model,
# in nats (natural log, as their char-rnn code reports it); bits = nats / ln 2. Their War
# and Peace has 3,258,246 characters (ours: the same book, 3.2 MB); their Linux Kernel is
# 6,206,996 characters of kernel source (ours: the kernel/ directory of Linux 6.1, 11.7 MB).
PAPER = {
    "war-and-peace": {"best_rnn_nats": 1.077, "ngram20_nats": 1.195},
    "linux-kernel": {"best_rnn_nats": 0.84, "ngram20_nats": 0.889},
}


def paper_figures(corpus: str) -> dict | None:
    """The paper's figures for a corpus folder name, with bits per character added."""
    if corpus not in PAPER:
        return None
    fig = PAPER[corpus]
    return {"source": "Karpathy, Johnson & Fei-Fei 2015, Visualizing and Understanding Recurrent Networks, "
                      "test cross-entropy of the best recurrent network and of a 20-gram model",
            "best_rnn_bits_per_char": round(fig["best_rnn_nats"] / math.log(2), 3),
            "ngram20_bits_per_char": round(fig["ngram20_nats"] / math.log(2), 3), **fig}


def split_text(text: str, valid: float = 0.05, test: float = 0.05) -> tuple[str, str, str]:
    """Contiguous train / validation / test parts (the test part is the end of the file)."""
    n = len(text)
    a, b = int(n * (1 - valid - test)), int(n * (1 - test))
    return text[:a], text[a:b], text[b:]


def fixed_train_part(text: str, valid_text: str, test_text: str, n: int) -> tuple[str, str, str | None]:
    """(train, validation, error) when training on the first `n` characters. When an earlier,
    longer copy of the file put the 90 % boundary later, its train part reaches into today's
    validation part; the validation part then starts where training stops, so it holds only
    text no model saw. The test part (the end of the file) is never touched."""
    valid_start = len(text) - len(valid_text) - len(test_text)
    test_start = len(text) - len(test_text)
    if not 1 <= n < test_start - 1000:
        return "", "", (f"--train-chars must be between 1 and {test_start - 1000:,} (the test part starts at "
                        f"character {test_start:,} and at least 1,000 characters must be left to validate on)")
    return text[:n], text[max(n, valid_start):test_start], None


def known_lines(text: str, chars: str) -> str:
    """The lines of `text` made only of characters in `chars` (the training vocabulary).
    A character the model never saw costs many bits wherever it comes; on these lines the
    test figure measures the model on the kind of text it was trained for."""
    known = set(chars) | {"\n"}
    return "".join(line for line in text.splitlines(keepends=True) if set(line) <= known)


def stream_batches(ids: torch.Tensor, batch: int, seq: int, start: int):
    """Windows (x, y) of `seq` characters from `batch` parallel contiguous streams, from
    window number `start` on, cycling over the streams forever (epochs)."""
    n = (ids.numel() - 1) // batch
    x_all = ids[: n * batch].view(batch, n)
    y_all = ids[1: n * batch + 1].view(batch, n)
    windows = n // seq
    k = start
    while True:
        t = (k % windows) * seq
        yield k, x_all[:, t:t + seq], y_all[:, t:t + seq], (k % windows) == 0
        k += 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.train_charlm", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--data", required=True, help="a text file, e.g. ../shared/data/war-and-peace/input.txt")
    p.add_argument("--out", required=True, help="checkpoint folder to write, e.g. checkpoints/charlm-war-and-peace")
    p.add_argument("--work", help="resumable training state (default runs/<out name>)")
    p.add_argument("--name", help="model name (default: the --out folder's name)")
    p.add_argument("--description", default="", help="one line shown in the app")
    p.add_argument("--cell", choices=("lstm", "gru", "rnn"), default="lstm", help="the recurrent cell")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--emb-dim", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=32, help="parallel streams")
    p.add_argument("--seq", type=int, default=128, help="characters per window (backprop length)")
    p.add_argument("--steps", type=int, default=13000)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--valid-chars", type=int, default=100_000, help="validation characters read at each evaluation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-chars", type=int,
                   help="train on only the first N characters of the train part (to train on exactly the text "
                        "an earlier model saw, when the file has since lost lines at its end)")
    p.add_argument("--reevaluate", action="store_true",
                   help="do not train: measure the checkpoint in --out again on --data's held-out parts")
    a = p.parse_args(argv)

    data = Path(a.data)
    if not data.is_file():
        print(f"error: {data} does not exist", file=sys.stderr)
        return 2
    text = data.read_text(encoding="utf-8", errors="replace")
    train_text, valid_text, test_text = split_text(text)
    if a.train_chars is not None:
        train_text, valid_text, err = fixed_train_part(text, valid_text, test_text, a.train_chars)
        if err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    if a.reevaluate:
        try:
            return reevaluate(Path(a.out), data, valid_text, test_text, a.train_chars)
        except CheckpointError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if len(train_text) < 2 * a.batch * a.seq or len(test_text) < 2:
        print(f"error: {data} is too short: its train part ({len(train_text):,} characters) must hold at least "
              f"2 x --batch x --seq = {2 * a.batch * a.seq:,} characters", file=sys.stderr)
        return 2
    name = a.name or Path(a.out).name
    work = Path(a.work or f"runs/{name}")
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(a.seed)
    cfg = CharLMConfig(chars="".join(sorted(set(train_text))), emb_dim=a.emb_dim, hidden=a.hidden,
                       layers=a.layers, dropout=a.dropout, cell=a.cell)
    model = CharLM(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    meta = {"step": 0, "seconds": 0.0, "chars": 0, "curve": []}
    if (work / "state.safetensors").is_file():
        meta = load_state(work, model, opt)
        print(f"resuming {name} at step {meta['step']}", file=sys.stderr)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {n_params:,} parameters, {len(cfg.chars)} characters, "
          f"{len(train_text):,} train / {len(valid_text):,} valid / {len(test_text):,} test", file=sys.stderr)

    ids = model.encode(train_text)
    batches = stream_batches(ids, a.batch, a.seq, meta["step"])
    state, t0, log = None, time.time(), open(work / "train.log", "a")
    model.train()
    bar = tqdm(total=a.steps, initial=meta["step"], desc=name, unit="step")
    while meta["step"] < a.steps:
        step, x, y, restart = next(batches)
        if restart:
            state = None      # the streams wrapped around: their history no longer applies
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.steps, a.lr, a.warmup)
        logits, state = model(x, state)
        state = tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        meta["step"] = step + 1
        meta["chars"] += x.numel()
        bar.update(1)
        if meta["step"] % a.eval_every == 0 or meta["step"] == a.steps:
            meta["seconds"] += time.time() - t0
            t0 = time.time()
            valid_bpc = bits_per_char(model, valid_text[: a.valid_chars])
            model.train()
            row = {"step": meta["step"], "train_bpc": round(loss.item() / math.log(2), 4),
                   "valid_bpc": round(valid_bpc, 4), "minutes": round(meta["seconds"] / 60, 2),
                   "chars_per_s": round(meta["chars"] / max(meta["seconds"], 1e-9))}
            meta["curve"].append(row)
            print(json.dumps(row), file=log, flush=True)
            bar.set_postfix(valid_bpc=row["valid_bpc"], chars_s=row["chars_per_s"])
            save_state(work, model, opt, meta)
    bar.close()

    model.eval()
    metrics = {
        **held_out_metrics(model, valid_text, test_text),
        "curve": meta["curve"],
        "train": {"steps": a.steps, "minutes": round(meta["seconds"] / 60, 1), "parameters": n_params,
                  "chars_seen": meta["chars"], "batch": a.batch, "seq": a.seq, "lr": a.lr,
                  "data": f"{data.parent.name}/{data.name}",
                  "split": "contiguous 90/5/5 %, test = the end of the file",
                  **({"train_chars": a.train_chars} if a.train_chars else {})},
    }
    if paper := paper_figures(data.parent.name):
        metrics["paper"] = paper
    save_checkpoint(model, None, a.out, name, a.description, metrics)
    print(json.dumps({k: metrics[k] for k in ("test", "cells")}))
    return 0


def held_out_metrics(model: CharLM, valid_text: str, test_text: str) -> dict:
    """Bits per character on the validation and test parts (and on the test lines made only
    of training characters), and the most interpretable cells on the test part's start."""
    model.eval()
    vocab = set(model.cfg.chars)
    test_known = known_lines(test_text, model.cfg.chars)
    return {
        "test": {"bits_per_char": round(bits_per_char(model, test_text), 4), "chars": len(test_text),
                 "unknown_chars": sum(c not in vocab for c in test_text)},
        "test_known_lines": {"bits_per_char": round(bits_per_char(model, test_known), 4), "chars": len(test_known),
                             "what": "the test lines made only of characters seen in training"},
        "valid": {"bits_per_char": round(bits_per_char(model, valid_text), 4), "chars": len(valid_text)},
        "cells": interpretable_cells(model, test_text[:20_000]),
        "cells_text": "the first 20,000 characters of the test part (never trained on)",
    }


def reevaluate(out: Path, data: Path, valid_text: str, test_text: str, train_chars: int | None = None) -> int:
    """Measure a trained checkpoint again on the held-out parts of `data` (for a corpus
    file that changed since training) and rewrite only its metrics.json. `train_chars`:
    how many characters it was trained on, when that is not today's 90 % (the validation
    part then starts after them)."""
    lm = load_charlm(out, device="cpu")
    metrics = dict(lm.metrics, **held_out_metrics(lm.model, valid_text, test_text))
    metrics["reevaluated"] = {"data": f"{data.parent.name}/{data.name}", "chars": len(valid_text) + len(test_text),
                              "date": time.strftime("%Y-%m-%d")}
    if train_chars:
        metrics["train"] = dict(metrics.get("train", {}), train_chars=train_chars)
    (out / "metrics.json").write_text(json.dumps(metrics) + "\n")
    print(json.dumps({k: metrics[k] for k in ("test", "test_known_lines", "valid")}))
    return 0


def interpretable_cells(model: CharLM, text: str, top: int = 3) -> dict:
    """best_cells (cells.py) of every preset feature on `text`, as JSON for metrics.json."""
    traces = model.trace(text, max_chars=len(text))
    return {feature: [{"layer": r.layer, "cell": r.cell, "r": round(r.r, 3)} for r in ranked]
            for feature, ranked in best_cells(traces, text, top).items()}


if __name__ == "__main__":
    sys.exit(main())
