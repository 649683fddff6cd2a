"""Attention vs attribution, the page's second tab: one sentence's contributions by the chosen
method (the one-pass methods at once, the gradient attributions when asked), their Kendall τ
against leave-one-out, counterfactual attention at one step, the test-set figures and each
method as an alignment and as an explanation."""
from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import streamlit as st

import ui.models
import ui.show
from s2s.alignment import method_summary
from s2s.attributions import METHODS, agreement
from s2s.contributions import ALIGN_METHODS, applies
from s2s.counterfactual import EPSILON, KINDS, check_counterfactual
from s2s.export import file_stem, matrix_json, plotly_config
from s2s.figures import contribution_map, counterfactual_figure, label_px
from s2s.piece_words import merge_to_words, word_spans
from s2s.text import InputError
from ui.alignment.common import asked_to_run, within
from ui.alignment.measurements import (
    ALIGNMENT_RESULTS,
    EXPLANATION_RESULTS,
    METHOD_EXPLANATION_RESULTS,
    METHOD_RESULTS,
    attribution,
    attribution_estimate,
    attribution_store,
    counterfactual_cached,
    one_pass,
)

KIND_HELP = {"uniform": "every source piece weighted equally",
             "permute": "the model's own weights, shuffled over the source pieces",
             "adversarial": "as different from α_j as possible (Jensen-Shannon) while the next-token distribution "
                            "moves by at most ε (total variation)"}
METHOD_LABELS = {"weights": "weights", "norm": "norm", "alti": "ALTI+", "rollout": "rollout",
                 "value-zeroing": "value zeroing", "grad-x-input": "grad × input", "ig": "integrated gradients",
                 "loo": "leave-one-out"}
METHOD_HELP = {"weights": "the cross-attention α_ij (the heatmap's), the mean of the heads.",
               "norm": "‖α_ij f(x_j)‖: the weight times the size of what source piece j sends (Kobayashi et al. "
                       "2020), summed over the heads.",
               "alti": "each source piece's share of the output through attention, the residual and the layer norms, "
                       "rolled out through the encoder and the decoder (Ferrando et al. 2022).",
               "rollout": "the head-mean weights with the residual as ½ I, multiplied through the encoder and the "
                          "decoder (Abnar & Zuidema 2020). Its share from the source is 1 − 0.5^l after decoder "
                          "layer l for every word of every sentence, by the method's construction (each cross block "
                          "keeps half of the residual), not a measurement: no bars.",
               "value-zeroing": "how far the layer's output turns (1 − cos) when source piece j's value is set to "
                                "zero in that layer (Mohebbi et al. 2023); under 1e-5 counts as 0 (float noise, "
                                "inseq's floor).",
               "grad-x-input": "∂ log p(y_j)/∂x_i · x_i, one batched backward pass.",
               "ig": "gradient × input along the path from zero embeddings (Sundararajan et al. 2017, captum).",
               "loo": "the fall in log p(y_j) when piece i becomes <unk>."}
EXAMPLE = "She has a big black dog."
EXAMPLE_REFERENCE = "Elle a un gros chien noir."
PACE_FROM = 0.25     # the progress bar's time left: from the run's own pace too, once this share is done


def progress_text(label: str, done: float, stage: str, spent: float, estimate: float) -> str:
    """The progress bar's line: the method, what it is doing (s2s.attributions' stage text), the
    share done and the time left: the estimate's remainder, or the run's own pace once PACE_FROM
    of it is done, whichever is longer (the shares are typical, not this run's: a trained
    Transformer's integrated gradients spend most of their time refining after the first round,
    which the share gives 90%); at least 1 s."""
    left = estimate - spent
    if done >= PACE_FROM:
        left = max(left, spent / done * (1 - done))
    return f"{label}: {stage} · {done:.0%}, about {max(1, round(left))} s left"


def explanation_taus(c, offered, loo: np.ndarray, ran: dict[str, np.ndarray]) -> dict[str, float]:
    """Is it an explanation: the median Kendall τ per output piece between each method's map and
    leave-one-out's `loo` (|a_ij|, rows normalised), by label, in the order of `offered` (the
    method list's names): every one-pass method `c` holds (its last layer) and every gradient
    attribution in `ran` ({method: map}, those run so far); leave-one-out not against itself."""
    taus = {}
    for m in offered:
        method = ALIGN_METHODS[m]
        shown = c.matrix(method) if method in c.layers else ran.get(method) if method != "leave_one_out" else None
        if shown is not None:
            taus[METHOD_LABELS[m]] = float(pd.Series(agreement(shown, loo)[0]).median())
    return taus


def tau_caption(taus: dict[str, float]) -> str:
    """The line under the map that gives explanation_taus."""
    figures = [f"{k} {v:+.2f}" if v == v else f"{k} — (every row constant: no ranking)" for k, v in taus.items()]
    return ("Is it an explanation? Median Kendall τ per output piece between each method's row (the last layer) "
            "and leave-one-out's |a_ij| on this sentence: " + ", ".join(figures) + ".")


def method_table(model: str) -> None:
    """Is each method an alignment, is it an explanation: the measured table for this model."""
    aligned, explained = ui.models.results_file(METHOD_RESULTS), ui.models.results_file(METHOD_EXPLANATION_RESULTS)
    rows = method_summary(aligned, explained, model)
    st.subheader("Each method: an alignment? an explanation?")
    if not rows:
        st.caption(f"Measured for the shipped models only (`results/alignment_methods.json`). For {model}: "
                   f"`python -m s2s.alignment --model MODEL --gold DIR --method norm --layers` (any method).")
        return
    label = {name: METHOD_LABELS.get(name, name) for name in ALIGN_METHODS}
    dash = "—"       # text columns: a missing figure reads as a dash, not "None"
    fmt = lambda v, f: dash if v is None else format(v, f)       # noqa: E731
    table = pd.DataFrame([{"method": label[r["method"]], "best layer": str(r["layer"] or dash),
                           "AER grow-diag": fmt(r["aer_grow_diag"], ".3f"), "AER argmax": fmt(r["aer_argmax"], ".3f"),
                           "τ vs leave-one-out": fmt(r["tau_vs_loo"], "+.2f"),
                           "same top": dash if r["same_top_as_loo"] is None else f"{100 * r['same_top_as_loo']:.0f}%"}
                          for r in rows])
    ui.show.table(table, width="stretch")
    eflomal = next((r["aer"] for r in (ui.models.results_file(ALIGNMENT_RESULTS) or {}).get("rows", [])
                    if r.get("model") == "eflomal" and r.get("rule") == "grow-diag"), None)
    head = next((r.get("best_head") for r in aligned.get("rows", []) if r.get("model") == model
                 and r.get("best_head")), None) if aligned else None
    missing = [label[m] for mod, m in (aligned or {}).get("not_measured", {}).get("rows", []) if mod == model]
    st.caption(
        f"**AER** (lower: closer to the human links) on the {aligned['sentences']} Hansards test pairs, at each "
        "method's best decoder layer; "
        + (f"the weights' best single head: {head['aer']:.3f} grow-diag (layer {head['layer']}, head {head['head']}); "
           if head else "")
        + (f"eflomal, a statistical aligner: {eflomal:.3f}. " if eflomal is not None else "")
        + "**τ vs leave-one-out**: median Kendall τ per output piece between the method's row (last layer) and "
          "what removing each source piece costs; **same top**: steps where both rank the same piece first"
        + (f", over {explained['rows'][0]['sentences']} Tatoeba test sentences. " if explained else ". ")
        + ("A dash: not measured" + (f" ({', '.join(missing)}: see the file)" if missing else "")
           + ", or leave-one-out against itself. " if (table == dash).any().any() else "")
        + "Published, on their own pair: Kobayashi et al. (2020), German–English, layer 2, norm 25.4 vs weights "
          f"30.3 AER. Written by `{aligned['command']}`"
        + (f" and `{explained['command']}`." if explained else "."))


def contributions_export(model: str, text: str, c, method: str, xs, ys, shown, share, layer: int | None) -> str:
    """The map shown (words), and every one-pass method's piece-level matrices and source
    shares, as JSON that says what it is."""
    out = {"model": model, "english": text, "french": c.translation, "forced_from": c.forced_from,
           "shown": {"method": method, "layer": None if layer is None else layer + 1,
                     "matrix": "output words (rows) x source words (columns), merged from the pieces as the "
                               "heatmap merges them, each row a distribution over the source",
                     "values": matrix_json(shown, ys, xs),
                     "source_share": None if share is None else [round(float(v), 6) for v in share]},
           "pieces": "below: output pieces (rows) x source pieces (columns), each row a distribution over the "
                     "source; layers: one per decoder layer, from 1",
           **c.to_json()}
    return json.dumps(out, ensure_ascii=False, indent=1)


def counterfactual_view(tr, name: str, path: str, text: str, e) -> None:
    """Counterfactual attention at one step of `e`'s forced output (its tokens): the step, the
    replacement and ε, then α and the next-token distribution before and after, and both
    continuations. A model it does not apply to (a Transformer: layers x heads of attention,
    not one α per step; s2s.counterfactual) gets that limit in one line and no controls."""
    S = st.session_state
    st.subheader("Counterfactual attention at one step")
    try:
        check_counterfactual(tr)
    except InputError as limit:            # documented, not a failure: said, with nothing to set
        st.info(str(limit))
        return
    c = st.columns([2, 2, 1])
    if S.get("cf_step") not in range(len(e.target_tokens)):       # a link's step past this output
        S["cf_step"] = 0
    S["cf_eps"] = float(within(S.get("cf_eps", EPSILON), 0.0, 1.0))
    step = c[0].selectbox("Step", range(len(e.target_tokens)), key="cf_step",
                          format_func=lambda j: f"{j}: {e.target_tokens[j]}")
    kind = c[1].radio("Replace α_j by", KINDS, key="cf_kind", horizontal=True,
                      help="; ".join(f"**{k}**: {h}" for k, h in KIND_HELP.items()))
    eps = c[2].number_input("ε (adversarial)", 0.0, 1.0, step=0.01, key="cf_eps", format="%.2f",
                            disabled=kind != "adversarial")
    try:
        cf = counterfactual_cached(path, text, int(step), kind, float(eps), tuple(e.target_ids))
    except InputError as err:
        st.error(str(err))
        cf = None
    if cf is not None:
        ui.show.plotly_chart(counterfactual_figure(e.source_tokens, cf.alpha_before, cf.alpha_after,
                                                   cf.top_before, cf.top_after, kind),
                             width="stretch", key="counterfactual_figure",
                             config=plotly_config(file_stem("counterfactual", name, text[:40], f"step{int(step)}",
                                                            kind)))
        verdict = "stays" if cf.argmax_survives else "changes"
        st.markdown(f"The attention moved by **JSD = {cf.jsd:.3f} bits**; the next-token distribution by "
                    f"**TV = {cf.tv:.3f}**, and its most likely token **{verdict}**.")
        st.markdown("Continuing greedily from this step:")
        ui.show.escaped("before: " + cf.translation_before, "1.1rem")
        ui.show.escaped("after: " + cf.translation_after, "1.1rem")


def attention_vs_attribution(tr, info, path: str) -> None:
    """Attention vs attribution: one sentence's contributions by the chosen method beside
    leave-one-out, counterfactual attention at one step, and the test-set figures."""
    S, name = st.session_state, info.name
    left, right = st.columns([1, 3])
    with left:
        S.setdefault("explain_text", EXAMPLE)     # in state, none beside it: Streamlit warns when state sets it too
        text = st.text_area("English", key="explain_text", height=90, max_chars=600)
        # the French box follows the English: the example's French left in it after new
        # English is typed translates nothing of it (forcing that pair would explain a
        # mismatch), so it is emptied and the model's own output explained
        S.setdefault("explain_reference", EXAMPLE_REFERENCE)
        if S["explain_reference"].strip() == EXAMPLE_REFERENCE and text.strip() != EXAMPLE:
            S["explain_reference"] = ""
        # no max_chars: its counter covers the end of the text in a column this narrow; a
        # reference over the app's character limit gets clean_text's message instead
        reference = st.text_input("French (optional: explain this instead of the model's translation)",
                                  key="explain_reference")
        offered = [m for m in ALIGN_METHODS if applies(tr, ALIGN_METHODS[m])]
        if S.get("explain_method") not in offered:
            if S.get("explain_method") is not None:
                st.caption(f"{METHOD_LABELS.get(S['explain_method'], S['explain_method'])} does not apply to "
                           f"{name} (a recurrent model: one attention, no stack of blocks); showing the weights.")
            S["explain_method"] = "weights"
        method_name = st.radio("Method", offered, key="explain_method", format_func=METHOD_LABELS.get,
                               help="; ".join(f"**{METHOD_LABELS[m]}**: {METHOD_HELP[m]}" for m in offered))
    method = ALIGN_METHODS[method_name]
    ref = reference.strip() or None
    with right:
        if ref is None:
            st.caption("This explains the model's own greedy output. Type a French translation of your text "
                       "to explain that instead.")
        try:
            c = one_pass(path, text, ref, info.is_hub, method)
        except InputError as err:
            st.error(str(err))
            c = None
        if c is not None:
            ui.show.escaped(c.translation, "1.3rem")
            for typed, whose, target in ((text, "the English", False), (ref, "the French", True)):
                if typed and (unknown := tr.tokenizer.unknown_characters(typed, target)):
                    st.caption(ui.show.unknown_characters_note(unknown, whose))
    e = c           # the counterfactual below reads its tokens
    if c is not None:
        layered = method in c.layers and c.layers[method].shape[0] > 1
        layer = None
        if layered:
            n_layers = c.layers[method].shape[0]
            S["explain_layer"] = int(within(S.get("explain_layer", n_layers), 1, n_layers))
            layer = left.select_slider("Decoder layer", list(range(1, n_layers + 1)), key="explain_layer",
                                       help="The contributions read at this decoder layer's output (ALTI+ and "
                                            "rollout: everything up to it, rolled out).") - 1
        matrix, seconds = None, None
        if method in c.layers:
            matrix = c.matrix(method, layer)
            seconds = c.seconds.get(method, c.seconds.get("trace"))
        else:
            at_once = method == "grad_x_input" or (method == "leave_one_out" and not info.is_hub)
            if at_once or (path, text, ref, method) in attribution_store():
                with st.spinner(f"{METHOD_LABELS[method_name]}…"):
                    a = attribution(path, text, ref, method)
                matrix, seconds = a["matrix"], a["seconds"]
            else:
                kind = "hub" if info.is_hub else ("transformer" if info.arch == "transformer"
                                                              else "recurrent")
                estimate = attribution_estimate(c, method, kind)
                with right:
                    # the offer goes once the run starts: the bar takes its place
                    if asked_to_run(f"{METHOD_LABELS[method_name]} runs the model many times: about {estimate:.0f} s "
                                    f"for this sentence on this server. The other methods are drawn at once.",
                                    f"Run {METHOD_LABELS[method_name]}", "explain_run"):
                        label = METHOD_LABELS[method_name]
                        bar = st.progress(0.0, text=progress_text(label, 0.0, "getting ready", 0.0, estimate))
                        t0 = time.perf_counter()

                        def progress(done: float, stage: str) -> None:     # what the run does, from its start
                            bar.progress(min(done, 1.0),
                                         text=progress_text(label, done, stage, time.perf_counter() - t0, estimate))
                        a = attribution(path, text, ref, method, on_progress=progress)
                        bar.empty()
                        matrix, seconds = a["matrix"], a["seconds"]
        if matrix is not None:
            share = c.source_share.get(method)
            share = None if share is None else share[-1 if layer is None else layer]
            # whole words on both axes, merged as the attention heatmap merges them: a source word
            # the sum of its pieces' columns, an output word the mean of its pieces' rows
            xs, ys, shown = merge_to_words(c.source_tokens, c.target_tokens, matrix)
            if share is not None:
                share = [float(np.mean([share[k] for k in idx])) for _, idx in word_spans(c.target_tokens)]
            # a row of zeros is no distribution: no source piece had a measurable effect there
            unmoved = [y for y, row in zip(ys, np.asarray(shown)) if not np.asarray(row).sum() > 0]
            px = label_px(ui.show.projector())
            longest = max((len(t) for t in xs), default=1)
            fig = contribution_map(xs, ys, shown, METHOD_LABELS[method_name], share,
                                   height=round(60 + 0.62 * px * longest + 1.45 * px * len(ys)))
            stem = file_stem("contributions", name, text[:40], method_name,
                             f"layer{layer + 1}" if layer is not None else "", c.forced_from)
            with right:
                where = (f", decoder layer {layer + 1}" if layer is not None else "")
                st.caption(f"**{METHOD_LABELS[method_name]}**{where}: {METHOD_HELP[method_name]} Forced "
                           f"decoding of the {'reference' if c.forced_from == 'reference' else 'greedy output'} "
                           f"({len(c.target_tokens)} steps, words merged from their pieces); "
                           f"this map took {1000 * (seconds or 0):,.0f} ms."
                           + (" Bars: each output word's share that came from the source; the rest came from "
                              "the French written before it." if share is not None else "")
                           + (f" No measurable effect at this layer for {', '.join(map(repr, unmoved))}: "
                              "those rows are blank." if unmoved else ""))
            # in the right column, beside the method list: on a link's first 1280 x 720 screen
            with right, st.container(key="point_attribution"):
                ui.show.plotly_chart(fig, share=0.75, width="stretch", key="contribution_map",
                                     config=plotly_config(stem))
            with right:
                ui.show.chart_downloads(fig, stem, "attribution", contributions_export(name, text, c, method_name,
                                                                                       xs, ys, shown, share, layer))
            loo = (attribution(path, text, ref, "leave_one_out")
                   if not info.is_hub or (path, text, ref, "leave_one_out") in attribution_store()
                   else None)
            if loo is not None:
                # every gradient attribution that has run on this sentence: grad × input (one pass, run
                # here), integrated gradients once asked for (issue #54: it was left out after its run)
                ran = {m: attribution(path, text, ref, m)["matrix"] for m in ("grad_x_input", "integrated_gradients")
                       if m == "grad_x_input" or (path, text, ref, m) in attribution_store()}
                right.caption(tau_caption(explanation_taus(c, offered, loo["matrix"], ran)))
    if e is not None:         # no heading over nothing when the model or the text cannot be explained
        counterfactual_view(tr, name, path, text, e)
    summary = ui.models.results_file(EXPLANATION_RESULTS)
    if summary is not None:
        st.subheader("Over the test set")
        # two narrow tables, not one of ten columns: at 1280 px its last columns were off-screen
        abbr = {"grad_x_input": "grad×input", "integrated_gradients": "IG", "leave_one_out": "LOO"}
        c1, c2 = st.columns(2)
        c1.markdown("**Median Kendall τ**: attention against each attribution, per step")
        ui.show.table(pd.DataFrame([{"model": r["model"]} | {abbr[m]: r["kendall_tau"][m]["median"] for m in METHODS}
                                    for r in summary["rows"]]),
                      where=c1, width="stretch", formats={abbr[m]: "%+.2f" for m in METHODS})
        c2.markdown("**Same top source piece** as attention (% of steps); and the top kept when α is **permuted**")
        ui.show.table(pd.DataFrame([{"model": r["model"]} | {abbr[m]: 100 * r["argmax_agreement"][m] for m in METHODS}
                                    # text, so that a Transformer's missing figure reads "—", not "None"
                                    | {"permuted": "—" if r["permutation_survival"] is None else
                                       f"{100 * r['permutation_survival']:.0f}%"} for r in summary["rows"]]),
                      where=c2, width="stretch", formats={k: "%.0f%%" for k in abbr.values()})
        sizes = sorted({(r["sentences"], r["steps"]) for r in summary["rows"]})
        unpermuted = [r["model"] for r in summary["rows"] if r["permutation_survival"] is None]
        st.caption(", ".join(f"{n} sentences ({k:,} steps)" for n, k in sizes) + " per model. IG: integrated "
                   "gradients; LOO: leave-one-out. "
                   + (f"{', '.join(unpermuted)}: no permuted figure, as a Transformer has layers × heads of "
                      "attention, not one α per step; its τ is against the last layer's head mean. "
                      if unpermuted else "") + f"Written by `{summary['command']}`.")
    method_table(name)
