"""Links and page state: what a page's address says, and what survives from one run to the next.

A link reproduces a view: the page reads its query string once, when the reader arrives
(arrival_query, then read_address or state_from_query), and writes the address back on every
run (set_address), so a copied address is always a link to what is on the screen. Widgets a
page asks to keep (keep_across_pages) survive a closed tab or a visit to another page. Every
run goes through app.py (run_through_app), which is what makes both work.
"""
from __future__ import annotations

import json
import sys
from typing import Callable, Iterable

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager  # internal: see run_through_app

from ui.show import code_span


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


# ------------------------------------------------------------------ arriving on a page
def note_arrival(page: str) -> None:
    """Called on every run with the page about to run (app.py): when it is not the page of the
    previous run, the user has just arrived, and the URL's query string is kept for it."""
    if st.session_state.get("_page") != page:
        st.session_state["_page"] = page
        st.session_state["_arrival_query"] = query = st.query_params.to_dict()
        if query.get("projector") in ("on", "off"):     # the Projector switch (app.py), on any page
            st.session_state["projector"] = query["projector"] == "on"


def arrival_query(page: str) -> dict[str, str]:
    """The URL's query parameters if the user has just arrived on `page` (its URL path: a link
    opened or a Start-here link followed), else {}. Read once: later reruns of the page keep
    what the user changed since."""
    if PagesManager.uses_pages_directory:    # run without app.py (AppTest runs a page so)
        note_arrival(page)
    return st.session_state.pop("_arrival_query", {})


def run_script(js: str, name: str) -> None:
    """Run `js` (a constant of ours, never user text) in the page itself, in an element of no
    height (app.py's style hides .st-key-s2s_script_<name>). Streamlit runs an element's script
    when the element is first drawn, and again only when the script's text changes."""
    with st.container(key="s2s_script_" + name):
        st.html(f"<script>{js}</script>", unsafe_allow_javascript=True)


# Streamlit's page adds a browser history entry for every change of the query string, so after
# a link the first Back press only went from the page's address to the link's (#47). An address
# the app writes without the user going anywhere replaces the current entry instead: a history
# entry is added only when the path, the page, changes (a link, the sidebar).
HISTORY_REPLACES_SAME_PAGE = """
if (!window.history.__s2sReplaces) {
  const push = window.history.pushState.bind(window.history);
  const replace = window.history.replaceState.bind(window.history);
  window.history.pushState = (state, title, url) => {
    const to = url === undefined || url === null ? null : new URL(String(url), window.location.href);
    return (to && to.pathname === window.location.pathname ? replace : push)(state, title, url);
  };
  window.history.__s2sReplaces = true;
}"""


def history_replaces_same_page() -> None:
    """Once per browser tab (app.py calls it on every run): see HISTORY_REPLACES_SAME_PAGE."""
    run_script(HISTORY_REPLACES_SAME_PAGE, "history")


# A form's result is computed when its button is pressed; until then a changed control (another
# decoding method, new text) leaves on screen a result that no longer matches it. The browser
# notes each form's controls when a run ends, and while they differ it adds the class
# s2s-stale to the page, which shows each .st-key-stale_note (app.py's style) (#47). Only once
# the reader has touched a form: a control drawn or filled in after the run ended (a link's
# settings arriving a frame late) is not a change, and the controls are noted again as they are
# at the first touch. Else a click anywhere (a model switch in the sidebar) flashed the note
# until its run ended (#62).
STALE_AFTER_FORM_CHANGE = """
if (!window.__s2sStale) {
  window.__s2sStale = true;
  const state = () => [...document.querySelectorAll('[data-testid="stForm"]')].map(f =>
    [...f.querySelectorAll('input, textarea, [role="slider"]')].map(e =>
      e.getAttribute('role') === 'slider' ? e.getAttribute('aria-valuenow')
        : (e.type === 'radio' || e.type === 'checkbox') ? String(e.checked) : e.value).join('\u0001')).join('\u0002');
  let noted = null, touched = false;
  const inForm = e => e.target instanceof Element && e.target.closest('[data-testid="stForm"]') !== null;
  const check = () => document.body.classList.toggle('s2s-stale',
                                                     touched && noted !== null && state() !== noted);
  const ended = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (app && app.dataset.testScriptState === 'notRunning') { noted = state(); touched = false; check(); }
  };
  new MutationObserver(ended).observe(document.body, {attributes: true, subtree: true,
                                                       attributeFilter: ['data-test-script-state']});
  for (const kind of ['pointerdown', 'keydown', 'focusin'])     // before the control changes
    document.addEventListener(kind, e => { if (!touched && inForm(e)) { noted = state(); touched = true; } }, true);
  document.addEventListener('input', e => { if (inForm(e)) touched = true; }, true);   // a paste, a drop
  for (const kind of ['input', 'change', 'click', 'keyup'])
    document.addEventListener(kind, () => setTimeout(check, 0), true);
  ended();
}"""


def note_stale_results(text: str) -> None:
    """Where this is called, a one-line note (`text`) that shows only while a form's controls
    differ from what they were when the result below was computed (STALE_AFTER_FORM_CHANGE)."""
    with st.container(key="stale_note"):
        st.caption(text)
    run_script(STALE_AFTER_FORM_CHANGE, "stale")


def scroll_into_view(selector: str) -> None:
    """Scroll the page so that the first element matching the CSS `selector` (a constant,
    never user text) sits just below the app's header, once this run has been drawn: a link
    to a tab below the fold would otherwise open with the tab out of sight. The header (about
    60 px, drawn over the page) would hide a tab bar scrolled to the window's very top, so
    the element keeps a scroll margin of the header's height.

    It waits for the run to end however long it takes (an explanation under load took over
    the 10 s an earlier version waited, and the page stayed unscrolled), then scrolls again
    while the charts above settle, so long as the reader has not scrolled away meanwhile."""
    run_script(f"""
const doc = document, selector = {json.dumps(selector)}, began = Date.now();
function scroll() {{
  const app = doc.querySelector('[data-testid="stApp"]'), el = doc.querySelector(selector);
  if (el && app && app.dataset.testScriptState === 'notRunning') {{
    const header = doc.querySelector('header[data-testid="stHeader"]');
    const below = (header ? header.getBoundingClientRect().bottom : 60) + 4;
    el.style.scrollMarginTop = below + 'px';
    el.scrollIntoView({{block: 'start'}});
    // the charts above may still change height: put it back, unless the reader has scrolled
    let left = 8, moved = false;
    const mine = () => {{ moved = true; }};
    for (const kind of ['wheel', 'touchmove', 'keydown', 'mousedown'])
      doc.addEventListener(kind, mine, {{once: true, passive: true}});
    const again = () => {{
      if (moved) return;
      if (Math.abs(el.getBoundingClientRect().top - below) > 2) el.scrollIntoView({{block: 'start'}});
      if (--left > 0) setTimeout(again, 400);
    }};
    setTimeout(again, 400);
  }} else if (Date.now() - began < 600000) setTimeout(scroll, 150);    // a run of up to 10 minutes
}}
scroll();
""", "scroll")


# ------------------------------------------------------------------ reading a link
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


def choice(options) -> Callable[[str], str]:
    """An address field's parser: one of `options`, else ValueError."""
    def parse(raw: str) -> str:
        if raw not in options:
            raise ValueError(raw)
        return raw
    return parse


def number_in(low, high, kind=int) -> Callable[[str], float]:
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


# ------------------------------------------------------------------ writing the address
def set_address(values: dict) -> None:
    """Make the address hold these values (None ones left out), on every run, so that a copied
    link reproduces what is shown. Only written when it changes: each write is a message to
    the browser, which updates the address bar without reloading."""
    want = {k: str(v) for k, v in values.items() if v is not None}
    if st.session_state.get("projector"):     # the Projector switch is a choice of every page
        want["projector"] = "on"
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)


def update_address(**fields) -> None:
    """Change these fields of the address (None: drop one), the others as they are: for a
    fragment's run (st.fragment), which reruns a part of a page without its set_address."""
    want = st.query_params.to_dict()
    for key, value in fields.items():
        if value is None:
            want.pop(key, None)
        else:
            want[key] = str(value)
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)


def address_of(fields: dict, names) -> dict:
    """The current values of these address fields (those in state), for set_address."""
    return {n: st.session_state.get(fields[n][0]) for n in names}


# ------------------------------------------------------------------ widgets kept across pages
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


# ------------------------------------------------------------------ choices that depend on the model
def check_choice(key: str, options: Iterable, default, resend: bool = False) -> None:
    """Make `key`'s value one of `options`, before anything reads it or draws its widget: a value
    that is not one of them (by its type too: the label "3" is not the layer 3) becomes `default`;
    no options at all (this model has no such choice: a recurrent model's layer) drop it; an
    absent one stays absent, for its widget's own default.

    Why the type: a select box's or radio's value travels between browser and server as its
    label. When the model changes, a value can stay while its label changes ("3 (last)" of
    three layers is "3" of six). Streamlit then keeps the value without telling the browser,
    which sends the old label back with the next click, and Streamlit, finding no option of
    that label, hands the page the label itself, a str. `resend` (on the run that changes the
    model, for a widget whose labels depend on it) writes a valid value back as well, which
    makes Streamlit send the browser this run's label of it. None is not written back: it
    reaches the browser as no value, which shows the widget's placeholder."""
    state = st.session_state
    options = list(options)
    if not options:
        state.pop(key, None)
        return
    if key not in state:
        return
    value = state[key]
    if not any(value is o or (type(value) is type(o) and value == o) for o in options):
        state[key] = default
    elif resend and value is not None:
        state[key] = value
