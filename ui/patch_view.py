"""What carries the change (issue #61, 3), in Compare an edit: activation patching (s2s.patch)
from the reader's text (the clean run) into the edit (the corrupted run), the metric the forced
log p of the page's translation of the text. Drawn under the two compared outputs: the share
of the change each encoder state restores (layers x source words) and, for a Transformer, each
cross-attention head's (layers x heads), on one diverging scale."""
from __future__ import annotations

import streamlit as st

import ui.intervention
import ui.models
import ui.show
from s2s import figures
from s2s.checkpoint import Translator
from s2s.decode import Decoding
from s2s.hooks import format_head_mask
from s2s.patch import Patching, patch, shares_by_word
from s2s.text import InputError

KEY = "patch_map"       # the chart's key (tests find it by this)


@st.cache_data(max_entries=64, show_spinner=False)
def patch_cached(path: str, text: str, edit: str, output_ids: tuple[int, ...], mask: str = "") -> Patching:
    """One patching, shared by every session: keyed by the model, the text, the edit, the
    output whose log p is the metric (the page's translation of the text) and the heads
    knocked out in every run (ui.intervention)."""
    return patch(ui.models.load_path(path), text, edit, output_ids=list(output_ids), head_mask=mask)


def what_carries_the_change(tr: Translator, d: Decoding, words: bool, model: str, text: str, edit: str) -> None:
    """Under Compare an edit's two outputs: which encoder state (and which cross-attention head)
    carries the edit's change to the translation's log p, or one line saying why not."""
    st.markdown("**What carries the change?** Your text's states put one at a time into the edit's run "
                "(activation patching).")
    mask = ui.intervention.active(tr)
    ui.intervention.note(mask, tr)
    try:
        with st.spinner("Patching each state…"):
            p = patch_cached(ui.models.model_path(model), text, edit, tuple(int(i) for i in d.target_ids),
                             format_head_mask(mask))
    except InputError as err:
        st.caption(f"Not patched: {err}")
        return
    share = p.restored()
    if p.source_tokens == p.edited_tokens or share is None:
        same = p.source_tokens == p.edited_tokens
        st.caption("Not patched: " + ("the edit reads as the same pieces as your text." if same else
                   f"the edit leaves the translation's log p as it was ({p.clean_log_prob:.2f}): no change to carry."))
        return
    originals, edits, rows = (shares_by_word(p.source_tokens, p.edited_tokens, share) if words
                              else (p.source_tokens, p.edited_tokens, share))
    merged = len(originals) < len(p.source_tokens)      # some word of several pieces
    columns = [o if o == e else f"{o} → {e}" for o, e in zip(originals, edits)]
    changed = [i for i, (o, e) in enumerate(zip(originals, edits)) if o != e]
    by_head = p.restored_heads()
    fig = figures.patching_figure(columns, p.layers, rows, by_head, changed=changed,
                                  column_title="source word (your text → the edit)" if words
                                  else "source piece (your text → the edit)")
    ui.show.plotly_chart(fig, key=KEY, config=ui.show.camera(KEY, model, edit[:40]))
    st.caption(
        f"The metric: the log p of your text's translation (above, left), forced: {p.clean_log_prob:.2f} "
        f"from your text (clean), {p.corrupt_log_prob:.2f} from the edit (corrupt). Each cell runs the edit again "
        "with one state from your text's run and shows (patched − corrupt) / (clean − corrupt): 1 restores the "
        "original translation's log p, 0 restores nothing (white), below 0 (red) moves it further the edit's way. "
        + ("A recurrent model: its encoder output (the bidirectional RNN's state at each word) is its one row; it "
           "has no attention heads to patch." if by_head is None else
           "Right: each cross-attention head's output, at every output step, from your text's run.")
        + (" A word of several pieces shows its piece that moves the log p most (each piece is patched alone)."
           if merged else ""))
