"""Seq2Seq Explorer: see how recurrent encoder-decoder models translate, step by step.

    streamlit run app.py
"""
import streamlit as st

st.set_page_config(page_title="Seq2Seq Explorer", page_icon="🔤", layout="wide")

pages = [
    st.Page("pages/translate.py", title="Translate & Align", icon="🔤", default=True),
    st.Page("pages/bottleneck.py", title="Bottleneck", icon="🍾"),
]
st.navigation(pages).run()
