"""The Bottleneck: the same input with and without attention, side by side, measured."""
import html
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

import ui.address
import ui.models
import ui.show
import ui.warm
from s2s.bottleneck import (
    STRESS_DEFAULT,
    STRESS_PAIRS,
    cosine_similarity,
    first_failure,
    joined_example,
    measured_models,
    pca_2d,
    stress_row,
)
from s2s.data import parse_pairs, read_pairs
from s2s.decode import Decoding
from s2s.evaluate import bleu, chrf, evaluate_pairs
from s2s.export import file_stem
from s2s.figures import context_scatter, length_chart, matrix_heatmap, model_colors, token_bars
from s2s.hub import display_name, translates_english_to_french
from s2s.text import MAX_CHARS, MAX_SOURCE_TOKENS, InputError

ui.address.run_through_app()     # a link's first run in Streamlit's old multipage mode: rerun through app.py

# test_long.tsv as `python -m s2s.data` writes it, shipped in examples/ so that Recompute works
# on a fresh machine (the split is deterministic: the same file as data/tatoeba/test_long.tsv)
ROOT = Path(__file__).resolve().parent.parent
HELD_OUT_FILES = [ROOT / "examples" / "test_long.tsv", ROOT / "data" / "tatoeba" / "test_long.tsv",
                  ROOT / "data" / "tatoeba" / "test.tsv"]


def greedy_cached(model: str, text: str) -> Decoding:
    # once per server; warm_up fills the first screen's
    return ui.models.greedy_decoding(ui.models.model_path(model), text)


def explain(text: str):
    st.markdown(f"<div style='font-size:0.95rem;color:#444'>{text}</div>", unsafe_allow_html=True)


st.title("The bottleneck")     # one line at 1280 px: the results must reach the first screen of a projector
st.caption("With and without attention. “You can't cram the meaning of a whole sentence into a single vector.” "
           "The `none` model reads one fixed vector, the final encoder state, at every step; an attention model "
           "reads a new weighted average of all encoder states at each step. Everything else about the two models "
           "is identical.")

# models are chosen by what their configs say, never by folder name
infos = {i.name: i for i in ui.models.translation_models() if i.error is None}
fixed = [n for n, i in infos.items() if i.attention == "none"]
attention_models = [n for n, i in infos.items() if i.has_attention and i.arch == "rnn"]
first = ui.models.bottleneck_default(list(infos.values()))
if first is None:
    st.error("This page needs a model without attention (such as `checkpoints/en-fr-none`) and at least one "
             "attention model.")
    st.stop()
NONE = fixed[0]                    # the fixed-vector model
# kept while the reader visits another page, as the other pages' choices are
ui.address.keep_across_pages("bn_model", "bn_text", "bn_ref", "bn_k", "bn_n", "bn_held_out", "bn_views", "bn_hub")
# what the address holds: a copied link reproduces the view
ADDRESS = {"model": ("bn_model", ui.address.choice(attention_models)), "text": ("bn_text", str),
           "reference": ("bn_ref", str),
           "sentences": ("bn_k", ui.address.number_in(1, len(STRESS_PAIRS))),
           "contexts": ("bn_views", lambda raw: ui.address.choice(["on", "off"])(raw) == "on"),
           "time": ("bn_hub", lambda raw: raw.split(","))}      # hub models the cost view adds (only offered ones kept)
arrived = "_arrival_query" in st.session_state     # a fresh arrival (ui.address.note_arrival), not a later rerun
for note in ui.address.read_address(ui.address.arrival_query("bottleneck"), ADDRESS):
    st.info(note)
if st.session_state.get("bn_model") not in attention_models:     # a kept model no longer in checkpoints/
    st.session_state.pop("bn_model", None)
with st.sidebar:
    st.markdown("### Compare")
    other = st.selectbox("Attention model", attention_models, key="bn_model", index=attention_models.index(first))


def write_address() -> None:
    """The address holds the view's choices; called at the end of the page and by the context
    vectors' fragment, whose switch reruns that section alone."""
    ui.address.set_address(ui.address.address_of(ADDRESS, ["model", "text", "reference", "sentences"])
                           | {"model": other, "contexts": "on" if st.session_state.get("bn_views") else None,
                              "time": ",".join(st.session_state.get("bn_hub") or []) or None})


models = [NONE, other]             # side by side: the same recurrent model with and without attention
# the length and cost views add the Transformer, when one is shipped: no recurrence at all
measured = measured_models(list(infos.values()), other)
COLORS = model_colors({m: infos[m].family for m in measured})     # the same colour for a model in every chart
for m in measured:
    if ui.models.get_model(m) is None:
        st.stop()

# ------------------------------------------------------------------ side by side
# On arrival (a Start-here link, the sidebar) the page opens on this section, scrolled just
# below the app's header: the input, both outputs and their charts on a projector's first
# screen (tests/test_browser_start_links.py). The title and intro are one scroll up.
side = st.container(key="bn_side")
if arrived:
    ui.address.scroll_into_view(".st-key-bn_side")
side.header("Side by side")
default_src, default_ref = joined_example(3)
english_line = side.empty()       # the input, written once the form is read
with side.expander("✎ Your own English text, and a reference translation for BLEU"), st.form("bn_input"):
    # defaults in state, none beside the widgets: Streamlit warns when state sets them too (kept)
    st.session_state.setdefault("bn_text", default_src)
    st.session_state.setdefault("bn_ref", default_ref)
    text = st.text_area("English text", key="bn_text", height=68,      # two lines: compact
                        help=f"Up to {MAX_CHARS:,} characters: a few sentences.")
    c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
    reference = c1.text_input("Reference translation (optional, for BLEU and chrF)", key="bn_ref")
    c2.form_submit_button("Translate with both", type="primary", width="stretch")
with english_line:
    ui.show.escaped("English: " + text, size="1.05rem")
# the example's reference says nothing about a text the user typed: score only a matching pair
scored = reference.strip() and not (reference == default_ref and text != default_src)
results = {}
for m in models:
    try:
        results[m] = greedy_cached(m, text)
    except InputError as e:
        results[m] = e
# one log-p scale for both bar charts, so equal bars mean equal probabilities
lowest = min([min(d.token_log_probs) for d in results.values() if not isinstance(d, InputError)] or [0.0])
# (the outputs and their charts are what the Start topic promises: on the first screen)
# tighter than Streamlit's 1rem between elements, which its markdown offsets by a -1rem margin
st.markdown("<style>.st-key-point_side [data-testid='stVerticalBlock']{gap:0.4rem} "
            ".st-key-point_side [data-testid='stMarkdownContainer']{margin-bottom:0} "
            ".st-key-point_side [data-testid='stMarkdownContainer'] p{margin-bottom:0}</style>", unsafe_allow_html=True)
cols = side.container(key="point_side").columns(2, gap="medium")
for col, m in zip(cols, models):
    with col:
        st.markdown(f"<span style='color:{COLORS[m]};font-size:1.3em;line-height:1'>■</span> "     # a constant colour
                    f"**{html.escape(m)}**", unsafe_allow_html=True)
        d = results[m]
        if isinstance(d, InputError):
            st.warning(str(d))
            continue
        ui.show.escaped(d.translation, size="1.05rem")
        line = f"log p = {d.log_prob:.2f} over {len(d.target_tokens)} pieces"
        if scored:
            line += f" · BLEU {bleu([d.translation], [reference]):.1f} · chrF {chrf([d.translation], [reference]):.1f}"
        st.caption(line)
        ui.show.plotly_chart(token_bars(d.target_tokens, d.token_log_probs, "log p(token)",
                                        highlight=int(np.argmin(d.token_log_probs)), horizontal=False,
                                        value_range=(1.05 * lowest, 0.0), height=290),
                             share=0.5, key=f"lp_{m}", config=ui.show.camera(f"lp_{m}", text[:40]))
if reference.strip() and not scored:
    st.caption("No BLEU or chrF: the reference is the example's, not a translation of your text. "
               "Type its French translation to score both models.")

# ------------------------------------------------------------------ BLEU by length
st.header("BLEU by source length")
ui.warm.altair_ready()         # the warm-up imports altair; on a cold server, wait for it rather than beside it
c1, c2 = st.columns([3, 1])
with c1:
    recomputed = st.session_state.get("bn_recomputed", {})
    rows = []
    for m in measured:
        bins = recomputed.get(m) or infos[m].metrics.get("test", {}).get("test_long", {}).get("by_length", [])
        rows += [{"model": m, "words": (b["min_words"] + b["max_words"]) / 2, "BLEU": b["bleu"], "n": b["n"],
                  "bin": f"{b['min_words']}-{b['max_words']}"} for b in bins if b["bleu"] is not None]
    if rows:
        chart = length_chart(pd.DataFrame(rows), "words", "BLEU", x_title="source sentence length (words)",
                             y_title="BLEU (beam 5)" if not recomputed else "BLEU", colors=COLORS,
                             projector=ui.show.projector())
        st.altair_chart(chart, key="bleu_by_length")
        ui.show.vega_downloads(chart, pd.DataFrame(rows),
                               file_stem("bleu-by-length", *measured, "greedy" if recomputed else "beam5"),
                               "bleu_by_length")
        # one source a caption: the recomputed figures replace the shipped ones, so only they are named
        st.caption(f"Recomputed here with greedy decoding, on {st.session_state.get('bn_recomputed_on')}."
                   if recomputed else
                   "From each checkpoint's metrics.json (beam 5, held-out joined Tatoeba pairs); reproduce with "
                   "`python -m s2s.evaluate --model checkpoints/NAME --test examples/test_long.tsv --beam 5`.")
    else:
        st.info("These checkpoints have no BLEU-by-length figures in their metrics.json.")
    c3, c4 = st.columns([1, 2])
    st.session_state.setdefault("bn_n", 200)
    n = c3.number_input("Held-out inputs to recompute on", 20, 1200, step=20, key="bn_n")
    # the files the app ships or the split wrote, or one the user uploads: never a path typed
    # into the page, which would let any visitor read any file of the server
    files = {p.relative_to(ROOT).as_posix(): p for p in HELD_OUT_FILES if p.is_file()}
    own = "your own TSV (upload)"
    choice = c4.selectbox("Held-out pairs", [*files, own], key="bn_held_out",
                          help="test_long.tsv: held-out Tatoeba pairs joined 1–8 at a time (shipped in examples/); "
                               "test.tsv: single held-out pairs (once the split is made); or a file of your own")
    upload = st.file_uploader("A TSV of English<TAB>French lines (UTF-8)", type=["tsv", "txt"],
                              key="bn_upload") if choice == own else None
    if st.button("Recompute (greedy)", key="bn_recompute", disabled=choice == own and upload is None):
        try:
            pairs = (read_pairs(files[choice]) if choice in files else
                     parse_pairs(upload.getvalue().decode("utf-8").splitlines()))[:int(n)]
        except UnicodeDecodeError:
            pairs = None
            st.warning("That file is not UTF-8 text: nothing was recomputed.")
        if pairs == []:
            st.warning("No line of that file has an English sentence, a tab and its French translation: "
                       "nothing was recomputed.")
        elif pairs:
            bar = st.progress(0.0, text="Translating…")
            out, skipped = {}, {}
            for k, m in enumerate(measured):
                def progress(done, total, k=k, m=m):
                    bar.progress((k + done / total) / len(measured), text=f"{m}: {done}/{total}")
                tr_m = ui.models.load_model(m)
                # an input longer than the model's limit in its own pieces is left out, and said so
                usable = [p for p in pairs if len(tr_m.tokenizer.encode(p[0])) <= MAX_SOURCE_TOKENS]
                skipped[m] = len(pairs) - len(usable)
                out[m] = evaluate_pairs(tr_m, usable, beam=1, progress=progress)["by_length"] if usable else []
            bar.progress(1.0, text="Done")
            st.session_state["bn_recomputed"] = out
            st.session_state["bn_recomputed_on"] = (f"the first {len(pairs)} pairs of "
                                                    + (choice if choice in files else "your uploaded file"))
            st.session_state["bn_skipped"] = {m: k for m, k in skipped.items() if k}
            st.rerun()
    for m, k in st.session_state.get("bn_skipped", {}).items():
        st.caption(f"{m}: {k} held-out inputs left out, longer than its {MAX_SOURCE_TOKENS}-piece limit.")
with c2:
    explain("Bahdanau et al. (2015), Fig. 2: without attention, quality falls as sentences get longer, "
            "because the whole source must pass through one vector. With attention the decoder looks back at "
            "every encoder state, and long sentences hold up.")

def attention_verdict(name: str, rows: list) -> str:
    """What the attention model's stress curve did, from the rows just measured (never assumed)."""
    if not rows:
        return f"{html.escape(name)} was not measured."
    first, last = rows[0], rows[-1]
    said = (f"{html.escape(name)}'s chrF: {first.chrf:.0f} at one sentence ({first.source_words} words)"
            + (f", {last.chrf:.0f} at {last.sentences} sentences ({last.source_words} words)."
               if len(rows) > 1 else "."))
    broke = first_failure(rows)
    if broke:
        return said + (f" By the same test it breaks down too, at <b>{broke} sentences</b>: attention delays the "
                       "bottleneck; it does not remove every limit.")
    if len(rows) == 1:
        return said + " Join more sentences to see whether it holds."
    return said + " By the same test it holds up: each output word can look up the source words it needs."


# ------------------------------------------------------------------ stress test
st.header("Stress test")
c1, c2 = st.columns([3, 1])
with c1:
    st.session_state.setdefault("bn_k", STRESS_DEFAULT)
    k_max = st.slider("Sentences joined into one input", 1, len(STRESS_PAIRS), key="bn_k")
    stress, notes = [], []
    for m in measured:
        for k in range(1, k_max + 1):
            src, ref = joined_example(k)
            try:
                r = stress_row(greedy_cached(m, src), k, src, ref)
            except InputError as e:     # a tokenizer that splits the examples too finely
                notes.append(f"{m} stops at {k - 1} sentences: {e}")
                break
            stress.append({"model": m, **{f: getattr(r, f) for f in ("sentences", "source_words", "chrf", "bleu",
                                                                      "repetition")},
                           "length ratio": round(r.length_ratio, 2), "_row": r})
    for note in notes:
        st.warning(note)
    df = pd.DataFrame(stress)
    fail = first_failure([r["_row"] for r in stress if r["model"] == NONE])
    fail_words = len(joined_example(fail)[0].split()) if fail else None
    chart = length_chart(df.drop(columns="_row"), "source_words", "chrf", x_title="input length (words)",
                         y_title="chrF vs our reference", highlight_x=fail_words,
                         highlight_label=f"none breaks down at {fail} sentences" if fail else "", colors=COLORS,
                         projector=ui.show.projector())
    st.altair_chart(chart, key="stress_chart")
    ui.show.vega_downloads(chart, df.drop(columns="_row"), file_stem("chrf-by-input-length", *measured), "stress_chart")
    src, ref = joined_example(k_max)
    cols = st.columns(len(measured))
    for col, m in zip(cols, measured):
        with col:
            mine = [x["_row"] for x in stress if x["model"] == m]
            if not mine:
                continue
            r = mine[-1]
            st.markdown(f"**{m}** · chrF {r.chrf:.1f} · repeated bigrams {100 * r.repetition:.0f}% · "
                        f"length {r.output_words}/{r.reference_words} words")
            ui.show.escaped(r.translation, size="1rem")
    with st.expander("Input and reference"):
        st.text(src)
        st.text(ref)
with c2:
    if fail:
        explain(f"At <b>{fail} sentences</b> ({fail_words} words) the fixed-vector model breaks down: its chrF falls "
                "below 60% of its one-sentence score, it repeats itself, or it drops content (output under 60% of "
                "the reference length).")
    else:
        explain("Up to this length the fixed-vector model holds up; push the slider further.")
    for m in measured[1:]:
        explain(attention_verdict(m, [x["_row"] for x in stress if x["model"] == m]))

# ------------------------------------------------------------------ what the decoder sees
@st.fragment       # the switch redraws this section alone
def decoder_view(views: dict[str, Decoding]) -> None:
    """Each model's context vectors c_j against its encoder states h_i, drawn on request:
    four charts a class looks at after the ones above, so the page's first open does not wait
    for the browser to draw them (README, Speed)."""
    shown = st.toggle("Show both models' context vectors", key="bn_views",
                      help="Four charts: the cosine similarity of each step's context c_j to every encoder state "
                           "h_i, and the path of c_j over the steps in two dimensions (PCA).")
    write_address()         # the switch reruns this fragment alone, not the page's end
    if not shown:
        st.caption("Off: turn it on to see, step by step, which encoder states each model's context vector "
                   "resembles.")
        return
    # side by side, fixed vector | attention: a row of similarity maps, then a row of paths
    sims, paths = st.columns(len(views), gap="medium"), st.columns(len(views), gap="medium")
    for sim_col, path_col, (m, d) in zip(sims, paths, views.items()):
        sim = cosine_similarity(d.contexts, d.encoder_states)
        ui.show.plotly_chart(matrix_heatmap(d.source_tokens, d.target_tokens, sim, value_name="cos(c_j, h_i)",
                                            zmin=-1, zmax=1, colorscale="RdBu_r",
                                            title=f"{m}: context vs encoder states",
                                            height=260 + 18 * len(d.target_tokens)),
                             share=1 / len(views), where=sim_col, key=f"sim_{m}",
                             config=ui.show.camera(f"sim_{m}", text[:40]))
        ui.show.plotly_chart(context_scatter(pca_2d(d.contexts), d.target_tokens, f"{m}: c_j over steps (PCA)"),
                             share=1 / len(views), where=path_col, key=f"pca_{m}",
                             config=ui.show.camera(f"pca_{m}", text[:40]))


st.header("What the decoder sees")
# the side by side's decodings, unless either model could not translate the text
views = {} if any(isinstance(d, InputError) for d in results.values()) else results
# what to look for, above the two models' charts side by side (the main column's whole width)
for col, said in zip(st.columns(3, gap="medium"), (
        "Each row is one decoding step j; each column an encoder state h_i; colour is the cosine similarity "
        "between the context c_j the decoder read and h_i.",
        "<b>none</b>: every row is the same, because c_j is one vector reused at every step, and all its "
        "points in the projection sit on top of each other.",
        "<b>attention</b>: the bright cell moves along the source as the translation proceeds, and the context "
        "travels through space step by step.")):
    with col:
        explain(said)
if views:
    decoder_view(views)
else:
    st.caption("Nothing to show: the text above cannot be translated.")

# ------------------------------------------------------------------ cost
st.header("Cost")
c1, c2 = st.columns([3, 1])
with c1:
    # Timed when someone asks, once per server, then shown to every visitor: timing on the
    # page's first open made that open take seconds, and timing in the background measured
    # the contention with whatever else the server was doing
    # the Hugging Face models the operator offers for English->French may join, each only when
    # chosen: one of them can take far longer to time than all the lesson's models together
    hub_fr = [i.name for i in ui.models.hub_models()
              if i.error is None and translates_english_to_french(i.name, i.model)]
    if st.session_state.get("bn_hub") and not set(st.session_state["bn_hub"]) <= set(hub_fr):
        dropped = [h for h in st.session_state["bn_hub"] if h not in hub_fr]
        st.session_state["bn_hub"] = [h for h in st.session_state["bn_hub"] if h in hub_fr]   # not offered here
        for h in dropped:       # a link's time=: say which, rather than drop it with no word
            st.warning(f"The link asks to time {ui.show.code_span(h[:80])}, which this server does not offer "
                       "(its operator lists the models); it is left out.")
    chosen = st.multiselect("Also time (Hugging Face)", hub_fr, key="bn_hub", format_func=display_name,
                            help="Models this server offers for English→French: the same six examples, forced to "
                                 "the same references, in each model's own pieces.") if hub_fr else []
    # one that cannot load says so; the rest go on
    chosen = [h for h in chosen if ui.models.get_model(h) is not None]
    timed = measured + [display_name(h) for h in chosen]
    paths = [ui.models.model_path(m) for m in measured] + chosen
    cost_colors = model_colors({m: infos[m].family for m in measured} | {display_name(h): None for h in chosen})

    def time_models(again: bool) -> None:
        if again:
            ui.models.forget_timing()
        st.session_state["bn_time_asked"] = True

    rows, failed = [], None
    if st.session_state.pop("bn_time_asked", False) or ui.models.timing_measured(paths):
        try:
            with st.spinner("Timing the models…"):     # shown only if it takes over half a second
                rows = [row for p in paths for row in ui.models.decode_timing(p)]
        except InputError as e:
            failed = e
    again = ui.models.timing_measured(paths)
    st.button("Measure again" if again else "Time the models", key="bn_time", type="secondary" if again else "primary",
              on_click=time_models, args=(again,),
              help="Decode each joined example (1 to 6 sentences) with each model, forced to our reference so every "
                   "model produces the same tokens; the fastest of 3 runs.")
    if rows:
        chart = length_chart(pd.DataFrame(rows), "m·t", "ms", x_title="m · t (source pieces × output pieces)",
                             y_title="decode time (ms, forced, batch 1)", colors=cost_colors,
                             projector=ui.show.projector())
        st.altair_chart(chart, key="cost_chart")
        ui.show.vega_downloads(chart, pd.DataFrame(rows), file_stem("decode-time", *timed), "cost_chart")
        if chosen:
            st.caption("A Hugging Face model's m and t count its own pieces (its tokenizer; a language code or "
                       "task prefix included), so its points sit where its own attention's m · t puts them.")
    elif failed:
        st.warning(f"Cannot time the joined examples: {failed}")
    else:
        st.caption(f"Not measured yet on this server: *Time the models* decodes the six joined examples with "
                   f"{', '.join(f'`{m}`' for m in timed)} (a few seconds"
                   f"{', longer for a large model' if chosen else ''}), "
                   "then the chart stays for everyone.")
    if views:
        d = views[other]
        st.markdown(f"For the text under *Side by side*, read by `{other}`: m = {len(d.source_tokens)} source pieces, "
                    f"t = {len(d.target_tokens)} output "
                    f"pieces, so the attention model computes **{len(d.source_tokens) * len(d.target_tokens):,} "
                    "attention weights**; the `none` model computes none.")
    if len(measured) > 2 and views:
        m, t = len(views[other].source_tokens), len(views[other].target_tokens)
        tr_t = ui.models.load_model(measured[2]).model.cfg
        st.markdown(f"The Transformer `{measured[2]}` ({tr_t.encoder_layers} + {tr_t.decoder_layers} layers × "
                    f"{tr_t.heads} heads) computes, for the same m and t, m² = {m * m:,} encoder self-attention, "
                    f"about t²/2 = {t * (t + 1) // 2:,} decoder self-attention and m·t = {m * t:,} cross-attention "
                    "weights per head and layer.")
with c2:
    explain("Attention scores every source position at every output step: O(m·t) work. The fixed vector costs "
            "O(m + t). A Transformer also lets every source piece attend to every other and every output piece "
            "to the ones before it: O(m² + t² + m·t), but with no recurrence its layers run over all positions "
            "at once. The chart shows what each costs here, on this machine's CPU, forced decoding at batch 1: "
            "every output token is known in advance, yet a recurrent decoder still needs s<sub>j−1</sub> before "
            "s<sub>j</sub> and runs t steps, while the Transformer computes all t positions in one pass.")

write_address()
