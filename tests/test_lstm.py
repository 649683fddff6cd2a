import pytest
import torch

from s2s.lstm import LSTMWeights, lstm_step, trace_layer, trace_lstm
from s2s.model import ModelConfig, Seq2Seq


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_trace_equals_the_fused_lstm(layers):
    torch.manual_seed(layers)
    lstm = torch.nn.LSTM(12, 16, num_layers=layers).eval()
    with torch.no_grad():   # larger weights than the default init, so gates saturate as in trained models
        for p in lstm.parameters():
            p.mul_(4)
    xs = torch.randn(300, 12)
    with torch.no_grad():
        out, (h_n, c_n) = lstm(xs.unsqueeze(1))
    traces = trace_lstm(lstm, xs)
    assert len(traces) == layers
    assert torch.allclose(traces[-1].hidden, out[:, 0], atol=1e-5)
    for layer, tr in enumerate(traces):
        assert torch.allclose(tr.hidden[-1], h_n[layer, 0], atol=1e-5)
        assert torch.allclose(tr.cell[-1], c_n[layer, 0], atol=1e-5)
        for gate in (tr.input_gate, tr.forget_gate, tr.output_gate):
            assert gate.shape == (300, 16) and gate.min() >= 0 and gate.max() <= 1
        assert tr.candidate.abs().max() <= 1
        # the equations hold at every step
        c_prev = torch.cat([torch.zeros(1, 16), tr.cell[:-1]])
        assert torch.allclose(tr.cell, tr.forget_gate * c_prev + tr.input_gate * tr.candidate, atol=1e-5)


def test_trace_of_a_bidirectional_encoder_equals_its_states():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 10, bidirectional=True, batch_first=True).eval()
    xs = torch.randn(25, 8)
    with torch.no_grad():
        out, (h_n, c_n) = lstm(xs.unsqueeze(0))
    fwd = trace_layer(LSTMWeights.of_layer(lstm, 0), xs)
    bwd = trace_layer(LSTMWeights.of_layer(lstm, 0, reverse=True), xs, reverse=True)
    assert torch.allclose(fwd.hidden, out[0, :, :10], atol=1e-5)
    assert torch.allclose(bwd.hidden, out[0, :, 10:], atol=1e-5)
    assert torch.allclose(bwd.cell[0], c_n[1, 0], atol=1e-5)   # the backward direction ends at t = 1


def test_lstm_step_equals_lstm_cell():
    torch.manual_seed(1)
    cell = torch.nn.LSTMCell(7, 9)
    x, h, c = torch.randn(4, 7), torch.randn(4, 9), torch.randn(4, 9)
    with torch.no_grad():
        h_ref, c_ref = cell(x, (h, c))
    st = lstm_step(x, h, c, LSTMWeights.of_cell(cell))
    assert torch.allclose(st.hidden, h_ref, atol=1e-6) and torch.allclose(st.cell, c_ref, atol=1e-6)


def test_empty_sequence_is_refused():
    with pytest.raises(ValueError, match="empty"):
        trace_lstm(torch.nn.LSTM(3, 4), torch.zeros(0, 3))


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("attention", ["none", "dot", "general", "additive", "scaled-dot"])
def test_decode_step_equals_the_training_step(cell, attention):
    torch.manual_seed(2)
    model = Seq2Seq(ModelConfig(vocab_size=30, emb_dim=12, hidden=16, attn_dim=8, cell=cell,
                                attention=attention, dropout=0.3)).eval()
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])
    with torch.no_grad():
        memory, state = model.encode(src, torch.tensor([5, 3]))
        feed = model.initial_feed(2)
        y = torch.tensor([2, 2])
        for _ in range(4):
            ref = model.step(y, state, feed, memory)
            fast = model.decode_step(y, state, feed, memory)
            assert torch.allclose(fast.logits, ref.logits, atol=1e-5)
            assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(fast.state, ref.state))
            if attention != "none":
                assert torch.allclose(fast.alpha, ref.alpha, atol=1e-6)
                assert float(fast.alpha[1, 3:].sum()) == 0.0    # padding gets no weight
            state, feed, y = ref.state, ref.feed, ref.logits.argmax(-1)
    # training again drops the transposed copies, so updated weights are never decoded stale
    model.train()
    assert model._decode_cache is None
