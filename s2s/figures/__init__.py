"""Pure figure builders: data in, plotly (or altair) figure out; no Streamlit, no model calls.

One module per subject: `screen` (one-pass figures, labels readable from the back row),
`attention` (heatmaps, bars, context paths), `beam` (the beam tree), `cells` (LSTM cells),
`models` (colours per model, length curves, diagrams), `gradients` (gates and gradient flow),
`alignment` (gold links, contributions, counterfactuals, heads), `neuron` (one head's q·k path). Pages import from here.
`patching`: what carries an edit's change (activation patching), layers × words and heads.
`pruning`: BLEU as a Transformer's heads are knocked out.
`heads`: the head overview, one kind's layers x heads as one matrix of one number per head.
`lens`: each decoder layer's guess at a step (the logit lens).
`contrast`: why this word and not that one, beside the plain attribution and attention.

Token labels are HTML-escaped: plotly renders a subset of HTML in labels, and user text
must always show as text, never as markup. Axes are positional (0..n-1) with the tokens
as tick labels, because two equal tokens ("the" ... "the") must stay two columns.
"""
from .alignment import (  # noqa: F401
    GOLD_POSSIBLE,
    GOLD_SURE,
    MODEL_LINK,
    contribution_map,
    counterfactual_figure,
    gold_alignment_figure,
    head_aer_columns_fit,
    head_aer_figure,
    head_marks,
    head_of_trace,
    heads_grid,
)
from .attention import (  # noqa: F401
    TALL_ROWS,
    alignment_lines,
    attention_heatmap,
    context_scatter,
    matrix_heatmap,
    token_bars,
)
from .beam import (  # noqa: F401
    FINISHED_COLOR,
    HALO,
    NBEST_REST,
    NBEST_STYLES,
    _place_labels,
    _text_em,
    beam_paths,
    beam_tree_figure,
    beam_tree_positions,
)
from .cells import (  # noqa: F401
    cell_traces_figure,
    colored_text_html,
    saturation_scatter,
    span_heatmap,
    state_heatmap,
)
from .contrast import contrast_figure  # noqa: F401
from .gradients import (  # noqa: F401
    CELL_COLORS,
    CELL_NAMES,
    REASONS,
    float_limit_marks,
    gradient_flow_figure,
    memory_gap_figure,
    memory_span_figure,
    untrained_flow_figure,
)
from .heads import head_matrix, matrix_pick  # noqa: F401
from .lens import layer_labels, layer_rank_figure, layer_top_figure  # noqa: F401
from .models import ATTENTION_COLORS, length_chart, model_colors, model_diagram, scaling_figure  # noqa: F401
from .neighbours import neighbours_map  # noqa: F401
from .neuron import clickable_cells, neuron_figure  # noqa: F401
from .patching import RESTORED_SCALE, patching_figure  # noqa: F401
from .pruning import pruning_figure  # noqa: F401
from .screen import (  # noqa: F401
    BODY_TEXT,
    LABEL_PX,
    PROJECTOR_LABEL_PX,
    PROJECTOR_SCALE,
    TOOLBAR_PX,
    altair_for_screen,
    display_token,
    figure,
    for_screen,
    label_px,
    label_step,
)
