"""BLEU part by part (the lecture's slide example), token ranks, and search errors."""
import math

import pytest

from s2s.checkpoint import load_translator
from s2s.decode import forced, greedy
from s2s.evaluate import bleu_breakdown


def test_bleu_breakdown_reproduces_the_lecture_slide():
    b = bleu_breakdown("the Taro visited the Hanako", "Taro visited Hanako")
    assert b["matches"][:2] == [3, 1] and b["totals"][:2] == [5, 4]
    assert b["precisions"][:2] == [3 / 5, 1 / 4]
    assert b["bp"] == 1.0 and (b["hyp_len"], b["ref_len"]) == (5, 3)
    assert b["bleu2"] / 100 == pytest.approx(math.sqrt(3 / 5 * 1 / 4), abs=1e-4)     # 0.387
    assert b["precisions"][2] == 0.0 and 0 < b["bleu4"] < b["bleu2"]                  # smoothed, not zero


def test_bleu_breakdown_brevity_penalty_and_perfect_match():
    b = bleu_breakdown("Taro visited", "Taro visited Hanako yesterday")
    assert b["bp"] == pytest.approx(math.exp(1 - 4 / 2))
    perfect = bleu_breakdown("Je suis allé au cours .", "Je suis allé au cours .")
    assert perfect["bleu4"] == pytest.approx(100) and perfect["bleu2"] == pytest.approx(100)


def test_token_ranks(tiny_additive):
    tr = load_translator(tiny_additive)
    g = greedy(tr, "a b c d")
    assert g.token_ranks == [1] * len(g.target_tokens)                   # greedy takes the first choice
    f = forced(tr, "a b c d", "a b c d")                                  # the wrong order
    assert len(f.token_ranks) == len(f.target_tokens) and max(f.token_ranks) > 1
    assert all(r >= 1 for r in f.token_ranks)
