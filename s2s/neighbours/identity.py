"""Where a neighbours index lives and whose it is: the cache folder, and what an index records
of its model (the SHA-256 of its weights file, or of its config where there is no single file),
so that an index of another model is refused, never searched."""
from __future__ import annotations

import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path

from ..loaded import Translator

ROOT = Path(__file__).resolve().parent.parent.parent


def cache_root() -> Path:
    """Where indexes are kept: $S2S_NEIGHBOURS_DIR, else $XDG_CACHE_HOME/s2s-neighbours, else
    ~/.cache/s2s-neighbours. Not in checkpoints/: the six shipped models' indexes take 33 MB each
    (docs/neighbours.md), 199 MB in all, so each is built before class (python -m s2s.fetch
    --neighbours) or on first use."""
    if os.environ.get("S2S_NEIGHBOURS_DIR"):
        return Path(os.environ["S2S_NEIGHBOURS_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "s2s-neighbours"


def index_dir(tr: Translator, root: str | Path | None = None) -> Path:
    """The folder of `tr`'s index: root / its name (a hub name's "/" made "_")."""
    return Path(root if root is not None else cache_root()) / re.sub(r"[^A-Za-z0-9._-]+", "_", tr.name)


@lru_cache(maxsize=64)
def file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file, remembered for as long as its size and time stamp stay (a page searching
    again does not hash 15 MB again)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def weights_file(tr: Translator) -> Path | None:
    """The one file `tr`'s weights were read from, where there is one: a shipped checkpoint's
    model.safetensors, a save_pretrained folder's, a hub model's in huggingface-hub's cache."""
    hub = tr.config.get("hub")
    if hub is None or not str(hub).startswith("hf:"):
        folder = Path(hub) if hub is not None else Path(tr.path)
        for name in ("model.safetensors", "pytorch_model.bin"):
            if (folder / name).is_file():
                return folder / name
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
        for name in ("model.safetensors", "pytorch_model.bin"):
            found = try_to_load_from_cache(str(hub)[3:], name)
            if isinstance(found, str) and Path(found).is_file():
                return Path(found)
    except (ImportError, ValueError):
        pass
    return None


def model_identity(tr: Translator) -> dict:
    """What an index records of its model: {"name", "path", "weights_sha256"} (the weights file's
    hash), or {"name", "path", "config_sha256"} where there is no single weights file. Two loads of
    the same weights are the same model, wherever the folder is; a retrained one is another."""
    f = weights_file(tr)
    out = {"name": tr.name, "path": str(tr.path)}
    if f is not None:
        st = f.stat()
        out["weights_sha256"] = file_sha256(str(f.resolve()), st.st_size, st.st_mtime_ns)
    else:
        out["config_sha256"] = hashlib.sha256(json.dumps(tr.config, sort_keys=True, default=str).encode()).hexdigest()
    return out


def same_model(recorded: dict, current: dict) -> bool:
    key = "weights_sha256" if "weights_sha256" in current else "config_sha256"
    return recorded.get(key) is not None and recorded.get(key) == current.get(key)


def build_command(tr: Translator) -> str:
    """The command that builds `tr`'s index (named in every IndexNotReady)."""
    hub = tr.config.get("hub")
    spec = hub if hub is not None else (tr.name if Path(tr.path).parent == ROOT / "checkpoints" else str(tr.path))
    return f"python -m s2s.neighbours build --model {spec}" + (" --corpus PAIRS.tsv" if hub is not None else "")
