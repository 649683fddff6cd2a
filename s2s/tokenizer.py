"""The one tokenizer interface, two implementations.

`Tokenizer`: the shipped models' joint English-French sentencepiece model. Ids 0-3 are
reserved: <pad>, <unk>, <s> (BOS), </s> (EOS). The model file lives in each checkpoint
folder as `spm.model`, so a checkpoint is self-contained.

`HubTokenizer`: a Hugging Face model's own tokenizer behind the same methods. Its special
ids are the model's (Marian's pad is its decoder start, NLLB starts the decoder with </s>
and forces a language code first), so decoding reads `bos_id`, `eos_id` and `pad_id` from
the tokenizer, never the constants below; `source_ids` / `target_ids` add what the model
expects around a text (a task prefix, language codes, </s>).
"""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Iterable

import sentencepiece as spm

PAD, UNK, BOS, EOS = 0, 1, 2, 3


class Tokenizer:
    pad_id, unk_id, bos_id, eos_id = PAD, UNK, BOS, EOS

    def __init__(self, model_file: str | Path):
        self.path = Path(model_file)
        self.sp = spm.SentencePieceProcessor(model_file=str(self.path))

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Text -> piece ids (no BOS/EOS)."""
        return self.sp.encode(text)

    def source_ids(self, text: str) -> list[int]:
        """What the encoder reads: the pieces of `text`, then </s>."""
        return self.encode(text) + [EOS]

    def target_ids(self, text: str) -> list[int]:
        """A reference as the decoder must write it: its pieces, then </s>."""
        return self.encode(text) + [EOS]

    def decode(self, ids: Iterable[int]) -> str:
        return self.sp.decode([i for i in ids if i > EOS])

    def piece(self, i: int) -> str:
        return self.sp.id_to_piece(int(i))

    def piece_id(self, piece: str) -> int:
        """The id of a piece as `piece` writes it (<unk>'s for one the vocabulary lacks)."""
        return self.sp.piece_to_id(piece)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def unknown_characters(self, text: str, target: bool = False) -> list[str]:
        """The distinct characters of `text` outside the vocabulary, in order of appearance:
        each is read as <unk>, a symbol the model learned almost nothing about. (`target`: one
        vocabulary serves both sides here.)"""
        seen = dict.fromkeys(ch for ch in text if not ch.isspace())
        return [ch for ch in seen if UNK in self.sp.encode(ch)]


def add_characters(model_file: str | Path, chars: Iterable[str], out_file: str | Path) -> Tokenizer:
    """Write `model_file` with one piece added for each character of `chars` it cannot spell.

    The new pieces score below every existing one, so a text the tokenizer could already
    spell is split exactly as before (old ids keep their meaning); a name like "Søren" gets
    "ø" instead of <unk>, which a model can learn to copy. Use it to extend a trained model's
    vocabulary: its embedding needs one new row per added piece (train.py --init-from).
    """
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(Path(model_file).read_bytes())
    known = {p.piece for p in proto.pieces}
    sp = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    score = min(p.score for p in proto.pieces if p.type == pb.ModelProto.SentencePiece.NORMAL) - 1.0
    for ch in sorted(set(chars)):
        if not ch.isspace() and ch not in known and UNK in sp.encode(ch):
            proto.pieces.append(pb.ModelProto.SentencePiece(piece=ch, score=score,
                                                            type=pb.ModelProto.SentencePiece.NORMAL))
            known.add(ch)
    Path(out_file).parent.mkdir(parents=True, exist_ok=True)
    Path(out_file).write_bytes(proto.SerializeToString())
    return Tokenizer(out_file)


def train_tokenizer(sentences: Iterable[str], model_file: str | Path, vocab_size: int = 8000,
                    character_coverage: float = 0.9999) -> Tokenizer:
    """Train a unigram sentencepiece model on `sentences` and write it to `model_file`."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(sentences)), model_writer=buf, vocab_size=vocab_size,
        model_type="unigram", character_coverage=character_coverage,
        pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
        pad_piece="<pad>", unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
        input_sentence_size=400_000, shuffle_input_sentence=True, minloglevel=2,
        hard_vocab_limit=False,
    )
    Path(model_file).parent.mkdir(parents=True, exist_ok=True)
    Path(model_file).write_bytes(buf.getvalue())
    return Tokenizer(model_file)


class HubTokenizer:
    """A Hugging Face tokenizer (`AutoTokenizer`) with `Tokenizer`'s methods.

    `prefix` is prepended to every source text (T5's "translate English to French: ");
    `source_lang` / `target_lang` are a multilingual tokenizer's own language codes
    ("eng_Latn", "en_XX", "en"), None for a model with one language pair.
    """

    def __init__(self, hf, bos_id: int, eos_id: int, pad_id: int, prefix: str = "",
                 source_lang: str | None = None, target_lang: str | None = None, hidden: Iterable[int] = ()):
        self.hf = hf
        self.bos_id, self.eos_id, self.pad_id = int(bos_id), int(eos_id), int(pad_id)
        self.unk_id = hf.unk_token_id
        self.prefix, self.source_lang, self.target_lang = prefix, source_lang, target_lang
        if source_lang is not None:
            hf.src_lang = source_lang
        if target_lang is not None:
            hf.tgt_lang = target_lang
        # ids decode() drops besides the special ones: language codes (M2M100's tokenizer does
        # not always mark its own as special)
        codes = {**(getattr(hf, "lang_token_to_id", None) or {}), **(getattr(hf, "lang_code_to_id", None) or {})}
        self.hidden = {int(i) for i in hidden} | {int(i) for i in codes.values()}

    def __len__(self) -> int:
        return len(self.hf)

    def encode(self, text: str, target: bool = False) -> list[int]:
        """Text -> piece ids, nothing added; `target`: as the decoder writes it (Marian has a
        tokenizer for each side)."""
        side = {"text_target": text} if target else {"text": text}
        return list(self.hf(**side, add_special_tokens=False)["input_ids"])

    def source_ids(self, text: str) -> list[int]:
        return list(self.hf(self.prefix + text)["input_ids"])

    def target_ids(self, text: str) -> list[int]:
        ids = list(self.hf(text_target=text)["input_ids"])
        return ids if ids and ids[-1] == self.eos_id else ids + [self.eos_id]

    def decode(self, ids: Iterable[int]) -> str:
        return self.hf.decode([int(i) for i in ids if int(i) not in self.hidden], skip_special_tokens=True).strip()

    def piece(self, i: int) -> str:
        p = self.hf.convert_ids_to_tokens(int(i))
        return p if isinstance(p, str) else f"<{int(i)}>"     # an id past the tokenizer (T5 pads its vocabulary)

    def piece_id(self, piece: str) -> int:
        """The id of a piece as `piece` writes it, "<1234>" included (<unk>'s for one it lacks)."""
        if (m := re.fullmatch(r"<(\d+)>", piece)) and self.hf.convert_tokens_to_ids(piece) in (None, self.unk_id):
            return int(m.group(1))
        i = self.hf.convert_tokens_to_ids(piece)
        return self.unk_id if i is None else int(i)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def word_pieces(self, words: list[str], target: bool = False) -> tuple[list[int], list[int]]:
        """The piece ids of `words` joined by spaces (nothing added) and, for each piece, the
        index of the word it belongs to: from the tokenizer's character offsets where it has
        them (a fast tokenizer), else word by word (Marian's and M2M100's sentencepiece);
        `target`: the decoder's side."""
        import bisect
        text = " ".join(words)
        if getattr(self.hf, "is_fast", False):
            side = {"text_target": text} if target else {"text": text}
            enc = self.hf(**side, add_special_tokens=False, return_offsets_mapping=True)
            ends, pos = [], 0
            for w in words:
                pos += len(w)
                ends.append(pos)
                pos += 1
            owner = [min(bisect.bisect_right(ends, start), len(words) - 1) for start, _ in enc["offset_mapping"]]
            return list(enc["input_ids"]), owner
        ids, owner = [], []
        for k, w in enumerate(words):
            piece_ids = self.encode(w, target)
            ids += piece_ids
            owner += [k] * len(piece_ids)
        return ids, owner

    def unknown_characters(self, text: str, target: bool = False) -> list[str]:
        if self.unk_id is None:            # a byte-level tokenizer spells everything
            return []
        seen = dict.fromkeys(ch for ch in text if not ch.isspace())
        return [ch for ch in seen if self.unk_id in self.encode(ch, target)]
