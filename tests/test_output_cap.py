"""A model's own output cap and the cut flag: one length rule (s2s.decode.length_limit) for the
page and every command, and a decoding stopped at it marked `cut` (Decoding.cut, "cut" in the
commands' JSON, the page's cut note)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from s2s import decode as D
from s2s.checkpoint import load_translator
from s2s.hub_config import own_output_cap

TEXT = "the cat sat on the mat ."
CAP = 5
SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "en-fr-transformer"
ENDS = "She has a big black dog."          # the shipped Transformer ends its translation itself


@pytest.fixture(scope="module")
def shipped():
    return load_translator(SHIPPED)


@pytest.fixture(scope="module")
def capped(hub_models, tmp_path_factory):
    """The tiny Marian, its folder's generation config capping its output at CAP pieces, and
    the same model without the cap."""
    folder = tmp_path_factory.mktemp("capped") / "marian"
    shutil.copytree(hub_models["marian"], folder)
    gen = folder / "generation_config.json"
    config = json.loads(gen.read_text())
    config["max_new_tokens"] = CAP
    gen.write_text(json.dumps(config))
    return folder, load_translator(folder), load_translator(hub_models["marian"])


def test_the_cap_is_read_from_the_generation_config():
    class Gen:
        max_new_tokens, max_length = None, None
    g = Gen()
    assert own_output_cap(g) == 0
    g.max_length = 21                          # counts the decoder's start token
    assert own_output_cap(g) == 20
    g.max_new_tokens = 7
    assert own_output_cap(g) == 7


def test_every_search_stops_at_the_models_own_cap(capped):
    _, tr, plain = capped
    assert D.own_cap(tr) == CAP and D.own_cap(plain) == 0
    n = len(D.encode_source(tr, TEXT))
    assert D.length_limit(tr, n, None) == CAP
    assert D.length_limit(tr, n, 100) == CAP              # an explicit max length does not pass it
    assert D.length_limit(tr, n, 3) == 3
    assert D.length_limit(plain, n, None) == 2 * n + 10
    free = D.greedy(plain, TEXT)
    assert len(free.target_ids) > CAP                      # random weights: it runs on uncapped
    for settings in (D.DecodeSettings("greedy"), D.DecodeSettings("beam", width=3),
                     D.DecodeSettings("sample", seed=1), D.DecodeSettings("greedy", max_len=100)):
        d = D.decode(tr, TEXT, settings)
        assert len(d.target_ids) <= CAP, settings
    d = D.greedy(tr, TEXT)
    assert d.target_ids == free.target_ids[:CAP - 1] + d.target_ids[CAP - 1:]   # the same steps, cut earlier
    assert len(D.greedy_batch(tr, [TEXT, "hello world !"])) == 2
    assert D.greedy_batch(tr, [TEXT])[0] == d.translation
    (b,) = D.beam_search_batch(tr, [TEXT], D.DecodeSettings("beam", width=3))
    assert len(b.target_ids) <= CAP and b.target_ids == D.decode(tr, TEXT, D.DecodeSettings("beam", width=3)).target_ids


def test_a_cut_output_says_so_and_an_ended_one_does_not(capped, shipped):
    _, tr, _ = capped
    d = D.greedy(tr, TEXT)
    # Marian's forced_eos writes </s> at the limit: the model's own choice there was another piece
    assert len(d.target_ids) == CAP and d.token_ranks[-1] > 1 and d.cut
    assert D.decode(tr, TEXT, D.DecodeSettings("beam", width=3)).cut
    (b,) = D.beam_search_batch(tr, [TEXT], D.DecodeSettings("beam", width=3))
    assert b.cut
    assert D.decode(tr, TEXT, D.DecodeSettings("greedy", max_len=2)).to_json()["cut"] is True
    forced = D.forced(tr, TEXT, reference_ids=d.target_ids)
    assert not forced.cut and forced.to_json()["cut"] is False
    # a trained model that ends its output itself: not cut
    ours = shipped
    own = D.greedy(ours, ENDS)
    assert own.target_tokens[-1] == "</s>" and not own.cut and own.to_json()["cut"] is False
    short = D.greedy(ours, ENDS, max_len=2)
    assert short.target_tokens[-1] != "</s>" and short.cut
    joined = D.join_decodings([own, short])
    assert joined.cut and not D.join_decodings([own, own]).cut


def test_was_cut():
    assert D.was_cut([4, 5, 6], 3, 0, own_end=False)
    assert not D.was_cut([4, 5, 0], 3, 0, own_end=True)
    assert D.was_cut([4, 5, 0], 3, 0, own_end=False)
    assert not D.was_cut([4, 0], 3, 0, own_end=False)


def test_settings_as_the_translate_command_takes_them():
    assert D.DecodeSettings("greedy").command_options() == ""
    assert D.DecodeSettings("greedy", max_len=120, head_mask="cross:1.2").command_options() == (
        "--max-len 120 --mask-heads cross:1.2")
    assert D.DecodeSettings("beam", width=4, max_len=30, no_repeat=3).command_options() == (
        "--beam 4 --max-len 30 --no-repeat 3")
    assert D.DecodeSettings("sample", temperature=0.5, top_k=10, seed=2, max_len=9).command_options() == (
        "--sample --temperature 0.5 --top-k 10 --seed 2 --max-len 9")


def test_the_command_and_the_page_name_one_limit_and_one_flag(capped, shipped):
    """The page's knockout names `python -m s2s.translate` + command_options() as its equal: that
    command decodes what decode() decodes with the page's settings, and says "cut" as it does."""
    folder, tr, _ = capped
    settings = D.DecodeSettings("greedy", max_len=120, head_mask="cross:1.2")
    page = D.decode(tr, TEXT, settings)
    r = subprocess.run([sys.executable, "-m", "s2s.translate", "--model", str(folder), "--json",
                        *settings.command_options().split(), "--", TEXT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["target_tokens"] == page.target_tokens and out["cut"] is True and page.cut
    ours = shipped
    for s in (D.DecodeSettings("greedy", max_len=2),):
        r = subprocess.run([sys.executable, "-m", "s2s.translate", "--model", str(SHIPPED), "--json",
                            *s.command_options().split(), "--", ENDS], capture_output=True, text=True, timeout=300)
        assert json.loads(r.stdout)["cut"] is D.decode(ours, ENDS, s).cut
    # without --json: the translation on stdout, and a note on stderr that it was cut (none when it ended)
    for s, cut in ((D.DecodeSettings("greedy", max_len=2), True), (D.DecodeSettings("greedy"), False)):
        r = subprocess.run([sys.executable, "-m", "s2s.translate", "--model", str(SHIPPED),
                            *s.command_options().split(), "--", ENDS], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip() == D.decode(ours, ENDS, s).translation
        assert ("cut at the length limit" in r.stderr) is cut and (r.stderr == "") is not cut, r.stderr


def test_the_pages_cut_note_reads_the_same_flag(capped, shipped):
    from ui.decoded import cut_note
    _, tr, _ = capped
    d = D.decode(tr, TEXT, D.DecodeSettings("greedy", max_len=120))
    assert cut_note(tr, d, TEXT, 120) == ("cut at 5 pieces, the model's own cap (its generation config's 5 pieces), "
                                          "its </s> forced there")
    short = D.decode(tr, TEXT, D.DecodeSettings("greedy", max_len=3))
    assert cut_note(tr, short, TEXT, 3) == "cut at 3 pieces, the max length, its </s> forced there"
    joined = D.join_decodings([d, d])
    assert cut_note(tr, joined, TEXT, 120, by_sentence=True) == "a sentence was cut at its length limit"
    ours = shipped
    own = D.greedy(ours, ENDS, max_len=120)
    assert not own.cut and cut_note(ours, own, ENDS, 120) == ""
