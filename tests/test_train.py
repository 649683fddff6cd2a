import json

from conftest import reversal_pairs, write_tsv
from s2s import train as train_cli
from s2s.checkpoint import load_translator
from s2s.decode import greedy


def test_tiny_model_learns_to_reverse(tiny_additive):
    """The training loop works end to end: 300 steps (seconds) learn the reversal task."""
    metrics = json.loads((tiny_additive / "metrics.json").read_text())
    assert metrics["test"]["test"]["bleu"] > 90
    assert metrics["test"]["test"]["perplexity"] < 1.5
    curves = metrics["curves"]
    assert curves[-1]["valid_loss"] < curves[0]["valid_loss"] / 5
    tr = load_translator(tiny_additive)
    assert greedy(tr, "g f e d c b a").translation == "a b c d e f g"
    # the training trace: attention of the probe pairs at several points, from step 0
    trace = metrics["trace"]
    assert trace["points"][0]["step"] == 0 and trace["points"][-1]["step"] == 300
    assert len(trace["points"]) >= 4 and len(trace["points"][0]["probes"]) == len(trace["probes"])
    probe, att = trace["probes"][0], trace["points"][-1]["probes"][0]["attention"]
    assert len(att) == len(probe["target_tokens"]) and len(att[0]) == len(probe["source_tokens"])


def test_training_resumes_where_it_stopped(tmp_path):
    tsv = write_tsv(reversal_pairs(800, seed=4), tmp_path / "r.tsv")
    common = ["--data", str(tsv), "--split-dir", str(tmp_path / "split"), "--work", str(tmp_path / "work"),
              "--out", str(tmp_path / "out"), "--vocab", "40", "--emb", "16", "--hidden", "16",
              "--max-tokens", "300", "--eval-every", "5", "--valid-pairs", "50", "--test-pairs", "50",
              "--no-eval", "--trace-points", "2"]
    assert train_cli.main(common + ["--steps", "10"]) == 0
    state = json.loads((tmp_path / "work" / "state.json").read_text())
    assert state["step"] == 10
    assert train_cli.main(common + ["--steps", "15"]) == 0
    log = (tmp_path / "work" / "train.log").read_text()
    assert "resumed at step 10" in log
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert [c["step"] for c in metrics["curves"]] == [5, 10, 15]
    assert not list((tmp_path / "work").glob("*.pt")) and not list((tmp_path / "out").glob("*.pt"))


def test_average_last_ships_the_mean_of_the_snapshots_chosen_by_validation(tmp_path):
    """--average-last N keeps the weights of the last N evaluation points and exports the
    average of the last k of them, k picked by validation loss and written to metrics.json."""
    import torch
    from safetensors.torch import load_file
    tsv = write_tsv(reversal_pairs(800, seed=4), tmp_path / "r.tsv")
    work = tmp_path / "work"
    assert train_cli.main(["--data", str(tsv), "--split-dir", str(tmp_path / "split"), "--work", str(work),
                           "--out", str(tmp_path / "out"), "--vocab", "40", "--emb", "16", "--hidden", "16",
                           "--max-tokens", "300", "--eval-every", "5", "--valid-pairs", "50", "--test-pairs", "50",
                           "--no-eval", "--trace-points", "2", "--steps", "30", "--average-last", "3"]) == 0
    snaps = sorted(work.glob("snapshots/*.safetensors"))
    assert [s.name for s in snaps] == ["step-0000020.safetensors", "step-0000025.safetensors",
                                       "step-0000030.safetensors"]
    averaged = json.loads((tmp_path / "out" / "metrics.json").read_text())["averaged"]
    assert set(averaged["valid_loss_by_k"]) == {"1", "2", "3"}
    assert averaged["valid_loss"] == min(averaged["valid_loss_by_k"].values()) <= averaged["valid_loss_last"]
    k = len(averaged["steps"])
    assert averaged["steps"] == [20, 25, 30][-k:] and averaged["valid_loss_by_k"][str(k)] == averaged["valid_loss"]
    shipped = load_translator(tmp_path / "out").model.state_dict()
    tensors = [load_file(str(s)) for s in snaps[-k:]]
    for name, value in shipped.items():
        mean = sum(t[name] for t in tensors) / k
        assert torch.allclose(value.float(), mean.float(), atol=2e-3, rtol=2e-3), name


def test_lineage_carries_the_history_and_names_before_and_previous():
    """What metrics.json inherits (train.lineage): minutes, tokens, curves and trace add up over
    the runs; a first fine-tune's base becomes "before"; on a further leg "before" stays the
    origin and the base becomes "previous"; --continue-run of a model trained from scratch has
    only "previous"; fine-tune minutes exist only where there is a "before"."""
    meta = {"seconds": 120.0, "tokens": 500, "curves": [{"step": 310}], "trace": [{"step": 310}]}
    scratch = train_cli.lineage(meta)
    assert scratch == {"train_minutes": 2.0, "train_tokens": 500, "curves": [{"step": 310}],
                       "trace_points": [{"step": 310}], "finetune_minutes": None}

    base = {"name": "base", "steps": 300, "train_minutes": 10.0, "train_tokens": 9000,
            "curves": [{"step": 300}], "trace": [{"step": 300}], "test": {"test": {"bleu": 30.0}},
            "loops": {"n": 4, "beam": 1, "share": 0.25}}
    scores = {k: v for k, v in base.items() if k not in ("curves", "trace")}
    first = train_cli.lineage(dict(meta, before=base))
    assert first["train_minutes"] == 12.0 and first["train_tokens"] == 9500
    assert first["curves"] == [{"step": 300}, {"step": 310}] and first["trace_points"] == [{"step": 300}, {"step": 310}]
    assert first["before"] == scores and "previous" not in first
    assert first["finetune_minutes"] == 2.0

    origin = {"name": "origin", "test": {"test": {"bleu": 20.0}}}
    leg = dict(base, origin=origin, finetune_minutes=3.0)     # the base is itself a fine-tune of `origin`
    further = train_cli.lineage(dict(meta, before=leg))
    assert further["before"] == origin and further["previous"] == scores
    assert further["finetune_minutes"] == 5.0 and further["train_minutes"] == 12.0

    continued = train_cli.lineage(dict(meta, before=dict(base, origin=None, finetune_minutes=0)))
    assert "before" not in continued and continued["previous"] == scores
    assert continued["finetune_minutes"] is None
