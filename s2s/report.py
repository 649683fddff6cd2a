"""Print the model tables of docs/models.md from the checkpoints' metrics.json files.

    python -m s2s.report [--checkpoints DIR]
"""
from __future__ import annotations

import argparse
from typing import Sequence

from .checkpoint import list_checkpoints


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m s2s.report", description=__doc__.splitlines()[0])
    p.add_argument("--checkpoints", metavar="DIR", help="the checkpoints folder (default: checkpoints/, or "
                                                        "$S2S_CHECKPOINTS)")
    a = p.parse_args(argv)
    print("| model | test BLEU | chrF | 3 joined BLEU | kept | perplexity | names kept | numbers kept | loops "
          "| train min |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    checkpoints = list_checkpoints(a.checkpoints)        # every metrics.json, read once for all the tables
    translation = [c for c in checkpoints if c.kind == "translation" and "test" in c.metrics.get("test", {})]
    for c in translation:
        m, t = c.metrics, c.metrics["test"]
        single, joined = t["test"], t["test_joined3"]
        kept = 100 * joined["bleu"] / single["bleu"] if single["bleu"] else 0.0
        copy = m.get("copy", {})
        print(f"| `{c.name}` | {single['bleu']:.1f} | {single['chrf']:.1f} | {joined['bleu']:.1f} | {kept:.0f}% | "
              f"{single['perplexity']:.2f} | {_pct(copy.get('names_kept'))} | {_pct(copy.get('numbers_kept'))} | "
              f"{_pct(m.get('loops', {}).get('share'))} | {m.get('train_minutes', 0):.0f} |")
    tuned = [c for c in translation if "before" in c.metrics]
    if tuned:
        print()
        print("Before and after the copy fine-tune (names, numbers, casing), same test data:")
        print("| model | test BLEU | names kept | numbers kept | loops | fine-tune min |")
        print("|---|---:|---:|---:|---:|---:|")
        for c in tuned:
            m, b = c.metrics, c.metrics["before"]
            arrow = lambda x, y, f: f"{f(x)} → {f(y)}"   # noqa: E731
            print(f"| `{c.name}` | "
                  f"{arrow(b['test']['test']['bleu'], m['test']['test']['bleu'], lambda v: f'{v:.1f}')} | "
                  f"{arrow(b.get('copy', {}).get('names_kept'), m.get('copy', {}).get('names_kept'), _pct)} | "
                  f"{arrow(b.get('copy', {}).get('numbers_kept'), m.get('copy', {}).get('numbers_kept'), _pct)} | "
                  f"{arrow(b.get('loops', {}).get('share'), m.get('loops', {}).get('share'), _pct)} | "
                  f"{m.get('finetune_minutes') or 0:.0f} |")
    print()
    print("BLEU by source length (words), beam 5, on the joined test pairs (test_long.tsv):")
    rows = [c for c in checkpoints if "test_long" in c.metrics.get("test", {})]
    if rows:
        bins = rows[0].metrics["test"]["test_long"]["by_length"]
        print("| model | " + " | ".join(f"{b['min_words']}-{b['max_words']}" for b in bins) + " |")
        print("|---|" + "---:|" * len(bins))
        for c in rows:
            cells = [f"{b['bleu']:.1f}" if b["bleu"] is not None else "–"
                     for b in c.metrics["test"]["test_long"]["by_length"]]
            print(f"| `{c.name}` | " + " | ".join(cells) + " |")
    order = {"rnn": 0, "gru": 1, "lstm": 2}
    charlms = sorted((c for c in checkpoints if c.kind == "charlm" and "test" in c.metrics),
                     key=lambda c: (c.metrics.get("train", {}).get("data", ""), order.get(c.cell, 9)))
    if charlms:
        print()
        print("Character-level models, bits per character (the paper's: Karpathy et al. 2015, converted from nats):")
        print("| model | cell | parameters | test | test, known-character lines | valid | paper's best "
              "| paper's 20-gram | train min |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for c in charlms:
            m, paper = c.metrics, c.metrics.get("paper", {})
            known = m.get("test_known_lines", {}).get("bits_per_char")
            print(f"| `{c.name}` | {c.cell} | {m['train'].get('parameters', 0):,} | {m['test']['bits_per_char']:.3f} | "
                  f"{_num(known)} | {m['valid']['bits_per_char']:.3f} | "
                  f"{_num(paper.get('best_rnn_bits_per_char'))} | {_num(paper.get('ngram20_bits_per_char'))} | "
                  f"{m['train']['minutes']:.0f} |")
        print()
        print("The most interpretable cell per feature, found on held-out text (Pearson r of the memory, an LSTM's "
              "tanh(c) or a GRU's or RNN's h, with the feature):")
        print("| model | feature | layer | cell | r |")
        print("|---|---|---:|---:|---:|")
        for c in charlms:
            for feature, cells in c.metrics.get("cells", {}).items():
                if cells and abs(cells[0]["r"]) >= 0.3:
                    print(f"| `{c.name}` | {feature} | {cells[0]['layer']} | {cells[0]['cell']} | "
                          f"{cells[0]['r']:+.3f} |")


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x) -> str:
    return "–" if x is None else f"{x:.3f}"


if __name__ == "__main__":
    main()
