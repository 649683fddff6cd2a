"""LSTMVis's select-a-span (s2s.cells.select_span, span_matches, long_states; issue #56 part 2)."""
import json
import re

import numpy as np
import pytest
import torch

from s2s import cells
from s2s.cells import (
    SpanCell,
    check_span,
    check_threshold,
    closest_cells,
    long_states,
    memory_from_hidden,
    select_span,
    shortest_match,
    span_matches,
    span_states,
)
from s2s.charlm import CharLM, CharLMConfig
from s2s.lstm import LayerTrace
from s2s.text import InputError

PASSAGE = "we [read] some text, then [more text] and [x y z] ends [here] ok"


def bracket_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of the characters strictly inside each pair of brackets."""
    return [(m.start() + 1, m.end() - 1) for m in re.finditer(r"\[[^\]]*\]", text)]


def planted_trace(text: str, seed: int = 0, noise_cells: int = 30) -> LayerTrace:
    """One LSTM layer whose h has cell 5 on (0.6-1) exactly inside brackets and off (-1 to 0.2)
    elsewhere, and noise cells uniform in (-1, 1) everywhere."""
    rng = np.random.default_rng(seed)
    T, H = len(text), noise_cells + 1
    h = rng.uniform(-1, 1, (T, H))
    inside = np.zeros(T, dtype=bool)
    for s, e in bracket_spans(text):
        inside[s:e] = True
    h[:, 5] = np.where(inside, rng.uniform(0.6, 1.0, T), rng.uniform(-1.0, 0.2, T))
    x = torch.tensor(h, dtype=torch.float32)
    return LayerTrace(cell=x, hidden=x, input_gate=x.sigmoid(), forget_gate=x.sigmoid(), candidate=x,
                      output_gate=x.sigmoid())


def test_the_planted_bracket_cell_is_found_first_and_matches_the_other_brackets():
    text = PASSAGE * 3
    spans = bracket_spans(text)
    trace = planted_trace(text)
    first = spans[0]
    found = select_span([trace], *first, threshold=0.5)
    assert found and (found[0].layer, found[0].cell, found[0].sign) == (0, 5, 1)
    matches = span_matches([trace], found[:1], text, 0.5, exclude=first)
    assert sorted((m.start, m.end) for m in matches) == spans[1:]
    assert {m.text for m in matches} == {text[s:e] for s, e in spans[1:]}
    # with every selected cell (noise cells that happen to pass included) every match still lies inside brackets
    for m in span_matches([trace], found, text, 0.5, exclude=first):
        assert any(s <= m.start and m.end <= e for s, e in spans[1:])


def test_a_cell_on_past_the_span_is_not_selected_and_the_margin_widens():
    text = "aaaa[bbbb]cccc"
    h = np.full((len(text), 1, 3), -0.9, dtype=np.float32)
    h[5:9, 0, 0] = 0.9                  # exactly inside
    h[4:10, 0, 1] = 0.9                 # on at the brackets too: not off just before and after
    h[5:9, 0, 2] = 0.9
    h[3, 0, 2] = 0.9                    # off just before, but on two before: only margin=1 keeps it
    assert [(c.cell, c.sign) for c in select_span(h, 5, 9, 0.5)] == [(0, 1), (2, 1)]
    assert [(c.cell, c.sign) for c in select_span(h, 5, 9, 0.5, margin=2)] == [(0, 1)]
    # LSTMVis's signed_to_unsigned: a cell strongly negative inside is selected with sign -1
    neg = -h
    assert [(c.cell, c.sign) for c in select_span(neg, 5, 9, 0.5)] == [(0, -1), (2, -1)]


def test_matches_are_ranked_by_closeness_to_the_selection_length_and_never_cross_a_separator():
    text = "x" * 40
    h = np.full((40, 1, 1), -1.0, dtype=np.float32)
    for s, e in [(2, 5), (8, 16), (20, 24), (30, 31), (33, 36)]:
        h[s:e] = 1.0
    h[34] = 0.0                          # a separator row: never on
    cell = [SpanCell(0, 0, 1, 1.0, -1.0)]
    got = [(m.start, m.end) for m in span_matches(h, cell, text, 0.3, exclude=(2, 5))]
    assert got == [(20, 24), (8, 16)]          # length 3 selected: 4 before 8; 1-long runs are not matches
    assert [(m.start, m.end) for m in span_matches(h, cell, text, 0.3, exclude=(2, 5), top=1)] == [(20, 24)]
    pieces = [f"p{i}" for i in range(40)]
    assert span_matches(h, cell, pieces, 0.3, exclude=(2, 5))[0].text == "p20 p21 p22 p23"
    assert span_matches(h, [], text, 0.3) == []


def test_bad_selections_and_thresholds_say_what_is_wrong_in_one_line():
    for start, end, words in [(3, 3, "at least 2"), (3, 4, "at least 2"), (5, 2, "at least 2"),
                              (0, 99, "outside"), (-1, 3, "outside")]:
        with pytest.raises(InputError, match=words) as e:
            check_span(10, start, end)
        assert "\n" not in str(e.value)
    for t in (0, 1, -0.2, 1.5, float("nan")):
        with pytest.raises(InputError, match="between 0 and 1"):
            check_threshold(t)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_a_tiny_random_char_model_end_to_end(cell):
    """Through a real (untrained) model of every cell type: long_states read piece by piece
    equals the whole trace, and every match has all the selected cells on and is maximal."""
    torch.manual_seed(0)
    model = CharLM(CharLMConfig(chars="ab[] xyz\n", hidden=24, layers=2, emb_dim=8, cell=cell)).eval()
    text = ("ab [xyz] a [zz] b\n" * 12)[:200]
    traces = model.trace(text)
    for signal in ("hidden", "cell") if cell == "lstm" else ("hidden",):
        whole = span_states(traces, signal)
        pieces = long_states(model, text, signal, chunk=37).astype(np.float32)
        assert np.abs(whole - pieces).max() < 2e-3              # float16
    if cell != "lstm":
        with pytest.raises(InputError, match="tanh"):
            span_states(traces, "cell")
    states = span_states(traces)
    found = next((s, e, f) for s in range(1, 150) for e in range(s + 2, s + 6)
                 if (f := select_span(states, s, e, 0.2)))
    start, end, selected = found
    flat = states.reshape(len(text), -1)
    for c in selected:
        v = c.sign * states[:, c.layer, c.cell]
        assert (v[start:end] >= 0.2).all() and v[start - 1] < 0.2 and (end == len(text) or v[end] < 0.2)
    assert [c.score for c in selected] == sorted((c.score for c in selected), reverse=True)
    on = np.stack([c.sign * states[:, c.layer, c.cell] >= 0.2 for c in selected], 1).all(1)
    for m in span_matches(states, selected, text, 0.2, exclude=(start, end)):
        assert on[m.start:m.end].all() and m.end - m.start >= 2 and m.text == text[m.start:m.end]
        assert (m.start == 0 or not on[m.start - 1]) and (m.end == len(text) or not on[m.end])
        assert m.end <= start or m.start >= end
    assert flat.shape[1] == 2 * 24


def test_cli_select_json_and_bad_input(tiny_charlm, tmp_path, capsys):
    text = "int main() {\n\treturn (a + b) * c;\n}\n" * 4
    f = tmp_path / "t.c"
    f.write_text(text)
    assert cells.main(["--model", str(tiny_charlm), "--text-file", str(f), "--select", "20:30",
                       "--threshold", "0.1", "--matches", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"selection", "cells", "matches"} <= set(out) and out["selection"]["text"] == text[20:30]
    assert all(set(c) >= {"layer", "cell"} for c in out["cells"])
    assert len(out["matches"]) <= 3
    assert all(set(m) == {"start", "end", "text"} and m["text"] == text[m["start"]:m["end"]] for m in out["matches"])
    for args in (["--select", "4:4"], ["--select", "4:5"], ["--select", f"10:{len(text) + 5}"],
                 ["--select", "1:9", "--threshold", "1.2"], ["--select", "1:9", "--threshold", "0"],
                 ["--select", "nine"]):
        assert cells.main(["--model", str(tiny_charlm), "--text-file", str(f), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, args


@pytest.mark.parametrize("margin", [0, 1, 3])
def test_a_side_the_text_does_not_have_counts_as_off(margin):
    """Issue #62 item 1: a span from the text's first character (or to its last) has no "before"
    (or "after"); that side is off, so a cell on exactly there is selected."""
    h = np.full((20, 1, 2), -0.1, dtype=np.float32)
    h[0:6, 0, 0] = 0.9                   # on from the first character to 5, off after
    h[14:20, 0, 1] = 0.9                 # on from 14 to the last character
    assert [(c.cell, c.sign) for c in select_span(h, 0, 6, 0.5, margin=margin)] == [(0, 1)]
    assert [(c.cell, c.sign) for c in select_span(h, 14, 20, 0.5, margin=margin)] == [(1, 1)]
    assert [c.cell for c in select_span(h, 0, 20, 0.5, margin=margin)] == []      # neither is on throughout


def test_the_closest_cells_of_a_long_span_say_how_much_of_it_each_covers():
    """Issue #62 item 1: where no cell is on at every position of a long span, the closest are
    ranked by the share of the span each covers minus its share around it, so a cell on across
    most of the span and off around it comes before one on everywhere (a saturated memory)."""
    rng = np.random.default_rng(0)
    T, span = 200, (60, 140)
    h = rng.uniform(-0.2, 0.2, (T, 1, 6)).astype(np.float32)
    h[60:140, 0, 0] = -0.8                   # the quote cell, negative: on at 70 of the 80 positions
    h[[70, 80, 90, 100, 110, 115, 120, 125, 130, 135], 0, 0] = 0.1
    h[:, 0, 1] = 0.95                        # saturated: on everywhere
    h[60:100, 0, 2] = 0.7                    # on over half the span, off around
    h[20:60, 0, 3] = 0.7                     # on before the span, not in it
    assert select_span(h, *span, 0.3) == []
    closest = closest_cells(h, *span, 0.3)
    assert [(c.cell, c.sign) for c in closest[:2]] == [(0, -1), (2, 1)]
    assert closest[0].covers == pytest.approx(70 / 80) and closest[0].around == 0
    assert closest[0].label() == "layer 0 cell 0 negative"
    saturated = next(c for c in closest if c.cell == 1)
    assert saturated.covers == 1 and saturated.around == 1 and saturated.score == 0
    assert all(c.cell != 3 for c in closest)                  # on nowhere in the span: left out
    # a span from the first character: the side it lacks counts for nothing (cell 3, on from 20 to 59, is
    # on around 0:20 only after it)
    at_start = closest_cells(h, 0, 20, 0.3)
    assert at_start[0].cell == 1 and at_start[0].around == 1 and all(c.cell != 3 for c in at_start)


def test_the_closest_cells_match_only_stretches_as_long_as_they_are_on_in_the_selection():
    """Issue #69 item 7: a long span no cell is on throughout was matched by its closest cell's
    2-3 character bits ("uss", "ffa"), which said nothing. Its matches are now the stretches where
    that cell is on for at least half as many positions in a row as it is on in the selection;
    where there are none, there are none (the page and the command say so)."""
    T, span = 400, (100, 180)
    text = "".join(chr(97 + i % 26) for i in range(T))
    h = np.full((T, 1, 2), -0.5, dtype=np.float32)
    h[100:180:2, 0, 0] = 0.9                  # on at every other position: 50 % of the 80
    for s, e in [(5, 8), (10, 14), (300, 320), (330, 390)]:     # 3, 4, 20 and 60 long, off around the span
        h[s:e, 0, 0] = 0.9
    assert select_span(h, *span, 0.3) == []
    closest = closest_cells(h, *span, 0.3)
    assert (closest[0].cell, closest[0].covers) == (0, 0.5)
    assert shortest_match(closest[:1], 80) == 20                # half of its 40 positions on
    assert shortest_match([SpanCell(0, 0, 1, 1.0, -1.0)], 80) == cells.SPAN_MIN_MATCH     # on throughout: LSTMVis's
    got = [(m.start, m.end) for m in span_matches(h, closest[:1], text, 0.3, exclude=span)]
    assert got == [(330, 390), (300, 320)]        # the closest to 80 long first; not the 3- and 4-long bits
    h[300:390, 0, 0] = -0.5
    assert span_matches(h, closest[:1], text, 0.3, exclude=span) == []


def test_both_match_lists_rank_by_the_selections_length():
    """Issue #62 item 4: the passage's matches (the selection excluded) and another text's (nothing
    excluded) are ranked alike, by closeness to the selection's length, given as `length`."""
    text = "x" * 60
    h = np.full((60, 1, 1), -1.0, dtype=np.float32)
    for s, e in [(2, 4), (8, 16), (20, 26), (30, 32), (40, 48)]:
        h[s:e] = 1.0
    cell = [SpanCell(0, 0, 1, 1.0, -1.0)]
    in_passage = [(m.start, m.end) for m in span_matches(h, cell, text, 0.3, exclude=(20, 26))]
    elsewhere = [(m.start, m.end) for m in span_matches(h, cell, text, 0.3, length=6)]
    assert in_passage == [(8, 16), (40, 48), (2, 4), (30, 32)]          # 6 long: 8 before 2
    assert elsewhere == [(20, 26), (8, 16), (40, 48), (2, 4), (30, 32)]
    assert [m for m in elsewhere if m != (20, 26)] == in_passage


def test_the_memory_from_h_and_the_output_gate_equals_the_traced_memory():
    """long_states reads an LSTM's tanh(c) as h / o, all steps at once (issue #62 item 6): the
    step-by-step trace's memory to float32 precision, from a zero state and continued."""
    from s2s.lstm import LSTMWeights, trace_layer
    torch.manual_seed(1)
    lstm = torch.nn.LSTM(5, 16, batch_first=False)
    w = LSTMWeights.of_layer(lstm, 0)
    xs = torch.randn(300, 5) * 3
    trace = trace_layer(w, xs)
    got = memory_from_hidden(w, xs, trace.hidden, torch.zeros(16))
    assert (got - trace.cell.tanh()).abs().max() < 1e-5
    later = trace_layer(w, xs[150:], trace.hidden[150:], state=(trace.hidden[149], trace.cell[149]))
    assert (memory_from_hidden(w, xs[150:], trace.hidden[150:], trace.hidden[149]) - later.cell.tanh()).abs().max() \
        < 1e-5


# ---------------------------------------------------------------- the page (AppTest)

@pytest.fixture
def zoo(tmp_path, tiny_charlm, tiny_additive, monkeypatch):
    import shutil
    shutil.copytree(tiny_charlm, tmp_path / "charlm-linux-kernel")
    shutil.copytree(tiny_additive, tmp_path / "en-fr-additive")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    return tmp_path


def test_page_selects_a_span_draws_its_cells_and_jumps_to_a_match(zoo):
    from conftest import app_page
    at = app_page("pages/cells.py")
    at.toggle(key="span_on").set_value(True).run()
    assert not at.exception
    at.session_state["chars_threshold"] = 0.1
    at.run()
    text = at.session_state["cell_text"]
    # find a span that selects cells and has matches, as a reader would by dragging the slider
    for start in range(0, 120, 3):
        at.slider(key="chars_span").set_value((start, start + 3)).run()
        if any(b.key and b.key.startswith("chars_go_0_") for b in at.button):
            break
    else:
        pytest.fail("no span with a match in the example")
    assert not at.exception
    body = at.get("html")[0].proto.body
    assert body.count("box-shadow:inset") == 3                       # the selection underlined in the text
    assert "chars_heatmap" in " ".join(c.proto.id for c in at.get("plotly_chart"))
    assert at.dataframe[0].value.shape[0] >= 1
    go = next(b for b in at.button if b.key == "chars_go_0_0")
    go.click().run()
    new = at.session_state["chars_span"]
    assert tuple(new) != (start, start + 3) and not at.exception
    # find: the first place of a typed phrase
    word = text[40:46]
    at.text_input(key="chars_find").set_value(word).run()
    s, e = at.session_state["chars_span"]
    assert text[s:s + len(word)] == word or text.find(word) >= 0
    for t in (0.95,):          # a threshold no cell passes: a line says so, no traceback
        at.slider(key="chars_threshold").set_value(t).run()
        assert not at.exception


def test_bench_times_the_matches_of_one_selection_without_shared_data(monkeypatch):
    from s2s import bench
    monkeypatch.setattr(bench, "held_out_text", lambda metrics, chars: None)      # as on a machine without ../shared
    torch.manual_seed(0)
    model = CharLM(CharLMConfig(chars="".join(sorted(set(open(bench.__file__).read()) - {"\n"}))[:90], hidden=16,
                                layers=2, emb_dim=8)).eval()
    lm = type("LM", (), {"model": model, "metrics": {"train": {"data": "war-and-peace/input.txt"}}})()
    out = bench.span_timing(lm, runs=2, chars=20_000)
    assert out["span_chars"] == 20_000 and out["span_text"] == "example repeated"
    assert out["span_match_ms"] > 0 and out["span_states_ms"] > 0 and out["span_cells"] >= 1


def test_page_selects_pieces_of_a_translation_models_sentence(zoo):
    from conftest import app_page
    at = app_page("pages/cells.py")
    at.session_state["cells_tab"] = "Translation models"
    at.run()
    at.toggle(key="enc_span_on").set_value(True).run()
    at.session_state["enc_threshold"] = 0.05
    at.run()
    assert not at.exception
    pieces = at.select_slider(key="enc_span").options
    assert len(pieces) >= 3
    said = " ".join(m.value for m in at.markdown) + " ".join(i.value for i in at.info)
    assert "Matches in" in said or "No cell is on" in said
    held_goes = [b for b in at.button if b.key and b.key.startswith("enc_go_1_")]
    if held_goes:               # a held-out line's match: that line becomes the sentence, the match selected
        before = at.session_state["translation_sentence"]
        held_goes[0].click().run()
        assert not at.exception and at.session_state["translation_sentence"] != before
    for bad in ((2, 2),):      # an empty selection: one line, no traceback
        at.session_state["enc_span"] = bad
        at.run()
        assert not at.exception


def test_held_out_text_is_the_test_part_training_split_off(tmp_path):
    from s2s.cells import held_out_text
    from s2s.train_charlm import split_text
    text = "".join(chr(97 + i % 26) for i in range(12_345))
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "input.txt").write_text(text)
    metrics = {"train": {"data": "corpus/input.txt"}}
    assert held_out_text(metrics, tmp_path, chars=10_000) == split_text(text)[2]
    assert held_out_text(metrics, tmp_path, chars=100) == split_text(text)[2][:100]
    assert held_out_text({"train": {"data": "nowhere/input.txt"}}, tmp_path) is None


# ---------------------------------------------------------------- the shipped model and held-out slice (issue #62)

SHIPPED = cells.EXAMPLES_DIR / "war_and_peace_test_100k.txt"
WAR_AND_PEACE = cells.DATA_ROOT / "war-and-peace" / "input.txt"


def first_quotation() -> tuple[str, int]:
    """The shipped War and Peace example and where its first quotation ends (it starts at 0)."""
    text = (cells.EXAMPLES_DIR / "war_and_peace_heldout.txt").read_text(encoding="utf-8")
    assert text.startswith('"')
    return text, text.index('"', 1) + 1


def test_the_shipped_held_out_slice_is_read_without_the_corpus(tmp_path):
    """A fresh clone (no ../shared): the page and the bench read the shipped 100,000 characters."""
    metrics = {"train": {"data": "war-and-peace/input.txt"}}
    text, label = cells.held_out_source(metrics, data_root=tmp_path)
    assert text == SHIPPED.read_text(encoding="utf-8") and len(text) == cells.HELD_OUT_CHARS
    assert label == "100,000 held-out characters of war-and-peace/input.txt (its test part, shipped)"
    assert cells.held_out_text(metrics, tmp_path, chars=500) == text[:500]
    assert cells.held_out_source({"train": {"data": "linux-kernel/input.txt"}}, data_root=tmp_path) is None
    assert cells.held_out_source({}, data_root=tmp_path) is None


@pytest.mark.skipif(not WAR_AND_PEACE.is_file(), reason="../shared/data/war-and-peace is not on this machine")
def test_the_shipped_slice_is_the_start_of_the_test_part_and_never_trained_on():
    from s2s.train_charlm import split_text
    corpus = WAR_AND_PEACE.read_text(encoding="utf-8")
    train, valid, test = split_text(corpus)
    shipped = SHIPPED.read_text(encoding="utf-8")
    assert shipped == test[:cells.HELD_OUT_CHARS]
    assert shipped[:2000] not in train and shipped[:2000] not in valid
    # the example passage the Start link selects in lies in the test part too
    assert first_quotation()[0] in test


CHECKPOINT = cells.EXAMPLES_DIR.parent / "checkpoints" / "charlm-war-and-peace"


@pytest.mark.skipif(not (CHECKPOINT / "metrics.json").is_file(), reason="the shipped War and Peace model is absent")
@pytest.mark.parametrize("signal", ["cell", "hidden"])
def test_the_first_quotation_whole_lists_the_quote_cell_among_the_first_three(signal, capsys):
    """Issue #62's acceptance, with the command: the example's first quotation, from its opening quote
    (the passage's first character) to its closing one, lists docs/app.md's quote cell (layer 1 cell
    103, negative) among the first three closest cells, with how much of the span it covers."""
    import ui.warm
    text, end = first_quotation()
    assert ui.warm.SPAN_LINK["span"] == f"0:{end}"                  # the Start link selects the same
    path = cells.EXAMPLES_DIR / "war_and_peace_heldout.txt"
    assert cells.main(["--model", str(CHECKPOINT), "--text-file", str(path), "--select", f"0:{end}",
                       "--signal", signal, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ranked = out["cells"] or out["closest"]
    assert {"layer": 1, "cell": 103, "sign": -1} in [{k: c[k] for k in ("layer", "cell", "sign")} for c in ranked[:3]]
    if not out["cells"]:
        assert out["matched_by"] == "closest"
        quote = next(c for c in out["closest"] if (c["layer"], c["cell"], c["sign"]) == (1, 103, -1))
        assert 0.15 < quote["covers"] <= 1 and quote["around"] == 0


def test_the_default_selection_is_long_enough_for_the_sliders_handles_to_stand_apart():
    """Issue #69 item 9: the span slider opened with its handles 5 px apart (the first ten of
    1,264 characters). The default is now the first quotation or line of at least a 30th of the
    text: the War and Peace example's first quotation whole (as the Start link selects), the
    kernel example's first line."""
    from ui.span_select import default_span
    for name, want in [("war_and_peace_heldout.txt", (0, 308)), ("kernel_heldout.c", None)]:
        text = (cells.EXAMPLES_DIR / name).read_text(encoding="utf-8")
        start, end = default_span(text)
        assert end - start >= len(text) / 30 and (start == 0 or text[start - 1] == "\n" or text[start] == '"')
        assert want is None or (start, end) == want
    assert default_span("ab") == (0, 2) and default_span("x" * 100) == (0, 100)
