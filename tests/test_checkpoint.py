import dataclasses
import json
import shutil

import pytest
import torch

from conftest import ROOT
from s2s.checkpoint import CheckpointError, list_checkpoints, load_translator, save_checkpoint
from s2s.decode import greedy
from s2s.model import Seq2Seq


def test_round_trip_fp16_gives_the_same_outputs(untrained_translators, tmp_path):
    tr = untrained_translators["additive"]
    torch.manual_seed(3)
    model = Seq2Seq(tr.model.cfg).eval()
    path = save_checkpoint(model, tr.tokenizer.path, tmp_path / "rt", "rt", "round trip")
    loaded = load_translator(path)
    assert loaded.model.cfg == model.cfg and loaded.device.type in ("cpu", "cuda")
    # weights come back as their fp16 values, in fp32
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[k].cpu(), v.half().float())
    src = torch.tensor([[5, 6, 7, 3]])
    tgt = torch.tensor([[2, 7, 6, 5]])
    with torch.no_grad():
        a, att_a = model(src, torch.tensor([4]), tgt)
        b, att_b = loaded.model(src, torch.tensor([4]), tgt)
    assert torch.allclose(a, b, atol=2e-2) and torch.allclose(att_a, att_b, atol=2e-3)
    tr_orig = type(loaded)("x", path, model, tr.tokenizer, {})
    assert greedy(loaded, "a b c").target_ids[:3] == greedy(tr_orig, "a b c").target_ids[:3]


def test_config_and_registry(untrained_translators):
    root = untrained_translators["dot"].path.parent
    rows = {r.name: r for r in list_checkpoints(root)}
    assert {"none", "dot", "general", "additive", "scaled-dot"} <= set(rows)
    assert rows["dot"].description == "untrained dot" and rows["dot"].error is None
    with pytest.raises(dataclasses.FrozenInstanceError):   # the app shares one registry between sessions
        rows["dot"].error = "changed by one session"
    cfg = json.loads((root / "dot" / "config.json").read_text())
    assert cfg["model"]["attention"] == "dot" and cfg["kind"] == "translation"


@pytest.fixture
def broken(untrained_translators, tmp_path):
    """A fresh copy of a good checkpoint, to break in each test."""
    dst = tmp_path / "broken-model"
    shutil.copytree(untrained_translators["general"].path, dst)
    return dst


def expect_error(path, match):
    with pytest.raises(CheckpointError, match=match) as e:
        load_translator(path)
    assert path.name in str(e.value)   # the message names the checkpoint


def test_missing_folder(tmp_path):
    expect_error(tmp_path / "nowhere", "does not exist")


@pytest.mark.parametrize("name,match", [("model.safetensors", "model.safetensors is missing"),
                                        ("config.json", "config.json is missing"),
                                        ("spm.model", "tokenizer spm.model is missing")])
def test_missing_file(broken, name, match):
    (broken / name).unlink()
    expect_error(broken, match)


def test_truncated_weights(broken):
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 2])
    expect_error(broken, "corrupt or truncated")


def test_garbage_weights(broken):
    (broken / "model.safetensors").write_bytes(b"\x80\x04\x95 this is a pickle, not safetensors")
    expect_error(broken, "corrupt or truncated")


def test_config_that_does_not_match_the_weights(broken):
    cfg = json.loads((broken / "config.json").read_text())
    cfg["model"]["hidden"] = 32
    (broken / "config.json").write_text(json.dumps(cfg))
    expect_error(broken, "do not match")


def test_config_with_unknown_attention_or_bad_json(broken):
    cfg = json.loads((broken / "config.json").read_text())
    cfg["model"]["attention"] = "telepathy"
    (broken / "config.json").write_text(json.dumps(cfg))
    expect_error(broken, "does not describe a model")
    (broken / "config.json").write_text("{not json")
    expect_error(broken, "not valid JSON")


def test_corrupt_tokenizer(broken):
    (broken / "spm.model").write_bytes(b"nonsense")
    expect_error(broken, "tokenizer")


def test_registry_marks_broken_checkpoints_and_keeps_the_others(broken):
    (broken / "config.json").write_text("{")
    rows = {r.name: r for r in list_checkpoints(broken.parent)}
    assert rows["broken-model"].error and "config.json" in rows["broken-model"].error
    assert list_checkpoints(broken.parent / "missing") == []


@pytest.mark.parametrize("breakage,match", [
    (lambda d: shutil.rmtree(d), "does not exist"),
    (lambda d: (d / "model.safetensors").unlink(), "model.safetensors is missing"),
    (lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:500]),
     "corrupt or truncated"),
    (lambda d: (d / "config.json").write_text("{not json"), "not valid JSON"),
    (lambda d: _edit_config(d, hidden=48), "do not match"),
    (lambda d: _edit_config(d, chars="aa"), "does not describe"),
    (lambda d: _edit_config(d, chars="abc"), "do not match"),      # a vocabulary of another size
])
def test_broken_character_checkpoints_name_themselves(tiny_charlm, tmp_path, breakage, match):
    from s2s.checkpoint import load_charlm
    dst = tmp_path / "charlm-broken"
    shutil.copytree(tiny_charlm, dst)
    breakage(dst)
    with pytest.raises(CheckpointError, match=match) as e:
        load_charlm(dst)
    assert "charlm-broken" in str(e.value)


def _edit_config(d, **model):
    cfg = json.loads((d / "config.json").read_text())
    cfg["model"].update(model)
    (d / "config.json").write_text(json.dumps(cfg))


def test_the_registry_and_the_app_glue_import_no_torch():
    """The start page lists the models while ui.warm.warm_up imports torch in the background, so
    reading the registry (and importing ui's modules, as the start page does) must not import it."""
    import subprocess
    import sys

    from conftest import ROOT
    code = ("import sys, ui.address, ui.models, ui.show, ui.warm; "
            "from s2s.checkpoint import list_checkpoints; rows = list_checkpoints(); "
            "print(len(rows), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    n, torch_imported = out.stdout.split()
    assert int(n) >= 5 and torch_imported == "False"      # the shipped checkpoints, listed torch-free


def test_shipped_metrics_record_the_models_own_kind():
    """Each shipped translation model's metrics.json names, among its training settings, the
    architecture and attention its config has (a fine-tune's flags said 'additive' for all)."""
    shipped = sorted((ROOT / "checkpoints").glob("en-fr-*"))
    assert shipped
    for d in shipped:
        model = json.loads((d / "config.json").read_text())["model"]
        train = json.loads((d / "metrics.json").read_text())["train"]
        assert train["attention"] == model["attention"], d.name
        assert train["arch"] == model.get("arch", "rnn"), d.name
        assert train["cell"] == (None if model.get("arch") == "transformer" else model["cell"]), d.name
