"""`python -m s2s.report` prints the tables of docs/models.md from metrics.json."""
import json
import shutil

from s2s import report


def test_report_lists_character_models_and_their_cells(tmp_path, tiny_charlm, monkeypatch, capsys):
    shutil.copytree(tiny_charlm, tmp_path / "charlm-linux-kernel")
    metrics = json.loads((tmp_path / "charlm-linux-kernel" / "metrics.json").read_text())
    metrics["cells"] = {"brace_depth": [{"layer": 1, "cell": 2, "r": 0.61}],
                        "inside_quotes": [{"layer": 0, "cell": 3, "r": 0.1}]}
    (tmp_path / "charlm-linux-kernel" / "metrics.json").write_text(json.dumps(metrics))
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    report.main([])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines()
               if line.startswith("| `charlm-linux-kernel` | ") and "brace" not in line)
    assert f"| {metrics['test']['bits_per_char']:.3f} |" in row and "| 1.212 |" in row     # the paper's 0.84 nats
    assert "| `charlm-linux-kernel` | brace_depth | 1 | 2 | +0.610 |" in out
    assert "inside_quotes" not in out                                                        # |r| < 0.3 is not listed


def test_report_lists_every_cell_type_in_the_lectures_order(tmp_path, charlm_trio, monkeypatch, capsys):
    for cell in ("lstm", "rnn", "gru"):
        shutil.copytree(charlm_trio[cell], tmp_path / f"charlm-tiny-{cell}")
    monkeypatch.setenv("S2S_CHECKPOINTS", str(tmp_path))
    report.main([])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `charlm-tiny-")
            and line.count("|") == 10]
    assert [r.split(" | ")[1] for r in rows] == ["rnn", "gru", "lstm"]
    params = json.loads((tmp_path / "charlm-tiny-gru" / "metrics.json").read_text())["train"]["parameters"]
    assert f"| {params:,} |" in rows[1]


def test_report_has_help_and_reads_another_folder(tmp_path, capsys):
    """#45: `--help` says what it does (it printed the tables), and --checkpoints names the folder."""
    import pytest
    with pytest.raises(SystemExit) as e:
        report.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m s2s.report" in out and "| model |" not in out
    report.main(["--checkpoints", str(tmp_path)])                 # an empty folder: the headers, no rows
    assert capsys.readouterr().out.count("| model |") >= 1
