"""Start here: the lecture's outline, each topic with what to look at and a link that opens
the right page and tab with an example already set (through the page's query parameters).

The page is layout only: every link's target reads its parameters with ui.address.arrival_query.
"""
from typing import NamedTuple

import streamlit as st

import ui.address
import ui.models
import ui.show
import ui.warm

ui.address.run_through_app()     # a link's first run in Streamlit's old multipage mode: rerun through app.py


class Link(NamedTuple):
    page: str                # a page registered in app.py
    label: str               # "Page › tab", as the page names them
    query: dict              # what the page reads from the URL (tab labels verbatim)
    icon: str


class Topic(NamedTuple):
    title: str
    look: str                # one sentence: what to look at (never a result: the page measures those)
    links: tuple[Link, ...]
    coming: str = ""         # for a topic whose page does not exist yet: said instead of a link


def translate(tab: str, text: str, what: str = "", **settings) -> Link:
    """A Translate & Align link: the default model, greedy, unless said otherwise; `what` names a
    second link to the same tab ("Translate & Align · steer a step › Step by step")."""
    return Link("pages/translate.py", f"Translate & Align{' · ' + what if what else ''} › {tab}",
                {"model": ui.models.DEFAULT_MODEL, "text": text, "method": "greedy", "tab": tab, **settings},
                ":material/translate:")


# The lens link and the last topics link to a Transformer when checkpoints/ has one (read from the configs)
transformers = [i.name for i in ui.models.translation_models() if i.error is None and i.arch == "transformer"]
LENS_EXAMPLE = "The little girl is happy because her mother is here."
OUTLINE = [
    Topic("Vanishing gradients and gates",
          "Move ρ and the forget-gate bias: what reaches T − t steps back in an RNN, a GRU, an LSTM?",
          (Link("pages/gradients.py", "Gates & Gradients › Live: untrained cells", {"tab": "Live: untrained cells"},
                ":material/trending_down:"),)),
    Topic("The encoder-decoder",
          "Replay the decoder writing French piece by piece: its attention and its likeliest next tokens at each step.",
          (translate("Step by step", "I went to the lecture."),)),
    Topic("Decoding: greedy, beam search, sampling",
          # the steering example is seen on the shipped model (tests/test_what_if_page.py holds it): en-fr-additive's
          # "Elle a un gros chien noir." steered to "Elle a une" goes on "grande chien noire."
          "Beam search of width 5: the n-best list and every hypothesis kept. Steer “une” for “un”: the "
          "adjectives turn feminine (“grande … noire”). The lens: each layer's guess, where a word flips.",
          (translate("Beam tree", "I think it's going to rain tomorrow.", method="beam", beam="5", nbest="3"),
           translate("Step by step", "She has a big black dog.", "steer a step", steer="Elle a une"))
          # en-fr-transformer's layer 1 guesses "est" at step 5, layers 2 and 3 "heureux" (ui/lens_panel.py's
          # panel, landed on; tests/test_lens_panel.py holds the flip on the shipped model)
          + ((translate("Step by step", LENS_EXAMPLE, "the lens", model=transformers[0], step="5", lens="on"),)
             if transformers else ())),
    Topic("BLEU and perplexity",
          "A reference forced through the model: log p, perplexity (the Shannon game), ranks, BLEU's n-grams.",
          # a human reference that differs from the model's "Je suis allé au cours hier.": word order and
          # case, so p_1 ... p_4 all differ and the shorter output pays a brevity penalty
          (translate("Forced decoding", "I went to the lecture yesterday.",
                     reference="Hier, je suis allé au cours."),)),
    Topic("The bottleneck",
          "A fixed vector beside attention on the same input: BLEU by length, a stress test, what the decoder reads.",
          (Link("pages/bottleneck.py", "Bottleneck", {}, ":material/compress:"),)),
    Topic("Attention and its scoring functions",
          "One sentence through dot, general, additive and scaled-dot attention; below them, why scaled-dot "
          "divides by √d.",
          (translate("Compare attention", "She has a big black dog."),)),
    Topic("Alignment and explanation",
          "Attention's links against human word alignments (AER); attention beside gradient attributions; "
          "a foil: which words push toward “La”, which toward “Le”?",
          (Link("pages/alignment.py", "Alignment › Against human alignments", {"tab": "Against human alignments"},
                ":material/compare_arrows:"),
           Link("pages/alignment.py", "Alignment › Attention vs attribution", {"tab": "Attention vs attribution"},
                ":material/compare_arrows:"),
           # the contrast panel (ui/contrast_panel.py) at step 1, "La" against the foil "Le", landed on; on the
           # shipped model "girl" pushes most toward "La" (tests/test_contrast_page.py holds it)
           translate("Step by step", "The little girl is happy because her mother is here.", "a foil",
                     step="1", foil="▁Le"))),
    Topic("Interpretable cells",
          "A character model reads a passage, each character shaded by one cell; *Find cells* ranks the cells by "
          "feature.",
          (Link("pages/cells.py", "Cell States › Colored text", {"tab": "Colored text"}, ":material/memory:"),
           # LSTMVis's select-a-span on the War and Peace LSTM's example passage: its first quotation whole,
           # read by the memory tanh(c), lists the quote cell (docs/app.md); the warm-up reads what it needs
           Link("pages/cells.py", "Cell States · select a span › Colored text", ui.warm.SPAN_LINK,
                ":material/select:"))),
]
OUTLINE.append(Topic(
    "Self-attention and the Transformer",
    "Attention without recurrence: every layer × head; below them, how one head's query and keys make a row.",
    # the neuron view of a head of en-fr-transformer that reads the word just written (docs/app.md): the
    # decoder writing "chien" after "grand" (another Transformer's out-of-range choices fall back to its own)
    (translate("Heads", "She has a big black dog.", model=transformers[0], heads="decoder", heads_layer="2",
               heads_head="3", heads_query="5"),) if transformers else (),
    coming="" if transformers else "coming: a trained Transformer (none in checkpoints/ yet)"))
OUTLINE.append(Topic(
    "Are all heads needed?",
    # ui.knockout: en-fr-transformer with encoder self-attention's layer 2 head 1 knocked out writes
    # "Elle a une grosse chien noire." for "Elle a un grand chien noir." (tests/test_knockout_page.py holds it)
    "Knock one encoder head out and the dog's adjectives turn feminine; beside it, BLEU as heads are pruned.",
    (translate("Heads", "She has a big black dog.", "knock heads out", model=transformers[0], heads="encoder",
               mask="encoder:2.1"),) if transformers else (),
    coming="" if transformers else "coming: a trained Transformer (none in checkpoints/ yet)"))

# what the page is in the title's tooltip: a caption line under it pushed the outline's last
# link past a 1280 x 720 screen (tests/test_browser.py holds the whole outline on it)
st.title("Start here", help="The lecture in order. Each link opens the page and tab with an example already set; "
                            "the sidebar reaches every page at any time.")
# one row per topic, the sentence in small type and the rows close together, so that the ten topics
# and their sixteen links fit one 1280 x 720 screen, with the Projector (text 1.1 rem) and without
# (tests/test_browser.py, tests/test_browser_layout.py): lines 1.4 sizes apart, not Markdown's 1.6,
# a smaller title, a topic's links stacked close. A link's label wraps rather than being cut when
# the column is narrow.
OUTLINE_CSS = (".st-key-outline [data-testid='stMarkdownContainer'] p{line-height:1.4}"
               "[data-testid='stMain'] h1{padding:0 0 .3rem 0;font-size:2.2rem}"
               ".st-key-outline [data-testid='stPageLink'] *{white-space:normal;text-overflow:clip}")
# The sidebar opened again beside the Projector (its arrow; the browser alone knows, so the rule asks
# the page whether the sidebar is expanded) leaves the outline 300 px less: at the Projector's 1.1 rem
# it ran to 863 px. There it keeps the screen's 1 rem and the main column's narrower margins: 700 px
SIDEBAR_OPEN = "body:has([data-testid='stSidebar'][data-collapsed='false']) "
PROJECTOR_WITH_SIDEBAR_CSS = (
    SIDEBAR_OPEN + "[data-testid='stMainBlockContainer']:has(.st-key-outline){padding-left:2rem;padding-right:2rem}"
    + SIDEBAR_OPEN + ".st-key-outline [data-testid='stMarkdownContainer'] p{font-size:1rem !important}")
st.markdown(f"<style>{OUTLINE_CSS}{PROJECTOR_WITH_SIDEBAR_CSS if ui.show.projector() else ''}</style>",
            unsafe_allow_html=True)
# with the Projector the sidebar is closed: the sentences take the width the links do not need
widths = [2, 1] if ui.show.projector() else [3, 2]
with st.container(gap="xxsmall", key="outline"):
    for n, topic in enumerate(OUTLINE, 1):
        left, right = st.columns(widths, vertical_alignment="center")
        left.markdown(f"**{n}. {topic.title}** · :small[{topic.look}]")
        with right.container(gap="xxsmall"):   # a topic's links stacked close: three of them set their row's height
            for link in topic.links:
                st.page_link(link.page, label=link.label, icon=link.icon, query_params=link.query)
            if topic.coming:
                st.caption(topic.coming)


ui.warm.preload_chart_scripts()     # the browser loads Plotly and Vega while the outline is read
ui.address.set_address({})     # an empty address, but for the Projector switch (projector=on)
