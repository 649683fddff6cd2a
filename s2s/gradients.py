"""Gradient flow: how much a prediction still depends on the state k steps back.

Backpropagation through time multiplies the gradient by one Jacobian per step:

    Elman RNN   dh_t/dh_{t-1} = diag(1 - h_t^2) U          shrinks or grows geometrically
    LSTM        dc_t/dc_{t-1} = diag(f_t)  (along the cell)  vanishes only where f closes
    GRU         dh_t/dh_{t-1} = diag(1 - z_t) + ...          likewise with its update gate

Two measurements of that, one on trained character models and one on untrained cells:

1. trained (`gradient_flow`): for end positions t spread over a text, the norm of the
   gradient of the next character's log-probability with respect to the top layer's
   hidden state k steps earlier,

       g(k) = mean_t || d log p(x_{t+1} | x_<=t) / d h_{t-k} ||,    k = 0..K,

   and for an LSTM also the memory path, prod_{s=t-k+1..t} f_s per cell (averaged over t).
   Each end position gets its own window of K + 1 steps that starts from the model's real
   state at t - K - 1 (read from the text before it), and a zero "probe" is added to h after
   every step of the window: the gradient with respect to the probe is the gradient with
   respect to h, and one backward pass gives them all. The windows of different end
   positions are independent rows of one batch.
2. untrained (`untrained_flow`), the live demonstration: random cells whose recurrent
   matrices are rho * (an orthogonal matrix), so rho is both their spectral radius and
   their norm; the norm of d(u . m_T)/dm_t for the memory m (an LSTM's c, a GRU's or an
   RNN's h) and a random unit vector u, against T - t.

    python -m s2s.gradients --model checkpoints/charlm-war-and-peace --text-file FILE --json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .charlm import CharLM
from .checkpoint import CheckpointError, load_charlm
from .elman import ElmanWeights, elman_step
from .gru import GRUWeights, gru_step
from .lstm import LSTMWeights, lstm_step
from .text import InputError, check_range, clean_passage, read_text_file

MAX_DISTANCE = 500
DEMO_RANGES = {"radius": (0.1, 3.0), "forget_bias": (-5.0, 10.0), "hidden": (8, 256), "length": (10, 200)}
DEMO_DEFAULTS = {"radius": 1.0, "forget_bias": 3.0, "hidden": 64, "length": 100}     # the page opens here

# A step of one layer for a batch: (x, state) -> (h, state, keep) where keep is what the
# memory path multiplies by (an LSTM's f, a GRU's 1 - z; None for an RNN).
Step = Callable[[torch.Tensor, tuple], tuple[torch.Tensor, tuple, torch.Tensor | None]]


def layer_step(cell: str, weights) -> Step:
    """The step function of one layer written out (lstm.py, gru.py, elman.py)."""
    if cell == "lstm":
        def step(x, state):
            out = lstm_step(x, state[0], state[1], weights)
            return out.hidden, (out.hidden, out.cell), out.forget_gate
    elif cell == "gru":
        def step(x, state):
            h, z, _, _ = gru_step(x, state[0], weights)
            return h, (h,), 1 - z
    elif cell == "rnn":
        def step(x, state):
            h, _ = elman_step(x, state[0], weights)
            return h, (h,), None
    else:
        raise ValueError(f"unknown cell {cell!r}")
    return step


def _with_probe(state: tuple, probe: torch.Tensor) -> tuple:
    """The state with `probe` added to h: d loss / d probe = d loss / d h."""
    return (state[0] + probe, *state[1:])


# ---------------------------------------------------------------- trained character models

@dataclass
class GradientFlow:
    cell: str
    distances: list[int]              # k = 0..K
    grad_norm: list[float]            # g(k), not normalised
    positions: int                    # end positions t averaged over
    forget_product: np.ndarray | None = None   # (K + 1, H): mean over t of prod f (LSTM top layer)

    def ratio(self, k: int) -> float:
        """g(k) / g(0): the share of the gradient left after k steps."""
        return self.grad_norm[k] / self.grad_norm[0]

    def half_lives(self) -> np.ndarray | None:
        """Per LSTM cell, the first distance at which its mean forget-gate product falls
        below 1/2 (K + 1 where it never does within K): how long the cell keeps half its memory."""
        if self.forget_product is None:
            return None
        below = self.forget_product < 0.5
        return np.where(below.any(0), below.argmax(0), below.shape[0])


def gradient_flow(model: CharLM, text: str, max_distance: int = 200, positions: int = 64) -> GradientFlow:
    """g(k) for k = 0..max_distance on `text` (see the module docstring), averaged over up
    to `positions` end positions spread evenly over the text."""
    check_range("The distance", max_distance, 1, MAX_DISTANCE)
    check_range("The number of end positions", positions, 1, 10_000)
    K, cfg = int(max_distance), model.cfg
    if len(text) < K + 2:
        raise InputError(f"The text has {len(text):,} characters; measuring {K} steps back needs at least {K + 2:,}.")
    model.eval()
    device = model.embed.weight.device
    ids = model.encode(text).to(device)
    traces = [type(t)(**{k: v.clone() for k, v in vars(t).items()})     # out of inference mode, for autograd
              for t in model.trace(text, max_chars=len(text))]
    top = traces[-1]
    with torch.no_grad():
        inputs = model.embed(ids) if cfg.layers == 1 else traces[-2].hidden.to(device)    # what the top layer reads
    rnn, layer = model.rnn, cfg.layers - 1
    weights = {"lstm": LSTMWeights.of_layer, "gru": GRUWeights.of_layer,
               "rnn": ElmanWeights.of_layer}[cfg.cell](rnn, layer)
    step = layer_step(cfg.cell, weights)

    ends = torch.linspace(K, len(text) - 2, min(positions, len(text) - 1 - K)).round().long().unique().to(device)
    starts = ends - K                                              # each window reads x_{t-K} .. x_t
    window = inputs[starts[:, None] + torch.arange(K + 1, device=device)]        # (M, K + 1, in)
    before = (starts - 1).clamp(min=0)
    fresh = (starts == 0)[:, None]                                 # a window at the text's start begins from zero
    h0 = top.hidden.to(device)[before].masked_fill(fresh, 0.0)
    state = (h0, top.cell.to(device)[before].masked_fill(fresh, 0.0)) if cfg.cell == "lstm" else (h0,)

    probes = []
    with torch.enable_grad():
        for j in range(K + 1):
            h, state, _ = step(window[:, j], state)
            probes.append(torch.zeros_like(h, requires_grad=True))
            state = _with_probe(state, probes[-1])
        log_p = torch.log_softmax(model.out(state[0]), dim=-1).gather(1, ids[ends + 1][:, None])
        grads = torch.autograd.grad(log_p.sum(), probes)
    norms = torch.stack([g.double().norm(dim=1).mean() for g in grads]).flip(0)   # index k = K - j (float64: see below)
    product = None
    if cfg.cell == "lstm":
        log_f = torch.cat([top.forget_gate.new_zeros(1, cfg.hidden), top.forget_gate.clamp_min(1e-30).log().cumsum(0)])
        back = (ends[:, None] - torch.arange(K + 1, device=device)).cpu()      # t - k
        # prod_{s=t-k+1..t} f_s = exp(sum_{s<=t} log f_s - sum_{s<=t-k} log f_s)
        product = (log_f[ends.cpu() + 1][:, None, :] - log_f[back + 1]).exp().mean(0).numpy()
    return GradientFlow(cfg.cell, list(range(K + 1)), [float(n) for n in norms], int(ends.numel()), product)


# ---------------------------------------------------------------- untrained cells: the live demonstration

@dataclass
class UntrainedFlow:
    cell: str
    distances: list[int]              # T - t = 0..length-1
    grad_norm: list[float]            # mean over the batch of ||d(u . m_T)/dm_t||; 1 at distance 0
    keep_product: list[float] | None  # mean prod of f (LSTM) or 1 - z (GRU) from t + 1 to T


def _orthogonal(n: int, gen: torch.Generator) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(n, n, generator=gen))
    return q * torch.sign(torch.diagonal(r))        # a uniformly random orthogonal matrix


def untrained_weights(cell: str, hidden: int, radius: float, forget_bias: float, input_dim: int,
                      gen: torch.Generator, input_scale: float = 0.3):
    """Random weights: every recurrent block rho * Q (Q orthogonal, so its spectral radius
    and norm are both rho), input weights N(0, input_scale^2 / input_dim), biases 0 except
    the LSTM's forget gate and the GRU's keep gate (PyTorch's z', the lecture's 1 - z),
    which get `forget_bias`, so both cells keep sigmoid(forget_bias) of their memory per
    step at rest."""
    blocks = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
    w_hh = torch.cat([radius * _orthogonal(hidden, gen) for _ in range(blocks)])
    w_ih = torch.randn(blocks * hidden, input_dim, generator=gen) * input_scale / math.sqrt(input_dim)
    bias = torch.zeros(blocks * hidden)
    if cell == "lstm":
        bias[hidden:2 * hidden] = forget_bias            # PyTorch's order i, f, g, o
        return LSTMWeights(w_ih, w_hh, bias)
    if cell == "gru":
        bias[hidden:2 * hidden] = forget_bias            # PyTorch's order r, z', n
        return GRUWeights(w_ih, w_hh, bias, torch.zeros_like(bias))
    return ElmanWeights(w_ih, w_hh, bias)


def untrained_flow(cell: str, radius: float = 1.0, forget_bias: float = 3.0, hidden: int = 64,
                   length: int = 100, seed: int = 0, batch: int = 16, input_dim: int = 32,
                   warmup: int = 50) -> UntrainedFlow:
    """||d(u . m_T)/dm_t|| against T - t for a random untrained `cell` reading random inputs
    x_t ~ N(0, I): the share of a gradient arriving at the memory m_T (an LSTM's cell state
    c, a GRU's or RNN's h) that is left at m_t, the path the lecture's equations are about.
    The cell first reads `warmup` inputs unmeasured, so that t = 1 starts from the state
    such a cell typically has, not from the all-zero start (where its slopes are unusual)."""
    check_range("The spectral radius", radius, *DEMO_RANGES["radius"])
    check_range("The forget-gate bias", forget_bias, *DEMO_RANGES["forget_bias"])
    check_range("The hidden size", hidden, *DEMO_RANGES["hidden"])
    check_range("The sequence length", length, *DEMO_RANGES["length"])
    gen = torch.Generator().manual_seed(seed)
    step = layer_step(cell, untrained_weights(cell, hidden, radius, forget_bias, input_dim, gen))
    xs = torch.randn(warmup + length, batch, input_dim, generator=gen)
    u = torch.nn.functional.normalize(torch.randn(batch, hidden, generator=gen), dim=1)
    zero = torch.zeros(batch, hidden)
    state = (zero, zero) if cell == "lstm" else (zero,)
    memory = 1 if cell == "lstm" else 0          # which part of the state is the memory
    for t in range(warmup):
        state = step(xs[t], state)[1]
    probes, keeps = [], []
    with torch.enable_grad():
        for t in range(warmup, warmup + length):
            _, state, keep = step(xs[t], state)
            probes.append(torch.zeros(batch, hidden, requires_grad=True))
            state = tuple(s + probes[-1] if i == memory else s for i, s in enumerate(state))
            if keep is not None:
                keeps.append(keep.detach())
        grads = torch.autograd.grad((state[memory] * u).sum(), probes)
    # the norm in float64: a float32 gradient with entries near 1e19 is still finite, but the sum of
    # their squares is not, and the chart would show the norm's overflow as the gradient's
    norms = [float(g.double().norm(dim=1).mean()) for g in reversed(grads)]    # distance T - t = 0, 1, ...
    keep_product = None
    if keeps:
        # prod_{s=t+1..T} keep_s for distance T - t: a cumulative product from the end
        rev = torch.stack(keeps[::-1])                                      # (length, B, H), newest first
        cum = torch.cat([torch.ones(1, batch, hidden), rev[:-1].cumprod(0)])
        keep_product = [float(v) for v in cum.mean((1, 2))]
    return UntrainedFlow(cell, list(range(length)), norms, keep_product)


# ---------------------------------------------------------------- CLI

def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.gradients", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a character-level checkpoint folder")
    p.add_argument("--text-file", required=True, help="the text to measure on ('-' for stdin)")
    p.add_argument("--max-distance", type=int, default=200, help=f"K, the farthest step back (1-{MAX_DISTANCE})")
    p.add_argument("--positions", type=int, default=64, help="end positions t averaged over")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    try:
        check_range("--max-distance", a.max_distance, 1, MAX_DISTANCE)
        lm = load_charlm(a.model)
        raw = read_text_file(a.text_file)
        flow = gradient_flow(lm.model, clean_passage(raw), a.max_distance, a.positions)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = {"model": lm.name, "cell": flow.cell, "distances": flow.distances,
           "grad_norm": [float(f"{g:.6g}") for g in flow.grad_norm], "positions": flow.positions}
    if flow.forget_product is not None:
        out["forget_product"] = [round(float(v), 6) for v in flow.forget_product.mean(1)]
    if a.json:
        print(json.dumps(out))
        return 0
    print(f"{lm.name} ({flow.cell}), {flow.positions} end positions: g(k) = mean ||d log p(x_t+1) / d h_t-k||")
    for k in sorted({0, 1, 5, 10, 20, 50, 100, 200, a.max_distance}):
        if k <= a.max_distance:
            print(f"  k = {k:>3}: g = {flow.grad_norm[k]:.3e}   g(k)/g(0) = {flow.ratio(k):.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
