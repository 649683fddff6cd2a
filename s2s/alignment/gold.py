"""The gold standard: human word alignments (Sure and Possible links), as the Hansards files hold them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

Link = tuple[int, int]    # (English word, French word), both counted from 0 (the .wa files count from 1)
SPLITS = ("test", "trial")


# ---------------------------------------------------------------------------------------
# The gold standard


class GoldError(ValueError):
    """The gold alignment files are missing or inconsistent (the message names file and line)."""


@dataclass(frozen=True)
class GoldPair:
    english: tuple[str, ...]
    french: tuple[str, ...]
    sure: frozenset[Link]
    possible: frozenset[Link]    # includes every sure link: P ⊇ S


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GoldError(f"{path} is missing") from None
    except OSError as e:
        raise GoldError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise GoldError(f"{path.name} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":           # the newline that ends the last line
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def read_gold(folder: str | Path, split: str = "test") -> list[GoldPair]:
    """Read {split}.en, {split}.fr (one tokenised sentence a line) and {split}.wa (lines
    `sentence english_position french_position S|P`, positions from 1; NULL links absent).
    Raises GoldError, naming file and line, for anything that does not fit together."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GoldError(f"gold folder {folder} does not exist")
    names = {side: f"{split}.{side}" for side in ("en", "fr", "wa")}
    if not (folder / names["en"]).exists():      # say which split the folder does hold
        held = [s for s in SPLITS if s != split and (folder / f"{s}.en").exists()]
        if held:
            raise GoldError(f"{folder} has no {names['en']} but has {held[0]}.en: give --split {held[0]}")
    en, fr, wa = (_read_lines(folder / names[side]) for side in ("en", "fr", "wa"))
    if len(en) != len(fr):
        raise GoldError(f"{names['en']} has {len(en)} lines but {names['fr']} has {len(fr)}")
    words = {}
    for side, lines in (("en", en), ("fr", fr)):
        words[side] = [tuple(line.split()) for line in lines]
        for n, w in enumerate(words[side], 1):
            if not w:
                raise GoldError(f"{names[side]} line {n} is empty")
    sure: list[set[Link]] = [set() for _ in en]
    possible: list[set[Link]] = [set() for _ in en]
    for n, line in enumerate(wa, 1):
        where = f"{names['wa']} line {n}"
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4 or fields[3] not in ("S", "P") or not all(f.isascii() and f.isdigit() for f in fields[:3]):
            raise GoldError(f"{where}: expected `sentence english_position french_position S|P`, got {line!r}")
        s, e, f = (int(x) for x in fields[:3])
        if not 1 <= s <= len(en):
            raise GoldError(f"{where}: sentence {s} is out of range (there are {len(en)} sentence pairs)")
        n_en, n_fr = len(words["en"][s - 1]), len(words["fr"][s - 1])
        if not 1 <= e <= n_en:
            raise GoldError(f"{where}: English position {e} is out of range (sentence {s} has {n_en} English words)")
        if not 1 <= f <= n_fr:
            raise GoldError(f"{where}: French position {f} is out of range (sentence {s} has {n_fr} French words)")
        possible[s - 1].add((e - 1, f - 1))
        if fields[3] == "S":
            sure[s - 1].add((e - 1, f - 1))
    return [GoldPair(e, f, frozenset(s), frozenset(p))
            for e, f, s, p in zip(words["en"], words["fr"], sure, possible)]
