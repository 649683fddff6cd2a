"""Before class: download the Hugging Face models a server will offer, and check each one.

    python -m s2s.fetch                       # every model in $S2S_HUB_MODELS
    python -m s2s.fetch hf:Helsinki-NLP/opus-mt-en-fr [--json]

Run it where the Hugging Face hub is reachable, with the HF_HOME the server will use: each
model goes into huggingface-hub's cache and is loaded and made to translate "Hello." as the
app will load it. The classroom server then needs nothing from the network (start it with
HF_HUB_OFFLINE=1, and a model missing from the cache says so instead of downloading).
docs/teaching.md has the rest of a class's set-up.
"""
from __future__ import annotations

import argparse
import json
import time

from .decode import greedy
from .hub import ENV_MODELS, HubError, load_hub, offered_models


def fetch(specs: list[str]) -> list[dict]:
    """Download every model of `specs` into huggingface-hub's cache (a folder is only read) and
    check that it loads and translates a word, as the app will: one row per model, with `ok`,
    the seconds it took and, when it failed, the one-line reason. Run where the hub is
    reachable, before class; the server then needs nothing from the network (HF_HUB_OFFLINE=1)."""
    rows = []
    for spec in specs:
        t = time.perf_counter()
        row = {"model": spec, "ok": False}
        try:
            tr = load_hub(spec)
            row["translation"] = greedy(tr, "Hello.", max_len=20).translation
            row["ok"], row["description"] = True, tr.config["description"]
        except HubError as e:
            row["error"] = str(e)
        row["seconds"] = round(time.perf_counter() - t, 1)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m s2s.fetch",
        description="Before class: download the Hugging Face models a server will offer into the local cache "
                    "and check that each loads and translates.")
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="hf:NAME or a save_pretrained folder (default: every model in $S2S_HUB_MODELS)")
    p.add_argument("--json", action="store_true", help="one JSON object: a row per model")
    a = p.parse_args(argv)
    specs = a.models or offered_models()
    if not specs:
        p.error(f"no model named, and ${ENV_MODELS} lists none")
    rows = fetch(specs)
    if a.json:
        print(json.dumps({"models": rows}))
    else:
        for r in rows:
            print(f"{'ok ' if r['ok'] else 'FAILED'} {r['model']} ({r['seconds']} s): "
                  + (f"{r['description']}; \"Hello.\" -> {r['translation']!r}" if r["ok"] else r["error"]))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
