import pytest

from s2s.text import InputError, check_range, clean_text


def test_clean_text_removes_controls_and_bidi_but_keeps_emoji_and_accents():
    assert clean_text("  Hello\x00 wor\u202eld\t\n ") == "Hello world"
    assert clean_text("Caf\u0065\u0301 😀") == "Café 😀"
    assert clean_text("<script>alert(1)</script>") == "<script>alert(1)</script>"   # text stays text


@pytest.mark.parametrize("bad", ["", "   ", "\x00\x01\u200b", "x" * 1001, "word " * 5000, None])
def test_clean_text_refuses_unusable_input_with_a_message(bad):
    with pytest.raises(InputError) as e:
        clean_text(bad)
    assert str(e.value)


def test_check_range():
    assert check_range("Beam width", 4, 1, 16) == 4
    with pytest.raises(InputError, match="Beam width must be between 1 and 16"):
        check_range("Beam width", 0, 1, 16)


def test_a_words_log_p_is_the_sum_of_its_pieces():
    """Issue #69 item 6: one function for a word's log p (s2s.piece_words.word_log_prob), the
    chain rule over its pieces: 'hier.' of ▁hier (p 0.93) and . (p 0.895) has p 0.832."""
    import math

    from s2s.piece_words import word_log_prob
    lps = [math.log(0.5), math.log(0.93), math.log(0.895)]
    assert math.exp(word_log_prob(lps, [1, 2])) == pytest.approx(0.93 * 0.895)
    assert word_log_prob(lps, [0]) == pytest.approx(math.log(0.5)) and word_log_prob(lps, []) == 0.0
