"""AppTest: a Transformer on the Translate page. Its heatmap shows any layer and head of its
cross-attention, the Heads tab every layer x head of its three attentions, and every other
tab works for it as for the recurrent models; a recurrent model's Heads tab says where heads are."""

import numpy as np
import pytest

from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, attention_heads, attention_of, decode
from s2s.figures import ATTENTION_COLORS
from s2s.piece_words import merge_to_words
from test_app import _widget, array, chart, open_tab, submit, texts, translate_page

TEXT = "a b c d e"


@pytest.fixture
def transformer(transformer_zoo, monkeypatch):
    """The Translate page on the Transformer, TEXT translated (greedy), and the same decoding
    made directly with s2s."""
    monkeypatch.setenv("S2S_CHECKPOINTS", str(transformer_zoo))
    at = submit(translate_page(model="en-fr-transformer"), text=TEXT, view="pieces")
    assert not at.exception, at.exception
    d = decode(load_translator(transformer_zoo / "en-fr-transformer"), TEXT, DecodeSettings("greedy", max_len=120))
    return at, d


def z(spec: dict, trace: int = 0) -> np.ndarray:
    return array(spec["data"][trace]["z"]).astype(float)


def test_the_heatmap_shows_any_layer_and_head(transformer):
    at, d = transformer
    L, H = d.cross_attention.shape[:2]
    assert _widget(at, "tf_layer").value == L - 1 and _widget(at, "tf_head").value is None   # the last layer's mean
    assert np.allclose(z(chart(at, "heatmap")), d.attention, atol=1e-4)
    assert f"{L} layers × {H} heads" in texts(at)
    _widget(at, "tf_layer").set_value(0)
    _widget(at, "tf_head").set_value(2)
    at.run()
    assert np.allclose(z(chart(at, "heatmap")), attention_of(d, 0, 2), atol=1e-4)
    at = open_tab(at, "Alignment lines")                     # the lines follow the choice
    assert "layer 1 · head 3" in texts(at)
    assert not at.exception


def test_the_heads_tab_draws_every_head_and_enlarges_the_one_chosen(transformer):
    at, d = transformer
    at = open_tab(at, "Heads")
    x, y, w = attention_heads(d, "cross")
    L, H = w.shape[:2]
    grid = chart(at, "heads_grid")
    assert len(grid["data"]) == 2 * L * H                     # each head's map and its clickable markers
    for k in range(L * H):
        assert np.allclose(z(grid, k), w[divmod(k, H)], atol=1e-4)
    assert (_widget(at, "heads_layer").value, _widget(at, "heads_head").value) == (L - 1, 0)
    big = chart(at, "head_enlarged")
    assert np.allclose(z(big), w[L - 1, 0], atol=1e-4)
    assert f"layer {L} · head 1" in big["layout"]["title"]["text"]
    _widget(at, "heads_layer").set_value(0)
    _widget(at, "heads_head").set_value(1)
    at.run()
    big = chart(at, "head_enlarged")
    assert np.allclose(z(big), w[0, 1], atol=1e-4) and "layer 1 · head 2" in big["layout"]["title"]["text"]
    assert f"uniform over {len(x)} tokens: {np.log(len(x)):.2f}" in texts(at)      # cross: every source piece
    xaxis = grid["layout"][f"xaxis{(L - 1) * H + 1}"]                 # the bottom row's labels stand upright
    assert xaxis["tickangle"] == -90 and len(xaxis["tickvals"]) <= 12

    _widget(at, "heads_kind").set_value("decoder").run()      # causal: no step reads a later piece
    x, y, w = attention_heads(d, "decoder")
    big = chart(at, "head_enlarged")
    assert np.allclose(z(big), w[0, 1], atol=1e-4) and np.allclose(np.triu(z(big), 1), 0.0)
    causal = np.log(np.arange(1, len(y) + 1)).mean()                 # row j may read j + 1 pieces
    assert f"uniform over the tokens each row may read: {causal:.2f}" in texts(at)
    assert big["layout"]["xaxis"]["ticktext"][0] in ("<s>", "&lt;s&gt;")      # the first input, escaped for plotly
    assert "causal" in texts(at)
    _widget(at, "heads_kind").set_value("encoder").run()
    assert z(chart(at, "head_enlarged")).shape == (len(d.source_tokens),) * 2
    assert not at.exception


def test_the_heads_grid_switches_to_the_norm_of_each_head(transformer, transformer_zoo):
    """Cross-attention's heads as ‖α^h_ij f^h(x_j)‖ (s2s.contributions), each row a distribution;
    the switch is offered for cross-attention only, and the address keeps it."""
    import torch

    from s2s.contributions import contributions
    from s2s.decode import encode_source
    at, d = transformer
    at = open_tab(at, "Heads")
    _widget(at, "heads_view").set_value("norm").run()
    assert not at.exception, at.exception
    tr = load_translator(transformer_zoo / "en-fr-transformer")
    _, heads, _, _ = contributions(tr.model, torch.tensor([encode_source(tr, TEXT)]), torch.tensor(d.target_ids),
                                   ["norm"])
    L, H = heads["norm"].shape[:2]
    grid = chart(at, "heads_grid")
    for k in range(L * H):
        assert np.allclose(z(grid, k), heads["norm"][divmod(k, H)], atol=1e-4)
    assert "‖α f(x)‖" in grid["layout"]["title"]["text"]           # the grid says what it shows, not α
    assert grid["data"][0]["colorbar"]["title"]["text"] == "‖α f(x)‖"
    big = chart(at, "head_enlarged")
    assert "Norm ‖α f(x)‖, layer" in big["layout"]["title"]["text"]
    assert np.allclose(z(big).sum(1), 1.0, atol=1e-4) and not np.allclose(z(big), d.cross_attention[L - 1, 0])
    assert at.query_params.get("heads_view") in ("norm", ["norm"])
    _widget(at, "heads_kind").set_value("encoder").run()             # a weights-only kind: no switch
    assert not at.exception and not [b for b in at.selectbox if b.key == "heads_view"]


def test_heads_in_whole_words_are_merged_like_the_heatmap(transformer):
    at, d = transformer
    at = open_tab(at, "Heads")
    _widget(at, "view").set_value("words").run()
    x, y, w = attention_heads(d, "cross")
    L, H = w.shape[:2]
    _, _, merged = merge_to_words(x, y, w[L - 1, 0])
    assert np.allclose(z(chart(at, "head_enlarged")), merged, atol=1e-4)


def test_a_recurrent_models_heads_tab_points_to_the_transformer(transformer_zoo, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(transformer_zoo))
    at = open_tab(translate_page(model="en-fr-additive"), "Heads")
    assert any("Heads belong to a Transformer" in i.value and "en-fr-transformer" in i.value
               and "the heatmap above" in i.value for i in at.info)
    assert chart(at, "heads_grid") is None and not at.exception
    at = open_tab(translate_page(model="en-fr-none"), "Heads")           # no heatmap above to point to
    note = [i.value for i in at.info if "Heads belong to a Transformer" in i.value]
    assert note and "no attention at all" in note[0] and "heatmap above" not in note[0]


def test_compare_puts_the_transformer_beside_the_four_recurrent_scorers(transformer):
    at, _ = transformer
    at = open_tab(at, "Compare attention")
    headings = [m.value for m in at.markdown if "· entropy" in m.value]
    assert len(headings) == 5
    # scaled-dot is the recurrent model's; the Transformer has its own panel in its own colour
    assert chart(at, "cmp_scaled-dot") is not None and chart(at, "cmp_en-fr-transformer") is not None
    assert any("**Transformer**" in h and f"color:{ATTENTION_COLORS['transformer']}" in h for h in headings)
    assert chart(at, "cmp_en-fr-transformer")["data"][0]["colorscale"][-1][1] == ATTENTION_COLORS["transformer"]
    assert "the mean of its heads" in texts(at)


def test_every_other_tab_works_for_the_transformer(transformer):
    at, d = transformer
    at = open_tab(at, "Step by step")
    assert len(array(chart(at, "step_attn")["data"][0]["x"])) == len(d.source_tokens)
    at = open_tab(at, "Forced decoding")
    _widget(at, "reference").set_value("e d c b a")
    [b for b in at.button if b.label == "Score this translation"][0].click()
    at.run()
    assert chart(at, "forced_heatmap") is not None and "log p(reference)" in texts(at)
    at = open_tab(submit(at, method="beam"), "Beam tree")
    assert chart(at, "beam_tree") is not None
    at = open_tab(at, "Attention emerges")
    _widget(at, "trace_step_en-fr-transformer").set_value(0)
    at.run()
    assert "after 0 training steps" in chart(at, "trace_heatmap")["layout"]["title"]["text"]
    at.session_state["diagram_open"] = True
    notes = " | ".join(a["text"] for a in chart(at.run(), "model_diagram")["layout"]["annotations"] if a.get("text"))
    assert "causal self-attention" in notes and "cross-attention over the encoder" in notes
    assert not at.exception


def test_small_maps_label_at_most_twelve_tokens_a_side():
    from s2s.figures import heads_grid
    w = np.full((2, 4, 30, 40), 1 / 40)
    fig = heads_grid(w, [f"s{i}" for i in range(40)], [f"t{j}" for j in range(30)])
    bottom, left = fig.layout["xaxis5"], fig.layout["yaxis5"]          # layer 2, head 1
    assert len(bottom.tickvals) <= 12 and len(left.tickvals) <= 12 and bottom.tickangle == -90
    assert list(bottom.ticktext) == [f"s{i}" for i in bottom.tickvals]


def test_the_address_follows_model_view_tab_head_and_reference(transformer_zoo, monkeypatch):
    """The issue's walk: after Translate, switch to the Transformer, pieces, a head, the Heads
    tab and a typed reference: the address holds each (not only what Translate last sent), and
    the app opened at that address shows the same view."""
    monkeypatch.setenv("S2S_CHECKPOINTS", str(transformer_zoo))
    at = submit(translate_page(), text=TEXT)
    _widget(at, "model").set_value("en-fr-transformer").run()
    _widget(at, "view").set_value("pieces").run()
    _widget(at, "tf_head").set_value(1).run()
    at = open_tab(at, "Forced decoding")
    _widget(at, "reference").set_value("e d c b a")
    [b for b in at.button if b.label == "Score this translation"][0].click()
    at.run()
    at = open_tab(at, "Heads")
    assert not at.exception, at.exception
    q = {k: v if isinstance(v, str) else v[0] for k, v in at.query_params.items()}
    assert q["model"] == "en-fr-transformer" and q["view"] == "pieces" and q["tab"] == "Heads"
    assert q["text"] == TEXT and q["reference"] == "e d c b a" and q["head"] == "2" and q["layer"] == "2"
    fresh = translate_page(**q)
    assert not fresh.exception, fresh.exception
    for key, value in (("model", "en-fr-transformer"), ("view", "pieces"), ("tf_head", 1), ("tf_layer", 1),
                       ("text", TEXT)):
        assert _widget(fresh, key).value == value, key
    assert fresh.session_state["tab"] == "Heads" and fresh.session_state["reference"] == "e d c b a"
    assert chart(fresh, "heatmap") == chart(at, "heatmap") and chart(fresh, "heads_grid") == chart(at, "heads_grid")
