"""Attention against attributions: which source pieces drove each output token?

Attention says where the decoder read the source at step j. Whether those weights say what
*drove* the output y_j is a separate question (Jain & Wallace 2019, "Attention is not
Explanation", asked it for text classifiers; here it is asked of translation). Three
attributions of log p(y_j | y_<j, x) to the source pieces x_1..x_m (</s> included), with
e_i the embedding of x_i, measure that directly:

    gradient x input      a_ij = (d log p(y_j | y_<j, x) / d e_i) . e_i
                          (the gradient with respect to x_i's one-hot input, first order)
    integrated gradients  a_ij = (e_i - e'_i) . int_0^1 d log p(y_j | y_<j, e' + t (e - e')) / d e_i dt
                          (Sundararajan et al. 2017) from the all-zero baseline e' = 0, by
                          Gauss-Legendre quadrature (captum), IG_STEPS points per segment of
                          [0, 1], segments halved where the path is steep; completeness:
                          sum_i a_ij = log p(y_j | x) - log p(y_j | e' = 0)
    leave-one-out         a_ij = log p(y_j | y_<j, x) - log p(y_j | y_<j, x with x_i -> <unk>)
                          (the same output y forced in both: how much worse y_j gets without x_i)

What they share: forced decoding of one output y, written as a function of the source
embeddings so that it can be differentiated (row_log_probs: one row per (sentence, step)
scored). The output y is the model's own greedy translation, or a given reference, forced
either way. Agreement of attention alpha_j with each attribution, per target token, is
Kendall's tau-b between alpha_ij and |a_ij| over i (the magnitude: attention cannot be
negative, and Jain & Wallace compare importance the same way), and whether both put their
maximum on the same source piece.

A package of one idea per module: forced.py (forced decoding as a differentiable function of
the source embeddings: row_log_probs), gradient.py (gradient x input, integrated gradients),
perturbation.py (leave-one-out), tau.py (Kendall's tau-b and the top piece: agreement),
explanation.py (`explain` puts it together for one sentence: an Explanation), progress.py
(how a long run says how far it is). s2s/counterfactual.py asks the other question, what the
output does when alpha_j is replaced, and s2s/explain.py is the command and the summary over
a test set.
"""
from .explanation import (
    MAX_SOURCE_PIECES,
    MAX_TARGET_PIECES,
    METHODS,
    SHORT,
    Explanation,
    check_model,
    explain,
    source_ids,
    target_ids,
)
from .forced import TRANSFORMER_GROUPS, bos_id, cudnn_paused, row_log_probs, step_log_probs, unk_id
from .gradient import IG_SHARES, IG_SPLITS, IG_STEPS, IG_TOLERANCE, grad_x_input, integrated_gradients
from .perturbation import forced_log_probs, leave_one_out
from .progress import PROGRESS_CHUNKS, Progress
from .tau import agreement, kendall_tau

__all__ = ["MAX_SOURCE_PIECES", "MAX_TARGET_PIECES", "METHODS", "SHORT", "Explanation", "check_model", "explain",
           "source_ids", "target_ids", "TRANSFORMER_GROUPS", "bos_id", "cudnn_paused", "row_log_probs",
           "step_log_probs", "unk_id", "IG_SHARES", "IG_SPLITS", "IG_STEPS", "IG_TOLERANCE", "grad_x_input",
           "integrated_gradients", "forced_log_probs", "leave_one_out", "PROGRESS_CHUNKS", "Progress", "agreement",
           "kendall_tau"]
