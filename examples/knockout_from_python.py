"""Knock heads out from Python, then read the knocked-out model: its translation, each layer's
guess (the logit lens), why a piece and not another (a contrast) and which states carry an
edit's change (a patch). Each instrument returns its data, a dataclass with to_json(), and has a
figure builder in s2s.figures (plotly); this script prints the data as one JSON object and
writes the figures as HTML files.

    pip install -e .                 # once, from the repository (the app's requirements first)
    python examples/knockout_from_python.py
    python examples/knockout_from_python.py --model hf:Helsinki-NLP/opus-mt-en-fr --mask "cross:6.*" \\
        --text "The girl is happy." --edit "The boy is happy." --step 2 --out figures/

The same calls in a notebook:

    tr = load_translator("en-fr-transformer")
    knocked = decode(tr, text, DecodeSettings("greedy", head_mask="encoder:2.1"))
    seen = lens(tr, text, target=knocked.target_ids, head_mask="encoder:2.1")
    c = explain_contrast(tr, text, 2, "▁une", target=knocked.target_ids, head_mask="encoder:2.1")
    p = patch(tr, text, edit, output_ids=knocked.target_ids, head_mask="encoder:2.1")

A mask names heads as the command line's --mask-heads does: KIND:LAYER.HEAD counted from 1, KIND
one of cross, encoder, decoder, KIND:LAYER.* a whole layer (docs/attention.md, "Knocking heads
out"). A head the model lacks is one line on stderr and exit status 2, nothing computed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from s2s import figures
from s2s.checkpoint import CheckpointError, load_translator
from s2s.contrast import explain_contrast, step_attribution
from s2s.decode import DecodeSettings, decode
from s2s.lens import lens
from s2s.patch import patch
from s2s.text import InputError


def run(model: str, mask: str, text: str, edit: str, step: int, out: Path) -> dict:
    """Every instrument on the model with the heads of `mask` knocked out; the figures written
    under `out`. Returns what was read (each instrument's to_json) by name."""
    tr = load_translator(model)
    own = decode(tr, text, DecodeSettings("greedy"))
    knocked = decode(tr, text, DecodeSettings("greedy", head_mask=mask))      # InputError for a head it lacks
    j = min(step, len(knocked.target_ids)) - 1                                # the step read, from 0

    # 1. each layer's guess at step j, of the knocked-out model on its own output
    seen = lens(tr, text, target=knocked.target_ids, head_mask=mask)
    rows = figures.layer_labels(len(seen.layers), one_layer=seen.note is not None)
    lens_fig = figures.layer_rank_figure(rows, seen.target_tokens[j], [r[j] for r in seen.ranks],
                                         [lp[j] for lp in seen.log_probs])

    # 2. why the chosen piece and not the runner-up, at the same step
    chosen = knocked.target_tokens[j]
    foil = next(piece for piece, _ in knocked.step_top[j] if piece != chosen)
    contrast = explain_contrast(tr, text, j + 1, foil, target=knocked.target_ids, head_mask=mask)
    plain, _ = step_attribution(tr, text, j + 1, target=knocked.target_ids, head_mask=mask)
    attention = None if knocked.attention is None else knocked.attention[j]
    contrast_fig = figures.contrast_figure(contrast.source_tokens, contrast.scores, plain, attention,
                                           contrast.target, contrast.foil, "gradient × input")

    # 3. which encoder state (and cross-attention head) carries the edit's change
    patched = patch(tr, text, edit, output_ids=knocked.target_ids, head_mask=mask)
    shares = patched.restored()
    patch_fig = None if shares is None else figures.patching_figure(
        patched.source_tokens, patched.layers, shares, patched.restored_heads(), column_title="source piece")

    out.mkdir(parents=True, exist_ok=True)
    for name, fig in (("lens", lens_fig), ("contrast", contrast_fig), ("patch", patch_fig)):
        if fig is not None:
            fig.write_html(out / f"{name}.html", include_plotlyjs="cdn")
    return {"model": tr.name, "head_mask": mask, "translation": own.translation,
            "knocked_out_translation": knocked.translation, "step": j + 1,
            "lens": seen.to_json(), "contrast": contrast.to_json(), "patch": patched.to_json(),
            "figures": sorted(str(p) for p in out.glob("*.html"))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="en-fr-transformer", help="a shipped model's name, a folder, or hf:NAME")
    p.add_argument("--mask", default="encoder:2.1", help="the heads knocked out (KIND:LAYER.HEAD, from 1)")
    p.add_argument("--text", default="She has a big black dog.")
    p.add_argument("--edit", default="She has a big black cat.", help="the text with one word swapped")
    p.add_argument("--step", type=int, default=4, help="the output step read by the lens and the contrast (from 1)")
    p.add_argument("--out", default="knockout-figures", help="the folder the figures are written to")
    a = p.parse_args(argv)
    try:
        got = run(a.model, a.mask, a.text, a.edit, max(1, a.step), Path(a.out))
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(got, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
