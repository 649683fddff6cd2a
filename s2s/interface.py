"""What every translation model is to the searches: the interface s2s.decode calls, written once.

Three families implement it: the recurrent encoder-decoder (model.Seq2Seq), the Transformer
(transformer.Transformer) and a Hugging Face encoder-decoder (hub_model.HubSeq2Seq). A search
never asks which one it holds; it calls these, in this order:

    memory, state = model.encode(src, src_len)        (B, S) ids -> what the decoder reads, s_0
    feed = model.initial_feed(B)                      h~_0 (recurrent: fed back each step)
    step = model.decode_step(y_{j-1}, state, feed, memory)   -> Step: logits, s_j, h~_j, alpha_j
    state = model.select_state(step.state, rows)      beam search keeps, repeats, reorders rows
    steps = model.forced_steps(tgt_in, memory, state) teacher forcing: every position's Step
    model.constraints()                               what its generation config forbids (or None)

Configs share `ConfigBase`: a dataclass read from and written to the checkpoint's JSON, keys
it does not know ignored (so older configs still load).

This module imports nothing of s2s but the attention mask helper, so every family can import it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol, TypedDict, TypeVar

import torch

from .attention import mask_bias as padding_bias

State = tuple   # (s,) or (s, c) for a recurrent model (plus alpha_{j-1} when copying); a hub model's cache

C = TypeVar("C", bound="ConfigBase")


class ConfigBase:
    """to_dict / from_dict for a config dataclass, written once for the three model families."""

    max_positions = 0       # positions the decoder has (0: no limit); a hub model's config sets it
    max_new_tokens = 0      # the model's own output cap (0: none); a hub model's generation config sets it

    @classmethod
    def from_dict(cls: type[C], d: dict) -> C:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Memory:
    """What the decoder reads of one batch of source sentences (computed once)."""
    states: torch.Tensor    # (B, S, H) encoder states h_i
    keys: torch.Tensor | None   # (B, S, Dk) scorer keys, None without attention
    mask: torch.Tensor      # (B, S) True at real positions
    summary: torch.Tensor   # (B, H) final encoder state [h_fwd_m ; h_bwd_1] (a Transformer: the mean)
    mask_bias: torch.Tensor | None = None   # (B, S) 0 at real positions, -inf at padding
    src: torch.Tensor | None = None         # (B, S) source ids, where a copying decoder points

    # (B, L_enc, H, S, S) the encoder's self-attention weights; a field of the Transformer's and
    # the hub model's Memory, None for a recurrent encoder (a class attribute here, not a field)
    self_attention = None

    def __post_init__(self):
        if self.mask_bias is None:
            self.mask_bias = padding_bias(self.mask, self.states.dtype)

    def select(self, index: torch.Tensor) -> "Memory":
        """Rows `index` of the batch (beam search repeats and reorders sentences)."""
        return Memory(self.states.index_select(0, index),
                      None if self.keys is None else self.keys.index_select(0, index),
                      self.mask.index_select(0, index), self.summary.index_select(0, index),
                      self.mask_bias.index_select(0, index),
                      None if self.src is None else self.src.index_select(0, index))


@dataclass
class Step:
    """One decoder step's outputs."""
    logits: torch.Tensor            # (B, V)
    state: State                    # new recurrent state s_j (and c for LSTM)
    feed: torch.Tensor              # h~_j, fed to the next step
    alpha: torch.Tensor | None      # (B, S) attention weights, None without attention
    context: torch.Tensor           # (B, H) c_j: what the decoder read of the source
    cross_attention: torch.Tensor | None = None   # Transformer: (B, layers, heads, S) every head's cross-attention
    self_attention: torch.Tensor | None = None    # Transformer: (B, layers, heads, j+1) decoder self-attention


class Constraints(TypedDict):
    """A hub model's generation config on which token may be chosen (decode's logits processors)."""
    forced_bos: int | None          # the first token (a target-language code)
    forced_eos: int | None          # the token at the length limit
    bad_words: list[list[int]]      # never these sequences
    suppress: list[int]             # never these tokens
    begin_suppress: list[int]       # not these as the first token


class Seq2SeqModel(Protocol):
    """The methods s2s.decode calls on a model (see the module docstring for their order)."""
    cfg: Any                        # its config; `max_positions`, `max_new_tokens` (0: none) bound a search's length
    is_lstm: bool                   # its state's second part is the LSTM cell c_j (recorded per step)

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[Memory, State]: ...

    def initial_feed(self, batch: int) -> torch.Tensor: ...

    def decode_step(self, y_prev: torch.Tensor, state: State, feed: torch.Tensor, memory: Memory) -> Step: ...

    def select_state(self, state: State, index: torch.Tensor) -> State: ...

    def forced_steps(self, tgt_in: torch.Tensor, memory: Memory, state: State) -> list[Step]: ...

    def constraints(self) -> Constraints | None: ...


def select_rows(state: State, index: torch.Tensor) -> State:
    """Rows `index` of a state that is a tuple of (B, ...) tensors (the recurrent models' and
    the Transformer's own select_state)."""
    return tuple(s.index_select(0, index) for s in state)
