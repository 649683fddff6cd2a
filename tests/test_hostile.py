"""Hostile text on every page and CLI: a result or a clear message, never a traceback,
never markup (the browser tests check the DOM)."""
import json
import shutil
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT, app_page

HOSTILE = {
    "emoji": "a 😀 b 🎉 c",
    "bidi": "a \u202eb c\u202c \u2067d\u2069 שלום مرحبا",
    "control": "a\x00 b\x07 c\x1b[31m d",
    "html": '<script>alert(1)</script><img src=x onerror="alert(2)"> a b',
    "huge": "word " * 4000,                # 20,000 characters
    "one_long_word": "a" * 5000,
}
REFUSED = {"huge", "one_long_word"}        # over the limits: a message, not a result


@pytest.fixture
def zoo_env(tmp_path, tiny_additive, tiny_none, tiny_charlm, monkeypatch):
    shutil.copytree(tiny_additive, tmp_path / "en-fr-additive")
    shutil.copytree(tiny_none, tmp_path / "en-fr-none")
    shutil.copytree(tiny_charlm, tmp_path / "charlm-linux-kernel")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    return tmp_path


def click(at, label: str) -> AppTest:
    [b for b in at.button if b.label == label][0].click()
    return at.run()


def outcome_ok(at, name: str) -> None:
    assert not at.exception, at.exception
    # (the Bottleneck page's cost chart can't time its own long examples with the tiny test
    # tokenizer, which splits them into too many pieces: not about the input under test)
    warnings = " ".join(w.value for w in at.warning if not w.value.startswith("Cannot time the joined examples"))
    if name in REFUSED:
        assert "limit" in warnings
    else:
        assert not warnings, warnings


@pytest.mark.parametrize("name", HOSTILE)
def test_translate_page(zoo_env, name):
    at = app_page("pages/translate.py")
    at.text_area(key="text").set_value(HOSTILE[name])
    outcome_ok(click(at, "Translate"), name)


@pytest.mark.parametrize("name", HOSTILE)
def test_bottleneck_page(zoo_env, name):
    at = app_page("pages/bottleneck.py")
    at.text_area(key="bn_text").set_value(HOSTILE[name])
    outcome_ok(click(at, "Translate with both"), name)


@pytest.mark.parametrize("name", HOSTILE)
def test_cells_page(zoo_env, name):
    at = app_page("pages/cells.py")
    at.segmented_control(key="source").set_value("Your text").run()
    at.text_area(key="typed").set_value(HOSTILE[name][:5000])    # the box itself stops at 5,000 characters
    at = click(at, "Trace")
    assert not at.exception
    body = at.get("html")[0].proto.body
    assert "<script" not in body and "<img" not in body


@pytest.mark.parametrize("name", [n for n in HOSTILE if n not in REFUSED])
def test_translate_cli_translates_odd_text(tiny_additive, name):
    # on stdin: an argument cannot carry a NUL byte
    p = subprocess.run([sys.executable, "-m", "s2s.translate", "--model", str(tiny_additive), "--json"],
                       input=HOSTILE[name], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr
    out = json.loads(p.stdout)
    assert "\x00" not in "".join(out["source_tokens"]) and "\u202e" not in "".join(out["source_tokens"])


def test_cells_cli_traces_odd_text(tiny_charlm, tmp_path):
    f = tmp_path / "odd.txt"
    f.write_text(HOSTILE["html"] + HOSTILE["emoji"] + HOSTILE["bidi"], encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "s2s.cells", "--model", str(tiny_charlm), "--text-file", str(f),
                        "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr
    out = json.loads(p.stdout)
    assert "\u202e" not in out["text"] and len(out["layers"][0]["cell"]) == len(out["text"])
