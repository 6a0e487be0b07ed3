"""The latte-lab command: run (every team), replay, demo, graph-demo, and clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from latte_lab.cli import main


@pytest.mark.parametrize("team", ["latte", "static", "leader_worker", "decentralized", "pipeline"])
def test_run_every_team(tmp_path, capsys, team):
    code = main(["run", "--task", "debug", "--team", team, "--seed", "1", "--max-rounds", "3",
                 "--runs-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "round  1 ·" in out and "run directory:" in out
    assert f"-{team}-s1-" in out


def test_replay_matches(tmp_path, capsys):
    assert main(["run", "--task", "debug", "--max-rounds", "3", "--runs-dir", str(tmp_path), "--quiet"]) == 0
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    capsys.readouterr()
    assert main(["replay", str(run_dir), "--runs-dir", str(tmp_path / "r"), "--quiet"]) == 0
    assert "replay matches the original result" in capsys.readouterr().out


def test_clear_errors(capsys, tmp_path):
    assert main(["run", "--task", "debug", "--team", "hive", "--runs-dir", str(tmp_path)]) == 1
    assert "known teams" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing")]) == 1
    assert "is missing" in capsys.readouterr().err


def test_graph_demo_walks_every_operator(capsys):
    assert main(["graph-demo"]) == 0
    out = capsys.readouterr().out
    for word in ("discover", "assign", "claims", "completes", "verifies", "releases", "closes"):
        assert word in out
    assert "t1=verified" in out


def test_console_script_help():
    proc = subprocess.run([sys.executable, "-m", "latte_lab.cli", "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0
    for sub in ("run", "replay", "demo", "cache", "figures"):
        assert sub in proc.stdout
