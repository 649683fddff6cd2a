"""The memory floor of s2s.bench: what a decoding step reads, and decode times as multiples of
it. Only the deterministic parts are checked here (no timing assertions: machines differ)."""
import pytest

from s2s import bench
from s2s.decode import beam_search, greedy
from s2s.model import OUTPUT_CHUNKS


def expected_bytes(model, S: int, rows: int) -> int:
    """The floor's bytes written out from the config: float32 weights, an LSTM decoder."""
    cfg = model.cfg
    V, E, H, A = cfg.vocab_size, cfg.emb_dim, cfg.hidden, cfg.attn_dim
    Vp = -(-V // OUTPUT_CHUNKS) * OUTPUT_CHUNKS                   # the vocabulary padded to equal slices
    weights = (Vp * E + Vp                                         # output layer E^T and its bias
               + 4 * (E + H) * H                                   # LSTM [W_feed W_h], the four gates
               + 2 * H * E)                                        # W_c
    key_dim = {"none": 0, "dot": H, "general": H, "additive": A, "scaled-dot": A}[cfg.attention]
    weights += {"none": 0, "dot": 0, "general": 0, "additive": A * H + A + A, "scaled-dot": A * H}[cfg.attention]
    row = 4 * H + (S * (key_dim + H + 1) if cfg.attention != "none" else 0)   # gate-table row, keys, states, mask
    return 4 * (weights + rows * row)


@pytest.mark.parametrize("attention", ["none", "dot", "general", "additive", "scaled-dot"])
def test_bytes_per_step_is_the_sum_of_the_decode_weights(untrained_translators, attention):
    model = untrained_translators[attention].model
    for S, rows in ((7, 1), (12, 5)):
        assert bench.step_bytes(model, S, rows) == expected_bytes(model, S, rows)
    # the parts are the tensors decode_step holds: the output layer exactly as transposed for it
    w = model._decode_weights()
    parts = bench.step_reads(model, 7)
    assert parts["output"] == w.output.numel() * 4 + w.output_bias.numel() * 4
    assert parts["combine"] == w.combine.numel() * 4
    # the weights are read once per step, whatever the beam: only the rows grow with it
    assert bench.step_bytes(model, 7, 5) - bench.step_bytes(model, 7, 1) == 4 * parts["rows"]


def test_copying_model_adds_its_gate_and_location_cue(untrained_translators):
    model = untrained_translators["copy"].model
    H, S = model.cfg.hidden, 9
    plain = expected_bytes(model, S, 1)
    assert bench.step_bytes(model, S) == plain + 4 * ((2 * H + 1) + (H + 1)) + S * (8 + 4)


def test_floor_and_ratios(tiny_additive):
    from s2s.checkpoint import load_translator
    tr = load_translator(tiny_additive)
    d = greedy(tr, "a b c d e")
    per_step = bench.step_bytes(tr.model, len(d.source_tokens))
    # floor = bytes x steps / bandwidth; at 1 GB/s, 1e6 bytes take 1 ms
    assert bench.floor_ms([per_step] * len(d.target_ids), 1.0) == pytest.approx(per_step * len(d.target_ids) / 1e6)
    assert bench.floor_ms([2_000_000, 1_000_000], 3.0) == pytest.approx(1.0)
    # the beam's batch per step, read from its tree: 1, then the hypotheses left alive
    b = beam_search(tr, "a b c d e", width=3)
    rows = bench.beam_rows(b.beam_tree)
    assert rows[0] == 1 and all(1 <= k <= 3 for k in rows)
    assert len(rows) == max(n["step"] for n in b.beam_tree) + 1
    assert bench.beam_rows([dict(step=0, finished=False), dict(step=0, finished=False),
                            dict(step=1, finished=True), dict(step=1, finished=False)]) == [1, 2]


def test_bench_prints_the_floor(tiny_additive, untrained_translators, tmp_path):
    """The JSON carries the floor's inputs and ratio = time / floor (its own figures), and
    times a Transformer found among the checkpoints by its config."""
    import json
    import shutil
    import subprocess
    import sys

    from conftest import ROOT
    zoo = tmp_path / "zoo"
    shutil.copytree(tiny_additive, zoo / tiny_additive.name)
    shutil.copytree(untrained_translators["transformer"].path, zoo / "some-folder-name")
    p = subprocess.run([sys.executable, "-m", "s2s.bench", "--model", str(zoo / tiny_additive.name),
                        "--checkpoints", str(zoo), "--runs", "3", "--batch-sentences", "20", "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["bytes_per_step"] == sum(out["bytes_per_step_parts"].values()) > 0
    assert out["read_gb_per_s"] > 0 and out["dram_read_gb_per_s"] > 0
    floor = out["bytes_per_step"] * out["greedy_steps"] / (out["read_gb_per_s"] * 1e9) * 1000
    assert out["floor_ms"] == pytest.approx(floor, rel=1e-3, abs=2e-3)
    assert out["greedy_vs_floor"] == pytest.approx(out["greedy_ms_p50"] / out["floor_ms"], rel=0.02)
    assert out["beam5_vs_floor"] == pytest.approx(out["beam5_ms_p50"] / out["beam5_floor_ms"], rel=0.02)
    one_row = out["bytes_per_step"] * out["beam5_steps"] / (out["read_gb_per_s"] * 1e9) * 1000
    assert out["beam5_floor_ms"] >= 0.999 * one_row            # five rows a step read more than one
    assert set(out["greedy_parts_ms"]) == {"encode", "steps", "rest"}
    assert out["step_ms"] > 0 and out["step_floor_ms"] > 0
    assert out["output_layer_ms"] > 0 and 0 < out["output_layer_floor_ms"] < out["step_floor_ms"]
    assert out["transformer_model"] == "transformer"     # its config's name, found by its arch
    assert out["transformer_greedy_ms_p50"] > 0 and out["transformer_beam5_ms_p50"] > 0
    assert out["neuron_view_ms"] > 0            # one head's row of the same Transformer (s2s.heads)
    # the contribution methods are timed on the Transformer, against its own forced decoding
    assert out["contrib_model"] == "transformer" and out["contrib_ms"] > 0 and out["forced_ms"] > 0
    assert out["contrib_vs_forced"] == pytest.approx(out["contrib_ms"] / out["forced_ms"], rel=0.02)
    assert out["grad_x_input_ms"] > 0 and len(out["contrib_pieces"]) == 2


def test_browser_bench_summary_flags_the_actions_over_target():
    """tools/bench_browser.py: medians per action against the targets (5 s cold start, 1 s
    for everything else); the browser run itself is a tool, not a test."""
    import importlib.util

    from conftest import ROOT
    spec = importlib.util.spec_from_file_location("bench_browser", ROOT / "tools" / "bench_browser.py")
    bb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bb)
    out = bb.summary({"cold_start": [4000, 9000, 4500], "cold_start_heatmap": [3000, 4800, 6000],
                      "translate_greedy": [300, 2500, 400], "switch_model": [1200, 1100, 900]})
    assert out["ms_p50"] == {"cold_start": 4500, "cold_start_heatmap": 4800, "translate_greedy": 400,
                             "switch_model": 1100}
    assert out["ms_max"]["translate_greedy"] == 2500 and out["samples"]["cold_start"] == 3
    assert out["over_target"] == ["switch_model"]        # both cold starts have 5 s
    links = bb.summary({"start_link_bottleneck": [1400, 1600, 1450], "start_link_heads": [1600, 1700, 1500]})
    assert links["over_target"] == ["start_link_heads"]      # a start link has 1.5 s
    # two checkouts side by side: the last one's medians over the first's, for what both timed
    assert bb.compared({"old": {"ms_p50": {"a": 1000, "b": 400}}, "new": {"ms_p50": {"a": 500, "c": 10}}}) == {"a": 0.5}


def test_browser_bench_times_a_hub_models_first_use_on_a_warmed_up_server(monkeypatch):
    """Issue #54: with --hub, tools/bench_browser.py times `hub_first_use` (target 5 s) before the hub
    model's explain link, once the server has warmed up: its CPU idle for IDLE_S (longer than the
    warm-up's pause after a page's run), read from /proc; a server that stays busy is a TimeoutError."""
    import importlib.util
    import subprocess
    import sys

    from conftest import ROOT
    spec = importlib.util.spec_from_file_location("bench_browser", ROOT / "tools" / "bench_browser.py")
    bb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bb)
    assert bb.TARGET_MS["hub_first_use"] == 5000 and "hub_first_use" in bb.__doc__
    assert bb.IDLE_S > 2.0                                       # ui.warm.QUIET_S: the warm-up's pause
    recorded = []
    monkeypatch.setattr(bb, "new_tab", lambda b, url: 1.0)
    monkeypatch.setattr(bb, "explain_link", lambda b, url, model, *a: recorded.append(("link", model)) or 1.0)
    monkeypatch.setattr(bb, "hub_first_use", lambda b, url, hub, pid: recorded.append(("first use", hub, pid)) or 1.0)
    sentence = iter([("a", "a"), ("b", "b")])
    bb.explain_links(None, "url", ["en-fr-additive"], "/hub", sentence, lambda name, measure: measure(), pid=42)
    assert recorded == [("link", "en-fr-additive"), ("first use", "/hub", 42), ("link", "/hub")]
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert bb.wait_idle(idle.pid, quiet_s=0.5, timeout_s=30) < 30
        with pytest.raises(TimeoutError):
            bb.wait_idle(busy.pid, quiet_s=0.5, share=0.01, timeout_s=2)
    finally:
        idle.kill(), busy.kill()
        idle.wait(), busy.wait()


def test_the_attribution_calibration_prints_each_kinds_factor_and_its_runs(untrained_translators, capsys):
    """tools/calibrate_attributions.py (issue #54), shrunk to one sentence on tiny models: per kind,
    each run's integrated gradients and leave-one-out over ui.alignment.measurements.attribution_work (the
    trace times the pieces), the median as the factor, and when each progress stage ended."""
    import importlib.util
    import json

    from conftest import ROOT
    spec = importlib.util.spec_from_file_location("calibrate", ROOT / "tools" / "calibrate_attributions.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main(["--sentences", "1", "--kinds", "recurrent", "transformer",
                      "--recurrent", str(untrained_translators["additive"].path),
                      "--transformer", str(untrained_translators["transformer"].path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["IG_PASSES"]) == set(out["LOO_PASSES"]) == {"recurrent", "transformer"}
    assert out["threads"] == 1 and out["machine"]["cores"] and set(out["current"]) == {"IG_PASSES", "LOO_PASSES"}
    for kind, got in out["kinds"].items():
        (run,) = got["runs"]
        assert got["ig_passes"] == pytest.approx(run["ig_passes"], abs=0.01)         # one run: the median
        assert run["ig_passes"] == pytest.approx(run["ig_s"] / (run["trace_s"] * run["output_pieces"]), rel=0.02)
        assert run["loo_passes"] == pytest.approx(run["loo_s"] / (run["trace_s"] * (run["source_pieces"] + 1)),
                                                  rel=0.02)
        stages = run["stages"]
        assert 0 < stages["end_points"] <= stages["first_round"] <= 1
        assert (stages["first_forward"] is None) == (kind == "recurrent")      # a Transformer's forward pass


def test_train_step_bench_prints_each_setting_as_json():
    """tools/bench_train_step.py, shrunk to one small step per setting: four settings (fp32 and
    bf16, each with glibc's default allocator and with train_transformer.sh's), each in its own
    process, and the product timed in both precisions."""
    import json
    import subprocess
    import sys

    from conftest import ROOT
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_train_step.py"), "--steps", "1",
                          "--max-tokens", "300"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert set(got) == {"product_4000x256x1024_ms", "fp32_malloc_default", "fp32_malloc_kept",
                        "bf16_malloc_default", "bf16_malloc_kept"}
    assert set(got["product_4000x256x1024_ms"]) == {"float32", "bfloat16"}
    for setting in ("fp32_malloc_default", "fp32_malloc_kept", "bf16_malloc_default", "bf16_malloc_kept"):
        assert got[setting]["s_per_step"] > 0 and got[setting]["target_tokens_per_s"] > 0


def test_train_step_bench_sets_the_inner_dropout_and_profiles_it():
    """`--inner-dropout 0 --profile`: the step of train_transformer.sh's recipe, with the share
    of each step spent drawing dropout's random numbers (some: sub-layer dropout stays on)."""
    import json
    import subprocess
    import sys

    from conftest import ROOT
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_train_step.py"), "--steps", "1",
                          "--max-tokens", "300", "--inner-dropout", "0", "--profile"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    for setting in ("fp32_malloc_default", "fp32_malloc_kept", "bf16_malloc_default", "bf16_malloc_kept"):
        assert 0 < got[setting]["bernoulli_share"] < 1


def test_bench_times_a_models_heads_alone(hub_models, tmp_path):
    """--heads-only: importance_vs_forced (importance over the same pairs' forced passes one at a
    time, in this run) and prune_s for --model, a hub Transformer; its own output cap said."""
    import json
    import subprocess
    import sys

    from conftest import ROOT
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("the cat sat on the mat .\tle chat est assis sur le tapis .\n"
                     "hello world !\tbonjour le monde !\nthe house is red .\tla maison est rouge .\n")
    p = subprocess.run([sys.executable, "-m", "s2s.bench", "--model", str(hub_models["marian"]), "--heads-only",
                        "--held-out", str(pairs), "--prune-pairs", "2", "--importance-pairs", "3", "--runs", "1",
                        "--json"], cwd=ROOT, capture_output=True, text=True, timeout=1800)    # minutes under load
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["importance_pairs"] == 3 and out["forced_s"] > 0 and out["importance_s"] > 0
    # importance_s is printed to 0.01 s, forced_s to 0.001 s: their ratio within that rounding
    low = (out["importance_s"] - 0.005) / (out["forced_s"] + 0.0005)
    high = (out["importance_s"] + 0.005) / max(out["forced_s"] - 0.0005, 1e-9)
    assert low - 0.01 <= out["importance_vs_forced"] <= high + 0.01
    assert out["prune_pairs"] == 2 and out["prune_s"] > 0 and out["prune_decodings"] > 1
    assert out["own_cap"] == 0 and out["mask_vs_greedy"] > 0
    p = subprocess.run([sys.executable, "-m", "s2s.bench", "--model", str(tmp_path / "missing"), "--heads-only"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
