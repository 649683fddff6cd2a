"""Neighbours: the training sentences and training decoder states nearest to a sentence's own.

A student types "She has a big black dog." and sees where its vectors sit among the training
data's, in two ways, both by cosine similarity cos(u, v) = u . v / (|u| |v|):

    by sentence   the sentence's pooled encoder state, the MEAN of the encoder states h_i over its
                  real source positions (every source piece and the closing </s>; padding left out),
                  against the same pooled state of every indexed training sentence
    by step       at each output step j, the decoder state the output layer reads (the recurrent
                  models' attentional hidden state h~_j = tanh(W_c [c_j ; s_j]), the fixed-vector
                  model's too; the Transformer's last decoder layer output after the final layer norm;
                  a hub model's last decoder hidden state), against the decoder states of every step
                  of every indexed training pair, each shown with the piece at that step and its
                  sentence: "chien" here comes from states like those

The training states are taken under teacher forcing on the training French: at step j the
decoder has read the reference's pieces y_<j, and the piece an indexed state is shown with is
the TRAINING TARGET piece y_j (what it was trained to emit there); the model's own argmax at that
state is kept beside it (`predicted`). The query sentence's states come from a forced pass over
its translation (the greedy one unless given), the same states its decoding had.

The index: a sample of each model's own training split (the shipped models':
examples/neighbours/tatoeba-train-10k.tsv, 10,000 pairs of data/tatoeba/train.tsv, one per English
sentence; docs/data.md), its pooled encoder states and its decoder states as int8 codes (33 MB
for a shipped model, where fp16 took 65: docs/neighbours.md measures what each way of storing it
costs), written before class for every offered model by `python -m s2s.fetch --neighbours`, or by

    python -m s2s.neighbours build --model en-fr-additive

as index.safetensors (tensors) + index.json (the pairs, the model's identity, the corpus) in the
cache folder (`index_dir`): $S2S_NEIGHBOURS_DIR/NAME, else $XDG_CACHE_HOME/s2s-neighbours/NAME, else
~/.cache/s2s-neighbours/NAME (the six shipped models' indexes take 199 MB: not shipped). An index
records the model it was built for (its path and the SHA-256 of its weights file, or of its config
where there is no single file), so an index of another model is refused (IndexNotReady, an
InputError, as a missing one is), never searched.

Search is exact: one matrix product against the whole index and a top-k (docs/neighbours.md says
why, with the measurements). The 2-D map is a PCA of the neighbours' unit-length decoder states,
with the sentence's own trajectory placed on it.

    python -m s2s.neighbours --model en-fr-additive "She has a big black dog." [--k 5] [--json]

The package, one idea per module: identity (where an index lives, whose model it records),
index (NeighbourIndex, written and read back), build (the states of a corpus forced on its
French, and the shipped sample), search (the nearest sentences and states), projection (the
2-D map), cli (this command; `python -m s2s.neighbours` runs it).
"""
from .build import (
    BATCH_PAIRS,
    POOLING,
    SAMPLE,
    SAMPLE_PAIRS,
    SAMPLE_SEED,
    STATE,
    Progress,
    build_index,
    encode_pairs,
    ensure_index,
    forced_states,
    output_states,
    pooled,
    sample_pairs,
)
from .cli import main
from .identity import ROOT, build_command, cache_root, file_sha256, index_dir, model_identity, same_model, weights_file
from .index import (
    CODES,
    FORMAT,
    INDEX_JSON,
    INDEX_TENSORS,
    IndexNotReady,
    NeighbourIndex,
    int8_codes,
    load_index,
    unit_rows,
    write_index,
)
from .projection import Projection, project
from .search import (
    MAX_K,
    Neighbours,
    SentenceNeighbour,
    StateNeighbour,
    StepNeighbours,
    marked,
    search,
    sentence_states,
    top_k,
)

__all__ = [
    "BATCH_PAIRS", "CODES", "FORMAT", "INDEX_JSON", "INDEX_TENSORS", "MAX_K", "POOLING", "ROOT", "SAMPLE",
    "SAMPLE_PAIRS", "SAMPLE_SEED", "STATE", "IndexNotReady", "NeighbourIndex", "Neighbours", "Progress",
    "Projection", "SentenceNeighbour", "StateNeighbour", "StepNeighbours", "build_command", "build_index",
    "cache_root", "encode_pairs", "ensure_index", "forced_states", "file_sha256", "index_dir", "int8_codes",
    "load_index", "main", "marked", "model_identity", "output_states", "pooled", "project", "same_model",
    "sample_pairs", "search", "sentence_states", "top_k", "unit_rows", "weights_file", "write_index"
]
