"""examples/knockout_from_python.py, the path from Python (issue #68, 4): run as a researcher runs
it, on the tiny Transformer, with heads knocked out; what it prints is each library instrument's
own reading under that mask (s2s.lens, s2s.contrast, s2s.patch), and it writes the three figures.
A head the model lacks is one line and exit status 2. pyproject.toml makes s2s (and only s2s,
every subpackage of it) installable with `pip install -e .`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import numpy as np

from conftest import ROOT
from s2s.checkpoint import load_translator
from s2s.contrast import explain_contrast
from s2s.decode import DecodeSettings, decode
from s2s.lens import lens
from s2s.patch import patch

SCRIPT = ROOT / "examples" / "knockout_from_python.py"
TEXT, EDIT, MASK = "a b c d", "a b e d", "cross:1.2,encoder:2.1"


def run(tmp_path, *args):
    # as an installed package would be found: the repository on the path, run from elsewhere
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=300)


def test_the_example_reads_every_instrument_of_the_knocked_out_model(transformer_zoo, tmp_path):
    model = transformer_zoo / "en-fr-transformer"
    r = run(tmp_path, "--model", str(model), "--mask", MASK, "--text", TEXT, "--edit", EDIT, "--step", "2",
            "--out", "figs")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    tr = load_translator(model)
    knocked = decode(tr, TEXT, DecodeSettings("greedy", head_mask=MASK))
    assert got["knocked_out_translation"] == knocked.translation and got["head_mask"] == MASK
    assert got["translation"] == decode(tr, TEXT, DecodeSettings("greedy")).translation
    seen = lens(tr, TEXT, target=knocked.target_ids, head_mask=MASK)
    np.testing.assert_allclose(got["lens"]["log_probs"], seen.log_probs, atol=1e-5)
    assert got["lens"]["head_mask"] == MASK
    c = got["contrast"]
    want = explain_contrast(tr, TEXT, 2, c["foil"], target=knocked.target_ids, head_mask=MASK)
    assert c["target"] == knocked.target_tokens[1] != c["foil"] and c["head_mask"] == MASK
    np.testing.assert_allclose(c["scores"], want.scores, atol=1e-5)
    p = patch(tr, TEXT, EDIT, output_ids=knocked.target_ids, head_mask=MASK)
    np.testing.assert_allclose(got["patch"]["patched"], p.patched, atol=1e-4)
    assert got["patch"]["head_mask"] == MASK
    written = sorted(f.name for f in (tmp_path / "figs").glob("*.html"))
    assert written == ["contrast.html", "lens.html", "patch.html"]
    assert all((tmp_path / "figs" / f).stat().st_size > 1000 for f in written)


def test_a_head_the_model_lacks_is_one_line(transformer_zoo, tmp_path):
    r = run(tmp_path, "--model", str(transformer_zoo / "en-fr-transformer"), "--mask", "cross:9.1", "--text", TEXT,
            "--edit", EDIT, "--out", "figs")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "out of range" in r.stderr
    assert not (tmp_path / "figs").exists()


def test_pyproject_installs_the_library_and_only_it():
    from setuptools import find_packages
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"
    assert project["project"]["name"] == "s2s"
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    found = set(find_packages(str(ROOT), include=include))
    on_disk = {".".join(d.relative_to(ROOT).parts) for d in (ROOT / "s2s").rglob("__init__.py") for d in [d.parent]}
    assert found == on_disk and "s2s.decode" in found and not any(p.startswith(("ui", "pages", "tests")) for p in found)
    # the version pins stay in requirements.txt (torch's CPU wheel): the package names only what it imports
    pinned = {line.split("==")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.lstrip().startswith("#")}
    assert set(project["project"]["dependencies"]) <= pinned
