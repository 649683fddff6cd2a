"""One mechanism for reading or changing a model's internals during a forward pass.

Every instrument that looks inside a Transformer goes through here: the contributions (norm,
ALTI+, value zeroing: s2s.contributions), the neuron view (s2s.heads), knocking heads out and
ranking them (s2s.heads importance and prune, and every search of s2s.decode through
`DecodeSettings.head_mask`; the lens and the contrast through their `head_mask`), and the hub
adapter's pass that runs the output head at one position only (s2s.hub_model logits_at). A
family is taught here once:

    sites(model)         each attention block's modules, layer by layer, for the three kinds
                         (encoder self-attention, decoder self-attention, cross-attention):
                         its query, key, value and output projections, the norm beside it, the
                         attention module, and the layer's rest after a cross-attention
                             ours (s2s/transformer.py)   w_q, w_k, w_v, w_o; pre-LN
                             Marian, BART, M2M100, NLLB, mBART (transformers' BART family)
                                                         q_proj, k_proj, v_proj, out_proj
                             T5                          q, k, v, o (no scaling; a position bias)
    layer_modules(model) each encoder and decoder layer's module, whose output is its hidden state
    output_head(model)   a decoder layer's hidden state read as the model reads its last one:
                         its final norm, scaling, output layer and bias (the logit lens)
    forced_pass(...)     one teacher-forced pass: the logits and every layer and head's weights
    attached(hooks)      a forward with readers (forward hooks that keep what they see) and
                         editors (hooks that return a changed input or output) attached, for
                         this thread's passes only: a loaded model is shared by the app's
                         sessions and its warm-up thread, whose passes go through untouched
    recorded(modules)    a reader: each module's (input, output) of the pass
    per_head(x, heads)   an attention output seen per head, (..., heads, d_h): the one cut of a
                         head's slice, for knocking out, importance and patching
    scaled_heads(...)    an editor: head h's slice of the attention output multiplied by xi_h
                         before the output projection (Michel et al. 2019), xi a tensor that
                         may carry a gradient (importance: dL/dxi_h)
    knocked_out(...)     the same with xi_h = 0 for the heads of a mask (the head's weights
                         are still computed and shown; its contribution is gone), and where
                         the model itself reads a head's weights (the copying Transformer's
                         pointer: pointer_heads) it reads only the heads still in
    knocked_out_rows(...) the same with each row of a batch its own mask (pruning's decodings
                         side by side)

A head mask names heads as KIND:LAYER.HEAD, KIND one of cross, encoder, decoder, LAYER and HEAD
counted from 1 as the pages and `python -m s2s.heads` count them, KIND:LAYER.* a whole layer,
several joined by commas: "cross:2.3,encoder:1.*" (parse_head_mask; 0-based inside).

A recurrent model (s2s/model.py) has one attention and no heads: the counterfactual attention
(s2s.counterfactual: alpha replaced, uniform or permuted) is its knockout.
"""
from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import torch
from torch import nn

from .piece_words import HEAD_KINDS
from .text import InputError
from .tokenizer import BOS
from .transformer import Transformer

KINDS = tuple(HEAD_KINDS)        # cross, encoder, decoder
RECURRENT_KNOCKOUT = ("A recurrent model has one attention and no heads to knock out: its knockout is the "
                      "counterfactual attention (Alignment & Explanation; python -m s2s.explain --counterfactual "
                      "STEP).")


# ---------------------------------------------------------------------------------------
# Where each family's attention blocks are


@dataclass
class Site:
    """Where a block's parts are read in a model: its query, value and output projections,
    the norm beside it, and the layer module whose output value zeroing compares."""
    q: nn.Module
    v: nn.Module
    o: nn.Module
    norm: nn.Module
    layer: nn.Module | None = None
    finish: Callable[..., torch.Tensor] | None = None
    """cross-attention only: (residual x, attention output) -> the layer's output, the rest of
    the layer after its cross-attention (the FFN and its norms), position by position"""
    k: nn.Module | None = None
    """the key projection, and the attention module holding the projections (its `scaling`, T5's
    position bias): what s2s.heads reads for one head's q . k_j"""
    attn: nn.Module | None = None

    @property
    def heads(self) -> int:
        """How many heads the block has (ours, T5's and the BART family's names for it)."""
        a = self.attn
        return int(getattr(a, "heads", None) or getattr(a, "n_heads", None) or getattr(a, "num_heads", None)
                   or _config_heads(a))

    @property
    def head_size(self) -> int:
        """d_k: each head's slice of the output projection's input."""
        return self.o.in_features // self.heads


def _config_heads(attn: nn.Module) -> int:
    cfg = getattr(attn, "config", None)
    for name in ("num_attention_heads", "encoder_attention_heads", "num_heads"):
        if cfg is not None and getattr(cfg, name, None):
            return int(getattr(cfg, name))
    raise InputError(f"Cannot tell how many heads {type(attn).__name__} has.")


def _pre_ffn(norm: nn.Module, ffn: nn.Module) -> Callable:
    """The shipped pre-LN layer's rest: z = x + a, y = z + FFN(LN(z))."""
    def finish(x, a):
        z = x + a
        return z + ffn(norm(z))
    return finish


def _bart_finish(layer: nn.Module) -> Callable:
    """A BART-family decoder layer's rest after its cross-attention, pre-LN (M2M100, NLLB,
    mBART: z = x + a, y = z + FFN(LN(z))) or post-LN (Marian, BART: z = LN(x + a),
    y = LN(z + FFN(z))); which one, the caller tells (post)."""
    def ffn(z):
        return layer.fc2(layer.activation_fn(layer.fc1(z)))

    def finish(x, a, post: bool = False):
        if post:
            z = layer.encoder_attn_layer_norm(x + a)
            return layer.final_layer_norm(z + ffn(z))
        z = x + a
        return z + ffn(layer.final_layer_norm(z))
    return finish


def sites(model) -> tuple[list[Site], list[Site], list[Site]]:
    """(encoder self-attention, decoder self-attention, cross-attention) sites, layer by layer,
    of the shipped Transformer or a Hugging Face encoder-decoder (s2s.hub_model.HubSeq2Seq);
    InputError for a model without them (a recurrent one, an unknown layout)."""
    if isinstance(model, Transformer):
        enc = [Site(l.self_attn.w_q, l.self_attn.w_v, l.self_attn.w_o, l.norm_self, k=l.self_attn.w_k,
                    attn=l.self_attn) for l in model.encoder]
        dec = [Site(l.self_attn.w_q, l.self_attn.w_v, l.self_attn.w_o, l.norm_self, k=l.self_attn.w_k,
                    attn=l.self_attn) for l in model.decoder]
        cross = [Site(l.cross_attn.w_q, l.cross_attn.w_v, l.cross_attn.w_o, l.norm_cross, l,
                      _pre_ffn(l.norm_ffn, l.ffn), k=l.cross_attn.w_k, attn=l.cross_attn)
                 for l in model.decoder]
        return enc, dec, cross
    hf = getattr(model, "hf", None)
    if hf is None:
        raise InputError("This needs a Transformer's attention heads; a recurrent model has one attention.")
    encoder, decoder = hf.get_encoder(), hf.get_decoder()
    if hasattr(encoder, "layers") and hasattr(decoder, "layers"):           # BART, Marian, M2M100, NLLB, mBART
        try:
            enc = [Site(l.self_attn.q_proj, l.self_attn.v_proj, l.self_attn.out_proj, l.self_attn_layer_norm,
                        k=l.self_attn.k_proj, attn=l.self_attn) for l in encoder.layers]
            dec = [Site(l.self_attn.q_proj, l.self_attn.v_proj, l.self_attn.out_proj, l.self_attn_layer_norm,
                        k=l.self_attn.k_proj, attn=l.self_attn) for l in decoder.layers]
            cross = [Site(l.encoder_attn.q_proj, l.encoder_attn.v_proj, l.encoder_attn.out_proj,
                          l.encoder_attn_layer_norm, l, _bart_finish(l), k=l.encoder_attn.k_proj, attn=l.encoder_attn)
                     for l in decoder.layers]
            return enc, dec, cross
        except AttributeError:
            pass
    if hasattr(encoder, "block") and hasattr(decoder, "block"):             # T5
        def t5_self(b):
            a = b.layer[0].SelfAttention
            return Site(a.q, a.v, a.o, b.layer[0].layer_norm, k=a.k, attn=a)
        enc = [t5_self(b) for b in encoder.block]
        dec = [t5_self(b) for b in decoder.block]

        def t5_cross(b):
            a = b.layer[1].EncDecAttention
            return Site(a.q, a.v, a.o, b.layer[1].layer_norm, b, (lambda x, y, ff=b.layer[-1]: ff(x + y)), k=a.k,
                        attn=a)
        cross = [t5_cross(b) for b in decoder.block]
        return enc, dec, cross
    raise InputError(f"This architecture ({type(hf).__name__}) is not of a known layout: its attention blocks "
                     "cannot be read.")


def sites_by_kind(model) -> dict[str, list[Site]]:
    """{kind: sites layer by layer} for kind in KINDS."""
    enc, dec, cross = sites(model)
    return {"cross": cross, "encoder": enc, "decoder": dec}


def head_counts(model, by_kind: Mapping[str, list[Site]] | None = None) -> dict[str, tuple[int, int]]:
    """{kind: (layers, heads per layer)}, read from `by_kind` if the caller has its sites already."""
    by_kind = sites_by_kind(model) if by_kind is None else by_kind
    return {kind: (len(s), s[0].heads if s else 0) for kind, s in by_kind.items()}


def is_recurrent(model) -> bool:
    """A model with no attention heads: neither ours nor a hub Transformer."""
    return not isinstance(model, Transformer) and getattr(model, "hf", None) is None


# ---------------------------------------------------------------------------------------
# Each family's layers and output head (the logit lens: s2s.lens; activation patching: s2s.patch)


def layer_modules(model) -> tuple[list[nn.Module], list[nn.Module]]:
    """(encoder layers, decoder layers) of a Transformer, ours or a hub model's: the modules
    whose main output (first(output), (B, L, d)) is each layer's hidden state, before any final
    norm (ours: EncoderLayer, DecoderLayer; the BART family's encoder and decoder `layers`; T5's
    `block`s). InputError for a recurrent model (one layer: its encoder's RNN, its decoder's cell)."""
    if isinstance(model, Transformer):
        return list(model.encoder), list(model.decoder)
    hf = getattr(model, "hf", None)
    if hf is None:
        raise InputError("A recurrent model has one encoder layer and one decoder layer, not a Transformer's stack.")
    encoder, decoder = hf.get_encoder(), hf.get_decoder()
    for name in ("layers", "block"):                                        # BART family, T5
        if hasattr(encoder, name) and hasattr(decoder, name):
            return list(getattr(encoder, name)), list(getattr(decoder, name))
    raise InputError(f"This architecture ({type(hf).__name__}) is not of a known layout: its layers cannot be read.")


def output_head(model) -> Callable[[torch.Tensor], torch.Tensor]:
    """The model's own output head as a function: a decoder layer's hidden state (..., d) ->
    logits (..., V), through the family's final norm, scaling, output layer and bias, as its
    forward reads its last layer:
        ours               E LN(x) + b                          (decoder_norm; tied embedding)
        Marian, BART       lm_head(x) + final_logits_bias       (post-LN layers: no final norm)
        M2M100, NLLB, mBART lm_head(layer_norm(x)) (+ final_logits_bias where the model has one)
        T5                 lm_head(final_layer_norm(x) * d_model**-0.5), the scaling when its
                           output layer is the tied embedding (scale_decoder_outputs)
    A hub model's unwritable ids are at -inf (pieces_only). A copying Transformer's pointer is
    not part of it (s2s.lens mixes it in). InputError for a recurrent model."""
    if isinstance(model, Transformer):
        return lambda x: model.output(model.decoder_norm(x))
    hf = getattr(model, "hf", None)
    if hf is None:
        raise InputError("A recurrent model's output layer reads its one decoder layer: there is no stack to read.")
    decoder, lm_head = hf.get_decoder(), hf.get_output_embeddings()
    norm = getattr(decoder, "final_layer_norm", None) or getattr(decoder, "layer_norm", None)
    bias = getattr(hf, "final_logits_bias", None)
    cfg = hf.config
    scale = 1.0
    if hasattr(decoder, "block") and getattr(cfg, "scale_decoder_outputs", getattr(cfg, "tie_word_embeddings", False)):
        scale = cfg.d_model ** -0.5

    def head(x: torch.Tensor) -> torch.Tensor:
        if norm is not None:
            x = norm(x)
        logits = lm_head(x * scale if scale != 1.0 else x)
        if bias is not None:
            logits = logits + bias.to(logits.dtype)
        return model.pieces_only(logits)
    return head


# ---------------------------------------------------------------------------------------
# One teacher-forced pass


def first(output) -> torch.Tensor:
    """A module's main output (transformers' attention modules return tuples)."""
    return output[0] if isinstance(output, tuple) else output


def decoder_start(model) -> int:
    """The decoder's start token: a hub model's own (its tokenizer's), else the shipped BOS."""
    return getattr(getattr(model, "tokenizer", None), "bos_id", BOS)


def decoder_input(model, tgt: torch.Tensor) -> torch.Tensor:
    """(T,) target ids -> (1, T) the decoder's input: the start token, then tgt[:-1]."""
    return torch.cat([tgt.new_tensor([decoder_start(model)]), tgt[:-1]])[None]


@dataclass
class ForcedPass:
    """What one teacher-forced pass gives: the logits (B, T, V) (log-probabilities with a
    copying Transformer), and every layer and head's weights: encoder self-attention
    (L, H, S, S), decoder self-attention (L, H, T, T), cross-attention (L, H, T, S), each with
    a leading batch axis (B, ...) from forced_batch_pass, without it from forced_pass (batch 1)."""
    logits: torch.Tensor
    encoder: torch.Tensor
    decoder: torch.Tensor
    cross: torch.Tensor

    def weights(self, kind: str) -> torch.Tensor:
        return {"cross": self.cross, "encoder": self.encoder, "decoder": self.decoder}[kind]


def forced_pass(model, src: torch.Tensor, tgt_in: torch.Tensor) -> ForcedPass:
    """One teacher-forced pass of (src (1, S), tgt_in (1, T)) with every attention weight kept
    (no grad mode is set here: the caller says whether a gradient is wanted)."""
    p = forced_batch_pass(model, src, torch.tensor([src.size(1)]), tgt_in)
    return ForcedPass(p.logits, p.encoder[0], p.decoder[0], p.cross[0])


def forced_batch_pass(model, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor) -> ForcedPass:
    """forced_pass of a batch: src (B, S) padded on the right (src_len (B,) the real lengths,
    the padding masked out of every attention), tgt_in (B, T) padded on the right (causal: a
    real position never reads the padding after it). Row b's weights cut to its own lengths,
    [b, :, :, :T_b, :S_b], and its logits [b, :T_b] are what forced_pass gives that pair alone,
    up to float rounding."""
    if isinstance(model, Transformer):
        memory, _ = model.encode(src, src_len.to(src.device))
        s, context, last, self_w, cross_w = model.decode_all(tgt_in, memory, keep_weights=True)
        logits = model.output(s)
        if model.copy_gate is not None:
            logits = model.point(logits, model.copied_alpha(last), memory.src, context, s)
        return ForcedPass(logits, memory.self_attention, self_w, cross_w)
    if getattr(model, "hf", None) is None:
        raise InputError("This needs a Transformer's attention heads; a recurrent model has one attention.")
    mask = (torch.arange(src.size(1), device=src.device)[None, :] < src_len.to(src.device)[:, None]).long()
    out = model.hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt_in, output_attentions=True,
                   use_cache=False, return_dict=True)
    stack = (lambda ws: torch.stack(ws, 1).float())
    return ForcedPass(model.pieces_only(out.logits), stack(out.encoder_attentions), stack(out.decoder_attentions),
                      stack(out.cross_attentions))


# ---------------------------------------------------------------------------------------
# Readers and editors attached to a forward


Hook = tuple[nn.Module, str, Callable]
"""(module, "forward" or "pre", fn): fn(module, args, output) after the module runs, or
fn(module, args) before it; returning None leaves the output (the input) as it was, anything
else replaces it (an editor)."""


@contextmanager
def attached(hooks: Sequence[Hook]) -> Iterator[None]:
    """Run the body with `hooks` on, for this thread's passes only; always removed after."""
    me = threading.get_ident()

    def gated(fn):
        def hook(module, *rest):
            return fn(module, *rest) if threading.get_ident() == me else None
        return hook

    handles = []
    try:
        for module, when, fn in hooks:
            if when == "pre":
                handles.append(module.register_forward_pre_hook(gated(fn)))
            elif when == "forward":
                handles.append(module.register_forward_hook(gated(fn)))
            else:
                raise ValueError(f"a hook runs 'pre' or 'forward', not {when!r}")
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def recorded(modules: Mapping[object, nn.Module]) -> Iterator[dict]:
    """A reader: {key: (first input, output)} of each module's last call in the body."""
    seen: dict = {}

    def keep(key):
        def hook(module, args, output):
            seen[key] = (args[0] if args else None, output)
        return hook
    with attached([(m, "forward", keep(key)) for key, m in modules.items()]):
        yield seen


def per_head(x: torch.Tensor, heads: int) -> torch.Tensor:
    """An attention output as the output projection W_O reads it, (..., d) with d = heads x d_h,
    seen per head: (..., heads, d_h), head h's slice x[..., h * d_h:(h + 1) * d_h] at [..., h, :]
    (a view where x is contiguous: writing into it writes x). The one cut of a head's slice, for
    knocking out and importance (scaled_heads) and patching (s2s.patch)."""
    return x.reshape(*x.shape[:-1], heads, x.shape[-1] // heads)


def _scale_heads(xi: torch.Tensor, heads: int) -> Callable:
    """A pre-hook multiplying head h's slice of the output projection's input x (B, T, d) by
    xi[h], xi (heads,) one gate for every row, or by xi[b, h], xi (B, heads) each row's own gate
    (a batch of pairs whose gradients are wanted apart: d(sum_b L_b)/d xi[b] = dL_b/d xi[b])."""
    def hook(module, args):
        x = args[0]
        shape = x.shape
        g = xi.to(x.dtype)
        g = g[:, None] if g.dim() == 1 else g.reshape(shape[0], *([1] * (len(shape) - 2)), heads, 1)
        scaled = (per_head(x, heads) * g).reshape(shape)
        return (scaled,) + tuple(args[1:])
    return hook


@contextmanager
def scaled_heads(model, xi: Mapping[str, torch.Tensor], by_kind: Mapping[str, list[Site]] | None = None
                 ) -> Iterator[None]:
    """An editor: for each kind in `xi`, head h of layer l's slice of the attention output is
    multiplied before the output projection W_O (Michel et al. 2019's gate xi_h) by
    xi[kind][l, h], a (layers, heads) tensor (every row of the batch alike), or by
    xi[kind][b, l, h], a (batch, layers, heads) tensor (row b its own gates: per-example
    gradients in one backward, s2s.head_importance; several head masks in one decoder batch).
    xi may require a gradient. `by_kind`: the model's sites, if the caller has them already."""
    by_kind = sites_by_kind(model) if by_kind is None else by_kind
    hooks = []
    for kind, gates in xi.items():
        for layer, site in enumerate(by_kind[kind]):
            hooks.append((site.o, "pre", _scale_heads(gates[layer] if gates.dim() == 2 else gates[:, layer],
                                                      site.heads)))
    with attached(hooks):
        yield


# ---------------------------------------------------------------------------------------
# Head masks: which heads are knocked out


HeadMask = tuple[tuple[str, int, "int | None"], ...]
"""((kind, layer, head), ...), 0-based; head None: every head of the layer."""

_ENTRY = re.compile(r"^(?P<kind>[a-z]+):(?P<layer>\d+)\.(?P<head>\d+|\*)$")
MASK_HELP = ("KIND:LAYER.HEAD[,KIND:LAYER.HEAD...], KIND one of cross, encoder, decoder, LAYER and HEAD counted "
             "from 1, KIND:LAYER.* for a whole layer")


def parse_head_mask(text: str | None) -> HeadMask:
    """'cross:2.3,encoder:1.*' -> (("cross", 1, 2), ("encoder", 0, None)); empty: no head.
    InputError, one line, for anything malformed (ranges are checked against a model by
    resolve_head_mask)."""
    if text is None or not str(text).strip():
        return ()
    out = []
    for part in str(text).split(","):
        entry = part.strip().lower()
        m = _ENTRY.match(entry)
        if not m:
            raise InputError(f"Cannot read the head {part.strip()!r}: write {MASK_HELP}.")
        if m["kind"] not in KINDS:
            raise InputError(f"Unknown attention kind {m['kind']!r} in {part.strip()!r}: use {', '.join(KINDS)}.")
        layer, head = int(m["layer"]), None if m["head"] == "*" else int(m["head"])
        if layer < 1 or head == 0:
            raise InputError(f"Layers and heads are counted from 1: {part.strip()!r}.")
        out.append((m["kind"], layer - 1, None if head is None else head - 1))
    return normal_head_mask(out)


def normal_head_mask(mask: Sequence[Sequence]) -> HeadMask:
    """Entries as tuples, duplicates dropped, in the order kind, layer, head (a whole layer first)."""
    entries = {(str(k), int(l), None if h is None else int(h)) for k, l, h in mask}
    order = {k: n for n, k in enumerate(KINDS)}
    return tuple(sorted(entries, key=lambda e: (order.get(e[0], 9), e[1], -1 if e[2] is None else e[2])))


def read_head_mask(mask: HeadMask | str | None) -> HeadMask:
    """A mask as an instrument takes it, written ("cross:2.3,encoder:1.*") or as tuples -> HeadMask."""
    return parse_head_mask(mask) if isinstance(mask, str) or mask is None else normal_head_mask(mask)


def format_head_mask(mask: HeadMask) -> str:
    """The mask as the command line writes it (from 1)."""
    return ",".join(f"{k}:{l + 1}.{'*' if h is None else h + 1}" for k, l, h in mask)


def resolve_head_mask(model, mask: HeadMask, by_kind: Mapping[str, list[Site]] | None = None
                      ) -> dict[str, list[tuple[int, int]]]:
    """{kind: [(layer, head), ...]} every head the mask knocks out in `model`, a whole layer
    expanded; InputError, one line, for a kind, layer or head the model does not have, or a
    recurrent model (which has no heads). `by_kind`: the model's sites, if the caller has them."""
    if not mask:
        return {}
    if is_recurrent(model):
        raise InputError(RECURRENT_KNOCKOUT)
    counts = head_counts(model, by_kind)
    out: dict[str, list[tuple[int, int]]] = {}
    for kind, layer, head in mask:
        if kind not in counts:
            raise InputError(f"Unknown attention kind {kind!r}: use {', '.join(KINDS)}.")
        layers, heads = counts[kind]
        name = HEAD_KINDS[kind].name
        if not 0 <= layer < layers:
            raise InputError(f"Layer {layer + 1} is out of range: its {name} has layers 1 to {layers}.")
        if head is not None and not 0 <= head < heads:
            raise InputError(f"Head {head + 1} is out of range: its {name} layers have heads 1 to {heads}.")
        for h in (range(heads) if head is None else [head]):
            if (layer, h) not in out.setdefault(kind, []):
                out[kind].append((layer, h))
    return out


def gates(counts: Mapping[str, tuple[int, int]], knocked: Mapping[str, Sequence[tuple[int, int]]], device=None
          ) -> dict[str, torch.Tensor]:
    """{kind: (layers, heads) tensor of 1s, 0 at the knocked-out heads} for the kinds that have one,
    `counts` the model's head_counts."""
    out = {}
    for kind, heads in knocked.items():
        if not heads:
            continue
        g = torch.ones(counts[kind], device=device)
        for layer, h in heads:
            g[layer, h] = 0.0
        out[kind] = g
    return out


def pointer_heads(model, knocked: Mapping[str, Sequence[tuple[int, int]]]) -> list[Hook]:
    """An editor for a copying Transformer's pointer (transformer.HeadMean, which every pass
    mixing the pointer in calls with a layer's cross-attention weights (B, H, ..., S)): with the
    cross-attention heads `knocked` ([(layer, head), ...]) out, alpha is the mean over the layer's
    heads still in,

        alpha = sum_{h in} A_h / |in|,   0 when no head is in (no copy: model.copy_mix then
                                         gives the vocabulary distribution alone)

    A layer with none of its heads knocked out is left as it was (exactly the plain mean).
    [] for a model without the pointer."""
    heads = getattr(model, "copy_heads", None)
    out = {}
    for layer, h in knocked.get("cross", ()):
        out.setdefault(layer, set()).add(h)
    if heads is None or not out:
        return []
    H = model.cfg.heads
    kept = {layer: [h for h in range(H) if h not in gone] for layer, gone in out.items()}

    def hook(module, args, output):
        weights, layer = args[0], args[1] % len(model.decoder)
        if layer not in kept:
            return None
        if not kept[layer]:
            return torch.zeros_like(output)
        return weights[:, kept[layer]].mean(1)
    return [(heads, "forward", hook)]


@contextmanager
def knocked_out_rows(model, masks: Sequence[HeadMask | str]) -> Iterator[None]:
    """knocked_out with each row of the batch its own mask: row b reads the model with the heads
    of masks[b] out (scaled_heads' per-row gates xi[b, l, h], 0 at row b's knocked-out heads), so
    that several masks decode side by side in one batch (pruning: one pass over the output layer's
    weights serves every mask). Every row's output is the one knocked_out(model, masks[b]) gives,
    up to float noise. InputError, one line, before the body runs, for a mask knocked_out refuses,
    and for a copying Transformer whose masks take out cross-attention heads (its pointer reads
    the heads still in, one set for the batch: decode those masks one at a time)."""
    masks = [read_head_mask(m) for m in masks]
    if not any(masks):
        yield
        return
    by_kind = None if is_recurrent(model) else sites_by_kind(model)
    knocked = [resolve_head_mask(model, m, by_kind) for m in masks]
    if any(pointer_heads(model, k) for k in knocked):
        raise InputError("A copying Transformer's pointer reads its cross-attention heads: knock those "
                         "out one mask at a time.")
    counts = head_counts(model, by_kind)
    device = next(model.parameters()).device
    rows = [gates(counts, k, device) for k in knocked]
    xi = {kind: torch.stack([g.get(kind, torch.ones(counts[kind], device=device)) for g in rows])
          for kind in {kind for g in rows for kind in g}}
    with scaled_heads(model, xi, by_kind):
        yield


@contextmanager
def knocked_out(model, mask: HeadMask | str) -> Iterator[None]:
    """Run the body with the heads of `mask` knocked out (xi_h = 0 multiplying the head's slice
    of the attention output before W_O, and a copying Transformer's pointer reading only the
    heads still in: pointer_heads); an empty mask attaches nothing (exactly plain). `mask` as
    parse_head_mask reads it ("cross:2.3,encoder:1.*") or its tuples; InputError, one line, before
    the body runs, for a malformed one or a head the model lacks."""
    mask = read_head_mask(mask)
    if not mask:
        yield
        return
    # the sites built once (every block's modules, walked layer by layer), read by the mask's
    # range check, the gates' shapes and the hooks: this runs on every decoding with a mask
    by_kind = None if is_recurrent(model) else sites_by_kind(model)
    knocked = resolve_head_mask(model, mask, by_kind)
    device = next(model.parameters()).device
    with scaled_heads(model, gates(head_counts(model, by_kind), knocked, device), by_kind), \
            attached(pointer_heads(model, knocked)):
        yield
