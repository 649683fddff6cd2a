"""The Translate & Align page's seven tabs, one function each, in the page's order (the
decodings they share are ui/decoded.py's).

Each tab gets what it shows as parameters: `tr` the loaded model, `d` the page's decoding of
the text (its states dropped), `words` whether tokens are shown as whole words, `model` the
model's name and `text` the English (both name the files a chart downloads as). A tab's own
widgets keep their state in st.session_state under the keys the page's links and tests use.
The page runs only the open tab.

Importing this module imports torch (s2s.decode): the page imports it after drawing its form.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st

import ui.address
import ui.contrast_panel
import ui.decoded
import ui.head_overview
import ui.knockout
import ui.lens_panel
import ui.models
import ui.neuron_view
import ui.show
from s2s import figures
from s2s.attention import SCORES, scaling_statistics
from s2s.checkpoint import Translator
from s2s.decode import (
    DecodeSettings,
    Decoding,
    attention_heads,
    encode_source,
    forced,
    is_search_error,
    source_coverage,
)
from s2s.evaluate import bleu_breakdown
from s2s.piece_words import (
    HEAD_KINDS,
    HEADS_VIEWS,
    argmax_alignment,
    mean_entropy,
    merge_to_words,
    uniform_entropy,
    word_log_prob,
)
from s2s.text import MAX_CHARS, InputError

SCALING_DIMS = [4, 16, 64, 256, 1024]     # query/key sizes for the "why sqrt(d)" view


# ------------------------------------------------------------------ cached decodings
@st.cache_data(max_entries=64, show_spinner=False)
def forced_cached(path: str, text: str, reference: str) -> Decoding:
    return forced(ui.models.load_path(path), text, reference).without_states()


@st.cache_data(max_entries=100, show_spinner=False)
def scaling_cached(n_keys: int) -> dict:
    return scaling_statistics(SCALING_DIMS, n_keys=n_keys, samples=500)


# ------------------------------------------------------------------ attention as shown
def heatmap(d: Decoding, words: bool, key: str, model: str, text: str, height: int | None = None,
            color: str | None = None, share: float = 1.0, x_labels: bool = True) -> None:
    """d's attention heatmap; `color` shades it from white to a model's own colour instead, as a
    compact small multiple (no axis titles nor colour bar) `share` of the main column wide, its
    source tokens unlabelled unless `x_labels` (the map above has the same).

    A small multiple's rows are as tall as `height` says (the caller sized them for its labels)
    and it has no toolbar: kept clear of its top labels, the toolbar's row took 28 px of each
    first row of Compare attention, which then ran past a projector's first screen (issue #69)."""
    src, tgt, a = ui.decoded.view_of(d, words)
    if color is None:
        ui.show.plotly_chart(figures.attention_heatmap(src, tgt, a, height=height), share=share, key=key,
                             config=ui.show.camera(key, model, text[:40]))
        return
    fig = figures.matrix_heatmap(src, tgt, a, colorscale=[[0, "#ffffff"], [1, color]], height=height, compact=True,
                                 label_size=figures.label_px(ui.show.projector()), x_labels=x_labels)
    ui.show.plotly_chart(ui.show.screen_figure(fig, share, grow=False, toolbar=False), share=share, ready=True,
                         key=key, config={"displayModeBar": False})


def io_line(english: str, french: str, french_label: str = "") -> None:
    """The tab's input and output on one line, first in the tab: a link lands on the tab bar,
    with the translation above it out of sight. Both are text, escaped once."""
    with ui.show.point("io"):
        ui.show.escaped(f"{english}  →  {french_label}{french}", size="1.1rem")


# ------------------------------------------------------------------ choices kept from another model
def check_choices(tr: Translator, name: str) -> None:
    """Every choice that one model's widgets make and another model's read, made valid for this
    model before the address or a widget reads it (ui.address.check_choice): a Transformer's
    layer and head of the heatmap, the Heads tab's kind, layer, head and view, the probe
    sentence of Attention emerges. A model without them (a recurrent one) drops them. Their
    ranges come from the config, as the decoding will have them: the address is written
    before the text is decoded."""
    S = st.session_state
    changed = S.get("_choices_model") != name
    S["_choices_model"] = name
    m = tr.config["model"]
    transformer = tr.arch == "transformer"
    layers, heads = (m["decoder_layers"], m["heads"]) if transformer else (0, 0)
    if transformer:
        S.setdefault("tf_layer", layers - 1)       # the last layer's mean first
    # the Layer box labels the last layer "(last)": the same layer has another label under
    # another model, which the browser learns only from a value written back (`resend`)
    ui.address.check_choice("tf_layer", range(layers), layers - 1, resend=changed)
    ui.address.check_choice("tf_head", [None, *range(heads)], None, resend=changed)
    ui.address.check_choice("heads_kind", list(HEAD_KINDS) if transformer else [], "cross")
    kind_layers = m.get("encoder_layers", layers) if S.get("heads_kind") == "encoder" else layers
    ui.address.check_choice("heads_layer", range(kind_layers), kind_layers - 1)
    ui.address.check_choice("heads_head", range(heads), 0)
    ui.address.check_choice("heads_view", list(HEADS_VIEWS) if transformer else [], "weights")
    if trace := tr.metrics.get("trace"):     # a model without one says so in its tab and keeps the choice
        ui.address.check_choice("probe", range(len(trace["probes"])), 0)


# ------------------------------------------------------------------ the tabs
def step_by_step(tr: Translator, d: Decoding, words: bool, model: str, text: str,
                 steer: Callable[[Translator, Decoding, int, int], None] | None = None) -> None:
    """Replay the decoding one step at a time: where the decoder attended and what it might
    have chosen. ▶ Play walks the same view through every step and leaves the slider on the last.
    `steer(tr, d, first piece of the step, step from 1)` draws under the charts what steering
    the step offers (ui.what_if.steer_controls). A steered `d` (its prefix_length > 0) is walked
    below the steered panel, which is then what the tab's first screen promises: not its lines."""
    S = st.session_state
    promised = ui.show.point if not d.prefix_length else (lambda name: st.container())
    with promised("io"):
        ui.show.escaped(f"{text}  →  {d.translation}", size="1.1rem")
    # one step per output word when words are shown: a word's pieces are consecutive steps
    spans = ui.decoded.output_steps(d.target_tokens, words)
    unit = "word" if words else "piece"
    n = len(spans)
    if "_step_after_play" in S:      # ▶ Play ended on the last step: the slider stays there
        S.step = min(S.pop("_step_after_play"), n)
    if S.get("step", 1) > n:
        S.step = n
    # (1.35: the label whole with the Projector's larger text beside the sidebar)
    c_play, c_delay, c_step = st.columns([1.35, 1.4, 3.75], vertical_alignment="bottom")
    play = c_play.button("▶ Play decoding", key="play", width="stretch",
                         help="Walk this view through every step, attention and next tokens together")
    delay = c_delay.slider("Seconds per step", 0.0, 1.5, step=0.1, key="delay")
    step_slot = c_step.empty()       # ▶ Play moves a copy of the slider here, step by step
    t = step_slot.slider(f"Step ({unit}s)", 1, n, key="step") - 1 if n > 1 else 0
    with promised("step"):
        line, so_far = st.empty(), st.empty()
        c1, c2 = st.columns(2)
        attn_title, attn_box = c1.empty(), c1.empty()
        top_title, top_box = c2.empty(), c2.empty()

    def draw(t: int, live: str = "") -> None:
        """Step t's line, the output so far (in words or pieces) and its two charts."""
        chosen, idx = spans[t]
        p = float(np.exp(word_log_prob(d.token_log_probs, idx)))
        # which p it is: a piece's, or a word's, the product of its pieces' (each shown: the lens
        # below gives a piece's p, issue #69 item 6)
        whose = (f"p = {p:.3f}, the {unit}'s" if len(idx) == 1 else
                 f"p = {p:.3f}, the word's: its pieces' " + " × ".join(
                     f"{ui.show.code_span(d.target_tokens[j])} {np.exp(d.token_log_probs[j]):.3f}" for j in idx))
        line.markdown(f"Step **{t + 1}** of {n} {unit}s: the decoder chose {ui.show.code_span(chosen)} ({whose})")
        so_far.markdown("**So far:** " + " ".join(ui.show.code_span(w) for w, _ in spans[:t + 1]))
        attn_title.markdown("**Attention over the source** (α at this step" + (", averaged over the word's pieces)"
                                                                             if len(idx) > 1 else ")"))
        if d.attention is not None:
            src, _, a = ui.decoded.view_of(d, words)
            ui.show.plotly_chart(figures.token_bars(src, a[t], "attention weight α", highlight=int(a[t].argmax()),
                                                    value_range=(0, 1)),
                                 share=0.5, where=attn_box, key=f"step_attn{live}",
                                 config=ui.show.camera("step_attn", model, text[:40]))
        else:
            attn_box.caption("No attention in this model.")
        first = idx[0]
        top_title.markdown("**Most likely next tokens**" + (" (for the word's first piece)" if len(idx) > 1 else ""))
        top = d.step_top[first] if first < len(d.step_top) else []
        toks = [tok for tok, _ in top]
        here = d.target_tokens[first]
        ui.show.plotly_chart(figures.token_bars(toks, [q for _, q in top], "probability",
                                                highlight=toks.index(here) if here in toks else None,
                                                value_range=(0, 1)),
                             share=0.5, where=top_box, key=f"step_top{live}",
                             config=ui.show.camera("step_top", model, text[:40]))

    if play and n > 1:
        for k in range(n):
            step_slot.slider(f"Step ({unit}s)", 1, n, value=k + 1, key=f"step_live{k}", disabled=True)
            draw(k, live=f"_live{k}")
            time.sleep(delay)
        S["_step_after_play"] = n     # the slider is drawn already: it moves on the rerun
        st.rerun()
    draw(t)
    if steer is not None:
        steer(tr, d, spans[t][1][0], t + 1)
    ui.lens_panel.lens_panel(tr, d, spans[t][1][0], model, text)      # each layer's guess at this step
    ui.contrast_panel.contrast_panel(tr, d, spans[t][1][0], model, text, spans[t])     # why this piece, not a foil


def beam_tree(d: Decoding, method: str, model: str, text: str, greedy_d: Decoding | None = None) -> None:
    """Beam search's n-best list with scores and how much of the source each one's attention
    covered, then every hypothesis the beam kept (`method` is the page's decoding method;
    `greedy_d`, greedy decoding of the same text, whose coverage the best beam is held to)."""
    if method != "beam":
        st.info("Choose **Beam search** (beside Greedy, under the text) and press Translate to see its tree; "
                "its width is under Decoding settings.")
        return
    if not d.beam_tree:         # sentence by sentence: one search per sentence, no single tree
        st.info("Translated sentence by sentence: each sentence had its own beam. Turn *Sentence by sentence* off "
                "(under the text) to see one search's tree, or translate a single sentence.")
        return
    io_line(text, f"the {len(d.nbest)} best of the beam:" if d.nbest else d.translation)
    projector = ui.show.projector()
    greedy_cover = None if greedy_d is None or greedy_d.attention is None else source_coverage(greedy_d.attention)
    best_cover = d.nbest[0].coverage if d.nbest else None
    if best_cover is not None and greedy_cover is not None and best_cover < greedy_cover - 1e-9:
        st.warning(f"The best beam's attention reached {best_cover:.0%} of the source pieces; greedy's reached "
                   f"{greedy_cover:.0%} (\"{greedy_d.translation}\"). Beam search favours high-probability, often "
                   "shorter outputs: a hypothesis that stops early can outscore one that translates everything.")
    with ui.show.point("beam"):
        if d.nbest:
            ui.show.table(pd.DataFrame([{"rank": i + 1, "translation": h.translation, "log p": round(h.log_prob, 3),
                                         "score (log p / lp)": round(h.score, 3),
                                         "source covered": "—" if h.coverage is None else f"{h.coverage:.0%}"}
                                        for i, h in enumerate(d.nbest)]),
                          width="stretch", key="nbest", formats={"log p": "%.3f", "score (log p / lp)": "%.3f"})
        # the first screen's room below the table (1280 x 720): the ranks stand closer on a
        # projector, whose tables are larger
        ui.show.plotly_chart(figures.beam_tree_figure(d.beam_tree, [h.node for h in d.nbest],
                                                      font_px=figures.label_px(projector),
                                                      height=370 if projector else 400),
                             key="beam_tree", config=ui.show.camera("beam_tree", model, text[:40]))
    st.caption("Every hypothesis the beam kept at every step. Bold paths are the final n-best, the darkest "
               "is the winner; red dots are finished hypotheses (they emitted </s>). A finished hypothesis leaves the "
               "beam, which refills to its width, so a step can show more dots than the width. Scores are "
               "log p / ((5+|y|)/6)^0.6, so longer outputs are not penalised for their length alone. *Source "
               "covered*: the share of source pieces whose attention, summed over the hypothesis's steps, reached 0.5.")


def forced_decoding(tr: Translator, d: Decoding, words: bool, model: str, text: str, method: str,
                    method_label: str, continue_from: Callable[[str], None] | None = None) -> None:
    """A reference translation the reader pastes, forced through the model: how likely the
    model finds it, token by token, against its own `method` output (`method_label` names it),
    and BLEU of that output against the reference, from its n-gram counts. Or, with "Continue
    from this French" (`continue_from(reference)` draws it), a partial one the model continues."""
    S = st.session_state
    io_line(text, S.get("reference") or "(a reference translation, typed below)")
    with st.form("forced", border=False):
        # one row sized by its content: the buttons as wide as their labels, the box the rest (fixed
        # column shares cut both labels beside the sidebar: "Score this transl…", issue #62)
        row = st.container(horizontal=True, vertical_alignment="bottom", gap="small")
        ref = row.text_input("Reference (French)", key="reference", label_visibility="collapsed",
                             placeholder="Reference (French): a translation to force through the model",
                             help=f"Up to {MAX_CHARS:,} characters.")
        row.form_submit_button("Score this translation", width="content", on_click=S.__setitem__,
                               args=("cont", False), help="Score it as a finished translation")
        if continue_from is not None:
            row.form_submit_button("Continue from this French", width="content", on_click=S.__setitem__,
                                   args=("cont", True),
                                   help="Read it as the start of a translation: the model writes the rest")
    if not ref.strip():
        st.caption("Paste a reference translation: the model is forced to produce it, and you see how it aligns "
                   "and how likely it finds each token. Or type the start of one, and the model continues it.")
        return
    if S.get("cont") and continue_from is not None:     # a prefix: nothing to score as finished, no search error
        continue_from(ref)
        return
    try:
        f = forced_cached(ui.models.model_path(model), text, ref)
    except InputError as e:
        st.warning(str(e))
        return
    if unknown_ref := tr.tokenizer.unknown_characters(ref, target=True):
        st.caption(ui.show.unknown_characters_note(unknown_ref, "the reference"))
    ppl = float(np.exp(-f.log_prob / len(f.target_tokens)))
    if is_search_error(d, f, method):
        by = "log p" if method == "greedy" else "log p / lp(|y|), the score beam search ranks by"
        st.warning(f"Search error: the model scores this reference higher than its own "
                   f"{method_label.lower()} output by {by} (log p {f.log_prob:.2f} against "
                   f"{d.log_prob:.2f}). The model prefers the reference; the search did not find it.")
    with ui.show.point("forced"):
        st.markdown(f"log p(reference) = **{f.log_prob:.2f}**, perplexity **{ppl:.2f}** "
                    f"(the model's own output: log p = {d.log_prob:.2f})")
        c1, c2, c3 = st.columns([0.42, 0.25, 0.33])
        # the heatmap and the bars share rows, words or pieces as the page shows them: the
        # same height and margins, so each bar sits beside its row of the heatmap
        spans = ui.decoded.output_steps(f.target_tokens, words)
        src, tgt, a = ui.decoded.view_of(f, words) if f.attention is not None else (f.source_tokens, [], None)
        # tall enough that for_screen labels every row: the margins, the band of the source
        # words above (rotated -60 degrees, ~0.62 font sizes a character) and 1.4 font sizes a row
        px = figures.label_px(ui.show.projector())
        longest = max((len(w) for w in src), default=4)
        height = 170 + round(0.62 * px * longest * 0.87 + 25) + round(1.4 * px * max(len(spans), 4))
        margin = dict(t=110, b=50)
        lp = [word_log_prob(f.token_log_probs, idx) for _, idx in spans]
        ranks = ["/".join(f"#{f.token_ranks[j]}" for j in idx) for _, idx in spans]
        bars = figures.token_bars([w for w, _ in spans], lp, "log p", highlight=int(np.argmin(lp)),
                                  texts=[f"{v:.2f} {r}" for v, r in zip(lp, ranks)], height=height)
        bars.update_layout(height=height, margin=margin)
        bars = ui.show.screen_figure(bars, share=0.25)
        if a is not None:
            fig = figures.attention_heatmap(src, tgt, a, height=height)
            fig.update_layout(height=height, margin=margin)
            fig = ui.show.screen_figure(fig, share=0.42)
            ui.show.same_rows(fig, bars)     # the heatmap's toolbar row, say, given to the bars too
            with c1:
                ui.show.plotly_chart(fig, ready=True, key="forced_heatmap",
                                     config=ui.show.camera("forced_heatmap", model, text[:40]))
        with c2:
            ui.show.plotly_chart(bars, ready=True, key="forced_lp",
                                 config=ui.show.camera("forced_lp", model, text[:40]))
        with c3:
            explain_scores(d, ref)
    st.caption(f"Perplexity exp(−log p / {len(f.target_tokens)} tokens) is the Shannon game's score: "
               f"at each token the model was, on average, as unsure as if it chose among {ppl:.1f} "
               "equally likely tokens. Each bar is a " + ("word's log p (the sum of its pieces')" if words else
                                                          "piece's log p") + " and its rank: #1 = the model's first "
               "choice there" + (" (one rank per piece)" if words else "") + ". The darkest bar is the least likely.")
    tokens = pd.DataFrame({"reference token": f.target_tokens, "p": np.exp(f.token_log_probs).round(4),
                           "rank": f.token_ranks})
    with st.expander("Each reference token's probability and rank (1 = the model's first choice)"):
        ui.show.table(tokens, key="token_ranks")
    ui.contrast_panel.contrast_panel(tr, f, None, model, text)     # why a reference piece, not a foil


def explain_scores(d: Decoding, reference: str) -> None:
    """BLEU of the model's output against the reference, part by part."""
    b = bleu_breakdown(d.translation, reference)
    st.markdown("**BLEU** of the output against it:")
    rows = [{"n-gram": n, "matching / in output": f"{m} / {t}", "p_n": "–" if p is None else f"{p:.3f}"}
            for n, m, t, p in zip(range(1, 5), b["matches"], b["totals"], b["precisions"])]
    ui.show.table(pd.DataFrame(rows), key="bleu_table")
    st.markdown(f"BP = min(1, e^(1 − {b['ref_len']}/{b['hyp_len']})) = **{b['bp']:.3f}**  \n"
                f"BLEU-2 = BP · (p₁p₂)^½ = **{b['bleu2'] / 100:.3f}**  \n"
                f"BLEU-4 = BP · (p₁p₂p₃p₄)^¼ = **{b['bleu4'] / 100:.3f}**  \n"
                f"chrF = **{b['chrf']:.1f}**")
    zeros = [f"p{n}" for n, m in zip("₁₂₃₄", b["matches"]) if m == 0]
    st.caption("BP is the brevity penalty. One sentence and one reference: BLEU is meant for a whole test set."
               + (" Here no word of the output is in the reference (p₁ = 0), so BLEU is 0 however it is "
                  "smoothed." if b["matches"][0] == 0 else
                  f" Here {', '.join(zeros)} = 0, which would make the product 0; sacrebleu smooths the zero "
                  "counts instead." if zeros else ""))


def compare_attention(words: bool, model: str, text: str, greedy: DecodeSettings) -> None:
    """The text through one recurrent model per scoring function and the Transformers, each
    decoded with `greedy` (the page's max length), side by side; and why scaled-dot divides by √d."""
    by_attention, transformers = {}, []   # one recurrent model per scoring function, read from the configs
    for info in ui.models.translation_models():
        if info.error is None and info.arch == "rnn" and info.attention in SCORES:
            by_attention.setdefault(info.attention, info.name)
        elif info.error is None and info.arch == "transformer":
            transformers.append(info.name)
    present = [s for s in SCORES if s in by_attention]
    # (label, model, family): each model in its own colour, the one it has on every page
    panels = [(score, by_attention[score], score) for score in present] + \
             [(f"Transformer ({t})" if len(transformers) > 1 else "Transformer", t, "transformer")
              for t in transformers]
    colors = figures.model_colors({other: family for _, other, family in panels})
    on = ui.show.projector()
    alignments = []       # (label, its argmax alignment), listed below the grid
    # small multiples: every panel and the √d view on the tab's first screen, 3 a row
    # (tighter than Streamlit's 1rem between elements, which its markdown offsets by a -1rem margin)
    st.markdown("<style>.st-key-point_compare, .st-key-point_compare [data-testid='stVerticalBlock']{gap:0.3rem} "
                ".st-key-point_compare [data-testid='stMarkdownContainer']{margin-bottom:0} "
                ".st-key-point_compare [data-testid='stMarkdownContainer'] p{margin-bottom:0}</style>",
                unsafe_allow_html=True)
    with ui.show.point("compare"):
        ui.show.escaped("English: " + text, size="1.1rem")
        cells = [c for _ in range(-(-(len(panels) + 1) // 3)) for c in st.columns(3, gap="medium")]
        above = {}        # column -> the source tokens of the map above: the same ones are not labelled twice
        for k, (cell, (label, other, family)) in enumerate(zip(cells, panels)):
            with cell:
                try:
                    od, _ = ui.decoded.decode_cached(ui.models.model_path(other), text, greedy)
                except Exception as e:   # a missing or broken checkpoint must not break the page
                    st.warning(f"{other}: {e}")
                    continue
                color = colors[other]       # a constant from s2s.figures, never user text
                ui.show.escaped(od.translation, size="1.05rem",      # under its model's name, in one element
                                above=f"<span style='color:{color};font-size:1.4em;line-height:1'>■</span> "
                                      f"**{label}** · entropy {mean_entropy(od.attention):.2f}")
                src, tgt, a = ui.decoded.view_of(od, words)
                # rows as tall as an 18 px label needs on the projector (its box is 1.42 sizes tall)
                heatmap(od, words, f"cmp_{family if family != 'transformer' else other}", model, text,
                        height=(25 if on else 20) * len(tgt), color=color, share=1 / 3,
                        x_labels=above.get(k % 3) != src)
                above[k % 3] = src
                alignments.append((label, " · ".join(f"{t}→{s}" for t, s, _ in argmax_alignment(src, tgt, a))))
        with cells[len(panels)]:
            st.markdown("**Why scaled-dot divides by √d**")
            sqrt_slot = st.empty()      # drawn once the slider below the grid is read
    n_keys = st.slider("Keys (source positions) of the √d view", 2, 100, 20, key="sqrt_keys",
                       help="How many scores each softmax of the √d view spreads its weight over")
    stats = scaling_cached(n_keys)
    ui.show.plotly_chart(figures.scaling_figure(stats, compact=True, height=(210 if on else 200)), share=1 / 3,
                         where=sqrt_slot, key="sqrt_d", config=ui.show.camera("sqrt_d", model, text[:40]))
    if len(present) < len(SCORES):
        st.caption("No model in checkpoints/ with " + ", ".join(f"{s}" for s in SCORES if s not in present)
                   + " attention.")
    st.caption("The same input through the recurrent models' attention functions"
               + (" and the Transformer (its last layer's cross-attention, the mean of its heads)" if transformers
                  else "") + ", greedy; each map shades α from 0 (white) to 1 (the model's colour). Entropy is the "
               "mean over output tokens of −Σ α log α (nats): 0 means each output token looks at one source token.")
    i = stats["d"].index(256)
    st.caption(f"Why √d, with {n_keys} keys: random queries and keys with N(0, 1) entries: q·k has variance d "
               "(dotted: the entropy of uniform weights, the most there can be). At "
               f"d = 256 the raw scores spread with standard deviation {stats['std_unscaled'][i]:.1f}, and softmax "
               f"puts almost all weight on one key (entropy {stats['entropy_unscaled'][i]:.2f} nats); divided by √d "
               f"they spread with {stats['std_scaled'][i]:.1f} and the entropy stays "
               f"{stats['entropy_scaled'][i]:.2f} of at most {stats['max_entropy']:.2f}. A saturated softmax has "
               "near-zero gradients.")
    with st.expander("Argmax alignments"):
        for label, pairs in alignments:
            st.caption(f"**{label}**. Argmax alignment: {pairs}")


def alignment_lines(d: Decoding, words: bool, model: str, text: str, attention: np.ndarray | None,
                    title: str | None) -> None:
    """The heatmap's matrix as lines from output to source tokens: `attention` is what the
    heatmap shows (a Transformer's chosen layer and head, described by `title`)."""
    if d.attention is None:
        st.info("No attention in this model.")
        return
    st.caption("Each line joins an output token to a source token; its opacity is the attention weight."
               + (f" Shown: the heatmap's {title}." if title else ""))
    src, tgt, a = ui.decoded.view_of(d, words, attention)
    ui.show.plotly_chart(figures.alignment_lines(src, tgt, a), key="lines",
                         config=ui.show.camera("lines", model, text[:40]))


@st.cache_data(max_entries=64, show_spinner=False)
def norm_heads_cached(path: str, text: str, target_ids: tuple) -> np.ndarray:
    """Each cross-attention head's norm view of this output, (layers, heads, target, source),
    rows scaled to sum to 1 (s2s.contributions)."""
    import torch

    from s2s.contributions import contributions
    tr = ui.models.load_path(path)
    src = torch.tensor([encode_source(tr, text)], device=tr.device)
    _, heads, _, _ = contributions(tr.model, src, torch.tensor(target_ids, device=tr.device), ["norm"])
    return heads["norm"]


def heads(tr: Translator, d: Decoding, words: bool, model: str, text: str, settings: DecodeSettings | None = None,
          by_sentence: bool = False) -> None:
    """A Transformer's heads of one kind of attention: the layers x heads matrix of one number per
    head (ui.head_overview), one head enlarged beside it, the small maps where each is legible
    (every head of a small model, else the chosen layer's) and the neuron view below; or, in
    knock-out mode, the knockout (ui.knockout: the page's decoding `settings` again with heads
    knocked out)."""
    S = st.session_state
    if d.cross_attention is None:
        others = [i.name for i in ui.models.translation_models() if i.error is None and i.arch == "transformer"]
        st.info("Heads belong to a Transformer. "
                + ("A recurrent model has one attention distribution per output step: the heatmap above. "
                   if d.attention is not None else "This model has no attention at all (see the note above). ")
                + (f"Choose {' or '.join(others)} under Translation model to see its layers × heads." if others else
                   "There is no Transformer in checkpoints/."))
        ui.neuron_view.recurrent(tr, d, model, text)      # its one attention, step by step in its own formula
        ui.knockout.recurrent_note()
        return
    io_line(text, d.translation)
    kind = st.radio("Attention", list(HEAD_KINDS), format_func=lambda k: HEAD_KINDS[k].label, horizontal=True,
                    key="heads_kind", label_visibility="collapsed")
    if ui.knockout.knocking():      # a click on the matrix knocks its head out: the knockout's own layout
        return ui.knockout.view(tr, d, words, model, text, kind, settings, by_sentence)
    x, y, w = attention_heads(d, kind)
    L, H = w.shape[:2]
    if not (0 <= S.get("heads_layer", -1) < L and 0 <= S.get("heads_head", -1) < H):   # the last layer first
        S.heads_layer, S.heads_head = L - 1, 0
    result = ui.knockout.measured(tr, model)
    overview, big = ui.show.point("heads").columns([3, 2])
    with big:
        ui.knockout.click_mode()       # a click on the matrix: enlarges its head | knocks it out
        c1, c2, c3 = st.columns(3)
        layer = c1.selectbox("Layer", range(L), key="heads_layer", format_func=lambda l: str(l + 1))
        head = c2.selectbox("Head", range(H), key="heads_head", format_func=lambda h: str(h + 1))
        # beyond the weights: what each head actually moves (s2s.contributions), beside the
        # layer and head so that the matrix keeps its place on the first screen
        norm = kind == "cross" and c3.selectbox(
            "Show", list(HEADS_VIEWS), format_func=HEADS_VIEWS.get, key="heads_view",
            help="**weights**: α^h_ij, where head h looks. **norm**: ‖α^h_ij f^h(x_j)‖, the weight times the "
                 "size of the vector head h takes from source piece j (Kobayashi et al. 2020), each row scaled "
                 "to sum to 1: where it takes its output from.") == "norm"
    with overview:
        shown = ui.head_overview.matrix(d, kind, result, "head_matrix", lambda: pick_cell(L, H), share=0.6,
                                        selected=(layer, head))
    if norm:
        w = norm_heads_cached(ui.models.model_path(model), text, tuple(d.target_ids))
    small = range(L) if ui.head_overview.whole_grid(L, H) else [layer]       # the small maps drawn
    if words:      # each head's matrix merged into words, as the heatmap above (only those drawn)
        merged = {(l, h): ui.decoded.as_words(x, y, w[l, h], True) for l in sorted({*small, layer}) for h in range(H)}
        x, y = merged[layer, 0][:2]
        w = {k: m[2] for k, m in merged.items()}
    with big:
        what = "norm ‖α f(x)‖" if norm else HEAD_KINDS[kind].name
        fig = figures.matrix_heatmap(x, y, w[layer, head], x_title=HEAD_KINDS[kind].x_title,
                                     y_title=HEAD_KINDS[kind].y_title, value_name="‖α f(x)‖" if norm else "α",
                                     title=f"{what[0].upper() + what[1:]}, layer {layer + 1} · head {head + 1}",
                                     height=min(400, max(300, 150 + 24 * len(y))),
                                     colorbar=False)     # the matrix's beside it: its width goes to the labels
        figures.clickable_cells(fig)      # a click on a row picks the neuron view's query below
        ui.show.plotly_chart(fig, share=0.4, key="head_enlarged", on_select=ui.neuron_view.pick_row,
                             selection_mode="points", config=ui.show.camera("head_enlarged", model, text[:40]))
        base, every = uniform_entropy(w[layer, head])       # uniform over what each row may read
        uniform = (f"uniform over {len(x)} tokens: {base:.2f}" if every else
                   f"uniform over the tokens each row may read: {base:.2f}")
        big_note = (f"Mean entropy of this head: {mean_entropy(w[layer, head]):.2f} nats "
                    f"(0: each row on one token; {uniform}).")
    # the notes below the charts: the charts fill the first screen under the tab bar
    matrix_note, big_note_box = st.columns([3, 2])
    tagged = ui.head_overview.tag_line(ui.head_overview.tags(result, kind, L, H))
    matrix_note.caption(
        f"Every layer (rows) × head (columns) of the {HEAD_KINDS[kind].name}, one number each: "
        f"{ui.head_overview.METRICS[shown['metric']]}" + ("" if shown["fits"] else " (hover a cell for it)")
        + ", darker is more. Click a head to enlarge it, a layer's number to show its heads' maps below. Each head "
        f"has its own projections W_Q, W_K, W_V of size "
        f"{tr.config['model'].get('head_dim') or tr.config['model']['d_model'] // H}: "
        "softmax((x W_Q)(x' W_K)ᵀ / √d_k)." + (f" Role tags (Voita et al.): {tagged}." if tagged else "")
        + (" Decoder self-attention is causal: a step reads only the pieces before it." if kind == "decoder" else ""))
    big_note_box.caption(big_note)
    small_maps(w, x, y, kind, L, H, layer, head, norm, model, text)
    ui.neuron_view.transformer(tr, d, words, kind, layer, head, model, text)    # one row of the enlarged head, q·k


def small_maps(w, x: list[str], y: list[str], kind: str, L: int, H: int, layer: int, head: int, norm: bool,
               model: str, text: str) -> None:
    """The small maps where each is legible: every head of a model with few (ui.head_overview.SMALL_GRID),
    else the chosen layer's heads a few a row; a click on one enlarges it."""
    projector = ui.show.projector()
    value_name = "‖α f(x)‖" if norm else "α"
    if ui.head_overview.whole_grid(L, H):
        grid = np.array([[w[l, h] for h in range(H)] for l in range(L)])
        rows, per_row, names, title = L, H, None, None
    else:
        rows, per_row = ui.head_overview.head_rows(H)
        grid = np.array([[w[layer, r * per_row + c] if r * per_row + c < H else np.zeros_like(w[layer, 0])
                          for c in range(per_row)] for r in range(rows)])
        names = [[f"H{r * per_row + c + 1}" if r * per_row + c < H else "" for c in range(per_row)]
                 for r in range(rows)]
        title = f"{HEAD_KINDS[kind].name}{'' if not norm else ', ' + value_name}: layer {layer + 1}'s {H} heads"
    selected = divmod(layer * H + head if names is None else head, per_row)
    # with the Projector on the small maps go unlabelled (heads_grid's `labels`): every row of three
    # layers labelled at 18 px ran the grid to 953 px, past the first screen (issue #54)
    grid_fig = figures.heads_grid(grid, x, y, kind, selected=selected, width=760, height=480, value_name=value_name,
                                  labels=not projector, names=names, title=title)
    ui.show.plotly_chart(grid_fig, key="heads_grid", notes=False, selection_mode="points",
                         on_select=lambda: pick_head(rows, per_row, H, names is None),
                         config=ui.show.camera("heads_grid", model, text[:40]))
    note = st.empty()
    note.caption(("Every head's map" if names is None else f"Layer {layer + 1}'s heads (click a layer's number in "
                  "the matrix for another's)") + ": a click on one enlarges it. Shaded on the enlarged head's scale."
                 + (" The small maps are unlabelled with the Projector on: the enlarged one names its rows and "
                    "columns, and hovering names every cell." if projector else ""))
    ui.show.thinned_note(grid_fig, note)


def pick_cell(layers: int, heads: int) -> None:
    """A click on the matrix: a head enlarges it, a layer's number shows that layer, a head's number that head."""
    S = st.session_state
    hit = ui.head_overview.picked("head_matrix", layers, heads)
    if hit is None:
        return
    if hit[0] == "head":
        S.heads_layer, S.heads_head = hit[1:]
    elif hit[0] == "layer":
        S.heads_layer = hit[1]
    elif hit[0] == "index":
        S.heads_head = hit[1]


def pick_head(rows: int, per_row: int, heads: int, whole: bool) -> None:
    """A click on one of the small maps enlarges it (the `whole` grid's layer l, head h; or the
    chosen layer's head r * per_row + c)."""
    S = st.session_state
    points = S.heads_grid.selection.points if S.get("heads_grid") else []
    picked = figures.head_of_trace(int(points[0]["curve_number"]), rows, per_row) if points else None
    if not picked:
        return
    if whole:
        S.heads_layer, S.heads_head = picked
    elif picked[0] * per_row + picked[1] < heads:
        S.heads_head = picked[0] * per_row + picked[1]


def attention_emerges(tr: Translator, d: Decoding, words: bool, model: str, text: str) -> None:
    """The attention of a probe sentence at steps of the model's training (its metrics' trace)."""
    trace = tr.metrics.get("trace")
    if not trace or d.attention is None:
        st.info("This model has no attention trace.")
        return
    probes = trace["probes"]
    points = trace["points"]
    i = st.selectbox("Probe sentence", range(len(probes)), format_func=lambda i: probes[i]["source"], key="probe")
    k = st.select_slider("Training step", options=list(range(len(points))), value=len(points) - 1,
                         format_func=lambda k: str(points[k]["step"]),
                         # a slider per model: with one key, the browser kept the last model's
                         # step label on the thumb while the chart showed the new model's step
                         key=f"trace_step_{model}")
    st.caption("The probe's reference translation is forced, so the matrix keeps its shape while the model "
               f"learns. log p(reference) at this step: {points[k]['probes'][i]['log_prob']:.2f}")
    if before := tr.metrics.get("before"):
        st.caption(f"Steps 0–{before['steps']:,}: the original training; after step {before['steps']:,}: "
                   "the copy fine-tune (names, numbers and casing varied in the training pairs).")
    p = probes[i]
    a = np.array(points[k]["probes"][i]["attention"])
    src, tgt = p["source_tokens"], p["target_tokens"]
    if words:
        src, tgt, a = merge_to_words(src, tgt, a)
    ui.show.plotly_chart(figures.attention_heatmap(src, tgt, a, title=f"after {points[k]['step']} training steps"),
                    key="trace_heatmap", config=ui.show.camera("trace_heatmap", model, text[:40]))
