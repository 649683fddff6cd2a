"""AppTest: why this word and not that one (issue #61 item 2) in Step by step and Forced decoding
(ui/contrast_panel.py): the bars are s2s.contrast's scores for the step and foil shown, beside
the plain attribution of that step and its attention; the line names the largest pushes each way;
a bad foil is one line; the step cannot leave the output; the address keeps the foil. On the
tiny zoo (a trained additive reversal model, a tiny Transformer) and a tiny hub Marian."""
import numpy as np
import pytest

from s2s.checkpoint import load_translator
from s2s.contrast import explain_contrast, foil_id, step_attribution
from s2s.decode import DecodeSettings, decode, forced
from s2s.text import InputError
from test_app import array, chart, texts
from ui.contrast_panel import pushes_line

TEXT = "a b c d"


def bars(at) -> list[np.ndarray]:
    """The panel's bars: [attention,] plain, contrast."""
    fig = chart(at, "contrast_bars")
    assert fig is not None, texts(at)[-600:]
    return [array(t["x"]).astype(float) for t in fig["data"]]


def other_piece(d, j: int) -> str:
    return next(tok for tok, _ in d.step_top[j] if tok != d.target_tokens[j])


def test_the_bars_are_the_contrast_of_the_step_beside_its_plain_attribution_and_attention(zoo_page, transformer_zoo):
    tr = load_translator(str(transformer_zoo / "en-fr-additive"))
    d = decode(tr, TEXT, DecodeSettings())
    j = 1
    foil = other_piece(d, j)
    at = zoo_page(model="en-fr-additive", text=TEXT, tab="Step by step", view="pieces", step=str(j + 1), foil=foil)
    assert not at.exception, at.exception
    c = explain_contrast(tr, TEXT, j + 1, foil, target=d.target_ids)
    plain, _ = step_attribution(tr, TEXT, j + 1, target=d.target_ids)
    attention, shown_plain, shown = bars(at)
    assert np.allclose(shown, c.scores, atol=1e-6) and np.abs(c.scores).max() > 1e-4
    assert np.allclose(shown_plain, plain, atol=1e-6)
    assert np.allclose(attention, d.attention[j], atol=1e-6)
    # the line: the two log p, and the largest pushes each way, from the bars shown
    line = next(m.value for m in at.markdown if "Pushing toward" in m.value)
    assert f"**{c.log_prob_target:.2f}**" in line and f"**{c.log_prob_foil:.2f}**" in line
    assert line.endswith(pushes_line(c.source_tokens, shown, c.target, c.foil))
    top, bottom = int(np.argmax(shown)), int(np.argmin(shown))
    toward, away = line.split("Pushing toward", 1)[1].split(". Toward")
    if shown[top] > 0:
        assert toward.split(": ", 1)[1].startswith(f"`{c.source_tokens[top]}` ({shown[top]:+.2f})")
    if shown[bottom] < 0:
        assert away.split(": ", 1)[1].startswith(f"`{c.source_tokens[bottom]}` ({shown[bottom]:+.2f})")
    # the address keeps the foil (and the step, the page's own)
    assert at.query_params["foil"] == foil and at.query_params["step"] == str(j + 1)


def test_pushes_line_names_the_largest_each_way():
    line = pushes_line(["a", "b", "c", "d", "e"], np.array([0.5, -2.0, 3.0, -0.1, 0.0]), "x", "y", most=2)
    assert line == "Pushing toward `x`: `c` (+3.00), `a` (+0.50). Toward `y`: `b` (-2.00), `d` (-0.10)."
    assert pushes_line(["a"], np.array([1.0]), "x", "y").endswith("Toward `y`: none.")


def test_a_closed_panel_computes_nothing_and_opens_on_the_runner_up(zoo_page, transformer_zoo):
    tr = load_translator(str(transformer_zoo / "en-fr-additive"))
    d = decode(tr, TEXT, DecodeSettings())
    at = zoo_page(model="en-fr-additive", text=TEXT, tab="Step by step", view="pieces")
    assert not at.exception and chart(at, "contrast_bars") is None and "foil" not in at.query_params
    at.session_state["contrast_open"] = True
    at.run()
    assert not at.exception
    assert at.selectbox(key="foil").value == other_piece(d, 0)       # the step's runner-up first
    c = explain_contrast(tr, TEXT, 1, other_piece(d, 0), target=d.target_ids)
    assert np.allclose(bars(at)[-1], c.scores, atol=1e-6)
    at.slider(key="step").set_value(2).run()          # not picked: the next step's runner-up
    assert at.selectbox(key="foil").value == other_piece(d, 1)


def test_the_transformer_by_leave_one_out_from_a_link(zoo_page, transformer_zoo):
    tr = load_translator(str(transformer_zoo / "en-fr-transformer"))
    d = decode(tr, TEXT, DecodeSettings())
    foil = other_piece(d, 2)
    at = zoo_page(model="en-fr-transformer", text=TEXT, tab="Step by step", view="pieces", step="3", foil=foil,
             foil_method="loo")
    assert not at.exception, at.exception
    c = explain_contrast(tr, TEXT, 3, foil, method="loo", target=d.target_ids)
    attention, plain, shown = bars(at)
    assert np.allclose(shown, c.scores, atol=1e-6)
    assert np.allclose(plain, step_attribution(tr, TEXT, 3, method="loo", target=d.target_ids)[0], atol=1e-6)
    assert np.allclose(attention, d.attention[2], atol=1e-6)
    assert at.query_params["foil_method"] == "loo"


def test_bad_foils_say_one_line_each(zoo_page, transformer_zoo):
    tr = load_translator(str(transformer_zoo / "en-fr-additive"))
    d = decode(tr, TEXT, DecodeSettings())
    several = next(w for w in ("abcdabcd", "dcbadcba", "bdbdbdbd") if len(tr.tokenizer.encode(w)) > 1)
    said = {}
    for foil in (several, "Ω"):       # several pieces; a character the vocabulary lacks
        with pytest.raises(InputError) as e:
            foil_id(tr, foil)
        said[foil] = str(e.value)
    assert "pieces" in said[several] and "not a piece" in said["Ω"]
    said[d.target_tokens[0]] = "is the piece chosen at step 1: pick another."
    for foil, line in said.items():
        at = zoo_page(model="en-fr-additive", text=TEXT, tab="Step by step", view="pieces", step="1", foil=foil)
        assert not at.exception, at.exception
        lines = [i.value for i in at.info if "foil" in i.value.lower()]
        assert len(lines) == 1 and lines[0].endswith(line) and "\n" not in lines[0], lines
        assert chart(at, "contrast_bars") is None


def test_forced_decoding_offers_only_the_references_steps(zoo_page, transformer_zoo):
    """Forced decoding: the panel's own step select, over the reference's pieces; a link's step
    beyond them is brought back to the last (an out-of-range step cannot happen), its bars those
    of the reference forced."""
    tr = load_translator(str(transformer_zoo / "en-fr-additive"))
    ref = "d c b a"
    f = forced(tr, TEXT, ref)
    n = len(f.target_tokens)
    last = n - 1
    foil = next(tok for tok, _ in f.step_top[last] if tok not in (f.target_tokens[0], f.target_tokens[last]))
    at = zoo_page(model="en-fr-additive", text=TEXT, tab="Forced decoding", reference=ref, step="99", foil=foil)
    assert not at.exception, at.exception
    box = at.selectbox(key="foil_step")
    assert box.value == n and list(box.options) == [f"{k} · {f.target_tokens[k - 1]}" for k in range(1, n + 1)]
    c = explain_contrast(tr, TEXT, n, foil, ref)
    assert np.allclose(bars(at)[-1], c.scores, atol=1e-6)
    box.set_value(1).run()
    assert not at.exception and at.query_params["step"] == "1"
    assert np.allclose(bars(at)[-1], explain_contrast(tr, TEXT, 1, foil, ref).scores, atol=1e-6)


def test_step_by_step_never_leaves_the_output(zoo_page, transformer_zoo):
    tr = load_translator(str(transformer_zoo / "en-fr-additive"))
    d = decode(tr, TEXT, DecodeSettings())
    n = len(d.target_tokens)
    foil = other_piece(d, n - 1)
    at = zoo_page(model="en-fr-additive", text=TEXT, tab="Step by step", view="pieces", step="99", foil=foil)
    assert not at.exception, at.exception
    assert at.slider(key="step").value == n
    assert np.allclose(bars(at)[-1], explain_contrast(tr, TEXT, n, foil, target=d.target_ids).scores, atol=1e-6)


def test_a_hub_model_and_a_model_without_attention(zoo_page, transformer_zoo, hub_models, monkeypatch):
    marian = str(hub_models["marian"])
    monkeypatch.setenv("S2S_HUB_MODELS", marian)
    tr = load_translator(marian)
    text = "the cat sat on the mat ."
    d = decode(tr, text, DecodeSettings(max_len=12))
    foil = other_piece(d, 1)
    at = zoo_page(model=marian, text=text, maxlen="12", tab="Step by step", view="pieces", step="2", foil=foil)
    assert not at.exception, at.exception
    assert np.allclose(bars(at)[-1], explain_contrast(tr, text, 2, foil, target=d.target_ids).scores, atol=1e-5)
    none = load_translator(str(transformer_zoo / "en-fr-none"))
    d = decode(none, TEXT, DecodeSettings())
    at = zoo_page(model="en-fr-none", text=TEXT, tab="Step by step", view="pieces", step="1", foil=other_piece(d, 0))
    assert not at.exception, at.exception
    assert len(bars(at)) == 2        # no attention: the plain and contrastive bars only


def test_the_start_links_example_holds_on_the_shipped_model():
    """Start here's foil: en-fr-additive writes "La petite fille" for "The little girl", and of the
    source pieces "girl" pushes most toward "La" against "Le"."""
    from conftest import ROOT
    if not (ROOT / "checkpoints" / "en-fr-additive").exists():
        pytest.skip("the shipped checkpoints are not here")
    tr = load_translator(str(ROOT / "checkpoints" / "en-fr-additive"))
    c = explain_contrast(tr, "The little girl is happy because her mother is here.", 1, "▁Le")
    assert c.target == "▁La" and c.log_prob_target > c.log_prob_foil
    assert c.source_tokens[int(np.argmax(c.scores))] == "▁girl"


def test_the_word_view_explains_the_piece_of_the_word_picked(monkeypatch):
    """Issue #69 item 5: in the word view the reader picks which piece of the word is explained.
    en-fr-additive writes "Il pense qu'elle est ici." (▁qu ' elle: step 3 of the words, pieces 3-5);
    its first piece sets ▁qu against ▁que, its third elle against il, the address keeping the piece."""
    from conftest import ROOT
    from test_app import translate_page
    if not (ROOT / "checkpoints" / "en-fr-additive").exists():
        pytest.skip("the shipped checkpoints are not here")
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    tr = load_translator(str(ROOT / "checkpoints" / "en-fr-additive"))
    text = "He thinks that she is here."
    d = decode(tr, text, DecodeSettings())
    assert d.target_tokens[2:5] == ["▁qu", "'", "elle"]
    at = translate_page(180, model="en-fr-additive", text=text, tab="Step by step", view="words", step="3")
    assert not at.exception, at.exception
    at.session_state["contrast_open"] = True
    at.run()
    assert not at.exception, at.exception

    def line() -> str:
        return next(m.value for m in at.markdown if "Pushing toward" in m.value)
    box = at.selectbox(key="foil_piece")
    assert list(box.options) == ["1 · ▁qu", "2 · '", "3 · elle"] and box.value == 1     # the first by default
    assert at.selectbox(key="foil").value == "▁que"          # the first piece's runner-up
    assert line().startswith("Explaining `▁qu`, the 1st piece of the word `qu'elle`: ")
    assert np.allclose(bars(at)[-1], explain_contrast(tr, text, 3, "▁que", target=d.target_ids).scores, atol=1e-6)
    assert "foil_piece" not in at.query_params
    box.set_value(3).run()
    assert not at.exception, at.exception
    # that piece's step (5): its own top tokens to pick from, its runner-up first, its bars
    foil = at.selectbox(key="foil")
    assert foil.value == "il" and list(foil.options) == [t for t, _ in d.step_top[4] if t != "elle"]
    assert line().startswith("Explaining `elle`, the 3rd piece of the word `qu'elle`: log p(`elle`)")
    assert np.allclose(bars(at)[-1], explain_contrast(tr, text, 5, "il", target=d.target_ids).scores, atol=1e-6)
    assert at.query_params["foil_piece"] == "3" and at.query_params["step"] == "3"
    # the piece view as it was: one piece a step, nothing to pick, no such line
    at.session_state["view"] = "pieces"
    at.run()
    at.slider(key="step").set_value(5).run()       # (a new view starts at step 1)
    assert not at.exception, at.exception
    assert not [b for b in at.selectbox if b.key == "foil_piece"] and not line().startswith("Explaining")
    assert np.allclose(bars(at)[-1], explain_contrast(tr, text, 5, "il", target=d.target_ids).scores, atol=1e-6)
    assert "foil_piece" not in at.query_params
    # a link lands on its piece; another word starts at its first piece; a bad piece is one line
    at = translate_page(180, model="en-fr-additive", text=text, tab="Step by step", view="words", step="3",
                        foil="il", foil_piece="3")
    assert not at.exception, at.exception
    assert at.selectbox(key="foil_piece").value == 3 and line().startswith("Explaining `elle`, the 3rd")
    at.slider(key="step").set_value(5).run()          # "ici.": ▁ici .
    assert at.selectbox(key="foil_piece").value == 1 and line().startswith("Explaining `▁ici`, the 1st")
    assert "foil_piece" not in at.query_params
    at = translate_page(180, model="en-fr-additive", text=text, tab="Step by step", view="words", step="3",
                        foil="il", foil_piece="x")
    assert not at.exception, at.exception
    notes = [i.value for i in at.info if "foil_piece" in i.value]
    assert notes == ["Ignored the link's foil_piece=`x`: not a valid value."]
    assert at.selectbox(key="foil_piece").value == 1
