"""Copy augmentation (names, numbers, casing), the extended tokenizer, fine-tuning a
checkpoint with them, and the held-out copy test with its command."""
import json
import random
import re
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, reversal_pairs, write_tsv
from s2s import report
from s2s import train as train_cli
from s2s.checkpoint import load_translator
from s2s.data import (
    TATOEBA_PERSONS,
    Augmenter,
    augment_pairs,
    copy_test_lines,
    kept_verbatim,
    load_names,
    name_characters,
    read_copy_test,
    split_names,
    substitute,
    write_copy_test,
)
from s2s.data import can_copy as can_copy_
from s2s.decode import DecodeSettings, greedy_batch_stopped
from s2s.evaluate import copy_scores, loop_rate
from s2s.tokenizer import EOS, UNK, Tokenizer, add_characters, train_tokenizer

NAMES = {"first": ["Olga", "Priya", "Łukasz", "Søren", "Anaïs", "Yann", "Émile", "Dmitri"],
         "last": ["Nakamura", "Øverland", "Kowalczyk"]}
PAIRS = [("Tom gave Mary a book.", "Tom a donné un livre à Mary."),
         ("This is Tom's dog.", "C'est le chien de Tom."),
         ("I saw Alice's car.", "J'ai vu la voiture d'Alice."),
         ("Tom told Mary that Tom was right.", "Tom a dit à Mary que Tom avait raison."),
         ("The train leaves at 7:45.", "Le train part à 7 h 45."),
         ("I paid 250 euros.", "J'ai payé 250 euros."),
         ("I have two dogs.", "J'ai deux chiens."),
         ("Tom is 2 years old, I'm 2 too. 30!", "Tom a deux ans, moi aussi. 30 !")]


def words(text: str, word: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(word)}(?!\w)", text))


def test_names_swap_on_both_sides_as_often():
    aug = Augmenter(NAMES, p_name=1.0, p_number=0.0, p_upper=0.0, p_lower=0.0)
    rng = random.Random(0)
    for _ in range(30):
        for en, fr in PAIRS:
            new_en, new_fr = aug(pair := (en, fr), rng)
            for person in (n for kind in TATOEBA_PERSONS.values() for n in kind):
                if words(en, person) and words(en, person) == words(fr, person):
                    assert words(new_en, person) == words(new_fr, person) == 0     # every person swapped
            for name in NAMES["first"] + NAMES["last"]:
                assert words(new_en, name) == words(new_fr, name)                 # as often on both sides
            if pair == PAIRS[0]:
                a, b = [n for n in NAMES["first"] if words(new_en, n)]             # two persons stay two
                assert a != b


def test_french_elision_follows_the_new_name():
    assert substitute(("Tom's dog", "le chien de Tom"), {"Tom": "Olga"})[1] == "le chien d'Olga"
    assert substitute(("Alice's car", "la voiture d'Alice"), {"Alice": "Priya"})[1] == "la voiture de Priya"
    assert substitute(("x", "Je pense que Tom vient."), {"Tom": "Émile"})[1] == "Je pense qu'Émile vient."
    assert substitute(("x", "jusqu’Alice"), {"Alice": "Yann"})[1] == "jusque Yann"      # Y is a consonant
    assert substitute(("x", "De Tom"), {"Tom": "Anaïs"})[1] == "D'Anaïs"
    # one pass: Tom->Mary and Mary->Tom together
    assert substitute(("Tom met Mary.", "Tom a vu Mary."), {"Tom": "Mary", "Mary": "Tom"}) == \
        ("Mary met Tom.", "Mary a vu Tom.")
    # Tomas is not Tom
    assert substitute(("Tomas and Tom", "Tomas et Tom"), {"Tom": "Olga"}) == ("Tomas and Olga", "Tomas et Olga")


def test_numbers_swap_consistently_and_only_when_shared():
    aug = Augmenter(NAMES, p_name=0.0, p_number=1.0, p_upper=0.0, p_lower=0.0)
    rng = random.Random(1)
    for _ in range(30):
        en, fr = aug(("The train leaves at 7:45.", "Le train part à 7 h 45."), rng)
        h, m = re.findall(r"\d+", en)
        assert re.findall(r"\d+", fr) == [h, m] and len(h) >= 1 and len(m) >= 2 and h != m
        # "2" is written out in the French, so it stays; "30" is shared and is swapped
        en, fr = aug(PAIRS[-1], rng)
        assert en.count(" 2 ") == 2 and "2 years" in en and "30" not in en
        assert re.findall(r"\d+", fr) == re.findall(r"\d+", en)[-1:]


def test_number_words_become_the_same_digits_on_both_sides():
    from s2s.data import number_word
    aug = Augmenter(NAMES, p_name=0.0, p_number=1.0, p_upper=0.0, p_lower=0.0)
    rng = random.Random(2)
    for _ in range(20):
        en, fr = aug(("I have two dogs.", "J'ai deux chiens."), rng)
        (a,), (b,) = re.findall(r"\d+", en), re.findall(r"\d+", fr)
        assert a == b and 1 <= len(a) <= 4 and "two" not in en and "deux" not in fr
        en, fr = aug(("Three people came.", "Trois personnes sont venues."), rng)
        assert re.findall(r"\d+", en) == re.findall(r"\d+", fr) and re.match(r"\d+ people", en)
    # two number words, a word inside another, or a mismatch: left alone
    for pair in [("Two hundred people.", "Deux cents personnes."), ("He is often late.", "Il est souvent en retard."),
                 ("I have two dogs.", "J'ai trois chiens."), ("Two or three.", "Deux ou trois.")]:
        assert number_word(pair) is None and aug(pair, rng) == pair


def test_casing_and_determinism():
    up = Augmenter(NAMES, p_name=0.0, p_number=0.0, p_upper=1.0, p_lower=0.0)
    assert (up(("Where is the station?", "Où est la gare ?"), random.Random(0))
            == ("WHERE IS THE STATION?", "OÙ EST LA GARE ?"))
    low = Augmenter(NAMES, p_name=0.0, p_number=0.0, p_upper=0.0, p_lower=1.0)
    assert low(("Tom is here.", "Tom est ici."), random.Random(0)) == ("tom is here.", "tom est ici.")
    aug = Augmenter(NAMES)
    pairs = PAIRS * 20
    assert augment_pairs(pairs, aug, seed=3) == augment_pairs(pairs, aug, seed=3)
    assert augment_pairs(pairs, aug, seed=3) != augment_pairs(pairs, aug, seed=4)
    changed = sum(a != b for a, b in zip(pairs, augment_pairs(pairs, aug, seed=3)))
    assert 0.2 * len(pairs) < changed < 0.9 * len(pairs)      # a share, not all


def test_copy_pairs_draw_swappable_pairs_and_swap_everything():
    from s2s.data import can_copy, copy_pairs
    pairs = PAIRS + [("I see.", "Je vois.")] * 10
    pool = [i for i, p in enumerate(pairs) if can_copy(p)]
    assert pool == [0, 1, 2, 3, 4, 5, 6, 7]
    extra = copy_pairs(pairs, pool, 50, Augmenter(NAMES, p_upper=0.0, p_lower=0.0), seed=1)
    assert len(extra) == 50 and extra == copy_pairs(pairs, pool, 50, Augmenter(NAMES, p_upper=0.0, p_lower=0.0), seed=1)
    for en, fr in extra:
        assert not words(en, "Tom") and not words(en, "Mary") and "two" not in en and "7:45" not in en
        assert re.findall(r"\d+", en) == re.findall(r"\d+", fr) or "2 years" in en
    assert copy_pairs(pairs, [], 5, Augmenter(NAMES), seed=1) == []


def test_epoch_examples_add_copy_pairs():
    """--copy-fraction: the epoch gains that share of extra, fully swapped pairs."""
    tok_pairs = PAIRS * 5
    tok = type("Chars", (), {"encode": staticmethod(lambda s: [ord(c) for c in s])})()
    singles = [(tok.encode(s), tok.encode(t)) for s, t in tok_pairs]
    pool = [i for i, p in enumerate(tok_pairs) if can_copy_(p)]
    aug = Augmenter(NAMES, p_name=0.0, p_number=0.0, p_upper=0.0, p_lower=0.0)
    plain = train_cli.epoch_examples(singles, 0.0, 1, tok_pairs, aug, tok)
    more = train_cli.epoch_examples(singles, 0.0, 1, tok_pairs, aug, tok, copy_fraction=0.4, copy_pool=pool)
    assert plain == singles and len(more) == len(singles) + 16
    assert all("Tom" not in "".join(map(chr, s)) for s, _ in more[len(singles):])


def test_shipped_name_list_is_large_varied_and_split():
    names = load_names()
    assert len(names["first"]) > 10_000 and len(names["last"]) > 10_000
    train, held = split_names(names)
    for kind in names:
        assert not set(train[kind]) & set(held[kind])
        assert 0.05 < len(held[kind]) / len(names[kind]) < 0.15
    accented = [n for n in names["first"] if not n.isascii()]
    assert len(accented) > 1000 and {"ø", "ł", "ñ", "ü"} <= set("".join(accented))


def test_added_characters_keep_old_ids_and_spell_names(tmp_path):
    texts = [f"{s} {t}" for s, t in reversal_pairs(300)] + ["Tom is here. Où est la gare ?"] * 20
    base = train_tokenizer(texts, tmp_path / "base.model", vocab_size=60)
    grown = add_characters(base.path, name_characters(NAMES), tmp_path / "grown.model")
    assert len(grown) > len(base)
    for text in texts[:50]:
        assert grown.encode(text) == base.encode(text)         # the old pieces split and number alike
    assert UNK in base.encode("Søren Łukasz") and UNK not in grown.encode("Søren Łukasz ØVERLAND")
    assert UNK not in grown.encode("I paid 678 euros (9%); $5")      # digits and amounts too
    assert grown.decode(grown.encode("Søren Łukasz")) == "Søren Łukasz"
    again = add_characters(grown.path, name_characters(NAMES), tmp_path / "again.model")
    assert len(again) == len(grown)                              # nothing to add twice


def test_copy_test_lines_use_held_out_names_and_keep_tokens(tmp_path):
    test = PAIRS[:6]
    held = {"first": ["Zdeněk", "Ngozi", "Tom2"], "last": ["Øverland"]}
    lines = copy_test_lines(test + [PAIRS[6]], held, exclude={"Tom2"}, number_variants=2)
    kinds = [k for k, *_ in lines]
    assert kinds.count("name") == 4 and kinds.count("number") == 2 * 3 + 2       # "two dogs" twice in digits
    for kind, en, fr, keep in lines:
        assert "Tom2" not in keep
        for tok in keep:
            assert kept_verbatim(tok, en) and kept_verbatim(tok, fr)
        if kind == "name":
            assert not words(en, "Tom") and not words(fr, "Mary")
    write_copy_test(lines, tmp_path / "c.tsv", header="made by a test")
    assert read_copy_test(tmp_path / "c.tsv") == lines


def test_kept_verbatim_is_whole_words():
    assert kept_verbatim("7", "à 7h45") and not kept_verbatim("7", "à 17 h")
    assert kept_verbatim("Olga", "d'Olga.") and not kept_verbatim("Olga", "Olgas")


def test_training_augments_only_training_pairs(tmp_path, monkeypatch):
    """Every pair the augmenter sees is a training pair: validation and test stay as they are."""
    persons = [("Tom likes " + s, "Tom aime " + t) for s, t in reversal_pairs(400, seed=8)]
    tsv = write_tsv(persons, tmp_path / "p.tsv")
    seen = []
    original = Augmenter.__call__

    def spy(self, pair, rng):
        seen.append(pair)
        return original(self, pair, rng)
    monkeypatch.setattr(Augmenter, "__call__", spy)
    rc = train_cli.main(["--data", str(tsv), "--split-dir", str(tmp_path / "split"), "--work", str(tmp_path / "w"),
                         "--out", str(tmp_path / "out"), "--vocab", "60", "--emb", "16", "--hidden", "16",
                         "--max-tokens", "400", "--steps", "4", "--eval-every", "2", "--valid-pairs", "40",
                         "--test-pairs", "40", "--no-eval", "--trace-points", "2", "--p-name", "1"])
    assert rc == 0 and seen
    split = tmp_path / "split"
    train = {tuple(line.split("\t")) for line in (split / "train.tsv").read_text().splitlines()}
    held = {tuple(line.split("\t")) for f in ("valid.tsv", "test.tsv") for line in (split / f).read_text().splitlines()}
    assert set(seen) <= train and not set(seen) & held
    assert all(s.startswith("Tom likes") for s, _ in held)                 # the files are untouched
    tok = Tokenizer(tmp_path / "out" / "spm.model")
    assert UNK not in tok.encode("Łukasz Søren")                          # the shipped tokenizer spells names


def test_finetune_grows_the_vocabulary_and_continues_the_history(tiny_additive, reversal_tsv, tmp_path,
                                                                monkeypatch, capsys):
    base = load_translator(tiny_additive)
    out = tmp_path / "tuned"
    copy_tsv = tmp_path / "copy.tsv"
    copy_tsv.write_text("name\ta b c\tc b a\ta c\nnumber\td e\te d\te\n", encoding="utf-8")
    rc = train_cli.main(["--data", str(reversal_tsv), "--init-from", str(tiny_additive), "--out", str(out),
                         "--split-dir", str(tiny_additive.parent / "split"), "--work", str(tmp_path / "w"),
                         "--steps", "20", "--eval-every", "10", "--trace-points", "2", "--max-tokens", "600",
                         "--lr", "0.001", "--warmup", "5", "--long-fraction", "0", "--test-beam", "1",
                         "--copy-test", str(copy_tsv), "--dropout", "0"])
    assert rc == 0
    tuned = load_translator(out)
    assert tuned.model.cfg.vocab_size == len(tuned.tokenizer) >= base.model.cfg.vocab_size
    assert tuned.model.cfg.attention == base.model.cfg.attention
    m = json.loads((out / "metrics.json").read_text())
    before_steps = base.metrics["curves"][-1]["step"]
    assert (m["before"]["name"] == base.name
            and m["before"]["test"]["test"]["bleu"] == base.metrics["test"]["test"]["bleu"])
    assert [c["step"] for c in m["curves"]][-2:] == [before_steps + 10, before_steps + 20]
    assert m["trace"]["points"][-1]["step"] == before_steps + 20
    assert m["trace"]["points"][0]["step"] == 0                          # the base model's trace comes first
    assert m["copy"]["names_kept"] == 1.0 and m["copy"]["numbers_kept"] == 1.0 and m["copy"]["n"] == 2
    assert 0 <= m["loops"]["share"] <= 1 and "copy" in m["before"] and "loops" in m["before"]
    # the tables of docs/models.md: names, numbers and loops per model, and before -> after
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    capsys.readouterr()
    report.main([])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| `tuned` | ") and "→" not in line)
    assert "| 100.0% | 100.0% |" in row
    before_after = next(line for line in out.splitlines() if line.startswith("| `tuned` | ") and "→" in line)
    assert f"{100 * m['before']['copy']['names_kept']:.1f}% → 100.0%" in before_after


def test_a_further_leg_keeps_the_origin_as_before(tiny_none, reversal_tsv, tmp_path, monkeypatch):
    """Fine-tuning a fine-tune: "before" stays the original model's scores, "previous" holds
    where this leg began (its copy test and loops read from its metrics, not recomputed), and
    the fine-tune minutes and the step count carry on."""
    copy_tsv = tmp_path / "copy.tsv"
    copy_tsv.write_text("name\ta b c\tc b a\ta c\nnumber\td e\te d\te\n", encoding="utf-8")
    common = ["--data", str(reversal_tsv), "--split-dir", str(tiny_none.parent / "split"), "--steps", "10",
              "--eval-every", "10", "--trace-points", "1", "--max-tokens", "600", "--lr", "0.001", "--warmup", "2",
              "--long-fraction", "0", "--test-beam", "1", "--copy-test", str(copy_tsv), "--dropout", "0"]
    leg1, leg2 = tmp_path / "leg1", tmp_path / "leg2"
    assert train_cli.main(["--init-from", str(tiny_none), "--out", str(leg1), "--work", str(tmp_path / "w1"),
                           *common]) == 0
    m1 = json.loads((leg1 / "metrics.json").read_text())
    measured = []
    monkeypatch.setattr(train_cli, "copy_scores", lambda *a, **k: measured.append("copy") or {"n": -1})
    monkeypatch.setattr(train_cli, "loop_rate", lambda *a, **k: measured.append("loops") or {"n": -1})
    before_leg2 = train_cli.before_metrics(load_translator(leg1), train_cli.read_copy_test(copy_tsv),
                                           ["x"] * m1["loops"]["n"])
    assert measured == [] and before_leg2["copy"] == m1["copy"] and before_leg2["loops"] == m1["loops"]
    monkeypatch.undo()
    assert train_cli.main(["--init-from", str(leg1), "--out", str(leg2), "--work", str(tmp_path / "w2"), *common]) == 0
    m2 = json.loads((leg2 / "metrics.json").read_text())
    assert m2["before"] == m1["before"]                                   # the origin, not leg 1
    assert m2["previous"]["test"]["test"]["bleu"] == m1["test"]["test"]["bleu"]
    assert m2["previous"]["copy"] == m1["copy"] and m2["previous"]["steps"] == m1["curves"][-1]["step"]
    assert m2["curves"][-1]["step"] == m1["curves"][-1]["step"] + 10
    assert m2["finetune_minutes"] >= m1["finetune_minutes"] > 0
    assert m2["train_minutes"] >= m1["train_minutes"]
    assert m2["train"]["attention"] == m1["train"]["attention"] == "none"     # the model's, not the flag's default


def test_a_transformer_continues_with_its_own_pieces(tiny_transformer, reversal_tsv, tmp_path):
    """--continue-run: more steps of a model trained from scratch with the recipe. Its scores
    become "previous", it gets no "before" (nothing came before it) and no fine-tune minutes."""
    base = load_translator(tiny_transformer, device="cpu")
    out = tmp_path / "more"
    assert train_cli.main(["--data", str(reversal_tsv), "--arch", "transformer", "--init-from", str(tiny_transformer),
                           "--continue-run", "--tokenizer", str(base.tokenizer.path), "--out", str(out),
                           "--split-dir", str(tiny_transformer.parent / "split"), "--work", str(tmp_path / "w"),
                           "--steps", "6", "--eval-every", "3", "--average-last", "2", "--trace-points", "1",
                           "--max-tokens", "600", "--lr", "0.0005", "--warmup", "2", "--long-fraction", "0",
                           "--test-beam", "1", "--dropout", "0"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert "before" not in m and m["finetune_minutes"] is None and m["train"]["arch"] == "transformer"
    assert m["previous"]["test"]["test"]["bleu"] == base.metrics["test"]["test"]["bleu"]
    assert m["curves"][-1]["step"] == base.metrics["curves"][-1]["step"] + 6
    assert m["train_minutes"] >= base.metrics["train_minutes"] and m["averaged"]["steps"][-1] == 6
    assert load_translator(out).model.cfg.to_dict() == dict(base.model.cfg.to_dict(), dropout=0.0)
    cont = train_cli.finetune_model(base.model, base.model.cfg.vocab_size, dropout=0.0).eval()
    assert type(cont) is type(base.model) and cont.cfg.copy == base.model.cfg.copy
    src, tgt = torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 7, 6]])
    with torch.no_grad():
        assert torch.equal(base.model(src, torch.tensor([4]), tgt)[0], cont(src, torch.tensor([4]), tgt)[0])
    with pytest.raises(ValueError, match="its own pieces"):
        train_cli.finetune_model(base.model, base.model.cfg.vocab_size + 3, dropout=0.0)


def test_finetune_model_keeps_old_tokens_scores(tiny_additive):
    base = load_translator(tiny_additive, device="cpu")
    grown = train_cli.finetune_model(base.model, base.model.cfg.vocab_size + 7, dropout=0.0).eval()
    src = torch.tensor([[5, 6, 7, 3]])
    tgt = torch.tensor([[2, 7, 6]])
    with torch.no_grad():
        a, _ = base.model(src, torch.tensor([4]), tgt)
        b, _ = grown(src, torch.tensor([4]), tgt)
    V = base.model.cfg.vocab_size
    assert torch.allclose(a, b[..., :V], atol=1e-5)
    assert (b[..., V:].max(-1).values <= b[..., :V].max(-1).values).all()   # new pieces start unlikely


def test_copy_scores_and_loops_on_a_tiny_model(tiny_additive):
    tr = load_translator(tiny_additive)
    lines = [("name", "g f e d", "d e f g", ["g", "d"]), ("name", "a b c", "c b a", ["c", "j"]),
             ("number", "a b", "b a", ["a"])]
    s = copy_scores(tr, lines)
    assert s["names_kept"] == 0.75 and s["numbers_kept"] == 1.0 and s["names"] == 4 and s["n"] == 3
    outs, stopped = greedy_batch_stopped(tr, ["a b c", "d e f g h"])
    assert outs == ["c b a", "h g f e d"] and stopped == [True, True]
    assert greedy_batch_stopped(tr, ["a b c d e f"], DecodeSettings(max_len=2))[1] == [False]
    assert loop_rate(tr, ["a b c", "d e f"]) == {"loops": 0, "n": 2, "share": 0.0, "beam": 1}
    assert loop_rate(tr, ["a b c", "d e f"], beam=3) == {"loops": 0, "n": 2, "share": 0.0, "beam": 3}


def test_a_decoder_that_never_stops_counts_as_a_loop_greedy_and_beam(untrained_translators, monkeypatch):
    """A model that never writes </s> (its score forced to -inf) loops on every input, both ways."""
    tr = untrained_translators["additive"]
    step = tr.model.decode_step

    def never_eos(*args, **kw):
        st = step(*args, **kw)
        st.logits[..., EOS] = float("-inf")
        return st
    monkeypatch.setattr(tr.model, "decode_step", never_eos)
    for beam in (1, 3):
        r = loop_rate(tr, ["a b c", "d e"], beam=beam)
        assert (r["loops"], r["share"], r["beam"]) == (2, 1.0, beam)
    assert greedy_batch_stopped(tr, ["a b"])[1] == [False]


def run(*args):
    p = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_copy_test_command(tiny_additive, tmp_path):
    f = tmp_path / "copy.tsv"
    f.write_text("# a comment\nname\tg f e\te f g\tg e\nnumber\ta b\tb a\ta\n", encoding="utf-8")
    p = run("s2s.evaluate", "--model", str(tiny_additive), "--copy-test", str(f), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["names_kept"] == 1.0 and out["numbers_kept"] == 1.0 and out["n"] == 2 and out["model"]
    p = run("s2s.evaluate", "--model", str(tiny_additive), "--copy-test", str(f))
    assert "names kept 100.0%" in p.stdout


@pytest.mark.parametrize("content,msg", [
    (None, "cannot read"),
    ("", "holds no"),
    ("name\tonly two\n", "line 1"),
    ("place\ta b\tb a\ta\n", "line 1"),
    ("name\ta b\tb a\t \n", "line 1"),
])
def test_copy_test_command_bad_input(tiny_additive, tmp_path, content, msg):
    f = tmp_path / "copy.tsv"
    if content is not None:
        f.write_text(content, encoding="utf-8")
    p = run("s2s.evaluate", "--model", str(tiny_additive), "--copy-test", str(f), "--json")
    assert p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = run("s2s.evaluate", "--model", str(tmp_path / "nope"), "--copy-test", str(f))
    assert p.returncode == 2 and "does not exist" in p.stderr


def test_data_command_writes_the_copy_test(tmp_path):
    pairs = [(f"Tom has {i} cats and {i} dogs.", f"Tom a {i} chats et {i} chiens.") for i in range(10, 400)]
    pairs += [(f"Mary sees {c}.", f"Mary voit {c}.") for c in "abcdefghij"]
    tsv = write_tsv(pairs, tmp_path / "fra.txt")
    p = run("s2s.data", "--data", str(tsv), "--out", str(tmp_path / "split"), "--valid-pairs", "20",
            "--test-pairs", "40", "--copy-test", str(tmp_path / "copy.tsv"))
    assert p.returncode == 0, p.stderr
    lines = read_copy_test(tmp_path / "copy.tsv")
    train_words = set(re.findall(r"\w+", (tmp_path / "split" / "train.tsv").read_text(encoding="utf-8")))
    names = [t for k, *_, keep in lines if k == "name" for t in keep]
    assert len(names) == 40 and not set(names) & train_words
    _, held = split_names(load_names())
    assert set(names) <= set(held["first"]) | set(held["last"])
    assert sum(k == "number" for k, *_ in lines) > 40


def test_pointer_generator_mixes_generation_and_copying():
    """p(y) = p_gen softmax(E h~ + b)_y + (1 - p_gen) sum_{i: x_i = y} alpha_i."""
    from s2s.model import ModelConfig, Seq2Seq
    torch.manual_seed(0)
    m = Seq2Seq(ModelConfig(vocab_size=30, emb_dim=8, hidden=12, attn_dim=10, dropout=0.0, copy=True)).eval()
    src, tgt = torch.tensor([[7, 9, 9, 3]]), torch.tensor([[2, 9, 7]])
    with torch.no_grad():
        m.copy_gate.weight.zero_()
        m.copy_gate.bias.fill_(-30.0)                       # p_gen ~ 0: copy only
        logp, attn = m(src, torch.tensor([4]), tgt)
        p = logp.exp()
        real = attn[0, :, :3].sum(-1)                       # the source's </s> (id 3) is never copied
        assert torch.allclose(p[0, :, 9], (attn[0, :, 1] + attn[0, :, 2]) / real, atol=1e-5)   # two 9s add up
        assert torch.allclose(p[0, :, 7], attn[0, :, 0] / real, atol=1e-5)
        assert p[0, :, 3].max() < 1e-6 and torch.allclose(p.sum(-1), torch.ones(1, 3))
        assert p[0, :, [5, 6, 8]].max() < 1e-6                                       # not in the source
        m.copy_gate.bias.fill_(30.0)                        # p_gen ~ 1: the plain decoder
        logp, _ = m(src, torch.tensor([4]), tgt)
        m.copy_gate = None
        plain, _ = m(src, torch.tensor([4]), tgt)
        assert torch.allclose(logp, torch.log_softmax(plain, -1), atol=1e-4)
    with pytest.raises(ValueError, match="nothing to point with"):
        ModelConfig(vocab_size=30, attention="none", copy=True)


def test_finetune_adds_the_copy_gate_to_attention_models_only(tiny_additive, tiny_none):
    for path, expect in ((tiny_additive, True), (tiny_none, False)):
        base = load_translator(path, device="cpu")
        m = train_cli.finetune_model(base.model, base.model.cfg.vocab_size, dropout=0.0, copy=True).eval()
        assert m.cfg.copy is expect and (m.copy_gate is not None) is expect
        if expect:
            assert float(torch.sigmoid(m.copy_gate.bias.detach())) == pytest.approx(0.953, abs=1e-3)


def test_location_cue_marks_the_piece_after_the_one_just_read():
    from s2s.model import Seq2Seq
    src = torch.tensor([[7, 8, 7, 9, 3], [5, 6, 3, 0, 0]])
    read = torch.tensor([[0.1, 0.0, 0.9, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0]])
    cue = Seq2Seq.follows(torch.tensor([7, 6]), src, read)
    # after the 7 at 0 (read 0.1) and the 7 at 2 (read 0.9): the occurrence it copied from wins
    assert torch.allclose(cue, torch.tensor([[0, 0.1, 0, 0.9, 0], [0, 0, 1.0, 0, 0]]))
    assert Seq2Seq.follows(torch.tensor([8, 9]), src, read).sum() == 0        # 8 and 9 were not read
    assert Seq2Seq.follows(torch.tensor([3, 2]), src, torch.ones(2, 5)).sum() == 0   # </s> and <s> never count


@pytest.mark.parametrize("scorer", ["dot", "general", "additive", "scaled-dot"])
def test_location_cue_moves_attention_along_the_source(scorer):
    """With the cue's gate large, a decoder that writes what it reads steps through the
    source piece by piece, repeated pieces included ("4 5 4 6": after the second 4, on to
    the 6, not back to the 5); at g = 0 (a fresh or just-grown model) attention is the
    scorer's alone. step and decode_step agree, and the state carries alpha_j on."""
    from s2s.model import ModelConfig, Seq2Seq
    torch.manual_seed(0)
    m = Seq2Seq(ModelConfig(20, 16, 16, 16, attention=scorer, dropout=0.0, copy=True)).eval()
    src = torch.tensor([[4, 5, 4, 6, 8, 3]])
    memory, state = m.encode(src, torch.tensor([6]))
    assert torch.equal(state[-1], torch.zeros(1, 6)) and len(state) == 3          # (s, c, alpha_0 = 0)
    feed = m.initial_feed(1)
    plain = m.step(torch.tensor([5]), state, feed, memory)
    assert torch.allclose(plain.alpha, m.read_source(plain.state[0], memory)[1])   # g = 0: the scorer alone
    assert torch.equal(plain.state[-1], plain.alpha)
    with torch.no_grad():
        m.next_piece.bias.fill_(30.0)
    for y, at, want in [(4, 2, 3), (4, 0, 1), (5, 1, 2), (6, 3, 4)]:
        read = torch.zeros(1, 6)
        read[0, at] = 1.0
        st = m.step(torch.tensor([y]), state[:2] + (read,), feed, memory)
        assert int(st.alpha.argmax()) == want and float(st.alpha[0, want].detach()) > 0.99
        fast = m.decode_step(torch.tensor([y]), state[:2] + (read,), feed, memory)
        assert torch.allclose(fast.alpha, st.alpha, atol=1e-5) and torch.equal(fast.state[-1], fast.alpha)
    with torch.no_grad():
        m.next_piece.bias.zero_()
    assert torch.allclose(m.step(torch.tensor([5]), state, feed, memory).alpha, plain.alpha)


def test_interpolating_with_the_base_mixes_shared_weights_and_keeps_new_ones():
    sys.path.insert(0, str(ROOT / "tools"))
    from interpolate_weights import interpolate
    base = {"embed.weight": torch.zeros(3, 2), "w": torch.full((2,), 2.0)}
    tuned = {"embed.weight": torch.ones(5, 2), "w": torch.full((2,), 4.0), "copy_gate.bias": torch.tensor([3.0])}
    mixed = interpolate(base, tuned, 0.25)
    assert torch.allclose(mixed["w"].float(), torch.full((2,), 2.5))                  # 0.75 * 2 + 0.25 * 4
    assert torch.allclose(mixed["embed.weight"][:3].float(), torch.full((3, 2), 0.25))
    assert torch.equal(mixed["embed.weight"][3:].float(), torch.ones(2, 2))          # rows the base lacks
    assert mixed["copy_gate.bias"].item() == 3.0 and mixed["w"].dtype == torch.float16
    assert torch.equal(interpolate(base, tuned, 1.0)["w"].float(), tuned["w"])
    assert torch.equal(interpolate(base, tuned, 0.0)["w"].float(), base["w"])
    with pytest.raises(ValueError, match="alpha"):
        interpolate(base, tuned, 1.5)
    with pytest.raises(ValueError, match="does not fit"):
        interpolate({"w": torch.zeros(3)}, {"w": torch.zeros(2)}, 0.5)
