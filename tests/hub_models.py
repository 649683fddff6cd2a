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


def randomised(out: str | Path, sizes: dict = SIZES, vocab_size: int | None = None,
               max_new_tokens: int | None = 24) -> Path:
    """A Marian of `sizes` (marian()) whose biases, final_logits_bias and layer norms are random
    and nonzero too, as a trained model's are (a zero would hide their terms from a test), its
    output capped at `max_new_tokens` pieces in its generation_config: a random model never writes
    </s> of its own accord, so the cap (a real sentence's length), which every decoding of it
    honours (s2s.decode.length_limit), page and command alike, stands in; None: no cap of its own."""
    from transformers import GenerationConfig, MarianMTModel
    out = marian(out, sizes, vocab_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MarianMTModel.from_pretrained(out)
    torch.manual_seed(1)
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 0.1)
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.add_(torch.randn_like(p) * 0.05)
            elif name.endswith(".bias"):
                p.normal_(0, 0.02)
    gen = GenerationConfig.from_model_config(model.config)
    gen.bad_words_ids = model.generation_config.bad_words_ids
    if max_new_tokens is not None:
        gen.max_new_tokens = max_new_tokens
    model.generation_config = gen
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(out)
    return out


def opus_shaped(out: str | Path, max_new_tokens: int | None = 24) -> Path:
    """A Marian of Helsinki-NLP/opus-mt-en-fr's shape (6 + 6 layers x 8 heads, d = 512, 59,514
    pieces), random weights (randomised), for timing at the size people study, offline."""
    return randomised(out, OPUS_MT_EN_FR, OPUS_MT_EN_FR_VOCAB, max_new_tokens)


def head_sizes(layers: int = 12, heads: int = 16, d_model: int | None = None) -> dict:
    """marian()'s sizes for `layers` + `layers` layers x `heads` heads at width `d_model`: 64, or 4
    a head where 64 does not divide into heads (48 for 12)."""
    d_model = d_model or (64 if 64 % heads == 0 else 4 * heads)
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not a multiple of {heads} heads")
    return dict(SIZES, d_model=d_model, encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=heads,
                decoder_attention_heads=heads, encoder_ffn_dim=2 * d_model, decoder_ffn_dim=2 * d_model)


# NLLB-200-distilled-600M's and mBART's depth and heads (12 + 12 layers x 16 heads) at a tiny width, for the
# head views' layout at that shape (tests/test_browser_wide_views.py): 4 dimensions per head
WIDE_SIZES = head_sizes(12, 16)


def wide_marian(out: str | Path, sizes: dict = WIDE_SIZES, max_new_tokens: int | None = 24) -> Path:
    """A randomised Marian of `sizes` (12 + 12 layers x 16 heads, d = 64 unless said)."""
    return randomised(out, sizes, None, max_new_tokens)


# The head overview's layout shapes (issue #67 items 1 and 4): layers x heads of the models people
# study, at a small width so that the layout tests stay fast (d_model 64: head_dim 64 / heads divides)
HEAD_SHAPES = {"3x4": (3, 4), "6x8": (6, 8), "12x12": (12, 12), "12x16": (12, 16), "24x16": (24, 16)}


def marian_heads(out: str | Path, layers: int = 12, heads: int = 16, d_model: int | None = None) -> Path:
    """A Marian of `layers` + `layers` layers x `heads` heads (head_sizes; NLLB-600M and mBART's
    12 + 12 x 16 by default): the shape of a big model's head views at a tiny cost."""
    return marian(out, head_sizes(layers, heads, d_model))

