"""s2s: a small, readable library of recurrent encoder-decoder models.

One file per idea: `tokenizer` (sentencepiece), `data` (pairs, splits, batches),
`attention` (scoring functions), `model` (encoder, decoder, cells), `decode`
(greedy, beam search, sampling, forced decoding), `checkpoint` (load/save, registry),
`evaluate` (BLEU, chrF, perplexity), `train`. Nothing here imports Streamlit.
"""
