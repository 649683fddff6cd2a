"""Activation patching (s2s.patch) against runs hooked here: one patched cell equals
transformers' own forward (or our models' own modules) with a hook of this file replacing that
one activation by the clean run's; a cross-attention head's cell equals a pre-hook of this file
on the family's output projection; patching every position of the last encoder layer gives the
clean log p and patching nothing the corrupted one. Tiny models with random nonzero biases and
norms, in float64 (tests/biased_models.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from biased_models import HUB, biased, hub_parts, main_tensor, shipped

from s2s.attributions import source_ids, target_ids
from s2s.hooks import decoder_input
from s2s.patch import main, patch_heads, patch_layers, patched_log_prob, sequence_log_probs

TEXT = "the cat sat on the mat ."
FR = "le chat est assis sur le tapis ."
REVERSAL = "a c f b"
SWAP = 3            # the source position the edit changes


@pytest.fixture(scope="module")
def models(untrained_translators, hub_models):
    return biased(untrained_translators, hub_models, torch.float64) | {"shipped": shipped(torch.float64)}


def setup(tr):
    """(clean source (1, S), edited source: another piece at position SWAP, the forced output)."""
    text, ref = (TEXT, FR) if hasattr(tr.model, "hf") else (REVERSAL, "b f c a")
    src = torch.tensor([source_ids(tr, text)])
    edited = src.clone()
    edited[0, SWAP] = next(int(i) for i in src[0].tolist()[::-1] if i != int(src[0, SWAP]))
    return src, edited, torch.tensor(target_ids(tr, text, ref)[0])


def log_prob(tr, src, tgt, pointer=None) -> float:
    """This file's own forced log p: transformers' forward, or ours'; `pointer`: the source ids a
    copying model's pointer reads instead of src's (its encoder reads src), step by step as its
    forward does."""
    model = tr.model
    with torch.no_grad():
        if pointer is not None:
            memory, state = model.encode(src, torch.tensor([src.size(1)]))
            memory.src = pointer
            tgt_in = decoder_input(model, tgt)
            if hasattr(model, "decode_all"):
                s, context, last, _, _ = model.decode_all(tgt_in, memory)
                logits = model.point(model.output(s), last.mean(1), memory.src, context, s)
            else:
                feed, rows = model.initial_feed(1), []
                for j in range(tgt.numel()):
                    st = model.decode_step(tgt_in[:, j], state, feed, memory)
                    state, feed = st.state, st.feed
                    rows.append(st.logits)
                logits = torch.stack(rows, 1)
        elif hasattr(model, "hf"):
            logits = model.pieces_only(model.hf(input_ids=src, attention_mask=torch.ones_like(src),
                                                decoder_input_ids=decoder_input(model, tgt)).logits)
        else:
            logits, _ = model(src, torch.tensor([src.size(1)]), decoder_input(model, tgt))
    return float(F.log_softmax(logits[0].double(), -1)[torch.arange(tgt.numel()), tgt].sum())


def encoder_layers(tr):
    return hub_parts(tr)[0] if hasattr(tr.model, "hf") else list(tr.model.encoder)


def cross_outputs(tr):
    """Each decoder layer's cross-attention output projection and its heads, found here."""
    model = tr.model
    if not hasattr(model, "hf"):
        return [(l.cross_attn.w_o, l.cross_attn.heads) for l in model.decoder]
    cfg = model.hf.config
    if hasattr(model.hf, "decoder") and hasattr(model.hf.decoder, "block"):
        return [(b.layer[1].EncDecAttention.o, cfg.num_heads) for b in model.hf.decoder.block]
    return [(l.encoder_attn.out_proj, cfg.decoder_attention_heads) for l in model.hf.model.decoder.layers]


@pytest.mark.parametrize("name", [*HUB, "ours", "ours-copy", "shipped"])
def test_one_cell_is_a_hooked_run_replacing_that_activation(models, name):
    tr = models[name]
    src, edited, tgt = setup(tr)
    layers = encoder_layers(tr)
    clean_lp, corrupt_lp = log_prob(tr, src, tgt), log_prob(tr, edited, tgt)
    assert abs(clean_lp - corrupt_lp) > 1e-6                  # the edit changes something
    got = patch_layers(tr.model, src, edited, tgt)
    assert len(got) == len(layers) and all(len(row) == src.size(1) for row in got)
    for l, i in [(0, SWAP), (len(layers) - 1, SWAP), (len(layers) - 1, 0), (0, 1)]:
        kept = {}
        handle = layers[l].register_forward_hook(lambda m, a, o: kept.__setitem__("h", main_tensor(o).clone()))
        try:
            log_prob(tr, src, tgt)
        finally:
            handle.remove()

        def replace(module, args, output):
            h = main_tensor(output).clone()
            h[0, i] = kept["h"][0, i]
            return (h, *output[1:]) if isinstance(output, tuple) else h
        handle = layers[l].register_forward_hook(replace)
        pointer = None
        if l == len(layers) - 1 and getattr(tr.model, "copy_gate", None) is not None:
            pointer = edited.clone()        # the encoder's output at i, as the pointer reads it: the clean piece
            pointer[0, i] = src[0, i]
        try:
            want = log_prob(tr, edited, tgt, pointer)
        finally:
            handle.remove()
        assert got[l][i] == pytest.approx(want, abs=1e-6), (l, i)
    # identities: every position of the last layer restores the clean run, nothing leaves the corrupted one
    everything = [(len(layers) - 1, i) for i in range(src.size(1))]
    assert patched_log_prob(tr.model, src, edited, tgt, everything) == pytest.approx(clean_lp, abs=1e-6)
    assert patched_log_prob(tr.model, src, edited, tgt, []) == pytest.approx(corrupt_lp, abs=1e-6)
    assert float(sequence_log_probs(tr.model, src, tgt)[0]) == pytest.approx(clean_lp, abs=1e-6)


@pytest.mark.parametrize("name", [*HUB, "ours", "shipped"])
def test_one_head_is_a_hooked_run_replacing_its_output(models, name):
    tr = models[name]
    src, edited, tgt = setup(tr)
    got = patch_heads(tr.model, src, edited, tgt)
    outputs = cross_outputs(tr)
    assert [len(row) for row in got] == [h for _, h in outputs]
    for l, h in [(0, 1), (len(outputs) - 1, outputs[-1][1] - 1)]:
        o, heads = outputs[l]
        kept = {}
        handle = o.register_forward_pre_hook(lambda m, a: kept.__setitem__("x", a[0].clone()))
        try:
            log_prob(tr, src, tgt)
        finally:
            handle.remove()

        def replace(module, args):
            x = args[0].clone()
            d = x.size(-1) // heads
            x[..., h * d:(h + 1) * d] = kept["x"][..., h * d:(h + 1) * d]
            return (x, *args[1:])
        handle = o.register_forward_pre_hook(replace)
        try:
            want = log_prob(tr, edited, tgt)
        finally:
            handle.remove()
        assert got[l][h] == pytest.approx(want, abs=1e-6), (l, h)


@pytest.mark.parametrize("name", ["lstm-copy", "dot"])
def test_a_recurrent_encoder_is_one_layer_of_states(models, name):
    """A recurrent model: position i's output of its bidirectional RNN, and the final state of the
    direction that ends there (and with the pointer, the piece there); every position restores the
    clean run exactly (the decoder's initial state included), one middle position equals this
    file's own hooked run."""
    tr = models[name]
    src, edited, tgt = setup(tr)
    clean_lp, corrupt_lp = log_prob(tr, src, tgt), log_prob(tr, edited, tgt)
    got = patch_layers(tr.model, src, edited, tgt)
    assert len(got) == 1 and len(got[0]) == src.size(1)
    everything = [(0, i) for i in range(src.size(1))]
    assert patched_log_prob(tr.model, src, edited, tgt, everything) == pytest.approx(clean_lp, abs=1e-6)
    assert patched_log_prob(tr.model, src, edited, tgt, []) == pytest.approx(corrupt_lp, abs=1e-6)
    kept = {}
    rnn = tr.model.encoder
    handle = rnn.register_forward_hook(lambda m, a, o: kept.__setitem__("out", o[0].clone()))
    try:
        log_prob(tr, src, tgt)
    finally:
        handle.remove()
    i = 1                                                   # neither end: the output only

    def replace(module, args, output):
        out = output[0].clone()
        out[0, i] = kept["out"][0, i]
        return out, output[1]
    handle = rnn.register_forward_hook(replace)
    pointer = None
    if tr.model.copy_gate is not None:            # its one layer is the last: the pointer reads the clean piece
        pointer = edited.clone()
        pointer[0, i] = src[0, i]
    try:
        want = log_prob(tr, edited, tgt, pointer)
    finally:
        handle.remove()
    assert got[0][i] == pytest.approx(want, abs=1e-6)


GIRL = "The little girl is happy because her mother is here."
BOY = "The little boy is happy because his mother is here."


def test_the_command_on_the_shipped_transformer(capsys):
    assert main(["--model", "en-fr-transformer", "--edited", BOY, "--json", "--", GIRL]) == 0
    out = json.loads(capsys.readouterr().out)
    S = len(out["source_tokens"])
    assert len(out["edited_tokens"]) == S and len(out["patched"]) == len(out["layers"]) == 3
    assert all(len(row) == S for row in out["patched"])
    assert [len(row) for row in out["patched_heads"]] == [4, 4, 4]
    assert out["clean_log_prob"] > out["corrupt_log_prob"]
    # the last layer's share restored at the swapped word's position is between nothing and everything
    girl = out["source_tokens"].index("▁girl")
    assert out["edited_tokens"][girl] == "▁boy"
    assert out["corrupt_log_prob"] < out["patched"][0][girl] <= out["clean_log_prob"] + 1e-6


def test_a_recurrent_command_has_no_heads(capsys):
    assert main(["--model", "en-fr-additive", "--edited", BOY, "--json", "--", GIRL]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["patched_heads"] is None and len(out["patched"]) == 1


@pytest.mark.parametrize("edited", ["The boy is happy.", "   ", ""])
def test_bad_input_is_one_line(capsys, edited):
    assert main(["--model", "en-fr-transformer", "--edited", edited, "--", GIRL]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1, err


@pytest.mark.parametrize("name", ["marian", "ours", "shipped"])
def test_one_clean_pass_gives_what_three_gave(models, name):
    """patch() reads the clean run once (s2s.patch.clean_run) for both patches: its cells and log
    ps equal patch_layers' and patch_heads' own clean runs, and forced decoding's; the output
    given as ids (a page's translation) is the greedy one's metric when it is the greedy output."""
    from s2s.decode import greedy
    from s2s.patch import patch
    tr = models[name]
    text = TEXT if hasattr(tr.model, "hf") else REVERSAL
    src = torch.tensor([source_ids(tr, text)])
    out = greedy(tr, text).target_ids
    edits = [e for e in (("the mat sat on the cat .", "the cat sat on the mat !")
                         if hasattr(tr.model, "hf") else ("a f c b", "a c e b"))
             if len(source_ids(tr, e)) == src.size(1) and source_ids(tr, e) != src[0].tolist()]
    assert edits, "an edit of as many pieces"
    edited = edits[0]
    edited_ids = torch.tensor([source_ids(tr, edited)])
    p = patch(tr, text, edited)
    tgt = torch.tensor(out)
    assert p.forced_from == "greedy" and p.clean_log_prob == pytest.approx(log_prob(tr, src, tgt), abs=1e-9)
    assert p.corrupt_log_prob == pytest.approx(log_prob(tr, edited_ids, tgt), abs=1e-9)
    same = lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)  # noqa: E731
    same(p.patched, patch_layers(tr.model, src, edited_ids, tgt))
    if p.patched_heads is not None:
        same(p.patched_heads, patch_heads(tr.model, src, edited_ids, tgt))
    given = patch(tr, text, edited, output_ids=out)
    assert given.forced_from == "given"
    same(given.patched, p.patched)
    assert given.clean_log_prob == pytest.approx(p.clean_log_prob, abs=1e-9)


def test_shares_by_word_take_each_words_strongest_piece():
    from s2s.patch import shares_by_word
    words, edited, rows = shares_by_word(["▁The", "▁gi", "rl", "▁is", "</s>"], ["▁The", "▁bo", "y", "▁is", "</s>"],
                                         [[0.1, 0.2, -0.7, 0.3, 0.0], [0.0, 0.5, 0.4, 0.0, 1.0]])
    assert words == ["The", "girl", "is", "</s>"] and edited == ["The", "boy", "is", "</s>"]
    assert rows == [[0.1, -0.7, 0.3, 0.0], [0.0, 0.5, 0.0, 1.0]]
    # an edit that splits the word's pieces into two words: both named
    assert shares_by_word(["▁a", "b", "</s>"], ["▁x", "▁y", "</s>"], [[1, 2, 3]])[1] == ["x y", "</s>"]
