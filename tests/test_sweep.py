"""Sweeps: grid expansion, interleaving, resume (a finished trial is never run twice), process pool."""

from __future__ import annotations

import json

import pytest

import latte_lab as ll
from latte_lab.sweep import expand_grid, run_sweep


def test_expand_grid_interleaves_conditions_and_seeds(tmp_path):
    cfgs = expand_grid({"task": "debug", "team": ["latte", "static"], "replicates": 2}, tmp_path)
    assert [(c.team, c.seed, c.trial) for c in cfgs] == [("latte", 0, 0), ("static", 0, 0), ("latte", 1, 1),
                                                        ("static", 1, 1)]
    assert all(c.runs_dir == str(tmp_path) for c in cfgs)
    assert len({c.trial_id for c in cfgs}) == 4
    explicit = expand_grid({"task": "debug", "seeds": [7, 9], "max_rounds": [2, 3]}, tmp_path)
    assert [(c.seed, c.max_rounds) for c in explicit] == [(7, 2), (7, 3), (9, 2), (9, 3)]


def test_expand_grid_rejects_bad_grids(tmp_path):
    with pytest.raises(ll.ConfigError, match="task"):
        expand_grid({"team": "latte"}, tmp_path)
    with pytest.raises(ll.ConfigError, match="replicates"):
        expand_grid({"task": "debug", "replicates": 0}, tmp_path)
    with pytest.raises(ll.ConfigError, match="known teams"):
        expand_grid({"task": "debug", "team": ["latte", "hive"]}, tmp_path)


def test_run_sweep_resumes_without_rerunning(tmp_path):
    grid = {"task": "debug", "team": ["latte", "leader_worker"], "replicates": 2, "max_rounds": 2}
    out = tmp_path / "sweep"
    df = run_sweep(grid, out=out, n_jobs=2, progress=False)
    assert len(df) == 4 and set(df["team"]) == {"latte", "leader_worker"} and set(df["seed"]) == {0, 1}
    assert (df["status"] == "ok").all()
    dirs = sorted(p.name for p in out.iterdir())
    assert len(dirs) == 4 and all((out / d / "result.json").exists() for d in dirs)
    mtimes = {d: (out / d / "result.json").stat().st_mtime_ns for d in dirs}
    again = run_sweep(grid, out=out, n_jobs=1, progress=False)
    assert len(again) == 4
    assert {d: (out / d / "result.json").stat().st_mtime_ns for d in dirs} == mtimes  # nothing reran
    rows = ll.load_runs(out).trials
    assert len(rows) == 4 and set(rows["team"]) == {"latte", "leader_worker"}
    payload = json.loads((out / dirs[0] / "result.json").read_text())
    assert payload["row"]["run_dir"] == str(out / dirs[0])


def test_unknown_backend(tmp_path):
    with pytest.raises(ll.ConfigError, match="backend"):
        run_sweep({"task": "debug", "max_rounds": 1}, out=tmp_path, backend="slurm", progress=False)
