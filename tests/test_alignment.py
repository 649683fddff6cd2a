"""Attention as word alignment: AER by hand, pieces -> the gold's words on tricky tokens,
each rule on a hand-made matrix, the gold reader's errors, and the CLI on tiny gold data."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from s2s.alignment import (
    GoldError,
    GoldPair,
    argmax_links,
    grow_diag_links,
    links,
    main,
    pieces_to_words,
    ratio_links,
    read_gold,
    score,
    threshold_links,
    word_attention,
    word_pieces,
)
from s2s.checkpoint import load_translator
from s2s.decode import forced
from s2s.piece_words import word_spans
from s2s.tokenizer import UNK, Tokenizer

SHIPPED_SPM = ROOT / "checkpoints" / "en-fr-additive" / "spm.model"


def pair(n_en, n_fr, sure, possible=()):
    """A gold pair of placeholder words; `possible` lists the P-only links (S counts as P)."""
    return GoldPair(tuple(f"e{i}" for i in range(n_en)), tuple(f"f{i}" for i in range(n_fr)),
                    frozenset(sure), frozenset(sure) | frozenset(possible))


# ---------------------------------------------------------------------------------------
# Scores


def test_aer_precision_recall_on_a_hand_made_example():
    # sentence 1: S = {(0,0), (1,1)}, P = S + {(2,2), (2,3)}; A = {(0,0), (2,2), (1,2)}
    #   |A| = 3, |S| = 2, A∩S = {(0,0)} -> 1, A∩P = {(0,0), (2,2)} -> 2
    #   precision 2/3, recall 1/2, AER = 1 - (1 + 2) / (3 + 2) = 0.4
    g1 = pair(3, 4, {(0, 0), (1, 1)}, {(2, 2), (2, 3)})
    a1 = {(0, 0), (2, 2), (1, 2)}
    s = score([a1], [g1])
    assert (s.precision, s.recall, s.aer) == (pytest.approx(2 / 3), pytest.approx(1 / 2), pytest.approx(0.4))
    assert (s.links, s.sure, s.sentences) == (3, 2, 1)
    # sentence 2: S = P = {(0,0)}, A = {} (AER 1 alone). Summed over both (micro):
    #   |A| = 3, |S| = 3, A∩S = 1, A∩P = 2: precision 2/3, recall 1/3, AER = 1 - 3/6 = 0.5,
    #   not the mean of the sentences' AERs (0.4 + 1) / 2 = 0.7
    g2 = pair(2, 2, {(0, 0)})
    s = score([a1, set()], [g1, g2])
    assert (s.precision, s.recall, s.aer) == (pytest.approx(2 / 3), pytest.approx(1 / 3), pytest.approx(0.5))
    assert s.sentences == 2


def test_aer_is_zero_for_any_a_between_s_and_p():
    g = pair(3, 4, {(0, 0), (1, 1)}, {(2, 2), (2, 3)})
    for a in (set(g.sure), set(g.possible), set(g.sure) | {(2, 3)}):
        s = score([a], [g])
        assert s.aer == pytest.approx(0.0) and s.precision == 1.0 and s.recall == 1.0
    s = score([{(0, 1), (1, 0)}], [g])      # every link wrong
    assert (s.aer, s.precision, s.recall) == (1.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        score([set()], [g, g])


# ---------------------------------------------------------------------------------------
# Pieces -> the gold's words


def by_word(tok, words):
    ids, owner = word_pieces(tok, words)
    out = [[] for _ in words]
    for i, w in zip(ids, owner):
        out[w].append(tok.piece(i))
    return out


def test_word_pieces_on_tricky_tokens_with_the_shipped_tokenizer():
    tok = Tokenizer(SHIPPED_SPM)
    words = "aujourd' hui , l' homme ( C - 49 ) coûte 6,8 $ peut-être PT7 « oui » … 漢 ☃x".split()
    got = dict(zip(words, by_word(tok, words)))
    assert got["aujourd'"] == ["▁aujourd", "'"] and got["hui"] == ["▁", "hui"]     # the "▁" goes with the next word
    assert got["l'"] == ["▁l", "'"] and got["homme"] == ["▁homme"]
    assert got[","] == ["▁", ","] and got["-"] == ["▁", "-"]
    # "(", ")", "$" and every digit are pieces since the copy fine-tune (tokenizer.add_characters)
    assert got["("] == ["▁", "("] and got[")"] == ["▁", ")"] and got["$"] == ["▁", "$"]
    assert got["6,8"] == ["▁", "6", ",", "8"]
    assert got["PT7"] == ["▁P", "T", "7"] and got["49"] == ["▁4", "9"]
    assert got["漢"] == ["▁", "<unk>"] and got["☃x"] == ["▁", "<unk>", "x"]        # unknown to this vocabulary
    assert got["peut-être"] == ["▁peut", "-", "être"]
    assert got["…"] == ["▁", ".", ".", "."]                                         # normalised to three dots
    # every piece of the sentence is owned, in order, by exactly the word it spells
    ids, owner = word_pieces(tok, words)
    assert ids == tok.encode(" ".join(words)) and owner == sorted(owner)
    assert owner == [k for k, w in enumerate(words) for _ in tok.encode(w)]
    # why not s2s.align.word_spans: "▁" "<unk>" and "T" "<unk>" make different "words"
    assert len(word_spans(tok.pieces(ids))) != len(words)


def test_word_pieces_with_the_tiny_tokenizer(untrained_translators):
    tok = untrained_translators["additive"].tokenizer      # knows the letters a-j only
    words = ["a", "k", "b-c", "l'", "j", "hij"]
    ids, owner = word_pieces(tok, words)
    assert owner == [k for k, w in enumerate(words) for _ in tok.encode(w)]
    assert set(owner) == set(range(len(words)))
    assert UNK in [i for i, w in zip(ids, owner) if w == 1]           # "k" is <unk>, still word 1


def test_pieces_to_words_sums_english_and_averages_french():
    # French pieces: word 0 = piece 0, word 1 = pieces 1, 2; English: word 0 = pieces 0, 1, word 1 = piece 2
    a = np.array([[0.5, 0.2, 0.3],
                  [0.1, 0.1, 0.8],
                  [0.3, 0.3, 0.4]])
    w = pieces_to_words(a, [0, 1, 1], [0, 0, 1], 2, 2)
    assert w == pytest.approx(np.array([[0.7, 0.3],
                                        [(0.2 + 0.6) / 2, (0.8 + 0.4) / 2]]))
    assert w.sum(1) == pytest.approx([1.0, 1.0])         # rows stay distributions


def test_word_attention_drops_eos_and_keeps_single_piece_words(tiny_additive):
    tr = load_translator(tiny_additive)
    english, french = "a b c d".split(), "d c b a".split()
    w = word_attention(tr, english, french)
    assert w.shape == (4, 4)
    d = forced(tr, "a b c d", "d c b a")
    if all(len(tr.tokenizer.encode(x)) == 1 for x in english + french):   # one piece a word: nothing to merge
        assert w == pytest.approx(d.attention[:-1, :-1])
    assert np.all(w.sum(1) <= 1 + 1e-6) and np.all(w.sum(1) > 0)


# ---------------------------------------------------------------------------------------
# Rules, on one hand-made (French words x English words) matrix; links are (english, french)

W = np.array([[0.50, 0.00, 0.00, 0.45],     # f0 -> e0, but e3 also prefers f0 (column max .45)
              [0.10, 0.70, 0.10, 0.10],     # f1 -> e1
              [0.00, 0.10, 0.70, 0.10],     # f2 -> e2
              [0.10, 0.10, 0.20, 0.40],     # f3 -> e3
              [0.30, 0.10, 0.10, 0.10]])    # f4 -> e0, far from every other link


def test_argmax_threshold_ratio():
    assert argmax_links(W) == {(0, 0), (1, 1), (2, 2), (3, 3), (0, 4)}
    assert threshold_links(W, 0.4) == {(0, 0), (3, 0), (1, 1), (2, 2), (3, 3)}
    # ratio 0.8: f0 keeps e3 (.45 >= .8 * .5), f3 drops e2 (.2 < .8 * .4)
    assert ratio_links(W, 0.8) == argmax_links(W) | {(3, 0)}
    assert ratio_links(W, 1.0) == argmax_links(W)
    empty = np.zeros((2, 3))                                  # a French word without pieces links nothing
    assert argmax_links(empty) == ratio_links(empty, 0.5) == threshold_links(empty, 0.1) == set()


def test_grow_diag():
    # F->E = argmax above; E->F (column argmax) = {(0,0), (1,1), (2,2), (3,0)}
    # intersection {(0,0), (1,1), (2,2)}; (3,3) touches (2,2) and aligns e3: added;
    # (3,0) and (0,4) touch no kept link: left out, so far
    assert grow_diag_links(W) == {(0, 0), (1, 1), (2, 2), (3, 3)}
    # final: (0,4) aligns f4, still unaligned: added; (3,0) would align nothing new
    assert grow_diag_links(W, final=True) == {(0, 0), (1, 1), (2, 2), (3, 3), (0, 4)}
    assert links(W, "grow-diag") == grow_diag_links(W, final=False)     # the default setting
    assert links(W, "threshold", tau=0.4) == threshold_links(W, 0.4)
    with pytest.raises(ValueError, match="Unknown rule"):
        links(W, "intersection")


# ---------------------------------------------------------------------------------------
# The gold reader

def write_gold(folder, en, fr, wa, split="test"):
    folder.mkdir(parents=True, exist_ok=True)
    for ext, lines in (("en", en), ("fr", fr), ("wa", wa)):
        (folder / f"{split}.{ext}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


REVERSAL = [("a b c d", "d c b a"), ("c a f", "f a c"), ("j i h g e", "e g h i j")]


def reversal_gold(folder, split="test", extra=()):
    """Gold for the tiny reversal model: English word i is French word n + 1 - i, all Sure."""
    wa = [f"{s:04d} {i} {len(e.split()) + 1 - i} S" for s, (e, _) in enumerate(REVERSAL, 1)
          for i in range(1, len(e.split()) + 1)]
    return write_gold(folder, [e + " " for e, _ in REVERSAL], [f for _, f in REVERSAL], wa + list(extra), split)


def test_read_gold(tmp_path):
    gold = read_gold(reversal_gold(tmp_path, extra=["2 1 1 P"]), "test")
    assert [g.english for g in gold] == [tuple(e.split()) for e, _ in REVERSAL]       # trailing space dropped
    assert gold[0].sure == {(0, 3), (1, 2), (2, 1), (3, 0)}                           # from 0, (english, french)
    assert gold[1].possible == gold[1].sure | {(0, 0)} and gold[0].possible == gold[0].sure


def test_a_folder_of_the_other_split_says_which_to_give():
    """examples/hansards_trial holds trial.* only: without --split trial the message says so."""
    folder = ROOT / "examples" / "hansards_trial"
    assert len(read_gold(folder, "trial")) == 37
    with pytest.raises(GoldError, match="has no test.en but has trial.en: give --split trial"):
        read_gold(folder, "test")


@pytest.mark.parametrize("change,message", [
    (lambda d: (d / "test.wa").unlink(), "test.wa is missing"),
    (lambda d: (d / "test.fr").write_text("d c b a\nf a c\n"), "test.en has 3 lines but test.fr has 2"),
    (lambda d: (d / "test.wa").write_text("1 1 4 S\n4 1 1 S\n"), "test.wa line 2: sentence 4 is out of range"),
    (lambda d: (d / "test.wa").write_text("1 5 1 S\n"), "test.wa line 1: English position 5 is out of range"),
    (lambda d: (d / "test.wa").write_text("2 1 4 P\n"), "test.wa line 1: French position 4 is out of range"),
    (lambda d: (d / "test.wa").write_text("1 0 1 S\n"), "English position 0 is out of range"),
    (lambda d: (d / "test.wa").write_text("1 1 1 X\n"), "test.wa line 1: expected"),
    (lambda d: (d / "test.wa").write_text("1 1\n"), "test.wa line 1: expected"),
    (lambda d: (d / "test.en").write_text("a b c d\n\nj i h g e\n"), "test.en line 2 is empty"),
    (lambda d: (d / "test.fr").write_bytes(b"\xff\xfe\n\n\n"), "test.fr is not UTF-8"),
])
def test_read_gold_errors_name_file_and_line(tmp_path, change, message):
    folder = reversal_gold(tmp_path)
    change(folder)
    with pytest.raises(GoldError, match=message.replace("$", r"\$")) as e:
        read_gold(folder, "test")
    assert isinstance(e.value, ValueError)


def test_read_gold_missing_folder(tmp_path):
    with pytest.raises(GoldError, match="does not exist"):
        read_gold(tmp_path / "nowhere", "test")


def test_shipped_trial_set_reads():
    gold = read_gold(ROOT / "examples" / "hansards_trial", "trial")
    assert len(gold) == 37
    assert sum(len(g.sure) for g in gold) == 338 and sum(len(g.possible) for g in gold) == 1784


# ---------------------------------------------------------------------------------------
# The command line


def test_cli_json_on_tiny_gold(tiny_additive, tmp_path):
    gold = reversal_gold(tmp_path / "gold", split="trial")
    p = subprocess.run([sys.executable, "-m", "s2s.alignment", "--model", str(tiny_additive), "--gold", str(gold),
                        "--split", "trial", "--rule", "argmax", "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert {"aer", "precision", "recall", "sentences", "rule", "model"} <= set(out)
    assert out["sentences"] == 3 and out["rule"] == "argmax" and out["model"] == load_translator(tiny_additive).name
    # argmax gives one link per French word (12); S = P here, so AER = 1 - (p|A| + r|S|) / (|A| + |S|)
    assert out["links"] == out["sure"] == 12
    assert out["aer"] == pytest.approx(1 - (out["precision"] + out["recall"]) / 2, abs=1e-3)
    # a model that learned to reverse attends to the word it is copying (AER 0.0 when written)
    assert out["aer"] < 0.25


def run_main(args, capsys):
    try:
        code = main(args)
    except SystemExit as e:        # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_plain_line(tiny_additive, tmp_path, capsys):
    gold = reversal_gold(tmp_path / "gold")
    code, out, err = run_main(["--model", str(tiny_additive), "--gold", str(gold)], capsys)
    assert code == 0 and err == ""
    assert out.count("\n") == 1 and "AER" in out and "grow-diag" in out and "3 sentences" in out


@pytest.mark.parametrize("case,message", [
    ("no model", "does not exist"),
    ("no gold", "test.en is missing"),
    ("line counts", "test.en has 3 lines but test.fr has 2"),
    ("out of range", "French position 9 is out of range"),
    ("unknown rule", "invalid choice"),
    ("no attention", "has no attention"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tiny_additive, tiny_none, tmp_path, capsys, case, message):
    gold = reversal_gold(tmp_path / "gold")
    model, args = tiny_additive, []
    if case == "no model":
        model = tmp_path / "missing-model"
    elif case == "no gold":
        gold = tmp_path / "empty"
        gold.mkdir()
    elif case == "line counts":
        (gold / "test.fr").write_text("d c b a\nf a c\n")
    elif case == "out of range":
        (gold / "test.wa").write_text("3 1 9 S\n")
    elif case == "unknown rule":
        args = ["--rule", "diagonal"]
    elif case == "no attention":
        model = tiny_none
    code, out, err = run_main(["--model", str(model), "--gold", str(gold), "--json", *args], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error:") and message in err


# ---------------------------------------------------------------------------------------
# The statistical baseline and the table


def test_symmetrize_each_heuristic_on_a_hand_made_pair():
    from s2s.alignment import symmetrize
    fwd = {(0, 0), (1, 1), (2, 1), (6, 6)}
    rev = {(0, 0), (1, 1), (3, 3), (2, 2)}
    # from the intersection {(0,0), (1,1)}: (2,1) touches (1,1) and aligns e2; (2,2) touches (1,1) and aligns f2;
    # (3,3) touches (2,2) and aligns e3 and f3; (6,6) touches nothing kept
    assert symmetrize(fwd, rev, "intersection") == {(0, 0), (1, 1)}
    assert symmetrize(fwd, rev, "union") == fwd | rev
    gd = symmetrize(fwd, rev, "grow-diag")
    assert gd == {(0, 0), (1, 1), (2, 1), (2, 2), (3, 3)}
    assert symmetrize(fwd, rev, "grow-diag-final") == gd | {(6, 6)}          # (6,6): e6 and f6 both unaligned
    assert symmetrize(fwd, rev, "grow-diag-final-and") == gd | {(6, 6)}
    # -final adds a link with ONE free word, -final-and only with both free
    fwd2, rev2 = {(0, 0), (0, 1)}, {(0, 0)}
    assert symmetrize(fwd2, rev2, "grow-diag-final") == {(0, 0), (0, 1)} == symmetrize(fwd2, rev2, "grow-diag")
    assert symmetrize({(0, 0), (5, 0)}, {(0, 0)}, "grow-diag-final") == {(0, 0), (5, 0)}
    assert symmetrize({(0, 0), (5, 0)}, {(0, 0)}, "grow-diag-final-and") == {(0, 0)}
    with pytest.raises(ValueError, match="unknown symmetrization"):
        symmetrize(fwd, rev, "grow")


def test_gold_tokens_write_text_as_the_hansards_gold_does():
    from s2s.alignment import gold_tokens
    assert gold_tokens("Je n'aime pas l'été, ni des chiens aux yeux du voisin aujourd'hui.", "fr") == \
        "je ne aime pas le été , ni de les chiens à les yeux de le voisin aujourd' hui .".split()
    assert gold_tokens("Tom's dog’s well-known!", "en") == "tom 's dog 's well - known !".split()
    assert gold_tokens("", "en") == []


def test_statistical_links_run_eflomal_both_ways_and_symmetrize(monkeypatch):
    """eflomal itself replaced by a stand-in that records its input and writes links: the
    gold pairs go first, English is the source, and the two directions are symmetrised."""
    import types

    from s2s.alignment import statistical_links
    seen = {}

    class Aligner:
        def align(self, src, trg, links_filename_fwd=None, links_filename_rev=None, quiet=True):
            seen["src"], seen["trg"] = list(src), list(trg)
            with open(links_filename_fwd, "w") as f:
                f.write("0-0 1-1 2-1\n0-0\n0-0\n")
            with open(links_filename_rev, "w") as f:
                f.write("0-0 1-1 2-2\n0-0 1-0\n0-0\n")
    monkeypatch.setitem(sys.modules, "eflomal", types.SimpleNamespace(Aligner=Aligner))
    gold = [pair(3, 3, {(0, 0)}), pair(2, 1, {(0, 0)})]
    out = statistical_links(gold, [(["x"], ["y"])], "intersection")
    assert seen["src"] == ["e0 e1 e2\n", "e0 e1\n", "x\n"] and seen["trg"] == ["f0 f1 f2\n", "f0\n", "y\n"]
    assert out == [{(0, 0), (1, 1)}, {(0, 0)}]                      # one per gold pair, the extra pair dropped
    assert statistical_links(gold, [(["x"], ["y"])], "union")[1] == {(0, 0), (1, 0)}
    ways = statistical_links(gold, [(["x"], ["y"])], ("intersection", "union"))
    assert ways == {"intersection": out, "union": [{(0, 0), (1, 1), (2, 1), (2, 2)}, {(0, 0), (1, 0)}]}


def test_eflomal_aligns_a_tiny_corpus():
    pytest.importorskip("eflomal")
    from s2s.alignment import statistical_links
    words = ["cat", "dog", "house", "tree", "car", "book"]
    french = ["chat", "chien", "maison", "arbre", "voiture", "livre"]
    rng = np.random.default_rng(0)
    extra = []
    for _ in range(400):               # "the X and the Y" -> "le X' et le Y'": every pair seen many times
        i, j = rng.choice(6, 2, replace=False)
        extra.append((["the", words[i], "and", "the", words[j]], ["le", french[i], "et", "le", french[j]]))
    gold = [GoldPair(("the", "cat", "and", "the", "tree"), ("le", "chat", "et", "le", "arbre"),
                     frozenset({(1, 1), (2, 2), (4, 4)}), frozenset({(1, 1), (2, 2), (4, 4), (0, 0), (3, 3)}))]
    predicted = statistical_links(gold, extra)
    assert {(1, 1), (2, 2), (4, 4)} <= predicted[0]
    assert score(predicted, gold).aer < 0.2


def test_table_command_scores_every_attention_model(untrained_translators, tmp_path, capsys):
    gold = reversal_gold(tmp_path / "gold")
    root = untrained_translators["dot"].path.parent
    out = tmp_path / "results" / "alignment.json"
    code, printed, err = run_main(["--gold", str(gold), "--table", str(out), "--models", str(root)], capsys)
    assert code == 0, err
    table = json.loads(out.read_text())
    names = {r["model"] for r in table["rows"]}
    # every attention model, the Transformers too (by their head-mean cross-attention); never the fixed vector
    assert names == {"dot", "general", "additive", "scaled-dot", "copy", "transformer", "transformer-copy"}
    assert {r["rule"] for r in table["rows"]} == {"argmax", "grow-diag"} and len(table["rows"]) == 14
    assert {r["kind"] for r in table["rows"] if r["model"] == "transformer"} == {
        "Transformer: last layer's cross-attention, mean of the heads"}
    assert table["sentences"] == 3 and table["command"].startswith("python -m s2s.alignment --gold")
    want = run_main(["--model", str(root / "general"), "--gold", str(gold), "--rule", "argmax", "--json"], capsys)
    row = next(r for r in table["rows"] if r["model"] == "general" and r["rule"] == "argmax")
    assert row["aer"] == json.loads(want[1])["aer"]
    assert all(0 <= r["aer"] <= 1 for r in table["rows"]) and printed.count("\n") == 14


@pytest.mark.parametrize("args,message", [
    ([], "give --model"),
    (["--model", "x", "--table", "y.json"], "give --model"),
    (["--table", "{out}", "--models", "{empty}"], "no checkpoint with attention"),
    (["--table", "{out}", "--models", "{root}", "--baseline-data", "{missing}"], "cannot read"),
])
def test_table_command_bad_input(untrained_translators, tmp_path, capsys, args, message):
    gold = reversal_gold(tmp_path / "gold")
    (tmp_path / "empty").mkdir()
    fill = {"out": tmp_path / "t.json", "empty": tmp_path / "empty", "missing": tmp_path / "nope.tsv",
            "root": untrained_translators["dot"].path.parent}
    code, out, err = run_main(["--gold", str(gold)] + [a.format(**fill) for a in args], capsys)
    assert code == 2 and out == "" and err.startswith("error:") and err.count("\n") == 1 and message in err


def test_method_summary_joins_the_alignment_and_explanation_tables():
    """Best layer under grow-diag (and that layer's number), the best argmax, tau and same-top
    from the explanation table; a method in neither file is left out, leave-one-out only where
    it was scored as an aligner."""
    from s2s.alignment import method_summary
    layer = lambda aer: {"aer": aer, "precision": 0, "recall": 0, "links": 0}      # noqa: E731
    aligned = {"rows": [
        {"model": "m", "method": "weights", "grow-diag": [layer(.5), layer(.3), layer(.4)],
         "argmax": [layer(.6), layer(.7), layer(.45)]},
        {"model": "m", "method": "grad-x-input", "grow-diag": [layer(.49)], "argmax": [layer(.55)]},
        {"model": "other", "method": "norm", "grow-diag": [layer(.1)], "argmax": [layer(.1)]}]}
    explained = {"rows": [{"model": "m", "kendall_tau_vs_loo": {"weights": {"median": .28}, "norm": {"median": .29}},
                           "same_top_as_loo": {"weights": .34, "norm": .52}}]}
    rows = method_summary(aligned, explained, "m")
    assert [r["method"] for r in rows] == ["weights", "norm", "grad-x-input"]
    assert rows[0] | {} == {"method": "weights", "layer": 2, "aer_grow_diag": .3, "aer_argmax": .45,
                            "tau_vs_loo": .28, "same_top_as_loo": .34}
    assert rows[1]["aer_grow_diag"] is None and rows[1]["tau_vs_loo"] == .29      # explained, not aligned
    assert rows[2]["layer"] is None and rows[2]["tau_vs_loo"] is None              # one matrix: no layer
    assert method_summary(None, None, "m") == [] and method_summary(aligned, explained, "nobody") == []
