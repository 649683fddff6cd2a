"""What the registry and the pages read of a Hugging Face model, from its config alone (no
weights, no torch): HubConfig, describe_config that fills it, what fits its positions
(beyond_positions) and how many parameters it has (count_parameters). The loader (hub.py), the
adapter (hub_model.py) and the commands that force pairs through a model read it, so it lives in
none of them.
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
    max_new_tokens: int = 0     # the model's own output cap (its generation config's max_new_tokens, or max_length
                                # less the start token): every search stops there (s2s.decode.length_limit); 0: none
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


def own_output_cap(generation_config) -> int:
    """The most pieces a model's folder says it writes: its generation config's max_new_tokens,
    else its max_length less one (an encoder-decoder's max_length counts the decoder's start
    token); 0 where it says neither (transformers 5 leaves both None unless the folder sets them)."""
    new = getattr(generation_config, "max_new_tokens", None)
    if isinstance(new, int) and new > 0:
        return new
    total = getattr(generation_config, "max_length", None)
    return total - 1 if isinstance(total, int) and total > 1 else 0


def beyond_positions(max_positions: int, source: int, target: int) -> str | None:
    """Why a forced pair of `source` and `target` piece ids does not fit a model with
    `max_positions` positions ("the target is 140 pieces long"), or None where it fits (or the
    model has no limit: 0). The encoder reads one position per source piece and the decoder one
    per target piece (its start token, then every piece but the last), so each side may be as
    long as the model's positions; one more and the position embedding's lookup fails
    (IndexError: index out of range in self)."""
    if max_positions <= 0:
        return None
    if source > max_positions:
        return f"the source is {source} pieces long"
    if target > max_positions:
        return f"the target is {target} pieces long"
    return None


# Model types whose position table is computed (sin and cos of the position), not learned:
# transformers makes it again at load time, and newer versions do not save it
SINUSOIDAL_POSITIONS = ("marian", "pegasus")


def count_parameters(tensors, model_type: str) -> int:
    """How many numbers the model learned, from (name, shape) pairs: a weights file's header
    (the registry, which reads no weights) or a loaded model's state dict (the loader), one pair
    per stored tensor, so that tied embeddings (T5's, Marian's shared input and output) count
    once. Both places call this, so the sidebar and `python -m s2s.fetch` say one number.

    Counted: every weight and bias, Marian's final_logits_bias among them: transformers keeps it
    as a buffer, not a parameter, but it is the output bias Marian trained, and it is in every
    weights file. Not counted: a sinusoidal position table (Marian's embed_positions), which is
    a function of the position, not learned; a Parameter in transformers (hence 0.5 M more in
    `sum(p.numel() for p in model.parameters())` for opus-mt-en-fr's 512 x 512 x 2), it is
    absent from a file saved by transformers 5 and present in one saved by older versions, so
    counting it would make one model's size depend on when it was saved."""
    skip = model_type in SINUSOIDAL_POSITIONS
    total = 0
    for name, shape in tensors:
        if skip and name.endswith("embed_positions.weight"):
            continue
        n = 1
        for d in shape:
            n *= int(d)
        total += n
    return total


def parameters_text(n: int) -> str:
    """A model's size for a line of text: "74.7 M parameters" from 100,000 on, else the exact
    count ("9,536 parameters"), so that a tiny model is never "0.0 M"."""
    return f"{n / 1e6:,.1f} M parameters" if n >= 1e5 else f"{n:,} parameters"
