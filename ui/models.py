"""What the pages load, once per server: the models, their decodings and timings, results files;
and the sidebar's model picker.

Models are cached with st.cache_resource, keyed by their full path, so switching pages or
models never reloads what is already loaded, and every session shares them. This module
imports no torch: the Start page lists the models while the warm-up (ui/warm.py) imports it.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

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
from s2s.hub import any_model_allowed, display_name, is_hub_spec, offered_models

if TYPE_CHECKING:
    from s2s.decode import Decoding  # imports torch: only when a page decodes

# One thread per request: batch-1 decoding gains little from more, and a shared server
# with several users stays responsive when no request grabs every core. torch reads this
# when it is imported; a process that imported it already (a test run) is told directly.
# Every page imports this module before anything that imports torch (`import ui.models`
# sorts before `from s2s… import`), and so does app.py (through ui/warm.py).
os.environ["OMP_NUM_THREADS"] = "1"
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(1)

DEFAULT_MODEL = "en-fr-additive"


# ------------------------------------------------------------------ the registry
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


def model_path(name: str) -> str:
    """The full path of a checkpoint: what cached functions are keyed by, so that two
    checkpoint folders with the same model name never share cached results. A hub model is
    named by its spec (hf:NAME, or its folder), which is its path."""
    if is_hub_spec(name) or name in hub_specs():
        return name
    return str(checkpoint_root() / name)


# ------------------------------------------------------------------ loading
@st.cache_resource(show_spinner=False, max_entries=16)      # get_model shows the spinner, naming the model
def load_path(path: str) -> Translator:
    """One model, loaded once per server process. Two threads asking for the same path at once
    (a page, and the warm-up's load of the operator's hub models) share one load: the second
    waits for the first's (st.cache_resource computes a key under its own lock)."""
    return load_translator(path)


@st.cache_resource(show_spinner="Loading the model…", max_entries=8)
def load_charlm_path(path: str) -> LanguageModel:
    return load_charlm(path)


def load_model(name: str) -> Translator:
    """A checkpoint by name, loaded once per server process (keyed by its full path)."""
    return load_path(model_path(name))


def get_model(name: str) -> Translator | None:
    """The cached model, or an error box naming the checkpoint (the others keep working). While
    it loads (a model not loaded yet, or an operator's hub model the server is still loading in
    the background: this waits for that load, not a second one) a spinner names it."""
    path = model_path(name)
    early = " (the server began loading it when it started)" if preloading(path) else ""
    try:
        with st.spinner(f"Loading {display_name(name)}…{early}"):        # shown after 0.5 s: a load, not a hit
            return load_path(path)
    except CheckpointError as e:
        st.error(f"This model cannot be loaded: {e}. The other models still work: choose one under the model list.")
        return None


# ------------------------------------------------------------------ the operator's hub models, loaded early
# A hub model's first use cost 17.4 s on Translate (opus-mt-en-fr's shape, 2 cores; its decode 3.8 s),
# most of it the load. The operator listed it, so the warm-up (ui/warm.py) loads it after the shipped
# models: listed_hub_models() in order, each by preload(); a page that asks for one meanwhile waits for
# that load (get_model, load_path), saying so.
_preload_lock = threading.Lock()
_preloads: dict[str, threading.Event] = {}      # path -> set once the server's own load of it has ended


def listed_hub_models() -> list[str]:
    """The hub models the server loads before anyone asks: the operator's list (S2S_HUB_MODELS), in
    its order, less those whose registry row has an error (a malformed name, a model that does not
    translate: read from configs, nothing downloaded). Never a model a session named in the "any
    model" box (S2S_ALLOW_ANY_MODEL): that one loads when chosen. Empty when the list is."""
    specs = offered_models()
    return [i.name for i in _hub_rows(tuple(specs)) if i.error is None] if specs else []


def preload(path: str, then=None) -> bool:
    """Load the model at `path` in the calling thread (the warm-up's), then call `then(model)` (its
    first decoding), unless the server has begun loading it already; False if it did not load here
    (the page that asks for it then loads it itself, and shows why it cannot). Meanwhile
    preloading(path) is true and a page asking for it waits for this load."""
    with _preload_lock:
        if path in _preloads:
            return False
        done = _preloads[path] = threading.Event()
    try:
        tr = load_path(path)
        if then is not None:
            then(tr)
        return True
    except Exception as e:     # in the background: the page that asks for it says why, on its own load
        logging.getLogger(__name__).warning("the server could not load %s in advance: %s", display_name(path), e)
        return False
    finally:
        done.set()


def preloading(path: str) -> bool:
    """Whether the server's background load of `path` (preload) is under way now."""
    done = _preloads.get(path)
    return done is not None and not done.is_set()


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


# ------------------------------------------------------------------ the Bottleneck page's decodings and timings
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
    for every session (the Bottleneck page's views; the warm-up fills it for the first screen)."""
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
    once per server, when someone asks (*Time the models*). Not measured by the warm-up: timed
    in the background, beside a page's own work, the times showed that contention instead of
    each model's cost."""
    from s2s.bottleneck import timing_rows
    rows = timing_rows(load_path(path), display_name(path))
    _timed.add(path)
    return rows


# ------------------------------------------------------------------ the sidebar's model picker
def held_out_bleu(info: CheckpointInfo) -> float | None:
    """The model's BLEU on its held-out test set, from its metrics (None if never measured).
    (Not named test_…: pytest would collect it from any test module that imports it.)"""
    return info.metrics.get("test", {}).get("test", {}).get("bleu")


def model_label(info: CheckpointInfo) -> str:
    if info.is_hub or is_hub_spec(info.name):
        return f"{display_name(info.name)}  (Hugging Face)"
    bleu = held_out_bleu(info)
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
        text += (f" Also {hub} Hugging Face model{'s' if hub > 1 else ''} the server's operator lists "
                 "(S2S_HUB_MODELS): the research models, beside the lesson's.")
    return text


def _add_model(key: str) -> None:
    """The picker's "any model" box was filled in: offer that model in this session and choose it."""
    spec = st.session_state.get(f"{key}_any", "").strip()
    if spec:
        added = st.session_state.setdefault("_added_models", [])
        if spec not in added:
            added.append(spec)
        st.session_state[key] = spec


def not_offered(asked: str, shown: str, where=None) -> None:
    """One line where a link named a model this server does not offer (the page shows `shown`);
    in the main column (`where`, a slot of it) even from the sidebar, which a projector folds."""
    from ui.show import code_span
    (where or st).warning(f"The link asks for the model {code_span(asked[:80])}, which this server does not offer "
               f"(its operator lists the models); showing {code_span(shown)} instead.")


def model_picker(key: str = "model", usable: list[CheckpointInfo] | None = None, label: str = "Translation model",
                 help: str | None = None) -> str | None:
    """Sidebar select box over the translation checkpoints and the operator's hub models
    (`usable`: a page's own choice of them); returns the chosen name."""
    if usable is None:
        usable = [i for i in translation_models() + hub_models() if i.error is None]
    broken = [i for i in list(checkpoints_in(str(checkpoint_root()))) + hub_models() if i.error]
    note = st.empty()           # the main column's: a link's model this server does not offer
    with st.sidebar:
        st.markdown("### Model")
        if not usable:
            st.error("No usable translation checkpoint found in `checkpoints/`.")
            return None
        names = [i.name for i in usable]
        if st.session_state.get(key) not in names:
            asked = st.session_state.get(key)
            st.session_state[key] = DEFAULT_MODEL if DEFAULT_MODEL in names else names[0]
            if isinstance(asked, str) and asked:       # a link named it
                not_offered(asked, st.session_state[key], note)
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
