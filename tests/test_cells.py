import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from s2s import cells, evaluate, train_charlm
from s2s.cells import (
    FEATURES,
    correlations,
    encoder_trace,
    gate_saturation,
    indentation,
    inside_comment,
    inside_quotes,
    memory_resets,
    position_in_line,
    rank_cells,
    regex_feature,
)
from s2s.charlm import CharLM, CharLMConfig, bits_per_char, sample_text
from s2s.checkpoint import CheckpointError, load_charlm, load_translator
from s2s.lstm import LayerTrace
from s2s.text import InputError

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def bits(a) -> str:
    return "".join(str(int(x)) for x in a)


def test_features_mark_the_right_characters():
    assert bits(inside_quotes('a "b c" d "e')) == "001111100011"
    code = 'int f() {\n\t/* { */ if (a) { // }\n\t\treturn "}";\n\t}\n}\n'
    depth = FEATURES["brace_depth"].values(code)
    assert depth.max() == 2 and depth[-1] == 0            # braces in comments and strings don't count
    assert depth[code.index("return")] == 2
    comment = inside_comment(code)
    assert comment[code.index("/*")] == 1 and comment[code.index("if")] == 0 and comment[code.index("// }") + 3] == 1
    assert indentation(code)[code.index("return")] == 2
    assert list(position_in_line("ab\ncd")) == [0, 1, 2, 0, 1]
    assert bits(FEATURES["paren_depth"].values("f(a(b))c")) == "01122210"
    assert bits(regex_feature(r"\d+")("ab 123 c4")) == "000111001"


def test_a_bad_regex_gets_a_message():
    with pytest.raises(InputError, match="not a valid regular expression"):
        regex_feature("(unclosed")
    with pytest.raises(InputError, match="200"):
        regex_feature("a" * 201)


def test_ranking_finds_a_planted_cell():
    rng = np.random.default_rng(0)
    text = 'say "hello there" and "bye" now ' * 5
    feature = inside_quotes(text)
    acts = rng.normal(size=(len(text), 6)) * 0.3
    acts[:, 4] = np.arctanh(0.9 * (2 * feature - 1))       # tanh(c) of cell 4 is +-0.9: the quote cell
    t = torch.tensor(acts, dtype=torch.float32)
    trace = LayerTrace(cell=t, hidden=t, input_gate=t.sigmoid(), forget_gate=t.sigmoid(), candidate=t.tanh(),
                       output_gate=t.sigmoid())
    best = rank_cells([trace, trace], feature, top=3, layer=1)
    assert (best[0].layer, best[0].cell) == (1, 4) and best[0].r == pytest.approx(1.0)
    assert correlations(np.ones((5, 2)), np.arange(5.0)).tolist() == [0.0, 0.0]   # constant: r = 0, not NaN
    sat = gate_saturation(trace)
    assert set(sat) == {"input_gate", "forget_gate", "output_gate"}
    assert all(0 <= v.min() and v.max() <= 1 for g in sat.values() for v in g.values())


def test_trained_char_model_traces_evaluates_and_samples(tiny_charlm, code_text_file):
    lm = load_charlm(tiny_charlm)
    text = code_text_file.read_text()[-3000:]
    assert bits_per_char(lm.model, text) < math.log2(lm.model.cfg.vocab_size)   # learned something
    traces = lm.model.trace(text[:500])
    assert len(traces) == 2 and traces[0].cell.shape == (500, 32)
    # the trace reproduces the fused LSTM it was read from
    with torch.no_grad():
        out, _ = lm.model.rnn(lm.model.embed(lm.model.encode(text[:500]))[None])
    assert torch.allclose(traces[-1].hidden, out[0], atol=1e-5)
    metrics = lm.metrics
    assert metrics["test"]["bits_per_char"] > 0 and set(metrics["cells"]) == set(FEATURES)
    s = sample_text(lm.model, "int ", length=80, temperature=0.8, seed=1)
    assert len(s) == 80 and s == sample_text(lm.model, "int ", length=80, temperature=0.8, seed=1)
    assert "\ufffd" in lm.model.shown("a😀b")                 # unknown characters are shown as such


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_one_character_step_is_the_module_on_one_character(cell):
    """CharLM.step (the cells called one by one, for sampling) gives the logits and the
    state of the stacked nn.LSTM / nn.GRU / nn.RNN run on that one character."""
    torch.manual_seed(0)
    model = CharLM(CharLMConfig(chars="abcdefgh{}\n ", emb_dim=8, hidden=16, layers=3, cell=cell)).eval()
    with torch.no_grad():
        _, state = model(model.encode("abc{de")[None])
        for state_in in (None, state):
            want, want_state = model(torch.tensor([[4]]), state_in)
            got, got_state = model.step(4, state_in)
            assert torch.allclose(got, want[:, -1], atol=1e-6)
            for a, b in zip(got_state if cell == "lstm" else [got_state],
                            want_state if cell == "lstm" else [want_state]):
                assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def test_training_resumes(tiny_charlm, code_text_file, tiny_root, capsys):
    work = tiny_root / "work-charlm"
    state = json.loads((work / "state.json").read_text())
    assert state["step"] == 150
    rc = train_charlm.main(["--data", str(code_text_file), "--out", str(tiny_root / "charlm-resumed"),
                            "--work", str(work),
                            "--hidden", "32", "--layers", "2", "--emb-dim", "16", "--batch", "16", "--seq", "64",
                            "--steps", "160", "--eval-every", "50"])
    assert rc == 0
    assert "resuming" in capsys.readouterr().err
    assert json.loads((work / "state.json").read_text())["step"] == 160


def test_metrics_hold_the_papers_figures_for_its_corpora(code_text_file, tmp_path):
    corpus = tmp_path / "linux-kernel"
    corpus.mkdir()
    (corpus / "input.txt").write_text(code_text_file.read_text())
    rc = train_charlm.main(["--data", str(corpus / "input.txt"), "--out", str(tmp_path / "lm"),
                            "--work", str(tmp_path / "w"),
                            "--hidden", "8", "--layers", "1", "--emb-dim", "4", "--batch", "4", "--seq", "16",
                            "--steps", "5", "--eval-every", "5"])
    assert rc == 0
    metrics = json.loads((tmp_path / "lm" / "metrics.json").read_text())
    paper = metrics["paper"]
    assert paper["best_rnn_nats"] == 0.84 and paper["best_rnn_bits_per_char"] == round(0.84 / math.log(2), 3)
    assert metrics["train"]["data"] == "linux-kernel/input.txt"
    assert train_charlm.paper_figures("some-other-text") is None
    assert metrics["test"]["unknown_chars"] == 0 and metrics["test_known_lines"]["bits_per_char"] > 0


def test_known_lines_drops_lines_with_unseen_characters():
    text = "int x;\nsmile (\u30ce\ufe4f\u30ce)\n\tx = 1;\n"
    assert train_charlm.known_lines(text, "intx;=1 \t") == "int x;\n\tx = 1;\n"


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, input=stdin,
                          timeout=300)


def test_cells_cli_prints_every_layer(tiny_charlm, tmp_path):
    f = tmp_path / "t.c"
    f.write_text('int main() {\n\tprintk("hi");\n}\n')
    r = run_cli("s2s.cells", "--model", str(tiny_charlm), "--text-file", str(f), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["text"] == f.read_text()
    assert len(out["layers"]) == 2
    for layer in out["layers"]:
        assert set(layer) == {"cell", "hidden", "input_gate", "forget_gate", "output_gate"}
        assert len(layer["cell"]) == len(out["text"]) and len(layer["cell"][0]) == 32
    r = run_cli("s2s.cells", "--model", str(tiny_charlm), "--text-file", str(f))
    assert r.returncode == 0 and "brace depth" in r.stdout


@pytest.mark.parametrize("content", ["", "\x00\x00", "x" * 30_000])
def test_cells_cli_refuses_bad_text(tiny_charlm, tmp_path, content):
    f = tmp_path / "bad.txt"
    f.write_text(content)
    r = run_cli("s2s.cells", "--model", str(tiny_charlm), "--text-file", str(f), "--json")
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr


def test_evaluate_text_file_gives_bits_per_char(tiny_charlm, code_text_file, capsys):
    assert evaluate.main(["--model", str(tiny_charlm), "--text-file", str(code_text_file), "--limit", "5000",
                          "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 < out["bits_per_char"] < 7 and out["chars"] == 5000


def test_loaders_refuse_the_other_kind(tiny_charlm, tiny_additive):
    with pytest.raises(CheckpointError, match="not a translation model"):
        load_translator(tiny_charlm)
    with pytest.raises(CheckpointError, match="not a character-level"):
        load_charlm(tiny_additive)
    assert cells.main(["--model", str(tiny_additive), "--text-file", __file__]) == 2


def test_encoder_trace_equals_the_encoder_states(tiny_additive):
    tr = load_translator(tiny_additive)
    ids = tr.tokenizer.encode("a b c d") + [3]
    with torch.no_grad():
        memory, _ = tr.model.encode(torch.tensor([ids]), torch.tensor([len(ids)]))
    fwd, bwd = encoder_trace(tr, ids)
    H = tr.model.cfg.hidden // 2
    assert torch.allclose(fwd.hidden, memory.states[0, :, :H], atol=1e-5)
    assert torch.allclose(bwd.hidden, memory.states[0, :, H:], atol=1e-5)


def test_memory_resets_finds_the_step_where_both_gates_close():
    """A layer that carries its memory for five steps and wipes it at the sixth (f, i ~ 0):
    the step is found with its gate means; a layer that never wipes has none."""
    T, H = 6, 8
    forget, inp = torch.full((T, H), 0.9), torch.full((T, H), 0.5)
    forget[5], inp[5] = 0.05, 0.02
    g = torch.full((T, H), 0.8)
    c, cell = torch.zeros(H), []
    for t in range(T):                       # c_t = f_t * c_(t-1) + i_t * g_t
        c = forget[t] * c + inp[t] * g[t]
        cell.append(c)
    cell = torch.stack(cell)
    trace = LayerTrace(cell=cell, hidden=cell.tanh(), input_gate=inp, forget_gate=forget, candidate=g,
                       output_gate=torch.ones(T, H))
    [reset] = memory_resets(trace)
    assert reset.step == 5 and reset.forget == pytest.approx(0.05) and reset.input == pytest.approx(0.02)
    assert reset.memory < 0.1
    forget[5], inp[5] = 0.9, 0.5
    steady = LayerTrace(cell=cell.clamp(min=0.4), hidden=cell, input_gate=inp, forget_gate=forget, candidate=g,
                        output_gate=torch.ones(T, H))
    assert memory_resets(steady) == []


def test_a_runaway_regex_is_stopped_with_a_message():
    with pytest.raises(InputError, match="took longer"):
        regex_feature(r"(a|aa)+c")("a" * 5000)


def test_training_on_too_short_a_text_is_a_message(tmp_path, capsys):
    f = tmp_path / "short.txt"
    f.write_text("int x;\n" * 20)
    assert train_charlm.main(["--data", str(f), "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w")]) == 2
    assert "too short" in capsys.readouterr().err


def test_reevaluate_measures_a_changed_corpus_and_keeps_the_weights(tiny_charlm, code_text_file, tmp_path):
    """A corpus that lost its last lines: --reevaluate measures the checkpoint on the new
    held-out parts and rewrites only metrics.json."""
    import shutil
    ckpt = tmp_path / "lm"
    shutil.copytree(tiny_charlm, ckpt)
    weights = (ckpt / "model.safetensors").read_bytes()
    old = json.loads((ckpt / "metrics.json").read_text())
    shorter = tmp_path / "linux-kernel" / "input.txt"
    shorter.parent.mkdir()
    text = code_text_file.read_text(encoding="utf-8")
    shorter.write_text(text[: len(text) * 9 // 10], encoding="utf-8")
    assert train_charlm.main(["--data", str(shorter), "--out", str(ckpt), "--reevaluate"]) == 0
    new = json.loads((ckpt / "metrics.json").read_text())
    assert (ckpt / "model.safetensors").read_bytes() == weights
    _, valid, test = train_charlm.split_text(shorter.read_text(encoding="utf-8"))
    assert new["test"]["chars"] == len(test) != old["test"]["chars"] and new["valid"]["chars"] == len(valid)
    assert new["curve"] == old["curve"] and new["reevaluated"]["chars"] == len(valid) + len(test)
    assert train_charlm.main(["--data", str(shorter), "--out", str(tmp_path / "missing"), "--reevaluate"]) == 2


def test_fixed_train_part_trains_on_an_earlier_copys_characters_and_validates_on_the_rest():
    from s2s.train_charlm import fixed_train_part, split_text
    text = "".join(chr(97 + i % 26) for i in range(100_000))
    train, valid, test = split_text(text)
    longer_train, valid2, err = fixed_train_part(text, valid, test, 91_000)      # reaches 1,000 into validation
    assert err is None and longer_train == text[:91_000]
    assert valid2 == text[91_000:95_000] and len(valid2) + len(longer_train) + len(test) == len(text)
    shorter, valid3, err = fixed_train_part(text, valid, test, 80_000)           # stops early: validation unchanged
    assert err is None and shorter == text[:80_000] and valid3 == valid
    for bad in (0, 94_500, 200_000):
        assert fixed_train_part(text, valid, test, bad)[2] is not None


def test_train_chars_past_the_test_part_is_refused(code_text_file, tmp_path, capsys):
    from s2s import train_charlm
    rc = train_charlm.main(["--data", str(code_text_file), "--out", str(tmp_path / "x"), "--train-chars", "99999999"])
    assert rc == 2 and "--train-chars must be between 1 and" in capsys.readouterr().err


def test_state_heatmap_text_is_escaped_once_and_keeps_quotes():
    """Plotly reads chart text as HTML: < and & are escaped, but a quote escaped as &quot; would show
    as those six characters in the title (the decoder's title holds the model's French)."""
    import numpy as np

    from s2s.figures import saturation_scatter, state_heatmap
    fig = state_heatmap(["a", "b"], np.zeros((3, 2)), 'decoder (C\'est "toy" & <b>)', value_name='"c"',
                        x_title="piece 'x'")
    assert fig.layout.title.text == "decoder (C'est \"toy\" &amp; &lt;b&gt;)"
    assert fig.layout.xaxis.title.text == "piece 'x'" and fig.data[0].colorbar.title.text == '"c"'
    sat = {"forget_gate": {"low": [0.1], "high": [0.2]}}
    assert saturation_scatter(sat, 'gates of "x"').layout.title.text == 'gates of "x"'
