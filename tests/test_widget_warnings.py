"""No page logs a Streamlit widget warning, on any tab, on the second run (issue #69 item 8).

A widget given a default (value=, index=, default=) whose key the page also writes through
st.session_state (a link's value, keep_across_pages writing it back each run) makes Streamlit
log "was created with a default value but also had its value set via the Session State API"
on the server, once per server: so one such widget hid the next. Streamlit checks only under a
real server (runtime.exists()); here the check is made to run under AppTest, and made to log
every time, so each page and tab is judged on its own. tests/browser.py's streamlit_server
fails a browser test on such a line in a real server's log too.
"""
import logging

import pytest
import streamlit.elements.lib.policies as policies
from streamlit.testing.v1 import AppTest

from browser import widget_warnings
from conftest import ROOT

PAGES = {"pages/alignment.py": ("alignment_tab", ["Against human alignments", "Attention vs attribution",
                                                  "Your corpus"]),
         "pages/gradients.py": ("gradients_tab", ["Live: untrained cells", "Trained models", "LSTM memory",
                                                  "Remembering across a gap", "Bits per character"]),
         "pages/cells.py": ("cells_tab", ["Colored text", "Find cells", "Gates", "Translation models"]),
         "pages/bottleneck.py": (None, [None]),
         "pages/translate.py": ("tab", ["Step by step", "Beam tree", "Forced decoding", "Compare attention",
                                        "Alignment lines", "Heads"])}


@pytest.mark.skipif(not (ROOT / "checkpoints" / "en-fr-additive" / "metrics.json").is_file(),
                    reason="needs the shipped checkpoints")
def test_no_page_logs_a_widget_warning(monkeypatch):
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    monkeypatch.setattr(policies.runtime, "exists", lambda: True)
    check = policies.check_session_state_rules

    def every_time(*args, **kwargs):
        policies._shown_default_value_warning = False      # Streamlit's once-per-server flag
        return check(*args, **kwargs)
    monkeypatch.setattr(policies, "check_session_state_rules", every_time)
    logged = []

    class Keep(logging.Handler):
        def emit(self, record):
            logged.append(f"{where}: {record.getMessage()}")
    handler = Keep(logging.WARNING)
    logging.getLogger(policies.__name__).addHandler(handler)      # Streamlit's loggers do not propagate
    try:
        where = "app.py"
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
        for page, (key, tabs) in PAGES.items():
            at.switch_page(page)
            at.run()
            for tab in tabs:
                where = f"{page} {tab or ''}"
                if key:
                    at.session_state[key] = tab
                at.run()
                at.run()      # the second run: keep_across_pages has written the kept values back
                assert not at.exception, (where, [e.value for e in at.exception])
    finally:
        logging.getLogger(policies.__name__).removeHandler(handler)
    assert not widget_warnings("\n".join(logged)), widget_warnings("\n".join(logged))


def test_widget_warnings_finds_streamlits_lines():
    log = ("2026-12-07 14:05:34.158 WARNING streamlit.elements.lib.policies: The widget with key \"rule\" was "
           "created with a default value but also had its value set via the Session State API.\n"
           "  File \"ui/alignment/gold.py\", line 117\nall is well\n")
    assert widget_warnings(log) == [log.splitlines()[0].strip()]
