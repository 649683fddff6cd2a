"""Michel's importance measured a batch of pairs at a time (one forward, one backward, per-row
gates) equals the same measured one pair at a time (pair_gradients, kept as the independent
reference), on a tiny Marian, T5 and M2M100 with random nonzero biases and norms, and on the
shipped en-fr-transformer."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hub_models import EN, FR
from s2s import head_importance as HI
from s2s.checkpoint import load_translator
from s2s.decode import usable_pairs
from s2s.hooks import KINDS, head_counts, scaled_heads

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "checkpoints" / "en-fr-transformer"
PAIRS = list(zip(EN, FR))


def roughened(tr):
    """The model with every bias and norm random and nonzero (a fresh model's zeros and ones hide terms)."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in tr.model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
        bias = getattr(getattr(tr.model, "hf", None), "final_logits_bias", None)
        if bias is not None:
            bias.add_(torch.randn(bias.shape, generator=g) * 0.1)
    return tr


@pytest.fixture(scope="module")
def models(hub_models):
    out = {name: roughened(load_translator(path)) for name, path in hub_models.items()}
    out["en-fr-transformer"] = load_translator(SHIPPED)
    return out


def reference(tr, pairs):
    """Importance and confidence from pair_gradients, one pair at a time."""
    _, srcs, tgts = usable_pairs(tr, pairs)
    total = {k: 0.0 for k in KINDS}
    for s, t in zip(srcs, tgts):
        grads, _ = HI.pair_gradients(tr.model, s, t)
        for k in KINDS:
            total[k] = total[k] + grads[k].double()
    return {k: (v / len(srcs)).numpy() for k, v in total.items()}, list(zip(srcs, tgts))


@pytest.mark.parametrize("name", ["marian", "t5", "m2m100", "en-fr-transformer"])
def test_batched_gradients_and_weights_equal_one_pair_at_a_time(models, name):
    tr = models[name]
    _, srcs, tgts = usable_pairs(tr, PAIRS)
    ids = list(zip(srcs, tgts))
    assert len({len(s) for s in srcs}) > 1 and len({len(t) for t in tgts}) > 1      # padding on both sides
    grads, weights = HI.batch_gradients(tr.model, ids, tr.tokenizer.pad_id)
    for b, (s, t) in enumerate(ids):
        one, w = HI.pair_gradients(tr.model, s, t)
        for k in KINDS:
            assert float(one[k].abs().max()) > 0
            torch.testing.assert_close(grads[k][b], one[k], rtol=1e-4, atol=1e-6 * float(one[k].abs().max()))
            assert weights[k][b].shape == w[k].shape
            torch.testing.assert_close(weights[k][b].float(), w[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["marian", "t5", "m2m100", "en-fr-transformer"])
def test_importance_equals_the_one_pair_reference(models, name):
    tr = models[name]
    expected, _ = reference(tr, PAIRS)
    batched = HI.importance(tr, PAIRS, batch_size=3)
    alone = HI.importance(tr, PAIRS, batch_size=1)
    for k in KINDS:
        scale = float(np.abs(expected[k]).max())
        assert scale > 0
        np.testing.assert_allclose(batched.importance[k], expected[k], rtol=1e-5, atol=1e-5 * scale)
        np.testing.assert_allclose(alone.importance[k], expected[k], rtol=1e-5, atol=1e-5 * scale)
        np.testing.assert_allclose(batched.confidence[k], alone.confidence[k], rtol=1e-5, atol=1e-6)
    assert batched.roles == alone.roles and batched.order() == alone.order()


def test_a_gate_per_row_scales_each_row_on_its_own(models):
    """scaled_heads with (batch, layers, heads) gates: row b's output is the output of row b's
    gates applied to the whole batch."""
    tr = models["marian"]
    _, srcs, tgts = usable_pairs(tr, PAIRS[:2])
    counts = head_counts(tr.model)
    rows = [{k: torch.rand(*n, generator=torch.Generator().manual_seed(r)) for k, n in counts.items()}
            for r in range(2)]
    from s2s.decode import pad_batch
    from s2s.hooks import decoder_start, forced_batch_pass
    src = pad_batch(srcs, tr.tokenizer.pad_id)
    tgt_in = pad_batch([[decoder_start(tr.model)] + t[:-1] for t in tgts], tr.tokenizer.pad_id)
    lens = torch.tensor([len(s) for s in srcs])
    with torch.no_grad():
        with scaled_heads(tr.model, {k: torch.stack([r[k] for r in rows]) for k in counts}):
            both = forced_batch_pass(tr.model, src, lens, tgt_in).logits
        for r in range(2):
            with scaled_heads(tr.model, rows[r]):
                one = forced_batch_pass(tr.model, src, lens, tgt_in).logits
            torch.testing.assert_close(both[r], one[r], rtol=1e-5, atol=1e-5)
            assert not torch.allclose(both[r], one[1 - r][: both.size(1)], atol=1e-3)


def test_importance_stops_between_batches(models):
    tr = models["marian"]
    asked = []

    def stop():
        asked.append(1)
        return len(asked) > 2

    seen = []
    with pytest.raises(HI.Stopped):
        HI.importance(tr, PAIRS, batch_size=2, stop=stop, progress=lambda share, what: seen.append(share))
    assert seen == [0.25, 0.5]
    assert len(HI.length_batches([([1] * n, [1]) for n in (5, 1, 3, 2)], 2)) == 2
    assert HI.length_batches([([1] * n, [1]) for n in (5, 1, 3, 2)], 2) == [[1, 3], [2, 0]]



def test_a_long_run_or_a_large_model_gets_one_line_before_it_starts(models, hub_models, tmp_path, capsys):
    tr = models["marian"]
    est = HI.estimate_seconds(tr, PAIRS, decodings=5, batch_size=4)
    assert est["importance"] > 0 and est["pruning"] > 0
    assert est["total"] == pytest.approx(est["importance"] + est["pruning"]) and est["measuring"] > 0
    assert HI.estimate_seconds(tr, PAIRS)["pruning"] == 0.0
    line = HI.memory_line(2_000_000_000, available=8 * 2**30)
    assert line is not None and "2,000 M parameters" in line and "22.4 GB" in line and "8.0 GB free" in line
    assert HI.memory_line(1_000_000, available=8 * 2**30) is None
    assert [HI.duration(s) for s in (40, 600, 4 * 3600)] == ["40 s", "10 min", "4.0 hours"]
    from s2s.heads import main
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{e}\t{f}\n" for e, f in PAIRS))
    rc = main(["prune", "--model", str(hub_models["marian"]), "--pairs", str(pairs), "--max-minutes", "0.00001"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "would take about" in err[0] and "decodings" in err[0]
