"""The Transformer (s2s/transformer.py): its attention, its incremental decoding, its fields
in the one decode API, its checkpoint and its training through `python -m s2s.train`."""
import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from torch import nn

from conftest import reversal_pairs, write_tsv
from s2s import train as train_cli
from s2s import translate as translate_cli
from s2s.checkpoint import CheckpointError, list_checkpoints, load_translator
from s2s.decode import attention_heads, attention_of, beam_search, forced, greedy, sample
from s2s.figures import head_of_trace, heads_grid
from s2s.tokenizer import BOS, EOS, PAD
from s2s.transformer import MultiHeadAttention, Transformer, TransformerConfig, sinusoidal_positions


def test_multi_head_attention_equals_torchs_own():
    """Our explicit per-head projections compute what nn.MultiheadAttention computes with the same weights."""
    torch.manual_seed(0)
    d, h = 24, 4
    ours = MultiHeadAttention(d, h, dropout=0.0).eval()
    ref = nn.MultiheadAttention(d, h, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        ref.out_proj.weight.copy_(ours.w_o.weight), ref.out_proj.bias.copy_(ours.w_o.bias)
    q, kv = torch.randn(2, 5, d), torch.randn(2, 7, d)
    pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    bias = torch.zeros(2, 7).masked_fill(pad, float("-inf"))[:, None, None, :]
    out, w = ours(q, kv, bias)
    out_ref, w_ref = ref(q, kv, kv, key_padding_mask=pad, average_attn_weights=False)
    assert torch.allclose(out, out_ref, atol=1e-5)
    assert torch.allclose(w, w_ref, atol=1e-6)
    assert w.shape == (2, h, 5, 7) and torch.allclose(w.sum(-1), torch.ones(2, h, 5))
    assert float(w[1, :, :, 4:].detach().abs().max()) == 0.0          # padding gets no weight


def test_sinusoidal_positions():
    pe = sinusoidal_positions(50, 16)
    assert pe.shape == (50, 16)
    assert torch.allclose(pe[:, 0], torch.sin(torch.arange(50.0)))      # i = 0: wavelength 2 pi
    assert torch.allclose(pe[:, 1], torch.cos(torch.arange(50.0)))
    assert torch.allclose(sinusoidal_positions(10, 16, start=40), pe[40:])   # what an incremental step uses


@pytest.mark.parametrize("copy", [False, True])
def test_incremental_decoding_equals_the_parallel_forward(copy):
    """Step by step with the key/value cache gives the teacher-forced forward's outputs, on a
    padded batch, and the future never leaks into the past (causal self-attention)."""
    torch.manual_seed(1)
    m = Transformer(TransformerConfig(60, d_model=32, heads=4, encoder_layers=2, decoder_layers=2, ffn=64,
                                      dropout=0.0, copy=copy)).eval()
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, PAD, PAD]])
    tgt = torch.tensor([[BOS, 11, 12, 13, 14], [BOS, 15, 16, PAD, PAD]])
    with torch.no_grad():
        logits, alpha = m(src, torch.tensor([5, 3]), tgt)
        memory, state = m.encode(src, torch.tensor([5, 3]))
        assert state[1].shape == (2, 2, 4, 0, 8)                  # (B, layers, heads, t = 0, d_k) empty cache
        feed = m.initial_feed(2)
        for j in range(5):
            st = m.decode_step(tgt[:, j], state, feed, memory)
            state = st.state
            assert state[1].shape == (2, 2, 4, j + 1, 8)          # one more cached position per step
            for b, n in ((0, 5), (1, 3)):
                if j < n:
                    assert torch.allclose(st.logits[b].log_softmax(-1), logits[b, j].log_softmax(-1), atol=1e-4)
                    assert torch.allclose(st.alpha[b], alpha[b, j], atol=1e-5)
            assert torch.allclose(st.alpha, st.cross_attention[:, -1].mean(1))    # alpha = last layer, head mean
            assert st.self_attention.shape == (2, 2, 4, j + 1)
        changed = tgt.clone()
        changed[0, 3] = 40                                       # a later token changes ...
        logits2, _ = m(src, torch.tensor([5, 3]), changed)
    assert torch.allclose(logits2[0, :3], logits[0, :3], atol=1e-5)   # ... nothing before it
    assert not torch.allclose(logits2[0, 3:], logits[0, 3:])


@pytest.mark.parametrize("name", ["transformer", "transformer-copy"])
def test_decoding_carries_every_layer_and_head(untrained_translators, name):
    tr = untrained_translators[name]
    L, H = tr.model.cfg.decoder_layers, tr.model.cfg.heads
    for d in (greedy(tr, "a b c d"), beam_search(tr, "a b c d", width=3), sample(tr, "a b c d", seed=2),
              forced(tr, "a b c d", "d c b a")):
        T, S = len(d.target_tokens), len(d.source_tokens)
        assert d.cross_attention.shape == (L, H, T, S)
        assert d.encoder_self_attention.shape == (tr.model.cfg.encoder_layers, H, S, S)
        assert d.decoder_self_attention.shape == (L, H, T, T)
        for a in (d.cross_attention, d.encoder_self_attention, d.decoder_self_attention):
            assert np.allclose(a.sum(-1), 1.0, atol=1e-5)
        assert np.allclose(np.triu(d.decoder_self_attention, 1), 0.0)      # no step saw its future
        assert np.allclose(d.attention, d.cross_attention[-1].mean(0), atol=1e-5)
        assert d.cells is None and d.states.shape == (T, tr.model.cfg.d_model)


def test_attention_heads_and_attention_of_name_their_axes(untrained_translators):
    """The pages' one door to a Transformer's attentions: each kind with the tokens on its
    axes, and the (target x source) matrix of any layer and head, or their mean."""
    d = greedy(untrained_translators["transformer"], "a b c d", max_len=6)
    L, H, T, S = d.cross_attention.shape
    x, y, w = attention_heads(d, "cross")
    assert (x, y) == (d.source_tokens, d.target_tokens) and w.shape == (L, H, T, S)
    x, y, w = attention_heads(d, "encoder")
    assert x == y == d.source_tokens and w.shape == (L, H, S, S)
    x, y, w = attention_heads(d, "decoder")       # step j reads <s>, y_1 .. y_(j-1): what it was fed
    assert x == ["<s>"] + d.target_tokens[:-1] and y == d.target_tokens and w.shape == (L, H, T, T)
    with pytest.raises(ValueError, match="unknown attention kind"):
        attention_heads(d, "sideways")
    assert attention_of(d) is d.attention
    assert np.allclose(attention_of(d, None, None), d.cross_attention[-1].mean(0), atol=1e-3)   # fp16 weights
    assert np.allclose(attention_of(d, 0, 2), d.cross_attention[0, 2])
    assert np.allclose(attention_of(d, 1, None), d.cross_attention[1].mean(0))
    assert np.allclose(attention_of(d, 0, None).sum(1), 1.0, atol=1e-5)     # a mean of distributions is one
    rnn = greedy(untrained_translators["additive"], "a b c", max_len=5)
    assert attention_heads(rnn, "cross") is None and attention_of(rnn, 0, 1) is rnn.attention


def test_heads_grid_draws_every_head_and_a_click_names_it():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(5), size=(3, 4, 6))          # (L, H, y, x): rows sum to 1
    fig = heads_grid(w, list("abcde"), list("uvwxyz"), "cross", selected=(2, 1))
    assert len(fig.data) == 2 * 3 * 4                       # a heatmap and its clickable markers per head
    for k in range(12):
        l, h = divmod(k, 4)
        assert np.allclose(fig.data[k].z, w[l, h])
        assert np.allclose(np.asarray(fig.data[12 + k].customdata), w[l, h].ravel())
        assert head_of_trace(k, 3, 4) == head_of_trace(12 + k, 3, 4) == (l, h)
    assert head_of_trace(24, 3, 4) is None and head_of_trace(-1, 3, 4) is None
    assert [s.line.color for s in fig.layout.shapes] == ["#d62728"]       # the selected head is framed
    assert fig.layout.shapes[0].xref == "x10 domain"                       # layer 3, head 2: subplot 10



@pytest.mark.parametrize("layers, heads", [(3, 4), (2, 16), (1, 1)])
def test_heads_grid_places_its_maps_as_make_subplots_does(layers, heads):
    """heads_grid builds its axes in one pass (issue #62): where plotly.subplots.make_subplots,
    with the same spacing and titles, would put every map and title."""
    from plotly.subplots import make_subplots
    rng = np.random.default_rng(1)
    fig = heads_grid(rng.dirichlet(np.ones(4), size=(layers, heads, 3)), list("abcd"), list("xyz"))
    ref = make_subplots(rows=layers, cols=heads, horizontal_spacing=0.02, vertical_spacing=0.04,
                        column_titles=[f"head {h + 1}" if heads <= 4 else f"H{h + 1}" for h in range(heads)],
                        row_titles=[f"layer {l + 1}" for l in range(layers)])
    for n in range(1, layers * heads + 1):
        for axis in ("xaxis", "yaxis"):
            name = axis + ("" if n == 1 else str(n))
            assert np.allclose(fig.layout[name].domain, ref.layout[name].domain), name
            assert fig.layout[name].anchor == ref.layout[name].anchor
    for mine, theirs in zip(fig.layout.annotations, ref.layout.annotations, strict=True):
        assert (mine.text, mine.textangle, mine.xanchor, mine.yanchor) == \
            (theirs.text, theirs.textangle, theirs.xanchor, theirs.yanchor)
        assert np.isclose(mine.x, theirs.x) and np.isclose(mine.y, theirs.y)
    for k in range(layers * heads):         # each map and its markers on their own axes
        n = "" if k == 0 else str(k + 1)
        assert (fig.data[k].xaxis, fig.data[k].yaxis) == (fig.data[layers * heads + k].xaxis,
                                                          fig.data[layers * heads + k].yaxis) == (f"x{n}", f"y{n}")

def test_recurrent_decodings_have_no_transformer_fields(untrained_translators):
    d = greedy(untrained_translators["additive"], "a b c")
    assert d.cross_attention is None and d.encoder_self_attention is None and d.decoder_self_attention is None
    assert "cross_attention" not in d.to_json()


def test_beam_search_reads_back_the_best_paths_attention(untrained_translators):
    """Beam search keeps each step's tensors and reads the best hypothesis's back along its
    path: they must equal forced decoding of that hypothesis."""
    tr = untrained_translators["transformer"]
    b = beam_search(tr, "j i h g f", width=4)
    f = forced(tr, "j i h g f", reference_ids=b.target_ids)
    assert np.allclose(b.cross_attention, f.cross_attention, atol=1e-5)
    assert np.allclose(b.decoder_self_attention, f.decoder_self_attention, atol=1e-5)
    assert b.log_prob == pytest.approx(f.log_prob, abs=1e-4)


def test_checkpoint_round_trip_and_registry(untrained_translators, tmp_path):
    tr = untrained_translators["transformer-copy"]
    again = load_translator(tr.path)
    assert isinstance(again.model, Transformer) and again.arch == "transformer" and again.model.cfg.copy
    assert greedy(again, "a b c").target_ids == greedy(tr, "a b c").target_ids
    info = {i.name: i for i in list_checkpoints(tr.path.parent)}
    assert info["transformer-copy"].arch == "transformer" and info["transformer-copy"].cell is None
    assert info["transformer-copy"].has_attention and info["transformer"].attention == "scaled-dot"
    assert info["additive"].arch == "rnn" and info["additive"].cell == "lstm"
    # a config whose arch nobody knows is a clear error, not a crash
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in ("model.safetensors", "spm.model"):
        (bad / f).write_bytes((tr.path / f).read_bytes())
    config = json.loads((tr.path / "config.json").read_text())
    config["model"]["arch"] = "mamba"
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="unknown arch 'mamba'"):
        load_translator(bad)


def test_dropout_sites_are_set_apart_and_old_configs_keep_theirs():
    """attention_dropout and ffn_dropout drop A and ReLU(W_1 x); set to 0 (the paper's recipe),
    only sub-layer outputs and embeddings are dropped. A config without them (written before
    they existed) trained with `dropout` at all three sites, and loads so."""
    old = TransformerConfig.from_dict({"vocab_size": 60, "d_model": 32, "heads": 4, "dropout": 0.1})
    assert (old.attention_dropout, old.ffn_dropout) == (0.1, 0.1)
    cfg = TransformerConfig(60, d_model=32, heads=4, encoder_layers=1, decoder_layers=1, ffn=64,
                            dropout=0.0, attention_dropout=0.0, ffn_dropout=0.5)
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
    m = Transformer(cfg).train()
    assert m.encoder[0].self_attn.drop.p == 0.0 and m.decoder[0].cross_attn.drop.p == 0.0
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[BOS, 11, 12]])
    torch.manual_seed(0)
    a, _ = m(src, torch.tensor([4]), tgt)
    b, _ = m(src, torch.tensor([4]), tgt)
    assert not torch.allclose(a, b)                     # the FFN's dropout is on in training ...
    m.decoder[0].ffn.drop.p = m.encoder[0].ffn.drop.p = 0.0
    a, _ = m(src, torch.tensor([4]), tgt)
    b, _ = m(src, torch.tensor([4]), tgt)
    assert torch.equal(a, b)                            # ... and the only dropout left


def test_config_is_checked():
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(10, d_model=30, heads=4)


def test_translate_json_prints_the_three_attentions(untrained_translators, capsys):
    tr = untrained_translators["transformer"]
    assert translate_cli.main(["--model", str(tr.path), "--json", "--", "a b c"]) == 0
    out = json.loads(capsys.readouterr().out)
    T, S = len(out["target_tokens"]), len(out["source_tokens"])
    L, H = tr.model.cfg.decoder_layers, tr.model.cfg.heads
    assert np.array(out["cross_attention"]).shape == (L, H, T, S)
    assert np.array(out["encoder_self_attention"]).shape == (L, H, S, S)
    assert np.array(out["decoder_self_attention"]).shape == (L, H, T, T)
    assert np.allclose(np.array(out["attention"]), np.array(out["cross_attention"])[-1].mean(0), atol=1e-4)


def test_a_tiny_transformer_learns_to_reverse(tiny_transformer):
    """`python -m s2s.train --arch transformer` trains, evaluates and ships a working model,
    with the training trace of the probe sentences like the recurrent models."""
    tr = load_translator(tiny_transformer)
    assert isinstance(tr.model, Transformer)
    metrics = json.loads((tiny_transformer / "metrics.json").read_text())
    assert metrics["test"]["test"]["bleu"] > 80     # 88.8 when written; a few long reversals still slip
    assert greedy(tr, "g f e d c b a").translation == "a b c d e f g"
    d = forced(tr, "a b c d e", "e d c b a")
    # reversal: the head-averaged cross-attention of each output letter peaks on its mirror letter
    assert [int(i) for i in d.attention[:5].argmax(1)] == [4, 3, 2, 1, 0]
    points = metrics["trace"]["points"]
    assert points[0]["step"] == 0 and points[-1]["step"] == 300 and points[-1]["probes"][0]["attention"]


def test_explain_attributes_a_transformer_declines_its_counterfactual_and_alignment_reads_it(untrained_translators):
    from s2s.alignment import word_attention
    from s2s.attributions import explain
    from s2s.counterfactual import counterfactual
    from s2s.text import InputError
    tr = untrained_translators["transformer"]
    e = explain(tr, "a b c")                 # attributions cover Transformers (one teacher-forced pass)
    assert e.attention.shape == e.attributions["leave_one_out"].shape
    with pytest.raises(InputError, match="Transformer"):
        counterfactual(tr, "a b c", 0, "uniform")
    w = word_attention(tr, ["a", "b", "c"], ["c", "b", "a"])      # its head-mean cross-attention, per word
    assert w.shape == (3, 3) and np.all(w.sum(1) <= 1.0 + 1e-6)


def test_bf16_autocast_on_the_cpu_trains_the_same_model_within_rounding(tmp_path):
    """--bf16 (train_transformer.sh uses it: matrix products ~2.8x faster on this CPU) changes
    the products' precision, not the model: the same steps give the same losses to within
    bf16 rounding, and the weights it ships are the usual fp16 checkpoint."""
    tsv = write_tsv(reversal_pairs(600, seed=5), tmp_path / "r.tsv")
    common = ["--data", str(tsv), "--split-dir", str(tmp_path / "split"), "--vocab", "40", "--arch", "transformer",
              "--hidden", "32", "--layers", "1", "--heads", "2", "--ffn", "64", "--dropout", "0",
              "--max-tokens", "300", "--eval-every", "5", "--valid-pairs", "50", "--test-pairs", "50",
              "--no-eval", "--trace-points", "1", "--steps", "10", "--threads", "1"]
    curves = {}
    for run, extra in (("fp32", []), ("bf16", ["--bf16"])):
        assert train_cli.main(common + ["--work", str(tmp_path / run), "--out", str(tmp_path / f"{run}-out")]
                              + extra) == 0
        metrics = json.loads((tmp_path / f"{run}-out" / "metrics.json").read_text())
        assert metrics["train"]["bf16"] is (run == "bf16")
        curves[run] = metrics["curves"]
    for a, b in zip(curves["fp32"], curves["bf16"]):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=0.03)
        assert a["valid_loss"] == pytest.approx(b["valid_loss"], rel=0.03)
    assert curves["fp32"][-1]["train_loss"] < curves["fp32"][0]["train_loss"]     # it learns at all
    with safe_open(tmp_path / "bf16-out" / "model.safetensors", "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    assert isinstance(load_translator(tmp_path / "bf16-out").model, Transformer)


@pytest.mark.parametrize("name", ["transformer", "transformer-copy"])
def test_forced_decoding_in_one_pass_equals_step_by_step(untrained_translators, name):
    """A Transformer's forced decoding runs every position at once (forced_steps); its Decoding
    is the step-by-step one's, field by field, and on_step still sees each step."""
    from s2s.decode import _left_to_right, encode_source
    tr = untrained_translators[name]
    text, ref = "a b c d e", "e d c b a"
    seen = []
    fast = forced(tr, text, ref, on_step=lambda j, d: seen.append(len(d.target_ids)))
    ref_ids = tr.tokenizer.encode(ref) + [EOS]
    slow = _left_to_right(tr, encode_source(tr, text), lambda j, logits: ref_ids[j], len(ref_ids))
    assert fast.target_ids == slow.target_ids == ref_ids and seen == list(range(1, len(ref_ids) + 1))
    assert fast.log_prob == pytest.approx(slow.log_prob, abs=1e-4) and fast.token_ranks == slow.token_ranks
    for field in ("token_log_probs", "attention", "states", "contexts", "encoder_states", "cross_attention",
                  "decoder_self_attention", "encoder_self_attention"):
        a, b = np.asarray(getattr(fast, field)), np.asarray(getattr(slow, field))
        assert a.shape == b.shape and np.allclose(a, b, atol=1e-4), field
    assert [[t for t, _ in row] for row in fast.step_top] == [[t for t, _ in row] for row in slow.step_top]
