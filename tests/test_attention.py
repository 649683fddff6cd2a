import pytest
import torch

from s2s.attention import SCORES, attend, make_scorer, mask_bias


@pytest.mark.parametrize("name", SCORES)
def test_scores_give_distributions_over_real_positions(name):
    torch.manual_seed(0)
    B, S, H = 3, 7, 16
    scorer = make_scorer(name, H, H, 12)
    memory = torch.randn(B, S, H)
    lengths = torch.tensor([7, 4, 1])
    mask = torch.arange(S)[None, :] < lengths[:, None]
    query = torch.randn(B, H)
    context, alpha = attend(scorer, scorer.keys(memory), memory, mask_bias(mask), query)
    assert alpha.shape == (B, S) and context.shape == (B, H)
    assert torch.allclose(alpha.sum(-1), torch.ones(B))
    assert (alpha >= 0).all()
    assert (alpha[~mask] == 0).all(), "padding must get no weight"
    assert alpha[2, 0] == 1.0   # one real position takes all the weight
    # c_j = sum_i alpha_ij h_i
    assert torch.allclose(context, (alpha.unsqueeze(-1) * memory).sum(1), atol=1e-6)


def test_scores_follow_their_equations():
    torch.manual_seed(1)
    h, s = torch.randn(1, 5, 8), torch.randn(1, 8)
    dot = make_scorer("dot", 8, 8, 8)
    assert torch.allclose(dot.score(dot.keys(h), s), h[0] @ s[0])
    gen = make_scorer("general", 8, 8, 8)
    assert torch.allclose(gen.score(gen.keys(h), s), h[0] @ gen.W.weight.T @ s[0], atol=1e-5)
    add = make_scorer("additive", 8, 8, 6)
    expected = torch.tanh(h[0] @ add.W1.weight.T + add.W2(s)) @ add.v.weight[0]
    assert torch.allclose(add.score(add.keys(h), s)[0], expected, atol=1e-5)
    sd = make_scorer("scaled-dot", 8, 8, 4)
    expected = (h[0] @ sd.W.weight.T) @ (sd.U.weight @ s[0]) / 2.0
    assert torch.allclose(sd.score(sd.keys(h), s)[0], expected, atol=1e-5)


def test_dot_needs_equal_sizes_and_unknown_names_fail():
    with pytest.raises(ValueError, match="enc_dim == dec_dim"):
        make_scorer("dot", 8, 6, 8)
    with pytest.raises(ValueError, match="unknown attention"):
        make_scorer("cosine", 8, 8, 8)
