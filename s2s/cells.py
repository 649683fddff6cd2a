"""Find interpretable LSTM cells (Karpathy, Johnson and Fei-Fei 2015, Sec. 4.2-4.3).

A feature gives one number per character (1 inside quotes, the brace depth, ...). A cell
tracks the feature if its activation over the text correlates with it: Pearson

    r = sum_t (a_t - mean a)(f_t - mean f) / (n std(a) std(f))

for a_t = tanh(c_t) (the memory as the output gate sees it) or a gate. Ranking every cell
of every layer by |r| finds the candidates; looking at their traces says whether they do.
Correlation is not explanation: a cell can correlate with a feature and do more.

    python -m s2s.cells --model DIR --text-file FILE --json

prints {"text", "layers": [{cell, hidden, input_gate, forget_gate, output_gate}, ...]},
each a list of len(text) rows of H floats.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import regex
import torch

from .checkpoint import CheckpointError, Translator, load_charlm
from .elman import ElmanTrace
from .gru import GRUTrace
from .lstm import LayerTrace, LSTMWeights, trace_layer
from .text import InputError, clean_passage, read_text_file

SIGNALS = LayerTrace.SIGNALS     # an LSTM's; each trace class lists its own (GRUTrace, ElmanTrace)
Trace = LayerTrace | GRUTrace | ElmanTrace


def signal_of(trace: Trace, signal: str | None = None) -> torch.Tensor:
    """(T, H) activations: tanh(c) for an LSTM's "cell", else the named field of the trace;
    None is the cell type's memory (an LSTM's tanh(c), a GRU's or RNN's h)."""
    signal = signal or trace.MEMORY
    if signal not in trace.SIGNALS:
        raise InputError(f"Unknown signal {signal!r}: choose one of {', '.join(trace.SIGNALS)}.")
    return trace.cell.tanh() if signal == "cell" else getattr(trace, signal)


# ---------------------------------------------------------------- features: one number per character

def inside_quotes(text: str) -> np.ndarray:
    """1 between an opening and a closing double quote (quote characters included), else 0."""
    out, inside = np.zeros(len(text)), False
    for t, ch in enumerate(text):
        if ch == '"':
            out[t] = 1
            inside = not inside
        else:
            out[t] = inside
    return out


def indentation(text: str) -> np.ndarray:
    """The indentation of each character's line, in tab stops (a tab or 8 spaces = 1)."""
    out, level, at_start = np.zeros(len(text)), 0.0, True
    for t, ch in enumerate(text):
        if ch == "\n":
            level, at_start = 0.0, True
        elif at_start and ch == "\t":
            level += 1
        elif at_start and ch == " ":
            level += 1 / 8
        else:
            at_start = False
        out[t] = level
    return out


CODE, COMMENT, LITERAL = 0, 1, 2


def _c_lexer(text: str) -> np.ndarray:
    """For each character of C text: CODE, COMMENT (/* */ or //) or LITERAL ("..." or '.')."""
    kind, t, n = np.full(len(text), CODE, dtype=np.int8), 0, len(text)
    while t < n:
        two = text[t:t + 2]
        if two in ("/*", "//"):
            end = text.find("*/", t + 2) + 2 if two == "/*" else text.find("\n", t)
            end = n if end < 2 or (two == "//" and end < 0) else end
            kind[t:end] = COMMENT
            t = end
        elif text[t] in "\"'":
            quote, u = text[t], t + 1
            while u < n and text[u] != quote and text[u] != "\n":
                u += 2 if text[u] == "\\" else 1
            kind[t:min(u + 1, n)] = LITERAL
            t = u + 1
        else:
            t += 1
    return kind


def _depth(text: str, open_ch: str, close_ch: str) -> np.ndarray:
    """Nesting depth of open_ch/close_ch in code (not in comments or literals), never below 0."""
    code, out, d = _c_lexer(text) == CODE, np.zeros(len(text)), 0
    for t, ch in enumerate(text):
        if code[t] and ch == open_ch:
            d += 1
        out[t] = d
        if code[t] and ch == close_ch:
            d = max(0, d - 1)
    return out


def inside_comment(text: str) -> np.ndarray:
    """1 inside a C comment (/* ... */ or // ...), else 0."""
    return (_c_lexer(text) == COMMENT).astype(np.float64)


def position_in_line(text: str) -> np.ndarray:
    """How many characters since the last new line (the paper's line-length cell)."""
    out, col = np.zeros(len(text)), 0
    for t, ch in enumerate(text):
        out[t] = col
        col = 0 if ch == "\n" else col + 1
    return out


REGEX_TIMEOUT_S = 0.5


def regex_feature(pattern: str) -> Callable[[str], np.ndarray]:
    """1 on characters inside any match of `pattern`, else 0 (InputError if it doesn't
    compile, or if matching takes longer than REGEX_TIMEOUT_S: a pattern like (a|aa)+c can
    backtrack for ever, and the server is shared)."""
    if len(pattern) > 200:
        raise InputError("The pattern is longer than 200 characters.")
    try:
        rx = regex.compile(pattern)
    except regex.error as e:
        raise InputError(f"The pattern is not a valid regular expression: {e}.") from None

    def values(text: str) -> np.ndarray:
        out = np.zeros(len(text))
        try:
            for m in rx.finditer(text, timeout=REGEX_TIMEOUT_S):
                out[m.start():m.end()] = 1
        except TimeoutError:
            raise InputError(f"The pattern took longer than {REGEX_TIMEOUT_S} s to match: simplify it "
                             "(nested repetition such as (a+)+ can backtrack for ever).") from None
        return out
    return values


@dataclass(frozen=True)
class Feature:
    label: str
    values: Callable[[str], np.ndarray]


FEATURES: dict[str, Feature] = {
    "inside_quotes": Feature("inside quotes", inside_quotes),
    "indentation": Feature("indentation level", indentation),
    "brace_depth": Feature("brace depth { }", lambda s: _depth(s, "{", "}")),
    "paren_depth": Feature("parenthesis depth ( )", lambda s: _depth(s, "(", ")")),
    "position_in_line": Feature("position in line", position_in_line),
    "inside_comment": Feature("inside a comment", inside_comment),
}


# ---------------------------------------------------------------- ranking

@dataclass(frozen=True)
class CellScore:
    layer: int
    cell: int
    r: float


def correlations(acts: np.ndarray | torch.Tensor, feature: np.ndarray) -> np.ndarray:
    """Pearson r of every column of acts (T, H) with feature (T,); 0 where either is constant."""
    a = np.asarray(acts, dtype=np.float64)
    f = np.asarray(feature, dtype=np.float64)
    a = a - a.mean(0)
    f = f - f.mean()
    denom = np.sqrt((a * a).sum(0) * (f * f).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (a * f[:, None]).sum(0) / denom
    return np.nan_to_num(r)


def rank_cells(traces: list[Trace], feature: np.ndarray, top: int = 10, signal: str | None = None,
               layer: int | None = None) -> list[CellScore]:
    """Cells of every layer (or one) ranked by |r| with the feature, strongest first; by
    default by their memory (an LSTM's tanh(c), a GRU's or RNN's h)."""
    scores = []
    for l, tr in enumerate(traces):
        if layer is not None and l != layer:
            continue
        for h, r in enumerate(correlations(signal_of(tr, signal).cpu().numpy(), feature)):
            scores.append(CellScore(l, h, float(r)))
    scores.sort(key=lambda s: -abs(s.r))
    return scores[:top]


def best_cells(traces: list[Trace], text: str, top: int = 3) -> dict[str, list[CellScore]]:
    """For every preset feature, the `top` cells whose memory correlates most with it."""
    return {name: rank_cells(traces, feat.values(text), top=top) for name, feat in FEATURES.items()}


def gate_saturation(trace: Trace, low: float = 0.1, high: float = 0.9) -> dict[str, dict[str, np.ndarray]]:
    """For each gate, the fraction of steps each unit spends below `low` (left-saturated)
    and above `high` (right-saturated): the paper's Fig. 3. Empty for an RNN (no gates)."""
    return {gate: {"low": (getattr(trace, gate) < low).float().mean(0).cpu().numpy(),
                   "high": (getattr(trace, gate) > high).float().mean(0).cpu().numpy()}
            for gate in trace.GATES}


@dataclass
class MemoryReset:
    """A step where a layer wipes its memory: c_t = f * c_(t-1) + i * g is near 0 because
    both the forget gate f and the input gate i are nearly closed (means over the units)."""
    step: int
    memory: float        # mean |tanh(c_t)|
    forget: float        # mean f_t
    input: float         # mean i_t


def memory_resets(trace: LayerTrace, below: float = 0.1) -> list[MemoryReset]:
    """The steps whose mean |tanh(c)| is under `below` while the other steps' mean is at
    least three times higher: a learned reset (a nearly white column in a cell heatmap),
    not a drawing error."""
    memory = trace.cell.tanh().abs().mean(-1)
    forget, inp = trace.forget_gate.mean(-1), trace.input_gate.mean(-1)
    resets = []
    for t in range(len(memory)):
        others = torch.cat([memory[:t], memory[t + 1:]])
        if memory[t] < below and len(others) and others.mean() >= 3 * memory[t]:
            resets.append(MemoryReset(t, float(memory[t]), float(forget[t]), float(inp[t])))
    return resets


# ---------------------------------------------------------------- the translation models' LSTMs

@torch.inference_mode()
def encoder_trace(tr: Translator, source_ids: list[int]) -> tuple[LayerTrace, LayerTrace]:
    """Forward and backward traces of a translation model's bidirectional LSTM encoder over
    one sentence (the same equations as the character models, lstm.py)."""
    model = tr.model
    if not model.is_lstm:
        raise InputError("This model's encoder is not an LSTM, so it has no cell state to show.")
    xs = model.embed(torch.tensor(source_ids, device=tr.device))
    fwd = trace_layer(LSTMWeights.of_layer(model.encoder, 0), xs)
    bwd = trace_layer(LSTMWeights.of_layer(model.encoder, 0, reverse=True), xs, reverse=True)
    return fwd, bwd


# ---------------------------------------------------------------- CLI

def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.cells", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a character-level checkpoint, e.g. checkpoints/charlm-linux-kernel")
    p.add_argument("--text-file", required=True, help="the text to trace ('-' for stdin)")
    p.add_argument("--json", action="store_true", help="print every activation as JSON")
    p.add_argument("--top", type=int, default=3, help="cells listed per feature without --json")
    a = p.parse_args(argv)
    try:
        lm = load_charlm(a.model)
        raw = read_text_file(a.text_file)
        text = clean_passage(raw)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    traces = lm.model.trace(text)
    if a.json:
        print(json.dumps({"text": text, "layers": [t.to_lists() for t in traces]}))
        return 0
    for name, ranked in best_cells(traces, text, top=a.top).items():
        cells = ", ".join(f"layer {s.layer} cell {s.cell} (r = {s.r:+.2f})" for s in ranked)
        print(f"{FEATURES[name].label:>22}: {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
