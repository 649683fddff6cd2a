"""Gradient flow: the library's g(k) equals finite differences; the untrained demo; the CLI contract."""
import json
import math

import pytest
import torch

from s2s import gradients
from s2s.charlm import CharLM, CharLMConfig
from s2s.checkpoint import save_checkpoint
from s2s.gradients import gradient_flow, untrained_flow
from s2s.text import InputError

TEXT = 'the "cat" sat on the mat; the "dog" did not.\n' * 2


def tiny(cell: str, layers: int = 2) -> CharLM:
    torch.manual_seed(3)
    model = CharLM(CharLMConfig(chars="".join(sorted(set(TEXT))), emb_dim=5, hidden=6, layers=layers, cell=cell))
    return model.double().eval()


def finite_difference_norm(model: CharLM, text: str, t: int, k: int, eps: float = 1e-6) -> float:
    """||d log p(x_{t+1} | x_<=t) / d h_{t-k}|| for the top layer, by central differences:
    run to t - k, nudge the top layer's h, run on to t."""
    ids = model.encode(text)
    emb = model.embed(ids)[None]
    top = model.cfg.layers - 1

    def log_p(i: int, sign: float) -> float:
        with torch.no_grad():
            out, state = model.rnn(emb[:, : t - k + 1])
            if k == 0:                       # h_t itself: it feeds the output directly
                h = out[0, -1].clone()
                h[i] += sign * eps
            else:
                hs = state[0] if isinstance(state, tuple) else state
                hs = hs.clone()
                hs[top, 0, i] += sign * eps
                state = (hs, state[1]) if isinstance(state, tuple) else hs
                out, _ = model.rnn(emb[:, t - k + 1: t + 1], state)
                h = out[0, -1]
            return float(torch.log_softmax(model.out(h), -1)[ids[t + 1]])

    grad = [(log_p(i, 1) - log_p(i, -1)) / (2 * eps) for i in range(model.cfg.hidden)]
    return float(torch.tensor(grad).norm())


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("layers", [1, 2])
def test_gradient_flow_equals_finite_differences(cell, layers):
    model = tiny(cell, layers)
    K = 6
    flow = gradient_flow(model, TEXT, max_distance=K, positions=2)
    assert flow.positions == 2 and flow.distances == list(range(K + 1)) and flow.cell == cell
    ends = [K, len(TEXT) - 2]            # the first window starts at the text's start, the second mid-text
    for k in range(K + 1):
        expected = sum(finite_difference_norm(model, TEXT, t, k) for t in ends) / 2
        assert flow.grad_norm[k] == pytest.approx(expected, rel=1e-5, abs=1e-9), (cell, k)


def test_lstm_forget_product_is_the_product_of_its_forget_gates():
    model = tiny("lstm")
    flow = gradient_flow(model, TEXT, max_distance=4, positions=1)     # one end: t = 4
    f = model.trace(TEXT)[-1].forget_gate
    assert flow.forget_product.shape == (5, 6)
    assert torch.allclose(torch.tensor(flow.forget_product[0]), torch.ones(6, dtype=f.dtype))
    assert torch.allclose(torch.tensor(flow.forget_product[3]), f[2] * f[3] * f[4], atol=1e-9)
    assert flow.half_lives().shape == (6,)
    assert gradient_flow(tiny("gru"), TEXT, 4, 1).forget_product is None


def test_gradient_flow_refuses_bad_settings():
    model = tiny("rnn")
    with pytest.raises(InputError, match="at least"):
        gradient_flow(model, TEXT[:10], max_distance=20)
    with pytest.raises(InputError, match="between 1 and 500"):
        gradient_flow(model, TEXT, max_distance=0)


def test_untrained_rnn_vanishes_below_radius_one_and_explodes_above():
    small = untrained_flow("rnn", radius=0.5, length=60)
    large = untrained_flow("rnn", radius=2.0, length=60)
    assert small.grad_norm[0] == pytest.approx(1.0)            # d(u.h_T)/dh_T = u, a unit vector
    assert small.grad_norm[50] < 1e-10
    assert large.grad_norm[50] > 10
    assert small.keep_product is None


def test_untrained_lstm_gradient_follows_its_forget_gates():
    open_gates = untrained_flow("lstm", radius=0.5, forget_bias=8.0, length=60)
    closed_gates = untrained_flow("lstm", radius=0.5, forget_bias=-3.0, length=60)
    assert open_gates.keep_product[50] > 0.9 and closed_gates.keep_product[50] < 1e-20
    assert open_gates.grad_norm[50] > 1e3 * closed_gates.grad_norm[50]
    gru = untrained_flow("gru", radius=0.5, forget_bias=8.0, length=60)
    assert gru.keep_product[50] > 0.9 and gru.grad_norm[50] > 0.1


def test_untrained_flow_refuses_out_of_range_settings():
    for kwargs in ({"radius": 0}, {"radius": 9}, {"hidden": 0}, {"length": 1}, {"forget_bias": 99}):
        with pytest.raises(InputError):
            untrained_flow("lstm", **kwargs)


@pytest.fixture(scope="module")
def gru_checkpoint(tmp_path_factory):
    return save_checkpoint(tiny("gru").float(), None, tmp_path_factory.mktemp("ck") / "tiny-gru", "tiny-gru",
                           "a tiny GRU")


def test_cli_prints_the_documented_object(gru_checkpoint, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text(TEXT)
    assert gradients.main(["--model", str(gru_checkpoint), "--text-file", str(text), "--max-distance", "10",
                           "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "tiny-gru" and out["cell"] == "gru"
    assert out["distances"] == list(range(11)) and len(out["grad_norm"]) == 11
    assert all(isinstance(g, float) and g >= 0 for g in out["grad_norm"]) and out["positions"] >= 1


def test_cli_json_keeps_a_tiny_gradient(gru_checkpoint, tmp_path, capsys, monkeypatch):
    """Six significant digits, not a fixed number of decimals: an RNN's g(200) near 1e-38 is printed, not 0."""
    text = tmp_path / "t.txt"
    text.write_text(TEXT)
    monkeypatch.setattr(gradients, "gradient_flow",
                        lambda *a, **k: gradients.GradientFlow("gru", [0, 1], [0.6377949, 3.3841234e-38], 4))
    assert gradients.main(["--model", str(gru_checkpoint), "--text-file", str(text), "--max-distance", "1",
                           "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["grad_norm"] == [0.637795, 3.38412e-38]


@pytest.mark.parametrize("make_args, message", [
    (lambda ck, f, tmp: ["--model", str(tmp / "nope"), "--text-file", str(f)], "does not exist"),
    (lambda ck, f, tmp: ["--model", str(ck), "--text-file", str(tmp / "missing.txt")], "cannot read"),
    (lambda ck, f, tmp: ["--model", str(ck), "--text-file", str(f), "--max-distance", "0"], "between 1 and 500"),
    (lambda ck, f, tmp: ["--model", str(ck), "--text-file", str(f), "--max-distance", "501"], "between 1 and 500"),
    (lambda ck, f, tmp: ["--model", str(ck), "--text-file", str(f), "--max-distance", "200"], "at least 202"),
])
def test_cli_bad_input_is_one_line_and_exit_2(gru_checkpoint, tmp_path, capsys, make_args, message):
    text = tmp_path / "t.txt"
    text.write_text(TEXT)
    assert gradients.main(make_args(gru_checkpoint, text, tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


def test_cli_refuses_a_translation_model(tiny_additive, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text(TEXT)
    assert gradients.main(["--model", str(tiny_additive), "--text-file", str(text)]) == 2
    assert "not a character-level language model" in capsys.readouterr().err


def test_a_gradient_that_underflows_is_marked_where_its_line_ends():
    """An exact 0 cannot be drawn on a log axis: a cross ends the line, its hover says where, a note why."""
    from s2s.figures import gradient_flow_figure
    from s2s.gradients import GradientFlow
    rnn = GradientFlow("rnn", [0, 1, 2, 3, 4], [1.0, 1e-10, 1e-30, 0.0, 0.0], 8)
    lstm = GradientFlow("lstm", [0, 1, 2, 3, 4], [1.0, 0.5, 0.4, 0.3, 0.2], 8)
    fig = gradient_flow_figure({"rnn": rnn, "lstm": lstm}, "t")
    crosses = [t for t in fig.data if t.mode == "markers"]
    assert len(crosses) == 1 and "from k = 3" in crosses[0].hovertemplate
    assert list(crosses[0].x) == [2] and list(crosses[0].y) == [pytest.approx(1e-30)]   # the last value drawn
    assert len(fig.layout.annotations) == 1 and "below float precision" in fig.layout.annotations[0].text
    assert list(fig.data[0].y) == [1.0, 1e-10, 1e-30, None, None]       # the zeros are a gap, not a dip


def test_the_live_demo_marks_lines_that_leave_the_float_range_and_only_those():
    """Untrained cells: an overflow (inf) ends its line with a cross and a note; lines in range get none."""
    from s2s.figures import untrained_flow_figure
    from s2s.gradients import UntrainedFlow
    rnn = UntrainedFlow("rnn", [0, 1, 2, 3], [1.0, 1e10, 1e30, math.inf], None)
    lstm = UntrainedFlow("lstm", [0, 1, 2, 3], [1.0, 0.9, 0.8, 0.7], [1.0, 0.9, 0.0, 0.0])
    fig = untrained_flow_figure([rnn, lstm], "t")
    crosses = [t for t in fig.data if t.mode == "markers"]
    assert [(list(c.x), list(c.y)) for c in crosses] == [([2], [1e30]), ([1], [0.9])]   # the RNN, then LSTM's prod f
    assert "∞ (past float range) from T − t = 3" in crosses[0].hovertemplate
    assert "0 (below float precision) from T − t = 2" in crosses[1].hovertemplate
    (note,) = fig.layout.annotations
    assert "0 or ∞" in note.text
    in_range = untrained_flow_figure([UntrainedFlow("gru", [0, 1, 2], [1.0, 0.9, 0.8], [1.0, 0.5, 0.25])], "t")
    assert in_range.layout.annotations == () and all(t.mode == "lines" for t in in_range.data)


def test_an_exploding_gradient_is_measured_where_float32_still_holds_it():
    """rho = 3 over 200 steps: the gradient's entries stay finite in float32 (about 1e25), so its
    norm must too; summing float32 squares overflowed to inf past about 1e19."""
    flow = untrained_flow("rnn", 3.0, 3.0, 64, 200)
    assert all(math.isfinite(g) for g in flow.grad_norm)
    assert flow.grad_norm[-1] > 1e20
