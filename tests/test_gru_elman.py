"""The GRU and Elman tracers equal PyTorch's fused layers, and the character model takes all three cells."""
import pytest
import torch

from s2s.cells import rank_cells, signal_of
from s2s.charlm import CharLM, CharLMConfig
from s2s.elman import ElmanWeights, elman_step, run_elman_layer, trace_elman
from s2s.gru import GRUWeights, gru_step, trace_gru


def _saturating(module):
    with torch.no_grad():   # larger weights than the default init, so gates saturate as in trained models
        for p in module.parameters():
            p.mul_(4)
    return module.eval()


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_gru_trace_equals_the_fused_gru(layers):
    torch.manual_seed(layers)
    gru = _saturating(torch.nn.GRU(12, 16, num_layers=layers))
    xs = torch.randn(300, 12)
    with torch.no_grad():
        out, h_n = gru(xs.unsqueeze(1))
    traces = trace_gru(gru, xs)
    assert len(traces) == layers
    assert torch.allclose(traces[-1].hidden, out[:, 0], atol=1e-5)
    for layer, tr in enumerate(traces):
        assert torch.allclose(tr.hidden[-1], h_n[layer, 0], atol=1e-5)
        for gate in (tr.update_gate, tr.reset_gate):
            assert gate.shape == (300, 16) and gate.min() >= 0 and gate.max() <= 1
        # the lecture's equation holds at every step: h_t = (1 - z) h_{t-1} + z h~
        h_prev = torch.cat([torch.zeros(1, 16), tr.hidden[:-1]])
        assert torch.allclose(tr.hidden, (1 - tr.update_gate) * h_prev + tr.update_gate * tr.candidate, atol=1e-5)


def test_gru_update_gate_is_the_lectures_not_pytorchs():
    """z near 0 must keep the state: with a huge PyTorch z' bias (z' = 1 keeps h), the lecture's z is 0."""
    gru = torch.nn.GRU(3, 4)
    with torch.no_grad():
        gru.bias_hh_l0[4:8] = 50.0
    tr = trace_gru(gru, torch.randn(10, 3))[0]
    assert float(tr.update_gate.max()) < 1e-6
    assert float(tr.hidden.abs().max()) < 1e-6      # never leaves the zero start state


def test_gru_step_equals_gru_cell():
    torch.manual_seed(1)
    cell = torch.nn.GRUCell(7, 9)
    x, h = torch.randn(4, 7), torch.randn(4, 9)
    with torch.no_grad():
        ref = cell(x, h)
    w = GRUWeights(cell.weight_ih.detach(), cell.weight_hh.detach(), cell.bias_ih.detach(), cell.bias_hh.detach())
    assert torch.allclose(gru_step(x, h, w)[0], ref, atol=1e-6)


@pytest.mark.parametrize("layers", [1, 2])
def test_elman_trace_equals_the_fused_rnn(layers):
    torch.manual_seed(layers)
    rnn = _saturating(torch.nn.RNN(12, 16, num_layers=layers))
    xs = torch.randn(300, 12)
    with torch.no_grad():
        out, h_n = rnn(xs.unsqueeze(1))
    traces = trace_elman(rnn, xs)
    inp = xs
    for layer, tr in enumerate(traces):    # each layer equals the fused kernel on the same input
        fused = run_elman_layer(ElmanWeights.of_layer(rnn, layer), inp)
        assert torch.allclose(tr.hidden, fused, atol=1e-5)
        assert torch.allclose(tr.hidden, tr.preactivation.tanh(), atol=1e-6)
        inp = fused
    # the whole stack: PyTorch's multi-layer kernel sums in another order, and these saturated
    # weights are chaotic, so a 1e-7 rounding difference can grow to ~1e-5 over 300 steps
    assert torch.allclose(traces[-1].hidden, out[:, 0], atol=1e-4)
    assert torch.allclose(traces[-1].hidden[-1], h_n[-1, 0], atol=1e-4)


def test_elman_step_equals_rnn_cell_and_refuses_relu():
    torch.manual_seed(2)
    cell = torch.nn.RNN(5, 6)
    x, h = torch.randn(3, 5), torch.randn(3, 6)
    with torch.no_grad():
        ref = cell(x.unsqueeze(0), h.unsqueeze(0))[0][0]
    assert torch.allclose(elman_step(x, h, ElmanWeights.of_layer(cell))[0], ref, atol=1e-6)
    with pytest.raises(ValueError, match="tanh"):
        ElmanWeights.of_layer(torch.nn.RNN(5, 6, nonlinearity="relu"))


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_charlm_traces_ranks_and_colours_every_cell(cell):
    torch.manual_seed(0)
    model = CharLM(CharLMConfig(chars='ab "', hidden=8, layers=2, cell=cell)).eval()
    text = 'ab "ba" ab "a"'
    traces = model.trace(text)
    assert len(traces) == 2 and all(t.hidden.shape == (len(text), 8) for t in traces)
    with torch.no_grad():   # the traced top layer is what the model's fused layers compute
        out = model.rnn(model.embed(model.encode(text))[None])[0][0]
    assert torch.allclose(traces[-1].hidden, out, atol=1e-5)
    for signal in traces[0].SIGNALS:
        assert signal_of(traces[0], signal).shape == (len(text), 8)
    feature = torch.tensor([float(c == '"') for c in text]).numpy()
    ranked = rank_cells(traces, feature, top=5)
    assert len(ranked) == 5 and abs(ranked[0].r) >= abs(ranked[-1].r)


def test_charlm_refuses_an_unknown_cell():
    with pytest.raises(ValueError, match="cell must be one of"):
        CharLMConfig(chars="ab", cell="transformer")
