"""What the Alignment & Explanation page's tabs share on screen: how a rule makes links, a
link's number clamped, the offer of a long run and its duration as a button says it, and the
JSON exports' words."""
from __future__ import annotations

import json

import streamlit as st

from s2s.alignment import score
from s2s.export import matrix_json

RULE_HELP = {"argmax": "each French word linked to the English word it attends to most",
             "threshold": "every link whose weight is at least τ",
             "ratio": "for each French word, the English words that hold the given share of its weight",
             "grow-diag": "links both directions' argmax agree on, grown to neighbours (as statistical aligners "
                          "symmetrise)",
             "shift": "argmax of the attention one step later, where the French word is the decoder's input "
                      "(Chen et al. 2020)"}


def within(value, low, high):
    """`value` clamped to [low, high] (a link's number, or one kept from a longer list)."""
    return max(low, min(value, high))


def asked_to_run(note: str, label: str, key: str) -> bool:
    """An offer to run something long: `note` (what it does, how long it should take) over a
    button `label`. True on the run the button is pressed, the offer then gone, so that what the
    run draws takes its place; False until then."""
    offer = st.empty()
    with offer.container():
        st.info(note)
        pressed = st.button(label, key=key, type="primary")
    if pressed:
        offer.empty()
    return pressed


def about(seconds: float) -> str:
    """A duration as a button says it: "about 12 s", "about 3 min", "under 1 s"."""
    return ("under 1 s" if seconds < 1 else f"about {seconds:.0f} s" if seconds < 90
            else f"about {seconds / 60:.0f} min")


MATRIX_WHAT = ("word-level cross-attention, French words (rows) x English words (columns): each English word "
               "the sum of its pieces, each French word the mean of its pieces' rows")


def reading_of(head, transformer: bool) -> str:
    if not transformer:
        return ""
    return "; the last decoder layer's head mean" if head is None else f"; layer {head[0] + 1}, head {head[1] + 1}"


def pair_export(model: str, english, french, weights, rule: str, predicted, gold, what: str) -> str:
    """One pair's word attention, links and (with gold) scores, as JSON that says what it is."""
    out = {"model": model, "english": list(english), "french": list(french), "rule": rule, "matrix": what,
           "attention": matrix_json(weights, french, english),
           "links": sorted([e, f] for e, f in predicted), "links_format": "[English word, French word], from 0"}
    if gold is not None:
        s = score([predicted], [gold])
        out |= {"gold_sure": sorted(map(list, gold.sure)), "gold_possible": sorted(map(list, gold.possible)),
                "aer": round(s.aer, 6), "precision": round(s.precision, 6), "recall": round(s.recall, 6)}
    return json.dumps(out, ensure_ascii=False, indent=1)
