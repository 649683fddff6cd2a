"""Streamlit glue shared by the pages: cached model loading and the sidebar model picker.

Models are cached with st.cache_resource, so switching pages or models never reloads
what is already loaded. Everything that computes lives in s2s/.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager  # internal: see run_through_app

# The registry imports no torch: the start page draws while warm_up imports it (below).
from s2s.checkpoint import (
    CheckpointError,
    CheckpointInfo,
    LanguageModel,
    Translator,
    checkpoint_root,
    default_device,
    hub_checkpoints,
    list_checkpoints,
    load_charlm,
    load_translator,
)
from s2s.export import file_stem, plotly_config, plotly_data, plotly_html, vega_html, vega_png, vega_svg
from s2s.hub import any_model_allowed, display_name, is_hub_spec, offered_models

if TYPE_CHECKING:
    from s2s.decode import Decoding  # imports torch: only when a page decodes

# One thread per request: batch-1 decoding gains little from more, and a shared server
# with several users stays responsive when no request grabs every core. torch reads this
# when it is imported; a process that imported it already (a test run) is told directly.
os.environ["OMP_NUM_THREADS"] = "1"
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(1)


def run_through_app() -> None:
    """Leave Streamlit's old multipage mode, and run this session's page again through app.py.

    Until some session has run app.py (which calls st.navigation), a server started next to
    a pages/ folder runs a deep link such as /translate?text=… as pages/translate.py alone:
    file names in the sidebar, no wide layout, no start page, the link's query ignored. The
    switch is one flag for the whole server, but a session whose first run began before the
    flag flipped (a second tab, or a link opened while the first run still imports torch) is
    in the old mode too, so a session's first run checks its own call stack: Streamlit's old
    mode runs the page from `_mpa_v1`. app.py and every page call this first; the rerun costs nothing (it
    happens before anything is drawn). Only a session's first run is rerun: it has no click
    to lose, and once the flag is off every later run of every session goes through app.py.
    (AppTest sets the flag again before each run; its later runs keep their clicks.)"""
    if st.session_state.get("_through_app"):
        return
    st.session_state["_through_app"] = True
    frame, old_mode = sys._getframe(1), False
    while frame is not None and not old_mode:
        old_mode = frame.f_code.co_name == "_mpa_v1" and "streamlit" in frame.f_code.co_filename
        frame = frame.f_back
    if PagesManager.uses_pages_directory or old_mode:
        PagesManager.uses_pages_directory = False
        st.rerun()


DEFAULT_MODEL = "en-fr-additive"


@st.cache_resource(show_spinner="Loading the model…", max_entries=16)
def load_path(path: str) -> Translator:
    return load_translator(path)


@st.cache_resource(show_spinner="Loading the model…", max_entries=8)
def load_charlm_path(path: str) -> LanguageModel:
    return load_charlm(path)


@st.cache_data(show_spinner=False)
def _results(path: str, mtime: float) -> dict | None:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def results_file(path: Path) -> dict | None:
    """A committed results file (results/*.json), None if missing or unreadable; cached,
    keyed by its modification time, so a new run shows."""
    return _results(str(path), path.stat().st_mtime if path.is_file() else 0.0)


def model_path(name: str) -> str:
    """The full path of a checkpoint: what cached functions are keyed by, so that two
    checkpoint folders with the same model name never share cached results. A hub model is
    named by its spec (hf:NAME, or its folder), which is its path."""
    if is_hub_spec(name) or name in hub_specs():
        return name
    return str(checkpoint_root() / name)


def hub_specs() -> list[str]:
    """The hub models this session may load: the operator's list (S2S_HUB_MODELS), and with
    S2S_ALLOW_ANY_MODEL=1 the ones this session named in the picker's box."""
    added = st.session_state.get("_added_models", []) if any_model_allowed() else []
    return list(dict.fromkeys(offered_models() + added))


def hub_models() -> list[CheckpointInfo]:
    """Registry rows of hub_specs(), from their configs (no weights, no download)."""
    return list(_hub_rows(tuple(hub_specs())))


@st.cache_resource(ttl=60, show_spinner=False)
def _hub_rows(specs: tuple[str, ...]) -> tuple[CheckpointInfo, ...]:
    return tuple(hub_checkpoints(list(specs)))


def warm_up() -> threading.Thread | None:
    """Once per server process, in the background: import torch and what the pages compute
    with, read the registry, load the default model and decode once (the first decode builds
    its weight layouts, ~0.3 s a model here), then the Bottleneck page's first screen, then
    every other translation model (Compare attention and a model switch use them). The first
    page a class sees is the start page, which needs none of this; by the time someone presses
    a link, its page finds it all in the caches (`tools/bench_browser.py`,
    start_link_first_heatmap and start_link_bottleneck). Returns the thread that started,
    None if one already ran."""
    global _warm_thread
    with _warm_lock:
        if _warm_thread is not None:
            return None
        _warm_thread = threading.Thread(target=_warm, name="s2s-warm-up", daemon=True)
    _warm_thread.start()
    return _warm_thread


_warm_lock, _warm_thread = threading.Lock(), None
_default_warm = threading.Event()     # set once warm_up has torch, the default model and its first decode
_plotly_imported = threading.Event()  # set once warm_up has imported plotly (and pandas)
_altair_ready = threading.Event()     # set once warm_up has imported altair and built a chart (the Bottleneck's)


def _after_warm_up(imported: threading.Event, timeout: float = 30) -> bool:
    """Whether a page may use what the warm-up imports: at once when no warm-up runs, else
    once it has `imported` them (at most `timeout` s on). Two threads importing one package
    (plotly, pandas, altair) at once can see each other's half-imported modules."""
    return _warm_thread is None or imported.wait(timeout=timeout)


def load_plotly_early() -> None:
    """On a server still warming up, draw a hidden, empty Plotly chart at once, so that the
    browser fetches and runs Plotly's script (4.7 MB, the slowest part of a fresh page's first
    chart here) while the page waits for torch and the model, instead of after the heatmap
    arrives. Call it before a page's imports of s2s, which wait for torch. Always makes the
    same one element (empty on a warm server), so the page's layout does not depend on it;
    app.py's style hides the chart (.st-key-plotly_early)."""
    slot = st.empty()
    if not (_default_warm.is_set() or _warm_thread is None) and _after_warm_up(_plotly_imported):
        _hidden_plotly_chart(slot)


def preload_chart_scripts() -> None:
    """At the end of the Start page, whose links open Plotly pages and the Bottleneck's Altair
    charts: have the browser load Plotly's script (4.7 MB) and Vega while the outline is read,
    not when the next page's first chart waits for them. Plotly's chart is hidden
    (.st-key-plotly_early in app.py); the Vega-Lite one is placed off-screen with a real width
    (.st-key-vega_early), since the browser does not draw an element of no width, and one never
    drawn loads nothing. Always the same elements, so the page's layout does not depend on
    them; both draw with the pandas and plotly the warm-up imported (on a cold server this
    waits, after all the reader sees is sent)."""
    plotly_slot, vega_box = st.empty(), st.container(key="vega_early")   # a chart's own key makes no class
    if _after_warm_up(_plotly_imported):
        _hidden_plotly_chart(plotly_slot)
        vega_box.vega_lite_chart(spec={"data": {"values": [{"x": 0}]}, "mark": "point", "width": 40, "height": 10,
                                       "encoding": {"x": {"field": "x", "type": "quantitative"}}}, width=60)


def _hidden_plotly_chart(slot) -> None:
    """The empty Plotly chart load_plotly_early and preload_chart_scripts draw into `slot`."""
    slot.plotly_chart({"data": [{"type": "scatter", "x": [], "y": []}], "layout": {"height": 10}},
                      key="plotly_early", config={"staticPlot": True})


class _QuietWarmUp(logging.Filter):
    """The warm-up runs outside any session, so the model's "Loading…" spinner has nowhere to
    go and Streamlit logs "missing ScriptRunContext" for it; that is expected there."""

    def filter(self, record: logging.LogRecord) -> bool:
        return threading.current_thread().name != "s2s-warm-up"


logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_QuietWarmUp())


def _warm() -> None:
    try:
        _warm_models()
    finally:
        _plotly_imported.set()
        _default_warm.set()
        _altair_ready.set()


def _warm_models() -> None:
    import pandas  # noqa: F401  (first: plotly checks values against pandas, whole or half imported)

    import s2s.figures  # noqa: F401  (plotly: before torch, so load_plotly_early waits little)
    _plotly_imported.set()
    import s2s.decode
    from s2s.bottleneck import STRESS_DEFAULT, joined_example, measured_models
    from s2s.text import InputError
    infos = [i for i in translation_models() if i.error is None]
    default = bottleneck_default(infos)
    bottleneck = measured_models(infos, default) if default else []

    def warm(name: str) -> None:
        try:
            s2s.decode.greedy(load_model(name), "Hello.")
        except (CheckpointError, InputError, OSError):   # the page that opens it says what is wrong
            pass

    # In the order the Start page's links need them: Translate's default model, then the
    # Bottleneck page's first screen (its models, their greedy decodings of the joined
    # examples, outputs only and nothing timed, and its Altair charts), then the models only a
    # switch or Compare attention asks for. A link pressed before the end then waits for less.
    names = [i.name for i in infos]
    if DEFAULT_MODEL in names:
        warm(DEFAULT_MODEL)
    _default_warm.set()
    for name in bottleneck:
        if name != DEFAULT_MODEL:
            warm(name)
        for k in range(1, STRESS_DEFAULT + 1):
            try:
                greedy_decoding(model_path(name), joined_example(k)[0])
            except (CheckpointError, InputError, OSError):
                break
    # importing altair and building a first chart (its schema validators) took half a second
    # of the Bottleneck page's first run
    pandas.DataFrame({"model": ["a"], "x": [0], "y": [0]}).pipe(s2s.figures.length_chart, "x", "y").to_dict()
    _altair_ready.set()
    for name in names:
        if name != DEFAULT_MODEL and name not in bottleneck:
            warm(name)


def altair_ready(timeout: float = 30) -> None:
    """Wait (at most `timeout` s) while the warm-up imports altair: a page never imports it beside it."""
    _after_warm_up(_altair_ready, timeout)


def bottleneck_default(infos: list[CheckpointInfo]) -> str | None:
    """The recurrent attention model the Bottleneck page compares with the fixed vector at
    first: the default model if it is one, else the first; None if the page cannot run
    (no fixed-vector model or no recurrent attention model)."""
    attention = [i.name for i in infos if i.has_attention and i.arch == "rnn"]
    if not attention or not any(i.attention == "none" for i in infos):
        return None
    return DEFAULT_MODEL if DEFAULT_MODEL in attention else attention[0]


@st.cache_data(max_entries=256, show_spinner=False)
def greedy_decoding(path: str, text: str) -> Decoding:
    """Greedy decoding, states included, of `text` by the model at `path`: once per server
    for every session (the Bottleneck page's views; warm_up fills it for the first screen)."""
    from s2s.decode import greedy
    return greedy(load_path(path), text)


_timed: set[str] = set()      # models whose decode_timing is in its cache (the cost view shows it)


def timing_measured(paths: list[str]) -> bool:
    """Whether the cost view of these models was measured on this server already."""
    return all(p in _timed for p in paths)


def forget_timing() -> None:
    """"Measure again": drop the cost view's times."""
    decode_timing.clear()
    _timed.clear()


@st.cache_data(max_entries=16, show_spinner=False)     # the page shows its own spinner
def decode_timing(path: str) -> list[dict]:
    """The Bottleneck page's cost view for one model (s2s.bottleneck.timing_rows), measured
    once per server, when someone asks (*Time the models*). Not measured by warm_up: timed in
    the background, beside a page's own work, the times showed that contention instead of
    each model's cost."""
    from s2s.bottleneck import timing_rows
    rows = timing_rows(load_path(path), display_name(path))
    _timed.add(path)
    return rows


def load_model(name: str) -> Translator:
    """A checkpoint by name, loaded once per server process (keyed by its full path)."""
    return load_path(model_path(name))


@st.cache_resource(ttl=60, show_spinner=False)
def checkpoints_in(root: str) -> tuple[CheckpointInfo, ...]:
    """The registry, read from disk at most once a minute. A shared resource, not
    st.cache_data: that would unpickle every model's metrics (training traces included)
    on every run of every page, which was the largest cost of a Translate press."""
    return tuple(list_checkpoints(root))


def translation_models() -> list[CheckpointInfo]:
    return [c for c in checkpoints_in(str(checkpoint_root())) if c.kind == "translation"]


def charlm_models() -> list[CheckpointInfo]:
    return [c for c in checkpoints_in(str(checkpoint_root())) if c.kind == "charlm" and c.error is None]


def test_bleu(info: CheckpointInfo) -> float | None:
    return info.metrics.get("test", {}).get("test", {}).get("bleu")


def model_label(info: CheckpointInfo) -> str:
    if info.is_hub or is_hub_spec(info.name):
        return f"{display_name(info.name)}  (Hugging Face)"
    bleu = test_bleu(info)
    return f"{info.name}" + (f"  (BLEU {bleu:.1f})" if bleu is not None else "")


def picker_help(usable: list[CheckpointInfo]) -> str:
    """What the models on offer are, counted from their configs."""
    recurrent = [i for i in usable if i.arch == "rnn"]
    transformers = sum(i.arch == "transformer" and not i.is_hub for i in usable)
    hub = sum(i.is_hub for i in usable)
    parts = []
    if recurrent:
        parts.append(f"{len(recurrent)} recurrent encoder-decoder{'s' if len(recurrent) > 1 else ''} "
                     f"(attention: {', '.join(i.attention or 'none' for i in recurrent)})")
    if transformers:
        parts.append(f"{transformers} Transformer{'s' if transformers > 1 else ''}")
    text = " and ".join(parts) + ", English→French."
    if hub:
        text += (f" Also {hub} Hugging Face model{'s' if hub > 1 else ''} the server's operator lists (S2S_HUB_MODELS): "
                 "the research models, beside the lesson's.")
    return text


def _add_model(key: str) -> None:
    """The picker's "any model" box was filled in: offer that model in this session and choose it."""
    spec = st.session_state.get(f"{key}_any", "").strip()
    if spec:
        added = st.session_state.setdefault("_added_models", [])
        if spec not in added:
            added.append(spec)
        st.session_state[key] = spec


def model_picker(key: str = "model", usable: list[CheckpointInfo] | None = None, label: str = "Translation model",
                 help: str | None = None) -> str | None:
    """Sidebar select box over the translation checkpoints and the operator's hub models
    (`usable`: a page's own choice of them); returns the chosen name."""
    if usable is None:
        usable = [i for i in translation_models() + hub_models() if i.error is None]
    broken = [i for i in list(checkpoints_in(str(checkpoint_root()))) + hub_models() if i.error]
    with st.sidebar:
        st.markdown("### Model")
        if not usable:
            st.error("No usable translation checkpoint found in `checkpoints/`.")
            return None
        names = [i.name for i in usable]
        if st.session_state.get(key) not in names:
            st.session_state[key] = DEFAULT_MODEL if DEFAULT_MODEL in names else names[0]
        by_name = {i.name: i for i in usable}
        name = st.selectbox(label, names, key=key, format_func=lambda n: model_label(by_name[n]),
                            help=help or picker_help(usable))
        st.caption(by_name[name].description)
        if any_model_allowed():
            st.text_input("Any Hugging Face model", key=f"{key}_any", on_change=_add_model, args=(key,),
                          placeholder="hf:Helsinki-NLP/opus-mt-en-fr or a folder",
                          help="This server lets you name any encoder-decoder (S2S_ALLOW_ANY_MODEL=1): a hub name "
                               "is downloaded once into the Hugging Face cache, a folder is read as saved by "
                               "save_pretrained. Press Enter to load it.")
        device = default_device()
        st.caption(f"Device: **{'CUDA GPU' if device.type == 'cuda' else 'CPU'}**")
        for bad in broken:
            st.warning(f"Skipped a broken checkpoint: {bad.error}")
    return name


def get_model(name: str) -> Translator | None:
    """The cached model, or an error box naming the checkpoint (the others keep working)."""
    try:
        return load_model(name)
    except CheckpointError as e:
        st.error(f"This model cannot be loaded: {e}. The other models still work: choose one under the model list.")
        return None


def unknown_characters_note(unknown: list[str], of_what: str, why: str = "") -> str:
    """A caption naming the characters of `of_what` ("your text", "the reference") that the model's
    vocabulary lacks: each is read as <unk>, which would otherwise look like the app dropping them.
    `why`, if given, follows `<unk>` (", a symbol it learned almost nothing about")."""
    n = len(unknown)
    return (f"{n} character{'s' if n > 1 else ''} of {of_what} {'are' if n > 1 else 'is'} not in this model's "
            f"vocabulary and read as `<unk>`{why}: " + " ".join(code_span(ch) for ch in unknown[:20])
            + (" …" if n > 20 else ""))


def code_span(piece: str) -> str:
    """A token as a markdown code span: shown literally, whatever characters it holds."""
    return "`" + piece.replace("`", "ˋ") + "`"


def escaped(text: str, size: str = "1.5rem") -> None:
    """Show user or model text large, always as text (HTML-escaped), never as markup."""
    import html
    st.markdown(f"<div class='s2s-text' style='font-size:{size};line-height:1.35'>{html.escape(text)}</div>",
                unsafe_allow_html=True)


def note_arrival(page: str) -> None:
    """Called on every run with the page about to run (app.py): when it is not the page of the
    previous run, the user has just arrived, and the URL's query string is kept for it."""
    if st.session_state.get("_page") != page:
        st.session_state["_page"] = page
        st.session_state["_arrival_query"] = st.query_params.to_dict()


def keep_across_pages(*keys: str) -> None:
    """Keep these widgets' values while they are not drawn: in a closed tab, behind a warning
    that stops the page, or while the reader visits another page. Streamlit forgets a widget's
    value at the end of any run that does not draw it; a value written back through session
    state is kept (Streamlit's own idiom), and the widget shows it instead of its default.
    Call before the widgets are drawn. app.py's restore_kept writes every page's kept values
    back on every run; this call does it too, for a page run without app.py (AppTest runs the
    page alone after switch_page)."""
    st.session_state.setdefault("_kept_across_pages", set()).update(keys)
    restore_kept()


def restore_kept() -> None:
    """Write every keep_across_pages key back (app.py calls it on every run, before the page)."""
    state = st.session_state
    for key in state.get("_kept_across_pages", ()):
        if key in state:
            state[key] = state[key]


def arrival_query(page: str) -> dict[str, str]:
    """The URL's query parameters if the user has just arrived on `page` (its URL path: a link
    opened or a Start-here link followed), else {}. Read once: later reruns of the page keep
    what the user changed since."""
    if PagesManager.uses_pages_directory:    # run without app.py (AppTest runs a page so)
        note_arrival(page)
    return st.session_state.pop("_arrival_query", {})


def scroll_into_view(selector: str) -> None:
    """Scroll the page so that the first element matching the CSS `selector` (a constant,
    never user text) is at the top of the window, once this run has been drawn: a link to a
    tab below the fold would otherwise open with the tab out of sight. Streamlit has no call
    for this; a script in a zero-height component iframe (same origin) scrolls its parent."""
    import streamlit.components.v1 as components
    components.html(f"""<script>
const doc = window.parent.document, selector = {json.dumps(selector)};
let tries = 0;
function scroll() {{
  const app = doc.querySelector('[data-testid="stApp"]'), el = doc.querySelector(selector);
  if (el && app && app.dataset.testScriptState === 'notRunning') {{
    el.scrollIntoView({{block: 'start'}});
    setTimeout(() => el.scrollIntoView({{block: 'start'}}), 400);   // after the charts above settle
  }} else if (tries++ < 100) setTimeout(scroll, 100);
}}
scroll();
</script>""", height=0)


def tab_from_query(query: dict, key: str, labels: list[str]) -> None:
    """Open the tab a link names (?tab=<its label>) by seeding the st.tabs key; call before
    st.tabs. An unknown label is ignored."""
    if query.get("tab") in labels:
        st.session_state[key] = query["tab"]


def state_from_query(query: dict, defaults: dict, ranges: dict, choices: dict) -> list[str]:
    """Seed st.session_state from a link's query string (arrival_query), so that a shared link
    reproduces the view: the settings the link names, the defaults for the rest. Without a link
    the session keeps its own values. Values are checked; bad ones are ignored with a note."""
    known = [k for k in query if k in defaults or k == "model"]
    if not known:
        for key, default in defaults.items():   # a widget whose state was dropped comes back at its default
            st.session_state.setdefault(key, default)
        return []
    notes = []
    for key, default in defaults.items():
        value = default
        if key in query:
            raw = query[key]
            try:
                value = type(default)(raw) if not isinstance(default, bool) else raw.lower() in ("1", "true", "yes")
                if key in ranges and not (ranges[key][0] <= value <= ranges[key][1]):
                    raise ValueError
                if key in choices and value not in choices[key]:
                    raise ValueError
            except ValueError:
                notes.append(f"Ignored the link's {key}={code_span(raw[:40])}: not a valid value.")   # shown as text
                value = default
        st.session_state[key] = value
    if "model" in query:
        st.session_state["model"] = query["model"]
    return notes


def camera(*what) -> dict:
    """st.plotly_chart's config: the camera button saves SVG, at the drawn size, named for what
    the chart shows (its kind, the model, the input)."""
    return plotly_config(file_stem(*what))


def vega_downloads(chart, data, stem: str, key: str) -> None:
    """Below a Vega-Lite chart (Streamlit gives it no export menu): SVG, PNG, an offline HTML
    file and its data as CSV, all named `stem`, each built only when clicked."""
    c = st.columns(4)
    for col, (label, ext, make, mime) in zip(c, (
            ("⬇ SVG", "svg", lambda: vega_svg(chart), "image/svg+xml"),
            ("⬇ PNG", "png", lambda: vega_png(chart), "image/png"),
            ("⬇ HTML", "html", lambda: vega_html(chart), "text/html"),
            ("⬇ Data (CSV)", "csv", lambda: data.to_csv(index=False), "text/csv"))):
        col.download_button(label, make, file_name=f"{stem}.{ext}", mime=mime, on_click="ignore", key=f"{key}_{ext}")


def chart_downloads(fig, stem: str, key: str, data: str | None = None, about: dict | None = None) -> None:
    """Below a page's main Plotly chart: the chart as one interactive HTML file that works
    offline, and its data as JSON (`data`, or what the chart draws with `about` it), both named
    `stem` and built only when clicked (the HTML is ~5 MB)."""
    c = st.columns(2)
    c[0].download_button("⬇ Chart (HTML, interactive, offline)", lambda: plotly_html(fig, stem),
                         file_name=f"{stem}.html", mime="text/html", key=f"{key}_html", on_click="ignore")
    c[1].download_button("⬇ Data (JSON)", data if data is not None else lambda: plotly_data(fig, about),
                         file_name=f"{stem}.json", mime="application/json", key=f"{key}_data", on_click="ignore")


def set_address(values: dict) -> None:
    """Make the address hold these values (None ones left out), on every run, so that a copied
    link reproduces what is shown. Only written when it changes: each write is a message to
    the browser, which updates the address bar without reloading."""
    want = {k: str(v) for k, v in values.items() if v is not None}
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)


def choice(options) -> "Callable[[str], str]":
    """An address field's parser: one of `options`, else ValueError."""
    def parse(raw: str) -> str:
        if raw not in options:
            raise ValueError(raw)
        return raw
    return parse


def number_in(low, high, kind=int) -> "Callable[[str], float]":
    """An address field's parser: a number of `kind` in [low, high], else ValueError."""
    def parse(raw: str):
        value = kind(raw)
        if not (low <= value <= high):
            raise ValueError(raw)
        return value
    return parse


def read_address(query: dict, fields: dict) -> list[str]:
    """Seed widget state from a link's query string: `fields` maps an address name to (state
    key, parser); a value the parser refuses is ignored, with a note to show."""
    notes = []
    for name, (key, parse) in fields.items():
        if name in query:
            try:
                st.session_state[key] = parse(query[name])
            except (TypeError, ValueError):
                notes.append(f"Ignored the link's {name}={code_span(query[name][:40])}: not a valid value.")
    return notes


def address_of(fields: dict, names) -> dict:
    """The current values of these address fields (those in state), for set_address."""
    return {n: st.session_state.get(fields[n][0]) for n in names}
