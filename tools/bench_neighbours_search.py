"""How s2s.neighbours searches, measured: exact top-k of every step's decoder state against a
built index, by torch in several precisions and by faiss (where it is importable), as JSON.

    python -m s2s.neighbours build --model en-fr-additive
    python tools/bench_neighbours_search.py --model en-fr-additive --threads 1

The queries are the real ones of the bench's sentence (s2s.bench.SENTENCE_20): its decoder
states along its greedy translation (one per output step), k = 5. Each method is timed on the
same queries, the methods in turn within each of --runs rounds, every other round reversed
(medians; wall time and the process's CPU time, which a busy machine does not inflate), and
checked against exact fp32: the share of steps whose nearest state is the same, and recall@k.

    torch_fp32             unit rows kept in fp32 (what s2s.neighbours does)
    torch_fp16, torch_bf16 unit rows kept in half precision, the product in that precision
    torch_fp16_chunked     fp16 rows upcast to fp32 16,384 at a time, per query
    faiss_flat_fp32        faiss.IndexFlatIP (exact)
    faiss_sq_fp16          faiss.IndexScalarQuantizer, fp16 codes (exact up to fp16)
    faiss_hnsw             faiss.IndexHNSWFlat, M = 32, efSearch = 64 (approximate; its build time too)

faiss is not a requirement: install it beside the project to compare, e.g.
`pip install --target /tmp/faiss faiss-cpu==1.15.1` and `PYTHONPATH=/tmp/faiss`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from s2s.bench import SENTENCE_20  # noqa: E402
from s2s.checkpoint import load_translator  # noqa: E402
from s2s.decode import encode_source, greedy  # noqa: E402
from s2s.neighbours import INDEX_TENSORS, load_index, sentence_states, unit_rows  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="en-fr-additive")
    p.add_argument("--index", help="the index folder (default: the cache folder)")
    p.add_argument("--threads", type=int, default=1, help="torch's and faiss's threads (the app uses 1)")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--no-hnsw", action="store_true", help="skip faiss's HNSW (its build takes a minute)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    from safetensors.torch import load_file
    tr = load_translator(a.model)
    index = load_index(tr, a.index)
    stored = load_file(str(index.where / INDEX_TENSORS))["states"]           # (M, D) as stored (int8 codes)
    keys32 = index.state_keys                                                # unit rows, fp32
    keys16, keysbf = keys32.half(), keys32.bfloat16()
    d = greedy(tr, SENTENCE_20)
    _, q = sentence_states(tr, encode_source(tr, SENTENCE_20), d.target_ids)
    q = unit_rows(q)
    M, D, K = keys32.size(0), keys32.size(1), a.k

    def chunked(n: int = 16384):
        vals, rows = [], []
        for s in range(0, M, n):
            v, i = (q @ keys16[s:s + n].float().T).topk(K, dim=-1)
            vals.append(v), rows.append(i + s)
        v, i = torch.cat(vals, 1).topk(K, dim=-1)
        return v, torch.cat(rows, 1).gather(1, i)

    methods = {"torch_fp32": lambda: (q @ keys32.T).topk(K, dim=-1),
               "torch_fp16": lambda: (q.half() @ keys16.T).topk(K, dim=-1),
               "torch_bf16": lambda: (q.bfloat16() @ keysbf.T).topk(K, dim=-1),
               "torch_fp16_chunked": chunked}
    out: dict = {"model": tr.name, "threads": a.threads, "states": M, "dim": D, "queries": q.size(0), "k": K,
                 "stored_dtype": str(stored.dtype).removeprefix("torch.")}
    try:
        import faiss
        faiss.omp_set_num_threads(a.threads)
        x, qn = keys32.numpy(), q.numpy()
        flat = faiss.IndexFlatIP(D)
        flat.add(x)
        sq = faiss.IndexScalarQuantizer(D, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        sq.train(x)
        sq.add(x)
        methods["faiss_flat_fp32"] = lambda: flat.search(qn, K)
        methods["faiss_sq_fp16"] = lambda: sq.search(qn, K)
        if not a.no_hnsw:
            hnsw = faiss.IndexHNSWFlat(D, 32, faiss.METRIC_INNER_PRODUCT)
            t = time.perf_counter()
            hnsw.add(x)
            out["faiss_hnsw_build_s"] = round(time.perf_counter() - t, 1)
            hnsw.hnsw.efSearch = 64
            methods["faiss_hnsw"] = lambda: hnsw.search(qn, K)
        out["faiss"] = faiss.__version__
    except ImportError:
        out["faiss"] = "not installed"
    for fn in methods.values():
        fn()
    wall: dict[str, list[float]] = {n: [] for n in methods}
    cpu: dict[str, list[float]] = {n: [] for n in methods}
    for r in range(a.runs):
        for name, fn in (list(methods.items()) if r % 2 == 0 else reversed(methods.items())):
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall[name].append((time.perf_counter() - t) * 1000)
            cpu[name].append((time.process_time() - c) * 1000)
    exact = methods["torch_fp32"]()[1]

    def rows_of(result) -> torch.Tensor:
        r = result[1]
        return r if isinstance(r, torch.Tensor) else torch.from_numpy(r)

    out["wall_ms_p50"] = {n: round(statistics.median(v), 2) for n, v in wall.items()}
    out["cpu_ms_p50"] = {n: round(statistics.median(v), 2) for n, v in cpu.items()}
    out["top1_as_fp32"], out["recall_at_k"] = {}, {}
    for name, fn in methods.items():
        got = rows_of(fn())
        out["top1_as_fp32"][name] = round(float((got[:, 0] == exact[:, 0]).float().mean()), 3)
        out["recall_at_k"][name] = round(statistics.mean(len(set(g.tolist()) & set(e.tolist())) / K
                                                         for g, e in zip(got, exact)), 3)
    out["memory_mb"] = {"fp32": round(M * D * 4 / 1e6, 1), "fp16": round(M * D * 2 / 1e6, 1)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
