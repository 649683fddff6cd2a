"""AppTest: the Translate page answers back (issue #55): steer a step (Step by step, Beam tree,
Forced decoding's "continue"), compare an edit, and the neighbours view, on tiny models
(the zoo's trained additive reversal model, a tiny Transformer, a tiny hub Marian)."""
import functools
import html
import re

import pytest

from s2s import neighbours as nb
from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, decode, forced
from test_app import _widget, chart, open_tab, submit, texts, translate_page
from ui.what_if import beam_prefixes


@pytest.fixture(scope="module")
def zoo(transformer_zoo):
    return transformer_zoo


@pytest.fixture
def app(zoo, monkeypatch, tmp_path):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setenv("S2S_NEIGHBOURS_DIR", str(tmp_path / "indexes"))
    return functools.partial(translate_page, 180)      # a run's time limit with a busy machine beside it


def steered_panel(at) -> list[str]:
    """The two outputs' lines (marked words) of a what-if panel, as HTML."""
    return [m.value for m in at.markdown if "font-size:1.15rem" in m.value]


def plain(line: str) -> str:
    """A marked line as its text: the tags dropped, the escapes read."""
    return html.unescape(re.sub(r"<[^>]+>", "", line))


def buttons(at, prefix: str):
    return [b for b in at.button if b.key and b.key.startswith(prefix)]


def test_a_link_with_a_prefix_shows_the_steered_output_beside_the_models_own(app, zoo):
    tr = load_translator(str(zoo / "en-fr-additive"))
    own = decode(tr, "a b c d", DecodeSettings())
    at = app(model="en-fr-additive", text="a b c d", steer="d c a", tab="Step by step")
    assert not at.exception
    assert "the output must start with “d c a”" in texts(at)
    first, second = steered_panel(at)
    assert ">d<" in second or "d " in second
    steered = decode(tr, "a b c d", DecodeSettings(target_prefix="d c a"))
    assert steered.translation.startswith("d c a")
    # the steered output is the one the tab walks, and its heatmap is drawn beside the model's own
    assert f"→  {steered.translation}" in texts(at)
    assert chart(at, "steer_map0") is not None and chart(at, "steer_map1") is not None
    # both maps on one scale, and the log p shown is the steered output's, which forced decoding confirms
    assert chart(at, "steer_map0")["data"][0]["zmax"] == chart(at, "steer_map1")["data"][0]["zmax"] == 1
    assert f"log p = {steered.log_prob:.2f}" in texts(at)
    assert abs(forced(tr, "a b c d", reference_ids=steered.target_ids).log_prob - steered.log_prob) < 1e-4
    assert plain(first) == own.translation and plain(second) == steered.translation
    assert at.query_params["steer"] in ("d c a", ["d c a"])


def test_clicking_a_next_token_steers_chains_and_undoes(app, zoo):
    tr = load_translator(str(zoo / "en-fr-additive"))
    at = app(model="en-fr-additive", text="a b c d", tab="Step by step")
    assert not at.exception and "the output must start with" not in texts(at)
    own = decode(tr, "a b c d", DecodeSettings())
    options = buttons(at, "steer_tok_")
    assert options, "the first step offers its next tokens"
    options[0].click()
    at.run()
    first = at.session_state["steer"]
    assert first and not own.translation.startswith(first)
    assert decode(tr, "a b c d", DecodeSettings(target_prefix=first)).translation in texts(at)
    # steer again at a later step of the steered output: the chain grows
    at.session_state["step"] = 2
    at.run()
    buttons(at, "steer_tok_")[0].click()
    at.run()
    second = at.session_state["steer"]
    assert second != first and at.query_params["steer"] in (second, [second])
    # Undo: back one steering, then to the model's own
    [b for b in at.button if b.key == "steer_undo"][0].click()
    at.run()
    assert at.session_state["steer"] == first
    [b for b in at.button if b.key == "steer_undo"][0].click()
    at.run()
    assert at.session_state["steer"] == "" and "steer" not in at.query_params


def test_typed_french_steers_and_bad_prefixes_say_why(app):
    at = app(model="en-fr-additive", text="a b c d", tab="Step by step")
    box = [t for t in at.text_input if t.key and t.key.startswith("steer_typed_")][0]
    box.set_value("c b")
    [b for b in at.button if b.label == "Steer"][0].click()
    at.run()
    assert not at.exception and at.session_state["steer"] == "c b"
    # a character the vocabulary lacks: named; a prefix past the max length: one line, no traceback
    at = app(model="en-fr-additive", text="a b c d", tab="Step by step", steer="d ☃ c")
    assert not at.exception and "not in this model's vocabulary" in texts(at) and "☃" in texts(at)
    at = app(model="en-fr-additive", text="a b c d", tab="Step by step", steer="d c b a d c b a", maxlen="3")
    assert not at.exception
    assert any("max length" in w.value for w in at.warning)


def test_a_prefix_is_shown_as_text_never_as_markup(app):
    at = app(model="en-fr-additive", text="a b c d", tab="Step by step", steer="**d** <b>c</b> [a](b)")
    assert not at.exception
    head = [m.value for m in at.markdown if "the output must start with" in m.value][0]
    # an HTML block: Markdown is not read inside it, and the prefix's HTML is escaped once
    assert head.startswith("<div>") and "“**d** &lt;b&gt;c&lt;/b&gt; [a](b)”" in head


def test_a_new_text_or_model_drops_the_steering(app):
    at = app(model="en-fr-additive", text="a b c d", steer="d c", tab="Step by step")
    assert at.session_state["steer"] == "d c"
    at = submit(at, text="a b")
    assert at.session_state["steer"] == "" and "the output must start with" not in texts(at)


def test_the_transformer_steers_too(app, zoo):
    tr = load_translator(str(zoo / "en-fr-transformer"))
    at = app(model="en-fr-transformer", text="a b c d", steer="d c", tab="Step by step")
    assert not at.exception
    assert decode(tr, "a b c d", DecodeSettings(target_prefix="d c")).translation in texts(at)
    assert chart(at, "steer_map1") is not None


def test_beam_search_steers_from_a_kept_hypothesis(app, zoo):
    tr = load_translator(str(zoo / "en-fr-additive"))
    at = app(model="en-fr-additive", text="a b c d", method="beam", beam="3", tab="Beam tree")
    assert not at.exception
    pick = at.selectbox(key="beam_steer_pick")
    beam = DecodeSettings("beam", width=3, n_best=3)
    kept = beam_prefixes(tr, decode(tr, "a b c d", beam))
    assert pick.options == list(kept.values()), "the beam's hypotheses are offered"
    at.session_state["beam_steer_pick"] = list(kept)[-1]
    at.run()
    [b for b in at.button if b.key == "beam_steer_go"][0].click()
    at.run()
    prefix = at.session_state["steer"]
    assert prefix
    assert prefix == list(kept)[-1]
    want = decode(tr, "a b c d", DecodeSettings("beam", width=3, n_best=3, target_prefix=prefix))
    assert want.translation.startswith(prefix) and want.translation in texts(at)
    assert "continues with beam search" in texts(at)


def test_forced_decoding_continues_a_partial_reference_without_a_search_error(app, zoo):
    tr = load_translator(str(zoo / "en-fr-dot"))      # untrained: a short reference outscores its own output
    at = open_tab(submit(app(model="en-fr-dot"), text="a b c"), "Forced decoding")
    _widget(at, "reference").set_value("a")
    [b for b in at.button if b.label == "Continue from this French"][0].click()
    at.run()
    assert not at.exception
    page = texts(at)
    assert "Search error" not in page and "continues your French" in page
    assert decode(tr, "a b c", DecodeSettings(target_prefix="a")).translation in page
    assert at.query_params["cont"] in ("1", ["1"])
    [b for b in at.button if b.label == "Score this translation"][0].click()
    at.run()
    assert "Search error" in texts(at)          # scored as finished, the same French is a search error


def test_compare_an_edit_marks_what_changed_and_holds_both_in_the_address(app, zoo):
    tr = load_translator(str(zoo / "en-fr-additive"))
    at = open_tab(app(model="en-fr-additive", text="a b c d"), "Compare an edit")
    assert not at.exception and at.text_input(key="edit").value == "a b c d"
    assert "Change a word" in texts(at)
    at.text_input(key="edit").set_value("a b e d")
    [b for b in at.button if b.label == "Compare"][0].click()
    at.run()
    assert not at.exception
    edited = decode(tr, "a b e d", DecodeSettings())
    page = texts(at)
    assert edited.translation.split()[0] in page
    # the source word that changed is marked, on the English and the French side
    english = [m.value for m in at.markdown if "font-size:1.0rem" in m.value]
    assert ">c</span>" in english[0] and ">e</span>" in english[1]
    assert chart(at, "edit_map0") is not None and chart(at, "edit_map1") is not None
    assert at.query_params["edit"] in ("a b e d", ["a b e d"])
    # a link with both reproduces it
    again = app(model="en-fr-additive", text="a b c d", edit="a b e d", tab="Compare an edit")
    assert not again.exception and chart(again, "edit_map1") is not None


def test_compare_an_edit_without_attention(app):
    at = app(model="en-fr-none", text="a b c d", edit="a b", tab="Compare an edit")
    assert not at.exception
    assert "no attention: only the two translations compare" in texts(at)
    assert chart(at, "edit_map0") is None and chart(at, "edit_lp1") is not None


def test_neighbours_offers_to_build_the_index_then_draws_it(app, monkeypatch, tmp_path):
    sample = tmp_path / "sample.tsv"
    sample.write_text("".join(f"{s}\t{' '.join(reversed(s.split()))}\n" for s in
                              ["a b c d", "b c d", "a b", "d c b a", "c a", "a b c d e", "e d", "b a c"]))
    monkeypatch.setattr(nb.build, "SAMPLE", sample)          # build_index's default corpus
    at = app(model="en-fr-additive", text="a b c d", tab="Neighbours")
    assert not at.exception
    assert "No neighbours index" in texts(at)
    [b for b in at.button if b.key == "nb_build"][0].click()
    at.run(timeout=120)
    assert not at.exception
    assert "Training sentences nearest to this one" in texts(at)
    # static tables, wrapping: a sentence is read whole, its [piece] in sight (issue #62)
    nearest = [d.value for d in at.table if "English" in d.value.columns][0]
    assert list(nearest["English"])[0] == "a b c d"           # a training sentence is its own nearest
    assert chart(at, "nb_map") is not None
    steps = [d.value for d in at.table if "trained to emit" in d.value.columns][0]
    assert len(steps) == 5 and all("[" in f and "]" in f for f in steps["in its French [the step]"])
    at.session_state["nb_step"] = 1
    at.run()
    assert not at.exception and "nearest to step 2" in texts(at)


def test_a_hub_model_steers_compares_and_says_who_builds_its_index(app, hub_models, monkeypatch):
    """A tiny Marian the operator lists: steered (its output starts with the prefix's pieces,
    scored as forced decoding scores it), compared, and its Neighbours tab names the command
    that builds its index from the operator's corpus (the page offers no build: the data is not ours)."""
    marian = str(hub_models["marian"])
    monkeypatch.setenv("S2S_HUB_MODELS", marian)
    tr = load_translator(marian)
    text = "the cat sat on the mat ."
    own = decode(tr, text, DecodeSettings(max_len=12))
    prefix = tr.tokenizer.decode(own.target_ids[:2])
    other = [i for i in range(len(tr.tokenizer)) if i not in (tr.tokenizer.eos_id, tr.tokenizer.pad_id,
                                                              own.target_ids[0])][5]
    prefix = tr.tokenizer.decode([other]) or prefix
    at = app(model=marian, text=text, maxlen="12", steer=prefix, tab="Step by step")
    assert not at.exception, at.exception
    steered = decode(tr, text, DecodeSettings(max_len=12, target_prefix=prefix))
    assert steered.prefix_length >= 1
    assert steered.target_ids[:steered.prefix_length] == tr.tokenizer.target_ids(prefix)[:steered.prefix_length]
    assert chart(at, "steer_map1") is not None and f"log p = {steered.log_prob:.2f}" in texts(at)
    at = app(model=marian, text=text, maxlen="12", edit="the cat sat on the sofa .", tab="Compare an edit")
    assert not at.exception and chart(at, "edit_map1") is not None
    at = app(model=marian, text=text, maxlen="12", tab="Neighbours")
    assert not at.exception
    assert texts(at).count("--corpus PAIRS.tsv") == 1 and not [b for b in at.button if b.key == "nb_build"]


def test_the_start_pages_teaching_example_holds_on_the_shipped_model():
    """Start here says what steering "un" to "une" does; the shipped model it links to does it."""
    import ui.models
    from conftest import ROOT
    path = ROOT / "checkpoints" / ui.models.DEFAULT_MODEL
    if not (path / "metrics.json").is_file():
        pytest.skip("the shipped models are not in checkpoints/")
    tr = load_translator(str(path))
    own = decode(tr, "She has a big black dog.", DecodeSettings())
    steered = decode(tr, "She has a big black dog.", DecodeSettings(target_prefix="Elle a une"))
    assert " un " in own.translation and "chien" in own.translation
    words = steered.translation.rstrip(".").split()
    assert words[:3] == ["Elle", "a", "une"] and "grande" in words and "noire" in words and "chien" in words
    assert "Steer “une” for “un”: the adjectives turn feminine (“grande … noire”)" in \
        (ROOT / "pages" / "start.py").read_text(encoding="utf-8").replace('"\n          "', "")


# ------------------------------------------------------------------ issue #62: steering by id, the address, cuts
@pytest.fixture(scope="module")
def unused_marian(tmp_path_factory):
    """A tiny Marian whose likeliest next pieces are its <unused…> ones, which write no text."""
    import hub_models
    return str(hub_models.marian(tmp_path_factory.mktemp("unused") / "marian", vocab_size=120, prefer_unused=50.0))


def test_pieces_that_are_not_text_steer_by_id_and_a_link_keeps_them(app, unused_marian, monkeypatch):
    """Issue #62, 9: the model's likeliest next pieces are <unused…>: offered as buttons that steer
    by their ids (steer_ids= in the address), said so; the box is not prefilled with text that
    would read back as <unk>; a link with the ids reproduces the steered view."""
    monkeypatch.setenv("S2S_HUB_MODELS", unused_marian)
    tr = load_translator(unused_marian)
    text = "the cat sat on the mat ."
    own = decode(tr, text, DecodeSettings(max_len=8))
    assert own.step_top[1][0][0].startswith("<unused")       # the rig holds
    at = app(model=unused_marian, text=text, maxlen="8", tab="Step by step")
    assert not at.exception, at.exception
    at.session_state["step"] = 2
    at.run()
    options = buttons(at, "steer_tok_1_")
    assert options and all("unused" in b.label for b in options)
    assert "not text that this tokenizer reads back as themselves: steered by the piece ids" in texts(at)
    box = [t for t in at.text_input if t.key and t.key.startswith("steer_typed_")][0]
    assert box.value == "" and "the box starts empty" in texts(at)
    piece = options[0].key.removeprefix("steer_tok_1_")
    options[0].click()
    at.run()
    assert not at.exception
    ids = (own.target_ids[0], tr.tokenizer.piece_id(piece))
    assert at.session_state["steer"] == ids
    assert at.query_params["steer_ids"] in (f"{ids[0]},{ids[1]}", [f"{ids[0]},{ids[1]}"])
    assert "steer" not in at.query_params
    steered = decode(tr, text, DecodeSettings(max_len=8, target_prefix=ids))
    assert steered.target_ids[:2] == list(ids) and f"log p = {steered.log_prob:.2f}" in texts(at)
    assert "(its pieces, by id)" in texts(at) and chart(at, "steer_map1") is not None
    # the steered output's pieces are shown as themselves, not dropped
    assert piece in plain(steered_panel(at)[1])
    # a link with the ids reproduces it; a malformed one is ignored in one line
    again = app(model=unused_marian, text=text, maxlen="8", tab="Step by step", steer_ids=f"{ids[0]},{ids[1]}")
    assert not again.exception and again.session_state["steer"] == ids
    assert f"log p = {steered.log_prob:.2f}" in texts(again)
    bad = app(model=unused_marian, text=text, maxlen="8", tab="Step by step", steer_ids="1,x")
    assert not bad.exception and any("Ignored the link's steer_ids" in i.value for i in bad.info)
    assert "the output must start with" not in texts(bad)
    # an id past the model's rows: one line, no traceback
    far = app(model=unused_marian, text=text, maxlen="8", tab="Step by step", steer_ids="99999")
    assert not far.exception and any("not in this model's vocabulary" in w.value for w in far.warning)


def test_the_beam_offers_hypotheses_of_pieces_that_are_not_text_by_id(app, unused_marian, monkeypatch):
    monkeypatch.setenv("S2S_HUB_MODELS", unused_marian)
    tr = load_translator(unused_marian)
    text = "the cat sat on the mat ."
    kept = beam_prefixes(tr, decode(tr, text, DecodeSettings("beam", width=3, n_best=3, max_len=6)))
    assert kept and all(isinstance(p, tuple) for p in kept)
    assert all(decode(tr, text, DecodeSettings("beam", width=3, max_len=6, target_prefix=p)).target_ids[:len(p)]
               == list(p) for p in list(kept)[:3])


def test_an_edit_or_a_steering_leaves_the_address_with_a_new_text_or_model(app):
    """Issue #62, 10: edit= (and steer=) belong to one text and one model."""
    at = app(model="en-fr-additive", text="a b c d", edit="a b e d", tab="Compare an edit")
    assert at.query_params["edit"] in ("a b e d", ["a b e d"])
    at = submit(at, text="a b")
    assert not at.exception and "edit" not in at.query_params
    assert at.text_input(key="edit").value == "a b"          # the box starts from the new text
    at = app(model="en-fr-additive", text="a b c d", edit="a b e d", steer="d c", tab="Compare an edit")
    at.session_state["model"] = "en-fr-dot"
    at.run()
    assert not at.exception and "edit" not in at.query_params and "steer" not in at.query_params


def test_the_neuron_views_query_reaches_the_address_on_its_first_run(app):
    """Issue #62's leftover: heads_query was written one run late (set as the view drew). The
    view is drawn after the first screen (ui/neuron_view.py): the run that draws it writes it."""
    at = app(model="en-fr-transformer", text="a b c d", tab="Heads")
    assert not at.exception and "Drawn in a moment" in texts(at) and chart(at, "neuron_view") is None
    at.button(key="neuron_later").click().run()         # what the browser does once the grid is drawn
    assert not at.exception and chart(at, "neuron_view") is not None
    query = at.session_state["heads_query"]
    assert query is not None and at.query_params["heads_query"] in (str(query + 1), [str(query + 1)])
    # drawn at once from then on: another layer, no placeholder
    at.selectbox(key="heads_layer").set_value(0).run()
    assert chart(at, "neuron_view") is not None and "Drawn in a moment" not in texts(at)


def test_a_marian_output_cut_at_its_maximum_length_is_marked(app, tmp_path, monkeypatch):
    """Issue #62's leftover: a Marian's </s> is forced at the length limit, so a cut output ended
    in </s> and was not marked. Here 16 positions: 15 pieces at most, the last a forced </s>."""
    import hub_models
    short = str(hub_models.marian(tmp_path / "short", sizes={**hub_models.SIZES, "max_position_embeddings": 16}))
    monkeypatch.setenv("S2S_HUB_MODELS", short)
    tr = load_translator(short)
    d = decode(tr, "hello world !", DecodeSettings(max_len=120))
    assert len(d.target_tokens) == 15 and d.target_tokens[-1] == "</s>" and d.step_top[-1][0][0] != "</s>"
    at = app(model=short, text="hello world !")
    assert not at.exception
    assert "cut at 15 pieces, the model's maximum length (its 16 positions), its </s> forced there" in texts(at)
    # the page's own max length: named as that
    at = app(model=short, text="hello world !", maxlen="5")
    assert "cut at 5 pieces, the max length, its </s> forced there" in texts(at)
    # an output that ends by itself is not marked
    at = app(model="en-fr-additive", text="a b c d")
    assert "cut at" not in texts(at) and "stopped at the max length" not in texts(at)


def test_a_decoding_shows_a_spinner(app, monkeypatch):
    """Issue #62's leftover: the main column stood empty while a hub model decoded. The decoding
    runs inside a spinner (Streamlit shows it after 0.5 s, so a cache hit does not flash)."""
    import streamlit as st
    said = []
    real = st.spinner

    def spinner(text="", *a, **k):
        said.append(text)
        return real(text, *a, **k)
    monkeypatch.setattr(st, "spinner", spinner)
    at = app(model="en-fr-additive", text="a b c d", steer="d c", tab="Step by step")
    assert not at.exception
    assert "Translating with en-fr-additive…" in said and "Continuing from the prefix…" in said
