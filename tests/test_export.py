"""s2s.export: file names that say what they are, Plotly's camera as SVG, offline HTML, and
Vega-Lite as SVG, PNG and HTML, with typed text escaped exactly once."""
import re
import struct

import altair as alt
import pandas as pd

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
