"""Sweeps: grid expansion, interleaving, n_jobs, resume (a finished trial is never run twice), one place per trial
(attempts kept, a good result never renamed), the lock, the dry run."""

from __future__ import annotations

import json
import math
import os

import pytest

import latte_lab as ll
from latte_lab import rundir
from latte_lab.sweep import check_jobs, expand_grid, max_jobs, run_sweep, sweepdir


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
    dirs = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert len(dirs) == 4 and all((out / d / "result.json").exists() for d in dirs)
    mtimes = {d: (out / d / "result.json").stat().st_mtime_ns for d in dirs}
    again = run_sweep(grid, out=out, n_jobs=1, progress=False)
    assert len(again) == 4
    assert {d: (out / d / "result.json").stat().st_mtime_ns for d in dirs} == mtimes  # nothing reran
    rows = ll.load_runs(out).trials
    assert len(rows) == 4 and set(rows["team"]) == {"latte", "leader_worker"}
    payload = json.loads((out / dirs[0] / "result.json").read_text())
    assert payload["row"]["run_dir"] == str(out / dirs[0])


def test_a_sweeps_trials_share_one_memo_of_test_runs(tmp_path, monkeypatch):
    """Every worker stores its test runs in <out>/.sweep/memo, unless a memo directory is set already
    ($LATTE_LAB_MEMO_DIR, or an enclosing sharing_memo): those win."""
    from latte_lab.sandbox import clear_memo
    from latte_lab.sandbox.pytest import sharing_memo

    monkeypatch.delenv("LATTE_LAB_MEMO_DIR", raising=False)
    grid = {"task": "debug", "team": "static", "replicates": 2, "max_rounds": 1, "sandbox": "local"}
    clear_memo()  # the workers are forked from this process: nothing it memoised may spare them a run
    run_sweep(grid, out=tmp_path / "own", n_jobs=2, progress=False)
    assert any(sweepdir.memo_dir(tmp_path / "own").glob("*.json"))
    one = {**grid, "replicates": 1}
    clear_memo()
    monkeypatch.setenv("LATTE_LAB_MEMO_DIR", str(tmp_path / "mine"))
    run_sweep(one, out=tmp_path / "env", progress=False)
    assert not sweepdir.memo_dir(tmp_path / "env").exists() and any((tmp_path / "mine").glob("*.json"))
    monkeypatch.delenv("LATTE_LAB_MEMO_DIR")
    clear_memo()
    with sharing_memo(tmp_path / "series"):
        run_sweep(one, out=tmp_path / "inner", progress=False)
    assert not sweepdir.memo_dir(tmp_path / "inner").exists() and any((tmp_path / "series").glob("*.json"))


def test_unknown_backend(tmp_path):
    with pytest.raises(ll.ConfigError, match="backend"):
        run_sweep({"task": "debug", "max_rounds": 1}, out=tmp_path, backend="slurm", progress=False)


# --- n_jobs -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [0, -1, 10_000, True, 2.5, "many", None])
def test_n_jobs_outside_1_to_4_per_cpu_or_auto_is_a_clear_error(bad):
    with pytest.raises(ll.ConfigError, match=r"n_jobs must be a whole number from 1 to \d+ .* or 'auto'"):
        check_jobs(bad, 10)


def test_n_jobs_never_exceeds_the_trials_and_auto_is_one_per_cpu():
    assert check_jobs(max_jobs(), 2) == 2
    assert check_jobs("auto", 100, cpus=3) == 3 and check_jobs("auto", 1, cpus=3) == 1
    assert max_jobs(cpus=2) == 8


def test_run_sweep_checks_n_jobs_before_touching_out(tmp_path):
    with pytest.raises(ll.ConfigError, match="n_jobs"):
        run_sweep({"task": "debug", "max_rounds": 1}, out=tmp_path / "s", n_jobs=0, progress=False)
    assert not (tmp_path / "s").exists()


# --- one place per trial ----------------------------------------------------------------------------------------

def _partial_attempt(out, cfg, with_result=None):
    """A run directory left in the running area by a sweep that was killed."""
    path = sweepdir.running_dir(out) / cfg.trial_id
    path.mkdir(parents=True)
    (path / rundir.CONFIG_FILE).write_text(cfg.to_json())
    (path / rundir.EVENTS_FILE).write_text('{"type": "run_start"}\n')
    if with_result is not None:
        (path / rundir.RESULT_FILE).write_text(json.dumps(with_result))
    return path


def test_an_attempt_left_by_a_killed_sweep_is_kept_as_failed_and_the_trial_runs_again(tmp_path):
    out = tmp_path / "sweep"
    grid = {"task": "debug", "team": ["latte", "static"], "max_rounds": 2}
    first, second = expand_grid(grid, out)
    run_sweep({**grid, "team": "latte"}, out=out, progress=False)
    good = out / first.trial_id
    stamp = (good / rundir.RESULT_FILE).stat().st_mtime_ns
    _partial_attempt(out, second)
    df = run_sweep(grid, out=out, progress=False)
    assert list(df["trial_id"]) == [first.trial_id, second.trial_id] and (df["status"] == "ok").all()
    assert (good / rundir.RESULT_FILE).stat().st_mtime_ns == stamp  # the finished trial neither reran nor moved
    failed = rundir.read_result(out / f"{second.trial_id}.failed-0")
    assert failed["status"] == "error" and "killed" in failed["error"]
    assert (out / f"{second.trial_id}.failed-0" / rundir.EVENTS_FILE).exists()  # the partial record is kept
    with pytest.warns(UserWarning, match="left out 1 other attempt"):
        trials = ll.load_runs(out).trials
    assert sorted(trials["trial_id"]) == sorted([first.trial_id, second.trial_id])


def test_a_finished_result_left_in_the_running_area_is_moved_into_place_not_rerun(tmp_path):
    out = tmp_path / "sweep"
    grid = {"task": "debug", "max_rounds": 2}
    [cfg] = expand_grid(grid, out)
    done = ll.run_trial(cfg.model_copy(update={"runs_dir": str(sweepdir.running_dir(out))}), run_name=cfg.trial_id)
    stamp = (done.run_dir / rundir.EVENTS_FILE).stat().st_mtime_ns
    df = run_sweep(grid, out=out, progress=False)
    assert (out / cfg.trial_id / rundir.EVENTS_FILE).stat().st_mtime_ns == stamp  # moved, not run again
    assert df.loc[0, "real_seconds"] == done.row["real_seconds"]
    assert df.loc[0, "run_dir"] == str(out / cfg.trial_id)
    assert not list(sweepdir.running_dir(out).iterdir())


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_trial_that_fails_past_its_start_is_put_in_place_as_failed_and_the_sweep_says_why(tmp_path, monkeypatch,
                                                                                           n_jobs):
    """An error inside a trial's own making of its record (in this process, or in a worker forked from it)
    stops the sweep with that error; its attempt is kept in place as failed, and nothing stays under way."""
    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("latte_lab.metrics.trial_metrics", broken)
    out = tmp_path / "sweep"
    with pytest.raises(ZeroDivisionError):
        run_sweep({"task": "debug", "team": ["latte", "static"], "max_rounds": 2}, out=out, n_jobs=n_jobs,
                  progress=False)
    assert not list(sweepdir.running_dir(out).iterdir())
    attempts = sorted(p for p in out.iterdir() if sweepdir.attempt_of(p.name)[1] is not None)
    assert attempts
    for path in attempts:
        failed = rundir.read_result(path)
        assert failed["status"] == "error" and "ZeroDivisionError: division by zero" in failed["error"]
        assert (path / rundir.EVENTS_FILE).exists()  # the partial record is kept


def test_a_good_result_is_never_renamed(tmp_path):
    out = tmp_path / "sweep"
    [cfg] = expand_grid({"task": "debug", "max_rounds": 2}, out)
    run_sweep([cfg], out=out, progress=False)
    # a second finished run of the same trial (two sweeps racing in the old layout) is the one set aside
    dup = ll.run_trial(cfg.model_copy(update={"runs_dir": str(tmp_path / "elsewhere")}), run_name=cfg.trial_id)
    moved = sweepdir.finish_attempt(dup.run_dir, out, cfg.trial_id)
    assert moved.name == f"{cfg.trial_id}.failed-0"
    assert rundir.read_result(out / cfg.trial_id)["status"] == "ok"
    aside = rundir.read_result(moved)
    assert aside["status"] == "error" and "already" in aside["error"] and aside["row"]["total_rounds"] == 2
    with pytest.warns(UserWarning, match="1 other attempt"):
        rows = ll.load_runs(out, include_errors=True).trials
    assert list(rows["run_dir"]) == [str(out / cfg.trial_id)]


def test_load_runs_gives_one_row_per_trial_id_in_a_plain_runs_folder(tmp_path):
    cfg = ll.TrialConfig(task="debug", max_rounds=2, runs_dir=str(tmp_path))
    a, b = ll.run_trial(cfg), ll.run_trial(cfg)
    assert a.run_dir != b.run_dir and a.trial_id == b.trial_id
    with pytest.warns(UserWarning, match="1 other attempt"):
        rows = ll.load_runs(tmp_path).trials
    assert list(rows["run_dir"]) == [str(a.run_dir)]  # the one named after the trial


def test_a_second_sweep_on_a_locked_directory_is_refused_naming_the_holder(tmp_path):
    out = tmp_path / "sweep"
    with sweepdir.SweepLock(out):
        with pytest.raises(ll.ConfigError, match=rf"in use by another sweep \(process {os.getpid()} on "):
            run_sweep({"task": "debug", "max_rounds": 1}, out=out, progress=False)
    assert len(run_sweep({"task": "debug", "max_rounds": 1}, out=out, progress=False)) == 1  # released


# --- dry run ----------------------------------------------------------------------------------------------------

def test_dry_run_shows_the_grid_what_is_done_and_an_estimate_from_earlier_runs_and_prices(tmp_path):
    out = tmp_path / "sweep"
    run_sweep({"task": "debug", "team": "latte", "max_rounds": 2}, out=out, progress=False)
    plan = ll.sweep.dry_run({"task": "debug", "team": ["latte", "static"], "replicates": 3, "max_rounds": 2}, out)
    table = plan.table().set_index("team")
    assert (table.loc["latte", "finished"], table.loc["latte", "to_run"], table.loc["static", "to_run"]) == (1, 2, 3)
    assert table.loc["latte", "dollars_to_run"] == 0.0 and "free" in table.loc["latte", "basis"]
    text = str(plan)
    assert "6 trials in 2 conditions, 1 finished, 5 to run" in text and "estimated cost" in text
    priced = ll.sweep.dry_run({"task": "debug", "team": ["latte", "static", "pipeline"], "model": "openai/gpt-4o",
                               "replicates": 2}, out)
    rows = priced.table().set_index("team")
    own = ll.load_runs(out).trials.iloc[0]
    assert rows.loc["latte", "tokens_per_trial"] == own["total_input_tokens"] + own["total_output_tokens"]
    expected = (own["total_input_tokens"] * 2.5 + own["total_output_tokens"] * 10.0) / 1e6 * 2  # prices.csv
    assert rows.loc["latte", "dollars_to_run"] == pytest.approx(expected)
    assert "published trials of other models" in rows.loc["static", "basis"]  # the authors' static runs
    assert rows.loc["static", "dollars_to_run"] > 0
    assert math.isnan(rows.loc["pipeline", "dollars_to_run"])  # the published data has no pipeline team
    assert math.isnan(priced.estimated_dollars()) and "1 condition(s) without an estimate" in str(priced)


def test_a_damaged_directory_in_a_trials_place_is_set_aside_whole_and_the_trial_runs(tmp_path):
    out = tmp_path / "sweep"
    [cfg] = expand_grid({"task": "debug", "max_rounds": 2}, out)
    damaged = out / cfg.trial_id
    damaged.mkdir(parents=True)
    (damaged / rundir.RESULT_FILE).write_text('{"status": "ok", "row": {"trial_')  # cut off mid-write
    df = run_sweep([cfg], out=out, progress=False)
    assert list(df["status"]) == ["ok"] and df.loc[0, "run_dir"] == str(out / cfg.trial_id)
    aside = out / f"{cfg.trial_id}.failed-0"
    assert (aside / "result.json.damaged").read_text().startswith('{"status": "ok"')  # nothing lost
    assert rundir.read_json(aside / rundir.RESULT_FILE)["status"] == "error"


def test_a_trial_stopped_by_its_budget_is_finished_until_the_budget_is_raised(tmp_path):
    out = tmp_path / "sweep"
    grid = {"task": "debug", "max_rounds": 3, "max_billed_tokens": 1}
    first = run_sweep(grid, out=out, progress=False)
    assert list(first["status"]) == ["budget"] and list(first["reason"]) == ["budget"]
    trial_id = first.loc[0, "trial_id"]
    assert sweepdir.is_finished(rundir.read_result(out / trial_id))
    again = run_sweep(grid, out=out, progress=False)  # the same budget: nothing to run
    assert again.loc[0, "real_seconds"] == first.loc[0, "real_seconds"]
    raised = run_sweep({**grid, "max_billed_tokens": None}, out=out, progress=False)
    assert list(raised["status"]) == ["ok"] and raised.loc[0, "trial_id"] == trial_id  # the same trial, rerun
    assert rundir.read_result(out / f"{trial_id}.failed-0")["status"] == "budget"  # the first run is kept
