"""What the registry and the pages read of a Hugging Face model, from its config alone (no
weights, no torch): HubConfig, and describe_config that fills it. The loader (hub.py) and the
adapter (hub_model.py) both read it, so it lives in neither.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class HubConfig:
    """What the registry and the pages read of a hub model, from its config (no weights)."""
    model_type: str
    d_model: int
    heads: int                  # decoder cross-attention heads (what the Heads grid shows)
    encoder_layers: int
    decoder_layers: int
    vocab_size: int
    head_dim: int = 0           # d_k of each head (T5's d_kv; else d_model / heads)
    languages: str = ""         # "en→fr" where the model or its options say so
    max_positions: int = 0      # max_position_embeddings: the longest source or output it reads; 0: no limit (T5)
    arch: str = "transformer"   # every hub encoder-decoder is one
    attention: str = "scaled-dot"
    copy: bool = False
    hub: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


def describe_config(config) -> HubConfig:
    """A transformers config (or its config.json as a dict) -> HubConfig. Names differ by family
    (T5's num_layers, Marian's encoder_layers); a config's attribute_map gives most one name."""
    if isinstance(config, dict):
        from types import SimpleNamespace
        config = SimpleNamespace(**config)

    def first(*names, default=0):
        for n in names:
            v = getattr(config, n, None)
            if isinstance(v, int) and v > 0:
                return v
        return default

    enc = first("encoder_layers", "num_layers", "num_hidden_layers")
    d, heads = first("d_model", "hidden_size"), first("decoder_attention_heads", "num_heads", "num_attention_heads")
    return HubConfig(model_type=getattr(config, "model_type", "?"), d_model=d, heads=heads,
                     encoder_layers=enc, decoder_layers=first("decoder_layers", "num_decoder_layers", default=enc),
                     vocab_size=first("vocab_size"), head_dim=first("d_kv", "head_dim", default=d // max(heads, 1)),
                     max_positions=first("max_position_embeddings"))
