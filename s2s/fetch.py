"""Before class: download the Hugging Face models a server will offer, and check each one; with
--neighbours, build the neighbours index of every model the server offers too.

    python -m s2s.fetch                       # every model in $S2S_HUB_MODELS
    python -m s2s.fetch hf:Helsinki-NLP/opus-mt-en-fr [--json]
    python -m s2s.fetch --neighbours [--corpus PAIRS.tsv]     # and every offered model's neighbours index

Run it where the Hugging Face hub is reachable, with the HF_HOME the server will use: each
model goes into huggingface-hub's cache and is loaded and made to translate "Hello." as the
app will load it. The classroom server then needs nothing from the network (start it with
HF_HUB_OFFLINE=1, and a model missing from the cache says so instead of downloading).
With --neighbours each shipped translation model's neighbours index (and each hub model's, from
--corpus) is built where the server will look for it (s2s.neighbours.index_dir: run it with the
server's S2S_NEIGHBOURS_DIR or HOME), unless one is there for the same weights already: no
student waits for a build on the Neighbours tab. docs/teaching.md has the rest of a class's set-up.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .checkpoint import CheckpointError, list_checkpoints, load_translator
from .decode import greedy
from .hub import ENV_MODELS, HubError, load_hub, offered_models
from .text import InputError


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


def shipped_translation_models() -> list[str]:
    """The usable translation checkpoints the server offers (checkpoints/, or $S2S_CHECKPOINTS), by path."""
    return [str(c.path) for c in list_checkpoints() if c.kind == "translation" and c.error is None]


def neighbour_indexes(specs: list[str], corpus: str | Path | None = None) -> list[dict]:
    """Build the neighbours index of every model of `specs` (a checkpoint folder, or a hub model
    given `corpus`, its English<TAB>French pairs) that has none for its weights where the server
    looks (s2s.neighbours.index_dir). One row per model: `status` "built", "ready" (one was there
    already, kept), "skipped" (a hub model and no corpus: its tab says the operator builds it) or
    "failed" (with `error`); where there is an index, its folder, pairs, states, MB and seconds."""
    from .neighbours import INDEX_JSON, INDEX_TENSORS, IndexNotReady, build_index, load_index
    rows = []
    for spec in specs:
        t = time.perf_counter()
        row: dict = {"model": spec}
        try:
            tr = load_translator(spec)
            hub = tr.config.get("hub") is not None
            try:
                index, row["status"] = load_index(tr), "ready"
            except IndexNotReady:
                if hub and corpus is None:
                    rows.append({**row, "status": "skipped", "error": "a Hugging Face model's index needs a corpus "
                                 "(--corpus PAIRS.tsv): its training data is not ours"})
                    continue
                index, row["status"] = build_index(tr, corpus if hub else None, progress_bar=True), "built"
            row.update({"index": str(index.where), "pairs": index.n_pairs, "states": index.n_states,
                        "mb": round(sum((index.where / f).stat().st_size for f in (INDEX_TENSORS, INDEX_JSON)) / 1e6,
                                    1)})
        except (CheckpointError, InputError, HubError) as e:
            row.update({"status": "failed", "error": str(e)})
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
    p.add_argument("--neighbours", action="store_true",
                   help="also build the neighbours index of every shipped translation model, and of each hub model "
                        "given --corpus, where the server will read it (a current one is kept)")
    p.add_argument("--corpus", metavar="PAIRS.tsv",
                   help="with --neighbours: the English<TAB>French pairs the hub models' indexes are built from (the "
                        "shipped models are indexed on their own training sample)")
    p.add_argument("--json", action="store_true", help="one JSON object: a row per model")
    a = p.parse_args(argv)
    specs = a.models or offered_models()
    if a.corpus and not a.neighbours:
        p.error("--corpus is for --neighbours")
    if not specs and not a.neighbours:
        p.error(f"no model named, and ${ENV_MODELS} lists none")
    rows = fetch(specs)
    ready = [r["model"] for r in rows if r["ok"]]
    indexes = neighbour_indexes(shipped_translation_models() + ready, a.corpus) if a.neighbours else []
    if a.json:
        print(json.dumps({"models": rows, **({"neighbours": indexes} if a.neighbours else {})}))
    else:
        for r in rows:
            print(f"{'ok ' if r['ok'] else 'FAILED'} {r['model']} ({r['seconds']} s): "
                  + (f"{r['description']}; \"Hello.\" -> {r['translation']!r}" if r["ok"] else r["error"]))
        for r in indexes:
            done = r["status"] in ("built", "ready")
            print(f"{'ok ' if done else r['status'].upper()} {r['model']} ({r['seconds']} s): "
                  + (f"neighbours index {r['status']}, {r['pairs']:,} pairs, {r['states']:,} states, {r['mb']} MB, "
                     f"in {r['index']}" if done else r["error"]))
    return 0 if all(r["ok"] for r in rows) and all(r["status"] != "failed" for r in indexes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
