"""AppTest: the Cell States page, on a tiny character model and a tiny translation model."""
import html
import json
import re
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT, app_page, away_and_back
from s2s.checkpoint import load_charlm


@pytest.fixture
def zoo_env(tmp_path, tiny_charlm, tiny_additive, monkeypatch):
    shutil.copytree(tiny_charlm, tmp_path / "charlm-linux-kernel")
    shutil.copytree(tiny_additive, tmp_path / "en-fr-additive")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    return tmp_path


def cells_page():
    return app_page("pages/cells.py")


def html_blocks(at) -> list[str]:
    return [h.proto.body for h in at.get("html")]


def plain(body: str) -> str:
    """The text a reader sees in a colored-text block."""
    return html.unescape(re.sub(r"<[^>]+>", "", body)).replace("↵", "")


def open_tab(at, label: str) -> AppTest:
    at.session_state["cells_tab"] = label
    return at.run()


def chart_ids(at) -> str:
    return " ".join(c.proto.id for c in at.get("plotly_chart"))


def test_page_colors_the_example_and_draws_every_section(zoo_env):
    at = cells_page()
    assert not at.exception
    assert at.title[0].value == "Cell States"
    body = html_blocks(at)[0]
    example = (ROOT / "examples" / "audit_match_class_bits.c").read_text()
    shown = load_charlm(zoo_env / "charlm-linux-kernel").model.shown(example)   # the tiny model lacks some letters
    assert plain(body) == shown and "int" in shown                              # a kernel model opens on it
    assert body.count("<span") > 150 and 'title="tanh(c) = ' in body
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "bits per character" in captions and "The paper's best network on this corpus: 1.21" in captions
    assert "top_traces" not in chart_ids(at)                 # closed tabs don't run
    at = open_tab(at, "Find cells")
    at.selectbox(key="feature").set_value("brace_depth").run()
    assert "top_traces" in chart_ids(at) and at.dataframe[0].value.shape == (10, 3)
    at = open_tab(at, "Gates")
    assert all(k in chart_ids(at) for k in ("sat0", "sat1", "gate_traces"))
    at = open_tab(at, "Translation models")
    for key in ("enc_fwd", "enc_bwd", "dec"):
        assert key in chart_ids(at), key
    at = open_tab(at, "Find cells")
    assert at.selectbox(key="feature").value == "brace_depth"   # kept while its tab was closed


def test_choosing_a_cell_and_a_signal_recolors_the_text(zoo_env):
    at = cells_page()
    before = html_blocks(at)[0]
    at.number_input(key="cell").set_value(7).run()
    at.number_input(key="layer").set_value(1).run()
    after = html_blocks(at)[0]
    assert not at.exception and after != before
    at.selectbox(key="signal").set_value("forget_gate").run()
    assert 'title="forget gate f = ' in html_blocks(at)[0]


def test_find_cells_features_regex_and_pick(zoo_env):
    at = open_tab(cells_page(), "Find cells")
    at.selectbox(key="feature").set_value("brace_depth").run()
    df = at.dataframe[0].value
    assert list(df.columns) == ["layer", "cell", "r"]
    assert df["r"].abs().is_monotonic_decreasing
    top = (int(df.iloc[0]["layer"]), int(df.iloc[0]["cell"]))
    at.selectbox(key="ranked_pick").set_value(top).run()
    assert (at.session_state["layer"], at.session_state["cell"]) == top
    at = open_tab(at, "Colored text")
    assert (at.number_input(key="layer").value, at.number_input(key="cell").value) == top
    at = open_tab(at, "Find cells")
    at.selectbox(key="feature").set_value("custom regular expression").run()
    at.text_input(key="regex").set_value("(unclosed").run()
    assert not at.exception and any("regular expression" in w.value for w in at.warning)
    at.text_input(key="regex").set_value("zzzz").run()      # never matches: a constant feature
    assert any("same value at every character" in i.value for i in at.info)
    at.text_input(key="regex").set_value(r"\{|_[a-z]+_|\*").run()      # Markdown's own characters
    assert not at.exception
    assert any("with matches `\\{|_[a-z]+_|\\*`" in c.value for c in at.caption)   # a code span: shown as typed
    long = "|".join(["int", "char", "void", "return", "static", "struct", "unsigned", "const"])
    at.text_input(key="regex").set_value(long).run()
    names = [t["name"] for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"] if "name" in t]
    assert "matches /int|char|void|return|static|s…/ (scaled)" in names      # the legend stays one line
    assert any(f"with matches `{long}`" in c.value for c in at.caption)        # the caption has it whole


def test_own_text_is_shown_as_text_and_bad_text_gets_a_message(zoo_env):
    at = cells_page()
    at.segmented_control(key="source").set_value("Your text").run()
    at.text_area(key="typed").set_value('<script>alert("x")</script>\n<b>bold</b> 😀')
    [b for b in at.button if b.label == "Trace"][0].click()
    at.run()
    assert not at.exception
    body = html_blocks(at)[0]
    assert "<script" not in body and "<b>" not in body and "&lt;" in body
    assert plain(body).startswith('<\ufffdcript>alert("x")</\ufffdcript>\n<b>bold</b>')   # no "s" in its vocabulary
    assert any("never saw" in c.value for c in at.caption)          # the emoji is not in the vocabulary
    at.text_area(key="typed").set_value("\x00\x01   ")
    [b for b in at.button if b.label == "Trace"][0].click()
    at.run()
    assert not at.exception and any("empty" in w.value for w in at.warning)
    at.text_area(key="typed").set_value("x" * 6000)                  # too long: a message, and the tabs stay
    [b for b in at.button if b.label == "Trace"][0].click()
    at.run()
    assert not at.exception and any("limit" in w.value for w in at.warning)
    assert not html_blocks(at) and [t.label for t in at.tabs][-1] == "Translation models"   # tabs still there
    at = open_tab(at, "Translation models")                          # which does not need the passage
    assert not at.exception and any(b.label == "Model" for b in at.selectbox)


def test_clicking_the_chosen_text_button_again_keeps_it(zoo_env):
    at = cells_page()
    at.segmented_control(key="source").set_value("Your text").run()
    at.segmented_control(key="source").set_value(None).run()          # what a second click on it sends
    assert not at.exception and at.segmented_control(key="source").value == "Your text"
    assert any(t.key == "typed" for t in at.text_area)


def test_sampling_fills_the_text(zoo_env):
    at = cells_page()
    at.segmented_control(key="source").set_value("Sample from the model").run()
    at.slider[1].set_value(200)
    [b for b in at.button if b.label == "Sample"][0].click()
    at.run()
    assert not at.exception
    assert len(at.session_state["cell_text"]) == 201            # the "\n" prime + 200 sampled characters
    assert not any("sample, traced here" in c.value for c in at.caption)


def test_a_sample_kept_after_switching_model_says_whose_it_is(zoo_env, tiny_charlm):
    shutil.copytree(tiny_charlm, zoo_env / "charlm-war-and-peace")
    at = cells_page()
    at.selectbox(key="charlm").set_value("charlm-linux-kernel").run()
    at.segmented_control(key="source").set_value("Sample from the model").run()
    [b for b in at.button if b.label == "Sample"][0].click()
    at.run()
    sample = at.session_state["cell_text"]
    at.selectbox(key="charlm").set_value("charlm-war-and-peace").run()
    assert not at.exception and at.session_state["cell_text"] == sample
    assert any("charlm-linux-kernel's sample, traced here through charlm-war-and-peace" in c.value for c in at.caption)
    [b for b in at.button if b.label == "Sample"][0].click()
    at.run()                                                      # its own sample: nothing to say
    assert not any("sample, traced here" in c.value for c in at.caption)


def test_without_a_character_model_the_page_explains_and_still_traces_translation(tmp_path, tiny_additive, monkeypatch):
    shutil.copytree(tiny_additive, tmp_path / "en-fr-additive")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    at = cells_page()
    assert not at.exception
    assert any("train_charlm" in i.value for i in at.info)
    assert "enc_fwd" in chart_ids(at)                        # its only tab, open
    spec = json.loads([c for c in at.get("plotly_chart") if "dec" in c.proto.id][0].proto.spec)
    assert spec["data"][0]["type"] == "heatmap"


def test_picking_an_example_replaces_the_text(zoo_env):
    at = cells_page()
    label = [k for k in at.selectbox(key="example_pick").options if "War and Peace" in k][0]
    at.selectbox(key="example_pick").set_value(label).run()
    assert not at.exception
    assert at.session_state["cell_text"] == (ROOT / "examples" / "war_and_peace_heldout.txt").read_text()
    at = open_tab(at, "Find cells")
    at.selectbox(key="feature").set_value("inside_quotes").run()
    assert at.dataframe[0].value.shape == (10, 3)             # dialogue: quotes vary, so cells are ranked


def test_a_broken_character_model_is_named_and_translation_cells_still_work(zoo_env):
    (zoo_env / "charlm-linux-kernel" / "model.safetensors").write_bytes(b"not weights")
    at = cells_page()
    assert not at.exception
    assert any("charlm-linux-kernel" in e.value and "corrupt" in e.value for e in at.error)
    assert "enc_fwd" in chart_ids(at)


@pytest.mark.parametrize("name, quotes_r, expected", [
    ("charlm-war-and-peace", -0.9, ("inside_quotes", 1, 7)),       # prose opens on its quote cell
    ("charlm-war-and-peace", 0.3, ("position_in_line", 0, 4)),    # ... unless it has none: the strongest cell
    ("charlm-linux-kernel", -0.9, ("brace_depth", 1, 2)),         # code opens on its brace-depth cell
])
def test_the_page_opens_on_the_showcase_cell(tmp_path, tiny_charlm, monkeypatch, name, quotes_r, expected):
    shutil.copytree(tiny_charlm, tmp_path / name)
    metrics = json.loads((tmp_path / name / "metrics.json").read_text())
    metrics["train"]["data"] = name.replace("charlm-", "") + "/input.txt"     # what the page reads, not the name
    metrics["cells"] = {"inside_quotes": [{"layer": 1, "cell": 7, "r": quotes_r}],
                        "position_in_line": [{"layer": 0, "cell": 4, "r": -0.95}],
                        "brace_depth": [{"layer": 1, "cell": 2, "r": 0.6}]}
    (tmp_path / name / "metrics.json").write_text(json.dumps(metrics))
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    at = cells_page()
    assert not at.exception
    assert (at.session_state["feature"], at.session_state["layer"], at.session_state["cell"]) == expected


def test_switching_model_opens_its_own_example_and_cell_but_keeps_typed_text(tmp_path, tiny_charlm, monkeypatch):
    for name, cells in [("charlm-linux-kernel", {"brace_depth": [{"layer": 1, "cell": 2, "r": 0.8}]}),
                        ("charlm-war-and-peace", {"inside_quotes": [{"layer": 0, "cell": 5, "r": -0.9}]})]:
        shutil.copytree(tiny_charlm, tmp_path / name)
        metrics = json.loads((tmp_path / name / "metrics.json").read_text())
        train = {**metrics["train"], "data": name.replace("charlm-", "") + "/input.txt"}
        (tmp_path / name / "metrics.json").write_text(json.dumps({**metrics, "cells": cells, "train": train}))
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    at = cells_page()
    assert at.session_state["cell_text"].startswith("static inline int audit_match_class_bits")
    at.sidebar.selectbox(key="charlm").set_value("charlm-war-and-peace").run()
    assert not at.exception
    assert (at.session_state["feature"], at.session_state["layer"], at.session_state["cell"]) == ("inside_quotes", 0, 5)
    assert at.session_state["cell_text"] == (ROOT / "examples" / "war_and_peace_heldout.txt").read_text()
    at.segmented_control(key="source").set_value("Your text").run()
    at.text_area(key="typed").set_value('"Hello," he said.')
    [b for b in at.button if b.label == "Trace"][0].click()
    at.run()
    assert at.session_state["cell_text"] == '"Hello," he said.'
    at.sidebar.selectbox(key="charlm").set_value("charlm-linux-kernel").run()
    assert at.session_state["cell_text"] == '"Hello," he said.'                # the reader's own text stays
    assert (at.session_state["feature"], at.session_state["cell"]) == ("brace_depth", 2)


def test_the_shipped_encoder_explains_its_white_column(monkeypatch):
    """The shipped models' forward encoder wipes its memory at </s> (a nearly white column in
    the heatmap); the page says so, with the gates that do it, instead of leaving it a puzzle."""
    if not (ROOT / "checkpoints" / "en-fr-additive" / "model.safetensors").is_file():
        pytest.skip("en-fr-additive is not in checkpoints/")
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    at = open_tab(cells_page(), "Translation models")
    assert not at.exception
    offered = next(b.options for b in at.selectbox if b.label == "Model")
    assert "en-fr-additive" in offered and "en-fr-transformer" not in offered    # no cell state to trace
    notes = [c.value for c in at.caption if "wipes its memory" in c.value]
    assert len(notes) == 1 and "`</s>` the forward direction" in notes[0], notes
    assert re.search(r"forget gate \(f = 0\.[01]\d\) and input gate \(i = 0\.0\d\)", notes[0]), notes[0]


def test_the_example_box_names_the_example_on_show(zoo_env):
    at = cells_page()
    assert at.selectbox(key="example_pick").value.startswith("audit_match_class_bits")
    at.selectbox(key="example_pick").set_value("Linux kernel code the model never saw (test part)").run()
    assert at.selectbox(key="example_pick").value == "Linux kernel code the model never saw (test part)"
    assert not at.exception


def test_a_gru_is_traced_coloured_and_ranked_by_its_own_gates(trio_env):
    at = cells_page()
    at.selectbox(key="charlm").set_value("charlm-tiny-gru").run()
    assert not at.exception
    assert "(GRU)" in at.selectbox(key="charlm").format_func("charlm-tiny-gru")
    assert at.selectbox(key="signal").options == ["h, the state (the GRU's only memory)",
                                                  "update gate z (0 keeps h; 1 overwrites it)",
                                                  "reset gate r", "candidate h~"]
    assert 'title="h = ' in html_blocks(at)[0]
    at.selectbox(key="signal").set_value("update_gate").run()
    assert 'title="update gate z (0 keeps h; 1 overwrites it) = ' in html_blocks(at)[0]
    at = open_tab(at, "Find cells")
    at.selectbox(key="feature").set_value("brace_depth").run()        # trained on code: it opened on kernel code
    assert at.dataframe[0].value.shape == (10, 3) and "correlation of h" in " ".join(c.value for c in at.caption)
    traces = json.loads([c for c in at.get("plotly_chart") if "top_traces" in c.proto.id][0].proto.spec)
    assert "h" in json.dumps(traces["layout"]["yaxis"]["title"]) and "tanh(c)" not in json.dumps(traces["layout"])
    at = open_tab(at, "Gates")
    assert all(k in chart_ids(at) for k in ("sat0", "sat1", "gate_traces"))
    gates = json.loads([c for c in at.get("plotly_chart") if "gate_traces" in c.proto.id][0].proto.spec)
    assert [t["name"] for t in gates["data"] if "gate" in t["name"]] == ["update gate", "reset gate"]
    assert any("z ≈ 0" in m.value for m in at.markdown)


def test_an_rnn_has_its_state_and_no_gates(trio_env):
    at = cells_page()
    at.selectbox(key="charlm").set_value("charlm-tiny-rnn").run()
    assert not at.exception and at.selectbox(key="signal").options == ["h = tanh(u), the state (the RNN's only memory)"]
    at = open_tab(at, "Find cells")
    at.selectbox(key="feature").set_value("brace_depth").run()
    assert at.dataframe[0].value.shape == (10, 3)
    at = open_tab(at, "Gates")
    assert not at.exception and "sat0" not in chart_ids(at)
    assert any("has no gates" in i.value for i in at.info)


def test_translation_tab_hides_the_passage_controls_and_follows_a_cell(zoo_env):
    at = cells_page()
    at.segmented_control(key="source").set_value("Your text").run()
    at = open_tab(at, "Translation models")
    assert not at.exception
    labels = [b.label for b in at.button]
    assert labels.count("Trace sentence") == 1 and "Trace" not in labels      # one button, named for what it traces
    assert not at.get("segmented_control")                                     # no passage controls here
    at.number_input(key="translation_cell").set_value(3).run()
    figs = {c.proto.id: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    fwd = next(f for k, f in figs.items() if "enc_fwd" in k)
    assert fwd["layout"]["shapes"][0]["y0"] == 2.5 and fwd["layout"]["yaxis"]["title"]["text"].startswith("cell (0–")
    assert fwd["layout"]["xaxis"]["title"]["text"] == "source piece"
    assert any("pick_fwd" in k for k in figs) and any("pick_bwd" in k for k in figs)
    at = open_tab(at, "Colored text")
    assert at.segmented_control(key="source").value == "Your text"             # kept while hidden


def test_model_cell_and_text_survive_a_visit_to_another_page(trio_env):
    """An instructor moves between pages: the model, its cell and the passage stay together."""
    at = cells_page()
    at.selectbox(key="charlm").set_value("charlm-tiny-gru").run()
    at.number_input(key="cell").set_value(5).run()
    at.segmented_control(key="source").set_value("Your text").run()
    at.text_area(key="typed").set_value("int main() { return 0; }\n" * 8)
    at.button[0].click().run()
    assert not at.exception
    at = away_and_back(at, "pages/gradients.py", "pages/cells.py")
    assert not at.exception
    assert at.selectbox(key="charlm").value == "charlm-tiny-gru" and at.number_input(key="cell").value == 5
    assert at.segmented_control(key="source").value == "Your text"
    assert at.session_state["cell_text"].startswith("int main()")


def test_a_start_link_opens_on_an_example_and_example_leaves_a_sample(zoo_env):
    """"Each link opens the page and tab with an example already set"; the Example button after a
    sample shows an example, not the sample."""
    at = cells_page()
    at.segmented_control(key="source").set_value("Sample from the model").run()
    [b for b in at.button if b.label == "Sample"][0].click().run()
    sample = at.session_state["cell_text"]
    at.segmented_control(key="source").set_value("Example").run()
    assert not at.exception and at.session_state["cell_text"] != sample
    assert at.selectbox(key="example_pick").value is not None            # the box names the example shown
    at.segmented_control(key="source").set_value("Your text").run()
    at.text_area(key="typed").set_value("my own passage " * 20)
    at.button[0].click().run()
    at.switch_page("pages/start.py")
    at.run()
    at.query_params["tab"] = "Colored text"                                # what the Start page's link carries
    at.switch_page("pages/cells.py")
    at.run()
    assert not at.exception and at.segmented_control(key="source").value == "Example"
    assert at.selectbox(key="example_pick").value is not None and "my own passage" not in at.session_state["cell_text"]


# ---------------------------------------------------------------- select a span: the address, the warning (issue #62)

def arrive(query: dict) -> AppTest:
    """The app opened at /cells?query, as a Start-page link or a copied address opens it."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page("pages/cells.py")
    return at.run()


def query_of(at) -> dict[str, str]:
    return {k: v if isinstance(v, str) else v[0] for k, v in at.query_params.items()}


def test_a_span_link_keeps_its_span_in_the_address_and_the_find_box_writes_it(zoo_env):
    """Issue #62 item 2: span= survives landing, and a selection made on the page (the find box,
    the threshold, the margin) is written into the address."""
    at = arrive({"tab": "Colored text", "span": "3:9", "read": "hidden"})
    assert not at.exception and at.toggle(key="span_on").value
    assert tuple(at.session_state["chars_span"]) == (3, 9)
    assert query_of(at)["span"] == "3:9" and query_of(at)["read"] == "hidden"
    assert "threshold" not in at.query_params and "margin" not in at.query_params     # the defaults: not written
    text = at.session_state["cell_text"]
    word = next(m.group() for m in re.finditer(r"[a-z]{4,}", text) if m.start() > 10)     # letters the model knows
    at.text_input(key="chars_find").set_value(word).run()
    s, e = at.session_state["chars_span"]
    assert query_of(at)["span"] == f"{s}:{e}" and text[s:e] == word
    at.slider(key="chars_threshold").set_value(0.5).run()
    at.number_input(key="chars_margin").set_value(3).run()
    assert query_of(at)["threshold"] == "0.5" and query_of(at)["margin"] == "3"
    # the address read back: a copied link reproduces the view
    again = arrive(query_of(at))
    assert tuple(again.session_state["chars_span"]) == (s, e)
    assert again.slider(key="chars_threshold").value == 0.5 and again.number_input(key="chars_margin").value == 3
    # the switch off: no span in the address
    at.toggle(key="span_on").set_value(False).run()
    assert "span" not in at.query_params


def test_the_text_switch_and_the_span_controls_log_no_session_state_warning(zoo_env, monkeypatch):
    """Leftover of issue #62: 'widget with key "source" was created with a default value but also had
    its value set via the Session State API' (the text switch); the span's threshold and margin,
    which a link sets, likewise."""
    from streamlit.elements.lib import policies
    logged = []
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    monkeypatch.setattr(policies._LOGGER, "warning", lambda msg, *a, **k: logged.append(str(msg) % a if a else msg))
    at = arrive({"tab": "Colored text", "span": "2:8", "threshold": "0.4", "margin": "2"})
    for source in ("Your text", "Example", "Sample from the model", "Example"):
        at.segmented_control(key="source").set_value(source).run()
    at.slider(key="chars_threshold").set_value(0.35).run()
    assert not at.exception
    assert not [m for m in logged if "default value" in m], logged


@pytest.mark.skipif(not (ROOT / "checkpoints" / "charlm-war-and-peace" / "metrics.json").is_file(),
                    reason="the shipped War and Peace model is not in checkpoints/")
def test_the_start_links_quotation_lists_the_quote_cell_first_on_the_page(monkeypatch):
    """Issue #62 items 1 and 3, on the page: the Start link's span (the example's first quotation
    whole, tanh(c)) has no cell on throughout; the closest are listed with how much of the span each
    covers, docs/app.md's quote cell among the first three, and the matches are that cell's. The
    held-out text is cut to its first 5,000 characters here (its 100,000 take the bench's time)."""
    import ui.span_select
    import ui.warm
    from s2s.cells import held_out_source
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    monkeypatch.setattr(ui.span_select, "held_out_source", lambda metrics: (
        held_out_source(metrics, chars=5_000)[0], "5,000 held-out characters"))
    ui.span_select.held_out_states.clear()
    at = arrive(ui.warm.SPAN_LINK)
    assert not at.exception
    assert query_of(at)["span"] == ui.warm.SPAN_LINK["span"]
    table = at.dataframe[0].value
    assert "covers the span" in table.columns
    assert "layer 1 cell 103 (negative)" in list(table["cell"][:3])
    said = " ".join(m.value for m in at.markdown)
    assert "The closest" in said and "Matches in 5,000 held-out characters:" in said
    assert "where layer 1 cell 103 (negative) is on" in said
    ui.span_select.held_out_states.clear()


def test_the_warm_up_reads_the_span_links_held_out_states_before_the_click(tmp_path, tiny_charlm, monkeypatch):
    """Issue #62 item 6: the Start page's select-a-span link (ui.warm.SPAN_LINK) needs its model's
    states over the held-out text; the server's warm-up reads them, once, into the cache the page
    reads (ui.span_select.held_out_states), so the link's click finds them."""
    import threading

    import ui.models
    import ui.span_select
    import ui.warm
    shutil.copytree(tiny_charlm, tmp_path / ui.warm.SPAN_LINK["model"])
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    ui.span_select.held_out_states.clear()
    read, real = [], ui.span_select.long_states
    monkeypatch.setattr(ui.span_select, "long_states", lambda model, text, signal: read.append(signal) or
                        real(model, text, signal))
    monkeypatch.setattr(ui.warm, "_warm_thread", None)          # as in a fresh server process
    for event in ("_default_warm", "_plotly_imported", "_altair_ready"):
        monkeypatch.setattr(ui.warm, event, threading.Event())
    ui.warm.warm_up().join(300)
    assert read == [ui.warm.SPAN_LINK["read"]]
    text, states, label = ui.span_select.held_out_states(ui.models.model_path(ui.warm.SPAN_LINK["model"]),
                                                         ui.warm.SPAN_LINK["read"])
    assert read == [ui.warm.SPAN_LINK["read"]] and states.shape[0] == len(text)          # a cache hit
    assert ui.span_select.warm_held_out("no-such-model", "cell") is False
    ui.span_select.held_out_states.clear()
