"""Train an English->French encoder-decoder on a Tatoeba-style TSV.

    python -m s2s.train --data ../shared/data/tatoeba-en-fr/fra.txt --attention additive \\
        --out checkpoints/en-fr-additive

What it does, top to bottom:
 1. split the pairs by English sentence (deterministic; written to --split-dir) and train
    the joint sentencepiece tokenizer on the train split, unless both already exist;
 2. train with teacher forcing and cross-entropy (label smoothing), Adam, linear warm-up
    then cosine decay, gradient clipping; each epoch rewrites a share of the pairs with
    the copy augmentation of data.py (names, numbers, casing; the tokenizer gets a piece
    for every letter of the names) and mixes single pairs with long pairs (2-4 pairs
    joined) so the model sees inputs up to ~60 words;
 3. every --eval-every steps: validation loss, a resumable state in --work
    (safetensors + JSON, no pickle), and at ~20 points the attention of 8 probe
    sentences (the "training trace");
 4. at the end: export fp16 weights to --out and evaluate them on the test splits
    (BLEU/chrF with beam search, by source length, perplexity) into metrics.json. With
    --average-last N the weights of the last N evaluation points are kept and the exported
    model is the average of the last k of them, k chosen by validation loss.
Run it again with the same --work to resume after an interruption.

Several processes train one model with DistributedDataParallel when started by torchrun:

    torchrun --nproc_per_node 2 -m s2s.train --data ... --out ...          (one machine)
    torchrun --nnodes 2 --node_rank 0|1 --master_addr HOST --nproc_per_node 4 -m s2s.train ...

gloo on CPUs, NCCL on GPUs (bf16 autocast there; --bf16 on a CPU). Every process builds the same batches in
the same order and takes its own shard of each (rows rank, rank + N, ...); DDP sums the
gradients, so a step is the single-process step on the whole batch. Rank 0 alone logs,
saves, traces and evaluates. A plain `python -m s2s.train` is rank 0 of 1, as before.

--init-from DIR fine-tunes a trained checkpoint instead of starting from random weights
(its vocabulary grown by the added letters); the new metrics keep the old model's scores
under "before", and its curves and attention trace continue the old ones.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from .checkpoint import Translator, load_translator, save_checkpoint
from .data import (
    Augmenter,
    Batch,
    Pair,
    augment_pairs,
    can_copy,
    copy_pairs,
    load_names,
    name_characters,
    read_copy_test,
    read_pairs,
    split_names,
    split_pairs,
    token_batches,
    write_splits,
)
from .decode import forced
from .evaluate import copy_scores, evaluate_pairs, loop_rate, perplexity
from .model import ModelConfig, Seq2Seq, sequence_loss
from .tokenizer import BOS, Tokenizer, add_characters, train_tokenizer
from .transformer import Transformer, TransformerConfig

# Fixed probe pairs whose attention is recorded during training ("watch attention emerge").
PROBES = [
    ("I went to the lecture.", "Je suis allé au cours."),
    ("The agreement on the European Economic Area was signed in August 1992.",
     "L'accord sur la zone économique européenne a été signé en août 1992."),
    ("Tom didn't want to go to school today.", "Tom ne voulait pas aller à l'école aujourd'hui."),
    ("Where is the nearest train station?", "Où est la gare la plus proche ?"),
    ("She has a big black dog.", "Elle a un gros chien noir."),
    ("I think it's going to rain tomorrow.", "Je pense qu'il va pleuvoir demain."),
    ("We should have left earlier, but we were waiting for my brother.",
     "Nous aurions dû partir plus tôt, mais nous attendions mon frère."),
    ("My grandmother lives in a small house near the sea.", "Ma grand-mère vit dans une petite maison près de la mer."),
]


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up to `peak`, then cosine decay to peak/20 at `total` steps."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def epoch_examples(singles: list, long_fraction: float, seed: int, pairs: list | None = None,
                   augmenter: Augmenter | None = None, tok: Tokenizer | None = None, long_max: int = 4,
                   copy_fraction: float = 0.0, copy_pool: list[int] | None = None) -> list:
    """All single pairs plus long_fraction * len(singles) pairs of 2-`long_max` joined singles.
    Joining the ids equals tokenizing the joined text: every sentence starts a new word.
    With an augmenter, this epoch's rewritten pairs (text `pairs`, aligned with `singles`)
    are tokenized anew; the others keep their ids, and copy_fraction * len(pairs) more pairs
    are drawn from `copy_pool` (indices of pairs that can_copy) with every name and number
    swapped."""
    if augmenter is not None:
        singles = [ids if new == old else (tok.encode(new[0]), tok.encode(new[1]))
                   for ids, old, new in zip(singles, pairs, augment_pairs(pairs, augmenter, seed))]
        if copy_fraction:
            extra = copy_pairs(pairs, copy_pool, int(copy_fraction * len(pairs)), augmenter, seed + 1)
            singles = singles + [(tok.encode(s), tok.encode(t)) for s, t in extra]
    rng = random.Random(seed)
    joined = []
    for _ in range(int(long_fraction * len(singles))):
        parts = rng.sample(singles, rng.randint(2, long_max))
        joined.append(([i for p in parts for i in p[0]], [i for p in parts for i in p[1]]))
    return singles + joined


# ---------------------------------------------------------------- resumable state, no pickle

def save_state(work: Path, model: Seq2Seq, opt: torch.optim.Optimizer, meta: dict) -> None:
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    osd = opt.state_dict()
    for i, st in osd["state"].items():
        for k, v in st.items():
            tensors[f"optim.{i}.{k}"] = torch.as_tensor(v).cpu().contiguous()
    tensors["rng.torch"] = torch.get_rng_state()
    tmp = work / "state.safetensors.tmp"
    save_file(tensors, str(tmp))
    tmp.replace(work / "state.safetensors")
    meta = dict(meta, param_groups=osd["param_groups"])
    (work / "state.json.tmp").write_text(json.dumps(meta))
    (work / "state.json.tmp").replace(work / "state.json")


def load_state(work: Path, model: Seq2Seq, opt: torch.optim.Optimizer) -> dict:
    tensors = load_file(str(work / "state.safetensors"))
    meta = json.loads((work / "state.json").read_text())
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    state: dict = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, i, name = k.split(".", 2)
            state.setdefault(int(i), {})[name] = v
    opt.load_state_dict({"state": state, "param_groups": meta.pop("param_groups")})
    torch.set_rng_state(tensors["rng.torch"])
    return meta


def save_snapshot(work: Path, model: torch.nn.Module, step: int) -> None:
    """The weights at `step`, kept for averaging at the end (fp32, like the state)."""
    (work / "snapshots").mkdir(exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
              str(work / "snapshots" / f"step-{step:07d}.safetensors"))


@torch.no_grad()
def average_snapshots(work: Path, model: torch.nn.Module, valid: list, after: int, say=print) -> dict | None:
    """Load into `model` the average of the last k snapshots taken after step `after`,
        theta = (1/k) sum_{i=n-k+1..n} theta_i,
    with k chosen by validation loss (k = 1 is the last weights as they are). Averaging
    the end of a run smooths the noise of the last updates (Vaswani et al. 2017, sec. 6.1)."""
    files = sorted(f for f in (work / "snapshots").glob("step-*.safetensors") if int(f.stem[5:]) > after)
    if len(files) < 2:
        return None
    snaps = [load_file(str(f)) for f in files]

    def mean_of_last(k: int) -> dict:
        return {n: sum(s[n] for s in snaps[-k:]) / k if v.is_floating_point() else v for n, v in snaps[-1].items()}

    losses = {}
    for k in range(1, len(snaps) + 1):
        model.load_state_dict(mean_of_last(k))
        losses[k] = round(valid_loss(model, valid, 4000), 4)
        say(f"average of the last {k} snapshots: valid loss {losses[k]}")
    best = min(losses, key=lambda k: (losses[k], k))
    model.load_state_dict(mean_of_last(best))
    model.eval()
    steps = [int(f.stem[5:]) for f in files]
    say(f"shipping the average of steps {steps[-best:]}")
    return {"steps": steps[-best:], "valid_loss_by_k": losses, "valid_loss_last": losses[1],
            "valid_loss": losses[best]}


# ---------------------------------------------------------------- several processes

def setup_distributed() -> tuple[int, int, torch.device]:
    """(rank, world size, device). torchrun sets WORLD_SIZE, RANK and LOCAL_RANK; a plain
    run is rank 0 of 1. GPUs when present (one per process), the CPU otherwise."""
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local}" if torch.cuda.is_available() else "cpu")
    if world > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, world, device


def shard(batch: Batch, rank: int, world: int) -> tuple[Batch, bool]:
    """This process's rows of a batch (rank, rank + world, ...), and False if it has none
    (a batch of fewer sentences than processes): then it gets row 0 to keep step with the
    others, and its loss counts zero."""
    rows = torch.arange(rank, batch.src.size(0), world)
    has_rows = len(rows) > 0
    if not has_rows:
        rows = torch.tensor([0])
    return Batch(batch.src[rows], batch.src_len[rows], batch.tgt_in[rows], batch.tgt_out[rows]), has_rows


def summed(x: float, world: int, device: torch.device) -> float:
    """x summed over all processes (x itself in a single process)."""
    if world == 1:
        return x
    t = torch.tensor([x], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t)


def weights_checksum(model: torch.nn.Module) -> float:
    return float(sum(p.detach().double().sum() + (p.detach().double() ** 2).sum() for p in model.parameters()))


# ---------------------------------------------------------------- training

@torch.no_grad()
def valid_loss(model: Seq2Seq, examples: list, max_tokens: int) -> float:
    model.eval()
    nll, n = 0.0, 0
    device = next(model.parameters()).device
    for b in token_batches(examples, max_tokens, BOS, seed=0, shuffle=False):
        b = b.to(device)
        logits, _ = model(b.src, b.src_len, b.tgt_in)
        nll += float(sequence_loss(logits, b.tgt_out))
        n += b.n_tokens
    model.train()
    return nll / max(n, 1)


def probe_trace(tr: Translator, step: int) -> dict:
    """Attention of the probe pairs under forced decoding of their references (fixed shapes)."""
    tr.model.eval()
    rows = []
    for src, ref in PROBES:
        d = forced(tr, src, ref)
        rows.append({"log_prob": round(d.log_prob, 3),
                     "attention": None if d.attention is None else np.round(d.attention, 3).tolist()})
    tr.model.train()
    return {"step": step, "probes": rows}


def finetune_model(model: Seq2Seq | Transformer, vocab_size: int, dropout: float,
                   copy: bool = False) -> Seq2Seq | Transformer:
    """A trainable copy of `model` with room for `vocab_size` tokens: new embedding rows at
    the mean embedding (plus a little noise), new output biases at the lowest existing
    bias, so the new pieces start as rare, average tokens and every old token scores as
    before. With `copy` (attention models only) it gains the pointer-generator gate, set to
    generate 95% of the probability at first (p_gen = sigmoid(3)), and the location cue, off
    at first (g_j = 0: see model.py), so the grown model starts out predicting as the old one.
    A Transformer continues as it is (its own pieces, its own copy gate), with `dropout`."""
    old = model.cfg.vocab_size
    if isinstance(model, Transformer):
        if vocab_size != old:
            raise ValueError(f"the tokenizer has {vocab_size} pieces, the Transformer {old}: "
                             "continue a Transformer with its own pieces (--tokenizer its spm.model)")
        cont = Transformer(TransformerConfig.from_dict(dict(model.cfg.to_dict(), dropout=dropout)))
        cont.load_state_dict(model.state_dict())
        return cont
    if vocab_size < old:
        raise ValueError(f"the tokenizer has {vocab_size} pieces, fewer than the model's {old}")
    copy = (copy or model.cfg.copy) and model.cfg.attention != "none"
    grown = Seq2Seq(ModelConfig.from_dict(dict(model.cfg.to_dict(), vocab_size=vocab_size, dropout=dropout,
                                                copy=copy)))
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    if copy and "copy_gate.weight" not in state:
        state["copy_gate.weight"] = torch.zeros_like(grown.copy_gate.weight)
        state["copy_gate.bias"] = torch.full_like(grown.copy_gate.bias, 3.0)
    if copy and "next_piece.weight" not in state:     # no location cue at first: g_j = 0
        state["next_piece.weight"] = torch.zeros_like(grown.next_piece.weight)
        state["next_piece.bias"] = torch.zeros_like(grown.next_piece.bias)
    emb, bias = state["embed.weight"], state["out_bias"]
    new = vocab_size - old
    state["embed.weight"] = torch.cat([emb, emb.mean(0) + 0.01 * emb.std() * torch.randn(new, emb.size(1))])
    state["out_bias"] = torch.cat([bias, bias.min().expand(new)])
    grown.load_state_dict(state)
    return grown


def before_metrics(base: Translator, copy_test: list | None, long_sources: list[str],
                   continuing: bool = False) -> dict:
    """What a fine-tune starts from: the base checkpoint's training history and test scores,
    plus its copy test and loop rate on the same data as the new model's (measured now,
    unless its metrics hold them for inputs of the same count: greedy is deterministic).

    A base that is itself a fine-tune (its metrics have "before") starts a further leg: the
    origin's scores stay the model's "before", the base's become "previous", and the fine-tune
    minutes add up. So does `continuing` (--continue-run) a model trained from scratch with
    the same recipe: its scores become "previous", and it has no "before"."""
    m = base.metrics
    curves = m.get("curves", [])
    loops = m.get("loops", {})
    before = {"name": base.name, "steps": curves[-1]["step"] if curves else m.get("train", {}).get("steps", 0),
              "train_minutes": m.get("train_minutes", 0), "train_tokens": m.get("train_tokens", 0),
              "curves": curves, "trace": m.get("trace", {}).get("points", []),
              "test": {k: {kk: v[kk] for kk in ("bleu", "chrf", "perplexity") if kk in v}
                       for k, v in m.get("test", {}).items()},
              "loops": loops if loops.get("n") == len(long_sources) and loops.get("beam") == 1
              else loop_rate(base, long_sources)}
    if copy_test:
        copy = m.get("copy", {})
        before["copy"] = copy if copy.get("n") == len(copy_test) and copy.get("beam") == 1 \
            else copy_scores(base, copy_test)
    if "before" in m or continuing:
        before["origin"] = m.get("before")      # None: trained from scratch, nothing before
        before["finetune_minutes"] = m.get("finetune_minutes") or 0
    return before


# ---------------------------------------------------------------- the command line

@dataclass
class TrainConfig:
    """One run's recipe: every option of the command line (parse_args gives their defaults and
    help), typed, read by the stages below; written into the model's metrics.json as "train"
    (without `threads`, which is the machine's, not the recipe's)."""
    # the data: the corpus, its splits, the tokenizer
    data: str
    out: str
    split_dir: str
    valid_pairs: int
    test_pairs: int
    # where the run and its model go
    work: str | None
    name: str | None
    description: str
    # the model (recurrent or Transformer)
    arch: str
    attention: str
    cell: str
    emb: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    tokenizer: str | None
    dropout: float
    attention_dropout: float | None
    ffn_dropout: float | None
    # the optimisation
    label_smoothing: float
    steps: int
    max_tokens: int
    lr: float
    warmup: int
    clip: float
    # each epoch's examples: joined long pairs, the copy augmentation
    long_fraction: float
    long_max: int
    no_augment: bool
    p_name: float
    p_number: float
    p_case: float
    copy_fraction: float
    copy: bool
    # fine-tuning, evaluation, the machine
    init_from: str | None
    continue_run: bool
    copy_test: str | None
    eval_every: int
    trace_points: int
    test_beam: int
    seed: int
    threads: int
    bf16: bool
    no_eval: bool
    average_last: int


def parse_args(argv: Sequence[str] | None = None) -> TrainConfig:
    """The options, as a TrainConfig; --help prints this module's docstring after them."""
    p = argparse.ArgumentParser(prog="python -m s2s.train", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--data", required=True, help="english<TAB>french TSV (e.g. ../shared/data/tatoeba-en-fr/fra.txt)")
    p.add_argument("--out", required=True, help="checkpoint folder to write, e.g. checkpoints/en-fr-additive")
    p.add_argument("--split-dir", default="data/tatoeba", help="where the splits and the tokenizer are kept")
    p.add_argument("--valid-pairs", type=int, default=1000, help="English sentences held out for validation")
    p.add_argument("--test-pairs", type=int, default=2000, help="English sentences held out for testing")
    p.add_argument("--work", help="resumable training state (default runs/<out name>)")
    p.add_argument("--name", help="model name (default: the --out folder's name)")
    p.add_argument("--description", default="", help="one line for the model registry")
    p.add_argument("--arch", default="rnn", choices=["rnn", "transformer"],
                   help="a recurrent encoder-decoder (model.py) or a Transformer (transformer.py)")
    p.add_argument("--attention", default="additive", choices=["none", "dot", "general", "additive", "scaled-dot"],
                   help="the recurrent model's attention function")
    p.add_argument("--cell", default="lstm", choices=["rnn", "gru", "lstm"], help="the recurrent model's cell")
    p.add_argument("--emb", type=int, default=256)
    p.add_argument("--hidden", type=int, default=256, help="state size (d_model for a Transformer)")
    p.add_argument("--layers", type=int, default=3, help="Transformer: encoder layers and decoder layers, each")
    p.add_argument("--heads", type=int, default=4, help="Transformer: attention heads per layer")
    p.add_argument("--ffn", type=int, default=1024, help="Transformer: feed-forward inner size")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--tokenizer", help="use this sentencepiece model as it is (e.g. a shipped checkpoint's "
                                       "spm.model, so two models share their pieces)")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--attention-dropout", type=float, help="Transformer: dropout on the attention weights "
                   "(default: --dropout; the paper has none)")
    p.add_argument("--ffn-dropout", type=float, help="Transformer: dropout inside the feed-forward block "
                   "(default: --dropout; the paper has none)")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=2000, help="optimizer steps (the schedule's length)")
    p.add_argument("--max-tokens", type=int, default=2400, help="target tokens per batch")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=150)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--long-fraction", type=float, default=0.1,
                   help="joined pairs per epoch, as a fraction of single pairs")
    p.add_argument("--long-max", type=int, default=4, help="most pairs joined into one long pair")
    p.add_argument("--no-augment", action="store_true",
                   help="train without the copy augmentation (names, numbers, casing)")
    p.add_argument("--p-name", type=float, default=0.5, help="share of pairs naming a person whose names are swapped")
    p.add_argument("--p-number", type=float, default=0.5, help="share of pairs with numbers whose numbers are swapped")
    p.add_argument("--p-case", type=float, default=0.04,
                   help="share of pairs put in ALL CAPS (and as many in lower case)")
    p.add_argument("--copy-fraction", type=float, default=0.0,
                   help="extra pairs per epoch, as a share of the training pairs, drawn from those naming a person "
                        "or holding a number, all swapped")
    p.add_argument("--copy", action="store_true",
                   help="attention models copy source pieces through their attention (pointer-generator); "
                        "ignored without attention")
    p.add_argument("--init-from", help="fine-tune this trained checkpoint instead of starting from random weights")
    p.add_argument("--continue-run", action="store_true",
                   help="with --init-from: more steps of the base's own recipe, not a fine-tune (its scores are "
                        "kept as 'previous', and a model trained from scratch gets no 'before')")
    p.add_argument("--copy-test", help="held-out copy test TSV (kind, english, french, tokens) scored at the end")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--trace-points", type=int, default=20)
    p.add_argument("--test-beam", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    p.add_argument("--bf16", action="store_true",
                   help="bf16 autocast on the CPU too (on a GPU it is always on): matrix products "
                        "much faster on a CPU with AVX512-BF16 (tools/bench_train_step.py); weights and optimizer "
                        "stay fp32")
    p.add_argument("--no-eval", action="store_true", help="skip the final test evaluation")
    p.add_argument("--average-last", type=int, default=1,
                   help="keep the weights of the last N evaluation points and ship the average of the last k of "
                        "them (k <= N chosen by validation loss; Vaswani et al. 2017 average checkpoints); 1 = off")
    return TrainConfig(**vars(p.parse_args(argv)))


# ---------------------------------------------------------------- the run, step by step

@dataclass
class Data:
    """A run's pairs and tokenizer: what the training loop and the final evaluation read."""
    split_dir: Path
    train_pairs: list[Pair]              # text: the copy augmentation rewrites it each epoch
    singles: list[tuple[list[int], list[int]]]   # train_pairs as (source, target) piece ids
    valid: list[tuple[list[int], list[int]]]     # the validation split, the same way
    tok: Tokenizer
    spm_file: Path                       # the tokenizer the checkpoint ships with
    augmenter: Augmenter | None
    copy_pool: list[int]                 # the train pairs that name a person or hold a number
    copy_test: list | None               # the held-out copy test, scored at the end (--copy-test)
    long_sources: list[str]              # test_long sources of 20-60 words: the loop rate's inputs


def prepare_data(cfg: TrainConfig, base: Translator | None, work: Path, main_process: bool,
                 world: int) -> Data:
    """The splits (written once, by English sentence), the tokenizer (trained once on the
    train split; a fine-tune keeps its base's, --tokenizer is used as it is, and the copy
    augmentation gives it a piece for every letter of the names) and the pairs as piece
    ids. With several processes rank 0 alone writes files while the others wait."""
    if world > 1 and not main_process:
        dist.barrier()
    split_dir = Path(cfg.split_dir)
    if not (split_dir / "test_long.tsv").is_file():
        write_splits(split_pairs(read_pairs(cfg.data), cfg.valid_pairs, cfg.test_pairs), split_dir)
    train_pairs, valid_pairs = read_pairs(split_dir / "train.tsv"), read_pairs(split_dir / "valid.tsv")
    spm_file = split_dir / "spm.model"
    if base is not None:
        spm_file = base.tokenizer.path
    elif cfg.tokenizer:
        spm_file = Path(cfg.tokenizer)
    elif not spm_file.is_file():
        train_tokenizer([s for s, _ in train_pairs] + [t for _, t in train_pairs], spm_file, cfg.vocab)
    augmenter = None
    if not cfg.no_augment:
        names = load_names()
        augmenter = Augmenter(split_names(names)[0], cfg.p_name, cfg.p_number, cfg.p_case, cfg.p_case)
        if not cfg.tokenizer:     # a given tokenizer is used as it is
            spm_file = (add_characters(spm_file, name_characters(names), work / "spm.model").path
                        if main_process else work / "spm.model")
    if world > 1 and main_process:
        dist.barrier()
    tok = Tokenizer(spm_file)
    return Data(split_dir=split_dir, train_pairs=train_pairs,
                singles=[(tok.encode(s), tok.encode(t)) for s, t in train_pairs],
                valid=[(tok.encode(s), tok.encode(t)) for s, t in valid_pairs],
                tok=tok, spm_file=spm_file, augmenter=augmenter,
                copy_pool=[i for i, p in enumerate(train_pairs) if can_copy(p)] if augmenter is not None else [],
                copy_test=read_copy_test(cfg.copy_test) if cfg.copy_test else None,
                long_sources=[s for s, _ in read_pairs(split_dir / "test_long.tsv") if 20 <= len(s.split()) <= 60])


def build_model(cfg: TrainConfig, vocab_size: int, base: Translator | None) -> Seq2Seq | Transformer:
    """The model: a fine-tune's base grown to the vocabulary (finetune_model), else new
    random weights, a recurrent encoder-decoder or a Transformer."""
    if base is not None:
        return finetune_model(base.model, vocab_size, cfg.dropout, cfg.copy)
    if cfg.arch == "transformer":
        return Transformer(TransformerConfig(
            vocab_size=vocab_size, d_model=cfg.hidden, heads=cfg.heads, encoder_layers=cfg.layers,
            decoder_layers=cfg.layers, ffn=cfg.ffn, dropout=cfg.dropout, copy=cfg.copy,
            attention_dropout=cfg.attention_dropout, ffn_dropout=cfg.ffn_dropout))
    return Seq2Seq(ModelConfig(
        vocab_size=vocab_size, emb_dim=cfg.emb, hidden=cfg.hidden, attn_dim=cfg.hidden, cell=cfg.cell,
        attention=cfg.attention, dropout=cfg.dropout, copy=cfg.copy and cfg.attention != "none"))


def start_state(cfg: TrainConfig, model: torch.nn.Module, opt: torch.optim.Optimizer, work: Path,
                base: Translator | None, data: Data, main_process: bool, say) -> dict:
    """The run's progress (step, epoch, tokens, seconds, curves, trace): resumed from the
    state in --work if there is one; a fine-tune's first start records what it starts from
    under "before" (before_metrics), which lineage() reads at the end."""
    meta = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "tokens": 0, "seconds": 0.0, "curves": [], "trace": []}
    if (work / "state.safetensors").is_file():
        meta = load_state(work, model, opt)
        say(f"resumed at step {meta['step']}")
    elif base is not None and main_process:
        meta["before"] = before_metrics(base, data.copy_test, data.long_sources, cfg.continue_run)
        say(f"before: {json.dumps({k: v for k, v in meta['before'].items() if k not in ('trace', 'curves')})}")
    return meta


@dataclass
class Process:
    """Where this process stands in a run: its work folder, device, rank of world, and its log."""
    work: Path
    device: torch.device
    rank: int
    world: int
    say: Callable[[str], None]     # rank 0: to the terminal and train.log; the others: nothing

    @property
    def main(self) -> bool:
        return self.rank == 0


def train(cfg: TrainConfig, proc: Process, tr: Translator, opt: torch.optim.Optimizer, meta: dict, data: Data
          ) -> None:
    """The training loop, `meta` updated in place: each epoch's examples (augmented,
    long pairs joined), length-bucketed batches, one optimizer step per batch at lr_at's
    rate. Every --eval-every steps rank 0 records the validation loss (a row of the curves,
    with the copy test every 250 steps), saves the resumable state and, near the end, a
    snapshot for --average-last; ~--trace-points times the probes' attention. With several
    processes each computes its shard of every batch, and the group is taken down at the end.
    The probes' trace starts at step 0 only from scratch: a fine-tune's continues its base's."""
    work, device, rank, world, say = proc.work, proc.device, proc.rank, proc.world, proc.say
    model, main_process = tr.model, proc.main
    trace_from_scratch = cfg.init_from is None
    trace_every = max(1, cfg.steps // cfg.trace_points)
    offset = meta.get("before", {}).get("steps", 0)    # a fine-tune continues the base model's step count
    model.train()
    net = DistributedDataParallel(model) if world > 1 else model     # the same model, gradients summed
    # bf16 products, fp32 weights, optimizer and loss (logits.float() below)
    bf16 = (torch.autocast(device.type, dtype=torch.bfloat16) if device.type == "cuda" or cfg.bf16
            else contextlib.nullcontext())
    bar = tqdm(total=cfg.steps, initial=meta["step"], desc=tr.name, unit="step", dynamic_ncols=True,
               disable=not main_process)
    t_start, seconds0 = time.time(), meta["seconds"]
    loss_sum, tok_sum = 0.0, 0
    my_tokens = 0       # target tokens this process computed (its shards)
    if meta["step"] == 0 and trace_from_scratch and main_process:
        meta["trace"].append(probe_trace(tr, 0))
    while meta["step"] < cfg.steps:
        examples = epoch_examples(data.singles, cfg.long_fraction, cfg.seed * 1000 + meta["epoch"], data.train_pairs,
                                  data.augmenter, data.tok, cfg.long_max, cfg.copy_fraction, data.copy_pool)
        batches = token_batches(examples, cfg.max_tokens, BOS, seed=cfg.seed * 1000 + meta["epoch"])
        for bi, batch in enumerate(batches):
            if bi < meta["batch_in_epoch"]:
                continue    # resuming inside an epoch: same order, skip what was done
            for g in opt.param_groups:
                g["lr"] = lr_at(meta["step"], cfg.steps, cfg.lr, cfg.warmup)
            mine, has_rows = shard(batch, rank, world) if world > 1 else (batch, True)
            mine = mine.to(device)
            with bf16:
                logits, _ = net(mine.src, mine.src_len, mine.tgt_in)
            loss = sequence_loss(logits.float(), mine.tgt_out, cfg.label_smoothing) * has_rows
            my_tokens += mine.n_tokens * has_rows
            opt.zero_grad(set_to_none=True)
            # DDP averages gradients over the processes: world * (my loss / all tokens) averages
            # to (the whole batch's loss / its tokens), the single-process objective
            (loss * world / batch.n_tokens).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            opt.step()
            meta["step"] += 1
            meta["batch_in_epoch"] = bi + 1
            meta["tokens"] += batch.n_tokens
            loss_sum, tok_sum = loss_sum + loss.item(), tok_sum + batch.n_tokens
            bar.update(1)
            step = meta["step"]
            if (step % trace_every == 0 or step == cfg.steps) and main_process:
                meta["trace"].append(probe_trace(tr, offset + step))
            if step % cfg.eval_every == 0 or step == cfg.steps:
                loss_sum = summed(loss_sum, world, device)     # every process's share of the batches
                if main_process:
                    meta["seconds"] = seconds0 + time.time() - t_start
                    vl = valid_loss(model, data.valid, 4000)
                    row = {"step": offset + step, "train_loss": round(loss_sum / tok_sum, 4),
                           "valid_loss": round(vl, 4), "valid_ppl": round(math.exp(vl), 3), "tokens": meta["tokens"],
                           "minutes": round(meta["seconds"] / 60 + meta.get("before", {}).get("train_minutes", 0), 2),
                           "tokens_per_s": round(meta["tokens"] / max(meta["seconds"], 1e-9))}
                    if data.copy_test and (step % 250 == 0 or step == cfg.steps):
                        model.eval()
                        row["copy"] = copy_scores(tr, data.copy_test)       # greedy: the copy skill as it is learned
                        model.train()
                    meta["curves"].append(row)
                    bar.set_postfix(valid_ppl=row["valid_ppl"], tok_s=row["tokens_per_s"])
                    say(json.dumps(row))
                    save_state(work, model, opt, meta)
                    if step > cfg.steps - cfg.average_last * cfg.eval_every and cfg.average_last > 1:
                        save_snapshot(work, model, step)
                loss_sum, tok_sum = 0.0, 0
            if step >= cfg.steps:
                break
        else:
            meta["epoch"] += 1
            meta["batch_in_epoch"] = 0
    bar.close()
    if world > 1:   # DDP keeps the copies equal; say so, from their weights
        sums: list = [None] * world
        dist.all_gather_object(sums, (weights_checksum(model), my_tokens))
        say(f"{world} processes hold identical weights: {len({c for c, _ in sums}) == 1} "
            f"(checksums {[c for c, _ in sums]}); target tokens computed by each: {[n for _, n in sums]}")
        # Every rank past the last collective, and DDP's reducer (which holds the group and gloo's
        # pending work) gone, before the group: a rank that exited with them alive was killed by
        # SIGABRT at interpreter shutdown ("terminate called without an active exception").
        dist.barrier()
        del net
        gc.collect()
        dist.destroy_process_group()


def lineage(meta: dict) -> dict:
    """What a run's metrics carry over from the runs it continues, from its progress `meta`
    and meta["before"] (before_metrics of the base, for --init-from; absent from scratch):

        train_minutes, train_tokens   the base's plus this run's
        curves, trace_points          the base's rows, then this run's (steps counted on from the base's)
        before                        the model before any fine-tune: the base's scores on a first
                                      fine-tune, the origin's (kept by every leg) on a further one
        previous                      where this leg began (the base), on a further leg or --continue-run
        finetune_minutes              every fine-tune leg's minutes added up; None with no "before"

    A base trained from scratch and continued with --continue-run has origin None: its scores
    become "previous", and the run has no "before" and no fine-tune minutes."""
    before = meta.get("before", {})
    out = {"train_minutes": round(meta["seconds"] / 60 + before.get("train_minutes", 0), 2),
           "train_tokens": meta["tokens"] + before.get("train_tokens", 0),
           "curves": before.get("curves", []) + meta["curves"],
           "trace_points": before.get("trace", []) + meta["trace"]}
    if before:      # a further leg: "before" is the origin, "previous" where this leg began
        start = {k: v for k, v in before.items() if k not in ("trace", "curves", "origin", "finetune_minutes")}
        if "origin" not in before:
            out["before"] = start
        else:
            out["previous"] = start
            if before["origin"] is not None:
                out["before"] = before["origin"]
    # a fine-tune's minutes (all its legs'); a model trained from scratch has none. Four decimals
    # (6 ms): at two, a leg shorter than 0.3 s (a test's 10 steps on a fast machine) counted as 0
    out["finetune_minutes"] = (round(meta["seconds"] / 60 + before.get("finetune_minutes", 0), 4)
                               if "before" in out else None)
    return out


def export(cfg: TrainConfig, tr: Translator, meta: dict, data: Data, work: Path, say) -> dict:
    """The shipped weights (with --average-last, the average of the last snapshots chosen
    by validation loss) in fp16 at --out, and their metrics.json: the recipe, the size, the
    lineage, the probes' attention trace. Returns the metrics."""
    model = tr.model
    model.eval()
    averaged = average_snapshots(work, model, data.valid, cfg.steps - cfg.average_last * cfg.eval_every, say) \
        if cfg.average_last > 1 else None
    args = {k: v for k, v in asdict(cfg).items() if k not in ("threads",)}
    # the model's own kind, not the flags' defaults (--init-from ignores them; a Transformer has
    # no cell and its cross-attention is scaled dot-product whatever --attention says)
    transformer = isinstance(model, Transformer)
    args.update(arch="transformer" if transformer else "rnn", attention=model.cfg.attention,
                cell=None if transformer else model.cfg.cell)
    history = lineage(meta)
    tok = data.tok
    metrics = {"name": tr.name, "train": args,
               "parameters": sum(p.numel() for p in model.parameters()),
               "train_minutes": history["train_minutes"], "train_tokens": history["train_tokens"],
               "curves": history["curves"],
               "trace": {"probes": [{"source": s, "reference": r,
                                     "source_tokens": tok.pieces(tok.encode(s)) + ["</s>"],
                                     "target_tokens": tok.pieces(tok.encode(r)) + ["</s>"]} for s, r in PROBES],
                         "points": history["trace_points"]},
               **{k: v for k, v in history.items() if k in ("previous", "before", "finetune_minutes")}}
    if averaged:
        metrics["averaged"] = averaged
    save_checkpoint(model, data.spm_file, tr.path, tr.name, cfg.description, metrics)
    return metrics


def evaluate_export(cfg: TrainConfig, tr: Translator, metrics: dict, data: Data, say) -> None:
    """The exported model, as loaded from --out, on the test splits: BLEU and chrF with
    beam search and perplexity per split, the loop rate on long inputs, the copy test;
    written into its metrics.json."""
    shipped = load_translator(tr.path)
    test = {}
    for split in ("test", "test_joined3", "test_long"):
        pairs = read_pairs(data.split_dir / f"{split}.tsv")
        t0 = time.time()
        test[split] = evaluate_pairs(shipped, pairs, cfg.test_beam)
        test[split]["perplexity"] = round(perplexity(shipped, pairs), 3)
        say(f"{split}: BLEU {test[split]['bleu']} chrF {test[split]['chrf']} "
            f"ppl {test[split]['perplexity']} ({time.time() - t0:.0f}s)")
    metrics["test"] = test
    metrics["loops"] = loop_rate(shipped, data.long_sources)
    say(f"loops: {json.dumps(metrics['loops'])}")
    if data.copy_test:
        metrics["copy"] = copy_scores(shipped, data.copy_test)
        say(f"copy test: {json.dumps(metrics['copy'])}")
    save_checkpoint(tr.model, data.spm_file, tr.path, tr.name, cfg.description, metrics)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    rank, world, device = setup_distributed()
    main_process = rank == 0
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out)
    name = cfg.name or out.name
    work = Path(cfg.work or Path("runs") / name)
    work.mkdir(parents=True, exist_ok=True)
    log = open(work / "train.log", "a") if main_process else None

    def say(msg: str) -> None:      # rank 0 alone: to the terminal and to the log
        if main_process:
            tqdm.write(msg)
            log.write(f"{time.strftime('%H:%M:%S')} {msg}\n")
            log.flush()

    base = load_translator(cfg.init_from, device="cpu") if cfg.init_from else None
    data = prepare_data(cfg, base, work, main_process, world)
    say(f"{name}: {len(data.singles)} train pairs, {len(data.valid)} valid, vocab {len(data.tok)}")
    model = build_model(cfg, len(data.tok), base).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    meta = start_state(cfg, model, opt, work, base, data, main_process, say)
    say(f"{sum(p.numel() for p in model.parameters()):,} parameters: {json.dumps(model.cfg.to_dict())}")
    tr = Translator(name, out, model, data.tok, {})
    train(cfg, Process(work, device, rank, world, say), tr, opt, meta, data)
    if not main_process:
        return 0
    metrics = export(cfg, tr, meta, data, work, say)
    if not cfg.no_eval:
        evaluate_export(cfg, tr, metrics, data, say)
    say(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
