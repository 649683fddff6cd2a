"""AppTest: Step by step's panel of each layer's guess (the logit lens, ui/lens_panel.py) on the
tiny Transformer, a recurrent model and a Hugging Face Marian: the last layer's likeliest piece is
the one decoded, every row and rank is s2s.lens's at that step, a watched piece's ranks are
s2s.lens.watched's, bad input gives one line, a recurrent decoder says it has one layer, and the
address keeps the step and the watched piece."""
from __future__ import annotations

import html
import re

import pytest

from conftest import ROOT
from s2s.checkpoint import load_translator
from s2s.contrast import foil_id
from s2s.decode import DecodeSettings, decode
from s2s.figures import layer_labels, layer_rank_figure
from s2s.lens import ONE_LAYER, lens, watched
from s2s.piece_words import word_spans
from test_app import _widget, array, chart, submit, texts, translate_page

TEXT = "a b c d e"


@pytest.fixture
def page(transformer_zoo, monkeypatch):
    """The Translate page on `model`, TEXT translated greedily in pieces, Step by step open."""
    monkeypatch.setenv("S2S_CHECKPOINTS", str(transformer_zoo))

    def open_on(model: str, **query):
        at = submit(translate_page(model=model, tab="Step by step", **query), text=TEXT, view="pieces")
        assert not at.exception, at.exception
        return at
    return open_on


def at_step(at, step: int):
    _widget(at, "step").set_value(step)
    at.run()
    assert not at.exception, at.exception
    return at


def table(at) -> list[list[str]]:
    """The panel's table of pieces: a row per layer, each cell's piece (marks and p dropped)."""
    cells = chart(at, "lens_top")["data"][0]["text"]
    return [[html.unescape(re.sub(r"</?[bi]>", "", c).split("<br>")[0]) for c in row] for row in cells]


def rank_lines(at) -> dict[str, list[int]]:
    """The rank chart's lines: piece -> its rank at each layer."""
    spec = chart(at, "lens_rank")
    return {html.unescape(t["name"]): [int(x) for x in array(t["x"])] for t in spec["data"]
            if t.get("mode") == "lines+markers+text"}


def test_the_last_layer_guesses_the_decoded_piece_and_every_rank_is_the_lens(page, transformer_zoo):
    tr = load_translator(transformer_zoo / "en-fr-transformer")
    d = decode(tr, TEXT, DecodeSettings("greedy", max_len=120))
    want = lens(tr, TEXT, target=d.target_ids)
    at = page("en-fr-transformer")
    L = len(want.layers)
    assert L > 1
    for j in range(min(len(d.target_tokens), 4)):
        at = at_step(at, j + 1)
        rows = table(at)
        assert len(rows) == L
        assert rows[-1][0] == d.target_tokens[j]                       # the last layer's top: the decoded piece
        assert "<b>" in chart(at, "lens_top")["data"][0]["text"][-1][0]   # marked as the chosen one
        for l in range(L):
            assert rows[l] == [p[:8] + "…" if len(p) > 9 else p for p, _ in want.top[l][j]]
        assert rank_lines(at) == {d.target_tokens[j]: [want.ranks[l][j] for l in range(L)]}
        assert f"rank {' → '.join(f'{want.ranks[l][j]:,}' for l in range(L))} by layer" in texts(at)


def test_a_watched_piece_is_drawn_beside_and_bad_input_is_one_line(page, transformer_zoo):
    tr = load_translator(transformer_zoo / "en-fr-transformer")
    d = decode(tr, TEXT, DecodeSettings("greedy", max_len=120))
    at = at_step(page("en-fr-transformer"), 2)
    box = _widget(at, "lens_watch")
    other = box.options[0]                                             # one of the step's top pieces
    assert other != d.target_tokens[1]
    box.set_value(other)
    at.run()
    assert not at.exception and not at.warning
    pairs = watched(tr, TEXT, d.target_ids, 1, foil_id(tr, other))
    assert rank_lines(at)[other] == [r for _, r in pairs]
    assert at.query_params["watch"] == other and at.query_params["step"] == "2"
    for bad, says in (("abcdefghij", "pieces"), (d.target_tokens[1], "is the piece chosen")):
        # typed: AppTest's box takes only listed options, so the value comes as a typed one is kept, in the address
        at = translate_page(model="en-fr-transformer", text=TEXT, view="pieces", tab="Step by step", step="2",
                            watch=bad)
        assert not at.exception, at.exception
        assert _widget(at, "lens_watch").value == bad
        assert len(at.warning) == 1 and says in at.warning[0].value, [w.value for w in at.warning]
        assert "\n" not in at.warning[0].value
        assert set(rank_lines(at)) == {d.target_tokens[1]}             # the chosen piece alone


def test_a_link_brings_the_step_and_the_watched_piece(page, transformer_zoo):
    tr = load_translator(transformer_zoo / "en-fr-transformer")
    d = decode(tr, TEXT, DecodeSettings("greedy", max_len=120))
    other = lens(tr, TEXT, target=d.target_ids).top[0][2][1][0]
    other = other if other != d.target_tokens[2] else lens(tr, TEXT, target=d.target_ids).top[0][2][0][0]
    at = translate_page(model="en-fr-transformer", text=TEXT, view="pieces", tab="Step by step", step="3",
                        watch=other, lens="on")
    assert not at.exception, at.exception
    assert _widget(at, "step").value == 3 and _widget(at, "lens_watch").value == other
    assert other in rank_lines(at)
    assert at.query_params["step"] == "3" and at.query_params["watch"] == other


def test_a_recurrent_model_says_its_decoder_is_one_layer(page, transformer_zoo):
    at = at_step(page("en-fr-additive"), 2)
    assert ONE_LAYER in texts(at)
    rows = table(at)
    assert len(rows) == 1
    d = decode(load_translator(transformer_zoo / "en-fr-additive"), TEXT, DecodeSettings("greedy", max_len=120))
    assert rows[0][0] == d.target_tokens[1]
    assert chart(at, "lens_rank") is None
    assert "of the decoder's one layer" in texts(at)


def test_a_hub_models_layers(transformer_zoo, hub_models, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(transformer_zoo))
    monkeypatch.setenv("S2S_HUB_MODELS", str(hub_models["marian"]))
    monkeypatch.delenv("S2S_ALLOW_ANY_MODEL", raising=False)
    tr = load_translator(hub_models["marian"])
    d = decode(tr, TEXT, DecodeSettings("greedy", max_len=12))
    want = lens(tr, TEXT, target=d.target_ids)
    at = translate_page(model=str(hub_models["marian"]), tab="Step by step")
    at = submit(at, text=TEXT, view="pieces", maxlen=12)
    assert not at.exception, at.exception
    rows = table(at)
    assert len(rows) == len(want.layers) == 2
    assert rows[-1][0] == d.target_tokens[0]
    assert rank_lines(at) == {d.target_tokens[0]: [want.ranks[l][0] for l in range(2)]}


def test_the_rank_figure_rings_the_layer_from_which_on_the_piece_stays_in_the_top():
    rows = layer_labels(3)
    assert rows == ["layer 1", "layer 2", "layer 3 (last)"] and layer_labels(1, one_layer=True) == ["decoder"]
    for ranks, ringed in (([9, 2, 1], 1), ([3, 9, 1], 2), ([1, 1, 1], 0), ([1, 2, 7], None)):
        fig = layer_rank_figure(rows, "▁a", ranks, [-1.0, -1.0, -1.0])
        ring = [t for t in fig.data if t.name == "enters the top 5"]
        assert (list(ring[0].y) if ring else None) == ([ringed] if ringed is not None else None), ranks


def test_the_start_links_step_flips_between_layers():
    """Start here's lens link (pages/start.py): en-fr-transformer, the girl sentence, word step 5
    (whole words, the page's default view), where layer 1's likeliest piece is not the one the
    last layer chooses (docs/app.md names them)."""
    path = ROOT / "checkpoints" / "en-fr-transformer"
    if not (path / "metrics.json").is_file():
        pytest.skip("the shipped Transformer is not in checkpoints/")
    tr = load_translator(path)
    text = "The little girl is happy because her mother is here."
    d = decode(tr, text, DecodeSettings("greedy", max_len=120))
    first = word_spans(d.target_tokens)[4][1][0]
    got = lens(tr, text, target=d.target_ids)
    assert got.top[-1][first][0][0] == d.target_tokens[first] == "▁heureux"
    assert got.top[0][first][0][0] == "▁est"


def test_watching_the_chosen_piece_gives_the_lens_own_row(transformer_zoo):
    """s2s.lens.watched of a step's own piece is that step's column of the lens (log p and rank at
    every layer); a step or piece out of range is one line."""
    from s2s.text import InputError
    tr = load_translator(transformer_zoo / "en-fr-transformer")
    d = decode(tr, TEXT, DecodeSettings("greedy", max_len=120))
    got = lens(tr, TEXT, target=d.target_ids)
    for j, piece in enumerate(d.target_ids[:3]):
        pairs = watched(tr, TEXT, d.target_ids, j, piece)
        assert [r for _, r in pairs] == [got.ranks[l][j] for l in range(len(got.layers))]
        assert [lp for lp, _ in pairs] == pytest.approx([got.log_probs[l][j] for l in range(len(got.layers))],
                                                        abs=1e-5)
    for step, piece in ((len(d.target_ids), d.target_ids[0]), (0, 10**7)):
        with pytest.raises(InputError):
            watched(tr, TEXT, d.target_ids, step, piece)
