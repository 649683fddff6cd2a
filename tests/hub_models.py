"""Tiny Hugging Face encoder-decoders built offline for the tests: random weights from a small
config, a tokenizer trained on the fly, written with save_pretrained into a folder. One of each
family the adapter must handle: Marian (opus-mt: separate source/target sentencepiece models,
pad = decoder start, bad_words_ids = [[pad]], forced_eos), T5 (a task prefix from the config,
relative positions, a vocabulary larger than the tokenizer) and M2M100 (language codes after its
pieces, 100 of them, hence the vocabulary of len + 200: the decoder starts with </s> and must
write the target language's code first)."""
from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import sentencepiece as spm
import torch

EN = ["the cat sat on the mat .", "a dog runs in the park .", "attention is all you need .",
      "neural networks learn useful representations from data .", "the house is red .",
      "we train small models here .", "she reads a book every day .", "hello world !"]
FR = ["le chat est assis sur le tapis .", "un chien court dans le parc .", "l'attention suffit .",
      "les réseaux de neurones apprennent des représentations utiles .", "la maison est rouge .",
      "nous entraînons de petits modèles ici .", "elle lit un livre chaque jour .", "bonjour le monde !"]
SIZES = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=256)


def _spm(lines: list[str], vocab: int, path: Path, **ids) -> spm.SentencePieceProcessor:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines * 4), model_writer=buf, vocab_size=vocab,
                                   model_type="unigram", minloglevel=2, hard_vocab_limit=False, **ids)
    path.write_bytes(buf.getvalue())
    return spm.SentencePieceProcessor(model_file=str(path))


def _pieces(*sps: spm.SentencePieceProcessor) -> list[str]:
    out: set[str] = set()
    for sp in sps:
        out |= {sp.id_to_piece(i) for i in range(sp.get_piece_size())}
    return sorted(out - {"<s>", "</s>", "<unk>", "<pad>"})


def _save(model, tok, out: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(out)
        tok.save_pretrained(out)
    return out


# Helsinki-NLP/opus-mt-en-fr's shape (its config.json): for timing the adapter against generate()
# on a model of the real size, offline (random weights: the same work per step, nonsense output)
OPUS_MT_EN_FR = dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                     decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                     max_position_embeddings=512)
OPUS_MT_EN_FR_VOCAB = 59514


def marian(out: str | Path, sizes: dict = SIZES, vocab_size: int | None = None, extra_rows: int = 0,
           prefer_unused: float = 0.0) -> Path:
    """A Marian model; `sizes` and `vocab_size` (its embedding rows, past the tokenizer's own
    pieces, every one of them in its vocab.json) give it another shape: marian(out, OPUS_MT_EN_FR,
    OPUS_MT_EN_FR_VOCAB) is opus-mt-en-fr's, as `python -m s2s.bench` times it. `extra_rows`:
    that many embedding rows past the end of its vocab.json, ids the tokenizer cannot decode.
    `prefer_unused`: added to the <unused…> pieces' final_logits_bias, so that the model's
    likeliest next pieces are those, which write no text (with `vocab_size` past its pieces)."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    src, tgt = _spm(EN, 60, out / "source.spm"), _spm(FR, 60, out / "target.spm")
    pieces = ["</s>", "<unk>"] + _pieces(src, tgt)
    pieces += [f"<unused{i}>" for i in range((vocab_size or 0) - len(pieces) - 1)] + ["<pad>"]
    (out / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # "Recommended: pip install sacremoses"
        tok = MarianTokenizer(str(out / "source.spm"), str(out / "target.spm"), str(out / "vocab.json"),
                              source_lang="en", target_lang="fr")
    V = len(pieces)
    cfg = MarianConfig(vocab_size=V + extra_rows, pad_token_id=V - 1, decoder_start_token_id=V - 1, eos_token_id=0,
                       forced_eos_token_id=0, scale_embedding=True, **sizes)      # as opus-mt's configs
    torch.manual_seed(0)
    model = MarianMTModel(cfg)
    model.generation_config.bad_words_ids = [[V - 1]]     # as opus-mt's: never write <pad>
    if prefer_unused:
        with torch.no_grad():
            model.final_logits_bias[:, [i for i, p in enumerate(pieces) if p.startswith("<unused")]] += prefer_unused
    return _save(model, tok, out)


def t5(out: str | Path) -> Path:
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = "translate English to French: "
    sp = _spm([prefix + e for e in EN] + FR, 90, out / "spm.model", pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    tok = T5Tokenizer(vocab=vocab, extra_ids=0)
    (out / "spm.model").unlink()
    cfg = T5Config(vocab_size=len(vocab) + 6, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                   num_heads=4, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                   task_specific_params={"translation_en_to_fr": {"prefix": prefix}})
    torch.manual_seed(0)
    return _save(T5ForConditionalGeneration(cfg), tok, out)


def m2m100(out: str | Path) -> Path:
    from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sp = _spm(EN + FR, 80, out / "sentencepiece.bpe.model")
    pieces = ["<s>", "<pad>", "</s>", "<unk>"] + _pieces(sp)
    (out / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    tok = M2M100Tokenizer(str(out / "vocab.json"), str(out / "sentencepiece.bpe.model"), src_lang="en", tgt_lang="fr")
    cfg = M2M100Config(vocab_size=len(tok) + 200, bos_token_id=0, pad_token_id=1, eos_token_id=2,
                       decoder_start_token_id=2, **SIZES)
    torch.manual_seed(0)
    return _save(M2M100ForConditionalGeneration(cfg), tok, out)


BUILDERS = {"marian": marian, "t5": t5, "m2m100": m2m100}


# NLLB-200-distilled-600M's and mBART's depth and heads (12 + 12 layers x 16 heads) at a tiny width, for the
# head views' layout at that shape (tests/test_browser_wide_views.py): 4 dimensions per head
WIDE_SIZES = dict(d_model=64, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
                  decoder_attention_heads=16, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=256)


def wide_marian(out: str | Path, sizes: dict = WIDE_SIZES, max_new_tokens: int | None = 24) -> Path:
    """A Marian model of `sizes` (12 + 12 layers x 16 heads, d = 64 unless said) with random nonzero
    biases and layer norms (a zero would hide their terms from a test), its output capped at
    `max_new_tokens` pieces in its generation_config (random weights never write </s> on their
    own; a real sentence is about 24 pieces)."""
    from transformers import MarianMTModel
    out = marian(out, sizes)
    model = MarianMTModel.from_pretrained(out)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") and "final_logits" not in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "layer_norm.weight" in name or "layernorm.weight" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
    if max_new_tokens:
        model.generation_config.max_new_tokens = max_new_tokens
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(out)
    return out
