"""Seq2Seq Explorer: see how recurrent encoder-decoder models translate, step by step.

    streamlit run app.py
"""
from pathlib import Path

import streamlit as st

import ui.address
import ui.show
import ui.warm

ui.address.run_through_app()     # a link's first run in Streamlit's old multipage mode: rerun through app.py

# The icon is a file served by the app itself: a ":material/…" icon makes the browser fetch
# the favicon from fonts.gstatic.com, and the app fetches nothing from the network.
ICON = str(Path(__file__).parent / "assets" / "icon.png")
st.set_page_config(page_title="Seq2Seq Explorer", page_icon=ICON, layout="wide")
# Less empty space above the title: on a 1280x720 projector every line counts.
# (.st-key-plotly_early: the hidden chart of ui.warm.load_plotly_early or ui.warm.preload_chart_scripts, there to
# load Plotly's script; .st-key-vega_early: the Vega-Lite one of ui.warm.preload_chart_scripts, off-screen: a chart
# of no width is never drawn; .st-key-s2s_script_*: ui.address.run_script's scripts, and .st-key-stale_note:
# ui.address.note_stale_results's note, shown while a form's controls changed: their wrappers hidden, since
# a wrapper of no height still takes the column's gap)
st.markdown("<style>.block-container{padding-top:2.2rem} .st-key-plotly_early{display:none} "
            ".st-key-vega_early{position:absolute;left:-10000px;top:0;width:80px;height:30px;overflow:hidden} "
            "div:has(> [class*='st-key-s2s_script_']), div:has(> .st-key-stale_note){display:none} "
            ".s2s-stale div:has(> .st-key-stale_note){display:flex}</style>",
            unsafe_allow_html=True)
ui.address.history_replaces_same_page()     # one Back press returns to the page the reader came from
ui.warm.warm_up()     # once per server, in the background: torch and every model loaded and warmed

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
ui.address.note_arrival(page.url_path)     # (projector=on or off in a link sets the switch below)
# The Projector switch, for a class: larger labels on every chart (ui.show.plotly_chart) and
# table, and the sidebar collapsed, so the charts get its width. Kept in the address
# (ui.address.set_address) and across pages; the sidebar's arrow brings the switch back.
st.sidebar.toggle("Projector", key="projector",
                  help="For a class: larger labels on every chart and table, the sidebar collapsed. "
                       "Kept in the page's address (projector=on).")
if ui.show.projector():
    st.set_page_config(page_title="Seq2Seq Explorer", page_icon=ICON, layout="wide", initial_sidebar_state="collapsed")
    # the main column's text, tables (static ones: ui.show.table), captions, widget labels and
    # what is typed into a box enlarged in proportion to the charts' labels; small text (Markdown's
    # :small[…], an inline 0.875rem: the Start page's topic sentences) as large as the body text
    st.markdown("<style>[data-testid='stMain'] [data-testid='stTable'] :is(th, td) {font-size: 1.1rem} "
                "[data-testid='stMain'] :is(input, textarea) {font-size: 1.1rem} "
                "[data-testid='stMain'] [data-testid='stMarkdownContainer'] :is(p, li) {font-size: 1.1rem} "
                "[data-testid='stMain'] [data-testid='stMarkdownContainer'] span[style*='0.875rem'] "
                "{font-size: inherit !important} "
                "[data-testid='stMain'] [data-testid='stCaptionContainer'] :is(p, li) {font-size: 1rem} "
                "[data-testid='stMain'] [data-testid='stWidgetLabel'] p {font-size: 1.05rem} "
                # a metric's value is Markdown too: the rule for paragraphs above shrank it from 36 to 17.6 px
                "[data-testid='stMain'] [data-testid='stMetricValue'] p {font-size: 2.25rem} "
                # code spans in captions and notes, drawn at 0.75 of their text (12 px), as large as it
                "[data-testid='stMain'] :is([data-testid='stCaptionContainer'], [data-testid='stAlert']) code "
                "{font-size: 0.95em}</style>",
                unsafe_allow_html=True)
else:
    st.set_page_config(page_title="Seq2Seq Explorer", page_icon=ICON, layout="wide", initial_sidebar_state="auto")
ui.address.restore_kept()     # the widgets a page asked to keep survive a visit to another page
with ui.warm.page_run():     # the warm-up steps aside while a page runs
    page.run()
