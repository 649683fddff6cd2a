"""Figures and data out of the app, as files that say what they are.

Plotly charts leave through their own camera button, set here to write SVG (vector, at the
size the chart is drawn) under a file name built from what the chart shows; the page's main
chart also leaves as one HTML file that draws it interactively with no network (plotly.js
inlined, ~4.7 MB). Vega-Lite (Altair) charts get no export menu in Streamlit, so they are
rendered here, by vl-convert (Vega's own renderer, bundled: nothing fetched), to SVG, PNG or a
standalone HTML file.

Text: Plotly labels are HTML (s2s.figures escapes what people type, once); Vega-Lite labels
are plain text, escaped once by the SVG or HTML writer. Either way an exported file shows
the text as it was typed.
"""
from __future__ import annotations

import functools
import json
import re
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

_UNSAFE = re.compile(r"[^\w.+-]+")


def file_stem(*parts: Any) -> str:
    """("attention", "en-fr-additive", "beam 5", "She has a dog.") -> "attention_en-fr-additive_beam-5_She-has-a-dog":
    what the file holds, safe on every file system, at most 120 characters."""
    words = [_UNSAFE.sub("-", str(p)).strip("-.") for p in parts if p not in (None, "")]
    return "_".join(w for w in words if w)[:120].rstrip("-_.") or "figure"


def plotly_config(stem: str) -> dict:
    """st.plotly_chart's config: the camera button saves SVG named `stem`, at the drawn size
    (width and height None: Plotly measures the chart on the page)."""
    return {"toImageButtonOptions": {"format": "svg", "filename": stem, "width": None, "height": None, "scale": 1},
            "displaylogo": False}


def plotly_html(fig: go.Figure, stem: str) -> str:
    """One HTML file that draws `fig` interactively offline: plotly.js inlined, no script fetched."""
    return fig.to_html(include_plotlyjs=True, full_html=True, config=plotly_config(stem),
                       default_width="100%", default_height="100%" if fig.layout.height is None else fig.layout.height)


@functools.lru_cache(maxsize=1)
def plotly_js_mb() -> float:
    """The size of the plotly.js that plotly_html inlines, in MB: nearly all of the file, so
    the download button can say what it weighs before it is clicked."""
    from plotly.offline import get_plotlyjs
    return len(get_plotlyjs().encode()) / 1e6


EXPORT_WIDTH = 720    # px: a Vega-Lite chart drawn to its container's width in the app has none of its own


def plotly_data(fig: go.Figure, about: dict | None = None) -> str:
    """A Plotly chart's data as JSON: its title and axis titles, and each trace's name, kind and
    x, y, z (what the chart draws, as the page computed it), after `about` (what it shows:
    the model, the input, the settings)."""
    layout = fig.layout
    def text(t):
        return None if t is None or t.text is None else t.text
    out = dict(about or {})
    out["title"] = text(layout.title)
    out["axes"] = {k: text(layout[k].title) for k in layout if k.startswith(("xaxis", "yaxis")) and layout[k].title}
    out["traces"] = []
    for t in fig.data:
        row = {"name": getattr(t, "name", None), "type": t.type}
        for k in ("x", "y", "z", "text"):
            v = getattr(t, k, None)
            if v is not None:
                row[k] = np.asarray(v).tolist() if not isinstance(v, str) else v
        out["traces"].append(row)
    return json.dumps(out, ensure_ascii=False, default=float)


def _spec(chart) -> dict:
    spec = chart.to_dict() if hasattr(chart, "to_dict") else dict(chart)
    if not isinstance(spec.get("width"), (int, float)):
        spec["width"] = EXPORT_WIDTH
    return spec


def vega_svg(chart) -> str:
    """An Altair chart (or a Vega-Lite dict) as SVG, rendered offline by vl-convert."""
    import vl_convert as vlc
    return vlc.vegalite_to_svg(json.dumps(_spec(chart)))


def vega_png(chart, scale: float = 2) -> bytes:
    """... as PNG, `scale` x its pixel size (2: sharp on a projector or in a paper)."""
    import vl_convert as vlc
    return vlc.vegalite_to_png(json.dumps(_spec(chart)), scale=scale)


def vega_html(chart) -> str:
    """... as one HTML file that draws it offline (vega, vega-lite and vega-embed inlined)."""
    import vl_convert as vlc
    return vlc.vegalite_to_html(json.dumps(_spec(chart)), bundle=True)


def positions(tokens) -> list[dict]:
    """[{"position": 0, "token": "▁Elle"}, ...]: a matrix's rows or columns, told apart by position
    (a word repeated in a sentence labels two rows)."""
    return [{"position": i, "token": str(t)} for i, t in enumerate(tokens)]


def matrix_csv(matrix, row_tokens, column_tokens, what: str) -> str:
    """A matrix as CSV: a row per row position (its position and token in the first two
    columns), a column per column position headed `position:token`; the first line, a comment
    starting with #, says what the numbers are (pandas.read_csv(..., comment="#") skips it)."""
    m = np.asarray(matrix, dtype=float)
    df = pd.DataFrame(m, columns=[f"{i}:{t}" for i, t in enumerate(column_tokens)])
    df.insert(0, "token", [str(t) for t in row_tokens])
    df.insert(0, "position", range(len(row_tokens)))
    return f"# {what}\n" + df.to_csv(index=False, float_format="%.6g")


def matrix_json(matrix, row_tokens, column_tokens) -> dict:
    """A matrix for a JSON export: rows, columns (position and token each) and the values."""
    return {"rows": positions(row_tokens), "columns": positions(column_tokens),
            "values": np.round(np.asarray(matrix, dtype=float), 6).tolist()}


__all__ = ["plotly_data", "positions", "matrix_csv", "matrix_json", "file_stem", "plotly_config", "plotly_html",
           "vega_svg", "vega_png", "vega_html"]
