"""Where the last views' panels spend their time on a model, part by part, as JSON: the library's
work behind Step by step's lens, a foil's contrast and Compare an edit's patching, in CPU seconds
(one thread, as the app runs torch) beside wall seconds.

    python tools/panel_parts.py --model DIR [--runs 3] [--max-len 24]
    python tools/panel_parts.py --model DIR --lib /tmp/old --lib .      # two checkouts' s2s, alternated

The parts, each timed `--runs` times (medians printed):

    greedy            the text's greedy decoding, capped at --max-len pieces (a random stand-in never
                      writes </s>: 24 is a real sentence's length)
    lens              every decoder layer read at every step of that output (s2s.lens.lens: the
                      panel computes it once per output; a step on reads it from the cache)
    contrast          a foil's contrast at step 1 (s2s.contrast.explain_contrast, gradient x input,
                      the step's runner-up as the foil): what a foil picked costs
    plain             the plain attribution of step 1 (step_attribution): once per step
    patch             Compare an edit's patching (s2s.patch.patch, the page's output given): its
                      `seconds` parts (clean, layers, heads) beside, and `patch_rows`, the
                      teacher-forced rows it runs (encoder layers x source pieces + heads)

CPU seconds are those of this process (time.process_time): on a machine loaded by other work
they stay near the idle wall time where wall time does not. With --lib twice or more, each
checkout's s2s is timed in its own process, in turn, `--runs` rounds, and `ratio` gives each
part's median CPU in the last over the first.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT, EDIT = "the cat sat on the mat .", "the cat sat in the mat ."     # as many source pieces on the stand-ins


def parts(model: str, max_len: int) -> dict:
    """One round of every part: {part: [cpu_s, wall_s]}, and the patch's own seconds and rows."""
    import torch
    torch.set_num_threads(1)
    from s2s.checkpoint import load_translator
    from s2s.contrast import explain_contrast, step_attribution
    from s2s.decode import greedy
    from s2s.lens import lens
    from s2s.patch import patch
    tr = load_translator(model)
    out: dict = {}

    def timed(name, f):
        c, w = time.process_time(), time.perf_counter()
        r = f()
        out[name] = [round(time.process_time() - c, 4), round(time.perf_counter() - w, 4)]
        return r
    d = timed("greedy", lambda: greedy(tr, TEXT, max_len=max_len))
    ids = list(d.target_ids)
    timed("lens", lambda: lens(tr, TEXT, target=ids))
    foil = next(t for t, _ in d.step_top[0] if t != d.target_tokens[0])
    timed("contrast", lambda: explain_contrast(tr, TEXT, 1, foil, target=ids))
    timed("plain", lambda: step_attribution(tr, TEXT, 1, target=ids))
    p = timed("patch", lambda: patch(tr, TEXT, EDIT, output_ids=ids))
    heads = sum(len(row) for row in p.patched_heads or [])
    out["patch_seconds"] = {k: round(v, 3) for k, v in p.seconds.items()}
    out["patch_rows"] = len(p.patched) * len(p.source_tokens) + heads
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True,
                   help="a model folder (e.g. the opus-mt-shaped Marian of tests/hub_models.py)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--max-len", type=int, default=24)
    p.add_argument("--lib", action="append", type=Path, metavar="DIR",
                   help="a checkout whose s2s to time (default: this one); twice or more to compare, alternated")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)     # a child: one round, this sys.path
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(parts(a.model, a.max_len)))
        return 0
    libs = [str(d.resolve()) for d in (a.lib or [ROOT])]
    rounds: dict[str, list[dict]] = {lib: [] for lib in libs}
    for _ in range(a.runs):
        for lib in libs:        # alternated: a machine's drift hits every checkout alike
            child = subprocess.run([sys.executable, __file__, "--model", a.model, "--max-len", str(a.max_len), "--one"],
                                   capture_output=True, text=True,
                                   env={**os.environ, "PYTHONPATH": lib, "OMP_NUM_THREADS": "1"})
            if child.returncode:
                print(child.stderr[-2000:], file=sys.stderr)
                return 1
            rounds[lib].append(json.loads(child.stdout.strip().splitlines()[-1]))
    names = ["greedy", "lens", "contrast", "plain", "patch"]

    def summary(rs: list[dict]) -> dict:
        return {"cpu_s": {n: statistics.median(r[n][0] for r in rs) for n in names},
                "wall_s": {n: statistics.median(r[n][1] for r in rs) for n in names},
                "patch_seconds": rs[-1]["patch_seconds"], "patch_rows": rs[-1]["patch_rows"]}
    sums = {lib: summary(rs) for lib, rs in rounds.items()}
    common = {"runs": a.runs, "max_len": a.max_len, "model": a.model}
    if len(libs) == 1:
        print(json.dumps({**sums[libs[0]], **common}))
    else:
        first, last = sums[libs[0]]["cpu_s"], sums[libs[-1]]["cpu_s"]
        ratio = {n: round(last[n] / first[n], 2) for n in names if first[n]}
        print(json.dumps({"libs": sums, "ratio": ratio, **common}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
