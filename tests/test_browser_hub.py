"""A real Chromium: a Hugging Face model from the operator's list (S2S_HUB_MODELS), picked in
the sidebar as a user does, translates, and its Heads grid draws every layer x head."""
import os
import shutil
from pathlib import Path

import pytest

from browser import CHROMIUM, browser, exceptions, settle, streamlit_server, watched_page

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium for the browser tests: apt-get install -y chromium")
    pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)


def test_pick_an_operators_hub_model_and_see_its_heads(hub_models, tmp_path):
    env = {"S2S_HUB_MODELS": str(hub_models["marian"])}
    with streamlit_server(env) as url, browser() as b:
        page = watched_page(b, 1280, 720)
        page.goto(url + "/translate?text=the+cat+sat+on+the+mat+.")
        page.wait_for_selector(".st-key-heatmap .js-plotly-plot", timeout=90_000)
        # the sidebar's model list, as a user opens it
        page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
        page.get_by_role("option", name="marian  (Hugging Face)").click()
        page.wait_for_function("""() => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
                                        .some(e => e.textContent.includes('2 layers × 4 heads'))""", timeout=90_000)
        page.get_by_role("button", name="Translate", exact=True).click()
        page.get_by_role("tab", name="Heads").click()
        page.wait_for_selector(".st-key-heads_grid .js-plotly-plot", timeout=90_000)
        settle(page)                                                # the run over, the grid drawn
        title = page.evaluate("document.querySelector('.st-key-heads_grid .js-plotly-plot').layout.title.text")
        assert "2 layers × 4 heads" in title
        maps = page.locator(".st-key-heads_grid .nsewdrag").count()
        assert maps == 8                                            # 2 layers x 4 heads, each its own map
        page.locator(".st-key-heads_grid").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "hub_heads.png"))
        if os.environ.get("S2S_KEEP_SCREENSHOTS"):
            shutil.copy(tmp_path / "hub_heads.png", "/tmp/hub_heads_1280x720.png")
        assert exceptions(page) == []
