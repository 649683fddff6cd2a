"""The README's screenshot, remade: one view of the app in headless Chromium, as a PNG.

    python tools/screenshot.py [--out PATH] [--path /translate] [--projector] [--width 1280 --height 720]

Starts a fresh `streamlit run app.py` on a free loopback port (tests/browser.py), opens
`--path` (a page and its query, as a link gives it: default /translate, the Translate & Align
page as it opens, its example sentence translated greedily with its attention heatmap) in
Debian's headless Chromium at --width x --height (1280 x 720, a classroom projector), waits
until the page has settled (the run over, every chart drawn, no spinner, fonts loaded,
nothing moving for 1 s) and writes the visible screen, one pixel per CSS pixel, to --out
(default: the picture README.md shows, assets/translate.png). --projector adds
`projector=on` to the address: the app's Projector switch on (18 px chart labels, the sidebar
collapsed). The PNG is lossless unless it would pass 150 KB, the README picture's limit
(tests/test_docs.py): then, with Pillow, it is saved again as 256 colours (about a third the
size; a chart's colour bar shows steps). Prints the file, its size in bytes and the address
shown, as JSON.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from browser import browser, exceptions, open_app, settle, streamlit_server  # noqa: E402

DEFAULT_PATH = "/translate"
MAX_BYTES = 150_000         # the README picture's limit (tests/test_docs.py)
NO_SPINNER = "() => !document.querySelector('[data-testid=\"stSpinner\"], [data-testid=\"stStatusWidget\"]')"


def readme_picture() -> Path:
    """The first picture README.md shows (![...](assets/translate.png)), as a path."""
    found = re.search(r"!\[[^\]]*\]\(([^)\s]+\.png)\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    return ROOT / (found.group(1) if found else "assets/translate.png")


def with_projector(path: str) -> str:
    """`path` with projector=on in its query (replacing a projector=off)."""
    base, _, query = path.partition("?")
    params = [p for p in query.split("&") if p and not p.startswith("projector=")]
    return base + "?" + "&".join(params + ["projector=on"])


def small_png(path: Path) -> None:
    """Over MAX_BYTES, re-save the PNG as 256 colours (no dithering: flat areas stay flat), if
    Pillow is here."""
    if path.stat().st_size <= MAX_BYTES:
        return
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def screenshot(out: Path, path: str = DEFAULT_PATH, width: int = 1280, height: int = 720,
               projector: bool = False) -> dict:
    """Take the picture (see the module's docstring); return what was written."""
    if not path.startswith("/"):
        path = "/" + path
    if projector:
        path = with_projector(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with streamlit_server(timeout=180) as url, browser() as b:
        page = open_app(b, url, width, height, path)
        settle(page)
        page.wait_for_function(NO_SPINNER, timeout=60_000)
        errors = exceptions(page)
        if errors:
            raise RuntimeError(f"the page at {path} shows an error: {errors[0][:500]}")
        page.screenshot(path=str(out), scale="css", animations="disabled", caret="hide")
    small_png(out)
    return {"out": str(out), "bytes": out.stat().st_size, "path": path, "width": width, "height": height}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="the PNG to write (default: README.md's picture)")
    p.add_argument("--path", default=DEFAULT_PATH, help="the page and query to open, e.g. '/translate?tab=Beam+tree'")
    p.add_argument("--projector", action="store_true", help="the Projector switch on (projector=on in the address)")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=720)
    a = p.parse_args(argv)
    out = (a.out or readme_picture()).resolve()
    print(json.dumps(screenshot(out, a.path, a.width, a.height, a.projector)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
