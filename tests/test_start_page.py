"""AppTest: the Start here page (the lecture's outline) and the query parameters its links
set, on tiny checkpoints made by the tests."""
import json
import shutil
from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT, five_translators
from test_app import chart

# The lecture's outline, in order: (topic, the page and tab each link opens); None: no page yet
OUTLINE = [
    ("Vanishing gradients and gates", [("gradients", "Live: untrained cells")]),
    ("The encoder-decoder", [("translate", "Step by step")]),
    ("Decoding: greedy, beam search, sampling", [("translate", "Beam tree"), ("translate", "Step by step")]),
    ("BLEU and perplexity", [("translate", "Forced decoding")]),
    ("The bottleneck", [("bottleneck", None)]),
    ("Attention and its scoring functions", [("translate", "Compare attention")]),
    ("Alignment and explanation", [("alignment", "Against human alignments"),
                                   ("alignment", "Attention vs attribution"),
                                   ("translate", "Step by step")]),       # the third, a foil's contrast
    ("Interpretable cells", [("cells", "Colored text"), ("cells", "Colored text")]),   # the second selects a span
    ("Self-attention and the Transformer", None),
    ("Are all heads needed?", None),
]
TAB_KEYS = {"translate": "tab", "gradients": "gradients_tab", "alignment": "alignment_tab", "cells": "cells_tab"}
LINKS = [(page, tab) for _, links in OUTLINE for page, tab in links or []]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, tiny_additive, tiny_none, untrained_translators, charlm_trio):
    """The five translation models' names and three character models."""
    root = tmp_path_factory.mktemp("start_zoo")
    five_translators(root, tiny_additive, tiny_none, untrained_translators)
    for cell, path in charlm_trio.items():
        shutil.copytree(path, root / f"charlm-tiny-{cell}")
    return root


@pytest.fixture
def env(zoo, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    return zoo


def start() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    assert not at.exception, at.exception
    return at


def links(at) -> list[tuple[str, str, dict]]:
    """(target page, label, query parameters) of every page link, in order."""
    return [(p.proto.page, p.proto.label, dict(parse_qsl(p.proto.query_string))) for p in at.get("page_link")]


def follow(page: str, query: dict) -> AppTest:
    """What a click on a page link does: the target page, run with the link's query string."""
    at = start()          # AppTest resolves a page through app.py's navigation only after a first run
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(f"pages/{page}.py")
    return at.run()


def test_the_app_opens_on_the_outline_in_the_lectures_order(env):
    at = start()
    assert at.title[0].value == "Start here"
    topics = [m.value for m in at.markdown if m.value.startswith("**")]
    assert len(topics) == len(OUTLINE)
    for n, (topic, (title, _)) in enumerate(zip(topics, OUTLINE), 1):
        assert topic.startswith(f"**{n}. {title}** · "), topic
        assert len(topic.split(" · ", 1)[1]) > 40            # one sentence on what to look at
    app = (ROOT / "app.py").read_text()
    assert app.index("pages/start.py") < min(app.index(f"pages/{p}.py") for p in TAB_KEYS)   # first in the navigation


def test_links_open_existing_pages_and_tabs_and_missing_pages_are_not_linked(env):
    at = start()
    got = links(at)
    assert [(page, q.get("tab")) for page, _, q in got] == LINKS
    app = (ROOT / "app.py").read_text()
    for page, label, query in got:
        assert (ROOT / "pages" / f"{page}.py").is_file() and f'"pages/{page}.py"' in app   # a registered page
        if query.get("tab"):
            assert label.endswith(f"› {query['tab']}")       # the label names the tab it opens
        if page == "translate":                              # an example set: text, model and decoding
            assert query["text"] and query["model"] == "en-fr-additive" and query["method"] in ("greedy", "beam")
    # the Transformer has no page yet: said so, and not linked
    assert not any("transformer" in page.lower() or "Transformer" in label for page, label, _ in got)
    assert any(c.value.startswith("coming: ") and "Transformer" in c.value for c in at.caption)


@pytest.mark.parametrize("page,tab", LINKS, ids=[f"{p}-{t}" for p, t in LINKS])
def test_each_link_opens_its_page_with_the_tab_and_example_set(env, page, tab):
    query = next(q for p, _, q in links(start()) if p == page and q.get("tab") == tab)
    at = follow(page, query)
    assert not at.exception, at.exception
    if tab is not None:
        assert at.session_state[TAB_KEYS[page]] == tab
    if page == "translate":
        assert at.title[0].value == "Translate & Align"
        assert at.text_area(key="text").value == query["text"]
        assert at.radio(key="method").value == query["method"]
        assert chart(at, "heatmap") is not None
        shows = {"Step by step": "step_attn", "Beam tree": "beam_tree", "Forced decoding": "forced_heatmap",
                 "Compare attention": "cmp_scaled-dot"}[tab]
        assert chart(at, shows) is not None, f"the {tab} tab did not draw"     # only the open tab runs
        if tab == "Beam tree":
            assert at.slider(key="beam").value == int(query["beam"]) and len(at.dataframe[0].value) == 3
        if tab == "Forced decoding":
            assert at.text_input(key="reference").value == query["reference"]
    elif page == "gradients":
        assert chart(at, "untrained") is not None
    elif page == "alignment":
        heading = {"Against human alignments": "Every model on the test set",
                   "Attention vs attribution": "Counterfactual attention at one step"}[tab]
        assert [s.value for s in at.subheader][0] == heading
    elif page == "cells":
        assert at.get("html"), "the colored text"
    elif page == "bottleneck":
        assert at.title[0].value.startswith("The bottleneck")


def test_a_link_is_read_on_arrival_only(env):
    """Later reruns keep what the user changed, though the link's parameters are still in the
    URL. (A second arrival on the same page with a new link is the browser test's: AppTest runs
    a switched-to page without app.py, which notes arrivals in a real session.)"""
    query = next(q for p, _, q in links(start()) if q.get("tab") == "Beam tree")
    at = follow("translate", query)
    at.session_state["tab"] = "Step by step"
    at.segmented_control(key="view").set_value("pieces")
    at.run()
    assert at.session_state["tab"] == "Step by step" and at.segmented_control(key="view").value == "pieces"
    assert at.radio(key="method").value == "beam"                 # from the link, still
    at.text_area(key="text").set_value("a b c")
    [b for b in at.button if b.label == "Translate"][0].click()
    at.run()
    assert at.session_state["tab"] == "Step by step" and at.text_area(key="text").value == "a b c"


def test_a_bad_tab_in_a_link_is_ignored(env):
    at = follow("gradients", {"tab": "no such tab"})
    assert not at.exception and at.session_state["gradients_tab"] == "Live: untrained cells"
    at = follow("translate", {"tab": "<b>Nope</b>", "text": "a b"})
    assert not at.exception and at.session_state["tab"] == "Step by step"
    note = [i.value for i in at.info if "Ignored the link's tab" in i.value]
    assert note and "`<b>Nope</b>`" in note[0]          # the link's text shown as code, never as markup


def test_with_a_transformer_the_last_topics_link_to_its_heads(zoo, tiny_transformer, tmp_path, monkeypatch):
    """The Transformer topic links to Translate › Heads on the Transformer found by its config
    (whatever its folder is called), and the link opens that view."""
    shutil.copytree(zoo, tmp_path / "zoo", symlinks=True)
    shutil.copytree(tiny_transformer, tmp_path / "zoo" / "my-attention-is-all-i-need")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path / "zoo"))
    at = start()
    assert not any(c.value.startswith("coming: ") for c in at.caption)
    page, label, query = links(at)[-2]
    assert (page, label) == ("translate", "Translate & Align › Heads")
    assert query["model"] == "my-attention-is-all-i-need" and query["tab"] == "Heads"
    at = follow("translate", query)
    assert not at.exception, at.exception
    assert at.session_state["tab"] == "Heads" and chart(at, "heads_grid") is not None
    # are all heads needed: the same Transformer's Heads tab with a head knocked out (ui.knockout)
    page, label, query = links(start())[-1]
    assert (page, label) == ("translate", "Translate & Align · knock heads out › Heads")
    assert query["model"] == "my-attention-is-all-i-need" and query["mask"] == "encoder:2.1"
    at = follow("translate", query)
    assert not at.exception, at.exception
    assert at.session_state["heads_mask"] == "encoder:2.1" and chart(at, "knockout_grid") is not None



def test_the_outline_has_the_browser_load_plotly_for_its_links(env, monkeypatch):
    """A hidden, empty Plotly chart ends the outline (ui.warm.preload_chart_scripts), drawn once the
    warm-up has imported plotly (never imported beside it); app.py's style hides it."""
    import threading

    from ui import warm
    monkeypatch.setattr(warm, "_warm_thread", threading.current_thread())     # a warm-up "running"
    imported = threading.Event()
    monkeypatch.setattr(warm, "_plotly_imported", imported)
    threading.Timer(0.5, imported.set).start()                             # plotly in, half a second on
    at = start()
    early = chart(at, "plotly_early")
    assert early is not None and early["layout"]["height"] == 10 and early["data"][0]["x"] == []
    assert [m.value for m in at.markdown if m.value.startswith("**")]      # the outline, drawn before it
    assert ".st-key-plotly_early{display:none}" in (ROOT / "app.py").read_text()


def test_the_outline_has_the_browser_load_vega_for_the_bottleneck_link(env):
    """ui.warm.preload_chart_scripts: a tiny Vega-Lite chart (one point) in a container that
    app.py's style puts off-screen with a width (a chart of no width is never drawn)."""
    at = start()
    (box,) = [b for b in at.get("flex_container") if getattr(b, "key", None) == "vega_early"]
    (vega,) = at.get("vega_lite_chart")                   # the outline has no other Altair chart
    spec = json.loads(vega.proto.spec)
    assert spec["mark"] == "point" and spec["width"] == 40
    assert len(box.children) == 1
    style = (ROOT / "app.py").read_text()
    rule = style[style.index(".st-key-vega_early{"):].split("}")[0]
    assert "left:-10000px" in rule and "width:80px" in rule and "display:none" not in rule


def test_the_bleu_example_teaches_bleu(monkeypatch):
    """The BLEU topic's reference is a human one that differs from the shipped model's output:
    p_1 ... p_4 all differ, none is 0 or 1, the shorter output pays a brevity penalty; and the
    log p bars beside the heatmap have its rows, in words as the page shows them."""
    if not (ROOT / "checkpoints" / "en-fr-additive" / "config.json").is_file():
        pytest.skip("needs the shipped en-fr-additive")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(ROOT / "checkpoints"))
    query = next(q for p, _, q in links(start()) if q.get("tab") == "Forced decoding")
    at = follow("translate", query)
    assert not at.exception, at.exception
    output = at.session_state["text"] and [m.value for m in at.markdown if "s2s-text" in m.value][0]
    assert query["reference"] not in output                         # the reference is not the model's own output
    bleu = [d.value for d in at.dataframe if "matching / in output" in d.value.columns][0]
    p = [float(x) for x in bleu["p_n"]]
    assert len(set(p)) == 4 and all(0 < x < 1 for x in p), p
    bp = float(next(m.value for m in at.markdown if "BP = min(1" in m.value).split("**")[1])
    assert bp < 1
    heat, bars = chart(at, "forced_heatmap"), chart(at, "forced_lp")
    assert list(bars["layout"]["yaxis"]["ticktext"]) == list(heat["layout"]["yaxis"]["ticktext"])   # the same words
    assert "▁" not in "".join(bars["layout"]["yaxis"]["ticktext"])
    for k in ("height",):
        assert bars["layout"][k] == heat["layout"][k]
    assert (bars["layout"]["margin"]["t"], bars["layout"]["margin"]["b"]) == (heat["layout"]["margin"]["t"],
                                                                              heat["layout"]["margin"]["b"])


def test_the_projector_switch_is_in_the_sidebar_and_the_address(env):
    """Projector: a sidebar switch (app.py) on every page, read from a link's projector=on and
    written back into the address; with it, every chart's labels are 18 px, without, 14."""
    at = start()
    switch = at.sidebar.toggle(key="projector")
    assert switch.label == "Projector" and switch.value is False
    switch.set_value(True).run()
    assert not at.exception and at.query_params.get("projector") in ("on", ["on"])      # the Start page's address
    query = next(q for p, _, q in links(at) if q.get("tab") == "Step by step")
    on = follow("translate", {**query, "projector": "on"})
    assert not on.exception, on.exception
    assert on.session_state["projector"] is True
    assert on.query_params.get("projector") in ("on", ["on"])                  # kept in the page's address
    for key in ("heatmap", "step_attn", "step_top"):
        lay = chart(on, key)["layout"]
        sizes = [lay[a]["tickfont"]["size"] for a in lay if a.startswith(("xaxis", "yaxis"))]
        assert sizes and min(sizes) >= 18, (key, sizes)
    off = follow("translate", query)
    assert off.session_state.get("projector", False) is False and "projector" not in off.query_params
    lay = chart(off, "heatmap")["layout"]
    assert lay["xaxis"]["tickfont"]["size"] == 14 and lay["xaxis"]["tickfont"]["color"] == "#2F2D2B"
    bad = follow("translate", {**query, "projector": "maybe"})       # neither on nor off: ignored
    assert not bad.exception and bad.session_state.get("projector", False) is False


@pytest.mark.skipif(not (ROOT / "checkpoints" / "en-fr-transformer" / "config.json").is_file(),
                    reason="the doc lists the links of the shipped models' outline")
def test_the_teaching_doc_gives_every_start_link_as_an_address_with_the_projector_on():
    """docs/teaching.md's table of the lecture as addresses is the Start page's own links
    (with projector=on), so a slide made from it opens what the Start page opens."""
    doc = (ROOT / "docs" / "teaching.md").read_text()
    at = start()
    for p in at.get("page_link"):
        q = p.proto.query_string
        address = f"/{p.proto.page}?" + (q + "&" if q else "") + "projector=on"
        assert f"`{address}`" in doc, (p.proto.label, address)
