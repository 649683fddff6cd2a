"""Your corpus, the page's third tab: links for every pair of a file or a paste (as
`python -m s2s.alignment --input`), a download, a pair browser and, with gold links, AER (also
per layer x head for a Transformer)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

import ui.models
import ui.show
from s2s.alignment import DEFAULT_RULE, RULES, score, shifted
from s2s.alignment.corpus import parse_pharaoh_file, pharaoh_gold, pharaoh_lines, upload_corpus, weights_links
from s2s.attention import head_or_mean
from s2s.export import file_stem, plotly_config
from s2s.figures import gold_alignment_figure, head_aer_columns_fit, head_aer_figure
from s2s.text import MAX_CORPUS_BYTES, MAX_CORPUS_PAIRS, InputError
from ui.alignment.common import MATRIX_WHAT, RULE_HELP, about, asked_to_run, pair_export, reading_of, within
from ui.alignment.measurements import (
    CORPUS_ASK_S,
    TRIAL,
    corpus_estimate,
    corpus_head_aer_cached,
    corpus_runs,
    corpus_weights_cached,
    gold_pairs,
)

CORPUS_SOURCES = {"example": "Example: the 37 Hansards trial pairs and their gold", "upload": "Upload a file",
                  "paste": "Paste a few pairs"}


def uploaded_corpus() -> tuple[list, list | None, str] | None:
    """The pairs of the uploaded file, its gold if one is uploaded too, and the file's stem; an
    error shown (and None) for a file over the limits or not in the format."""
    up = st.file_uploader("Pairs: `English<TAB>French`, a pair a line", key="corpus_file",
                          help="The words are each side's whitespace tokens, as in the Pharaoh format's "
                               "numbering. A line without a tab or with an empty side is left unaligned.")
    gold_up = st.file_uploader("Gold links (optional): a line per pair, `i-j` sure, `i?j` possible",
                               key="corpus_gold", help="English word i, French word j, from 0 (the Pharaoh "
                                                       "format, as fast_align and eflomal write it).")
    if up is None:
        st.info("Upload a file of pairs, or choose the example above.")
        return None
    try:
        pairs = upload_corpus(up.getvalue(), up.name)
        gold = None
        if gold_up is not None:
            raw = gold_up.getvalue()
            if len(raw) > MAX_CORPUS_BYTES:
                raise InputError(f"{gold_up.name} is {len(raw) / 1000:,.0f} KB; the limit here is "
                                 f"{MAX_CORPUS_BYTES / 1000:,.0f} KB")
            gold = pharaoh_gold(parse_pharaoh_file(raw, gold_up.name), pairs, gold_up.name)
    except InputError as e:
        st.error(str(e))
        return None
    return pairs, gold, Path(up.name).stem


def pasted_corpus() -> tuple[list, None, str] | None:
    """The pairs pasted in the box (a tab, as a spreadsheet's two columns paste, or ` ||| `
    between the sides), within the same limits as a file; an error shown (and None) otherwise."""
    text = st.text_area("Pairs: English, a tab (or ` ||| `), French; a pair a line", key="corpus_text", height=120,
                        placeholder="The cat sleeps.\tLe chat dort.\nI like tea. ||| J'aime le thé.",
                        help="Two columns copied from a spreadsheet paste with a tab between them; a typed tab "
                             "moves to the next field, so type ` ||| ` instead.")
    if not text.strip():
        st.info("Paste pairs in the box, a pair a line.")
        return None
    lines = [line.replace(" ||| ", "\t") if "\t" not in line else line for line in text.strip("\n").split("\n")]
    try:
        pairs = upload_corpus("\n".join(lines).encode("utf-8"), "the pasted text")
    except InputError as e:
        st.error(str(e))
        return None
    return pairs, None, "pasted-pairs"


def corpus_view(name: str, path: str, transformer: bool, tr=None, hub: bool = False) -> None:
    """Your corpus: links for every pair of a file, a download, a sentence browser and, with
    gold links, AER (also per layer x head for a Transformer). A corpus that should take over
    CORPUS_ASK_S, or any for a Hugging Face model (`hub`), waits for a button that says how
    long (corpus_estimate, from `tr`); one run before, by any reader, is not asked again."""
    S = st.session_state
    shown = ui.models.display_name(name)      # a hub model by its name, not the server's folder
    left, right = st.columns([1, 3])
    with left:
        source = st.radio("Corpus", list(CORPUS_SOURCES), key="corpus_source", format_func=CORPUS_SOURCES.get)
        st.session_state.setdefault("corpus_rule", DEFAULT_RULE)    # in state, none beside it: Streamlit warns
        rule = st.selectbox("Links from attention", RULES, key="corpus_rule",
                            help="How weights become links: " + "; ".join(f"**{r}**: {h}"
                                                                        for r, h in RULE_HELP.items()))
        if source == "upload":
            got = uploaded_corpus()
        elif source == "paste":
            got = pasted_corpus()
        else:
            gold = gold_pairs(str(TRIAL), "trial")
            got = [(g.english, g.french) for g in gold], gold, "hansards-trial"
        st.caption(f"Limits here: {MAX_CORPUS_PAIRS:,} pairs and {MAX_CORPUS_BYTES // 1000:,} KB, a file or a paste "
                   "(the uploader's own 1 MB is the smallest limit Streamlit can set). The command line has none: "
                   "docs/corpus-alignment.md.")
    if got is None:
        return
    pairs, gold, stem = got
    with right:
        seconds = None
        if tr is not None and (path, tuple(pairs), shifted(rule), transformer) not in corpus_runs()["done"]:
            seconds, basis = corpus_estimate(path, tr, pairs)
            # issue #54: 37 pairs took 11.5 s on opening the tab; issue #62: the offer gone once pressed
            if hub or seconds > CORPUS_ASK_S:
                if not asked_to_run(f"Aligning these {len(pairs)} pairs forces each through {shown}: "
                                    f"{about(seconds)} on this server ({basis}).",
                                    f"Align {len(pairs)} pairs ({about(seconds)})", "corpus_run"):
                    return
        with st.spinner(f"Forcing {len(pairs)} pairs through {shown}…"
                        + (f" ({about(seconds)})" if seconds is not None and seconds >= 1 else "")):
            weights = corpus_weights_cached(path, tuple(pairs), shifted(rule), transformer)
        head = None
        if transformer:
            L, H = next(w.shape[:2] for w in weights if w is not None)
            choices = ["mean"] + [f"{l}-{h}" for l in range(L) for h in range(H)]
            if S.get("corpus_head") not in choices:
                S["corpus_head"] = "mean"
            reading = st.selectbox("Attention read", choices, key="corpus_head",
                                   format_func=lambda c: "last layer, head mean" if c == "mean" else
                                   f"layer {int(c.split('-')[0]) + 1} · head {int(c.split('-')[1]) + 1}")
            if reading != "mean":
                head = tuple(int(x) for x in reading.split("-"))
        found = weights_links(weights, rule, head)
        what = "mean" if head is None else f"L{head[0] + 1}H{head[1] + 1}"
        skipped = sum(f is None for f in found)
        corpus_stem = file_stem(stem, name, rule, what if transformer else "")
        rows = [{"pair": n, "English": " ".join(p[0]) if p else "", "French": " ".join(p[1]) if p else "",
                 "links": None if f is None else len(f)} for n, (p, f) in enumerate(zip(pairs, found), 1)]
        if gold is not None:
            s = score([f or set() for f in found], gold)
            c = st.columns(4)
            c[0].metric("AER (whole corpus)", f"{s.aer:.3f}", help="1 − (|A∩S| + |A∩P|) / (|A| + |S|), summed "
                                                                   "over every pair before dividing")
            c[1].metric("Precision", f"{s.precision:.3f}", help="|A∩P| / |A|")
            c[2].metric("Recall", f"{s.recall:.3f}", help="|A∩S| / |S|")
            c[3].metric("Links: model / sure", f"{s.links:,} / {s.sure:,}")
            for r, f, g in zip(rows, found, gold):
                one = score([f or set()], [g])
                r.update(AER=one.aer, precision=one.precision, recall=one.recall)
        st.caption(f"{len(pairs) - skipped} of {len(pairs)} lines aligned by {shown} ({rule}"
                   + ("" if not transformer else ", " + ("the last layer's head mean" if head is None else
                                                         f"layer {head[0] + 1} · head {head[1] + 1}")) + ")"
                   + (f"; {skipped} could not be (no tab, an empty side, not UTF-8 or too long): empty lines "
                      "in the download" if skipped else "") + ".")
        d = st.columns([3, 3, 2], vertical_alignment="bottom")
        d[0].download_button("⬇ Links (Pharaoh)", pharaoh_lines(found),
                             file_name=f"{corpus_stem}_links.txt", mime="text/plain", key="corpus_links_download")
        d[1].download_button("⬇ Per-pair table (CSV)", pd.DataFrame(rows).to_csv(index=False),
                             file_name=f"{corpus_stem}_pairs.csv", mime="text/csv", key="corpus_table_download")
        S["corpus_pair"] = within(S.get("corpus_pair", 1), 1, len(pairs))      # a link's, or another corpus's
        n = d[2].number_input(f"Pair (1–{len(pairs)})", 1, len(pairs), key="corpus_pair")
        i = int(n) - 1
        if found[i] is None:
            st.warning(f"Line {i + 1} could not be aligned: no tab, an empty side, not UTF-8, or too long for "
                       f"{shown}.")
        else:
            w = head_or_mean(weights[i], *(head or ()))
            g = gold[i] if gold is not None else None
            if g is not None:
                st.caption(f"Pair {i + 1}: AER {rows[i]['AER']:.3f}, precision {rows[i]['precision']:.3f}, "
                           f"recall {rows[i]['recall']:.3f}.")
            fig = gold_alignment_figure(pairs[i][0], pairs[i][1], w, set(g.sure) if g else set(),
                                        set(g.possible) if g else set(), found[i],
                                        words="gold words" if g else "your words")
            pair_stem = f"{corpus_stem}_pair{i + 1}"
            ui.show.plotly_chart(fig, width="stretch", key="corpus_figure", config=plotly_config(pair_stem))
            ui.show.chart_downloads(fig, pair_stem, "corpus_pair",
                                    pair_export(name, pairs[i][0], pairs[i][1], w, rule, found[i], g,
                                                MATRIX_WHAT + reading_of(head, transformer)))
    # the scores first: the sentences are long, and at 1280 px they pushed the scores off-screen
    table = pd.DataFrame(rows)
    table = table[[c for c in ("pair", "links", "AER", "precision", "recall") if c in table] + ["English", "French"]]
    ui.show.table(table, width="stretch", height=ui.show.grid_height(len(table), 250),
                  formats={k: "%.3f" for k in ("AER", "precision", "recall")})
    if transformer and gold is not None:
        st.subheader("Every layer × head as an aligner, on this corpus")
        with st.spinner("Scoring every layer × head…"):
            h = corpus_head_aer_cached(path, tuple(pairs), tuple(gold), rule)
        l, k = h["best"]
        aer = np.array(h["aer"])
        main = ui.show.MAIN_PX[ui.show.projector()]
        share = 0.4 if head_aer_columns_fit(aer.shape[1], int(0.4 * main)) else 1.0     # (as the gold tab's)
        c1 = st.columns([2, 3])[0] if share < 1 else st.container()
        ui.show.plotly_chart(head_aer_figure(aer, (l, k), width=int(share * main)), key="corpus_head_aer",
                             width="stretch", config=plotly_config(file_stem("head-aer", stem, name, rule)), where=c1,
                             share=share)
        c1.caption(f"AER of each layer × head's links ({rule}) over these {len(pairs)} pairs; lower is better. "
                   f"Outlined: the best, layer {l + 1} · head {k + 1} (AER {h['aer'][l][k]:.3f}).")


def your_corpus(tr, info, path: str) -> None:
    """Your corpus: links for a file or pasted pairs, scored against gold links if given."""
    corpus_view(info.name, path, info.arch == "transformer", tr, info.is_hub)
