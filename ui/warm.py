"""The warm-up: what a fresh server loads in the background so that the first click waits less.

A cold server has torch, plotly, pandas and altair to import and the models to load: several
seconds on 2 CPU cores. The first page a class sees is the Start page, which needs none of it,
so app.py starts warm_up, a background thread that loads everything in the order the Start
page's links need it; meanwhile the browser is told to fetch the charts' scripts
(load_plotly_early, preload_chart_scripts), so a page's first chart does not wait for them either.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time

import streamlit as st

from s2s.checkpoint import CheckpointError
from ui import models
from ui.show import MAIN_PX

# The Start page's select-a-span link (pages/start.py): the War and Peace LSTM's example passage with
# its first quotation selected whole, read by tanh(c). Its held-out matches need that model's states
# over 100,000 held-out characters, read once per server: the warm-up reads them before the click.
SPAN_LINK = {"model": "charlm-war-and-peace", "tab": "Colored text", "span": "0:308", "read": "cell"}

_warm_lock, _warm_thread = threading.Lock(), None
_default_warm = threading.Event()     # set once warm_up has torch, the default model and its first decode
_plotly_imported = threading.Event()  # set once warm_up has imported plotly (and pandas)
_altair_ready = threading.Event()     # set once warm_up has imported altair and built a chart (the Bottleneck's)
# Page runs in progress, and how many of them wait for the warm-up (_after_warm_up): past the
# default model the warm-up steps aside while a page runs, so a click is not slowed down by
# loading models it does not need (on 2 cores a Start link took 1.7 s beside it, 1.0 s without)
_runs = threading.Condition()
_running = _waiting = 0
_last_run_end = 0.0      # time.monotonic() when a page run last ended
QUIET_S = 2.0            # and after it, while the browser draws what the run sent


def warm_up() -> threading.Thread | None:
    """Once per server process, in the background: import torch and what the pages compute
    with, read the registry, load the default model and decode once (the first decode builds
    its weight layouts, ~0.3 s a model here), then the Bottleneck page's first screen, then
    every other translation model (Compare attention and a model switch use them), then the
    Hugging Face models the operator lists (ui.models.preload), each with its first decoding.
    The first page a class sees is the start page, which needs none of this; by the time someone
    presses a link, its page finds it all in the caches (`tools/bench_browser.py`,
    start_link_first_heatmap and start_link_bottleneck). Returns the thread that started,
    None if one already ran."""
    global _warm_thread
    with _warm_lock:
        if _warm_thread is not None:
            return None
        _warm_thread = threading.Thread(target=_warm, name="s2s-warm-up", daemon=True)
    _warm_thread.start()
    return _warm_thread


def _after_warm_up(imported: threading.Event, timeout: float = 30) -> bool:
    """Whether a page may use what the warm-up imports: at once when no warm-up runs, else
    once it has `imported` them (at most `timeout` s on). Two threads importing one package
    (plotly, pandas, altair) at once can see each other's half-imported modules."""
    global _waiting
    if _warm_thread is None or imported.is_set():
        return True
    with _runs:                  # a page that waits for the warm-up must not be waited for by it
        _waiting += 1
        _runs.notify_all()
    try:
        return imported.wait(timeout=timeout)
    finally:
        with _runs:
            _waiting -= 1


@contextlib.contextmanager
def page_run():
    """app.py runs each page inside this: while any page runs (and is not itself waiting for
    the warm-up), the warm-up, once the default model is ready, waits between its steps."""
    global _running
    with _runs:
        _running += 1
    try:
        yield
    finally:
        with _runs:
            global _last_run_end
            _running -= 1
            _last_run_end = time.monotonic()
            _runs.notify_all()


def _step_aside(timeout: float = 60) -> None:
    """Wait (at most `timeout` s) until no page has run for QUIET_S s (the browser draws what
    a run sent on the same 2 cores), unless every running page waits for the warm-up."""
    end = time.monotonic() + timeout
    with _runs:
        while time.monotonic() < end:
            if _running <= _waiting and (_running or time.monotonic() - _last_run_end >= QUIET_S):
                return
            _runs.wait(timeout=max(0.05, min(end, _last_run_end + QUIET_S) - time.monotonic()) if not _running
                       else end - time.monotonic())


def altair_ready(timeout: float = 30) -> None:
    """Wait (at most `timeout` s) while the warm-up imports altair: a page never imports it beside it."""
    _after_warm_up(_altair_ready, timeout)


# ------------------------------------------------------------------ the browser's chart scripts
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


# ------------------------------------------------------------------ the thread
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
    infos = [i for i in models.translation_models() if i.error is None]
    default = models.bottleneck_default(infos)
    bottleneck = measured_models(infos, default) if default else []

    def warm(name: str):
        """The model loaded and its first decoding (None if it cannot load: its page says why)."""
        try:
            return s2s.decode.greedy(models.load_model(name), "Hello.")
        except (CheckpointError, InputError, OSError):
            return None

    def first_chart(d) -> None:
        """What a page's first run does once per process besides the model: import the pages'
        modules and build a heatmap (of the decoding `d`) as a page shows it (plotly loads its
        validators on first use): 0.3 s of the first Translate & Align link's run here."""
        import s2s.evaluate  # noqa: F401
        import s2s.export  # noqa: F401
        import ui.knockout  # noqa: F401  (the Heads tab's: 36 ms of CPU in a Heads link's first run)
        import ui.translate_tabs  # noqa: F401
        for projector, width in MAIN_PX.items() if d is not None and d.attention is not None else ():
            s2s.figures.for_screen(s2s.figures.attention_heatmap(d.source_tokens, d.target_tokens, d.attention),
                                   projector, width).to_json()

    # In the order the Start page's links need them: Translate's default model, then the
    # Bottleneck page's first screen (its models, their greedy decodings of the joined
    # examples, outputs only and nothing timed, and its Altair charts), then the models only a
    # switch or Compare attention asks for. A link pressed before the end then waits for less.
    names = [i.name for i in infos]
    if models.DEFAULT_MODEL in names:
        first_chart(warm(models.DEFAULT_MODEL))
    _default_warm.set()
    for name in bottleneck:
        if name != models.DEFAULT_MODEL:
            _step_aside()
            warm(name)
        for k in range(1, STRESS_DEFAULT + 1):
            _step_aside()
            try:
                models.greedy_decoding(models.model_path(name), joined_example(k)[0])
            except (CheckpointError, InputError, OSError):
                break
    _step_aside()
    # importing altair and building a first chart (its schema validators) took half a second
    # of the Bottleneck page's first run
    pandas.DataFrame({"model": ["a"], "x": [0], "y": [0]}).pipe(s2s.figures.length_chart, "x", "y").to_dict()
    _altair_ready.set()
    for name in names:
        if name != models.DEFAULT_MODEL and name not in bottleneck:
            _step_aside()
            warm(name)
    # Then the Cell States select-a-span link's model and its held-out states (a few seconds on 2 cores)
    _step_aside()
    import ui.span_select
    ui.span_select.warm_held_out(SPAN_LINK["model"], SPAN_LINK["read"])
    # Last, the Hugging Face models the operator lists (none without S2S_HUB_MODELS): no Start link
    # needs one, and each is a long load (most of opus-mt's 17.4 s first use on Translate, 2 cores). A
    # page that asks for one meanwhile waits for this same load (models.get_model).
    for spec in models.listed_hub_models():
        _step_aside()
        models.preload(spec, then=lambda tr: s2s.decode.greedy(tr, "Hello."))
