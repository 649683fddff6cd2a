"""explain_ms of two checkouts on one machine, run in turn so both see the same load.

    git worktree add /tmp/before 17a6ac1
    python tools/explain_ab.py /tmp/before . [--model en-fr-additive] [--rounds 3]

Each round runs, in a fresh process per checkout, s2s.attributions.explain (s2s.explain's
before the split) of the bench's 20-word sentence (all three attributions, one thread, as
`python -m s2s.bench` times explain_ms) three times, and keeps the median; the figures
printed are the medians over rounds, in ms, with the last round's split by method.
Checkpoints are read from this checkout's checkpoints/ (or --model is a folder's path).

    python tools/explain_ab.py /tmp/before . --grad-x-input --model en-fr-transformer [--threads 2]

times s2s.attributions.grad_x_input alone instead, of the 20-word sentence forced with its
French (s2s.bench's REFERENCE_20, written out here so an older checkout runs it too), on
--threads threads (default 1), and prints grad_x_input_ms per checkout.
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


GRAD_CHILD = r'''
import sys, time, json, torch
sys.path.insert(0, sys.argv[1]); torch.set_num_threads(int(sys.argv[3]))
from s2s.checkpoint import load_translator
from s2s.attributions import grad_x_input
from s2s.decode import encode_source
from s2s.bench import SENTENCE_20
REFERENCE_20 = ("Ma grand-mère m'a dit qu'elle nous rendrait visite la semaine prochaine si le temps était assez "
                "beau pour la route.")
tr = load_translator(sys.argv[2])
src = torch.tensor([encode_source(tr, SENTENCE_20)]); tgt = torch.tensor(tr.tokenizer.target_ids(REFERENCE_20))
grad_x_input(tr.model, src, tgt)
walls = []
for _ in range(3):
    t = time.perf_counter(); grad_x_input(tr.model, src, tgt); walls.append(time.perf_counter() - t)
print(json.dumps({"ms": 1000 * sorted(walls)[1], "parts": {"pieces": [src.size(1), tgt.numel()]}}))
'''


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkouts", nargs=2, help="two checkout folders, e.g. a git worktree of the old commit and .")
    p.add_argument("--model", default="en-fr-additive")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--grad-x-input", action="store_true", help="time gradient x input alone (see above)")
    p.add_argument("--threads", type=int, default=1, help="with --grad-x-input: torch's threads (default 1)")
    a = p.parse_args()
    model = a.model if Path(a.model).is_dir() else str(Path(__file__).resolve().parent.parent / "checkpoints" / a.model)
    child, extra, key = ((GRAD_CHILD, [str(a.threads)], "grad_x_input_ms") if a.grad_x_input
                         else (CHILD, [], "explain_ms"))
    runs = {c: [] for c in a.checkouts}
    for _ in range(a.rounds):
        for c in a.checkouts:
            out = subprocess.run([sys.executable, "-c", child, str(Path(c).resolve()), model, *extra],
                                 capture_output=True, text=True, check=True, cwd="/")
            runs[c].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(json.dumps({c: {key: round(statistics.median(r["ms"] for r in rs)), "parts_s": rs[-1]["parts"]}
                      for c, rs in runs.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
