"""The Elman RNN written out (Elman 1990): the plain recurrent cell the gated ones improve on.

    u_t = W x_t + U h_{t-1} + b          the pre-activation
    h_t = tanh(u_t)                      the state, both memory and output

Backpropagating one step multiplies the gradient by dh_t/dh_{t-1} = diag(1 - h_t^2) U, and
k steps by k such factors: unless U's spectral radius and the tanh slopes multiply out to
about 1 at every step, the product shrinks (or grows) geometrically in k. That is the
vanishing (exploding) gradient the LSTM's and GRU's gates avoid. nn.RNN with its default
tanh is this cell; its weights are used here as they are.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .lstm import trace_stack


@dataclass
class ElmanWeights:
    """One layer in PyTorch's layout: W (H, input), U (H, H) and the two biases summed."""
    w_ih: torch.Tensor
    w_hh: torch.Tensor
    bias: torch.Tensor

    @property
    def hidden(self) -> int:
        return self.w_hh.size(1)

    @classmethod
    def of_layer(cls, rnn: nn.RNN, layer: int = 0) -> "ElmanWeights":
        if rnn.nonlinearity != "tanh":
            raise ValueError("only the tanh Elman RNN is written out here")
        g = lambda n: getattr(rnn, f"{n}_l{layer}").detach()        # noqa: E731
        return cls(g("weight_ih"), g("weight_hh"), g("bias_ih") + g("bias_hh"))


def elman_step(x: torch.Tensor, h: torch.Tensor, w: ElmanWeights) -> tuple[torch.Tensor, torch.Tensor]:
    """One step for a batch, x (B, input) and h (B, H) -> (h_t, u_t). Differentiable in x and h."""
    u = F.linear(x, w.w_ih, w.bias).addmm(h, w.w_hh.t())
    return torch.tanh(u), u


@dataclass
class ElmanTrace:
    """What one Elman layer computed over a sequence: (T, H) each."""
    hidden: torch.Tensor
    preactivation: torch.Tensor

    SIGNALS = {"hidden": "h = tanh(u), the state (the RNN's only memory)"}
    GATES = ()
    MEMORY = "hidden"

    def to_lists(self, digits: int = 5) -> dict[str, list[list[float]]]:
        return {name: getattr(self, name).float().cpu().numpy().round(digits).tolist()
                for name in ("hidden", "preactivation")}


def run_elman_layer(w: ElmanWeights, xs: torch.Tensor) -> torch.Tensor:
    """h_1..h_T over xs (T, input) from a zero state, by PyTorch's fused kernel."""
    params = [w.w_ih, w.w_hh, w.bias, torch.zeros_like(w.bias)]
    zero = xs.new_zeros(1, 1, w.hidden)
    return torch.rnn_tanh(xs.unsqueeze(1), zero, params, True, 1, 0.0, False, False, False)[0][:, 0]


@torch.inference_mode()
def trace_elman_layer(w: ElmanWeights, xs: torch.Tensor, hs: torch.Tensor | None = None) -> ElmanTrace:
    """Pre-activation and state of one layer over xs (T, input) from a zero state. From the
    fused kernel's hs, u_t needs only x_t and h_{t-1}, so all steps are computed at once;
    tanh(u_t) equals the kernel's h_t only if the equation is right (tests, 1e-5)."""
    if xs.size(0) == 0:
        raise ValueError("nothing to trace: the sequence is empty")
    if hs is None:
        hs = run_elman_layer(w, xs)
    h_prev = torch.cat([hs.new_zeros(1, w.hidden), hs[:-1]])
    h, u = elman_step(xs, h_prev, w)
    return ElmanTrace(hidden=h, preactivation=u)


def trace_elman(rnn: nn.RNN, xs: torch.Tensor) -> list[ElmanTrace]:
    """Every layer of a unidirectional nn.RNN over xs (T, input): lstm.trace_stack with this cell."""
    return trace_stack(rnn, xs, ElmanWeights.of_layer, run_elman_layer, trace_elman_layer)
