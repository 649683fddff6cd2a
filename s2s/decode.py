"""The one decode API: every method returns a `Decoding` with tokens, log-probs,
the attention matrix (target x source) and the decoder state of every step.

    greedy       y_j = argmax_y p(y | y_<j, x)
    beam search  keep the `width` best prefixes by sum_j log p(y_j | y_<j, x); finished
                 hypotheses are ranked by that sum divided by a length penalty
                 lp(|y|) = ((5 + |y|) / 6)^alpha   (Wu et al. 2016), so short ones don't win
    sampling     y_j ~ softmax(logits / T), optionally restricted to the top k (ancestral)
    forced       y_j = the reference's j-th token (teacher forcing): how the model aligns
                 and scores a given pair

What may be chosen at a step is one list of logits processors that every search applies
(`DecodeSettings.processors`), each (prefix, scores, last) -> scores, the interface of
transformers' LogitsProcessor plus `last`, the rows at their final allowed step:
    NoRepeatNGram(n)   a token that would complete an n-gram the hypothesis already contains
                       gets probability 0 (Paulus et al. 2018), so a decoder that has lost its
                       place cannot loop on the same words to the length limit
    Temperature(T), TopK(k)                         sampling only: softmax(logits / T), top k
    SuppressTokens, BadWords, ForceToken            a Hugging Face model's own generation
                       settings (never <pad>; the target language's code first; </s> at the
                       length limit), so its searches choose what generate() would
Greedy and sampling process the logits, beam search the log-probabilities (as transformers
does). Processors decide which token is chosen; the log-probs a Decoding reports are always
the model's own, log softmax of its raw logits.

`DecodeSettings` carries one decoding's options; `decode(tr, text, settings)` runs it (the
pages key their caches by it). The special ids come from the model's tokenizer (bos_id,
eos_id, pad_id): a hub model's are not the shipped models' 0-3.

The encoder runs once per sentence, and so do the attention keys (Memory).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .checkpoint import Translator
from .piece_words import HEAD_KINDS  # a Transformer's three kinds of attention
from .text import (
    MAX_BEAM,
    MAX_DECODE_LEN,
    MAX_NO_REPEAT,
    MAX_SOURCE_TOKENS,
    MAX_TOP_K,
    TEMPERATURE_RANGE,
    InputError,
    check_range,
    clean_text,
)

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
               "log_prob": self.log_prob, "token_log_probs": self.token_log_probs}
        for name in ("cross_attention", "encoder_self_attention", "decoder_self_attention"):
            if getattr(self, name) is not None:      # a Transformer's: nested lists
                out[name] = np.round(getattr(self, name), 5).tolist()
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
    w = heads[2][-1 if layer is None else layer]          # (H, T, S)
    return w.mean(0) if head is None else w[head]


@dataclass
class Hypothesis:
    translation: str
    tokens: list[str]
    log_prob: float
    score: float        # log_prob / length penalty: what beam search ranks by
    node: int = -1      # its last token in Decoding.beam_tree
    coverage: float | None = None   # source_coverage of its attention; None without attention


BEAM_ALPHA = 0.6     # the length penalty's exponent beam search uses unless told otherwise


def source_coverage(attention: np.ndarray | torch.Tensor, reached: float = 0.5) -> float:
    """The share of the source pieces (</s>, the last column, left out) that an output's
    attention reached: piece i counts once its attention summed over the output steps,
    Σ_j α_ji, is at least `reached` (the coverage vector of Tu et al. 2016). An output that
    stops half-way through its source, as beam search's short hypotheses do, covers less."""
    a = np.asarray(attention.float().cpu() if isinstance(attention, torch.Tensor) else attention, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] < 2:
        return 1.0
    return float((a[:, :-1].sum(0) >= reached).mean())


def length_penalty(length: int, alpha: float) -> float:
    return ((5 + length) / 6) ** alpha


def is_search_error(output: Decoding, reference: Decoding, method: str, alpha: float = BEAM_ALPHA,
                    tolerance: float = 1e-4) -> bool:
    """Whether the search failed on this reference: the model scores the (forced) reference
    higher than the search's own output, by what the search maximises. Greedy decoding aims
    at max log p(y); beam search ranks by log p(y) / lp(|y|), so a longer reference with a
    higher log p but a lower normalised score is no search error. Sampling searches nothing.
    Forced and searched log-probs of one sequence differ by float rounding (~1e-5): a
    `tolerance` below which the two are the same."""
    if method == "greedy":
        return reference.log_prob > output.log_prob + tolerance
    if method == "beam":
        score = lambda d: d.log_prob / length_penalty(len(d.target_ids), alpha)   # noqa: E731
        return score(reference) > score(output) + tolerance
    return False


# ------------------------------------------------------------------ what may be chosen

class LogitsProcessor:
    """scores (R, V) of R rows whose chosen tokens so far are `prefix` (R, j) -> scores with some
    tokens ruled out (-inf) or reshaped. `last` (R,) bool: rows at their final allowed step."""

    def __call__(self, prefix: torch.Tensor, scores: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class NoRepeatNGram(LogitsProcessor):
    n: int

    def __call__(self, prefix, scores, last):
        return block_repeats(scores, prefix, self.n)


@dataclass(frozen=True)
class Temperature(LogitsProcessor):
    """softmax(logits / T): T < 1 sharpens, T > 1 flattens."""
    t: float

    def __call__(self, prefix, scores, last):
        return scores / self.t


@dataclass(frozen=True)
class TopK(LogitsProcessor):
    """Only the k highest-scoring tokens may be chosen."""
    k: int

    def __call__(self, prefix, scores, last):
        kth = scores.topk(min(self.k, scores.size(-1)), dim=-1).values[:, -1:]
        return scores.masked_fill(scores < kth, float("-inf"))


@dataclass(frozen=True)
class SuppressTokens(LogitsProcessor):
    """These tokens are never chosen (`first_only`: not as the first token)."""
    ids: tuple[int, ...]
    first_only: bool = False

    def __call__(self, prefix, scores, last):
        if self.first_only and prefix.size(1) > 0:
            return scores
        ids = [i for i in self.ids if 0 <= i < scores.size(-1)]
        return scores.index_fill(-1, torch.tensor(ids, device=scores.device), float("-inf")) if ids else scores


@dataclass(frozen=True)
class BadWords(LogitsProcessor):
    """No row may write one of these token sequences: the last token of each is ruled out
    where the row's prefix ends with the sequence's other tokens."""
    sequences: tuple[tuple[int, ...], ...]

    def __call__(self, prefix, scores, last):
        rows = prefix.tolist()
        ban = torch.zeros(scores.shape, dtype=torch.bool)
        for seq in self.sequences:
            *head, banned = seq
            if not 0 <= banned < scores.size(-1):
                continue
            for r, row in enumerate(rows):
                if not head or row[len(row) - len(head):] == head:
                    ban[r, banned] = True
        # out of place, as every processor: `scores` may be the step's own logits, whose
        # log-probs the Decoding reports
        return scores.masked_fill(ban.to(scores.device), float("-inf"))


@dataclass(frozen=True)
class ForceToken(LogitsProcessor):
    """Every other token is ruled out: at the first step (`at="first"`: a multilingual model's
    target language code), or at a row's last allowed step (`at="last"`: </s>)."""
    token: int
    at: str = "first"

    def __call__(self, prefix, scores, last):
        if self.at == "first":
            if prefix.size(1) > 0:
                return scores
            rows = torch.ones_like(last)
        else:
            rows = last
        if not bool(rows.any()):
            return scores
        forced = torch.full_like(scores, float("-inf"))
        # finite even where another processor ruled the token out: a row is never all -inf
        forced[:, self.token] = scores[:, self.token].clamp_min(torch.finfo(scores.dtype).min)
        return torch.where(rows[:, None], forced, scores)


def apply_processors(processors: Sequence[LogitsProcessor], prefix: torch.Tensor, scores: torch.Tensor,
                     last: torch.Tensor) -> torch.Tensor:
    for proc in processors:
        scores = proc(prefix, scores, last)
    return scores


def model_processors(tr: Translator) -> list[LogitsProcessor]:
    """A hub model's own constraints on which token is chosen (hub_model.HubSeq2Seq.constraints),
    as generate() applies them; none for the shipped models."""
    constraints = getattr(tr.model, "constraints", None)
    if constraints is None:
        return []
    c = constraints()
    out: list[LogitsProcessor] = []
    single = tuple(w[0] for w in c["bad_words"] if len(w) == 1)
    longer = tuple(tuple(w) for w in c["bad_words"] if len(w) > 1)
    if single or c["suppress"]:
        out.append(SuppressTokens(single + tuple(c["suppress"])))
    if longer:
        out.append(BadWords(longer))
    if c["begin_suppress"]:
        out.append(SuppressTokens(tuple(c["begin_suppress"]), first_only=True))
    if c["forced_bos"] is not None:
        out.append(ForceToken(int(c["forced_bos"]), "first"))
    if c["forced_eos"] is not None:
        out.append(ForceToken(int(c["forced_eos"]), "last"))
    return out


METHOD_NAMES = ("greedy", "beam", "sample", "forced")


@dataclass(frozen=True)
class DecodeSettings:
    """One decoding's options: what `decode` runs, and the key a page caches its result by.

        method       greedy | beam | sample | forced
        width        beam search: hypotheses kept;  n_best: how many it returns (None: width)
        alpha        beam search: the length penalty's exponent
        max_len      output pieces at most (None: 2 x source + 10)
        no_repeat    greedy and beam search: block repeated n-grams of this size (0: off)
        temperature, top_k, seed                    sampling
    """
    method: str = "greedy"
    width: int = 5
    n_best: int | None = None
    alpha: float = 0.6
    max_len: int | None = None
    no_repeat: int = 0
    temperature: float = 1.0
    top_k: int = 0
    seed: int = 0

    def checked(self) -> "DecodeSettings":
        """Itself, if every option is in range; else InputError saying which is not."""
        if self.method not in METHOD_NAMES:
            raise InputError(f"Unknown decoding method {self.method!r}: use greedy, beam, sample or forced.")
        check_range("Beam width", self.width, 1, MAX_BEAM)
        if self.n_best is not None:
            check_range("N-best", self.n_best, 1, self.width)
        check_range("No-repeat n-gram size", self.no_repeat, 0, MAX_NO_REPEAT)
        check_range("Temperature", self.temperature, *TEMPERATURE_RANGE)
        check_range("Top-k", self.top_k, 0, MAX_TOP_K)
        if self.max_len is not None:
            check_range("Max length", self.max_len, 1, MAX_DECODE_LEN)
        return self

    def processors(self, tr: Translator) -> list[LogitsProcessor]:
        """What rules the choice of each token: the model's own constraints, then the settings'."""
        if self.method == "forced":
            return []           # the reference is decoded whatever the model would choose
        out = model_processors(tr)
        if self.no_repeat and self.method != "sample":
            out.insert(0, NoRepeatNGram(self.no_repeat))
        if self.method == "sample":
            if self.temperature != 1.0:
                out.append(Temperature(self.temperature))
            if self.top_k > 0:
                out.append(TopK(self.top_k))
        return out


def decode(tr: Translator, text: str, settings: DecodeSettings = DecodeSettings(), reference: str | None = None,
           reference_ids: Sequence[int] | None = None, on_step=None) -> Decoding:
    """The one entry point: decode `text` as `settings` say (forced: the reference)."""
    s = settings.checked()
    if s.method == "beam":
        return beam_search(tr, text, s.width, s.n_best, s.alpha, s.max_len, s.no_repeat)
    if s.method == "sample":
        return sample(tr, text, s.temperature, s.top_k, s.seed, s.max_len, on_step)
    if s.method == "forced":
        return forced(tr, text, reference, reference_ids, on_step)
    return greedy(tr, text, s.max_len, on_step, s.no_repeat)


def _select_state(model, state, index: torch.Tensor):
    """Rows `index` of a decoder state: a tuple of tensors, or what the model's select_state says
    (a hub model's key/value cache)."""
    select = getattr(model, "select_state", None)
    return select(state, index) if select is not None else tuple(s.index_select(0, index) for s in state)


def repeated_ngram_mask(prefix: torch.Tensor, n: int, vocab: int) -> torch.Tensor | None:
    """(R, j) token prefixes -> (R, V) True where the next token would repeat an n-gram:
    y is blocked after y_<j iff (y_{j-n+1}, ..., y_{j-1}, y) occurs in y_<j already.
    None when nothing can be blocked yet (n < 1 means off; a prefix shorter than n)."""
    R, j = prefix.shape
    if n < 1 or j < n:
        return None
    if n == 1:
        seen = prefix
    else:   # windows of n-1 tokens that a token follows, compared with the last n-1 tokens
        windows = prefix[:, :j - 1].unfold(1, n - 1, 1)                     # (R, j-n+1, n-1)
        match = (windows == prefix[:, None, j - n + 1:]).all(-1)             # (R, j-n+1)
        seen = prefix[:, n - 1:].masked_fill(~match, -1)                    # the tokens that followed
    mask = torch.zeros(R, vocab + 1, dtype=torch.bool, device=prefix.device)
    mask.scatter_(1, torch.where(seen < 0, vocab, seen), True)              # column V collects "none"
    return mask[:, :vocab]


def block_repeats(logp: torch.Tensor, prefix: torch.Tensor, n: int) -> torch.Tensor:
    """`logp` (R, V) with the tokens that would repeat an n-gram of `prefix` at -inf."""
    mask = repeated_ngram_mask(prefix, n, logp.size(-1))
    return logp if mask is None else logp.masked_fill(mask, float("-inf"))


def encode_source(tr: Translator, text: str) -> list[int]:
    """Clean `text` and turn it into the source ids the encoder reads, ending in </s>
    (a hub model's may also hold a task prefix or a language code); InputError if unusable."""
    text = clean_text(text)
    n = len(tr.tokenizer.encode(text))
    if n > MAX_SOURCE_TOKENS:
        raise InputError(f"The text is {n} subword pieces long; the limit is {MAX_SOURCE_TOKENS}. "
                         "Try a shorter passage.")
    ids = tr.tokenizer.source_ids(text)
    if 0 < positions(tr) < len(ids):
        raise InputError(f"The text is {len(ids)} pieces long; {tr.name} reads at most {positions(tr)} "
                         "(its position embeddings). Try a shorter passage.")
    return ids


def positions(tr: Translator) -> int:
    """How many positions the model's encoder and decoder have (a hub model's
    max_position_embeddings); 0 where there is no such limit (ours, T5's relative positions)."""
    return getattr(tr.model.cfg, "max_positions", 0) or 0


def length_limit(tr: Translator, n_src: int, max_len: int | None) -> int:
    """The length limit of a search: 2 x source + 10 pieces (or `max_len`), at most
    MAX_DECODE_LEN, and within the decoder's positions (the start token takes one)."""
    limit = min(2 * n_src + 10, MAX_DECODE_LEN) if max_len is None else check_range("Max length", max_len, 1,
                                                                                  MAX_DECODE_LEN)
    return min(limit, positions(tr) - 1) if positions(tr) > 1 else limit


def _encode(tr: Translator, src_ids: list[int]):
    src = torch.tensor([src_ids], device=tr.device)
    return tr.model.encode(src, torch.tensor([len(src_ids)]))


Chooser = Callable[[int, torch.Tensor], int]   # (step j, processed scores (V,)) -> token id


@torch.inference_mode()
def _left_to_right(tr: Translator, src_ids: list[int], choose: Chooser, max_len: int,
                   on_step: Callable[[int, "Decoding"], None] | None = None,
                   processors: Sequence[LogitsProcessor] = ()) -> Decoding:
    """Greedy, sampling and forced decoding share this loop; only `choose` differs. Each
    step's logits go through `processors` before `choose` sees them. The loop keeps raw
    per-step tensors; log-softmax and top-k run once at the end."""
    model, tok = tr.model, tr.tokenizer
    memory, state = _encode(tr, src_ids)
    feed = model.initial_feed(1)
    y = torch.tensor([tok.bos_id], device=tr.device)
    rec = _Record(tr, src_ids, memory)
    for j in range(max_len):
        st = model.decode_step(y, state, feed, memory)
        state, feed = st.state, st.feed
        scores = st.logits[0]
        if processors:
            prefix = torch.tensor([rec.ids], dtype=torch.long, device=scores.device).view(1, -1)
            last = torch.tensor([j == max_len - 1], device=scores.device)
            scores = apply_processors(processors, prefix, scores[None].float(), last)[0]
        nxt = choose(j, scores)
        rec.add(nxt, st.logits[0], st, 0)
        if on_step is not None:
            on_step(j, rec.result())
        if nxt == tok.eos_id:
            break
        y = torch.tensor([nxt], device=tr.device)
    return rec.result()


class _Record:
    """The per-step tensors of one hypothesis, turned into a Decoding at the end."""

    def __init__(self, tr: Translator, src_ids: list[int], memory):
        self.tok = tr.tokenizer
        self.lstm = tr.model.is_lstm              # its state's second part is the cell c_j
        self.src_tokens = self.tok.pieces(src_ids)
        self.enc = memory.states[0].float().cpu().numpy()
        enc_self = getattr(memory, "self_attention", None)       # a Transformer's encoder self-attention
        self.enc_self = None if enc_self is None else enc_self[0].float().cpu().numpy()
        self.ids: list[int] = []
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
                     cells=_stack(self.cells) if self.cells else None, token_ranks=ranks)
        if self.cross:
            T = len(self.ids)
            d.cross_attention = _stack(self.cross).transpose(1, 2, 0, 3)            # (L, H, T, S)
            dec = np.zeros((T, *self.dec_self[0].shape[:2], T), dtype=np.float32)   # step j saw j+1 positions
            for j, w in enumerate(self.dec_self):
                dec[j, :, :, :j + 1] = w.float().cpu().numpy()
            d.decoder_self_attention = dec.transpose(1, 2, 0, 3)                     # (L, H, T, T)
            d.encoder_self_attention = self.enc_self
        return d


def _stack(rows: list[torch.Tensor]) -> np.ndarray:
    return torch.stack(rows).float().cpu().numpy()


def greedy(tr: Translator, text: str, max_len: int | None = None, on_step=None, no_repeat: int = 0) -> Decoding:
    settings = DecodeSettings("greedy", max_len=max_len, no_repeat=no_repeat).checked()
    src = encode_source(tr, text)
    return _left_to_right(tr, src, lambda j, scores: int(scores.argmax()), length_limit(tr, len(src), max_len), on_step,
                          settings.processors(tr))


def sample(tr: Translator, text: str, temperature: float = 1.0, top_k: int = 0, seed: int = 0,
           max_len: int | None = None, on_step=None) -> Decoding:
    """Ancestral sampling from softmax(logits / T), restricted to the top k tokens if k > 0.
    Reported log-probs are the model's own (T = 1); the same seed gives the same sample."""
    settings = DecodeSettings("sample", max_len=max_len, temperature=temperature, top_k=top_k, seed=seed).checked()
    src = encode_source(tr, text)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))

    def choose(j, scores):     # softmax of the processed scores: (logits / T) restricted to the top k
        return int(torch.multinomial(F.softmax(scores.float(), -1).cpu(), 1, generator=gen))

    return _left_to_right(tr, src, choose, length_limit(tr, len(src), max_len), on_step, settings.processors(tr))


def forced(tr: Translator, text: str, reference: str | None = None, reference_ids: Sequence[int] | None = None,
           on_step=None, source_ids: Sequence[int] | None = None) -> Decoding:
    """Teacher-force a reference (text, or piece ids ending in EOS): the model's alignment
    and per-token log-probs for that exact pair. `source_ids`, if given, are read instead of
    `text`'s encoding (s2s.alignment feeds the gold's words piece by piece)."""
    if source_ids is not None and not 0 < len(source_ids) <= MAX_SOURCE_TOKENS + 16:
        raise InputError(f"The source is {len(source_ids)} pieces long; the limit is {MAX_SOURCE_TOKENS}.")
    src = encode_source(tr, text) if source_ids is None else list(source_ids)
    if reference_ids is None:
        if reference is None:
            raise InputError("Give a reference translation to score.")
        reference_ids = tr.tokenizer.target_ids(clean_text(reference, what="reference"))
    ref = list(reference_ids)
    if not ref or len(ref) > MAX_DECODE_LEN:
        raise InputError(f"The reference is {len(ref)} pieces long; the limit is {MAX_DECODE_LEN}.")
    if hasattr(tr.model, "forced_steps"):
        return _all_at_once(tr, src, ref, on_step)
    return _left_to_right(tr, src, lambda j, logits: ref[j], len(ref), on_step)


@torch.inference_mode()
def _all_at_once(tr: Translator, src_ids: list[int], ref: list[int],
                 on_step: Callable[[int, "Decoding"], None] | None = None) -> Decoding:
    """Forced decoding by a model without recurrence (a Transformer): every position in one
    pass, since each step's input is the reference's previous token, known in advance;
    the same Decoding as step by step, up to float rounding."""
    memory, _ = _encode(tr, src_ids)
    tgt_in = torch.tensor([[tr.tokenizer.bos_id] + ref[:-1]], device=tr.device)
    rec = _Record(tr, src_ids, memory)
    for j, st in enumerate(tr.model.forced_steps(tgt_in, memory)):
        rec.add(ref[j], st.logits[0], st, 0)
        if on_step is not None:
            on_step(j, rec.result())
    return rec.result()


@torch.inference_mode()
def beam_search(tr: Translator, text: str, width: int = 5, n_best: int | None = None, alpha: float = BEAM_ALPHA,
                max_len: int | None = None, no_repeat: int = 0) -> Decoding:
    """Beam search; returns the best hypothesis, plus `nbest` and `beam_tree`.

    beam_tree lists every hypothesis kept at every step: {step, token, log_prob, parent,
    finished} where parent indexes the same list (-1 for the root). Each step's tensors are
    kept for the whole beam, so the best hypothesis's attention and states are read back
    along its path in the tree, without decoding it again."""
    processors = DecodeSettings("beam", width, n_best, alpha, max_len, no_repeat).checked().processors(tr)
    n_best = width if n_best is None else n_best
    model, tok = tr.model, tr.tokenizer
    src_ids = encode_source(tr, text)
    max_len = length_limit(tr, len(src_ids), max_len)
    memory1, state = _encode(tr, src_ids)
    feed = model.initial_feed(1)
    memory = memory1
    live: list[tuple[list[int], int, float]] = [([], -1, 0.0)]     # (ids, tree node, log-prob sum)
    finished: list[tuple[list[int], int, float]] = []
    tree: list[tuple[int, int, float, int]] = []   # (step, token, log-prob sum, parent node)
    node_row: list[int] = []      # for each tree node: the row of the step batch it extends
    steps = []                    # for each step: its Step (logits (k, V), states, attention)
    y = torch.tensor([tok.bos_id], device=tr.device)
    for j in range(max_len):
        st = model.decode_step(y, state, feed, memory)
        steps.append(st)
        logp = F.log_softmax(st.logits.float(), dim=-1)                  # (k, V)
        if processors:
            prefix = torch.tensor([h[0] for h in live], dtype=torch.long, device=logp.device).view(len(live), j)
            last = torch.full((len(live),), j == max_len - 1, device=logp.device)
            logp = apply_processors(processors, prefix, logp, last)
        V = logp.size(-1)
        scores = torch.tensor([h[2] for h in live], device=logp.device)
        # the best 2w continuations overall are among each hypothesis's own best 2w
        row_v, row_i = logp.topk(min(2 * width, V), dim=-1)                 # (k, 2w)
        cand = (scores[:, None] + row_v).view(-1)
        top_v, top_c = cand.topk(min(2 * width, cand.numel()))
        n_row = row_v.size(1)
        keep, new_live = [], []
        for v, c, t in zip(top_v.tolist(), top_c.tolist(), row_i.view(-1)[top_c].tolist()):
            if v == float("-inf"):
                break           # ruled out by a processor (a forced first token): nor are the rest, best first
            k = c // n_row
            tree.append((j, t, v, live[k][1]))
            node_row.append(k)
            h = (live[k][0] + [t], len(tree) - 1, v)
            if t == tok.eos_id:
                finished.append(h)
            else:
                new_live.append(h)
                keep.append(k)
            if len(new_live) == width:
                break
        if len(finished) >= width or not new_live:
            break
        live = new_live
        idx = torch.tensor(keep, device=tr.device)
        state = _select_state(model, st.state, idx)
        feed = st.feed.index_select(0, idx)
        if memory.states.size(0) != len(keep):
            memory = memory1.select(torch.zeros(len(keep), dtype=torch.long, device=tr.device))
        y = torch.tensor([h[0][-1] for h in live], device=tr.device)
    else:
        finished.extend(live)   # max_len reached: unfinished hypotheses compete too
    ranked = sorted(finished, key=lambda h: h[2] / length_penalty(len(h[0]), alpha), reverse=True)

    def coverage(node: int) -> float | None:
        """source_coverage of the attention along a hypothesis's path in the tree."""
        rows = []
        while node >= 0:
            step = steps[tree[node][0]]
            if step.alpha is None:
                return None
            rows.append(step.alpha[node_row[node]])
            node = tree[node][3]
        return source_coverage(torch.stack(rows))
    nbest = [Hypothesis(tok.decode(ids), tok.pieces(ids), lp, lp / length_penalty(len(ids), alpha), node,
                        coverage(node)) for ids, node, lp in ranked[:n_best]]
    path, node = [], ranked[0][1]
    while node >= 0:              # walk the best hypothesis back to the root
        path.append(node)
        node = tree[node][3]
    rec = _Record(tr, src_ids, memory1)
    for j, node in enumerate(reversed(path)):
        rec.add(ranked[0][0][j], steps[j].logits[node_row[node]], steps[j], node_row[node])
    best = rec.result()
    best.nbest = nbest
    best.beam_tree = [{"step": j, "token": tok.piece(t), "log_prob": v, "parent": parent, "finished": t == tok.eos_id}
                      for j, t, v, parent in tree]
    return best


@torch.inference_mode()
def forced_batch_attention(tr: Translator, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                           heads: bool = False) -> list[np.ndarray | None]:
    """Forced decoding of many (source ids, target ids) pairs as one batch: for each pair the
    attention forced() would report, (T, S) (a row per target piece, </s> included), or with
    `heads` a Transformer's every layer and head, (L, H, T, S) (None for a recurrent model).

    Sources and targets are padded to the longest: source padding is masked out of attention,
    and target padding comes after every real token, where nothing real reads it (a recurrent
    decoder's rows just run on; a Transformer's self-attention is causal). The same numbers as
    forced() one pair at a time, up to float rounding (s2s.alignment.corpus's batches)."""
    model, tok = tr.model, tr.tokenizer
    B, S, T = len(sources), max(map(len, sources)), max(map(len, targets))
    src = torch.full((B, S), tok.pad_id, dtype=torch.long)
    tgt_in = torch.full((B, T), tok.pad_id, dtype=torch.long)
    for r, (s, t) in enumerate(zip(sources, targets)):
        src[r, :len(s)] = torch.tensor(list(s))
        tgt_in[r, :len(t)] = torch.tensor([tok.bos_id] + list(t[:-1]))
    src, tgt_in = src.to(tr.device), tgt_in.to(tr.device)
    memory, state = model.encode(src, torch.tensor([len(s) for s in sources]))
    if hasattr(model, "forced_steps"):            # no recurrence: every position in one pass
        steps = model.forced_steps(tgt_in, memory)
    else:
        feed, steps = model.initial_feed(B), []
        for j in range(T):
            st = model.decode_step(tgt_in[:, j], state, feed, memory)
            state, feed = st.state, st.feed
            steps.append(st)
    if heads and steps[0].cross_attention is None:
        return [None] * B
    a = torch.stack([st.cross_attention if heads else st.alpha for st in steps], -2).float().cpu().numpy()
    return [a[r, ..., :len(t), :len(s)] for r, (s, t) in enumerate(zip(sources, targets))]


@torch.inference_mode()
def greedy_batch(tr: Translator, texts: Sequence[str], batch_size: int = 64,
                 max_len: int | None = None, no_repeat: int = 0) -> list[str]:
    """Greedy translations of many sentences, `batch_size` at a time (sorted by length
    so that little time goes to padding). Same outputs as `greedy`, up to float noise."""
    return greedy_batch_stopped(tr, texts, batch_size, max_len, no_repeat)[0]


@torch.inference_mode()
def greedy_batch_stopped(tr: Translator, texts: Sequence[str], batch_size: int = 64,
                         max_len: int | None = None, no_repeat: int = 0) -> tuple[list[str], list[bool]]:
    """`greedy_batch`, and for each sentence whether the decoder produced </s> itself
    (False: it ran to the length limit)."""
    processors = DecodeSettings("greedy", max_len=max_len, no_repeat=no_repeat).checked().processors(tr)
    model, tok = tr.model, tr.tokenizer
    srcs = [encode_source(tr, t) for t in texts]
    order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))
    out: list[str] = [""] * len(srcs)
    stopped: list[bool] = [False] * len(srcs)
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        S = max(len(srcs[i]) for i in idx)
        src = torch.full((len(idx), S), tok.pad_id, dtype=torch.long)
        for r, i in enumerate(idx):
            src[r, :len(srcs[i])] = torch.tensor(srcs[i])
        memory, state = model.encode(src.to(tr.device), torch.tensor([len(srcs[i]) for i in idx]))
        feed = model.initial_feed(len(idx))
        y = torch.full((len(idx),), tok.bos_id, dtype=torch.long, device=tr.device)
        done = torch.zeros(len(idx), dtype=torch.bool, device=tr.device)
        limits = [length_limit(tr, len(srcs[i]), max_len) for i in idx]     # each sentence's own, as in greedy
        last_step = torch.tensor(limits, device=tr.device) - 1
        ids = []
        for j in range(max(limits)):
            st = model.decode_step(y, state, feed, memory)
            state, feed = st.state, st.feed
            logits = st.logits
            if processors:
                prefix = torch.stack(ids, 1) if ids else y.new_zeros(len(idx), 0)
                logits = apply_processors(processors, prefix, logits.float(), last_step == j)
            y = logits.argmax(-1).masked_fill(done, tok.pad_id)
            ids.append(y)
            done |= (y == tok.eos_id) | (last_step == j)
            if bool(done.all()):
                break
        ids_t = torch.stack(ids, 1).tolist()
        for r, i in enumerate(idx):
            row = ids_t[r][:limits[r]]
            stopped[i] = tok.eos_id in row
            out[i] = tok.decode(row[:row.index(tok.eos_id)] if tok.eos_id in row else row)
    return out, stopped


# ------------------------------------------------------------------ batched beam search

@torch.inference_mode()
def beam_search_batch(tr: Translator, texts: Sequence[str], width: int = 5, alpha: float = BEAM_ALPHA,
                      max_len: int | None = None, batch_size: int = 32, attention: bool = False,
                      progress: Callable[[int, int], None] | None = None, no_repeat: int = 0) -> list[Decoding]:
    """Beam search over many sentences at once: for each text, the best hypothesis of
    `beam_search(tr, text, width, n_best=1, alpha=alpha, max_len=max_len, no_repeat=no_repeat)` (the same search,
    so the same translation, and the same log-probs up to float noise).

    Per sentence, as there: at step j each live prefix y_<j (at most `width`) offers its best
    2w continuations, scored by sum_j log p(y_j | y_<j, x); walking all of them best first,
    one ending in </s> is finished, any other joins the new beam until that holds `width`.
    A sentence stops when `width` hypotheses have finished (or none is live), or at its
    own length limit (then its live prefixes compete too); the best finished hypothesis by
    sum_j log p / lp(|y|), lp(n) = ((5 + n) / 6)^alpha, is its translation.

    Sentences are sorted by length and decoded `batch_size` at a time, each with `width`
    rows in one decoder batch; a sentence's rows leave the batch when it stops. Returns one
    Decoding per text with tokens, translation and token log-probs, plus the attention
    matrix if `attention`; no per-step states, n-best or beam tree (`beam_search` has them).
    InputError if any text is unusable (check lines with `encode_source` first)."""
    DecodeSettings("beam", width, max_len=max_len, no_repeat=no_repeat).checked()
    srcs = [encode_source(tr, t) for t in texts]
    order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))   # similar lengths: little padding
    out: list[Decoding | None] = [None] * len(srcs)
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        for i, d in zip(idx, _beam_batch(tr, [srcs[i] for i in idx], width, alpha, max_len, attention, no_repeat)):
            out[i] = d
        if progress is not None:
            progress(min(b + batch_size, len(order)), len(order))
    return out


def _beam_batch(tr: Translator, srcs: list[list[int]], width: int, alpha: float, max_len: int | None,
                attention: bool, no_repeat: int = 0) -> list[Decoding]:
    """One batch of `beam_search_batch`. The decoder batch holds n sentences x k slots,
    sentence-major (row r * k + q is slot q of sentence r); k = 1 at the first step, then
    `width`. A slot with no live prefix scores -inf, so its candidates are never taken.
    Each row carries its prefix's tokens, their log-probs and attention rows, copied from
    the parent row at every step (cheaper than walking back pointers for many sentences)."""
    model, tok, dev = tr.model, tr.tokenizer, tr.device
    processors = DecodeSettings("beam", width, max_len=max_len, no_repeat=no_repeat).processors(tr)
    EOS = tok.eos_id
    B, S = len(srcs), max(len(s) for s in srcs)
    src = torch.full((B, S), tok.pad_id, dtype=torch.long)
    for r, s in enumerate(srcs):
        src[r, :len(s)] = torch.tensor(s)
    memory0, state = model.encode(src.to(dev), torch.tensor([len(s) for s in srcs]))
    memory, feed = memory0, model.initial_feed(B)
    limits = [length_limit(tr, len(s), max_len) for s in srcs]
    sent = list(range(B))                               # the sentence of each block of rows
    score = torch.zeros(B, 1, device=dev)               # (n, k) log-prob sums of the live prefixes
    y = torch.full((B,), tok.bos_id, dtype=torch.long, device=dev)
    limit_t = torch.tensor(limits, device=dev)
    ids = torch.zeros(B, 0, dtype=torch.long, device=dev)   # (n * k, j) each row's prefix
    lps = torch.zeros(B, 0, device=dev)                     # (n * k, j) its tokens' log-probs
    attn = torch.zeros(B, 0, S, device=dev) if attention else None   # (n * k, j, S) its attention rows
    finished: list[list[tuple]] = [[] for _ in range(B)]   # per sentence: (ids, log-prob sum, log-probs, attention)
    neg_inf = float("-inf")
    for j in range(max(limits)):
        st = model.decode_step(y, state, feed, memory)
        if st.alpha is None:
            attn = None                                  # a model without attention has none to record
        logp = F.log_softmax(st.logits.float(), dim=-1)  # (n * k, V)
        n, k = score.shape
        if processors:      # each row at its own sentence's length limit
            last = (limit_t[torch.tensor(sent, device=dev)] - 1 == j).repeat_interleave(k)
            logp = apply_processors(processors, ids, logp, last)
        row_v, row_i = logp.topk(min(2 * width, logp.size(1)), dim=-1)   # (n * k, K)
        K = row_v.size(1)
        # the best 2w continuations of a sentence are among each of its prefixes' own best 2w
        cand = (score.view(-1, 1) + row_v).view(n, k * K)
        top_v, top_c = cand.topk(min(2 * width, k * K), dim=-1)           # (n, C), best first
        tok_c = row_i.view(n, k * K).gather(1, top_c)
        lp_c = row_v.view(n, k * K).gather(1, top_c)
        parent = top_c // K + torch.arange(n, device=dev)[:, None] * k   # the row each extends
        real = top_v > neg_inf          # not from an empty slot (a live prefix's log-prob is finite)
        eos = tok_c == EOS
        grow = real & ~eos
        # beam_search walks the candidates best first and stops once `width` have grown:
        # a candidate is looked at iff fewer than `width` growing ones come before it
        seen = real & (grow.long().cumsum(1) - grow.long() < width)
        ends, grow = seen & eos, seen & ~eos
        # the new beam: each sentence's growing candidates, best first, in slots 0, 1, ...
        pick = torch.sort((~grow).int(), dim=1, stable=True).indices[:, :width]   # (n, w)
        live = grow.gather(1, pick)
        new_score = top_v.gather(1, pick).masked_fill(~live, neg_inf)
        rows, new_tok, new_lp = parent.gather(1, pick), tok_c.gather(1, pick), lp_c.gather(1, pick)
        w = pick.size(1)

        def hypothesis(p: int, t: int, total: float, lp: float) -> tuple:
            """Row p's prefix extended by token t (before the histories move on)."""
            a = None if attn is None else torch.cat([attn[p], st.alpha[p, None]])
            return ids[p].tolist() + [t], total, lps[p].tolist() + [lp], a

        if bool(ends.any()):
            for r, c in ends.nonzero().tolist():        # row-major: best first within a sentence
                finished[sent[r]].append(hypothesis(int(parent[r, c]), EOS, float(top_v[r, c]), float(lp_c[r, c])))
        keep = []
        for r, n_live in enumerate(live.sum(1).tolist()):
            s = sent[r]
            if len(finished[s]) >= width or n_live == 0:
                continue                                 # stopped as beam_search stops
            if j + 1 == limits[s]:                       # its length limit: live prefixes compete too
                for q in range(n_live):
                    finished[s].append(hypothesis(int(rows[r, q]), int(new_tok[r, q]), float(new_score[r, q]),
                                                  float(new_lp[r, q])))
                continue
            keep.append(r)
        if not keep:
            break
        if len(keep) < n:                                # stopped sentences leave the batch
            kt = torch.tensor(keep, device=dev)
            rows, new_tok, new_lp, new_score = rows[kt], new_tok[kt], new_lp[kt], new_score[kt]
            sent = [sent[r] for r in keep]
        if len(keep) < n or w != k:                      # rows of a sentence all read its source
            memory = memory0.select(torch.tensor(sent, device=dev).repeat_interleave(w))
        rows = rows.reshape(-1)
        state = _select_state(model, st.state, rows)
        feed = st.feed.index_select(0, rows)
        ids = torch.cat([ids[rows], new_tok.reshape(-1, 1)], 1)
        lps = torch.cat([lps[rows], new_lp.reshape(-1, 1)], 1)
        if attn is not None:
            attn = torch.cat([attn[rows], st.alpha[rows, None]], 1)
        y, score = new_tok.reshape(-1), new_score
    out = []
    for s, src_ids in enumerate(srcs):
        # max, like a stable sort's first, keeps the earliest of equal scores
        best_ids, _, best_lps, a = max(finished[s], key=lambda h: h[1] / length_penalty(len(h[0]), alpha))
        out.append(Decoding(source_tokens=tok.pieces(src_ids), target_tokens=tok.pieces(best_ids),
                            target_ids=best_ids, translation=tok.decode(best_ids), token_log_probs=best_lps,
                            attention=None if a is None else a[:, :len(src_ids)].double().cpu().numpy(),
                            states=None, contexts=None, encoder_states=None))
    return out
