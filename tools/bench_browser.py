"""How long the app's main actions take in a real browser, as JSON; with --app twice, two commits side by side.

    python tools/bench_browser.py [--runs 3] [--presses 3]
    python tools/bench_browser.py --runs 3 --app OLD --app .      # OLD: e.g. `git worktree add /tmp/old 6205b42`
    python tools/bench_browser.py --runs 5 --link Heads --app OLD --app .     # one Start link's A/B

Each run starts a fresh `streamlit run app.py` on loopback (tests/browser.py) and drives
Debian's headless Chromium at 1280 x 720, a classroom projector, through what a class does.
Each action is timed from the click (or the page load) until its result is drawn and the
script run is over (the app's `data-test-script-state` is back to notRunning and every chart
on the page is drawn):

    cold_start                 from spawning the server to the Translate page's first heatmap
                               (the server's own URL first, as a student opens it, then
                               /translate: pages are reached by URL, whatever the default page),
                               until the page has settled (the charts below it drawn too)
    cold_start_heatmap         the same, until the heatmap itself is drawn (the issue's "cold
                               start to the first heatmap"; the page settles after it)
    start_link_<label>         on another fresh server, every link of the start page in the
                               outline's order (e.g. start_link_translate_align_step_by_step):
                               the start page opened in a new tab, drawn (its links there and
                               every chart drawn) and read for 3 s, then the link, until its
                               page's run is over and every chart on it is drawn. The first link
                               meets a server still warming up, as a class's first click does.
    translate_greedy, _beam    a new sentence (never asked before: no cache), Translate
    tab_<name>                 opening each tab of the Translate page (only the open tab runs)
    switch_model               another attention model in the sidebar, until its heatmap shows
    bottleneck_first_open      the Bottleneck page's first visit on this server, from the sidebar
                               as a class opens it, until every chart is drawn
    bottleneck_translate_both  a new sentence in its "Your own English text" box, "Translate with both"
    cells_first_open           the Cell States page's first visit, from the sidebar
    cells_find_cells           its Find cells tab: every cell ranked, the top traces drawn
    cells_sample               "Sample from the model" with a new seed, until the text is shaded
    lens_step_<model>          Step by step's slider one step on (its arrow key), on en-fr-additive (a
                               recurrent decoder: one layer) and en-fr-transformer, until the lens
                               panel (each layer's guess, ui/lens_panel.py) shows the new step
    heads_knockout_click       the Heads grid knocking heads out (ui/knockout.py) on en-fr-transformer:
                               a click on a small map not yet knocked out (a mask never decoded
                               before: no cache), until the translation beside the grid shows it
    contrast_foil_pick         Step by step's "why this word and not another" (ui/contrast_panel.py) on
                               en-fr-additive: another foil picked from the step's top tokens, from
                               the click on it in the open list until the line naming the pushes is
                               redrawn (the list is opened again if a rerun closed it: not timed)
    patch_compare_<model>      Compare an edit on en-fr-additive and en-fr-transformer: a new edit of
                               the sentence compared, until the panel of what carries the change
                               (ui/patch_view.py) draws the new pair's map of restored shares
    new_tab_start_page         the start page opened in a new browser tab, until it has settled:
                               the floor under every link opened in a new tab
    explain_link_<model>       a link to Alignment & Explanation's "Attention vs attribution" tab
                               with a new sentence (?model=...&tab=...&text=...), opened in a new
                               browser tab on the run's warm server, until the method's map is
                               drawn (its first map: the weights); for en-fr-additive,
                               en-fr-transformer and, with --hub DIR, the Hugging Face model in DIR
                               listed by the operator (S2S_HUB_MODELS=DIR: the server loads it in the
                               background after its warm-up, before hub_first_use is timed)
    hub_first_use              with --hub DIR: on the run's server once it has had time to warm up
                               (its CPU idle for IDLE_S: the listed model loaded in the background),
                               the Translate page opened in a new browser tab with that model chosen
                               (?model=DIR&text=...), until its heatmap is drawn: a hub model's first
                               use, which cost 17.4 s when the first page to ask loaded it
    hub_heads_tab              with --hub DIR: the Translate page on that model (HUB_TEXT, its output
                               capped at HUB_MAXLEN pieces: ?maxlen=), the Heads tab clicked, until its
                               grid (HEADS_TAB_DRAWS) is drawn and the page settled
    hub_knockout_click         with --hub DIR: the Heads tab in knock-out mode (a link with mask=, one
                               encoder head out), then a click on another small map (knockout_target:
                               the one place that knows where a head's click lands), `presses` times,
                               until the answer beside the grid changes and the page settled
    hub_lens_step              with --hub DIR: Step by step's slider one step on, as lens_step_<model>
    hub_contrast_foil          with --hub DIR: Step by step's contrast panel opened at step 1 (not timed),
                               then another foil picked from its list, as contrast_foil_pick
    hub_patch_compare          with --hub DIR: Compare an edit, as patch_compare_<model>: an edit of as
                               many source pieces as HUB_TEXT (the model's own tokenizer counts them)

`--presses` new sentences (or seeds) per run for the repeated actions; the other actions
happen once per run. Prints the median and the worst time of each action in ms, and
`over_target`, the actions whose median misses its target: on an idle machine, cold start
<= 5 s, an explain link <= 3 s (10 s for the --hub model), the hub model's first use <= 5 s, a
start link <= 1.5 s and every other action <= 1 s. An action that fails (a widget moved, a chart
never drawn) is named in `failed` with its error and the others go on. With several --app
checkouts the runs alternate between them (fresh servers of each, in turn, so a machine's drift
hits all alike), each checkout gets its own summary, and `ratio` gives each action's median in the
last checkout over the first's. On a machine busy with other work (a training run) the timings
measure that contention, not the app. The hub model's targets: its Heads tab <= 2 s, a
knock-out click <= 1.5 s, a foil <= 1.5 s, an edit compared (with what carries the change) <= 3 s.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from browser import browser, exceptions, open_option, streamlit_server  # noqa: E402
from s2s.checkpoint import attention_checkpoints, checkpoint_root, list_checkpoints  # noqa: E402

TARGET_MS = {"cold_start": 5000, "cold_start_heatmap": 5000,     # every other action: DEFAULT_TARGET_MS
             "explain_link_en-fr-additive": 3000, "explain_link_en-fr-transformer": 3000, "explain_link_hub": 10000,
             "new_tab_start_page": 3000, "hub_first_use": 5000,
             "hub_heads_tab": 2000, "hub_knockout_click": 1500, "hub_contrast_foil": 1500, "hub_patch_compare": 3000}
START_LINK_TARGET_MS = 1500                                     # every start_link_<label>
TIMEOUT_MS = 120_000          # the longest any one action may take before it counts as failed
IDLE_S = 3.0                  # a server warmed up: this long with its CPU under IDLE_SHARE (ui.warm steps aside
IDLE_SHARE = 0.05             # for its QUIET_S, 2 s, after a page's run: a shorter lull is not the end)
EXPLAIN_MODELS = ["en-fr-additive", "en-fr-transformer"]
HUB_PAIR = ("She has a big black dog.", "Elle a un gros chien noir.")
DEFAULT_TARGET_MS = 1000
VIEWPORT = {"width": 1280, "height": 720}
TABS = ["Beam tree", "Forced decoding", "Compare attention", "Alignment lines", "Attention emerges", "Step by step"]
# what each tab draws when it is open (a chart's key, as Streamlit's st-key-<key> class)
TAB_DRAWS = {"Step by step": "step_attn", "Beam tree": "beam_tree", "Forced decoding": None,
             "Compare attention": "cmp_", "Alignment lines": "lines", "Attention emerges": "trace_heatmap"}
SENTENCES = [
    ("I went to the lecture.", "lecture."), ("Where is the nearest train station?", "station?"),
    ("She has a big black dog.", "dog."), ("I think it's going to rain tomorrow.", "tomorrow."),
    ("Tom didn't want to go to school today.", "today."), ("My grandmother lives near the sea.", "sea."),
    ("Can you help me carry this box?", "box?"), ("The children are playing in the garden.", "garden."),
    ("He forgot his keys at the office again.", "again."), ("Please turn off the lights.", "lights."),
    ("We ate dinner at a small restaurant.", "restaurant."), ("Why are you always late?", "late?"),
]

# The run is over and everything on the page is drawn: plotly draws after the data arrives, and
# an element whose code the browser is still fetching (a tab's first Vega-Lite chart) stands as
# a skeleton until then, with no chart element to wait for.
SETTLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.dataset.testScriptState !== 'notRunning') return false;
  if (document.querySelector('[data-testid="stMain"] [data-testid="stSkeleton"]')) return false;
  return [...document.querySelectorAll('.stPlotlyChart')].every(p => p.querySelector('.main-svg'))
      && [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].every(v => v.querySelector('canvas, svg'));
}"""
HEATMAP_SHOWS = """word => [...document.querySelectorAll("[class*='st-key-heatmap'] .xtick text")]
                           .some(e => e.textContent === word)"""
DRAWN = "key => document.querySelector(`[class*='st-key-${key}'] .main-svg`) !== null"
# a snapshot of what a chart (or the shaded text) shows, to wait until it changes
CHART_DATA = """key => { const p = document.querySelector(`[class*='st-key-${key}'] .js-plotly-plot`);
                         return p && p.data ? JSON.stringify(p.data[0]) : null; }"""
SHADED_TEXT = "() => { const e = document.querySelector('.s2s-cells'); return e ? e.textContent : null; }"


def timed(page, act, done: str, arg=None, settle: bool = True) -> float:
    """ms from `act()` until the JS predicate `done(arg)` holds and (with `settle`) the page has settled."""
    t = time.perf_counter()
    act()
    page.wait_for_function(done, arg=arg, timeout=TIMEOUT_MS)
    if settle:
        page.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
    return (time.perf_counter() - t) * 1000


def changed(page, snapshot: str, arg=None) -> tuple[str, object]:
    """A predicate and its argument: true once `snapshot(arg)` differs from what it is now."""
    before = page.evaluate(snapshot, arg)
    return f"([arg, before]) => ({snapshot})(arg) !== before && ({snapshot})(arg) !== null", [arg, before]


def goto(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"]', timeout=TIMEOUT_MS)


def open_from_sidebar(page, title: str) -> None:
    """Open a page as a class does, with its link in the sidebar: the browser keeps its
    scripts and its connection, and only the page's script runs (a typed address reloads it all)."""
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click()


def translate(page, text: str, last_word: str) -> float:
    page.get_by_role("textbox", name="English text").fill(text)
    press = page.get_by_role("button", name="Translate", exact=True)
    return timed(page, press.click, HEATMAP_SHOWS, last_word)


def choose_model(page, name: str) -> None:
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Translation model").locator("input").click()
    page.get_by_role("option", name=re.compile(rf"^{re.escape(name)}\b")).click()


# the run a click started is over, and what it drew is drawn: a chart, or Cell States' shaded text
RAN = """() => { if (!window.__s2sRan) { const app = document.querySelector('[data-testid="stApp"]');
                   if (app && app.dataset.testScriptState === 'running') window.__s2sRan = true; }
               return !!window.__s2sRan && (SETTLED)()
                      && !!document.querySelector('[data-testid="stMain"] .main-svg, '
                           + '[data-testid="stMain"] [data-testid="stVegaLiteChart"] canvas, .s2s-cells'); }"""
RAN = RAN.replace("(SETTLED)", "(" + SETTLED + ")")
WATCH_RUN = """() => { window.__s2sRan = false;        // polled every frame from the click on: a run seen
  const poll = () => { const app = document.querySelector('[data-testid="stApp"]');
    if (app && app.dataset.testScriptState === 'running') window.__s2sRan = true;
    if (!window.__s2sRan) requestAnimationFrame(poll); };
  requestAnimationFrame(poll); }"""


def slug(label: str) -> str:
    """A start link's label as a JSON key: "Translate & Align › Step by step" -> translate_align_step_by_step."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def start_page(b, url: str, init_script: str | None = None):
    """A new tab on the start page, once it is drawn: its links there (a run that only began,
    before the rerun through app.py, shows no links and is already "settled") and every chart
    drawn, the hidden ones that load the chart scripts included. `init_script`: run in the tab
    before the app's own scripts (tools/start_link_marks.py's watch on the websocket)."""
    page = b.new_page(viewport=VIEWPORT)
    if init_script:
        page.add_init_script(init_script)
    goto(page, url)
    page.locator('[data-testid="stMain"] [data-testid="stPageLink"] a').first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
    return page


def start_link_labels(b, url: str) -> list[str]:
    """The start page's links, in the outline's order."""
    page = start_page(b, url)
    try:
        return page.eval_on_selector_all(
            '[data-testid="stMain"] [data-testid="stPageLink"] a',
            "els => els.map(a => (a.querySelector('[data-testid=stMarkdownContainer]') || a).textContent.trim())")
    finally:
        page.close()


def start_link(b, url: str, label: str, read_s: float = 3.0) -> float:
    """ms from clicking the start page's link named `label`, `read_s` seconds after the start
    page is drawn, until the run it started is over and its page is drawn (RAN)."""
    page = start_page(b, url)
    try:
        time.sleep(read_s)
        link = page.locator('[data-testid="stMain"] [data-testid="stPageLink"] a', has_text=label).first
        page.evaluate(WATCH_RUN)
        return timed(page, link.click, RAN, settle=False)
    finally:
        page.close()


def explain_link(b, url: str, model: str, text: str, reference: str | None = None) -> float:
    """ms from opening a link to the Attention vs attribution tab for `model` and `text` (and the
    French `reference` to force, if given) in a new browser tab until the method's map
    (st-key-point_attribution) is drawn."""
    from urllib.parse import urlencode
    query = {"model": model, "tab": "Attention vs attribution", "text": text}
    return new_tab_ms(b, url + "/alignment?" + urlencode(query | ({"reference": reference} if reference else {})),
                      "point_attribution")


def new_tab_ms(b, link: str, key: str) -> float:
    """ms from opening `link` in a new browser tab until the element st-key-`key` is drawn; an
    exception on the page is an error, not a time."""
    page = b.new_page(viewport=VIEWPORT)
    try:
        ms = timed(page, lambda: page.goto(link), DRAWN, key, settle=False)
        if exceptions(page):
            raise RuntimeError("the page shows an exception: " + exceptions(page)[0][:120])
        return ms
    finally:
        page.close()


def one_run(b, url: str, t_spawn: float, presses: int, offset: int, models: list[str], record,
            hub: str | None = None, explain_only: bool = False, pid: int | None = None,
            panels_only: bool = False) -> int:
    """Every action once (the repeated ones `presses` times) on a fresh server (process `pid`), each
    timed by `record(name, measure)`; returns the number of exceptions the pages showed."""
    heatmap_ms: list[float] = []

    page = b.new_page(viewport=VIEWPORT)
    errors = 0
    # round again past the list's end (more presses than sentences): a repeat may find its answer cached
    sentence = itertools.cycle(SENTENCES[offset % len(SENTENCES):] + SENTENCES[:offset % len(SENTENCES)])

    def cold_start() -> float:
        goto(page, url)                   # the app's own address: whatever page is the default
        page.wait_for_selector('[data-testid="stSidebarNav"] a', timeout=TIMEOUT_MS)
        goto(page, url + "/translate")
        page.wait_for_function(DRAWN, arg="heatmap", timeout=TIMEOUT_MS)
        heatmap_ms.append((time.perf_counter() - t_spawn) * 1000)
        page.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
        return (time.perf_counter() - t_spawn) * 1000

    record("cold_start", cold_start)
    if heatmap_ms:
        record("cold_start_heatmap", lambda: heatmap_ms[0])
    if explain_only:
        errors = len(exceptions(page))
        page.close()
        explain_links(b, url, models, hub, sentence, record, pid)
        return errors
    if panels_only:
        errors = len(exceptions(page))
        page.close()
        panel_actions(b, url, record, presses, hub)
        return errors
    for _ in range(presses):
        record("translate_greedy", lambda: translate(page, *next(sentence)))
    page.get_by_text("Beam search", exact=True).click()
    for _ in range(presses):
        record("translate_beam", lambda: translate(page, *next(sentence)))
    for tab in TABS:
        key = TAB_DRAWS[tab]
        done = (DRAWN, key) if key else ("() => [...document.querySelectorAll('input')]"
                                         ".some(e => e.getAttribute('aria-label') === 'Reference (French)')", None)
        record("tab_" + tab.lower().replace(" ", "_"),
               lambda: timed(page, lambda: page.get_by_role("tab", name=tab).click(), *done))
    for name in models[1:] + models[:1]:   # each other attention model, then back to the first
        def switch() -> float:
            done, arg = changed(page, CHART_DATA, "heatmap")
            return timed(page, lambda: choose_model(page, name), done, arg)
        record("switch_model", switch)
    errors += len(exceptions(page))

    record("bottleneck_first_open", lambda: timed(page, lambda: open_from_sidebar(page, "Bottleneck"), DRAWN, "lp_"))
    for _ in range(presses):
        def both() -> float:
            text, _ = next(sentence)
            box = page.get_by_role("textbox", name="English text")
            if not box.is_visible():       # the form sits in a closed expander
                page.get_by_text("Your own English text", exact=False).first.click()
            box.fill(text, timeout=TIMEOUT_MS)
            done, arg = changed(page, CHART_DATA, "lp_")
            return timed(page, lambda: page.get_by_role("button", name="Translate with both").click(), done, arg)
        record("bottleneck_translate_both", both)
    errors += len(exceptions(page))

    if any(i.kind == "charlm" and i.error is None for i in list_checkpoints(checkpoint_root())):
        record("cells_first_open", lambda: timed(page, lambda: open_from_sidebar(page, "Cell States"),
                                                 "() => document.querySelector('.s2s-cells') !== null"))
        record("cells_find_cells", lambda: timed(page, lambda: page.get_by_role("tab", name="Find cells").click(),
                                                 DRAWN, "top_traces"))
        page.get_by_role("tab", name="Colored text").click()
        page.wait_for_function(f"() => ({SHADED_TEXT})() !== null", timeout=TIMEOUT_MS)
        page.get_by_role("radio", name="Sample from the model").click()
        page.get_by_role("button", name="Sample").wait_for(timeout=60_000)
        for k in range(presses):
            def sample() -> float:
                page.get_by_label("Seed").fill(str(1000 * (offset + 1) + k))     # a new sample: no cache
                done, arg = changed(page, SHADED_TEXT)
                return timed(page, lambda: page.get_by_role("button", name="Sample").click(), done, arg)
            record("cells_sample", sample)
        errors += len(exceptions(page))
    page.close()
    panel_actions(b, url, record, presses, hub)
    explain_links(b, url, models, hub, sentence, record, pid)
    return errors


def panel_actions(b, url: str, record, presses: int, hub: str | None = None) -> None:
    """The last views' panels, each on its own page: the lens's step, a knockout click, a foil
    picked, an edit compared (alone with --panels-only, to compare checkouts on them); with `hub`,
    the same on that Hugging Face model (hub_actions)."""
    lens_steps(b, url, record, presses)
    knockout_clicks(b, url, record, presses)
    foil_picks(b, url, record, presses)
    patch_compares(b, url, record, presses)
    if hub:
        hub_actions(b, url, hub, record, presses)


LENS_MODELS = ["en-fr-additive", "en-fr-transformer"]     # a recurrent decoder's one layer, a Transformer's three
LENS_TEXT = "The little girl is happy because her mother is here."


def lens_steps(b, url: str, record, presses: int) -> None:
    """Step by step's slider moved one step on, `presses` times per shipped model of LENS_MODELS:
    ms from the key press until the lens panel's table shows the new step and the page settled."""
    present = {i.name for i in list_checkpoints(checkpoint_root()) if i.error is None}
    for model in [m for m in LENS_MODELS if m in present]:
        page = b.new_page(viewport=VIEWPORT)
        goto(page, f"{url}/translate?model={model}&text={quote(LENS_TEXT)}&tab=Step+by+step&lens=on")
        page.wait_for_function(DRAWN, arg="lens_top", timeout=TIMEOUT_MS)
        page.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
        for _ in range(presses):
            def step_on() -> float:
                done, arg = changed(page, CHART_DATA, "lens_top")
                slider = page.locator(".st-key-step input[type='range']")
                return timed(page, lambda: slider.press("ArrowRight"), done, arg)
            record(f"lens_step_{model}", step_on)
        page.close()


PATCH_EDITS = ["The little {} is happy because her mother is here.".format(w) for w in ("boy", "man", "cat", "dog")]
PATCH_MAP = """() => { const e = document.querySelector('.st-key-patch_map .js-plotly-plot');
                       return e && e.data ? JSON.stringify(e.data.map(t => t.z)) : null; }"""


def patch_compares(b, url: str, record, presses: int) -> None:
    """Compare an edit on LENS_TEXT, `presses` new edits per shipped model of LENS_MODELS: ms from
    the press on Compare until the panel of what carries the change (ui/patch_view.py, its map of
    restored shares) is redrawn for the new pair and the page settled (each pair patched afresh)."""
    present = {i.name for i in list_checkpoints(checkpoint_root()) if i.error is None}
    for model in [m for m in LENS_MODELS if m in present]:
        page = b.new_page(viewport=VIEWPORT)
        goto(page, f"{url}/translate?model={model}&text={quote(LENS_TEXT)}&tab=Compare+an+edit")
        page.wait_for_selector(".st-key-edit input", timeout=TIMEOUT_MS)
        page.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
        for edit in itertools.islice(itertools.cycle(PATCH_EDITS), presses):
            def compare(edit: str = edit) -> float:
                page.locator(".st-key-edit input").fill(edit)
                done, arg = changed(page, PATCH_MAP)
                return timed(page, lambda: page.get_by_role("button", name="Compare", exact=True).click(), done, arg)
            record(f"patch_compare_{model}", compare)
        page.close()


FOIL_LINK = ("/translate?model=en-fr-additive&text=The+little+girl+is+happy+because+her+mother+is+here.&method=greedy"
             "&tab=Step+by+step&step=1&foil=%E2%96%81Le")       # the Start link's foil ("La", not "Le")
FOILS = ["▁L", "▁C", "▁Il"]         # that step's other top tokens on the shipped model ("▁Le" is the link's)
FOIL_LINE = """() => { const p = [...document.querySelectorAll('.st-key-contrast_panel [data-testid="stMarkdown"]')]
                       .find(e => e.textContent.includes('Pushing toward')); return p ? p.textContent : null; }"""


def foil_picks(b, url: str, record, presses: int) -> None:
    """The Start link's contrast panel (ui/contrast_panel.py), another foil picked from the step's
    top tokens, `presses` times: ms from the click on the foil until the line naming the pushes is
    redrawn and the page settled (no foil picked before: no cache)."""
    if "en-fr-additive" not in {i.name for i in list_checkpoints(checkpoint_root()) if i.error is None}:
        return
    page = b.new_page(viewport=VIEWPORT)
    goto(page, url + FOIL_LINK)
    page.wait_for_function(f"() => ({FOIL_LINE})() !== null", timeout=TIMEOUT_MS)
    page.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
    for foil in itertools.islice(itertools.cycle(FOILS), presses):
        def pick(foil: str = foil) -> float:
            item = open_option(page, "foil", foil)
            done, arg = changed(page, FOIL_LINE)
            return timed(page, item.click, done, arg)
        record("contrast_foil_pick", pick)
    page.close()


KNOCKOUT_LINK = ("/translate?model=en-fr-transformer&text=She+has+a+big+black+dog.&method=greedy&tab=Heads"
                 "&heads=encoder&mask=encoder%3A2.1")     # the Start link's knockout
KNOCKOUT_ANSWER = """() => { const e = document.querySelector('.st-key-point_knockout_answer');
                             return e ? e.innerText : null; }"""
MAP_CENTRE = """([layer, head, heads]) => {      // one head's cell of the knockout's matrix: its centre
  const g = document.querySelector('.st-key-knockout_grid .js-plotly-plot'), f = g._fullLayout;
  const r = g.getBoundingClientRect();
  return [r.left + f.xaxis._offset + f.xaxis.l2p(head), r.top + f.yaxis._offset + f.yaxis.l2p(layer)]; }"""


def knockout_clicks(b, url: str, record, presses: int) -> None:
    """The Start link's knockout (encoder self-attention's layer 2 head 1 out), then a click on
    another head of layer 1 or 3 in the matrix, `presses` times: each knocks one more head out, a mask
    never decoded before; ms from the click until the answer beside the grid changes and the
    page settled. Only where en-fr-transformer is shipped."""
    if "en-fr-transformer" not in {i.name for i in list_checkpoints(checkpoint_root()) if i.error is None}:
        return
    page = b.new_page(viewport=VIEWPORT)
    goto(page, url + KNOCKOUT_LINK)
    page.wait_for_function(DRAWN, arg="knockout_grid", timeout=TIMEOUT_MS)
    page.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
    for k in range(min(presses, 8)):
        def click(layer: int = 2 * (k // 4), head: int = k % 4) -> float:
            done, arg = changed(page, KNOCKOUT_ANSWER)
            x, y = page.evaluate(MAP_CENTRE, [layer, head, 4])
            return timed(page, lambda: page.mouse.click(x, y), done, arg)
        record("heads_knockout_click", click)
    page.close()


# ------------------------------------------------------------------ the same panels on a hub model (--hub DIR)
HUB_TEXT = "the cat sat on the mat ."
HUB_EDITS = ["the cat sat in the mat .", "the dog sat on the mat .", "the cat sat on the red mat .",
             "the cat ran on the mat .", "a cat sat on the mat .", "the cat sat on a mat .", "the cat sat at the mat ."]
HUB_MAXLEN = 24               # a random stand-in never writes </s>: its output capped at a real sentence's length
HEADS_TAB_DRAWS = "heads_grid"      # what the Heads tab draws once open (its st-key-)
HUB_READY_MS = 600_000              # a hub page's first load: its model's first decoding, on a busy machine
FOIL_OPTIONS = """() => [...document.querySelectorAll('[role="option"]')].map(e => e.textContent)"""


def hub_link(hub: str, **fields) -> str:
    """The Translate page on the hub model with HUB_TEXT, greedy, capped at HUB_MAXLEN pieces."""
    from urllib.parse import urlencode
    return "/translate?" + urlencode({"model": hub, "text": HUB_TEXT, "method": "greedy", "maxlen": HUB_MAXLEN,
                                      **fields})


def hub_heads(hub: str) -> tuple[int, int]:
    """(encoder layers, heads) of the hub model in folder `hub`, from its config.json."""
    from s2s.hub_config import describe_config
    c = describe_config(json.loads((Path(hub) / "config.json").read_text()))
    return c.encoder_layers, c.heads


def hub_edits(hub: str, n: int) -> list[str]:
    """Up to `n` of HUB_EDITS that the model's own tokenizer cuts into as many source pieces as
    HUB_TEXT (patching needs the same number)."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(hub)
    length = len(tok(HUB_TEXT).input_ids)
    return [e for e in HUB_EDITS if len(tok(e).input_ids) == length][:n]


def knockout_target(page, layer: int, head: int, heads: int) -> tuple[float, float]:
    """Where a click knocks head `head` of `layer` (from 0; `heads` per layer) out in the Heads tab's
    knock-out mode: its cell of the layers x heads matrix (MAP_CENTRE; every cell answers over its
    whole area, issue #67). The one place to change when the click target changes."""
    x, y = page.evaluate(MAP_CENTRE, [layer, head, heads])
    return x, y


def hub_actions(b, url: str, hub: str, record, presses: int) -> None:
    """On the hub model in folder `hub` (listed by the operator): its Heads tab opened, knock-out
    clicks, the lens's step, a foil picked and an edit compared, each on a page of its own. A page
    that never gets ready (its first load waits up to HUB_READY_MS: the model's first decoding)
    fails its action alone."""
    layers, heads = hub_heads(hub)

    def ready(page, link: str, key: str | None = None) -> None:
        goto(page, url + link)
        if key:
            page.wait_for_function(DRAWN, arg=key, timeout=HUB_READY_MS)
        page.wait_for_function(SETTLED, timeout=HUB_READY_MS)

    def heads_tab(page) -> None:         # the Heads tab, from Step by step
        ready(page, hub_link(hub), "heatmap")
        record("hub_heads_tab", lambda: timed(page, lambda: page.get_by_role("tab", name="Heads").click(), DRAWN,
                                              HEADS_TAB_DRAWS))

    def knockout(page) -> None:          # knock-out mode: a link with one encoder head out, then clicks
        ready(page, hub_link(hub, tab="Heads", heads="encoder", mask="encoder:1.1"), "knockout_grid")
        for k in range(min(presses, layers * heads - 1)):
            def click(layer: int = (k + 1) // heads % layers, head: int = (k + 1) % heads) -> float:
                done, arg = changed(page, KNOCKOUT_ANSWER)
                x, y = knockout_target(page, layer, head, heads)
                return timed(page, lambda: page.mouse.click(x, y), done, arg)
            record("hub_knockout_click", click)

    def lens(page) -> None:              # the lens, a step on at a time
        ready(page, hub_link(hub, tab="Step by step", lens="on"), "lens_top")
        for _ in range(presses):
            def step_on() -> float:
                done, arg = changed(page, CHART_DATA, "lens_top")
                slider = page.locator(".st-key-step input[type='range']")
                return timed(page, lambda: slider.press("ArrowRight"), done, arg)
            record("hub_lens_step", step_on)

    def foils(page) -> None:             # the contrast panel opened at step 1 (not timed), then other foils
        ready(page, hub_link(hub, tab="Step by step"))
        page.locator(".st-key-contrast_panel summary").click()
        page.wait_for_function(f"() => ({FOIL_LINE})() !== null", timeout=HUB_READY_MS)
        page.wait_for_function(SETTLED, timeout=HUB_READY_MS)
        page.locator(".st-key-foil input").click()
        page.wait_for_selector('[role="option"]', timeout=TIMEOUT_MS)
        others = page.evaluate(FOIL_OPTIONS)[1:]      # (the first: the runner-up, shown already)
        page.keyboard.press("Escape")
        for foil in others[:presses]:
            def pick(foil: str = foil) -> float:
                item = open_option(page, "foil", foil)
                done, arg = changed(page, FOIL_LINE)
                return timed(page, item.click, done, arg)
            record("hub_contrast_foil", pick)

    def compares(page) -> None:          # Compare an edit, with what carries the change
        ready(page, hub_link(hub, tab="Compare an edit"))
        page.wait_for_selector(".st-key-edit input", timeout=TIMEOUT_MS)
        for edit in hub_edits(hub, presses):
            def compare(edit: str = edit) -> float:
                page.locator(".st-key-edit input").fill(edit)
                done, arg = changed(page, PATCH_MAP)
                return timed(page, lambda: page.get_by_role("button", name="Compare", exact=True).click(), done, arg)
            record("hub_patch_compare", compare)

    for name, section in [("hub_heads_tab", heads_tab), ("hub_knockout_click", knockout), ("hub_lens_step", lens),
                          ("hub_contrast_foil", foils), ("hub_patch_compare", compares)]:
        page = b.new_page(viewport=VIEWPORT)
        try:
            section(page)
        except Exception as e:          # the page never got ready: this action fails, the next goes on
            def failed(e: Exception = e) -> float:
                raise e
            record(name, failed)
        finally:
            page.close()


def new_tab(b, url: str) -> float:
    """ms to open the start page in a new browser tab until it has settled: what any link opened
    in a new tab costs before its page does anything (the app's scripts loaded and run afresh)."""
    page = b.new_page(viewport=VIEWPORT)
    try:
        return timed(page, lambda: page.goto(url + "/?tab=new"), "() => document.querySelector("
                     "'[data-testid=\"stSidebarNav\"] a') !== null")
    finally:
        page.close()


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) process `pid` has used so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, quiet_s: float = IDLE_S, share: float = IDLE_SHARE, timeout_s: float = TIMEOUT_MS / 1000,
              poll_s: float = 0.25) -> float:
    """Wait until the server `pid` has used under `share` of a core for the last `quiet_s` seconds
    (its warm-up over: it loads in the background while nothing else runs); returns the seconds
    waited. TimeoutError after `timeout_s`."""
    start = time.perf_counter()
    samples = [(start, cpu_s(pid))]
    while True:
        time.sleep(poll_s)
        now = time.perf_counter()
        samples.append((now, cpu_s(pid)))
        while len(samples) > 2 and samples[1][0] <= now - quiet_s:
            samples.pop(0)                 # the window: the oldest sample at least quiet_s old
        t0, c0 = samples[0]
        if now - t0 >= quiet_s and samples[-1][1] - c0 < share * (now - t0):
            return now - start
        if now - start > timeout_s:
            raise TimeoutError(f"the server was still busy after {timeout_s:.0f} s")


def hub_first_use(b, url: str, hub: str, pid: int) -> float:
    """ms from opening the Translate page with the hub model chosen, in a new browser tab on a server
    that has warmed up (wait_idle, not timed), until its heatmap is drawn."""
    from urllib.parse import urlencode
    wait_idle(pid)
    return new_tab_ms(b, url + "/translate?" + urlencode({"model": hub, "text": HUB_PAIR[0]}), "heatmap")


def explain_links(b, url: str, models: list[str], hub: str | None, sentence, record, pid: int | None = None) -> None:
    """The explain links, each with a new sentence, on the run's server; first the new tab's own
    cost (new_tab_start_page), so that what the explain page adds can be read off. With `hub`,
    first its first use on Translate (hub_first_use, once the server `pid` is idle), then its link."""
    record("new_tab_start_page", lambda: new_tab(b, url))
    for model in [m for m in EXPLAIN_MODELS if m in models]:
        text, _ = next(sentence)
        record("explain_link_" + model, lambda: explain_link(b, url, model, text))
    if hub:     # the sentence, forced to its French: a model built offline has random weights, and
        # its own greedy output would run to the length limit
        if pid is not None:
            record("hub_first_use", lambda: hub_first_use(b, url, hub, pid))
        record("explain_link_hub", lambda: explain_link(b, url, hub, *HUB_PAIR))


def target_ms(action: str) -> int:
    return START_LINK_TARGET_MS if action.startswith("start_link_") else TARGET_MS.get(action, DEFAULT_TARGET_MS)


def summary(times: dict[str, list[float]]) -> dict:
    """Median and worst per action, and the actions whose median misses its target."""
    times = {k: v for k, v in times.items() if v}
    p50 = {k: round(statistics.median(v), 1) for k, v in times.items()}
    return {"ms_p50": p50, "ms_max": {k: max(v) for k, v in times.items()},
            "samples": {k: len(v) for k, v in times.items()},
            "targets_ms": {**TARGET_MS, "start_link_*": START_LINK_TARGET_MS, "every other action": DEFAULT_TARGET_MS},
            "over_target": sorted(k for k, v in p50.items() if v > target_ms(k))}


def compared(summaries: dict[str, dict]) -> dict[str, float]:
    """Each action's median in the last checkout over the first's (both measured)."""
    first, last = (s["ms_p50"] for s in (list(summaries.values())[0], list(summaries.values())[-1]))
    return {k: round(last[k] / first[k], 2) for k in last if k in first and first[k] > 0}


def start_links(b, url: str, record, only: str | None = None) -> None:
    """Every start link (whose label contains `only`, if given), in the outline's order, on this
    (fresh) server."""
    for label in start_link_labels(b, url):
        if not only or only in label:
            record("start_link_" + slug(label), lambda: start_link(b, url, label))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="fresh servers, one cold start each (per checkout)")
    p.add_argument("--presses", type=int, default=3, help="new sentences (or seeds) per run for repeated actions")
    p.add_argument("--hub", metavar="DIR", help="a Hugging Face model folder the servers list (S2S_HUB_MODELS): "
                                                 "its explain link is timed too (e.g. the opus-mt-shaped Marian of "
                                                 "tests/hub_models.py)")
    p.add_argument("--explain-only", action="store_true",
                   help="per run only the cold start, the explain links and the start page's links")
    p.add_argument("--panels-only", action="store_true",
                   help="per run only the cold start and the last views' panels (lens_step_<model>, "
                        "heads_knockout_click, contrast_foil_pick, patch_compare_<model>; with --hub, the hub_* "
                        "actions too)")
    p.add_argument("--link", metavar="TEXT",
                   help="only the Start links whose label contains TEXT (e.g. Heads), per run on a fresh server "
                        "once its warm-up is over (its CPU idle), as the outline's later links find it; no other "
                        "action")
    p.add_argument("--app", type=Path, action="append", metavar="DIR",
                   help="a checkout of this app to serve (default: this one); give it twice or more to compare "
                        "commits: runs alternate between them and `ratio` is the last one's medians over the first's")
    a = p.parse_args(argv)
    hub = str(Path(a.hub).resolve()) if a.hub else None
    env = {"S2S_HUB_MODELS": hub} if hub else None
    apps = [str(d.resolve()) for d in (a.app or [ROOT])]
    models = [i.name for i in attention_checkpoints(checkpoint_root())]
    default = "en-fr-additive"                        # the page opens on it (ui.models.DEFAULT_MODEL) when present
    models = sorted(models, key=lambda n: n != default)
    times: dict[str, dict[str, list[float]]] = {app: {} for app in apps}
    failed: dict[str, list[str]] = {app: [] for app in apps}
    errors = 0
    with browser() as b:
        for run in range(a.runs):
            for app in apps:       # alternating: a machine's drift hits every checkout alike
                errors += bench_one(b, app, run, a.presses, models, times[app], failed[app], hub, env, a.explain_only,
                                    a.link, a.panels_only)
    summaries = {app: {**summary(times[app]), "failed": failed[app]} for app in apps}
    common = {"runs": a.runs, "viewport": f"{VIEWPORT['width']}x{VIEWPORT['height']}", "exceptions": errors}
    if len(apps) == 1:
        print(json.dumps({**summaries[apps[0]], **common}))
    else:
        print(json.dumps({"apps": summaries, "ratio": compared(summaries), **common}))
    return 0 if not errors and not any(failed.values()) else 1


def bench_one(b, app: str, run: int, presses: int, models: list[str], times: dict, failed: list,
              hub: str | None, env: dict | None, explain_only: bool, link: str | None = None,
              panels_only: bool = False) -> int:
    """One run of checkout `app`: a fresh server for the actions, another for the start links
    (with `link`: only those start links, on a server whose warm-up is over)."""
    def record(name: str, measure) -> None:
        try:
            ms = round(measure(), 1)       # before setdefault: a failed action leaves no empty list
            times.setdefault(name, []).append(ms)
        except Exception as e:             # one broken action must not hide the others' times
            failed.append(f"{name}: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}")

    if link:
        with streamlit_server(env, app=app, with_process=True) as (url, proc):
            # the warm-up starts with the first page a browser opens (app.py), not with the server:
            # open the Start page once, then wait for the server's CPU to go quiet
            start_link_labels(b, url)
            try:
                wait_idle(proc.pid)
            except TimeoutError as e:      # a machine too busy to tell: timed anyway, and said
                failed.append(f"run {run}: warm-up not over: {e}")
            start_links(b, url, record, only=link)
        return 0

    t_spawn = time.perf_counter()
    with streamlit_server(env, app=app, with_process=True) as (url, proc):
        errors = one_run(b, url, t_spawn, presses, run * (2 * presses + 2), models, record, hub, explain_only,
                         proc.pid, panels_only)
    if panels_only:
        return errors
    with streamlit_server(app=app) as url:
        start_links(b, url, record)
    return errors


if __name__ == "__main__":
    sys.exit(main())
