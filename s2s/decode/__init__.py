"""The one decode API: every method returns a `Decoding` with tokens, log-probs,
the attention matrix (target x source) and the decoder state of every step.

    greedy       y_j = argmax_y p(y | y_<j, x)
    beam search  keep the `width` best prefixes by sum_j log p(y_j | y_<j, x); finished
                 hypotheses are ranked by that sum divided by a length penalty
                 lp(|y|) = ((5 + |y|) / 6)^length_penalty   (Wu et al. 2016), so short ones don't win
    sampling     y_j ~ softmax(logits / T), optionally restricted to the top k (ancestral)
    forced       y_j = the reference's j-th token (teacher forcing): how the model aligns
                 and scores a given pair
    steering     every method above may be given how the output starts, y_1 .. y_n
                 (`DecodeSettings.target_prefix`: French text or target ids): the search
                 continues from y_n (beam search: every hypothesis shares the prefix), and the
                 Decoding scores the prefix as the model does (`prefix_length` marks it)

What may be chosen at a step is one list of logits processors that every search applies
(`DecodeSettings.processors`), each (prefix, scores, last) -> scores, the interface of
transformers' LogitsProcessor plus `last`, the rows at their final allowed step:
    NoRepeatNGram(n)   a token that would complete an n-gram the hypothesis already contains
                       gets probability 0 (Paulus et al. 2018), so a decoder that has lost its
                       place cannot loop on the same words to the length limit
    Temperature(T), TopK(k)                         sampling only: softmax(logits / T), top k
    SuppressTokens, BadWords, ForceToken            a Hugging Face model's own generation
                       settings (never <pad>; the target language's code first; </s> at the
                       length limit), so its searches choose what generate() would
Greedy and sampling process the logits, beam search the log-probabilities (as transformers
does). Processors decide which token is chosen; the log-probs a Decoding reports are always
the model's own, log softmax of its raw logits.

`DecodeSettings` carries one decoding's options; `decode(tr, text, settings)` runs it (the
pages key their caches by it). The special ids come from the model's tokenizer (bos_id,
eos_id, pad_id): a hub model's are not the shipped models' 0-3.

The encoder runs once per sentence, and so do the attention keys (Memory).

One idea per module: `result` (Decoding, Hypothesis, reading attention), `processors` (what may
be chosen), `settings` (DecodeSettings, the length penalty), `search` (one sentence: greedy,
sampling, forced, beam search, `decode`; `usable_pairs`, a corpus's pairs the model can be forced
through), `batch` (many sentences at once). The model is whatever implements
s2s.interface.Seq2SeqModel; the searches call only that.
"""
from __future__ import annotations

from ..text import InputError
from .batch import (
    MASK_BATCH_ROWS,
    beam_search_batch,
    forced_batch_attention,
    greedy_batch,
    greedy_batch_masks,
    greedy_batch_stopped,
    no_prefix,
    pad_batch,
)
from .processors import (
    BadWords,
    ForceToken,
    LogitsProcessor,
    NoRepeatNGram,
    SuppressTokens,
    Temperature,
    TopK,
    apply_processors,
    block_repeats,
    model_processors,
    repeated_ngram_mask,
)
from .result import (
    TOPK_RECORDED,
    Decoding,
    Hypothesis,
    StepRecord,
    attention_heads,
    attention_of,
    block_diagonal,
    join_decodings,
    source_coverage,
    was_cut,
)
from .search import (
    Chooser,
    _left_to_right,
    beam_search,
    decode,
    decode_by_sentence,
    encode_source,
    forced,
    greedy,
    is_search_error,
    length_limit,
    own_cap,
    positions,
    sample,
    target_prefix_ids,
    usable_pairs,
)
from .settings import LENGTH_PENALTY, METHOD_NAMES, DecodeSettings, lp

__all__ = ["BadWords", "Chooser", "DecodeSettings", "Decoding", "ForceToken", "Hypothesis", "InputError",
           "LENGTH_PENALTY", "LogitsProcessor", "METHOD_NAMES", "NoRepeatNGram", "StepRecord", "SuppressTokens",
           "TOPK_RECORDED", "Temperature", "TopK", "_left_to_right", "apply_processors", "attention_heads",
           "attention_of", "beam_search", "block_diagonal", "decode_by_sentence", "join_decodings",
           "beam_search_batch", "block_repeats", "decode", "encode_source", "forced",
           "forced_batch_attention", "greedy", "greedy_batch", "greedy_batch_masks", "greedy_batch_stopped",
           "MASK_BATCH_ROWS",
           "is_search_error",
           "length_limit", "lp", "model_processors", "no_prefix", "own_cap", "pad_batch", "positions",
           "repeated_ngram_mask", "sample", "source_coverage", "target_prefix_ids", "usable_pairs", "was_cut"]
