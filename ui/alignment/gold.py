"""Against human alignments, the page's first tab: one pair's attention over its gold links and
the pair's AER; a Transformer's every layer x head as an aligner; every model on the test set."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import ui.models
import ui.show
from s2s.alignment import DEFAULT_RULE, RULES, GoldError, links, score, shifted
from s2s.export import file_stem, plotly_config
from s2s.figures import gold_alignment_figure, head_aer_columns_fit, head_aer_figure, label_px
from s2s.text import InputError, clean_text
from ui.alignment.common import MATRIX_WHAT, RULE_HELP, about, asked_to_run, pair_export, reading_of, within
from ui.alignment.measurements import (
    ALIGNMENT_RESULTS,
    CORPUS_ASK_S,
    TRIAL,
    gold_pairs,
    hansards_test_folder,
    head_aer_cached,
    head_scoring_estimate,
    head_scoring_runs,
    word_attention_cached,
    word_attention_heads_cached,
)

# a link scrolls the tab bar just below the header (~64-104 px at 1280 x 720): the gold figure, the
# tab's first element beside the choices (from ~136 px), has what is left of 720 px
GOLD_PX = 576
AER_SHARE = 0.4     # the layers x heads AER map's share of the main column, beside the best head's links


def words_of(text: str, what: str) -> tuple[str, ...]:
    words = tuple(clean_text(text, what=what).split())
    if len(words) > 80:
        raise InputError(f"The {what} has {len(words)} words; keep it under 80.")
    return words


def heads_of_model(tr, info, path: str, source: str, english, french, rule: str, gold) -> None:
    """A Transformer's every layer x head scored as an aligner on the chosen gold set (a
    layers x heads AER heatmap, the best head outlined), and that head's links on this pair.
    A scoring that should take over CORPUS_ASK_S, or any for a Hugging Face model, waits for a
    button that says how long (head_scoring_estimate); one run before, by any reader, is not
    asked again."""
    name = info.name
    folder = str(TRIAL if source == "trial" else hansards_test_folder())
    pairs = gold_pairs(folder, source)
    n = len(pairs)
    if (path, folder, source, rule) not in head_scoring_runs()["done"]:
        seconds, basis = head_scoring_estimate(path, tr, pairs)
        if (info.is_hub or seconds > CORPUS_ASK_S) and not asked_to_run(
                f"Scoring every layer × head forces the {n} {source} pairs through "
                f"{ui.models.display_name(name)}, every head kept: {about(seconds)} on this server ({basis}).",
                f"Score every layer × head ({about(seconds)})", "heads_run"):
            return
    with st.spinner(f"Scoring every layer × head on the {n} {source} pairs…"):
        try:
            h = head_aer_cached(path, folder, source, rule)
        except InputError as e:
            st.error(str(e))
            return
    l, k = h["best"]
    aer = np.array(h["aer"])
    # beside the best head's links while its heads' columns hold their AER (the shipped 3 x 4);
    # a model of more heads (opus-mt's 8, NLLB's 16) gets the column's whole width, the pair below
    main = ui.show.MAIN_PX[ui.show.projector()]
    share = AER_SHARE if head_aer_columns_fit(aer.shape[1], int(AER_SHARE * main)) else 1.0
    c1, c2 = st.columns([2, 3]) if share < 1 else (st.container(), st.columns([3, 2])[0])
    with c1:
        ui.show.plotly_chart(head_aer_figure(aer, (l, k), width=int(share * main)), share=share, key="head_aer",
                             width="stretch", config=plotly_config(file_stem("head-aer", name, source, rule)))
        st.caption(f"AER of each layer × head's cross-attention read as links ({rule}) over the {h['pairs']} "
                   f"{source} pairs; lower is better. Outlined: the best, layer {l + 1} · head {k + 1} "
                   f"(AER {h['aer'][l][k]:.3f}); the last layer's head mean, the matrix the other views show: "
                   f"{h['mean_aer']:.3f}." + (f" {h['note']}" if h["note"] else ""))
    with c2:
        try:
            w = word_attention_heads_cached(path, tuple(english), tuple(french), shifted(rule))[l, k]
        except InputError:      # this pair is longer than the model's positions: said above, by the pair's view
            return
        predicted = links(w, rule)
        ui.show.plotly_chart(gold_alignment_figure(english, french, w, set(gold.sure), set(gold.possible), predicted,
                                                   words="gold words"), width="stretch", key="best_head_figure",
                             config=plotly_config(file_stem("alignment", name, f"L{l + 1}H{k + 1}", rule,
                                                            " ".join(english)[:40])))
        st.caption(f"Layer {l + 1} · head {k + 1} alone on this pair: {score([predicted], [gold]).aer:.3f} AER "
                   "(crosses: its links; red: the annotators').")


def human_alignments(tr, info, path: str) -> None:
    """Against human alignments: one pair's attention over its gold links, the pair's AER; a
    Transformer's every head as an aligner; every model on the test set."""
    S, name = st.session_state, info.name
    is_transformer = info.arch == "transformer"
    sources = {"trial": "Trial set (37 pairs)", "typed": "Type a pair"}
    if (hansards_test_folder() / "test.wa").is_file():
        sources = {"trial": sources["trial"], "test": "Test set (447 pairs)", "typed": sources["typed"]}
    if S.get("gold_source") not in sources:
        S["gold_source"] = "trial"
    left, right = st.columns([1, 3])
    with left:
        source = st.radio("Sentence pairs", list(sources), key="gold_source", format_func=sources.get,
                          help="Hansards English–French, hand-aligned by Och & Ney (HLT-NAACL 2003 shared task)."
                               + ("" if "test" in sources else " The 447 test pairs are not in the repository; "
                                  "set S2S_HANSARDS to their folder to browse them here."))
        gold = None
        try:
            if source == "typed":
                # no max_chars: its counter covers the end of the text in a column this narrow;
                # words_of refuses a text over 80 words (or the app's character limit) instead
                # defaults in state, none beside the widget: Streamlit warns when state sets it too
                S.setdefault("typed_en", "the house is small .")
                S.setdefault("typed_fr", "la maison est petite .")
                en_text = st.text_input("English words", key="typed_en")
                fr_text = st.text_input("French words", key="typed_fr")
                english, french = words_of(en_text, "English"), words_of(fr_text, "French")
            else:
                pairs = gold_pairs(str(TRIAL if source == "trial" else hansards_test_folder()), source)
                S["gold_pair"] = within(S.get("gold_pair", 4), 1, len(pairs))
                n = st.number_input(f"Pair (1–{len(pairs)})", 1, len(pairs), key="gold_pair")
                gold = pairs[int(n) - 1]
                english, french = gold.english, gold.french
            S.setdefault("rule", DEFAULT_RULE)
            rule = st.selectbox("Links from attention", RULES, key="rule",
                                help="How weights become links: " + "; ".join(f"**{r}**: {h}"
                                                                            for r, h in RULE_HELP.items()))
        except (InputError, GoldError) as e:
            st.error(str(e))
            english = None
        scores = st.container()      # this pair's AER and co., under the choices: the figure gets the height
    with right:
        if english:
            try:
                w = word_attention_cached(path, tuple(english), tuple(french), shifted(rule))
            except InputError as e:
                st.error(str(e))
                w = None
            if w is not None:
                predicted = links(w, rule)
                sure = set(gold.sure) if gold else set()
                possible = set(gold.possible) if gold else set()
                if gold is not None:
                    s = score([predicted], [gold])
                    c = scores.columns(2, gap="small")
                    c[0].metric("AER", f"{s.aer:.3f}", help="This pair's alignment error rate, "
                                                            "1 − (|A∩S| + |A∩P|) / (|A| + |S|); 0 is perfect")
                    c[1].metric("Links A/S", f"{len(predicted)}/{len(sure)}",
                                help="|A|, the model's links, and |S|, the annotators' Sure links")
                    c[0].metric("Precision", f"{s.precision:.3f}", help="|A∩P| / |A|")
                    c[1].metric("Recall", f"{s.recall:.3f}", help="|A∩S| / |S|")
                else:
                    st.caption("A typed pair has no human links: only the model's are drawn.")
                # as tall as a link's first screen has room for below the tab bar (the tab's first
                # thing, beside the choices): GOLD_PX
                fig = gold_alignment_figure(english, french, w, sure, possible, predicted,
                                            words="gold words" if gold else "your words",
                                            height=GOLD_PX - (40 if gold is None else 0),
                                            label_size=label_px(ui.show.projector()))
                pair_stem = file_stem("alignment", name, f"{source}{int(n) if gold else ''}", rule,
                                      "" if gold else " ".join(english)[:40])
                with st.container(key="point_gold"):
                    ui.show.plotly_chart(fig, share=0.75, width="stretch", key="gold_figure",
                                         config=plotly_config(pair_stem))
                st.caption(f"Shaded: {ui.models.display_name(name)}'s attention, forced to read "
                           f"{'the gold' if gold else 'your'} French, "
                           "summed over each English word's pieces and averaged over each French word's"
                           + (", each French word read at the step that has it as input (shift)" if shifted(rule)
                              else "") + ". Black "
                           f"crosses: its links ({rule})."
                           + (" Red squares: the annotators' Sure links; light red: Possible." if gold else ""))
                ui.show.chart_downloads(fig, pair_stem, "gold_pair",
                                        pair_export(name, english, french, w, rule, predicted, gold,
                                                    MATRIX_WHAT + reading_of(None, is_transformer)))
    if is_transformer and source != "typed" and english:
        st.subheader("Every layer × head as an aligner")
        heads_of_model(tr, info, path, source, english, french, rule, gold)
    st.subheader("Every model on the test set")
    table = ui.models.results_file(ALIGNMENT_RESULTS)
    if table is None:
        st.info("No `results/alignment.json` yet: `python -m s2s.alignment --gold DIR --table "
                "results/alignment.json` writes it.")
    else:
        rows = [{"aligner": r["model"], "kind": r["kind"], "rule": r["rule"], "AER": r["aer"],
                 "precision": r["precision"], "recall": r["recall"]} for r in table["rows"]]
        # a static table: its cells wrap, where a data grid cut the baseline's long "kind" at 1280 px
        st.table(pd.DataFrame(rows).style.hide(axis="index").format("{:.3f}", subset=["AER", "precision", "recall"]))
        st.caption(f"{table['sentences']} test pairs, lower AER is better. Written by `{table['command']}`.")
