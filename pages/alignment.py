"""Alignment & Explanation: is attention an alignment, and is it an explanation?

The page is layout and widgets only; the measurements are s2s.alignment (against human
word alignments), s2s.attributions (against attributions) and s2s.counterfactual
(counterfactual attention), the figures s2s.figures; each tab is a module of ui/alignment/
(gold.py, attribution.py, corpus.py), their cached measurements ui/alignment/measurements.py.
This file chooses the model and the tab, and keeps the address.
"""
import streamlit as st

import ui.address
import ui.models
from s2s.alignment import RULES
from s2s.contributions import ALIGN_METHODS
from s2s.counterfactual import KINDS
from ui.alignment import attribution, corpus, gold, measurements

ui.address.run_through_app()     # a link's first run in Streamlit's old multipage mode: rerun through app.py

TABS = ["Against human alignments", "Attention vs attribution", "Your corpus"]
# what the address holds (?model=...&pair=4&rule=shift): a copied link reproduces the view
ADDRESS = {"model": ("align_model", str), "tab": ("alignment_tab", ui.address.choice(TABS)),
           "pairs": ("gold_source", ui.address.choice(["trial", "test", "typed"])), "pair": ("gold_pair", int),
           "rule": ("rule", ui.address.choice(RULES)), "en": ("typed_en", str), "fr": ("typed_fr", str),
           "text": ("explain_text", str), "reference": ("explain_reference", str), "step": ("cf_step", int),
           "method": ("explain_method", ui.address.choice(list(ALIGN_METHODS))), "layer": ("explain_layer", int),
           "kind": ("cf_kind", ui.address.choice(KINDS)), "eps": ("cf_eps", float),
           "corpus": ("corpus_source", ui.address.choice(["example", "upload", "paste"])),
           "corpus_rule": ("corpus_rule", ui.address.choice(RULES)),
           "corpus_head": ("corpus_head", str), "corpus_pair": ("corpus_pair", int)}
ADDRESS_OF_TAB = {TABS[0]: ["pairs", "pair", "en", "fr", "rule"],
                  TABS[1]: ["text", "reference", "method", "layer", "step", "kind", "eps"],
                  TABS[2]: ["corpus", "corpus_rule", "corpus_head", "corpus_pair"]}


st.title("Alignment & Explanation")
query = ui.address.arrival_query("alignment")       # read before any st.stop below, so it is never left for a later run
for note in ui.address.read_address(query, ADDRESS):
    st.info(note)
st.caption("Attention is drawn as if it were an alignment and read as if it were an explanation. "
           "Here both are measured: against human word alignments, and against what actually drives the output.")

models = measurements.attention_models()
if not models:
    st.error("No translation checkpoint with attention in `checkpoints/`: nothing to measure.")
    st.stop()
by_name = {m.name: m for m in models}
S = st.session_state
# kept while their tab is closed, and while the reader visits another page
ui.address.keep_across_pages("align_model", "alignment_tab", "gold_source", "gold_pair", "rule", "typed_en", "typed_fr",
                             "explain_text", "explain_reference", "explain_method", "explain_layer", "cf_step",
                             "cf_kind", "cf_eps", "corpus_source", "corpus_text", "corpus_rule", "corpus_head",
                             "corpus_pair")
if S.get("align_model") not in by_name:
    asked = S.get("align_model")
    S["align_model"] = ui.models.DEFAULT_MODEL if ui.models.DEFAULT_MODEL in by_name else models[0].name
    if isinstance(asked, str) and asked:          # a link named it
        ui.models.not_offered(asked, S["align_model"])
with st.sidebar:
    st.markdown("### Model")
    name = st.selectbox("Attention model", list(by_name), key="align_model",
                        format_func=lambda n: ui.models.model_label(by_name[n]) if by_name[n].is_hub else n,
                        help=f"The {len(models)} models with attention; a fixed-vector model has no "
                             "attention to compare.")
    st.caption(f"**{by_name[name].attention} attention.** {by_name[name].description}")
    for bad in [i for i in ui.models.hub_models() if i.error]:
        st.warning(f"Skipped a model: {bad.error}")
tr = ui.models.get_model(name)
if tr is None:
    st.stop()
path = ui.models.model_path(name)
# the decoder layer another model's explanation was read at, checked against this model's before a
# tab or the address reads it (the method, the step and the corpus head are checked in their tabs)
n_layers = tr.config["model"].get("decoder_layers", 0) if tr.arch == "transformer" else 0
ui.address.check_choice("explain_layer", range(1, n_layers + 1), n_layers)
ui.address.tab_from_query(query, "alignment_tab", TABS)     # a link may name the tab (?tab=Attention+vs+attribution)
tabs = st.tabs(TABS, key="alignment_tab", on_change="rerun")
if query.get("tab") in TABS:     # a link to a tab (the Start page's): the tab bar just below the header
    ui.address.scroll_into_view('[data-testid="stTabs"]')
for tab, show in zip(tabs, (gold.human_alignments, attribution.attention_vs_attribution, corpus.your_corpus)):
    with tab:
        if tab.open:
            show(tr, by_name[name], path)

# the address: the model, the open tab and that tab's choices
open_tab = S.get("alignment_tab", TABS[0])
shown = ADDRESS_OF_TAB.get(open_tab, [])
if open_tab == TABS[0]:
    shown = [n for n in shown if (n in ("en", "fr")) == (S.get("gold_source") == "typed")]
ui.address.set_address({"model": name, "tab": open_tab} | ui.address.address_of(ADDRESS, shown))
