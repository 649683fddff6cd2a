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


def test_scaling_statistics_show_why_scaled_dot_divides_by_sqrt_d():
    from s2s.attention import scaling_statistics
    from s2s.figures import scaling_figure
    s = scaling_statistics([4, 64, 1024], n_keys=10, samples=400)
    for d, unscaled, scaled in zip(s["d"], s["std_unscaled"], s["std_scaled"]):
        assert unscaled == pytest.approx(math.sqrt(d), rel=0.1) and scaled == pytest.approx(1.0, rel=0.1)
    e = s["entropy_unscaled"]
    assert e[0] > e[1] > e[2] and e[2] < 0.2 * s["max_entropy"]          # unscaled: towards one-hot
    assert max(s["entropy_scaled"]) - min(s["entropy_scaled"]) < 0.1        # scaled: the same at every d
    fig = scaling_figure(s)
    assert len(fig.data) == 3 and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
