"""docs/command-line.md keeps up with the commands: every long option of every
`python -m s2s.NAME` parser is named in that command's section of the doc, and every key
`python -m s2s.bench --json` can print is named in the bench section.

The parsers are read without running any command: one subprocess runs each command module
as `python -m` would, with argparse's parse_known_args replaced by one that records the
parser and stops (nothing after it runs: no model loaded, no file read); the same subprocess
then asks each recorded parser for its real --help. The bench's keys are read from
s2s/bench.py's syntax tree (`ast`), never by running the slow bench."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "command-line.md"
S2S = ROOT / "s2s"
BENCH = S2S / "bench.py"

# At least these are commands; more are found in s2s/ (any module run as __main__).
EXPECTED = {"bench", "cells", "data", "evaluate", "explain", "fetch", "gradients", "memory_gap", "report",
            "train", "train_charlm", "translate", "alignment"}

# Runs in a fresh interpreter (sys.executable, cwd the repository root): prints one JSON
# object, {command: {"options": [...], "help": "ok" or why not}}.
HARVEST = r'''
import argparse, contextlib, io, json, runpy, sys

class Stop(BaseException):          # not an Exception: a command's `except Exception` lets it by
    pass

real = argparse.ArgumentParser.parse_known_args
seen = []

def record(self, args=None, namespace=None):
    seen.append(self)
    raise Stop

argparse.ArgumentParser.parse_known_args = record
out = {}
for name in sys.argv[1:]:
    seen.clear()
    sys.argv = ["python -m s2s." + name]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_module("s2s." + name, run_name="__main__", alter_sys=True)
    except Stop:
        pass
    except SystemExit as e:
        out[name] = {"error": f"exited ({e.code}) before parsing its arguments"}
        continue
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"}
        continue
    if not seen:
        out[name] = {"error": "builds no argument parser when run"}
        continue
    p = seen[0]
    options = sorted({o for a in p._actions for o in a.option_strings if o.startswith("--")})
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text):
            real(p, ["--help"])
        status = "--help did not exit"
    except SystemExit as e:
        status = "ok" if e.code in (0, None) and "usage:" in text.getvalue() else f"--help exited {e.code}"
    out[name] = {"options": options, "help": status}
print("\n" + json.dumps(out))
'''


MAIN_GUARD = re.compile(r"""^if __name__ == ["']__main__["']:""", re.M)


def commands() -> list[str]:
    """Every module of s2s/ that runs as a command: `if __name__ == "__main__"`, or a
    package's __main__.py (python -m s2s.alignment)."""
    found = set()
    for path in S2S.rglob("*.py"):
        rel = path.relative_to(S2S).with_suffix("")
        if path.name == "__main__.py":
            found.add(".".join(rel.parts[:-1]))
        elif path.name != "__init__.py" and MAIN_GUARD.search(path.read_text(encoding="utf-8")):
            found.add(".".join(rel.parts))
    return sorted(found)


@lru_cache(maxsize=1)
def parsers() -> dict[str, dict]:
    r = subprocess.run([sys.executable, "-c", HARVEST, *commands()], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"reading the parsers failed:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ the doc's sections
def prose(text: str) -> str:
    """The text markdown renders as prose and tables: fenced and indented code blocks left
    out, so that an option only shown in an example command does not count as documented."""
    out, fenced, code, previous_blank = [], False, False, True
    for line in text.splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            continue
        blank = not line.strip()
        if fenced:
            continue
        if line.startswith("    ") and (code or previous_blank):
            code = True
        elif not blank:
            code = False
        if not code:
            out.append(line)
        previous_blank = blank
    return "\n".join(out)


def section(name: str, text: str | None = None) -> str | None:
    """The prose of the section whose heading names `s2s.NAME` (and not s2s.NAME_more or
    s2s.NAME.sub), up to the next heading of the same or a higher level; None if none."""
    lines = prose(DOC.read_text(encoding="utf-8") if text is None else text).splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#{1,6})\s", line)
        if m and re.search(rf"\bs2s\.{re.escape(name)}(?![\w.])", line):
            level = len(m.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (h := re.match(r"^(#{1,6})\s", lines[j])) and len(h.group(1)) <= level), len(lines))
            return "\n".join(lines[i + 1:end])
    return None


def named(option: str, text: str) -> bool:
    """`--max-len` is named in `text` (not only as part of `--max-len-x` or `x--max-len`)."""
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def undocumented(name: str, options: list[str], text: str | None = None) -> list[str] | None:
    body = section(name, text)
    if body is None:
        return None
    return [o for o in options if o != "--help" and not named(o, body)]


# ------------------------------------------------------------------ the bench's keys
def bench_keys(source: str | None = None) -> set[str]:
    """Every top-level key main() of s2s/bench.py can put in its JSON: the keys of the dict
    literal assigned to `out`, every `out["key"] = ...` (and `out["a"], out["b"] = ...`), and
    for `out.update(f(...))` the keys f returns (the dict literal it returns, or the name it
    returns with that name's literal keys and `name["key"] = ...`). Anything it cannot follow
    fails the test, so no key is missed silently."""
    tree = ast.parse(BENCH.read_text(encoding="utf-8") if source is None else source)
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}

    def own_nodes(fn: ast.FunctionDef):
        """fn's nodes, not those of a function or lambda defined inside it (their returns are theirs)."""
        todo = list(ast.iter_child_nodes(fn))
        while todo:
            node = todo.pop()
            yield node
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                todo.extend(ast.iter_child_nodes(node))

    def keys_of(fn: ast.FunctionDef, var: str) -> set[str]:
        found = set()
        for node in own_nodes(fn):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == var:
                        if not isinstance(node.value, ast.Dict):
                            raise AssertionError(f"{fn.name}: `{var} = ...` is not a dict literal")
                        found |= literal_keys(node.value, fn.name)
                    for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == var:
                            if not (isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str)):
                                raise AssertionError(f"{fn.name}: `{var}[...]` with a key that is not a string")
                            found.add(t.slice.value)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
                  and isinstance(node.func.value, ast.Name) and node.func.value.id == var):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Dict):
                    found |= literal_keys(arg, fn.name)
                elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in functions:
                    found |= returned_keys(functions[arg.func.id])
                else:
                    raise AssertionError(f"{fn.name}: cannot follow `{var}.update(...)` on line {node.lineno}")
        return found

    def literal_keys(d: ast.Dict, where: str) -> set[str]:
        keys = set()
        for k in d.keys:
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                raise AssertionError(f"{where}: a dict key that is not a string literal")
            keys.add(k.value)
        return keys

    def returned_keys(fn: ast.FunctionDef) -> set[str]:
        keys = set()
        for node in own_nodes(fn):
            if isinstance(node, ast.Return):
                if isinstance(node.value, ast.Dict):
                    keys |= literal_keys(node.value, fn.name)
                elif isinstance(node.value, ast.Name):
                    keys |= keys_of(fn, node.value.id)
                else:
                    raise AssertionError(f"{fn.name}: cannot follow what it returns")
        return keys

    return keys_of(functions["main"], "out")


# ------------------------------------------------------------------ the tests
def test_every_command_is_found_and_takes_help():
    found = parsers()
    assert EXPECTED <= set(found), f"commands not found in s2s/: {sorted(EXPECTED - set(found))}"
    broken = {name: r.get("error") or r["help"] for name, r in found.items() if r.get("help") != "ok"}
    assert broken == {}, f"commands whose parser cannot be read or whose --help fails: {broken}"


def test_every_parser_belongs_to_a_command():
    """A module that builds a parser is a command, or the package's cli beside its __main__.py."""
    runnable = {S2S.joinpath(*c.split(".")).with_suffix(".py") for c in commands()}
    stray = []
    for path in S2S.rglob("*.py"):
        if not re.search(r"^(?!class ).*\b(ArgumentParser|OneLineErrorParser)\(", path.read_text(encoding="utf-8"),
                         re.M):
            continue
        if path not in runnable and not (path.parent / "__main__.py").is_file():
            stray.append(str(path.relative_to(ROOT)))
    assert stray == [], f"these build a parser but are no command this test reads: {stray}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_option_is_in_its_commands_section(name):
    r = parsers()[name]
    assert "options" in r, f"s2s.{name}: {r.get('error')}"
    missing = undocumented(name, r["options"])
    if missing is None:
        nowhere = [o for o in r["options"] if o != "--help" and not named(o, prose(DOC.read_text(encoding="utf-8")))]
        pytest.fail(f"docs/command-line.md has no section for `python -m s2s.{name}` (a heading naming "
                    f"s2s.{name}); of its options, these are nowhere in the doc: {', '.join(nowhere) or 'none'}")
    assert missing == [], (f"python -m s2s.{name}: options missing from its section of docs/command-line.md: "
                           f"{', '.join(missing)}")


def test_every_command_found_has_a_section():
    """A command added to s2s/ later gets the same check as those listed above."""
    found = parsers()
    problems = {}
    for name in sorted(set(found) - EXPECTED):
        missing = undocumented(name, found[name].get("options", []))
        if missing is None or missing:
            problems[name] = "no section" if missing is None else missing
    assert problems == {}, f"commands not (fully) documented in docs/command-line.md: {problems}"


def test_every_bench_key_is_in_the_bench_section():
    keys = bench_keys()
    assert {"greedy_ms_p50", "beam5_ms_p50", "load_s", "peak_rss_mb"} <= keys, "the key reader lost its way"
    body = section("bench")
    where = "its section of docs/command-line.md"
    if body is None:
        body, where = prose(DOC.read_text(encoding="utf-8")), "docs/command-line.md (which has no s2s.bench section)"
    missing = sorted(k for k in keys if f"`{k}`" not in body)
    assert section("bench") is not None and missing == [], (
        f"python -m s2s.bench --json: keys missing from {where}: {', '.join(missing) or 'none'}")


# ------------------------------------------------------------------ the checkers themselves
def test_the_checkers_find_what_is_missing():
    doc = ("# Commands\n\n## `s2s.train`\n\n`--steps N`, and `--max-len` (not the option below).\n\n"
           "    python -m s2s.train --lr 1\n\n## `s2s.train_charlm`\n\n`--lr`\n")
    assert undocumented("train", ["--steps", "--max", "--lr", "--help"], doc) == ["--max", "--lr"]
    assert undocumented("train_charlm", ["--lr"], doc) == []
    assert undocumented("translate", ["--lr"], doc) is None
    source = ('def f():\n    return {"a": 1}\n\ndef g():\n    r = {"b": 1}\n    r["c"] = 2\n'
              '    def inner():\n        return 3\n    return r\n\n'
              'def main():\n    out = {"d": 1}\n    out["e"], out["f"] = 1, 2\n    out.update(f())\n'
              '    out.update(g())\n    x = {"not": 1}\n    return out\n')
    assert bench_keys(source) == set("abcdef")
    with pytest.raises(AssertionError, match="cannot follow"):
        bench_keys('def main():\n    out = {}\n    out.update(h)\n')
