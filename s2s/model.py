"""The encoder-decoder: a bidirectional recurrent encoder and an attentional decoder.

Encoder (Sutskever et al. 2014, Cho et al. 2014, bidirectional as in Bahdanau et al. 2015):
    h_i = [h_fwd_i ; h_bwd_i],  i = 1..m

Decoder, one step j (Luong et al. 2015 with input feeding):
    s_j      = Cell([E y_{j-1} ; h~_{j-1}], s_{j-1})      the recurrent state
    c_j      = sum_i alpha_ij h_i                          attention context (see attention.py)
    h~_j     = tanh(W_c [c_j ; s_j])                       context combined with the state
    p(y_j|.) = softmax(E h~_j + b)                         output layer tied to the embedding

h~_j is fed to the next step, so the decoder knows what it attended to before.

With `copy` (a pointer-generator, See et al. 2017), an attention model can also copy a
source piece: the attention weights double as a distribution over the source pieces,

    p_gen_j  = sigmoid(w_g [c_j ; s_j] + b_g)                  how much to generate
    p(y_j|.) = p_gen_j softmax(E h~_j + b)_y + (1 - p_gen_j) sum_{i: x_i = y} alpha_ij

so a name the vocabulary spells in rare pieces ("Ł" "u" "k" "as" "z") is copied piece by
piece where attention points, instead of being generated from a handful of examples.
Copying a name of many pieces means knowing where one is in it. Content alone does not say
it (the decoder skipped and repeated pieces: "Húnbbjbjörg"), so a copying model also gets
a location cue, after CopyNet's selective read (Gu et al. 2016): the source position right
after the piece just written, where the decoder read it, gets a bonus, by a gate read
from the state,

    e_ij <- e_ij + g_j alpha_{j-1,i-1} 1[x_{i-1} = y_{j-1}],   g_j = w_n s_j + b_n   (0 at the start)

and the decoder learns to move along the source one piece at a time while it copies.
Weighting by alpha_{j-1} picks the occurrence it copied from when a piece repeats ("8 8 2").
So a copying model's state carries alpha_{j-1}: (s, c, alpha) for an LSTM, (s, alpha) else. Such a
model's "logits" are these log-probabilities (already normalised, so every softmax and
log-softmax downstream leaves them unchanged). Without attention there is nothing to
point with: the fixed-vector model cannot copy.
With attention `none` (the RNNencdec baseline of Bahdanau et al.), c_j is the same
fixed vector at every step: the final encoder state [h_fwd_m ; h_bwd_1]. Everything
else is identical, so the two differ only in what the decoder can see of the source.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .attention import ATTENTIONS, attend, make_scorer
from .interface import ConfigBase, Memory, State, Step, select_rows
from .lstm import LSTMWeights, input_gate_table, lstm_step
from .tokenizer import BOS, EOS, PAD

CELLS = {"rnn": (nn.RNN, nn.RNNCell), "gru": (nn.GRU, nn.GRUCell), "lstm": (nn.LSTM, nn.LSTMCell)}

# State: (h,) for RNN/GRU, (h, c) for LSTM; a copying model adds alpha_{j-1}


@dataclass
class ModelConfig(ConfigBase):
    vocab_size: int
    emb_dim: int = 256
    hidden: int = 256          # decoder state size; the encoder has hidden/2 per direction
    attn_dim: int = 256
    cell: str = "lstm"
    attention: str = "additive"
    dropout: float = 0.2
    copy: bool = False         # pointer-generator: copy source pieces through attention

    def __post_init__(self):
        if self.cell not in CELLS:
            raise ValueError(f"unknown cell {self.cell!r}; choose one of {', '.join(CELLS)}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; choose one of {', '.join(ATTENTIONS)}")
        if self.copy and self.attention == "none":
            raise ValueError("copy needs attention: a model without it has nothing to point with")
        if self.hidden % 2:
            raise ValueError("hidden must be even (it is split over the two encoder directions)")



@dataclass
class DecodeWeights:
    """Transposed copies of the decoder's weights, for decode_step."""
    decoder: LSTMWeights | None     # None for RNN/GRU decoders (they use their module)
    embed_gates: torch.Tensor | None   # (V, 4 * H): each token's embedding through the LSTM's W_x, plus b
    combine: torch.Tensor           # (2H, E)
    output: torch.Tensor            # (OUTPUT_CHUNKS, E, V / OUTPUT_CHUNKS) the tied output weight, sliced
    output_bias: torch.Tensor       # (OUTPUT_CHUNKS, 1, V / OUTPUT_CHUNKS)


OUTPUT_CHUNKS = 4


class Seq2Seq(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        H, E = cfg.hidden, cfg.emb_dim
        rnn, cell = CELLS[cfg.cell]
        self.embed = nn.Embedding(cfg.vocab_size, E, padding_idx=PAD)   # joint vocabulary: shared
        self.encoder = rnn(E, H // 2, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(H, H)                                      # s_0 from the summary
        self.bridge_c = nn.Linear(H, H) if cfg.cell == "lstm" else None
        self.decoder = cell(E + E, H)                                      # [E y ; h~] -> s
        self.scorer = None if cfg.attention == "none" else make_scorer(cfg.attention, H, H, cfg.attn_dim)
        self.combine = nn.Linear(H + H, E, bias=False)                     # W_c [c ; s]
        self.out_bias = nn.Parameter(torch.zeros(cfg.vocab_size))          # output weight = embedding
        self.copy_gate = nn.Linear(H + H, 1) if cfg.copy else None          # p_gen from [c ; s]
        self.next_piece = nn.Linear(H, 1) if cfg.copy else None             # g_j, the location cue
        if self.next_piece is not None:
            nn.init.zeros_(self.next_piece.weight), nn.init.zeros_(self.next_piece.bias)
        self.drop = nn.Dropout(cfg.dropout)
        self._decode_cache: DecodeWeights | None = None

    @property
    def is_lstm(self) -> bool:
        return self.cfg.cell == "lstm"

    # ------------------------------------------------------------ encoder
    def encode(self, src: torch.Tensor, src_len: torch.Tensor, embedded: torch.Tensor | None = None
               ) -> tuple[Memory, State]:
        """(B, S) padded source ids -> Memory and the decoder's initial state s_0. `embedded`
        (B, S, E), if given, is read instead of the ids' embeddings E x_i (attributions
        differentiate through it; s2s.attributions)."""
        x = self.drop(self.embed(src) if embedded is None else embedded)
        if bool((src_len.to(src.device) == src.size(1)).all()):
            states, final = self.encoder(x)      # no padding: nothing to pack
        else:
            packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
            out, final = self.encoder(packed)
            states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        h_n = final[0] if self.is_lstm else final          # (2, B, H/2): forward, backward
        summary = torch.cat([h_n[0], h_n[1]], dim=-1)
        s0 = torch.tanh(self.bridge(summary))
        if self.is_lstm:
            c_n = final[1]
            state: State = (s0, self.bridge_c(torch.cat([c_n[0], c_n[1]], dim=-1)))
        else:
            state = (s0,)
        keys = None if self.scorer is None else self.scorer.keys(states)
        return Memory(states, keys, src != PAD, summary, src=src), self.with_read(state, states)

    def with_read(self, state: State, states: torch.Tensor) -> State:
        """The initial state s_0, plus, for a copying model, alpha_0 = 0 (nothing read yet)."""
        if self.next_piece is None:
            return state
        return state + (states.new_zeros(states.shape[:2]),)

    def recurrent(self, state: State) -> State:
        """The cell's own part of a state: (s,) or (s, c), without a copying model's alpha_{j-1}."""
        return state[:2] if self.is_lstm else state[:1]

    # ------------------------------------------------------------ decoder
    def initial_feed(self, batch: int) -> torch.Tensor:
        return self.embed.weight.new_zeros(batch, self.cfg.emb_dim)

    def step(self, y_prev: torch.Tensor, state: State, feed: torch.Tensor, memory: Memory,
             with_logits: bool = True, alpha: torch.Tensor | None = None) -> Step:
        """One decoder step j (see the module docstring for the equations).

        `alpha` (B, S), if given, replaces the attention weights alpha_j the scorer would
        compute (a counterfactual: what the step outputs had it read the source this way;
        s2s/counterfactual.py). Everything else, the copy distribution included, uses it as is."""
        x = self.drop(torch.cat([self.embed(y_prev), feed], dim=-1))
        read = state[-1] if self.next_piece is not None else None         # alpha_{j-1}
        if self.is_lstm:
            state = self.decoder(x, state[:2])
        else:
            state = (self.decoder(x, state[0]),)
        s = state[0]
        context, alpha = self.read_source(s, memory, alpha, y_prev, read)
        if self.next_piece is not None:
            state = state + (alpha,)
        feed = torch.tanh(self.combine(torch.cat([context, s], dim=-1)))
        logits = self.output(self.drop(feed)) if with_logits else feed
        if with_logits and self.copy_gate is not None:
            logits = self.point(logits, alpha, memory.src, context, s)
        return Step(logits, state, feed, alpha, context)

    def point(self, logits: torch.Tensor, alpha: torch.Tensor, src: torch.Tensor, context: torch.Tensor,
              s: torch.Tensor) -> torch.Tensor:
        """log( p_gen softmax(logits) + (1 - p_gen) sum_{i: x_i = y} alpha_i ), for
        logits (..., V), alpha (..., S), src (B, S), context and s (..., H).

        Only real pieces are copied: the source's closing </s> (and padding) is not a word to
        copy, and copying it would end the output wherever attention rests on the source's
        end. Their share is dropped and the distribution renormalised."""
        p_gen = torch.sigmoid(self.copy_gate(torch.cat([context, s], dim=-1)))        # (..., 1)
        return copy_mix(logits, p_gen, alpha, src)

    def read_source(self, s: torch.Tensor, memory: Memory, alpha: torch.Tensor | None = None,
                    y_prev: torch.Tensor | None = None, read: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(c_j, alpha_j): attention over the encoder states, or the fixed summary without it.
        A given `alpha` (B, S) is used instead of the scorer's: c_j = sum_i alpha_ij h_i.
        A copying model adds its location cue for the piece `y_prev` (B,) just written,
        read with attention `read` (B, S), alpha_{j-1}."""
        if self.scorer is None:
            return memory.summary, None
        if alpha is not None:
            return torch.bmm(alpha.unsqueeze(1).to(memory.states.dtype), memory.states).squeeze(1), alpha
        bias = memory.mask_bias
        if self.next_piece is not None and y_prev is not None and read is not None:
            bias = bias + self.next_piece(s) * self.follows(y_prev, memory.src, read)
        return attend(self.scorer, memory.keys, memory.states, bias, s)

    @staticmethod
    def follows(y_prev: torch.Tensor, src: torch.Tensor, read: torch.Tensor) -> torch.Tensor:
        """(B, S) alpha_{j-1,i-1} 1[x_{i-1} = y_{j-1}]: how much the decoder read the piece it
        just wrote from the position before i (`read` is alpha_{j-1}); 0 after special
        tokens (BOS, EOS, padding)."""
        before = F.pad(src[:, :-1], (1, 0), value=PAD)
        match = (before == y_prev.unsqueeze(1)) & (y_prev > EOS).unsqueeze(1)
        return match.to(read.dtype) * F.pad(read[:, :-1], (1, 0))

    # ------------------------------------------------------------ decoding
    def decode_step(self, y_prev: torch.Tensor, state: State, feed: torch.Tensor, memory: Memory) -> Step:
        """`step` for inference (no dropout, no gradients), about twice as fast at batch 1.

        The same equations, but with weights transposed once (x @ W reads memory in order,
        which matters for the 8000 x 256 output layer) and the LSTM written out (lstm.py), its
        gates' embedding part precomputed for every token (an 8000 x 1024 table, 33 MB)."""
        w = self._decode_weights()
        read = state[-1] if self.next_piece is not None else None
        if w.decoder is not None:
            # the embedding's share of the gates is a table lookup: one product less per step
            x_gates = F.embedding(y_prev, w.embed_gates).view(-1, 4, w.decoder.hidden).transpose(0, 1)
            st = lstm_step(feed, state[0], state[1], w.decoder, x_gates=x_gates)
            state = (st.hidden, st.cell)
        else:
            x = torch.cat([F.embedding(y_prev, self.embed.weight), feed], dim=-1)
            state = (self.decoder(x, state[0]),)
        s = state[0]
        context, alpha = self.read_source(s, memory, y_prev=y_prev, read=read)
        if read is not None:
            state = state + (alpha,)
        feed = torch.mm(torch.cat([context, s], dim=-1), w.combine).tanh_()
        logits = self._decode_output(feed, w)
        if self.copy_gate is not None:
            logits = self.point(logits, alpha, memory.src, context, s)
        return Step(logits, state, feed, alpha, context)

    select_state = staticmethod(select_rows)     # beam search: a state's rows, kept or repeated

    def forced_steps(self, tgt_in: torch.Tensor, memory: Memory, state: State) -> list[Step]:
        """Teacher forcing for inference: decode_step at each position of `tgt_in` (B, T), fed
        the reference's previous token; a recurrence has no shortcut through the positions."""
        feed, steps = self.initial_feed(tgt_in.size(0)), []
        for j in range(tgt_in.size(1)):
            st = self.decode_step(tgt_in[:, j], state, feed, memory)
            state, feed = st.state, st.feed
            steps.append(st)
        return steps

    def constraints(self) -> None:
        """No generation config: every token may be chosen."""
        return None

    def _decode_output(self, feed: torch.Tensor, w: "DecodeWeights") -> torch.Tensor:
        """E h~ + b, as OUTPUT_CHUNKS independent products over slices of the vocabulary: one
        (B x E) @ (E x V) product for a few rows is limited by reading the 8 MB weight, and a
        batched product over slices lets two cores read it at once (1.4-1.7x faster here)."""
        k, B = w.output.size(0), feed.size(0)
        logits = torch.baddbmm(w.output_bias, feed.expand(k, B, feed.size(1)), w.output)   # (k, B, V/k)
        return logits.transpose(0, 1).reshape(B, -1)[:, :self.cfg.vocab_size]

    def _decode_weights(self) -> "DecodeWeights":
        if self._decode_cache is None:   # built on first use after loading; train() drops it
            with torch.no_grad():
                V, k = self.cfg.vocab_size, OUTPUT_CHUNKS
                pad = -V % k                       # pad the vocabulary to k equal slices
                weight = F.pad(self.embed.weight, (0, 0, 0, pad))              # (V + pad, E)
                bias = F.pad(self.out_bias, (0, pad))
                lstm = LSTMWeights.of_cell(self.decoder) if self.is_lstm else None
                self._decode_cache = DecodeWeights(
                    lstm, None if lstm is None else input_gate_table(lstm, self.embed.weight).view(V, -1),
                    self.combine.weight.t().contiguous(),
                    weight.view(k, -1, weight.size(1)).transpose(1, 2).contiguous(),   # (k, E, V/k)
                    bias.view(k, 1, -1).contiguous())
        return self._decode_cache

    def train(self, mode: bool = True) -> "Seq2Seq":
        self._decode_cache = None
        return super().train(mode)

    def output(self, h: torch.Tensor) -> torch.Tensor:
        """Logits E h~ + b, with the output weight tied to the input embedding."""
        return F.linear(h, self.embed.weight, self.out_bias)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: (B, T) gold previous tokens -> logits (B, T, V), attention (B, T, S)."""
        memory, state = self.encode(src, src_len)
        feed = self.initial_feed(src.size(0))
        feeds, alphas, contexts, states = [], [], [], []
        for j in range(tgt_in.size(1)):
            st = self.step(tgt_in[:, j], state, feed, memory, with_logits=False)
            state, feed = st.state, st.feed
            feeds.append(feed)
            alphas.append(st.alpha)
            contexts.append(st.context)
            states.append(state[0])
        # one big output matmul after the loop is much faster than one per step
        logits = self.output(self.drop(torch.stack(feeds, dim=1)))
        attn = None if self.scorer is None else torch.stack(alphas, dim=1)
        if self.copy_gate is not None:
            logits = self.point(logits, attn, memory.src, torch.stack(contexts, 1), torch.stack(states, 1))
        return logits, attn


def copy_mix(logits: torch.Tensor, p_gen: torch.Tensor, alpha: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """log( p_gen softmax(logits)_y + (1 - p_gen) sum_{i: x_i = y, x_i a real piece} alpha_i ),
    renormalised; logits (..., V), p_gen (..., 1), alpha (..., S), src (B, S). Shared by the
    recurrent models and the Transformer."""
    p = p_gen * F.softmax(logits.float(), dim=-1)
    index = src.view(src.size(0), *([1] * (alpha.dim() - 2)), src.size(1)).expand_as(alpha)
    copied = (1 - p_gen) * alpha.float() * (index > EOS)
    p = p.scatter_add(-1, index, copied)
    return (p / p.sum(-1, keepdim=True)).clamp_min(1e-12).log()


def sequence_loss(logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float = 0.0,
                  reduction: str = "sum") -> torch.Tensor:
    """Cross-entropy -sum_j log p(y_j | y_<j, x) over non-pad target tokens."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1),
                           ignore_index=PAD, label_smoothing=label_smoothing, reduction=reduction)


__all__ = ["ModelConfig", "Seq2Seq", "Memory", "Step", "copy_mix", "sequence_loss", "BOS", "EOS", "PAD", "CELLS"]
