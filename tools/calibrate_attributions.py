"""How long integrated gradients and leave-one-out take against the one-pass trace, per kind of model, as JSON.

    python tools/calibrate_attributions.py [--sentences 4] [--threads 1] [--kinds recurrent transformer hub]

The Alignment page runs integrated gradients (and a Hugging Face model's leave-one-out) only when
asked, and says beforehand how long it should take (ui/alignment/measurements.py, attribution_estimate):
a factor per kind of model (IG_PASSES, LOO_PASSES) times attribution_work, the sentence's one-pass
trace seconds (s2s.contributions.explain_contributions' seconds["trace"], which the page has
already) times its output pieces for integrated gradients, its source pieces + 1 for leave-one-out.
This tool measures those factors: for each kind, a few sentences, each forced to its French
reference, the trace, then integrated gradients and leave-one-out timed as the page runs them
(s2s.attributions, with a progress callback, on one thread as ui/models.py sets the server's), the
factor of each run its seconds over attribution_work, and the kind's factor their median. The
kinds and their models:

    recurrent    checkpoints/en-fr-additive (--recurrent DIR)
    transformer  checkpoints/en-fr-transformer (--transformer DIR)
    hub          an opus-mt-en-fr-shaped Marian with random weights (512-d, 6 + 6 layers, 59,514
                 pieces), built offline by tests/hub_models.py into a temporary folder (--opus DIR:
                 one built already); its tokenizer, trained on eight sentences, spells a sentence in
                 about three times opus-mt's own pieces, and the factors are per piece

Each model first runs one sentence unmeasured (captum's import, the first batched backward).
Printed: `IG_PASSES` and `LOO_PASSES` (the medians, to put in ui/alignment/measurements.py), `current`
(the constants there now), the machine, and per kind its `runs`: the pieces, `trace_s`, `ig_s`,
`loo_s`, each run's factors, and `stages`, the share of integrated gradients' time spent when each
of its progress stages ended (the path's end points, the first round's forward pass, the first
round: what s2s.attributions.IG_SHARES sets the progress bar's shares from). The times scale
with the machine's load as the trace does, so the factors hold better than the seconds; compare
runs taken on one day, and say what else ran beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

# English sentences of the lesson's kind, with French references to force (a random hub model's own
# output would run to its length limit)
PAIRS = [("She has a big black dog.", "Elle a un gros chien noir."),
         ("Where is the nearest train station?", "Où est la gare la plus proche ?"),
         ("I think it's going to rain tomorrow.", "Je pense qu'il va pleuvoir demain."),
         ("The children are playing in the garden.", "Les enfants jouent dans le jardin."),
         ("My grandmother lives near the sea.", "Ma grand-mère habite près de la mer."),
         ("Tom didn't want to go to school today because he was tired.",
          "Tom ne voulait pas aller à l'école aujourd'hui parce qu'il était fatigué.")]
WARM_UP = ("Hello, my friend.", "Bonjour, mon ami.")
KINDS = ("recurrent", "transformer", "hub")


def stage_times(heard: list[tuple[float, float, str]]) -> dict[str, float | None]:
    """The seconds at which each of integrated gradients' progress stages ended, from what its
    callback heard ((seconds, share, stage text)): the end points when the first round begins, the
    first round's forward pass when its gradients begin (a Transformer's only: None for a recurrent
    model), the first round when the second begins, or the run ends."""
    def first(starts: tuple[str, ...]) -> float | None:
        return next((t for t, _, stage in heard if stage.startswith(starts)), None)
    return {"end_points": first(("first round",)), "first_forward": first(("first round: gradients",)),
            "first_round": first(("round ", "done"))}


def time_one(tr, text: str, reference: str, hub: bool) -> dict:
    """One sentence: its trace (as the page gets it), then integrated gradients and leave-one-out, timed."""
    import torch

    from s2s import attributions as attr
    from s2s.contributions import METHODS, applies, explain_contributions
    from ui.alignment.measurements import DEFERRED, attribution_work
    methods = [m for m in METHODS if not (hub and m in DEFERRED) and applies(tr, m)]  # measurements.one_pass
    c = explain_contributions(tr, text, reference, methods)
    src = torch.tensor([attr.source_ids(tr, text)], device=tr.device)
    tgt = torch.tensor(c.target_ids, device=tr.device)
    heard: list[tuple[float, float, str]] = []
    t0 = time.perf_counter()
    attr.integrated_gradients(tr.model, src, tgt,
                              on_progress=lambda done, stage: heard.append((time.perf_counter() - t0, done, stage)))
    ig_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    attr.leave_one_out(tr.model, src, tgt, on_progress=lambda done, stage: None)
    loo_s = time.perf_counter() - t0
    stages = stage_times(heard)
    return {"text": text, "source_pieces": len(c.source_tokens), "output_pieces": len(c.target_tokens),
            # microseconds and 4 decimals: a tiny model's leave-one-out takes a few ms, which 4 decimals of a
            # second would round by several percent
            "trace_s": round(c.seconds["trace"], 6), "ig_s": round(ig_s, 6), "loo_s": round(loo_s, 6),
            "ig_passes": round(ig_s / attribution_work(c, "integrated_gradients"), 4),
            "loo_passes": round(loo_s / attribution_work(c, "leave_one_out"), 4),
            "stages": {k: None if v is None else round(v / ig_s, 3) for k, v in stages.items()}}


def calibrate(kind: str, path: str, pairs: list[tuple[str, str]]) -> dict:
    from s2s.checkpoint import load_translator
    tr = load_translator(path)
    time_one(tr, *WARM_UP, hub=kind == "hub")                 # one-time costs, not measured
    runs = [time_one(tr, text, reference, hub=kind == "hub") for text, reference in pairs]
    stages = {k: [r["stages"][k] for r in runs if r["stages"][k] is not None] for k in runs[0]["stages"]}
    return {"model": path if kind != "hub" else "opus-mt-en-fr-shaped Marian, random weights",
            "ig_passes": round(statistics.median(r["ig_passes"] for r in runs), 2),
            "loo_passes": round(statistics.median(r["loo_passes"] for r in runs), 3),
            "stages": {k: round(statistics.median(v), 3) if v else None for k, v in stages.items()},
            "runs": runs}


def machine() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "load_average_1_5_15": [round(x, 2) for x in load] if load else None,
            "date": time.strftime("%Y-%m-%d %H:%M")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=4, help=f"sentences per kind, 1-{len(PAIRS)} (default 4)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the app's server runs)")
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="the kinds to time (default all)")
    p.add_argument("--recurrent", default=str(ROOT / "checkpoints" / "en-fr-additive"), metavar="DIR")
    p.add_argument("--transformer", default=str(ROOT / "checkpoints" / "en-fr-transformer"), metavar="DIR")
    p.add_argument("--opus", metavar="DIR", help="an opus-mt-shaped model built already (default: built into a "
                                                  "temporary folder by tests/hub_models.py)")
    a = p.parse_args(argv)
    if not 1 <= a.sentences <= len(PAIRS):
        p.error(f"--sentences must be 1-{len(PAIRS)}")
    import streamlit.logger
    import torch
    streamlit.logger.set_log_level("error")  # ui's caches, imported outside a server, say so at every import

    import ui.alignment.measurements as tabs  # (ui.models sets one thread: the server's)
    torch.set_num_threads(a.threads)
    pairs = PAIRS[:a.sentences]
    out = {"command": "python tools/calibrate_attributions.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": machine(), "threads": a.threads, "kinds": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in a.kinds:
            if kind == "hub":
                path = a.opus
                if path is None:
                    import hub_models
                    path = str(hub_models.marian(Path(tmp) / "opus", hub_models.OPUS_MT_EN_FR,
                                                 hub_models.OPUS_MT_EN_FR_VOCAB))
            else:
                path = a.recurrent if kind == "recurrent" else a.transformer
            out["kinds"][kind] = calibrate(kind, path, pairs)
    out["IG_PASSES"] = {k: v["ig_passes"] for k, v in out["kinds"].items()}
    out["LOO_PASSES"] = {k: v["loo_passes"] for k, v in out["kinds"].items()}
    out["current"] = {"IG_PASSES": tabs.IG_PASSES, "LOO_PASSES": tabs.LOO_PASSES}
    out["machine"]["load_average_after"] = machine()["load_average_1_5_15"]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
