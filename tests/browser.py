"""Real-browser helpers: start `streamlit run app.py` on loopback and drive Debian's
Chromium with Playwright (no browser download: executable_path=/usr/bin/chromium)."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: dict | None = None, timeout: float = 90, with_process: bool = False,
                     app: Path | None = None):
    """Yield the URL of a fresh `streamlit run app.py` (and its Popen if with_process); stop it
    afterwards. `app`: another checkout of this app to serve (default: this one)."""
    app = Path(app or ROOT).resolve()
    port = free_port()
    log = tempfile.TemporaryFile()     # a file, not a pipe: a pipe nobody reads would block a chatty server
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(app / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=app, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                log.seek(0)
                raise RuntimeError("streamlit did not start: " + log.read().decode(errors="replace")[-2000:])
            time.sleep(0.05)       # tools/bench_browser.py times cold start from the spawn: poll finely
        yield (url, proc) if with_process else url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    # reached only when the body ended without an exception (one would hide the test's own)
    if os.environ.get("PYTEST_CURRENT_TEST"):        # a test's server: a tool timing an old checkout is not judged
        log.seek(0)
        found = widget_warnings(log.read().decode(errors="replace"))
        assert not found, "the server logged Streamlit widget warnings:\n" + "\n".join(found)


# What Streamlit logs (on the server, never on the page) about a widget used wrongly; the first
# is logged once per server, so one left unfixed hides the next (issue #69 item 8).
WIDGET_WARNINGS = ("was created with a default value but also had its value set via the Session State API",
                   "`label` got an empty value",
                   "Your script uses a widget command in a cached function",
                   "st.number_input value has type")


def widget_warnings(log: str) -> list[str]:
    """The lines of a server's `log` that are Streamlit widget warnings (WIDGET_WARNINGS)."""
    return [line.strip() for line in log.splitlines() if any(w in line for w in WIDGET_WARNINGS)]


@contextlib.contextmanager
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


HEATMAP = "[class*='st-key-heatmap'] .js-plotly-plot, .stPlotlyChart .js-plotly-plot"


def open_app(b, url: str, width: int = 1400, height: int = 1000, path: str = "/translate"):
    """A new tab on `path` (the Translate page unless said: the app itself opens on Start
    here), once a chart is drawn (a visible one: not ui.warm.load_plotly_early's hidden chart).
    It is a `watched_page`, so that a test can wait for it to `settle`."""
    page = watched_page(b, width, height)
    page.goto(url + path)
    page.wait_for_selector(".js-plotly-plot >> visible=true", timeout=90_000)
    return page


def translate_in_page(page, text: str, expect_word: str, timeout_ms: int = 30_000) -> float:
    """Type `text`, press Translate; return ms until the heatmap shows `expect_word` on its axis."""
    area = page.get_by_role("textbox", name="English text")
    area.fill(text)
    t = time.perf_counter()
    page.get_by_role("button", name="Translate", exact=True).click()
    page.wait_for_function(
        """word => [...document.querySelectorAll('.js-plotly-plot .xtick text')]
                    .some(e => e.textContent === word)""", arg=expect_word, timeout=timeout_ms)
    return (time.perf_counter() - t) * 1000


def value_of(page, box: str, expected: str, timeout_ms: int = 5_000) -> str:
    """The value of the text box labelled `box`, once it is `expected` (or after `timeout_ms`).
    A text box shows what the server sent a moment after a chart drawn below it: on a busy
    machine its value was still empty 0.3-0.45 s after the heatmap (no message from the server
    in between), so a test reads it when it settles, not at once."""
    area = page.get_by_role("textbox", name=box)
    try:
        page.wait_for_function("([el, want]) => el.value === want", arg=[area.element_handle(), expected],
                               timeout=timeout_ms)
    except Exception:       # not within the time: the caller's assert shows what it is
        pass
    return area.input_value()



def shot(page, name: str) -> None:
    """With S2S_SHOTS set (a folder), the page's screenshot there as NAME.png, the name's
    characters other than letters, digits and - made _ (for looking at a test's views)."""
    folder = os.environ.get("S2S_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{re.sub(r'[^a-z0-9-]+', '_', name.lower())}.png"))

def exceptions(page) -> list[str]:
    return [e.inner_text() for e in page.query_selector_all('[data-testid="stException"]')]


def open_option(page, box_key: str, option: str, tries: int = 5):
    """The option `option` of the select box keyed `box_key`, its list open and the option shown,
    ready to click. A rerun redraws the box and closes its list (it did under the suite's load):
    the list is opened again, up to `tries` times."""
    box = page.locator(f".st-key-{box_key} input")
    item = page.locator('[role="option"]').filter(has_text=re.compile(f"^{re.escape(option)}$"))
    for _ in range(tries):
        if not item.is_visible():
            box.click()
            if not page.locator('[role="listbox"]').is_visible():     # focused without its list: the key opens it
                box.press("ArrowDown")
        try:
            item.wait_for(timeout=5_000)
            return item
        except Exception:       # playwright's TimeoutError: the list closed again
            continue
    raise RuntimeError(f"the option {option} of {box_key} did not show in {tries} tries")


def need_chromium_and_shipped_checkpoints() -> None:
    """Skip the calling test module (call it at module level) unless Debian's Chromium and the
    shipped checkpoints are here; on CI a missing Chromium is an error, not a skip."""
    import pytest
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            raise RuntimeError("CI needs Debian's chromium for the browser tests: apt-get install -y chromium")
        pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)
    ckpt = ROOT / "checkpoints"
    if not ((ckpt / "en-fr-additive" / "metrics.json").is_file() and (ckpt / "en-fr-none" / "metrics.json").is_file()
            and any(ckpt.glob("charlm-*/metrics.json"))):
        pytest.skip("the shipped checkpoints are not in checkpoints/", allow_module_level=True)


# ------------------------------------------------------------------ waiting for a view to settle
# Installed before the app's own scripts: notes that a run of the script has begun. Before its
# first run a new session's page reads "notRunning" with nothing drawn (the server may still be
# busy with the previous link's session), which must not pass for a finished run.
RUNS = """window.__s2sRan = false;
// a quick run turns the state to running and back before the observer is called: its old value says so
new MutationObserver(ms => { if (ms.some(m => m.oldValue === 'running'
                                           || (m.target.dataset && m.target.dataset.testScriptState === 'running')))
                               window.__s2sRan = true; })
  .observe(document, {attributes: true, subtree: true, attributeOldValue: true,
                      attributeFilter: ['data-test-script-state']});
// Issue #47, no spinner text over other text: every frame while a spinner shows, its box against
// every other visible text, chart and alert of the main column; what overlaps is kept in
// window.__s2sSpinnerOverlaps ([spinner text, other element's text]), spinners seen in __s2sSpinners.
window.__s2sSpinners = []; window.__s2sSpinnerOverlaps = [];
(() => {
  const OTHERS = 'p, h1, h2, h3, label, li, .js-plotly-plot, [data-testid="stAlert"], [data-testid="stMetric"]';
  const seen = s => s.getBoundingClientRect().width > 0;
  let watching = false;
  const look = () => {
    const spinners = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stSpinner"]')].filter(seen);
    for (const s of spinners) {
      const a = s.getBoundingClientRect(), text = s.textContent.trim().slice(0, 80);
      if (!window.__s2sSpinners.includes(text)) window.__s2sSpinners.push(text);
      for (const e of document.querySelectorAll('[data-testid="stMain"] :is(' + OTHERS + ')')) {
        if (s.contains(e) || e.contains(s) || !seen(e)) continue;
        const b = e.getBoundingClientRect();
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        const other = (e.textContent || e.className || e.tagName).trim().slice(0, 60);
        if (w > 1 && h > 1 && !window.__s2sSpinnerOverlaps.some(([t, o]) => t === text && o === other))
          window.__s2sSpinnerOverlaps.push([text, other]);
      }
    }
    watching = spinners.length > 0;
    if (watching) requestAnimationFrame(look);
  };
  new MutationObserver(() => { if (!watching && document.querySelector('[data-testid="stSpinner"]')) {
                                 watching = true; requestAnimationFrame(look); } })
    .observe(document, {childList: true, subtree: true});
})();"""

SETTLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]'), main = document.querySelector('[data-testid="stMain"]');
  if (!app || !main) return false;
  if (app.dataset.testScriptState === 'running') window.__s2sRan = true;
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const frames = [...document.querySelectorAll('iframe')]
      .filter(f => { try { return f.contentDocument && f.contentDocument.readyState !== 'complete'; }
                     catch (e) { return false; } }).length;
  // what the browser has yet to draw after the run: an element whose code is still loading (a
  // skeleton stands in for it, for seconds on a busy machine), a chart not drawn or still hidden
  const hidden = c => [...c.querySelectorAll('.js-plotly-plot')].some(p => p.style.visibility === 'hidden');
  const undrawn = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stSkeleton"]')]
          .filter(shown).length
      + [...document.querySelectorAll('[data-testid="stPlotlyChart"], [data-testid="stVegaLiteChart"]')]
          .filter(c => shown(c) && !c.closest('.st-key-vega_early')
                       && (!c.querySelector('.main-svg, svg, canvas') || hidden(c))).length;
  const sig = [location.pathname, app.dataset.testScriptState, document.fonts.status, frames, undrawn,
               main.scrollTop, main.scrollHeight,
               document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]').length,
               document.querySelectorAll('[data-stale="true"]').length,
               document.querySelectorAll('.js-plotly-plot text').length,
               document.querySelectorAll('.vega-embed svg text').length].join('|');
  const now = performance.now();
  if (window.__s2sSig !== sig) { window.__s2sSig = sig; window.__s2sSince = now; return false; }
  return window.__s2sRan && app.dataset.testScriptState === 'notRunning' && document.fonts.status === 'loaded'
      && frames === 0 && undrawn === 0 && now - window.__s2sSince >= 1000;
}"""


def watched_page(b, width: int, height: int):
    """A new tab (a new session once it opens the app) with RUNS installed, so `settle` works."""
    page = b.new_page(viewport={"width": width, "height": height})
    page.add_init_script(RUNS)
    return page


def spinner_overlaps(page) -> list[str]:
    """What any spinner shown on `page` so far was drawn over (RUNS watches every frame of it)."""
    return [f"the spinner '{text}' is drawn over '{other}'"
            for text, other in page.evaluate("() => window.__s2sSpinnerOverlaps || []")]


def settle(page, timeout_ms: int = 180_000) -> None:
    """A run has begun and is over, its charts drawn and the page's scroll into view done: the
    script state, the main scroll position and height, the number of elements, of chart texts
    and of stale elements all unchanged for 1 s, fonts loaded, no element still loading its
    code (a skeleton), every chart drawn and every (same-origin) component frame loaded (its
    script scrolls the page)."""
    page.wait_for_function(SETTLED, timeout=timeout_ms, polling=150)
