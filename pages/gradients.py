"""Gates & Gradients: why LSTMs and GRUs exist, measured on untrained and trained cells.

The page is layout and widgets only; the measurements are s2s.gradients and
s2s.memory_gap, the figures s2s.figures.
"""
import math
from pathlib import Path

import pandas as pd
import streamlit as st

import ui.address
import ui.models
import ui.show
from s2s.export import file_stem
from s2s.figures import CELL_NAMES, gradient_flow_figure, memory_gap_figure, memory_span_figure, untrained_flow_figure
from s2s.gradients import DEMO_DEFAULTS, DEMO_RANGES, GradientFlow, gradient_flow, untrained_flow
from s2s.text import MAX_PASSAGE_CHARS, InputError, clean_passage

ui.address.run_through_app()     # a link's first run in Streamlit's old multipage mode: rerun through app.py

ROOT = Path(__file__).resolve().parent.parent
GAP_RESULTS = ROOT / "results" / "memory_gap.json"
EXAMPLES = {"War and Peace": ROOT / "examples" / "war_and_peace_heldout.txt",     # test parts: never trained on
            "Linux kernel": ROOT / "examples" / "kernel_heldout.c"}
CELL_ORDER = {"rnn": 0, "gru": 1, "lstm": 2}
CORPUS_NAMES = {"war-and-peace": "War and Peace", "linux-kernel": "Linux kernel"}
SHORT_CELL_NAMES = {"rnn": "RNN", "gru": "GRU", "lstm": "LSTM"}     # in the corpus box, whose width is a third
TABS = ["Live: untrained cells", "Trained models", "LSTM memory", "Remembering across a gap", "Bits per character"]
FAR = 50          # the distance the captions compare at: far enough to show vanishing, within the shortest text
EQUATIONS = {
    "rnn": r"\text{RNN: } h_t = \tanh(W x_t + U h_{t-1}) \;\Rightarrow\; "
           r"\frac{\partial h_t}{\partial h_{t-1}} = \mathrm{diag}(1 - h_t^2)\, U",
    # the dashed lines are the first term alone; the solid ones are the whole derivative
    "lstm": r"\text{LSTM: } c_t = f_t \odot c_{t-1} + i_t \odot g_t \;\Rightarrow\; "
            r"\frac{\partial c_t}{\partial c_{t-1}} = "
            r"\underbrace{\mathrm{diag}(f_t)}_{\text{memory path}} + \underbrace{\dots}_{\text{through } h_{t-1}}",
    "gru": r"\text{GRU: } h_t = (1 - z_t) \odot h_{t-1} + z_t \odot \tilde h_t \;\Rightarrow\; "
           r"\frac{\partial h_t}{\partial h_{t-1}} = "
           r"\underbrace{\mathrm{diag}(1 - z_t)}_{\text{memory path}} + "
           r"\underbrace{\dots}_{\text{through } z_t,\, \tilde h_t}",
}


@st.cache_data(max_entries=64, show_spinner=False)
def untrained_cached(cell: str, radius: float, forget_bias: float, hidden: int, length: int):
    return untrained_flow(cell, radius, forget_bias, hidden, length)


@st.cache_data(max_entries=32, show_spinner="Backpropagating through every model…")
def flow_cached(path: str, text: str, max_distance: int) -> GradientFlow:
    return gradient_flow(ui.models.load_charlm_path(path).model, text, max_distance)


def share(x: float) -> str:
    """A gradient share for a caption: 0.031 -> '3.1e-02'; exact zeros and overflows say so."""
    return "0 (below float precision)" if x == 0 else "∞ (past float range)" if x == math.inf else f"{x:.1e}"


def gate_path_note(flows: list, k: int) -> str:
    """How far the LSTM's whole gradient k steps back is from its memory path alone (∏ f, dashed),
    as measured: the lecture's ∂c_t/∂c_{t−1} = f_t is one term of the derivative."""
    lstm = next((f for f in flows if f.cell == "lstm"), None)
    if lstm is None or not lstm.keep_product or lstm.keep_product[k] <= 0 or not math.isfinite(lstm.grad_norm[k]):
        return ""
    ratio = lstm.grad_norm[k] / lstm.keep_product[k]
    where = f"{ratio:.1f} times" if ratio >= 1 else f"{ratio:.2g} of"
    return (f"{k} steps back the LSTM's gradient (solid) is {where} its ∏ f (dashed): ∂c_t/∂c_(t−1) = f_t is the "
            "memory path alone; the whole derivative also runs through h_(t−1) = o ⊙ tanh(c_(t−1)) into the next "
            "step's gates and candidate, and those terms make the difference (the equations below).")


st.title("Gates & Gradients")
st.caption("Training sends the error back through time, one multiplication per step. In a plain RNN the product "
           "shrinks (or blows up) geometrically; an LSTM's memory is multiplied by its forget gates, a GRU's by 1 − z.")
S = st.session_state
# kept while their tab is closed, and while the reader visits another page
ui.address.keep_across_pages("gradients_tab", "radius", "forget_bias", "hidden", "length", "corpus", "passage_source",
                             "passage_typed", "max_distance")
HIDDEN_SIZES = [8, 16, 32, 64, 128, 256]          # the live demonstration's slider, and what a link may name
# what the address holds: a copied link reproduces the view
ADDRESS = {"tab": ("gradients_tab", ui.address.choice(TABS)),
           "radius": ("radius", ui.address.number_in(*DEMO_RANGES["radius"], float)),
           "forget_bias": ("forget_bias", ui.address.number_in(*DEMO_RANGES["forget_bias"], float)),
           "hidden": ("hidden", lambda raw: int(ui.address.choice([str(h) for h in HIDDEN_SIZES])(raw))),
           "length": ("length", ui.address.number_in(*DEMO_RANGES["length"])), "corpus": ("corpus", str),
           "distance": ("max_distance", ui.address.number_in(10, 200))}
arrival = ui.address.arrival_query("gradients")
ui.address.tab_from_query(arrival, "gradients_tab", TABS)     # a link may name the tab (?tab=Trained+models)
for note in ui.address.read_address(arrival, ADDRESS):
    st.info(note)
tabs = st.tabs(TABS, key="gradients_tab", on_change="rerun")

# ------------------------------------------------------------------ live demonstration
with tabs[0]:
    if tabs[0].open:
        left, right = st.columns([1, 3])
        with left:
            for key, default in DEMO_DEFAULTS.items():     # in state, none beside the widget: Streamlit warns
                S.setdefault(key, default)                   # when state (a link, keep_across_pages) sets it too
            radius = st.slider("Recurrent weights' spectral radius ρ", *DEMO_RANGES["radius"], step=0.05,
                               key="radius", help="Every recurrent matrix is ρ·Q with Q orthogonal.")
            forget_bias = st.slider("Forget-gate bias", *DEMO_RANGES["forget_bias"], step=0.5,
                                    key="forget_bias", help="The LSTM's f and the GRU's 1 − z start at sigmoid(bias): "
                                                            "how much memory they keep per step at rest.")
            hidden = st.select_slider("Hidden size", HIDDEN_SIZES, key="hidden")
            length = st.slider("Sequence length T", *DEMO_RANGES["length"], step=10, key="length")
        try:
            flows = [untrained_cached(c, float(radius), float(forget_bias), int(hidden), int(length))
                     for c in ("rnn", "gru", "lstm")]
        except InputError as e:
            st.warning(str(e))
        else:
            with right:
                fig = untrained_flow_figure(flows, f"Untrained cells, ρ = {radius:.2f}, forget bias "
                                                   f"{forget_bias:+.1f}: gradient left after T − t steps")
                stem = file_stem("gradient-flow-untrained", f"rho{radius:.2f}", f"forget-bias{forget_bias:+.1f}",
                                 f"hidden{int(hidden)}", f"T{int(length)}")
                with st.container(key="point_untrained"):     # what the Start topic promises (first screen)
                    ui.show.plotly_chart(fig, share=0.72, key="untrained", config=ui.show.camera(stem))
                ui.show.chart_downloads(fig, stem, "untrained", about={
                    "what": "||d(u·m_T)/dm_t|| against T − t for untrained Elman RNN, GRU and LSTM cells "
                            "(s2s.gradients.untrained_flow), and the product of each cell's keep gates",
                    "radius": float(radius), "forget_bias": float(forget_bias), "hidden": int(hidden),
                    "length": int(length)})
                k = min(FAR, int(length) - 1)
                kept = {CELL_NAMES[f.cell]: f.grad_norm[k] for f in flows}
                st.caption(f"Measured here, {k} steps back: the RNN keeps {share(kept['Elman RNN'])} of the gradient "
                           f"that reached its memory, the GRU {share(kept['GRU'])}, the LSTM {share(kept['LSTM'])} "
                           "(m is the memory: the LSTM's c, the GRU's and RNN's h; mean over 16 random sequences, "
                           "u a random unit vector). "
                           + (f"At ρ = {radius:.2f} the RNN's red line falls: " if kept["Elman RNN"] < 1 else
                              f"At ρ = {radius:.2f} the RNN's red line rises (exploding gradients): ")
                           + "each step multiplies the gradient by U = ρQ and by the tanh's slope 1 − h², at most "
                           "1, so it grows only once ρ outweighs that damping; a linear RNN would turn at ρ = 1. "
                           "Raise the bias and the dashed products of the gates flatten. "
                           + gate_path_note(flows, k))
            for cell in ("rnn", "lstm", "gru"):
                st.latex(EQUATIONS[cell])

# ------------------------------------------------------------------ trained models
models = ui.models.charlm_models()
corpora: dict[str, list] = {}
for info in models:
    corpora.setdefault(info.metrics.get("train", {}).get("data", info.name), []).append(info)
for group in corpora.values():
    group.sort(key=lambda i: CELL_ORDER.get(i.cell, 9))
corpus_names = sorted(corpora, key=lambda c: (-len({i.cell for i in corpora[c]}), c))   # most cell types first
if "corpus" in S and S["corpus"] not in corpus_names:       # a link's corpus this server does not have
    S.pop("corpus")


def passage_picker(with_distance: bool = False) -> tuple[str | None, list, int]:
    """The passage, the corpus's models and K, shared by the two tabs that measure trained models."""
    c1, c2, c3 = st.columns([4, 5, 3])     # at 1280 px: the corpus box's text and all three passages fit
    if with_distance:      # its default in state, none beside it: Streamlit warns when state sets it too
        S.setdefault("max_distance", 200)
    K = c3.slider("How far back, K (characters)", 10, 200, step=10, key="max_distance") if with_distance else 200
    corpus = c1.selectbox("Models trained on", corpus_names, key="corpus",
                          on_change=lambda: S.pop("passage_source", None),
                          format_func=lambda c: f"{CORPUS_NAMES.get(c.split('/')[0], c)}: "     # short: fits the box
                                                + ", ".join(SHORT_CELL_NAMES.get(i.cell, i.cell) for i in corpora[c]))
    S.setdefault("passage_source", list(EXAMPLES)[1 if "linux" in corpus else 0])    # (as max_distance's)
    source = c2.segmented_control("Passage (examples: the test part, never trained on)", list(EXAMPLES) + ["Your text"],
                                  key="passage_source")
    if source == "Your text":
        with st.form("own_passage"):
            st.text_area("Paste a passage (at least a few hundred characters)", key="passage_typed", height=120,
                         help=f"Up to {MAX_PASSAGE_CHARS:,} characters.")
            st.form_submit_button("Measure", type="primary")
        raw = S.get("passage_typed", "")
    else:
        raw = EXAMPLES.get(source or next(iter(EXAMPLES))).read_text(encoding="utf-8")
    try:
        return clean_passage(raw), corpora[corpus], K
    except InputError as e:
        st.warning(str(e))
        return None, corpora[corpus], K


with tabs[1]:
    if tabs[1].open:
        if not models:
            st.info("No character-level model in `checkpoints/`: "
                    "train them with `bash training/train_charlms.sh` (see the README).")
        else:
            text, group, K = passage_picker(with_distance=True)
            if text is not None:
                if len(text) < K + 2:
                    st.warning(f"This passage has {len(text):,} characters; looking {K} back needs at least {K + 2:,}. "
                               "Paste a longer one or lower K.")
                else:
                    flows = {f"{CELL_NAMES.get(i.cell, i.cell)} ({i.name})":
                             flow_cached(ui.models.model_path(i.name), text, K)
                             for i in group}
                    ui.show.plotly_chart(gradient_flow_figure(flows, "Trained models: the gradient of one prediction, "
                                                                     "k characters back"),
                                         key="trained_flow", config=ui.show.camera("trained_flow"))
                    k = min(FAR, K)
                    n_pos = next(iter(flows.values())).positions
                    st.caption(f"g(k) = mean over {n_pos} position{'s' if n_pos != 1 else ''} t of "
                               "‖∂ log p(x_{t+1} | x_≤t) / ∂h_{t−k}‖, the top layer's state. Measured on this passage, "
                               f"g({k})/g(0): " + "; ".join(f"{label.split(' (')[0]} {share(f.ratio(k))}"
                                                            for label, f in flows.items()) + ".")

# ------------------------------------------------------------------ LSTM memory
with tabs[2]:
    if tabs[2].open:
        lstms = [i for i in models if i.cell == "lstm"]
        if not lstms:
            st.info("No character-level LSTM in `checkpoints/`.")
        else:
            text, group, _ = passage_picker()
            lstm = next((i for i in group if i.cell == "lstm"), None)
            if lstm is None:
                st.info("None of these models is an LSTM: pick a corpus with one.")
            elif text is not None and len(text) < 202:
                st.warning(f"This passage has {len(text):,} characters; the memory is measured up to 200 back, "
                           "which needs at least 202.")
            elif text is not None:
                flow = flow_cached(ui.models.model_path(lstm.name), text, 200)
                lives = flow.half_lives()
                ui.show.plotly_chart(memory_span_figure(lives, 200, f"How long each cell of {lstm.name}'s top layer "
                                                                    "keeps half its memory"),
                                     key="half_lives", config=ui.show.camera("half_lives"))
                # the counts follow the chart's bars (0, 1, 2–4 | … | 50–99, 100–200 | beyond), so a class can
                # add them up from the chart
                st.caption(f"Along the memory path ∂c_t/∂c_(t−k) = ∏ f, averaged over {flow.positions} positions of "
                           f"this passage: {int((lives <= 4).sum())} of {len(lives)} cells keep half their memory "
                           f"for 4 characters or fewer (the first three bars), {int((lives >= 50).sum())} for 50 or "
                           f"more, {int((lives > 200).sum())} beyond 200.")

# ------------------------------------------------------------------ the gap experiment
with tabs[3]:
    if tabs[3].open:
        experiment = ui.models.results_file(GAP_RESULTS)
        if experiment is None:
            st.info("No results yet: "
                    "run `python -m s2s.memory_gap --gaps 5 10 20 50 100 --out results/memory_gap.json`.")
        else:
            ui.show.plotly_chart(memory_gap_figure(experiment), key="gap", config=ui.show.camera("gap"))
            rows = experiment["results"]
            held = []
            for cell in dict.fromkeys(r["cell"] for r in rows):
                good = [r["gap"] for r in rows if r["cell"] == cell and r["accuracy"] >= 0.9]
                held.append(f"{CELL_NAMES.get(cell, cell)}: "
                            + (f"up to a gap of {max(good)}" if good else "at no gap"))
            st.caption("Read a symbol, then a gap of distractors, then say the symbol. ≥ 90% right on held-out "
                       "sequences — " + "; ".join(held) + f". {experiment.get('task', '')}")
            st.caption("Reproduce: `"
                       + experiment.get("command", "python -m s2s.memory_gap --gaps 5 10 20 50 100") + "`")

# ------------------------------------------------------------------ bits per character
with tabs[4]:
    if tabs[4].open:
        rows = [{"corpus": CORPUS_NAMES.get(corpus.split("/")[0], corpus), "cell": CELL_NAMES.get(i.cell, i.cell),
                 "model": i.name, "parameters": f"{i.metrics.get('train', {}).get('parameters', 0):,}",
                 "test bits/char": i.metrics.get("test", {}).get("bits_per_char"),
                 "validation bits/char": i.metrics.get("valid", {}).get("bits_per_char"),
                 "training minutes": i.metrics.get("train", {}).get("minutes")}
                for corpus in corpus_names for i in corpora[corpus]]
        if not rows:
            st.info("No character-level model in `checkpoints/`.")
        else:
            # one number of decimals for every figure (a metrics file may hold 1.625 beside 1.6253)
            ui.show.table(pd.DataFrame(rows), formats={c: "%.3f" for c in ("test bits/char", "validation bits/char")})
            st.caption("Lower is better: the mean −log₂ p of each next character of the test part (the end of the "
                       "file, never trained on). Models on one corpus share the text, the size (2 layers × 256), the "
                       "steps and the schedule; only the cell differs.")

ui.address.set_address(ui.address.address_of(ADDRESS, ["tab", "radius", "forget_bias", "hidden", "length", "corpus",
                                                      "distance"]))
