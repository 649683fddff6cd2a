"""s2s: the library behind the app: encoder-decoder models, how they decode, and how to read them.

Nothing here imports Streamlit (import-linter checks it); the app's pages call it for every
computation and every figure. One idea per module, in the lecture's order:

    cells and gradients  lstm, gru, elman (each cell written out), gradients (how far back the
                         gradient reaches), memory_gap (remembering across a gap), charlm (the
                         character-level models), cells (interpretable cells)
    models               interface (what every model is to the searches: Memory, Step, the
                         Seq2SeqModel protocol, ConfigBase), attention (the scoring functions),
                         model (the recurrent encoder-decoder), transformer, hub_model + hub +
                         hub_config (Hugging Face encoder-decoders), tokenizer (one interface over
                         sentencepiece and a hub tokenizer)
    loading              loaded (what a loaded model is), checkpoint (the one loader and the
                         registry of checkpoints/), fetch (a server's hub models, before class)
    decoding             decode/ (result, processors, settings, search, batch: greedy, beam
                         search, sampling, forced decoding, one Decoding), piece_words (pieces
                         read as words), text (input limits, sentences)
    measuring            evaluate (BLEU, chrF, perplexity), bottleneck (fixed vector vs attention),
                         alignment/ (attention against human links: AER), contributions (norm,
                         ALTI+, rollout, value zeroing), attributions (gradients, leave-one-out),
                         counterfactual, explain (the command over the last three)
    out of the library   figures/ (plotly and altair builders by subject: data in, figure out),
                         export (files)
    training and data    data, train, train_charlm
    commands             translate, report, bench (and each module above with a `main`)

docs/code.md maps the whole repository.
"""
