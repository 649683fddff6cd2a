"""The README and docs/: every relative link resolves (a file, and a heading for a #anchor into
a .md file), the README stays short, and its first two commands are the set-up commands.
Reads files only: no network, no app."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]

SETUP = [
    "pip install -r requirements.txt && streamlit run app.py",
    "apt-get update && apt-get install -y chromium && pip install -r requirements.txt && python -m pytest -q",
]
# [text](target) and ![alt](target), the target up to the first space or ")"; an optional "title"
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(text: str) -> list[str]:
    """The lines that markdown renders as text, the lines of code blocks blanked: fenced, and
    indented (lines indented by 4 or more that start after a blank line)."""
    out, fenced, code = [], False, False
    previous_blank = True
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        blank = not line.strip()
        if fenced:
            out.append("")
            continue
        if line.startswith("    ") and (code or previous_blank):
            code = True
        elif not blank:
            code = False
        out.append("" if code else line)
        previous_blank = blank
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text in lower case, everything but letters,
    digits, "_", "-" and spaces dropped, spaces made "-"."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)       # a link: its text
    text = re.sub(r"[`*]|(?<!\w)_|_(?!\w)", "", text)                   # code and emphasis marks
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor, with GitHub's -1, -2, ... for repeats."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose(path.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link outside code, inline `code` included."""
    return [(n, m.group(1)) for n, line in enumerate(prose(path.read_text(encoding="utf-8")), 1)
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line))]


def broken(path: Path) -> list[str]:
    bad = []
    for n, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):      # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{n}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif ROOT not in dest.parents and dest != ROOT:
            bad.append(f"{where} (outside the repository)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where} (no such heading)")
    return bad


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert links(path) or path != README, "the README links into docs/"
    assert broken(path) == []


def test_the_readme_links_every_doc():
    linked = {(README.parent / t.partition("#")[0]).resolve() for _, t in links(README)}
    assert [d.name for d in DOCS if d.resolve() not in linked] == []


def test_the_readme_is_short_and_opens_with_the_two_setup_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    commands = [line[4:] for line in lines if line.startswith("    ") and line.strip()]
    assert commands[:2] == SETUP
    assert lines.index("    " + SETUP[0]) < next(i for i, line in enumerate(lines) if line.startswith("## "))


def test_the_readme_picture_is_a_small_screenshot():
    pictures = [t for _, t in links(README) if t.endswith((".png", ".jpg", ".jpeg"))]
    assert pictures, "the README shows the app"
    for t in pictures:
        data = (README.parent / t).read_bytes()
        assert len(data) < 150_000
        if data[:8] == b"\x89PNG\r\n\x1a\n":          # width and height from the IHDR chunk
            assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (1280, 720)


def test_the_checker_finds_a_broken_link_and_a_missing_heading(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "a.md").write_text("# Speed against `generate()`\n\n## Gates & Gradients\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#speed-against-generate) [ok](a.md#gates--gradients) [no](a.md#nope)\n"
                    "[gone](missing.md) [web](https://example.com/x.md)\n\n    [code](not-a-link.md)\n"
                    "`[inline](not-a-link.md)` [self](#nothing)\n", encoding="utf-8")
    assert [b.split(": ", 1)[1] for b in broken(page)] == [
        "a.md#nope (no such heading)", "missing.md (no such file)", "#nothing (no such heading)"]
