"""Write s2s/names.tsv, the person names the copy augmentation draws from (s2s/data.py).

    pip install faker==40.54.0 && python tools/make_names.py

The names are the first and last names of Faker's person providers (MIT licence,
https://github.com/joke2k/faker) for every locale written in the Latin alphabet, kept when
every letter is in Latin-1 or Latin Extended-A (so "Łukasz", "Søren", "Gülşen" stay and a
script the tokenizer cannot spell does not come in). Faker is needed only to regenerate
the file; training reads the shipped TSV.
"""
from __future__ import annotations

import importlib
import pkgutil
import unicodedata
from pathlib import Path

import faker
import faker.providers.person as person

OUT = Path(__file__).resolve().parent.parent / "s2s" / "names.tsv"


def latin(name: str) -> bool:
    """Letters from ASCII, Latin-1 or Latin Extended-A only, with at most inner - or '."""
    if not (2 <= len(name) <= 16) or not name[0].isupper() or name[-1] in "-'":
        return False
    return all((ch.isalpha() and ord(ch) <= 0x17F) or ch in "-'" for ch in name)


def _names(provider, attr: str) -> list[str]:
    """A provider's name list: a tuple, a dict name -> weight, or absent (some locales
    define only a property, which is not a list)."""
    value = provider.__dict__.get(attr)
    for base in provider.__mro__[1:]:
        if value is not None:
            break
        value = base.__dict__.get(attr)
    return list(value) if isinstance(value, (tuple, list, dict)) else []


def main() -> None:
    rows: dict[tuple[str, str], str] = {}
    for mod in sorted(m.name for m in pkgutil.iter_modules(person.__path__)):
        provider = importlib.import_module(f"faker.providers.person.{mod}").Provider
        for kind, attrs in (("first", ("first_names", "first_names_male", "first_names_female")),
                            ("last", ("last_names", "last_names_male", "last_names_female"))):
            names = [n for a in attrs for n in _names(provider, a)]
            for name in names:     # a tuple, or an OrderedDict name -> weight
                name = unicodedata.normalize("NFC", str(name).strip())
                if latin(name) and (kind, name) not in rows:
                    rows[(kind, name)] = mod
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(f"# Person names from Faker {faker.VERSION} (MIT licence, Copyright (c) 2012 Daniele Faraglia),\n"
                "# its person providers for Latin-alphabet locales. Regenerate: python tools/make_names.py\n"
                "# kind<TAB>name<TAB>Faker locale\n")
        for (kind, name), mod in sorted(rows.items()):
            f.write(f"{kind}\t{name}\t{mod}\n")
    print(f"{len(rows)} names -> {OUT}")


if __name__ == "__main__":
    main()
