"""What if: the Translate & Align page answers back (issue #55, after Seq2Seq-Vis, Strobelt et
al. 2019). Three questions a reader can ask the model, each drawn beside what it did:

    steer a step      choose another next token (Step by step), a hypothesis the beam kept (Beam
                      tree) or type French (Forced decoding's "continue"): the model continues from
                      that prefix with the page's own search (s2s.decode's target_prefix), drawn
                      beside its own output, the changed words marked, both heatmaps on one scale
    compare an edit   a second English sentence through the same model and settings, the two
                      translations and heatmaps side by side, the changed words marked
    neighbours        the training sentences and decoder states nearest to this one's
                      (s2s.neighbours), and a 2-D map of them with this sentence's path through it

The address holds a steering prefix (steer=, French text; steer_ids=, the piece ids, where the
pieces are not text the tokenizer reads back as themselves), an edited sentence (edit=) and
"continue" (cont=1), so a copied link reproduces the view. Steering is chained (steer again in the steered output)
and undone one step at a time (the chain lives in the session; a link holds its last prefix).
"""
from __future__ import annotations

import html
from dataclasses import replace

import numpy as np
import pandas as pd
import streamlit as st

import ui.address
import ui.decoded
import ui.models
import ui.patch_view
import ui.show
from s2s import figures
from s2s.checkpoint import Translator
from s2s.decode import DecodeSettings, Decoding, target_prefix_ids
from s2s.piece_words import SPECIALS, changed_words, is_special, word_log_prob, word_spans
from s2s.text import InputError

CHANGED = "#fde68a"      # a changed word's background (amber 200): marks, never a scale
GIVEN = "#1d4ed8"        # the steering prefix's words are underlined in blue: given, not chosen
NEVER_STEERED = {"</s>", "<s>", "<pad>"}     # no step is steered to these: the end, the start, padding

Prefix = str | tuple[int, ...]      # a steering prefix: French text, or target piece ids


# ------------------------------------------------------------------ steering state
def forget_if_changed(model: str, text: str, arrived: bool = False) -> None:
    """A steering prefix and an edited sentence belong to one text and one model: another one
    drops them (and the steering's undo chain), from the page and its address. `arrived`: a
    link brought them (steer=, steer_ids= or edit= with its own text and model): they stay."""
    S = st.session_state
    now = (model, text)
    if arrived:
        S["_steer_undo"] = []
    elif S.get("_steer_for") not in (None, now):
        S.steer, S["_steer_undo"] = "", []
        S.edit = ""         # Compare an edit then starts from the new text
    S["_steer_for"] = now


def prefix_of(tr: Translator, ids) -> Prefix:
    """The steering prefix that gives exactly these target piece ids: their text, where the
    tokenizer reads that text back as the same pieces (a link then reads as French), else the
    ids themselves (a hub model's <unused…> rows, or a piece whose text is spelled otherwise)."""
    ids = [int(i) for i in ids]
    text = tr.tokenizer.decode(ids)
    try:
        back, _ = target_prefix_ids(tr, text)
    except InputError:
        back = None
    return text if back == ids else tuple(ids)


def prefix_label(tr: Translator, prefix: Prefix) -> str:
    """A steering prefix as the page names it: its text, or its pieces (steered by id)."""
    if isinstance(prefix, str):
        return " ".join(prefix.split())
    return " ".join(tr.tokenizer.piece(i) if i < len(tr.tokenizer) else f"<{i}>" for i in prefix)


def steer_ids_of(raw: str) -> tuple[int, ...]:
    """A link's steer_ids= (piece ids, comma-separated) as a prefix; ValueError if it is not one."""
    ids = tuple(int(x) for x in raw.split(","))
    if not ids or min(ids) < 0:
        raise ValueError(raw)
    return ids


def steer_address(prefix: Prefix) -> dict[str, str | None]:
    """The address's fields for a steering prefix: steer= (text) or steer_ids= (ids)."""
    if isinstance(prefix, tuple):
        return {"steer": None, "steer_ids": ",".join(map(str, prefix)) or None}
    return {"steer": prefix or None, "steer_ids": None}


def steer_to(prefix: Prefix, step: int | None = None) -> None:
    """Steer (a button's callback): the output must start with `prefix`; the one before it is
    kept for Undo. `step` (from 1): the step slider moves to the steered step."""
    S = st.session_state
    if prefix and prefix != S.get("steer", ""):
        S.setdefault("_steer_undo", []).append(S.get("steer", ""))
        S.steer = prefix
    if step is not None:
        S.step = step


def undo_steer() -> None:
    S = st.session_state
    undo = S.get("_steer_undo") or [""]
    S.steer = undo.pop()


def clear_steer() -> None:
    S = st.session_state
    S.steer, S["_steer_undo"] = "", []


def typed_steer(key: str, before: str) -> None:
    """The "type French" box's callback: steer from its text (prefilled with the output before
    the step shown), if it says more than that."""
    typed = (st.session_state.get(key) or "").strip()
    if typed and typed != before.strip():
        steer_to(typed)


# ------------------------------------------------------------------ drawing two outputs
def not_text(piece: str) -> bool:
    """A piece that writes no text but is a row of the model's output like any word: a hub
    model's <unused…> or <extra_id_…> (not </s>, <pad> nor <unk>). Shown as itself."""
    return piece.startswith("<") and piece not in SPECIALS and is_special(piece)


def words_of(d: Decoding) -> tuple[list[str], list[int]]:
    """d's output words (special pieces left out) and the index of each word's first piece."""
    spans = [(w, idx) for w, idx in word_spans(d.target_tokens) if not is_special(w) or not_text(w)]
    return [w for w, _ in spans], [idx[0] for _, idx in spans]


def marked_html(words: list[str], changed: list[bool], given: int = 0, size: str = "1.15rem") -> str:
    """Words as escaped text, each changed one on an amber ground, the first `given` (a steering
    prefix) underlined: one line of HTML, user and model text escaped exactly once."""
    out = []
    for i, (w, c) in enumerate(zip(words, changed)):
        style = (f"background:{CHANGED};border-radius:3px;padding:0 2px;" if c else "") + \
                (f"text-decoration:underline 2px {GIVEN};text-underline-offset:4px;" if i < given else "")
        out.append(f"<span style='{style}'>{html.escape(w)}</span>" if style else html.escape(w))
    return f"<div class='s2s-text' style='font-size:{size};line-height:1.5'>{' '.join(out)}</div>"


def two_outputs(first: Decoding, second: Decoding, labels: tuple[str, str], words: bool, model: str, text: str,
                key: str, sources: tuple[str, str] | None = None, second_text: str | None = None) -> None:
    """Two decodings side by side: each output with the words a word diff marks as changed, its
    log p (in all and per token), its heatmap (both on the one scale α in [0, 1]) and its tokens'
    log p on one axis. `sources`: the two English texts, marked too (Compare an edit)."""
    w1, _ = words_of(first)
    w2, starts2 = words_of(second)
    c1, c2 = changed_words(w1, w2)
    given = sum(1 for s in starts2 if s < second.prefix_length)
    src_marks = None
    if sources is not None:
        src_marks = changed_words(sources[0].split(), sources[1].split())
    views = [ui.decoded.view_of(d, words) if d.attention is not None else None for d in (first, second)]
    # the columns and rows that differ between the two maps (an edited word, a steered one): their
    # labels are never thinned away, however narrow the maps (for_screen)
    kept = [([], []), ([], [])]
    if all(v is not None for v in views):
        cols, rows_changed = changed_words(views[0][0], views[1][0]), changed_words(views[0][1], views[1][1])
        kept = [([j for j, c in enumerate(cols[i]) if c], [j for j, c in enumerate(rows_changed[i]) if c])
                for i in range(2)]
    spans = [ui.decoded.output_steps(d.target_tokens, words) for d in (first, second)]
    lps = [[word_log_prob(d.token_log_probs, idx) for _, idx in s] for d, s in zip((first, second), spans)]
    low = min(min(v, default=0.0) for v in lps)
    rows = max(len(s) for s in spans)
    on = ui.show.projector()
    # the outputs and their maps in one container (what a Start link promises on the first
    # screen: tests/test_browser_start_links.py), the log p bars in a row below it
    cols = ui.show.point(f"what_if_{key}").columns(2, gap="medium")
    below = st.columns(2, gap="medium")
    for i, (col, d, label, ws, marks) in enumerate(zip(cols, (first, second), labels, (w1, w2), (c1, c2))):
        with col:
            st.markdown(f"**{label}**")
            if src_marks is not None:
                st.markdown(marked_html(sources[i].split(), src_marks[i], size="1.0rem"), unsafe_allow_html=True)
            st.markdown(marked_html(ws, marks, given if i == 1 else 0), unsafe_allow_html=True)
            n = len(d.target_tokens)
            st.caption(f"log p = {d.log_prob:.2f} over {n} piece{'s' if n != 1 else ''} "
                       f"({d.log_prob / max(n, 1):.2f} per piece)")
            if views[i] is not None:
                src, tgt, a = views[i]
                # no colour bar: the caption says the one scale, and the columns get its width
                fig = figures.matrix_heatmap(src, tgt, a, height=max(240, 150 + (28 if on else 22) * rows),
                                             colorbar=False, keep_x=kept[i][0], keep_y=kept[i][1])
                ui.show.plotly_chart(fig, share=0.5, key=f"{key}_map{i}",
                                     config=ui.show.camera(f"{key}_map{i}", model, (second_text or text)[:40]))
        with below[i]:
            bars = figures.token_bars([w for w, _ in spans[i]], lps[i], "log p", horizontal=False,
                                      highlight=int(np.argmin(lps[i])) if lps[i] else None,
                                      value_range=(low * 1.05 - 0.05, 0), height=220 if on else 200)
            ui.show.plotly_chart(bars, share=0.5, key=f"{key}_lp{i}",
                                 config=ui.show.camera(f"{key}_lp{i}", model, (second_text or text)[:40]))
    n_changed = sum(c2)
    st.caption(f"Amber: the words a word diff of the two outputs marks as changed ({n_changed} in the second)."
               + (" Underlined: the steering prefix, given to the model, not chosen by it." if given else "")
               + " Both heatmaps shade α on one scale, 0 (white) to 1 (dark blue); the bars are each "
               + ("word's log p (the sum of its pieces')" if words else "piece's log p")
               + " on one axis, the darkest the least likely.")


# ------------------------------------------------------------------ steer a step
def steered(tr: Translator, model: str, text: str, settings: DecodeSettings, prefix: Prefix) -> Decoding | None:
    """The page's decoding of `text` with its own settings, steered to start with `prefix`; a
    prefix it cannot take (too long, </s> inside) is said in one line, and None."""
    try:
        steering = replace(settings, target_prefix=prefix).canonical()
        with st.spinner("Continuing from the prefix…"):        # shown after 0.5 s: a decoding, not a hit
            d, _ = ui.decoded.decode_cached(ui.models.model_path(model), text, steering)
    except InputError as e:
        st.warning(str(e))
        return None
    return d


def steer_panel(tr: Translator, d: Decoding, words: bool, model: str, text: str, settings: DecodeSettings,
                method_label: str, key: str = "steer") -> Decoding:
    """When the reader has steered: the steered output beside the model's own, with Undo and
    Back. Returns the decoding the tab then walks: the steered one, so that steering again at a
    later step chains."""
    S = st.session_state
    prefix = S.get("steer") or ""
    if not prefix:
        return d
    s = steered(tr, model, text, settings, prefix)
    head, buttons = st.columns([3, 2], vertical_alignment="center")
    # the buttons as wide as their labels, at the right (fixed shares cut them with the Projector's larger text)
    undo = back = buttons.container(horizontal=True, horizontal_alignment="right")
    # an HTML block (<div>): its text is not read as Markdown, so a prefix's "**" or "[x](y)" stays text
    by_id = " (its pieces, by id)" if isinstance(prefix, tuple) else ""
    head.markdown(f"<div><b>Steered</b>: the output must start with “{html.escape(prefix_label(tr, prefix))}”"
                  f"{by_id}; the model continues with {method_label.lower()}.</div>", unsafe_allow_html=True)
    undo.button("↶ Undo", key=f"{key}_undo", on_click=undo_steer, width="content",
                help="Back to the steering before this one" if S.get("_steer_undo") else "Back to the model's own")
    back.button("✕ The model's own", key=f"{key}_clear", on_click=clear_steer, width="content",
                help="Drop the steering")
    if s is None:
        return d
    if s.prefix_unknown:
        st.caption(ui.show.unknown_characters_note(s.prefix_unknown, "the steering prefix"))
    if cut := ui.decoded.cut_note(tr, s, text, settings.max_len):
        st.caption(f"The steered output: {cut}.")
    two_outputs(d, s, (f"The model's own ({method_label.lower()})", "Steered"), words, model, text, key)
    return s


def continue_reference(tr: Translator, d: Decoding, words: bool, model: str, text: str, settings: DecodeSettings,
                       method_label: str, reference: str) -> None:
    """Forced decoding's "Continue from this French": the reference read as the start of a
    translation, which the model finishes with the page's search, beside its own output."""
    s = steered(tr, model, text, settings, reference)
    if s is None:
        return
    if s.prefix_unknown:
        st.caption(ui.show.unknown_characters_note(s.prefix_unknown, "your French"))
    st.markdown(f"The model continues your French with {method_label.lower()}: "
                f"log p of the whole = **{s.log_prob:.2f}** (its own output: {d.log_prob:.2f}). Read as a start, "
                "it is not scored as a finished translation.")
    two_outputs(d, s, (f"The model's own ({method_label.lower()})", "Continued from your French"), words, model,
                text, "cont")


def steer_controls(tr: Translator, d: Decoding, first: int, step: int) -> None:
    """Under Step by step's charts: steer this step to another of its most likely next tokens,
    or type the French to continue from (prefilled with the output before the step). A piece
    that is not text (a hub model's <unused…>), or whose text the tokenizer reads back as other
    pieces, steers by its id (prefix_of): the buttons offer what the model offers."""
    top = d.step_top[first] if first < len(d.step_top) else []
    chosen = d.target_tokens[first] if first < len(d.target_tokens) else None
    options = [(tok, p) for tok, p in top if tok != chosen and tok not in NEVER_STEERED][:6]
    so_far = list(d.target_ids[:first])
    before = prefix_of(tr, so_far)
    st.markdown(f"**What if** step {step} were another token? The model continues from there.")
    if options:
        cols = st.columns(len(options))
        prefixes = [prefix_of(tr, so_far + [tr.tokenizer.piece_id(tok)]) for tok, _ in options]
        for col, (tok, p), prefix in zip(cols, options, prefixes):
            col.button(ui.show.literal_label(f"{tok}  {p:.2f}"), key=f"steer_tok_{first}_{tok}",
                       width="stretch", on_click=steer_to, args=(prefix, step),
                       help=f"Continue from “{prefix_label(tr, prefix)}”"
                            + (" (by the pieces' ids)" if isinstance(prefix, tuple) else ""))
        if by_id := [tok for (tok, _), prefix in zip(options, prefixes) if isinstance(prefix, tuple)]:
            st.caption(" ".join(ui.show.code_span(t) for t in by_id) + " "
                       + ("is" if len(by_id) == 1 else "are") + " not text that this tokenizer reads back as "
                       + ("itself" if len(by_id) == 1 else "themselves") + ": steered by the piece ids "
                       "(steer_ids= in the address), not by French.")
    else:
        st.caption(f"No other piece to steer to among this step's {len(top)} most likely: "
                   + (" ".join(ui.show.code_span(t) for t, _ in top) if top else "none recorded")
                   + " (the end of the sentence, the start and padding are never steered to).")
    readable = isinstance(before, str)
    with st.form(f"steer_form_{first}", border=False):
        box, go = st.columns([4, 1.3], vertical_alignment="bottom")
        k = f"steer_typed_{abs(hash((str(before), first))) % 10**9}"
        box.text_input("…or type the French to continue from", value=before if readable else "", key=k,
                       help="The output so far before this step is filled in: type the next word, or change "
                            "any of it. The model continues from what you typed." if readable else
                            "The model continues from what you typed, from the output's start.")
        go.form_submit_button("Steer", on_click=typed_steer, args=(k, before if readable else ""), width="stretch")
    if not readable:
        st.caption("The output before this step (" + " ".join(ui.show.code_span(p) for p in tr.tokenizer.pieces(so_far))
                   + ") is not text this tokenizer reads back as the same pieces, so the box starts empty: typed "
                   "French replaces the output from its start. The buttons above keep it, steering by id.")


def beam_prefixes(tr: Translator, d: Decoding) -> dict[Prefix, str]:
    """Every unfinished hypothesis the beam kept, as {its prefix (French, or ids: prefix_of):
    its label}, step by step and best first within a step (one entry per distinct prefix)."""
    tree = d.beam_tree or []
    options: dict[Prefix, str] = {}
    order = sorted(range(len(tree)), key=lambda n: (tree[n]["step"], -tree[n]["log_prob"]))
    for n, path in zip(order, figures.beam_paths(tree, order)):
        pieces = [tree[m]["token"] for m in path if tree[m]["token"] not in NEVER_STEERED]    # a language code kept
        if not any(not is_special(p) or not_text(p) for p in pieces) or tree[n]["finished"]:
            continue
        prefix = prefix_of(tr, [tr.tokenizer.piece_id(p) for p in pieces])
        options.setdefault(prefix, f"step {tree[n]['step'] + 1}: {prefix_label(tr, prefix)}  "
                                   f"(log p {tree[n]['log_prob']:.2f})")
    return options


def beam_alternatives(tr: Translator, d: Decoding) -> None:
    """Under the Beam tree: continue from any hypothesis the beam kept."""
    options = beam_prefixes(tr, d)
    if not options:
        return
    pick, go = st.columns([4, 1.3], vertical_alignment="bottom")
    choice = pick.selectbox("Continue from a hypothesis the beam kept", list(options), index=None,
                            format_func=options.get, key="beam_steer_pick", placeholder="Choose a hypothesis…")
    go.button("Steer", key="beam_steer_go", disabled=choice is None, on_click=steer_to, args=(choice or "",),
              width="stretch", help="The model continues from this hypothesis with beam search")


# ------------------------------------------------------------------ compare an edit
def compare_edit(tr: Translator, d: Decoding, words: bool, model: str, text: str, settings: DecodeSettings,
                 method_label: str, by_sentence: bool) -> None:
    """A second English sentence (prefilled with the first), decoded by the same model and
    settings: the two translations, their heatmaps and the changed words side by side."""
    S = st.session_state
    if not (S.get("edit") or "").strip():
        S.edit = text
    with st.form("edit_form", border=False):
        box, go = st.columns([5, 1.3], vertical_alignment="bottom")
        box.text_input("Edited English (change a word and compare)", key="edit",
                       help="Decoded by the same model with the same settings as the text above")
        go.form_submit_button("Compare", type="primary", width="stretch")
    edit = S.edit or ""
    if edit.strip() == text.strip():
        st.caption("Change a word of the sentence in the box (a name, a number, a tense, he → she) and press "
                   "**Compare**: the two translations and their attention are drawn side by side.")
        return
    try:
        e, _ = ui.decoded.decode_cached(ui.models.model_path(model), edit, settings, by_sentence)
    except InputError as err:
        st.warning(str(err))
        return
    if unknown := tr.tokenizer.unknown_characters(edit):
        st.caption(ui.show.unknown_characters_note(unknown, "the edited text"))
    two_outputs(d, e, ("Your text", "Edited"), words, model, text, "edit", sources=(text, edit), second_text=edit)
    if d.attention is None:
        st.caption("This model has no attention: only the two translations compare.")
    ui.patch_view.what_carries_the_change(tr, d, words, model, text, edit)


# ------------------------------------------------------------------ neighbours
@st.cache_resource(max_entries=4, show_spinner=False)
def index_cached(path: str):
    """A model's neighbour index, loaded once for every session (IndexNotReady is not cached)."""
    from s2s.neighbours import load_index
    return load_index(ui.models.load_path(path))


@st.cache_data(max_entries=64, show_spinner=False)
def search_cached(path: str, text: str, target_ids: tuple, k: int):
    from s2s.neighbours import search
    tr = ui.models.load_path(path)
    return search(tr, index_cached(path), text, k=k, target_ids=list(target_ids))


def build_with_progress(tr: Translator, path: str) -> bool:
    """Build the index of a shipped model on this server, a progress bar counting its pairs."""
    from s2s.neighbours import build_index
    bar = st.progress(0.0, text="Encoding the training sample…")

    def on_progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"Encoding the training sample: {done:,} of {total:,} pairs")
    try:
        build_index(tr, on_progress=on_progress)
    except InputError as e:
        bar.empty()
        st.warning(str(e))
        return False
    index_cached.clear()
    bar.empty()
    return True


def neighbours_tab(tr: Translator, d: Decoding, words: bool, model: str, text: str) -> None:
    """The training sentences nearest to this one, the training decoder states nearest to each
    of its steps, and the 2-D map of those states with this sentence's path through it."""
    from s2s.neighbours import IndexNotReady, marked
    path = ui.models.model_path(model)
    try:
        index = index_cached(path)
    except IndexNotReady as e:
        hub = tr.config.get("hub") is not None
        st.info(f"{e} " + ("A Hugging Face model's training data is not ours: the server's operator builds its "
                           "index, with the command above, from a corpus they choose, before class." if hub else
                           "The server's operator builds every shipped model's index before class "
                           "(`python -m s2s.fetch --neighbours`); here it is built once, from 10,000 of the model's "
                           "own training pairs, and kept on disk (33 MB; a minute or so on two cores)."))
        if not hub and st.button("Build the index", key="nb_build", type="primary"):
            if build_with_progress(tr, path):
                st.rerun()
        return
    k = 5
    try:
        n = search_cached(path, text, tuple(d.target_ids), k)
    except InputError as e:
        st.warning(str(e))
        return
    steps = [s for s in n.steps if not is_special(s.piece)] or n.steps
    with ui.show.point("neighbours"):
        left, right = st.columns([1.3, 1], gap="medium")     # the tables' French needs the room
        with left:
            st.markdown("**Training sentences nearest to this one** (cosine of the mean encoder state)")
            # static tables that wrap: a sentence is read whole, its [piece] in sight (a data grid cut them)
            ui.show.table(pd.DataFrame([{"cos": s.similarity, "English": s.english, "French": s.french}
                                        for s in n.sentences]), formats={"cos": "%.3f"}, wrap=True)
            labels = {s.step: f"{s.step + 1}: {s.piece}" for s in steps}     # widget labels: text, not HTML
            ui.address.check_choice("nb_step", list(labels), steps[0].step)
            j = st.selectbox("Output step", list(labels), format_func=labels.get, key="nb_step")
            chosen = next(s for s in n.steps if s.step == j)
            st.markdown(f"**Training decoder states nearest to step {j + 1}** ({ui.show.code_span(chosen.piece)}): "
                        "what was emitted there")
            ui.show.table(pd.DataFrame([{"cos": s.similarity, "trained to emit": s.piece,
                                         "model's argmax": s.predicted,
                                         "in its French [the step]": marked(tr.tokenizer,
                                                                            index.pair_piece_ids(s.pair), s.step)}
                                        for s in chosen.neighbours]), formats={"cos": "%.3f"}, wrap=True)
        with right:
            rows = [index.row(s.pair, s.step) for s in chosen.neighbours]
            on, share = ui.show.projector(), 0.43
            fig = figures.neighbours_map(n.projection, n.target_tokens, highlight=j, chosen_rows=rows,
                                         width=int(share * ui.show.MAIN_PX[on]), font_px=figures.label_px(on))
            ui.show.plotly_chart(fig, share=share, key="nb_map", config=ui.show.camera("neighbours", model, text[:40]))
            drawn, wanted = fig.layout.meta["labels"]
            if drawn < wanted:
                st.caption(f"{drawn} of {wanted} words written on the map, where each fits clear of the others; "
                           "hover over a point to name it.")
    ex = n.projection.explained
    st.caption(f"Searched {n.index['pairs']:,} training pairs ({n.index['states']:,} decoder states) of the model's "
               "own training split, exactly (one matrix product, cosine). A training state's word is what it was "
               "trained to emit there (teacher forcing on its French); the model's argmax at that state beside it. "
               f"The map: a PCA of the {len(n.projection.rows)} neighbour states ({ex[0]:.0%} and {ex[1]:.0%} of "
               "their variance on its two axes), with this sentence's decoder states as a path through it, the "
               "step chosen ringed. docs/neighbours.md says how it is built.")
