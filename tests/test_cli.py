"""Every command-line interface, exactly as users call it, including bad input."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, reversal_pairs, write_tsv


def run(*args, stdin=None, timeout=120):
    p = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                       input=stdin, timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_translate_json(tiny_additive):
    p = run("s2s.translate", "--model", str(tiny_additive), "--json", "--", "a b c d")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["translation"] == "d c b a"
    assert out["source_tokens"][-1] == out["target_tokens"][-1] == "</s>"
    assert len(out["attention"]) == len(out["target_tokens"])
    assert all(len(r) == len(out["source_tokens"]) and abs(sum(r) - 1) < 1e-4 for r in out["attention"])
    assert isinstance(out["log_prob"], float) and out["log_prob"] <= 0


def test_translate_plain_beam_sample_reference_and_stdin(tiny_additive):
    m = str(tiny_additive)
    assert run("s2s.translate", "--model", m, "a b c").stdout.strip() == "c b a"
    assert run("s2s.translate", "--model", m, "--beam", "4", "--", "a b c").stdout.strip() == "c b a"
    p = run("s2s.translate", "--model", m, "--sample", "--temperature", "0.5", "--top-k", "3", "--seed", "2",
            "--json", "--", "a b c")
    assert p.returncode == 0 and json.loads(p.stdout)["translation"]
    p = run("s2s.translate", "--model", m, "--reference", "c a b", "--json", "--", "a b c")
    forced = json.loads(p.stdout)
    assert forced["translation"] == "c a b" and forced["log_prob"] < -1   # a wrong reference is unlikely
    assert run("s2s.translate", "--model", m, stdin="e f g\n").stdout.strip() == "g f e"


def test_translate_none_model_has_null_attention(tiny_none):
    out = json.loads(run("s2s.translate", "--model", str(tiny_none), "--json", "--", "a b").stdout)
    assert out["attention"] is None and out["target_tokens"]


@pytest.mark.parametrize("args,msg", [
    (["--", ""], "empty"),
    (["--", "\x01\x02\x7f"], "empty"),
    (["--", "word " * 4000], "limit"),
    (["--", "x" * 5000], "limit"),
    (["--beam", "99", "--", "a b"], "Beam width"),
    (["--sample", "--temperature", "-1", "--", "a b"], "Temperature"),
    (["--max-len", "100000", "--", "a b"], "Max length"),
    (["--no-repeat", "-1", "--", "a b"], "No-repeat"),
    (["--beam", "3", "--no-repeat", "99", "--", "a b"], "No-repeat"),
])
def test_translate_bad_input_is_a_clear_message(tiny_additive, args, msg):
    p = run("s2s.translate", "--model", str(tiny_additive), *args)
    assert p.returncode == 2 and msg in p.stderr and p.stdout == ""


def test_translate_odd_characters_give_a_result(tiny_additive):
    p = run("s2s.translate", "--model", str(tiny_additive), "--json", "--", "a 😀 b <script>alert(1)</script> ‮c")
    assert p.returncode == 0 and json.loads(p.stdout)["target_tokens"]


def test_translate_missing_or_broken_model(tmp_path):
    p = run("s2s.translate", "--model", str(tmp_path / "nope"), "hello")
    assert p.returncode == 2 and "nope" in p.stderr and "does not exist" in p.stderr


def test_evaluate_on_a_tiny_generated_corpus(tiny_additive, tmp_path):
    tsv = write_tsv(reversal_pairs(60, seed=9, lo=2, hi=12), tmp_path / "test.tsv")
    p = run("s2s.evaluate", "--model", str(tiny_additive), "--test", str(tsv), "--beam", "3", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["n"] == 60 and 0 <= out["chrf"] <= 100 and out["bleu"] > 50 and out["perplexity"] >= 1
    bins = out["by_length"]
    assert [(b["min_words"], b["max_words"]) for b in bins] == [(1, 10), (11, 20), (21, 30), (31, 40), (41, 50),
                                                                 (51, 60)]
    assert sum(b["n"] for b in bins) == 60 and bins[2]["n"] == 0 and bins[2]["bleu"] is None
    p = run("s2s.evaluate", "--model", str(tiny_additive), "--test", str(tmp_path / "missing.tsv"))
    assert p.returncode == 2 and "missing.tsv" in p.stderr


def test_bench_prints_figures(tiny_additive, tiny_none, tiny_charlm, tmp_path):
    gold = tmp_path / "gold"           # the shipped trial pairs as a gold's test split
    gold.mkdir()
    for side in ("en", "fr", "wa"):
        (gold / f"test.{side}").write_bytes((ROOT / "examples" / "hansards_trial" / f"trial.{side}").read_bytes())
    p = run("s2s.bench", "--model", str(tiny_additive), "--checkpoints", str(Path(tiny_additive).parent),
            "--runs", "3", "--batch-sentences", "40", "--align-gold", str(gold), "--align-model", str(tiny_additive),
            "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for key in ("greedy_ms_p50", "beam5_ms_p50", "batch_sentences_per_s", "load_s", "peak_rss_mb",
                "cells_ms_2000_chars", "sample_ms_800_chars", "threads", "heatmap_ms_p50", "cached_result_kb",
                "cached_result_kb_longest",
                "live_demo_ms", "live_demo_ms_largest", "explain_ms", "align_pairs_per_s"):
        assert out[key] > 0
    assert out["gradient_flow_ms"]["lstm"] > 0       # the tiny character model is an LSTM
    assert (out["cached_result_kb"] < out["result_with_states_kb"]
            and out["cached_result_kb"] < out["cached_result_kb_longest"])
    assert out["cells_model"].startswith("charlm-")


def test_no_repeat_on_the_command_lines(tiny_additive, tmp_path):
    """--no-repeat N reaches the search: one text, a file, and the evaluation (its loop count too)."""
    m = str(tiny_additive)
    assert run("s2s.translate", "--model", m, "--no-repeat", "3", "--", "a b c").stdout.strip() == "c b a"
    f = tmp_path / "in.txt"
    f.write_text("a b c\n\nd e\n", encoding="utf-8")
    p = run("s2s.translate", "--model", m, "--input", str(f), "--beam", "2", "--no-repeat", "2")
    assert p.returncode == 0 and p.stdout.splitlines() == ["c b a", "", "e d"]
    assert "--no-repeat" in run("s2s.translate", "--model", m, "--input", str(f), "--no-repeat", "11").stderr
    tsv = write_tsv(reversal_pairs(30, seed=9, lo=2, hi=12), tmp_path / "test.tsv")
    out = json.loads(run("s2s.evaluate", "--model", m, "--test", str(tsv), "--loops", "--beam", "2",
                         "--no-repeat", "4", "--json").stdout)
    assert out["no_repeat"] == 4 and out["loops"]["no_repeat"] == 4 and out["bleu"] > 50
