"""A real Chromium at 1280 x 720: the Heads tab's pruning as a job beside the page (issue #67 item 3)
on the tiny Marian. Press the button: the progress says "k of N decodings, about T left" and the
curves so far are drawn; Stop: the tab stays whole (its grid, the curves so far, a button to go
on), with no exception; press again: the run finishes from where it stopped. The server's pruning
decodings wait on a gate file the test writes (a sitecustomize in the server's PYTHONPATH), so
every state is seen however loaded the machine. Screenshots go to $S2S_SHOTS when it is set."""
from __future__ import annotations

import os
import textwrap
from urllib.parse import quote

from browser import exceptions, need_chromium_and_shipped_checkpoints, settle, shot, streamlit_server, watched_page
from conftest import ROOT

need_chromium_and_shipped_checkpoints()

WIDTH, HEIGHT = 1280, 720
GATED = textwrap.dedent("""\
    # test_browser_pruning_job.py's gate: the pruning job's k-th decoding waits until the file says >= k
    import os, pathlib, time
    import s2s.head_importance as _hi
    _gate, _real, _calls = pathlib.Path(os.environ["S2S_TEST_GATE"]), _hi.greedy_batch_masks, [0]
    def _gated(*args, **kwargs):
        _calls[0] += 1
        while int(_gate.read_text() or 0) < _calls[0]:
            time.sleep(0.1)
        return _real(*args, **kwargs)
    _hi.greedy_batch_masks = _gated
    _hi.PRUNE_ROWS = 3          # the 3 pairs of one mask a batch: one decoding a call
    """)


def test_press_stop_the_page_still_whole_press_again_to_finish(hub_models, tmp_path):
    from browser import browser
    marian = str(hub_models["marian"])
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GATED)
    gate = tmp_path / "gate"
    gate.write_text("0")
    env = {"S2S_HUB_MODELS": marian, "S2S_TEST_GATE": str(gate),
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with streamlit_server(env=env, timeout=240) as url, browser() as b:
        page = watched_page(b, WIDTH, HEIGHT)
        try:
            page.goto(f"{url}/translate?model={quote(marian, safe='')}&text=the+cat+sat+on+the+mat+.&view=pieces"
                      "&maxlen=12&tab=Heads&mask=cross%3A1.1")
            page.locator(".st-key-pruning_run button").click(timeout=240_000)
            stop = page.locator(".st-key-pruning_stop").get_by_role("button", name="Stop")
            stop.wait_for(timeout=240_000)                 # ranked: the decodings wait on the gate
            gate.write_text("2")
            page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stProgress\"]')]"
                                   ".some(e => /2 of \\d+ decodings, (about|under) /.test(e.innerText))",
                                   timeout=240_000)
            page.wait_for_selector(".st-key-pruning_chart .js-plotly-plot", timeout=60_000)
            page.wait_for_timeout(2000)
            shot(page, "pruning-job-running")
            assert exceptions(page) == []
            stop.click()
            page.wait_for_function("() => document.body.innerText.includes('Stopping after the decodings under way')",
                                   timeout=60_000)
            gate.write_text("3")
            go_on = page.locator(".st-key-pruning_run").get_by_role("button", name="Go on pruning")
            go_on.wait_for(timeout=240_000)
            settle(page)
            shot(page, "pruning-job-stopped")
            assert exceptions(page) == []
            body = page.inner_text("body")
            assert "The curves so far: 3 of" in body and "decodings, " not in body
            for whole in (".st-key-knockout_grid .js-plotly-plot", ".st-key-pruning_chart .js-plotly-plot",
                          ".st-key-point_knockout_answer"):
                assert page.locator(whole).count() == 1, whole
            gate.write_text("1000000")
            go_on.click()
            page.wait_for_function("() => document.body.innerText.includes('Least important first')",
                                   timeout=600_000)
            settle(page)
            shot(page, "pruning-job-done")
            assert exceptions(page) == []
            assert page.locator(".st-key-pruning_chart .js-plotly-plot").count() == 1
            assert page.locator(".st-key-knockout_grid .js-plotly-plot").count() == 1
        finally:
            page.close()

