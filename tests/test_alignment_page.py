"""AppTest: the Alignment & Explanation page, on tiny checkpoints made by the tests."""
import json
import shutil

import numpy as np
import pytest
from test_alignment import reversal_gold

from conftest import ROOT, app_page, away_and_back
from s2s.alignment import links, read_gold, score, word_attention
from s2s.checkpoint import load_translator
from test_app import array

HOSTILE = '<b>bold</b> "quoted" &amp; \x00\x1b[31m 😀 '


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, tiny_additive, tiny_none, untrained_translators):
    root = tmp_path_factory.mktemp("align_zoo")
    shutil.copytree(tiny_additive, root / "reverser")
    shutil.copytree(tiny_none, root / "fixed-vector")
    shutil.copytree(untrained_translators["dot"].path, root / "untrained-dot")
    return root


@pytest.fixture
def env(zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setenv("S2S_HANSARDS", str(reversal_gold(tmp_path / "hansards")))
    return zoo


def page(**state):
    at = app_page("pages/alignment.py")
    for k, v in state.items():
        at.session_state[k] = v
    return at.run() if state else at


def chart(at, key):
    for c in at.get("plotly_chart"):
        if key in c.proto.id:
            return json.loads(c.proto.spec)
    return None


def texts(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [e.value for e in at.error]
                     + [i.value for i in at.info])


def test_models_are_the_attention_checkpoints_by_config(env):
    at = page()
    assert not at.exception and at.title[0].value == "Alignment & Explanation"
    box = at.selectbox(key="align_model")
    assert sorted(box.options) == ["reverser", "untrained-dot"]
    assert "additive attention" in texts(at)


def test_gold_pair_scores_as_the_library_does(env, tmp_path):
    at = page(align_model="reverser", gold_source="test", gold_pair=2, rule="argmax")
    assert not at.exception, at.exception
    tr = load_translator(env / "reverser")
    gold = read_gold(tmp_path / "hansards", "test")[1]
    w = word_attention(tr, gold.english, gold.french)
    s = score([links(w, "argmax")], [gold])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["AER"] == f"{s.aer:.3f}" and metrics["Precision"] == f"{s.precision:.3f}"
    fig = chart(at, "gold_figure")
    names = [t.get("name") for t in fig["data"]]
    assert names[1:] == ["gold Sure", "gold Possible", "model"]
    sure = fig["data"][1]
    assert sorted(zip(sure["x"], sure["y"])) == sorted(gold.sure)
    assert len(fig["data"][3]["x"]) == len(links(w, "argmax"))


def test_shipped_trial_pairs_open_without_the_test_set(zoo, monkeypatch, tmp_path):
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    monkeypatch.setenv("S2S_HANSARDS", str(tmp_path / "absent"))
    at = page()
    assert not at.exception
    assert at.radio(key="gold_source").options == ["Trial set (37 pairs)", "Type a pair"]
    assert at.number_input(key="gold_pair").max == 37 and chart(at, "gold_figure") is not None


@pytest.mark.parametrize("english, french, message", [
    ("the house", "", "empty"), (HOSTILE, HOSTILE, None), ("a " * 90, "b", "under 80")])
def test_typed_pairs_refuse_bad_input_and_show_text_as_text(env, english, french, message):
    at = page(gold_source="typed")
    at.text_input(key="typed_en").set_value(english)
    at.text_input(key="typed_fr").set_value(french).run()
    assert not at.exception
    if message:
        assert any(message in e.value for e in at.error)
    else:
        assert "no human links" in texts(at) and "Red squares" not in texts(at)
        fig = chart(at, "gold_figure")
        assert fig["layout"]["xaxis"]["title"]["text"] == "English (your words)"       # no gold words here
        assert not at.text_input(key="typed_en").max_chars        # no counter over the end of the text
        ticks = fig["layout"]["xaxis"]["ticktext"]
        assert "&lt;b&gt;bold&lt;/b&gt;" in ticks and "&amp;amp;" in ticks        # escaped exactly once


def test_rule_changes_the_links(env):
    at = page(align_model="reverser", gold_source="test", gold_pair=1, rule="argmax")
    n_argmax = len(chart(at, "gold_figure")["data"][3]["x"])
    at.selectbox(key="rule").set_value("threshold").run()
    assert not at.exception and "threshold" in texts(at)
    assert n_argmax == 4


def test_the_shift_rule_reads_the_attention_one_step_later(env, tmp_path):
    """rule "shift": the heatmap and links are the attention read at the step that has each
    French word as input, as the library reads it, and the caption says so."""
    at = page(align_model="reverser", gold_source="test", gold_pair=2, rule="shift")
    assert not at.exception, at.exception
    gold = read_gold(tmp_path / "hansards", "test")[1]
    w = word_attention(load_translator(env / "reverser"), gold.english, gold.french, shift=True)
    fig = chart(at, "gold_figure")
    assert sorted(zip(fig["data"][3]["x"], fig["data"][3]["y"])) == sorted(links(w, "shift"))
    np.testing.assert_allclose(array(fig["data"][0]["z"]), w, atol=1e-6)
    assert "one step later" not in texts(at) and "has it as input (shift)" in texts(at)


def tau_line(at) -> str:
    """The "Is it an explanation?" caption: each method's median Kendall τ against leave-one-out."""
    return next((c.value for c in at.caption if c.value.startswith("Is it an explanation?")), "")


def test_the_tau_line_names_every_method_that_has_run():
    """Issue #54: ui.alignment.attribution.explanation_taus, the τ line's figures: every one-pass method
    the contributions hold and every gradient attribution run so far (integrated gradients once
    it has run), in the method list's order; leave-one-out never against itself."""
    from types import SimpleNamespace

    from s2s.attributions import agreement
    from ui.alignment.attribution import explanation_taus, tau_caption
    rng = np.random.default_rng(0)
    loo, weights, gxi, ig = (rng.dirichlet(np.ones(4), size=3) for _ in range(4))
    c = SimpleNamespace(layers={"weights": weights[None]}, matrix=lambda method: weights)
    offered = ["weights", "norm", "grad-x-input", "ig", "loo"]          # norm: not in these contributions
    median = lambda m: float(np.median(agreement(m, loo)[0]))            # noqa: E731
    before = explanation_taus(c, offered, loo, {"grad_x_input": gxi})
    assert list(before) == ["weights", "grad × input"]
    after = explanation_taus(c, offered, loo, {"grad_x_input": gxi, "integrated_gradients": ig,
                                               "leave_one_out": loo})
    assert after == pytest.approx({"weights": median(weights), "grad × input": median(gxi),
                                   "integrated gradients": median(ig)})
    assert tau_caption(after).endswith(f"integrated gradients {median(ig):+.2f}.")
    # a method whose every row is constant has no ranking: named, with a dash, not "+nan"
    assert tau_caption({"value zeroing": float("nan")}).endswith("value zeroing — (every row constant: no ranking).")


def test_attribution_tab_switches_methods_over_one_map(env):
    """One map, one method switch: the weights are the forced attention, norm reweights them,
    grad x input and leave-one-out draw at once, integrated gradients only when asked."""
    from s2s.decode import greedy
    at = page(align_model="reverser", alignment_tab="Attention vs attribution")
    at.text_area(key="explain_text").set_value("a b c d")
    at.text_input(key="explain_reference").set_value("").run()
    assert not at.exception, at.exception
    radio = at.radio(key="explain_method")
    assert list(radio.options) == ["weights", "norm", "grad × input", "integrated gradients", "leave-one-out"]
    fig = chart(at, "contribution_map")
    z = array(fig["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(z, greedy(load_translator(env / "reverser"), "a b c d").attention, atol=1e-5)
    assert np.allclose(z.sum(1), 1.0) and len(fig["data"]) == 1          # no source-share bars for the weights
    assert "weights" in texts(at) and "Forced decoding of the greedy output" in texts(at)
    radio.set_value("norm").run()
    norm = array(chart(at, "contribution_map")["data"][0]["z"]).astype(float)
    assert not at.exception and np.allclose(norm.sum(1), 1.0) and not np.allclose(norm, z)
    at.radio(key="explain_method").set_value("grad-x-input").run()
    assert not at.exception and chart(at, "contribution_map") is not None
    assert "Kendall τ" in texts(at) and "leave-one-out" in texts(at)
    assert tau_line(at).startswith("Is it an explanation?") and "grad × input" in tau_line(at)
    assert "integrated gradients" not in tau_line(at)                        # not run yet
    at.radio(key="explain_method").set_value("ig").run()
    assert not at.exception and chart(at, "contribution_map") is None        # not run yet: asked for
    assert any("about" in i.value and "runs the model many times" in i.value for i in at.info)
    at.button(key="explain_run").click().run()
    assert not at.exception, at.exception
    ig = array(chart(at, "contribution_map")["data"][0]["z"]).astype(float)
    assert np.allclose(ig.sum(1), 1.0)
    # issue #54: once run, integrated gradients is in the τ line with every other method that has run
    names = [part.rsplit(" ", 1)[0] for part in tau_line(at).split(": ", 1)[1].rstrip(".").split(", ")]
    assert names == ["weights", "norm", "grad × input", "integrated gradients"], tau_line(at)
    at.radio(key="explain_method").set_value("weights").run()
    at.radio(key="explain_method").set_value("ig").run()                   # once run, kept for this sentence
    assert chart(at, "contribution_map") is not None
    assert "JSD" in texts(at) and chart(at, "counterfactual_figure") is not None
    before = texts(at)
    at.radio(key="cf_kind").set_value("permute").run()
    assert not at.exception and texts(at) != before


def test_a_transformer_gets_every_method_a_layer_and_the_source_share(env, untrained_translators, tmp_path,
                                                                       monkeypatch):
    import shutil
    zoo = tmp_path / "zoo"
    shutil.copytree(env, zoo)
    shutil.copytree(untrained_translators["transformer"].path, zoo / "transformer")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    at = page(align_model="transformer", alignment_tab="Attention vs attribution", explain_method="alti")
    at.text_area(key="explain_text").set_value("a b c d")
    at.text_input(key="explain_reference").set_value("d c b a").run()
    assert not at.exception, at.exception
    assert list(at.radio(key="explain_method").options) == [
        "weights", "norm", "ALTI+", "rollout", "value zeroing", "grad × input", "integrated gradients",
        "leave-one-out"]
    fig = chart(at, "contribution_map")
    assert len(fig["data"]) == 2                                            # the map and the source-share bars
    share = array(fig["data"][1]["x"]).astype(float)
    assert ((0 <= share) & (share <= 1)).all()
    assert "from the source" in texts(at)
    slider = at.select_slider(key="explain_layer")
    assert list(slider.options) == ["1", "2"] and slider.value == 2
    last = array(fig["data"][0]["z"]).astype(float)
    slider.set_value(1).run()
    first = array(chart(at, "contribution_map")["data"][0]["z"]).astype(float)
    assert not at.exception and not np.allclose(first, last)
    assert "decoder layer 1" in texts(at)
    at.radio(key="explain_method").set_value("value-zeroing").run()
    assert not at.exception and len(chart(at, "contribution_map")["data"]) == 1
    # issue #62: the τ line names every method that has run: the five one-pass methods, and grad x input
    names = [part.rsplit(" ", 1)[0] for part in tau_line(at).split(": ", 1)[1].rstrip(".").split(", ")]
    assert names == ["weights", "norm", "ALTI+", "rollout", "value zeroing", "grad × input"], tau_line(at)
    # issue #62: counterfactual attention is for recurrent models (documented): for a Transformer one
    # info line under its heading, no red box, and none of its controls
    assert "Counterfactual attention at one step" in [h.value for h in at.subheader]
    assert any("counterfactual replaces a recurrent decoder" in i.value for i in at.info)
    assert not at.error and chart(at, "counterfactual_figure") is None
    assert not [w for w in list(at.selectbox) + list(at.radio) + list(at.number_input)
                if w.key in ("cf_step", "cf_kind", "cf_eps")]


def test_a_long_run_waits_for_a_button_that_goes_once_pressed(env, tiny_transformer, tmp_path, monkeypatch):
    """Issue #62: a shipped Transformer's every layer x head is scored at once when it should be
    quick; one that should take over CORPUS_ASK_S waits for a button that says how long, as Your
    corpus does; once pressed, the offer (its info box and button) is gone from above the results,
    on that run and after."""
    import ui.alignment.measurements as measure
    zoo = tmp_path / "zoo"
    shutil.copytree(env, zoo)
    shutil.copytree(tiny_transformer, zoo / "transformer")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    measure.head_scoring_runs.clear()
    measure.corpus_runs.clear()
    at = page(align_model="transformer", rule="argmax")
    assert not at.exception, at.exception
    assert chart(at, "head_aer") is not None and not [b for b in at.button if b.key == "heads_run"]   # quick: at once
    rates = measure.head_scoring_runs()["rate"]
    assert len(rates) == 1                                                 # measured by that run
    rates.update({p: 1.0 for p in rates})                                  # as if it had taken a second a word
    monkeypatch.setattr(measure, "CORPUS_S_PER_PARAM_WORD", 1e-6)          # and a corpus, minutes by its size
    at.selectbox(key="rule").set_value("grow-diag").run()                  # a scoring not run yet
    assert not at.exception and chart(at, "head_aer") is None
    offer = [i.value for i in at.info if "every head kept" in i.value]
    assert offer and "from its speed on an earlier scoring here" in offer[0]   # its rate, measured by the first
    assert at.button(key="heads_run").label.startswith("Score every layer × head (")
    at.button(key="heads_run").click().run()
    assert not at.exception and chart(at, "head_aer") is not None
    assert not [i for i in at.info if "every head kept" in i.value] and not [b for b in at.button
                                                                             if b.key == "heads_run"]
    at.number_input(key="gold_pair").set_value(3).run()                    # another pair: scored already
    assert chart(at, "head_aer") is not None and not [b for b in at.button if b.key == "heads_run"]
    # Your corpus: the same offer, gone once pressed
    at.session_state["alignment_tab"] = "Your corpus"
    at.run()
    assert not at.exception and not at.metric
    assert any("Aligning these 37 pairs" in i.value for i in at.info)
    at.button(key="corpus_run").click().run()
    assert not at.exception, at.exception
    assert {m.label for m in at.metric} >= {"AER (whole corpus)"} and chart(at, "corpus_figure") is not None
    assert not [i for i in at.info if "Aligning these" in i.value]
    assert not [b for b in at.button if b.key == "corpus_run"]


def test_a_link_to_a_transformer_only_method_on_a_recurrent_model_says_so(env):
    at = page(align_model="reverser", alignment_tab="Attention vs attribution", explain_method="alti")
    assert not at.exception, at.exception
    assert at.radio(key="explain_method").value == "weights"
    assert "ALTI+ does not apply to reverser" in texts(at)


def test_attribution_tab_never_forces_the_examples_french_on_new_english(env):
    at = page(align_model="reverser", alignment_tab="Attention vs attribution")
    assert "Forced decoding of the reference" in texts(at)          # the example with its own French
    at.text_area(key="explain_text").set_value("a b c d").run()      # new English: the example's French goes
    assert not at.exception and at.text_input(key="explain_reference").value == ""
    assert "Forced decoding of the greedy output" in texts(at) and "model's own greedy output" in texts(at)
    at.text_input(key="explain_reference").set_value("d c b a").run()
    assert "Forced decoding of the reference" in texts(at) and "model's own greedy output" not in texts(at)
    at.text_area(key="explain_text").set_value("b c d a").run()      # a French of the user's own stays
    assert at.text_input(key="explain_reference").value == "d c b a"


@pytest.mark.parametrize("text, message", [("   ", "empty"), ("a " * 200, "limited to")])
def test_attribution_tab_refuses_bad_input(env, text, message):
    at = page(align_model="reverser", alignment_tab="Attention vs attribution")
    at.text_area(key="explain_text").set_value(text).run()
    assert not at.exception and any(message in e.value for e in at.error)
    assert "Counterfactual attention at one step" not in [h.value for h in at.subheader]   # no heading over nothing


def test_a_long_french_reference_gets_a_message_not_a_counter(env):
    at = page(align_model="reverser", alignment_tab="Attention vs attribution")
    assert not at.text_input(key="explain_reference").max_chars         # no counter over the text
    at.text_input(key="explain_reference").set_value("d c b a " * 200).run()
    assert not at.exception and any("reference is 1,599 characters long; the limit is 1,000" in e.value
                                    for e in at.error)


def test_attribution_tab_shows_html_as_text(env):
    at = page(align_model="reverser", alignment_tab="Attention vs attribution")
    at.text_area(key="explain_text").set_value("a <b>b</b> c").run()
    assert not at.exception
    shown = [m.value for m in at.markdown if "s2s-text" in m.value]
    assert shown and all("<b>" not in s.split(">", 1)[1] for s in shown)
    # characters the model cannot read are named, not silently dropped (they become <unk>)
    assert any("of the English are not in this model's vocabulary" in c.value for c in at.caption)  # < > /
    at.text_input(key="explain_reference").set_value("d 😀 b a").run()
    assert not at.exception
    assert any("1 character of the French is not in this model's vocabulary" in c.value and "😀" in c.value
               for c in at.caption)


def test_no_attention_model_is_a_clear_message(zoo, tmp_path, monkeypatch):
    root = tmp_path / "only-none"
    shutil.copytree(zoo / "fixed-vector", root / "fixed-vector")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(root))
    at = page()
    assert not at.exception and "No translation checkpoint with attention" in at.error[0].value


def test_the_test_set_summary_fits_in_two_narrow_tables(env):
    import json as _json
    at = page(align_model="reverser", alignment_tab="Attention vs attribution")
    assert not at.exception
    rows = _json.loads((ROOT / "results" / "explanation.json").read_text())["rows"]
    tables = [d.value for d in at.dataframe]
    tau = next(t for t in tables if list(t.columns) == ["model", "grad×input", "IG", "LOO"])
    top = next(t for t in tables if list(t.columns) == ["model", "grad×input", "IG", "LOO", "permuted"])
    assert list(tau["model"]) == [r["model"] for r in rows]
    assert list(tau["LOO"]) == [r["kendall_tau"]["leave_one_out"]["median"] for r in rows]
    for shown, r in zip(top["permuted"], rows):      # a Transformer's row has none: nothing to permute
        assert shown == ("—" if r["permutation_survival"] is None
                         else f"{100 * r['permutation_survival']:.0f}%"), r["model"]
    if any(r["permutation_survival"] is None for r in rows):
        assert "no permuted figure" in texts(at)
    assert f"{rows[0]['sentences']} sentences ({rows[0]['steps']:,} steps)" in texts(at)


def test_every_model_table_shows_each_kind_in_full(env):
    import json as _json
    at = page()
    assert not at.exception
    rows = _json.loads((ROOT / "results" / "alignment.json").read_text())["rows"]
    table = at.table[0].value
    assert list(table["kind"]) == [r["kind"] for r in rows]          # wrapped in a static table, never cut
    assert list(table["aligner"]) == [r["model"] for r in rows]


def test_the_chosen_pair_model_and_rule_survive_a_visit_to_another_page(env):
    at = page(gold_pair=2, rule="argmax")
    at.selectbox(key="align_model").set_value("reverser").run()
    at = away_and_back(at, "pages/translate.py", "pages/alignment.py")
    assert not at.exception
    assert at.selectbox(key="align_model").value == "reverser"
    assert at.number_input(key="gold_pair").value == 2 and at.selectbox(key="rule").value == "argmax"


# ------------------------------------------------------------------ Your corpus

TRIAL = ROOT / "examples" / "hansards_trial"


def command_line(args, capsys) -> dict:
    from s2s.alignment import main
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def corpus_page(**state):
    return page(alignment_tab="Your corpus", **state)


def test_the_example_corpus_scores_and_downloads_as_the_command_line(env, tmp_path, downloads, capsys):
    """The 37 trial pairs: the page's AER, precision and recall and its links file are the
    corpus command's, byte for byte; the per-pair table has a row per pair."""
    at = corpus_page(align_model="reverser", corpus_rule="grow-diag")
    assert not at.exception, at.exception
    gold = read_gold(TRIAL, "trial")
    tsv = tmp_path / "trial.tsv"
    tsv.write_text("".join(" ".join(g.english) + "\t" + " ".join(g.french) + "\n" for g in gold), encoding="utf-8")
    out = tmp_path / "links.txt"
    r = command_line(["--model", str(env / "reverser"), "--input", str(tsv), "--output", str(out),
                      "--rule", "grow-diag", "--gold", str(TRIAL), "--split", "trial"], capsys)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["AER (whole corpus)"] == f"{r['aer']:.3f}" and metrics["Precision"] == f"{r['precision']:.3f}"
    assert metrics["Recall"] == f"{r['recall']:.3f}"
    name = "hansards-trial_reverser_grow-diag_links.txt"
    assert downloads[name] == out.read_text(encoding="utf-8")
    table = downloads["hansards-trial_reverser_grow-diag_pairs.csv"].splitlines()
    assert table[0] == "pair,English,French,links,AER,precision,recall" and len(table) == 1 + len(gold)
    assert "37 of 37 lines aligned by reverser (grow-diag)" in texts(at)
    assert "500 pairs and 200 KB, a file or a paste" in texts(at)


def upload(at, pairs: bytes, gold: bytes | None = None, name="mine.tsv"):
    at.radio(key="corpus_source").set_value("upload").run()
    at.file_uploader(key="corpus_file").set_value((name, pairs, "text/tab-separated-values"))
    if gold is not None:
        at.file_uploader(key="corpus_gold").set_value(("gold.txt", gold, "text/plain"))
    return at.run()


PAIRS = b"a b c d\td c b a\nno tab on this line\nc a f\tf a c\n"
GOLD = b"0-3 1-2 2-1 3-0\n\n0-2 1?1 2-0\n"


def test_an_uploaded_corpus_with_gold_leaves_bad_lines_empty_and_browses_pairs(env, downloads):
    at = upload(corpus_page(align_model="reverser", corpus_rule="argmax"), PAIRS, GOLD)
    assert not at.exception, at.exception
    assert "2 of 3 lines aligned by reverser (argmax); 1 could not be" in texts(at)
    lines = downloads["mine_reverser_argmax_links.txt"].split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""         # three lines, the second empty
    tr = load_translator(env / "reverser")
    w = word_attention(tr, ("c", "a", "f"), ("f", "a", "c"))
    assert lines[2] == " ".join(f"{e}-{f}" for e, f in sorted(links(w, "argmax")))
    at.number_input(key="corpus_pair").set_value(3).run()
    fig = chart(at, "corpus_figure")
    np.testing.assert_allclose(array(fig["data"][0]["z"]), w, atol=1e-6)
    assert sorted(zip(fig["data"][1]["x"], fig["data"][1]["y"])) == [(0, 2), (2, 0)]     # Sure; 1?1 Possible
    at.number_input(key="corpus_pair").set_value(2).run()
    assert "Line 2 could not be aligned" in " ".join(w.value for w in at.warning)


def test_pasted_pairs_are_aligned_as_the_same_file_would_be(env, downloads):
    """#47: a box for a few pairs, beside the upload: a tab (two spreadsheet columns pasted) or
    ` ||| ` between the sides, the same links as the file of the same lines, the same limits."""
    at = upload(corpus_page(align_model="reverser", corpus_rule="argmax"), PAIRS)
    from_file = downloads["mine_reverser_argmax_links.txt"]
    at.radio(key="corpus_source").set_value("paste").run()
    assert not at.exception and "Paste pairs in the box" in " ".join(i.value for i in at.info)
    at.text_area(key="corpus_text").set_value("a b c d ||| d c b a\nno tab on this line\nc a f\tf a c\n").run()
    assert not at.exception, at.exception
    assert "2 of 3 lines aligned by reverser (argmax); 1 could not be" in texts(at)
    assert downloads["pasted-pairs_reverser_argmax_links.txt"] == from_file
    at.text_area(key="corpus_text").set_value("a\tb\n" * 501).run()
    assert "has 501 lines; the limit here is 500 pairs" in " ".join(e.value for e in at.error)


def test_the_per_pair_table_is_as_tall_as_its_rows(env, monkeypatch):
    """Issue #54: the per-pair table had a fixed 250 px, 3 blank rows under a 3-pair paste; it is
    as tall as its rows and header now, and 250 px (scrolling) for the 37 trial pairs."""
    import ui.show
    heights, table = [], ui.show.table

    def recorded(df, *args, **kwargs):
        heights.append((len(df), kwargs.get("height")))
        return table(df, *args, **kwargs)
    monkeypatch.setattr(ui.show, "table", recorded)
    at = corpus_page(align_model="reverser", corpus_rule="argmax", corpus_source="paste",
                     corpus_text="a b c d ||| d c b a\nno tab on this line\nc a f\tf a c\n")
    assert not at.exception, at.exception
    assert heights[-1] == (3, 4 * ui.show.GRID_ROW_PX + 3)        # header and 3 rows: no blank row
    at.radio(key="corpus_source").set_value("example").run()
    assert heights[-1] == (37, 250)
    assert ui.show.grid_height(0, 250) == ui.show.GRID_ROW_PX + 3 and ui.show.grid_height(6, 250) == 248


@pytest.mark.parametrize("pairs,gold,message", [
    (b"a\tb\n" * 60_000, None, "the limit here is 200 KB"),
    (b"a b\tb a\n" * 501, None, "has 501 lines; the limit here is 500 pairs"),
    (b"no tabs at all\n\xff\xfe\n", None, "no line of mine.tsv is English<TAB>French"),
    (PAIRS, b"0-3\n", "gold.txt has 1 lines but the pairs are 3"),
    (PAIRS, b"0-9\n\n\n", "gold.txt line 1: a link is out of range"),
    (PAIRS, b"0-x\n\n\n", "expected links like 0-1"),
    (PAIRS, b"\xff\n\n\n", "gold.txt is not UTF-8 text"),
])
def test_an_upload_over_the_limits_or_not_in_the_format_is_a_message(env, pairs, gold, message):
    at = upload(corpus_page(align_model="reverser"), pairs, gold)
    assert not at.exception, at.exception
    assert message in " ".join(e.value for e in at.error)
    assert chart(at, "corpus_figure") is None


def test_a_transformers_corpus_is_scored_per_layer_and_head(tiny_transformer, tmp_path, monkeypatch, downloads):
    from s2s.alignment import best_head
    from s2s.alignment.corpus import corpus_head_scores, corpus_weights, parse_corpus, parse_pharaoh_file, pharaoh_gold
    root = tmp_path / "zoo"
    shutil.copytree(tiny_transformer, root / "transformer")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(root))
    at = upload(corpus_page(align_model="transformer", corpus_rule="argmax"), PAIRS, GOLD)
    assert not at.exception, at.exception
    assert len(at.selectbox(key="corpus_head").options) == 1 + 2 * 4         # the head mean and 2 x 4 heads
    pairs = parse_corpus(PAIRS)
    gold = pharaoh_gold(parse_pharaoh_file(GOLD, "gold.txt"), pairs, "gold.txt")
    table = corpus_head_scores(corpus_weights(load_translator(root / "transformer"), pairs, heads=True), gold, "argmax")
    np.testing.assert_allclose(array(chart(at, "corpus_head_aer")["data"][0]["z"]),
                               [[s.aer for s in row] for row in table], atol=1e-9)
    l, h = best_head(table)
    at.selectbox(key="corpus_head").set_value(f"{l}-{h}").run()
    assert {m.label: m.value for m in at.metric}["AER (whole corpus)"] == f"{table[l][h].aer:.3f}"
    assert f"mine_transformer_argmax_L{l + 1}H{h + 1}_links.txt" in downloads


def test_exports_say_what_they_are(env, tmp_path, downloads):
    """The gold pair's JSON names the model, the pair, the rule and the matrix, rows and
    columns as positions with their words, the links and scores as the library computes them;
    the attributions' JSON holds all four raw matrices; every Plotly camera saves SVG."""
    at = page(align_model="reverser", gold_source="test", gold_pair=2, rule="argmax")
    assert not at.exception, at.exception
    got = json.loads(downloads["alignment_reverser_test2_argmax.json"])
    gold = read_gold(tmp_path / "hansards", "test")[1]
    w = word_attention(load_translator(env / "reverser"), gold.english, gold.french)
    assert got["model"] == "reverser" and got["rule"] == "argmax" and got["english"] == list(gold.english)
    assert got["matrix"].startswith("word-level cross-attention, French words (rows) x English words")
    assert got["attention"]["rows"] == [{"position": j, "token": f} for j, f in enumerate(gold.french)]
    np.testing.assert_allclose(got["attention"]["values"], w, atol=1e-6)
    assert sorted(map(tuple, got["links"])) == sorted(links(w, "argmax"))
    assert got["aer"] == pytest.approx(score([links(w, "argmax")], [gold]).aer)
    for c in at.get("plotly_chart"):
        assert json.loads(c.proto.config)["toImageButtonOptions"]["format"] == "svg"
    at = page(align_model="reverser", alignment_tab="Attention vs attribution")
    at.text_area(key="explain_text").set_value("a b a").run()
    at.text_input(key="explain_reference").set_value("a b a").run()
    name = "contributions_reverser_a-b-a_weights_reference.json"
    got = json.loads(downloads[name])
    assert got["english"] == "a b a" and got["forced_from"] == "reference"
    assert got["shown"]["method"] == "weights" and got["shown"]["layer"] is None
    assert set(got["methods"]) == {"weights", "norm"}                       # a recurrent model's one-pass methods
    cols = got["shown"]["values"]["columns"]
    assert [c["position"] for c in cols] == list(range(len(cols)))          # the two "a"s are two columns
    np.testing.assert_allclose(np.sum(got["shown"]["values"]["values"], axis=1), 1, atol=1e-4)


def test_the_address_follows_every_choice_and_reproduces_the_view(env):
    """Each choice that changes what is shown goes into the address; the app opened at that
    address shows the same; numbers out of range are clamped, bad values ignored with a note."""
    at = page(gold_source="test", gold_pair=2, rule="argmax")
    at.selectbox(key="align_model").set_value("reverser").run()
    at.selectbox(key="rule").set_value("grow-diag").run()
    q = at.query_params
    query = {k: v if isinstance(v, str) else v[0] for k, v in q.items()}
    assert query["model"] == "reverser" and query["tab"] == "Against human alignments"
    assert query["pairs"] == "test" and query["pair"] == "2" and query["rule"] == "grow-diag"
    from streamlit.testing.v1 import AppTest
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    for k, v in query.items():
        fresh.query_params[k] = v
    fresh.switch_page("pages/alignment.py")
    fresh.run()
    assert not fresh.exception, fresh.exception
    assert fresh.selectbox(key="align_model").value == "reverser" and fresh.selectbox(key="rule").value == "grow-diag"
    assert fresh.number_input(key="gold_pair").value == 2 and fresh.radio(key="gold_source").value == "test"
    assert chart(fresh, "gold_figure") == chart(at, "gold_figure")
    # the corpus tab's choices, and out-of-range or bad values from a hand-edited link
    odd = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    for k, v in {"model": "reverser", "tab": "Your corpus", "corpus_pair": "999", "corpus_rule": "nonsense"}.items():
        odd.query_params[k] = v
    odd.switch_page("pages/alignment.py")
    odd.run()
    assert not odd.exception, odd.exception
    assert odd.number_input(key="corpus_pair").value == 37                 # clamped to the trial pairs
    assert "Ignored the link's corpus_rule=" in texts(odd)
    assert str(odd.query_params["corpus_pair"]) in ("37", "['37']") and "Your corpus" in str(odd.query_params["tab"])


def test_each_method_as_an_alignment_and_an_explanation_for_the_chosen_model(env, untrained_translators, monkeypatch,
                                                                            tmp_path):
    """The table under the map: for a model the results files hold, one row per measured method
    (best layer's AER, tau against leave-one-out), as s2s.alignment.method_summary reads them;
    for any other model, one line saying where the figures come from."""
    import json as _json

    from s2s.alignment import method_summary
    aligned = _json.loads((ROOT / "results" / "alignment_methods.json").read_text())
    explained = _json.loads((ROOT / "results" / "explanation_methods.json").read_text())
    zoo = tmp_path / "zoo_with_a_shipped_name"       # a folder of its own: no cached listing of `env` applies
    shutil.copytree(env, zoo)
    shutil.copytree(untrained_translators["dot"].path, zoo / "en-fr-dot")    # a name the results files hold
    monkeypatch.setenv("S2S_CHECKPOINTS", str(zoo))
    at = page(align_model="en-fr-dot", alignment_tab="Attention vs attribution")
    assert not at.exception
    table = next(d.value for d in at.dataframe if "τ vs leave-one-out" in d.value.columns)
    want = method_summary(aligned, explained, "en-fr-dot")
    assert len(table) == len(want) and list(table["method"])[:2] == ["weights", "norm"]
    assert list(table["AER grow-diag"]) == ["—" if r["aer_grow_diag"] is None else f"{r['aer_grow_diag']:.3f}"
                                            for r in want]                  # a missing figure: a dash
    assert "None" not in table.to_string() and "value_zeroing" not in table.to_string()
    assert "Written by `python -m s2s.alignment" in texts(at) and "Kobayashi" in texts(at)
    at = page(align_model="reverser", alignment_tab="Attention vs attribution")
    assert not at.exception and "Measured for the shipped models only" in texts(at)


def test_the_attribution_estimate_and_the_progress_line(monkeypatch):
    """Issue #54: an on-demand run's estimate is the sentence's one-pass trace times its output pieces
    (integrated gradients) or its source pieces + 1 (leave-one-out), times the factor measured for
    the kind of model (tools/calibrate_attributions.py); a Transformer's integrated gradients cost
    it more traces than a recurrent model's (its trace is one pass for every step, the recurrent
    one a pass a step). The bar's line says the method, its stage and the time left: the
    estimate's remainder early on, then the run's own pace."""
    from types import SimpleNamespace

    import ui.alignment.attribution as tabs
    import ui.alignment.measurements as measure
    c = SimpleNamespace(seconds={"trace": 0.2}, target_tokens=["x"] * 10, source_tokens=["y"] * 7)
    assert set(measure.IG_PASSES) == set(measure.LOO_PASSES) == {"recurrent", "transformer", "hub"}
    assert all(v > 0 for v in list(measure.IG_PASSES.values()) + list(measure.LOO_PASSES.values()))
    for kind in measure.IG_PASSES:
        assert measure.attribution_estimate(c, "integrated_gradients", kind) == pytest.approx(
            measure.IG_PASSES[kind] * 0.2 * 10)
        assert measure.attribution_estimate(c, "leave_one_out", kind) == pytest.approx(
            measure.LOO_PASSES[kind] * 0.2 * 8)
    assert measure.IG_PASSES["transformer"] > measure.IG_PASSES["recurrent"]
    monkeypatch.setitem(measure.IG_PASSES, "hub", 3.0)                        # the constants are read on every call
    assert measure.attribution_estimate(c, "integrated_gradients", "hub") == pytest.approx(6.0)
    twice = SimpleNamespace(seconds={"trace": 0.4}, target_tokens=["x"] * 10, source_tokens=["y"] * 7)
    assert measure.attribution_estimate(twice, "integrated_gradients", "hub") == pytest.approx(12.0)  # a slower server
    early = tabs.progress_text("integrated gradients", 0.1, "the path's end points: the sentence", 2.0, 30.0)
    assert early == "integrated gradients: the path's end points: the sentence · 10%, about 28 s left"
    paced = tabs.progress_text("integrated gradients", 0.5, "first round: gradients for 4 of 8 output pieces",
                               10.0, 12.0)
    assert paced.endswith("· 50%, about 10 s left")                          # its own pace: 10 s for half
    refining = tabs.progress_text("integrated gradients", 0.92, "round 2: 3 of 6 steep segments", 2.0, 9.0)
    assert refining.endswith("· 92%, about 7 s left")                        # the estimate's remainder is longer
    late = tabs.progress_text("leave-one-out", 0.2, "the sentence and its 7 variants", 40.0, 30.0)
    assert late.endswith("about 1 s left")                                 # past the estimate: never 0 or less
