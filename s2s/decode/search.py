"""The one-sentence searches: greedy, sampling and forced decoding share one left-to-right
loop; beam search keeps every hypothesis in a tree. `decode(tr, text, settings)` runs the one
`settings` names.

Steering (`target_prefix`): every search can be told how the output starts, y_1 .. y_n, and
continues from there. The prefix steps run the model as any step does (decode_step on the
previous token), but the token is given instead of chosen: no processor, no argmax, no random
draw (so a sample's seed draws the same continuation whatever the prefix's length costs). Each
given token is recorded with the model's own log p(y_j | y_<j, x), attention and states, so a
steered output's log p is what forced decoding of the same output gives. Beam search keeps one
hypothesis through the prefix (every beam shares it) and branches after it."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from ..hooks import knocked_out
from ..hub_config import beyond_positions
from ..loaded import Translator
from ..text import MAX_DECODE_LEN, MAX_SOURCE_TOKENS, InputError, check_range, clean_text, split_sentences
from .processors import LogitsProcessor, apply_processors
from .result import Decoding, Hypothesis, StepRecord, join_decodings, source_coverage
from .settings import LENGTH_PENALTY, DecodeSettings, lp


def decode(tr: Translator, text: str, settings: DecodeSettings = DecodeSettings(), reference: str | None = None,
           reference_ids: Sequence[int] | None = None, on_step=None) -> Decoding:
    """The one entry point: decode `text` as `settings` say (forced: the reference), with the
    heads of `settings.head_mask` knocked out (s2s.hooks.knocked_out) for the whole decoding:
    the encoder's pass and every step (InputError, one line, for a head the model lacks, or
    any head of a recurrent model)."""
    s = settings.checked()
    prefix = s.target_prefix
    with knocked_out(tr.model, s.head_mask):        # an empty mask attaches nothing
        if s.method == "beam":
            return beam_search(tr, text, s.width, s.n_best, s.length_penalty, s.max_len, s.no_repeat,
                               target_prefix=prefix)
        if s.method == "sample":
            return sample(tr, text, s.temperature, s.top_k, s.seed, s.max_len, on_step, target_prefix=prefix)
        if s.method == "forced":
            return forced(tr, text, reference, reference_ids, on_step, target_prefix=prefix)
        return greedy(tr, text, s.max_len, on_step, s.no_repeat, target_prefix=prefix)



def decode_by_sentence(tr: Translator, text: str, settings: DecodeSettings = DecodeSettings()) -> Decoding:
    """`decode` of each sentence of `text` on its own (s2s.text.split_sentences), joined into one
    Decoding (result.join_decodings: the attention block-diagonal). The shipped models learned
    from pairs of one or two sentences; a paragraph read at once can lose its place. A target
    prefix steers the first sentence's translation only (where the output starts)."""
    parts = split_sentences(clean_text(text))
    if not parts:
        raise InputError("Type some English text to translate.")
    rest = replace(settings, target_prefix=None)
    return join_decodings([decode(tr, sentence, settings if k == 0 else rest) for k, sentence in enumerate(parts)])


def is_search_error(output: Decoding, reference: Decoding, method: str, length_penalty: float = LENGTH_PENALTY,
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
        score = lambda d: d.log_prob / lp(len(d.target_ids), length_penalty)   # noqa: E731
        return score(reference) > score(output) + tolerance
    return False


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
    return tr.model.cfg.max_positions or 0


def own_cap(tr: Translator) -> int:
    """The most pieces the model itself writes, as its folder's generation config says
    (s2s.hub_config.own_output_cap: max_new_tokens, or max_length less the start token); 0: no cap."""
    return int(tr.model.cfg.max_new_tokens or 0)


def length_limit(tr: Translator, n_src: int, max_len: int | None) -> int:
    """The one length rule of every search (greedy, beam, sampling, batched; the page and every
    command call it with the same `max_len`): 2 x source + 10 pieces (or `max_len`), at most
    MAX_DECODE_LEN, at most the model's own cap (own_cap: a hub folder's generation config, which
    an explicit max_len does not pass, as its positions), and within the decoder's positions
    (the start token takes one). An output that reaches it without </s> is cut (Decoding.cut)."""
    limit = min(2 * n_src + 10, MAX_DECODE_LEN) if max_len is None else check_range("Max length", max_len, 1,
                                                                                  MAX_DECODE_LEN)
    if own_cap(tr) > 0:
        limit = min(limit, own_cap(tr))
    return min(limit, positions(tr) - 1) if positions(tr) > 1 else limit


def target_prefix_ids(tr: Translator, prefix: str | Sequence[int] | None) -> tuple[list[int], list[str]]:
    """The target piece ids a steering prefix stands for, and the characters of a text prefix
    that the target vocabulary lacks (each read as <unk>: the output goes on, and says so).

    Text is cleaned and tokenised as a reference is (the tokenizer's `target_ids`: the target
    side's own tokenizer, a multilingual model's language code first), less its closing </s>:
    a prefix goes on. Ids are taken as they are, each a row of the model's output. Empty: none.
    A </s> may only close a prefix (the output then ends there); anywhere else, InputError."""
    tok = tr.tokenizer
    if prefix is None or (isinstance(prefix, str) and not prefix.strip()):
        return [], []
    unknown: list[str] = []
    if isinstance(prefix, str):
        text = clean_text(prefix, what="target prefix")
        ids = list(tok.target_ids(text))
        if ids and ids[-1] == tok.eos_id:
            ids = ids[:-1]
        unknown = tok.unknown_characters(text, target=True)
    else:
        ids = [int(i) for i in prefix]
        # the model's output rows, which may pass the tokenizer's pieces (T5's padding, M2M100's codes)
        vocab = getattr(tr.model.cfg, "vocab_size", 0) or len(tok)
        if bad := [i for i in ids if not 0 <= i < vocab]:
            raise InputError(f"Target piece id {bad[0]} is not in this model's vocabulary (ids 0 to {vocab - 1}).")
    if tok.eos_id in ids[:-1]:
        raise InputError(f"The target prefix has </s> at piece {ids.index(tok.eos_id) + 1} of {len(ids)}: "
                         "nothing can follow the end of the sentence.")
    return ids, unknown


def _check_prefix_fits(prefix: Sequence[int], limit: int) -> None:
    """A prefix as long as the length limit is the whole output; a longer one cannot be written."""
    if len(prefix) > limit:
        raise InputError(f"The target prefix is {len(prefix)} pieces long; this decoding writes at most {limit} "
                         "(its max length): shorten the prefix or raise the max length.")


def _encode(tr: Translator, src_ids: list[int]):
    src = torch.tensor([src_ids], device=tr.device)
    return tr.model.encode(src, torch.tensor([len(src_ids)]))


Chooser = Callable[[int, torch.Tensor], int]   # (step j, processed scores (V,)) -> token id


@torch.inference_mode()
def _left_to_right(tr: Translator, src_ids: list[int], choose: Chooser, max_len: int,
                   on_step: Callable[[int, "Decoding"], None] | None = None,
                   processors: Sequence[LogitsProcessor] = (), prefix: Sequence[int] = (),
                   prefix_unknown: Sequence[str] = ()) -> Decoding:
    """Greedy, sampling and forced decoding share this loop; only `choose` differs. Each
    step's logits go through `processors` before `choose` sees them. The loop keeps raw
    per-step tensors; log-softmax and top-k run once at the end. The first len(`prefix`)
    tokens are given (steering): those steps neither process nor choose."""
    model, tok = tr.model, tr.tokenizer
    _check_prefix_fits(prefix, max_len)
    memory, state = _encode(tr, src_ids)
    feed = model.initial_feed(1)
    y = torch.tensor([tok.bos_id], device=tr.device)
    rec = StepRecord(tr, src_ids, memory)
    rec.prefix_length, rec.prefix_unknown = len(prefix), list(prefix_unknown)
    rec.limit = max_len
    for j in range(max_len):
        st = model.decode_step(y, state, feed, memory)
        state, feed = st.state, st.feed
        scores = st.logits[0]
        if j < len(prefix):
            nxt = int(prefix[j])
        else:
            if processors:
                ids = torch.tensor([rec.ids], dtype=torch.long, device=scores.device).view(1, -1)
                last = torch.tensor([j == max_len - 1], device=scores.device)
                scores = apply_processors(processors, ids, scores[None].float(), last)[0]
            nxt = choose(j, scores)
        rec.add(nxt, st.logits[0], st, 0)
        if on_step is not None:
            on_step(j, rec.result())
        if nxt == tok.eos_id:
            break
        y = torch.tensor([nxt], device=tr.device)
    return rec.result()


def greedy(tr: Translator, text: str, max_len: int | None = None, on_step=None, no_repeat: int = 0,
           target_prefix: str | Sequence[int] | None = None) -> Decoding:
    """y_j = argmax of the processed logits, after the `target_prefix` (if any) is given."""
    settings = DecodeSettings("greedy", max_len=max_len, no_repeat=no_repeat, target_prefix=target_prefix).checked()
    src = encode_source(tr, text)
    prefix, unknown = target_prefix_ids(tr, settings.target_prefix)
    return _left_to_right(tr, src, lambda j, scores: int(scores.argmax()), length_limit(tr, len(src), max_len), on_step,
                          settings.processors(tr), prefix, unknown)


def sample(tr: Translator, text: str, temperature: float = 1.0, top_k: int = 0, seed: int = 0,
           max_len: int | None = None, on_step=None, target_prefix: str | Sequence[int] | None = None) -> Decoding:
    """Ancestral sampling from softmax(logits / T), restricted to the top k tokens if k > 0.
    Reported log-probs are the model's own (T = 1); the same seed gives the same sample (the
    first draw is the first token after `target_prefix`)."""
    settings = DecodeSettings("sample", max_len=max_len, temperature=temperature, top_k=top_k, seed=seed,
                              target_prefix=target_prefix).checked()
    src = encode_source(tr, text)
    prefix, unknown = target_prefix_ids(tr, settings.target_prefix)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))

    def choose(j, scores):     # softmax of the processed scores: (logits / T) restricted to the top k
        return int(torch.multinomial(F.softmax(scores.float(), -1).cpu(), 1, generator=gen))

    return _left_to_right(tr, src, choose, length_limit(tr, len(src), max_len), on_step, settings.processors(tr),
                          prefix, unknown)


def forced(tr: Translator, text: str, reference: str | None = None, reference_ids: Sequence[int] | None = None,
           on_step=None, source_ids: Sequence[int] | None = None,
           target_prefix: str | Sequence[int] | None = None) -> Decoding:
    """Teacher-force a reference (text, or piece ids ending in EOS): the model's alignment
    and per-token log-probs for that exact pair. `source_ids`, if given, are read instead of
    `text`'s encoding (s2s.alignment feeds the gold's words piece by piece). A
    `target_prefix` must be where the reference starts (InputError if not): it only marks
    its pieces (prefix_length), as a steered search's."""
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
    prefix, unknown = target_prefix_ids(tr, DecodeSettings("forced", target_prefix=target_prefix).checked()
                                        .target_prefix)
    if ref[:len(prefix)] != prefix:
        raise InputError("The reference does not start with the target prefix: forced decoding writes the reference.")
    return _forced_steps(tr, src, ref, on_step, len(prefix), unknown)


def usable_pairs(tr: Translator, pairs: Sequence[tuple[str, str]]
                 ) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """(indexes of the pairs kept, their source ids, their target ids): the pairs of a corpus
    that `tr` can be forced through (the neighbour index's states, the heads' importance). A
    pair whose English or French is empty, over the limits or longer than the model's positions
    is left out: an operator's corpus may hold some, and one such pair would stop the run."""
    kept, srcs, tgts = [], [], []
    n = positions(tr)
    for i, (en, fr) in enumerate(pairs):
        try:
            s = encode_source(tr, en)         # InputError beyond the encoder's positions too
            t = list(tr.tokenizer.target_ids(clean_text(fr, what="reference")))
        except InputError:
            continue
        if len(t) > MAX_DECODE_LEN or beyond_positions(n, len(s), len(t)):
            continue
        kept.append(i), srcs.append(s), tgts.append(t)
    return kept, srcs, tgts


@torch.inference_mode()
def _forced_steps(tr: Translator, src_ids: list[int], ref: list[int],
                  on_step: Callable[[int, "Decoding"], None] | None = None, prefix_length: int = 0,
                  prefix_unknown: Sequence[str] = ()) -> Decoding:
    """Forced decoding through the model's forced_steps: a Transformer runs every position in
    one pass (each step's input, the reference's previous token, is known in advance), a
    recurrent model step by step; the same Decoding as _left_to_right choosing the reference,
    up to float rounding."""
    memory, state = _encode(tr, src_ids)
    tgt_in = torch.tensor([[tr.tokenizer.bos_id] + ref[:-1]], device=tr.device)
    rec = StepRecord(tr, src_ids, memory)
    rec.prefix_length, rec.prefix_unknown = prefix_length, list(prefix_unknown)
    for j, st in enumerate(tr.model.forced_steps(tgt_in, memory, state)):
        rec.add(ref[j], st.logits[0], st, 0)
        if on_step is not None:
            on_step(j, rec.result())
    return rec.result()


@torch.inference_mode()
def beam_search(tr: Translator, text: str, width: int = 5, n_best: int | None = None,
                length_penalty: float = LENGTH_PENALTY,
                max_len: int | None = None, no_repeat: int = 0,
                target_prefix: str | Sequence[int] | None = None) -> Decoding:
    """Beam search; returns the best hypothesis, plus `nbest` and `beam_tree`.

    beam_tree lists every hypothesis kept at every step: {step, token, log_prob, parent,
    finished} where parent indexes the same list (-1 for the root). Each step's tensors are
    kept for the whole beam, so the best hypothesis's attention and states are read back
    along its path in the tree, without decoding it again.

    With a `target_prefix` y_1 .. y_n the first n steps keep one hypothesis, the prefix (one
    node a step in the tree, its log-prob sum the model's own log p of the given tokens); the
    beam branches from step n + 1, and every hypothesis ranked starts with the prefix."""
    settings = DecodeSettings("beam", width, n_best, length_penalty, max_len, no_repeat,
                              target_prefix=target_prefix).checked()
    processors = settings.processors(tr)
    n_best = width if n_best is None else n_best
    model, tok = tr.model, tr.tokenizer
    src_ids = encode_source(tr, text)
    given, unknown = target_prefix_ids(tr, settings.target_prefix)
    max_len = length_limit(tr, len(src_ids), max_len)
    _check_prefix_fits(given, max_len)
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
        if j < len(given):      # steering: one hypothesis, given its token, scored by the model's own log p
            t = int(given[j])
            ids, node, total = live[0]
            tree.append((j, t, total + float(logp[0, t]), node))
            node_row.append(0)
            h = (ids + [t], len(tree) - 1, tree[-1][2])
            if t == tok.eos_id:      # a prefix that ends the sentence is the whole output
                finished.append(h)
                break
            live = [h]
            state, feed, y = st.state, st.feed, torch.tensor([t], device=tr.device)
            continue
        if processors:
            written = torch.tensor([h[0] for h in live], dtype=torch.long, device=logp.device).view(len(live), j)
            last = torch.full((len(live),), j == max_len - 1, device=logp.device)
            logp = apply_processors(processors, written, logp, last)
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
        state = model.select_state(st.state, idx)
        feed = st.feed.index_select(0, idx)
        if memory.states.size(0) != len(keep):
            memory = memory1.select(torch.zeros(len(keep), dtype=torch.long, device=tr.device))
        y = torch.tensor([h[0][-1] for h in live], device=tr.device)
    else:
        finished.extend(live)   # max_len reached: unfinished hypotheses compete too
    ranked = sorted(finished, key=lambda h: h[2] / lp(len(h[0]), length_penalty), reverse=True)

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
    nbest = [Hypothesis(tok.decode(ids), tok.pieces(ids), logp, logp / lp(len(ids), length_penalty), node,
                        coverage(node)) for ids, node, logp in ranked[:n_best]]
    path, node = [], ranked[0][1]
    while node >= 0:              # walk the best hypothesis back to the root
        path.append(node)
        node = tree[node][3]
    rec = StepRecord(tr, src_ids, memory1)
    rec.prefix_length, rec.prefix_unknown = len(given), unknown
    rec.limit = max_len
    for j, node in enumerate(reversed(path)):
        rec.add(ranked[0][0][j], steps[j].logits[node_row[node]], steps[j], node_row[node])
    best = rec.result()
    best.nbest = nbest
    best.beam_tree = [{"step": j, "token": tok.piece(t), "log_prob": v, "parent": parent, "finished": t == tok.eos_id}
                      for j, t, v, parent in tree]
    return best


