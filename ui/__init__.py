"""Streamlit glue shared by app.py and the pages; everything that computes lives in s2s/.

    ui/models.py          what the pages load, cached once per server: the models, their
                          decodings and timings, results files; the sidebar model picker
                          (importing it sets one torch thread per request)
    ui/address.py         links and page state: a page's address (query string) read on
                          arrival and kept up to date, widgets kept across pages, the run
                          through app.py
    ui/warm.py            the warm-up: torch, the models and the chart libraries loaded in
                          the background, and the browser's chart scripts fetched early
    ui/show.py            small display helpers: user text shown as text, tokens as code,
                          chart downloads
    ui/decoded.py         the Translate & Align page's decodings, cached once per server,
                          and their attention as shown (pieces or words): what the page,
                          its tabs, the knockout and the what-if share
    ui/translate_tabs.py  the Translate & Align page's seven tabs, one function each

A page imports the modules themselves (`import ui.models`, then `ui.models.get_model(...)`),
so a reader sees where each name comes from, and `import ui.…` lines sort before the page's
`from s2s… import` lines, which import torch (see ui/models.py).
"""
