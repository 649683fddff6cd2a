"""s2s.export: file names that say what they are, Plotly's camera as SVG, offline HTML, and
Vega-Lite as SVG, PNG and HTML, with typed text escaped exactly once."""
import io
import json
import re
import shutil
import struct

import altair as alt
import numpy as np
import pandas as pd
import pytest

from s2s.checkpoint import load_translator
from s2s.decode import DecodeSettings, decode
from s2s.export import file_stem, plotly_config, plotly_html, vega_html, vega_png, vega_svg
from s2s.figures import attention_heatmap

TYPED = "<b>bold</b> & co"


def test_file_stem_says_what_and_is_safe():
    assert file_stem("attention", "en-fr-additive", "beam 5", "She has a dog.") == \
        "attention_en-fr-additive_beam-5_She-has-a-dog"
    assert file_stem("heads", "hf:Helsinki-NLP/opus-mt-en-fr", None, "") == "heads_hf-Helsinki-NLP-opus-mt-en-fr"
    s = file_stem("x", "a/b\\c:d*?\"<>|" * 30)
    assert len(s) <= 120 and not re.search(r"[/\\:*?\"<>| ]", s)
    assert file_stem("", None) == "figure"


def test_the_camera_button_saves_svg_at_the_drawn_size():
    c = plotly_config("attention_m")["toImageButtonOptions"]
    assert c == {"format": "svg", "filename": "attention_m", "width": None, "height": None, "scale": 1}


def test_plotly_html_is_standalone_and_shows_typed_text_once_escaped():
    fig = attention_heatmap([TYPED, "</s>"], ["x", "</s>"], [[0.7, 0.3], [0.2, 0.8]])
    html = plotly_html(fig, "attention")
    assert not re.search(r"<script[^>]+src=", html)                   # plotly.js inlined: nothing fetched
    assert len(html) > 3_000_000                                      # the library itself is in the file
    # the figure's HTML labels, escaped once by s2s.figures, in JSON ("/" written \u002f)
    assert "&lt;b&gt;bold&lt;\\u002fb&gt; &amp; co" in html and "&amp;amp;" not in html
    assert '"format": "svg"' in html


def _chart():
    return alt.Chart(pd.DataFrame({"x": [1, 2, 3], "y": [3, 1, 2]})).mark_line().encode(x="x", y="y").properties(
        title=TYPED, height=200)


def test_vega_svg_is_vector_with_the_typed_title_escaped_once():
    svg = vega_svg(_chart())
    assert svg.startswith("<svg") and 'width="' in svg
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in svg and "&amp;lt;" not in svg


def test_vega_png_is_twice_the_drawn_size():
    svg = vega_svg(_chart())
    width = float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))
    png = vega_png(_chart())
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", png[16:24])
    assert abs(w - 2 * width) <= 2


def test_vega_html_draws_offline():
    html = vega_html(_chart())
    assert not re.search(r"<script[^>]+src=\"?https?:", html)
    assert "vega-embed" in html or "vegaEmbed" in html


# ------------------------------------------------------------------ the Translate page's exports

@pytest.fixture(scope="module")
def export_zoo(tmp_path_factory, tiny_additive, tiny_transformer):
    root = tmp_path_factory.mktemp("export_zoo")
    shutil.copytree(tiny_additive, root / "en-fr-additive")
    shutil.copytree(tiny_transformer, root / "en-fr-transformer")
    return root


def test_the_translate_exports_say_what_they_are(export_zoo, monkeypatch, downloads):
    """The heatmap's CSV and JSON name the model, the text, the settings the method reads, the
    view and the matrix; rows and columns are positions with their tokens, so a repeated word
    is two rows; a Transformer's head export holds every layer x head of all three attentions."""
    from test_app import submit, translate_page
    monkeypatch.setenv("S2S_CHECKPOINTS", str(export_zoo))
    at = submit(translate_page(model="en-fr-transformer"), text="a b a", view="pieces", method="beam")
    assert not at.exception, at.exception
    d = decode(load_translator(export_zoo / "en-fr-transformer"), "a b a",
               DecodeSettings("beam", width=5, n_best=3, max_len=120))
    stem = "attention_en-fr-transformer_beam5_nbest3_maxlen120_norepeat0_beam_layer-2-last-mean-of-4-heads_pieces_a-b-a"
    got = json.loads(downloads[stem + ".json"])
    assert got["model"] == "en-fr-transformer" and got["english"] == "a b a" and got["view"] == "pieces"
    assert got["settings"] == {"method": "beam", "beam": 5, "nbest": 3, "maxlen": 120, "norepeat": 0}
    assert got["matrix"].startswith("cross-attention, layer 2 (last) · mean of 4 heads, pieces: output (rows)")
    assert [c["token"] for c in got["attention"]["columns"]] == d.source_tokens
    assert [c["position"] for c in got["attention"]["columns"]] == list(range(len(d.source_tokens)))
    np.testing.assert_allclose(got["attention"]["values"], d.attention, atol=1e-5)
    csv = downloads[stem + ".csv"]
    assert csv.startswith("# en-fr-transformer; ") and "a b a" in csv.splitlines()[0]
    table = pd.read_csv(io.StringIO(csv), comment="#")
    assert list(table["position"]) == list(range(len(d.target_tokens)))       # rows by position: never collide
    assert list(table.columns[2:]) == [f"{i}:{t}" for i, t in enumerate(d.source_tokens)]
    heads = json.loads(next(v for k, v in downloads.items() if k.startswith("heads_en-fr-transformer_beam")))
    assert np.array(heads["cross"]).shape == d.cross_attention.shape
    assert np.array(heads["encoder"]).shape == d.encoder_self_attention.shape
    assert np.array(heads["decoder"]).shape == d.decoder_self_attention.shape
    assert "(layers, heads, rows, columns)" in heads["shapes"]
    for c in at.get("plotly_chart"):
        assert json.loads(c.proto.config)["toImageButtonOptions"]["format"] == "svg"


def test_the_bottleneck_charts_export_typed_model_names_escaped_once():
    from s2s.figures import length_chart
    df = pd.DataFrame({"model": [TYPED, TYPED, "b", "b"], "words": [5, 10, 5, 10], "BLEU": [30.0, 20.0, 25.0, 5.0]})
    svg = vega_svg(length_chart(df, "words", "BLEU", x_title="source sentence length (words)", y_title="BLEU"))
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in svg and "&amp;lt;" not in svg
    assert "source sentence length (words)" in svg


def test_a_charts_data_is_what_it_draws_with_what_it_shows():
    from s2s.export import plotly_data
    z = [[0.7, 0.3], [0.2, 0.8]]
    got = json.loads(plotly_data(attention_heatmap(["a", "</s>"], ["x", "</s>"], z), {"model": "m", "text": "a"}))
    assert got["model"] == "m" and got["text"] == "a"
    assert got["axes"] == {"xaxis": "source (English)", "yaxis": "output (French)"}
    heat = got["traces"][0]
    assert heat["type"] == "heatmap" and np.allclose(heat["z"], z)
