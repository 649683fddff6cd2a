"""The neuron view (Vig 2019, BertViz): how one head computes one row of its attention.

For head h of a layer, a query position i and the keys j it may read, the row is

    q_i = x_i W_Q^h + b_Q^h          (d_k)      the query, the head's slice of the projection
    k_j = x'_j W_K^h + b_K^h          (J, d_k)   every key (x' = x for self-attention, the
                                                 encoder's output for cross-attention)
    q_i ∘ k_j                         (J, d_k)   elementwise: which dimensions pull key j up or down
    q_i · k_j = sum_d (q_i ∘ k_j)_d   (J,)
    e_ij = s q_i · k_j + b_ij         (J,)       the scaling s and any bias: the softmax's logits
    alpha_ij = softmax_j(e_ij)        (J,)       the row of the head's attention

and each family does the scaling and the bias its own way; the view reports what the model does:

    ours (the shipped Transformer)   s = 1/sqrt(d_k), no bias
    Marian, M2M100, NLLB, BART       s = the attention module's `scaling`, d_k^-0.5 (transformers 5
                                     multiplies q . k by it; older releases multiplied q as it left
                                     q_proj: the same numbers, q here is q_proj's output unscaled)
    T5                               s = 1: no division by sqrt(d_k) (T5 folds it into W_Q's
                                     initialisation), and in self-attention (encoder and decoder) a
                                     learned relative position bias b_ij = B^h[bucket(j - i)], one
                                     table per stack read by all its layers; none in cross-attention

Decoder self-attention is causal: query i reads the keys j <= i only (the others are masked to
-inf and get weight 0), so the view lists those. The queries and keys are read by forward hooks
on the projections that s2s.hooks finds (hooks.Site: q, k and the attention
module) during one teacher-forced pass, the model itself unchanged.

A recurrent model (model.py, attention.py) has one attention, over the encoder states h_j, for
each output step t with the decoder state s_t as its query; its formula is the scoring function's:

    dot         e_tj = s_t · h_j                         query s_t,          keys h_j
    general     e_tj = s_t · (W h_j)                     query s_t,          keys W h_j
    scaled-dot  e_tj = (U s_t) · (W h_j) / sqrt(d)       query U s_t,        keys W h_j
    additive    e_tj = v · tanh(W1 h_j + W2 s_t + b)     query W2 s_t + b,   keys W1 h_j,
                                                         hidden tanh(...) (J, d), and the products
                                                         v ∘ tanh(...) whose sum is e_tj

and a copying model (the shipped ones) adds its location cue to the logits, g_t alpha_{t-1,j-1}
1[x_{j-1} = y_{t-1}] (model.py), reported as the bias.

    python -m s2s.heads --model checkpoints/en-fr-transformer --kind decoder --layer 2 --head 3 \\
        --query 4 "She has a big black dog." --json

Layer, head and query are counted from 1 on the command line, as the page shows them (0-based in
the functions here).

Which heads matter (s2s.head_importance: Michel et al.'s importance, Voita et al.'s confidence
and roles, BLEU as heads are pruned):

    python -m s2s.heads importance --model M --pairs FILE.tsv [--limit N] [--json]
    python -m s2s.heads prune --model M --pairs FILE.tsv [--limit N] --steps K [--rank-pairs FILE.tsv] [--json]
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .attributions import target_ids as output_ids
from .checkpoint import CheckpointError, Translator, load_translator
from .decode import encode_source, greedy
from .hooks import (
    MASK_HELP,
    HeadMask,
    Site,
    decoder_input,
    decoder_start,
    first,
    forced_pass,
    format_head_mask,
    head_counts,
    knocked_out,
    parse_head_mask,
    read_head_mask,
    recorded,
    sites_by_kind,
)
from .hub import MODEL_HELP, add_model_options, model_options
from .model import Seq2Seq
from .piece_words import HEAD_KINDS
from .text import InputError, OneLineErrorParser, clean_text, text_argument
from .transformer import Transformer

KINDS = tuple(HEAD_KINDS)        # cross, encoder, decoder


@dataclass
class NeuronView:
    """One head's computation of one query's row, every step of it (numbers as float64 arrays).

    query (d,)          q_i (a recurrent model: s_t, U s_t or W2 s_t + b)
    keys (J, d)         k_j (h_j, W h_j, W1 h_j)
    products (J, d)     q ∘ k_j (additive: v ∘ tanh(q + k_j))
    dots (J,)           their sums over d, q · k_j (additive: v · tanh(...))
    scale               what the dots are multiplied by (1/sqrt(d_k); 1 where there is none)
    bias (J,) or None   what is added after it: T5's relative position bias, a copying model's location cue
    scores (J,)         e_ij = scale * dots + bias, the logits the softmax takes
    weights (J,)        softmax(scores): the row of the model's attention
    hidden (J, d), v (d,): the additive score's tanh(W1 h_j + W2 s + b) and v (None elsewhere)
    labels: each part's name in this formula (query, keys, products, dots, scale, bias, scores, formula),
        and what the bias is, in words (bias_name)
    notes: how this family's formula differs from softmax(q · k / sqrt(d_k)), in words"""
    model: str
    family: str                   # "transformer" (ours), a hub model's model_type, or a scoring function
    kind: str                     # cross, encoder or decoder
    layer: int                    # 0-based
    head: int
    query_index: int
    query_token: str
    key_tokens: list[str]
    query: np.ndarray
    keys: np.ndarray
    products: np.ndarray
    dots: np.ndarray
    scale: float
    bias: np.ndarray | None
    scores: np.ndarray
    weights: np.ndarray
    labels: dict[str, str]
    notes: list[str] = field(default_factory=list)
    hidden: np.ndarray | None = None
    v: np.ndarray | None = None
    source_tokens: list[str] = field(default_factory=list)
    target_tokens: list[str] = field(default_factory=list)
    translation: str = ""
    forced_from: str = "greedy"
    seconds: float = 0.0
    head_mask: str = ""           # the heads knocked out while it was read (--mask-heads), "" none

    @property
    def recurrent(self) -> bool:
        return self.family in ("dot", "general", "additive", "scaled-dot")

    def to_json(self, digits: int = 6) -> dict:
        r = (lambda a: None if a is None else np.round(np.asarray(a, dtype=float), digits).tolist())
        out = {"model": self.model, "family": self.family, "kind": self.kind, "layer": self.layer + 1,
               "head": self.head + 1, "query_position": self.query_index + 1, "query_token": self.query_token,
               "key_tokens": self.key_tokens, "translation": self.translation, "forced_from": self.forced_from,
               "formula": self.labels["formula"], "query": r(self.query), "keys": r(self.keys),
               "products": r(self.products), "dots": r(self.dots), "scale": self.scale, "bias": r(self.bias),
               "scores": r(self.scores), "weights": r(self.weights), "labels": self.labels, "notes": self.notes}
        if self.hidden is not None:
            out["hidden"], out["v"] = r(self.hidden), r(self.v)
        if self.head_mask:
            out["head_mask"] = self.head_mask
        return out


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().cpu().numpy()


def _check(what: str, value: int, n: int, unit: str) -> None:
    """InputError, in the page's and the command line's numbering (from 1), for value outside 0..n-1."""
    if not 0 <= value < n:
        raise InputError(f"{what} {value + 1} is out of range: {unit} {'1' if n == 1 else f'1 to {n}'}.")


# ---------------------------------------------------------------------------------------
# Transformers: ours and Hugging Face's


def _family(model) -> str:
    return "transformer" if isinstance(model, Transformer) else str(model.hf.config.model_type)


def _is_t5(attn) -> bool:
    return hasattr(attn, "relative_attention_num_buckets")


@torch.no_grad()
def _read_head(model, site: Site, kind: str, src: torch.Tensor, tgt: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, float]:
    """One forced pass of (src (1, S), tgt (T,)) with readers on one block's projections (`site`,
    a hooks.Site): (q (H, I, d_k), k (H, J, d_k), position bias (H, I, J) or None, scale)."""
    attn = site.attn
    modules = {"q": site.q, "k": site.k}
    t5 = _is_t5(attn)
    if t5:      # T5Attention returns (output, position_bias, ...): the bias it added, without the mask
        modules["attn"] = attn
    with recorded(modules) as seen:      # this thread's pass only (a loaded model is shared)
        forced_pass(model, src, decoder_input(model, tgt))
    if isinstance(model, Transformer):
        scale = 1 / math.sqrt(attn.d_k)
    else:       # T5's is 1 (an older T5Attention has no `scaling`: it never scaled)
        scale = float(getattr(attn, "scaling", 1.0 if t5 else None))
    H = site.heads
    q, k = first(seen["q"][1])[0].float(), first(seen["k"][1])[0].float()     # (I, H d_k), (J, H d_k)
    q = q.view(q.size(0), H, -1).transpose(0, 1)
    k = k.view(k.size(0), H, -1).transpose(0, 1)
    # T5's cross-attention adds a bias of zeros (it has no position table): none is reported
    bias = seen["attn"][1][1][0].float() if t5 and kind != "cross" else None    # (H, I, J)
    return q, k, bias, scale


def transformer_view(tr: Translator, src_ids: Sequence[int], tgt_ids: Sequence[int], kind: str, layer: int,
                     head: int, query: int) -> NeuronView:
    """The neuron view of a Transformer (ours or a hub model's) for a forced pair of ids."""
    model = tr.model
    if kind not in KINDS:
        raise InputError(f"Unknown attention kind {kind!r}: use {', '.join(KINDS)}.")
    sites = sites_by_kind(model)[kind]
    _check("Layer", layer, len(sites), f"its {HEAD_KINDS[kind].name} has layers")
    site = sites[layer]
    _check("Head", head, site.heads, "its heads are")
    tok = tr.tokenizer
    src_tokens, tgt_tokens = tok.pieces(src_ids), tok.pieces(tgt_ids)
    rows = src_tokens if kind == "encoder" else tgt_tokens
    cols = {"cross": src_tokens, "encoder": src_tokens, "decoder": ["<s>"] + tgt_tokens[:-1]}[kind]
    _check("Query", query, len(rows), f"the {'source' if kind == 'encoder' else 'output'} positions are")
    src = torch.tensor([list(src_ids)], device=tr.device)
    tgt = torch.tensor(list(tgt_ids), device=tr.device)
    q, k, bias, scale = _read_head(model, site, kind, src, tgt)
    J = query + 1 if kind == "decoder" else k.size(1)     # causal: keys up to the query's own position
    # the model's own q and k (float32); the rest in float64, so that q·k_j is the products' sum exactly
    qi, kj = q[head, query].double(), k[head, :J].double()                   # (d_k,), (J, d_k)
    products = qi[None] * kj                                                  # (J, d_k)
    dots = products.sum(-1)
    b = None if bias is None else bias[head, query, :J].double()
    scores = dots * scale + (0 if b is None else b)
    weights = F.softmax(scores, -1)
    family = _family(model)
    t5 = family == "t5"
    labels = {"query": "q", "keys": "k_j", "products": "q ∘ k_j", "dots": "q·k_j",
              "scale": "no scaling" if scale == 1 else f"× 1/√{qi.numel()}",
              "bias": "+ b(j − i)" if b is not None else "", "scores": "score e_j",
              "bias_name": "relative position bias b(j − i)" if b is not None else "",
              "formula": ("α_j = softmax_j(q·k_j" + ("" if scale == 1 else f" / √{qi.numel()}")
                          + (" + b(j − i)" if b is not None else "") + ")")}
    notes = []
    if t5:
        notes.append("T5 does not divide by √d_k: its initialisation folds the scale into W_Q.")
        notes.append("T5 adds a learned relative position bias b(j − i), one per head and distance bucket, read by "
                     "every layer of its stack." if b is not None else
                     "T5's cross-attention has no position bias.")
    elif family != "transformer":
        notes.append(f"{family}: q·k_j is multiplied by the attention module's scaling, d_k^-0.5 = {scale:.4g}.")
    if kind == "decoder":
        notes.append("Decoder self-attention is causal: the query reads only its own position and those before it.")
    return NeuronView(tr.name, family, kind, layer, head, query, rows[query], list(cols[:J]), _np(qi), _np(kj),
                      _np(products), _np(dots), float(scale), None if b is None else _np(b), _np(scores),
                      _np(weights), labels, notes, source_tokens=src_tokens, target_tokens=tgt_tokens,
                      translation=tok.decode(tgt_ids))


# ---------------------------------------------------------------------------------------
# Recurrent models: one attention, the scoring function's own formula


@torch.inference_mode()
def recurrent_view(tr: Translator, src_ids: Sequence[int], tgt_ids: Sequence[int], step: int) -> NeuronView:
    """The neuron view of a recurrent attention model at output step `step` (0-based): its
    decoder state s_t as the query over the encoder states, through its scoring function."""
    from .attention import AdditiveScore, DotScore, GeneralScore, ScaledDotScore
    model: Seq2Seq = tr.model
    tok = tr.tokenizer
    src_tokens, tgt_tokens = tok.pieces(src_ids), tok.pieces(tgt_ids)
    _check("Output step", step, len(tgt_tokens), "the output steps are")
    src = torch.tensor([list(src_ids)], device=tr.device)
    tgt = torch.tensor(list(tgt_ids), device=tr.device)
    memory, state = model.encode(src, torch.tensor([src.size(1)], device=src.device))
    feed = model.initial_feed(1)
    y = torch.full((1,), decoder_start(model), dtype=torch.long, device=src.device)
    for t in range(step + 1):       # the forced decoding up to step t, as s2s.decode runs it
        before = state
        st = model.decode_step(y, state, feed, memory)
        state, feed = st.state, st.feed
        if t < step:
            y = tgt[t:t + 1]
    s = st.state[0].float()                                                    # (1, H) s_t
    keys = memory.keys[0].double()                                             # (J, d) the scorer's keys
    scorer = model.scorer
    hidden = v = None
    if isinstance(scorer, AdditiveScore):
        qv = scorer.W2(s)[0].double()                                          # W2 s + b
        hidden = (keys + qv).tanh()                                            # (J, d)
        v = scorer.v.weight[0].double()
        products = v * hidden
    else:
        qv = (scorer.U(s)[0] if isinstance(scorer, ScaledDotScore) else s[0]).double()
        products = qv * keys
    scale = scorer.scale if isinstance(scorer, ScaledDotScore) else 1.0
    dots = products.sum(-1)
    bias = memory.mask_bias[0].double()                                        # 0 at every real position
    cue = None
    if model.next_piece is not None:    # a copying model's location cue (model.read_source)
        cue = (model.next_piece(st.state[0]) * model.follows(y, memory.src, before[-1]))[0].double()
        bias = bias + cue
    scores = dots * scale + bias
    weights = F.softmax(scores, -1)
    name = model.cfg.attention
    d = qv.numel()
    labels = {
        DotScore: {"query": "s_t", "keys": "h_j", "products": "s_t ∘ h_j", "dots": "s_t·h_j",
                   "formula": "α_j = softmax_j(s_t·h_j"},
        GeneralScore: {"query": "s_t", "keys": "W h_j", "products": "s_t ∘ W h_j", "dots": "s_tᵀW h_j",
                       "formula": "α_j = softmax_j(s_tᵀ W h_j"},
        ScaledDotScore: {"query": "U s_t", "keys": "W h_j", "products": "U s_t ∘ W h_j", "dots": "(U s_t)·(W h_j)",
                         "formula": f"α_j = softmax_j((U s_t)·(W h_j) / √{d}"},
        AdditiveScore: {"query": "W2 s_t + b", "keys": "W1 h_j", "products": "v ∘ tanh(…)",
                        "dots": "vᵀ tanh(…)", "formula": "α_j = softmax_j(vᵀ tanh(W1 h_j + W2 s_t + b)"},
    }[type(scorer)]
    labels = {**labels, "scale": f"× 1/√{d}" if scale != 1 else "no scaling",
              "bias": "+ cue" if cue is not None else "", "scores": "score e_j",
              "bias_name": "copy's location cue" if cue is not None else ""}
    labels["formula"] += (" + g α_{t−1,j−1}[x_{j−1} = y_{t−1}]" if cue is not None else "") + ")"
    notes = [f"{name} attention: the decoder state s_t of output step {step + 1} is the query over the "
             "encoder states h_j."]
    if cue is not None:
        notes.append("A copying model adds its location cue: a bonus for the source piece after the one it just "
                     "copied, g α_{t−1,j−1}[x_{j−1} = y_{t−1}] (0 where that piece was not the one written).")
    return NeuronView(tr.name, name, "cross", 0, 0, step, tgt_tokens[step], src_tokens, _np(qv), _np(keys),
                      _np(products), _np(dots), float(scale), None if cue is None else _np(cue), _np(scores),
                      _np(weights), labels, notes, None if hidden is None else _np(hidden),
                      None if v is None else _np(v), src_tokens, tgt_tokens, tok.decode(tgt_ids))


# ---------------------------------------------------------------------------------------
# One entry point


def check_model(tr: Translator) -> None:
    if isinstance(tr.model, Seq2Seq) and tr.model.scorer is None:
        raise InputError(f"{tr.name} has no attention (a fixed-vector model): pick an attention model.")


def neuron_view(tr: Translator, text: str, kind: str = "cross", layer: int = 0, head: int = 0, query: int = 0,
                reference: str | None = None, target_ids: Sequence[int] | None = None,
                head_mask: HeadMask | str = ()) -> NeuronView:
    """The neuron view of `tr` for `text`, forced along `target_ids`, or `reference`, or the model's
    own greedy translation: attention `kind` (cross, encoder, decoder), `layer`, `head` and query
    position `query`, all 0-based (a recurrent model: kind cross, layer and head 0, query an
    output step). With `head_mask` the whole pass (and the greedy translation) runs with those
    heads knocked out (s2s.hooks.knocked_out): the head's own query and keys are still computed
    (a knockout zeroes its output, not its weights), but whatever reads a knocked-out head's output
    upstream of it changes. InputError, one line, for anything out of range."""
    mask = read_head_mask(head_mask)
    with knocked_out(tr.model, mask):
        view = _neuron_view(tr, text, kind, layer, head, query, reference, target_ids)
    view.head_mask = format_head_mask(mask)
    return view


def _neuron_view(tr: Translator, text: str, kind: str, layer: int, head: int, query: int, reference: str | None,
                 target_ids: Sequence[int] | None) -> NeuronView:
    t0 = time.perf_counter()
    check_model(tr)
    if kind not in KINDS:
        raise InputError(f"Unknown attention kind {kind!r}: use {', '.join(KINDS)}.")
    src = encode_source(tr, text)       # the decoding's own limits: one forced pass costs no more than a decoding
    frm = "given"
    if target_ids is None and reference is None:
        target_ids, frm = greedy(tr, text).target_ids, "greedy"
    elif target_ids is None:            # (refused in one line beyond the model's positions)
        target_ids, frm = output_ids(tr, text, reference)
    if isinstance(tr.model, Seq2Seq):
        if kind != "cross":
            raise InputError(f"{tr.name} is a recurrent model: it has one attention, cross-attention (output → "
                             "source), so use kind cross with layer 1 and head 1.")
        _check("Layer", layer, 1, "a recurrent model has layer")
        _check("Head", head, 1, "a recurrent model has head")
        view = recurrent_view(tr, src, target_ids, query)
    else:
        view = transformer_view(tr, src, target_ids, kind, layer, head, query)
    view.forced_from = frm
    view.seconds = time.perf_counter() - t0
    return view


# ---------------------------------------------------------------------------------------
# CLI


def _table(v: NeuronView) -> str:
    """The row as text: one line per key, its q·k, score and weight."""
    lines = [f"{v.model}, {HEAD_KINDS[v.kind].name}, layer {v.layer + 1}, head {v.head + 1}: query "
             f"{v.query_index + 1} {v.query_token!r} ({len(v.query)} dimensions)", v.labels["formula"]]
    lines += [f"  note: {n}" for n in v.notes]
    width = max(len(t) for t in v.key_tokens)
    lines.append(f"  {'key':<{width}}  {v.labels['dots']:>12}  {'bias':>9}  {'score':>9}  {'weight':>7}")
    for j, t in enumerate(v.key_tokens):
        b = "" if v.bias is None else f"{v.bias[j]:9.3f}"
        lines.append(f"  {t:<{width}}  {v.dots[j]:12.4f}  {b:>9}  {v.scores[j]:9.4f}  {v.weights[j]:7.4f}")
    return "\n".join(lines)


def _ranking_parser(command: str, description: str) -> OneLineErrorParser:
    p = OneLineErrorParser(prog=f"python -m s2s.heads {command}", description=description)
    p.add_argument("--model", required=True, help="a Transformer: " + MODEL_HELP)
    add_model_options(p)
    p.add_argument("--pairs", required=True, metavar="FILE.tsv", help="English<TAB>French pairs (held out)")
    p.add_argument("--limit", type=int, help="the first N pairs only")
    p.add_argument("--frequencies", metavar="FILE.tsv",
                   help="pairs whose English side gives the pieces' frequencies for the rare-word role (default: "
                        "a shipped model's training corpus; a hub model's: the pairs themselves)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch's threads (default 1: one pair at a time gains nothing from a second, and on a busy "
                        "2-core machine a second thread's spinning made the whole run 20 times slower)")
    p.add_argument("--max-minutes", type=float, default=60.0,
                   help="refuse a run estimated (from its first timed step) to take longer (default 60)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _parameters(spec: str) -> int | None:
    """A hub folder's or cached model's parameter count from its weights file's header (no weights
    read), None where it cannot be told before loading (a shipped checkpoint: small)."""
    from .hub import HubError, is_hub_spec, is_pretrained_folder, registry_row
    if not (is_hub_spec(spec) or is_pretrained_folder(spec)):
        return None
    try:
        return registry_row(spec)[1].get("parameters")
    except HubError:
        return None


def _bar():
    """A progress callback on stderr when it is a terminal (tqdm), and its closer."""
    from tqdm import tqdm
    bar = tqdm(total=100, unit="%", file=sys.stderr, disable=None)

    def progress(share: float, stage: str) -> None:
        bar.set_description(stage)
        bar.update(round(share * 100) - bar.n)
    return progress, bar.close


def _importance_table(r) -> str:
    lines = [f"{r.model}: {r.pairs} pairs ({r.skipped} skipped); rare-word frequencies from {r.frequency_source}",
             "kind     layer head  importance  normalised  confidence  roles"]
    for k in KINDS:
        for l, row in enumerate(r.roles[k]):
            for h, role in enumerate(row):
                lines.append(f"{k:<8} {l + 1:>5} {h + 1:>4}  {r.importance[k][l, h]:10.4f}  "
                             f"{r.normalised[k][l, h]:10.4f}  {r.confidence[k][l, h]:10.3f}  {', '.join(role['tags'])}")
    return "\n".join(lines)


def ranking_main(argv: Sequence[str]) -> int:
    """`python -m s2s.heads importance ...` and `python -m s2s.heads prune ...`."""
    from .head_importance import (
        SCOPES,
        check_heads,
        duration,
        estimate_seconds,
        importance,
        memory_line,
        prune_curves,
        prune_decodings,
        pruning_summary,
        read_scored_pairs,
    )
    from .neighbours.identity import model_identity
    command, rest = argv[0], list(argv[1:])
    if command == "importance":
        p = _ranking_parser(command, "Michel et al.'s importance of every head, Voita et al.'s confidence and roles.")
    else:
        p = _ranking_parser(command, "BLEU of greedy decoding as heads are knocked out 10% at a time.")
        p.add_argument("--steps", type=int, default=10, help="how many 10%% steps (1-10, default 10: up to every head)")
        p.add_argument("--seed", type=int, default=0, help="the random order's seed (default 0)")
        p.add_argument("--scope", action="append", choices=SCOPES,
                       help="all heads or one kind (repeatable; default: all four)")
        p.add_argument("--rank-pairs", metavar="FILE.tsv",
                       help="rank the heads on these pairs (the first --limit of them), as Michel et al. rank on a "
                            "set apart from the one they prune on (default: the pruned pairs themselves)")
    a = p.parse_args(rest)
    progress, close = _bar()
    try:
        if command == "prune" and not 1 <= a.steps <= 10:
            raise InputError(f"--steps is how many 10% steps to take, 1 to 10, not {a.steps}.")
        pairs = read_scored_pairs(a.pairs, a.limit)
        if (n := _parameters(a.model)) and (line := memory_line(n)):
            raise InputError(line)              # before loading: a model too large never starts
        tr = load_translator(a.model, **model_options(a))
        if a.threads < 1:
            raise InputError(f"--threads must be at least 1, not {a.threads}.")
        torch.set_num_threads(a.threads)
        rank_on = read_scored_pairs(a.rank_pairs, a.limit) if getattr(a, "rank_pairs", None) else pairs
        check_heads(tr)
        if a.frequencies is not None and not os.path.isfile(a.frequencies):    # refused before the estimate's line
            raise InputError(f"No frequencies file at {a.frequencies}.")
        scopes = getattr(a, "scope", None) or SCOPES
        decodings = prune_decodings(head_counts(tr.model), a.steps, scopes) if command == "prune" else 0
        est = estimate_seconds(tr, rank_on, decodings)
        said = (f"about {duration(est['total'])} (importance {duration(est['importance'])}"
                + (f", {decodings} decodings {duration(est['pruning'])}" if decodings else "") + ")")
        if est["total"] > a.max_minutes * 60:
            raise InputError(f"This run would take {said}, over --max-minutes {a.max_minutes:g}: use fewer pairs "
                             "(--limit) or allow it (--max-minutes).")
        print(f"estimate: {said}", file=sys.stderr)
        ranked = importance(tr, rank_on, a.frequencies, progress)
        said = "python -m s2s.heads " + " ".join(argv)
        out = dict(ranked.to_json(), command=said) if command == "importance" else dict(
            prune_curves(tr, pairs, ranked, a.steps, a.seed, scopes, progress),
            command=said, importance_seconds=round(ranked.seconds["total"], 2),
            importance_on=(f"{a.rank_pairs}: its first {ranked.pairs} usable pairs" if a.rank_pairs else
                           f"the same {ranked.pairs} pairs (the pruned pairs themselves)"),
            model_identity=model_identity(tr))
        if command == "prune":
            out["summary"] = pruning_summary(out)["sentence"]
    except (CheckpointError, InputError) as e:
        close()
        print(f"error: {e}", file=sys.stderr)
        return 2
    close()
    if a.json:
        print(json.dumps(out, ensure_ascii=False))
    elif command == "importance":
        print(_importance_table(ranked))
    else:
        print(f"{out['model']}: BLEU {out['bleu']} on {out['pairs']} pairs, greedy")
        for c in out["curves"]:
            points = "  ".join(f"{q['heads']}:{q['bleu']:.1f}" for q in c["points"])
            print(f"{c['scope']:<8} {c['order']:<10} {points}")
        print(out["summary"])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("importance", "prune"):
        return ranking_main(argv)
    p = OneLineErrorParser(prog="python -m s2s.heads", description=__doc__.splitlines()[0],
                           epilog="Also: python -m s2s.heads importance --model M --pairs FILE.tsv [--limit N] "
                                  "[--json], and python -m s2s.heads prune ... --steps K (see --help of each).")
    p.add_argument("--model", required=True, help="a model with attention: " + MODEL_HELP)
    add_model_options(p)
    p.add_argument("--kind", choices=KINDS, default="cross",
                   help="cross (output → source; a recurrent model's only one), encoder or decoder self-attention")
    p.add_argument("--layer", type=int, default=1, help="the layer, from 1 (default 1)")
    p.add_argument("--head", type=int, default=1, help="the head, from 1 (default 1)")
    p.add_argument("--query", type=int, default=1,
                   help="the query's position, from 1: an output piece (cross, decoder) or a source piece (encoder)")
    p.add_argument("--reference", metavar="FRENCH", help="force this translation (default: the model's greedy one)")
    p.add_argument("--mask-heads", metavar="KIND:LAYER.HEAD", default="",
                   help="read the model with these heads knocked out: " + MASK_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("text", nargs="*", help="the English text (after --, if it starts with a dash)")
    a = p.parse_args(argv)
    text = text_argument(a.text)
    try:
        clean_text(text)      # an empty text says so before a model is loaded
        mask = parse_head_mask(a.mask_heads)
        tr = load_translator(a.model, **model_options(a))
        v = neuron_view(tr, text, a.kind, a.layer - 1, a.head - 1, a.query - 1, a.reference, head_mask=mask)
    except (CheckpointError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(v.to_json(), ensure_ascii=False) if a.json else _table(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
