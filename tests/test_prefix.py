"""Steering (issue #55): a target prefix that every search continues from, for every model family.

`DecodeSettings.target_prefix` (French text or target ids) is given, not chosen; the search goes on
from it (beam search: every hypothesis shares it). The Decoding marks it (`prefix_length`) and scores
it as the model does, so a steered output's log p is forced decoding's of the same output. Families:
the tiny recurrent model with attention and the tiny Transformer (tests/conftest.py), tiny random
Marian, T5 and M2M100 models (tests/hub_models.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from s2s import decode as D
from s2s.checkpoint import load_translator
from s2s.text import InputError

FAMILIES = ["additive", "transformer", "marian", "t5", "m2m100"]
OURS = "a b c d e f"                      # the reversal task: "f e d c b a"
HUB = "the cat sat on the mat ."
PREFIX_TEXT = {"additive": "b", "transformer": "b", "marian": "le chat", "t5": "le chat", "m2m100": "le chat"}


@pytest.fixture(scope="module")
def models(tiny_additive, tiny_transformer, hub_models):
    out = {"additive": load_translator(tiny_additive), "transformer": load_translator(tiny_transformer)}
    out.update({name: load_translator(path) for name, path in hub_models.items()})
    return out


def case(models, family):
    """The model, its sentence and a length limit that keeps a random hub model's output short."""
    tr = models[family]
    return (tr, OURS, None) if family in ("additive", "transformer") else (tr, HUB, 8)


def assert_same_decoding(a: D.Decoding, b: D.Decoding, atol: float = 1e-4) -> None:
    """Tokens equal; log-probs and attention equal up to float rounding."""
    assert a.target_ids == b.target_ids
    np.testing.assert_allclose(a.token_log_probs, b.token_log_probs, atol=atol)
    if a.attention is None:
        assert b.attention is None
    else:
        np.testing.assert_allclose(a.attention, b.attention, atol=atol)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_prefix_of_greedys_own_tokens_gives_the_greedy_output(models, family):
    """Given its own first k greedy tokens, greedy writes what it wrote: the same tokens,
    log-probs and attention, whatever k (up to the whole output, </s> included)."""
    tr, text, max_len = case(models, family)
    g = D.greedy(tr, text, max_len=max_len)
    for k in sorted({0, 1, 2, len(g.target_ids) // 2, len(g.target_ids) - 1, len(g.target_ids)}):
        s = D.decode(tr, text, D.DecodeSettings("greedy", max_len=max_len, target_prefix=g.target_ids[:k]))
        assert_same_decoding(s, g)
        assert s.prefix_length == k and g.prefix_length == 0
        assert s.translation == g.translation and len(s.step_top) == len(g.step_top)


@pytest.mark.parametrize("family", FAMILIES)
def test_beam_with_an_empty_prefix_is_todays_beam(models, family):
    tr, text, max_len = case(models, family)
    b = D.beam_search(tr, text, width=3, max_len=max_len)
    for empty in ("", "   ", [], None):
        e = D.decode(tr, text, D.DecodeSettings("beam", 3, max_len=max_len, target_prefix=empty))
        assert e.target_ids == b.target_ids and e.beam_tree == b.beam_tree and e.prefix_length == 0
        assert [h.tokens for h in e.nbest] == [h.tokens for h in b.nbest]


@pytest.mark.parametrize("method", ["greedy", "beam", "sample"])
@pytest.mark.parametrize("family", FAMILIES)
def test_the_steered_output_starts_with_the_prefix_and_scores_as_forced(models, family, method):
    """Text tokenised by the model's target tokenizer, as a reference is; the output starts with
    its pieces, then the search goes on; log p (and each token's) is forced decoding's of the
    same output, the prefix's tokens included, and so is the attention, a row per step."""
    tr, text, max_len = case(models, family)
    settings = D.DecodeSettings(method, width=3, max_len=max_len, seed=4, target_prefix=PREFIX_TEXT[family])
    prefix, unknown = D.target_prefix_ids(tr, PREFIX_TEXT[family])
    assert prefix and not unknown and tr.tokenizer.eos_id not in prefix
    s = D.decode(tr, text, settings)
    assert s.target_ids[:len(prefix)] == prefix and s.prefix_length == len(prefix)
    assert len(s.token_log_probs) == len(s.target_tokens) == len(s.target_ids) >= len(prefix)
    if s.attention is not None:
        assert s.attention.shape[0] == len(s.target_tokens)
    f = D.forced(tr, text, reference_ids=s.target_ids)
    assert s.log_prob == pytest.approx(f.log_prob, abs=1e-4)
    assert_same_decoding(s, f)
    if method == "beam":          # every hypothesis shares the prefix: one node a step, then it branches
        assert all(h.tokens[:len(prefix)] == tr.tokenizer.pieces(prefix) for h in s.nbest)
        assert [n["step"] for n in s.beam_tree[:len(prefix)]] == list(range(len(prefix)))
        assert [n["parent"] for n in s.beam_tree[:len(prefix)]] == list(range(-1, len(prefix) - 1))
        assert all(n["step"] >= len(prefix) for n in s.beam_tree[len(prefix):])


@pytest.mark.parametrize("family", ["additive", "transformer", "marian"])
def test_sampling_from_a_prefix_with_the_same_seed_reproduces(models, family):
    tr, text, max_len = case(models, family)
    settings = D.DecodeSettings("sample", max_len=max_len, seed=11, temperature=1.5, target_prefix=PREFIX_TEXT[family])
    a, b = D.decode(tr, text, settings), D.decode(tr, text, settings)
    assert a.target_ids == b.target_ids and a.token_log_probs == b.token_log_probs


def test_a_prefix_that_ends_the_sentence_or_reaches_the_length_limit_is_the_output(models):
    """A prefix closed by </s>, or as long as the length limit, is the whole output (every
    search); one that is longer, or has </s> before its end, is a one-line InputError."""
    tr = models["additive"]
    eos = tr.tokenizer.eos_id
    closed = tr.tokenizer.target_ids("b c")
    assert closed[-1] == eos
    for method in ("greedy", "beam", "sample"):
        d = D.decode(tr, OURS, D.DecodeSettings(method, width=3, target_prefix=closed))
        assert d.target_ids == closed and d.prefix_length == len(closed) and d.translation == "b c"
        at_limit = D.decode(tr, OURS, D.DecodeSettings(method, width=3, max_len=2, target_prefix="b c"))
        assert at_limit.target_ids == tr.tokenizer.encode("b c") and at_limit.prefix_length == 2
        for bad, words in [(D.DecodeSettings(method, width=3, max_len=2, target_prefix="b c d"), "at most 2"),
                           (D.DecodeSettings(method, width=3, target_prefix=[closed[0], eos, closed[1]]), "</s>")]:
            with pytest.raises(InputError, match=words) as e:
                D.decode(tr, OURS, bad)
            assert "\n" not in str(e.value)


def test_characters_the_target_vocabulary_lacks_are_said_and_read_as_unk(models):
    """As typed source text does: the output goes on past <unk>, and the Decoding names the
    characters (the CLI prints the app's note on stderr)."""
    tr = models["additive"]
    assert tr.tokenizer.unknown_characters("b ☃", target=True) == ["☃"]
    for method in ("greedy", "beam"):
        d = D.decode(tr, OURS, D.DecodeSettings(method, width=3, target_prefix="b ☃"))
        assert d.prefix_unknown == ["☃"] and tr.tokenizer.unk_id in d.target_ids[:d.prefix_length]
        assert D.forced(tr, OURS, reference_ids=d.target_ids).log_prob == pytest.approx(d.log_prob, abs=1e-4)


@pytest.mark.parametrize("prefix,words", [([10 ** 6], "not in this model's vocabulary"), ([-1], "whole numbers"),
                                          ([1.5], "whole numbers"), ("\x01\x02", "target prefix is empty")])
def test_bad_prefixes_are_one_line_errors(models, prefix, words):
    with pytest.raises(InputError, match=words) as e:
        D.decode(models["additive"], OURS, D.DecodeSettings(target_prefix=prefix))
    assert "\n" not in str(e.value)


def test_forced_decoding_marks_a_prefix_the_reference_starts_with(models):
    tr = models["transformer"]
    d = D.decode(tr, OURS, D.DecodeSettings("forced", target_prefix="f e"), reference="f e d c b a")
    assert d.prefix_length == 2 and d.translation == "f e d c b a"
    with pytest.raises(InputError, match="does not start with the target prefix"):
        D.decode(tr, OURS, D.DecodeSettings("forced", target_prefix="a"), reference="f e d c b a")


def test_settings_keep_the_prefix_for_every_method_and_stay_a_cache_key():
    for method in D.METHOD_NAMES:
        s = D.DecodeSettings(method, target_prefix=[5, 6]).canonical()
        assert s.target_prefix == (5, 6) and hash(s) == hash(D.DecodeSettings(method, target_prefix=(5, 6)).canonical())
        assert D.DecodeSettings(method, target_prefix="Je").canonical().target_prefix == "Je"
        assert D.DecodeSettings(method, target_prefix=" ").canonical() == D.DecodeSettings(method).canonical()
        assert D.DecodeSettings(method, target_prefix=[]).canonical() == D.DecodeSettings(method).canonical()
    assert D.DecodeSettings(target_prefix=np.array([3, 4])).target_prefix == (3, 4)


def test_batched_searches_refuse_a_prefix_and_a_paragraph_steers_its_first_sentence(models):
    tr = models["additive"]
    with pytest.raises(InputError, match="batched"):
        D.greedy_batch(tr, [OURS, "a b"], D.DecodeSettings(target_prefix="b"))
    with pytest.raises(InputError, match="batched"):
        D.beam_search_batch(tr, [OURS], D.DecodeSettings("beam", 2, target_prefix=[5]))
    assert D.greedy_batch(tr, [OURS], D.DecodeSettings(target_prefix="")) == [D.greedy(tr, OURS).translation]
    first, second = D.greedy(tr, "a b c.", target_prefix="b"), D.greedy(tr, "d e f.")
    joined = D.decode_by_sentence(tr, "a b c. d e f.", D.DecodeSettings(target_prefix="b"))
    assert joined.target_ids == first.target_ids + second.target_ids and joined.prefix_length == first.prefix_length


def run(*args):
    p = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_translate_command_takes_a_target_prefix(tiny_additive):
    m = str(tiny_additive)
    plain = json.loads(run("s2s.translate", "--model", m, "--json", "--", OURS).stdout)
    p = run("s2s.translate", "--model", m, "--target-prefix", "b", "--json", "--", OURS)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out) == set(plain) | {"prefix_length"} and out["prefix_length"] == 1
    assert out["target_tokens"][0] == "▁b" and out["translation"].startswith("b")
    assert run("s2s.translate", "--model", m, "--target-prefix", "b", "--", OURS).stdout.strip() == out["translation"]
    beam = run("s2s.translate", "--model", m, "--beam", "3", "--target-prefix", "b", "--", OURS)
    assert beam.returncode == 0 and beam.stdout.startswith("b")
    empty = json.loads(run("s2s.translate", "--model", m, "--target-prefix", "", "--json", "--", OURS).stdout)
    assert empty == dict(plain, prefix_length=0)
    unk = run("s2s.translate", "--model", m, "--target-prefix", "b ☃", "--", OURS)
    assert unk.returncode == 0 and "note: 1 character of the target prefix" in unk.stderr
    for args, words in [(["--max-len", "1", "--target-prefix", "b c"], "at most 1"),
                        (["--input", "-", "--target-prefix", "b"], "--target-prefix take one text")]:
        p = run("s2s.translate", "--model", m, *args, "--", OURS) if "--input" not in args else \
            run("s2s.translate", "--model", m, *args)
        assert p.returncode == 2 and p.stderr.startswith("error:") and words in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


def test_bench_times_steering_against_greedy_alternately(models):
    from s2s import bench
    tr = models["additive"]
    d = D.greedy(tr, bench.SENTENCE_20)
    out = bench.steer_timing(tr, d, 3)
    assert set(out) == {"steer_ms", "steer_vs_greedy"} and out["steer_ms"] > 0 and out["steer_vs_greedy"] > 0
    calls = []
    ms = bench.alternating_ms({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3)
    assert set(ms) == {"a", "b"} and calls == ["a", "b", "a", "b", "b", "a", "a", "b"]   # warm-up, then ABBA
