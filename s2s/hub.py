"""Hugging Face encoder-decoders (Marian / opus-mt, NLLB, M2M100, mBART, T5, BART) as models of s2s.decode.

A `transformers` AutoModelForSeq2SeqLM is wrapped in `HubSeq2Seq`, which speaks the shipped
models' decoding interface (encode, initial_feed, decode_step, forced_steps), so greedy, beam
search, sampling and forced decoding in s2s.decode drive it one step at a time with its own
key/value cache, and return the same Decoding: tokens, log-probs, and every layer and head of
its attention. `generate()` is never the decoder; it is only the reference the tests and
`python -m s2s.bench` compare with.

Where a model comes from (`load_hub`):
    hf:NAME        a hub name ("hf:Helsinki-NLP/opus-mt-en-fr"), downloaded once into
                   huggingface-hub's usual cache (~/.cache/huggingface, HF_HOME moves it)
    FOLDER         a folder written by `save_pretrained` (model and tokenizer)
Never `trust_remote_code`: a hub repository's own Python never runs here. Weights come from
safetensors where the repository has them; pickled weights (pytorch_model.bin) go only
through torch's weights-only loader, which refuses anything but tensors.

Attention is computed "eager" (the plain softmax(QK^T/sqrt(d_k)) V), since the fused kernels
do not return the weights. On CUDA the weights are bf16 (fp16 where bf16 is missing); on the
CPU fp32.

Which extra models the app offers is the operator's choice (`offered_models`): the
S2S_HUB_MODELS environment variable lists them, and S2S_ALLOW_ANY_MODEL=1 adds a box where a
user may name any model, for one's own laptop, never a shared classroom server: there a
student could otherwise make it download gigabytes or read any folder of the server.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .hub_config import (  # noqa: F401  (the registry reads HubConfig here)
    HubConfig,
    count_parameters,
    describe_config,
    own_output_cap,
    parameters_text,
)

if TYPE_CHECKING:
    import torch

    from .loaded import Translator

HUB_PREFIX = "hf:"
ENV_MODELS = "S2S_HUB_MODELS"          # the operator's list: "hf:NAME, /path/to/folder, ..."
ENV_ANY = "S2S_ALLOW_ANY_MODEL"        # "1": the app also takes any model a user names

# English and French as each multilingual tokenizer spells them (NLLB, mBART-50, M2M100).
LANGUAGE_CODES = (("eng_Latn", "fra_Latn"), ("en_XX", "fr_XX"), ("en", "fr"))


def is_hub_spec(spec: str | Path) -> bool:
    return str(spec).startswith(HUB_PREFIX)


def is_pretrained_folder(path: str | Path) -> bool:
    """A folder written by `save_pretrained`: a config.json with a `model_type` (a shipped
    checkpoint's config.json has `kind` and `model` instead)."""
    import json
    f = Path(path) / "config.json"
    try:
        config = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "model_type" in config and "kind" not in config


def offered_models(environ: dict | None = None) -> list[str]:
    """The hub models the operator lists in S2S_HUB_MODELS (commas or newlines between them), in order."""
    raw = (environ if environ is not None else os.environ).get(ENV_MODELS, "")
    seen: dict[str, None] = {}
    for part in raw.replace("\n", ",").split(","):
        if part.strip():
            seen.setdefault(part.strip(), None)
    return list(seen)


def any_model_allowed(environ: dict | None = None) -> bool:
    """Whether the operator lets users name any model (S2S_ALLOW_ANY_MODEL=1)."""
    return (environ if environ is not None else os.environ).get(ENV_ANY, "").strip().lower() in ("1", "true", "yes")


MODEL_HELP = ("a shipped checkpoint (checkpoints/en-fr-additive, or its name), a folder written by save_pretrained, "
              "or hf:NAME, a Hugging Face hub model (downloaded once into its cache)")


def add_model_options(p) -> None:
    """The options of a command that loads a Hugging Face model: its languages and task prefix."""
    p.add_argument("--source-lang", help="a multilingual hub model's source language code, as its tokenizer "
                                         "writes it (eng_Latn, en_XX, en; default English)")
    p.add_argument("--target-lang", help="its target language code (fra_Latn, fr_XX, fr; default French)")
    p.add_argument("--prefix", help="a T5-style task prefix before every source (default: the model's own, if its "
                                    "config names one)")


def model_options(a) -> dict:
    """add_model_options' values, for checkpoint.load_translator."""
    return {"source_lang": a.source_lang, "target_lang": a.target_lang, "prefix": a.prefix}


def display_name(spec: str) -> str:
    """How a model is named on a page: the hub name, or the folder's name."""
    return spec[len(HUB_PREFIX):] if is_hub_spec(spec) else Path(spec).name


class HubError(RuntimeError):
    pass


MULTILINGUAL = ("m2m_100", "mbart", "nllb-moe")     # model types that translate between many languages


def translates_english_to_french(spec: str, model: dict) -> bool:
    """Whether a hub model (its spec and registry row) can translate English to French, from
    what is known without loading it: its config (a T5 task, a multilingual type), or its name
    (opus-mt-en-fr, nllb-…, m2m100_…, mbart-…-many-to-many)."""
    name = spec.lower()
    return (model.get("languages") == "en→fr" or model.get("model_type") in MULTILINGUAL
            or "en-fr" in name or any(k in name for k in ("nllb", "m2m100", "mbart-large-50-many")))


def registry_row(spec: str) -> tuple[str, dict]:
    """(description, model dict) of a hub model for the registry, from its config.json where
    this machine has it (a folder, or huggingface-hub's cache): nothing is downloaded and no
    weights are read. A hub model not downloaded yet says so."""
    import json
    name, local = _source(spec)
    if local:
        f: Path | None = Path(name) / "config.json"
        if not Path(name).is_dir():
            raise HubError(f"{name}: folder does not exist")
    else:
        from huggingface_hub import try_to_load_from_cache
        cached = try_to_load_from_cache(name, "config.json")
        f = Path(cached) if isinstance(cached, str) else None
    if f is None:
        return (f"{name}: a Hugging Face hub model, downloaded when first chosen",
                {"arch": "transformer", "attention": "scaled-dot", "hub": True})
    try:
        config = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HubError(f"{name}: config.json cannot be read ({e})") from None
    cfg = describe_config(config)
    if "translation_en_to_fr" in (config.get("task_specific_params") or {}):
        cfg.languages = "en→fr"
    model = cfg.to_dict()
    n = _parameters(f.parent / "model.safetensors", cfg.model_type)
    if n:
        model["parameters"] = n
    size = f", {parameters_text(n)}" if n else ""
    return (f"{display_name(spec)}: {cfg.model_type}, {cfg.encoder_layers}+{cfg.decoder_layers} layers × "
            f"{cfg.heads} heads, d = {cfg.d_model}{size}" + ("" if local else " (Hugging Face hub)"), model)


def _parameters(weights: Path, model_type: str) -> int | None:
    """The model's parameter count (count_parameters) from its safetensors file's header alone
    (no weights read; tied weights are stored once). None without such a file."""
    if not weights.is_file():
        return None
    from safetensors import safe_open
    try:
        with safe_open(str(weights), "pt") as f:
            return count_parameters(((key, f.get_slice(key).get_shape()) for key in f.keys()), model_type)
    except Exception:        # a corrupt file: loading it will say so
        return None


def loaded_parameters(hf_model) -> int:
    """count_parameters of a loaded transformers model: its state dict (parameters and saved
    buffers), each stored tensor once (tied embeddings are one tensor under several names)."""
    seen: dict[tuple[int, tuple], tuple[str, tuple]] = {}
    for name, t in hf_model.state_dict().items():
        seen.setdefault((t.data_ptr(), tuple(t.shape)), (name, tuple(t.shape)))
    return count_parameters(seen.values(), hf_model.config.model_type)


def _source(spec: str | Path) -> tuple[str, bool]:
    """(what from_pretrained reads, whether it is a local folder)."""
    s = str(spec)
    if is_hub_spec(s):
        name = s[len(HUB_PREFIX):].strip()
        if not _REPO_ID.fullmatch(name) or ".." in name:
            raise HubError(f"{s!r} is not a hub model name (hf:OWNER/NAME)")
        return name, False
    return s, True


_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")    # huggingface-hub's repo ids


def _explain(e: Exception, name: str, local: bool) -> str:
    """One line for a failed download or load, from what transformers / huggingface-hub raised."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    low = str(e).lower()
    if local:
        return f"{name}: cannot be read as a saved model ({msg})"
    if "offline" in low or "connect" in low or "couldn't connect" in low or "cached files" in low:
        return (f"{name}: the Hugging Face hub cannot be reached and the model is not in the local cache "
                "(offline? download it once where the hub is reachable)")
    if "not a valid model identifier" in low or "repository not found" in low or "404" in low:
        return f"{name}: no such model on the Hugging Face hub"
    return f"{name}: cannot be loaded ({msg})"


def load_config(spec: str | Path):
    """The model's transformers config, checked to be an encoder-decoder that generates text."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
    name, local = _source(spec)
    if local and not Path(name).is_dir():
        raise HubError(f"{name}: folder does not exist")
    try:
        config = AutoConfig.from_pretrained(name, trust_remote_code=False)
    except Exception as e:       # OSError, ValueError, huggingface-hub's HTTP errors: all one line
        raise HubError(_explain(e, name, local)) from None
    if (not getattr(config, "is_encoder_decoder", False)
            or config.model_type not in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES):
        raise HubError(f"{name}: not an encoder-decoder that translates (model type {config.model_type!r}); "
                       "this app shows sequence-to-sequence models such as Marian, NLLB, M2M100, mBART, T5 or BART")
    return config


def _language_pair(hf) -> tuple[str, str] | None:
    """A multilingual tokenizer's codes for English and French; None for a one-pair tokenizer."""
    if not hasattr(hf, "src_lang"):
        return None
    for en, fr in LANGUAGE_CODES:
        try:
            ids = [_language_id(hf, en), _language_id(hf, fr)]
        except (KeyError, ValueError, TypeError):
            continue
        if hf.unk_token_id not in ids and None not in ids:
            return en, fr
    return None


def _language_id(hf, code: str) -> int:
    """The token id of a language code (M2M100 writes "fr" as the token "__fr__")."""
    if hasattr(hf, "get_lang_id"):
        try:
            return int(hf.get_lang_id(code))
        except KeyError:
            return hf.unk_token_id
    i = hf.convert_tokens_to_ids(code)
    return hf.unk_token_id if i is None else int(i)


def load_hub(spec: str | Path, device: torch.device | str | None = None, source_lang: str | None = None,
             target_lang: str | None = None, prefix: str | None = None, dtype: torch.dtype | None = None) -> Translator:
    """Load a hub model (hf:NAME) or a save_pretrained folder as a Translator, or raise HubError
    with one line saying what is wrong. `source_lang` / `target_lang`: a multilingual model's
    language codes (default English to French); `prefix`: a T5-style task prefix (default: the
    config's own translation_en_to_fr prefix, if it has one)."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from .loaded import Translator, default_device
    from .tokenizer import HubTokenizer

    hf_logging.disable_progress_bar()        # "Loading weights" bars: noise on a command's stderr
    config = load_config(spec)
    name, local = _source(spec)
    try:
        hf_tok = AutoTokenizer.from_pretrained(name, trust_remote_code=False)
    except Exception as e:
        raise HubError(f"{name}: its tokenizer cannot be loaded "
                       f"({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__})") from None
    device = torch.device(device) if device is not None else default_device()
    if dtype is None:
        dtype = torch.float32 if device.type != "cuda" else (
            torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    try:
        hf_model = AutoModelForSeq2SeqLM.from_pretrained(name, config=config, attn_implementation="eager",
                                                         dtype=dtype, trust_remote_code=False)
    except Exception as e:
        raise HubError(_explain(e, name, local)) from None
    hf_model.to(device).eval()

    gen = hf_model.generation_config
    start = gen.decoder_start_token_id if gen.decoder_start_token_id is not None else config.decoder_start_token_id
    eos = gen.eos_token_id if gen.eos_token_id is not None else config.eos_token_id
    eos = eos[0] if isinstance(eos, (list, tuple)) else eos
    pad = gen.pad_token_id if gen.pad_token_id is not None else config.pad_token_id
    if start is None or eos is None:
        raise HubError(f"{name}: its config names no decoder start or end token")
    pair = _language_pair(hf_tok)
    src_lang = source_lang or (pair[0] if pair else None)
    tgt_lang = target_lang or (pair[1] if pair else None)
    if (source_lang or target_lang) and pair is None:
        raise HubError(f"{name}: not a multilingual model; it takes no --source-lang / --target-lang")
    task = (getattr(config, "task_specific_params", None) or {}).get("translation_en_to_fr", {})
    codes = [_language_id(hf_tok, c) for c in (src_lang, tgt_lang) if c]
    if hf_tok.unk_token_id is not None and hf_tok.unk_token_id in codes:
        raise HubError(f"{name}: the tokenizer has no language code "
                       f"{(src_lang if codes[0] == hf_tok.unk_token_id else tgt_lang)!r}")
    tok = HubTokenizer(hf_tok, start, eos, pad if pad is not None else eos,
                       prefix=task.get("prefix", "") if prefix is None else prefix,
                       source_lang=src_lang, target_lang=tgt_lang, hidden=codes)
    forced_bos = codes[-1] if tgt_lang else gen.forced_bos_token_id
    cfg = describe_config(config)
    cfg.max_new_tokens = own_output_cap(gen)         # honoured by every search, page and command alike
    cfg.languages = (f"{src_lang}→{tgt_lang}" if pair or source_lang else
                     "en→fr" if task or "en-fr" in name.lower() else "")
    from .hub_model import HubSeq2Seq
    model = HubSeq2Seq(hf_model, cfg, tok, forced_bos=forced_bos)
    label = display_name(str(spec))
    n_params = loaded_parameters(hf_model)      # the registry's count (registry_row), from the same rule
    where = f"the folder {name}" if local else "the Hugging Face hub"
    description = (f"{label}: {config.model_type} from {where}, {cfg.encoder_layers}+{cfg.decoder_layers} layers × "
                   f"{cfg.heads} heads, d = {cfg.d_model}, {parameters_text(n_params)}"
                   + (f", {cfg.languages}" if cfg.languages else ""))
    tr_config = {"name": label, "kind": "translation", "description": description, "hub": str(spec),
                 "parameters": n_params, "model": cfg.to_dict()}
    return Translator(label, Path(name) if local else Path(HUB_PREFIX + name), model, tok, tr_config, {})

