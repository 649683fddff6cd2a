"""The Alignment & Explanation page's tabs, one module each, in the page's order: gold.py
(Against human alignments), attribution.py (Attention vs attribution), corpus.py (Your
corpus); measurements.py, the measurements they draw, cached once per server, and the time
estimates of those that wait for a button; common.py, what the tabs share on screen.

Each tab gets `tr` the loaded model, `info` its registry row (name, kind, architecture) and
`path` its checkpoint (the caches' key). A tab's widgets keep their state in
st.session_state under the keys the page's address and the tests use. The page runs only
the open tab.
"""
