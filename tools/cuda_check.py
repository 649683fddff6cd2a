"""The CUDA path, measured on a GPU machine: the shipped en-fr-additive and en-fr-transformer
(their fp32 weights on the GPU) and a tiny offline hub Marian (tests/hub_models.py) in bf16, fp16
and fp32: greedy, beam and steered decoding, each timed (median of 5 after a warm-up, with
torch.cuda.synchronize) and compared with the CPU's output and log p. Prints one JSON object.

    python tools/cuda_check.py > cuda_check.json        (from the repository's root)

It needs torch with CUDA, transformers and sentencepiece; not streamlit or plotly."""
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, decode, forced

TEXT = "She has a big black dog."
LONG = "We should have left earlier, but we were waiting for my brother who had missed the last train home."
out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}

def timed(fn, runs=5):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(runs):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1000)
    return round(sorted(ts)[len(ts) // 2], 2)

for name in ("en-fr-additive", "en-fr-transformer"):
    gpu = load_translator(name)
    cpu = load_translator(name, device="cpu")
    r = {"on": str(next(gpu.model.parameters()).device)}
    for label, s in (("greedy", DecodeSettings()), ("beam5", DecodeSettings("beam", width=5, n_best=3)),
                     ("steer", DecodeSettings(target_prefix="Elle a une"))):
        d = decode(gpu, TEXT, s)
        r[label] = d.translation
        r[label + "_ms"] = timed(lambda: decode(gpu, LONG, s))
        if cpu is not None:
            c = decode(cpu, TEXT, s)
            r[label + "_same_as_cpu"] = c.translation == d.translation
            r[label + "_logp_gpu_cpu"] = [round(d.log_prob, 4), round(c.log_prob, 4)]
    st = decode(gpu, TEXT, DecodeSettings(target_prefix="Elle a une"))
    r["steer_logp_equals_forced"] = abs(forced(gpu, TEXT, reference_ids=st.target_ids).log_prob - st.log_prob) < 1e-3
    out[name] = r

import hub_models
from s2s.hub import load_hub

with tempfile.TemporaryDirectory() as tmp:
    path = hub_models.marian(Path(tmp) / "marian")
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        tr = load_hub(str(path), dtype=dtype)
        r = {"dtype": str(next(tr.model.parameters()).dtype), "on": str(next(tr.model.parameters()).device)}
        g = decode(tr, "the cat sat on the mat .", DecodeSettings(max_len=12))
        b = decode(tr, "the cat sat on the mat .", DecodeSettings("beam", width=4, n_best=2, max_len=12))
        prefix = g.target_ids[:3]
        s = decode(tr, "the cat sat on the mat .", DecodeSettings(max_len=12, target_prefix=prefix))
        r.update(greedy_pieces=len(g.target_ids), beam_pieces=len(b.target_ids),
                 steer_keeps_greedy=s.target_ids == g.target_ids,
                 finite=bool(torch.isfinite(torch.tensor(g.token_log_probs)).all()),
                 greedy_ms=timed(lambda: decode(tr, "the cat sat on the mat .", DecodeSettings(max_len=12))))
        out[f"hub_marian_{r['dtype']}"] = r
print(json.dumps(out, indent=1))
