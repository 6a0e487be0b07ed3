"""Sweeps under faults: the parent killed with SIGKILL, two sweeps on one directory, Ctrl-C and SIGTERM.

Each trial must end up exactly once, no process may outlive the sweep, nothing finished may run again,
and a stopped sweep returns its rows with a one-line summary and no traceback.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time

import pytest
from sweep_helpers import (
    TeamServer,
    alive,
    descendants,
    finished_dirs,
    running_dirs,
    start_script,
    wait_until,
)

import latte_lab as ll
from latte_lab import rundir
from latte_lab.sweep import expand_grid, run_sweep, sweepdir

# Trials that must still be running when a signal arrives: never served from the session's shared memo.
pytestmark = pytest.mark.usefixtures("no_shared_memo")

STOP_SECONDS = 5.0  # a stopped sweep must be gone within this, its processes too

PROVIDER_SWEEP = """
import sys
import latte_lab as ll
url, out, cache = sys.argv[1:4]
grid = {"task": "debug", "team": ["latte", "leader_worker", "static"], "replicates": 2, "max_rounds": 4,
        "model": "openai/gpt-4o-mini", "base_url": url, "cache_path": cache}
ll.run_sweep(grid, out=out, n_jobs=2, progress=False)
"""

SIMULATED_SWEEP = """
import json, sys
import latte_lab as ll
df = ll.run_sweep({"task": "debug", "team": ["latte", "leader_worker"], "replicates": 4, "max_rounds": 12},
                  out=sys.argv[1], n_jobs=2, progress=False)
print("ROWS " + json.dumps(df[["trial_id", "status", "reason", "error"]].to_dict("records")))
"""


def _provider_grid(url, cache):
    return {"task": "debug", "team": ["latte", "leader_worker", "static"], "replicates": 2, "max_rounds": 4,
            "model": "openai/gpt-4o-mini", "base_url": url, "cache_path": cache}


def test_sigkill_of_the_sweep_parent_leaves_no_orphan_and_resume_runs_each_trial_exactly_once(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-sweep-faults")
    out, cache = tmp_path / "sweep", tmp_path / "cache.sqlite"
    server = TeamServer(delay_s=0.15).start()
    try:
        proc = start_script(PROVIDER_SWEEP, server.openai_url, str(out), str(cache))
        wait_until(lambda: finished_dirs(out) and len(running_dirs(out)) == 2, "one trial finished and two run",
                   proc=proc)
        tree = descendants(proc.pid)
        assert len(tree) >= 2  # the two workers (and their sandboxes' processes)
        done_before = {p.name: (p / rundir.EVENTS_FILE).stat().st_mtime_ns for p in finished_dirs(out)}
        proc.kill()
        proc.communicate()
        deadline = time.monotonic() + STOP_SECONDS
        while alive(tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(tree), f"orphans after {STOP_SECONDS} s: {[p.pid for p in alive(tree)]}"

        grid = _provider_grid(server.openai_url, str(cache))
        df = run_sweep(grid, out=out, n_jobs=2, progress=False)
    finally:
        server.stop()
    configs = expand_grid(grid, out)
    assert len(df) == len(configs) and df["trial_id"].is_unique and (df["status"] == "ok").all()
    for name, stamp in done_before.items():  # no finished trial ran again
        assert (out / name / rundir.EVENTS_FILE).stat().st_mtime_ns == stamp
    attempts = sorted(p for p in out.iterdir() if sweepdir.attempt_of(p.name)[1] is not None)
    assert attempts, "the two trials under way when the parent died are kept as attempts"
    for path in attempts:
        assert rundir.read_result(path)["status"] == "error"
    with pytest.warns(UserWarning, match=f"left out {len(attempts)} other attempt"):
        trials = ll.load_runs(out, include_errors=True).trials
    assert sorted(trials["trial_id"]) == sorted(c.trial_id for c in configs)  # every trial exactly once
    with sqlite3.connect(cache) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0] > 0
    assert not running_dirs(out)


def _rows(stdout: str) -> list[dict]:
    line = next(line for line in stdout.splitlines() if line.startswith("ROWS "))
    return json.loads(line[5:])


def _check_stopped(proc, out, signalled_at, finished_before):
    """The sweep ended within STOP_SECONDS, without a traceback, with a summary line; no trial started
    after the signal; every trial it stopped is recorded as interrupted."""
    stdout, stderr = proc.communicate(timeout=60)
    elapsed = time.monotonic() - signalled_at[1]
    assert proc.returncode == 0, stderr
    assert elapsed < STOP_SECONDS, f"the sweep took {elapsed:.1f} s to stop"
    assert "Traceback" not in stderr and "Traceback" not in stdout, stderr
    assert "interrupted:" in stdout and "run it again to resume" in stdout
    rows = _rows(stdout)
    interrupted = [r for r in rows if r["status"] != "ok"]
    assert interrupted and all(r["reason"] == "interrupted" for r in interrupted), rows
    assert len(rows) < 8  # queued trials never ran
    started = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert len(started) <= finished_before + 2 + 2  # trials in flight at the signal, and nothing after
    for path in started:
        config = path / rundir.CONFIG_FILE
        if not config.exists():
            # Stopped between making its directory and writing its config (a loaded machine): an attempt
            # set aside and recorded as not finished.
            assert sweepdir.FAILED_INFIX in path.name, path
            assert json.loads((path / rundir.RESULT_FILE).read_text())["status"] == "error", path
            continue
        assert config.stat().st_mtime <= signalled_at[0] + 1.0, path
    assert not running_dirs(out)
    time.sleep(0.5)
    assert len([p for p in out.iterdir() if not p.name.startswith(".")]) == len(started)  # nobody kept going


@pytest.mark.parametrize("target", ["parent", "group"])
def test_ctrl_c_stops_the_sweep_within_5_s_without_a_traceback(tmp_path, target):
    """``parent``: a notebook's stop button (SIGINT to the kernel process only); ``group``: Ctrl-C in a
    terminal (SIGINT to every process of the foreground group, the workers too)."""
    out = tmp_path / "sweep"
    proc = start_script(SIMULATED_SWEEP, str(out), new_session=True)
    wait_until(lambda: len(running_dirs(out)) == 2, "two trials run", proc=proc)
    tree = descendants(proc.pid)
    finished_before = len(finished_dirs(out))
    signalled_at = (time.time(), time.monotonic())
    if target == "group":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    _check_stopped(proc, out, signalled_at, finished_before)
    assert not alive(tree)


def test_a_second_sweep_on_the_same_directory_is_refused_and_sigterm_stops_the_first(tmp_path):
    out = tmp_path / "sweep"
    proc = start_script(SIMULATED_SWEEP, str(out))
    wait_until(lambda: len(running_dirs(out)) == 2, "two trials run", proc=proc)
    with pytest.raises(ll.ConfigError, match=rf"in use by another sweep \(process {proc.pid} on "):
        run_sweep({"task": "debug", "team": ["latte", "leader_worker"], "replicates": 4, "max_rounds": 12},
                  out=out, progress=False)
    finished_before = len(finished_dirs(out))
    signalled_at = (time.time(), time.monotonic())
    proc.send_signal(signal.SIGTERM)
    _check_stopped(proc, out, signalled_at, finished_before)


def test_an_interrupt_in_a_notebook_returns_the_rows_so_far(tmp_path, capsys):
    """The kernel receives SIGINT while run_sweep runs in its main thread: run_sweep returns a DataFrame."""
    out = tmp_path / "sweep"
    sent = {}

    def interrupt_once_running():
        wait_until(lambda: len(running_dirs(out)) == 2, "two trials run")
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_running, daemon=True).start()
    df = run_sweep({"task": "debug", "team": ["latte", "leader_worker"], "replicates": 4, "max_rounds": 12},
                   out=out, n_jobs=2, progress=False)
    assert time.monotonic() - sent["at"] < STOP_SECONDS
    assert len(df) < 8 and (df["reason"] == "interrupted").sum() >= 1
    assert "interrupted" in df.attrs["summary"]
    assert df.attrs["summary"] in capsys.readouterr().out


def test_an_interrupt_landing_as_a_finished_trial_moves_into_place_keeps_it_finished(tmp_path, monkeypatch):
    """Ctrl-C between the end of a trial and its move out of the running area: the trial is put in place,
    finished, its row reported; nothing is left under way."""
    out = tmp_path / "sweep"
    real_finish = sweepdir.finish_attempt
    calls = []

    def interrupted_first(run_dir, where, trial_id):
        calls.append(trial_id)
        if len(calls) == 1:
            raise KeyboardInterrupt  # what a signal handler raises at the first instruction of the move
        return real_finish(run_dir, where, trial_id)

    monkeypatch.setattr(sweepdir, "finish_attempt", interrupted_first)
    df = run_sweep({"task": "debug", "team": "latte", "replicates": 2, "max_rounds": 3}, out=out, n_jobs=1,
                   progress=False)
    assert "interrupted" in df.attrs["summary"]
    assert len(df) == 1 and df["status"].tolist() == ["ok"]  # the trial had finished: it stays finished
    (trial_id,) = df["trial_id"]
    assert rundir.read_result(out / trial_id)["status"] == "ok" and not running_dirs(out)
    assert df["run_dir"].tolist() == [str(out / trial_id)]
    assert rundir.read_result(out / trial_id)["row"]["run_dir"] == str(out / trial_id)
