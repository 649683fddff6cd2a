"""AppTest: each control of the Translate page, on a zoo of tiny checkpoints made by the tests.

The zoo has the five shipped names (en-fr-none, -dot, -general, -additive, -scaled-dot)
so the page runs exactly as with the real models; `test_shipped_models_smoke` runs it on
the real checkpoints too.
"""
import base64
import json
import re
import shutil
import sys
import threading
import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT, away_and_back, five_translators


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, tiny_additive, tiny_none, untrained_translators):
    root = tmp_path_factory.mktemp("zoo")
    five_translators(root, tiny_additive, tiny_none, untrained_translators)
    return root


def translate_page(timeout: float = 60, **query) -> AppTest:
    """The whole app opened at /translate?query (the app itself opens on Start here; AppTest
    resolves a page through app.py's navigation only after a first run)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout).run()
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page("pages/translate.py")
    return at.run()


@pytest.fixture
def app(zoo, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    return translate_page


def chart(at, key):
    for c in at.get("plotly_chart"):
        if c.proto.id and key in c.proto.id:
            return json.loads(c.proto.spec)
    return None


def array(v) -> np.ndarray:
    """A plotly array from a chart spec: a list, or plotly's base64 typed array."""
    if isinstance(v, dict) and "bdata" in v:
        shape = [int(x) for x in str(v.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).reshape(shape)
    return np.asarray(v)


def texts(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
                     + [w.value for w in at.warning])


def translation(at) -> str:
    return [m.value for m in at.markdown if "s2s-text" in m.value][0]


def submit(at, **values) -> AppTest:
    for key, value in values.items():
        _widget(at, key).set_value(value)
    [b for b in at.button if b.label == "Translate"][0].click()
    return at.run()


def open_tab(at, label: str) -> AppTest:
    """Switch the Translate page's tabs (only the open one runs)."""
    at.session_state["tab"] = label
    return at.run()


def _widget(at, key):
    w = at.get_by_key(key)
    return w[0] if isinstance(w, list) else w


def test_first_view_translates_the_example_and_draws_the_heatmap(app):
    at = app()
    assert not at.exception
    assert at.text_area(key="text").value == "She has a big black dog."
    options = at.selectbox(key="example").options
    assert any("failure case" in o and "European Economic Area" in o for o in options)   # labelled as such
    assert at.title[0].value == "Translate & Align"
    assert chart(at, "heatmap") is not None
    assert "Device: **CPU**" in "\n".join(c.value for c in at.sidebar.caption)
    assert [d for d in at.get("download_button")], "CSV and JSON downloads are offered"


def test_submit_translates_and_puts_settings_in_the_url(app):
    at = submit(app(), text="a b c d")
    assert not at.exception
    assert ">d c b a<" in translation(at)
    assert at.query_params["text"] in ("a b c d", ["a b c d"])
    spec = chart(at, "heatmap")
    z = array(spec["data"][0]["z"])
    assert z.shape == (5, 5) and np.allclose(z.sum(1), 1, atol=1e-3)   # 4 words + </s>, rows sum to 1


def test_beam_search_shows_nbest_and_tree(app):
    at = submit(app(), text="a b c", method="beam", beam=4, nbest=3)
    assert not at.exception
    assert chart(at, "beam_tree") is None and not at.dataframe     # hidden tabs don't run
    at = open_tab(at, "Beam tree")                          # the n-best list with scores, above the tree
    table = at.dataframe[0].value
    assert list(table["rank"]) == [1, 2, 3] and table["translation"][0] == "c b a"
    assert table["source covered"][0].endswith("%")           # #47: how much of the source each one read
    assert not [w for w in at.warning if "best beam" in w.value]   # as much as greedy: nothing to say
    assert chart(at, "beam_tree") is not None
    greedy = open_tab(submit(app(), text="a b c"), "Beam tree")      # no tree: the hint names the radio where it is
    assert chart(greedy, "beam_tree") is None
    assert any("**Beam search** (beside Greedy" in i.value for i in greedy.info)


def test_sampling_is_reproducible_with_its_seed(app):
    at = submit(app(), text="a b c d e f", method="sample", temp=2.0, topk=5, seed=11)
    first = translation(at)
    at = submit(at, text="a b c d e f")
    assert translation(at) == first and not at.exception


def test_shared_link_restores_the_view(app):
    at = app(text="e f g", method="beam", beam="3", nbest="2", view="pieces")
    assert not at.exception
    assert _widget(at, "beam").value == 3 and _widget(at, "method").value == "beam"
    assert ">g f e<" in translation(at)
    ticks = chart(at, "heatmap")["layout"]["xaxis"]["ticktext"]
    assert ticks[0].startswith("▁")            # subword view keeps the word-start marker


def test_bad_link_values_are_ignored_with_a_note(app):
    at = app(beam="99", method="teleport", text="a b")
    assert not at.exception
    assert "Ignored the link's beam" in texts(at) and "Ignored the link's method" in texts(at)
    assert _widget(at, "beam").value == 5


def test_a_link_to_a_model_this_server_does_not_offer_says_so(app):
    """#45: a link naming a model the operator does not offer shows the default, and says in
    one line which model was asked for (before, it fell back with no word)."""
    at = app(model="hf:facebook/nllb-200-3.3B", text="a b")
    assert not at.exception
    note = [w.value for w in at.warning if "does not offer" in w.value]
    assert len(note) == 1 and "`hf:facebook/nllb-200-3.3B`" in note[0] and _widget(at, "model").value in note[0]
    assert ">b a<" in translation(at)
    assert not [w for w in app(text="a b").warning if "does not offer" in w.value]


@pytest.mark.parametrize("text,message", [("", "empty"), ("\x00\x07\u200b", "empty"), ("a b " * 240, "limit")])
def test_bad_input_gets_a_message(app, text, message):
    at = submit(app(), text=text)
    assert not at.exception
    assert any(message in w.value for w in at.warning)


def test_html_is_shown_as_text(app):
    at = submit(app(), text="<b>a</b> <script>alert(1)</script>")
    assert not at.exception
    out = translation(at)
    assert "<b>" not in out.replace("<div", "").split(">", 1)[1] and "<script>" not in out


def test_none_model_says_there_is_no_alignment(app):
    at = app()
    at.sidebar.selectbox[0].set_value("en-fr-none").run()
    assert not at.exception
    assert "no attention" in texts(at)
    assert chart(at, "heatmap") is None
    # a tab of attention models only
    assert "**Bottleneck** page" in texts(at) and "Compare attention* tab" not in texts(at)


def test_words_and_pieces_toggle(app):
    at = submit(app(), text="a b c")
    words = chart(at, "heatmap")["layout"]["xaxis"]["ticktext"]
    _widget(at, "view").set_value("pieces")
    at.run()
    pieces = chart(at, "heatmap")["layout"]["xaxis"]["ticktext"]
    assert words == ["a", "b", "c", "&lt;/s&gt;"] and pieces == ["▁a", "▁b", "▁c", "&lt;/s&gt;"]


def test_the_view_choice_survives_a_refused_input(app):
    """A warning stops the page before the words/pieces control is drawn; the choice must
    still be there when the next sentence translates."""
    at = submit(app(), text="a b c")
    _widget(at, "view").set_value("pieces")
    at = submit(at.run(), text="")
    assert any("empty" in w.value for w in at.warning)
    at = submit(at, text="a b c d")
    assert _widget(at, "view").value == "pieces"
    assert chart(at, "heatmap")["layout"]["xaxis"]["ticktext"][0] == "▁a"


def test_unknown_characters_are_named(app):
    at = submit(app(), text="a <b> c")
    assert not at.exception
    note = [c.value for c in at.caption if "not in this model's vocabulary" in c.value]
    assert note and "`<`" in note[0] and "`>`" in note[0] and "`a`" not in note[0]
    at = submit(at, text="a b c")
    assert not [c for c in at.caption if "vocabulary" in c.value]


def test_step_slider_and_live_decoding(app, monkeypatch):
    at = submit(app(), text="a b c")
    _widget(at, "step").set_value(1)
    at.run()
    assert "Step **1** of 4 words" in texts(at)
    assert chart(at, "step_attn") is not None and chart(at, "step_top") is not None
    _widget(at, "delay").set_value(0.0)
    import ui.show
    drawn, plotly_chart = [], ui.show.plotly_chart

    def record(fig, *args, **kwargs):       # every chart the page draws, by key, in order
        drawn.append(kwargs.get("key"))
        return plotly_chart(fig, *args, **kwargs)
    monkeypatch.setattr(ui.show, "plotly_chart", record)
    from streamlit.delta_generator import DeltaGenerator
    sliders, slider = [], DeltaGenerator.slider

    def record_slider(self, label, *args, **kwargs):
        sliders.append((kwargs.get("key"), kwargs.get("value")))
        return slider(self, label, *args, **kwargs)
    monkeypatch.setattr(DeltaGenerator, "slider", record_slider)
    at.button(key="play").click()
    at.run()
    assert not at.exception
    # ▶ Play drives the whole step view: at each of the 4 steps both charts, and the output so far
    frames = [k for k in drawn if k and "_live" in k]
    assert frames == [f"{c}_live{k}" for k in range(4) for c in ("step_attn", "step_top")]
    # and the step slider with them (#47: it stayed at 1 while the text read "Step 2 of 4")
    assert [(k, v) for k, v in sliders if k and k.startswith("step_live")] == [(f"step_live{k}", k + 1)
                                                                              for k in range(4)]
    assert _widget(at, "step").value == 4 and "Step **4** of 4 words" in texts(at)     # it ends on the last step
    assert "**So far:** `c` `b` `a` `</s>`" in texts(at)            # the tiny model reverses its input


def test_play_fills_in_the_heatmap_on_the_first_screen(app, monkeypatch):
    """▶ Play beside the heatmap redraws the heatmap itself one step at a time (one pause per
    output piece), then leaves the whole matrix."""
    at = submit(app(), text="a b c")
    final = chart(at, "heatmap")
    frames, sleep = [], time.sleep

    def page_sleep(seconds):        # AppTest runs the page in this process, and polls with sleeps of its own
        if sys._getframe(1).f_code.co_filename.endswith("translate.py"):
            frames.append(seconds)
        else:
            sleep(seconds)
    monkeypatch.setattr("time.sleep", page_sleep)
    at.button(key="play_main").click()
    at.run()
    assert not at.exception
    assert len(frames) == len(array(final["data"][0]["y"])) == 4 and set(frames) == {0.4}   # a b c </s>
    assert np.allclose(array(chart(at, "heatmap")["data"][0]["z"]), array(final["data"][0]["z"]))


def test_bleu_with_no_word_in_common_says_it_is_zero(app):
    at = open_tab(submit(app(), text="a b c"), "Forced decoding")
    _widget(at, "reference").set_value("x y")
    [b for b in at.button if b.label == "Score this translation"][0].click()
    at.run()
    assert not at.exception and "BLEU-4 = BP · (p₁p₂p₃p₄)^¼ = **0.000**" in texts(at)
    captions = " ".join(c.value for c in at.caption)
    assert "no word of the output is in the reference (p₁ = 0), so BLEU is 0" in captions
    assert "smooths the zero counts instead" not in captions
    assert "of the reference is not in this model's vocabulary" not in captions
    _widget(at, "reference").set_value("x 😀 y")                      # a character the model cannot spell
    [b for b in at.button if b.label == "Score this translation"][0].click()
    at.run()
    assert not at.exception
    assert any("1 character of the reference is not in this model's vocabulary" in c.value for c in at.caption)


def test_forced_decoding_scores_a_reference(app):
    at = open_tab(submit(app(), text="a b c"), "Forced decoding")
    _widget(at, "reference").set_value("c b a")
    [b for b in at.button if b.label == "Score this translation"][0].click()
    at.run()
    assert not at.exception
    assert "log p(reference)" in texts(at)
    assert chart(at, "forced_heatmap") is not None and chart(at, "forced_lp") is not None
    page = texts(at)
    assert "Shannon game" in page and "BLEU-2 = BP" in page and "brevity penalty" in page
    bleu = [d.value for d in at.dataframe if "matching / in output" in d.value.columns][0]
    assert list(bleu["matching / in output"])[:2] == ["3 / 3", "2 / 2"]        # output c b a = reference
    ranks = [d.value for d in at.dataframe if "rank" in d.value.columns][0]
    assert list(ranks["rank"]) == [1, 1, 1, 1]
    assert "Search error" not in page                                         # the model found the reference


def open_expander(at, key: str) -> AppTest:
    """Open one of the page's expanders whose content runs only when open (on_change="rerun")."""
    at.session_state[key] = True
    return at.run()


def test_sqrt_d_view_follows_the_keys_slider(app):
    at = open_tab(submit(app(), text="a b c"), "Compare attention")
    fig = chart(at, "sqrt_d")                         # beside the panels (issue #34): the tab's first screen
    assert fig is not None and "20 keys" in fig["layout"]["title"]["text"]
    _widget(at, "sqrt_keys").set_value(50)
    at.run()
    fig = chart(at, "sqrt_d")
    assert not at.exception and "50 keys" in fig["layout"]["title"]["text"]
    assert "At d = 256" in texts(at) and "of at most 3.91" in texts(at)          # log 50


def test_step_by_step_follows_words_and_pieces(app, zoo):
    """Steps, their count and the attention bars' labels are words when words are shown."""
    from s2s.checkpoint import load_translator
    from s2s.decode import greedy
    from s2s.piece_words import word_spans
    # untrained: multi-piece words; the page's max length
    d = greedy(load_translator(zoo / "en-fr-dot"), "ab cd ef", max_len=120)
    n_words, n_pieces = len(word_spans(d.target_tokens)), len(d.target_tokens)
    assert n_words < n_pieces
    at = submit(app(model="en-fr-dot"), text="ab cd ef")
    _widget(at, "step").set_value(n_pieces)          # a piece step beyond the word count
    at.run()
    assert not at.exception, at.exception
    assert f"of {n_words} words" in texts(at)
    labels = chart(at, "step_attn")["data"][0]["x"]
    assert len(array(labels)) == len(word_spans(d.source_tokens))
    _widget(at, "view").set_value("pieces")
    at.run()
    assert f"of {n_pieces} pieces" in texts(at)
    assert len(array(chart(at, "step_attn")["data"][0]["x"])) == len(d.source_tokens)


def test_model_diagram_shows_the_selected_models_sizes(app, zoo):
    from s2s.checkpoint import load_translator
    for name in ("en-fr-additive", "en-fr-none"):
        at = app(model=name)
        assert chart(at, "model_diagram") is None     # closed: not redrawn on every Translate
        fig = chart(open_expander(at, "diagram_open"), "model_diagram")
        cfg = load_translator(zoo / name).model.cfg
        notes = " | ".join(a["text"] for a in fig["layout"]["annotations"] if a.get("text"))
        assert f"embedding E: {cfg.vocab_size:,} × {cfg.emb_dim}" in notes
        assert f"2 × {cfg.hidden // 2}" in notes and f"decoder: s_j ({cfg.hidden})" in notes
        assert ("attention (additive)" in notes) == (name == "en-fr-additive")
        assert ("final encoder state" in notes) == (name == "en-fr-none")


def test_capitals_and_high_temperature_are_explained(app):
    at = submit(app(), text="WHERE IS THE STATION?")
    note = [c.value for c in at.caption if "in capitals" in c.value]
    assert note and "pieces, against" in note[0]
    at = submit(at, text="Where is the station?")
    assert not [c for c in at.caption if "in capitals" in c.value]
    at = submit(at, text="a b c", method="sample", temp=1.6)
    assert any("temperature 1.60 > 1" in c.value for c in at.caption)
    at = submit(at, text="a b c", method="sample", temp=0.8)
    assert not any("flattens" in c.value for c in at.caption)


def test_search_error_is_named(app):
    """An untrained model's greedy output runs long; a short reference scores higher."""
    at = open_tab(submit(app(model="en-fr-dot"), text="a b c"), "Forced decoding")
    _widget(at, "reference").set_value("a")
    [b for b in at.button if b.label == "Score this translation"][0].click()
    at.run()
    assert not at.exception and "Search error" in texts(at)


def test_compare_attention_functions(app):
    at = submit(app(), text="a b c")
    assert chart(at, "cmp_dot") is None                     # only computed when its tab is open
    at = open_tab(at, "Compare attention")
    page = texts(at)
    for score in ("dot", "general", "additive", "scaled-dot"):
        assert f"**{score}** · entropy" in page
        assert chart(at, f"cmp_{score}") is not None
    assert "Argmax alignment" in page


def test_compare_attention_gives_each_model_its_colour_on_every_page(app):
    """The colour of s2s.figures.ATTENTION_COLORS, as on the Bottleneck page: in the heading
    and as the top of the heatmap's colour scale."""
    from s2s.figures import ATTENTION_COLORS
    at = open_tab(submit(app(), text="a b c"), "Compare attention")
    headings = [m.value for m in at.markdown if "· entropy" in m.value]
    assert len(headings) == 4
    for score in ("dot", "general", "additive", "scaled-dot"):
        color = ATTENTION_COLORS[score]
        assert any(f"color:{color}" in h and f"**{score}**" in h for h in headings)
        assert chart(at, f"cmp_{score}")["data"][0]["colorscale"][-1][1] == color
    assert len({ATTENTION_COLORS[s] for s in ("dot", "general", "additive", "scaled-dot")}) == 4


def test_alignment_lines_and_training_trace(app):
    at = open_tab(app(), "Alignment lines")
    assert chart(at, "lines") is not None
    at = open_tab(at, "Attention emerges")
    _widget(at, "trace_step_en-fr-additive").set_value(0)
    at.run()
    assert "after 0 training steps" in json.dumps(chart(at, "trace_heatmap")["layout"]["title"])


def test_another_models_trace_opens_on_its_own_last_step(zoo, tmp_path, monkeypatch):
    """Each model has its own step slider: one shared slider kept the last model's step label
    on its thumb in the browser while the chart showed the new model's step."""
    shutil.copytree(zoo, tmp_path / "zoo")
    metrics = tmp_path / "zoo" / "en-fr-dot" / "metrics.json"
    trace = json.loads((zoo / "en-fr-additive" / "metrics.json").read_text())["trace"]
    trace["points"] = trace["points"][:2]                      # a shorter training: fewer points
    metrics.write_text(json.dumps({**(json.loads(metrics.read_text()) if metrics.exists() else {}), "trace": trace}))
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path / "zoo"))
    at = open_tab(translate_page(), "Attention emerges")
    _widget(at, "trace_step_en-fr-additive").set_value(1)       # an index the other model has too
    at.run()
    at.selectbox(key="model").set_value("en-fr-dot").run()
    assert not at.exception and _widget(at, "trace_step_en-fr-dot").value == 1        # its own slider, at its end
    assert not any(w.key == "trace_step_en-fr-additive" for w in at.select_slider)   # gone, with its labels
    assert (f"after {trace['points'][1]['step']} training steps"
            in json.dumps(chart(at, "trace_heatmap")["layout"]["title"]))


def test_a_broken_checkpoint_is_reported_and_the_others_work(zoo, tmp_path, monkeypatch):
    shutil.copytree(zoo, tmp_path / "zoo")
    (tmp_path / "zoo" / "en-fr-broken").mkdir()
    (tmp_path / "zoo" / "en-fr-broken" / "config.json").write_text("{")
    (tmp_path / "zoo" / "en-fr-dot" / "model.safetensors").write_bytes(b"truncated")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path / "zoo"))
    at = translate_page()
    assert not at.exception
    assert any("en-fr-broken" in w.value for w in at.sidebar.warning)
    assert chart(at, "heatmap") is not None
    # the compare tab names the corrupt model and still draws the others
    at = open_tab(at, "Compare attention")
    assert any("en-fr-dot" in w.value and "corrupt" in w.value for w in at.warning)
    assert chart(at, "cmp_additive") is not None


@pytest.mark.skipif(not (ROOT / "checkpoints" / "en-fr-additive" / "metrics.json").is_file(),
                    reason="needs the shipped checkpoints")
def test_shipped_models_smoke(monkeypatch):
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    at = translate_page(timeout=90)
    assert not at.exception
    assert chart(at, "heatmap") is not None
    at = submit(at, text="I went to the lecture.")
    assert "cours" in translation(at) or "conférence" in translation(at)


@pytest.mark.skipif(not (ROOT / "checkpoints" / "en-fr-additive" / "metrics.json").is_file(),
                    reason="needs the shipped checkpoints")
def test_the_copy_example_keeps_both_names_with_a_sharp_alignment(monkeypatch):
    """The example of names no training pair has: both come out verbatim, and in the heatmap
    each French name attends to its English one (the row's maximum, above one half)."""
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    at = translate_page(timeout=90)
    at.selectbox(key="example").set_value("Ngozi and Mateus are waiting for the bus.").run()
    at = submit(at)
    assert "Ngozi" in translation(at) and "Mateus" in translation(at)
    fig = chart(at, "heatmap")
    src = list(fig["layout"]["xaxis"]["ticktext"])
    tgt = list(fig["layout"]["yaxis"]["ticktext"])
    a = array(fig["data"][0]["z"]).astype(float)
    for name in ("Ngozi", "Mateus"):
        row = a[tgt.index(name)]
        assert src[int(row.argmax())] == name and row.max() > 0.5



def test_warm_up_loads_every_model_once_in_the_background(zoo, monkeypatch):
    """app.py calls ui.warm.warm_up on every run: the first call, in a background thread, loads the
    default model and then every other one into the shared cache and decodes once with each
    (building its decode-time weights), so the first Translate press, Compare attention and a
    model switch find them ready; later calls start nothing."""
    from ui import models, warm
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setattr(warm, "_warm_thread", None)      # as in a fresh server process
    models.load_path.clear()
    import s2s.bottleneck
    timed = []
    monkeypatch.setattr(s2s.bottleneck, "decode_ms", lambda tr, *a, **k: timed.append(tr.path.name) or 1.0)
    thread = warm.warm_up()
    assert thread is not None and thread.name == "s2s-warm-up" and thread.daemon
    thread.join(60)
    assert not thread.is_alive()
    assert warm.warm_up() is None
    for name in ("en-fr-additive", "en-fr-dot", "en-fr-none"):    # the default, and every other model
        tr = models.load_path(str(zoo / name))               # a cache hit: the thread's model
        assert tr.model._decode_cache is not None        # built by the thread's decode
    # and it times nothing: the Bottleneck page's cost view is measured by the page, alone (timed
    # beside other work, it showed the contention, not the models)
    assert timed == []



def test_warm_up_imports_the_heads_tabs_knockout(zoo, monkeypatch):
    """The Heads tab imports ui.knockout (with ui.pruning and s2s.alignment) when it first draws:
    the warm-up imports it before, so that a Heads link's first run does not (issue #62 item 6)."""
    import sys

    import ui
    from ui import warm
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setattr(warm, "_warm_thread", None)      # as in a fresh server process
    monkeypatch.delitem(sys.modules, "ui.knockout", raising=False)       # (both put back after the test)
    monkeypatch.delattr(ui, "knockout", raising=False)
    thread = warm.warm_up()
    thread.join(60)
    assert not thread.is_alive() and "ui.knockout" in sys.modules

def test_warm_up_serves_the_start_pages_links_first(zoo, monkeypatch):
    """The warm-up's order is the Start page's links': Translate's default model, then the
    Bottleneck page's models and its Altair import, then the models only a switch asks for."""
    from ui import models, warm
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setattr(warm, "_warm_thread", None)
    for event in ("_default_warm", "_plotly_imported", "_altair_ready"):
        monkeypatch.setattr(warm, event, threading.Event())
    models.load_path.clear()
    order, real = [], models.load_model
    monkeypatch.setattr(models, "load_model",
                        lambda name: order.append((name, warm._altair_ready.is_set())) or real(name))
    warm.warm_up().join(120)
    names = [n for n, _ in order]
    assert names[0] == "en-fr-additive"                        # the default (also the Bottleneck's model)
    assert names.index("en-fr-none") < names.index("en-fr-dot")
    assert dict(order)["en-fr-none"] is False and dict(order)["en-fr-dot"] is True     # altair in between


def test_the_model_pickers_help_counts_the_models_present(app):
    """The help of the model picker says what is on offer, read from the configs, not a fixed sentence."""
    at = app()
    assert at.selectbox(key="model").help == ("5 recurrent encoder-decoders (attention: additive, dot, general, "
                                              "none, scaled-dot), English→French.")


def test_blocking_repeated_ngrams_from_the_settings_and_the_url(app, zoo):
    """An untrained model repeats itself; "Block repeated n-grams" = 1 (no piece twice) gives
    the library's greedy(no_repeat=1) output, says so under it, and travels in the link."""
    from s2s.checkpoint import load_translator
    from s2s.decode import greedy
    text = "a b c d e f g"
    tr = load_translator(zoo / "en-fr-dot")
    plain, blocked = greedy(tr, text), greedy(tr, text, no_repeat=1)
    assert plain.translation != blocked.translation
    at = app(model="en-fr-dot", text=text, norepeat="1")
    assert not at.exception and _widget(at, "norepeat").value == 1
    assert f">{blocked.translation}<" in translation(at)
    assert any("repeated 1-grams blocked" in c.value for c in at.caption)
    at = submit(at, norepeat=0)
    assert f">{plain.translation}<" in translation(at) and at.query_params["norepeat"] in ("0", ["0"])
    assert not any("grams blocked" in c.value for c in at.caption)


def test_a_cold_server_has_the_browser_load_plotly_while_the_page_waits(app, monkeypatch):
    """Until warm_up has torch and the default model, the Translate page first draws a hidden,
    empty Plotly chart (so a fresh browser tab fetches and runs Plotly's script while the
    page waits), then the page as usual; on a warm server it draws no such chart."""
    import threading

    from ui import warm
    monkeypatch.setattr(warm, "_warm_thread", threading.current_thread())     # a warm-up "running"
    monkeypatch.setattr(warm, "_default_warm", threading.Event())             # not done yet
    plotly_in = threading.Event()
    plotly_in.set()
    monkeypatch.setattr(warm, "_plotly_imported", plotly_in)
    at = translate_page()
    early = chart(at, "plotly_early")
    assert early is not None and early["layout"]["height"] == 10
    assert chart(at, "heatmap") is not None and not at.exception
    warm._default_warm.set()                                                  # warmed up
    at = translate_page()
    assert chart(at, "plotly_early") is None and chart(at, "heatmap") is not None




def test_the_warm_up_steps_aside_while_a_page_runs(monkeypatch):
    """Past the default model, the warm-up waits between its steps while any page runs and for
    QUIET_S after (the browser draws what the run sent, on the same cores), unless the page
    itself waits for the warm-up (then both would wait for each other)."""
    import threading
    import time

    from ui import warm
    monkeypatch.setattr(warm, "QUIET_S", 0.3)
    monkeypatch.setattr(warm, "_last_run_end", 0.0)
    t = time.perf_counter()
    warm._step_aside()                                   # nothing runs: at once
    assert time.perf_counter() - t < 0.1
    stepped = threading.Event()
    with warm.page_run():
        waiter = threading.Thread(target=lambda: (warm._step_aside(), stepped.set()))
        waiter.start()
        time.sleep(0.3)
        assert not stepped.is_set()                      # a page runs: the warm-up waits
        ended = time.perf_counter()
    waiter.join(5)
    assert stepped.is_set() and time.perf_counter() - ended >= 0.25     # and a quiet while after
    # a page that waits for the warm-up (altair_ready, ...) is not waited for
    monkeypatch.setattr(warm, "_warm_thread", threading.current_thread())
    imported = threading.Event()
    with warm.page_run():
        page = threading.Thread(target=lambda: warm._after_warm_up(imported, timeout=5))
        page.start()
        while not warm._waiting:                         # the page is waiting for the warm-up
            time.sleep(0.01)
        t = time.perf_counter()
        warm._step_aside(timeout=5)
        assert time.perf_counter() - t < 2
        imported.set()
        page.join(5)


def test_a_link_to_a_tab_scrolls_the_tabs_into_view(app):
    """Arriving with ?tab=… the page adds a zero-height script that scrolls the tabs to the
    top (the tab's view is below the heatmap); a plain visit adds none."""
    def scrolls(at) -> bool:
        return any("scrollIntoView" in str(e.proto) for e in at.get("html"))
    at = app(tab="Beam tree", method="beam")
    assert not at.exception and scrolls(at)
    at.run()                                                   # a later run of the page: no scroll
    assert not scrolls(at)
    assert not scrolls(app())


def test_the_typed_sentence_and_model_survive_a_visit_to_another_page(app):
    at = submit(app(), text="The cat sleeps.")
    _widget(at, "model").set_value("en-fr-dot").run()
    # (tests/test_browser.py goes through the Bottleneck page, with app.py's restore_kept)
    at = away_and_back(at, "pages/gradients.py", "pages/translate.py", clear_query=True)
    assert not at.exception
    assert _widget(at, "text").value == "The cat sleeps." and _widget(at, "model").value == "en-fr-dot"


def test_no_page_needs_streamlits_magic():
    """.streamlit/config.toml turns "magic" off (rewriting each page's syntax tree for it cost
    0.17 s of its first run): no page writes a bare expression that magic would have shown."""
    import ast
    import tomllib

    from streamlit.runtime.scriptrunner.magic import add_magic
    assert tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["runner"]["magicEnabled"] is False
    for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        tree = add_magic(path.read_text(), str(path))
        shown = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "__streamlitmagic__"]
        assert not shown, f"{path.name} lines {shown}"


def test_a_paragraph_gets_advice_and_a_sentence_by_sentence_switch(app):
    """#47: above two sentences the page says why a paragraph may go wrong and offers to
    translate one sentence at a time: its heatmap is then block-diagonal, the address keeps it,
    and the beam tree says why it has no single tree."""
    short = submit(app(), text="a b c. d e.")
    assert not short.exception and not [t for t in short.toggle if t.key == "by_sentence"]
    at = submit(app(), text="a b c. d e f. g h.")
    assert not at.exception and "Your text has 3 sentences" in texts(at)
    whole = array(chart(at, "heatmap")["data"][0]["z"])
    at.toggle(key="by_sentence").set_value(True).run()
    assert not at.exception and "its own source only" in texts(at)
    z = array(chart(at, "heatmap")["data"][0]["z"])
    assert z.shape[1] > whole.shape[1]                   # each sentence keeps its own </s>
    assert at.query_params["sentences"] in ("each", ["each"])
    # block-diagonal: row by row, the columns read are one contiguous block, later rows further right
    starts = [int(np.flatnonzero(row > 0)[0]) for row in z]
    assert starts == sorted(starts) and starts[-1] > 0
    at = open_tab(submit(at, method="beam"), "Beam tree")
    assert not at.exception and any("sentence by sentence" in i.value for i in at.info)


def test_the_projector_draws_tables_as_static_tables_within_the_column(app):
    """#47: with the Projector on, a table is an st.table (HTML: its text enlarged with the
    page's, its cells wrapping in the column) instead of a data grid drawn on a canvas, which
    ran past the column's right edge when zoomed."""
    at = app(projector="on", text="a b c", method="beam", beam="4", nbest="3", tab="Beam tree")
    assert not at.exception and at.session_state["projector"]
    assert not at.dataframe and at.table
    table = at.table[0].value
    assert list(table.columns) == ["rank", "translation", "log p", "score (log p / lp)", "source covered"]
    assert list(table["rank"]) == [1, 2, 3] and table["translation"].iloc[0] == "c b a"
    # what the table shows: every score with three decimals (-2.650, not repr's -2.65)
    import pyarrow as pa
    shown = pa.ipc.open_stream(at.table[0].proto.arrow_data.styler.display_values).read_all().to_pandas()
    for column in ("log p", "score (log p / lp)"):
        assert all(re.fullmatch(r"-?\d+\.\d{3}", v) for v in shown[column]), shown[column].tolist()
