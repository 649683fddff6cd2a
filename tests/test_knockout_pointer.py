"""A knocked-out head is gone where the model itself reads its weights: the copying Transformer's
pointer (s2s/transformer.py HeadMean, s2s.hooks.pointer_heads). Held against constructions
written here: the model with its pointer removed and the heads' slices of w_o's input zeroed by
a pre-hook of this file (every cross-attention head out: the vocabulary distribution alone), a
mean over the heads still in computed by hand, and a copy of the model whose knocked-out heads'
queries are changed (their weights move; under the mask nothing that comes out may move)."""
from __future__ import annotations

import copy
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from biased_models import randomise, shipped

from s2s import decode as D
from s2s import hooks
from s2s.attributions import grad_x_input, source_ids
from s2s.decode import DecodeSettings, decode
from s2s.lens import layer_log_probs

SHIPPED_TEXT = "The children are playing in the garden with Peter."
TEXT = "c a f b d"
ALL_CROSS = "cross:1.*,cross:2.*,cross:3.*"


@pytest.fixture(scope="module")
def ours(untrained_translators):
    """A copy of the tiny copying Transformer (2 + 2 layers, 4 heads), biases and norms random,
    its gate at random."""
    tr = copy.deepcopy(untrained_translators["transformer-copy"])
    randomise(tr.model, 1)
    tr.model.eval()
    return tr


@pytest.fixture(scope="module")
def en_fr():
    return shipped()


@contextmanager
def zeroed(model, heads):
    """The heads' slices of each cross-attention w_o's input zeroed, by pre-hooks written here
    (heads: (layer, head) pairs, 0-based); nothing else touched, the pointer included."""
    d_k = model.cfg.d_model // model.cfg.heads
    handles = []
    for layer, head in heads:
        def pre(module, args, head=head):
            x = args[0].clone()
            x[..., head * d_k:(head + 1) * d_k] = 0
            return (x,) + args[1:]
        handles.append(model.decoder[layer].cross_attn.w_o.register_forward_pre_hook(pre))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def without_pointer(tr):
    """A copy of the translator whose model has no pointer: its output is the vocabulary distribution alone."""
    out = copy.deepcopy(tr)
    out.model.copy_gate = None
    out.model.copy_heads = None
    return out


def with_queries_moved(tr, heads, gain: float = 5.0):
    """A copy whose cross-attention heads `heads` ((layer, head), 0-based) have their queries
    scaled: their weights change, every other head's are the same."""
    out = copy.deepcopy(tr)
    d_k = out.model.cfg.d_model // out.model.cfg.heads
    with torch.no_grad():
        for layer, head in heads:
            w_q = out.model.decoder[layer].cross_attn.w_q
            w_q.weight[head * d_k:(head + 1) * d_k] *= gain
            w_q.bias[head * d_k:(head + 1) * d_k] += 1.0
    return out


def pass_of(tr, text, target):
    src = torch.tensor([source_ids(tr, text)])
    return src, torch.tensor(target), hooks.decoder_input(tr.model, torch.tensor(target))


def pointer_alphas(tr, mask, run):
    """Every alpha the pointer read while `run()` ran under the mask (a hook of this file,
    attached after the knockout's, so it sees what the pointer is given)."""
    seen = []
    with hooks.knocked_out(tr.model, hooks.parse_head_mask(mask)):
        handle = tr.model.copy_heads.register_forward_hook(lambda m, args, out: seen.append(out.detach().clone()))
        try:
            run()
        finally:
            handle.remove()
    return seen


def test_every_cross_head_out_leaves_no_copy_and_the_vocabulary_distribution_alone(en_fr):
    """en-fr-transformer with its 12 cross-attention heads out: the pointer's alpha is 0 at
    every step (copy probability (1 - p_gen) sum alpha = 0), and every output, greedy and forced,
    the whole distribution at every step, is that of the model without its pointer with the
    heads' slices zeroed here. The old knockout (the slices zeroed, the pointer reading every
    head) wrote English pieces through the pointer: it differs."""
    tr, alone = en_fr, without_pointer(en_fr)
    masked = decode(tr, SHIPPED_TEXT, DecodeSettings("greedy", head_mask=ALL_CROSS))
    every = [(l, h) for l in range(3) for h in range(4)]
    with zeroed(alone.model, every), torch.no_grad():
        reference = decode(alone, SHIPPED_TEXT, DecodeSettings("greedy"))
    assert masked.target_ids == reference.target_ids
    torch.testing.assert_close(torch.tensor(masked.token_log_probs), torch.tensor(reference.token_log_probs),
                               atol=1e-4, rtol=0)
    alphas = pointer_alphas(tr, ALL_CROSS, lambda: decode(tr, SHIPPED_TEXT, DecodeSettings("greedy")))
    assert len(alphas) == len(masked.target_ids) and all(not a.any() for a in alphas)
    src, _, tgt_in = pass_of(tr, SHIPPED_TEXT, masked.target_ids)
    with torch.no_grad():
        with hooks.knocked_out(tr.model, hooks.parse_head_mask(ALL_CROSS)):
            got = hooks.forced_pass(tr.model, src, tgt_in).logits[0]
        with zeroed(alone.model, every):
            want = F.log_softmax(hooks.forced_pass(alone.model, src, tgt_in).logits[0], -1)
            with zeroed(tr.model, every):
                old = decode(tr, SHIPPED_TEXT, DecodeSettings("greedy"))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    assert old.target_ids != masked.target_ids          # the pointer was the leak: the test can fail


def test_the_pointer_reads_the_mean_over_the_heads_still_in(ours):
    """Head 2 of the last layer out: alpha is the mean of the other three heads' weights
    (computed here from the weights the pass returns), not the mean of all four."""
    tr = ours
    target = decode(tr, TEXT, DecodeSettings("greedy", max_len=8)).target_ids
    src, _, tgt_in = pass_of(tr, TEXT, target)
    with torch.no_grad():
        kept = {}
        alphas = pointer_alphas(tr, "cross:2.2", lambda: kept.setdefault(
            "pass", hooks.forced_pass(tr.model, src, tgt_in)))
    weights = kept["pass"].cross[-1]                                       # (H, T, S)
    want = weights[[0, 2, 3]].mean(0)
    assert len(alphas) == 1
    torch.testing.assert_close(alphas[0][0], want, atol=1e-6, rtol=0)
    assert (weights.mean(0) - want).abs().max() > 1e-3                     # all four would differ


@pytest.mark.parametrize("mask, heads", [("cross:2.2", [(1, 1)]), ("cross:1.3,cross:2.2", [(0, 2), (1, 1)])])
def test_a_knocked_out_heads_weights_no_longer_move_anything(ours, mask, heads):
    """The knocked-out heads' queries changed (their weights move): under the mask greedy, beam,
    forced decoding, the lens (each layer's pointer reads its own heads) and grad x input are
    those of the unchanged model; without the mask, and under the old knockout (the slices zeroed,
    the pointer reading every head), they are not."""
    tr, moved = ours, with_queries_moved(ours, heads)
    target = decode(tr, TEXT, DecodeSettings("greedy", max_len=8)).target_ids
    src, tgt, _ = pass_of(tr, TEXT, target)
    for s in (DecodeSettings("greedy", max_len=8, head_mask=mask), DecodeSettings("beam", width=3, max_len=8,
                                                                                  head_mask=mask)):
        a, b = decode(tr, TEXT, s), decode(moved, TEXT, s)
        assert a.target_ids == b.target_ids
        torch.testing.assert_close(torch.tensor(a.token_log_probs), torch.tensor(b.token_log_probs), atol=1e-5,
                                   rtol=0)
    forced = DecodeSettings("forced", head_mask=mask)
    a, b = decode(tr, TEXT, forced, reference_ids=target), decode(moved, TEXT, forced, reference_ids=target)
    torch.testing.assert_close(torch.tensor(a.token_log_probs), torch.tensor(b.token_log_probs), atol=1e-5, rtol=0)
    m = hooks.parse_head_mask(mask)
    with torch.no_grad(), hooks.knocked_out(tr.model, m), hooks.knocked_out(moved.model, m):
        torch.testing.assert_close(layer_log_probs(tr.model, src, tgt), layer_log_probs(moved.model, src, tgt),
                                   atol=1e-5, rtol=0)
    with hooks.knocked_out(tr.model, m), hooks.knocked_out(moved.model, m):
        torch.testing.assert_close(torch.tensor(grad_x_input(tr.model, src, tgt)),
                                   torch.tensor(grad_x_input(moved.model, src, tgt)), atol=1e-5, rtol=0)
    # the changed queries matter, and the old knockout let them through the pointer
    plain = DecodeSettings("forced")
    a, b = decode(tr, TEXT, plain, reference_ids=target), decode(moved, TEXT, plain, reference_ids=target)
    assert max(abs(x - y) for x, y in zip(a.token_log_probs, b.token_log_probs)) > 1e-3
    with zeroed(tr.model, heads), zeroed(moved.model, heads):
        a, b = decode(tr, TEXT, plain, reference_ids=target), decode(moved, TEXT, plain, reference_ids=target)
    assert max(abs(x - y) for x, y in zip(a.token_log_probs, b.token_log_probs)) > 1e-3


def test_a_mask_sparing_the_pointers_layer_leaves_the_pointer_as_it_was(ours):
    """Heads out elsewhere (encoder, decoder self-attention, the first cross-attention layer):
    decoding is the model with those slices zeroed and nothing else (the pointer reads the last
    layer, all of whose heads are in), as a pre-hook of this file gives it."""
    tr = ours
    mask = "encoder:1.2,decoder:2.1,cross:1.3"
    s = DecodeSettings("greedy", max_len=8)
    masked = decode(tr, TEXT, DecodeSettings("greedy", max_len=8, head_mask=mask))
    d_k = tr.model.cfg.d_model // tr.model.cfg.heads

    def cut(h):
        def pre(module, args):
            x = args[0].clone()
            x[..., h * d_k:(h + 1) * d_k] = 0
            return (x,) + args[1:]
        return pre
    handles = [tr.model.encoder[0].self_attn.w_o.register_forward_pre_hook(cut(1)),
               tr.model.decoder[1].self_attn.w_o.register_forward_pre_hook(cut(0))]
    try:
        with zeroed(tr.model, [(0, 2)]):
            hooked = decode(tr, TEXT, s)
    finally:
        for h in handles:
            h.remove()
    assert masked.target_ids == hooked.target_ids
    assert masked.token_log_probs == pytest.approx(hooked.token_log_probs, abs=1e-6)
    assert masked.token_log_probs != pytest.approx(decode(tr, TEXT, s).token_log_probs, abs=1e-3)
    assert hooks.pointer_heads(tr.model, {"encoder": [(0, 1)]}) == []


def test_the_batched_searches_and_a_model_without_the_pointer(ours, untrained_translators):
    """The batched greedy search reads the same pointer; a Transformer without one gets no hook."""
    tr = ours
    texts = [TEXT, "a b", "j i h g f e"]
    s = DecodeSettings("greedy", max_len=8, head_mask="cross:2.1,cross:2.3")
    assert D.greedy_batch(tr, texts, s) == [decode(tr, t, s).translation for t in texts]
    assert hooks.pointer_heads(untrained_translators["transformer"].model, {"cross": [(1, 0)]}) == []
