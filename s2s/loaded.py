"""What a loaded model is: a translation model with its tokenizer (Translator), a character
model (LanguageModel), the device models go to, and the error a bad checkpoint raises.

Imports nothing else of s2s (only for type hints): the shipped loader (checkpoint.py) and the
Hugging Face one (hub.py) both return these, so neither has to import the other for them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:       # torch and the models are imported where a model is loaded
    import torch

    from .charlm import CharLM
    from .model import Seq2Seq
    from .tokenizer import Tokenizer
    from .transformer import Transformer


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, corrupt or inconsistent (the message names it)."""


def default_device() -> torch.device:
    import torch
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass
class Translator:
    """A loaded translation checkpoint: model, tokenizer and its metadata."""
    name: str
    path: Path
    model: Seq2Seq | Transformer
    tokenizer: Tokenizer
    config: dict
    metrics: dict = field(default_factory=dict)
    # the English words of its training pairs, {word: count} (train_words.json; {} if not shipped)
    train_words: dict = field(default_factory=dict)
    train_pairs: int = 0

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def description(self) -> str:
        return self.config.get("description", "")

    @property
    def arch(self) -> str:
        """"rnn" (a recurrent encoder-decoder, model.py) or "transformer" (transformer.py)."""
        return getattr(self.model.cfg, "arch", "rnn")


@dataclass
class LanguageModel:
    """A loaded character-level language model checkpoint."""
    name: str
    path: Path
    model: CharLM
    config: dict
    metrics: dict = field(default_factory=dict)

    @property
    def description(self) -> str:
        return self.config.get("description", "")
