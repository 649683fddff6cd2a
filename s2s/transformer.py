"""The Transformer (Vaswani et al. 2017): attention without recurrence.

The recurrent models read the source one word at a time and keep what they read in a state.
A Transformer keeps every position's vector and lets each position look at all the others,
in parallel, with scaled dot-product attention over keys and values:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Multi-head attention runs H such attentions side by side, each on its own learned
projections of size d_k = d / H, and concatenates what they read:

    head_h = Attention(X_q W_Q^h, X_kv W_K^h, X_kv W_V^h)
    MultiHead(X_q, X_kv) = [head_1 ; ... ; head_H] W_O

Three kinds, same code:
    encoder self-attention    X_q = X_kv = the source positions (each source piece reads the source)
    decoder self-attention    X_q = X_kv = the target prefix, causal (y_j reads y_<=j only)
    cross-attention           X_q = the target, X_kv = the encoder's output (the RNN's attention)

A layer is pre-layer-norm (Xiong et al. 2020: trains without a long warm-up):

    x <- x + Dropout(SelfAttention(LN(x)))
    x <- x + Dropout(CrossAttention(LN(x), encoder output))      decoder layers only
    x <- x + Dropout(W_2 ReLU(W_1 LN(x)))

Positions are sinusoidal, PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(...), added to
the embeddings scaled by sqrt(d). The embedding is shared by source, target and output layer
(the joint vocabulary of the recurrent models: the same tokenizer files).

With `copy`, it copies source pieces as the recurrent models do (a pointer-generator, See et
al. 2017, model.py): the copy distribution is alpha_j, the last layer's cross-attention
averaged over heads (HeadMean), the same matrix `Decoding.attention` shows for a Transformer.
With heads knocked out (s2s.hooks.knocked_out) the pointer reads the mean over the heads still
in, and nothing when none is (docs/attention.md); `Decoding.attention` still draws every head.

Decoding is incremental: each step appends its keys and values to a cache, so step j attends
to j cached positions (O(j) work), not the whole prefix again (O(j^2)). The model speaks the
recurrent models' decoding interface (encode, initial_feed, decode_step), so s2s.decode's
greedy, beam search, sampling and forced decoding serve both families.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import mask_bias as padding_bias
from .interface import ConfigBase, Memory, Step, select_rows
from .model import copy_mix
from .tokenizer import PAD

State = tuple[torch.Tensor, ...]   # (s_j (B, d), self keys (B, L, H, t, d_k), self values (B, L, H, t, d_k))


@dataclass
class TransformerConfig(ConfigBase):
    vocab_size: int
    d_model: int = 256
    heads: int = 4
    encoder_layers: int = 3
    decoder_layers: int = 3
    ffn: int = 1024
    dropout: float = 0.1             # on each sub-layer's output and on embeddings + positions (the paper's)
    copy: bool = False
    attention_dropout: float | None = None   # on the weights A before A V; None: as `dropout`
    ffn_dropout: float | None = None         # on ReLU(W_1 x); None: as `dropout`
    arch: str = "transformer"        # what the registry and the pages read
    attention: str = "scaled-dot"    # its cross-attention's scoring function

    def __post_init__(self):
        if self.arch != "transformer":
            raise ValueError(f"not a Transformer config (arch {self.arch!r})")
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by {self.heads} heads")
        if self.d_model % 2:
            raise ValueError("d_model must be even (sinusoidal positions come in sin/cos pairs)")
        # Vaswani et al. drop only sub-layer outputs and embeddings; dropping A and the FFN's
        # inner activations too is tensor2tensor's habit. Configs written before these two
        # fields existed trained with all three at `dropout`.
        if self.attention_dropout is None:
            self.attention_dropout = self.dropout
        if self.ffn_dropout is None:
            self.ffn_dropout = self.dropout


def sinusoidal_positions(n: int, d: int, start: int = 0, device=None) -> torch.Tensor:
    """(n, d) PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)), p = start..start+n-1."""
    p = torch.arange(start, start + n, dtype=torch.float32, device=device)[:, None]
    inv = torch.exp(torch.arange(0, d, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d, device=device)
    pe[:, 0::2] = torch.sin(p * inv)
    pe[:, 1::2] = torch.cos(p * inv)
    return pe


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention with the per-head projections explicit.

    For queries X_q (B, T, d) and keys/values X_kv (B, S, d), with H heads of d_k = d / H:

        Q = X_q W_Q   -> (B, H, T, d_k)      head h uses columns h*d_k .. (h+1)*d_k of W_Q
        K = X_kv W_K  -> (B, H, S, d_k)
        V = X_kv W_V  -> (B, H, S, d_k)
        A = softmax(Q K^T / sqrt(d_k) + bias)   (B, H, T, S)   rows sum to 1 per head
        out = [A_1 V_1 ; ... ; A_H V_H] W_O      (B, T, d)

    `bias` (broadcast to (B, H, T, S)) is 0 where a query may look and -inf where not
    (padding, or the future in decoder self-attention). `keys_values` splits off K and V
    so they can be computed once (cross-attention) or cached step by step (self-attention).
    """

    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.d_k = heads, d // heads
        self.w_q = nn.Linear(d, d)
        self.w_k = nn.Linear(d, d)
        self.w_v = nn.Linear(d, d)
        self.w_o = nn.Linear(d, d)
        self.drop = nn.Dropout(dropout)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, d) -> (B, H, L, d_k): each head's slice of the projection."""
        B, L, _ = x.shape
        return x.view(B, L, self.heads, self.d_k).transpose(1, 2)

    def keys_values(self, x_kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S, d) -> K, V (B, H, S, d_k)."""
        return self.split(self.w_k(x_kv)), self.split(self.w_v(x_kv))

    def attend(self, x_q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, d) queries over K, V (B, H, S, d_k) -> output (B, T, d), weights A (B, H, T, S)."""
        q = self.split(self.w_q(x_q))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_k)          # (B, H, T, S)
        if bias is not None:
            scores = scores + bias
        weights = F.softmax(scores, dim=-1)
        out = self.drop(weights) @ v                                       # (B, H, T, d_k)
        B, H, T, _ = out.shape
        return self.w_o(out.transpose(1, 2).reshape(B, T, H * self.d_k)), weights

    def forward(self, x_q: torch.Tensor, x_kv: torch.Tensor, bias: torch.Tensor | None = None):
        k, v = self.keys_values(x_kv)
        return self.attend(x_q, k, v, bias)


class HeadMean(nn.Module):
    """What the copy pointer reads of a decoder layer's cross-attention: its weights averaged
    over the heads,

        alpha_j = (1/H) sum_h A_h,j          weights (B, H, ..., S) -> alpha (B, ..., S)

    `layer` (from 0) says whose heads they are. A module of its own, called wherever the
    pointer is mixed in (decoding, forced decoding, the lens, the attributions), so that a head
    knockout reaches the pointer in this one place: under s2s.hooks.knocked_out a hook on it
    makes alpha the mean over the layer's heads still in (0 when none is: no copy)."""

    def forward(self, weights: torch.Tensor, layer: int) -> torch.Tensor:
        return weights.mean(1)


class FeedForward(nn.Module):
    """W_2 ReLU(W_1 x): the same two-layer MLP at every position."""

    def __init__(self, d: int, ffn: int, dropout: float):
        super().__init__()
        self.w_1, self.w_2, self.drop = nn.Linear(d, ffn), nn.Linear(ffn, d), nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.drop(F.relu(self.w_1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        d = cfg.d_model
        self.norm_self, self.self_attn = nn.LayerNorm(d), MultiHeadAttention(d, cfg.heads, cfg.attention_dropout)
        self.norm_ffn, self.ffn = nn.LayerNorm(d), FeedForward(d, cfg.ffn, cfg.ffn_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S, d), bias (B, 1, 1, S) -> (B, S, d), self-attention weights (B, H, S, S)."""
        h = self.norm_self(x)
        a, weights = self.self_attn(h, h, bias)
        x = x + self.drop(a)
        return x + self.drop(self.ffn(self.norm_ffn(x))), weights


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        d = cfg.d_model
        self.norm_self, self.self_attn = nn.LayerNorm(d), MultiHeadAttention(d, cfg.heads, cfg.attention_dropout)
        self.norm_cross, self.cross_attn = nn.LayerNorm(d), MultiHeadAttention(d, cfg.heads, cfg.attention_dropout)
        self.norm_ffn, self.ffn = nn.LayerNorm(d), FeedForward(d, cfg.ffn, cfg.ffn_dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, self_kv: tuple[torch.Tensor, torch.Tensor], self_bias: torch.Tensor | None,
                cross_kv: tuple[torch.Tensor, torch.Tensor], cross_bias: torch.Tensor):
        """x (B, T, d) queries; self_kv: K, V of the target positions visible to them
        (B, H, T', d_k); cross_kv: the encoder output's K, V (B, H, S, d_k).
        Returns x (B, T, d), the cross-attention's output (B, T, d) (the context c_j),
        self weights (B, H, T, T') and cross weights (B, H, T, S)."""
        a, self_w = self.self_attn.attend(self.norm_self(x), *self_kv, self_bias)
        x = x + self.drop(a)
        context, cross_w = self.cross_attn.attend(self.norm_cross(x), *cross_kv, cross_bias)
        x = x + self.drop(context)
        return x + self.drop(self.ffn(self.norm_ffn(x))), context, self_w, cross_w


@dataclass
class TransformerMemory(Memory):
    """Memory plus what a Transformer's decoder reads of the source at every step."""
    cross_keys: torch.Tensor | None = None      # (B, L_dec, H, S, d_k): each decoder layer's K of the encoder output
    cross_values: torch.Tensor | None = None    # (B, L_dec, H, S, d_k)
    self_attention: torch.Tensor | None = None  # (B, L_enc, H, S, S) encoder self-attention weights

    def select(self, index: torch.Tensor) -> "TransformerMemory":
        base = Memory.select(self, index)
        pick = (lambda t: None if t is None else t.index_select(0, index))
        return TransformerMemory(base.states, base.keys, base.mask, base.summary, base.mask_bias, base.src,
                                 pick(self.cross_keys), pick(self.cross_values), pick(self.self_attention))


class Transformer(nn.Module):
    """Encoder-decoder Transformer with the recurrent models' interface (see model.py)."""

    is_lstm = False          # s2s.decode records LSTM cells for recurrent models only

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)     # times sqrt(d) below: unit-variance inputs
        with torch.no_grad():
            self.embed.weight[PAD].zero_()
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.out_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.copy_gate = nn.Linear(2 * d, 1) if cfg.copy else None    # p_gen from [c_j ; s_j]
        self.copy_heads = HeadMean() if cfg.copy else None               # alpha from the last layer's heads
        self.drop = nn.Dropout(cfg.dropout)

    # ------------------------------------------------------------ pieces
    def embed_at(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """(B, L) ids at positions start.. -> (B, L, d): sqrt(d) E x + PE."""
        return self.position(self.embed(ids), start)

    def position(self, embedded: torch.Tensor, start: int = 0) -> torch.Tensor:
        """(B, L, d) embeddings E x at positions start.. -> sqrt(d) E x + PE."""
        pe = sinusoidal_positions(embedded.size(1), self.cfg.d_model, start, embedded.device)
        return self.drop(embedded * math.sqrt(self.cfg.d_model) + pe)

    def output(self, s: torch.Tensor) -> torch.Tensor:
        """Logits E s + b, tied to the embedding."""
        return F.linear(s, self.embed.weight, self.out_bias)

    def point(self, logits, alpha, src, context, s):
        """The pointer-generator mix (model.copy_mix) with p_gen = sigmoid(w_g [c_j ; s_j] + b_g);
        alpha (..., S) as the pointer reads it (copied_alpha)."""
        p_gen = torch.sigmoid(self.copy_gate(torch.cat([context, s], dim=-1)))
        return copy_mix(logits, p_gen, alpha, src)

    def copied_alpha(self, weights: torch.Tensor, layer: int | None = None) -> torch.Tensor:
        """The pointer's alpha from decoder layer `layer`'s cross-attention weights (B, H, ..., S)
        (None: the last layer, the one the model reads): copy_heads (HeadMean), where a knockout
        reaches it."""
        return self.copy_heads(weights, len(self.decoder) - 1 if layer is None else layer)

    # ------------------------------------------------------------ encoder
    def encode(self, src: torch.Tensor, src_len: torch.Tensor, embedded: torch.Tensor | None = None
               ) -> tuple[TransformerMemory, State]:
        """(B, S) padded source ids -> memory (encoder output h_i, each decoder layer's cross
        K and V, the self-attention weights) and the empty decoder state. `embedded` (B, S, d),
        if given, is read instead of the ids' embeddings E x_i (scaled and positioned as they are)."""
        mask = src != PAD
        bias = padding_bias(mask, torch.float32)[:, None, None, :]          # (B, 1, 1, S)
        x = self.embed_at(src) if embedded is None else self.position(embedded)
        weights = []
        for layer in self.encoder:
            x, w = layer(x, bias)
            weights.append(w)
        h = self.encoder_norm(x)                                            # (B, S, d)
        kv = [layer.cross_attn.keys_values(h) for layer in self.decoder]
        summary = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)  # mean over real positions
        memory = TransformerMemory(h, None, mask, summary, src=src,
                                   cross_keys=torch.stack([k for k, _ in kv], 1),
                                   cross_values=torch.stack([v for _, v in kv], 1),
                                   self_attention=torch.stack(weights, 1))
        B, L, H, dk = src.size(0), self.cfg.decoder_layers, self.cfg.heads, self.cfg.d_model // self.cfg.heads
        empty = h.new_zeros(B, L, H, 0, dk)
        return memory, (h.new_zeros(B, self.cfg.d_model), empty, empty)

    def initial_feed(self, batch: int) -> torch.Tensor:
        """Nothing is fed back besides the tokens (kept so s2s.decode serves both families)."""
        return self.embed.weight.new_zeros(batch, 0)

    # ------------------------------------------------------------ decoder
    def decode_step(self, y_prev: torch.Tensor, state: State, feed: torch.Tensor, memory: TransformerMemory) -> Step:
        """One incremental step j: y_{j-1} (B,) at position j attends to the cached keys and
        values of positions 0..j-1 plus its own, and to the encoder output.

        Step.alpha is the last layer's cross-attention averaged over heads (B, S);
        Step.cross_attention (B, L, H, S) and Step.self_attention (B, L, H, j+1) hold every
        layer and head; Step.context is the last layer's cross-attention output (B, d)."""
        _, cache_k, cache_v = state
        j = cache_k.size(3)
        x = self.embed_at(y_prev[:, None], start=j)                        # (B, 1, d)
        new_k, new_v, self_ws, cross_ws = [], [], [], []
        bias = memory.mask_bias[:, None, None, :]
        for l, layer in enumerate(self.decoder):
            k, v = layer.self_attn.keys_values(layer.norm_self(x))
            k, v = torch.cat([cache_k[:, l], k], 2), torch.cat([cache_v[:, l], v], 2)    # (B, H, j+1, d_k)
            new_k.append(k), new_v.append(v)
            x, context, self_w, cross_w = layer(x, (k, v), None, (memory.cross_keys[:, l], memory.cross_values[:, l]),
                                                bias)
            self_ws.append(self_w[:, :, 0]), cross_ws.append(cross_w[:, :, 0])
        s = self.decoder_norm(x)[:, 0]                                      # (B, d)
        cross = torch.stack(cross_ws, 1)                                     # (B, L, H, S)
        alpha = cross[:, -1].mean(1)                                         # (B, S)
        logits = self.output(s)
        context = context[:, 0]
        if self.copy_gate is not None:
            logits = self.point(logits, self.copied_alpha(cross[:, -1]), memory.src, context, s)
        return Step(logits, (s, torch.stack(new_k, 1), torch.stack(new_v, 1)), feed, alpha, context,
                    cross_attention=cross, self_attention=torch.stack(self_ws, 1))

    def decode_all(self, tgt_in: torch.Tensor, memory: TransformerMemory, keep_weights: bool = False):
        """Every target position at once (teacher forcing: no recurrence, so nothing waits
        for the previous step): (B, T) gold previous tokens -> s (B, T, d), the last layer's
        context (B, T, d), its cross-attention (B, H, T, S), and with keep_weights every
        layer's self weights (B, L, H, T, T) and cross weights (B, L, H, T, S), else None."""
        T = tgt_in.size(1)
        # y_j sees y_<=j only: -inf above the diagonal. Target padding sits after the real
        # tokens, so no real position ever sees it; padded positions' outputs are not scored.
        self_bias = torch.full((T, T), float("-inf"), device=tgt_in.device).triu(1)
        cross_bias = memory.mask_bias[:, None, None, :]
        x = self.embed_at(tgt_in)
        self_ws, cross_ws = [], []
        for l, layer in enumerate(self.decoder):
            kv = layer.self_attn.keys_values(layer.norm_self(x))
            x, context, self_w, cross_w = layer(x, kv, self_bias, (memory.cross_keys[:, l], memory.cross_values[:, l]),
                                                cross_bias)
            if keep_weights:
                self_ws.append(self_w), cross_ws.append(cross_w)
        s = self.decoder_norm(x)
        every = (torch.stack(self_ws, 1), torch.stack(cross_ws, 1)) if keep_weights else (None, None)
        return s, context, cross_w, *every

    select_state = staticmethod(select_rows)     # beam search: the cached keys' rows, kept or repeated

    def constraints(self) -> None:
        """No generation config: every token may be chosen."""
        return None

    def forced_steps(self, tgt_in: torch.Tensor, memory: TransformerMemory, state: State = ()) -> list[Step]:
        """Forced decoding in a single pass (no recurrence: each position's input, the
        reference's previous token, is known in advance): the Step that decode_step would
        return at each position j (up to float rounding), with the self-attention of position
        j over positions 0..j. `state` (the empty cache) is not needed."""
        s, context, last, self_w, cross_w = self.decode_all(tgt_in, memory, keep_weights=True)
        alpha = last.mean(1)                                                 # (B, T, S)
        logits = self.output(s)
        if self.copy_gate is not None:
            logits = self.point(logits, self.copied_alpha(last), memory.src, context, s)
        feed = self.initial_feed(tgt_in.size(0))
        return [Step(logits[:, j], (s[:, j],), feed, alpha[:, j], context[:, j], cross_attention=cross_w[:, :, :, j],
                     self_attention=self_w[:, :, :, j, :j + 1]) for j in range(tgt_in.size(1))]

    def logits_at(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor, positions: torch.Tensor,
                  embedded: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher forcing scored at one position per row: (B, T) gold previous tokens and
        positions (B,) -> the logits of row b at positions[b] (B, V). The same numbers as
        forward(...)[0][b, positions[b]], but the output layer (V wide) runs once per row, not
        T times, and positions after the last asked for are not decoded (attributions score
        one step per row: s2s.attributions)."""
        memory, _ = self.encode(src, src_len, embedded)
        s, context, last, _, _ = self.decode_all(tgt_in[:, :int(positions.max()) + 1], memory)
        rows = torch.arange(src.size(0), device=src.device)
        s, context = s[rows, positions], context[rows, positions]
        logits = self.output(self.drop(s))
        if self.copy_gate is not None:
            logits = self.point(logits, self.copied_alpha(last)[rows, positions], memory.src, context, s)
        return logits

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor,
                embedded: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing, all target positions at once: (B, T) gold previous tokens ->
        logits (B, T, V) (log-probabilities with copy), alpha (B, T, S) (last layer's
        cross-attention averaged over heads). `embedded`: as in encode."""
        memory, _ = self.encode(src, src_len, embedded)
        s, context, last, _, _ = self.decode_all(tgt_in, memory)
        alpha = last.mean(1)                                                 # (B, T, S)
        logits = self.output(self.drop(s))
        if self.copy_gate is not None:
            logits = self.point(logits, self.copied_alpha(last), memory.src, context, s)
        return logits, alpha


__all__ = ["TransformerConfig", "Transformer", "TransformerMemory", "MultiHeadAttention", "sinusoidal_positions"]
