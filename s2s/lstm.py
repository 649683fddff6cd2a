"""The LSTM written out: one place for its equations, used to decode fast and to trace
what trained cells do (Hochreiter & Schmidhuber 1997; the form of Karpathy et al. 2015).

    i_t = sigmoid(W_i [x_t ; h_{t-1}] + b_i)    input gate: how much of g_t is written
    f_t = sigmoid(W_f [x_t ; h_{t-1}] + b_f)    forget gate: how much of c_{t-1} is kept
    g_t = tanh   (W_g [x_t ; h_{t-1}] + b_g)    candidate values
    o_t = sigmoid(W_o [x_t ; h_{t-1}] + b_o)    output gate: how much of the memory is shown
    c_t = f_t * c_{t-1} + i_t * g_t             the cell state, the LSTM's memory
    h_t = o_t * tanh(c_t)                       the hidden state, what the next layer sees

f_t near 1 keeps the memory unchanged, so gradients flow back through c without vanishing;
f_t near 0 wipes it. PyTorch stacks the four gates' weights in the order i, f, g, o, so the
weights of a trained nn.LSTM / nn.LSTMCell can be used here as they are.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

GATES = ("input_gate", "forget_gate", "candidate", "output_gate")


@dataclass
class LSTMWeights:
    """One LSTM layer (one direction): W_x, W_h in PyTorch's (4H, in) layout, which is also
    the fastest layout for the products x W_x^T here, and the two biases summed."""
    w_ih: torch.Tensor     # (4H, input)
    w_hh: torch.Tensor     # (4H, H)
    bias: torch.Tensor     # (4H,)  b_ih + b_hh
    _by_gate: tuple[torch.Tensor, torch.Tensor] | None = None

    def by_gate(self) -> tuple[torch.Tensor, torch.Tensor]:
        """[W_x W_h] as four (input + H, H) matrices, one per gate, and the biases (4, 1, H):
        for a few rows (decoding), four independent products let two cores share the work.
        The gates come in the order i, f, o, g here, so that one sigmoid covers three."""
        if self._by_gate is None:
            H = self.hidden
            order = torch.tensor([0, 1, 3, 2])          # PyTorch's i, f, g, o -> i, f, o, g
            w = torch.cat([self.w_ih, self.w_hh], dim=1).view(4, H, -1)[order].transpose(1, 2).contiguous()
            self._by_gate = (w, self.bias.view(4, 1, H)[order].contiguous())
        return self._by_gate

    @property
    def hidden(self) -> int:
        return self.w_hh.size(1)

    @classmethod
    def of_cell(cls, cell: nn.LSTMCell) -> "LSTMWeights":
        return cls._make(cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)

    @classmethod
    def of_layer(cls, lstm: nn.LSTM, layer: int = 0, reverse: bool = False) -> "LSTMWeights":
        """Layer `layer` of a (possibly bidirectional) nn.LSTM; reverse=True for its backward direction."""
        sfx = f"_l{layer}" + ("_reverse" if reverse else "")
        return cls._make(*(getattr(lstm, f"{n}{sfx}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")))

    @classmethod
    def _make(cls, w_ih, w_hh, b_ih, b_hh) -> "LSTMWeights":
        with torch.no_grad():
            return cls(w_ih.detach(), w_hh.detach(), (b_ih + b_hh).detach())


class LSTMStep(NamedTuple):
    hidden: torch.Tensor        # h_t (B, H)
    cell: torch.Tensor          # c_t (B, H)
    input_gate: torch.Tensor    # i_t
    forget_gate: torch.Tensor   # f_t
    candidate: torch.Tensor     # g_t
    output_gate: torch.Tensor   # o_t


def lstm_step(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w: LSTMWeights,
              x_gates: torch.Tensor | None = None) -> LSTMStep:
    """One step of the equations above for a batch: x (B, input), h and c (B, H).

    `x_gates` (4, B, H): W_x[:, :k] x_t[:k] + b for the first k input features, when the
    caller already has it (decoding looks the embedding's share up per token); x is then
    only the remaining input features."""
    w_gates, b_gates = w.by_gate()
    xh = torch.cat([x, h], 1)
    if x_gates is None:
        x_gates = b_gates
    else:
        w_gates = w_gates[:, -xh.size(1):]          # the rows of the features in xh
    pre = torch.baddbmm(x_gates, xh.expand(4, *xh.shape), w_gates)     # (4, B, H): i, f, o, g
    i, f, o = pre[:3].sigmoid().unbind(0)
    g = pre[3].tanh()
    c = torch.addcmul(f * c, i, g)
    return LSTMStep(o * c.tanh(), c, i, f, g, o)


def input_gate_table(w: LSTMWeights, inputs: torch.Tensor) -> torch.Tensor:
    """(N, k) possible values of the first k input features -> (N, 4, H) their gate
    pre-activations W_x[:, :k] x + b (with the bias; gates in by_gate's order), for
    `lstm_step(x_gates=...)`."""
    w_gates, b_gates = w.by_gate()
    k = inputs.size(1)
    table = torch.baddbmm(b_gates, inputs.expand(4, *inputs.shape), w_gates[:, :k])    # (4, N, H)
    return table.transpose(0, 1).contiguous()


@dataclass
class LayerTrace:
    """Everything one LSTM layer computed over a sequence: each field is (T, H)."""
    cell: torch.Tensor
    hidden: torch.Tensor
    input_gate: torch.Tensor
    forget_gate: torch.Tensor
    candidate: torch.Tensor
    output_gate: torch.Tensor

    SIGNALS = {"cell": "tanh(c), the memory",           # what a unit's activation means (cells.py)
               "hidden": "h = o * tanh(c), what the next layer sees",
               "input_gate": "input gate i",
               "forget_gate": "forget gate f",
               "output_gate": "output gate o"}
    GATES = ("input_gate", "forget_gate", "output_gate")
    MEMORY = "cell"            # the signal a cell's memory is ranked by

    def to_lists(self, digits: int = 5) -> dict[str, list[list[float]]]:
        return {name: getattr(self, name).float().cpu().numpy().round(digits).tolist()
                for name in ("cell", "hidden", "input_gate", "forget_gate", "output_gate")}


def run_layer(w: LSTMWeights, xs: torch.Tensor, reverse: bool = False) -> torch.Tensor:
    """h_1..h_T of one layer over xs (T, input) from a zero state, by PyTorch's fused kernel."""
    params = [w.w_ih, w.w_hh, w.bias, torch.zeros_like(w.bias)]
    x = (xs.flip(0) if reverse else xs).unsqueeze(1)
    zero = xs.new_zeros(1, 1, w.hidden)
    out = torch.lstm(x, (zero, zero), params, True, 1, 0.0, False, False, False)[0][:, 0]
    return out.flip(0) if reverse else out


@torch.inference_mode()
def trace_layer(w: LSTMWeights, xs: torch.Tensor, hs: torch.Tensor | None = None,
                reverse: bool = False, state: tuple[torch.Tensor, torch.Tensor] | None = None) -> LayerTrace:
    """Every gate and state of one layer over xs (T, input), from a zero initial state.

    The hidden states hs (T, H) come from PyTorch's fused kernel (run here if not given).
    From them and the trained weights, all gates follow from the equations above at once,
    since each gate at step t needs only x_t and h_{t-1}; the memory c_t = f_t c_{t-1} + i_t g_t
    then runs step by step, and h_t = o_t tanh(c_t) is recomputed from it. That recomputed h
    equals the fused kernel's only if every gate is right (tests check it within 1e-5).
    With reverse=True the layer reads right to left (a backward encoder direction); the
    trace is in reading order t = 1..T either way. `state` (h_0, c_0), each (H,), continues a
    forward trace from where an earlier piece of the text left it (hs must then be given:
    s2s.cells.hidden_states traces a long text piece by piece)."""
    if xs.size(0) == 0:
        raise ValueError("nothing to trace: the sequence is empty")
    if hs is None:
        hs = run_layer(w, xs, reverse)
    if reverse:
        xs, hs = xs.flip(0), hs.flip(0)
    h0, c0 = state if state is not None else (hs.new_zeros(w.hidden), hs.new_zeros(w.hidden))
    h_prev = torch.cat([h0.view(1, -1), hs[:-1]])
    pre = F.linear(xs, w.w_ih, w.bias).addmm_(h_prev, w.w_hh.t())        # (T, 4H)
    i, f, g, o = pre.chunk(4, dim=1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    written = i * g
    c, cells = c0, []
    for f_t, w_t in zip(f.unbind(0), written.unbind(0)):                   # the only sequential part
        c = torch.addcmul(w_t, f_t, c)
        cells.append(c)
    cell = torch.stack(cells)
    parts = dict(cell=cell, hidden=o * cell.tanh(), input_gate=i, forget_gate=f, candidate=g, output_gate=o)
    if reverse:
        parts = {k: v.flip(0) for k, v in parts.items()}
    return LayerTrace(**parts)


def trace_stack(rnn: nn.Module, xs: torch.Tensor, weights_of, run_layer, trace_one) -> list:
    """Trace every layer of a unidirectional stacked nn.LSTM / nn.GRU / nn.RNN over one
    sequence xs (T, input) from a zero state: layer l reads layer l-1's h as the fused
    kernel computed it (no dropout between layers at inference), and each layer's trace is
    recomputed from the equations (trace_one(weights, inputs, hs))."""
    if rnn.bidirectional:
        raise ValueError("trace each direction of a bidirectional layer with its trace_layer(reverse=...)")
    if xs.size(0) == 0:
        raise ValueError("nothing to trace: the sequence is empty")
    traces, inp = [], xs
    for layer in range(rnn.num_layers):
        w = weights_of(rnn, layer)
        hs = run_layer(w, inp)
        traces.append(trace_one(w, inp, hs))
        inp = hs
    return traces


def trace_lstm(lstm: nn.LSTM, xs: torch.Tensor) -> list[LayerTrace]:
    """Every layer of a unidirectional nn.LSTM over xs (T, input): trace_stack with the LSTM."""
    return trace_stack(lstm, xs, LSTMWeights.of_layer, run_layer, trace_layer)
