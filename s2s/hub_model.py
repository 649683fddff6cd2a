"""The adapter that makes a transformers encoder-decoder a model of s2s.decode (loading: hub.py).

s2s.decode's loops call encode once, then decode_step once per output token, exactly as for
the shipped models; the adapter runs the Hugging Face model on one new token with its
key/value cache (EncoderDecoderCache: the decoder's self-attention keys and values grow by one
position a step, the cross-attention ones are computed at the first step and reused), and
returns the step's logits with every layer and head of its attention.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput

from .hooks import attached
from .hub_config import HubConfig, beyond_positions
from .interface import Constraints, Memory, State, Step
from .text import InputError


def unwritable_ids(hf_tokenizer, rows: int) -> list[int]:
    """The ids below `rows` (the model's output rows) that are no piece of its tokenizer: an
    embedding padded past the vocabulary (T5's 32,128 rows for 32,100 pieces, NLLB's, a Marian
    whose vocab.json is shorter than its embedding). Writing one ends a decoding in
    sentencepiece's "IndexError: piece id is out of range", or in <unk>. The ids below
    len(tokenizer) are its pieces; past it, an id is one only where the tokenizer names it
    something other than <unk> (M2M100 numbers its language codes after its pieces)."""
    out = []
    for i in range(len(hf_tokenizer), rows):
        try:
            token = hf_tokenizer.convert_ids_to_tokens(i)
        except Exception:       # IndexError (sentencepiece), KeyError (a vocab.json's dict)
            token = None
        if not isinstance(token, str) or token == hf_tokenizer.unk_token:
            out.append(i)
    return out


@dataclass
class HubMemory(Memory):
    """The encoder's output for the decoder, and its self-attention weights."""
    self_attention: torch.Tensor | None = None    # (B, L_enc, H, S, S)

    def select(self, index: torch.Tensor) -> "HubMemory":
        base = Memory.select(self, index)
        return HubMemory(base.states, None, base.mask, base.summary, base.mask_bias, base.src,
                         None if self.self_attention is None else self.self_attention.index_select(0, index))


class HubSeq2Seq(nn.Module):
    """A transformers encoder-decoder with s2s.decode's interface (see model.py, transformer.py).

    State: (s_j (B, d), the model's EncoderDecoderCache). Step.alpha is the last decoder
    layer's cross-attention averaged over heads (B, S), as for the shipped Transformer;
    Step.cross_attention (B, L, H, S) and Step.self_attention (B, L, H, j+1) hold every
    layer and head; Step.context is alpha's average of the encoder states, sum_i alpha_ji h_i.

    Every logits it returns (decode_step, forced_steps, forward, logits_at) has the ids that are
    no piece of its tokenizer at -inf (pieces_only): here, once, rather than in the searches'
    processors, because the searches' top-k "next tokens" lists, token ranks and reported
    log-probs are read from these logits before any processor. So no search (greedy, beam,
    sampling, batched) and no list ever proposes such an id, and every log p, searched, forced,
    attributed or a perplexity, is over the same pieces."""

    is_lstm = False

    def __init__(self, hf_model, cfg: HubConfig, tokenizer, forced_bos: int | None = None):
        super().__init__()
        self.hf = hf_model
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.forced_bos = forced_bos
        ids = unwritable_ids(tokenizer.hf, cfg.vocab_size)
        self.unwritable = torch.tensor(ids, device=next(hf_model.parameters()).device) if ids else None

    def pieces_only(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits` (..., V) with every unwritable id (unwritable_ids) at -inf, out of place
        (the gradient still flows to the others). Those rows were never a training target, so
        a trained model should give them little probability; nothing stops an untrained or
        badly converted one from giving them the most."""
        if self.unwritable is None:
            return logits
        return logits.index_fill(-1, self.unwritable.to(logits.device), float("-inf"))

    def check_positions(self, source: int, target: int) -> None:
        """InputError, one line, for a pass longer than the model's positions: the searches
        stop within them, and every caller that forces a pair checks it first; this is the
        last guard before the position embedding's IndexError."""
        reason = beyond_positions(self.cfg.max_positions, source, target)
        if reason is not None:
            raise InputError(f"{reason[0].upper()}{reason[1:]}; the model reads at most {self.cfg.max_positions} "
                             "(its position embeddings).")

    def constraints(self) -> Constraints:
        """What the model's generation config says about which token may be chosen:
        {"forced_bos", "forced_eos", "bad_words", "suppress", "begin_suppress"} (s2s.decode's processors)."""
        gen = self.hf.generation_config
        return {"forced_bos": self.forced_bos, "forced_eos": gen.forced_eos_token_id,
                "bad_words": [list(w) for w in (gen.bad_words_ids or [])],
                "suppress": list(gen.suppress_tokens or []), "begin_suppress": list(gen.begin_suppress_tokens or [])}

    def encode(self, src: torch.Tensor, src_len: torch.Tensor):
        self.check_positions(src.size(1), 0)
        mask = torch.arange(src.size(1), device=src.device)[None, :] < src_len.to(src.device)[:, None]
        out = self.hf.get_encoder()(input_ids=src, attention_mask=mask.long(), output_attentions=True,
                                    return_dict=True)
        h = out.last_hidden_state                                               # (B, S, d)
        m = mask[..., None].to(h.dtype)
        summary = (h * m).sum(1) / m.sum(1)
        memory = HubMemory(h, None, mask, summary, src=src, self_attention=torch.stack(out.attentions, 1))
        return memory, self.initial_state(src.size(0), h)

    def initial_state(self, batch: int, h: torch.Tensor):
        cache = EncoderDecoderCache(DynamicCache(config=self.hf.config), DynamicCache(config=self.hf.config))
        return (h.new_zeros(batch, self.cfg.d_model), cache)

    def initial_feed(self, batch: int) -> torch.Tensor:
        return torch.zeros(batch, 0, device=next(self.hf.parameters()).device)

    @staticmethod
    def select_state(state, index: torch.Tensor):
        """Rows `index` of the state (beam search repeats and reorders hypotheses)."""
        s, cache = state
        cache.reorder_cache(index)           # in place: the old rows are never read again
        return (s.index_select(0, index), cache)

    def _run(self, tgt_in: torch.Tensor, memory: HubMemory, cache=None):
        return self.hf(encoder_outputs=BaseModelOutput(last_hidden_state=memory.states),
                       attention_mask=memory.mask.long(), decoder_input_ids=tgt_in, past_key_values=cache,
                       use_cache=cache is not None, output_attentions=True, output_hidden_states=True,
                       return_dict=True)

    def decode_step(self, y_prev: torch.Tensor, state, feed: torch.Tensor, memory: HubMemory) -> Step:
        out = self._run(y_prev[:, None], memory, state[1])
        s = out.decoder_hidden_states[-1][:, -1]                                 # (B, d)
        cross = torch.stack(out.cross_attentions, 1)[:, :, :, -1]               # (B, L, H, S)
        alpha = cross[:, -1].float().mean(1)                                    # (B, S)
        context = torch.bmm(alpha[:, None].to(memory.states.dtype), memory.states)[:, 0]
        return Step(self.pieces_only(out.logits[:, -1]), (s, out.past_key_values), feed, alpha, context,
                    cross_attention=cross, self_attention=torch.stack(out.decoder_attentions, 1)[:, :, :, -1])

    def forced_steps(self, tgt_in: torch.Tensor, memory: HubMemory, state: State = ()) -> list[Step]:
        """Every position of a forced decoding in one pass: the Steps decode_step would return
        (`state`, the empty cache, is not needed)."""
        self.check_positions(0, tgt_in.size(1))
        out = self._run(tgt_in, memory)
        logits = self.pieces_only(out.logits)
        s = out.decoder_hidden_states[-1]                                        # (B, T, d)
        cross = torch.stack(out.cross_attentions, 1)                              # (B, L, H, T, S)
        self_w = torch.stack(out.decoder_attentions, 1)                           # (B, L, H, T, T)
        alpha = cross[:, -1].float().mean(1)                                      # (B, T, S)
        context = torch.bmm(alpha.to(memory.states.dtype), memory.states)
        feed = self.initial_feed(tgt_in.size(0))
        return [Step(logits[:, j], (s[:, j],), feed, alpha[:, j], context[:, j],
                     cross_attention=cross[:, :, :, j], self_attention=self_w[:, :, :, j, :j + 1])
                for j in range(tgt_in.size(1))]

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor,
                embedded: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing, as the shipped models' forward: (B, T) previous tokens -> logits
        (B, T, V) and the last layer's head-mean cross-attention (B, T, S). `embedded` (B, S, d),
        if given, is read instead of the ids' embeddings (the model's inputs_embeds)."""
        self.check_positions(src.size(1), tgt_in.size(1))
        mask = torch.arange(src.size(1), device=src.device)[None, :] < src_len.to(src.device)[:, None]
        ids = dict(input_ids=src) if embedded is None else dict(inputs_embeds=embedded)
        out = self.hf(**ids, attention_mask=mask.long(), decoder_input_ids=tgt_in, output_attentions=True,
                      return_dict=True)
        return self.pieces_only(out.logits), out.cross_attentions[-1].mean(1)

    def logits_at(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor, positions: torch.Tensor,
                  embedded: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher forcing scored at one position per row: the logits of row b at positions[b]
        (B, V), as forward(...)[0][b, positions[b]]. A hook on the decoder keeps only that
        position's final hidden state, so the model's own head (its lm_head, Marian's
        final_logits_bias, T5's rescaling) runs once per row rather than at every position:
        for a 60k vocabulary that head is most of the cost (s2s.attributions scores one step per row).
        The hook is attached through s2s.hooks (this thread's pass only: the model is shared), so
        it composes with the editors attached there (a head mask: s2s.hooks.knocked_out)."""
        self.check_positions(src.size(1), int(positions.max()) + 1)
        rows = torch.arange(src.size(0), device=src.device)

        def keep_positions(module, args, output):     # an editor of s2s.hooks: this thread's pass only
            if isinstance(output, tuple):
                return (output[0][rows, positions][:, None],) + output[1:]
            output.last_hidden_state = output.last_hidden_state[rows, positions][:, None]
            return output

        mask = torch.arange(src.size(1), device=src.device)[None, :] < src_len.to(src.device)[:, None]
        ids = dict(input_ids=src) if embedded is None else dict(inputs_embeds=embedded)
        with attached([(self.hf.get_decoder(), "forward", keep_positions)]):
            out = self.hf(**ids, attention_mask=mask.long(), decoder_input_ids=tgt_in[:, :int(positions.max()) + 1],
                          return_dict=True)
        return self.pieces_only(out.logits[:, 0])

    def embed(self, src: torch.Tensor) -> torch.Tensor:
        """(B, S) ids -> (B, S, d), the encoder's input embeddings as its inputs_embeds takes them,
        so that forward(..., embedded=embed(src)) is forward(src). Marian and BART scale the ids'
        embeddings by sqrt(d) in the encoder (embed_scale) and take inputs_embeds as scaled
        already; M2M100, NLLB and mBART scale inside the embedding module itself."""
        encoder = self.hf.get_encoder()
        module = encoder.get_input_embeddings()
        e = module(src)
        scale = getattr(encoder, "embed_scale", None)
        if isinstance(scale, (int, float)) and scale != 1.0 and not hasattr(module, "embed_scale"):
            e = e * scale
        return e
