"""Are all heads needed, issue #60 item 3 on the page: the pruning chart (s2s.figures.pruning_figure),
the sentence that reads it against Michel et al. and Voita et al. (s2s.head_importance.pruning_summary),
`python -m s2s.heads prune --rank-pairs`, and the Heads tab's panel (ui.pruning.pruning_panel) through
AppTest: the shipped Transformer's curve from results/head_pruning.json, a tiny hub model's on demand."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_head_mask import PAIRS, run_cli, write_pairs

from s2s.head_importance import (
    HeadImportance,
    first_drop,
    importance,
    most_within,
    prune_curves,
    prune_decodings,
    pruning_summary,
    read_scored_pairs,
)
from test_app import array, chart, texts

ROOT = Path(__file__).resolve().parent.parent


def curve(scope: str, order: str, of: int, bleus: list[float]) -> dict:
    """A made-up curve: BLEU after 0, 10%, ... of `of` heads knocked out (rounded, as prune_curves)."""
    return {"scope": scope, "order": order, "of": of,
            "points": [{"share": round(k / 10, 4), "heads": round(of * k / 10), "bleu": b}
                       for k, b in enumerate(bleus)]}


# Every answer known: all heads (20) hold 30.0 for 3 steps least important first (6 heads, 30%)
# and 1 step at random (2, 10%); cross-attention falls at once (mean lowest), encoder holds to 9
# of 10 heads once its first step's dip of 1.5 recovers (first drop: none before 1 head), decoder between.
MADE_UP = {"bleu": 30.0, "pairs": 50, "curves": [
    curve("all", "importance", 20, [30, 29.5, 29.8, 29.2, 20, 10, 5, 3, 2, 1, 0]),
    curve("all", "random", 20, [30, 29.1, 25, 20, 15, 10, 5, 3, 2, 1, 0]),
    curve("cross", "importance", 10, [30, 20, 10, 5, 2, 1, 0, 0, 0, 0, 0]),
    curve("cross", "random", 10, [30, 15, 5, 2, 1, 0, 0, 0, 0, 0, 0]),
    curve("encoder", "importance", 10, [30, 28.5, 29.5, 30, 29.9, 29.8, 29.5, 29.2, 29.1, 29.4, 25]),
    curve("encoder", "random", 10, [30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 25]),
    curve("decoder", "importance", 10, [30, 29.5, 27, 25, 22, 20, 18, 16, 14, 12, 10]),
    curve("decoder", "random", 10, [30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10]),
]}


def test_the_summary_reads_a_made_up_curve_whose_answers_are_known():
    s = pruning_summary(MADE_UP)
    assert s["all"]["importance"] == {"heads": 6, "of": 20, "share": 0.3}
    assert s["all"]["random"] == {"heads": 2, "of": 20, "share": 0.1}
    assert s["needs_heads_most"] == "cross" and s["spares_heads_most"] == "encoder"
    enc = s["kinds"]["encoder"]
    assert (enc["first_drop"], enc["drop_at"], enc["most_within_1"]) == (0, 1, 9)
    assert s["michel"] == "more"            # 6 of 20 against Michel's 20% (4 of 20)
    assert s["voita"] == "more"             # 9 of 10 against Voita's 38 of 48 (8 of 10)
    text = s["sentence"]
    assert "6 of the 20 heads (30%)" in text and "(random order: 2, 10%)" in text
    assert "with 20% gone: more go here" in text
    assert "Cross-attention needs its heads most" in text and "as Michel et al. found" in text
    assert "with 1 of its 10 heads gone" in text and "within 1 with 9 (90%)" in text
    assert "38 of 48 (79%) for 0.15 BLEU: more go here" in text


def test_the_summary_disagrees_when_the_figures_do():
    """The same sentence-maker says "not so" and "fewer" when the curves say it: no verdict is fixed."""
    flipped = {"bleu": 30.0, "curves": [
        curve("all", "importance", 20, [30, 28, 20, 10, 5, 0, 0, 0, 0, 0, 0]),
        curve("cross", "importance", 10, [30, 29.5, 29.4, 29.3, 29.2, 29.1, 29, 29, 29, 29, 29]),
        curve("encoder", "importance", 10, [30, 10, 5, 0, 0, 0, 0, 0, 0, 0, 0]),
    ]}
    s = pruning_summary(flipped)
    assert s["all"]["importance"]["heads"] == 0 and s["michel"] == "fewer"
    assert s["needs_heads_most"] == "encoder" and "not so here" in s["sentence"]
    assert s["voita"] == "fewer" and "Encoder self-attention: 0 of its 10 heads (0%) go" in s["sentence"]
    assert "random order" not in s["sentence"]           # no random curve: not claimed
    # one kind alone: no kind is said to need its heads most
    assert pruning_summary({"bleu": 5.0, "curves": [MADE_UP["curves"][0]]})["needs_heads_most"] is None
    alone = pruning_summary({"bleu": 30.0, "curves": [MADE_UP["curves"][2]]})
    assert alone["sentence"] == "Cross-attention: 0 of its 10 heads (0%) go before BLEU falls more than 1 " \
                                "below the whole model's 30.0."


def test_drops_are_counted_from_the_curve():
    pts = curve("x", "importance", 10, [30, 29, 28.9, 31, 20, 29.5, 0, 0, 0, 0, 0])["points"]
    assert first_drop(pts, 30.0) == 1 and most_within(pts, 30.0) == 5


def test_the_shipped_curves_sentence():
    """The sentence docs/attention.md quotes, from results/head_pruning.json."""
    s = pruning_summary(json.loads((ROOT / "results" / "head_pruning.json").read_text()))
    assert s["all"]["importance"]["heads"] == 11 and s["all"]["random"]["heads"] == 4
    assert s["needs_heads_most"] == "cross" and s["kinds"]["encoder"]["most_within_1"] == 7


def test_the_figure_draws_every_curve_in_its_scope_colour_and_order_dash():
    from s2s.figures import pruning_figure
    from s2s.figures.pruning import SCOPE_COLORS
    fig = pruning_figure(MADE_UP, height=280)
    lines = list(fig.data)
    assert len(lines) == 8 and fig.layout.height == 280
    for t, c in zip(lines, MADE_UP["curves"]):
        assert list(t.y) == [p["bleu"] for p in c["points"]]
        assert list(t.x) == pytest.approx([100 * p["share"] for p in c["points"]])
        assert t.line.color == SCOPE_COLORS[c["scope"]] and t.legendgroup == c["scope"]
        assert t.line.dash == ("solid" if c["order"] == "importance" else "dot")
    assert not fig.layout.showlegend                              # no room beside the plot: the title is the key
    title = fig.layout.title.text
    for scope in ("all", "cross", "encoder", "decoder"):
        assert f"color:{SCOPE_COLORS[scope]}'><b>{scope}</b>" in title
    assert "— least important first · ··· random" in title
    assert fig.layout.xaxis.title.text == "heads knocked out" and fig.layout.yaxis.title.text == "BLEU"
    assert fig.layout.shapes[0].y0 == 29.0                       # 1 below the whole model
    assert fig.layout.yaxis.range[0] == 0 and fig.layout.yaxis.range[1] >= 30
    nothing = pruning_figure({"bleu": 0.0, "curves": [curve("all", "importance", 20, [0.0] * 11)]})
    assert list(nothing.layout.yaxis.range) == [0, 1.0] and not nothing.layout.shapes   # never below 0


def test_prune_decodings_counts_what_prune_curves_decodes(untrained_translators):
    tr = untrained_translators["transformer"]
    from s2s.hooks import head_counts
    pairs = PAIRS["ours"]
    out = prune_curves(tr, pairs, importance(tr, pairs), steps=3)
    assert out["decodings"] <= prune_decodings(head_counts(tr.model), steps=3)
    assert prune_decodings({"cross": (3, 4), "encoder": (3, 4), "decoder": (3, 4)}) == 77   # the shipped run's


def test_an_importance_read_back_from_its_json_ranks_as_measured(untrained_translators):
    """The Heads tab keeps a measured importance as JSON; pruning ranks by it read back."""
    tr = untrained_translators["transformer"]
    ranked = importance(tr, PAIRS["ours"])
    back = HeadImportance.from_json(json.loads(json.dumps(ranked.to_json())))
    assert back.order() == ranked.order() and back.to_json() == ranked.to_json()


def test_prune_ranks_on_other_pairs_with_rank_pairs(untrained_translators, tmp_path):
    """--rank-pairs: the heads ranked on another file (Michel et al.'s separate set), the pruned
    order that file's importance order; the default still ranks on the pruned pairs."""
    tr = untrained_translators["transformer"]
    path = str(tr.path)
    pruned = write_pairs(tmp_path / "pruned.tsv", PAIRS["ours"])
    rank = write_pairs(tmp_path / "rank.tsv", [("a b c d e", "e d c b a"), ("f g h", "h g f"), ("i j", "j i")])
    r = run_cli("s2s.heads", "prune", "--model", path, "--pairs", str(pruned), "--rank-pairs", str(rank),
                "--steps", "1", "--scope", "cross", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    expected = [f"{k}:{l + 1}.{h + 1}" for k, l, h in importance(tr, read_scored_pairs(rank)).order() if k == "cross"]
    got = next(c for c in out["curves"] if c["order"] == "importance")["pruned_order"]
    assert got == expected
    own = [f"{k}:{l + 1}.{h + 1}" for k, l, h in importance(tr, read_scored_pairs(pruned)).order() if k == "cross"]
    assert own != expected                      # the test could fail: the two files rank differently
    assert out["importance_on"].startswith(str(rank)) and "3 usable pairs" in out["importance_on"]
    assert out["model_identity"]["weights_sha256"] and out["summary"].startswith("Cross-attention: ")
    r = run_cli("s2s.heads", "prune", "--model", path, "--pairs", str(pruned), "--rank-pairs",
                str(tmp_path / "missing.tsv"), "--steps", "1", "--json")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "No pairs file" in r.stderr


# ------------------------------------------------------------------ the panel, through AppTest

def panel_script(model: str, pairs: int) -> None:
    import ui.models
    from ui.pruning import pruning_panel
    tr = ui.models.get_model(model)
    pruning_panel(tr, model, height=300, share=0.6, pairs=pairs)


def panel(model: str, pairs: int = 2):
    from streamlit.testing.v1 import AppTest
    return AppTest.from_function(panel_script, args=(model, pairs), default_timeout=300).run()


def test_the_shipped_transformer_reads_its_shipped_curve(monkeypatch):
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    at = panel("en-fr-transformer")
    assert not at.exception, at.exception
    shipped = json.loads((ROOT / "results" / "head_pruning.json").read_text())
    spec = chart(at, "pruning_chart")
    lines = [t for t in spec["data"] if t.get("legendgroup")]
    assert len(lines) == 8
    assert array(lines[0]["y"]).astype(float).tolist() == [p["bleu"] for p in shipped["curves"][0]["points"]]
    said = texts(at)
    assert pruning_summary(shipped)["sentence"] in said and "100 held-out pairs" in said
    assert not at.button                                   # nothing to compute


def finished(at, key):
    """The AppTest `at` run again once the server's job of `key` has ended (it runs beside the page)."""
    import ui.jobs
    job = ui.jobs.jobs().get(key)
    assert job is not None and job.wait(300)
    return at.run()


def test_a_hub_model_is_pruned_on_demand_and_kept(hub_models, monkeypatch):
    import ui.jobs
    import ui.pruning
    marian = str(hub_models["marian"])
    monkeypatch.setenv("S2S_HUB_MODELS", marian)
    ui.jobs.jobs().clear()
    at = panel(marian, pairs=2)
    assert not at.exception, at.exception
    assert chart(at, "pruning_chart") is None
    assert "Not measured for this model yet" in texts(at) and "2 held-out pairs" in texts(at)
    at.button(key="pruning_run").click().run()
    assert not at.exception, at.exception
    at = finished(at, ui.pruning.pruning_key(marian, 2))
    assert not at.exception, at.exception
    spec = chart(at, "pruning_chart")
    assert spec is not None and len([t for t in spec["data"] if t.get("legendgroup")]) == 8
    assert "Least important first" in texts(at) and "2 held-out pairs" in texts(at)
    again = panel(marian, pairs=2)                  # another session: the curve is kept per model, no button
    assert chart(again, "pruning_chart") is not None and not again.button


def test_a_copy_of_another_transformer_is_not_given_the_shipped_curve(transformer_zoo, monkeypatch):
    """A checkpoint named en-fr-transformer whose weights are not the shipped ones (the tiny one):
    the results file is not its, so it is offered a run instead."""
    monkeypatch.setenv("S2S_CHECKPOINTS", str(transformer_zoo))
    at = panel("en-fr-transformer")
    assert not at.exception and chart(at, "pruning_chart") is None
    assert at.button(key="pruning_run") is not None


def test_a_recurrent_model_is_offered_nothing(monkeypatch):
    monkeypatch.delenv("S2S_CHECKPOINTS", raising=False)
    at = panel("en-fr-additive")
    assert not at.exception and chart(at, "pruning_chart") is None and not at.button and not at.markdown


def measure_then_prune_script(model: str) -> None:
    import ui.knockout
    import ui.models
    import ui.pruning
    tr = ui.models.get_model(model)
    ui.pruning.importance_button(tr, model)
    ui.knockout.pruning_slot(tr, model)


def test_a_hub_model_measured_already_is_pruned_in_that_ranking(hub_models, monkeypatch):
    """The Heads tab's importance (its button, ui.knockout) measured first: the prune button ranks
    the heads by it, not measuring them again on its own pairs, and says so."""
    from streamlit.testing.v1 import AppTest

    import ui.jobs
    import ui.pruning
    marian = str(hub_models["marian"])
    monkeypatch.setenv("S2S_HUB_MODELS", marian)
    monkeypatch.setattr(ui.pruning, "HUB_PAIRS", 4)
    ranked_here = []
    own = ui.pruning.importance
    monkeypatch.setattr(ui.pruning, "importance", lambda *a, **k: ranked_here.append(a) or own(*a, **k))
    ui.jobs.jobs().clear()                  # this server has measured nothing
    at = AppTest.from_function(measure_then_prune_script, args=(marian,), default_timeout=300).run()
    assert not at.exception, at.exception
    assert "ranked on 20 held-out pairs" in texts(at)
    at.button(key="knockout_measure").click().run()
    assert not at.exception, at.exception
    at = finished(at, ui.pruning.importance_key(marian))
    measured = ui.pruning.measured_importance(marian)
    assert len(ranked_here) == 1 and len(ranked_here[0][1]) == 4      # the button's job measured it, once
    ranked_here.clear()
    assert measured["pairs"] == 4 and "ranked by the importance measured for the grid (on 4 held-out pairs" in texts(at)
    at.button(key="pruning_run").click().run()
    assert not at.exception, at.exception
    at = finished(at, ui.pruning.pruning_key(marian))
    assert ranked_here == []                                  # not measured again
    result = ui.jobs.snapshot(ui.pruning.pruning_key(marian)).result
    order = [f"{k}:{l + 1}.{h + 1}" for k, l, h in HeadImportance.from_json(measured).order()]
    assert [c["pruned_order"] for c in result["curves"] if (c["scope"], c["order"]) == ("all", "importance")] == [order]
    assert "Heads ranked by the importance measured for the grid." in texts(at)
