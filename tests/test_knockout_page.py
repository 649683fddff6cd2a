"""AppTest: the Heads tab's knockout (issue #60, items 1, 2 and 4 on the page). A click mode that
knocks heads out; a whole layer, head h of every layer or every head of a kind; the translation
decoded again exactly as s2s.decode does with that head_mask, beside the model's own; the mask in
the address (mask=, as python -m s2s.translate --mask-heads writes it) and a link with it landing
on the same view; a malformed or out-of-range mask said in one line; the importance badges and
their legend; a recurrent model pointed to the counterfactual attention."""
import html
import re

import numpy as np
import pytest

from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, decode
from s2s.hooks import parse_head_mask
from test_app import ROOT, _widget, array, chart, open_tab, submit, texts, translate_page

TEXT = "a b c d e"
EXAMPLE = "She has a big black dog."
SHIPPED = ROOT / "checkpoints" / "en-fr-transformer"
SHIPPED_HEAD = "encoder:2.1"      # the Start link's: "Elle a un grand chien noir." -> "Elle a une grosse chien noire."
BANDS = 2                         # the matrix's shapes with nothing knocked out: its header row's and column's bands


@pytest.fixture(scope="module")
def zoo(transformer_zoo):
    return transformer_zoo


def heads_of(mask, counts):
    from ui.knockout import heads_of as expand
    return expand(mask, counts)


def knocked_translation(at) -> str:
    """The second output of the full comparison (ui.what_if.two_outputs), as text."""
    outputs = [m.value for m in at.markdown if "s2s-text" in m.value]
    return html.unescape(re.sub(r"<[^>]+>", "", outputs[-1])).strip()


def same_words(a: str, b: str) -> bool:
    return a.split() == b.split()


def query(at) -> dict:
    return {k: v if isinstance(v, str) else v[0] for k, v in at.query_params.items()}


def changing_mask(tr, text: str, masks, max_len: int = 120) -> tuple[str, object, object]:
    """The first mask of `masks` whose knockout changes the greedy translation of `text`."""
    plain = decode(tr, text, DecodeSettings("greedy", max_len=max_len))
    for mask in masks:
        d = decode(tr, text, DecodeSettings("greedy", max_len=max_len, head_mask=mask))
        if d.translation != plain.translation:
            return mask, plain, d
    pytest.fail(f"no mask of {masks} changes the translation of {text!r}")


@pytest.fixture
def heads_tab(zoo, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    at = submit(translate_page(model="en-fr-transformer"), text=TEXT, view="pieces")
    at = open_tab(at, "Heads")
    assert not at.exception, at.exception
    return at, load_translator(zoo / "en-fr-transformer")


def test_knocking_out_heads_decodes_again_as_s2s_does(heads_tab):
    at, tr = heads_tab
    assert chart(at, "heads_grid") is not None and chart(at, "knockout_grid") is None   # a click enlarges
    _widget(at, "heads_click").set_value("knock").run()
    assert not at.exception, at.exception
    grid = chart(at, "knockout_grid")
    assert grid is not None and len(grid["layout"]["shapes"]) == BANDS    # nothing knocked out, nothing marked
    assert chart(at, "knockout_map1") is None and "mask" not in query(at)     # masking nothing shows nothing extra
    L, H = 2, 4
    # a whole layer, then head h of every layer: the first that changes the output (a mask that
    # changes nothing could not fail)
    choices = [f"layer:{l}" for l in range(L)] + [f"head:{h}" for h in range(H)]
    written = {f"layer:{l}": f"cross:{l + 1}.*" for l in range(L)} | {
        f"head:{h}": ",".join(f"cross:{l + 1}.{h + 1}" for l in range(L)) for h in range(H)}
    mask, plain, knocked = changing_mask(tr, TEXT, [written[c] for c in choices])
    choice = choices[[written[c] for c in choices].index(mask)]
    _widget(at, "knock_many").set_value(choice).run()
    assert not at.exception, at.exception
    assert at.session_state["heads_mask"] == mask and query(at)["mask"] == mask
    assert same_words(knocked_translation(at), knocked.translation)
    assert f"log p = {knocked.log_prob:.2f}" in texts(at) and f"log p = {plain.log_prob:.2f}" in texts(at)
    assert chart(at, "knockout_map0") is not None and chart(at, "knockout_map1") is not None   # both heatmaps
    out = heads_of(parse_head_mask(mask), {"cross": (L, H)})
    assert len(chart(at, "knockout_grid")["layout"]["shapes"]) == BANDS + 2 * len(out)   # greyed and crossed: 2 each
    # every head of the kind, then Clear
    _widget(at, "knock_many").set_value("all").run()
    assert at.session_state["heads_mask"] == "cross:1.*,cross:2.*"
    every = decode(tr, TEXT, DecodeSettings("greedy", max_len=120, head_mask="cross:1.*,cross:2.*"))
    assert same_words(knocked_translation(at), every.translation)
    [b for b in at.button if b.key == "knockout_clear"][0].click()
    at.run()
    assert at.session_state["heads_mask"] == "" and "mask" not in query(at) and chart(at, "knockout_map1") is None


def test_a_click_on_a_small_map_toggles_its_head():
    """What a click does to the mask (the grid's on_select): in, out again; a full layer as KIND:L.*."""
    from ui.knockout import mask_text
    counts = {"cross": (2, 4), "encoder": (2, 4), "decoder": (2, 4)}
    heads = heads_of(parse_head_mask("encoder:2.*,cross:1.3"), counts)
    assert mask_text(heads, counts) == "cross:1.3,encoder:2.*"
    assert mask_text(heads ^ {("encoder", 1, 0)}, counts) == "cross:1.3,encoder:2.2,encoder:2.3,encoder:2.4"
    assert mask_text(heads ^ {("cross", 0, 2)}, counts) == "encoder:2.*"


def test_a_link_with_a_mask_lands_on_the_same_knockout(heads_tab, zoo):
    at, tr = heads_tab
    mask, _, knocked = changing_mask(tr, TEXT, [f"{k}:{l}.{h}" for k in ("cross", "encoder", "decoder")
                                                for l in (1, 2) for h in ("*", 1, 2, 3, 4)])
    fresh = translate_page(model="en-fr-transformer", text=TEXT, view="pieces", tab="Heads", mask=mask)
    assert not fresh.exception, fresh.exception
    assert fresh.session_state["heads_click"] == "knock" and query(fresh)["mask"] == mask
    assert same_words(knocked_translation(fresh), knocked.translation)
    assert not fresh.warning
    # a link without a mask: the grid enlarges again, whatever the session had
    again = translate_page(model="en-fr-transformer", text=TEXT, tab="Heads")
    assert again.session_state["heads_click"] == "enlarge" and chart(again, "heads_grid") is not None


@pytest.mark.parametrize("mask", ["cross:9.1", "cross:1.9", "bogus:1.1", "cross:1", "cross:0.1", "<b>x</b>"])
def test_a_bad_mask_in_the_address_is_one_line(zoo, monkeypatch, mask):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    at = translate_page(model="en-fr-transformer", text=TEXT, tab="Heads", mask=mask)
    assert not at.exception, at.exception
    assert len(at.warning) == 1 and "\n" not in at.warning[0].value and "No head is knocked out" in at.warning[0].value
    assert chart(at, "knockout_grid") is not None and chart(at, "knockout_map1") is None    # the page works
    assert re.sub(r"`[^`]*`", "", at.warning[0].value).count("<") == 0     # the mask shown as code, not markup


def test_a_recurrent_models_heads_tab_names_its_knockout(zoo, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    at = open_tab(submit(translate_page(model="en-fr-additive"), text=TEXT), "Heads")
    assert not at.exception, at.exception
    assert "counterfactual attention" in texts(at) and "one attention" in texts(at)
    assert chart(at, "knockout_grid") is None


@pytest.mark.skipif(not SHIPPED.is_dir(), reason="the shipped Transformer is not in checkpoints/")
def test_the_shipped_transformer_shows_its_importance_and_the_start_links_head(monkeypatch):
    """The Start link's view: the head whose knockout changes the example, each map's importance
    from results/head_importance.json (this model's), and the legend saying what it means."""
    import json
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    at = translate_page(timeout=300, model="en-fr-transformer", text=EXAMPLE, tab="Heads", heads="encoder",
                        mask=SHIPPED_HEAD)
    assert not at.exception, at.exception
    tr = load_translator(SHIPPED)
    plain = decode(tr, EXAMPLE, DecodeSettings("greedy", max_len=120))
    knocked = decode(tr, EXAMPLE, DecodeSettings("greedy", max_len=120, head_mask=SHIPPED_HEAD))
    assert knocked.translation != plain.translation
    assert same_words(knocked_translation(at), knocked.translation)
    result = json.loads((ROOT / "results" / "head_importance.json").read_text())
    assert result["model"] == "en-fr-transformer"
    grid = chart(at, "knockout_grid")
    norm = result["importance_normalised"]["encoder"]
    assert at.session_state["heads_metric"] == "importance"         # measured: the matrix's number first
    assert np.allclose(array(grid["data"][0]["z"]).astype(float), norm)
    assert [t for row in grid["data"][0]["text"] for t in row] == [f"{v:.2f}".replace("0.", ".", 1)
                                                                   for row in norm for v in row]
    assert "Michel et al." in texts(at) and "200 held-out pairs" in texts(at)
    assert len(grid["layout"]["shapes"]) == BANDS + 2       # encoder 2.1 greyed and crossed


def test_the_grids_marks_are_laid_out_with_it_not_added_after(monkeypatch):
    """A click's run builds the matrix with its crosses in its one figure call (head_matrix's
    knocked=): added one by one afterwards (add_shape, add_annotation, or update_layout with
    them), plotly validated the layout again, 30 ms of each click."""
    import plotly.graph_objects as go
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    added = []

    def counting(name):
        method = getattr(go.Figure, name)

        def call(self, *args, **kwargs):
            if "fits" in (self.layout.meta or {}) and (
                    name != "update_layout" or {"shapes", "annotations"} & set(kwargs)):
                added.append(name)
            return method(self, *args, **kwargs)
        monkeypatch.setattr(go.Figure, name, call)
    for name in ("add_shape", "add_annotation", "update_layout"):
        counting(name)
    at = translate_page(timeout=300, model="en-fr-transformer", text=EXAMPLE, tab="Heads", heads="encoder",
                        mask=SHIPPED_HEAD)
    assert not at.exception, at.exception
    grid = chart(at, "knockout_grid")
    assert len(grid["layout"]["shapes"]) == BANDS + 2
    assert sum(t != "" for row in grid["data"][0]["text"] for t in row) == 12
    assert added == []


def test_a_hub_models_heads_knock_out_and_its_importance_is_measured_on_demand(zoo, hub_models, tmp_path,
                                                                             monkeypatch):
    """A Hugging Face model (the tiny Marian, sharpened as tests/test_head_mask.py does so that one
    head matters): the same knockout through the one decode API; its importance not measured
    until the button, then the matrix's first number, from s2s.head_importance."""
    import shutil

    from test_head_mask import HUB_TEXT, sharpened
    folder = tmp_path / "marian"
    # the tokenizer's files copied, the sharpened weights written beside them: never saved over the
    # file they were read from (safetensors maps it; rewriting it under the live model corrupts both)
    shutil.copytree(hub_models["marian"], folder, ignore=shutil.ignore_patterns("*.safetensors"))
    sharpened(load_translator(hub_models["marian"], device="cpu"), 2).model.hf.save_pretrained(folder)
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setenv("S2S_HUB_MODELS", str(folder))
    tr = load_translator(folder)
    mask, plain, knocked = changing_mask(tr, HUB_TEXT, ["cross:2.2", "decoder:2.1", "encoder:2.4"], max_len=12)
    at = translate_page(model=str(folder), text=HUB_TEXT, view="pieces", maxlen="12", tab="Heads", mask=mask)
    assert not at.exception, at.exception
    assert same_words(knocked_translation(at), knocked.translation)
    assert "Importance not measured" in texts(at)
    assert not any("importance" in o for o in _widget(at, "heads_metric").options)
    import ui.jobs
    import ui.pruning
    [b for b in at.button if b.key == "knockout_measure"][0].click()
    at.run()
    assert not at.exception, at.exception
    assert ui.jobs.jobs().get(ui.pruning.importance_key(str(folder))).wait(300)     # it runs beside the page
    at.run()
    assert not at.exception, at.exception
    assert any("importance" in o for o in _widget(at, "heads_metric").options) and "Michel et al." in texts(at)
    _widget(at, "heads_metric").set_value("importance").run()
    assert not at.exception, at.exception
    assert array(chart(at, "knockout_grid")["data"][0]["z"]).shape == (2, 4)   # the kind shown
