"""Print the README's model table from the checkpoints' metrics.json files.

    python -m s2s.report
"""
from __future__ import annotations

from .checkpoint import list_checkpoints


def main() -> None:
    print("| model | test BLEU | chrF | 3 joined BLEU | kept | perplexity | train min |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in list_checkpoints():
        t = c.metrics.get("test", {})
        if c.kind != "translation" or "test" not in t:
            continue
        single, joined = t["test"], t["test_joined3"]
        kept = 100 * joined["bleu"] / single["bleu"] if single["bleu"] else 0.0
        print(f"| `{c.name}` | {single['bleu']:.1f} | {single['chrf']:.1f} | {joined['bleu']:.1f} | {kept:.0f}% | "
              f"{single['perplexity']:.2f} | {c.metrics.get('train_minutes', 0):.0f} |")
    print()
    print("BLEU by source length (words), beam 5, on the joined test pairs (test_long.tsv):")
    rows = [c for c in list_checkpoints() if "test_long" in c.metrics.get("test", {})]
    if rows:
        bins = rows[0].metrics["test"]["test_long"]["by_length"]
        print("| model | " + " | ".join(f"{b['min_words']}-{b['max_words']}" for b in bins) + " |")
        print("|---|" + "---:|" * len(bins))
        for c in rows:
            cells = [f"{b['bleu']:.1f}" if b["bleu"] is not None else "–" for b in c.metrics["test"]["test_long"]["by_length"]]
            print(f"| `{c.name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
