"""Hugging Face encoder-decoders through the one decode API (s2s.hub, s2s.hub_model).

Tiny random models built offline (tests/hub_models.py): Marian, T5 and M2M100. No test here
touches the network: the hub's own name is only ever tried with HF_HUB_OFFLINE=1."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from s2s import decode as D
from s2s.checkpoint import CheckpointError, load_translator
from s2s.hub import any_model_allowed, describe_config, display_name, offered_models, registry_row
from s2s.piece_words import merge_to_words, word_spans
from s2s.text import InputError

TEXT = "the cat sat on the mat ."
REFERENCE = "le chat est assis sur le tapis ."
FAMILIES = ["marian", "t5", "m2m100"]


@pytest.fixture(scope="module")
def hub(hub_models):
    return {name: load_translator(path) for name, path in hub_models.items()}


def generate(tr, text: str, **kw) -> list[int]:
    """transformers' own generate(): the reference the adapter is compared with, told what the
    adapter adds to the model's own rules: never an id its tokenizer lacks (hub_model.unwritable_ids;
    T5's and M2M100's embeddings here have rows past their pieces)."""
    ids = torch.tensor([D.encode_source(tr, text)])
    unwritable = [] if tr.model.unwritable is None else tr.model.unwritable.tolist()
    kw.setdefault("suppress_tokens", list(tr.model.hf.generation_config.suppress_tokens or []) + unwritable)
    out = tr.model.hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                               forced_bos_token_id=tr.model.forced_bos, **kw)
    tokens = out[0, 1:].tolist()                       # after the decoder start
    return tokens[:tokens.index(tr.tokenizer.eos_id) + 1] if tr.tokenizer.eos_id in tokens else tokens


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("max_len", [4, 15])
def test_greedy_tokens_equal_generate(hub, family, max_len):
    tr = hub[family]
    d = D.greedy(tr, TEXT, max_len=max_len)
    assert d.target_ids == generate(tr, TEXT, num_beams=1, do_sample=False, max_new_tokens=max_len)
    assert len(d.target_ids) <= max_len


def test_marian_constraints_are_honoured(hub):
    """Marian's generation config forbids <pad> and forces </s> at the length limit: the
    adapter's searches obey both, as generate() does."""
    tr = hub["marian"]
    d = D.greedy(tr, TEXT, max_len=6)
    assert tr.tokenizer.pad_id not in d.target_ids
    assert d.target_ids[-1] == tr.tokenizer.eos_id          # forced at the last allowed step
    b = D.beam_search(tr, TEXT, width=3, max_len=6)
    assert b.target_ids[-1] == tr.tokenizer.eos_id and tr.tokenizer.pad_id not in b.target_ids


def test_multilingual_model_writes_the_target_language_code_first(hub):
    tr = hub["m2m100"]
    code = tr.tokenizer.hf.get_lang_id("fr")
    assert tr.tokenizer.source_ids(TEXT)[0] == tr.tokenizer.hf.get_lang_id("en")   # the source's own code
    for d in (D.greedy(tr, TEXT, max_len=8), D.beam_search(tr, TEXT, width=2, max_len=8),
              D.sample(tr, TEXT, seed=3, max_len=8)):
        assert d.target_ids[0] == code and d.target_tokens[0] == "__fr__"
        assert "__fr__" not in d.translation                 # a code, not a word of the translation
    assert tr.config["model"]["languages"] == "en→fr"


def test_t5_reads_its_task_prefix_from_the_config(hub):
    tr = hub["t5"]
    assert tr.tokenizer.prefix == "translate English to French: "
    assert tr.tokenizer.pieces(tr.tokenizer.source_ids(TEXT))[:2] == tr.tokenizer.pieces(
        tr.tokenizer.encode("translate English to French: "))[:2]
    other = load_translator(tr.path, prefix="")
    assert len(other.tokenizer.source_ids(TEXT)) < len(tr.tokenizer.source_ids(TEXT))


@pytest.mark.parametrize("family", FAMILIES)
def test_forced_log_prob_is_minus_the_models_own_loss(hub, family):
    tr = hub[family]
    f = D.forced(tr, TEXT, REFERENCE)
    labels = tr.tokenizer.target_ids(REFERENCE)
    assert f.target_ids == labels
    ids = torch.tensor([D.encode_source(tr, TEXT)])
    with torch.no_grad():
        out = tr.model.hf(input_ids=ids, labels=torch.tensor([labels]))
    # the model's own loss (a mean over tokens), its softmax over the tokenizer's pieces: the
    # adapter's, which leaves out the rows past them (T5's and M2M100's here; hub_model.pieces_only)
    loss = out.loss.item() if tr.model.unwritable is None else torch.nn.functional.cross_entropy(
        tr.model.pieces_only(out.logits)[0], torch.tensor(labels)).item()
    assert f.log_prob == pytest.approx(-loss * len(labels), rel=1e-4, abs=1e-3)
    # the one-pass forced decoding agrees with the step-by-step loop
    stepped = D._left_to_right(tr, D.encode_source(tr, TEXT), lambda j, s: labels[j], len(labels))
    np.testing.assert_allclose(stepped.token_log_probs, f.token_log_probs, atol=1e-4)
    np.testing.assert_allclose(stepped.cross_attention, f.cross_attention, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_beam_width_one_is_greedy(hub, family):
    tr = hub[family]
    g, b = D.greedy(tr, TEXT, max_len=12), D.beam_search(tr, TEXT, width=1, max_len=12)
    assert b.target_ids == g.target_ids
    np.testing.assert_allclose(b.token_log_probs, g.token_log_probs, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_shapes_follow_the_config_and_rows_sum_to_one(hub, family):
    tr = hub[family]
    cfg = describe_config(tr.model.hf.config)
    for d in (D.greedy(tr, TEXT, max_len=10), D.beam_search(tr, TEXT, width=3, max_len=10),
              D.forced(tr, TEXT, REFERENCE)):
        S, T = len(d.source_tokens), len(d.target_tokens)
        assert d.cross_attention.shape == (cfg.decoder_layers, cfg.heads, T, S)
        assert d.encoder_self_attention.shape[:2] == (cfg.encoder_layers, tr.model.hf.config.num_attention_heads)
        assert d.encoder_self_attention.shape[2:] == (S, S)
        assert d.decoder_self_attention.shape == (cfg.decoder_layers, cfg.heads, T, T)
        assert d.attention.shape == (T, S)
        np.testing.assert_allclose(d.attention.sum(1), 1, atol=1e-4)
        np.testing.assert_allclose(d.cross_attention.sum(-1), 1, atol=1e-4)
        np.testing.assert_allclose(d.decoder_self_attention.sum(-1), 1, atol=1e-4)
        assert np.all(np.triu(d.decoder_self_attention, 1) == 0)         # causal
        np.testing.assert_allclose(D.attention_of(d, None, None), d.cross_attention[-1].mean(0), atol=1e-5)
        # whole words keep each row a distribution
        src, tgt, a = merge_to_words(d.source_tokens, d.target_tokens, d.attention)
        assert a.shape == (len(tgt), len(src))
        np.testing.assert_allclose(a.sum(1), 1, atol=1e-4)


def test_batched_searches_match_one_at_a_time(hub):
    tr = hub["marian"]
    texts = [TEXT, "hello world !", "she reads a book every day ."]
    assert (D.greedy_batch(tr, texts, D.DecodeSettings(max_len=10))
            == [D.greedy(tr, t, max_len=10).translation for t in texts])
    assert [d.target_ids for d in D.beam_search_batch(tr, texts, D.DecodeSettings("beam", 3, max_len=10))] == \
        [D.beam_search(tr, t, width=3, max_len=10).target_ids for t in texts]


def test_sampling_is_reproducible_and_reports_the_models_own_log_probs(hub):
    tr = hub["t5"]
    a = D.sample(tr, TEXT, temperature=0.7, top_k=5, seed=11, max_len=8)
    b = D.sample(tr, TEXT, temperature=0.7, top_k=5, seed=11, max_len=8)
    assert a.target_ids == b.target_ids
    f = D.forced(tr, TEXT, reference_ids=a.target_ids)      # T = 1 log-probs of the same tokens
    np.testing.assert_allclose(a.token_log_probs, f.token_log_probs, atol=1e-4)


def test_one_settings_object_runs_every_method(hub):
    tr = hub["marian"]
    s = D.DecodeSettings("beam", width=2, max_len=7)
    assert hash(s) == hash(D.DecodeSettings("beam", width=2, max_len=7))     # a cache key
    assert D.decode(tr, TEXT, s).target_ids == D.beam_search(tr, TEXT, width=2, max_len=7).target_ids
    assert D.decode(tr, TEXT, D.DecodeSettings("forced"), reference=REFERENCE).log_prob == \
        pytest.approx(D.forced(tr, TEXT, REFERENCE).log_prob)
    with pytest.raises(D.InputError, match="Beam width"):
        D.DecodeSettings("beam", width=0).checked()
    with pytest.raises(D.InputError, match="Unknown decoding method"):
        D.decode(tr, TEXT, D.DecodeSettings("nucleus"))
    names = [type(p).__name__ for p in D.DecodeSettings("sample", temperature=0.5, top_k=3).processors(tr)]
    assert names == ["SuppressTokens", "ForceToken", "Temperature", "TopK"]     # the model's, then the settings'
    assert D.DecodeSettings("forced").processors(tr) == []


def test_processors_on_hand_made_scores():
    scores = torch.zeros(2, 6)
    last = torch.tensor([False, True])
    prefix = torch.tensor([[1, 2], [3, 1]])
    out = D.ForceToken(5, "last")(prefix, scores.clone(), last)
    assert torch.isinf(out[1, :5]).all() and out[1, 5] == 0 and torch.isfinite(out[0]).all()
    first = D.ForceToken(4, "first")(prefix[:, :0], scores.clone(), last)
    assert (first.argmax(1) == 4).all() and torch.isinf(first[:, :4]).all()
    assert torch.isfinite(D.ForceToken(4, "first")(prefix, scores.clone(), last)).all()   # not after step 0
    bad = D.BadWords(((2, 0), (5,)))(prefix, scores, last)
    assert torch.isfinite(scores).all()                                 # out of place: the logits stay the model's
    assert torch.isinf(bad[0, 0]) and torch.isfinite(bad[1, 0])         # only row 0 ends with 2
    assert torch.isinf(bad[:, 5]).all()
    top = D.TopK(2)(prefix, torch.tensor([[0.1, 0.5, 0.3, 0.9, 0.0, 0.2]] * 2), last)
    assert torch.isfinite(top).sum(1).tolist() == [2, 2]
    assert torch.isinf(D.NoRepeatNGram(1)(prefix, scores.clone(), last)[0, [1, 2]]).all()


def test_word_spans_of_every_piece_convention():
    assert word_spans(["▁lect", "ure", "▁is", "</s>"]) == [("lecture", [0, 1]), ("is", [2]), ("</s>", [3])]
    assert [w for w, _ in word_spans(["Ġthe", "Ġlect", "ure"])] == ["the", "lecture"]
    assert [w for w, _ in word_spans(["the", "lect", "##ure"])] == ["the", "lecture"]
    assert [w for w, _ in word_spans(["the", "lect@@", "ure"])] == ["the", "lecture"]
    assert [w for w, _ in word_spans(["the</w>", "lect", "ure</w>", "</s>"])] == ["the", "lecture", "</s>"]
    assert [w for w, _ in word_spans(["fra_Latn", "▁le", "▁cha", "t"])] == ["fra_Latn", "le", "chat"]
    assert [w for w, _ in word_spans(["__fr__", "▁le"])] == ["__fr__", "le"]


# ------------------------------------------------------------------ loading

def test_registry_description_comes_from_the_config(hub, hub_models):
    tr = hub["marian"]
    assert tr.arch == "transformer" and tr.config["model"]["hub"] is True
    assert tr.config["model"]["model_type"] == "marian"
    assert (tr.config["model"]["encoder_layers"], tr.config["model"]["heads"]) == (2, 4)
    assert tr.config["parameters"] == registry_row(str(hub_models["marian"]))[1]["parameters"]
    assert tr.device.type == "cpu" and next(tr.model.parameters()).dtype == torch.float32


def test_bad_models_give_one_clear_line(tmp_path, monkeypatch, hub_models):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")       # never the network, even for a real name
    cases = {
        "hf:Helsinki-NLP/opus-mt-en-fr-not-cached": "cannot be reached",
        "hf:../etc": "not a hub model name",
        "hf:": "not a hub model name",
        str(tmp_path / "nowhere"): "does not exist",
    }
    from transformers import BertConfig, BertModel
    BertModel(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=8)).save_pretrained(tmp_path / "bert")
    cases[str(tmp_path / "bert")] = "not an encoder-decoder"
    no_tok = tmp_path / "no-tokenizer"
    no_tok.mkdir()
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        (no_tok / f).write_bytes((hub_models["marian"] / f).read_bytes())
    cases[str(no_tok)] = "tokenizer cannot be loaded"
    broken = tmp_path / "broken-weights"
    broken.mkdir()
    for f in hub_models["marian"].iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    cases[str(broken)] = "cannot be read"
    for spec, message in cases.items():
        with pytest.raises(CheckpointError, match=message) as e:
            load_translator(spec)
        assert "\n" not in str(e.value)
    with pytest.raises(CheckpointError, match="not a multilingual"):
        load_translator(hub_models["marian"], target_lang="de")
    with pytest.raises(CheckpointError, match="no language code"):
        load_translator(hub_models["m2m100"], target_lang="xx")


def test_operator_list_and_switch():
    env = {"S2S_HUB_MODELS": " hf:Helsinki-NLP/opus-mt-en-fr ,\n/srv/models/mine,hf:Helsinki-NLP/opus-mt-en-fr,"}
    assert offered_models(env) == ["hf:Helsinki-NLP/opus-mt-en-fr", "/srv/models/mine"]
    assert offered_models({}) == [] and not any_model_allowed({})
    assert any_model_allowed({"S2S_ALLOW_ANY_MODEL": "1"}) and not any_model_allowed({"S2S_ALLOW_ANY_MODEL": "0"})
    assert display_name("hf:Helsinki-NLP/opus-mt-en-fr") == "Helsinki-NLP/opus-mt-en-fr"
    assert display_name("/srv/models/mine") == "mine"


# A bench run for its keys, not its times: one thread, so that a busy machine (another process's
# threads on the same cores) cannot slow its spinning OpenMP workers down ten-fold
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def run_cli(*args, env_extra=None):
    import os
    env = dict(os.environ, HF_HUB_OFFLINE="1", **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


def test_translate_command_takes_a_saved_model_and_refuses_an_unreachable_one(hub_models, hub):
    r = run_cli("s2s.translate", "--model", str(hub_models["marian"]), "--json", "--max-len", "6", "--", TEXT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["target_tokens"] == D.greedy(hub["marian"], TEXT, max_len=6).target_tokens
    assert np.array(out["cross_attention"]).shape[:2] == (2, 4)
    r = run_cli("s2s.translate", "--model", "hf:Helsinki-NLP/opus-mt-en-fr-not-cached", "--", TEXT)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "cannot be reached" in r.stderr


def test_perplexity_of_a_hub_model_is_its_forced_log_prob(hub):
    import math

    from s2s.evaluate import perplexity
    tr = hub["m2m100"]
    pairs = [(TEXT, REFERENCE), ("hello world !", "bonjour le monde !")]
    fs = [D.forced(tr, s, t) for s, t in pairs]
    expected = math.exp(-sum(f.log_prob for f in fs) / sum(len(f.target_ids) for f in fs))
    assert perplexity(tr, pairs) == pytest.approx(expected, rel=1e-4)


def test_alignment_heads_of_a_hub_model(hub):
    from conftest import ROOT
    from s2s.alignment import best_head, head_scores, read_gold, word_attention
    gold = read_gold(ROOT / "examples" / "hansards_trial", "trial")[:3]
    tr = hub["t5"]
    heads = [word_attention(tr, g.english, g.french, heads=True) for g in gold]
    for h, g in zip(heads, gold):
        assert h.shape == (2, 4, len(g.french), len(g.english))
        mean = word_attention(tr, g.english, g.french)
        np.testing.assert_allclose(h[-1].mean(0), mean, atol=1e-5)      # the last layer's mean is the usual matrix
    table = head_scores(heads, gold)
    l, k = best_head(table)
    assert table[l][k].aer == min(s.aer for row in table for s in row)


def test_bench_times_a_hub_model_against_generate(hub_models, tmp_path):
    # (no gold folder: the corpus alignment timing, of a shipped model, is not what this checks)
    r = run_cli("s2s.bench", "--model", str(hub_models["marian"]), "--checkpoints", str(tmp_path), "--runs", "1",
                "--batch-sentences", "2", "--align-gold", str(tmp_path), "--json", env_extra=ONE_THREAD)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["greedy_vs_generate"] > 0 and out["beam5_vs_generate"] > 0
    assert out["generate_greedy_ms_p50"] > 0 and out["dtype"] == "float32" and out["device"] == "cpu"
    # an untrained model may translate into more pieces than explain takes: said, not crashed
    assert (out["explain_ms"] or 0) > 0 or "explaining is limited" in out["explain_declined"]


def test_evaluate_command_takes_a_hub_model(hub_models, tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text(f"{TEXT}\t{REFERENCE}\nhello world !\tbonjour le monde !\n", encoding="utf-8")
    r = run_cli("s2s.evaluate", "--model", str(hub_models["t5"]), "--test", str(tsv), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["n"] == 2 and out["perplexity"] > 1


def test_the_registry_row_reads_the_config_and_the_weights_header_only(hub_models, tmp_path):
    from s2s.checkpoint import hub_checkpoints
    rows = hub_checkpoints([str(hub_models["t5"]), str(tmp_path / "missing"), "hf:someone/not-downloaded"])
    t5, missing, remote = rows
    assert t5.error is None and t5.arch == "transformer" and t5.is_hub and t5.has_attention
    assert t5.model["languages"] == "en→fr" and t5.model["encoder_layers"] == 2 and t5.model["parameters"] > 0
    assert "does not exist" in missing.error
    assert remote.error is None and "downloaded when first chosen" in remote.description


def test_a_bad_name_in_the_operators_list_is_one_bad_row(hub_models):
    from s2s.checkpoint import hub_checkpoints
    rows = hub_checkpoints(["hf:foo bar", "hf:a/b/c", str(hub_models["marian"])])
    assert [r.error is not None for r in rows] == [True, True, False]
    assert all("not a hub model name" in r.error for r in rows[:2])


def test_marian_reads_french_with_its_target_tokenizer(hub):
    """opus-mt has a sentencepiece model per side: the gold French of an alignment is split as
    the decoder writes it, not as the encoder reads English."""
    tok = hub["marian"].tokenizer
    words = REFERENCE.split()
    ids, owner = tok.word_pieces(words, target=True)
    assert ids == tok.target_ids(REFERENCE)[:-1]                       # the decoder's own pieces, </s> aside
    assert ids != tok.word_pieces(words)[0]                            # the English model splits it otherwise
    assert owner == sorted(owner) and owner[-1] == len(words) - 1


def test_the_embedded_input_is_the_models_own_scaled_input(hub):
    """forward(..., embedded=embed(ids)) is forward(ids), Marian's sqrt(d) scale included."""
    for name in FAMILIES:
        m = hub[name].model
        src = torch.tensor([D.encode_source(hub[name], TEXT)])
        tgt_in = torch.tensor([[hub[name].tokenizer.bos_id] + hub[name].tokenizer.target_ids(REFERENCE)[:-1]])
        lengths = torch.tensor([src.size(1)])
        with torch.no_grad():
            a, _ = m(src, lengths, tgt_in)
            b, _ = m(src, lengths, tgt_in, embedded=m.embed(src))
        assert torch.allclose(a, b, atol=1e-5), name
    assert hub["marian"].model.hf.config.scale_embedding        # the case that needs the scale


def test_beam_search_keeps_no_ruled_out_hypothesis(hub):
    d = D.beam_search(hub["m2m100"], TEXT, width=4, max_len=6)
    first = [n for n in d.beam_tree if n["step"] == 0]
    assert [n["token"] for n in first] == ["__fr__"]                   # the forced code alone, no -inf junk
    assert all(np.isfinite(n["log_prob"]) for n in d.beam_tree)


def test_fetch_downloads_and_checks_the_operators_models_before_class(hub_models, tmp_path):
    """python -m s2s.fetch (docs/teaching.md): every model S2S_HUB_MODELS lists is loaded (a hub
    name downloaded into the cache first) and made to translate; each failure is one line,
    and the exit status says whether the server is ready to run offline."""
    listed = f"{hub_models['marian']},{tmp_path / 'missing'},hf:Helsinki-NLP/opus-mt-en-fr-not-cached"
    r = run_cli("s2s.fetch", "--json", env_extra={"S2S_HUB_MODELS": listed})     # HF_HUB_OFFLINE=1 (run_cli)
    assert r.returncode == 1, r.stderr
    rows = {row["model"]: row for row in json.loads(r.stdout)["models"]}
    assert list(rows) == listed.split(",")
    ok = rows[str(hub_models["marian"])]
    assert ok["ok"] and "marian" in ok["description"] and isinstance(ok["translation"], str)
    assert not rows[str(tmp_path / "missing")]["ok"] and "does not exist" in rows[str(tmp_path / "missing")]["error"]
    assert "cannot be reached" in rows["hf:Helsinki-NLP/opus-mt-en-fr-not-cached"]["error"]
    r = run_cli("s2s.fetch", str(hub_models["t5"]))                    # named on the command line: all fine
    assert r.returncode == 0 and r.stdout.startswith("ok ") and len(r.stdout.strip().splitlines()) == 1
    r = run_cli("s2s.fetch", env_extra={"S2S_HUB_MODELS": ""})          # nothing to fetch: says so
    assert r.returncode == 2 and "lists none" in r.stderr


def test_every_length_limit_respects_the_models_positions(tmp_path):
    """#45: a Marian model with 128 positions (max_position_embeddings): our searches stop
    within them (the start token takes one), a longer source is refused in one line, and
    `s2s.bench --model` no longer ends in a traceback from generate() asked for more new tokens
    than the model has positions."""
    from hub_models import SIZES, marian
    folder = marian(tmp_path / "short", dict(SIZES, max_position_embeddings=128))
    tr = load_translator(folder)
    assert D.positions(tr) == 128 and tr.model.cfg.max_positions == 128
    assert D.length_limit(tr, 81, None) == 127 and D.length_limit(tr, 10, None) == 30
    assert D.length_limit(tr, 10, 200) == 127
    assert len(D.greedy(tr, TEXT, max_len=200).target_ids) <= 127
    with pytest.raises(InputError, match="reads at most 128"):
        D.encode_source(tr, " ".join(["neural networks learn useful representations"] * 6))    # 162 pieces
    r = run_cli("s2s.bench", "--model", str(folder), "--checkpoints", str(tmp_path / "none"), "--runs", "1",
                "--batch-sentences", "2", "--align-gold", str(tmp_path), "--json", env_extra=ONE_THREAD)
    assert r.returncode == 0, r.stderr[-1500:]
    assert json.loads(r.stdout)["beam5_vs_generate"] > 0
