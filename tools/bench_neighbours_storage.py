"""What storing a neighbours index smaller costs, measured: the agreement of each way of storing
it with the exact search over fp32 states, and its size on disk, as JSON.

    OMP_NUM_THREADS=1 python tools/bench_neighbours_storage.py --model en-fr-additive

The model's states are computed once in fp32 for the shipped sample's pairs (as
`python -m s2s.neighbours build` computes them: s2s.neighbours.forced_states), and every way of
storing them is derived from those:

    fp32                 the states as computed (the reference: the exact search)
    fp16                 half precision (the index's format until issue #62)
    int8                 each row's int8 codes, the row over its largest |entry| times 127 (what
                         s2s.neighbours stores now; cosines read the codes, a row's scale cancels)
    pcaR_fp16, pcaR_int8 the rows projected onto the R leading principal directions of the
                         index's own states (uncentred, so dot products stay dot products), then
                         fp16 or int8; the query is projected the same way
    fp16_first_N         fp16 of the sample's first N pairs only (fewer states)

The queries are held-out sentences, not in the index: the rows of examples/test_long.tsv (the
test split) of at most --max-words English words, the first --queries of them, each read along
its greedy translation. For each way, against the fp32 search, with k = --k:

    sentence_overlap_at_k  the share of the k nearest training sentences the two searches share
    step_overlap_at_k      the same for the k nearest decoder states, over every query step
    step_top1              the share of query steps whose nearest state is the same
    own_state_top1         --own training pairs, each step's fp32 state as the query: the share
                           of steps whose nearest stored state is their own (the exactness the
                           tests hold the index to)
    safetensors_mb, json_mb, total_mb   its files' sizes (the JSON is the pairs and the record)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from s2s.checkpoint import load_translator  # noqa: E402
from s2s.data import read_pairs  # noqa: E402
from s2s.decode import encode_source, greedy, usable_pairs  # noqa: E402
from s2s.neighbours import SAMPLE, encode_pairs, forced_states, int8_codes, unit_rows  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "examples" / "test_long.tsv"


def safetensors_bytes(tensors: dict[str, torch.Tensor]) -> int:
    from safetensors.torch import save
    return len(save({k: v.contiguous() for k, v in tensors.items()}))


def principal_axes(x: torch.Tensor, r: int) -> torch.Tensor:
    """(r, d): the r leading eigenvectors of x^T x (uncentred: projections keep dot products)."""
    x = unit_rows(x).double()
    _, vecs = torch.linalg.eigh(x.T @ x)
    return vecs[:, -r:].flip(-1).T.float()


def overlap(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean over rows of |a_i ∩ b_i| / k for two (q, k) tables of ids."""
    return sum(len(set(x) & set(y)) for x, y in zip(a.tolist(), b.tolist())) / a.numel()


def top(keys: torch.Tensor, queries: torch.Tensor, k: int) -> torch.Tensor:
    return (unit_rows(queries) @ keys.T).topk(k, dim=-1).indices


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="en-fr-additive")
    p.add_argument("--pairs", type=int, default=10_000, help="the shipped sample's first N pairs (default all)")
    p.add_argument("--queries", type=int, default=200, help="held-out sentences searched")
    p.add_argument("--max-words", type=int, default=15, help="the longest held-out English taken, in words")
    p.add_argument("--own", type=int, default=300, help="training pairs whose own states are looked for")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--pca", default="128,64", help="the reduced dimensions to try, comma-separated")
    p.add_argument("--fewer", type=int, default=5000, help="the pairs of the fewer-states way")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    tr = load_translator(a.model)
    text_pairs = read_pairs(SAMPLE)[:a.pairs]
    kept, srcs, tgts = usable_pairs(tr, text_pairs)
    ref = forced_states(tr, srcs, tgts, keep=lambda x: x.float())          # fp32, as computed
    build_s = time.perf_counter() - t0
    pairs_json = len(json.dumps({"pairs": [text_pairs[i] for i in kept]}, ensure_ascii=False).encode()) + 2_000

    # the held-out queries, each along its greedy translation
    held = [en for en, _ in read_pairs(QUERIES) if len(en.split()) <= a.max_words][:a.queries]
    q_src = [encode_source(tr, en) for en in held]
    q_tgt = [greedy(tr, en).target_ids for en in held]
    q_sent, q_states = [], []
    for b in range(0, len(held), 32):
        s, st, _ = encode_pairs(tr, q_src[b:b + 32], q_tgt[b:b + 32])
        q_sent.append(s), q_states.extend(st)
    q_sent, q_steps = torch.cat(q_sent), torch.cat(q_states)

    # training pairs' own states as queries: the rows of every --own-th pair's steps
    offsets = ref["offsets"].tolist()
    every = max(1, len(kept) // a.own)
    own_rows = torch.tensor([r for i in range(0, len(kept), every) for r in range(offsets[i], offsets[i + 1])])
    own_q = ref["states"][own_rows]

    k = a.k
    exact_sent = top(unit_rows(ref["sentences"]), q_sent, k)
    exact_step = top(unit_rows(ref["states"]), q_steps, k)
    rest = {key: ref[key] for key in ("offsets", "pieces", "predicted")}

    def measure(sentences: torch.Tensor, states: torch.Tensor, to_sent=lambda x: x, to_state=lambda x: x,
                extra: dict | None = None, n_pairs: int | None = None) -> dict:
        n_pairs = n_pairs if n_pairs is not None else len(kept)
        n_states = offsets[n_pairs]
        stored = {"sentences": sentences, "states": states, **(extra or {}),
                  "offsets": rest["offsets"][:n_pairs + 1], "pieces": rest["pieces"][:n_states],
                  "predicted": rest["predicted"][:n_states]}
        s_keys, d_keys = unit_rows(sentences), unit_rows(states)
        got_sent = top(s_keys, to_sent(q_sent), k)
        got_step = top(d_keys, to_state(q_steps), k)
        mine = own_rows[own_rows < n_states]
        own = top(d_keys, to_state(own_q[:mine.numel()]), 1)[:, 0]
        st_bytes = safetensors_bytes(stored)
        js = pairs_json * n_pairs // len(kept)
        return {"pairs": n_pairs, "states": n_states, "dims": int(states.size(1)), "dtype": str(states.dtype)[6:],
                "sentence_overlap_at_k": round(overlap(got_sent, exact_sent), 4),
                "step_overlap_at_k": round(overlap(got_step, exact_step), 4),
                "step_top1": round(float((got_step[:, 0] == exact_step[:, 0]).float().mean()), 4),
                "own_state_top1": round(float((own == mine).float().mean()), 4),
                "safetensors_mb": round(st_bytes / 1e6, 1), "json_mb": round(js / 1e6, 2),
                "total_mb": round((st_bytes + js) / 1e6, 1)}

    ways = {"fp32": measure(ref["sentences"], ref["states"]),
            "fp16": measure(ref["sentences"].half(), ref["states"].half()),
            "int8": measure(int8_codes(ref["sentences"]), int8_codes(ref["states"]))}
    for r in [int(x) for x in a.pca.split(",") if x]:
        ps, pd = principal_axes(ref["sentences"], r), principal_axes(ref["states"], r)
        axes = {"sentence_axes": ps, "state_axes": pd}
        s_r, d_r = unit_rows(ref["sentences"]) @ ps.T, unit_rows(ref["states"]) @ pd.T
        ways[f"pca{r}_fp16"] = measure(s_r.half(), d_r.half(), lambda x: x @ ps.T, lambda x: x @ pd.T, axes)
        ways[f"pca{r}_int8"] = measure(int8_codes(s_r), int8_codes(d_r), lambda x: x @ ps.T, lambda x: x @ pd.T, axes)
    if 0 < a.fewer < len(kept):
        n = a.fewer
        ways[f"fp16_first_{n}"] = measure(ref["sentences"][:n].half(), ref["states"][:offsets[n]].half(), n_pairs=n)
    print(json.dumps({"model": tr.name, "pairs": len(kept), "states": offsets[-1], "k": k, "queries": len(held),
                      "query_steps": int(q_steps.size(0)), "own_steps": int(own_rows.numel()),
                      "fp32_states_seconds": round(build_s, 1), "seconds": round(time.perf_counter() - t0, 1),
                      "ways": ways}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
