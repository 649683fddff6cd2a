import numpy as np
import pytest
import torch

from s2s.data import make_batch
from s2s.decode import DecodeSettings, beam_search, decode, forced, greedy, greedy_batch, sample, source_coverage
from s2s.model import sequence_loss
from s2s.text import InputError
from s2s.tokenizer import BOS

ATTENTIONS = ["none", "dot", "general", "additive", "scaled-dot", "copy", "transformer", "transformer-copy"]
# copy: additive + pointer; the Transformers speak the same decode API and pass the same tests
TEXTS = ["a b c", "j i h g f e d", "c"]


@pytest.mark.parametrize("att", ATTENTIONS)
def test_beam_width_one_equals_greedy(untrained_translators, att):
    tr = untrained_translators[att]
    for text in TEXTS:
        g, b = greedy(tr, text), beam_search(tr, text, width=1)
        assert b.target_ids == g.target_ids
        assert b.log_prob == pytest.approx(g.log_prob, abs=1e-4)
        if att != "none":
            assert np.allclose(b.attention, g.attention, atol=1e-6)


def test_beam_width_one_equals_greedy_on_a_trained_model(tiny_additive):
    from s2s.checkpoint import load_translator
    tr = load_translator(tiny_additive)
    for text in ["a b c d", "j a j a i", "e"]:
        assert beam_search(tr, text, width=1).translation == greedy(tr, text).translation


@pytest.mark.parametrize("att", ATTENTIONS)
def test_forced_log_prob_is_negative_cross_entropy(untrained_translators, att):
    tr = untrained_translators[att]
    src, ref = "a b c d", "d c b a"
    d = forced(tr, src, ref)
    batch = make_batch([(tr.tokenizer.encode(src), tr.tokenizer.encode(ref))], BOS)
    on = tr.device          # the model's device: a GPU machine's too
    with torch.no_grad():
        logits, attn = tr.model(batch.src.to(on), batch.src_len.to(on), batch.tgt_in.to(on))
    assert d.log_prob == pytest.approx(-float(sequence_loss(logits, batch.tgt_out.to(on))), abs=1e-4)
    assert d.target_ids == batch.tgt_out[0].tolist()
    if att == "none":
        assert d.attention is None and attn is None
    else:
        assert np.allclose(d.attention, attn[0].cpu().numpy(), atol=1e-5)


@pytest.mark.parametrize("att", ATTENTIONS[1:])
def test_attention_matrix_is_target_by_source_and_rows_sum_to_one(untrained_translators, att):
    tr = untrained_translators[att]
    for d in (greedy(tr, "a b c"), beam_search(tr, "a b c", width=3), sample(tr, "a b c", seed=1)):
        assert d.attention.shape == (len(d.target_tokens), len(d.source_tokens))
        assert np.allclose(d.attention.sum(1), 1.0, atol=1e-5)
        assert d.source_tokens[-1] == "</s>"
        assert d.states.shape[0] == len(d.target_tokens)
        assert len(d.token_log_probs) == len(d.target_tokens)


def test_trained_model_reverses_and_attends_to_the_mirror_position(tiny_additive):
    from s2s.checkpoint import load_translator
    tr = load_translator(tiny_additive)
    d = greedy(tr, "a b c d e")
    assert d.translation == "e d c b a"
    # output word k comes from input word n-1-k: the alignment is the anti-diagonal
    words = [i for i, t in enumerate(d.target_tokens) if t != "</s>"]
    argmax = d.attention[words].argmax(1)
    assert list(argmax) == [4, 3, 2, 1, 0]
    # the step view records the top next tokens, the chosen one first for greedy
    assert d.step_top[0][0][0] == d.target_tokens[0]


def test_beam_nbest_is_sorted_and_tree_is_consistent(tiny_additive):
    from s2s.checkpoint import load_translator
    tr = load_translator(tiny_additive)
    d = beam_search(tr, "a b c d", width=4, n_best=3)
    assert len(d.nbest) == 3
    scores = [h.score for h in d.nbest]
    assert scores == sorted(scores, reverse=True)
    assert d.nbest[0].translation == d.translation == "d c b a"
    for node in d.beam_tree:
        assert node["parent"] < 0 or d.beam_tree[node["parent"]]["step"] == node["step"] - 1
    assert any(n["finished"] for n in d.beam_tree)


def test_sampling_is_seeded_and_top_k_one_is_greedy(tiny_additive):
    from s2s.checkpoint import load_translator
    tr = load_translator(tiny_additive)
    a = sample(tr, "a b c d e f", temperature=2.0, seed=7)
    b = sample(tr, "a b c d e f", temperature=2.0, seed=7)
    assert a.target_ids == b.target_ids
    many = {sample(tr, "a b c d e f", temperature=3.0, seed=s).translation for s in range(12)}
    assert len(many) > 1, "high temperature should vary with the seed"
    assert sample(tr, "a b c d e f", top_k=1, seed=3).translation == greedy(tr, "a b c d e f").translation


def test_batched_greedy_equals_greedy(tiny_additive):
    from s2s.checkpoint import load_translator
    tr = load_translator(tiny_additive)
    texts = ["a b c", "j i h g f e d", "c", "b b a a", "e f g h i j a b"]
    assert greedy_batch(tr, texts, batch_size=2) == [greedy(tr, t).translation for t in texts]


def test_max_len_stops_decoding(untrained_translators):
    tr = untrained_translators["additive"]
    d = greedy(tr, "a b c", max_len=2)
    assert len(d.target_ids) <= 2


@pytest.mark.parametrize("kw", [dict(method="beam", width=0), dict(method="beam", width=17),
                                dict(method="sample", temperature=0.0), dict(method="sample", top_k=-1),
                                dict(method="greedy", max_len=0), dict(method="greedy", max_len=10_000),
                                dict(method="teleport")])
def test_out_of_range_settings_are_refused(untrained_translators, kw):
    with pytest.raises(InputError):
        decode(untrained_translators["dot"], "a b", DecodeSettings(**kw))


@pytest.mark.parametrize("text", ["", " \n\t ", "\x00\x1b\x07\u200f", "x" * 20_000, "a" * 5000])
def test_bad_text_is_refused_with_a_message(untrained_translators, text):
    with pytest.raises(InputError) as e:
        greedy(untrained_translators["dot"], text)
    assert "limit" in str(e.value) or "empty" in str(e.value)


def test_odd_characters_translate(untrained_translators):
    tr = untrained_translators["dot"]
    d = greedy(tr, "a 😀 b <b>x</b> \u202e c", max_len=30)
    assert "<unk>" in d.source_tokens          # unknown characters become <unk>, not an error
    assert "\u202e" not in "".join(d.source_tokens)
    assert 1 <= len(d.target_ids) <= 30


def test_without_states_keeps_what_a_view_shows_and_is_much_smaller(tiny_additive):
    """What the Translate page caches for every user: tokens, scores, attention and the
    beam's n-best and tree stay; the per-step vectors go."""
    import pickle

    from s2s.checkpoint import load_translator
    d = beam_search(load_translator(tiny_additive), "j a j a i b c d e f", width=4, n_best=3)
    slim = d.without_states()
    assert slim.states is None and slim.contexts is None and slim.encoder_states is None and slim.cells is None
    assert (slim.translation, slim.target_tokens, slim.token_log_probs) == (d.translation, d.target_tokens,
                                                                            d.token_log_probs)
    assert np.array_equal(slim.attention, d.attention)
    assert [h.translation for h in slim.nbest] == [h.translation for h in d.nbest] and slim.beam_tree == d.beam_tree
    assert d.states is not None                      # the original is untouched
    assert len(pickle.dumps(slim)) < len(pickle.dumps(d)) / 3


def test_a_search_error_is_judged_by_what_the_search_maximises(tiny_additive):
    """Greedy aims at log p, beam search at log p / lp(|y|); the search's own output forced
    back through the model is no error (its log p differs by float rounding only)."""
    from dataclasses import replace

    from s2s.checkpoint import load_translator
    from s2s.decode import is_search_error, lp
    tr = load_translator(tiny_additive)
    d = beam_search(tr, "a b c", width=3)
    f = forced(tr, "a b c", reference_ids=d.target_ids)
    assert abs(f.log_prob - d.log_prob) < 1e-4 and not is_search_error(d, f, "beam")

    def scored(dec, log_prob: float, extra: int = 0):     # a decoding with another log p (and length)
        return replace(dec, token_log_probs=[log_prob], target_ids=dec.target_ids + [dec.target_ids[-1]] * extra)
    assert not is_search_error(d, scored(f, d.log_prob + 5e-6), "beam")       # rounding, not an error
    # a long output, and a short reference with a higher log p but a lower score by beam search's ranking
    out, short = scored(d, -2.0, extra=20), scored(f, -1.5)
    assert short.log_prob / lp(len(short.target_ids), 0.6) < out.log_prob / lp(len(out.target_ids), 0.6)
    assert not is_search_error(out, short, "beam") and is_search_error(out, short, "greedy")
    assert is_search_error(out, scored(f, -0.5), "beam")                       # higher by both: an error
    assert not is_search_error(out, scored(f, -0.5), "sample")                 # sampling searches nothing


def test_source_coverage_counts_the_pieces_attention_reached():
    """#47: Σ_j α_ji ≥ 0.5 per source piece, </s> (the last column) left out."""
    a = np.array([[0.9, 0.05, 0.0, 0.05],      # 3 pieces + </s>; rows are output steps
                  [0.1, 0.30, 0.0, 0.60]])
    assert source_coverage(a) == pytest.approx(1 / 3)        # only the first piece: 1.0; the second 0.35
    assert source_coverage(np.eye(4)) == 1.0                 # each piece attended once, fully
    assert source_coverage(np.array([[0.0, 1.0]])) == 0.0    # all on </s>


def test_each_beam_hypothesis_carries_its_source_coverage(tiny_additive):
    """The best hypothesis's coverage is that of the attention beam search returns for it, and
    every n-best hypothesis has one in [0, 1]."""
    from s2s.checkpoint import load_translator
    tr = load_translator(tiny_additive)
    d = beam_search(tr, "a b c d e", width=4, n_best=3)
    assert d.nbest[0].coverage == pytest.approx(source_coverage(d.attention))
    assert all(0.0 <= h.coverage <= 1.0 for h in d.nbest)


def test_split_sentences_keeps_closing_quotes_and_drops_empty_ones():
    from s2s.text import split_sentences
    assert split_sentences('He said "Stop!" Then he left...  (It rained.) OK? Yes') == \
        ['He said "Stop!"', "Then he left...", "(It rained.)", "OK?", "Yes"]
    assert split_sentences("one sentence") == ["one sentence"] and split_sentences("  \n ") == []


@pytest.mark.parametrize("att", ["additive", "none", "transformer"])
def test_sentence_by_sentence_joins_each_sentences_decoding_block_diagonally(untrained_translators, att):
    """#47: a paragraph decoded one sentence at a time is one Decoding whose tokens and log-probs
    are the sentences' in order and whose attention is block-diagonal: each sentence's output
    read its own source only."""
    from s2s.decode import decode_by_sentence
    from s2s.text import split_sentences
    tr = untrained_translators[att]
    text = "a b c. d e f! g h"
    parts = [decode(tr, s) for s in split_sentences(text)]
    joined = decode_by_sentence(tr, text)
    assert joined.target_tokens == [t for p in parts for t in p.target_tokens]
    assert joined.source_tokens == [t for p in parts for t in p.source_tokens]
    assert joined.token_log_probs == [x for p in parts for x in p.token_log_probs]
    assert joined.translation == " ".join(p.translation for p in parts if p.translation)
    assert joined.nbest == [] and joined.beam_tree == [] and joined.states is None
    if att == "none":
        assert joined.attention is None
        return
    r = c = 0
    a = joined.attention
    assert a.shape == (len(joined.target_tokens), len(joined.source_tokens))
    for p in parts:
        T, S = p.attention.shape
        np.testing.assert_allclose(a[r:r + T, c:c + S], p.attention)
        assert a[r:r + T].sum() == pytest.approx(p.attention.sum())      # nothing outside its block
        r, c = r + T, c + S
    if att == "transformer":
        assert joined.cross_attention.shape[2:] == a.shape
        assert joined.encoder_self_attention.shape[2:] == (a.shape[1], a.shape[1])
    one = decode_by_sentence(tr, "a b c")
    assert one.target_tokens == decode(tr, "a b c").target_tokens
    with pytest.raises(InputError):
        decode_by_sentence(tr, "   ")


def test_usable_pairs_leaves_out_what_the_model_cannot_read_and_importance_counts_them(untrained_translators):
    """One filter for every corpus forced through a model (the neighbour index, the heads'
    importance): a pair with an empty or unreadable side, or a French over the decode limit, is
    left out, and the importance's `skipped` counts exactly those."""
    from s2s.decode import encode_source, usable_pairs
    from s2s.head_importance import importance
    from s2s.text import MAX_DECODE_LEN
    tr = untrained_translators["transformer"]
    pairs = [("c a f b d", "d b f a c"), ("   ", "a b"), ("a b", "\x01"),
             ("a b", " ".join(["a"] * (MAX_DECODE_LEN + 1))), ("j i h", "h i j")]
    kept, srcs, tgts = usable_pairs(tr, pairs)
    assert kept == [0, 4]
    assert srcs == [encode_source(tr, "c a f b d"), encode_source(tr, "j i h")]
    assert tgts == [list(tr.tokenizer.target_ids("d b f a c")), list(tr.tokenizer.target_ids("h i j"))]
    measured = importance(tr, pairs)
    assert (measured.pairs, measured.skipped) == (2, 3)


def test_uniform_entropy_is_log_of_what_each_row_may_read():
    """The baseline of a head's mean entropy: log J when every row reads every key; a causal
    (decoder self-attention) row i reads i + 1 keys, so the mean of log(i + 1)."""
    import math

    from s2s.piece_words import mean_entropy, uniform_entropy
    full = np.full((3, 4), 0.25)
    assert uniform_entropy(full) == (pytest.approx(math.log(4)), True)
    assert mean_entropy(full) == pytest.approx(math.log(4))
    causal = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    base, every = uniform_entropy(causal)
    assert not every and base == pytest.approx((math.log(1) + math.log(2) + math.log(3)) / 3)
    assert mean_entropy(causal) == pytest.approx(base, abs=1e-9)      # a uniform causal head is its own baseline
