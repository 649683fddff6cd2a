"""#54: what a Hugging Face model's shape limits, on tiny models built offline (tests/hub_models.py).

* Its positions (max_position_embeddings): a forced pair longer than them is left out of a set
  of pairs with a count, or refused in one line where it is the one pair asked for; never the
  position embedding's IndexError.
* Its vocabulary: an embedding with more rows than its tokenizer has pieces (T5's 32,128 for
  32,100; a Marian whose vocab.json is shorter) holds ids no search may write, whatever the
  model prefers.
* Its size: one parameter count, the same in the sidebar (the registry) and in s2s.fetch."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from conftest import ROOT
from s2s import decode as D
from s2s.checkpoint import load_translator
from s2s.text import InputError

TRIAL = ROOT / "examples" / "hansards_trial"
TEXT = "the cat sat on the mat ."
POSITIONS = 128          # a listed opus-mt's, as in the issue: 2 of the tiny Marian's 37 trial pairs are longer


# ------------------------------------------------------------------ the vocabulary


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    """A tiny T5 (96 output rows, 90 pieces) and a tiny Marian (6 rows past its vocab.json),
    each rigged so that the model itself prefers the ids its tokenizer lacks: +50 on their
    output rows (T5's lm_head given a bias; Marian's final_logits_bias)."""
    import hub_models
    root = tmp_path_factory.mktemp("padded")
    t5 = load_translator(hub_models.t5(root / "t5"))
    head = t5.model.hf.lm_head
    biased = nn.Linear(head.in_features, head.out_features, bias=True)
    biased.weight = head.weight
    with torch.no_grad():
        biased.bias.zero_()
        biased.bias[len(t5.tokenizer):] = 50.0
    t5.model.hf.lm_head = biased
    marian = load_translator(hub_models.marian(root / "marian", extra_rows=6))
    with torch.no_grad():
        marian.model.hf.final_logits_bias[:, len(marian.tokenizer):] = 50.0
    return {"t5": t5, "marian": marian}


@pytest.mark.parametrize("family", ["t5", "marian"])
def test_no_search_writes_an_id_its_tokenizer_lacks(padded, family):
    tr = padded[family]
    n = len(tr.tokenizer)
    assert tr.model.unwritable.tolist() == list(range(n, tr.model.cfg.vocab_size)) and tr.model.cfg.vocab_size > n
    ids = torch.tensor([D.encode_source(tr, TEXT)])
    raw = tr.model.hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, num_beams=1,
                               do_sample=False)
    assert max(raw[0, 1:].tolist()) >= n              # the rig holds: the model itself writes them
    pieces = {tr.tokenizer.piece(i) for i in range(n)}
    decodings = [D.greedy(tr, TEXT, max_len=8), D.beam_search(tr, TEXT, width=3, max_len=8),
                 D.sample(tr, TEXT, seed=1, max_len=8), D.sample(tr, TEXT, temperature=2.0, top_k=5, seed=2, max_len=8),
                 D.forced(tr, TEXT, "le chat est assis .")]
    for d in decodings:
        assert max(d.target_ids) < n and isinstance(d.translation, str)      # decoded: no "piece id is out of range"
        assert np.all(np.isfinite(d.token_log_probs))
        # the step-by-step view's next-token lists: the model's pieces only, none at probability 0
        assert all(p in pieces and q > 0 for step in d.step_top for p, q in step)
    beam = decodings[1]
    assert all(node["token"] in pieces for node in beam.beam_tree)
    assert all(h.translation is not None for h in beam.nbest)
    # the batched searches: the same rule, being the same model's logits
    texts = [TEXT, "hello world !"]
    assert all(isinstance(t, str) for t in D.greedy_batch(tr, texts, D.DecodeSettings(max_len=8)))
    for d in D.beam_search_batch(tr, texts, D.DecodeSettings("beam", width=3, n_best=1, max_len=8)):
        assert max(d.target_ids) < n


def test_log_probs_are_over_the_pieces_everywhere(padded):
    """Searched, forced, perplexity and attributions read one distribution: over the pieces."""
    from s2s.attributions import explain
    from s2s.evaluate import perplexity
    tr = padded["t5"]
    f = D.forced(tr, TEXT, "le chat est assis .")
    g = D.greedy(tr, TEXT, max_len=8)
    again = D.forced(tr, TEXT, reference_ids=g.target_ids)
    np.testing.assert_allclose(again.token_log_probs, g.token_log_probs, atol=1e-4)
    assert perplexity(tr, [(TEXT, "le chat est assis .")]) == pytest.approx(
        np.exp(-f.log_prob / len(f.target_ids)), rel=1e-4)
    e = explain(tr, TEXT, reference="le chat est assis .", methods=("grad_x_input", "leave_one_out"))
    np.testing.assert_allclose(e.token_log_probs, f.token_log_probs, atol=1e-4)
    assert all(np.all(np.isfinite(a)) for a in e.attributions.values())


def test_m2m100s_language_codes_stay_writable(hub_models):
    """M2M100 numbers its language codes after its pieces (past len(tokenizer)): they are ids
    its tokenizer has, unlike the padded rows after them."""
    tr = load_translator(hub_models["m2m100"])
    bad = tr.model.unwritable.tolist()
    codes = [tr.tokenizer.hf.get_lang_id(c) for c in ("en", "fr")]
    assert min(codes) >= len(tr.tokenizer) and not set(codes) & set(bad)
    assert bad == list(range(max(tr.tokenizer.hf.lang_token_to_id.values()) + 1, tr.model.cfg.vocab_size))
    assert D.greedy(tr, TEXT, max_len=6).target_ids[0] == codes[1]


# ------------------------------------------------------------------ the positions


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    """A tiny Marian with 128 positions, and which trial pairs are longer than that."""
    import hub_models
    from s2s.alignment import read_gold, word_inputs
    folder = hub_models.marian(tmp_path_factory.mktemp("short") / "short",
                               dict(hub_models.SIZES, max_position_embeddings=POSITIONS))
    tr = load_translator(folder)
    gold = read_gold(TRIAL, "trial")
    long = []
    for g in gold:
        wp = word_inputs(tr, g.english, g.french)
        long.append(max(len(wp.source), len(wp.target)) > POSITIONS)
    assert 0 < sum(long) < len(gold)
    return folder, tr, gold, long


def test_pairs_longer_than_the_positions_are_left_out_and_counted(short):
    from s2s.alignment import pairs_that_fit, word_attention
    from s2s.alignment.corpus import corpus_weights
    _, tr, gold, long = short
    kept, skipped = pairs_that_fit(tr, gold)
    assert skipped == sum(long) and kept == [g for g, x in zip(gold, long) if not x]
    g = gold[long.index(True)]
    with pytest.raises(InputError, match=f"reads at most {POSITIONS} pieces a side"):
        word_attention(tr, g.english, g.french)                 # one pair asked for: refused in one line
    weights = corpus_weights(tr, [(g.english, g.french) for g in gold])
    assert [w is None for w in weights] == long                 # a corpus: the empty lines it already counts


def write_gold(folder, pairs) -> str:
    """A gold folder of `pairs` (GoldPairs) as its trial split, in the Hansards layout."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trial.en").write_text("".join(" ".join(g.english) + "\n" for g in pairs), encoding="utf-8")
    (folder / "trial.fr").write_text("".join(" ".join(g.french) + "\n" for g in pairs), encoding="utf-8")
    (folder / "trial.wa").write_text("".join(f"{n} {e + 1} {f + 1} {'S' if (e, f) in g.sure else 'P'}\n"
                                             for n, g in enumerate(pairs, 1) for e, f in sorted(g.possible)))
    return str(folder)


def test_one_pair_too_long_is_refused_in_one_line(short, capsys):
    """A reference longer than the positions: s2s.explain and forced decoding say so in one line."""
    from s2s.attributions import explain
    from s2s.explain import main
    folder, tr, _, _ = short
    reference = " ".join(["le chat est assis sur le tapis ."] * 12)
    assert len(tr.tokenizer.target_ids(reference)) > POSITIONS
    with pytest.raises(InputError, match=f"reads at most {POSITIONS}"):
        explain(tr, TEXT, reference=reference)
    with pytest.raises(InputError, match=f"reads at most {POSITIONS}"):
        D.forced(tr, TEXT, reference)                           # the adapter's own guard
    assert main(["--model", str(folder), "--reference", reference, "--", TEXT]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and f"reads at most {POSITIONS}" in out.err
    assert main(["--model", str(folder), "--reference", "le chat .", "--", TEXT]) == 0


def test_the_alignment_command_scores_what_fits_and_prints_the_count(short, tmp_path, capsys):
    """The issue's command, `python -m s2s.alignment --model DIR --gold examples/hansards_trial
    --split trial`: exit 0, the pairs that fit scored, the count of the others printed."""
    from s2s.alignment import main
    folder, _, gold, long = short
    skipped = sum(long)
    r = subprocess.run([sys.executable, "-m", "s2s.alignment", "--model", str(folder), "--gold", str(TRIAL),
                        "--split", "trial", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["skipped"] == skipped and out["sentences"] == len(gold) - skipped
    assert f"{skipped} of the {len(gold)} pairs left out: longer than short's {POSITIONS} positions" in r.stderr
    # every layer x head, a method, and a corpus whose head is chosen on a gold, the same way (in
    # this process, on the long pairs and the two shortest: the same main, a quarter of the time)
    few = [g for g, x in zip(gold, long) if x] + sorted(gold, key=lambda g: len(g.english) + len(g.french))[:2]
    small = write_gold(tmp_path / "few", few)
    args = ["--model", str(folder), "--gold", small, "--split", "trial", "--json"]
    assert main([*args, "--heads"]) == 0
    heads = json.loads(capsys.readouterr().out)
    assert heads["skipped"] == skipped and heads["sentences"] == 2
    assert main([*args, "--method", "norm"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == skipped
    tsv = tmp_path / "few.tsv"
    tsv.write_text("".join(f"{' '.join(g.english)}\t{' '.join(g.french)}\n" for g in few), encoding="utf-8")
    assert main(["--model", str(folder), "--input", str(tsv), "--output", str(tmp_path / "links.txt"),
                 "--choose-on", small, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["skipped"] == skipped and out["aligned"] == 2 and out["head"]["skipped"] == skipped


def test_no_pair_fits_is_one_line(tmp_path, capsys):
    import hub_models
    from s2s.alignment import main
    folder = hub_models.marian(tmp_path / "tiny16", dict(hub_models.SIZES, max_position_embeddings=16))
    assert main(["--model", str(folder), "--gold", str(TRIAL), "--split", "trial"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: trial: 37 of the 37 pairs left out")


# ------------------------------------------------------------------ the parameter count


def test_the_sidebar_and_fetch_say_one_parameter_count(hub_models):
    """The registry (the sidebar, from the weights file's header) and the loader (what
    s2s.fetch and the Translate page print) count the same: tied embeddings once, Marian's
    final_logits_bias in, its sinusoidal position tables out (hub_config.count_parameters)."""
    from s2s.fetch import fetch
    from s2s.hub import registry_row
    for family in ("marian", "t5", "m2m100"):
        description, model = registry_row(str(hub_models[family]))
        tr = load_translator(hub_models[family])
        assert model["parameters"] == tr.config["parameters"], family
        size = f"{model['parameters']:,} parameters"
        assert size in description and size in tr.config["description"]
        row = fetch([str(hub_models[family])])[0]
        assert row["ok"] and size in row["description"]
    hf = load_translator(hub_models["marian"]).model.hf
    positions = sum(m.embed_positions.weight.numel() for m in (hf.model.encoder, hf.model.decoder))
    assert registry_row(str(hub_models["marian"]))[1]["parameters"] == (
        sum(p.numel() for p in hf.parameters()) - positions + hf.final_logits_bias.numel())


# ------------------------------------------------------------------ the Alignment page


@pytest.fixture
def offered_short(short, tmp_path_factory, tiny_additive, tiny_none, untrained_translators, monkeypatch):
    from conftest import five_translators
    zoo = five_translators(tmp_path_factory.mktemp("limits_zoo"), tiny_additive, tiny_none, untrained_translators)
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setenv("S2S_HUB_MODELS", str(short[0]))
    monkeypatch.delenv("S2S_ALLOW_ANY_MODEL", raising=False)
    return short


def test_the_alignment_page_says_what_it_left_out(offered_short):
    """Against human alignments, the 128-position Marian on a trial pair longer than that: one
    line for the pair, and every layer x head scored on the pairs that fit, saying how many did not."""
    from conftest import app_page
    from test_app import _widget, chart, texts
    folder, _, gold, long = offered_short
    at = app_page("pages/alignment.py")
    _widget(at, "align_model").set_value(str(folder))
    at.session_state["gold_pair"] = long.index(True) + 1
    at.run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and f"reads at most {POSITIONS} pieces a side" in errors[0]
    at.button(key="heads_run").click().run()       # a hub model's every layer x head waits for its button
    assert not at.exception, at.exception
    assert chart(at, "head_aer") is not None
    assert f"{sum(long)} of the {len(gold)} pairs left out" in texts(at)
