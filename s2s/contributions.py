"""Beyond the weights: what each source token contributed to each output token.

Attention weights alpha_ij say how much of position j's *value* a query i mixes in, not how
much of the output came from x_j: a large weight on a small vector moves little. The methods
here read the model's own internals instead, in about one forward pass, for every
Transformer the app loads (the shipped one and Hugging Face encoder-decoders: BART-family
post-LN Marian and BART, pre-LN M2M100, NLLB and mBART, and T5). One attention block, for
queries i over positions j, head h of H (d_k each), with the value and output projections
W_V^h (d_k x d), W_O^h (d x d_k, head h's columns of W_O), is

    y_i = x_i + sum_j T_i(x_j) + b_O,     T_i(x_j) = sum_h alpha^h_ij f^h(x_j),
    f^h(x_j) = W_O^h (W_V^h LN(x_j) + b_V^h)        (pre-LN; post-LN reads x_j, LN comes after)

so the output splits exactly into one vector per input position plus the residual x_i.

    weights         alpha^h_ij, per layer and head (the last layer's head mean is the heatmap)
    norm            ||alpha^h_ij f^h(x_j)|| per head, and ||T_i(x_j)|| summed over heads, the
                    layer's output-space view (Kobayashi et al. 2020, EMNLP)
    ALTI+           per block, c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), normalised over j
                    (Ferrando et al. 2022): for self-attention the residual x_i joins T_i(x_i);
                    post-LN blocks are first linearised, LN(z) = sum_j gamma (z_j - mean(z_j)) / sigma(z)
                    + (bias terms), sigma(z) the real one at the point, so the decomposition is
                    exact; the FFN and final norms act per position and are passed over. The
                    blocks are then rolled out (below): the encoder's S x S products, and for the
                    decoder a T x (S + T) matrix over [source tokens ; target prefix], the
                    cross-attention block mixing its residual (the target side so far) with the
                    encoder outputs (each a mix of source tokens).
                    source share_i = sum over the source columns: the part of output i that came
                    from the source rather than the target prefix (Ferrando et al., "Towards
                    opening the black box of NMT: source and target contributions", 2022)
    rollout         the same rollout with 0.5 (head-mean alpha) + 0.5 I for each block, the
                    residual as the identity (Abnar & Zuidema 2020; encoder-decoder form as above).
                    Its source share is no measurement: each cross block keeps half of the residual
                    and every other block's rows sum to 1, so after decoder layer l it is 1 - 0.5^l
                    for every word of every sentence (ROLLOUT_SHARE); none is reported
    value zeroing   for decoder layer l and source token j: set v_j = 0 in that layer's
                    cross-attention, recompute the layer, c_ij = 1 - cos(y_i^{-j}, y_i) on its
                    output (Mohebbi et al. 2023), all (l, j) in one batch of L x S rows. A score
                    under VZ_FLOOR is float noise, not an effect, and counts as 0 (inseq's floor);
                    a row with none above it is left zero ("no measurable effect at this layer")
                    rather than normalised into a full distribution of noise

The rollout of a decoder:

    R_0 = [0 | I]                              target position i holds its own input token
    R   <- C_self R                            self-attention block (T x T)
    R   <- c_res * R + [C_cross R_enc | 0]     cross-attention block: residual share c_res (T,),
                                               encoder outputs' shares C_cross (T x S)

For the recurrent attention models there is one attention and no stack of blocks: the norm
view is ||alpha_ij W_c^ctx h_j||, the share of the context c_j = sum_j alpha_ij h_j that
reaches the output layer through h~_j = tanh(W_c [c_j ; s_j]). The Transformer-only methods
say so (NOT_APPLICABLE) where they do not apply.

Every matrix here is pieces x pieces (target x source, </s> included), each row a
distribution over the source after normalisation; pages merge pieces into words with
piece_words.merge_to_words, as the heatmap does.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .checkpoint import Translator
from .hooks import (
    HeadMask,
    decoder_input,
    decoder_start,
    first,
    forced_pass,
    format_head_mask,
    knocked_out,
    read_head_mask,
    recorded,
    resolve_head_mask,
    sites,
)
from .model import Seq2Seq
from .text import InputError

METHODS = ("weights", "norm", "alti", "rollout", "value_zeroing")
LABELS = {"weights": "weights", "norm": "norm", "alti": "ALTI+", "rollout": "rollout",
          "value_zeroing": "value zeroing"}
RECURRENT_METHODS = ("weights", "norm")
# Rollout's source share after decoder layer l (1-based), the same for every word of every
# sentence: the method's construction, not the model's (module docstring)
ROLLOUT_SHARE = "rollout's source share is 1 − 0.5^l after decoder layer l for every word, by its construction"
# value zeroing: 1 - cos below this is float noise (float32 cosines of near-equal vectors); inseq
# 0.7.1 (attr/feat/ops/value_zeroing.py, min_score_threshold) uses the same floor
VZ_FLOOR = 1e-5
NOT_APPLICABLE = ("{method} needs a Transformer's stack of attention blocks; a recurrent model has one attention "
                  "(weights and norm apply).")
EPS = 1e-12


# ---------------------------------------------------------------------------------------
# What one forced pass leaves behind: each attention block's parts


@dataclass
class Block:
    """One attention block of a forced pass (batch 1): I queries over J positions, H heads.

    values (H, J, d_k)  W_V^h LN(x_j) + b_V^h     weights (H, I, J)   alpha^h_ij
    w_o (d, H d_k), b_o (d,) or None              residual (I, d)     x_i
    out (I, d): the attention's output, sum_j T_i(x_j) + b_O, as the model computed it
    post_norm: the LayerNorm after the residual (post-LN models), else None; normed (I, d) its output"""
    values: torch.Tensor
    weights: torch.Tensor
    w_o: torch.Tensor
    b_o: torch.Tensor | None
    residual: torch.Tensor
    out: torch.Tensor
    post_norm: nn.Module | None = None
    normed: torch.Tensor | None = None
    _vectors: torch.Tensor | None = field(default=None, repr=False)

    def transformed(self) -> torch.Tensor:
        """f^h(x_j) = W_O^h v^h_j: (H, J, d)."""
        H, J, dk = self.values.shape
        w = self.w_o.view(self.w_o.size(0), H, dk).permute(1, 2, 0).contiguous()    # (H, d_k, d)
        return torch.bmm(self.values.contiguous(), w)

    def vectors(self) -> torch.Tensor:
        """T_i(x_j) = sum_h alpha^h_ij f^h(x_j): (I, J, d), as J products (I x H) @ (H x d);
        computed once (norm, ALTI and value zeroing all read it)."""
        if self._vectors is None:
            a = self.weights.permute(2, 1, 0).contiguous()                    # (J, I, H)
            f = self.transformed().transpose(0, 1).contiguous()              # (J, H, d)
            self._vectors = torch.bmm(a, f).transpose(0, 1)
        return self._vectors


def check_model(tr: Translator) -> None:
    """Contributions need attention: any model but the fixed-vector one."""
    if isinstance(tr.model, Seq2Seq) and tr.model.cfg.attention == "none":
        raise InputError(f"{tr.name} has no attention (a fixed-vector model): pick an attention model.")


def methods_for(tr: Translator) -> tuple[str, ...]:
    """The contribution methods that apply to this model."""
    return RECURRENT_METHODS if isinstance(tr.model, Seq2Seq) else METHODS


@dataclass
class Trace:
    encoder: list[Block]
    decoder: list[Block]            # self-attention blocks
    cross: list[Block]
    layer_out: list[torch.Tensor]   # each decoder layer's output (T, d)
    encoder_out: torch.Tensor       # (S, d), what the cross-attention reads


@torch.no_grad()
def trace(model, src: torch.Tensor, tgt: torch.Tensor, head_mask: HeadMask | str = ()) -> Trace:
    """Run one forced pass of (src (1, S), tgt (T,)) and read every attention block's parts
    by forward hooks on its projections and norms (the model itself is unchanged). With
    `head_mask` the pass runs with those heads knocked out (s2s.hooks.knocked_out) and each
    knocked-out head's values are read as 0: its f^h(x_j) = W_O^h v^h_j is then 0, as in a model
    whose W_O columns of that head are zeroed (the hook zeroes the head's slice on its way into
    W_O, which these contributions do not read: they read W_O from the weights)."""
    mask = read_head_mask(head_mask)
    with knocked_out(model, mask):
        t = _trace(model, src, tgt)
    for kind, heads in resolve_head_mask(model, mask).items():
        blocks = {"encoder": t.encoder, "decoder": t.decoder, "cross": t.cross}[kind]
        for layer, h in heads:
            blocks[layer].values[h] = 0
    return t


def _trace(model, src: torch.Tensor, tgt: torch.Tensor) -> Trace:
    enc_sites, dec_sites, cross_sites = sites(model)
    all_sites = [("e", s) for s in enc_sites] + [("d", s) for s in dec_sites] + [("c", s) for s in cross_sites]
    modules = {(n, what): getattr(s, what) for n, (_, s) in enumerate(all_sites) for what in ("q", "v", "o", "norm")}
    modules.update({(n, "layer"): s.layer for n, (_, s) in enumerate(all_sites) if s.layer is not None})
    # hooks.recorded reads this thread's pass only: a loaded model is shared by the app's sessions
    with recorded(modules) as kept:
        p = forced_pass(model, src, decoder_input(model, tgt))
    enc_w, dec_w, cross_w = p.encoder, p.decoder, p.cross
    seen = {key: (x, first(out)) for key, (x, out) in kept.items()}
    blocks: dict[str, list[Block]] = {"e": [], "d": [], "c": []}
    layer_out = []
    weights = {"e": enc_w, "d": dec_w, "c": cross_w}
    for n, (kind, s) in enumerate(all_sites):
        q_in, _ = seen[n, "q"]
        _, v_out = seen[n, "v"]
        _, o_out = seen[n, "o"]
        norm_in, norm_out = seen[n, "norm"]
        l = len(blocks[kind])
        w = weights[kind][l].float()                                        # (H, I, J)
        H = w.size(0)
        values = v_out[0].float().view(v_out.size(1), H, -1).transpose(0, 1)  # (H, J, d_k)
        # pre-LN: the query reads the norm's output and the residual is the norm's input;
        # post-LN: the query reads the residual itself, and the norm comes after the sum
        pre = q_in.shape == norm_out.shape and torch.allclose(q_in.float(), norm_out.float(), atol=1e-5)
        o = s.o
        blocks[kind].append(Block(values, w, o.weight.detach().float(),
                                  None if o.bias is None else o.bias.detach().float(),
                                  (norm_in if pre else q_in)[0].float(), o_out[0].float(),
                                  None if pre else s.norm, None if pre else norm_out[0].float()))
        if kind == "c":
            layer_out.append(seen[n, "layer"][1][0].float())
    encoder_out = seen[len(enc_sites) + len(dec_sites), "v"][0][0].float()   # the first cross block's v input
    return Trace(blocks["e"], blocks["d"], blocks["c"], layer_out, encoder_out)


# ---------------------------------------------------------------------------------------
# Per block: norm and ALTI


def norm_per_head(block: Block) -> torch.Tensor:
    """(H, I, J) ||alpha^h_ij f^h(x_j)|| = alpha^h_ij ||f^h(x_j)|| (Kobayashi et al. 2020)."""
    return block.weights * block.transformed().norm(dim=-1)[:, None, :]


def norm_summed(block: Block) -> torch.Tensor:
    """(I, J) ||T_i(x_j)|| = ||sum_h alpha^h_ij f^h(x_j)||: the layer's output-space view."""
    return block.vectors().norm(dim=-1)


def linearised_norm(norm: nn.Module, parts: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """A LayerNorm made linear at the point: (I, J, d) parts z_ij whose sum (with any bias
    part among them) is total (I, d) -> gamma (z_ij - mean_d(z_ij)) / sigma(total_i), so that
    sum_j of the result + beta = LN(total) exactly (sigma is the real one)."""
    mean = total.mean(-1, keepdim=True)
    sigma = ((total - mean) ** 2).mean(-1, keepdim=True).add(norm.eps).sqrt()        # (I, 1)
    centred = parts - parts.mean(-1, keepdim=True)
    return norm.weight.float() * centred / sigma[:, None, :]


def decomposition(block: Block, self_block: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The block's output split by input: (vectors (I, K, d), rest (I, d)) with sum_k
    vectors + rest = the block's output, K = J (the residual in T_i(x_i)) for self-attention,
    K = 1 + J (the residual first) for cross-attention; before a post-LN norm, or through its
    linearisation after it (then `rest` holds the bias terms and beta)."""
    T = block.vectors()                                                 # (I, J, d)
    if self_block:
        T = T.clone()
        idx = torch.arange(T.size(0), device=T.device)
        T[idx, idx] += block.residual
    else:
        T = torch.cat([block.residual[:, None], T], 1)
    bias = torch.zeros_like(block.residual) if block.b_o is None else block.b_o.expand_as(block.residual)
    if block.post_norm is None:
        return T, bias
    total = T.sum(1) + bias
    parts = linearised_norm(block.post_norm, torch.cat([T, bias[:, None]], 1), total)
    beta = 0 if block.post_norm.bias is None else block.post_norm.bias.float()
    return parts[:, :-1], parts[:, -1] + beta


def alti_block(block: Block, self_block: bool) -> torch.Tensor:
    """(I, K) ALTI contributions of the block, rows summing to 1 (K as in decomposition):
    c_ik = max(0, ||y_i||_1 - ||y_i - T_i(x_k)||_1) / sum_k', with y_i = sum_k T_i(x_k) + the
    bias part: the block's real output, b_O (pre-LN) or the normed b_O and beta (post-LN), as
    the authors' resultant holds it (mt-upc/transformer-contributions, src/contributions.py)."""
    T, rest = decomposition(block, self_block)
    y = T.sum(1, keepdim=True) + rest[:, None]
    c = (y.abs().sum(-1) - (y - T).abs().sum(-1)).clamp(min=0)
    return c / c.sum(1, keepdim=True).clamp(min=EPS)


def _mixing(weights: torch.Tensor) -> torch.Tensor:
    """Rollout's block matrix 0.5 mean_h alpha^h + 0.5 I (self-attention, square)."""
    a = weights.mean(0)
    return 0.5 * a + 0.5 * torch.eye(a.size(0), device=a.device)


def roll_out(encoder: Sequence[torch.Tensor], decoder: Sequence[torch.Tensor], cross: Sequence[torch.Tensor]
             ) -> list[torch.Tensor]:
    """The encoder-decoder rollout: encoder blocks (S, S), decoder self blocks (T, T) and
    cross blocks (T, 1 + S) (the residual first), layer by layer -> after each decoder layer
    R (T, S + T) over [source tokens ; decoder input tokens], rows summing to 1."""
    S = encoder[0].size(0) if encoder else cross[0].size(1) - 1
    r_enc = torch.eye(S, device=cross[0].device)
    for c in encoder:
        r_enc = c @ r_enc
    T = decoder[0].size(0)
    r = torch.cat([torch.zeros(T, S, device=r_enc.device), torch.eye(T, device=r_enc.device)], 1)
    out = []
    for c_self, c_cross in zip(decoder, cross):
        r = c_self @ r
        res, enc = c_cross[:, :1], c_cross[:, 1:]
        r = res * r + torch.cat([enc @ r_enc, torch.zeros(T, T, device=r.device)], 1)
        out.append(r)
    return out


# ---------------------------------------------------------------------------------------
# Value zeroing


@torch.no_grad()
def value_zeroing(model, t: Trace) -> torch.Tensor:
    """(L, T, S): c_ij at decoder layer l = 1 - cos(y_i with v_j zeroed in layer l's
    cross-attention, y_i), y_i the layer's output, clamped at 0 (Mohebbi et al. 2023).

    Zeroing v_j removes exactly one term from the attention's output, a_i - T_i(x_j) (the
    attention is linear in the values), and nothing before the cross-attention changes, so
    the layer is recomputed from there on: its FFN and norms over all (i, j) at once, one
    batch of T x S rows per layer instead of a rerun of the decoder per source token."""
    _, _, cross_sites = sites(model)
    out = []
    for site, b, real in zip(cross_sites, t.cross, t.layer_out):
        dtype = next(site.o.parameters()).dtype
        a = (b.out[:, None] - b.vectors())                                   # (T, S, d): a_i without x_j
        x = b.residual[:, None].expand_as(a)
        extra = {"post": True} if b.post_norm is not None else {}
        zeroed = site.finish(x.to(dtype), a.to(dtype), **extra).float()        # (T, S, d)
        cos = F.cosine_similarity(zeroed, real[:, None], dim=-1)             # (T, S)
        score = 1 - cos
        out.append(torch.where(score < VZ_FLOOR, torch.zeros_like(score), score))
    return torch.stack(out)


# ---------------------------------------------------------------------------------------
# All of it for one pair


def normalised(m: np.ndarray) -> np.ndarray:
    """Rows scaled to sum to 1 (a row of zeros stays zeros)."""
    m = np.asarray(m, dtype=float)
    s = m.sum(-1, keepdims=True)
    return np.divide(m, s, out=np.zeros_like(m), where=s > 0)


@dataclass
class Contributions:
    """Every method's (target x source) matrices for one forced pair, pieces on both axes.

    layers[method]: (L, T, S), one matrix per decoder layer (the rollouts after that layer),
    rows normalised over the source; heads[method]: (L, H, T, S) for weights and norm;
    source_share[method]: (L, T) for alti, the share of output i that came from the source (the
    rest from the target prefix); rollout's is a constant (ROLLOUT_SHARE) and is not kept.
    A recurrent model has L = H = 1. A row of zeros: no source piece had a measurable effect
    (value zeroing under VZ_FLOOR, or ALTI+ clipping every source column at 0)."""
    source_tokens: list[str]
    target_tokens: list[str]
    target_ids: list[int]
    translation: str                # the forced output as text
    forced_from: str                # "greedy" (the model's own output) or "reference"
    layers: dict[str, np.ndarray]
    heads: dict[str, np.ndarray] = field(default_factory=dict)
    source_share: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    head_mask: str = ""             # the heads knocked out while it was read, as --mask-heads writes them

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(m for m in METHODS if m in self.layers)

    def matrix(self, method: str, layer: int | None = None) -> np.ndarray:
        """(T, S) of one method at decoder layer `layer` (0-based; None: the last)."""
        if method not in self.layers:
            raise InputError(f"{LABELS.get(method, method)} does not apply to this model.")
        m = self.layers[method]
        if layer is not None and not -m.shape[0] <= layer < m.shape[0]:
            raise InputError(f"Layer {layer + 1} is out of range: this model has {m.shape[0]} decoder layers.")
        return m[-1 if layer is None else layer]

    def to_json(self, digits: int = 5) -> dict:
        r = (lambda a: np.round(a, digits).tolist())
        return {"translation": self.translation, "forced_from": self.forced_from,
                "source_tokens": self.source_tokens, "target_tokens": self.target_tokens,
                "rows": [{"position": j, "token": t} for j, t in enumerate(self.target_tokens)],
                "columns": [{"position": i, "token": s} for i, s in enumerate(self.source_tokens)],
                "methods": {m: {"layers": r(v), **({"heads": r(self.heads[m])} if m in self.heads else {})}
                            for m, v in self.layers.items()},
                "source_share": {m: r(v) for m, v in self.source_share.items()},
                "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
                **({"head_mask": self.head_mask} if self.head_mask else {})}


def recurrent_contributions(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> dict[str, np.ndarray]:
    """A recurrent attention model's weights alpha (T, S) and norm view ||alpha_ij W_c^ctx h_j||."""
    with torch.no_grad():
        memory, state = model.encode(src, torch.tensor([src.size(1)], device=src.device))
        feed = model.initial_feed(1)
        y = torch.full((1,), decoder_start(model), dtype=torch.long, device=src.device)
        alphas = []
        for j in range(tgt.numel()):
            st = model.decode_step(y, state, feed, memory)
            state, feed = st.state, st.feed
            alphas.append(st.alpha[0].float())
            y = tgt[j:j + 1]
        alpha = torch.stack(alphas)                                          # (T, S)
        H = memory.states.size(-1)
        w_ctx = model.combine.weight[:, :H].float()                          # (E, H): the context's half of W_c
        size = (memory.states[0].float() @ w_ctx.t()).norm(dim=-1)           # ||W_c^ctx h_j|| (S,)
    return {"weights": alpha.cpu().numpy()[None], "norm": normalised((alpha * size).cpu().numpy())[None]}


def contributions(model, src: torch.Tensor, tgt: torch.Tensor, methods: Sequence[str] | None = None,
                  head_mask: HeadMask | str = ()) -> tuple[dict, dict, dict, dict]:
    """(layers, heads, source_share, seconds) for source ids (1, S) and forced target ids (T,),
    with the heads of `head_mask` knocked out (trace): a knocked-out head moves nothing."""
    seconds: dict[str, float] = {}
    head_mask = read_head_mask(head_mask)
    resolve_head_mask(model, head_mask)         # a recurrent model, a head it lacks: one line
    if isinstance(model, Seq2Seq):
        wanted = list(methods or RECURRENT_METHODS)
        for m in wanted:
            if m not in RECURRENT_METHODS:
                raise InputError(NOT_APPLICABLE.format(method=LABELS.get(m, m)))
        t0 = time.perf_counter()
        both = recurrent_contributions(model, src, tgt)
        seconds["trace"] = time.perf_counter() - t0
        return ({m: both[m] for m in wanted}, {m: both[m][:, None] for m in wanted}, {}, seconds)
    wanted = list(methods or METHODS)
    t0 = time.perf_counter()
    t = trace(model, src, tgt, head_mask)
    seconds["trace"] = time.perf_counter() - t0
    np_ = (lambda x: x.detach().cpu().numpy().astype(float))
    layers, heads, share = {}, {}, {}
    with torch.no_grad():
        if "weights" in wanted:
            w = torch.stack([b.weights for b in t.cross])                          # (L, H, T, S)
            heads["weights"], layers["weights"] = np_(w), np_(w.mean(1))
        if "norm" in wanted:
            t0 = time.perf_counter()
            heads["norm"] = normalised(np_(torch.stack([norm_per_head(b) for b in t.cross])))
            layers["norm"] = normalised(np_(torch.stack([norm_summed(b) for b in t.cross])))
            seconds["norm"] = time.perf_counter() - t0
        for m in ("alti", "rollout"):
            if m not in wanted:
                continue
            t0 = time.perf_counter()
            if m == "alti":
                enc = [alti_block(b, True) for b in t.encoder]
                dec = [alti_block(b, True) for b in t.decoder]
                cross = [alti_block(b, False) for b in t.cross]
            else:
                enc = [_mixing(b.weights) for b in t.encoder]
                dec = [_mixing(b.weights) for b in t.decoder]
                cross = [torch.cat([torch.full((b.weights.size(1), 1), 0.5, device=b.weights.device),
                                    0.5 * b.weights.mean(0)], 1) for b in t.cross]
            rolled = torch.stack(roll_out(enc, dec, cross))                       # (L, T, S + T)
            S = src.size(1)
            if m == "alti":
                share[m] = np_(rolled[:, :, :S].sum(-1))
            layers[m] = normalised(np_(rolled[:, :, :S]))
            seconds[m] = time.perf_counter() - t0
    if "value_zeroing" in wanted:
        t0 = time.perf_counter()
        # (the layer's rest after its attention: no head in it, so no mask to hold; the trace's
        # outputs and values are already the knocked-out pass's)
        layers["value_zeroing"] = normalised(np_(value_zeroing(model, t)))
        seconds["value_zeroing"] = time.perf_counter() - t0
    return layers, heads, share, seconds


def explain_contributions(tr: Translator, text: str, reference: str | None = None,
                          methods: Sequence[str] | None = None, head_mask: HeadMask | str = ()) -> Contributions:
    """Every contribution method that applies to `tr` (or `methods`) for the greedy
    translation of `text` (or `reference`), forced, as attributions.explain forces it; with the
    heads of `head_mask` knocked out throughout (the greedy translation decoded so too)."""
    from .attributions import source_ids, target_ids
    from .decode import forced
    check_model(tr)
    mask = read_head_mask(head_mask)
    resolve_head_mask(tr.model, mask)         # a head the model lacks: one line, before any work
    unknown = [m for m in (methods or ()) if m not in METHODS]
    if unknown:
        raise InputError(f"Unknown contribution method {unknown[0]!r}: use {', '.join(METHODS)}.")
    t0 = time.perf_counter()
    src_list = source_ids(tr, text)
    with knocked_out(tr.model, mask):         # the output explained: the knocked-out model's own
        tgt_list, frm = target_ids(tr, text, reference)
        d = forced(tr, text, reference_ids=tgt_list)
    decode_s = time.perf_counter() - t0
    src = torch.tensor([src_list], device=tr.device)
    tgt = torch.tensor(tgt_list, device=tr.device)
    layers, heads, share, seconds = contributions(tr.model, src, tgt, methods, mask)
    seconds = {"decode": decode_s, **seconds}
    seconds["total"] = time.perf_counter() - t0
    return Contributions(d.source_tokens, d.target_tokens, list(tgt_list), d.translation, frm, layers, heads, share,
                         seconds, format_head_mask(mask))


# ---------------------------------------------------------------------------------------
# Every method by one name, as an aligner reads it (s2s.alignment --method)

# the command line's names: the contributions above and the gradient attributions (s2s.attributions)
ALIGN_METHODS = {"weights": "weights", "norm": "norm", "alti": "alti", "rollout": "rollout",
                 "value-zeroing": "value_zeroing", "grad-x-input": "grad_x_input", "ig": "integrated_gradients",
                 "loo": "leave_one_out"}
ATTRIBUTIONS = ("grad_x_input", "integrated_gradients", "leave_one_out")


def applies(tr: Translator, method: str) -> bool:
    """Whether `method` (a value of ALIGN_METHODS) applies to this model."""
    return method in ATTRIBUTIONS or method in methods_for(tr)


def method_matrices(tr: Translator, src_ids: Sequence[int], tgt_ids: Sequence[int], method: str) -> np.ndarray:
    """(L, T, S) matrices of one method for a forced pair of ids, rows normalised over the
    source: a contribution per decoder layer, or an attribution's |a_ij| (one layer: it
    reads the whole model)."""
    from . import attributions as attr
    check_model(tr)
    if not applies(tr, method):
        raise InputError(NOT_APPLICABLE.format(method=LABELS.get(method, method)))
    src = torch.tensor([list(src_ids)], device=tr.device)
    tgt = torch.tensor(list(tgt_ids), device=tr.device)
    if method in ATTRIBUTIONS:
        if method == "grad_x_input":
            a = attr.grad_x_input(tr.model, src, tgt)
        elif method == "integrated_gradients":
            a, _ = attr.integrated_gradients(tr.model, src, tgt)
        else:
            a = attr.leave_one_out(tr.model, src, tgt)
        return normalised(np.abs(a))[None]
    layers, _, _, _ = contributions(tr.model, src, tgt, [method])
    return layers[method]
