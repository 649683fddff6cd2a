"""Batched beam search (decode.beam_search_batch) and `python -m s2s.translate --input FILE`.

The batched search must be the per-sentence search run side by side: the same
translation for every sentence, whatever else is in its batch."""
import json

import numpy as np
import pytest
from test_cli import run

from conftest import reversal_pairs
from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, beam_search, beam_search_batch, greedy
from s2s.evaluate import translate_all
from s2s.text import InputError

ATTENTIONS = ["none", "dot", "general", "additive", "scaled-dot", "copy"]   # copy: additive + pointer
# lengths 1 to 12 words, unsorted, a repeat: sorting, padding and sentences leaving the batch early
TEXTS = ["a b c", "j i h g f e d", "c", "b b a a", "e f g h i j a b", "a", "d e f g h i j a b c d e", "a b c"]


def same_search(batched, single, attention=True):
    assert batched.target_ids == single.target_ids
    assert batched.translation == single.translation
    assert batched.target_tokens == single.target_tokens and batched.source_tokens == single.source_tokens
    assert batched.log_prob == pytest.approx(single.log_prob, abs=1e-4)
    assert np.allclose(batched.token_log_probs, single.token_log_probs, atol=1e-4)
    if attention and single.attention is not None:
        assert batched.attention.shape == single.attention.shape
        assert np.allclose(batched.attention, single.attention, atol=1e-5)


@pytest.mark.parametrize("att", ATTENTIONS)
@pytest.mark.parametrize("width", [3, 5])
def test_batched_beam_equals_beam_per_sentence(untrained_translators, att, width):
    """Untrained models wander to the length limit, so this also checks the limit's rule."""
    tr = untrained_translators[att]
    out = beam_search_batch(tr, TEXTS, DecodeSettings("beam", width), batch_size=3, attention=True)
    assert len(out) == len(TEXTS)
    for text, d in zip(TEXTS, out):
        same_search(d, beam_search(tr, text, width=width, n_best=1))


@pytest.mark.parametrize("width", [2, 4, 8])
def test_batched_beam_equals_beam_per_sentence_on_a_trained_model(tiny_additive, width):
    tr = load_translator(tiny_additive)
    texts = [s for s, _ in reversal_pairs(40, seed=5, lo=1, hi=14)] + TEXTS
    for batch_size in (1, 7, 64):
        out = beam_search_batch(tr, texts, DecodeSettings("beam", width), batch_size=batch_size, attention=True)
        for text, d in zip(texts, out):
            same_search(d, beam_search(tr, text, width=width, n_best=1))
    assert out[TEXTS.index("a b c") - len(TEXTS)].translation == "c b a"


def test_batched_beam_keeps_settings_and_the_length_limit(tiny_additive):
    tr = load_translator(tiny_additive)
    for kw in (dict(max_len=2), dict(max_len=5, length_penalty=0.0), dict(length_penalty=2.0)):
        for text, d in zip(TEXTS, beam_search_batch(tr, TEXTS, DecodeSettings("beam", 4, **kw), batch_size=4)):
            same_search(d, beam_search(tr, text, width=4, n_best=1, **kw), attention=False)
    assert all(len(d.target_ids) <= 2 for d in beam_search_batch(tr, TEXTS, DecodeSettings("beam", 3, max_len=2)))


@pytest.mark.parametrize("att", ["additive", "none", "copy"])
def test_batched_width_one_is_greedy(untrained_translators, tiny_additive, att):
    for tr in (untrained_translators[att], load_translator(tiny_additive)):
        for text, d in zip(TEXTS, beam_search_batch(tr, TEXTS, DecodeSettings("beam", 1), batch_size=4,
                                                    attention=True)):
            same_search(d, greedy(tr, text))


def test_batched_beam_without_attention_recorded_and_its_edges(tiny_additive):
    tr = load_translator(tiny_additive)
    d = beam_search_batch(tr, ["a b c"], DecodeSettings("beam", 3))[0]
    assert d.attention is None and d.translation == "c b a" and d.to_json()["translation"] == "c b a"
    assert beam_search_batch(tr, [], DecodeSettings("beam", 3)) == []
    with pytest.raises(InputError):
        beam_search_batch(tr, ["a b", ""], DecodeSettings("beam", 3))
    with pytest.raises(InputError):
        beam_search_batch(tr, ["a b"], DecodeSettings("beam", 17))
    seen = []
    beam_search_batch(tr, TEXTS, DecodeSettings("beam", 2), batch_size=3,
                      progress=lambda n, total: seen.append((n, total)))
    assert seen == [(3, 8), (6, 8), (8, 8)]


def test_evaluate_uses_the_batched_beam(tiny_additive):
    tr = load_translator(tiny_additive)
    assert translate_all(tr, TEXTS, beam=4) == [beam_search(tr, t, width=4, n_best=1).translation for t in TEXTS]


# ---------------------------------------------------------------- the command line

LINES = ["a b c", "", "j i h g f e d", "   ", "c", "e f g h i j a b"]


def test_translate_file_keeps_lines_aligned(tiny_additive, tmp_path):
    tr = load_translator(tiny_additive)
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    for args, width in ((), None), (("--beam", "4", "--batch-size", "2"), 4):
        out = tmp_path / "out.txt"
        p = run("s2s.translate", "--model", str(tiny_additive), "--input", str(src), "--output", str(out), *args)
        assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p.stderr
        got = out.read_text(encoding="utf-8").split("\n")
        assert got[-1] == "" and len(got) - 1 == len(LINES)
        expect = [("" if not line.strip() else greedy(tr, line).translation if width is None
                   else beam_search(tr, line, width=width, n_best=1).translation) for line in LINES]
        assert got[:-1] == expect
        assert got[0] == "c b a" and got[1] == got[3] == ""
    # standard input, no final newline, Windows line ends: still one line out per line in
    p = run("s2s.translate", "--model", str(tiny_additive), "--input", "-", stdin="a b c\r\n\r\nc b")
    assert p.returncode == 0 and p.stdout == "c b a\n\nb c\n"


def test_translate_file_json_lines(tiny_additive, tmp_path):
    tr = load_translator(tiny_additive)
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    p = run("s2s.translate", "--model", str(tiny_additive), "--input", str(src), "--beam", "3", "--json")
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert len(rows) == len(LINES)
    fields = {"translation", "source_tokens", "target_tokens", "attention", "log_prob", "token_log_probs", "cut"}
    for line, row in zip(LINES, rows):
        assert set(row) == fields
        if not line.strip():
            assert row == {"translation": "", "source_tokens": [], "target_tokens": [], "attention": None,
                           "log_prob": 0.0, "token_log_probs": [], "cut": False}
            continue
        single = beam_search(tr, line, width=3, n_best=1).to_json()
        assert row["translation"] == single["translation"] and row["target_tokens"] == single["target_tokens"]
        assert row["source_tokens"] == single["source_tokens"]
        assert row["log_prob"] == pytest.approx(single["log_prob"], abs=1e-4)
        assert np.allclose(row["attention"], single["attention"], atol=1e-5)
        assert len(row["token_log_probs"]) == len(row["target_tokens"])
        assert row["cut"] == single["cut"]


def test_translate_file_none_model_has_null_attention(tiny_none, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b\nc\n", encoding="utf-8")
    p = run("s2s.translate", "--model", str(tiny_none), "--input", str(src), "--json")
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert p.returncode == 0 and len(rows) == 2 and all(r["attention"] is None and r["target_tokens"] for r in rows)


def test_translate_file_bad_lines_are_reported_and_skipped(tiny_additive, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b c\n" + "x" * 5000 + "\nc\n\x01\x02\n" + "a " * 300 + "\nb a\n", encoding="utf-8")
    p = run("s2s.translate", "--model", str(tiny_additive), "--input", str(src), "--beam", "2")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n") == ["c b a", "", "c", "", "", "a b", ""]
    messages = p.stderr.strip().splitlines()
    assert len(messages) == 3
    assert messages[0].startswith("line 2: ") and "limit" in messages[0]
    assert messages[1].startswith("line 4: ") and "empty" in messages[1]
    assert messages[2].startswith("line 5: ") and "limit" in messages[2]
    p = run("s2s.translate", "--model", str(tiny_additive), "--input", str(src), "--json")
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert p.returncode == 0 and len(rows) == 6
    assert [r["translation"] for r in rows] == ["c b a", "", "c", "", "", "a b"]
    assert [("error" in r) for r in rows] == [False, True, False, True, True, False]
    assert "limit" in rows[1]["error"]


@pytest.mark.parametrize("args,msg", [
    (["--input", "MISSING"], "cannot read"),
    (["--input", "IN", "--output", "NODIR/out.txt"], "cannot write"),
    (["--input", "IN", "--beam", "99"], "Beam width"),
    (["--input", "IN", "--max-len", "0"], "Max length"),
    (["--input", "IN", "--batch-size", "0"], "--batch-size"),
    (["--input", "IN", "--sample"], "--sample"),
    (["--input", "IN", "--reference", "c b a"], "--reference"),
    (["--input", "IN", "--", "a b"], "not both"),
])
def test_translate_file_unusable_arguments_exit_2(tiny_additive, tmp_path, args, msg):
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    paths = {"MISSING": str(tmp_path / "missing.txt"), "IN": str(tmp_path / "in.txt"),
             "NODIR/out.txt": str(tmp_path / "no" / "out.txt")}
    p = run("s2s.translate", "--model", str(tiny_additive), *[paths.get(x, x) for x in args])
    assert p.returncode == 2 and msg in p.stderr and p.stdout == ""
    if "MISSING" in args:
        assert "missing.txt" in p.stderr


def test_translate_file_with_a_broken_model(tmp_path):
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    p = run("s2s.translate", "--model", str(tmp_path / "nope"), "--input", str(tmp_path / "in.txt"))
    assert p.returncode == 2 and "nope" in p.stderr


def test_repeated_ngram_mask_blocks_what_would_complete_a_seen_ngram():
    import torch

    from s2s.decode import repeated_ngram_mask
    prefix = torch.tensor([[5, 6, 7, 5, 6], [1, 2, 3, 4, 1]])
    blocked = lambda n: repeated_ngram_mask(prefix, n, 10).nonzero().tolist()   # noqa: E731
    assert blocked(3) == [[0, 7]]                       # (5, 6) was followed by 7; (4, 1) never seen
    assert blocked(2) == [[0, 7], [1, 2]]
    assert blocked(1) == [[0, 5], [0, 6], [0, 7], [1, 1], [1, 2], [1, 3], [1, 4]]
    assert repeated_ngram_mask(prefix, 6, 10) is None and repeated_ngram_mask(prefix, 0, 10) is None


@pytest.mark.parametrize("att", ["additive", "none", "copy"])
def test_no_repeat_blocks_loops_the_same_way_batched_and_per_sentence(untrained_translators, att):
    """Untrained models repeat themselves; with no_repeat=2 no output has a bigram twice, and
    the batched searches still equal the per-sentence ones."""
    tr = untrained_translators[att]
    for width in (1, 3):
        out = beam_search_batch(tr, TEXTS, DecodeSettings("beam", width, no_repeat=2), batch_size=3, attention=True)
        for text, d in zip(TEXTS, out):
            single = greedy(tr, text, no_repeat=2) if width == 1 else beam_search(tr, text, width, 1, no_repeat=2)
            same_search(d, single)
            ids = d.target_ids
            bigrams = list(zip(ids, ids[1:]))
            assert len(bigrams) == len(set(bigrams)), (text, d.translation)
    assert translate_all(tr, TEXTS, 1, no_repeat=2) == [greedy(tr, t, no_repeat=2).translation for t in TEXTS]
    plain = [greedy(tr, t).target_ids for t in TEXTS]
    assert any(len(set(zip(p, p[1:]))) < len(p) - 1 for p in plain)     # without it, they do repeat
    with pytest.raises(InputError, match="No-repeat"):
        greedy(tr, "a b", no_repeat=11)
