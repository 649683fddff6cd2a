"""The shipped character-level models: the interpretable cells the course shows exist, and the
tool finds them on passages the models never saw (the examples come from the held-out test
part of each corpus). Skipped on a checkout without these checkpoints."""
import json

import pytest

from conftest import ROOT
from s2s.cells import FEATURES, rank_cells
from s2s.checkpoint import load_charlm

CASES = [   # model, held-out example, feature, the target |r|
    ("charlm-war-and-peace", "war_and_peace_heldout.txt", "inside_quotes", 0.5),
    ("charlm-war-and-peace-gru", "war_and_peace_heldout.txt", "inside_quotes", 0.5),
    ("charlm-linux-kernel", "kernel_heldout.c", "brace_depth", 0.5),
]


@pytest.mark.parametrize("name, example, feature, target", CASES)
def test_an_interpretable_cell_is_found_on_held_out_text(name, example, feature, target):
    path = ROOT / "checkpoints" / name
    if not (path / "metrics.json").is_file():
        pytest.skip(f"{name} is not in checkpoints/")
    lm = load_charlm(path)
    text = (ROOT / "examples" / example).read_text(encoding="utf-8")
    best = rank_cells(lm.model.trace(text), FEATURES[feature].values(text), top=1)[0]
    assert abs(best.r) >= target, best
    # training found one too, on the first 20,000 held-out characters, and wrote it down
    found = json.loads((path / "metrics.json").read_text())["cells"][feature][0]
    assert abs(found["r"]) >= target, found


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_metrics_report_test_bits_per_char_beside_the_paper(name):
    path = ROOT / "checkpoints" / name
    if not (path / "metrics.json").is_file():
        pytest.skip(f"{name} is not in checkpoints/")
    metrics = json.loads((path / "metrics.json").read_text())
    assert 0.5 < metrics["test"]["bits_per_char"] < 3.0
    assert metrics["paper"]["best_rnn_bits_per_char"] > 0
    assert metrics["train"]["minutes"] <= 90


TRIO = {"lstm": "charlm-war-and-peace", "gru": "charlm-war-and-peace-gru", "rnn": "charlm-war-and-peace-rnn"}


def shipped_trio():
    paths = {cell: ROOT / "checkpoints" / name for cell, name in TRIO.items()}
    if not all((p / "metrics.json").is_file() for p in paths.values()):
        pytest.skip("the War and Peace RNN, GRU and LSTM are not all in checkpoints/")
    return paths


def test_the_three_cells_were_trained_alike():
    """Same text, size, steps and schedule: only the cell differs (config and metrics say so)."""
    configs, trains = {}, {}
    for cell, path in shipped_trio().items():
        config = json.loads((path / "config.json").read_text())["model"]
        assert config.get("cell", "lstm") == cell
        configs[cell] = {k: v for k, v in config.items() if k != "cell"}
        train = json.loads((path / "metrics.json").read_text())["train"]
        trains[cell] = {k: train.get(k) for k in ("steps", "batch", "seq", "lr", "data", "train_chars", "chars_seen")}
    assert configs["lstm"] == configs["gru"] == configs["rnn"]
    assert trains["lstm"] == trains["gru"] == trains["rnn"]


def test_the_rnn_gradient_vanishes_orders_of_magnitude_faster():
    """The headline of docs/gates-and-gradients.md: g(50)/g(0) on held-out War and Peace, RNN against LSTM and GRU."""
    from s2s.gradients import gradient_flow
    text = (ROOT / "examples" / "war_and_peace_heldout.txt").read_text(encoding="utf-8")
    flows = {cell: gradient_flow(load_charlm(path).model, text, 200) for cell, path in shipped_trio().items()}
    ratio = {cell: f.ratio(50) for cell, f in flows.items()}
    assert ratio["rnn"] < ratio["lstm"] / 100 and ratio["rnn"] < ratio["gru"] / 100, ratio
    # 200 back the RNN's gradient entries are about 1e-20, float32 numbers whose squares are not:
    # the norm is summed in float64, or it would read 0 (docs/gates-and-gradients.md: 5.3e-38 of g(0))
    assert 0 < flows["rnn"].ratio(200) < 1e-30
