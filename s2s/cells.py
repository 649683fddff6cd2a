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

LSTMVis's select-a-span (Strobelt et al. 2018; select_span, span_matches below):

    python -m s2s.cells --model DIR --text-file FILE --select START:END [--threshold T] [--matches N] --json

prints {"selection", "cells": [{layer, cell, sign, inside, outside}, ...], "closest": [{layer, cell, sign,
covers, around}, ...], "matched_by", "matches": [{start, end, text}, ...]}: the cells on (sign * h >= T)
at every character START..END-1 and off just before and after, cleanest first; beside them the cells
that come closest (closest_cells: the share of the span each covers against its share around it); and
every other stretch of the file where all of `cells` are on together (or, when none is, the first of
`closest`), the closest in length to the selection first.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import regex
import torch
import torch.nn.functional as F

from .checkpoint import CheckpointError, Translator, load_charlm
from .elman import ElmanTrace
from .gru import GRUTrace
from .lstm import LayerTrace, LSTMWeights, trace_layer
from .text import InputError, check_range, clean_passage, read_text_file

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


# ---------------------------------------------------------------- select a span (LSTMVis)
#
# Strobelt, Gehrmann, Pfister and Rush, "LSTMVis: A Tool for Visual Analysis of Hidden State
# Dynamics in Recurrent Neural Networks", IEEE TVCG 24(1), 2018, Sec. 5 ("select" and "match"),
# and their code, github.com/HendrikStrobelt/LSTMVis: lstmdata/data_handler.py
# (query_similar_activations) and tools/signed_to_unsigned.py.

SPAN_THRESHOLD = 0.3       # LSTMVis's default activation threshold (data_handler.get_states)
SPAN_MIN_MATCH = 2         # LSTMVis's cut_off: a match is at least this many positions long
SPAN_AROUND = 5            # positions either side a selected cell's ranking looks at (select_span)
SPAN_COMPARABLE = 0.5      # a closest cell's match is on for at least this share of the selection's length
HELD_OUT_CHARS = 100_000   # held-out characters searched for matches (the page, the bench)
DATA_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data"   # where training read its text
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
# the first HELD_OUT_CHARS of a training file's test part, shipped (docs/data.md), so that the page and
# the bench read the same held-out text on a fresh clone, without ../shared
SHIPPED_HELD_OUT = {"war-and-peace/input.txt": "war_and_peace_test_100k.txt"}


@dataclass(frozen=True)
class SpanCell:
    """One unit LSTMVis selects for a span. As LSTMVis's signed_to_unsigned tool does, each
    cell counts twice: sign +1 is on where h >= threshold, sign -1 where -h >= threshold (a
    cell that goes strongly negative inside quotes is as much a quote cell)."""
    layer: int
    cell: int
    sign: int            # +1 or -1
    inside: float        # the smallest sign * h inside the span
    outside: float       # the largest sign * h within a few positions before and after it

    @property
    def score(self) -> float:
        """How cleanly the cell switches: its weakest value inside minus its strongest in the margin."""
        return self.inside - self.outside

    def label(self) -> str:
        return f"layer {self.layer} cell {self.cell}" + (" negative" if self.sign < 0 else "")


@dataclass(frozen=True)
class SpanCoverage:
    """A unit that comes close to a span without being on at every position of it (LSTMVis's
    threshold view, where a long span has no such cell): the share of the span's positions where
    sign * h >= threshold, against its share of as many positions either side."""
    layer: int
    cell: int
    sign: int            # +1 or -1, as SpanCell's
    covers: float        # share of the span's positions where the unit is on
    around: float        # share of the positions around the span (those the text has) where it is on

    @property
    def score(self) -> float:
        """On across the span and off around it: the share covered minus the share on around."""
        return self.covers - self.around

    def label(self) -> str:
        return f"layer {self.layer} cell {self.cell}" + (" negative" if self.sign < 0 else "")


@dataclass(frozen=True)
class SpanMatch:
    """A stretch [start, end) (END excluded) where every selected unit is on together."""
    start: int
    end: int
    text: str


SPAN_SIGNALS = ("hidden", "cell")    # what a span selection reads: h (LSTMVis's default), or an LSTM's tanh(c)


def span_states(traces: list[Trace], signal: str = "hidden") -> np.ndarray:
    """(T, L, H) float32 of every layer's h, or of an LSTM's memory tanh(c) (signal "cell")."""
    if signal not in SPAN_SIGNALS or signal not in traces[0].SIGNALS:
        raise InputError(f"A span is read from h or, in an LSTM, tanh(c) (got {signal!r}).")
    return np.stack([signal_of(t, signal).float().cpu().numpy() for t in traces], axis=1)


@torch.inference_mode()
def long_states(model, text: str, signal: str = "hidden", chunk: int = 5_000) -> np.ndarray:
    """span_states over a long text (the held-out corpus) as float16, for a character model
    (s2s.charlm.CharLM), read piece by piece with the state carried across: h from each cell
    type's fused kernel; an LSTM's tanh(c) from lstm.trace_layer continued from the last piece's
    state, its gates dropped piece by piece. 100,000 characters of a 2 x 256 model are 100 MB
    in float16, where a whole trace (every gate in float32) would be twelve times that."""
    if not text:
        raise InputError("There is no text to read.")
    rnn, cell = model.rnn, model.cfg.cell
    if signal not in SPAN_SIGNALS or (signal == "cell" and cell != "lstm"):
        raise InputError(f"A span is read from h or, in an LSTM, tanh(c) (got {signal!r} for a {cell}).")
    fused = {"lstm": torch.lstm, "gru": torch.gru, "rnn": torch.rnn_tanh}[cell]
    out = np.empty((len(text), rnn.num_layers, rnn.hidden_size), dtype=np.float16)
    ids = model.encode(text).to(model.embed.weight.device)
    state: list = [None] * rnn.num_layers
    for t0 in range(0, len(text), chunk):
        x = model.embed(ids[t0:t0 + chunk]).unsqueeze(1)          # (T, 1, E): one stream
        for layer in range(rnn.num_layers):
            params = [getattr(rnn, f"{n}_l{layer}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            zero = x.new_zeros(1, 1, rnn.hidden_size)
            if cell == "lstm":
                h0, c0 = state[layer] or (zero, zero)
                hs, h, c = fused(x, (h0, c0), params, True, 1, 0.0, False, False, False)
                if signal == "cell":
                    values = memory_from_hidden(LSTMWeights.of_layer(rnn, layer), x[:, 0], hs[:, 0], h0.view(-1))
                state[layer] = (h, c)
            else:
                hs, h = fused(x, zero if state[layer] is None else state[layer], params, True, 1, 0.0, False,
                              False, False)
                state[layer] = h
            out[t0:t0 + hs.size(0), layer] = (values if signal == "cell" else hs[:, 0]).cpu().numpy()
            x = hs
    return out


@torch.inference_mode()
def memory_from_hidden(w: LSTMWeights, xs: torch.Tensor, hs: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """An LSTM layer's tanh(c_t), (T, H), from its inputs xs (T, input), the fused kernel's h (T, H)
    and the state h_0 before them: h_t = o_t tanh(c_t), and the output gate o_t needs only x_t and
    h_(t-1), so tanh(c_t) = h_t / o_t for every step at once, with no step-by-step loop (the page's
    100,000 held-out characters in a fraction of lstm.trace_layer's time; tests hold the two together).
    o_t > 0 always; where it rounds to 0, h_t does too and tanh(c_t) is read as 0."""
    H = w.hidden
    h_prev = torch.cat([h0.view(1, -1), hs[:-1]])
    out_gate = (F.linear(xs, w.w_ih[3 * H:], w.bias[3 * H:]) + h_prev @ w.w_hh[3 * H:].t()).sigmoid()
    return torch.where(out_gate > 0, hs / out_gate.clamp_min(torch.finfo(hs.dtype).tiny), 0.0).clamp_(-1, 1)


def held_out_source(metrics: dict, data_root: Path = DATA_ROOT, chars: int = HELD_OUT_CHARS,
                    shipped_dir: Path = EXAMPLES_DIR) -> tuple[str, str] | None:
    """(text, what it is): the first `chars` characters of the test part of the file a character
    model was trained on (metrics["train"]["data"]): the last 5 %, as s2s.train_charlm.split_text
    cuts it (not imported: train_charlm imports this module; a test checks the two agree), text the
    model never saw. Read from the slice shipped in examples/ (SHIPPED_HELD_OUT) where there is one
    and it is long enough, so that every machine reads the same text (a test checks it is that cut
    of the corpus), else from the file under data_root; None where neither is on this machine."""
    name = metrics.get("train", {}).get("data")
    if not name:
        return None
    shipped = shipped_dir / SHIPPED_HELD_OUT[name] if name in SHIPPED_HELD_OUT else None
    if shipped is not None and shipped.is_file():
        text = shipped.read_text(encoding="utf-8")
        if len(text) >= chars:
            return text[:chars], f"{chars:,} held-out characters of {name} (its test part, shipped)"
    path = data_root / name
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    text = text[int(len(text) * (1 - 0.05)):][:chars]
    return text, f"{len(text):,} held-out characters of {name} (its test part)"


def held_out_text(metrics: dict, data_root: Path = DATA_ROOT, chars: int = HELD_OUT_CHARS,
                  shipped_dir: Path = EXAMPLES_DIR) -> str | None:
    """held_out_source's text alone."""
    found = held_out_source(metrics, data_root, chars, shipped_dir)
    return found[0] if found else None


def check_span(n: int, start: int, end: int, what: str = "text") -> None:
    """InputError unless 0 <= start, start + 2 <= end <= n (characters counted from 0, END excluded)."""
    if start < 0 or end > n:
        raise InputError(f"The selection {start}:{end} is outside the {what}, which has {n:,} positions "
                         f"(0:{n}, the end excluded).")
    if end - start < SPAN_MIN_MATCH:
        raise InputError(f"Select at least {SPAN_MIN_MATCH} positions (got {start}:{end}, "
                         f"{max(0, end - start)}): one position cannot say where a cell switches on and off.")


def check_threshold(threshold: float) -> None:
    """InputError unless 0 < threshold < 1 (h lies in (-1, 1): 0 would count every cell as on, 1 none)."""
    if not isinstance(threshold, (int, float)) or not 0 < threshold < 1:
        raise InputError(f"The threshold must be between 0 and 1, both excluded (got {threshold}).")


def _as_states(states: np.ndarray | list[Trace]) -> np.ndarray:
    return span_states(states) if isinstance(states, list) else np.asarray(states)


def select_span(states: np.ndarray | list[Trace], start: int, end: int, threshold: float = SPAN_THRESHOLD,
                margin: int = 1, around: int = SPAN_AROUND) -> list[SpanCell]:
    """LSTMVis's selection: the units (cell, sign) on at every position of [start, end), that
    is sign * h >= threshold, and off (below it) at the `margin` positions just before and just
    after; a side the text does not have (a span from its first character, or to its last) counts
    as off, since nothing there is on; LSTMVis lets
    the user widen this margin, and leaves the cells unranked. Ranked here by SpanCell.score,
    inside - outside: the unit's weakest value inside against its strongest within `around`
    positions on either side (at least the margin), so that a cell off all around the span
    comes before one that merely happened to dip at the two borders (with many noisy cells,
    some pass the borders by chance). `outside` is the threshold where the text leaves no room.

    states: (T, L, H) activations (`span_states`, `long_states`) or a list of traces (their h)."""
    a = _as_states(states)
    check_span(len(a), start, end)
    check_threshold(threshold)
    if not 0 <= margin <= 100:
        raise InputError(f"The off margin must be between 0 and 100 positions (got {margin}).")
    T, L, H = a.shape
    flat = a.reshape(T, L * H).astype(np.float32)
    signed = np.concatenate([flat, -flat], axis=1)            # (T, 2LH): LSTMVis's signed_to_unsigned

    def most_around(width: int) -> np.ndarray:
        border = np.concatenate([signed[max(0, start - width):start], signed[end:end + width]])
        return border.max(0) if len(border) else np.full(signed.shape[1], -np.inf, dtype=np.float32)

    inside = signed[start:end].min(0)
    chosen = np.flatnonzero((inside >= threshold) & (most_around(margin) < threshold))
    outside = most_around(max(margin, around))[chosen]
    outside = np.where(np.isinf(outside), threshold, outside)       # the span is the whole text
    order = np.argsort(-(inside[chosen] - outside), kind="stable")
    cells = []
    for u, out in zip(chosen[order], outside[order]):
        col = u % (L * H)
        cells.append(SpanCell(int(col // H), int(col % H), 1 if u < L * H else -1, float(inside[u]), float(out)))
    return cells


def closest_cells(states: np.ndarray | list[Trace], start: int, end: int, threshold: float = SPAN_THRESHOLD,
                  top: int = 10) -> list[SpanCoverage]:
    """Where no unit is on at every position of a span (a long one, a whole quotation, rarely has
    one), the units that come closest, LSTMVis's threshold view read as a ranking: each unit's share
    of the span's positions where it is on (sign * h >= threshold), minus its share on within as many
    positions either side (at least SPAN_AROUND; only those the text has, a side it lacks counting
    for nothing), so a unit on across the span and off around it comes first, and one on everywhere
    (a saturated memory) scores near 0. Units on nowhere in the span are left out; ties go to the
    larger share covered. The top `top`, best first."""
    a = _as_states(states)
    check_span(len(a), start, end)
    check_threshold(threshold)
    T, L, H = a.shape
    flat = a.reshape(T, L * H).astype(np.float32)
    width = max(end - start, SPAN_AROUND)

    def share_on(rows: np.ndarray) -> np.ndarray:
        on = np.concatenate([rows >= threshold, -rows >= threshold], axis=1)       # (n, 2LH), as select_span
        return on.mean(0) if len(on) else np.zeros(2 * L * H)

    covers = share_on(flat[start:end])
    around = share_on(np.concatenate([flat[max(0, start - width):start], flat[end:end + width]]))
    score = covers - around
    order = np.lexsort((-covers, -score))
    out = []
    for u in order[covers[order] > 0][:top]:
        col = u % (L * H)
        out.append(SpanCoverage(int(col // H), int(col % H), 1 if u < L * H else -1, float(covers[u]),
                                float(around[u])))
    return out


def span_matches(states: np.ndarray | list[Trace], cells: list[SpanCell] | list[SpanCoverage],
                 text: str | list[str], threshold: float = SPAN_THRESHOLD, exclude: tuple[int, int] | None = None,
                 top: int | None = None, length: int | None = None) -> list[SpanMatch]:
    """LSTMVis's match view, kept to its exact case: every maximal stretch of at least
    SPAN_MIN_MATCH positions where all of `cells` are on together (sign * h >= threshold), apart
    from the selection itself (`exclude`, any stretch overlapping it). LSTMVis also lists
    stretches where only some of the cells are on, ranked by how many; with every cell required,
    the ones left differ only in length, so they are ranked by how close their length is to the
    selection's, `length` (by default the excluded span's; then by position), the longest-phrase
    criterion LSTMVis applies last, aimed at the selection: pass it when searching another text, so
    that both lists order alike. `cells` may be SpanCoverage units (closest_cells): a long selection
    has no cell on throughout, and the closest one is on in scattered bits everywhere, so its matches
    are only stretches as long as shortest_match says (half as long as it is on in the selection), not LSTMVis's
    two positions ("uss", "ffa" for a 300-character quotation said nothing). Vectorised: one
    comparison of the (T, k) selected columns, one all(), and the
    run boundaries from np.diff.

    text: the characters (a string) or the pieces (a list) the T positions stand for; a match's
    text is its characters, or its pieces joined with spaces. A position whose states are all 0
    (a separator between sentences) is never on, so no match crosses it."""
    a = _as_states(states)
    check_threshold(threshold)
    if len(text) != len(a):
        raise ValueError(f"text has {len(text)} positions, states {len(a)}")
    if not cells:
        return []
    layers = np.array([c.layer for c in cells])
    units = np.array([c.cell for c in cells])
    signs = np.array([c.sign for c in cells], dtype=np.float32)
    on = ((a[:, layers, units].astype(np.float32) * signs) >= threshold).all(1)     # (T,)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], on.view(np.int8), [0]])))
    starts, ends = edges[0::2], edges[1::2]
    want = length if length is not None else (exclude[1] - exclude[0]) if exclude is not None else 0
    keep = (ends - starts) >= shortest_match(cells, want)
    if exclude is not None:
        keep &= (ends <= exclude[0]) | (starts >= exclude[1])
    starts, ends = starts[keep], ends[keep]
    order = np.lexsort((starts, np.abs((ends - starts) - want)))[:top]
    join = "".join if isinstance(text, str) else " ".join
    return [SpanMatch(int(s), int(e), join(text[s:e])) for s, e in zip(starts[order], ends[order])]


def shortest_match(cells: list[SpanCell] | list[SpanCoverage], length: int) -> int:
    """The fewest positions a match of `cells` spans, for a selection `length` long: LSTMVis's
    SPAN_MIN_MATCH for cells on throughout the selection; for the closest cells (SpanCoverage, where
    none is), SPAN_COMPARABLE of the positions of the selection where they are on (covers × length,
    the least of them): a stretch comparable to what they do in the selection."""
    if cells and isinstance(cells[0], SpanCoverage):
        return max(SPAN_MIN_MATCH, int(np.ceil(SPAN_COMPARABLE * min(c.covers for c in cells) * length)))
    return SPAN_MIN_MATCH


def in_context(text: str | list[str], start: int, end: int, width: int = 30) -> tuple[str, str, str]:
    """(before, match, after): up to `width` positions on either side of [start, end)."""
    join = "".join if isinstance(text, str) else " ".join
    return join(text[max(0, start - width):start]), join(text[start:end]), join(text[end:end + width])


def parse_span(spec: str) -> tuple[int, int]:
    """"START:END" -> (START, END); InputError naming the form otherwise."""
    parts = spec.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise InputError(f"--select takes START:END, two whole numbers (got {spec!r}).") from None


# ---------------------------------------------------------------- CLI

def matched_cells(cells: list[SpanCell], closest: list[SpanCoverage]) -> list[SpanCell] | list[SpanCoverage]:
    """What a selection's matches are searched with: every selected cell, or where none is on
    throughout the span, the closest one alone (the page and the command alike)."""
    return cells if cells else closest[:1]


def print_span(text: str, states: np.ndarray, span: tuple[int, int], a: argparse.Namespace) -> int:
    """--select's answer: the selection's cells, the closest ones beside them, and their matches
    in the same text."""
    cells = select_span(states, *span, a.threshold, margin=a.margin)
    closest = closest_cells(states, *span, a.threshold)
    matched = matched_cells(cells, closest)
    matches = span_matches(states, matched, text, a.threshold, exclude=span, top=a.matches)
    if a.json:
        print(json.dumps({"selection": {"start": span[0], "end": span[1], "text": text[span[0]:span[1]]},
                          "signal": a.signal, "threshold": a.threshold, "margin": a.margin,
                          "cells": [{"layer": c.layer, "cell": c.cell, "sign": c.sign, "inside": round(c.inside, 4),
                                     "outside": round(c.outside, 4)} for c in cells],
                          "closest": [{"layer": c.layer, "cell": c.cell, "sign": c.sign, "covers": round(c.covers, 4),
                                       "around": round(c.around, 4)} for c in closest],
                          "matched_by": "cells" if cells else "closest" if closest else "none",
                          "shortest_match": shortest_match(matched, span[1] - span[0]),
                          "matches": [{"start": m.start, "end": m.end, "text": m.text} for m in matches]}))
        return 0
    print(f"selection {span[0]}:{span[1]}: {text[span[0]:span[1]]!r}")
    if not cells:
        print(f"no cell is on (>= {a.threshold}) throughout it and off just before and after; the closest, by "
              "the share of the span each covers minus its share around it:")
        for c in closest:
            print(f"  {c.label()}: covers {c.covers:.0%} of the span, on at {c.around:.0%} of the positions around")
    for c in cells:
        print(f"  {c.label()}: at least {c.inside:+.3f} inside, at most {c.outside:+.3f} around")
    if not cells and closest:
        longest = shortest_match(closest, span[1] - span[0])
        print(f"matches of {closest[0].label()}, on for at least {longest} positions (half as many as in the "
              "selection):" if matches else f"{closest[0].label()} is on for {longest} positions in a row (half as "
                                            "many as in the selection) nowhere else in the text")
    for m in matches:
        print(f"  match {m.start}:{m.end}: {m.text!r}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.cells", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a character-level checkpoint, e.g. checkpoints/charlm-linux-kernel")
    p.add_argument("--text-file", required=True, help="the text to trace ('-' for stdin)")
    p.add_argument("--json", action="store_true", help="print every activation as JSON")
    p.add_argument("--top", type=int, default=3, help="cells listed per feature without --json")
    p.add_argument("--select", metavar="START:END",
                   help="LSTMVis's select-a-span: the cells on throughout characters START..END-1 (counted from 0) "
                        "and off just before and after, and every other stretch where they are all on")
    p.add_argument("--threshold", type=float, default=SPAN_THRESHOLD,
                   help=f"with --select: a cell is on where its value is at least this (0-1; {SPAN_THRESHOLD})")
    p.add_argument("--matches", type=int, default=20, help="with --select: matches listed (1-1000; 20)")
    p.add_argument("--margin", type=int, default=1, help="with --select: positions on each side that must be off (1)")
    p.add_argument("--signal", choices=SPAN_SIGNALS, default="hidden",
                   help="with --select: h (LSTMVis's default) or an LSTM's memory tanh(c) (cell)")
    a = p.parse_args(argv)
    try:
        lm = load_charlm(a.model)
        raw = read_text_file(a.text_file)
        text = clean_passage(raw)
        if a.select is not None:
            span = parse_span(a.select)
            check_span(len(text), *span)
            check_threshold(a.threshold)
            check_range("--matches", a.matches, 1, 1000)
            check_range("--margin", a.margin, 0, 100)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    traces = lm.model.trace(text)
    if a.select is not None:
        try:
            states = span_states(traces, a.signal)
        except InputError as e:          # tanh(c) asked of a GRU or an RNN
            print(f"error: {e}", file=sys.stderr)
            return 2
        return print_span(text, states, span, a)
    if a.json:
        print(json.dumps({"text": text, "layers": [t.to_lists() for t in traces]}))
        return 0
    for name, ranked in best_cells(traces, text, top=a.top).items():
        cells = ", ".join(f"layer {s.layer} cell {s.cell} (r = {s.r:+.2f})" for s in ranked)
        print(f"{FEATURES[name].label:>22}: {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
