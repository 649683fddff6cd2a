"""Counterfactual attention: does the output change when the attention does?

Attention weights can explain an output only if the output depends on them. So at step j
(everything before j as decoded, the decoder state s_j unchanged) replace alpha_j by

    uniform       1/m on every source piece
    permute       a random permutation of alpha_j (the same multiset of weights)
    adversarial   argmax_a JSD(a, alpha_j)  subject to  TV(p(. | a), p(. | alpha_j)) <= epsilon

and read the next-token distribution, the Jensen-Shannon divergence moved (bits, 0..1),
the total variation TV(p, q) = 1/2 sum_y |p_y - q_y| it caused, and the greedy continuation
from there (later steps attend as the model does). The adversary is found by gradient
ascent (Adam) on the logits z of a = softmax(z) from ADV_RESTARTS random starts, with the
penalty ADV_PENALTY * max(0, TV - epsilon); the last iterate is then pulled back towards alpha_j
along (1 - t) alpha_j + t a (bisection on t) until TV <= epsilon holds, so the answer
always satisfies the constraint. (Jain & Wallace 2019 asked this of text classifiers.)

A recurrent decoder has one attention per step, which model.step accepts in place of its
own (alpha=...); a Transformer has layers x heads of it, so counterfactuals are for
recurrent models only. The decoding is traced once (trace: what every step started from)
and any step is then run again with other weights (step_with_attention).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from .attributions import check_model, source_ids, target_ids
from .checkpoint import Translator
from .interface import Memory, State, Step
from .model import Seq2Seq
from .text import MAX_DECODE_LEN, InputError, check_range
from .tokenizer import BOS, EOS

KINDS = ("uniform", "permute", "adversarial")
EPSILON = 0.01            # the adversary's TV budget: no set of tokens gains or loses more than 1 point
ADV_RESTARTS, ADV_ITERATIONS, ADV_LR, ADV_PENALTY = 8, 150, 0.1, 100.0
TOP = 5                   # next tokens shown before / after a counterfactual


# ---------------------------------------------------------------------------------------
# How far two distributions are apart


def jsd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence in bits over the last axis: 1/2 KL(p||m) + 1/2 KL(q||m), m = (p + q)/2."""
    m = (p + q) / 2

    def kl(a):
        return (a * (a.clamp_min(1e-30).log() - m.clamp_min(1e-30).log())).sum(-1)

    return (kl(p) + kl(q)) / (2 * math.log(2))


def tv(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Total variation distance over the last axis: 1/2 sum_y |p_y - q_y|."""
    return (p - q).abs().sum(-1) / 2


# ---------------------------------------------------------------------------------------
# A decoding traced, so that any step can run again with other attention weights


@dataclass
class Trace:
    """A forced decoding through model.step, with what each step j started from, so that
    any step can be run again with other attention weights."""
    memory: Memory              # one sentence
    y_prev: torch.Tensor        # (T,) y_{j-1} (BOS at j = 0)
    state: State                # each (T, ...): the state before step j (a copying model: alpha_{j-1} too)
    feed: torch.Tensor          # (T, E): h~_{j-1}
    alpha: torch.Tensor         # (T, S)
    log_probs: torch.Tensor     # (T, V)


@torch.no_grad()
def trace(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> Trace:
    """Forced decoding of tgt (T,) for the sentence src (1, S), step by step, keeping each step's inputs."""
    memory, state = model.encode(src, torch.tensor([src.size(1)]))
    feed = model.initial_feed(1)
    y_prev = torch.cat([tgt.new_tensor([BOS]), tgt[:-1]])
    states, feeds, alphas, logps = [], [], [], []
    for j in range(tgt.numel()):
        states.append(state)
        feeds.append(feed)
        st = model.step(y_prev[j:j + 1], state, feed, memory)
        alphas.append(st.alpha)
        logps.append(F.log_softmax(st.logits.float(), dim=-1))
        state, feed = st.state, st.feed
    return Trace(memory, y_prev, tuple(torch.cat(s) for s in zip(*states)), torch.cat(feeds),
                 torch.cat(alphas), torch.cat(logps))


def step_with_attention(model: Seq2Seq, run: Trace, steps: torch.Tensor, alpha: torch.Tensor) -> Step:
    """Steps `steps` (K,) of a traced decoding run again, each with its own attention
    weights alpha (K, S) in place of the model's: model.step's outputs for the K rows."""
    memory = run.memory.select(torch.zeros(steps.numel(), dtype=torch.long, device=steps.device))
    return model.step(run.y_prev[steps], tuple(s[steps] for s in run.state), run.feed[steps], memory, alpha=alpha)


# ---------------------------------------------------------------------------------------
# The replacement weights


def adversarial_attention(model: Seq2Seq, run: Trace, j: int, epsilon: float = EPSILON, seed: int = 0,
                          restarts: int = ADV_RESTARTS, iterations: int = ADV_ITERATIONS) -> torch.Tensor:
    """The attention a (S,) at step j that maximises JSD(a, alpha_j) with the output kept
    within TV epsilon (see the module docstring): Adam on z, a = softmax(z), from
    `restarts` random logits at once, loss -JSD + ADV_PENALTY * max(0, TV - epsilon);
    then each restart's last iterate pulled back to the constraint by bisection on the
    line towards alpha_j, and the best of those and of every feasible iterate returned."""
    gen = torch.Generator().manual_seed(seed)
    alpha, p = run.alpha[j:j + 1], run.log_probs[j:j + 1].exp()
    S = alpha.size(1)
    steps = torch.full((restarts,), j, dtype=torch.long, device=alpha.device)
    z = (torch.randn(restarts, S, generator=gen) * 2.0).to(alpha.device).requires_grad_(True)
    opt = torch.optim.Adam([z], lr=ADV_LR)
    best, best_jsd = alpha[0].clone(), 0.0

    def measure(a):
        q = F.log_softmax(step_with_attention(model, run, steps[:a.size(0)], a).logits.float(), dim=-1).exp()
        return jsd(a, alpha), tv(q, p)

    for _ in range(iterations):
        with torch.enable_grad():
            a = F.softmax(z, dim=-1)
            div, dist = measure(a)
            loss = (-div + ADV_PENALTY * F.relu(dist - epsilon)).sum()
            (z.grad,) = torch.autograd.grad(loss, z)     # z only: the model's weights collect nothing
        a, div, dist = a.detach(), div.detach(), dist.detach()
        ok = dist <= epsilon                      # keep the best feasible point seen
        if ok.any() and float(div[ok].max()) > best_jsd:
            k = int(torch.where(ok, div, torch.full_like(div, -1.0)).argmax())
            best, best_jsd = a[k].clone(), float(div[k])
        opt.step()
    with torch.no_grad():                         # projection: the largest t with TV <= epsilon
        a = F.softmax(z, dim=-1)
        lo, hi = alpha.new_zeros(restarts, 1), alpha.new_ones(restarts, 1)
        feasible = measure(a)[1] <= epsilon
        lo[feasible] = 1.0
        for _ in range(20):
            mid = (lo + hi) / 2
            ok = measure((1 - mid) * alpha + mid * a)[1] <= epsilon
            lo = torch.where(ok[:, None], mid, lo)
            hi = torch.where(ok[:, None], hi, mid)
        cand = (1 - lo) * alpha + lo * a
        div, dist = measure(cand)
        div = torch.where(dist <= epsilon, div, torch.full_like(div, -1.0))
        k = int(div.argmax())
        if float(div[k]) > best_jsd:
            best = cand[k]
    return best


def new_attention(kind: str, model: Seq2Seq, run: Trace, j: int, epsilon: float = EPSILON, seed: int = 0
                  ) -> torch.Tensor:
    """The replacement for alpha_j (S,) of a counterfactual `kind`."""
    alpha = run.alpha[j]
    if kind == "uniform":
        return torch.full_like(alpha, 1.0 / alpha.numel())
    if kind == "permute":
        return alpha[torch.randperm(alpha.numel(), generator=torch.Generator().manual_seed(seed))]
    if kind == "adversarial":
        return adversarial_attention(model, run, j, epsilon, seed)
    raise InputError(f"Unknown counterfactual {kind!r}: use {', '.join(KINDS)}.")


# ---------------------------------------------------------------------------------------
# One counterfactual, and every step at once


@dataclass
class Counterfactual:
    """What replacing alpha_j at one step did to the next token and to the rest of the translation."""
    step: int
    kind: str
    token: str                            # y_j, the output token at that step in the explained decoding
    alpha_before: list[float]
    alpha_after: list[float]
    top_before: list[tuple[str, float]]   # next tokens and probabilities
    top_after: list[tuple[str, float]]
    jsd: float                            # JSD(alpha_after, alpha_before), bits
    tv: float                             # TV(p_after, p_before)
    argmax_survives: bool
    continuation_before: list[str]        # greedy from step j on, the model's own attention
    continuation_after: list[str]         # the same with alpha_j replaced
    translation_before: str
    translation_after: str
    epsilon: float | None = None          # the adversary's budget

    def to_json(self) -> dict:
        d = dict(vars(self))
        d["top_before"] = [[t, p] for t, p in self.top_before]
        d["top_after"] = [[t, p] for t, p in self.top_after]
        return d


@torch.inference_mode()
def _greedy_from(model: Seq2Seq, memory: Memory, state: State, feed: torch.Tensor, first: int,
                 max_steps: int) -> list[int]:
    """Greedy decoding on from a decoder state whose last output was `first`."""
    ids = [first]
    while ids[-1] != EOS and len(ids) < max_steps:
        st = model.decode_step(feed.new_tensor([ids[-1]], dtype=torch.long), state, feed, memory)
        state, feed = st.state, st.feed
        ids.append(int(st.logits[0].argmax()))
    return ids


def check_counterfactual(tr: Translator) -> None:
    """Counterfactual attention replaces a recurrent decoder's one attention per step."""
    check_model(tr)
    if getattr(tr.model.cfg, "arch", "rnn") != "rnn":
        raise InputError(f"{tr.name} is a Transformer: a counterfactual replaces a recurrent decoder's one "
                         "attention per step, and a Transformer has layers × heads of it; pick a recurrent "
                         "attention model for this part.")


def counterfactual(tr: Translator, text: str, step: int, kind: str, reference: str | None = None,
                   epsilon: float = EPSILON, seed: int = 0, target: Sequence[int] | None = None) -> Counterfactual:
    """Replace alpha_j at step `step` of the decoding of `text` (its greedy output, or the
    reference, or the piece ids `target`) and report what changes (see Counterfactual)."""
    check_counterfactual(tr)
    check_range("Epsilon", epsilon, 0.0, 1.0)
    model, tok = tr.model, tr.tokenizer
    src = torch.tensor([source_ids(tr, text)], device=tr.device)
    tgt_list = list(target) if target is not None else target_ids(tr, text, reference)[0]
    check_range("The counterfactual step", step, 0, len(tgt_list) - 1)
    tgt = torch.tensor(tgt_list, device=tr.device)
    run = trace(model, src, tgt)
    a = new_attention(kind, model, run, step, epsilon, seed).detach()
    with torch.no_grad():
        steps = torch.tensor([step, step], device=tr.device)
        st = step_with_attention(model, run, steps, torch.stack([run.alpha[step], a]))
        logp = F.log_softmax(st.logits.float(), dim=-1)
    p_before, p_after = logp[0].exp(), logp[1].exp()
    max_steps = min(2 * src.size(1) + 10, MAX_DECODE_LEN) - step     # s2s.decode's length limit
    cont = []
    for row in (0, 1):
        state = tuple(s[row:row + 1] for s in st.state)
        cont.append(_greedy_from(model, run.memory, state, st.feed[row:row + 1], int(logp[row].argmax()), max_steps))

    def top(p):
        v, i = p.topk(TOP)
        return [(tok.piece(k), round(float(x), 6)) for x, k in zip(v, i.tolist())]

    prefix = tgt_list[:step]
    return Counterfactual(step, kind, tok.piece(tgt_list[step]), run.alpha[step].tolist(), a.tolist(),
                          top(p_before), top(p_after), float(jsd(a, run.alpha[step])), float(tv(p_after, p_before)),
                          bool(p_after.argmax() == p_before.argmax()), tok.pieces(cont[0]), tok.pieces(cont[1]),
                          tok.decode(prefix + cont[0]), tok.decode(prefix + cont[1]),
                          epsilon if kind == "adversarial" else None)


@torch.no_grad()
def permutation_survival(model: Seq2Seq, run: Trace, seed: int = 0) -> list[bool]:
    """For every step j at once: does argmax_y p(y | ...) stay the same when alpha_j is
    replaced by a random permutation of itself?"""
    gen = torch.Generator().manual_seed(seed)
    T, S = run.alpha.shape
    perm = torch.argsort(torch.rand(T, S, generator=gen), dim=1).to(run.alpha.device)   # one permutation per step
    st = step_with_attention(model, run, torch.arange(T, device=perm.device), run.alpha.gather(1, perm))
    return (st.logits.argmax(-1) == run.log_probs.argmax(-1)).tolist()
