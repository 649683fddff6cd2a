"""Translate & Align: live decoding with attention heatmaps.

The page is layout and widgets only: the form, the translation and its heatmap here, the seven
tabs below them in ui/translate_tabs.py; decoding is s2s.decode, figures are s2s.figures.
"""
from __future__ import annotations  # Decoding in the signatures below is imported after the form

import streamlit as st

import ui.address
import ui.models
import ui.show
import ui.warm

ui.address.run_through_app()     # a link's first run in Streamlit's old multipage mode: rerun through app.py
ui.warm.load_plotly_early()      # before the imports below: on a cold server they wait for torch

import json  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402

from s2s.export import file_stem, matrix_csv, matrix_json, plotly_html, positions  # noqa: E402
from s2s.figures import attention_heatmap, model_diagram  # noqa: E402
from s2s.hub import display_name, translates_english_to_french  # noqa: E402
from s2s.piece_words import HEAD_KINDS, HEADS_VIEWS  # noqa: E402
from s2s.text import MAX_BEAM, MAX_CHARS, MAX_DECODE_LEN, MAX_NO_REPEAT, InputError, split_sentences  # noqa: E402

COURSE_SENTENCE = "The agreement on the European Economic Area was signed in August 1992."
COPY_SENTENCE = "Ngozi and Mateus are waiting for the bus."     # names in no training pair: copied
EXAMPLES = [      # the first opens the page: adjectives reorder ("big black dog" -> "gros chien noir")
    "She has a big black dog.",
    "I went to the lecture.",
    COPY_SENTENCE,
    "I think it's going to rain tomorrow.",
    "We should have left earlier, but we were waiting for my brother.",
    "My grandmother lives in a small house near the sea. She walks to the beach every morning.",
    COURSE_SENTENCE,
]
EXAMPLE_LABELS = {COPY_SENTENCE: COPY_SENTENCE + "  (two names no training pair has: the attention models copy "
                                 "them, each French name attending to its English one)",
                  COURSE_SENTENCE: COURSE_SENTENCE + "  (the lecture's slide; a failure case: \"European Economic "
                                   "Area\" is in none of the 159,086 Tatoeba training pairs)"}
LONG_SENTENCES = 2      # above this many sentences the page advises translating one at a time
METHODS = {"greedy": "Greedy", "beam": "Beam search", "sample": "Sampling"}
TABS = ["Step by step", "Beam tree", "Forced decoding", "Compare attention", "Alignment lines", "Heads",
        "Attention emerges", "Compare an edit", "Neighbours"]
DEFAULTS = dict(text=EXAMPLES[0], method="greedy", beam=5, nbest=3, temp=1.0, topk=0, seed=0, maxlen=120, norepeat=0,
                view="words", tab=TABS[0], reference="",     # all can come from the URL (?text=...&tab=Beam+tree)
                steer="", edit="", cont=False)    # what if: a steering prefix, an edited text, continue the reference
RANGES = dict(beam=(1, MAX_BEAM), nbest=(1, MAX_BEAM), temp=(0.1, 2.0), topk=(0, 200), seed=(0, 2**31 - 1),
              maxlen=(1, MAX_DECODE_LEN), norepeat=(0, MAX_NO_REPEAT))
CHOICES = dict(method=list(METHODS), view=["words", "pieces"], tab=TABS)
# the settings each method reads (the others would only mislead an export's reader)
SETTINGS_READ = {"greedy": ("method", "maxlen", "norepeat"), "beam": ("method", "beam", "nbest", "maxlen", "norepeat"),
                 "sample": ("method", "temp", "topk", "seed", "maxlen")}


def settings_of(method: str, width: int, n_best: int, temperature: float, top_k: int, seed: int, max_len: int,
                no_repeat: int = 0) -> DecodeSettings:
    """The page's widgets as one DecodeSettings, by its names (the options a method does not
    read stay at their defaults, so that they do not split the cache)."""
    return DecodeSettings(method, width, n_best, max_len=max_len, no_repeat=no_repeat, temperature=temperature,
                          top_k=top_k, seed=seed).canonical()


def head_label(layer: int, head: int | None, layers: int, heads: int) -> str:
    return (f"layer {layer + 1}" + (" (last)" if layer == layers - 1 else "") + " · "
            + (f"mean of {heads} heads" if head is None else f"head {head + 1}"))


def export_row(d: Decoding, model: str, text: str, settings: dict, words: bool, src: list, tgt: list, a: np.ndarray,
               title: str | None, fig) -> None:
    """Below the heatmap: the chart (offline HTML) and the matrix shown (CSV, JSON), each named
    for the model, the settings, the view and the text; for a Transformer, all its heads too."""
    what = (title or "attention") + f", {'whole words' if words else 'pieces'}: output (rows) x source (columns)"
    used = {k: v for k, v in settings.items() if k in SETTINGS_READ[settings["method"]]}
    stem = file_stem("attention", model, *[f"{k}{v}" for k, v in used.items() if k != "method"], used["method"],
                     (title or "").replace("cross-attention, ", ""), "words" if words else "pieces", text[:40])
    record = {"model": model, "english": text, "translation": d.translation, "settings": used,
              "view": "words" if words else "pieces", "matrix": what, "attention": matrix_json(a, tgt, src)}
    c = st.columns(4 if d.cross_attention is not None else 3)
    c[0].download_button("⬇ Chart (HTML)", lambda: plotly_html(fig, stem), file_name=f"{stem}.html",
                         mime="text/html", on_click="ignore", key="export_html",
                         help="One file that draws this heatmap interactively, offline")
    c[1].download_button("⬇ CSV", matrix_csv(a, tgt, src, f"{model}; {json.dumps(used)}; {what}; {text}"),
                         file_name=f"{stem}.csv", mime="text/csv", on_click="ignore", key="export_csv",
                         help="The matrix shown; rows and columns are positions with their tokens")
    c[2].download_button("⬇ JSON", json.dumps(record, ensure_ascii=False, indent=1), file_name=f"{stem}.json",
                         mime="application/json", on_click="ignore", key="export_json",
                         help="The matrix shown, with the model, the text, the settings and what it is")
    if d.cross_attention is not None:
        heads = {"model": model, "english": text, "translation": d.translation, "settings": used,
                 "source_pieces": positions(d.source_tokens), "output_pieces": positions(d.target_tokens),
                 "shapes": "(layers, heads, rows, columns), pieces: cross (output x source), encoder (source x "
                           "source), decoder (output x earlier output)"}
        for kind, w in (("cross", d.cross_attention), ("encoder", d.encoder_self_attention),
                        ("decoder", d.decoder_self_attention)):
            if w is not None:
                heads[kind] = np.round(np.asarray(w, dtype=float), 5).tolist()
        c[3].download_button("⬇ All heads (JSON)", json.dumps(heads, ensure_ascii=False),
                             file_name=f"{file_stem('heads', model, used['method'], text[:40])}.json",
                             mime="application/json", on_click="ignore", key="export_heads",
                             help="Every layer and head of the cross-attention and both self-attentions, in pieces")


def choose_model(name: str) -> None:
    """The "Try it with …" button: the same text with another model (before the picker draws)."""
    st.session_state.model = name


def set_example() -> None:
    if st.session_state.example is not None:       # None when the box is cleared
        st.session_state.text = st.session_state.example


# ------------------------------------------------------------------ input
# Compact, so that on a 1280 x 720 projector the translation and the heatmap are on the first
# screen after Translate: the examples beside the title, the text box without a label line,
# the decoding settings folded beside the method. (Not in an st.popover: a popover mounts its
# widgets only when opened, and these then showed their minimum, not the values the URL set.)
heading, pick = st.columns([3, 2], vertical_alignment="bottom")
heading.title("Translate & Align", help="Type an English sentence and watch an encoder-decoder translate it to French: "
                                     "which source words each output word attends to, step by step.")
# Streamlit forgets the state of a widget that a run does not draw: a closed tab's widgets, the
# words/pieces control when a warning below stops the page, and every one of them while the
# reader is on another page. Keep their values for the run that draws them again.
ui.address.keep_across_pages("model", *DEFAULTS, "delay", "probe", "by_sentence",
                            "lens_watch")     # the lens panel's watched piece (ui/lens_panel.py)
ui.address.keep_across_pages("heads_click")      # the Heads grid's click mode (ui/knockout.py)
ui.address.keep_across_pages("contrast_open", "foil", "foil_method", "foil_step",
                             "foil_piece")     # ui/contrast_panel.py's WIDGETS
arrival = ui.address.arrival_query("translate")
for note in ui.address.state_from_query(arrival, DEFAULTS, RANGES, CHOICES):
    st.info(note)
# a Transformer's layer and head (from 1; checked against the model once it is loaded)
for key, state in (("layer", "tf_layer"), ("heads_layer", "heads_layer"), ("heads_head", "heads_head"),
                   ("heads_query", "heads_query")):      # the neuron view's query (ui/neuron_view.py)
    if arrival.get(key, "").isdigit():
        st.session_state[state] = int(arrival[key]) - 1
if "sentences" in arrival:      # ?sentences=each: a paragraph translated sentence by sentence
    st.session_state["by_sentence"] = arrival["sentences"] == "each"
if "head" in arrival:
    st.session_state["tf_head"] = (None if arrival["head"] == "mean" or not arrival["head"].isdigit()
                                   else int(arrival["head"]) - 1)
if arrival.get("heads") in HEAD_KINDS:
    st.session_state["heads_kind"] = arrival["heads"]
if arrival.get("heads_view") in HEADS_VIEWS:
    st.session_state["heads_view"] = arrival["heads_view"]
name = ui.models.model_picker()
if name is None:
    st.stop()

pick.selectbox("Ready examples", EXAMPLES, index=None, key="example", on_change=set_example,
               format_func=lambda e: EXAMPLE_LABELS.get(e, e), placeholder="Pick an example sentence…")
with st.form("input", border=False):
    # no max_chars: the browser would silently refuse a longer paste; s2s says what to change
    st.text_area("English text", key="text", height=68, label_visibility="collapsed",
                 placeholder=f"Type English text: one or a few sentences, up to {MAX_CHARS:,} characters.")
    c1, c2, c3 = st.columns([4, 2.6, 1.4])     # top-aligned: an opened settings panel grows downwards
    c1.radio("Decoding", list(METHODS), key="method", format_func=METHODS.get, horizontal=True,
             label_visibility="collapsed")
    with c2.expander("Decoding settings", icon=":material/tune:"):
        st.slider("Beam width", 1, MAX_BEAM, key="beam", help="Beam search only")
        st.slider("N-best shown", 1, MAX_BEAM, key="nbest", help="Beam search only; at most the beam width")
        st.slider("Temperature", 0.1, 2.0, step=0.05, key="temp", help="Sampling only: <1 sharpens, >1 flattens")
        st.number_input("Top-k (0 = all)", 0, 200, key="topk", help="Sampling only")
        st.number_input("Seed", 0, 2**31 - 1, key="seed", help="Sampling only: the same seed gives the same sample")
        st.slider("Max length (pieces)", 1, MAX_DECODE_LEN, key="maxlen")
        st.number_input("Block repeated n-grams (0 = off)", 0, MAX_NO_REPEAT, key="norepeat",
                        help="Greedy and beam search: a piece that would repeat an n-gram of pieces the translation "
                             "already holds gets probability 0, so a decoder that has lost its place cannot loop "
                             "(Paulus et al. 2018). 4 is a safe choice; 0 shows what the model does on its own.")
    c3.form_submit_button("Translate", type="primary", width="stretch")
ui.address.note_stale_results("⚠ The text or the decoding changed since this result: "
                              "press **Translate** to see theirs.")

# Decoding imports torch. On a cold server the warm-up is still importing it, and this line
# waits: the form above is already in the browser, which loads its widgets' code meanwhile,
# instead of after the wait, just before the heatmap.
import ui.contrast_panel  # noqa: E402
import ui.decoded  # noqa: E402
import ui.knockout  # noqa: E402
import ui.lens_panel  # noqa: E402
import ui.translate_tabs  # noqa: E402
import ui.what_if  # noqa: E402
from s2s.data import unseen_words  # noqa: E402
from s2s.decode import DecodeSettings, Decoding, attention_of, forced  # noqa: E402

tr = ui.models.get_model(name)
if tr is None:
    st.stop()

S = st.session_state
if "steer_ids" in arrival:      # steered by piece ids (pieces that are not text: ui/what_if.py)
    try:
        st.session_state["steer"] = ui.what_if.steer_ids_of(arrival["steer_ids"])
    except ValueError:
        st.info(f"Ignored the link's steer_ids={ui.show.code_span(arrival['steer_ids'][:40])}: not a list of "
                "piece ids (whole numbers, comma-separated).")
ui.what_if.forget_if_changed(name, S.text, arrived=bool({"steer", "steer_ids", "edit"} & set(arrival)))
ui.knockout.arrive(arrival)     # mask=: the Heads tab's knocked-out heads
lens_landing = ui.lens_panel.from_address(arrival)     # watch=, and lens=on: land on the lens panel
for note in ui.contrast_panel.read_address(arrival):     # foil=, foil_method=: the contrast panel opened
    st.info(note)
if arrival.get("step", "").isdigit():     # Step by step's step (from 1; checked against the output there)
    S["step"] = max(1, int(arrival["step"]))
ui.translate_tabs.check_choices(tr, name)     # before the address below reads another model's layer or head
settings = dict(method=S.method, beam=S.beam, nbest=S.nbest, temp=float(S.temp), topk=int(S.topk),
                seed=int(S.seed), maxlen=S.maxlen, norepeat=int(S.norepeat))     # the address's names
n_sentences = len(split_sentences(S.text or ""))
decoding = settings_of(S.method, S.beam, S.nbest, float(S.temp), int(S.topk), int(S.seed), S.maxlen, int(S.norepeat))
# The address follows every choice that changes what is shown, on every run (not only when
# Translate is pressed), so a copied link reproduces the view: the model, the text, the
# decoding, words or pieces, the tab, the reference, and a Transformer's layer and head.
# Written again once the page is drawn: a tab can set a choice as it draws (the neuron view's
# default query), which would otherwise reach the address one run late.
def page_address() -> dict:
    return {"model": name, "text": S.text, "view": S.get("view"), "tab": S.get("tab", TABS[0]),
            **settings, "reference": S.get("reference") or None,
            "cont": 1 if S.get("cont") and S.get("reference") else None,
            **ui.what_if.steer_address(S.get("steer") or ""),
            "edit": S.get("edit") if S.get("edit") not in ("", S.text) else None,
            "step": S.get("step") if S.get("tab", TABS[0]) == TABS[0] and S.get("step", 1) > 1 else None,
            **ui.lens_panel.address(),
            **ui.contrast_panel.address(S.get("tab", TABS[0])),     # foil=, and Forced decoding's step=
            "layer": None if S.get("tf_layer") is None else S.tf_layer + 1,
            "head": (None if "tf_layer" not in S
                     else ("mean" if S.get("tf_head") is None else S.tf_head + 1)),
            "heads": S.get("heads_kind"),
            "heads_view": S.get("heads_view") if S.get("heads_kind", "cross") == "cross" else None,
            "heads_layer": None if S.get("heads_layer") is None else S.heads_layer + 1,
            "heads_head": None if S.get("heads_head") is None else S.heads_head + 1,
            "heads_query": None if S.get("heads_query") is None else S.heads_query + 1,
            **ui.knockout.address(),
            "sentences": "each" if S.get("by_sentence") and n_sentences > LONG_SENTENCES else None}
ui.address.set_address(page_address())
if S.get("view") not in CHOICES["view"]:      # None once its selected option is clicked again
    S.view = DEFAULTS["view"]
# A paragraph: the models learned from pairs of one or two sentences (Tatoeba), and read at
# once one can lose its place; say so, and offer to translate it a sentence at a time
by_sentence = False
if n_sentences > LONG_SENTENCES:
    advice, switch = st.columns([3, 1.2], vertical_alignment="center")
    by_sentence = switch.toggle("Sentence by sentence", key="by_sentence",
                                help="Translate each sentence on its own and join the results: the heatmap's "
                                     "blocks on its diagonal are the sentences")
    advice.caption(f"Your text has {n_sentences} sentences. These models learned from pairs of one or two "
                   "sentences; a longer text read at once can lose its place (words repeated or dropped). "
                   + ("Each sentence is translated on its own: its output attends to its own source only, the "
                      "blocks on the heatmap's diagonal." if by_sentence else
                      "*Sentence by sentence* translates one at a time."))
try:
    with st.spinner(f"Translating with {display_name(name)}…"):      # shown after 0.5 s: a decoding, not a hit
        d, ms = ui.decoded.decode_cached(ui.models.model_path(name), S.text, decoding, by_sentence)
except InputError as e:
    st.warning(str(e))
    st.stop()

# ------------------------------------------------------------------ result
out, toggle = st.columns([3, 2])
with out:
    ui.show.escaped(d.translation or "(empty output)")
    cut = ui.decoded.cut_note(tr, d, S.text, S.maxlen, by_sentence)      # a forced </s> too (Marian's)
    stopped = f" · **{cut}**" if cut else ""
    if S.norepeat and S.method != "sample":
        stopped += f" · repeated {S.norepeat}-grams blocked"
    n_out = len(d.target_tokens)
    hub = tr.config.get("hub")
    weights = f" {str(next(tr.model.parameters()).dtype).removeprefix('torch.')}" if hub else ""
    st.caption(f"French · {METHODS[S.method]} · {n_out} piece{'s' if n_out != 1 else ''} · log p = {d.log_prob:.2f} · "
               f"decoded in {ms:.0f} ms on {tr.device.type.upper()}{weights}{stopped}")
view_box, play_box = toggle.columns([3, 2], vertical_alignment="center")
words = view_box.segmented_control("Show tokens as", ["words", "pieces"], key="view", label_visibility="collapsed",
                                   help="Subword pieces are what the model reads and writes; a whole word's source "
                                        "weights are summed, its output rows averaged",
                                   format_func={"words": "Whole words", "pieces": "Pieces"}.get) == "words"
# ▶ Play redraws the heatmap below one output step at a time: on the first screen, where the
# class is looking (the Step by step tab replays it too, further down)
play = d.attention is not None and play_box.button(
    "▶ Play", key="play_main", width="stretch", disabled=by_sentence,
    help="Replay the decoder filling in the heatmap, one output piece a step "
         "(seconds per step: the Step by step tab)" + ("; one decoding at a time, so not sentence by sentence"
                                                       if by_sentence else ""))
if S.method == "sample" and S.temp > 1.0:
    st.caption(f"Sampling at temperature {S.temp:.2f} > 1 flattens softmax(logits / T): unlikely pieces are drawn "
               "more often than the model's own probabilities say, so odd words are expected. T < 1 sharpens.")
letters = [ch for ch in S.text if ch.isalpha()]
if len(letters) >= 8 and sum(ch.isupper() for ch in letters) > 0.8 * len(letters):
    pieces, usual = len(tr.tokenizer.encode(S.text)), len(tr.tokenizer.encode(S.text.capitalize()))
    st.caption(f"Your text is in capitals: the model reads it as {pieces} pieces, against {usual} in sentence case, "
               "because its vocabulary was learned from sentence-case text. Rare pieces give odd output; "
               "try it in sentence case.")
unknown = tr.tokenizer.unknown_characters(S.text)
if unknown:
    st.caption(ui.show.unknown_characters_note(unknown, "your text",
                                               ", a symbol it learned almost nothing about, so expect odd output"))
if tr.train_words and (unseen := unseen_words(S.text, tr.train_words)):    # out of its depth: words it never saw
    others = [i for i in ui.models.hub_models() if i.error is None and translates_english_to_french(i.name, i.model)]
    n = len(unseen)
    note, try_box = st.columns([3, 1.3], vertical_alignment="center") if others else (st.container(), None)
    note.caption(f"{n} word{'s' if n > 1 else ''} of your text never occur{'s' if n == 1 else ''} in the English of "
                 f"this model's {tr.train_pairs:,} training pairs: "
                 + " ".join(ui.show.code_span(w) for w in unseen[:12])
                 + (" …" if n > 12 else "") + ". It can only copy or guess "
                 + ("them" if n > 1 else "it") + ", so expect odd output around "
                 + ("them." if n > 1 else "it."))
    if try_box is not None:
        try_box.button(f"Try it with {display_name(others[0].name)}", key="try_hub", on_click=choose_model,
                       args=(others[0].name,), help="A Hugging Face model the server's operator offers for "
                                                    "English→French, trained on far more text")
shown, title = d.attention, None        # what the heatmap shows: for a Transformer, the layer and head chosen
if d.attention is None:
    st.info("This model has **no attention**: its decoder sees one fixed vector (the final encoder state) at "
            "every step, so there is no alignment to draw. The **Bottleneck** page puts it beside an attention "
            "model on the same sentence.")
    st.page_link("pages/bottleneck.py", label="Open the Bottleneck page", icon=":material/compress:")
else:
    if d.cross_attention is not None:     # a Transformer: any layer's cross-attention, one head or their mean
        L, H = d.cross_attention.shape[:2]      # the choices were checked against them: check_choices
        c1, c2 = toggle.columns(2)
        layer = c1.selectbox("Layer", range(L), key="tf_layer",
                             format_func=lambda l: f"{l + 1}" + (" (last)" if l == L - 1 else ""))
        # "mean", of any number of heads: a label that names the same choice under every model. A
        # mean written through session state (?head=mean, a head out of this model's range) reaches
        # the browser as no value at all, which shows the placeholder: the same word
        head = c2.selectbox("Head", [None, *range(H)], key="tf_head", placeholder="mean",
                            format_func=lambda h: "mean" if h is None else f"{h + 1}")
        shown, title = attention_of(d, layer, head), "cross-attention, " + head_label(layer, head, L, H)
    slot = st.empty()       # the heatmap, untitled (the Layer and Head boxes say which); ▶ Play animates it
    under = st.container()  # under it: which of its labels did not fit, if any
    if d.cross_attention is not None:
        st.caption(f"A Transformer has {L} layers × {H} heads of cross-attention. The mean of the last layer's heads "
                   + ("is the matrix the other views show" if hub else
                      "is the matrix its copy mechanism uses and the one other views show")
                   + "; the **Heads** tab draws every layer and head, and its encoder and decoder self-attention.")
    src, tgt, a = ui.decoded.view_of(d, words, shown)
    final = attention_heatmap(src, tgt, a)
    if play:
        def show_step(j: int, partial: Decoding) -> None:
            ps, pt, pa = ui.decoded.view_of(partial, words,
                                            attention_of(partial, *((layer, head) if title else (None, None))))
            blank = max(0, len(tgt) - len(pt))      # rows still to come: empty, so the matrix fills in row by row
            pa = np.vstack([pa, np.full((blank, pa.shape[1]), np.nan)])
            ui.show.plotly_chart(attention_heatmap(ps, pt + [""] * blank, pa, height=final.layout.height),
                              key=f"main_live{j}", config=ui.show.camera(f"main_live{j}", name, S.text[:40]),
                              where=slot)
            time.sleep(S.get("delay", 0.4))
        forced(tr, S.text, reference_ids=d.target_ids, on_step=show_step)
    ui.show.plotly_chart(final, key="heatmap", config=ui.show.camera("attention", name, S.text[:40]), where=slot)
    ui.show.thinned_note(final, under)
    export_row(d, name, S.text, settings, words, src, tgt, a, title, final)

# Only the open tab runs (on_change="rerun"): a class of 30 re-running every tab's decodes
# and figures on each click would waste the shared CPU on views nobody is looking at.
# (Their widgets' values are kept above, for when a tab reopens.)
S.setdefault("delay", 0.4)
# nine tabs: 738 px of labels, 8 px apart, fit the main column's 820 px on one row at 1280 x 720;
# more wrap onto a second row (ui.show.tabs), every label in sight, none scrolled away
tabs = ui.show.tabs(TABS, key="tab", on_change="rerun")
if arrival.get("tab") in TABS:     # a link to a tab (the Start page's): show the tab, not the heatmap above it
    ui.address.scroll_into_view(ui.lens_panel.LANDING if lens_landing else
                                ui.contrast_panel.landing(arrival) or '[data-testid="stTabs"]')

with tabs[0]:
    if tabs[0].open:
        walked = ui.what_if.steer_panel(tr, d, words, name, S.text, decoding, METHODS[S.method])
        ui.translate_tabs.step_by_step(tr, walked, words, name, S.text, steer=ui.what_if.steer_controls)
with tabs[1]:
    if tabs[1].open:
        greedy_d = None
        if S.method == "beam" and d.nbest and d.nbest[0].coverage is not None:     # the same settings, greedy
            greedy = replace(decoding, method="greedy").canonical()
            greedy_d, _ = ui.decoded.decode_cached(ui.models.model_path(name), S.text, greedy, by_sentence)
        ui.translate_tabs.beam_tree(d, S.method, name, S.text, greedy_d)
        if S.method == "beam" and d.beam_tree:
            ui.what_if.beam_alternatives(tr, d)
            ui.what_if.steer_panel(tr, d, words, name, S.text, decoding, METHODS[S.method], key="beam_steer")
with tabs[2]:
    if tabs[2].open:
        ui.translate_tabs.forced_decoding(tr, d, words, name, S.text, S.method, METHODS[S.method],
                                          continue_from=lambda ref: ui.what_if.continue_reference(
                                              tr, d, words, name, S.text, decoding, METHODS[S.method], ref))
with tabs[3]:
    if tabs[3].open:
        ui.translate_tabs.compare_attention(words, name, S.text, DecodeSettings("greedy", max_len=S.maxlen))
with tabs[4]:
    if tabs[4].open:
        ui.translate_tabs.alignment_lines(d, words, name, S.text, shown, title)
with tabs[5]:
    if tabs[5].open:
        ui.translate_tabs.heads(tr, d, words, name, S.text, decoding, by_sentence)
with tabs[6]:
    if tabs[6].open:
        ui.translate_tabs.attention_emerges(tr, d, words, name, S.text)
with tabs[7]:
    if tabs[7].open:
        ui.what_if.compare_edit(tr, d, words, name, S.text, decoding, METHODS[S.method], by_sentence)
with tabs[8]:
    if tabs[8].open:
        ui.what_if.neighbours_tab(tr, d, words, name, S.text)

# ------------------------------------------------------------------ the model drawn
drawn = st.expander("The model drawn, with its real sizes", key="diagram_open", on_change="rerun")
with drawn:
    if drawn.open and tr.config.get("hub"):     # the diagram draws the lesson's models only
        st.caption(f"{tr.description}. The diagram draws the lesson's own models; this one is read from its "
                   "Hugging Face config.")
    elif drawn.open:     # only once opened: a closed expander's chart would be redrawn on every Translate
        ui.show.plotly_chart(model_diagram(tr.config["model"], sum(p.numel() for p in tr.model.parameters())),
                        key="model_diagram", config=ui.show.camera("model_diagram", name, S.text[:40]))
        st.caption(tr.description)
ui.address.set_address(page_address())     # what the tabs chose as they drew (see above)
