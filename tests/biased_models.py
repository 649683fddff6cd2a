"""The models the lens, patching and contrastive tests check against transformers' own forward:
fresh copies (the shared fixtures stay untouched) with every bias, norm weight and norm bias
random and nonzero, Marian's final_logits_bias included (a buffer, not a parameter), so that no
term of a family's output head (its final norm, scaling and bias) can hide behind a zero."""
from __future__ import annotations

import copy

import torch

from s2s.checkpoint import load_translator

HUB = ("marian", "t5", "m2m100")


def randomise(model: torch.nn.Module, seed: int) -> None:
    """Every bias, 1-D weight (a norm's gamma) and final_logits_bias random, nonzero, seeded."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in [*model.named_parameters(), *model.named_buffers()]:
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "bias" or leaf == "final_logits_bias":
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif leaf == "weight" and p.dim() == 1:
                p.copy_(1 + 0.4 * torch.randn(p.shape, generator=g))


def biased(untrained_translators, hub_models, dtype: torch.dtype = torch.float32) -> dict:
    """{name: Translator}: ours (with and without the pointer), a recurrent one with the pointer
    and one without, the three hub families, all on the CPU in `dtype` and randomised (float64:
    differences of a random tiny model's log-probs are small enough for float32 to blur)."""
    out = {name: copy.deepcopy(untrained_translators[key]) for name, key in
           (("ours", "transformer"), ("ours-copy", "transformer-copy"), ("lstm-copy", "copy"), ("dot", "dot"))}
    out.update({name: load_translator(hub_models[name], device="cpu") for name in HUB})
    for seed, tr in enumerate(out.values()):
        tr.model.cpu().to(dtype)
        randomise(tr.model, seed)
        tr.model.eval()          # a recurrent model's decoding weights are cached: recomputed
    return out


def shipped(dtype: torch.dtype = torch.float32):
    """The shipped Transformer (copying through its pointer), its own trained weights, on the CPU in `dtype`."""
    tr = load_translator("en-fr-transformer", device="cpu")
    tr.model.to(dtype).eval()
    return tr


def hub_parts(tr):
    """(encoder layers, decoder layers, the head written out from the family's own modules):
    head(h) = what the family's forward does to its decoder's last layer output."""
    hf = tr.model.hf
    if hasattr(getattr(hf, "encoder", None), "block"):                        # T5
        scale = hf.config.d_model ** -0.5
        return (list(hf.encoder.block), list(hf.decoder.block),
                lambda h: hf.lm_head(hf.decoder.final_layer_norm(h) * scale))
    enc, dec = hf.model.encoder, hf.model.decoder
    if getattr(dec, "layer_norm", None) is not None:                           # M2M100: pre-LN, a final norm
        return list(enc.layers), list(dec.layers), lambda h: hf.lm_head(dec.layer_norm(h))
    return list(enc.layers), list(dec.layers), lambda h: hf.lm_head(h) + hf.final_logits_bias   # Marian


def main_tensor(output):
    return output[0] if isinstance(output, tuple) else output
