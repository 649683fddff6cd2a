"""docs/app.md's quote cell, measured: charlm-war-and-peace's held-out text (its first 100,000
characters, shipped as examples/war_and_peace_test_100k.txt), tanh(c), threshold 0.3, the selection
`"Has he come?` (characters 3,522 to 3,535): the first unit LSTMVis's select-a-span finds, how many
units it finds, that unit's matches, the share of their characters inside quotes and the share of
the quoted characters they cover.

    python tools/quote_cell.py
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from s2s.cells import held_out_text, inside_quotes, long_states, select_span, span_matches  # noqa: E402
from s2s.checkpoint import load_charlm  # noqa: E402

lm = load_charlm(str(ROOT / "checkpoints" / "charlm-war-and-peace"))
text = held_out_text(lm.metrics)                       # the shipped slice of its test part
states = long_states(lm.model, text, "cell")           # tanh(c), (characters, cells)
cells = select_span(states, 3522, 3535, 0.3)
first = cells[0]
m = span_matches(states, [first], text, 0.3, exclude=(3522, 3535))
q = inside_quotes(text)
inside = sum(q[s.start:s.end].sum() for s in m)
covered = np.zeros(len(text), bool)
for s in m:
    covered[s.start:s.end] = True
print(first, len(cells), len(m), round(inside / sum(s.end - s.start for s in m), 3),
      round((covered & (q > 0)).sum() / (q > 0).sum(), 3))
