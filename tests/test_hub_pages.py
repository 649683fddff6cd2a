"""AppTest: Hugging Face models the operator lists (S2S_HUB_MODELS) on the Translate and
Alignment pages, beside the shipped ones; and what a server offers without the switch."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import five_translators
from s2s.checkpoint import load_translator
from s2s.decode import greedy
from test_app import _widget, array, chart, open_tab, submit, texts, translate_page

TEXT = "the cat sat on the mat ."


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, tiny_additive, tiny_none, untrained_translators):
    return five_translators(tmp_path_factory.mktemp("hub_zoo"), tiny_additive, tiny_none, untrained_translators)


@pytest.fixture
def offered(zoo, hub_models, monkeypatch):
    """A server whose operator offers the tiny Marian and M2M100 beside the shipped models."""
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setenv("S2S_HUB_MODELS", f"{hub_models['marian']},{hub_models['m2m100']}")
    monkeypatch.delenv("S2S_ALLOW_ANY_MODEL", raising=False)
    return hub_models


def test_the_picker_offers_the_operators_models_and_translates_with_one(offered):
    at = translate_page()
    options = _widget(at, "model").options
    assert "marian  (Hugging Face)" in options and "m2m100  (Hugging Face)" in options
    assert "en-fr-additive" in " ".join(options)
    assert not [t for t in at.text_input if t.key == "model_any"]        # no "any model" box without the switch
    _widget(at, "model").set_value(str(offered["marian"]))
    at = submit(at, text=TEXT, view="pieces", maxlen=12)
    assert not at.exception, at.exception
    d = greedy(load_translator(offered["marian"]), TEXT, max_len=12)
    heat = chart(at, "heatmap")
    assert np.allclose(array(heat["data"][0]["z"]).astype(float), d.attention, atol=1e-4)
    assert "2 layers × 4 heads" in texts(at)
    assert "float32" in texts(at)                                        # the weights' precision, on the CPU
    # the Heads grid and the other tabs work for it
    at = open_tab(at, "Heads")
    assert chart(at, "heads_grid") is not None and not at.exception
    for tab in ("Step by step", "Beam tree", "Forced decoding", "Alignment lines", "Attention emerges"):
        at = open_tab(at, tab)
        assert not at.exception, (tab, at.exception)
    at.session_state["diagram_open"] = True
    at.run()
    assert "read from its Hugging Face config" in texts(at)


def test_a_multilingual_model_in_whole_words(offered):
    at = translate_page()
    _widget(at, "model").set_value(str(offered["m2m100"]))
    at = submit(at, text=TEXT, view="words", maxlen=10)
    assert not at.exception, at.exception
    heat = chart(at, "heatmap")
    rows = array(heat["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(np.nansum(rows, 1), 1, atol=1e-3)        # whole words keep each row a distribution
    assert heat["layout"]["yaxis"]["ticktext"][0] == "__fr__"            # the target language's code, first


def test_a_link_cannot_make_the_server_load_an_unlisted_model(offered, tmp_path):
    at = translate_page(model="hf:someone/huge-model", text=TEXT)
    assert not at.exception
    assert _widget(at, "model").value == "en-fr-additive"               # back to the default, nothing loaded


def test_the_switch_adds_a_box_for_any_model_and_a_bad_one_gets_a_message(offered, monkeypatch, tmp_path):
    monkeypatch.setenv("S2S_ALLOW_ANY_MODEL", "1")
    at = translate_page()
    box = [t for t in at.text_input if t.key == "model_any"][0]
    box.set_value(str(offered["t5"]))
    at.run()
    assert _widget(at, "model").value == str(offered["t5"]) and not at.exception
    assert chart(at, "heatmap") is not None
    box = [t for t in at.text_input if t.key == "model_any"][0]
    box.set_value(str(tmp_path / "no-such-folder"))
    at.run()
    assert not at.exception
    assert any("does not exist" in w.value for w in at.warning)         # named, and the page goes on
    assert _widget(at, "model").value == "en-fr-additive"


def test_the_alignment_page_scores_every_layer_and_head(offered):
    """Issue #62: a hub model's every layer x head is scored when asked, by a button that says how
    long (as Your corpus), not as the tab opens; the offer goes once pressed."""
    import ui.alignment.measurements as measure
    from conftest import app_page
    measure.head_scoring_runs.clear()               # a fresh server: nothing scored, no speed measured
    at = app_page("pages/alignment.py")
    names = _widget(at, "align_model").options
    assert any("marian" in n for n in names)
    _widget(at, "align_model").set_value(str(offered["marian"]))
    at.run()
    assert not at.exception, at.exception
    assert chart(at, "head_aer") is None and chart(at, "gold_figure") is not None    # the pair, not the heads
    assert any("every head kept" in i.value and "from its size" in i.value for i in at.info)
    at.button(key="heads_run").click().run()
    assert not at.exception, at.exception
    assert not [i for i in at.info if "every head kept" in i.value]
    grid = chart(at, "head_aer")
    assert grid is not None
    aer = array(grid["data"][0]["z"]).astype(float)
    assert aer.shape == (2, 4) and np.all((0 <= aer) & (aer <= 1))
    assert "best" in texts(at).lower()


def test_attention_against_attribution_for_a_hub_model(offered):
    from conftest import app_page
    at = app_page("pages/alignment.py")
    _widget(at, "align_model").set_value(str(offered["marian"]))
    at.session_state["alignment_tab"] = "Attention vs attribution"
    at.session_state["explain_text"] = TEXT
    at.session_state["explain_reference"] = "le chat est assis ."
    at.run()
    assert not at.exception, at.exception
    radio = [r for r in at.radio if r.key == "explain_method"][0]
    assert "ALTI+" in radio.options and "value zeroing" in radio.options    # a Transformer: every method
    assert chart(at, "contribution_map") is not None                   # the weights, at once
    radio.set_value("alti").run()
    fig = chart(at, "contribution_map")
    assert not at.exception and fig is not None and len(fig["data"]) == 2       # the map and the source share
    # value zeroing (S x T recomputations of each layer) runs for a hub model when it is chosen, not
    # before the first map; joined to the rest, it is the library's, word-merged as the map merges
    import numpy as np

    from s2s.checkpoint import load_translator
    from s2s.contributions import explain_contributions
    from s2s.piece_words import merge_to_words
    radio = [r for r in at.radio if r.key == "explain_method"][0]
    radio.set_value("value-zeroing").run()
    fig = chart(at, "contribution_map")
    assert not at.exception and fig is not None and any("value zeroing" in m.value for m in at.caption)
    c = explain_contributions(load_translator(offered["marian"]), TEXT, "le chat est assis .", ["value_zeroing"])
    _, _, shown = merge_to_words(c.source_tokens, c.target_tokens, c.matrix("value_zeroing"))
    from test_app import array
    assert np.allclose(array(fig["data"][0]["z"]), shown, atol=1e-4)
    radio = [r for r in at.radio if r.key == "explain_method"][0]
    radio.set_value("loo").run()                     # a hub model's leave-one-out: only when asked, with an estimate
    assert not at.exception and chart(at, "contribution_map") is None
    assert any("runs the model many times" in i.value for i in at.info)
    # the counterfactual part is for recurrent models, and says so in one line, with no controls (issue #62)
    assert any("counterfactual replaces a recurrent decoder" in i.value for i in at.info) and not at.error
    assert not [r for r in at.radio if r.key == "cf_kind"]
    # issue #62: once leave-one-out has run, the τ line names every method run, value zeroing (run
    # above, when chosen) included, whichever method is shown
    [b for b in at.button if b.key == "explain_run"][0].click().run()
    assert not at.exception, at.exception
    for shown in ("loo", "weights"):
        radio = [r for r in at.radio if r.key == "explain_method"][0]
        radio.set_value(shown).run()
        line = next(c.value for c in at.caption if c.value.startswith("Is it an explanation?"))
        assert "value zeroing" in line and "ALTI+" in line and "grad × input" in line, line


def test_a_shipped_model_out_of_its_depth_names_the_words_and_offers_a_hub_model(offered, zoo, tmp_path, monkeypatch):
    """The words of a text the model never saw in training (its train_words.json) are named in
    one line, and an operator's English-French hub model is one click away."""
    import json
    import shutil
    own = tmp_path / "zoo"                          # a folder of its own: models are cached by their path
    shutil.copytree(zoo, own)
    monkeypatch.setenv("S2S_CHECKPOINTS", str(own))
    (own / "en-fr-additive" / "train_words.json").write_text(json.dumps(
        {"pairs": 6000, "command": "test", "words": {w: 3 for w in "a b c d e the cat sat on mat".split()}}))
    renamed = tmp_path / "opus-mt-en-fr"            # its name says English to French
    shutil.copytree(offered["marian"], renamed)
    monkeypatch.setenv("S2S_HUB_MODELS", f"{renamed},{offered['m2m100']}")
    at = translate_page()
    at = submit(at, text="the convolutional cat sat on the mat .", maxlen=12)
    assert not at.exception, at.exception
    note = [c.value for c in at.caption if "never occur" in c.value]
    assert note and "`convolutional`" in note[0] and "6,000 training pairs" in note[0]
    assert "`cat`" not in note[0]
    button = [b for b in at.button if b.key == "try_hub"][0]
    assert button.label == "Try it with opus-mt-en-fr"
    button.click()
    at.run()
    assert _widget(at, "model").value == str(renamed) and not at.exception
    assert at.text_area(key="text").value == "the convolutional cat sat on the mat ."
    assert not [c.value for c in at.caption if "never occur" in c.value]     # a hub model ships no counts


def test_your_corpus_waits_for_a_button_that_says_how_long_with_a_hub_model(offered):
    """Issue #54: a hub model on Your corpus forced all 37 trial pairs through itself on opening
    the tab (11.5 s for opus-mt), with no button and no estimate. Now it waits for a button that
    gives the time (from the model's size before its first corpus, then from its measured
    speed); once run, the corpus is not asked for again."""
    import ui.alignment.measurements as tabs
    from conftest import app_page
    tabs.corpus_runs.clear()              # a fresh server: nothing run, no speed measured
    tabs.corpus_weights_cached.clear()
    at = app_page("pages/alignment.py")
    _widget(at, "align_model").set_value(str(offered["marian"]))
    at.session_state["alignment_tab"] = "Your corpus"
    at.run()
    assert not at.exception, at.exception
    button = at.button(key="corpus_run")
    assert button.label == "Align 37 pairs (under 1 s)"           # a tiny model; opus-mt's would say ~11 s
    # its size exactly: a tiny model's was "0.0 M parameters" (issue #69 item 9)
    from s2s.hub import registry_row
    n = registry_row(str(offered["marian"]))[1]["parameters"]
    size = f"from its size, {n:,} parameters" if n < 1e5 else f"from its size, {n / 1e6:,.1f} M parameters"
    assert any("37 pairs" in i.value and size in i.value for i in at.info), [i.value for i in at.info]
    assert not [i.value for i in at.info if "0.0 M" in i.value]
    assert not at.metric and chart(at, "corpus_figure") is None   # nothing aligned yet
    button.click().run()
    assert not at.exception, at.exception
    assert not [i for i in at.info if "37 pairs" in i.value]          # the offer gone from above the results
    assert {m.label for m in at.metric} >= {"AER (whole corpus)", "Precision", "Recall"}
    assert chart(at, "corpus_figure") is not None
    at.number_input(key="corpus_pair").set_value(2).run()         # another pair: no second ask
    assert not at.exception and not [b for b in at.button if b.key == "corpus_run"] and at.metric
    at.selectbox(key="corpus_rule").set_value("shift").run()       # another reading: asked, at the measured speed
    assert any("from its speed on an earlier corpus here" in i.value for i in at.info)
    assert at.button(key="corpus_run").label.startswith("Align 37 pairs (")


def test_the_corpus_estimate_comes_from_the_models_size_then_its_speed(monkeypatch):
    """Before a model's first corpus its time is its size times CORPUS_S_PER_PARAM_WORD: an
    opus-mt-sized model (75 M parameters) on the 37 trial pairs (1,382 words) is over
    CORPUS_ASK_S, as the 11.5 s measured; the shipped models' (under 8 M) are not."""
    from types import SimpleNamespace

    import torch

    import ui.alignment.common as common
    import ui.alignment.measurements as tabs
    monkeypatch.setattr(tabs, "corpus_runs", lambda: {"done": {}, "rate": {}})
    pairs = [(("w",) * 20, ("m",) * 17)] * 37 + [None]                # 1,369 words; a line that could not be read
    model = lambda n: SimpleNamespace(model=SimpleNamespace(parameters=lambda: [torch.zeros(n)]))  # noqa: E731
    opus, _ = tabs.corpus_estimate("opus", model(75_000_000), pairs)
    shipped, basis = tabs.corpus_estimate("shipped", model(7_600_000), pairs)
    assert 8 < opus < 15 and shipped < tabs.CORPUS_ASK_S < opus and "7.6 M parameters" in basis
    runs = {"done": {}, "rate": {"opus": 0.01}}
    monkeypatch.setattr(tabs, "corpus_runs", lambda: runs)
    assert tabs.corpus_estimate("opus", model(75_000_000), pairs) == (pytest.approx(13.69),
                                                                        "from its speed on an earlier corpus here")
    assert common.about(0.4) == "under 1 s" and common.about(11.5) == "about 12 s"
    assert common.about(300) == "about 5 min"


def test_the_operators_hub_models_load_after_the_warm_up_and_a_page_waits_for_that_load(offered, monkeypatch):
    """Issue #54: a hub model's first use cost 17.4 s on Translate, most of it the load. The warm-up
    loads the operator's hub models after the shipped ones, in the list's order, each with a first
    decoding; a page that asks for one meanwhile waits for that same load (one load per model,
    counted here), saying so, and draws its heatmap. The load is held until the page has asked."""
    import threading

    from ui import models, warm
    marian, m2m100 = str(offered["marian"]), str(offered["m2m100"])
    earlier = warm._warm_thread              # an earlier test's app started the process's warm-up: its end first
    if isinstance(earlier, threading.Thread) and earlier is not threading.current_thread():
        earlier.join(600)
    monkeypatch.setattr(warm, "_warm_thread", None)                 # as in a fresh server process
    for event in ("_default_warm", "_plotly_imported", "_altair_ready"):
        monkeypatch.setattr(warm, event, threading.Event())
    monkeypatch.setattr(models, "_preloads", {})
    models.load_path.clear()
    loads, hub_loading, page_asked = [], threading.Event(), threading.Event()
    real_load, real_preloading = models.load_translator, models.preloading

    def load(path, *a, **k):
        loads.append(str(path))
        if str(path) == marian:                 # held until the page has asked for it
            hub_loading.set()
            assert page_asked.wait(120)
        return real_load(path, *a, **k)

    def preloading(path):
        busy = real_preloading(path)
        if path == marian and busy:
            page_asked.set()
        return busy

    import s2s.decode
    decoded, real_greedy = [], s2s.decode.greedy
    monkeypatch.setattr(s2s.decode, "greedy", lambda tr, *a, **k: decoded.append(tr) or real_greedy(tr, *a, **k))
    monkeypatch.setattr(models, "load_translator", load)
    monkeypatch.setattr(models, "preloading", preloading)
    thread = warm.warm_up()
    assert hub_loading.wait(180), loads
    shipped = [p for p in loads if p not in (marian, m2m100)]
    assert loads[-1] == marian and len(shipped) == 5 and m2m100 not in loads      # the shipped models first
    assert models.preloading(marian) and warm._altair_ready.is_set()
    pages = []
    page = threading.Thread(target=lambda: pages.append(translate_page(timeout=180, model=marian, text=TEXT,
                                                                        maxlen="12")))
    page.start()
    page.join(240)
    thread.join(240)
    assert not page.is_alive() and not thread.is_alive()
    (at,) = pages
    assert not at.exception, at.exception
    assert _widget(at, "model").value == marian and chart(at, "heatmap") is not None
    assert loads.count(marian) == 1 and loads.count(m2m100) == 1 and loads[-1] == m2m100    # one load each
    assert not models.preloading(marian) and any(tr is models.load_path(marian) for tr in decoded)   # its first decode


def test_a_server_whose_operator_lists_no_hub_model_loads_none(monkeypatch, hub_models):
    """Only the operator's list is loaded early: nothing without S2S_HUB_MODELS, never a model a
    session named (S2S_ALLOW_ANY_MODEL), never an entry the registry refuses (nothing is downloaded
    to find out: the rows are read from configs)."""
    from ui import models
    monkeypatch.delenv("S2S_HUB_MODELS", raising=False)
    monkeypatch.setenv("S2S_ALLOW_ANY_MODEL", "1")
    assert models.listed_hub_models() == []
    monkeypatch.setenv("S2S_HUB_MODELS", f"hf:not a name,{hub_models['t5']}")
    assert models.listed_hub_models() == [str(hub_models["t5"])]
