"""Training with several processes (torchrun + DistributedDataParallel, gloo on the CPU)
is the single-process training of the same global batches."""
import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from conftest import ROOT, reversal_pairs, write_tsv
from s2s import train as train_cli


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_two_processes_train_exactly_as_one(tmp_path, arch):
    tsv = write_tsv(reversal_pairs(600, seed=5), tmp_path / "r.tsv")
    common = ["--data", str(tsv), "--split-dir", str(tmp_path / "split"), "--arch", arch, "--vocab", "40",
              "--emb", "16", "--hidden", "16", "--layers", "1", "--heads", "2", "--ffn", "32",
              "--dropout", "0", "--max-tokens", "300", "--steps", "6", "--eval-every", "3", "--valid-pairs", "50",
              "--test-pairs", "50", "--no-eval", "--no-augment", "--trace-points", "1", "--lr", "0.01"]
    assert train_cli.main(common + ["--work", str(tmp_path / "one"), "--out", str(tmp_path / "one-out")]) == 0
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "s2s.train", *common, "--work", str(tmp_path / "two"),
                          "--out", str(tmp_path / "two-out")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    log = (tmp_path / "two" / "train.log").read_text()
    assert "2 processes hold identical weights: True" in log
    assert log.count("parameters:") == 1                 # rank 0 alone writes the log
    shares = json.loads(log.split("target tokens computed by each: ")[1].splitlines()[0])
    state = json.loads((tmp_path / "two" / "state.json").read_text())
    assert sum(shares) == state["tokens"] and min(shares) > 0    # each computed its own shard, not the batch
    one = json.loads((tmp_path / "one-out" / "metrics.json").read_text())["curves"]
    two = json.loads((tmp_path / "two-out" / "metrics.json").read_text())["curves"]
    assert [r["step"] for r in two] == [3, 6]
    for a, b in zip(one, two):                           # the same losses, batch by batch
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-3)
        assert b["valid_loss"] == pytest.approx(a["valid_loss"], rel=1e-3)
    w1, w2 = (load_file(str(tmp_path / "one" / "state.safetensors")),
              load_file(str(tmp_path / "two" / "state.safetensors")))
    for k in (k for k in w1 if k.startswith("model.")):
        assert torch.allclose(w1[k], w2[k], atol=1e-4), k


def test_a_shard_takes_every_nth_row_and_an_empty_one_counts_zero():
    from s2s.data import make_batch
    batch = make_batch([([5, 6], [7]), ([8], [9, 10]), ([11], [12])], 1)
    mine, has = train_cli.shard(batch, 1, 2)
    assert has and mine.src.tolist() == batch.src[[1]].tolist()
    mine, has = train_cli.shard(batch, 0, 2)
    assert has and mine.src.size(0) == 2
    mine, has = train_cli.shard(batch, 3, 4)
    assert not has and mine.src.size(0) == 1
