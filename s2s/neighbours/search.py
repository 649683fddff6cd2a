"""The search: a sentence's pooled encoder state and its decoder state at each output step
against the index, exactly (one matrix product and a top-k), with the 2-D map of the neighbours."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import torch

from ..decode import encode_source, greedy
from ..loaded import Translator
from ..text import MAX_DECODE_LEN, InputError, check_range
from .build import encode_pairs
from .index import NeighbourIndex, unit_rows
from .projection import Projection, project

MAX_K = 50


@dataclass
class SentenceNeighbour:
    pair: int               # its row in the index (the corpus's order, pairs left out skipped)
    english: str
    french: str
    similarity: float       # cosine of the pooled encoder states


@dataclass
class StateNeighbour:
    pair: int
    step: int               # the step of that pair's decoding (from 0)
    piece: str              # the training target piece at that step (teacher forcing)
    predicted: str          # the model's own argmax at that state
    similarity: float       # cosine of the decoder states
    english: str
    french: str


@dataclass
class StepNeighbours:
    step: int
    piece: str              # this sentence's output piece at the step
    neighbours: list[StateNeighbour]


@dataclass
class Neighbours:
    """One sentence's neighbours: `sentences` (k nearest training sentences, best first), `steps`
    (per output step, the k nearest training decoder states), and their `projection`."""
    model: str
    text: str
    translation: str
    source_tokens: list[str]
    target_tokens: list[str]
    target_ids: list[int]
    k: int
    sentences: list[SentenceNeighbour]
    steps: list[StepNeighbours]
    projection: Projection
    index: dict             # where the index is, its corpus and size

    def to_json(self) -> dict:
        out = asdict(self)
        out["projection"] = self.projection.to_json()
        return out


def sentence_states(tr: Translator, src_ids: Sequence[int], target_ids: Sequence[int]
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(H,) the pooled encoder state of one sentence and (T, D) its decoder states forced on
    `target_ids` (what the index holds for a training pair, computed the same way)."""
    p, states, _ = encode_pairs(tr, [list(src_ids)], [list(target_ids)])
    return p[0], states[0]


def top_k(keys: torch.Tensor, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact search: (n, d) unit keys, (q, d) queries -> (q, k) cosines and rows, best first."""
    sims = unit_rows(queries) @ keys.T                          # (q, n): every cosine, one product
    return sims.topk(min(k, keys.size(0)), dim=-1)


@torch.inference_mode()
def search(tr: Translator, index: NeighbourIndex, text: str, k: int = 5,
           target_ids: Sequence[int] | None = None) -> Neighbours:
    """The k training sentences nearest to `text` and, at each step of its translation, the k
    nearest training decoder states, with the 2-D projection. `target_ids` is the translation to
    read the steps of (e.g. the page's own decoding; it ends in </s>); default its greedy one.
    InputError for unusable text or k; IndexNotReady if `index` is not `tr`'s."""
    check_range("k", k, 1, MAX_K)
    index.check(tr)
    src = encode_source(tr, text)
    if target_ids is None:
        target_ids = greedy(tr, text).target_ids
    target_ids = [int(i) for i in target_ids]
    if not 0 < len(target_ids) <= MAX_DECODE_LEN:
        raise InputError(f"The translation is {len(target_ids)} pieces long; it must have 1 to {MAX_DECODE_LEN}.")
    sent, states = sentence_states(tr, src, target_ids)
    s_sim, s_row = top_k(index.sentence_keys, sent[None], k)
    d_sim, d_row = top_k(index.state_keys, states, k)           # (T, k)
    tok = tr.tokenizer
    piece = tok.piece
    pairs, rows_pair = index.pairs, index.state_pair[d_row].tolist()
    offsets = index.offsets.tolist()
    sentences = [SentenceNeighbour(r, *pairs[r], round(s, 5)) for s, r in zip(s_sim[0].tolist(), s_row[0].tolist())]
    steps = []
    for j, (sims, rows, prs) in enumerate(zip(d_sim.tolist(), d_row.tolist(), rows_pair)):
        steps.append(StepNeighbours(j, piece(target_ids[j]), [
            StateNeighbour(p, r - offsets[p], piece(int(index.pieces[r])), piece(int(index.predicted[r])), round(s, 5),
                           *pairs[p]) for s, r, p in zip(sims, rows, prs)]))
    return Neighbours(tr.name, text, tok.decode(target_ids), tok.pieces(src), tok.pieces(target_ids), target_ids, k,
                      sentences, steps, project(index, d_row, states, tok),
                      {"path": str(index.where) if index.where else None, "corpus": index.meta.get("corpus", {}),
                       "pairs": index.n_pairs, "states": index.n_states})


def marked(tok, ids: Sequence[int], step: int) -> str:
    """A target sentence's pieces as text with the piece at `step` in [brackets] (the CLI's view:
    sentencepiece's ▁ and byte-level BPE's Ġ read as spaces; special pieces left out)."""
    out = []
    for j, i in enumerate(ids):
        p = tok.piece(i)
        if p in ("</s>", "<s>", "<pad>") and j != step:
            continue
        bare = p.lstrip("▁Ġ")
        lead = " " if bare != p else ""
        out.append(f"{lead}[{bare}]" if j == step else lead + bare)
    return "".join(out).strip()
