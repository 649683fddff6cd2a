"""The GRU written out (Cho et al. 2014), in the lecture's form, to trace what trained cells do.

    r_t = sigmoid(W_r x_t + U_r h_{t-1} + b_r)              reset gate: how much of h_{t-1} the candidate sees
    z_t = sigmoid(W_z x_t + U_z h_{t-1} + b_z)              update gate: how much of the candidate is written
    h~_t = tanh(W_h x_t + r_t * (U_h h_{t-1} + b_hh) + b_ih)   candidate state
    h_t = (1 - z_t) * h_{t-1} + z_t * h~_t                   the new state: a mix of old and candidate

The GRU has no separate memory: h is both the state carried forward and what the next
layer sees. z_t near 0 keeps h_{t-1} as it is, so the gradient passes back unchanged
(dh_t/dh_{t-1} holds the term diag(1 - z_t), as the LSTM's holds diag(f_t)).

PyTorch's nn.GRU stacks the weights in the order r, z, n and writes the last line as
h_t = (1 - z'_t) * n_t + z'_t * h_{t-1}: its z' is the lecture's 1 - z. Traces here use the
lecture's z, computed as z = 1 - z' = sigmoid(-(W_z x + U_z h + b_z)).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .lstm import trace_stack


@dataclass
class GRUWeights:
    """One GRU layer in PyTorch's layout: (3H, input), (3H, H) and the two (3H,) biases,
    kept apart because b_hh's candidate part sits inside r_t * (...)."""
    w_ih: torch.Tensor
    w_hh: torch.Tensor
    b_ih: torch.Tensor
    b_hh: torch.Tensor

    @property
    def hidden(self) -> int:
        return self.w_hh.size(1)

    @classmethod
    def of_layer(cls, gru: nn.GRU, layer: int = 0) -> "GRUWeights":
        return cls(*(getattr(gru, f"{n}_l{layer}").detach() for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")))


def gru_step(x: torch.Tensor, h: torch.Tensor,
             w: GRUWeights) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step for a batch, x (B, input) and h (B, H) -> (h_t, z_t, r_t, h~_t), z in the lecture's
    sense. Differentiable in x and h (the gradient-flow measurements go through it)."""
    gx = F.linear(x, w.w_ih, w.b_ih).chunk(3, dim=-1)
    gh = F.linear(h, w.w_hh, w.b_hh).chunk(3, dim=-1)
    r = torch.sigmoid(gx[0] + gh[0])
    z = torch.sigmoid(-(gx[1] + gh[1]))               # the lecture's z = 1 - PyTorch's z'
    candidate = torch.tanh(gx[2] + r * gh[2])
    return (1 - z) * h + z * candidate, z, r, candidate


@dataclass
class GRUTrace:
    """Everything one GRU layer computed over a sequence: each field is (T, H)."""
    hidden: torch.Tensor
    update_gate: torch.Tensor
    reset_gate: torch.Tensor
    candidate: torch.Tensor

    SIGNALS = {"hidden": "h, the state (the GRU's only memory)",
               "update_gate": "update gate z (0 keeps h; 1 overwrites it)",
               "reset_gate": "reset gate r",
               "candidate": "candidate h~"}
    GATES = ("update_gate", "reset_gate")
    MEMORY = "hidden"          # the signal a cell's memory is ranked by

    def to_lists(self, digits: int = 5) -> dict[str, list[list[float]]]:
        return {name: getattr(self, name).float().cpu().numpy().round(digits).tolist() for name in self.SIGNALS}


def run_gru_layer(w: GRUWeights, xs: torch.Tensor) -> torch.Tensor:
    """h_1..h_T of one layer over xs (T, input) from a zero state, by PyTorch's fused kernel."""
    gru = nn.GRU(xs.size(1), w.hidden).to(xs.device, xs.dtype)
    with torch.no_grad():
        for name, t in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"),
                           (w.w_ih, w.w_hh, w.b_ih, w.b_hh)):
            getattr(gru, name).copy_(t)
        return gru(xs.unsqueeze(1))[0][:, 0]


@torch.inference_mode()
def trace_gru_layer(w: GRUWeights, xs: torch.Tensor, hs: torch.Tensor | None = None) -> GRUTrace:
    """Every gate and state of one layer over xs (T, input) from a zero state.

    hs (T, H) come from the fused kernel (run here if not given). Each gate at step t needs
    only x_t and h_{t-1}, so all steps are computed at once from the equations above, and
    h_t = (1 - z) h_{t-1} + z h~ is recomputed from them: it equals the fused kernel's h only
    if every gate is right (tests check it within 1e-5)."""
    if xs.size(0) == 0:
        raise ValueError("nothing to trace: the sequence is empty")
    if hs is None:
        hs = run_gru_layer(w, xs)
    h_prev = torch.cat([hs.new_zeros(1, w.hidden), hs[:-1]])
    h, z, r, candidate = gru_step(xs, h_prev, w)
    return GRUTrace(hidden=h, update_gate=z, reset_gate=r, candidate=candidate)


def trace_gru(gru: nn.GRU, xs: torch.Tensor) -> list[GRUTrace]:
    """Every layer of a unidirectional nn.GRU over xs (T, input): lstm.trace_stack with this cell."""
    return trace_stack(gru, xs, GRUWeights.of_layer, run_gru_layer, trace_gru_layer)
