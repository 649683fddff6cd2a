"""Mix a fine-tuned translation checkpoint with the model it was fine-tuned from (WiSE-FT).

    python tools/interpolate_weights.py --model checkpoints/en-fr-general --base-commit 0395dba \
        --alpha 0.8 --out /tmp/general-0.8
    python -m s2s.evaluate --model /tmp/general-0.8 --test data/tatoeba/test.tsv --beam 5 --json
    python -m s2s.evaluate --model /tmp/general-0.8 --copy-test examples/copy_test.tsv --json

theta = (1 - alpha) theta_base + alpha theta_finetuned, tensor by tensor (Wortsman et al.
2022, "Robust fine-tuning of zero-shot models"): alpha = 1 is the fine-tuned model, 0 the
base. The base is read from git (`git show COMMIT:checkpoints/NAME/model.safetensors`), as
the copy fine-tune replaced it in place. What the fine-tune added has no base value and keeps
the fine-tuned one: the 115 new pieces' embedding rows and output biases (the base's rows
stop at its own vocabulary), the pointer-generator's gate and the location cue. The folder
written is a checkpoint like the others (fp16 weights, the fine-tuned config and tokenizer),
without metrics: evaluate it with s2s.evaluate. Used to measure whether the copy recipe's
BLEU cost can be bought back (docs/training.md, "Mixing the fine-tune with its base").
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parent.parent


def interpolate(base: dict[str, torch.Tensor], tuned: dict[str, torch.Tensor], alpha: float) -> dict[str, torch.Tensor]:
    """(1 - alpha) base + alpha tuned for every tensor of `tuned`; rows or tensors the base
    lacks (a grown vocabulary, new modules) keep the tuned values. fp16 out, as shipped."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], not {alpha}")
    mixed = {}
    for k, t in tuned.items():
        t = t.float()
        if k in base:
            b = base[k].float()
            if b.shape[1:] != t.shape[1:] or b.shape[0] > t.shape[0]:
                raise ValueError(f"{k}: the base's shape {tuple(b.shape)} does not fit {tuple(t.shape)}")
            b = torch.cat([b, t[b.shape[0]:]]) if b.shape[0] < t.shape[0] else b
            t = (1 - alpha) * b + alpha * t
        mixed[k] = t.to(torch.float16).contiguous()
    return mixed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="the fine-tuned checkpoint folder")
    p.add_argument("--base-commit", required=True, help="the git commit whose copy of the folder is the base")
    p.add_argument("--alpha", type=float, required=True, help="weight of the fine-tuned model, 0..1")
    p.add_argument("--out", required=True, help="the folder to write")
    a = p.parse_args()
    model = Path(a.model).resolve()
    rel = model.relative_to(ROOT) / "model.safetensors"
    blob = subprocess.run(["git", "show", f"{a.base_commit}:{rel.as_posix()}"], cwd=ROOT, capture_output=True)
    if blob.returncode:
        print(f"cannot read {rel} at {a.base_commit}: {blob.stderr.decode().strip()}", file=sys.stderr)
        return 2
    with tempfile.NamedTemporaryFile(suffix=".safetensors") as f:
        f.write(blob.stdout)
        f.flush()
        base = load_file(f.name)
    mixed = interpolate(base, load_file(str(model / "model.safetensors")), a.alpha)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "spm.model"):
        shutil.copy(model / name, out / name)
    save_file(mixed, str(out / "model.safetensors"), metadata={"format": "pt"})
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
