"""s2s.memory_gap: the remember-across-a-gap task, its tiny models, the training bounds, the CLI."""
import json
import math
import time

import pytest
import torch

from s2s.memory_gap import GapModel, main, make_batch, run_experiment, train_gap
from s2s.text import InputError

K, D = 8, 8   # symbols to remember, distractors; the query marker is K + D


def test_make_batch_layout():
    x, y = make_batch(500, 7, K, D, torch.Generator().manual_seed(0))
    assert x.shape == (500, 9) and y.shape == (500,) and x.dtype == y.dtype == torch.long
    assert torch.equal(x[:, 0], y)                                   # the target is the first symbol
    assert ((0 <= y) & (y < K)).all() and len(set(y.tolist())) == K  # every symbol turns up
    middle = x[:, 1:-1]
    assert ((K <= middle) & (middle < K + D)).all()                  # distractors are never a symbol
    assert len(set(middle.flatten().tolist())) == D
    assert (x[:, -1] == K + D).all()                                 # the query marker, only at the end
    assert not (x[:, :-1] == K + D).any()


def test_make_batch_is_deterministic_per_seed():
    a = make_batch(32, 5, K, D, torch.Generator().manual_seed(3))
    b = make_batch(32, 5, K, D, torch.Generator().manual_seed(3))
    c = make_batch(32, 5, K, D, torch.Generator().manual_seed(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("gap", [0, -1, 1001])
def test_make_batch_rejects_bad_gaps(gap):
    with pytest.raises(InputError, match="Gap"):
        make_batch(4, gap, K, D, torch.Generator())


def test_parameter_counts_are_the_documented_ones():
    counts = {cell: GapModel(cell).parameters_count() for cell in ("rnn", "gru", "lstm")}
    assert counts == {"rnn": 5832, "gru": 16456, "lstm": 21768}
    logits = GapModel("gru")(make_batch(3, 4, K, D, torch.Generator())[0])
    assert logits.shape == (3, K)


def test_gate_inits():
    H = 16
    lstm = GapModel("lstm", H, gate_init="chrono", t_max=102).rnn
    b_f = lstm.bias_ih_l0[H:2 * H] + lstm.bias_hh_l0[H:2 * H]
    b_i = lstm.bias_ih_l0[:H] + lstm.bias_hh_l0[:H]
    assert (b_f >= 0).all() and (b_f <= math.log(101) + 1e-6).all() and b_f.std() > 0.3
    assert torch.allclose(b_i, -b_f)
    gru = GapModel("gru", H, gate_init="chrono", t_max=102).rnn
    b_z = gru.bias_ih_l0[H:2 * H] + gru.bias_hh_l0[H:2 * H]
    assert (b_z >= 0).all() and b_z.mean() > 2                        # the update gate starts mostly shut: keep
    one = GapModel("lstm", H, gate_init="forget1").rnn
    assert torch.allclose(one.bias_ih_l0[H:2 * H] + one.bias_hh_l0[H:2 * H], torch.ones(H))
    torch.manual_seed(0)
    plain = GapModel("gru", H, gate_init="pytorch").rnn
    assert plain.bias_ih_l0.abs().max() <= 1 / math.sqrt(H)           # untouched: U(-1/sqrt(H), 1/sqrt(H))
    with pytest.raises(InputError, match="gate_init"):
        GapModel("lstm", H, gate_init="zeros")
    with pytest.raises(InputError, match="cell"):
        GapModel("transformer")


def test_tiny_lstm_learns_gap_2():
    r = train_gap("lstm", 2, steps=400, max_seconds=30, seed=0)
    assert r["accuracy"] >= 0.9 > 3 * r["chance"], r
    assert r["stopped"] == "solved" and r["steps"] < 400
    assert r["parameters"] == 21768 and r["hidden"] == 64 and r["chance"] == 0.125


def test_max_seconds_bounds_a_run():
    t = time.perf_counter()
    r = train_gap("gru", 50, steps=10**6, max_seconds=0.5)
    # stopped by the clock, after the step that crossed 0.5 s: a step takes milliseconds, but a
    # loaded machine (CI beside another job) stretched one to 1.7 s, so the bounds leave room
    assert r["stopped"] == "time" and 0.5 <= r["seconds"] < 4 and 0 < r["steps"] < 10**6
    assert time.perf_counter() - t < 12                                # the held-out measurement included
    r = train_gap("rnn", 3, steps=5, max_seconds=60)
    assert r["steps"] == 5 and r["stopped"] == "steps"


def test_run_experiment_is_json_with_every_cell_and_gap():
    out = run_experiment([3, 1], cells=("rnn", "lstm"), steps=3, max_seconds=10, hidden=8)
    assert json.loads(json.dumps(out)) == out
    assert [(r["cell"], r["gap"]) for r in out["results"]] == [("rnn", 1), ("rnn", 3), ("lstm", 1), ("lstm", 3)]
    assert out["settings"]["steps"] == 3 and out["settings"]["gate_init"] == "chrono" and out["chance"] == 0.125
    with pytest.raises(InputError):
        run_experiment([])


def test_cli_writes_the_json_file(tmp_path, capsys):
    path = tmp_path / "new-folder" / "memory_gap.json"
    assert main(["--gaps", "2", "--steps", "20", "--hidden", "16", "--out", str(path)]) == 0
    saved = json.loads(path.read_text())
    captured = capsys.readouterr()
    assert json.loads(captured.out) == saved
    assert set(saved) == {"task", "chance", "settings", "results", "command"} and saved["chance"] == 0.125
    assert saved["command"].startswith("python -m s2s.memory_gap --gaps 2 --steps 20")   # how to reproduce it
    assert "first symbol" in saved["task"]
    assert "at most 20 steps or 180 s" in saved["task"] and "`steps`" not in saved["task"]   # values, not names
    rows = saved["results"]
    assert [r["cell"] for r in rows] == ["rnn", "gru", "lstm"]
    for r in rows:
        assert {"cell", "gap", "accuracy", "chance", "steps", "seconds", "parameters", "hidden"} <= set(r)
        assert r["gap"] == 2 and 1 <= r["steps"] <= 20 and r["hidden"] == 16 and 0 <= r["accuracy"] <= 1
    assert saved["settings"]["steps"] == 20 and saved["settings"]["hidden"] == 16
    assert captured.err.count("[") >= 3                               # one progress line per run


@pytest.mark.parametrize("args,msg", [
    (["--gaps", "0"], "--gaps"),
    (["--gaps", "5", "1001"], "--gaps"),
    (["--gaps", "5", "--steps", "0"], "--steps"),
    (["--gaps", "5", "--max-seconds", "0"], "--max-seconds"),
    (["--gaps", "5", "--max-seconds", "-3"], "--max-seconds"),
    (["--gaps", "5", "--max-seconds", "nan"], "--max-seconds"),
    (["--gaps", "5", "--max-seconds", "inf"], "--max-seconds"),
    (["--gaps", "5", "--hidden", "0"], "--hidden"),
    (["--gaps", "5", "--hidden", "1025"], "--hidden"),
])
def test_cli_rejects_bad_input(tmp_path, capsys, args, msg):
    out = tmp_path / "m.json"
    assert main([*args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and msg in lines[0], captured.err
    assert captured.out == "" and not out.exists()


@pytest.mark.parametrize("args", [[], ["--gaps"], ["--gaps", "five"], ["--gaps", "5", "--cells", "gpt"]])
def test_cli_argparse_errors_exit_2(capsys, args):
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2 and "error:" in capsys.readouterr().err
