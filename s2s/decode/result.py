"""What a decoding returns: the output and, per step, the model's log-probs, attention and
states (`Decoding`), one beam hypothesis (`Hypothesis`), and how they are read (the attention
of one head or the last layer's mean; how much of the source an output's attention reached)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import head_or_mean
from ..piece_words import HEAD_KINDS  # a Transformer's three kinds of attention

TOPK_RECORDED = 5   # next-token candidates kept per step, for the step-by-step view


@dataclass
class Decoding:
    source_tokens: list[str]          # pieces, ending in </s>
    target_tokens: list[str]          # pieces, ending in </s> when the decoder stopped by itself
    target_ids: list[int]
    translation: str
    token_log_probs: list[float]      # log p(y_j | y_<j, x) of each target token
    attention: np.ndarray | None      # (len(target_tokens), len(source_tokens)), rows sum to 1
    states: np.ndarray | None         # (len(target_tokens), H) decoder state s_j
    contexts: np.ndarray | None       # (len(target_tokens), H) context c_j (the same row every step without attention)
    encoder_states: np.ndarray | None  # (len(source_tokens), H) encoder states h_i
    step_top: list[list[tuple[str, float]]] = field(default_factory=list)   # top next tokens, p
    cells: np.ndarray | None = None   # (len(target_tokens), H) LSTM decoder cell state c_j; None for RNN/GRU
    nbest: list["Hypothesis"] = field(default_factory=list)                 # beam search only
    beam_tree: list[dict] = field(default_factory=list)                     # beam search only
    token_ranks: list[int] = field(default_factory=list)  # rank of y_j among all tokens at step j (1 = the argmax)
    # Transformer only (None for recurrent models). For a Transformer, `attention` above is
    # the last layer's cross-attention averaged over its heads; these hold every layer and head.
    cross_attention: np.ndarray | None = None            # (layers, heads, target, source)
    encoder_self_attention: np.ndarray | None = None     # (layers, heads, source, source)
    decoder_self_attention: np.ndarray | None = None     # (layers, heads, target, target), 0 above the diagonal
    # steering (DecodeSettings.target_prefix): the first prefix_length target pieces were given, not
    # chosen; their log-probs, ranks and attention rows are the model's own, as for any other step
    prefix_length: int = 0
    prefix_unknown: list[str] = field(default_factory=list)   # the prefix's characters read as <unk>
    # the search stopped it at its length limit (s2s.decode.length_limit): no </s>, or a </s> that a
    # hub model's forced_eos wrote there where the model's own top choice was another piece
    cut: bool = False

    @property
    def log_prob(self) -> float:
        return float(sum(self.token_log_probs))

    def without_states(self) -> "Decoding":
        """The same decoding without its per-step vectors (states, contexts, encoder states,
        cells): all a view of tokens, scores and attention needs, and about 15x smaller to
        keep in a cache shared by many users."""
        return replace(self, states=None, contexts=None, encoder_states=None, cells=None)

    def to_json(self) -> dict:
        out = {"translation": self.translation, "source_tokens": self.source_tokens,
               "target_tokens": self.target_tokens,
               "attention": None if self.attention is None else self.attention.tolist(),
               "log_prob": self.log_prob, "token_log_probs": self.token_log_probs, "cut": self.cut}
        for name in ("cross_attention", "encoder_self_attention", "decoder_self_attention"):
            if getattr(self, name) is not None:      # a Transformer's: nested lists
                out[name] = np.round(getattr(self, name), 5).tolist()
        if self.prefix_length:
            out["prefix_length"] = self.prefix_length
        return out


def attention_heads(d: Decoding, kind: str = "cross") -> tuple[list[str], list[str], np.ndarray] | None:
    """A Transformer's attention of one kind with the tokens on its axes: (x tokens, y tokens,
    weights (layers, heads, len(y), len(x))), each row a distribution over x. None for a
    recurrent model (it has one matrix, d.attention).

        cross     y = the target pieces, x = the source pieces (what the RNN's attention is)
        encoder   y = x = the source pieces
        decoder   y = the target pieces, x = the decoder's inputs <s>, y_1 .. y_(T-1): step j
                  reads the pieces before the one it writes (causal: 0 above the diagonal)
    """
    if kind not in HEAD_KINDS:
        raise ValueError(f"unknown attention kind {kind!r}: one of {', '.join(HEAD_KINDS)}")
    weights = {"cross": d.cross_attention, "encoder": d.encoder_self_attention,
               "decoder": d.decoder_self_attention}[kind]
    if weights is None:
        return None
    x = {"cross": d.source_tokens, "encoder": d.source_tokens,
         "decoder": ["<s>"] + d.target_tokens[:-1]}[kind]
    y = d.source_tokens if kind == "encoder" else d.target_tokens
    return list(x), list(y), weights


def attention_of(d: Decoding, layer: int | None = None, head: int | None = None) -> np.ndarray | None:
    """The (target x source) attention to show: a recurrent model's d.attention, or one of a
    Transformer's cross-attentions, layer `layer` (0-based, None: the last) and head `head`
    (None: the mean over heads, alpha_ji = 1/H sum_h alpha^h_ji, still a distribution per row).
    With neither given it is d.attention itself."""
    heads = attention_heads(d, "cross")
    if heads is None or (layer is None and head is None):
        return d.attention
    return head_or_mean(heads[2], layer, head)


def block_diagonal(blocks: Sequence[np.ndarray | None]) -> np.ndarray | None:
    """(..., T_k, S_k) blocks -> (..., sum T_k, sum S_k), each on the diagonal, zeros elsewhere
    (None if any block is None: a model without attention has none to join)."""
    if not blocks or any(b is None for b in blocks):
        return None
    rows, cols = sum(b.shape[-2] for b in blocks), sum(b.shape[-1] for b in blocks)
    out = np.zeros((*blocks[0].shape[:-2], rows, cols), dtype=blocks[0].dtype)
    r = c = 0
    for b in blocks:
        out[..., r:r + b.shape[-2], c:c + b.shape[-1]] = b
        r, c = r + b.shape[-2], c + b.shape[-1]
    return out


def join_decodings(parts: Sequence[Decoding]) -> Decoding:
    """Sentences decoded one at a time, as one Decoding of the whole text: tokens, log-probs
    and per-step lists one after another (each sentence keeps its own </s>), the attention
    block-diagonal (sentence k's output attends to sentence k's source only, which is how it
    was decoded), the translations joined by a space. No per-step vectors, n-best or beam
    tree: those belong to one search. A target prefix steers the first sentence only, so its
    prefix_length is the whole text's."""
    if len(parts) == 1:
        return parts[0]
    cat = lambda name: [x for d in parts for x in getattr(d, name)]       # noqa: E731
    joined = Decoding(cat("source_tokens"), cat("target_tokens"), cat("target_ids"),
                      " ".join(d.translation for d in parts if d.translation), cat("token_log_probs"),
                      block_diagonal([d.attention for d in parts]), None, None, None, step_top=cat("step_top"),
                      token_ranks=cat("token_ranks"), prefix_length=parts[0].prefix_length,
                      prefix_unknown=parts[0].prefix_unknown, cut=any(d.cut for d in parts))
    for name in ("cross_attention", "encoder_self_attention", "decoder_self_attention"):
        setattr(joined, name, block_diagonal([getattr(d, name) for d in parts]))
    return joined


@dataclass
class Hypothesis:
    translation: str
    tokens: list[str]
    log_prob: float
    score: float        # log_prob / length penalty: what beam search ranks by
    node: int = -1      # its last token in Decoding.beam_tree
    coverage: float | None = None   # source_coverage of its attention; None without attention


def source_coverage(attention: np.ndarray | torch.Tensor, reached: float = 0.5) -> float:
    """The share of the source pieces (</s>, the last column, left out) that an output's
    attention reached: piece i counts once its attention summed over the output steps,
    Σ_j α_ji, is at least `reached` (the coverage vector of Tu et al. 2016). An output that
    stops half-way through its source, as beam search's short hypotheses do, covers less."""
    a = np.asarray(attention.float().cpu() if isinstance(attention, torch.Tensor) else attention, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] < 2:
        return 1.0
    return float((a[:, :-1].sum(0) >= reached).mean())



class StepRecord:
    """The per-step tensors of one hypothesis, turned into a Decoding at the end."""

    def __init__(self, tr, src_ids: list[int], memory):
        self.tok = tr.tokenizer
        self.lstm = tr.model.is_lstm              # its state's second part is the cell c_j
        self.src_tokens = self.tok.pieces(src_ids)
        self.enc = memory.states[0].float().cpu().numpy()
        enc_self = memory.self_attention       # a Transformer's encoder self-attention (None: recurrent)
        self.enc_self = None if enc_self is None else enc_self[0].float().cpu().numpy()
        self.ids: list[int] = []
        self.prefix_length, self.prefix_unknown = 0, []     # steering: the first ids were given (search.py)
        self.limit: int | None = None     # the search's length limit (None: forced decoding, never cut)
        self.logits, self.alphas, self.states, self.cells, self.contexts = [], [], [], [], []
        self.cross, self.dec_self = [], []

    def add(self, token: int, logits: torch.Tensor, st, row: int) -> None:
        """Record the token chosen at this step, from row `row` of the step's batch."""
        self.ids.append(token)
        self.logits.append(logits)
        self.states.append(st.state[0][row])
        if self.lstm:
            self.cells.append(st.state[1][row])
        self.contexts.append(st.context[row])
        if st.alpha is not None:
            self.alphas.append(st.alpha[row])
        if st.cross_attention is not None:
            self.cross.append(st.cross_attention[row])
            self.dec_self.append(st.self_attention[row])

    def result(self) -> Decoding:
        logp = F.log_softmax(torch.stack(self.logits).float(), dim=-1)
        ids = torch.tensor(self.ids, device=logp.device)
        chosen = logp.gather(1, ids[:, None])
        token_logp = chosen[:, 0].tolist()
        ranks = ((logp > chosen).sum(1) + 1).tolist()
        top_p, top_i = logp.topk(TOPK_RECORDED, dim=-1)
        piece = self.tok.piece
        tops = [[(piece(i), p) for p, i in zip(ps, is_)]
                for ps, is_ in zip(top_p.exp().tolist(), top_i.tolist())]
        attention = _stack(self.alphas).astype(np.float64) if self.alphas else None
        d = Decoding(self.src_tokens, self.tok.pieces(self.ids), list(self.ids), self.tok.decode(self.ids),
                     token_logp, attention, _stack(self.states), _stack(self.contexts), self.enc, tops,
                     cells=_stack(self.cells) if self.cells else None, token_ranks=ranks,
                     prefix_length=min(self.prefix_length, len(self.ids)), prefix_unknown=list(self.prefix_unknown),
                     cut=self.limit is not None and was_cut(self.ids, self.limit, self.tok.eos_id, ranks[-1] == 1))
        if self.cross:
            T = len(self.ids)
            d.cross_attention = _stack(self.cross).transpose(1, 2, 0, 3)            # (L, H, T, S)
            dec = np.zeros((T, *self.dec_self[0].shape[:2], T), dtype=np.float32)   # step j saw j+1 positions
            for j, w in enumerate(self.dec_self):
                dec[j, :, :, :j + 1] = w.float().cpu().numpy()
            d.decoder_self_attention = dec.transpose(1, 2, 0, 3)                     # (L, H, T, T)
            d.encoder_self_attention = self.enc_self
        return d


def was_cut(ids: Sequence[int], limit: int, eos: int, own_end: bool) -> bool:
    """Whether a search's output was cut at its length limit: it is `limit` pieces long and does
    not end in a </s> the model chose itself (`own_end`: its own top choice at the last step;
    False where a processor forced it, as Marian's forced_eos does at the limit)."""
    return len(ids) >= limit and not (ids and ids[-1] == eos and own_end)


def _stack(rows: list[torch.Tensor]) -> np.ndarray:
    return torch.stack(rows).float().cpu().numpy()



