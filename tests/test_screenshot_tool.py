"""tools/screenshot.py, the command that makes the README's picture: a real server and
headless Chromium, so it needs Debian's Chromium and the shipped checkpoints (else skipped)."""
from __future__ import annotations

import importlib.util
import struct
import zlib
from pathlib import Path

from browser import need_chromium_and_shipped_checkpoints

ROOT = Path(__file__).resolve().parent.parent
need_chromium_and_shipped_checkpoints()


def load_tool():
    spec = importlib.util.spec_from_file_location("screenshot_tool", ROOT / "tools" / "screenshot.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_the_readme_picture_and_a_projector_query_are_worked_out():
    tool = load_tool()
    assert tool.readme_picture() == ROOT / "assets" / "translate.png"
    assert tool.with_projector("/translate") == "/translate?projector=on"
    assert tool.with_projector("/translate?tab=Beam+tree&projector=off") == "/translate?tab=Beam+tree&projector=on"


def test_the_tool_writes_a_1280_by_720_screenshot_that_is_not_blank(tmp_path, capsys):
    out = tmp_path / "x.png"
    assert load_tool().main(["--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    data = out.read_bytes()
    assert png_size(data) == (1280, 720)
    assert len(data) < 300_000
    try:
        from PIL import Image
    except ImportError:      # no Pillow: a blank screen compresses to almost nothing
        assert len(zlib.compress(data)) > 10_000
        return
    with Image.open(out) as im:
        colours = im.convert("RGB").getcolors(1 << 20)
    assert colours is not None and len(colours) > 50          # text, the heatmap's shades, the buttons
    assert max(n for n, _ in colours) < 0.9 * 1280 * 720      # not one colour filling the screen
