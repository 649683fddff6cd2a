"""Many sentences at once, for evaluation, batch translation and corpus alignment: the same
searches as search.py (the same outputs, up to float noise), sentences sorted by length and
padded into one decoder batch."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..hooks import knocked_out, knocked_out_rows, pointer_heads, read_head_mask, resolve_head_mask
from ..loaded import Translator
from ..text import InputError
from .processors import apply_processors
from .result import Decoding, was_cut
from .search import encode_source, length_limit
from .settings import DecodeSettings, lp


def no_prefix(settings: DecodeSettings) -> DecodeSettings:
    """`settings`, if they steer nothing: a target prefix is where one sentence's translation
    starts, which a batch of sentences does not share (decode each with `decode`)."""
    if settings.steered:
        raise InputError("A target prefix steers one sentence's translation: batched decoding takes none.")
    return settings


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """(B, max length) ids, each row padded on the right with `pad_id`."""
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for r, row in enumerate(rows):
        out[r, :len(row)] = torch.tensor(list(row), dtype=torch.long)
    return out.to(device)


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
    B = len(sources)
    src = pad_batch(sources, tok.pad_id, tr.device)
    tgt_in = pad_batch([[tok.bos_id] + list(t[:-1]) for t in targets], tok.pad_id, tr.device)
    memory, state = model.encode(src, torch.tensor([len(s) for s in sources]))
    steps = model.forced_steps(tgt_in, memory, state)    # a Transformer: every position in one pass
    if heads and steps[0].cross_attention is None:
        return [None] * B
    a = torch.stack([st.cross_attention if heads else st.alpha for st in steps], -2).float().cpu().numpy()
    return [a[r, ..., :len(t), :len(s)] for r, (s, t) in enumerate(zip(sources, targets))]


@torch.inference_mode()
def greedy_batch(tr: Translator, texts: Sequence[str], settings: DecodeSettings = DecodeSettings(),
                 batch_size: int = 64) -> list[str]:
    """Greedy translations of many sentences, `batch_size` at a time (sorted by length
    so that little time goes to padding), with `settings`' max_len and no_repeat. Same
    outputs as `greedy`, up to float noise."""
    return greedy_batch_stopped(tr, texts, settings, batch_size)[0]


@torch.inference_mode()
def greedy_batch_stopped(tr: Translator, texts: Sequence[str], settings: DecodeSettings = DecodeSettings(),
                         batch_size: int = 64) -> tuple[list[str], list[bool]]:
    """`greedy_batch`, and for each sentence whether the decoder produced </s> itself
    (False: it ran to the length limit). The heads of `settings.head_mask` are knocked out."""
    settings = no_prefix(replace(settings, method="greedy").checked())
    with knocked_out(tr.model, settings.head_mask):
        return _greedy_rows(tr, texts, settings, batch_size)


def _greedy_rows(tr: Translator, texts: Sequence[str], settings: DecodeSettings, batch_size: int,
                 masks: Sequence = ()) -> tuple[list[str], list[bool]]:
    """Greedy decoding of `texts`, row i with the heads of masks[i] knocked out where `masks`
    is given (s2s.hooks.knocked_out_rows; else every row whole, or under the caller's mask)."""
    processors, max_len = settings.processors(tr), settings.max_len
    model = tr.model
    srcs = [encode_source(tr, t) for t in texts]
    order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))
    out: list[str] = [""] * len(srcs)
    stopped: list[bool] = [False] * len(srcs)
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        with knocked_out_rows(model, [masks[i] for i in idx] if masks else ()):
            _greedy_batch_of(tr, srcs, idx, processors, max_len, out, stopped)
    return out, stopped


def _greedy_batch_of(tr: Translator, srcs: Sequence[Sequence[int]], idx: Sequence[int], processors, max_len,
                     out: list[str], stopped: list[bool]) -> None:
    """One padded batch of _greedy_rows: rows `idx` of `srcs`, written into out and stopped."""
    model, tok = tr.model, tr.tokenizer
    src = pad_batch([srcs[i] for i in idx], tok.pad_id, tr.device)
    memory, state = model.encode(src, torch.tensor([len(srcs[i]) for i in idx]))
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


MASK_BATCH_ROWS = 96      # rows of one decoder batch of masks side by side (docs/speed.md: the CPU's products)


@torch.inference_mode()
def greedy_batch_masks(tr: Translator, texts: Sequence[str], masks: Sequence,
                       settings: DecodeSettings = DecodeSettings(), rows: int = MASK_BATCH_ROWS
                       ) -> list[list[str]]:
    """For each head mask of `masks`, greedy_batch(tr, texts) with its heads knocked out, the
    masks side by side in one decoder batch (each row its own mask: s2s.hooks.knocked_out_rows)
    of about `rows` rows (MASK_BATCH_ROWS). On a CPU the output layer's weights (vocabulary x d) are read once a
    step however many rows share them, so 96 rows cost far less than 96 / len(texts) batches of
    len(texts) (docs/speed.md). The same outputs as one greedy_batch per mask, up to float noise.
    A copying Transformer's masks that take out cross-attention heads (its pointer reads the
    heads still in, one set per pass) are decoded one mask at a time."""
    settings = no_prefix(replace(settings, method="greedy", head_mask=()).checked())
    model = tr.model
    # every mask checked (InputError) before any decoding; those the pointer reads go alone
    alone = [n for n, m in enumerate(masks) if m and pointer_heads(model, resolve_head_mask(model, read_head_mask(m)))]
    out = {n: greedy_batch(tr, texts, replace(settings, head_mask=read_head_mask(masks[n]))) for n in alone}
    per = max(1, rows // max(1, len(texts)))
    todo = [n for n, m in enumerate(masks) if n not in out]
    for start in range(0, len(todo), per):
        chunk = todo[start:start + per]
        hyps = _greedy_rows(tr, [t for _ in chunk for t in texts], settings, len(chunk) * len(texts),
                            [masks[n] for n in chunk for _ in texts])[0]
        for k, n in enumerate(chunk):
            out[n] = hyps[k * len(texts):(k + 1) * len(texts)]
    return [out[n] for n in range(len(masks))]


# ------------------------------------------------------------------ batched beam search

@torch.inference_mode()
def beam_search_batch(tr: Translator, texts: Sequence[str], settings: DecodeSettings = DecodeSettings("beam"),
                      batch_size: int = 32, attention: bool = False,
                      progress: Callable[[int, int], None] | None = None) -> list[Decoding]:
    """Beam search over many sentences at once: for each text, the best hypothesis of
    `decode(tr, text, settings)` with `settings` a beam search's (n_best=1) (the same search,
    so the same translation, and the same log-probs up to float noise).

    Per sentence, as there: at step j each live prefix y_<j (at most `width`) offers its best
    2w continuations, scored by sum_j log p(y_j | y_<j, x); walking all of them best first,
    one ending in </s> is finished, any other joins the new beam until that holds `width`.
    A sentence stops when `width` hypotheses have finished (or none is live), or at its
    own length limit (then its live prefixes compete too); the best finished hypothesis by
    sum_j log p / lp(|y|), lp(n) = ((5 + n) / 6)^length_penalty, is its translation.

    Sentences are sorted by length and decoded `batch_size` at a time, each with `width`
    rows in one decoder batch; a sentence's rows leave the batch when it stops. Returns one
    Decoding per text with tokens, translation and token log-probs, plus the attention
    matrix if `attention`; no per-step states, n-best or beam tree (`beam_search` has them).
    InputError if any text is unusable (check lines with `encode_source` first), or if
    `settings` has a target prefix (`no_prefix`). The heads of `settings.head_mask` are knocked out."""
    settings = no_prefix(replace(settings, method="beam", n_best=None).checked())
    srcs = [encode_source(tr, t) for t in texts]
    order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))   # similar lengths: little padding
    out: list[Decoding | None] = [None] * len(srcs)
    with knocked_out(tr.model, settings.head_mask):
        for b in range(0, len(order), batch_size):
            idx = order[b:b + batch_size]
            for i, d in zip(idx, _beam_batch(tr, [srcs[i] for i in idx], settings, attention)):
                out[i] = d
            if progress is not None:
                progress(min(b + batch_size, len(order)), len(order))
    return out


def _beam_batch(tr: Translator, srcs: list[list[int]], settings: DecodeSettings, attention: bool) -> list[Decoding]:
    """One batch of `beam_search_batch`. The decoder batch holds n sentences x k slots,
    sentence-major (row r * k + q is slot q of sentence r); k = 1 at the first step, then
    `width`. A slot with no live prefix scores -inf, so its candidates are never taken.
    Each row carries its prefix's tokens, their log-probs and attention rows, copied from
    the parent row at every step (cheaper than walking back pointers for many sentences)."""
    model, tok, dev = tr.model, tr.tokenizer, tr.device
    processors = settings.processors(tr)
    width, max_len = settings.width, settings.max_len
    EOS = tok.eos_id
    B, S = len(srcs), max(len(s) for s in srcs)
    memory0, state = model.encode(pad_batch(srcs, tok.pad_id, dev), torch.tensor([len(s) for s in srcs]))
    memory, feed = memory0, model.initial_feed(B)
    limits = [length_limit(tr, len(s), max_len) for s in srcs]
    sent = list(range(B))                               # the sentence of each block of rows
    score = torch.zeros(B, 1, device=dev)               # (n, k) log-prob sums of the live prefixes
    y = torch.full((B,), tok.bos_id, dtype=torch.long, device=dev)
    limit_t = torch.tensor(limits, device=dev)
    ids = torch.zeros(B, 0, dtype=torch.long, device=dev)   # (n * k, j) each row's prefix
    lps = torch.zeros(B, 0, device=dev)                     # (n * k, j) its tokens' log-probs
    attn = torch.zeros(B, 0, S, device=dev) if attention else None   # (n * k, j, S) its attention rows
    # per sentence: (ids, log-prob sum, log-probs, attention, whether its last token was the model's own top choice)
    finished: list[list[tuple]] = [[] for _ in range(B)]
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
            return ids[p].tolist() + [t], total, lps[p].tolist() + [lp], a, int(st.logits[p].argmax()) == t

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
        state = model.select_state(st.state, rows)
        feed = st.feed.index_select(0, rows)
        ids = torch.cat([ids[rows], new_tok.reshape(-1, 1)], 1)
        lps = torch.cat([lps[rows], new_lp.reshape(-1, 1)], 1)
        if attn is not None:
            attn = torch.cat([attn[rows], st.alpha[rows, None]], 1)
        y, score = new_tok.reshape(-1), new_score
    out = []
    for s, src_ids in enumerate(srcs):
        # max, like a stable sort's first, keeps the earliest of equal scores
        best_ids, _, best_lps, a, own = max(finished[s], key=lambda h: h[1] / lp(len(h[0]), settings.length_penalty))
        out.append(Decoding(source_tokens=tok.pieces(src_ids), target_tokens=tok.pieces(best_ids),
                            target_ids=best_ids, translation=tok.decode(best_ids), token_log_probs=best_lps,
                            attention=None if a is None else a[:, :len(src_ids)].double().cpu().numpy(),
                            states=None, contexts=None, encoder_states=None,
                            cut=was_cut(best_ids, limits[s], EOS, own)))
    return out
