"""Corpus alignment (s2s.alignment.corpus through `python -m s2s.alignment --input`): the
Pharaoh format, batched attention against one pair at a time, the shift rule, scoring, bad
lines, heads, and torchrun's split of the file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from s2s import alignment as A
from s2s.alignment import corpus as C
from s2s.checkpoint import load_translator
from s2s.decode import forced, forced_batch_attention
from s2s.text import InputError

TRIAL = ROOT / "examples" / "hansards_trial"
GENERAL = ROOT / "checkpoints" / "en-fr-general"


def trial_tsv(path: Path, n: int | None = None) -> Path:
    en = (TRIAL / "trial.en").read_text(encoding="utf-8").splitlines()[:n]
    fr = (TRIAL / "trial.fr").read_text(encoding="utf-8").splitlines()[:n]
    path.write_text("".join(f"{e}\t{f}\n" for e, f in zip(en, fr)), encoding="utf-8")
    return path


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "s2s.alignment", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)


def test_pharaoh_round_trip_and_bad_links(tmp_path):
    found = {(3, 1), (0, 0), (2, 1), (10, 12)}
    line = C.format_pharaoh(found)
    assert line == "0-0 2-1 3-1 10-12"                      # sorted, from 0
    assert C.parse_pharaoh(line) == (found, found)           # sure links are possible too
    sure, possible = C.parse_pharaoh("0-0 1?2 3p4")
    assert sure == {(0, 0)} and possible == {(0, 0), (1, 2), (3, 4)}
    assert C.format_pharaoh(set()) == "" and C.parse_pharaoh("") == (set(), set())
    f = tmp_path / "links.txt"
    f.write_text("0-0 1-1\n\n2?0\n", encoding="utf-8")
    assert C.read_pharaoh(f) == [({(0, 0), (1, 1)},) * 2, (set(), set()), (set(), {(2, 0)})]
    for bad in ("0-", "a-1", "1:2", "-1-2"):
        with pytest.raises(InputError, match="expected links"):
            C.parse_pharaoh(bad)


def test_shift_reads_each_french_piece_one_step_later():
    """A hand-made (target pieces x source pieces) matrix: rows are the decoding steps, the
    last one predicting </s>. Unshifted, French piece j is row j; shifted, row j + 1."""
    wp = A.WordPieces(source=[5, 6, 7, 2], target=[8, 9, 2], english_of=[0, 1, 2], french_of=[0, 1],
                      e0=0, f0=0, n_english=3, n_french=2)
    att = np.array([[0.7, 0.2, 0.1, 0.0],     # step 0 predicts French piece 0
                    [0.1, 0.8, 0.1, 0.0],     # step 1 predicts piece 1 (its input: piece 0)
                    [0.0, 0.1, 0.9, 0.0]])    # step 2 predicts </s> (its input: piece 1)
    np.testing.assert_allclose(A.to_words(att, wp), att[:2, :3])
    np.testing.assert_allclose(A.to_words(att, wp, shift=True), att[1:, :3])
    assert A.links(A.to_words(att, wp), "argmax") == {(0, 0), (1, 1)}
    assert A.links(A.to_words(att, wp, shift=True), "shift") == {(1, 0), (2, 1)}
    assert A.shifted("shift") and not A.shifted("argmax")
    heads = np.stack([att, att[::-1]])[None]                 # (1 layer, 2 heads, T, S)
    assert A.to_words(heads, wp, shift=True).shape == (1, 2, 2, 3)


def test_batched_attention_is_one_pair_at_a_time(untrained_translators, tiny_transformer, hub_models):
    """forced_batch_attention pads sources and targets; each pair's rows are what forced()
    reports for it alone, for a recurrent model, our Transformer (every head) and a hub model."""
    for tr, heads in ((untrained_translators["additive"], False), (load_translator(tiny_transformer), True),
                      (load_translator(hub_models["marian"]), True)):
        pairs = [(["a", "b", "c"], ["c", "b"]), (["d"], ["d", "e", "a", "b"]), (["e", "a", "b", "c", "d"], ["a"])]
        wps = [A.word_inputs(tr, en, fr) for en, fr in pairs]
        batch = forced_batch_attention(tr, [w.source for w in wps], [w.target for w in wps])
        every = forced_batch_attention(tr, [w.source for w in wps], [w.target for w in wps], heads=True)
        for (en, _), w, a, h in zip(pairs, wps, batch, every):
            d = forced(tr, " ".join(en), reference_ids=w.target, source_ids=w.source)
            np.testing.assert_allclose(a, d.attention, atol=1e-5)
            np.testing.assert_allclose(a.sum(-1), 1, atol=1e-5)
            if heads:
                np.testing.assert_allclose(h, d.cross_attention, atol=1e-5)
            else:
                assert h is None


def test_corpus_links_score_as_gold_reports(tmp_path):
    """The 37 trial pairs: the file's links, scored by the project's AER code against the
    gold, give exactly the AER that --gold prints, and the same as the one-pair-at-a-time
    evaluation; --gold as a Pharaoh file of the gold's own links scores the same way."""
    tsv, out = trial_tsv(tmp_path / "trial.tsv"), tmp_path / "links.txt"
    p = run("--model", str(GENERAL), "--input", str(tsv), "--output", str(out), "--gold", str(TRIAL),
            "--split", "trial", "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert "aligned 37 pairs" in p.stderr and "pairs/s" in p.stderr and "0 lines could not" in p.stderr
    gold = A.read_gold(TRIAL, "trial")
    found = [s for s, _ in C.read_pharaoh(out)]
    assert len(found) == 37 and all(found)
    s = A.score(found, gold)
    assert (report["aer"], report["precision"], report["recall"], report["links"]) == \
        (round(s.aer, 4), round(s.precision, 4), round(s.recall, 4), s.links)
    assert report["aer"] == round(A.evaluate(load_translator(GENERAL), gold).aer, 4)
    pharaoh_gold = tmp_path / "gold.txt"
    pharaoh_gold.write_text("".join(" ".join([f"{e}-{f}" for e, f in sorted(g.sure)]
                                             + [f"{e}?{f}" for e, f in sorted(g.possible - g.sure)]) + "\n"
                                    for g in gold), encoding="utf-8")
    p = run("--model", str(GENERAL), "--input", str(tsv), "--output", str(out), "--gold", str(pharaoh_gold), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["aer"] == report["aer"]


def test_bad_lines_leave_empty_lines_and_a_count(tmp_path):
    good = trial_tsv(tmp_path / "good.tsv", 3).read_bytes().splitlines()
    bad = [good[0], b"no tab on this line", b"\tonly French", b"English only\t", b"", b"caf\xe9\tcaf\xc3\xa9",
           good[1], b" ".join([b"word"] * 400) + b"\tmot", good[2]]
    tsv = tmp_path / "bad.tsv"
    tsv.write_bytes(b"\n".join(bad) + b"\n")
    p = run("--model", str(GENERAL), "--input", str(tsv), "--output", str(tmp_path / "bad.txt"))
    assert p.returncode == 0, p.stderr
    assert "6 lines could not be aligned" in p.stderr
    lines = (tmp_path / "bad.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == len(bad)
    assert [i for i, line in enumerate(lines) if not line] == [1, 2, 3, 4, 5, 7]
    p = run("--model", str(GENERAL), "--input", str(tmp_path / "good.tsv"), "--output", str(tmp_path / "good.txt"))
    assert p.returncode == 0, p.stderr
    assert [lines[0], lines[6], lines[8]] == (tmp_path / "good.txt").read_text(encoding="utf-8").splitlines()


def test_heads_layers_and_refusals(tmp_path, tiny_transformer):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("a b c\tc b a\nd e\te d\n", encoding="utf-8")
    out = tmp_path / "links.txt"
    p = run("--model", str(tiny_transformer), "--input", str(tsv), "--output", str(out), "--layer", "1",
            "--head", "2", "--rule", "shift", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["head"] == {"layer": 1, "head": 2}
    assert len(out.read_text().splitlines()) == 2
    for args, message in ((["--layer", "9", "--head", "1"], "has layers 1-"), (["--layer", "1"], "both --layer"),
                          (["--gold", str(TRIAL), "--split", "trial"], "the gold has 37 pairs but the input has 2")):
        p = run("--model", str(tiny_transformer), "--input", str(tsv), "--output", str(out), *args)
        assert p.returncode == 2 and p.stderr.startswith("error:") and message in p.stderr, p.stderr
    p = run("--model", str(GENERAL), "--input", str(tsv), "--output", str(out), "--layer", "1", "--head", "1")
    assert p.returncode == 2 and "recurrent model" in p.stderr
    p = run("--model", str(GENERAL), "--input", str(tmp_path / "missing.tsv"), "--output", str(out))
    assert p.returncode == 2 and p.stderr.startswith("error:") and "does not exist" in p.stderr


def test_choose_on_picks_the_best_head_of_the_trial_gold(tmp_path):
    """--choose-on reads the layer x head with the lowest AER on the gold's trial split: the
    same head and AER as head_scores and best_head give."""
    zoo = ROOT / "checkpoints" / "en-fr-transformer"
    tsv, out = trial_tsv(tmp_path / "few.tsv", 4), tmp_path / "links.txt"
    p = run("--model", str(zoo), "--input", str(tsv), "--output", str(out), "--choose-on", str(TRIAL), "--json")
    assert p.returncode == 0, p.stderr
    tr = load_translator(zoo)
    (l, h), aer, skipped = C.choose_head(tr, A.read_gold(TRIAL, "trial"), "grow-diag")
    assert skipped == 0                 # a shipped model has no position limit
    assert json.loads(p.stdout)["head"] == {"layer": l + 1, "head": h + 1, "aer": round(aer, 4), "on": "trial",
                                            "skipped": 0}


def test_torchrun_writes_the_single_process_file(tmp_path):
    """Two processes (gloo, CPU) split the batches; the file is byte-identical to one process's."""
    tsv = trial_tsv(tmp_path / "trial.tsv")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    args = ["--model", str(GENERAL), "--input", str(tsv), "--batch-size", "4"]
    one = run(*args, "--output", str(tmp_path / "one.txt"), env=env)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "s2s.alignment", *args, "--output", str(tmp_path / "two.txt")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert two.returncode == 0, two.stderr
    assert "2 processes" in two.stderr
    assert (tmp_path / "two.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
