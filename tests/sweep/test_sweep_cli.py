"""``latte-lab sweep``: runs and resumes a grid, --dry-run shows the plan and runs nothing, bad input is one line."""

from __future__ import annotations

import latte_lab as ll
from latte_lab.cli import main


def test_sweep_runs_the_grid_and_resumes(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--tasks", "debug", "--teams", "latte,static", "--replicates", "2", "--seed", "5",
            "--max-rounds", "2", "--jobs", "2", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "4 of 4 trials finished" in first
    rows = ll.load_runs(out).trials
    assert sorted(rows["seed"]) == [5, 5, 6, 6] and set(rows["team"]) == {"latte", "static"}
    assert main(argv) == 0
    assert "4 of 4 trials finished (0 now)" in capsys.readouterr().out


def test_dry_run_prints_the_grid_the_finished_trials_and_a_cost_estimate_and_runs_nothing(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--tasks", "debug", "--max-rounds", "2", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["sweep", "--tasks", "debug", "--teams", "latte", "static", "--models", "simulated,openai/gpt-4o",
                 "--replicates", "2", "--max-rounds", "2", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "8 trials in 4 conditions, 1 finished, 7 to run" in text
    assert "openai/gpt-4o" in text and "$2.5/$10 per Mtok" in text and "estimated cost of the trials to run: $" in text
    assert len([p for p in out.iterdir() if not p.name.startswith(".")]) == 1  # nothing ran


def test_bad_jobs_and_unknown_names_are_one_line_errors(tmp_path, capsys):
    assert main(["sweep", "--tasks", "debug", "--jobs", "0", "--out", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("latte-lab: error: n_jobs must be a whole number from 1 to") and err.count("\n") == 1
    assert main(["sweep", "--tasks", "debug", "--teams", "hive", "--out", str(tmp_path / "b")]) == 1
    assert "known teams" in capsys.readouterr().err
