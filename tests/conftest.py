"""Shared fixtures: tiny data generated here and tiny models trained on it.

Nothing here needs ../shared: the reversal task ("c a f" -> "f a c") is generated, and a
tiny model learns it through the real `python -m s2s.train` entry point in seconds.
"""
from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

# No test reaches the network: huggingface-hub reads this once, when first imported, and then
# answers from its local cache only (a hub name that is not cached fails at once).
os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))     # tests/hub_models.py
# OMP_NUM_THREADS=1 keeps tests from fighting a training run for the cores (OpenMP spins); the
# suite's workers (pytest-xdist, PYTEST_XDIST_WORKER_COUNT) share the cores between them
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or max(1, min(2, (os.cpu_count() or 1) // WORKERS))))

from s2s import train as train_cli  # noqa: E402
from s2s.checkpoint import load_translator, save_checkpoint  # noqa: E402
from s2s.model import ModelConfig, Seq2Seq  # noqa: E402
from s2s.tokenizer import train_tokenizer  # noqa: E402
from s2s.transformer import Transformer, TransformerConfig  # noqa: E402

LETTERS = "abcdefghij"


def reversal_pairs(n: int, seed: int = 0, lo: int = 3, hi: int = 7) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(LETTERS) for _ in range(rng.randint(lo, hi))]
        pairs.append((" ".join(words), " ".join(reversed(words))))
    return pairs


def write_tsv(pairs, path: Path) -> Path:
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def reversal_tsv(tmp_path_factory) -> Path:
    return write_tsv(reversal_pairs(6000), tmp_path_factory.mktemp("data") / "reversal.tsv")


def train_tiny(tsv: Path, root: Path, attention: str, steps: int, extra: tuple[str, ...] = (),
               name: str | None = None) -> Path:
    name = name or attention
    out = root / f"tiny-{name}"
    rc = train_cli.main([
        "--data", str(tsv), "--out", str(out), "--split-dir", str(root / "split"), "--work", str(root / f"work-{name}"),
        "--attention", attention, "--vocab", "40", "--emb", "32", "--hidden", "64", "--dropout", "0.0",
        "--label-smoothing", "0", "--steps", str(steps), "--max-tokens", "600", "--lr", "0.01", "--warmup", "20",
        "--eval-every", "50", "--trace-points", "4", "--valid-pairs", "100", "--test-pairs", "100",
        "--long-fraction", "0", "--test-beam", "2", "--description", f"tiny reversal model ({attention})", *extra])
    assert rc == 0
    return out


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ckpt")


@pytest.fixture(scope="session")
def tiny_additive(reversal_tsv, tiny_root) -> Path:
    """A checkpoint folder of a tiny additive-attention model trained to reverse letters."""
    return train_tiny(reversal_tsv, tiny_root, "additive", 300)


@pytest.fixture(scope="session")
def tiny_transformer(reversal_tsv, tiny_root) -> Path:
    """A tiny Transformer (2 + 2 layers, d = 64, 4 heads) trained on the same reversal task."""
    return train_tiny(reversal_tsv, tiny_root, "scaled-dot", 300,
                      ("--arch", "transformer", "--hidden", "64", "--layers", "2", "--heads", "4", "--ffn", "128",
                       "--lr", "0.005", "--warmup", "30", "--description", "tiny reversal Transformer"),
                      name="transformer")


@pytest.fixture(scope="session")
def tiny_none(reversal_tsv, tiny_root) -> Path:
    """The same without attention (trained briefly: its tests only need a working checkpoint)."""
    return train_tiny(reversal_tsv, tiny_root, "none", 20)


@pytest.fixture(scope="session")
def untrained_translators(tmp_path_factory):
    """One untrained checkpoint per attention function, sharing a tiny tokenizer."""
    root = tmp_path_factory.mktemp("untrained")
    pairs = reversal_pairs(500, seed=1)
    spm_file = root / "spm.model"
    vocab = len(train_tokenizer([s for s, _ in pairs] + [t for _, t in pairs], spm_file, vocab_size=40))
    out = {}
    for i, att in enumerate(["none", "dot", "general", "additive", "scaled-dot"]):
        torch.manual_seed(i)
        model = Seq2Seq(ModelConfig(vocab_size=vocab, emb_dim=16, hidden=24, attn_dim=20,
                                    attention=att, dropout=0.0))
        path = save_checkpoint(model, spm_file, root / att, att, f"untrained {att}")
        out[att] = load_translator(path)
    # "copy": additive attention with the pointer-generator (its gate at random: both paths matter)
    torch.manual_seed(9)
    model = Seq2Seq(ModelConfig(vocab_size=vocab, emb_dim=16, hidden=24, attn_dim=20, attention="additive",
                                dropout=0.0, copy=True))
    torch.nn.init.normal_(model.next_piece.weight, std=0.5)      # its location cue on, too
    out["copy"] = load_translator(save_checkpoint(model, spm_file, root / "copy", "copy", "untrained copy"))
    # Transformers, with and without the pointer (2 + 2 layers, 4 heads of 4 dimensions)
    for i, copy in enumerate([False, True]):
        torch.manual_seed(20 + i)
        model = Transformer(TransformerConfig(vocab_size=vocab, d_model=16, heads=4, encoder_layers=2,
                                              decoder_layers=2, ffn=32, dropout=0.0, copy=copy))
        if copy:
            torch.nn.init.normal_(model.copy_gate.weight, std=0.5)
        name = "transformer-copy" if copy else "transformer"
        out[name] = load_translator(save_checkpoint(model, spm_file, root / name, name, f"untrained {name}"))
    return out



def code_like_text(n_blocks: int, seed: int = 0) -> str:
    """Generated C-like text with nested braces, indentation, quotes and comments: the
    features the Cell States page looks for, in a corpus small enough to train on in seconds."""
    rng = random.Random(seed)
    out = []
    for b in range(n_blocks):
        out.append(f"#include <linux/b{b % 7}.h>\n/* block {b} */\nint f{b}(int x) {{\n")
        for _ in range(rng.randint(1, 3)):
            out.append("\tif (x > %d) {\n\t\tprintk(\"%s\");\n\t}\n"
                       % (rng.randint(0, 9), rng.choice(["ok", "a b", "no"])))
        out.append("\treturn x;\n}\n\n")
    return "".join(out)


@pytest.fixture(scope="session")
def code_text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("chars") / "linux-kernel" / "input.txt"   # named like the real corpus
    path.parent.mkdir()
    path.write_text(code_like_text(400), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_charlm(code_text_file, tiny_root) -> Path:
    """A tiny 2-layer character LSTM trained through the real `python -m s2s.train_charlm`."""
    from s2s import train_charlm
    out = tiny_root / "charlm-tiny"
    rc = train_charlm.main(["--data", str(code_text_file), "--out", str(out), "--work", str(tiny_root / "work-charlm"),
                            "--hidden", "32", "--layers", "2", "--emb-dim", "16", "--batch", "16", "--seq", "64",
                            "--steps", "150", "--eval-every", "50", "--lr", "0.01", "--warmup", "10",
                            "--description", "tiny character model of generated C"])
    assert rc == 0
    return out


def app_page(path: str | None = None):
    """An AppTest of the whole app (navigation included), switched to page `path` if given."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    if path:
        at.switch_page(path)
        at.run()
    return at


def away_and_back(at, away: str, back: str, clear_query: bool = True):
    """Switch the app to page `away`, then back to page `back`, as a reader does in the sidebar
    (whose links carry no query string: `clear_query` drops what the AppTest kept, as the
    browser does; each page writes its own choices into the address)."""
    at.switch_page(away)
    at.run()
    if clear_query:
        for key in list(at.query_params):
            del at.query_params[key]
    at.switch_page(back)
    return at.run()


@pytest.fixture(scope="session")
def charlm_trio(code_text_file, tiny_root, tiny_charlm) -> dict[str, Path]:
    """The tiny LSTM and the same model with a GRU and an Elman RNN cell, trained identically
    through `python -m s2s.train_charlm --cell` (as the shipped War and Peace trio)."""
    from s2s import train_charlm
    out = {"lstm": tiny_charlm}
    for cell in ("gru", "rnn"):
        out[cell] = tiny_root / f"charlm-tiny-{cell}"
        rc = train_charlm.main(["--data", str(code_text_file), "--out", str(out[cell]), "--cell", cell,
                                "--work", str(tiny_root / f"work-charlm-{cell}"), "--hidden", "32", "--layers", "2",
                                "--emb-dim", "16", "--batch", "16", "--seq", "64", "--steps", "150",
                                "--eval-every", "50", "--lr", "0.01", "--warmup", "10",
                                "--description", f"tiny character {cell} of generated C"])
        assert rc == 0
    return out


@pytest.fixture
def trio_env(tmp_path, charlm_trio, monkeypatch):
    """A checkpoints folder (S2S_CHECKPOINTS) holding the tiny RNN, GRU and LSTM."""
    for cell, path in charlm_trio.items():
        shutil.copytree(path, tmp_path / f"charlm-tiny-{cell}")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="session")
def transformer_zoo(tmp_path_factory, tiny_additive, tiny_none, tiny_transformer, untrained_translators) -> Path:
    """A checkpoints folder (S2S_CHECKPOINTS) with the five shipped recurrent names
    (five_translators) and en-fr-transformer, the tiny Transformer: the Translate page runs on it
    as on the real zoo, a Transformer's views included. Read only: tests that change a
    checkpoint make their own folder."""
    root = tmp_path_factory.mktemp("transformer_zoo")
    five_translators(root, tiny_additive, tiny_none, untrained_translators)
    shutil.copytree(tiny_transformer, root / "en-fr-transformer")
    return root


@pytest.fixture
def zoo_page(transformer_zoo, monkeypatch):
    """The app's Translate page on transformer_zoo (S2S_CHECKPOINTS set for this test), opened at
    /translate?query as `zoo_page(**query)`; each run may take 180 s (a busy machine beside it)."""
    import functools

    from test_app import translate_page
    monkeypatch.setenv("S2S_CHECKPOINTS", str(transformer_zoo))
    return functools.partial(translate_page, 180)


def five_translators(root: Path, tiny_additive: Path, tiny_none: Path, untrained: dict) -> Path:
    """A checkpoints folder with the five shipped names: the tiny trained additive and none
    models, untrained dot, general and scaled-dot ones. Pages then run as on the real zoo."""
    shutil.copytree(tiny_additive, root / "en-fr-additive")
    shutil.copytree(tiny_none, root / "en-fr-none")
    for att in ("dot", "general", "scaled-dot"):
        shutil.copytree(untrained[att].path, root / f"en-fr-{att}")
    return root



@pytest.fixture(scope="session")
def hub_models(tmp_path_factory) -> dict[str, Path]:
    """Tiny randomly initialised Hugging Face models (Marian, T5, M2M100), each written with
    save_pretrained into its own folder with a tokenizer trained on the fly (tests/hub_models.py)."""
    import hub_models as builders
    root = tmp_path_factory.mktemp("hub")
    return {name: build(root / name) for name, build in builders.BUILDERS.items()}


@pytest.fixture
def downloads(monkeypatch):
    """What the page offers for download, by file name (AppTest keeps the bytes in its own store)."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
    got = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        if filename:
            got[filename] = path_or_data.decode() if isinstance(path_or_data, bytes) else path_or_data
        return original(self, path_or_data, mimetype, kind, filename)
    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    return got
