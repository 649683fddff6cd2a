"""The classroom load test, short form (the full 20 sessions x 60 s is a documented command:
python tools/load_test.py --sessions 20 --seconds 60)."""
import json
import subprocess
import sys

import pytest

from browser import streamlit_server
from conftest import ROOT

SHIPPED = (ROOT / "checkpoints" / "en-fr-additive" / "metrics.json").is_file()


@pytest.mark.skipif(not SHIPPED, reason="drives the app on the shipped en-fr-additive checkpoint")
def test_ten_concurrent_sessions_each_get_their_own_correct_answer():
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "load_test.py"), "--sessions", "10", "--seconds", "20",
                        "--sentences", "600"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    print(out)
    assert out["errors"] == 0, out["error_examples"]
    assert out["requests"] >= 20                     # every session got answers, more than once
    assert out["p95_ms"] > 0 and out["rss_mb_end"] > 0
    assert p.returncode == 0
    assert out["server_cpu_ms_per_request"] > 0


@pytest.mark.skipif(not SHIPPED, reason="drives the app on the shipped en-fr-additive checkpoint")
def test_a_running_server_is_measured_through_its_pid():
    with streamlit_server(with_process=True) as (url, proc):
        p = subprocess.run([sys.executable, str(ROOT / "tools" / "load_test.py"), "--url", url, "--pid", str(proc.pid),
                            "--sessions", "2", "--seconds", "5"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 0 and out["errors"] == 0, out
    assert out["server_cpu_ms_per_request"] > 0 and out["rss_mb_end"] > 0
