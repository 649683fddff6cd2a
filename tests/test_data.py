from s2s.data import join_pairs, read_pairs, split_pairs, token_batches, write_splits
from s2s.tokenizer import BOS, EOS, PAD


def test_split_is_by_source_sentence_and_deterministic(tmp_path):
    # every source sentence has three translations: none may cross splits
    pairs = [(f"sentence {i}", f"phrase {i} v{k}") for i in range(300) for k in range(3)]
    a = split_pairs(pairs, n_valid=20, n_test=30, seed=5)
    b = split_pairs(pairs, n_valid=20, n_test=30, seed=5)
    assert a.test == b.test and a.valid == b.valid
    train_src = {s for s, _ in a.train}
    assert not train_src & {s for s, _ in a.test}
    assert not train_src & {s for s, _ in a.valid}
    assert len(a.test) == 30 and len({s for s, _ in a.test}) == 30   # one reference each
    assert len(a.train) == (300 - 50) * 3
    # joined test pairs are test pairs put together, three at a time
    test_set = set(a.test)
    for src, tgt in a.test_joined3:
        assert src.count("sentence") == 3 and tgt.count("phrase") == 3
    assert all(any(s in src for s, _ in test_set) for src, _ in a.test_long)
    write_splits(a, tmp_path)
    assert read_pairs(tmp_path / "test.tsv") == a.test


def test_join_pairs():
    assert join_pairs([("A.", "X."), ("B.", "Y.")]) == ("A. B.", "X. Y.")


def test_read_pairs_skips_malformed_lines(tmp_path):
    f = tmp_path / "x.tsv"
    f.write_text("Hi.\tSalut.\tattribution\nbroken line\n\t\nGo.\tVa !\n", encoding="utf-8")
    assert read_pairs(f) == [("Hi.", "Salut."), ("Go.", "Va !")]


def test_batches_respect_token_budget_and_cover_everything():
    examples = [([5] * (i % 13 + 1), [6] * (i % 17 + 1)) for i in range(500)]
    seen = 0
    for b in token_batches(examples, max_tokens=120, bos=BOS, seed=0):
        assert b.tgt_out.numel() <= 120 or b.tgt_out.size(0) == 1
        assert (b.tgt_in[:, 0] == BOS).all()
        # every row ends in EOS right after its last real token
        for r in range(b.src.size(0)):
            n = int(b.src_len[r])
            assert b.src[r, n - 1] == EOS and (b.src[r, n:] == PAD).all()
        seen += b.src.size(0)
    assert seen == 500
