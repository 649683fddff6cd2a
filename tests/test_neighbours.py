"""s2s.neighbours: the training sentences and decoder states nearest to a sentence's own.

On tiny models trained here (tests/conftest.py) and a tiny generated corpus, so nothing needs
../shared: a training sentence's nearest sentence is itself, a training pair forced on its own
French finds its own state at every step, an index of another model is refused, the 2-D map has
its shapes, and the command prints what it should (or one line and exit status 2)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, reversal_pairs, write_tsv
from s2s import neighbours as nb
from s2s.checkpoint import load_translator
from s2s.text import InputError


def distinct_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Reversal pairs, one per English sentence (as the shipped sample is)."""
    seen: dict[str, str] = {}
    for en, fr in reversal_pairs(3 * n, seed=seed):
        seen.setdefault(en, fr)
    return list(seen.items())[:n]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tsv(distinct_pairs(150, seed=11), tmp_path_factory.mktemp("nb") / "pairs.tsv")


@pytest.fixture(scope="module")
def additive(tiny_additive):
    return load_translator(tiny_additive)


@pytest.fixture(scope="module")
def additive_index(additive, corpus, tmp_path_factory):
    return nb.build_index(additive, corpus, tmp_path_factory.mktemp("idx") / "additive", batch_size=16)


@pytest.fixture(scope="module")
def transformer(tiny_transformer):
    return load_translator(tiny_transformer)


@pytest.fixture(scope="module")
def transformer_index(transformer, corpus, tmp_path_factory):
    return nb.build_index(transformer, corpus, tmp_path_factory.mktemp("idx") / "transformer", batch_size=16)


def test_index_holds_every_pair_and_step(additive, additive_index, corpus, tmp_path):
    """One pooled state per pair, one decoder state per target piece (</s> included), pieces the
    training targets'; files written (safetensors + JSON, int8 codes), read back identical."""
    from safetensors.torch import load_file

    from s2s.data import read_pairs
    pairs = read_pairs(corpus)
    index, tok = additive_index, additive.tokenizer
    assert index.n_pairs == len(pairs) and index.pairs == pairs
    lengths = [len(tok.target_ids(fr)) for _, fr in pairs]
    assert index.n_states == sum(lengths) == int(index.offsets[-1])
    assert index.pair_piece_ids(3) == tok.target_ids(pairs[3][1])
    tensors = load_file(str(index.where / nb.INDEX_TENSORS))
    assert tensors["states"].dtype == torch.int8 and tensors["sentences"].dtype == torch.int8
    assert tensors["pieces"].dtype == tensors["predicted"].dtype == torch.int32
    meta = json.loads((index.where / nb.INDEX_JSON).read_text(encoding="utf-8"))
    assert meta["model"] == nb.model_identity(additive) and meta["corpus"]["pairs"] == len(pairs)
    assert meta["format"] == nb.FORMAT == 2 and meta["dtype"] == "int8"
    assert "mean" in meta["pooling"] and "teacher forcing" in meta["piece"]
    again = nb.load_index(additive, index.where)
    assert torch.equal(again.state_keys, index.state_keys) and again.pairs == pairs


def test_int8_codes_keep_each_rows_direction_and_a_quarter_of_its_bytes(additive_index):
    """Issue #62: the index is stored as int8 codes (a row over its largest |entry|, times 127),
    so the shipped models' 10,000 pairs fit in 40 MB: about D + 8 bytes a state (its codes, its
    piece and its argmax as int32), where fp16 took 2 D + 16."""
    x = torch.randn(50, 64) * torch.rand(50, 1) * 5
    x[3] = 0
    c = nb.int8_codes(x)
    assert c.dtype == torch.int8 and c.abs().amax(-1)[[0, 1, 2]].tolist() == [127, 127, 127] and not c[3].any()
    cos = (nb.unit_rows(c) * nb.unit_rows(x)).sum(-1)
    assert cos[[i for i in range(50) if i != 3]].min() > 0.999                   # a cosine barely moves
    index = additive_index
    m, d = index.n_states, index.state_keys.size(1)
    stored = (index.where / nb.INDEX_TENSORS).stat().st_size
    assert stored <= m * (d + 8) + index.n_pairs * (index.sentence_keys.size(1) + 8) + 2_000
    # the shipped sample's whole index: 112,513 states of 256 and 10,000 sentences of 256 (docs/neighbours.md)
    assert 112_513 * (256 + 8) + 10_000 * (256 + 8) + 1_000_000 < 40e6


def test_an_index_of_the_older_format_is_rebuilt_not_misread(additive, additive_index, tmp_path):
    import shutil
    old = tmp_path / "old"
    shutil.copytree(additive_index.where, old)
    meta = json.loads((old / nb.INDEX_JSON).read_text(encoding="utf-8"))
    (old / nb.INDEX_JSON).write_text(json.dumps({**meta, "format": 1}), encoding="utf-8")
    with pytest.raises(nb.IndexNotReady, match="another format") as e:
        nb.load_index(additive, old)
    assert e.value.reason == "unreadable"


def test_a_training_sentence_is_its_own_nearest_sentence(additive, additive_index):
    for i in range(0, 40, 4):
        en, _ = additive_index.pairs[i]
        n = nb.search(additive, additive_index, en, k=3)
        first = n.sentences[0]
        assert (first.pair, first.english) == (i, en)
        assert first.similarity == pytest.approx(1.0, abs=2e-3)        # int8 codes: not exactly 1
        assert [s.similarity for s in n.sentences] == sorted((s.similarity for s in n.sentences), reverse=True)


@pytest.mark.parametrize("which", ["additive", "transformer"])
def test_each_step_of_a_training_pair_finds_its_own_state(which, request):
    """Forced on its own French, step j of training pair i finds row (i, j) first: the very
    state, shown with its own training piece (the recurrent model's h~_j, the Transformer's
    last layer output, both computed in a batch of one here and in padded batches in the index)."""
    tr, index = request.getfixturevalue(which), request.getfixturevalue(f"{which}_index")
    tok = tr.tokenizer
    for i in range(0, 30, 3):
        en, fr = index.pairs[i]
        ids = tok.target_ids(fr)
        n = nb.search(tr, index, en, k=2, target_ids=ids)
        assert len(n.steps) == len(ids) and n.target_ids == ids
        for j, st in enumerate(n.steps):
            best = st.neighbours[0]
            assert (best.pair, best.step) == (i, j), (which, i, j)
            assert best.piece == st.piece == tok.piece(ids[j])
            assert best.similarity == pytest.approx(1.0, abs=2e-3)
            assert (best.english, best.french) == (en, fr)


def test_the_greedy_translation_is_read_by_default(additive, additive_index):
    from s2s.decode import greedy
    en = additive_index.pairs[5][0]
    n = nb.search(additive, additive_index, en, k=4)
    d = greedy(additive, en)
    assert n.target_ids == d.target_ids and n.translation == d.translation
    assert all(len(st.neighbours) == 4 for st in n.steps)
    assert [st.piece for st in n.steps] == d.target_tokens


def test_projection_has_the_right_shapes(additive, additive_index):
    k = 3
    n = nb.search(additive, additive_index, additive_index.pairs[7][0], k=k)
    p, T = n.projection, len(n.steps)
    P = len(p.rows)
    assert 1 <= P <= T * k and len(set(p.rows)) == P
    assert p.points.shape == (P, 2) and p.trajectory.shape == (T, 2) and p.explained.shape == (2,)
    assert len(p.steps) == len(p.pieces) == P and all(0 <= s < T for s in p.steps)
    assert np.isfinite(p.points).all() and np.isfinite(p.trajectory).all()
    assert 0 <= p.explained.sum() <= 1 + 1e-9 and p.explained[0] >= p.explained[1]
    # PCA of centred points: each axis has mean 0 over the neighbours
    assert np.abs(p.points.mean(0)).max() < 1e-9
    # every neighbour of every step is on the map, as the piece it carries
    on_map = dict(zip(p.rows, p.pieces))
    tok = additive.tokenizer
    for st in n.steps:
        for x in st.neighbours:
            row = additive_index.row(x.pair, x.step)
            assert on_map[row] == x.piece == tok.piece(int(additive_index.pieces[row]))
    again = nb.search(additive, additive_index, additive_index.pairs[7][0], k=k).projection
    assert np.array_equal(again.points, p.points)                     # deterministic, signs included
    assert json.dumps(n.to_json())                                    # JSON-ready


def test_an_index_of_another_model_is_refused(additive, additive_index, transformer, untrained_translators, tmp_path):
    for other in (transformer, untrained_translators["additive"]):
        with pytest.raises(nb.IndexNotReady, match="another model") as e:
            nb.load_index(other, additive_index.where)
        assert e.value.reason == "other model" and "python -m s2s.neighbours build" in str(e.value)
        with pytest.raises(nb.IndexNotReady, match="another model"):
            nb.search(other, additive_index, "a b c")
    with pytest.raises(nb.IndexNotReady, match="No neighbours index") as e:
        nb.load_index(additive, tmp_path / "nowhere")
    assert e.value.reason == "missing" and isinstance(e.value, InputError)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / nb.INDEX_JSON).write_text("{not json", encoding="utf-8")
    (broken / nb.INDEX_TENSORS).write_bytes(b"\0" * 10)
    with pytest.raises(nb.IndexNotReady) as e:
        nb.load_index(additive, broken)
    assert e.value.reason == "unreadable"


def test_build_reports_progress_and_leaves_out_unusable_pairs(untrained_translators, tmp_path):
    tr = untrained_translators["none"]          # the fixed-vector model has an encoder and decoder states too
    pairs = distinct_pairs(20, seed=3) + [("a b", "\x01"), ("\x00", "a")]     # read, then left out
    seen = []
    index = nb.build_index(tr, write_tsv(pairs, tmp_path / "c.tsv"), tmp_path / "i", batch_size=8,
                           on_progress=lambda done, total: seen.append((done, total)))
    assert index.n_pairs == 20 and index.meta["corpus"]["left_out"] == 2
    assert seen[-1] == (20, 20) and len(seen) == 3
    assert nb.search(tr, index, pairs[0][0], k=2).sentences[0].pair == 0
    with pytest.raises(InputError, match="k must be between"):
        nb.search(tr, index, "a b", k=0)
    with pytest.raises(InputError, match="empty"):
        nb.search(tr, index, "   ", k=2)


def test_a_hub_model_needs_a_corpus_and_then_works(tmp_path):
    import hub_models
    tr = load_translator(hub_models.marian(tmp_path / "marian"))
    with pytest.raises(InputError, match="--corpus"):
        nb.build_index(tr, None, tmp_path / "i")
    index = nb.build_index(tr, write_tsv(list(zip(hub_models.EN, hub_models.FR)), tmp_path / "c.tsv"), tmp_path / "i")
    assert index.meta["model"]["weights_sha256"] and "decoder_hidden_states" in index.meta["state"]
    n = nb.search(tr, index, hub_models.EN[2], k=2, target_ids=tr.tokenizer.target_ids(hub_models.FR[2]))
    assert n.sentences[0].pair == 2 and n.steps[0].neighbours[0].pair == 2


def test_cache_folder_follows_the_environment(additive, monkeypatch, tmp_path):
    monkeypatch.setenv("S2S_NEIGHBOURS_DIR", str(tmp_path))
    assert nb.index_dir(additive) == tmp_path / additive.name
    monkeypatch.delenv("S2S_NEIGHBOURS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert nb.index_dir(additive) == tmp_path / "xdg" / "s2s-neighbours" / additive.name


def test_sample_is_one_pair_per_english_sentence():
    train = [("a", "1"), ("b", "2"), ("a", "3"), ("c", "4"), ("d", "5")]
    out = nb.sample_pairs(train, 3, seed=1)
    assert len(out) == 3 and len({e for e, _ in out}) == 3 and ("a", "3") not in out
    assert out == nb.sample_pairs(train, 3, seed=1)
    shipped = nb.SAMPLE.read_text(encoding="utf-8").splitlines()
    assert len(shipped) == nb.SAMPLE_PAIRS == len({line.split("\t")[0] for line in shipped})


# ------------------------------------------------------------------ the command

def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "s2s.neighbours", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_command_builds_then_lists_with_and_without_json(tiny_additive, corpus, tmp_path):
    where = str(tmp_path / "idx")
    b = run("build", "--model", str(tiny_additive), "--corpus", str(corpus), "--index", where, "--json")
    assert b.returncode == 0, b.stderr
    built = json.loads(b.stdout)
    assert built["states"] > built["corpus"]["pairs"] == 150 and built["bytes"]["index.safetensors"] > 0
    en = corpus.read_text(encoding="utf-8").splitlines()[0].split("\t")[0]
    j = run("--model", str(tiny_additive), "--index", where, "--k", "2", "--json", "--", en)
    assert j.returncode == 0, j.stderr
    out = json.loads(j.stdout)
    assert out["sentences"][0]["english"] == en and out["sentences"][0]["similarity"] == pytest.approx(1, abs=2e-3)
    assert len(out["steps"]) == len(out["target_tokens"]) and all(len(s["neighbours"]) == 2 for s in out["steps"])
    assert {"pair", "step", "piece", "predicted", "similarity", "english", "french"} <= set(out["steps"][0]
                                                                                          ["neighbours"][0])
    assert len(out["projection"]["trajectory"]) == len(out["steps"])
    t = run("--model", str(tiny_additive), "--index", where, "--", en)
    assert t.returncode == 0, t.stderr
    assert "Nearest training sentences" in t.stdout and en in t.stdout and "[" in t.stdout


@pytest.mark.parametrize("args, says", [
    (["--k", "2", "--", "   "], "empty"),
    (["--k", "0", "--", "a b"], "--k must be between"),
    (["--", "a b c"], "No neighbours index"),
    (["--bogus"], "unrecognized arguments"),
])
def test_command_bad_input_is_one_line_and_status_2(tiny_additive, tmp_path, capsys, args, says):
    rc = None
    try:
        rc = nb.main(["--model", str(tiny_additive), "--index", str(tmp_path / "none"), *args])
    except SystemExit as e:          # argparse's own errors (OneLineErrorParser)
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and says in err and err.count("\n") == 1 and "Traceback" not in err


def test_command_refuses_unknown_models_and_other_models_indexes(additive_index, untrained_translators, capsys):
    assert nb.main(["--model", "no-such-model", "--", "a b"]) == 2
    assert "no-such-model" in capsys.readouterr().err
    other = untrained_translators["dot"]
    assert nb.main(["--model", str(other.path), "--index", str(additive_index.where), "--", "a b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "another model" in err and err.count("\n") == 1
    assert nb.main(["build", "--model", str(other.path), "--corpus", "/no/such.tsv", "--index", "/tmp/x"]) == 2
    assert "cannot read the corpus" in capsys.readouterr().err


def test_bench_finds_the_models_index_or_builds_one_from_the_sample(additive, additive_index, monkeypatch, tmp_path):
    """neighbours_ms needs no ../shared: with no index for the model it builds one of the shipped
    sample's first pairs in a temporary folder (nothing left in the cache); with one, it uses it."""
    from s2s import bench
    from s2s.decode import greedy
    monkeypatch.setattr(bench, "NEIGHBOURS_PAIRS", 40)
    monkeypatch.setenv("S2S_NEIGHBOURS_DIR", str(tmp_path / "cache"))
    d = greedy(additive, bench.SENTENCE_20)
    threads = torch.get_num_threads()
    out = bench.neighbours_timing(additive, d, 2)
    assert out["neighbours_ms"] > 0 and out["neighbours_pairs"] == 40 and out["neighbours_states"] > 40
    assert not (tmp_path / "cache").exists() and torch.get_num_threads() == threads
    monkeypatch.setattr(nb.index, "index_dir", lambda tr, root=None: additive_index.where)   # where load_index looks
    out = bench.neighbours_timing(additive, d, 2)
    assert (out["neighbours_pairs"], out["neighbours_states"]) == (additive_index.n_pairs, additive_index.n_states)


# ------------------------------------------------------------------ before class: python -m s2s.fetch --neighbours

def test_fetch_builds_every_offered_models_index_before_class(tiny_additive, tiny_transformer, hub_models, corpus,
                                                               monkeypatch, tmp_path, capsys):
    """Issue #62: the instructor's command builds each shipped model's index where the page reads
    it (no student waits ~45 s on the first click), keeps one already built for the same weights,
    and builds a hub model's from --corpus (without one: skipped, saying why, not a failure)."""
    import shutil

    from s2s import fetch
    shipped = tmp_path / "checkpoints"
    shipped.mkdir()
    shutil.copytree(tiny_additive, shipped / "en-fr-additive")
    shutil.copytree(tiny_transformer, shipped / "en-fr-transformer")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(shipped))
    monkeypatch.setenv("S2S_NEIGHBOURS_DIR", str(tmp_path / "indexes"))
    monkeypatch.setenv("S2S_HUB_MODELS", str(hub_models["marian"]))
    monkeypatch.setattr(nb.build, "SAMPLE", corpus)           # the shipped models' sample, small here
    assert fetch.main(["--neighbours", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["model"]: r for r in out["neighbours"]}
    assert [r["ok"] for r in out["models"]] == [True]
    for name in ("en-fr-additive", "en-fr-transformer"):
        row = rows[str(shipped / name)]
        assert row["status"] == "built" and row["pairs"] == 150 and row["mb"] > 0
        tr = load_translator(shipped / name)
        assert nb.load_index(tr).where == tmp_path / "indexes" / tr.name == nb.index_dir(tr)   # where the page looks
    hub = rows[str(hub_models["marian"])]
    assert hub["status"] == "skipped" and "--corpus" in hub["error"]
    # again: the indexes are kept, not rebuilt; with a corpus the hub model's is built
    import hub_models as hm
    pairs = write_tsv(list(zip(hm.EN, hm.FR)), tmp_path / "hub.tsv")
    assert fetch.main(["--neighbours", "--corpus", str(pairs)]) == 0
    text = capsys.readouterr().out
    assert text.count("neighbours index ready") == 2 and text.count("neighbours index built") == 1
    assert "SKIPPED" not in text and "FAILED" not in text


def test_fetch_corpus_needs_neighbours(monkeypatch, capsys):
    from s2s import fetch
    monkeypatch.setenv("S2S_HUB_MODELS", "")
    with pytest.raises(SystemExit) as e:
        fetch.main(["--corpus", "x.tsv"])
    assert e.value.code == 2 and "--corpus is for --neighbours" in capsys.readouterr().err


def test_storage_bench_prints_each_ways_agreement_with_the_exact_search(tiny_additive):
    """tools/bench_neighbours_storage.py, the command behind docs/neighbours.md's storage table:
    one JSON object, the fp32 way agreeing with itself exactly and every way's size."""
    r = subprocess.run([sys.executable, "tools/bench_neighbours_storage.py", "--model", str(tiny_additive),
                        "--pairs", "60", "--queries", "6", "--own", "10", "--fewer", "30", "--pca", "8"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ways = out["ways"]
    assert set(ways) == {"fp32", "fp16", "int8", "pca8_fp16", "pca8_int8", "fp16_first_30"}
    assert all(ways["fp32"][m] == 1.0 for m in ("sentence_overlap_at_k", "step_overlap_at_k", "step_top1",
                                                 "own_state_top1"))
    assert ways["int8"]["safetensors_mb"] < ways["fp16"]["safetensors_mb"] < ways["fp32"]["safetensors_mb"]
    assert all(0 <= w["step_overlap_at_k"] <= 1 for w in ways.values()) and out["queries"] == 6


# ------------------------------------------------------------------ the map's words (issue #62, 12)

def test_map_words_never_overlap_nor_leave_the_plot_and_the_ringed_step_keeps_its_word():
    """A crowded map: eight steps close together, the chosen step at the right edge. Every word
    placed is clear of every other and of the read markers, inside the plot area; the ringed
    step's word is on the ring's trace (plotly sets it off by the ring's size) and placed first;
    what did not fit is counted (meta labels) for the page's caption."""
    import html

    from s2s.figures.neighbours import CHAR_EM, LINE_EM, PATH_PX, Box, neighbours_map, place_labels, text_box
    rng = np.random.default_rng(0)
    path = np.c_[np.linspace(-0.2, 1.0, 8), rng.normal(0, 0.05, 8)]
    points = np.r_[path[:5] + 0.01, rng.normal(0, 0.3, (10, 2))]
    proj = nb.Projection(points, list(range(15)), [0] * 15, [f"▁w{i}" for i in range(15)], path, np.array([.5, .2]))
    tokens = ["▁Elle", "▁a", "▁un", "▁gros", "▁chien", "▁noir", "▁.", "</s>"]
    for font_px, width in ((14, 352), (18, 481)):
        fig = neighbours_map(proj, tokens, highlight=7, chosen_rows=[0, 1, 2], width=width, font_px=font_px)
        drawn, wanted = fig.layout.meta["labels"]
        assert 0 < drawn <= wanted == 1 + 3 + 7          # the ring's word, 3 chosen neighbours' words, 7 steps'
        ring = fig.data[3]
        assert list(ring.text) == ["&lt;/s&gt;"] and ring.textposition   # drawn, on the ring's own trace
        assert fig.data[2].text[7] == ""                                # not a second time on the path
        pw, ph = fig.layout.meta["plot_px"]
        (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
        assert (x1 - x0) / pw == pytest.approx((y1 - y0) / ph)          # one scale on both axes
        boxes = []
        for trace, size in ((fig.data[1], 11), (fig.data[2], PATH_PX), (ring, 23)):
            sides = trace.textposition if isinstance(trace.textposition, tuple) else [trace.textposition]
            for x, y, word, side in zip(trace.x, trace.y, trace.text, sides):
                if word:
                    px, py = (x - x0) / (x1 - x0) * pw, (y1 - y) / (y1 - y0) * ph
                    boxes.append(text_box(px, py, size / 2, side, CHAR_EM * font_px * len(html.unescape(word)) + 2,
                                          LINE_EM * font_px + 2))
        assert len(boxes) == drawn
        assert all(b.inside(Box(0, 0, pw, ph)) for b in boxes)
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    # the placer on its own: a word with no side left is not drawn (None), never drawn over another
    sides = place_labels(np.array([[50, 50]] * 10), ["word"] * 10, [4] * 10, Box(0, 0, 100, 100))
    placed = [s for s in sides if s]
    assert sides[0] == "top center" and None in sides and len(set(placed)) == len(placed)
