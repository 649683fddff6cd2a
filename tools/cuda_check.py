"""The CUDA path, checked and timed on a machine with a GPU: prints one JSON object.

    python tools/cuda_check.py [--opus DIR] [--decoding-only]

First, greedy, beam and steered decoding (check_decoding) of en-fr-additive, en-fr-transformer
(and with --decoding-only a tiny Marian, then nothing else) against the CPU, timed. Then:

For the shipped Transformer (fp32 on the GPU, as load_translator puts it there) and tiny Hugging
Face models built offline (tests/hub_models.py: Marian, T5, M2M100) in bf16 and fp16, and with
--opus an opus-mt-en-fr-shaped Marian (built there if DIR does not hold one): greedy decoding,
every one-pass contribution method (s2s.contributions) and gradient x input (and for
en-fr-additive and en-fr-transformer all three gradient attributions), each against the
same computation on the CPU in fp32 (the largest difference of the row-normalised matrices, and
whether the greedy output is the same), and their times on the GPU (median of 5, synchronised).
Needs torch, transformers, sentencepiece and captum; not the app's packages (no streamlit, plotly).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from s2s.attributions import grad_x_input, source_ids  # noqa: E402
from s2s.checkpoint import load_translator  # noqa: E402
from s2s.contributions import contributions, normalised  # noqa: E402
from s2s.decode import DecodeSettings, decode, forced, greedy  # noqa: E402

TEXT, FR = "the cat sat on the mat .", "le chat est assis sur le tapis ."
SHIPPED_TEXT = "She has a big black dog."


def ms(fn, runs: int = 5) -> float:
    fn()
    times = []
    for _ in range(runs):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - t))
    return round(statistics.median(times), 2)


def check(spec: str, text: str, reference: str | None, dtype: torch.dtype | None) -> dict:
    """One model on the GPU (at `dtype` for a hub model) against itself on the CPU in fp32."""
    extra = {} if dtype is None else {"dtype": dtype}
    gpu = load_translator(spec, device="cuda", **extra)
    cpu = load_translator(spec, device="cpu", **({} if dtype is None else {"dtype": torch.float32}))
    row = {"model": Path(spec).name, "dtype": str(next(gpu.model.parameters()).dtype).replace("torch.", "")}
    g_gpu, g_cpu = greedy(gpu, text), greedy(cpu, text)
    row["greedy_same_as_cpu"] = g_gpu.target_ids == g_cpu.target_ids
    ids = g_cpu.target_ids if reference is None else cpu.tokenizer.target_ids(reference)
    out = {}
    for tr in (gpu, cpu):
        src = torch.tensor([source_ids(tr, text)], device=tr.device)
        tgt = torch.tensor(ids, device=tr.device)
        layers, _, share, _ = contributions(tr.model, src, tgt)
        out[tr.device.type] = (layers, share, normalised(np.abs(grad_x_input(tr.model, src, tgt))))
    (lg, sg, ag), (lc, sc, ac) = out["cuda"], out["cpu"]
    row["contrib_max_diff"] = {m: round(float(np.abs(lg[m] - lc[m]).max()), 5) for m in lc}
    row["source_share_max_diff"] = {m: round(float(np.abs(sg[m] - sc[m]).max()), 5) for m in sc}
    row["grad_x_input_max_diff"] = round(float(np.abs(ag - ac).max()), 5)
    src = torch.tensor([source_ids(gpu, text)], device="cuda")
    tgt = torch.tensor(ids, device="cuda")
    row["pieces"] = [src.size(1), len(ids)]
    row["gpu_ms"] = {"greedy": ms(lambda: greedy(gpu, text)),
                     "forced": ms(lambda: forced(gpu, text, reference_ids=ids)),
                     "contributions": ms(lambda: contributions(gpu.model, src, tgt)),
                     "grad_x_input": ms(lambda: grad_x_input(gpu.model, src, tgt))}
    row["contrib_vs_forced"] = round(row["gpu_ms"]["contributions"] / row["gpu_ms"]["forced"], 2)
    return row


LONG_TEXT = "We should have left earlier, but we were waiting for my brother who had missed the last train home."


def check_decoding(spec: str, prefix: str | None = None) -> dict:
    """Greedy, beam search (5) and steered decoding (`prefix`, DecodeSettings.target_prefix; default:
    greedy's own first 3 pieces) on the GPU against the CPU in fp32: the same output and log p on
    SHIPPED_TEXT, the steered log p equal to forced decoding's, and each timed on LONG_TEXT (a
    hub model at the dtype load_translator gives it on a GPU: bf16 where supported)."""
    gpu, cpu = load_translator(spec, device="cuda"), load_translator(spec, device="cpu")
    if prefix is None:
        prefix = cpu.tokenizer.decode(greedy(cpu, SHIPPED_TEXT).target_ids[:3])
    row = {"model": Path(spec).name, "dtype": str(next(gpu.model.parameters()).dtype).replace("torch.", ""),
           "prefix": prefix, "gpu_ms": {}}
    for label, s in (("greedy", DecodeSettings()), ("beam5", DecodeSettings("beam", width=5, n_best=3)),
                     ("steered", DecodeSettings(target_prefix=prefix))):
        d, c = decode(gpu, SHIPPED_TEXT, s), decode(cpu, SHIPPED_TEXT, s)
        row[label] = d.translation
        row[f"{label}_same_as_cpu"] = d.target_ids == c.target_ids
        row[f"{label}_log_p_gpu_cpu"] = [round(d.log_prob, 4), round(c.log_prob, 4)]
        row["gpu_ms"][label] = ms(lambda: decode(gpu, LONG_TEXT, s))
    steered = decode(gpu, SHIPPED_TEXT, DecodeSettings(target_prefix=prefix))
    row["steered_log_p_is_forced"] = abs(forced(gpu, SHIPPED_TEXT, reference_ids=steered.target_ids).log_prob
                                         - steered.log_prob) < 1e-3
    return row


def check_attributions(spec: str, text: str) -> dict:
    """The three gradient attributions on the GPU against the CPU: a recurrent model's backward
    runs through its encoder's nn.LSTM (cuDNN's refuses eval mode: attributions.cudnn_paused)."""
    from s2s.attributions import integrated_gradients, leave_one_out
    gpu, cpu = load_translator(spec, device="cuda"), load_translator(spec, device="cpu")
    ids = greedy(cpu, text).target_ids
    methods = {"grad_x_input": grad_x_input, "integrated_gradients": lambda *a: integrated_gradients(*a)[0],
               "leave_one_out": leave_one_out}
    row = {"model": Path(spec).name, "max_diff": {}, "gpu_ms": {}}
    for name, fn in methods.items():
        try:
            got = {}
            for tr in (gpu, cpu):
                src = torch.tensor([source_ids(tr, text)], device=tr.device)
                got[tr.device.type] = normalised(np.abs(fn(tr.model, src, torch.tensor(ids, device=tr.device))))
            row["max_diff"][name] = round(float(np.abs(got["cuda"] - got["cpu"]).max()), 5)
            src, tgt = torch.tensor([source_ids(gpu, text)], device="cuda"), torch.tensor(ids, device="cuda")
            row["gpu_ms"][name] = ms(lambda: fn(gpu.model, src, tgt), runs=3)
        except Exception as e:     # the report names what failed
            row["max_diff"][name] = f"{type(e).__name__}: {e}"[:200]
    row["cudnn_enabled_after"] = torch.backends.cudnn.enabled
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--opus", metavar="DIR", help="also an opus-mt-en-fr-shaped Marian (built into DIR if absent)")
    p.add_argument("--decoding-only", action="store_true",
                   help="only greedy, beam and steered decoding (check_decoding): needs neither captum nor plotly")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 2
    import hub_models
    rows = [{"device": torch.cuda.get_device_name(0), "torch": torch.__version__}]
    rows += [check_decoding(str(ROOT / "checkpoints" / "en-fr-additive"), "Elle a une"),
             check_decoding(str(ROOT / "checkpoints" / "en-fr-transformer"), "Elle a une")]
    if a.decoding_only:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(check_decoding(str(hub_models.marian(Path(tmp) / "marian"))))
        print(json.dumps(rows, indent=1))
        return 0
    rows.append(check(str(ROOT / "checkpoints" / "en-fr-transformer"), SHIPPED_TEXT, None, None))
    for name in ("en-fr-additive", "en-fr-transformer"):
        rows.append(check_attributions(str(ROOT / "checkpoints" / name), SHIPPED_TEXT))
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in hub_models.BUILDERS.items():
            path = build(Path(tmp) / name)
            for dtype in (torch.bfloat16, torch.float16):
                try:
                    rows.append(check(str(path), TEXT, FR, dtype))
                except Exception as e:     # a report, not a crash: say which one failed and how
                    rows.append({"model": name, "dtype": str(dtype), "error": f"{type(e).__name__}: {e}"[:300]})
        if a.opus:
            opus = Path(a.opus)
            if not (opus / "config.json").is_file():
                hub_models.marian(opus, hub_models.OPUS_MT_EN_FR, hub_models.OPUS_MT_EN_FR_VOCAB)
            for dtype in (torch.bfloat16, torch.float16):
                rows.append(check(str(opus), "The cat sleeps on the red sofa of the house.",
                                  "Le chat dort sur le canapé rouge de la maison.", dtype))
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
