"""explain_ms of two checkouts on one machine, run in turn so both see the same load.

    git worktree add /tmp/before 17a6ac1
    python tools/explain_ab.py /tmp/before . [--model en-fr-additive] [--rounds 3]

Each round runs, in a fresh process per checkout, s2s.attributions.explain (s2s.explain's
before the split) of the bench's 20-word sentence (all three attributions, one thread, as
`python -m s2s.bench` times explain_ms) three times, and keeps the median; the figures
printed are the medians over rounds, in ms, with the last round's split by method.
Checkpoints are read from this checkout's checkpoints/.
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import sys, time, json, torch
sys.path.insert(0, sys.argv[1]); torch.set_num_threads(1)
from s2s.checkpoint import load_translator
try:
    from s2s.attributions import explain
except ImportError:                 # a checkout from before s2s/explain.py was split in two
    from s2s.explain import explain
from s2s.bench import SENTENCE_20
tr = load_translator(sys.argv[2])
explain(tr, SENTENCE_20)
walls = []
for _ in range(3):
    t = time.perf_counter(); e = explain(tr, SENTENCE_20); walls.append(time.perf_counter() - t)
print(json.dumps({"ms": 1000 * sorted(walls)[1], "parts": {k: round(v, 3) for k, v in e.seconds.items()}}))
'''


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkouts", nargs=2, help="two checkout folders, e.g. a git worktree of the old commit and .")
    p.add_argument("--model", default="en-fr-additive")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    model = str(Path(__file__).resolve().parent.parent / "checkpoints" / a.model)
    runs = {c: [] for c in a.checkouts}
    for _ in range(a.rounds):
        for c in a.checkouts:
            out = subprocess.run([sys.executable, "-c", CHILD, str(Path(c).resolve()), model], capture_output=True,
                                 text=True, check=True, cwd="/")
            runs[c].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(json.dumps({c: {"explain_ms": round(statistics.median(r["ms"] for r in rs)), "parts_s": rs[-1]["parts"]}
                      for c, rs in runs.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
