"""From word weights to word links: argmax, threshold, ratio, grow-diag, shift, and symmetrisation."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..text import InputError
from .gold import Link

# ---------------------------------------------------------------------------------------
# Weights -> links


def argmax_links(w: np.ndarray) -> set[Link]:
    """Each French word f linked to the English word it attends to most: (argmax_e W[f, e], f)."""
    return {(int(e), f) for f, e in enumerate(w.argmax(1)) if w[f].max() > 0}


def threshold_links(w: np.ndarray, tau: float) -> set[Link]:
    """Every (e, f) with W[f, e] >= tau: none, one or several English words per French word."""
    return {(int(e), int(f)) for f, e in zip(*np.nonzero(w >= tau))}


def ratio_links(w: np.ndarray, fraction: float) -> set[Link]:
    """argmax, plus every English word weighing at least `fraction` of the row's maximum:
    W[f, e] >= fraction * max_e' W[f, e'] (fraction 1 is argmax)."""
    return {(int(e), int(f)) for f, e in zip(*np.nonzero(w >= fraction * w.max(1, keepdims=True))) if w[f].max() > 0}


NEIGHBOURS = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def grow_diag_links(w: np.ndarray, final: bool = False) -> set[Link]:
    """Argmax in both directions, symmetrised as statistical aligners combine theirs
    (grow-diag, and grow-diag-final with `final`; Koehn et al. 2003):

        F->E  each French word to the English word it attends to most (the argmax rule)
        E->F  each English word to the French word that attends to it most: argmax_f W[f, e]

    then `symmetrize`d."""
    n_fr, n_en = w.shape
    f2e = argmax_links(w)
    e2f = {(e, int(w[:, e].argmax())) for e in range(n_en) if w[:, e].max() > 0}
    return symmetrize(f2e, e2f, "grow-diag-final" if final else "grow-diag")


SYMMETRIZATIONS = ("intersection", "grow-diag", "grow-diag-final", "grow-diag-final-and", "union")


def symmetrize(one: set[Link], other: set[Link], how: str = "grow-diag") -> set[Link]:
    """Two directional alignments made one, as fast_align's atools does (Koehn et al. 2003):
    start from one ∩ other (links both directions agree on), then repeatedly add a link of
    one ∪ other that touches a kept link (one of its 8 neighbours) and aligns a word not
    yet aligned (grow-diag); -final then adds any union link that aligns a word still
    unaligned, -final-and only one whose two words are both unaligned."""
    if how not in SYMMETRIZATIONS:
        raise ValueError(f"unknown symmetrization {how!r}; use one of {', '.join(SYMMETRIZATIONS)}")
    union, kept = one | other, one & other
    if how in ("intersection", "union"):
        return kept if how == "intersection" else union

    def aligned(e: int | None = None, f: int | None = None) -> bool:
        return any(ke == e or kf == f for ke, kf in kept)

    grown = True
    while grown:
        grown = False
        for e, f in sorted(kept):
            for de, df in NEIGHBOURS:
                new = (e + de, f + df)
                if new in union and new not in kept and not (aligned(e=new[0]) and aligned(f=new[1])):
                    kept.add(new)
                    grown = True
    if how != "grow-diag":
        for e, f in sorted(union - kept):
            free_e, free_f = not aligned(e=e), not aligned(f=f)
            if (free_e and free_f) if how == "grow-diag-final-and" else (free_e or free_f):
                kept.add((e, f))
    return kept


RULES = ("argmax", "threshold", "ratio", "grow-diag", "shift")

# Chosen on the 37 trial pairs only, never the test set: `--split trial --sweep` for each of
# the four recurrent attention models, and per rule the setting with the lowest mean AER over
# them (the figures: docs/attention.md). shift (Chen et al. 2020): argmax of the attention one
# step later (to_words), for Transformers.
RULE_PARAMS = {"argmax": {}, "threshold": {"tau": 0.25}, "ratio": {"fraction": 0.9}, "grow-diag": {"final": False},
               "shift": {}}
DEFAULT_RULE = "grow-diag"


@dataclass(frozen=True)
class Rule:
    """A link rule with its parameters: one value where a name and its settings would travel
    apart. Rule.of("threshold") has tau 0.25 (RULE_PARAMS); Rule.of("threshold", tau=0.3) not."""
    name: str = DEFAULT_RULE
    params: dict = field(default_factory=dict, hash=False)

    @classmethod
    def of(cls, rule: "str | Rule", **params) -> "Rule":
        if isinstance(rule, Rule):
            return rule if not params else cls(rule.name, {**rule.params, **params})
        if rule not in RULES:
            raise InputError(f"Unknown rule {rule!r}: use one of {', '.join(RULES)}.")
        return cls(rule, {**RULE_PARAMS[rule], **params})

    @property
    def shift(self) -> bool:
        """Whether it reads the attention one step later (to_words(..., shift=True))."""
        return self.name == "shift"

    @property
    def setting(self) -> str:
        """Its parameters as the command line prints them ("tau=0.2"; "" for none)."""
        return " ".join(f"{k}={v}" for k, v in self.params.items())


SWEEP = [Rule("argmax")] + [Rule("threshold", {"tau": t}) for t in (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)] \
    + [Rule("ratio", {"fraction": r}) for r in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)] \
    + [Rule("grow-diag", {"final": False}), Rule("grow-diag", {"final": True})]


def shifted(rule: "str | Rule") -> bool:
    """Whether `rule` reads the attention one step later (to_words(..., shift=True))."""
    return Rule.of(rule).shift


def links(w: np.ndarray, rule: "str | Rule" = DEFAULT_RULE, **params) -> set[Link]:
    """Word links of a (French words x English words) weight matrix under a rule (a Rule, or
    a name with its parameters from RULE_PARAMS unless given). "shift" is argmax on weights
    read one step later: the caller reads them so (word_attention(..., shift=shifted(rule)))."""
    r = Rule.of(rule, **params)          # an unknown name: InputError naming the rules
    rule, params = r.name, r.params
    if rule == "threshold":
        return threshold_links(w, params["tau"])
    if rule == "ratio":
        return ratio_links(w, params["fraction"])
    if rule == "grow-diag":
        return grow_diag_links(w, params["final"])
    return argmax_links(w)
