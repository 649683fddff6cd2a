"""The head overview: s2s.head_stats, each head's one number against a hand computation on a 1 x 2
head example, and s2s.figures.head_matrix, the matrix a click reads."""
import numpy as np
import pytest

from s2s.head_stats import eos_key, head_statistics

# layer 1: head 1 reads the diagonal, head 2 reads </s> (the last key) mostly; 3 queries, 3 keys
W = np.array([[[[0.7, 0.2, 0.1],
                [0.1, 0.8, 0.1],
                [0.5, 0.4, 0.1]],
               [[0.1, 0.1, 0.8],
                [0.2, 0.0, 0.8],
                [0.3, 0.1, 0.6]]]])


def test_each_statistic_is_its_formula_by_hand():
    s = head_statistics(W, eos_key=2)
    assert s["confidence"] == pytest.approx(np.array([[(0.7 + 0.8 + 0.5) / 3, (0.1 + 0.2 + 0.3) / 3]]))
    h = lambda row: -sum(p * np.log(p) for p in row if p > 0)  # noqa: E731
    assert s["entropy"] == pytest.approx(np.array([[np.mean([h(r) for r in W[0, 0]]),
                                                   np.mean([h(r) for r in W[0, 1]])]]), abs=1e-9)
    assert s["to_eos"] == pytest.approx(np.array([[0.1, (0.8 + 0.8 + 0.6) / 3]]))
    # one key: head 1's columns average (1.3, 1.4, 0.3) / 3, head 2's (0.6, 0.2, 2.2) / 3
    assert s["one_key"] == pytest.approx(np.array([[1.4 / 3, 2.2 / 3]]))


def test_without_an_eos_key_nothing_is_excluded_and_to_eos_is_nan():
    s = head_statistics(W, eos_key=None)
    assert s["confidence"][0, 1] == pytest.approx((0.8 + 0.8 + 0.6) / 3)
    assert np.isnan(s["to_eos"]).all()


def test_agreement_is_one_minus_aer_against_the_aligners_links():
    # the aligner: head 1 itself -> agreement 1; head 2 (</s> column dropped): its links against head 1's by hand
    from s2s.alignment import DEFAULT_RULE, links
    s = head_statistics(W, eos_key=2, aligner=W[0, 0])
    assert s["agreement"][0, 0] == pytest.approx(1.0)
    mine, ref = links(W[0, 1][:, :2], DEFAULT_RULE), links(W[0, 0][:, :2], DEFAULT_RULE)
    assert s["agreement"][0, 1] == pytest.approx(2 * len(mine & ref) / (len(mine) + len(ref)))
    assert s["agreement"][0, 1] < 1
    assert "agreement" not in head_statistics(W, eos_key=2)          # no aligner, no agreement


def test_only_the_statistics_asked_for():
    assert set(head_statistics(W, 2, which=("entropy",))) == {"entropy"}


def test_the_eos_key_is_the_last_closing_token():
    assert eos_key(["▁a", "</s>", "▁b", "</s>"]) == 3 and eos_key(["<s>", "▁a"]) is None


def test_the_matrix_is_a_click_target_without_drag_handles():
    """s2s.figures.head_matrix: fixed ranges, no drag, a marker per cell found at any distance
    (hoverdistance -1: the nearest cell answers a click anywhere on it), headers and corner
    their own traces; matrix_pick reads what a click hit."""
    from s2s.figures import head_matrix, matrix_pick
    v = np.arange(24, dtype=float).reshape(6, 4) / 24
    fig = head_matrix(v, "confidence", selected=(1, 2), knocked=[(0, 0), (5, 3)], corner="all")
    lay = fig.layout
    assert lay.dragmode is False and lay.hoverdistance == -1 and lay.xaxis.fixedrange and lay.yaxis.fixedrange
    assert tuple(lay.xaxis.range) == (-1.5, 3.5) and tuple(lay.yaxis.range) == (5.5, -1.5)    # layer 1 on top
    cells = fig.data[1]
    assert list(cells.x) == [h for _ in range(6) for h in range(4)] and list(cells.y) == [l for l in range(6)
                                                                                          for _ in range(4)]
    assert list(fig.data[2].text) == [str(l) for l in range(1, 7)] and list(fig.data[3].text) == ["1", "2", "3", "4"]
    assert fig.data[0].text[1][2] == f"{v[1, 2]:.2f}".replace("0.", ".", 1) and lay.meta["fits"]
    # the two header bands, two shapes per knocked head, the selected head's frame
    assert len(lay.shapes) == 2 + 2 * 2 + 1
    assert matrix_pick(1, 4 * 2 + 3, 6, 4) == ("head", 2, 3)
    assert matrix_pick(2, 5, 6, 4) == ("layer", 5) and matrix_pick(3, 3, 6, 4) == ("index", 3)
    assert matrix_pick(4, 0, 6, 4) == ("all",) and matrix_pick(0, 0, 6, 4) is None and matrix_pick(1, 24, 6, 4) is None


def test_numbers_leave_cramped_cells_and_hover_keeps_them():
    from s2s.figures import head_matrix
    v = np.full((24, 16), 0.5)
    fig = head_matrix(v, "entropy", width=300)           # 17 columns in 300 px: ".50" does not fit
    assert not fig.layout.meta["fits"] and fig.data[0].text is None
    assert "entropy: 0.500" in fig.data[1].customdata[0]
    nan = head_matrix(np.full((2, 2), np.nan), "weight on </s>")
    hover = nan.data[1].customdata[0]
    assert nan.data[0].text[0][0] == "" and "—" in hover and "&lt;/s&gt;" in hover
