"""AppTest: the Heads tab's neuron view (ui/neuron_view.py). Under a Transformer's grid it draws
the head enlarged for one query, whose weights are that head's row; the query is a select box
kept in the address (heads_query, from 1), checked against the model and text; a recurrent
model's tab draws its one attention at one output step."""

import numpy as np
import pytest

from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, attention_heads, decode
from test_app import _widget, array, chart, open_tab, submit, texts, translate_page

TEXT = "a b c d e"


@pytest.fixture(scope="module")
def zoo(transformer_zoo):
    return transformer_zoo


def weights(spec: dict) -> np.ndarray:
    """The figure's last panel: the softmax's weights, one bar per key."""
    return array([t for t in spec["data"] if t["type"] == "bar"][-1]["x"]).astype(float)


def keys(spec: dict) -> list[str]:
    return list(spec["layout"]["yaxis"]["ticktext"])


def drawn_later(at):
    """A Transformer's view is drawn after the first screen: the browser clicks the hidden
    button once the grid is drawn (ui/neuron_view.py); here, the test does."""
    if [b for b in at.button if b.key == "neuron_later"]:
        at.button(key="neuron_later").click().run()
    return at


def test_the_neuron_view_is_the_enlarged_heads_row(zoo, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    at = submit(translate_page(model="en-fr-transformer"), text=TEXT, view="pieces")
    d = decode(load_translator(zoo / "en-fr-transformer"), TEXT, DecodeSettings("greedy", max_len=120))
    at = drawn_later(open_tab(at, "Heads"))
    assert not at.exception, at.exception
    _, y, w = attention_heads(d, "cross")
    L = w.shape[0]
    query = _widget(at, "heads_query").value
    assert query == len(y) // 2                                   # the middle row first
    spec = chart(at, "neuron_view")
    assert np.allclose(weights(spec), w[L - 1, 0, query], atol=1e-4)
    assert "softmax_j(q·k_j / √" in texts(at)
    _widget(at, "heads_query").set_value(query + 1).run()          # in the address, from 1
    assert at.query_params["heads_query"] == str(query + 2)
    assert np.allclose(weights(chart(at, "neuron_view")), w[L - 1, 0, query + 1], atol=1e-4)
    # another query, layer, head and kind: the view follows; decoder self-attention lists keys up to the query
    _widget(at, "heads_kind").set_value("decoder").run()
    _widget(at, "heads_layer").set_value(0)
    _widget(at, "heads_head").set_value(1)
    _widget(at, "heads_query").set_value(2)
    at.run()
    _, _, w = attention_heads(d, "decoder")
    spec = chart(at, "neuron_view")
    assert len(keys(spec)) == 3 and np.allclose(weights(spec), w[0, 1, 2, :3], atol=1e-4)
    assert "causal" in texts(at) and not at.exception


def test_a_query_from_the_address_is_checked_against_the_output(zoo, monkeypatch):
    """?heads_query=N out of the output's range (another text, another model) falls back to the middle row."""
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    at = drawn_later(translate_page(model="en-fr-transformer", text=TEXT, tab="Heads", heads_query="99",
                                    view="pieces"))
    assert not at.exception, at.exception
    assert chart(at, "neuron_view") is not None
    d = decode(load_translator(zoo / "en-fr-transformer"), TEXT, DecodeSettings("greedy", max_len=120))
    assert _widget(at, "heads_query").value == len(d.target_tokens) // 2
    at = drawn_later(translate_page(model="en-fr-transformer", text=TEXT, tab="Heads", heads_query="2",
                                    view="pieces"))
    assert _widget(at, "heads_query").value == 1


def test_a_recurrent_models_heads_tab_shows_its_attention_step(zoo, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    at = submit(translate_page(model="en-fr-additive"), text=TEXT, view="pieces")
    at = open_tab(at, "Heads")
    assert not at.exception, at.exception
    assert any("one attention distribution per output step" in i.value for i in at.info)
    d = decode(load_translator(zoo / "en-fr-additive"), TEXT, DecodeSettings("greedy", max_len=120))
    step = _widget(at, "heads_query").value
    spec = chart(at, "neuron_view")
    assert np.allclose(weights(spec), d.attention[step], atol=1e-4)
    assert "vᵀ tanh(W1 h_j + W2 s_t + b)" in texts(at)
    _widget(at, "heads_query").set_value(0).run()
    assert np.allclose(weights(chart(at, "neuron_view")), d.attention[0], atol=1e-4)
    # the model without attention: the tab's note, and no neuron view
    _widget(at, "model").set_value("en-fr-none").run()
    assert not at.exception and chart(at, "neuron_view") is None
