"""The bottleneck measurements (library) and the Bottleneck page (AppTest)."""
import json
import shutil
import sys

import numpy as np
import pytest

from conftest import ROOT, app_page, away_and_back
from s2s.bottleneck import (
    STRESS_PAIRS,
    StressRow,
    cosine_similarity,
    first_failure,
    joined_example,
    pca_2d,
    repetition_rate,
    stress_row,
)
from s2s.checkpoint import load_translator
from s2s.decode import greedy
from s2s.figures import token_bars


def test_joined_examples_grow_to_about_sixty_words():
    assert joined_example(1) == STRESS_PAIRS[0]
    src, ref = joined_example(6)
    assert src.count(".") == 6 and 45 <= len(src.split()) <= 70
    assert ref.startswith(STRESS_PAIRS[0][1]) and ref.endswith(STRESS_PAIRS[5][1])


def test_repetition_rate():
    assert repetition_rate("le chat dort".split()) == 0
    assert repetition_rate("le chat le chat le chat".split()) == pytest.approx(1 - 2 / 5)


def row(k, chrf, rep=0.0, out=10, ref=10):
    return StressRow(k, 10 * k, out, ref, 0.0, chrf, rep, "")


def test_first_failure_finds_the_breakdown():
    assert first_failure([row(1, 60), row(2, 55), row(3, 50)]) is None
    assert first_failure([row(1, 60), row(2, 50), row(3, 30)]) == 3          # chrF below 60% of its first
    assert first_failure([row(1, 60), row(2, 59, rep=0.3)]) == 2            # repeating itself
    assert first_failure([row(1, 60), row(2, 59, out=4, ref=10)]) == 2      # dropping content
    assert first_failure([]) is None


def test_cosine_and_pca():
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert np.allclose(cosine_similarity(a, a), np.eye(2))
    x = np.random.default_rng(0).normal(size=(7, 5))
    p = pca_2d(x)
    assert p.shape == (7, 2) and abs(p[:, 0].var()) >= abs(p[:, 1].var())
    assert np.allclose(pca_2d(np.ones((4, 3))), 0)      # one repeated vector: a single point


def test_none_model_reads_the_same_context_at_every_step(tiny_none, tiny_additive):
    d = greedy(load_translator(tiny_none), "a b c d e")
    assert d.contexts.shape[0] == len(d.target_tokens)
    assert np.allclose(d.contexts, d.contexts[0])                      # one fixed vector
    a = greedy(load_translator(tiny_additive), "a b c d e")
    assert not np.allclose(a.contexts, a.contexts[0])                  # a new mixture at each step
    # with attention, c_j is exactly sum_i alpha_ij h_i
    assert np.allclose(a.contexts, a.attention @ a.encoder_states, atol=1e-4)


def test_stress_row_scores_against_the_reference(tiny_additive):
    tr = load_translator(tiny_additive)
    r = stress_row(greedy(tr, "a b c d e f"), 1, "a b c d e f", "f e d c b a")
    assert r.bleu > 50 and r.chrf > 50 and r.repetition == 0 and r.length_ratio == 1


@pytest.fixture
def zoo_env(tmp_path, tiny_additive, tiny_none, monkeypatch):
    shutil.copytree(tiny_additive, tmp_path / "en-fr-additive")
    shutil.copytree(tiny_none, tmp_path / "en-fr-none")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    return tmp_path


def bottleneck_page():
    return app_page("pages/bottleneck.py")


def chart_keys(at):
    return {c.proto.id for c in at.get("plotly_chart")} | {c.proto.id for c in at.get("vega_lite_chart")}


def test_bottleneck_page_draws_every_section(zoo_env):
    at = bottleneck_page()
    assert not at.exception
    headers = [h.value for h in at.header]
    assert headers == ["Side by side", "BLEU by source length", "Stress test", "What the decoder sees", "Cost"]
    ids = " ".join(chart_keys(at))
    for key in ("lp_en-fr-none", "lp_en-fr-additive"):
        assert key in ids
    assert "sim_" not in ids and "pca_" not in ids      # the decoder's view waits for its switch
    assert "attention weights" in " ".join(m.value for m in at.markdown)
    at.toggle(key="bn_views").set_value(True).run()
    assert not at.exception
    ids = " ".join(chart_keys(at))
    for key in ("sim_en-fr-none", "sim_en-fr-additive", "pca_en-fr-none", "pca_en-fr-additive"):
        assert key in ids


def test_side_by_side_scores_only_a_matching_reference_on_one_scale(zoo_env):
    at = bottleneck_page()
    first = [c.value for c in at.caption if "log p =" in c.value]
    assert len(first) == 2 and all("BLEU" in c for c in first)         # the example and its reference
    ranges = [json.loads(c.proto.spec)["layout"]["yaxis"]["range"] for c in at.get("plotly_chart")
              if c.proto.id and "lp_" in c.proto.id]
    assert len(ranges) == 2 and ranges[0] == ranges[1] and ranges[0][0] < 0     # one log-p scale for both
    at.text_area(key="bn_text").set_value("a b c")                    # own text, the example's reference left
    [b for b in at.button if b.label == "Translate with both"][0].click()
    at.run()
    assert not [c for c in at.caption if "log p =" in c.value and "BLEU" in c.value]
    assert any("the reference is the example's" in c.value for c in at.caption)
    at.text_input(key="bn_ref").set_value("c b a")                    # a reference for this text is scored
    [b for b in at.button if b.label == "Translate with both"][0].click()
    at.run()
    assert len([c for c in at.caption if "log p =" in c.value and "BLEU" in c.value]) == 2


def test_stress_slider_and_bad_input(zoo_env):
    at = bottleneck_page()
    at.slider(key="bn_k").set_value(6).run()
    assert not at.exception
    assert at.slider(key="bn_k").value == 6
    at.text_area(key="bn_text").set_value("")
    [b for b in at.button if b.label == "Translate with both"][0].click()
    at.run()
    assert not at.exception and any("empty" in w.value for w in at.warning)


def upload(at, name: str, content: bytes):
    """Choose "your own TSV" and upload `content` as the held-out file."""
    at.selectbox(key="bn_held_out").set_value("your own TSV (upload)").run()
    at.file_uploader(key="bn_upload").set_value((name, content, "text/tab-separated-values"))
    return at.run()


def test_recompute_reads_no_server_path_and_says_what_is_wrong_with_an_upload(zoo_env):
    """The held-out file is one the app has, or an upload: no path box. A binary file or one
    without pairs gets a message, nothing is recomputed, and the page goes on."""
    at = bottleneck_page()
    assert not [t for t in at.text_input if t.key == "bn_held_out"]
    assert "examples/test_long.tsv" in at.selectbox(key="bn_held_out").options
    at = upload(at, "weights.tsv", bytes(range(256)) * 4)    # binary, named .tsv
    at.button(key="bn_recompute").click().run()
    assert not at.exception and any("not UTF-8" in w.value for w in at.warning)
    at = upload(at, "passwd.txt", b"root:x:0:0:root:/root:/bin/bash\n")
    at.button(key="bn_recompute").click().run()
    assert not at.exception and any("No line of that file" in w.value for w in at.warning)
    assert "bn_recomputed" not in at.session_state
    assert not any("Recomputed here" in c.value for c in at.caption)
    assert at.get("vega_lite_chart") or at.get("arrow_vega_lite_chart")      # the page below still drawn


def test_recompute_works_on_a_fresh_machine_with_the_shipped_pairs(zoo_env):
    """No data/ folder needed: the page's default held-out file ships in examples/ and is
    the deterministic split's test_long.tsv."""
    from conftest import ROOT
    from s2s.data import read_pairs
    at = bottleneck_page()
    assert at.selectbox(key="bn_held_out").value == "examples/test_long.tsv"
    held_out = ROOT / "examples" / "test_long.tsv"
    assert len(read_pairs(held_out)) == 1200
    local = ROOT / "data" / "tatoeba" / "test_long.tsv"
    if local.is_file():
        assert read_pairs(held_out) == read_pairs(local)
    at.number_input(key="bn_n").set_value(20)
    at.button(key="bn_recompute").click().run()
    assert not at.exception and not any("missing" in w.value for w in at.warning)
    # the tiny test model spells English letter by letter: inputs over its piece limit are left out, and said so
    skipped = at.session_state["bn_skipped"].get("en-fr-additive", 0)
    assert sum(b["n"] for b in at.session_state["bn_recomputed"]["en-fr-additive"]) + skipped == 20
    assert (skipped > 0) == any("left out" in c.value for c in at.caption)


def test_page_needs_the_none_model(tmp_path, tiny_additive, monkeypatch):
    shutil.copytree(tiny_additive, tmp_path / "en-fr-additive")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    at = bottleneck_page()
    assert not at.exception and "en-fr-none" in at.error[0].value


def test_recompute_on_held_out_pairs(zoo_env, tmp_path):
    from conftest import reversal_pairs, write_tsv
    tsv = write_tsv(reversal_pairs(40, seed=3, lo=2, hi=14), tmp_path / "held.tsv")
    at = upload(bottleneck_page(), "held.tsv", tsv.read_bytes().replace(b"\n", b"\r\n"))   # Windows line ends
    at.number_input(key="bn_n").set_value(40)
    at.button(key="bn_recompute").click().run()
    assert not at.exception
    got = at.session_state["bn_recomputed"]
    assert set(got) == {"en-fr-none", "en-fr-additive"}
    assert sum(b["n"] for b in got["en-fr-additive"]) == 40
    assert "Recomputed here with greedy decoding, on the first 40 pairs of your uploaded file" in \
        " ".join(c.value for c in at.caption)
    assert not any("metrics.json (beam 5" in c.value for c in at.caption)     # one source named, not two


def test_context_scatter_says_when_every_step_reads_the_same_vector():
    from s2s.figures import context_scatter
    fig = context_scatter(np.zeros((4, 2)), ["a", "b", "c", "</s>"], "none")
    assert "one point" in fig.layout.annotations[0].text
    assert not any(fig.data[0].text)                                  # no four labels piled on the one point
    fig = context_scatter(np.arange(8.0).reshape(4, 2), ["a", "b", "c", "</s>"], "additive")
    assert not fig.layout.annotations and list(fig.data[0].text) == ["a", "b", "c", "&lt;/s&gt;"]
    fig = context_scatter(np.arange(80.0).reshape(40, 2), [f"w{j}" for j in range(40)], "additive")
    assert sum(bool(t) for t in fig.data[0].text) == 20 and len(fig.data[0].hovertext) == 40


def test_one_colour_per_model_from_its_attention():
    from s2s.figures import ATTENTION_COLORS, model_colors
    c = model_colors({"en-fr-none": "none", "a": "additive", "b": "additive", "x": None})
    assert c["en-fr-none"] == ATTENTION_COLORS["none"] and c["a"] == ATTENTION_COLORS["additive"]
    assert len(set(c.values())) == 4                          # a second additive model gets its own colour
    assert len(set(ATTENTION_COLORS.values())) == len(ATTENTION_COLORS)


def test_charts_colour_each_model_and_the_caption_follows_the_stress_run(zoo_env):
    from s2s.figures import ATTENTION_COLORS
    at = bottleneck_page()
    at.slider(key="bn_k").set_value(3).run()
    assert not at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    spec = [x for x in specs if "source_words" in json.dumps(x)][0]                  # the stress chart
    layer = spec["layer"][0] if "layer" in spec else spec
    scale = layer["encoding"]["color"]["scale"]
    assert scale["range"][0] == ATTENTION_COLORS["none"] and len(set(scale["range"])) == 2
    text = " ".join(m.value for m in at.markdown)
    assert "stays flat" not in text and "chrF:" in text and "at 3 sentences" in text
    assert layer["encoding"]["x"]["axis"]["format"] == "d"          # lengths in whole words on the axis
    at.slider(key="bn_k").set_value(1).run()                          # one point: no "at 1 sentences"
    text = " ".join(m.value for m in at.markdown)
    assert not at.exception and "at one sentence (" in text and "at 1 sentences" not in text


def test_length_stress_and_cost_views_add_the_transformer(zoo_env, tiny_transformer):
    """A Transformer among the checkpoints (found by its config's arch, whatever its folder
    is called) joins BLEU by length, the stress test and the cost chart in its own colour;
    side by side stays the same recurrent model with and without attention."""
    from s2s.figures import ATTENTION_COLORS
    shutil.copytree(tiny_transformer, zoo_env / "some-transformer")
    at = bottleneck_page()
    at.slider(key="bn_k").set_value(2).run()
    assert not at.exception
    assert at.selectbox(key="bn_model").options == ["en-fr-additive"]       # the recurrent attention model
    assert not [k for k in chart_keys(at) if "lp_some-transformer" in k]    # not side by side
    specs = [json.dumps(json.loads(c.proto.spec)) for c in at.get("vega_lite_chart")]
    # BLEU by length and the stress test (the tiny models spell letter by letter: the joined
    # examples are too long in their pieces to time, so the cost chart is a warning here)
    for field in ('"words"', '"source_words"'):
        spec = next((x for x in specs if field in x), None)
        assert spec is not None, (field, [x[:300] for x in specs])
        assert ATTENTION_COLORS["transformer"] in spec and "some-transformer" in spec, field
    text = " ".join(m.value for m in at.markdown)
    assert "some-transformer" in text and "decoder self-attention" in text


def test_long_log_p_bars_stand_their_labels_upright_and_readable():
    """Pieces along x: labels at -90 degrees. Up to 30, every piece is labelled in a font no
    taller than half a column at 1280 px gives each bar; past 30, every k-th piece and the
    lowest bar are, at a size a projector shows, never closer than a label is tall."""
    short = token_bars(list("abcde"), [-0.1] * 5, "log p", horizontal=False)
    thirty = token_bars([f"▁w{i}" for i in range(30)], [-0.5] * 30, "log p", horizontal=False)
    long = token_bars([f"▁w{i}" for i in range(48)], [-0.5] * 48, "log p", horizontal=False, highlight=7)
    assert short.layout.xaxis.tickangle == long.layout.xaxis.tickangle == -90
    assert len(thirty.layout.xaxis.ticktext) == 30 and thirty.layout.xaxis.tickfont.size <= 380 / 30
    ticks = list(long.layout.xaxis.tickvals)
    assert 7 in ticks and 0 in ticks and len(ticks) <= 17 and long.layout.xaxis.tickfont.size >= 12
    assert list(long.layout.xaxis.ticktext) == [f"▁w{i}" for i in ticks]
    for n in (31, 45, 48, 61, 75, 120, 250):                          # any length, the lowest bar anywhere
        for low in {0, 1, n // 3, n // 2 + 1, n - 2, n - 1}:
            fig = token_bars([f"p{i}" for i in range(n)], [-0.5] * n, "log p", horizontal=False, highlight=low)
            ticks = list(fig.layout.xaxis.tickvals)
            assert low in ticks and len(ticks) <= 16
            gaps = [b - a for a, b in zip(ticks, ticks[1:])]
            assert min(gaps) * 380 / n >= fig.layout.xaxis.tickfont.size, (n, low)   # neighbours never overlap


def test_cost_view_is_timed_on_request_once_per_server(zoo_env, monkeypatch):
    """Opening the page times nothing; *Time the models* measures each model once for the
    server, and a later visitor sees the chart without pressing; *Measure again* re-times."""
    import s2s.bottleneck
    from ui import models
    models.forget_timing()
    timed = []
    monkeypatch.setattr(s2s.bottleneck, "decode_ms", lambda tr, *a, **k: timed.append(tr.path.name) or 1.0 + len(timed))

    def has_cost_chart(at) -> bool:
        return any('"m\\u00b7t"' in c.proto.spec or '"m·t"' in c.proto.spec for c in at.get("vega_lite_chart"))
    at = bottleneck_page()
    assert not at.exception and timed == []
    assert not has_cost_chart(at)
    assert at.button(key="bn_time").label == "Time the models"
    assert any("Not measured yet" in c.value and "`en-fr-none`" in c.value for c in at.caption)
    at.button(key="bn_time").click().run()
    assert not at.exception
    assert sorted(set(timed)) == ["en-fr-additive", "en-fr-none"] and len(timed) == 2 * len(STRESS_PAIRS)
    assert has_cost_chart(at) and at.button(key="bn_time").label == "Measure again"
    later = bottleneck_page()                       # another visitor on the same server
    assert has_cost_chart(later) and len(timed) == 2 * len(STRESS_PAIRS)
    assert later.button(key="bn_time").label == "Measure again"
    later.button(key="bn_time").click().run()
    assert len(timed) == 4 * len(STRESS_PAIRS) and has_cost_chart(later)
    models.forget_timing()


def test_the_page_waits_for_the_warm_ups_altair_import(zoo_env, monkeypatch):
    """On a server still warming up, the page's Altair charts wait for the warm-up's import of
    altair (ui.warm.altair_ready), never import it beside it; on a warm server they do not wait."""
    import threading
    import time

    from ui import warm
    monkeypatch.setattr(warm, "_warm_thread", threading.current_thread())     # a warm-up "running"
    ready = threading.Event()
    monkeypatch.setattr(warm, "_altair_ready", ready)
    threading.Timer(0.5, ready.set).start()
    t = time.perf_counter()
    warm.altair_ready()
    assert ready.is_set() and time.perf_counter() - t >= 0.4
    at = bottleneck_page()
    assert not at.exception and len(at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")) >= 2
    t = time.perf_counter()
    warm.altair_ready()                                 # already set: returns at once
    assert time.perf_counter() - t < 0.1


def test_warm_up_decodes_the_bottleneck_pages_first_screen(zoo_env, monkeypatch):
    """warm_up also fills the cache the Bottleneck page reads with its default models' greedy
    decodings of the joined examples it opens on, so its first open decodes nothing."""
    import s2s.decode
    from ui import models, warm
    monkeypatch.setattr(warm, "_warm_thread", None)
    models.greedy_decoding.clear()
    warm.warm_up().join(120)
    calls = []
    real = s2s.decode.greedy
    monkeypatch.setattr(s2s.decode, "greedy", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    at = bottleneck_page()
    assert not at.exception
    assert calls == []          # the side by side, stress test and decoder views were all cached
    assert warm._altair_ready.is_set() and "altair" in sys.modules    # and its charts' library imported
    assert models.bottleneck_default(models.translation_models()) == "en-fr-additive"


def test_the_typed_text_and_stress_setting_survive_a_visit_to_another_page(zoo_env):
    at = bottleneck_page()
    at.slider(key="bn_k").set_value(2).run()
    at.text_area(key="bn_text").set_value("The dog runs. The cat sleeps.")
    [b for b in at.button if b.label == "Translate with both"][0].click()
    at.run()
    at = away_and_back(at, "pages/alignment.py", "pages/bottleneck.py")
    assert not at.exception
    assert at.text_area(key="bn_text").value == "The dog runs. The cat sleeps." and at.slider(key="bn_k").value == 2


def test_every_vega_lite_chart_offers_svg_png_html_and_its_data(zoo_env):
    """Streamlit gives a Vega-Lite chart no export menu: each gets SVG, PNG, offline HTML and CSV."""
    at = bottleneck_page()
    assert not at.exception
    ids = [b.proto.id for b in at.get("download_button")]
    for chart in ("bleu_by_length", "stress_chart"):
        for ext in ("svg", "png", "html", "csv"):
            assert any(i.endswith(f"{chart}_{ext}") for i in ids), (chart, ext)


def test_the_cost_view_times_an_offered_english_french_hub_model_in_its_own_pieces(zoo_env, hub_models,
                                                                                  monkeypatch):
    """An operator's Hugging Face model that translates English to French can join the cost
    view when chosen (one that cannot, like a Marian model of unknown languages, is not
    offered); its m and t are its own tokenizer's pieces; nothing hub is timed unless chosen."""
    import s2s.bottleneck
    from s2s.bottleneck import joined_example
    from s2s.checkpoint import load_translator
    from ui import models
    monkeypatch.setenv("S2S_HUB_MODELS", f"{hub_models['marian']},{hub_models['m2m100']}")
    models.forget_timing()
    timed = []
    monkeypatch.setattr(s2s.bottleneck, "decode_ms", lambda tr, *a, **k: timed.append(tr.name) or 1.0)
    at = bottleneck_page()
    assert not at.exception
    box = at.multiselect(key="bn_hub")
    assert box.options == ["m2m100"] and box.value == []            # shown by name; Marian's languages unknown
    at.button(key="bn_time").click().run()
    assert len(timed) == 2 * len(STRESS_PAIRS)                       # the lesson's two models only
    models.forget_timing()
    at.multiselect(key="bn_hub").select(str(hub_models["m2m100"])).run()
    at.button(key="bn_time").click().run()
    assert not at.exception
    spec = next(c.proto.spec for c in at.get("vega_lite_chart") if "m·t" in c.proto.spec
                or "m\\u00b7t" in c.proto.spec)
    assert '"m2m100"' in spec                                        # drawn, with a colour of its own
    rows = [r for r in models.decode_timing(str(hub_models["m2m100"])) if r["model"] == "m2m100"]   # what it draws
    tok = load_translator(hub_models["m2m100"]).tokenizer
    src, ref = joined_example(2)
    assert [(r["m"], r["t"]) for r in rows if r["sentences"] == 2] == [(len(tok.source_ids(src)),
                                                                       len(tok.target_ids(ref)))]
    assert len(rows) == len(STRESS_PAIRS) and len(timed) == 5 * len(STRESS_PAIRS)   # all three, once more
    assert any("own pieces" in c.value for c in at.caption)
    assert at.query_params["time"] in (str(hub_models["m2m100"]), [str(hub_models["m2m100"])])   # a copied link
    from streamlit.testing.v1 import AppTest
    linked = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    linked.query_params["time"] = f"{hub_models['m2m100']},hf:not/offered"
    linked.switch_page("pages/bottleneck.py")
    linked.run()
    assert not linked.exception and linked.multiselect(key="bn_hub").value == [str(hub_models["m2m100"])]
    # the model it cannot time is named, not dropped with no word
    assert any("hf:not/offered" in w.value and "does not offer" in w.value for w in linked.warning)
    models.forget_timing()


def test_a_links_bad_values_are_notes_never_a_crash(zoo_env):
    """Every address field a link may hold: a value the page cannot use is ignored with a note."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90).run()
    for k, v in {"contexts": "maybe", "sentences": "99", "model": "nope", "time": "<script>x</script>"}.items():
        at.query_params[k] = v
    at.switch_page("pages/bottleneck.py")
    at.run()
    assert not at.exception
    notes = " ".join(i.value for i in at.info)
    assert "contexts=" in notes and "sentences=" in notes and "model=" in notes
    assert "<script>" not in "".join(m.value for m in at.markdown)         # nothing of the link drawn as markup
