"""Character-level language model (Karpathy, Johnson and Fei-Fei 2015), with one of three
recurrent cells: "lstm", "gru" or "rnn" (Elman, tanh), the three that paper compares.

Read text one character at a time and predict the next one:

    h_t^0    = E x_t                                   a learned vector per character
    h_t^l    = cell_l(h_t^{l-1}, h_{t-1}^l)            l = 1..L stacked layers (lstm.py, gru.py)
    p(x_{t+1} | x_<=t) = softmax(W h_t^L + b)

Trained with cross-entropy; reported in bits per character, the mean of -log2 p(x_{t+1}).
The vocabulary is the set of characters of the training text; index 0 stands for any
character outside it (the model never saw one, so it reads it as an unknown symbol).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .elman import ElmanTrace, trace_elman
from .gru import GRUTrace, trace_gru
from .interface import ConfigBase
from .lstm import LayerTrace, trace_lstm
from .text import MAX_PASSAGE_CHARS, MAX_SAMPLE_CHARS, TEMPERATURE_RANGE, InputError, check_range

UNKNOWN = "\ufffd"   # how characters outside the vocabulary are shown
CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}   # nn.RNN is Elman's, tanh by default


@dataclass
class CharLMConfig(ConfigBase):
    chars: str                 # the vocabulary, in index order from 1
    emb_dim: int = 64
    hidden: int = 256
    layers: int = 2
    dropout: float = 0.1
    cell: str = "lstm"         # "lstm", "gru" or "rnn"

    def __post_init__(self):
        if self.cell not in CELLS:
            raise ValueError(f"cell must be one of {', '.join(CELLS)} (got {self.cell!r})")
        if not self.chars or len(set(self.chars)) != len(self.chars):
            raise ValueError("chars must be a non-empty string of distinct characters")
        if not 1 <= self.layers <= 4 or self.hidden < 1 or self.emb_dim < 1:
            raise ValueError("layers must be 1-4 and sizes positive")

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + 1


class CharLM(nn.Module):
    def __init__(self, cfg: CharLMConfig):
        super().__init__()
        self.cfg = cfg
        self.index = {c: i + 1 for i, c in enumerate(cfg.chars)}
        self.embed = nn.Embedding(cfg.vocab_size, cfg.emb_dim)
        self.rnn = CELLS[cfg.cell](cfg.emb_dim, cfg.hidden, num_layers=cfg.layers, batch_first=True,
                                   dropout=cfg.dropout if cfg.layers > 1 else 0.0)
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(cfg.hidden, cfg.vocab_size)

    def encode(self, text: str) -> torch.Tensor:
        """Character ids of `text` (0 for characters outside the vocabulary)."""
        return torch.tensor([self.index.get(c, 0) for c in text], dtype=torch.long)

    def shown(self, text: str) -> str:
        """`text` as the model reads it: unknown characters replaced by U+FFFD."""
        return "".join(c if c in self.index or c in "\n" else UNKNOWN for c in text)

    def forward(self, x: torch.Tensor, state=None):
        """(B, T) ids -> logits (B, T, V) for the next character, and the final state
        ((h, c) for an LSTM, h for a GRU or RNN)."""
        h, state = self.rnn(self.drop(self.embed(x)), state)
        return self.out(self.drop(h)), state

    def step(self, char_id: int, state=None):
        """One character through the stacked cells: logits (1, V) for the next one and the new
        state, as forward(tensor([[char_id]]), state) gives them. Sampling runs one character at
        a time, and nn.LSTM on a CPU hands each call to oneDNN, which re-lays out the weights
        every call: sampling 800 characters took 1.7 s that way, 0.3 s with the cells called
        directly (docs/speed.md)."""
        rnn, cell = self.rnn, self.cfg.cell
        x = self.embed.weight[char_id][None]                            # (1, E)
        if state is None:
            zero = x.new_zeros(rnn.num_layers, 1, rnn.hidden_size)
            state = (zero, zero) if cell == "lstm" else zero
        hs, cs = [], []
        for layer in range(rnn.num_layers):     # h_t^l = cell(h_t^{l-1}, h_{t-1}^l); no dropout in eval
            w = [getattr(rnn, f"{n}_l{layer}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            if cell == "lstm":
                x, c = torch.lstm_cell(x, (state[0][layer], state[1][layer]), *w)
                cs.append(c)
            else:
                x = (torch.gru_cell if cell == "gru" else torch.rnn_tanh_cell)(x, state[layer], *w)
            hs.append(x)
        return self.out(x), ((torch.stack(hs), torch.stack(cs)) if cell == "lstm" else torch.stack(hs))

    @staticmethod
    def renamed(weights: dict) -> dict:
        """Weights saved before the cell was configurable named the layer `lstm`."""
        return {("rnn." + k[5:] if k.startswith("lstm.") else k): v for k, v in weights.items()}

    @torch.inference_mode()
    def trace(self, text: str, max_chars: int = MAX_PASSAGE_CHARS) -> list[LayerTrace | GRUTrace | ElmanTrace]:
        """States and gates of every layer at every character: an LSTM's cell state, hidden
        state and gates (lstm.py), a GRU's state and gates (gru.py), an RNN's state (elman.py)."""
        if not 1 <= len(text) <= max_chars:
            raise InputError(f"Trace between 1 and {max_chars:,} characters (got {len(text):,}).")
        ids = self.encode(text).to(self.embed.weight.device)
        tracer = {"lstm": trace_lstm, "gru": trace_gru, "rnn": trace_elman}[self.cfg.cell]
        return tracer(self.rnn, self.embed(ids))


@torch.inference_mode()
def bits_per_char(model: CharLM, text: str, streams: int = 32) -> float:
    """Mean -log2 p(x_{t+1} | x_<=t) over `text`, read as `streams` contiguous pieces (the
    state carries across each piece, so every character after the first of a piece has
    all of that piece's history)."""
    model.eval()
    ids = model.encode(text).to(model.embed.weight.device)
    if ids.numel() < 2:
        raise ValueError("need at least 2 characters to measure bits per character")
    streams = max(1, min(streams, (ids.numel() - 1) // 2))
    n = (ids.numel() - 1) // streams
    x = ids[: n * streams].view(streams, n)
    y = ids[1: n * streams + 1].view(streams, n)
    nll, state = 0.0, None
    for t in range(0, n, 512):
        logits, state = model(x[:, t:t + 512], state)
        nll += float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y[:, t:t + 512].reshape(-1), reduction="sum"))
    return nll / (n * streams) / math.log(2)


@torch.inference_mode()
def sample_text(model: CharLM, prime: str, length: int = 300, temperature: float = 1.0, seed: int = 0) -> str:
    """Continue `prime` by ancestral sampling, x_{t+1} ~ softmax(logits / T)."""
    check_range("Sample length", length, 1, MAX_SAMPLE_CHARS)
    check_range("Temperature", temperature, *TEMPERATURE_RANGE)
    if len(prime) > MAX_PASSAGE_CHARS:
        raise InputError(f"The start text is {len(prime):,} characters long; the limit is {MAX_PASSAGE_CHARS:,}.")
    model.eval()
    gen = torch.Generator().manual_seed(int(seed))
    ids = model.encode(prime or "\n").to(model.embed.weight.device)
    with torch.inference_mode():
        logits, state = model(ids[None])
        logits = logits[:, -1]
        out = []
        for _ in range(length):
            probs = F.softmax(logits[0].float() / temperature, dim=-1)
            probs[0] = 0.0                                # never emit the unknown symbol
            nxt = int(torch.multinomial(probs.cpu(), 1, generator=gen))
            out.append(model.cfg.chars[nxt - 1])
            logits, state = model.step(nxt, state)
    return "".join(out)
