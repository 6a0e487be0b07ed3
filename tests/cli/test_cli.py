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


def test_an_unknown_profile_is_refused_before_the_trial_is_announced(capsys, tmp_path):
    assert main(["run", "--task", "debug", "--model", "simulated/carefull", "--runs-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and not any(tmp_path.iterdir())
    assert captured.err.startswith("latte-lab: error: unknown simulated profile 'carefull'; known profiles:")
    assert main(["sweep", "--tasks", "debug", "--models", "simulated/carefull", "--out", str(tmp_path / "sw"),
                 "--replicates", "1"]) == 1
    captured = capsys.readouterr()
    assert "unknown simulated profile 'carefull'" in captured.err and "sweep:" not in captured.err
    assert not (tmp_path / "sw").exists()


def test_round_lines_say_their_time_is_virtual(capsys, tmp_path):
    assert main(["run", "--task", "debug", "--max-rounds", "2", "--runs-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "each round's time is the trial's virtual clock" in out[0]
    rounds = [line for line in out if line.startswith("round ")]
    assert rounds and all(line.rsplit(" · ", 1)[1].startswith("virtual ") for line in rounds)
    assert not any("t=" in line for line in rounds)


def test_team_help_points_at_the_teams_command():
    from latte_lab.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for command, option in (("run", "--team"), ("demo", "--team"), ("sweep", "--teams")):
        action = next(a for a in sub[command]._actions if option in a.option_strings)
        assert "latte-lab teams" in action.help and "names()" not in action.help, (command, action.help)


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
    for sub in ("run", "replay", "demo", "cache", "figures", "prices"):
        assert sub in proc.stdout


def test_prices_lists_the_bundled_table_and_looks_up_models(capsys, monkeypatch):
    monkeypatch.delenv("LATTE_LAB_PRICES", raising=False)
    assert main(["prices", "--provider", "anthropic"]) == 0
    out = capsys.readouterr().out
    assert "bundled with latte_lab" in out and "claude-sonnet-4-5" in out and "gpt-4o" not in out
    assert main(["prices", "claude-sonnet-4-5-20250929", "gpt-4o"]) == 0
    out = capsys.readouterr().out
    assert "claude-sonnet-4-5-20250929 (as claude-sonnet-4-5)" in out and " 3.00 " in out
    assert main(["prices", "no-such-model"]) == 1
    assert "no price" in capsys.readouterr().out


def test_prices_from_a_table_of_your_own(tmp_path, capsys):
    table = tmp_path / "p.csv"
    table.write_text("provider,model,input_per_mtok,output_per_mtok,source,as_of\nopenai,mine,1,2,contract,2026-01-01\n")
    assert main(["prices", "--path", str(table)]) == 0
    out = capsys.readouterr().out
    assert str(table) in out and "mine" in out and "gpt-4o" not in out
    assert main(["prices", "--path", str(tmp_path / "gone.csv")]) == 1
    assert "not found" in capsys.readouterr().err


def test_figures_reports_a_published_dir_override_that_is_not_a_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LATTE_PUBLISHED_DIR", str(tmp_path / "nowhere"))
    assert main(["figures", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "LATTE_PUBLISHED_DIR=" in err and "unset it to use the copy bundled with latte_lab" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("cpus", "drawers"), [(1, 2), (2, 2), (4, 4), (6, 6), (32, 6)])
def test_figures_draws_with_one_process_per_cpu_and_figure(monkeypatch, cpus, drawers):
    """The default drawers: the CPUs this process may use, at least 2, at most one per figure."""
    import os

    from latte_lab.cli import figures

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert figures.default_jobs(6) == drawers


def test_run_offers_the_cache_modes_of_the_config(capsys):
    from latte_lab.config import CACHE_MODES

    with pytest.raises(SystemExit):
        main(["run", "--task", "debug", "--cache", "sometimes"])
    err = capsys.readouterr().err
    assert all(mode in err for mode in CACHE_MODES)


def test_run_gives_a_sweeps_trial_its_sweep_id(capsys, tmp_path):
    """A sweep's replicate index is part of its trials' ids; --trial gives a trial run alone the same id."""
    from latte_lab.sweep import expand_grid

    swept = expand_grid({"task": "debug", "replicates": 2, "max_rounds": 1}, tmp_path / "sweep")[1]
    assert main(["run", "--task", "debug", "--seed", "1", "--trial", "1", "--max-rounds", "1", "--quiet",
                 "--runs-dir", str(tmp_path)]) == 0
    assert (tmp_path / swept.trial_id / "result.json").is_file()
    assert capsys.readouterr().out.startswith(f"trial {swept.trial_id}:")
