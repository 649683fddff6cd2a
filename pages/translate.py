"""Translate & Align: live decoding with attention heatmaps.

The page is layout and widgets only; decoding is s2s.decode, figures are s2s.figures.
"""
from __future__ import annotations  # Decoding in the signatures below is imported after the form

import streamlit as st

import ui

ui.run_through_app()       # a link's first run in Streamlit's old multipage mode: rerun through app.py
ui.load_plotly_early()     # before the imports below: on a cold server they wait for torch

import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from s2s.export import file_stem, matrix_csv, matrix_json, plotly_html, positions  # noqa: E402
from s2s.figures import (
    alignment_lines,
    attention_heatmap,
    beam_tree_figure,
    head_of_trace,
    heads_grid,
    matrix_heatmap,
    model_colors,
    model_diagram,
    scaling_figure,
    token_bars,
)
from s2s.hub import display_name, translates_english_to_french
from s2s.piece_words import argmax_alignment, mean_entropy, merge_to_words, word_spans
from s2s.text import MAX_BEAM, MAX_CHARS, MAX_DECODE_LEN, MAX_NO_REPEAT, InputError

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
SCALING_DIMS = [4, 16, 64, 256, 1024]     # query/key sizes for the "why sqrt(d)" view
METHODS = {"greedy": "Greedy", "beam": "Beam search", "sample": "Sampling"}
TABS = ["Step by step", "Beam tree", "Forced decoding", "Compare attention", "Alignment lines", "Heads",
        "Attention emerges"]
HEAD_KINDS = {"cross": "Cross-attention: output → source", "encoder": "Encoder self-attention: source → source",
              "decoder": "Decoder self-attention: output → earlier output"}
DEFAULTS = dict(text=EXAMPLES[0], method="greedy", beam=5, nbest=3, temp=1.0, topk=0, seed=0, maxlen=120, norepeat=0,
                view="words", tab=TABS[0], reference="")     # all can come from the URL (?text=...&tab=Beam+tree)
RANGES = dict(beam=(1, MAX_BEAM), nbest=(1, MAX_BEAM), temp=(0.1, 2.0), topk=(0, 200), seed=(0, 2**31 - 1),
              maxlen=(1, MAX_DECODE_LEN), norepeat=(0, MAX_NO_REPEAT))
CHOICES = dict(method=list(METHODS), view=["words", "pieces"], tab=TABS)


# Cached results are shared by every session of the server, so they keep only what this page
# shows: without the state vectors a result is ~9 KB for a 20-word sentence and at most
# ~0.42 MB (200 pieces in, 250 out; `python -m s2s.bench`), so a full cache stays ~110 MB.
@st.cache_data(max_entries=256, show_spinner=False)
def decode_cached(path: str, text: str, settings: DecodeSettings) -> tuple[Decoding, float]:
    """One decoding, keyed by the model, the text and the settings object."""
    tr = ui.load_path(path)
    t = time.perf_counter()
    d = decode(tr, text, settings)
    return d.without_states(), (time.perf_counter() - t) * 1000


def settings_of(method: str, beam: int, nbest: int, temp: float, topk: int, seed: int, maxlen: int,
                norepeat: int = 0) -> DecodeSettings:
    """The page's widgets as one DecodeSettings (the options a method does not read stay at
    their defaults, so that they do not split the cache)."""
    if method == "beam":
        return DecodeSettings("beam", width=beam, n_best=min(nbest, beam), max_len=maxlen, no_repeat=norepeat)
    if method == "sample":
        return DecodeSettings("sample", temperature=temp, top_k=topk, seed=seed, max_len=maxlen)
    return DecodeSettings("greedy", max_len=maxlen, no_repeat=norepeat)


@st.cache_data(max_entries=64, show_spinner=False)
def forced_cached(path: str, text: str, reference: str) -> Decoding:
    return forced(ui.load_path(path), text, reference).without_states()


@st.cache_data(max_entries=100, show_spinner=False)
def scaling_cached(n_keys: int) -> dict:
    return scaling_statistics(SCALING_DIMS, n_keys=n_keys, samples=500)


def as_words(x: list[str], y: list[str], a: np.ndarray, words: bool) -> tuple[list[str], list[str], np.ndarray]:
    """A (len(y) x len(x)) attention matrix as pieces, or merged into whole words."""
    return merge_to_words(x, y, a) if words else (list(x), list(y), a)


def view_of(d: Decoding, words: bool, attention: np.ndarray | None = None) -> tuple[list[str], list[str], np.ndarray]:
    """The (target x source) attention, d.attention unless another is given, as pieces or words."""
    return as_words(d.source_tokens, d.target_tokens, d.attention if attention is None else attention, words)


def explain_scores(d: Decoding, f: Decoding, reference: str) -> None:
    """BLEU of the model's output against the reference, part by part, and each reference
    token's probability and rank under the model."""
    b = bleu_breakdown(d.translation, reference)
    st.markdown("**BLEU of the model's output against this reference**, from sacrebleu's own counts:")
    rows = [{"n-gram": n, "matching / in output": f"{m} / {t}", "p_n": "–" if p is None else f"{p:.3f}"}
            for n, m, t, p in zip(range(1, 5), b["matches"], b["totals"], b["precisions"])]
    c1, c2 = st.columns([3, 2])
    with c1:
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="bleu_table")
    with c2:
        st.markdown(f"brevity penalty BP = min(1, e^(1 − {b['ref_len']}/{b['hyp_len']})) = **{b['bp']:.3f}**  \n"
                    f"BLEU-2 = BP · (p₁p₂)^½ = **{b['bleu2'] / 100:.3f}**  \n"
                    f"BLEU-4 = BP · (p₁p₂p₃p₄)^¼ = **{b['bleu4'] / 100:.3f}**  \n"
                    f"chrF = **{b['chrf']:.1f}**")
        zeros = [f"p{n}" for n, m in zip("₁₂₃₄", b["matches"]) if m == 0]
        st.caption("One sentence and one reference: BLEU is meant for a whole test set."
                   + (" Here no word of the output is in the reference (p₁ = 0), so BLEU is 0 however it is "
                      "smoothed." if b["matches"][0] == 0 else
                      f" Here {', '.join(zeros)} = 0, which would make the product 0; sacrebleu smooths the zero "
                      "counts instead." if zeros else ""))
    tokens = pd.DataFrame({"reference token": f.target_tokens, "p": np.exp(f.token_log_probs).round(4),
                           "rank": f.token_ranks})
    with st.expander("Each reference token's probability and rank (1 = the model's first choice)"):
        st.dataframe(tokens, hide_index=True, key="token_ranks")


def heatmap(d: Decoding, words: bool, key: str, height: int | None = None, color: str | None = None,
            attention: np.ndarray | None = None, title: str | None = None):
    """The attention heatmap (d.attention unless another is given); `color` shades it from
    white to a model's own colour instead."""
    src, tgt, a = view_of(d, words, attention)
    fig = (attention_heatmap(src, tgt, a, height=height, title=title) if color is None else
           matrix_heatmap(src, tgt, a, colorscale=[[0, "#ffffff"], [1, color]], height=height, title=title))
    st.plotly_chart(fig, key=key, config=ui.camera(key, name, S.text[:40]))


def head_label(layer: int, head: int | None, layers: int, heads: int) -> str:
    return (f"layer {layer + 1}" + (" (last)" if layer == layers - 1 else "") + " · "
            + (f"mean of {heads} heads" if head is None else f"head {head + 1}"))


def pick_head(layers: int, heads: int) -> None:
    """A click on one of the Heads grid's small heatmaps enlarges it."""
    points = S.heads_grid.selection.points if S.get("heads_grid") else []
    picked = head_of_trace(int(points[0]["curve_number"]), layers, heads) if points else None
    if picked:
        S.heads_layer, S.heads_head = picked


def export_row(d: Decoding, model: str, settings: dict, words: bool, src: list, tgt: list, a: np.ndarray,
               title: str | None, fig) -> None:
    """Below the heatmap: the chart (offline HTML) and the matrix shown (CSV, JSON), each named
    for the model, the settings, the view and the text; for a Transformer, all its heads too."""
    what = (title or "attention") + f", {'whole words' if words else 'pieces'}: output (rows) x source (columns)"
    used = {k: v for k, v in settings.items() if k in SETTINGS_READ[settings["method"]]}
    stem = file_stem("attention", model, *[f"{k}{v}" for k, v in used.items() if k != "method"], used["method"],
                     (title or "").replace("cross-attention, ", ""), "words" if words else "pieces", S.text[:40])
    record = {"model": model, "english": S.text, "translation": d.translation, "settings": used,
              "view": "words" if words else "pieces", "matrix": what, "attention": matrix_json(a, tgt, src)}
    c = st.columns(4 if d.cross_attention is not None else 3)
    c[0].download_button("⬇ Chart (HTML)", lambda: plotly_html(fig, stem), file_name=f"{stem}.html",
                         mime="text/html", on_click="ignore", key="export_html",
                         help="One file that draws this heatmap interactively, offline")
    c[1].download_button("⬇ CSV", matrix_csv(a, tgt, src, f"{model}; {json.dumps(used)}; {what}; {S.text}"),
                         file_name=f"{stem}.csv", mime="text/csv", on_click="ignore", key="export_csv",
                         help="The matrix shown; rows and columns are positions with their tokens")
    c[2].download_button("⬇ JSON", json.dumps(record, ensure_ascii=False, indent=1), file_name=f"{stem}.json",
                         mime="application/json", on_click="ignore", key="export_json",
                         help="The matrix shown, with the model, the text, the settings and what it is")
    if d.cross_attention is not None:
        heads = {"model": model, "english": S.text, "translation": d.translation, "settings": used,
                 "source_pieces": positions(d.source_tokens), "output_pieces": positions(d.target_tokens),
                 "shapes": "(layers, heads, rows, columns), pieces: cross (output x source), encoder (source x "
                           "source), decoder (output x earlier output)"}
        for kind, w in (("cross", d.cross_attention), ("encoder", d.encoder_self_attention),
                        ("decoder", d.decoder_self_attention)):
            if w is not None:
                heads[kind] = np.round(np.asarray(w, dtype=float), 5).tolist()
        c[3].download_button("⬇ All heads (JSON)", json.dumps(heads, ensure_ascii=False),
                             file_name=f"{file_stem('heads', model, used['method'], S.text[:40])}.json",
                             mime="application/json", on_click="ignore", key="export_heads",
                             help="Every layer and head of the cross-attention and both self-attentions, in pieces")


# the settings each method reads (the others would only mislead an export's reader)
SETTINGS_READ = {"greedy": ("method", "maxlen", "norepeat"), "beam": ("method", "beam", "nbest", "maxlen", "norepeat"),
                 "sample": ("method", "temp", "topk", "seed", "maxlen")}


def choose_model(name: str) -> None:
    """The "Try it with …" button: the same text with another model (before the picker draws)."""
    st.session_state.model = name


def set_example():
    if st.session_state.example is not None:       # None when the box is cleared
        st.session_state.text = st.session_state.example


# ------------------------------------------------------------------ input
# Compact, so that on a 1280 x 720 projector the translation and the heatmap are on the first
# screen after Translate: the examples beside the title, the text box without a label line,
# the decoding settings folded beside the method. (Not in an st.popover: a popover mounts its
# widgets only when opened, and these then showed their minimum, not the values the URL set.)
head, pick = st.columns([3, 2], vertical_alignment="bottom")
head.title("Translate & Align", help="Type an English sentence and watch an encoder-decoder translate it to French: "
                                     "which source words each output word attends to, step by step.")
# Streamlit forgets the state of a widget that a run does not draw: a closed tab's widgets, the
# words/pieces control when a warning below stops the page, and every one of them while the
# reader is on another page. Keep their values for the run that draws them again.
ui.keep_across_pages("model", *DEFAULTS, "delay", "probe")
arrival = ui.arrival_query("translate")
for note in ui.state_from_query(arrival, DEFAULTS, RANGES, CHOICES):
    st.info(note)
# a Transformer's layer and head (from 1; checked against the model once it is loaded)
for key, state in (("layer", "tf_layer"), ("heads_layer", "heads_layer"), ("heads_head", "heads_head")):
    if arrival.get(key, "").isdigit():
        st.session_state[state] = int(arrival[key]) - 1
if "head" in arrival:
    st.session_state["tf_head"] = None if arrival["head"] == "mean" or not arrival["head"].isdigit() else int(arrival["head"]) - 1
if arrival.get("heads") in HEAD_KINDS:
    st.session_state["heads_kind"] = arrival["heads"]
name = ui.model_picker()
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
    submitted = c3.form_submit_button("Translate", type="primary", width="stretch")

# Decoding imports torch. On a cold server the warm-up is still importing it, and this line
# waits: the form above is already in the browser, which loads its widgets' code meanwhile,
# instead of after the wait, just before the heatmap.
from s2s.attention import SCORES, scaling_statistics  # noqa: E402
from s2s.data import unseen_words  # noqa: E402
from s2s.decode import DecodeSettings, Decoding, attention_heads, attention_of, decode, forced, is_search_error  # noqa: E402
from s2s.evaluate import bleu_breakdown  # noqa: E402

tr = ui.get_model(name)
if tr is None:
    st.stop()

S = st.session_state
settings = dict(method=S.method, beam=S.beam, nbest=S.nbest, temp=float(S.temp), topk=int(S.topk),
                seed=int(S.seed), maxlen=S.maxlen, norepeat=int(S.norepeat))
# The address follows every choice that changes what is shown, on every run (not only when
# Translate is pressed), so a copied link reproduces the view: the model, the text, the
# decoding, words or pieces, the tab, the reference, and a Transformer's layer and head.
ui.set_address({"model": name, "text": S.text, "view": S.get("view"), "tab": S.get("tab", TABS[0]),
                **settings, "reference": S.get("reference") or None,
                "layer": None if S.get("tf_layer") is None else S.tf_layer + 1,
                "head": None if "tf_layer" not in S else ("mean" if S.get("tf_head") is None else S.tf_head + 1),
                "heads": S.get("heads_kind"),
                "heads_layer": None if S.get("heads_layer") is None else S.heads_layer + 1,
                "heads_head": None if S.get("heads_head") is None else S.heads_head + 1})
if S.get("view") not in CHOICES["view"]:      # None once its selected option is clicked again
    S.view = DEFAULTS["view"]
try:
    d, ms = decode_cached(ui.model_path(name), S.text, settings_of(**settings))
except InputError as e:
    st.warning(str(e))
    st.stop()

# ------------------------------------------------------------------ result
out, toggle = st.columns([3, 2])
with out:
    ui.escaped(d.translation or "(empty output)")
    stopped = "" if d.target_tokens[-1] == "</s>" else " · stopped at the max length"
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
    "▶ Play", key="play_main", width="stretch", help="Replay the decoder filling in the heatmap, one output piece a step "
                                             "(seconds per step: the Step by step tab)")
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
    st.caption(ui.unknown_characters_note(unknown, "your text",
                                          ", a symbol it learned almost nothing about, so expect odd output"))
if tr.train_words and (unseen := unseen_words(S.text, tr.train_words)):    # out of its depth: words it never saw
    others = [i for i in ui.hub_models() if i.error is None and translates_english_to_french(i.name, i.model)]
    n = len(unseen)
    note, try_box = st.columns([3, 1.3], vertical_alignment="center") if others else (st.container(), None)
    note.caption(f"{n} word{'s' if n > 1 else ''} of your text never occur{'s' if n == 1 else ''} in the English of "
                 f"this model's {tr.train_pairs:,} training pairs: " + " ".join(ui.code_span(w) for w in unseen[:12])
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
        L, H = d.cross_attention.shape[:2]
        if not (0 <= S.get("tf_layer", L - 1) < L) or S.get("tf_head") not in (None, *range(H)):
            S.tf_layer, S.tf_head = L - 1, None          # another Transformer's choice, out of this one's range
        c1, c2 = toggle.columns(2)
        layer = c1.selectbox("Layer", range(L), index=L - 1, key="tf_layer",
                             format_func=lambda l: f"{l + 1}" + (" (last)" if l == L - 1 else ""))
        head = c2.selectbox("Head", [None, *range(H)], key="tf_head",
                            format_func=lambda h: f"mean of {H}" if h is None else f"{h + 1}")
        shown, title = attention_of(d, layer, head), "cross-attention, " + head_label(layer, head, L, H)
    slot = st.empty()       # the heatmap, untitled (the Layer and Head boxes say which); ▶ Play animates it
    if d.cross_attention is not None:
        st.caption(f"A Transformer has {L} layers × {H} heads of cross-attention. The mean of the last layer's heads "
                   + ("is the matrix the other views show" if hub else
                      "is the matrix its copy mechanism uses and the one other views show")
                   + "; the **Heads** tab draws every layer and head, and its encoder and decoder self-attention.")
    src, tgt, a = view_of(d, words, shown)
    final = attention_heatmap(src, tgt, a)
    if play:
        def show_step(j: int, partial: Decoding) -> None:
            ps, pt, pa = view_of(partial, words, attention_of(partial, *((layer, head) if title else (None, None))))
            blank = max(0, len(tgt) - len(pt))      # rows still to come: empty, so the matrix fills in row by row
            pa = np.vstack([pa, np.full((blank, pa.shape[1]), np.nan)])
            slot.plotly_chart(attention_heatmap(ps, pt + [""] * blank, pa, height=final.layout.height),
                              key=f"main_live{j}", config=ui.camera(f"main_live{j}", name, S.text[:40]))
            time.sleep(S.get("delay", 0.4))
        forced(tr, S.text, reference_ids=d.target_ids, on_step=show_step)
    slot.plotly_chart(final, key="heatmap", config=ui.camera("attention", name, S.text[:40]))
    export_row(d, name, settings, words, src, tgt, a, title, final)
if S.method == "beam" and d.nbest:      # below the heatmap: the first screen shows the translation and its alignment
    st.dataframe(pd.DataFrame([{"rank": i + 1, "translation": h.translation, "log p": round(h.log_prob, 3),
                                "score (log p / lp)": round(h.score, 3)} for i, h in enumerate(d.nbest)]),
                 hide_index=True, width="stretch")

# Only the open tab runs (on_change="rerun"): a class of 30 re-running every tab's decodes
# and figures on each click would waste the shared CPU on views nobody is looking at.
# (Their widgets' values are kept above, for when a tab reopens.)
S.setdefault("delay", 0.4)
tabs = st.tabs(TABS, key="tab", on_change="rerun")
if arrival.get("tab") in TABS:     # a link to a tab (the Start page's): show the tab, not the heatmap above it
    ui.scroll_into_view('[data-testid="stTabs"]')

# ------------------------------------------------------------------ step by step
with tabs[0]:
    if tabs[0].open:
        st.caption("Replay the decoder: at each step it attends over the source, then picks the next token.")
        c1, c2 = st.columns([1, 3])
        delay = c1.slider("Seconds per step", 0.0, 1.5, step=0.1, key="delay")
        if c1.button("▶ Play decoding", key="play"):
            box, tokens_box = st.empty(), st.empty()

            def show(j, partial):
                tokens_box.markdown("**So far:** " + " ".join(ui.code_span(t) for t in partial.target_tokens))
                if partial.attention is not None:
                    src, tgt, a = view_of(partial, words)
                    box.plotly_chart(attention_heatmap(src, tgt, a, height=max(320, 120 + 26 * len(d.target_tokens))),
                                     key=f"live{j}", config=ui.camera(f"live{j}", name, S.text[:40]))
                time.sleep(delay)

            forced(tr, S.text, reference_ids=d.target_ids, on_step=show)
        # one step per output word when words are shown: a word's pieces are consecutive steps
        spans = word_spans(d.target_tokens) if words else [(tok, [j]) for j, tok in enumerate(d.target_tokens)]
        unit = "word" if words else "piece"
        n = len(spans)
        if S.get("step", 1) > n:
            S.step = n
        t = st.slider(f"Step ({unit}s)", 1, n, 1, key="step") - 1 if n > 1 else 0
        chosen, idx = spans[t]
        p = float(np.exp(sum(d.token_log_probs[j] for j in idx)))
        pieces = "" if len(idx) == 1 else " (pieces " + " ".join(ui.code_span(d.target_tokens[j]) for j in idx) + ")"
        st.markdown(f"Step **{t + 1}** of {n} {unit}s: the decoder chose {ui.code_span(chosen)}{pieces} "
                    f"(p = {p:.3f})")
        c1, c2 = st.columns(2)
        with c1:
            st.markdown("**Attention over the source** (α at this step" + (", averaged over the word's pieces)"
                                                                           if len(idx) > 1 else ")"))
            if d.attention is not None:
                src, _, a = view_of(d, words)
                st.plotly_chart(token_bars(src, a[t], "attention weight α", highlight=int(a[t].argmax())),
                                key="step_attn", config=ui.camera("step_attn", name, S.text[:40]))
            else:
                st.caption("No attention in this model.")
        with c2:
            first = idx[0]
            st.markdown("**Most likely next tokens**" + (" (for the word's first piece)" if len(idx) > 1 else ""))
            top = d.step_top[first] if first < len(d.step_top) else []
            toks = [tok for tok, _ in top]
            here = d.target_tokens[first]
            st.plotly_chart(token_bars(toks, [p for _, p in top], "probability",
                                       highlight=toks.index(here) if here in toks else None), key="step_top", config=ui.camera("step_top", name, S.text[:40]))

# ------------------------------------------------------------------ beam tree
with tabs[1]:
    if tabs[1].open:
        if S.method != "beam":
            st.info("Choose **Beam search** (beside Greedy, under the text) and press Translate to see its tree; "
                    "its width is under Decoding settings.")
        else:
            st.caption("Every hypothesis the beam kept at every step. Bold paths are the final n-best, the darkest "
                       "is the winner; red dots are finished hypotheses (they emitted </s>). A finished hypothesis leaves the "
                       "beam, which refills to its width, so a step can show more dots than the width. Scores are "
                       "log p / ((5+|y|)/6)^0.6, so longer outputs are not penalised for their length alone.")
            st.plotly_chart(beam_tree_figure(d.beam_tree, [h.node for h in d.nbest]), key="beam_tree", config=ui.camera("beam_tree", name, S.text[:40]))

# ------------------------------------------------------------------ forced decoding
with tabs[2]:
    if tabs[2].open:
        st.caption("Paste a reference translation: the model is forced to produce it, and you see how it aligns "
                   "and how likely it finds each token.")
        with st.form("forced"):
            ref = st.text_input("Reference (French)", key="reference",
                                help=f"Up to {MAX_CHARS:,} characters.")
            go = st.form_submit_button("Score this translation")
        if ref.strip():
            try:
                f = forced_cached(ui.model_path(name), S.text, ref)
            except InputError as e:
                st.warning(str(e))
            else:
                if unknown_ref := tr.tokenizer.unknown_characters(ref, target=True):
                    st.caption(ui.unknown_characters_note(unknown_ref, "the reference"))
                ppl = float(np.exp(-f.log_prob / len(f.target_tokens)))
                st.markdown(f"log p(reference) = **{f.log_prob:.2f}**, perplexity **{ppl:.2f}** "
                            f"(the model's own output: log p = {d.log_prob:.2f})")
                st.caption(f"Perplexity exp(−log p / {len(f.target_tokens)} tokens) is the Shannon game's score: "
                           f"at each token the model was, on average, as unsure as if it chose among {ppl:.1f} "
                           "equally likely tokens.")
                if is_search_error(d, f, S.method):
                    by = "log p" if S.method == "greedy" else "log p / lp(|y|), the score beam search ranks by"
                    st.warning(f"Search error: the model scores this reference higher than its own "
                               f"{METHODS[S.method].lower()} output by {by} (log p {f.log_prob:.2f} against "
                               f"{d.log_prob:.2f}). The model prefers the reference; the search did not find it.")
                c1, c2 = st.columns([3, 2])
                with c1:
                    if f.attention is not None:
                        heatmap(f, words, "forced_heatmap")
                with c2:
                    st.plotly_chart(token_bars(f.target_tokens, f.token_log_probs, "log p(token)",
                                               highlight=int(np.argmin(f.token_log_probs))), key="forced_lp", config=ui.camera("forced_lp", name, S.text[:40]))
                    st.caption("The darkest bar is the token the model found least likely.")
                explain_scores(d, f, ref)

# ------------------------------------------------------------------ compare attention
with tabs[3]:
    if tabs[3].open:
        by_attention, transformers = {}, []   # one recurrent model per scoring function, read from the configs
        for info in ui.translation_models():
            if info.error is None and info.arch == "rnn" and info.attention in SCORES:
                by_attention.setdefault(info.attention, info.name)
            elif info.error is None and info.arch == "transformer":
                transformers.append(info.name)
        shown = [s for s in SCORES if s in by_attention]
        if len(shown) < len(SCORES):
            st.caption("No model in checkpoints/ with " + ", ".join(f"{s}" for s in SCORES if s not in shown)
                       + " attention.")
        st.caption("The same input through the recurrent models' attention functions"
                   + (" and the Transformer (its last layer's cross-attention, the mean of its heads)" if transformers
                      else "") + ", greedy. Entropy is the mean over output tokens of −Σ α log α (nats): 0 means "
                   "each output token looks at one source token.")
        # (label, model, family): each model in its own colour, the one it has on every page
        panels = [(score, by_attention[score], score) for score in shown] + \
                 [(f"Transformer ({t})" if len(transformers) > 1 else "Transformer", t, "transformer")
                  for t in transformers]
        colors = model_colors({other: family for _, other, family in panels})
        cols = st.columns(2)
        for k, (score, other, family) in enumerate(panels):
            with cols[k % 2]:
                try:
                    od, _ = decode_cached(ui.model_path(other), S.text, settings_of("greedy", 1, 1, 1.0, 0, 0, S.maxlen))
                except Exception as e:   # a missing or broken checkpoint must not break the page
                    st.warning(f"{other}: {e}")
                    continue
                color = colors[other]       # a constant from s2s.figures, never user text
                st.markdown(f"<span style='color:{color};font-size:1.4em;line-height:1'>■</span> "
                            f"**{score}** · entropy {mean_entropy(od.attention):.2f}", unsafe_allow_html=True)
                ui.escaped(od.translation, size="1.05rem")
                heatmap(od, words, f"cmp_{family if family != 'transformer' else other}",
                        height=320 + 14 * len(od.target_tokens), color=color)
                src, tgt, a = view_of(od, words)
                st.caption("Argmax alignment: " + " · ".join(f"{t}→{s}" for t, s, _ in argmax_alignment(src, tgt, a)))
        # drawn only once opened (a rerun): a chart in a closed expander is still sent and drawn
        sqrt_d = st.expander("Why does scaled-dot divide by √d?", key="sqrt_d_open", on_change="rerun")
        with sqrt_d:
            if sqrt_d.open:
                n_keys = st.slider("Keys (source positions)", 2, 100, 20, key="sqrt_keys")
                stats = scaling_cached(n_keys)
                st.plotly_chart(scaling_figure(stats), key="sqrt_d", config=ui.camera("sqrt_d", name, S.text[:40]))
                i = stats["d"].index(256)
                st.caption(f"Random queries and keys with N(0, 1) entries: q·k has variance d. At d = 256 the raw scores "
                           f"spread with standard deviation {stats['std_unscaled'][i]:.1f}, and softmax puts almost all "
                           f"weight on one key (entropy {stats['entropy_unscaled'][i]:.2f} nats); divided by √d they "
                           f"spread with {stats['std_scaled'][i]:.1f} and the entropy stays {stats['entropy_scaled'][i]:.2f} "
                           f"of at most {stats['max_entropy']:.2f}. A saturated softmax has near-zero gradients.")

# ------------------------------------------------------------------ alignment lines
with tabs[4]:
    if tabs[4].open:
        if d.attention is None:
            st.info("No attention in this model.")
        else:
            st.caption("Each line joins an output token to a source token; its opacity is the attention weight."
                       + (f" Shown: the heatmap's {title}." if title else ""))
            src, tgt, a = view_of(d, words, shown)
            st.plotly_chart(alignment_lines(src, tgt, a), key="lines", config=ui.camera("lines", name, S.text[:40]))

# ------------------------------------------------------------------ heads (a Transformer's)
with tabs[5]:
    if tabs[5].open:
        if d.cross_attention is None:
            others = [i.name for i in ui.translation_models() if i.error is None and i.arch == "transformer"]
            st.info("Heads belong to a Transformer. "
                    + ("A recurrent model has one attention distribution per output step: the heatmap above. "
                       if d.attention is not None else "This model has no attention at all (see the note above). ")
                    + (f"Choose {' or '.join(others)} under Translation model to see "
                                                   "its layers × heads." if others else
                                                   "There is no Transformer in checkpoints/."))
        else:
            kind = st.radio("Attention", list(HEAD_KINDS), format_func=HEAD_KINDS.get, horizontal=True,
                            key="heads_kind", label_visibility="collapsed")
            x, y, w = attention_heads(d, kind)
            if words:      # each head's matrix merged into words, as the heatmap above
                merged = [[as_words(x, y, w[l, h], True) for h in range(w.shape[1])] for l in range(w.shape[0])]
                x, y = merged[0][0][:2]
                w = np.array([[m[2] for m in row] for row in merged])
            L, H = w.shape[:2]
            if not (0 <= S.get("heads_layer", -1) < L and 0 <= S.get("heads_head", -1) < H):   # the last layer first
                S.heads_layer, S.heads_head = L - 1, 0
            grid, big = st.columns([3, 2])
            with big:
                c1, c2 = st.columns(2)
                layer = c1.selectbox("Layer", range(L), key="heads_layer", format_func=lambda l: str(l + 1))
                head = c2.selectbox("Head", range(H), key="heads_head", format_func=lambda h: str(h + 1))
                name = HEAD_KINDS[kind].split(":")[0]
                fig = matrix_heatmap(x, y, w[layer, head], x_title="source (English)" if kind != "decoder" else
                                     "earlier output (decoder input)", y_title="source (English)" if kind == "encoder"
                                     else "output (French)", title=f"{name}, layer {layer + 1} · head {head + 1}",
                                     height=max(360, 150 + 24 * len(y)))
                st.plotly_chart(fig, key="head_enlarged", config=ui.camera("head_enlarged", name, S.text[:40]))
                # uniform over what each row may read: a masked position has weight exactly 0
                # (decoder self-attention's row j reads j + 1 tokens, not all of them)
                support = (w[layer, head] > 0).sum(axis=1)
                uniform = (f"uniform over {len(x)} tokens: {np.log(len(x)):.2f}" if (support == len(x)).all() else
                           f"uniform over the tokens each row may read: {np.log(np.maximum(support, 1)).mean():.2f}")
                st.caption(f"Mean entropy of this head: {mean_entropy(w[layer, head]):.2f} nats "
                           f"(0: each row on one token; {uniform}).")
            with grid:
                st.plotly_chart(heads_grid(w, x, y, kind, selected=(layer, head), width=760), key="heads_grid",
                                on_select=lambda: pick_head(L, H), selection_mode="points", config=ui.camera("heads_grid", name, S.text[:40]))
                st.caption("Every layer (rows) × head (columns). Click a small map, or choose its layer and head, "
                           "to enlarge it. Each head has its own projections W_Q, W_K, W_V of size "
                           f"{tr.config['model'].get('head_dim') or tr.config['model']['d_model'] // H}: "
                           "softmax((x W_Q)(x' W_K)ᵀ / √d_k)."
                           + (" Decoder self-attention is causal: a step reads only the pieces before it."
                              if kind == "decoder" else ""))

# ------------------------------------------------------------------ training trace
with tabs[6]:
    if tabs[6].open:
        trace = tr.metrics.get("trace")
        if not trace or d.attention is None:
            st.info("This model has no attention trace.")
        else:
            probes = trace["probes"]
            points = trace["points"]
            if S.get("probe", 0) >= len(probes):      # another model's probes: fewer of them
                S.pop("probe", None)
            i = st.selectbox("Probe sentence", range(len(probes)), format_func=lambda i: probes[i]["source"], key="probe")
            k = st.select_slider("Training step", options=list(range(len(points))), value=len(points) - 1,
                                 format_func=lambda k: str(points[k]["step"]),
                                 # a slider per model: with one key, the browser kept the last model's
                                 # step label on the thumb while the chart showed the new model's step
                                 key=f"trace_step_{name}")
            st.caption("The probe's reference translation is forced, so the matrix keeps its shape while the model "
                       f"learns. log p(reference) at this step: {points[k]['probes'][i]['log_prob']:.2f}")
            if before := tr.metrics.get("before"):
                st.caption(f"Steps 0–{before['steps']:,}: the original training; after step {before['steps']:,}: "
                           "the copy fine-tune (names, numbers and casing varied in the training pairs).")
            p = probes[i]
            a = np.array(points[k]["probes"][i]["attention"])
            src, tgt = p["source_tokens"], p["target_tokens"]
            if words:
                src, tgt, a = merge_to_words(src, tgt, a)
            st.plotly_chart(attention_heatmap(src, tgt, a, title=f"after {points[k]['step']} training steps"),
                            key="trace_heatmap", config=ui.camera("trace_heatmap", name, S.text[:40]))

# ------------------------------------------------------------------ the model drawn
drawn = st.expander("The model drawn, with its real sizes", key="diagram_open", on_change="rerun")
with drawn:
    if drawn.open and tr.config.get("hub"):     # the diagram draws the lesson's models only
        st.caption(f"{tr.description}. The diagram draws the lesson's own models; this one is read from its "
                   "Hugging Face config.")
    elif drawn.open:     # only once opened: a closed expander's chart would be redrawn on every Translate
        st.plotly_chart(model_diagram(tr.config["model"], sum(p.numel() for p in tr.model.parameters())),
                        key="model_diagram", config=ui.camera("model_diagram", name, S.text[:40]))
        st.caption(tr.description)
