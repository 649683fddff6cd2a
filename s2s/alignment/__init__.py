"""Is attention an alignment? Attention under forced decoding, read as word links and scored
against human word alignments with the alignment error rate (Och & Ney 2003).

    python -m s2s.alignment --model checkpoints/en-fr-additive --gold ../shared/data/hansards-en-fr-align --json
    python -m s2s.alignment --model DIR --gold examples/hansards_trial --split trial --rule argmax
    python -m s2s.alignment --model DIR --gold DIR --split trial --sweep     # how the default rule was chosen
    python -m s2s.alignment --model hf:Helsinki-NLP/opus-mt-en-fr --gold DIR --heads   # every layer x head
    python -m s2s.alignment --gold DIR --table results/alignment.json --baseline-data data/tatoeba/train.tsv
                            # every attention model and the eflomal baseline: docs/attention.md's table
    python -m s2s.alignment --model DIR --input PAIRS.tsv --output LINKS.txt [--gold G]
                            # a whole corpus, Pharaoh links (s2s.alignment.corpus; torchrun splits it)

The gold standard (HLT-NAACL 2003, Canadian Hansards) marks each link Sure (S: every
annotator agrees) or Possible (P: some annotators, or an ambiguous case); S links count
as P too (P ⊇ S). For predicted links A, summed over the whole corpus:

    precision = |A ∩ P| / |A|          a link is right if it is at least possible
    recall    = |A ∩ S| / |S|          a sure link must be found
    AER       = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)     0 is perfect

The words are the gold's whitespace tokens, not the model's pieces: each sentencepiece
piece is given to the token its characters come from (sentencepiece reports where in the
text each piece starts), and a (French pieces x English pieces) attention matrix becomes a
(French words x English words) one: an English word weighs the SUM of its
pieces' columns (mass is preserved; </s> is left out), a French word's row is the MEAN of
its pieces' rows. Rules then turn the weights into links.

--json prints aer, precision, recall, sentences, rule, params, model (the checkpoint's
name), split, links (|A|), sure (|S|) and seconds (the forced decodings). --heads (a
Transformer, ours or a Hugging Face model) scores every layer x head as an aligner instead:
heads_aer [layer][head], best_head, and the last layer's head mean. Bad input (missing
files, mismatched line counts, a link out of range, a model without attention) gives one
line on stderr starting with "error:" and exit status 2.

The package, one idea per module: gold (the human links read), words (pieces merged into the
gold's words), rules (weights into links), scores (AER, per head and per method, and the
results tables' rows), baseline (eflomal and the AER table), corpus (a whole file of pairs
in the Pharaoh format), cli (this command; `python -m s2s.alignment` runs it).
"""
from .baseline import aer_table, gold_tokens, statistical_links
from .cli import main
from .gold import SPLITS, GoldError, GoldPair, Link, read_gold
from .rules import (
                    DEFAULT_RULE,
                    NEIGHBOURS,
                    RULE_PARAMS,
                    RULES,
                    SWEEP,
                    SYMMETRIZATIONS,
                    Rule,
                    argmax_links,
                    grow_diag_links,
                    links,
                    ratio_links,
                    shifted,
                    symmetrize,
                    threshold_links,
)
from .scores import (
                    TABLE_RULES,
                    Scores,
                    best_head,
                    best_head_row,
                    evaluate,
                    head_scores,
                    method_scores,
                    method_summary,
                    pairs_that_fit,
                    score,
                    scores_json,
                    skipped_note,
)
from .words import (
                    WordPieces,
                    fitting_inputs,
                    pieces_to_words,
                    to_words,
                    too_long,
                    word_attention,
                    word_inputs,
                    word_method,
                    word_pieces,
)

__all__ = ["aer_table", "gold_tokens", "statistical_links", "main", "SPLITS", "GoldError", "GoldPair", "Link",
           "read_gold", "DEFAULT_RULE", "NEIGHBOURS", "RULE_PARAMS", "RULES", "Rule", "SWEEP", "SYMMETRIZATIONS",
           "argmax_links", "grow_diag_links", "links", "ratio_links", "shifted", "symmetrize", "threshold_links",
           "TABLE_RULES", "Scores", "best_head", "best_head_row", "evaluate", "head_scores", "method_scores",
           "method_summary", "pairs_that_fit", "score", "scores_json", "skipped_note", "WordPieces", "fitting_inputs",
           "pieces_to_words", "to_words", "too_long", "word_attention", "word_inputs", "word_method", "word_pieces"]
