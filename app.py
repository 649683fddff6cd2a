"""Seq2Seq Explorer: see how recurrent encoder-decoder models translate, step by step.

    streamlit run app.py
"""
from pathlib import Path

import streamlit as st

import ui

ui.run_through_app()     # a link's first run in Streamlit's old multipage mode: rerun through app.py

# The icon is a file served by the app itself: a ":material/…" icon makes the browser fetch
# the favicon from fonts.gstatic.com, and the app fetches nothing from the network.
st.set_page_config(page_title="Seq2Seq Explorer", page_icon=str(Path(__file__).parent / "assets" / "icon.png"),
                   layout="wide")
# Less empty space above the title: on a 1280x720 projector every line counts.
# (.st-key-plotly_early: the hidden chart of ui.load_plotly_early or ui.preload_chart_scripts, there to load Plotly's script;
# .st-key-vega_early: the Vega-Lite one of ui.preload_chart_scripts, off-screen: a chart of no width is never drawn)
st.markdown("<style>.block-container{padding-top:2.2rem} .st-key-plotly_early{display:none} "
            ".st-key-vega_early{position:absolute;left:-10000px;top:0;width:80px;height:30px;overflow:hidden}</style>",
            unsafe_allow_html=True)
ui.warm_up()          # once per server, in the background: torch and every model loaded and warmed

pages = [   # the lecture's outline first, then the pages in the lecture's order: gated cells and gradients first
    st.Page("pages/start.py", title="Start here", icon=":material/school:", default=True),
    st.Page("pages/gradients.py", title="Gates & Gradients", icon=":material/trending_down:"),
    st.Page("pages/translate.py", title="Translate & Align", icon=":material/translate:"),
    st.Page("pages/bottleneck.py", title="Bottleneck", icon=":material/compress:"),
    st.Page("pages/alignment.py", title="Alignment & Explanation", icon=":material/compare_arrows:"),
    st.Page("pages/cells.py", title="Cell States", icon=":material/memory:"),
]
page = st.navigation(pages)
# A page reads the URL's query string when the user arrives on it (a shared link, a link on
# the start page), never on its later reruns, which keep what the user changed since.
ui.note_arrival(page.url_path)
ui.restore_kept()     # the widgets a page asked to keep survive a visit to another page
page.run()
