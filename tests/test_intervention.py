"""AppTest: one intervention, every view (issue #68, ui/intervention.py). A link with mask= opens
the Heads tab's knockout, and the same heads are out wherever the page runs the model: Step by
step's lens (each layer's guess) and contrast, and Compare an edit's patch, each equal to the
library's instrument with that head_mask (s2s.lens, s2s.contrast, s2s.patch), each saying so in
one line; without a mask, or with the matrix back to "enlarge", they read the whole model."""
from __future__ import annotations

import numpy as np
import pytest
from test_contrast_page import bars, other_piece
from test_lens_panel import rank_lines

from s2s.checkpoint import load_translator
from s2s.contrast import explain_contrast, step_attribution
from s2s.decode import DecodeSettings, decode
from s2s.lens import lens
from s2s.patch import patch
from test_app import array, chart, texts

TEXT, EDIT = "a b c d", "a b e d"
MASK = "cross:1.2,encoder:2.1,decoder:1.3"
SAID = "knocked out, as the Heads tab's knockout has it"


@pytest.fixture
def tiny(transformer_zoo):
    tr = load_translator(str(transformer_zoo / "en-fr-transformer"))
    return tr, decode(tr, TEXT, DecodeSettings())


def test_step_by_step_reads_the_lens_and_the_contrast_with_the_links_heads_out(zoo_page, tiny):
    tr, d = tiny
    foil = other_piece(d, 2)
    at = zoo_page(model="en-fr-transformer", text=TEXT, tab="Step by step", view="pieces", step="3", foil=foil,
                  foil_method="loo", mask=MASK)
    assert not at.exception, at.exception
    assert at.session_state["heads_click"] == "knock" and at.query_params["mask"] == MASK
    said = [c.value for c in at.caption if SAID in c.value]
    assert len(said) == 2 and all(f"`{MASK}`" in s for s in said)        # the lens's line, the contrast's
    # the lens: every layer's rank of the chosen piece, the knocked-out model's (the page's own output, forced)
    want = lens(tr, TEXT, target=d.target_ids, head_mask=MASK)
    plain = lens(tr, TEXT, target=d.target_ids)
    assert rank_lines(at) == {d.target_tokens[2]: [want.ranks[l][2] for l in range(len(want.layers))]}
    assert not np.allclose(want.log_probs, plain.log_probs, atol=1e-4)     # the mask changes what is read
    # the contrast and its plain bars, the same
    c = explain_contrast(tr, TEXT, 3, foil, method="loo", target=d.target_ids, head_mask=MASK)
    _, plain_bars, shown = bars(at)
    np.testing.assert_allclose(shown, c.scores, atol=1e-6)
    np.testing.assert_allclose(plain_bars, step_attribution(tr, TEXT, 3, method="loo", target=d.target_ids,
                                                            head_mask=MASK)[0], atol=1e-6)
    whole = explain_contrast(tr, TEXT, 3, foil, method="loo", target=d.target_ids)
    assert np.abs(whole.scores - c.scores).max() > 1e-4


def test_compare_an_edit_patches_the_knocked_out_model(zoo_page, tiny):
    tr, d = tiny
    at = zoo_page(model="en-fr-transformer", text=TEXT, edit=EDIT, tab="Compare an edit", mask=MASK)
    assert not at.exception, at.exception
    p = patch(tr, TEXT, EDIT, output_ids=d.target_ids, head_mask=MASK)
    words, heads = chart(at, "patch_map")["data"]
    np.testing.assert_allclose(array(words["z"]), np.asarray(p.restored()), atol=1e-5)
    gap = p.clean_log_prob - p.corrupt_log_prob
    np.testing.assert_allclose(array(heads["z"]), [[(v - p.corrupt_log_prob) / gap for v in row]
                                                   for row in p.patched_heads], atol=1e-5)
    heads_out = [c.value for c in at.caption if SAID in c.value]
    assert len(heads_out) == 1 and f"`{MASK}`" in heads_out[0]
    assert f"{p.clean_log_prob:.2f} from your text (clean)" in texts(at)
    whole = patch(tr, TEXT, EDIT, output_ids=d.target_ids)
    assert abs(whole.clean_log_prob - p.clean_log_prob) > 1e-4


def test_without_a_mask_or_back_to_enlarge_every_panel_reads_the_whole_model(zoo_page, tiny):
    tr, d = tiny
    at = zoo_page(model="en-fr-transformer", text=TEXT, edit=EDIT, tab="Compare an edit")
    assert not at.exception and not [c for c in at.caption if SAID in c.value]
    whole = patch(tr, TEXT, EDIT, output_ids=d.target_ids)
    np.testing.assert_allclose(array(chart(at, "patch_map")["data"][0]["z"]), np.asarray(whole.restored()), atol=1e-5)
    # a mask in the session, the matrix back to "enlarge": not in force, and not in the address
    at = zoo_page(model="en-fr-transformer", text=TEXT, tab="Step by step", view="pieces", step="3", mask=MASK)
    at.session_state["heads_click"] = "enlarge"
    at.run()
    assert not at.exception, at.exception
    assert not [c for c in at.caption if SAID in c.value] and "mask" not in at.query_params
    want = lens(tr, TEXT, target=d.target_ids)
    assert rank_lines(at) == {d.target_tokens[2]: [want.ranks[l][2] for l in range(len(want.layers))]}


def test_a_mask_the_model_lacks_knocks_nothing_out_anywhere(zoo_page, tiny):
    tr, d = tiny
    at = zoo_page(model="en-fr-transformer", text=TEXT, tab="Step by step", view="pieces", step="3", mask="cross:9.1")
    assert not at.exception, at.exception
    assert not [c for c in at.caption if SAID in c.value]
    ignored = [c.value for c in at.caption if c.value.startswith("Ignored the mask")]
    assert len(ignored) == 1 and "out of range" in ignored[0] and "whole model is read" in ignored[0]
    want = lens(tr, TEXT, target=d.target_ids)
    assert rank_lines(at) == {d.target_tokens[2]: [want.ranks[l][2] for l in range(len(want.layers))]}
