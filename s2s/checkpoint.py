"""Checkpoints: the one loader and saver, and a registry of what `checkpoints/` holds.

A checkpoint is a folder:
    config.json         {"name", "kind", "description", "model": {...config}}
    model.safetensors   fp16 weights (safetensors never executes code, unlike pickle)
    spm.model           the sentencepiece tokenizer (translation models; a character
                        model's vocabulary is the `chars` string in its config)
    metrics.json        test scores, loss curves, training trace (optional)
    train_words.json    the English words of its training pairs and their counts (optional)
kind is "translation" (model.py, or transformer.py when the model's "arch" is
"transformer") or "charlm" (charlm.py).
Weights are stored in fp16 to halve the size and loaded in fp32 (fp16 matmuls are slow
on CPUs). Models go to CUDA when present, else the CPU.

Reading the registry imports no torch (the models are imported when one is loaded): the app's
first page lists the checkpoints while torch is still being imported in the background.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors import SafetensorError

from .loaded import CheckpointError, LanguageModel, Translator, default_device  # noqa: F401  (re-exported)

if TYPE_CHECKING:       # torch and the models are imported where a model is loaded or saved
    import torch
    from torch import nn

    from .charlm import CharLM
    from .model import Seq2Seq
    from .transformer import Transformer

ROOT = Path(__file__).resolve().parent.parent / "checkpoints"


def checkpoint_root() -> Path:
    """The folder of shipped checkpoints; the S2S_CHECKPOINTS environment variable overrides it."""
    return Path(os.environ.get("S2S_CHECKPOINTS") or ROOT)


# A translation model's architecture, from its config's "arch" (configs saved before there was a choice are "rnn").
ARCHS = ("rnn", "transformer")


def arch_classes(arch: str) -> tuple[type, type]:
    """(config class, model class) of a translation model's architecture."""
    if arch == "transformer":
        from .transformer import Transformer, TransformerConfig
        return TransformerConfig, Transformer
    from .model import ModelConfig, Seq2Seq
    return ModelConfig, Seq2Seq


def save_checkpoint(model: Seq2Seq | Transformer | CharLM, tokenizer_file: str | Path | None, out_dir: str | Path,
                    name: str, description: str, metrics: dict | None = None) -> Path:
    import torch
    from safetensors.torch import save_file

    from .charlm import CharLM
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()}
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    kind = "charlm" if isinstance(model, CharLM) else "translation"
    config = {"name": name, "kind": kind, "description": description, "model": model.cfg.to_dict()}
    (out / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if tokenizer_file is not None:
        (out / "spm.model").write_bytes(Path(tokenizer_file).read_bytes())
    if metrics is not None:
        (out / "metrics.json").write_text(json.dumps(metrics) + "\n")
    return out


def read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{what}: {path.name} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{what}: {path.name} is not valid JSON ({e})") from None


def load_translator(path: str | Path, device: torch.device | str | None = None, **hub_options) -> Translator:
    """Load a translation model, or raise CheckpointError naming it. `path` is any of:
        a shipped checkpoint folder (checkpoints/en-fr-additive) or its name (en-fr-additive)
        a folder written by a Hugging Face model's save_pretrained (with its tokenizer)
        hf:NAME, a Hugging Face hub model (downloaded once into huggingface-hub's cache)
    `hub_options` (source_lang, target_lang, prefix) go to hub.load_hub."""
    from . import hub
    if hub.is_hub_spec(path) or hub.is_pretrained_folder(path):
        try:
            return hub.load_hub(path, device, **hub_options)
        except hub.HubError as e:
            raise CheckpointError(str(e)) from None
    if hub_options and any(v is not None for v in hub_options.values()):
        raise CheckpointError(f"{Path(path).name}: language and prefix options are for Hugging Face models only")
    from .tokenizer import Tokenizer
    path = Path(path)
    if not path.exists() and len(path.parts) == 1 and (checkpoint_root() / path).is_dir():
        path = checkpoint_root() / path         # a shipped model by its name
    what, config, cfg = _read_config(path, "translation")
    if not (path / "spm.model").is_file():
        raise CheckpointError(f"{what}: tokenizer spm.model is missing")
    try:
        tokenizer = Tokenizer(path / "spm.model")
    except (RuntimeError, OSError) as e:
        raise CheckpointError(f"{what}: tokenizer spm.model cannot be read ({e})") from None
    if len(tokenizer) != cfg.vocab_size:
        raise CheckpointError(f"{what}: tokenizer has {len(tokenizer)} pieces but the model expects {cfg.vocab_size}")
    model = _load_weights(path, arch_classes(getattr(cfg, "arch", "rnn"))[1](cfg), what, device)
    metrics = read_json(path / "metrics.json", what) if (path / "metrics.json").is_file() else {}
    words = read_json(path / "train_words.json", what) if (path / "train_words.json").is_file() else {}
    return Translator(config.get("name", path.name), path, model, tokenizer, config, metrics,
                      words.get("words", {}), words.get("pairs", 0))


def load_charlm(path: str | Path, device: torch.device | str | None = None) -> LanguageModel:
    """Load a character-level language model folder, or raise CheckpointError naming it."""
    from .charlm import CharLM, CharLMConfig
    path = Path(path)
    what, config, cfg = _read_config(path, "charlm", CharLMConfig)
    model = _load_weights(path, CharLM(cfg), what, device)
    metrics = read_json(path / "metrics.json", what) if (path / "metrics.json").is_file() else {}
    return LanguageModel(config.get("name", path.name), path, model, config, metrics)


CHECKPOINT_KINDS = {"translation": "a translation model", "charlm": "a character-level language model"}


def _read_config(path: Path, kind: str, config_cls=None):
    """(what, config.json, model config) of a checkpoint folder of the given kind; a
    translation model's config class follows its "arch"."""
    what = f"checkpoint {path.name!r}"
    if not path.is_dir():
        raise CheckpointError(f"{what}: folder {path} does not exist")
    config = read_json(path / "config.json", what)
    if config.get("kind", "translation") != kind:
        raise CheckpointError(f"{what}: not {CHECKPOINT_KINDS[kind]} (kind {config.get('kind')!r})")
    try:
        if config_cls is None:
            arch = config["model"].get("arch", "rnn")
            if arch not in ARCHS:
                raise ValueError(f"unknown arch {arch!r}; known: {', '.join(ARCHS)}")
            config_cls = arch_classes(arch)[0]
        return what, config, config_cls.from_dict(config["model"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{what}: config.json does not describe a model ({e})") from None


def _load_weights(path: Path, model: nn.Module, what: str, device) -> nn.Module:
    """Fill `model` from path/model.safetensors (fp16 on disk, fp32 in memory), checking
    that every tensor is there with the shape the config implies."""
    from safetensors.torch import load_file

    from .charlm import CharLM
    if not (path / "model.safetensors").is_file():
        raise CheckpointError(f"{what}: model.safetensors is missing")
    try:
        weights = load_file(str(path / "model.safetensors"))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{what}: model.safetensors is corrupt or truncated ({e})") from None
    if isinstance(model, CharLM):
        weights = CharLM.renamed(weights)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    wrong = [k for k in expected if k in weights and weights[k].shape != expected[k].shape]
    if missing or unexpected or wrong:
        raise CheckpointError(f"{what}: weights do not match config.json "
                              f"(missing {missing[:3]}, unexpected {unexpected[:3]}, wrong shape {wrong[:3]})")
    model.load_state_dict({k: v.float() for k, v in weights.items()})
    return model.to(device or default_device()).eval()


@dataclass(frozen=True)
class CheckpointInfo:
    """One row of the registry: enough to list a model without loading its weights.
    Frozen: the app shares one registry between all sessions."""
    name: str
    path: Path
    kind: str
    description: str
    metrics: dict
    error: str | None = None
    model: dict = field(default_factory=dict)     # config.json's "model": cell, attention, sizes

    @property
    def arch(self) -> str | None:
        """A translation model's architecture: "rnn" (recurrent, model.py) or "transformer"; None otherwise."""
        return self.model.get("arch", "rnn") if self.kind == "translation" else None

    @property
    def cell(self) -> str | None:
        """The recurrent cell ("lstm", "gru" or "rnn"); models saved before it was configurable are
        LSTMs; None for a Transformer."""
        return None if self.arch == "transformer" else self.model.get("cell", "lstm")

    @property
    def attention(self) -> str | None:
        """A translation model's attention function ("none" for the fixed-vector model); None otherwise."""
        return self.model.get("attention") if self.kind == "translation" else None

    @property
    def family(self) -> str | None:
        """What a translation model is, in one word, for its colour and legend: "transformer",
        or a recurrent model's attention function ("none" for the fixed-vector model)."""
        return "transformer" if self.arch == "transformer" else self.attention

    @property
    def is_hub(self) -> bool:
        """A Hugging Face model (hf:NAME or a save_pretrained folder), not one of checkpoints/."""
        return bool(self.model.get("hub"))

    @property
    def has_attention(self) -> bool:
        """A usable translation model with attention (something to align and explain)."""
        return self.error is None and self.attention not in (None, "none")


def hub_checkpoints(specs: list[str]) -> list[CheckpointInfo]:
    """Registry rows for hub models (hf:NAME or save_pretrained folders), named by their spec,
    read from their configs without loading weights (hub.registry_row); a bad one carries `error`."""
    from . import hub
    rows = []
    for spec in specs:
        try:
            description, model = hub.registry_row(spec)
            rows.append(CheckpointInfo(spec, Path(spec), "translation", description, {}, model=model))
        except hub.HubError as e:
            rows.append(CheckpointInfo(spec, Path(spec), "translation", "", {}, error=str(e)))
        except (OSError, ValueError) as e:     # huggingface-hub refusing a name: one bad entry, never the page
            rows.append(CheckpointInfo(spec, Path(spec), "translation", "", {}, error=f"{spec}: {e}"))
    return rows


def attention_checkpoints(root: str | Path | None = None) -> list[CheckpointInfo]:
    """The usable translation checkpoints with attention under `root`, sorted by name."""
    return [i for i in list_checkpoints(root) if i.has_attention]


def list_checkpoints(root: str | Path | None = None) -> list[CheckpointInfo]:
    """Every checkpoint folder under `root`, sorted by name; broken ones carry `error`."""
    rows = []
    root = Path(root) if root is not None else checkpoint_root()
    for d in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        try:
            config = read_json(d / "config.json", f"checkpoint {d.name!r}")
            metrics = read_json(d / "metrics.json", d.name) if (d / "metrics.json").is_file() else {}
            rows.append(CheckpointInfo(d.name, d, config.get("kind", "translation"),
                                       config.get("description", ""), metrics, model=config.get("model") or {}))
        except CheckpointError as e:
            rows.append(CheckpointInfo(d.name, d, "unknown", "", {}, error=str(e)))
    return rows
