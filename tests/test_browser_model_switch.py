"""Issue #54: the model switched in the sidebar, every way between a recurrent model, the
Transformer and a Hugging Face model of opus-mt-en-fr's shape (6 layers x 8 heads), then every
tab opened, on Translate & Align and on Alignment & Explanation: no exception, in a real Chromium.

A select box's value travels as its label. When the next model's options label the same value
otherwise ("3 (last)" of the Transformer's 3 layers is "3" of the hub model's 6), the browser
kept the old label and sent it back with its next click; Streamlit, finding no such option,
handed the page the label itself, a str, where it read a layer number. AppTest keeps its
widgets' values as values, so only a browser shows it; from the Transformer to a 2-layer hub
model it did not show either (the last layer, out of that model's range, was reset, and a
reset reaches the browser). The AppTest below holds the other half: a str, or a number out of
this model's range, where the page reads one of these choices, is replaced before it is read."""
from __future__ import annotations

import re
import shutil

import pytest

from browser import (
    ROOT,
    browser,
    exceptions,
    need_chromium_and_shipped_checkpoints,
    settle,
    streamlit_server,
    watched_page,
)
from test_app import _widget, translate_page

HUB = "opus-mt-en-fr"
# every ordered pair of the three models once, as one walk (an Euler circuit of the three):
# transformer -> hub -> recurrent -> transformer -> recurrent -> hub -> transformer
WALK = ["en-fr-transformer", HUB, "en-fr-additive", "en-fr-transformer", "en-fr-additive", HUB, "en-fr-transformer"]
TRANSLATE_TABS = ["Step by step", "Beam tree", "Forced decoding", "Compare attention", "Alignment lines", "Heads",
                  "Attention emerges", "Compare an edit", "Neighbours"]
ALIGNMENT_TABS = ["Against human alignments", "Attention vs attribution", "Your corpus"]
# the link; a short max length: the hub model's random weights never write </s>
TRANSLATE = "/translate?model=en-fr-transformer&text=The+cat+sleeps+on+the+sofa.&maxlen=16"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """One server offering the opus-mt-shaped model (S2S_HUB_MODELS), one page at 1280 x 720."""
    need_chromium_and_shipped_checkpoints()
    if not (ROOT / "checkpoints" / "en-fr-transformer" / "metrics.json").is_file():
        pytest.skip("the shipped Transformer is not in checkpoints/")
    from hub_models import OPUS_MT_EN_FR, OPUS_MT_EN_FR_VOCAB, marian
    hub = marian(tmp_path_factory.mktemp("hub") / HUB, OPUS_MT_EN_FR, OPUS_MT_EN_FR_VOCAB)
    with streamlit_server({"S2S_HUB_MODELS": str(hub)}) as url, browser() as b:
        p = watched_page(b, 1280, 720)
        p.app_url = url
        yield p


# The address, once it holds `want` (a model named by its name or, a hub model, by a path ending
# in it), or an exception shown: both pages write the address as their run goes on. (Not the
# script state: a quick run can go from running and back within one frame, leaving no trace.)
ADDRESS_HOLDS = """want => document.querySelector('[data-testid="stException"]')
  || Object.entries(want).every(([k, v]) => { const q = new URLSearchParams(location.search).get(k) || '';
                                              return q === v || q.endsWith('/' + v); })"""


def act_and_settle(page, act, want: dict[str, str], where: str) -> None:
    """`act` (a click that reruns the page), then its run seen (the address holds `want`), over
    and drawn (`settle`), then no exception shown."""
    act()
    try:
        page.wait_for_function(ADDRESS_HOLDS, arg=want, timeout=180_000, polling=100)
        settle(page)
    except Exception as e:
        raise AssertionError(f"{where}: the page did not settle, at {page.url}") from e
    shown = exceptions(page)
    assert not shown, f"{where}: " + shown[0][:600]


def switch_model(page, label: str, name: str) -> None:
    """The sidebar's model box (labelled `label`), opened and set to `name` as a user does."""
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text=label) \
        .locator("input").click()
    # its label: the name, then perhaps "(BLEU 43.6)" or "(Hugging Face)"
    page.get_by_role("option", name=re.compile("^" + re.escape(name) + r"(\s|$)")).click()


def walk(page, path: str, label: str, tabs: list[str]) -> None:
    page.goto(page.app_url + path)
    settle(page)
    assert not exceptions(page), exceptions(page)[0][:600]
    for before, after in zip(WALK, WALK[1:]):
        where = f"{path.split('?')[0]}, {before} -> {after}"
        act_and_settle(page, lambda: switch_model(page, label, after), {"model": after}, where)
        for tab in tabs:
            button = page.get_by_role("tab", name=tab, exact=True)
            if button.get_attribute("aria-selected") != "true":      # a click on the open tab runs nothing
                act_and_settle(page, button.click, {"model": after, "tab": tab}, f"{where}, then the tab {tab}")


def test_every_model_switch_then_every_tab_on_translate(page):
    walk(page, TRANSLATE, "Translation model", TRANSLATE_TABS)


def test_every_model_switch_then_every_tab_on_alignment(page):
    walk(page, "/alignment?model=en-fr-transformer", "Attention model", ALIGNMENT_TABS)


# ------------------------------------------------------------------ the same checks, in AppTest
@pytest.fixture(scope="module")
def two_models(tmp_path_factory, untrained_translators):
    """A recurrent model and a Transformer (2 + 2 layers, 4 heads) under the shipped names."""
    root = tmp_path_factory.mktemp("switch_zoo")
    shutil.copytree(untrained_translators["additive"].path, root / "en-fr-additive")
    shutil.copytree(untrained_translators["transformer"].path, root / "en-fr-transformer")
    return root


def address(at) -> dict[str, str]:
    return {k: v if isinstance(v, str) else v[0] for k, v in at.query_params.items()}


def test_another_models_choice_is_checked_before_it_is_read(two_models, monkeypatch):
    """What Streamlit hands the page from a browser holding another model's labels (a str), and
    numbers past this model's range, are made this model's before the address or a widget
    reads them; a recurrent model has no layer, head or kind of heads, and drops them. (Put in
    while the recurrent model is shown: AppTest formats the value of a widget it has drawn, and
    cannot format these.)"""
    monkeypatch.setenv("S2S_CHECKPOINTS", str(two_models))
    at = translate_page(model="en-fr-additive", text="a b c", maxlen="8", tab="Heads")
    for key, stale in (("tf_layer", "3 (last)"), ("tf_head", "mean of 8"), ("heads_kind", "cross-attention"),
                       ("heads_layer", "6"), ("heads_head", "8"), ("heads_view", "norm")):
        at.session_state[key] = stale
    _widget(at, "model").set_value("en-fr-transformer").run()
    assert not at.exception, at.exception
    assert (_widget(at, "tf_layer").value, _widget(at, "tf_head").value) == (1, None)      # the last layer's mean
    assert (_widget(at, "heads_kind").value, _widget(at, "heads_layer").value, _widget(at, "heads_head").value) \
        == ("cross", 1, 0)
    assert _widget(at, "heads_view").value == "norm"            # one of this model's views: kept
    assert address(at)["layer"] == "2" and address(at)["head"] == "mean" and address(at)["heads_layer"] == "2"
    _widget(at, "model").set_value("en-fr-additive").run()
    assert not at.exception, at.exception
    assert not {"layer", "head", "heads", "heads_layer", "heads_head", "heads_view"} & set(address(at))
    for key, past in (("tf_layer", 5), ("tf_head", 4), ("heads_kind", "encoder"), ("heads_layer", 2),
                      ("heads_head", 7)):
        at.session_state[key] = past                             # a 6-layer, 8-head model's choices
    _widget(at, "model").set_value("en-fr-transformer").run()
    assert not at.exception, at.exception
    assert (_widget(at, "tf_layer").value, _widget(at, "tf_head").value) == (1, None)
    assert (_widget(at, "heads_kind").value, _widget(at, "heads_layer").value, _widget(at, "heads_head").value) \
        == ("encoder", 1, 0)
