"""AppTest: Compare an edit's "what carries the change" panel (issue #61, 3; ui/patch_view.py):
its cells are s2s.patch's shares restored for the same pair, a recurrent model draws one row and
no heads, an edit of another number of pieces is one line, a hub model is patched too; and the
figure builder's scale (s2s.figures.patching_figure)."""
import numpy as np
import pytest

from s2s import figures
from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, decode
from s2s.patch import patch
from test_app import array, chart, texts

TEXT, EDIT = "a b c d", "a b e d"


def patched_by_the_library(path, text: str, edit: str):
    tr = load_translator(str(path))
    own = decode(tr, text, DecodeSettings())
    return patch(tr, text, edit, output_ids=own.target_ids), own


def test_a_transformers_cells_are_the_librarys_shares_and_its_heads_beside_them(zoo_page, transformer_zoo):
    at = zoo_page(model="en-fr-transformer", text=TEXT, edit=EDIT, tab="Compare an edit")
    assert not at.exception, at.exception
    p, own = patched_by_the_library(transformer_zoo / "en-fr-transformer", TEXT, EDIT)
    share = np.asarray(p.restored())
    spec = chart(at, "patch_map")
    assert spec is not None
    words, heads = spec["data"]
    z = array(words["z"])
    assert z.shape == share.shape == (len(p.layers), len(p.source_tokens))      # one piece a word here
    # two cells: the swapped word's at the first layer, and the last layer's first word
    swap = p.source_tokens.index("▁c")
    assert z[0, swap] == pytest.approx(share[0, swap], abs=1e-5)
    assert z[-1, 0] == pytest.approx(share[-1, 0], abs=1e-5)
    gap = p.clean_log_prob - p.corrupt_log_prob
    assert array(heads["z"]) == pytest.approx(np.asarray(
        [[(v - p.corrupt_log_prob) / gap for v in row] for row in p.patched_heads]), abs=1e-5)
    # the edited word named on its column, one scale for both maps with 0 and 1 on its bar
    assert spec["layout"]["xaxis"]["ticktext"][swap] == "c → e"
    assert words["zmin"] == heads["zmin"] < 0 < 1 <= words["zmax"] == heads["zmax"]
    bar = words["colorbar"]
    assert 0 in bar["tickvals"] and 1 in bar["tickvals"] and "showscale" in heads and not heads["showscale"]
    page = texts(at)
    assert p.clean_log_prob == pytest.approx(own.log_prob, abs=1e-4)      # the page's own translation's log p
    assert f"{p.clean_log_prob:.2f} from your text (clean), {p.corrupt_log_prob:.2f} from the edit" in page
    assert "1 restores the original translation's log p" in page and "cross-attention head" in page


def test_a_recurrent_model_is_one_row_and_says_so(zoo_page, transformer_zoo):
    at = zoo_page(model="en-fr-additive", text=TEXT, edit=EDIT, tab="Compare an edit")
    assert not at.exception, at.exception
    p, _ = patched_by_the_library(transformer_zoo / "en-fr-additive", TEXT, EDIT)
    spec = chart(at, "patch_map")
    assert len(spec["data"]) == 1                     # no heads' map
    z = array(spec["data"][0]["z"])
    assert z.shape == (1, len(p.source_tokens))
    assert z[0] == pytest.approx(np.asarray(p.restored()[0]), abs=1e-5)
    assert "A recurrent model: its encoder output" in texts(at) and "no attention heads" in texts(at)


def test_an_edit_of_another_length_is_one_line(zoo_page):
    at = zoo_page(model="en-fr-transformer", text=TEXT, edit="a b c d e", tab="Compare an edit")
    assert not at.exception, at.exception
    lines = [c.value for c in at.caption if c.value.startswith("Not patched")]
    assert len(lines) == 1 and "patching needs the same number" in lines[0] and "\n" not in lines[0]
    assert chart(at, "patch_map") is None and chart(at, "edit_map1") is not None     # the comparison stays


def test_an_edit_of_the_same_pieces_is_one_line(zoo_page):
    at = zoo_page(model="en-fr-transformer", text=TEXT, edit="a  b c d", tab="Compare an edit")   # a space more
    assert not at.exception, at.exception
    assert [c.value for c in at.caption if c.value.startswith("Not patched")] == \
        ["Not patched: the edit reads as the same pieces as your text."]
    assert chart(at, "patch_map") is None


@pytest.mark.parametrize("family", ["marian", "t5", "m2m100"])
def test_a_hub_model_is_patched(zoo_page, hub_models, monkeypatch, family):
    path = str(hub_models[family])
    monkeypatch.setenv("S2S_HUB_MODELS", path)
    text, edit = "the cat sat on the mat .", "the mat sat on the cat ."      # the same pieces, reordered
    at = zoo_page(model=path, text=text, maxlen="12", edit=edit, tab="Compare an edit")
    assert not at.exception, at.exception
    tr = load_translator(path)
    p = patch(tr, text, edit, output_ids=decode(tr, text, DecodeSettings(max_len=12)).target_ids)
    spec = chart(at, "patch_map")
    if p.restored() is None:        # a random tiny model the swap leaves unmoved: said in one line
        assert chart(at, "patch_map") is None and "no change to carry" in texts(at)
        return
    assert spec is not None and len(spec["data"]) == 2
    assert array(spec["data"][1]["z"]).shape == (len(p.patched_heads), len(p.patched_heads[0]))
    words = array(spec["data"][0]["z"])
    assert words.shape[0] == len(p.layers) and words.shape[1] < len(p.source_tokens)     # pieces merged to words


def test_the_scale_reaches_past_one_only_when_a_value_does():
    fig = figures.patching_figure(["a", "b"], ["layer 1"], np.array([[0.2, 0.9]]))
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-1, 1) and list(fig.data[0].colorbar.tickvals) == [-1, 0, 1]
    fig = figures.patching_figure(["a", "b"], ["layer 1"], np.array([[-0.3, 2.5]]), np.array([[0.1]]))
    assert fig.data[0].zmax == fig.data[1].zmax == 2.5 and fig.data[0].zmin == -2.5
    assert 2.5 in fig.data[0].colorbar.tickvals
