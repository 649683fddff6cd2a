"""AppTest: the Gates & Gradients page, on tiny RNN, GRU and LSTM character models."""
import json
import re
import shutil

import pytest

from conftest import ROOT, app_page, away_and_back
from s2s.checkpoint import load_charlm

HOSTILE = ('<script>alert("x")</script> &amp; \x00\x1b[31m ‮ 😀 ' * 40)


def page():
    return app_page("pages/gradients.py")


def open_tab(at, label: str):
    at.session_state["gradients_tab"] = label
    return at.run()


def chart_ids(at) -> str:
    return " ".join(c.proto.id for c in at.get("plotly_chart"))


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_gates_and_gradients_comes_first_in_the_navigation():
    app = (ROOT / "app.py").read_text()
    assert app.index("pages/gradients.py") < min(app.index(p) for p in ("pages/translate.py", "pages/bottleneck.py",
                                                                        "pages/cells.py"))


def test_live_demo_redraws_for_every_control(trio_env):
    at = page()
    assert not at.exception and at.title[0].value == "Gates & Gradients"
    assert "untrained" in chart_ids(at) and len(at.get("latex")) == 3
    first = captions(at)
    assert "50 steps back" in first
    seen = {first}
    for key, value in (("radius", 0.5), ("forget_bias", 8.0), ("hidden", 16), ("length", 20)):
        if key == "hidden":
            at.select_slider(key=key).set_value(value).run()
        else:
            at.slider(key=key).set_value(value).run()
        assert not at.exception and "untrained" in chart_ids(at)
        seen.add(captions(at))
    assert len(seen) == 5                       # every control changed what was measured
    assert "19 steps back" in captions(at)      # T = 20: the caption compares at the farthest step


def test_live_demo_numbers_are_the_libraries(trio_env):
    from s2s.gradients import untrained_flow
    at = page()
    at.slider(key="radius").set_value(0.5).run()
    rnn = untrained_flow("rnn", 0.5, 3.0, 64, 100).grad_norm[50]
    assert f"the RNN keeps {rnn:.1e}" in captions(at)


def test_live_demo_says_which_way_the_rnn_line_goes_as_measured(trio_env):
    """At ρ = 1.2 a tanh RNN still loses gradient (its slope 1 − h² damps each step); at 2 it
    explodes. The caption follows the measurement, not the linear-RNN rule of thumb."""
    from s2s.gradients import untrained_flow
    at = page()
    for radius, direction in ((1.2, "falls"), (2.0, "rises")):
        at.slider(key="radius").set_value(radius).run()
        kept = untrained_flow("rnn", radius, 3.0, 64, 100).grad_norm[50]
        assert (kept < 1) == (direction == "falls")
        assert f"At ρ = {radius:.2f} the RNN's red line {direction}" in captions(at)


def test_live_demo_says_how_far_the_lstm_gradient_is_from_its_forget_gate_product(trio_env):
    """The lecture's dc_t/dc_(t-1) = f_t is the memory path alone: the caption gives the measured
    ratio of the whole gradient to prod f, so the solid and dashed green lines do not contradict it."""
    from s2s.gradients import DEMO_DEFAULTS, untrained_flow
    at = page()
    lstm = untrained_flow("lstm", **DEMO_DEFAULTS)
    ratio = lstm.grad_norm[50] / lstm.keep_product[50]
    assert ratio > 1          # at the opening settings the h path lifts it far above prod f
    assert f"50 steps back the LSTM's gradient (solid) is {ratio:.1f} times its ∏ f (dashed)" in captions(at)
    assert any("memory path" in e.value for e in at.get("latex"))


def test_trained_models_tab_compares_the_three_cells(trio_env):
    at = open_tab(page(), "Trained models")
    assert not at.exception and "trained_flow" in chart_ids(at)
    text = captions(at)
    assert "g(50)/g(0)" in text and all(c in text for c in ("Elman RNN", "GRU", "LSTM"))
    at.slider(key="max_distance").set_value(30).run()
    assert "g(30)/g(0)" in captions(at)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(fig["data"]) == 3 and len(fig["data"][0]["x"]) == 31
    at.segmented_control(key="passage_source").set_value("War and Peace").run()
    assert not at.exception and "trained_flow" in chart_ids(at)


@pytest.mark.parametrize("typed, message", [("", "empty"), ("short text", "at least"), (HOSTILE, None)])
def test_your_text_handles_empty_short_and_hostile_passages(trio_env, typed, message):
    at = open_tab(page(), "Trained models")
    at.segmented_control(key="passage_source").set_value("Your text").run()
    at.text_area(key="passage_typed").set_value(typed)
    at.button[0].click().run()
    assert not at.exception
    if message:
        assert any(message in w.value for w in at.warning) and "trained_flow" not in chart_ids(at)
    else:
        assert not at.warning and "trained_flow" in chart_ids(at)
        assert "<script>" not in " ".join(m.value for m in at.markdown)


def test_a_passage_with_room_for_one_position_says_one_position(trio_env):
    at = open_tab(page(), "Trained models")
    at.slider(key="max_distance").set_value(10).run()
    at.segmented_control(key="passage_source").set_value("Your text").run()
    at.text_area(key="passage_typed").set_value("abcdefghijkl")        # 12 characters: K + 2
    at.button[0].click().run()
    assert not at.exception and "trained_flow" in chart_ids(at)
    assert "mean over 1 position t of" in captions(at) and "1 positions" not in captions(at)


def test_lstm_memory_tab_counts_cells_by_half_life(trio_env):
    at = open_tab(page(), "LSTM memory")
    assert not at.exception and "half_lives" in chart_ids(at)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    hidden = load_charlm(trio_env / "charlm-tiny-lstm").model.cfg.hidden
    assert sum(fig["data"][0]["y"]) == hidden            # every cell of the top layer in one bar
    assert f"of {hidden} cells" in captions(at)
    # the caption's counts can be added up from the bars: its thresholds are bar edges
    bars = dict(zip(fig["data"][0]["x"], fig["data"][0]["y"]))
    low = re.search(r"(\d+) of \d+ cells keep half their memory for 4 characters or fewer", captions(at))
    high = re.search(r"(\d+) for 50 or more", captions(at))
    assert int(low.group(1)) == sum(bars.get(label, 0) for label in ("0", "1", "2–4"))
    assert int(high.group(1)) == sum(n for label, n in bars.items() if int(re.findall(r"\d+", label)[0]) >= 50)


def test_gap_tab_draws_the_shipped_experiment(trio_env):
    at = open_tab(page(), "Remembering across a gap")
    assert not at.exception
    results = json.loads((ROOT / "results" / "memory_gap.json").read_text())
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {t["name"].split(" (")[0] for t in fig["data"]} == {"Elman RNN", "GRU", "LSTM"}
    assert sum(len(t["x"]) for t in fig["data"]) == len(results["results"])
    assert "python -m s2s.memory_gap" in captions(at)


def test_bits_per_character_table_lists_every_character_model(trio_env):
    at = open_tab(page(), "Bits per character")
    df = at.dataframe[0].value
    assert list(df["cell"]) == ["Elman RNN", "GRU", "LSTM"]
    assert (df["test bits/char"] > 0).all()
    columns = json.loads(at.dataframe[0].proto.columns)       # one number of decimals for every figure
    assert all(columns[c]["type_config"]["format"] == "%.3f" for c in ("test bits/char", "validation bits/char"))


def test_page_without_character_models_says_how_to_train_them(tmp_path, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    at = open_tab(page(), "Trained models")
    assert not at.exception and "train_charlms.sh" in " ".join(i.value for i in at.info)


def test_corpus_choice_switches_the_models_compared(trio_env):
    """Models are grouped by the text they were trained on (metrics.json), never by folder name."""
    shutil.copytree(trio_env / "charlm-tiny-lstm", trio_env / "zz-another-lstm")
    metrics = json.loads((trio_env / "zz-another-lstm" / "metrics.json").read_text())
    metrics["train"]["data"] = "war-and-peace/input.txt"
    (trio_env / "zz-another-lstm" / "metrics.json").write_text(json.dumps(metrics))
    at = open_tab(page(), "Trained models")
    box = at.selectbox(key="corpus")
    assert box.options[0].endswith(": RNN, GRU, LSTM")              # the corpus with most cell types first
    at.selectbox(key="corpus").set_value("war-and-peace/input.txt").run()
    assert not at.exception
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["name"] for t in fig["data"]] == ["LSTM (zz-another-lstm)"]
    assert at.segmented_control(key="passage_source").value == "War and Peace"


def test_the_live_settings_survive_a_visit_to_another_page(trio_env):
    at = page()
    at.slider(key="radius").set_value(3.0).run()
    at.slider(key="length").set_value(200).run()
    at = away_and_back(at, "pages/cells.py", "pages/gradients.py")
    assert not at.exception
    assert at.slider(key="radius").value == 3.0 and at.slider(key="length").value == 200
    assert "ρ = 3.00" in " ".join(str(json.loads(c.proto.spec)["layout"]["title"]["text"])
                                  for c in at.get("plotly_chart"))
