"""Remembering across a gap: why an Elman RNN forgets over long gaps and a GRU or LSTM does not.

The task (experiment 2 of Hochreiter & Schmidhuber 1997, with random distractors):
read one symbol s out of K, then `gap` distractor symbols, then a query marker "?", and
say s at the query:

    x = (s, d_1, ..., d_gap, ?)      s ~ U{0..K-1}, d_i ~ U{K..K+D-1}, ? = K+D
    h_t = cell(onehot(x_t), h_{t-1})                 one layer, t = 1..gap+2
    p(s | x) = softmax(W h_{gap+2} + b)              chance = 1/K

Only the first symbol matters, so the gradient that teaches the cell to store it must
travel back through all gap+1 later steps. For the Elman RNN, h_t = tanh(W x_t + U h_{t-1} + b),

    dh_T/dh_1 = prod_{t=2..T} diag(1 - h_t^2) U

a product of gap+1 matrices whose norm shrinks geometrically unless U is tuned to the
edge of instability: the signal vanishes (Bengio, Simard & Frasconi 1994). The LSTM
keeps a cell c_t = f_t * c_{t-1} + i_t * g_t with dc_T/dc_1 = prod f_t (elementwise),
close to 1 wherever the forget gates stay open; the GRU's h_t = (1 - z_t) * n_t + z_t * h_{t-1}
does the same with its update gate z_t. Both can carry s across the gap unchanged.

Every cell gets the same hidden size, so the parameter counts differ (one-hot input of
K + D + 1 = 17, hidden 64, a linear read-out to K = 8: RNN 5,832, GRU 16,456, LSTM 21,768:
the gated cells have 3x and 4x the recurrent weights). Everything else is identical: the
same batches (same seed), Adam, gradient clipping, the same step budget, PyTorch's default
initialisation, except the one thing only a gate has, its bias. A gate a network must first
learn to hold open cannot learn across a gap whose gradient is already ~0 (with the common
forget-gate bias of 1, f ~ 0.73 and 0.73^100 ~ 1e-14: in trial runs of 800-1,600 steps the
LSTM then stayed at chance at gaps 50 and 100; started as below it solved both in < 300), so
by default both gated cells start out remembering over times up to the sequence length
("chrono" initialisation, Tallec & Ollivier 2018; see GapModel.init_gates). The RNN has no
such knob: whether it remembers depends on U alone. `--gate-init forget1` or `pytorch`
runs the same experiment without it.

    python -m s2s.memory_gap --gaps 5 10 20 50 100 --out results/memory_gap.json
"""
from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .text import InputError, check_range

CELLS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}   # nn.RNN is Elman's, tanh by default
GATE_INIT_MEANS = {            # see GapModel.init_gates
    "chrono": "LSTM forget-gate and GRU update-gate biases b ~ log U(1, gap + 1) per unit, LSTM input-gate "
              "bias -b (Tallec & Ollivier 2018); everything else PyTorch's default",
    "forget1": "LSTM forget-gate bias 1 (Jozefowicz et al. 2015); everything else PyTorch's default",
    "pytorch": "PyTorch's default initialisation for every cell",
}
GATE_INITS = tuple(GATE_INIT_MEANS)
MAX_GAP = 1000
HELD_OUT = 2000              # held-out sequences, drawn with their own seed
HELD_OUT_SEED = 1_000_003    # + the run's seed: never the training stream
SOLVED = 0.99                # stop early once the last WINDOW training batches are this accurate
WINDOW = 10

# The defaults: every cell gets the same budget of 10,000 batches of 64: in trial runs the
# gated cells solved gap 100 in ~250 and the RNN gap 50 in ~1,900, so a failure is not for
# want of data. max_seconds only guards against a slow machine (10,000 RNN steps at gap 100
# take ~130 s on one shared core). Solved runs stop early: gaps 5-100 x 3 cells take ~3
# minutes, most of it the RNN at gap 100; at most 15 x max_seconds.
DEFAULTS = dict(steps=10_000, max_seconds=180.0, hidden=64, batch=64, lr=3e-3, clip=1.0,
                n_symbols=8, n_distractors=8, gate_init="chrono")


def make_batch(batch: int, gap: int, n_symbols: int, n_distractors: int,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, gap+2) input ids and (B,) targets. Ids 0..K-1 are the symbols to remember,
    K..K+D-1 the distractors, K+D the query marker; the target is the first id."""
    check_range("Gap", gap, 1, MAX_GAP)
    check_range("Batch", batch, 1, 1_000_000)
    check_range("Symbols", n_symbols, 2, 1000)
    check_range("Distractors", n_distractors, 1, 1000)
    first = torch.randint(0, n_symbols, (batch,), generator=generator)
    middle = torch.randint(n_symbols, n_symbols + n_distractors, (batch, gap), generator=generator)
    query = torch.full((batch, 1), n_symbols + n_distractors)
    return torch.cat([first[:, None], middle, query], dim=1), first


class GapModel(nn.Module):
    """one-hot -> one recurrent layer ("rnn", "gru" or "lstm") -> linear read-out of the
    last hidden state. One-hot rather than an embedding: the input weights of the cell
    are the embedding already, and it leaves nothing else to tune.

    With the defaults (K=8, D=8, hidden 64) the parameter counts are RNN 5,832,
    GRU 16,456 and LSTM 21,768: same width, 1x / 3x / 4x the recurrent weights."""

    def __init__(self, cell: str, hidden: int = 64, n_symbols: int = 8, n_distractors: int = 8,
                 gate_init: str = "chrono", t_max: int = 100):
        super().__init__()
        if cell not in CELLS:
            raise InputError(f"cell must be one of {', '.join(CELLS)} (got {cell!r})")
        check_range("Hidden size", hidden, 1, 1024)
        self.cell, self.n_inputs = cell, n_symbols + n_distractors + 1
        self.rnn = CELLS[cell](self.n_inputs, hidden, batch_first=True)
        self.out = nn.Linear(hidden, n_symbols)
        if gate_init not in GATE_INITS:
            raise InputError(f"gate_init must be one of {', '.join(GATE_INITS)} (got {gate_init!r})")
        if cell != "rnn":
            self.init_gates(gate_init, t_max)

    @torch.no_grad()
    def init_gates(self, how: str, t_max: int) -> None:
        """Start the gated cells remembering. A gate g = sigmoid(b) kept open at every step keeps
        a fraction g^k of what it holds after k steps, a memory time of about 1/(1 - g) = 1 + e^b.

        "chrono" (Tallec & Ollivier 2018): b ~ log U(1, t_max - 1) per unit, memory times spread
        from 2 to t_max steps, for the LSTM's forget gate (its input gate gets -b: write rarely,
        keep long) and the GRU's update gate z (whose 1 - z is already its input gate).
        "forget1": the LSTM's forget-gate bias at 1 (Jozefowicz et al. 2015), a memory of ~3.7 steps."""
        if how == "pytorch" or (how == "forget1" and self.cell != "lstm"):
            return
        H = self.rnn.hidden_size
        # PyTorch adds two biases, b_ih + b_hh, in gate order (input, forget, cell, output) for
        # the LSTM and (reset, update, new) for the GRU: the keep gate is the second slice in
        # both. b_hh's slice is zeroed so that b is exactly what is set here.
        b_ih, b_hh = self.rnn.bias_ih_l0, self.rnn.bias_hh_l0
        keep = slice(H, 2 * H)
        b_hh[keep] = 0.0
        if how == "forget1":
            b_ih[keep] = 1.0
            return
        b_ih[keep] = torch.log(torch.empty(H).uniform_(1, max(2, t_max - 1)))
        if self.cell == "lstm":
            b_ih[:H], b_hh[:H] = -b_ih[keep], 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, K) logits for the first symbol, read at the last step."""
        h, _ = self.rnn(F.one_hot(x, self.n_inputs).float())
        return self.out(h[:, -1])

    def parameters_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


@torch.inference_mode()
def accuracy(model: GapModel, x: torch.Tensor, y: torch.Tensor, chunk: int = 500) -> float:
    """Share of sequences whose argmax prediction is the first symbol."""
    model.eval()
    right = sum(int((model(x[i:i + chunk]).argmax(-1) == y[i:i + chunk]).sum()) for i in range(0, len(x), chunk))
    return right / len(x)


def describe_task(settings: dict) -> str:
    """The experiment in one paragraph, with the settings it ran with (steps, seconds, symbols)."""
    k, d = settings["n_symbols"], settings["n_distractors"]
    return (f"Each sequence is one symbol out of {k}, then `gap` distractors drawn from {d} other symbols, "
            f"then a query marker; at the query the model must name the first symbol (chance = 1/{k}). "
            f"A one-hot input feeds one recurrent layer (Elman tanh RNN, GRU or LSTM, the same hidden size "
            f"for all three, so their parameter counts differ) read out by a linear layer at the last step. "
            f"Each run trains with Adam on fresh random batches until the last {WINDOW} batches are "
            f"{SOLVED:.0%} right, or for at most {settings['steps']:,} steps or {settings['max_seconds']:g} s; "
            f"accuracy is measured on {HELD_OUT:,} held-out sequences from another seed.")


def train_gap(cell: str, gap: int, steps: int = DEFAULTS["steps"], max_seconds: float = DEFAULTS["max_seconds"],
              hidden: int = DEFAULTS["hidden"], batch: int = DEFAULTS["batch"], lr: float = DEFAULTS["lr"],
              seed: int = 0, clip: float = DEFAULTS["clip"], n_symbols: int = DEFAULTS["n_symbols"],
              n_distractors: int = DEFAULTS["n_distractors"],
              gate_init: str = DEFAULTS["gate_init"]) -> dict:
    """Train one cell on one gap, then measure it on HELD_OUT fresh sequences.

    Stops at `steps`, after `max_seconds` of training (checked after every step), or as soon
    as the mean training accuracy of the last WINDOW batches reaches SOLVED. Each batch is
    new random data, so training accuracy is measured before the model learns from it.
    (At tiny gaps the K * D^gap possible sequences are few, and held-out ones were likely
    seen in training; from gap 10 on, 8^11 of them, hardly ever.)

    Returns cell, gap, accuracy (held out), chance, steps, seconds (the training loop),
    parameters, hidden, train_accuracy (the last WINDOW batches) and stopped
    ("solved", "steps" or "time")."""
    check_range("Steps", steps, 1, 10_000_000)
    if not max_seconds > 0:                       # also refuses NaN
        raise InputError(f"Max seconds must be positive (got {max_seconds}).")
    torch.manual_seed(seed)                       # the same initialisation draw for every gap
    model = GapModel(cell, hidden, n_symbols, n_distractors, gate_init, t_max=gap + 2)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)     # the same batches for every cell
    recent: list[float] = []
    stopped, step, t0 = "steps", 0, time.perf_counter()
    model.train()
    while step < steps:
        x, y = make_batch(batch, gap, n_symbols, n_distractors, gen)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        # the gradient through a long tanh chain can also explode: clipping keeps one bad batch harmless
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        step += 1
        recent = (recent + [float((logits.argmax(-1) == y).float().mean())])[-WINDOW:]
        if len(recent) == WINDOW and sum(recent) / WINDOW >= SOLVED:
            stopped = "solved"
            break
        if time.perf_counter() - t0 >= max_seconds:
            stopped = "time"
            break
    seconds = time.perf_counter() - t0
    x, y = make_batch(HELD_OUT, gap, n_symbols, n_distractors, torch.Generator().manual_seed(HELD_OUT_SEED + seed))
    return {"cell": cell, "gap": gap, "accuracy": round(accuracy(model, x, y), 4),
            "chance": round(1 / n_symbols, 4), "steps": step, "seconds": round(seconds, 2),
            "parameters": model.parameters_count(), "hidden": hidden,
            "train_accuracy": round(sum(recent) / max(1, len(recent)), 4), "stopped": stopped}


def run_experiment(gaps: Sequence[int], cells: Sequence[str] = ("rnn", "gru", "lstm"),
                   progress: Callable[[dict], None] | None = None, **train_kwargs) -> dict:
    """Every cell x gap with train_gap(**train_kwargs), as one JSON-serialisable dict:
    task (what was measured), chance, settings (everything needed to rerun it), results
    (one row per run, cells in the given order, gaps ascending). `progress` is called
    with each row as it finishes."""
    if not gaps:
        raise InputError("Give at least one gap.")
    for g in gaps:
        check_range("Gap", g, 1, MAX_GAP)
    for c in cells:
        if c not in CELLS:
            raise InputError(f"cell must be one of {', '.join(CELLS)} (got {c!r})")
    settings = {**DEFAULTS, "seed": 0, **train_kwargs}
    rows = []
    for cell in cells:
        for gap in sorted(set(gaps)):
            rows.append(train_gap(cell, gap, **train_kwargs))
            if progress:
                progress(rows[-1])
    task = describe_task(settings)
    settings.update(cells=list(cells), gaps=sorted(set(gaps)), input="one-hot", optimizer="Adam",
                    gate_init_means=GATE_INIT_MEANS[settings["gate_init"]],
                    held_out=HELD_OUT, early_stop=f"mean training accuracy of the last {WINDOW} batches >= {SOLVED}",
                    threads=torch.get_num_threads(), torch=torch.__version__.split("+")[0])
    return {"task": task, "chance": round(1 / settings["n_symbols"], 4), "settings": settings, "results": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m s2s.memory_gap", description=__doc__.splitlines()[0])
    p.add_argument("--gaps", type=int, nargs="+", required=True,
                   help=f"distractors between symbol and query (1-{MAX_GAP})")
    p.add_argument("--cells", nargs="+", choices=list(CELLS), default=list(CELLS), help="cells to compare")
    p.add_argument("--out", default="results/memory_gap.json", help="the JSON file to write")
    p.add_argument("--steps", type=int, default=DEFAULTS["steps"], help="most training steps per run")
    p.add_argument("--max-seconds", type=float, default=DEFAULTS["max_seconds"], help="most training seconds per run")
    p.add_argument("--hidden", type=int, default=DEFAULTS["hidden"], help="hidden size of every cell (1-1024)")
    p.add_argument("--gate-init", choices=GATE_INITS, default=DEFAULTS["gate_init"],
                   help="how the gated cells' gate biases start (default: chrono, remembering)")
    p.add_argument("--seed", type=int, default=0, help="initialisation and training batches")
    a = p.parse_args(argv)
    try:
        for g in a.gaps:
            check_range("--gaps", g, 1, MAX_GAP)
        check_range("--steps", a.steps, 1, 10_000_000)
        if not (a.max_seconds > 0 and math.isfinite(a.max_seconds)):
            raise InputError(f"--max-seconds must be a positive number (got {a.max_seconds}).")
        check_range("--hidden", a.hidden, 1, 1024)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    total = len(a.cells) * len(set(a.gaps))
    print(f"{total} runs, at most {a.steps:,} steps or {a.max_seconds:g} s each, "
          f"torch threads: {torch.get_num_threads()}",
          file=sys.stderr)
    done = []

    def progress(row: dict) -> None:
        done.append(row)
        print(f"[{len(done)}/{total}] {row['cell']:>4} gap {row['gap']:>4}: held-out accuracy {row['accuracy']:.3f} "
              f"(chance {row['chance']:.3f}), {row['steps']} steps, {row['seconds']:.1f} s, {row['stopped']}",
              file=sys.stderr, flush=True)

    out = run_experiment(a.gaps, a.cells, progress=progress, steps=a.steps, max_seconds=a.max_seconds,
                         hidden=a.hidden, gate_init=a.gate_init, seed=a.seed)
    out["command"] = "python -m s2s.memory_gap " + shlex.join(sys.argv[1:] if argv is None else argv)
    path = Path(a.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(out, indent=1)
    path.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
