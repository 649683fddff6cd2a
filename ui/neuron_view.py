"""The Heads tab's neuron view (Vig 2019): one head's computation of one query's row, q and every
k_j, their elementwise products, q·k_j, the scaling and any bias, the softmax (s2s.heads,
drawn by s2s.figures.neuron_figure). Below a Transformer's grid for the layer and head chosen
there; for a recurrent model, its one attention at one output step, in its scoring function's
own formula. The query is chosen in a select box, or by a click on a row of the enlarged head
(`pick_row`); its position is in the address (heads_query, from 1).

Below a Transformer's grid, the view is drawn after the first screen: the first time the Heads
tab shows a model and text, its run ends with a placeholder, and the browser, once that run's
charts are drawn, asks for the view (a hidden button, clicked by LATER_JS, in the same fragment),
which then runs alone: a Start link's grid is on screen without waiting for it (issue #62,
`python tools/bench_browser.py --link Heads`). A query chosen in the view reruns the view alone,
which writes heads_query to the address itself.

Importing this module imports torch (s2s.heads): the page imports it with ui.translate_tabs.
"""
from __future__ import annotations

import streamlit as st

import ui.address
import ui.models
import ui.show
from s2s import figures
from s2s.checkpoint import Translator
from s2s.decode import Decoding
from s2s.heads import NeuronView, neuron_view
from s2s.piece_words import HEAD_KINDS, word_spans
from s2s.text import InputError

KEY = "heads_query"          # the query's position (0-based), one select box for every kind and model
# Once the run that drew the placeholder is over and every chart on the page is drawn (two frames
# on, so that they are painted), click the hidden button that draws the view. Never user text; in
# a function of its own, since the page's other scripts share its global scope.
LATER_JS = """(() => {
const doc = document, began = Date.now();
function drawn() {
  const app = doc.querySelector('[data-testid="stApp"]');
  return app && app.dataset.testScriptState === 'notRunning'
    && [...doc.querySelectorAll('.stPlotlyChart')].every(p => p.querySelector('.main-svg'));
}
let clicks = 0, clicked = 0, seen = false;
function later() {
  const button = doc.querySelector('.st-key-neuron_later button');
  seen = seen || !!button;          // (the script can run before its run has drawn the button)
  if (seen && !button && drawn()) return;       // the view is drawn (or the tab was left)
  // a click that a rerun swallowed (the page reran, as a link's first run does) leaves the button:
  // clicked again once the page has settled, a few times at most
  if (drawn() && button && Date.now() - clicked > 1000 && clicks < 5) {
    clicks += 1;
    clicked = Date.now();
    requestAnimationFrame(() => requestAnimationFrame(() => button.click()));
  }
  if (Date.now() - began < 600000) setTimeout(later, 100);
}
later();
})();
"""


@st.cache_data(max_entries=128, show_spinner=False)
def view_cached(path: str, text: str, target_ids: tuple, kind: str, layer: int, head: int, query: int
                ) -> NeuronView:
    """One head's row for the page's output (`target_ids`, forced), keyed by all it depends on."""
    return neuron_view(ui.models.load_path(path), text, kind, layer, head, query, target_ids=list(target_ids))


def pick_row() -> None:
    """A click on a row of the enlarged head: that row's query (its first piece, when the map
    shows whole words) in the neuron view below."""
    S = st.session_state
    points = S.head_enlarged.selection.points if S.get("head_enlarged") else []
    first_pieces = S.get("_neuron_row_pieces") or []
    if points and "y" in points[0] and 0 <= int(points[0]["y"]) < len(first_pieces):
        S[KEY] = first_pieces[int(points[0]["y"])]


def _choose(rows: list[str], words: bool, label: str, signature: tuple) -> int:
    """The query's select box over `rows` (pieces), its value checked first: the options' labels
    change with the model, the kind and the text (ui.address.check_choice, `resend`)."""
    S = st.session_state
    changed = S.get("_neuron_rows_of") != signature
    S["_neuron_rows_of"] = signature
    default = len(rows) // 2
    ui.address.check_choice(KEY, range(len(rows)), default, resend=changed)
    S.setdefault(KEY, default)
    # the enlarged map's rows (pieces, or words) -> the piece a click on one picks (pick_row)
    S["_neuron_row_pieces"] = [idx[0] for _, idx in word_spans(rows)] if words else list(range(len(rows)))
    return st.selectbox(label, range(len(rows)), key=KEY, format_func=lambda i: f"{i + 1} · {rows[i]}",
                        help="The query: the row of the head's attention to compute. A click on a row of the "
                             "enlarged map above picks it too.")


def _draw(v: NeuronView, model: str, text: str, where) -> None:
    """The equation, the figure and what its panels are."""
    where.markdown(f"**{v.labels['formula']}** for query **{v.query_index + 1}** "
                   f"{ui.show.code_span(v.query_token)} over {len(v.key_tokens)} keys, "
                   f"{len(v.query)} dimensions each")
    projector = ui.show.projector()
    ui.show.plotly_chart(figures.neuron_figure(v, projector), key="neuron_view",
                         config=ui.show.camera("neuron_view", model, text[:40]))
    top = int(v.weights.argmax())
    scaling = (f"multiplied by {v.scale:.4g}" if v.scale != 1 else "not scaled")
    bias = f", plus the {v.labels['bias_name']}" if v.bias is not None else ""
    st.caption(
        f"Left to right, the equation's parts: **{v.labels['query']}** (the query, top row) and each key "
        f"**{v.labels['keys']}**, then their elementwise products **{v.labels['products']}** (blue positive, red "
        f"negative: the dimensions that pull key j's score up or down), their sum over dimensions "
        f"**{v.labels['dots']}**, {scaling}{bias}"
        + f", and the softmax: the weights, which are this row of the head's attention. Here the largest, "
          f"{v.weights[top]:.2f}, goes to {ui.show.code_span(v.key_tokens[top])} (score {v.scores[top]:.2f}). "
        + " ".join(v.notes) + " Hover for every number; `python -m s2s.heads` writes them all.")


@st.fragment
def transformer(tr: Translator, d: Decoding, words: bool, kind: str, layer: int, head: int, model: str,
                text: str) -> None:
    """Below the Heads grid: the neuron view of the head enlarged (`kind`, `layer`, `head`, 0-based)
    for one query of the page's output `d`; the first time for this model and text, after the
    first screen (the module's docstring)."""
    S = st.session_state
    shown = (model, text)
    if S.get("_neuron_shown_for") != shown:
        with st.container(key="neuron"):
            st.markdown(f"**Neuron view** · how head {head + 1} of layer {layer + 1} computes one row of its "
                        f"{HEAD_KINDS[kind].name}")
            st.caption("Drawn in a moment, once the heads above are on screen…")
        st.html("<style>.st-key-neuron_later{display:none}</style>")
        st.button("Draw the neuron view", key="neuron_later", on_click=S.__setitem__,
                  args=("_neuron_shown_for", shown))
        # the script's text changes with what it draws: Streamlit reruns an element's script only then
        ui.address.run_script(LATER_JS + f"// {abs(hash(shown))}", "neuron_later")
        return
    view(tr, d, words, kind, layer, head, model, text)


def view(tr: Translator, d: Decoding, words: bool, kind: str, layer: int, head: int, model: str,
         text: str) -> None:
    """The view itself (in `transformer`'s fragment: rerun alone when its query changes, the
    address's heads_query with it)."""
    rows = d.source_tokens if kind == "encoder" else d.target_tokens
    with st.container(key="neuron"):
        st.markdown(f"**Neuron view** · how head {head + 1} of layer {layer + 1} computes one row of its "
                    f"{HEAD_KINDS[kind].name}")
        c_q, c_eq = st.columns([1, 3], vertical_alignment="bottom")
        with c_q:
            query = _choose(rows, words, "Query (source piece)" if kind == "encoder" else "Query (output piece)",
                            (model, kind, tuple(rows)))
        try:
            v = view_cached(ui.models.model_path(model), text, tuple(d.target_ids), kind, layer, head, query)
        except InputError as e:
            st.info(str(e))
            return
        _draw(v, model, text, c_eq)
    ui.address.update_address(heads_query=query + 1)      # a run of this view alone: the page's is not


def recurrent(tr: Translator, d: Decoding, model: str, text: str) -> None:
    """A recurrent model's one attention at one output step, in its scoring function's formula."""
    if d.attention is None:         # the fixed-vector model: nothing to compute
        return
    rows = d.target_tokens
    with st.container(key="neuron"):
        st.markdown(f"**Neuron view** · how {tr.model.cfg.attention} attention computes the weights of one output "
                    "step: the decoder state s_t is the query, the encoder states h_j the keys")
        c_q, c_eq = st.columns([1, 3], vertical_alignment="bottom")
        with c_q:
            step = _choose(rows, False, "Output step", (model, "rnn", tuple(rows)))
        try:
            v = view_cached(ui.models.model_path(model), text, tuple(d.target_ids), "cross", 0, 0, step)
        except InputError as e:
            st.info(str(e))
            return
        _draw(v, model, text, c_eq)
