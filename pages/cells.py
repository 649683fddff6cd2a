"""Cell States: what the memory cells of recurrent models track (Karpathy, Johnson and Fei-Fei 2015).

The page is layout and widgets only; traces are s2s.charlm / s2s.cells, figures s2s.figures.
"""
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

import ui.address
import ui.models
import ui.show
import ui.span_select
from s2s.cells import (
    FEATURES,
    SPAN_SIGNALS,
    SPAN_THRESHOLD,
    Trace,
    encoder_trace,
    gate_saturation,
    memory_resets,
    parse_span,
    rank_cells,
    regex_feature,
    signal_of,
    span_states,
)
from s2s.charlm import sample_text
from s2s.checkpoint import CheckpointError, default_device
from s2s.decode import encode_source, greedy
from s2s.export import file_stem
from s2s.figures import cell_traces_figure, colored_text_html, saturation_scatter, state_heatmap, token_bars
from s2s.text import MAX_PASSAGE_CHARS, MAX_SAMPLE_CHARS, InputError, clean_passage

ui.address.run_through_app()     # a link's first run in Streamlit's old multipage mode: rerun through app.py

EXAMPLE_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = {
    "audit_match_class_bits (Linux, kernel/auditfilter.c: the course's snippet)": "audit_match_class_bits.c",
    "Linux kernel code the model never saw (test part)": "kernel_heldout.c",
    "War and Peace dialogue the model never saw (test part)": "war_and_peace_heldout.txt",
}
CUSTOM = "custom regular expression"
KEPT = ("layer", "cell", "signal", "feature", "regex", "source", "typed")
GATE_NOTE = ("**Reading the gates.** The forget gate f multiplies the old memory: c_t = f ⊙ c_{t-1} + i ⊙ g. "
             "**f ≈ 1** keeps the cell as it was, so information (and the gradient, backwards) passes through many "
             "steps unchanged: this is how the LSTM escapes vanishing gradients. **f ≈ 0** wipes the cell; a cell that "
             "resets at a new line or a closing quote does so through f. The input gate i decides how much of the "
             "candidate g is written; the output gate o how much of tanh(c) the rest of the network sees.")
GRU_GATE_NOTE = ("**Reading the gates.** A GRU has no separate memory: h_t = (1 − z) ⊙ h_(t−1) + z ⊙ h̃. "
                 "**z ≈ 0** keeps the state as it was (the gradient passes back through 1 − z, as through an "
                 "LSTM's f); **z ≈ 1** overwrites it with the candidate h̃. The reset gate r decides how much of "
                 "h_(t−1) the candidate is computed from.")
NO_GATES = ("An Elman RNN has no gates: h_t = tanh(W x_t + U h_(t−1)) rewrites its whole state at every character, and "
            "nothing decides what to keep. That is why its gradient vanishes over long distances: see the "
            "Gates & Gradients page.")
CELL_NAMES = {"lstm": "LSTM", "gru": "GRU", "rnn": "Elman RNN"}


@st.cache_resource(show_spinner=False)
def example_text(label: str) -> str:
    """An example passage, read from disk once per server (the page compares them every run;
    a page's own functions are defined anew each run, so the cache must be Streamlit's)."""
    return (EXAMPLE_DIR / EXAMPLES[label]).read_text(encoding="utf-8")


@st.cache_data(max_entries=16, show_spinner="Tracing every cell…")
def trace_cached(path: str, text: str) -> list[Trace]:
    traces = ui.models.load_charlm_path(path).model.trace(text)
    return [type(t)(**{k: v.cpu() for k, v in vars(t).items()}) for t in traces]   # from a GPU too


@st.cache_data(max_entries=64, show_spinner="Sampling…")
def sample_cached(path: str, prime: str, length: int, temperature: float, seed: int) -> str:
    return sample_text(ui.models.load_charlm_path(path).model, prime, length, temperature, seed)


@st.cache_data(max_entries=64, show_spinner="Translating and tracing…")
def translation_trace_cached(path: str, text: str):
    """Greedy translation (its decoder cell states), the encoder's traces in both directions,
    and the steps where either direction wipes its memory."""
    tr = ui.models.load_path(path)
    d = greedy(tr, text)
    fwd, bwd = encoder_trace(tr, encode_source(tr, text))
    return (d, fwd.cell.tanh().cpu().numpy(), bwd.cell.tanh().cpu().numpy(),
            {"forward": memory_resets(fwd), "backward": memory_resets(bwd)})


TRANSLATION_HELD_OUT = 100    # lines of examples/test_long.tsv searched for a translation model's span matches


def _encoder_states(tr, text: str) -> tuple[list[str], dict[str, np.ndarray]]:
    ids = encode_source(tr, text)
    fwd, bwd = encoder_trace(tr, ids)
    return tr.tokenizer.pieces(ids), {s: span_states([fwd, bwd], s) for s in ("hidden", "cell")}


@st.cache_data(max_entries=64, show_spinner=False)
def encoder_states_cached(path: str, text: str) -> tuple[list[str], dict[str, np.ndarray]]:
    """A sentence's pieces and its encoder's h and tanh(c), (T, 2, H): forward, backward."""
    return _encoder_states(ui.models.load_path(path), text)


@st.cache_resource(max_entries=2, show_spinner="Reading held-out sentences once for this model…")
def translation_held_out(path: str) -> tuple[list[str], dict[str, np.ndarray], list[tuple[int, str]]]:
    """The English of the first TRANSLATION_HELD_OUT held-out lines (Tatoeba test pairs), each
    through the encoder on its own, joined with an all-zero row between lines (never on, so no
    match crosses from one line into the next), and where each line starts."""
    tr = ui.models.load_path(path)
    lines = [line.split("\t")[0] for line in (EXAMPLE_DIR / "test_long.tsv").read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")][:TRANSLATION_HELD_OUT]
    pieces, states, starts = [], {"hidden": [], "cell": []}, []
    for line in lines:
        try:
            p, st_ = _encoder_states(tr, line)
        except InputError:         # a line past the model's limits is left out
            continue
        starts.append((len(pieces), line))
        pieces += p + [""]
        for k in states:
            states[k] += [st_[k], np.zeros((1, *st_[k].shape[1:]), dtype=st_[k].dtype)]
    return pieces, {k: np.concatenate(v) for k, v in states.items()}, starts


def jump_to_held_out_line(starts: list[tuple[int, str]], start: int, end: int) -> None:
    """A held-out match's line becomes the sentence traced, the match selected in it."""
    at, line = max((s, ln) for s, ln in starts if s <= start)
    st.session_state.translation_sentence = line
    st.session_state.enc_span = (start - at, end - at)


def jump_to_held_out(held: str, start: int, end: int) -> None:
    """A held-out match becomes the passage: 600 characters either side of it, the match selected."""
    a, b = max(0, start - 600), min(len(held), end + 600)
    S = st.session_state
    S.cell_text = S.typed = held[a:b]
    S.source = S.last_source = "Your text"
    S.chars_span = (start - a, end - a)


def span_address() -> dict:
    """The selected span in the address while the switch is on (Colored text): span=START:END,
    read=, and the threshold and margin where they are not the defaults."""
    S = st.session_state
    span = S.get("chars_span")
    if not (S.get("span_on") and S.get("cells_tab", "Colored text") == "Colored text"
            and isinstance(span, (tuple, list)) and len(span) == 2):
        return {}
    out = {"span": f"{int(span[0])}:{int(span[1])}", "read": S.get("chars_signal")}
    if S.get("chars_threshold", SPAN_THRESHOLD) != SPAN_THRESHOLD:
        out["threshold"] = f"{S.chars_threshold:g}"
    if S.get("chars_margin", 1) != 1:
        out["margin"] = int(S.chars_margin)
    return out


def best_known_cell(metrics: dict, prefer: str) -> tuple[str, int, int]:
    """The default view: the cell training found for the `prefer`red feature (metrics.json)
    if it is clearly interpretable (|r| >= 0.5), else the cell with the largest |r|."""
    found = {f: cells[0] for f, cells in metrics.get("cells", {}).items() if cells}
    if prefer in found and abs(found[prefer]["r"]) >= 0.5:
        feature = prefer
    else:
        feature = max(found, key=lambda f: abs(found[f]["r"]), default=prefer)
    cell = found.get(feature, {"layer": 0, "cell": 0})
    return feature, cell["layer"], cell["cell"]


def model_changed():
    """Another model opens on its own showcase cell, and on its own example passage unless
    the text is the reader's own."""
    for k in ("layer", "cell", "feature", "ranked_pick"):
        st.session_state.pop(k, None)
    if st.session_state.get("source", "Example") == "Example":
        st.session_state.pop("cell_text", None)


def use_example():
    if st.session_state.example_pick:
        st.session_state.cell_text = example_text(st.session_state.example_pick)


def choose_cell():
    """Colour the text with the cell picked in the ranking."""
    if st.session_state.ranked_pick is not None:     # None when the box is cleared
        st.session_state.layer, st.session_state.cell = st.session_state.ranked_pick


# ------------------------------------------------------------------ model
st.title("Cell States")
st.caption("A character-level model reads text one character at a time. Some of its memory cells turn out to track "
           "things we can name: being inside quotes, the depth of nested braces, the position in a line "
           "(Karpathy, Johnson and Fei-Fei 2015). Find them yourself.")
S = st.session_state
# widgets in a closed tab, or on a page the reader has left, are not drawn: keep their values
ui.address.keep_across_pages("charlm", "cells_tab", *KEPT)
models = ui.models.charlm_models()
tab_names = ["Colored text", "Find cells", "Gates", "Translation models"]
# what the address holds: a copied link reproduces the view (a typed passage stays out: too long)
ADDRESS = {"model": ("charlm", ui.address.choice([m.name for m in models])),
           "tab": ("cells_tab", ui.address.choice(tab_names)),
           "layer": ("layer", ui.address.number_in(0, 64)), "cell": ("cell", ui.address.number_in(0, 4096)),
           "signal": ("signal", str), "feature": ("feature", str), "regex": ("regex", str),
           # select-a-span (the Start page's link; written back while the switch is on): span=START:END
           # turns it on; read=hidden|cell; threshold and margin where they differ from LSTMVis's defaults
           "span": ("chars_span", parse_span), "read": ("chars_signal", ui.address.choice(SPAN_SIGNALS)),
           "threshold": ("chars_threshold", ui.address.number_in(0.05, 0.95, float)),
           "margin": ("chars_margin", ui.address.number_in(1, 20))}
# a link may name the tab (?tab=Find+cells) and the rest; read before the model box is drawn
arrival = ui.address.arrival_query("cells")
for note in ui.address.read_address(arrival, ADDRESS):
    st.info(note)
if "span" in arrival and "chars_span" in S:
    S.span_on = True
with st.sidebar:
    st.markdown("### Character model")
    if models:
        by_name = {m.name: m for m in models}
        lm_name = st.selectbox("Character-level model", list(by_name), key="charlm", on_change=model_changed,
                               format_func=lambda n: f"{n} ({CELL_NAMES.get(by_name[n].cell, by_name[n].cell)})")
        info = by_name[lm_name]
        st.caption(info.description)
        bpc = info.metrics.get("test", {}).get("bits_per_char")
        if bpc is not None:
            known = info.metrics.get("test_known_lines", {}).get("bits_per_char")
            more = (f"; {known:.3f} on its lines made only of characters seen in training"
                    if known is not None and abs(known - bpc) >= 0.005 else "")
            st.caption(f"Test: **{bpc:.3f} bits per character** on text it never saw{more}")
        if paper := info.metrics.get("paper"):
            st.caption(f"The paper's best network on this corpus: {paper['best_rnn_bits_per_char']:.2f} bits per "
                       f"character; a 20-gram model: {paper['ngram20_bits_per_char']:.2f}.")
    st.caption(f"Device: **{'CUDA GPU' if default_device().type == 'cuda' else 'CPU'}**")

ui.address.tab_from_query(arrival, "cells_tab", tab_names if models else tab_names[3:])
lm = None
if models:
    try:
        lm = ui.models.load_charlm_path(ui.models.model_path(lm_name))
    except CheckpointError as e:       # the translation models' tab below keeps working
        st.error(f"This model cannot be loaded: {e}")
else:
    st.info("No character-level model in `checkpoints/` yet. Train one with "
            "`python -m s2s.train_charlm --data ../shared/data/war-and-peace/input.txt "
            "--out checkpoints/charlm-war-and-peace` (see the README); the translation models' cells are below.")
if lm is None:
    tabs = dict(zip(tab_names[3:], st.tabs(tab_names[3:], key="cells_tab", on_change="rerun")))
else:
    path = ui.models.model_path(lm_name)
    H, L = lm.model.cfg.hidden, lm.model.cfg.layers

    # -------------------------------------------------------------- text
    # a model trained on code opens on code and its brace-depth cell, one trained on prose on
    # quotes: what it was trained on is in its metrics, whatever its folder is called
    is_code = "linux" in lm.metrics.get("train", {}).get("data", "")
    first = next(iter(EXAMPLES)) if is_code else list(EXAMPLES)[2]      # this model's own example
    if arrival:      # a link (the Start page's) opens on an example passage, as it promises
        S.source = "Example"
        S.pop("cell_text", None)
    if "cell_text" not in S:
        S.cell_text = example_text(first)
    feature0, layer0, cell0 = best_known_cell(lm.metrics, "brace_depth" if is_code else "inside_quotes")
    S.setdefault("layer", layer0)
    S.setdefault("cell", cell0)
    S.setdefault("feature", feature0)
    S.layer, S.cell = min(int(S.layer), L - 1), min(int(S.cell), H - 1)   # another model may be smaller
    # the passage controls act on the character model's tabs only: hidden while the
    # translation models' tab (which has its own sentence box) is the one open
    passage_tab = S.get("cells_tab") != "Translation models"
    if "source" in S and S.source is None:      # its selected button clicked again: keep that choice
        S.source = S.get("last_source", "Example")
    S.setdefault("source", "Example")     # no default= beside it: Streamlit warns when state sets it too
    source = st.segmented_control("Text", ["Example", "Your text", "Sample from the model"],
                                  key="source") if passage_tab else None
    if source == "Example" and S.get("last_source", "Example") != "Example" \
            and not any(example_text(label) == S.cell_text for label in EXAMPLES):
        S.cell_text = example_text(first)       # back from a sample or one's own text: an example, as the button says
    if source is not None:
        S.last_source = source
    if source == "Example":
        # the box names the example on show (none once the text is the user's own or a sample)
        S.example_pick = next((label for label in EXAMPLES if example_text(label) == S.cell_text), None)
        st.selectbox("Example", list(EXAMPLES), key="example_pick", index=None, on_change=use_example,
                     placeholder="Pick an example passage…")
    elif source == "Your text":
        S.setdefault("typed", S.cell_text)
        with st.form("own_text"):
            st.text_area("Paste a passage", key="typed", height=160,
                         help=f"Up to {MAX_PASSAGE_CHARS:,} characters; new lines and tabs are kept.")
            if st.form_submit_button("Trace", type="primary"):
                S.cell_text = S.typed
    elif source == "Sample from the model":
        with st.form("sample"):
            c1, c2, c3, c4 = st.columns([3, 2, 2, 1], vertical_alignment="bottom")
            prime = c1.text_input("Start with", value="\n", max_chars=200)
            temperature = c2.slider("Temperature", 0.1, 2.0, 0.8, 0.05, help="<1: safer, repetitive; >1: wilder")
            length = c3.slider("Characters", 100, MAX_SAMPLE_CHARS, 800, 100)
            seed = c4.number_input("Seed", 0, 2**31 - 1, 0)
            if st.form_submit_button("Sample", type="primary"):
                S.cell_text = prime + sample_cached(path, prime, int(length), float(temperature), int(seed))
                S.sampled = (lm_name, S.cell_text)       # whose sample it is, for a later switch of model
        by, sampled = S.get("sampled", (None, None))
        if by not in (None, lm_name) and sampled == S.cell_text:
            st.caption(f"This text is {by}'s sample, traced here through {lm_name}; press **Sample** for one of "
                       f"{lm_name}'s own.")
    traces = None        # the character model's tabs draw nothing without a passage it can read
    if passage_tab:
        try:
            text = clean_passage(S.cell_text)
        except InputError as e:
            st.warning(str(e))       # the tabs stay, so the translation models' tab is still one click away
        else:
            traces = trace_cached(path, text)
            shown = lm.model.shown(text)
            if shown != text:
                st.caption("Characters the model never saw in training are shown as \ufffd and read as one unknown "
                           "symbol.")
    # only the open tab runs (see the Translate page)
    tabs = dict(zip(tab_names, st.tabs(tab_names, key="cells_tab", on_change="rerun")))
    if arrival.get("tab") in tab_names:     # a link to a tab (the Start page's): the tab and its view in sight
        # a span's link: its switch at the top, its cells and matches under it (the text, above, underlines it)
        span_link = S.get("span_on") and "span" in arrival and arrival["tab"] == "Colored text"
        ui.address.scroll_into_view(".st-key-span_on" if span_link else '[data-testid="stTabs"]')

    # -------------------------------------------------------------- colored text
    with tabs["Colored text"]:
        if tabs["Colored text"].open and traces is not None:
            c1, c2, c3 = st.columns([1, 1, 2])
            c1.number_input("Layer", 0, L - 1, key="layer",
                            help="0 reads the characters; higher layers read the one below")
            c2.number_input("Cell", 0, H - 1, key="cell")
            signals = traces[0].SIGNALS         # what this cell type has (an LSTM's c and gates, a GRU's z and r, ...)
            if S.get("signal") not in signals:
                S.signal = traces[0].MEMORY
            signal = c3.selectbox("Shade by", list(signals), format_func=signals.get, key="signal")
            values = signal_of(traces[int(S.layer)], signal)[:, int(S.cell)].numpy()
            lo = -1.0 if signal in ("cell", "hidden", "candidate") else 0.0
            # what the Start topic promises (its first lines on screen): filled once the span below is known
            text_slot = st.container(key="point_colored")
            st.caption("Blue: negative, red: positive (gates: white 0 to blue 1). "
                       "Hover a character for the exact value.")
            # LSTMVis's select-a-span (ui/span_select.py): its controls under the text, which underlines the span
            span = None
            if st.toggle("Select a span: which cells are on exactly there, and where else (LSTMVis)", key="span_on"):
                *span, span_threshold, span_signal, span_margin = ui.span_select.controls(
                    "chars", shown, traces[0].SIGNALS, traces[0].MEMORY)
            with text_slot:
                st.html(colored_text_html(shown, values, lo=lo, hi=1.0, value_name=signals[signal].split(",")[0],
                                          mark=tuple(span) if span else None))
            if span:
                held = ui.span_select.held_out_states(path, span_signal)
                ui.span_select.show(
                    "chars", shown, span_states(traces, span_signal), tuple(span), span_threshold, span_signal,
                    span_margin, value_name=traces[0].SIGNALS[span_signal].split(",")[0],
                    held_out=ui.span_select.Corpus(lm.model.shown(held[0]), held[1], held[2],
                                                   lambda s, e, t=held[0]: jump_to_held_out(t, s, e)))

    # -------------------------------------------------------------- find cells
    with tabs["Find cells"]:
        if tabs["Find cells"].open and traces is not None:
            names = list(FEATURES) + [CUSTOM]
            if S.get("feature") not in names:          # a link's feature this page does not know
                S.feature = names[0]
            c1, c2 = st.columns([1, 1])
            feature = c1.selectbox("Feature", names, key="feature",
                                   format_func=lambda f: FEATURES[f].label if f in FEATURES else f)
            try:
                if feature == CUSTOM:
                    pattern = c2.text_input("Regular expression (characters inside a match count as 1)", value=r"\d+",
                                            max_chars=200, key="regex")
                    values_f = regex_feature(pattern)(text)
                    # the chart's legend: a long pattern cut short, or the legend wraps over the traces
                    feature_label = f"matches /{pattern if len(pattern) <= 30 else pattern[:29] + '…'}/"
                else:
                    values_f = FEATURES[feature].values(text)
                    feature_label = FEATURES[feature].label
            except InputError as e:
                st.warning(str(e))
                values_f = None
            if values_f is not None and values_f.std() == 0:
                st.info("This feature has the same value at every character of this text, so nothing can correlate "
                        "with it. Try a text where it varies (e.g. code for brace depth, dialogue for quotes).")
            elif values_f is not None:
                ranked = rank_cells(traces, values_f, top=10)
                memory = traces[0].SIGNALS[traces[0].MEMORY].split(",")[0]
                # a typed pattern as a code span: shown as typed, never read as Markdown (* _ [ ] and backslashes)
                shown_feature = f"matches {ui.show.code_span(pattern)}" if feature == CUSTOM else f"*{feature_label}*"
                st.caption(f"Every cell of every layer ranked by |r|, the correlation of {memory} with {shown_feature} "
                           f"over these {len(text):,} characters. "
                           "Correlation is a lead, not an explanation: look at the trace.")
                ui.show.table(pd.DataFrame([{"layer": s.layer, "cell": s.cell, "r": round(s.r, 3)} for s in ranked]),
                              height=220)
                fig = cell_traces_figure(
                    shown, {f"layer {s.layer} cell {s.cell} (r={s.r:+.2f})":
                            signal_of(traces[s.layer])[:, s.cell].numpy() for s in ranked[:3]},
                    feature=values_f, feature_name=feature_label, y_title=memory)
                stem = file_stem("top-cells", lm_name, feature_label[:40])
                ui.show.plotly_chart(fig, key="top_traces", config=ui.show.camera(stem))
                ui.show.chart_downloads(fig, stem, "top_traces", about={
                    "model": lm_name, "feature": feature_label, "signal": memory, "characters": len(text),
                    "what": "the three cells whose signal correlates most with the feature, over the text shown"})
                st.selectbox("Color the text with", [(s.layer, s.cell) for s in ranked], key="ranked_pick",
                             format_func=lambda lc: f"layer {lc[0]} cell {lc[1]}", on_change=choose_cell, index=None,
                             placeholder="Pick a cell to show it on the Colored text tab…")

    # -------------------------------------------------------------- gates
    with tabs["Gates"]:
        if tabs["Gates"].open and traces is not None:
            gates = traces[0].GATES
            if not gates:
                st.info(NO_GATES)
            else:
                cols = st.columns(L)
                for layer, col in enumerate(cols):
                    ui.show.plotly_chart(saturation_scatter(gate_saturation(traces[layer]), title=f"layer {layer}"),
                                         key=f"sat{layer}", config=ui.show.camera(f"sat{layer}", lm_name),
                                         where=col, share=0.5)
                st.caption("Each dot is one gate of one cell: how often it is nearly closed (< 0.1) against nearly "
                           "open (> 0.9) over this text, as in the paper's Fig. 3. Near the top: gates almost always "
                           "open; near the right: almost always closed; on the dotted diagonal: always saturated one "
                           "way or the other, a switch.")
                tr = traces[int(S.layer)]
                ui.show.plotly_chart(cell_traces_figure(shown, {g.replace("_", " "):
                                                                getattr(tr, g)[:, int(S.cell)].numpy()
                                                                for g in gates},
                                                        y_title="gate value", y_range=(-0.02, 1.02)),
                                     key="gate_traces", config=ui.show.camera("gate_traces", lm_name))
                st.caption(f"Gates of layer {int(S.layer)} cell {int(S.cell)} (choose it on the Colored text tab).")
                st.markdown(GATE_NOTE if "forget_gate" in gates else GRU_GATE_NOTE)

# ------------------------------------------------------------------ translation models
with tabs["Translation models"]:
    if tabs["Translation models"].open:
        st.caption("The recurrent translation models are LSTMs too: their encoder reads the source both ways, and "
                   "the decoder writes the output. Their cell states, traced with the same equations, "
                   "for one sentence.")
        # only models with an LSTM (read from their configs): a Transformer has no cell state
        usable = [i.name for i in ui.models.translation_models()
                  if i.error is None and i.arch == "rnn" and i.cell == "lstm"]
        if not usable:
            st.info("No translation model in `checkpoints/`.")
        else:
            with st.form("translation_cells"):
                c1, c2, c3 = st.columns([2, 4, 1.5], vertical_alignment="bottom")    # the button label fits
                tname = c1.selectbox("Model", usable, index=usable.index(ui.models.DEFAULT_MODEL)
                                     if ui.models.DEFAULT_MODEL in usable else 0)
                S.setdefault("translation_sentence", "I went to the lecture.")     # a held-out match may set it
                sentence = c2.text_input("English sentence", key="translation_sentence")
                c3.form_submit_button("Trace sentence", type="primary")
            try:
                d, fwd, bwd, resets = translation_trace_cached(ui.models.model_path(tname), sentence)
            except (InputError, CheckpointError) as e:
                st.warning(str(e))
            else:
                H_enc = fwd.shape[1]
                pick = st.number_input("Cell to follow (outlined in every heatmap, its values below)", 0, H_enc - 1,
                                       key="translation_cell")
                for direction, states, key in (("forward", fwd, "enc_fwd"), ("backward", bwd, "enc_bwd")):
                    ui.show.plotly_chart(state_heatmap(d.source_tokens, states,
                                                       f"encoder, {direction} direction: tanh(c) per source piece",
                                                       highlight=int(pick)),
                                         key=key, config=ui.show.camera(key, tname, sentence[:40]))
                    for r in resets[direction]:
                        st.caption(f"A nearly white column: at {ui.show.code_span(d.source_tokens[r.step])} "
                                   f"the {direction} "
                                   f"direction wipes its memory (mean |tanh c| = {r.memory:.2f}). Its forget gate "
                                   f"(f = {r.forget:.2f}) and input gate (i = {r.input:.2f}) are both nearly closed, "
                                   "so `c_t = f * c_(t-1) + i * g` is close to 0: a reset the model learned.")
                if d.cells is not None:
                    ui.show.plotly_chart(state_heatmap(d.target_tokens, np.tanh(d.cells),
                                                       f"decoder: tanh(c) per output piece ({d.translation[:60]})",
                                                       x_title="output piece", highlight=int(pick)),
                                         key="dec", config=ui.show.camera("dec", tname, sentence[:40]))
                c1, c2 = st.columns(2)
                ui.show.plotly_chart(token_bars(d.source_tokens, fwd[:, int(pick)],
                                                f"encoder cell {int(pick)}, forward: tanh(c)", value_range=(-1, 1)),
                                     key="pick_fwd", config=ui.show.camera("pick_fwd", tname, sentence[:40]),
                                     where=c1, share=0.5)
                ui.show.plotly_chart(token_bars(d.source_tokens, bwd[:, int(pick)],
                                                f"encoder cell {int(pick)}, backward: tanh(c)", value_range=(-1, 1)),
                                     key="pick_bwd", config=ui.show.camera("pick_bwd", tname, sentence[:40]),
                                     where=c2, share=0.5)
                # LSTMVis's select-a-span over the sentence's pieces, both directions' cells (ui/span_select.py)
                if st.toggle("Select a span of pieces: which encoder cells are on exactly there, and where else "
                             "(LSTMVis)", key="enc_span_on"):
                    pieces, by_signal = encoder_states_cached(ui.models.model_path(tname), sentence)
                    *enc_span, enc_t, enc_signal, enc_margin = ui.span_select.controls(
                        "enc", pieces, {"hidden": "h = o * tanh(c)", "cell": "tanh(c), the memory"}, "hidden")
                    held_pieces, held_states, starts = translation_held_out(ui.models.model_path(tname))
                    ui.span_select.show("enc", pieces, by_signal[enc_signal], tuple(enc_span), enc_t, enc_signal,
                                        enc_margin, layer_names=["forward", "backward"],
                                        value_name="h" if enc_signal == "hidden" else "tanh(c)",
                                        held_out=ui.span_select.Corpus(
                                            held_pieces, held_states[enc_signal],
                                            f"{len(starts)} held-out English lines (examples/test_long.tsv)",
                                            lambda s, e: jump_to_held_out_line(starts, s, e)))

ui.address.set_address(ui.address.address_of(ADDRESS, ["model", "tab"] + (
    ["layer", "cell", "signal", "feature", "regex"] if S.get("cells_tab") != "Translation models" else []))
    | span_address())
