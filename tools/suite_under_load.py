"""Is the suite reliable when the machine is busy? (issue #35, item 6)

Clones this checkout's HEAD into a temporary folder (a clean clone: no data/, no caches),
starts `--hogs` CPU-bound processes beside it (`while True: pass`, at the same priority as
the tests), then runs the browser tests `--browser-runs` times in a row and the whole suite
`--suite-runs` times, with CI=true so that a missing Chromium fails instead of skipping.
Prints one JSON line per run ({"what", "run", "rc", "seconds", "summary"}) and a last line
with them all; it stops at the first red run, since "N in a row" is then already lost.

    python tools/suite_under_load.py --browser-runs 5 --suite-runs 2 --hogs 1 | tee suite_under_load.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_pytest(clone: Path, targets: list[str], log: Path) -> tuple[int, float, str]:
    """One pytest run in the clone; returns its exit code, wall seconds and summary line."""
    env = dict(os.environ, CI="true")
    start = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *targets],
                             cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    return rc, seconds, lines[-1] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--browser-runs", type=int, default=5)
    parser.add_argument("--suite-runs", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=1, help="CPU-bound processes running beside the tests")
    parser.add_argument("--logs", type=Path, default=None, help="folder for each run's pytest output")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="suite_under_load_"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                          text=True, check=True).stdout.strip()
    logs = args.logs or work
    logs.mkdir(parents=True, exist_ok=True)
    browser = sorted(str(p.relative_to(clone)) for p in (clone / "tests").glob("test_browser*.py"))
    plan = [("browser", browser)] * args.browser_runs + [("suite", [])] * args.suite_runs

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    results = []
    try:
        for what, targets in plan:
            run = sum(1 for r in results if r["what"] == what) + 1
            rc, seconds, summary = run_pytest(clone, targets, logs / f"{what}_{run}.log")
            results.append({"what": what, "run": run, "rc": rc, "seconds": round(seconds, 1),
                            "summary": summary, "load1": round(os.getloadavg()[0], 2)})
            print(json.dumps(results[-1]), flush=True)
            if rc != 0:
                break
    finally:
        for hog in hogs:
            hog.kill()
        shutil.rmtree(clone, ignore_errors=True)     # the logs stay (in --logs, or beside it)
    print(json.dumps({"commit": head, "hogs": args.hogs, "cpus": os.cpu_count(), "logs": str(logs),
                      "all_green": all(r["rc"] == 0 for r in results) and len(results) == len(plan),
                      "runs": results}))


if __name__ == "__main__":
    main()
