"""Trials that meet a full disk, SIGTERM, an interrupt or a refused connection: each leaves one run directory
whose result.json says what happened, and whose JSONL files parse line by line."""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import latte_lab as ll
from latte_lab import rundir
from latte_lab.models.scripted import ScriptedModel

DISCOVER = '<discover_task id="a" title="Fix it" description="Fix the module." dependencies="" />'


def _jsonl_lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"{path.name} ends mid-line"
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def _only_run_dir(runs: Path) -> Path:
    dirs = [p for p in runs.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _check_record(run_dir: Path, status: str) -> dict:
    """result.json readable with ``status``, and every JSONL line of the run directory parses."""
    saved = rundir.read_result(run_dir)
    assert saved["status"] == status and saved["row"]["status"] == status
    for name in (rundir.EVENTS_FILE, rundir.SNAPSHOTS_FILE, rundir.CALLS_FILE):
        if (run_dir / name).exists():
            _jsonl_lines(run_dir / name)
    return saved


# --- labels ----------------------------------------------------------------------------------------------------

def test_a_refused_connection_at_round_0_ends_with_reason_error(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = ll.TrialConfig(task="debug", model="openai/gpt-4o-mini", base_url="http://127.0.0.1:9/v1", max_retries=0,
                         timeout_s=5, cache="off", max_rounds=3, runs_dir=str(tmp_path))
    res = ll.run_trial(cfg)
    assert res.status == "error" and res.reason == "error" and res.rounds == 0
    assert "\n" not in res.error
    [end] = [e for e in res.event_list if e["type"] == "run_end"]
    assert end["reason"] == "error" and end["success"] is False
    saved = _check_record(res.run_dir, "error")
    assert saved["row"]["reason"] == "error"


def test_an_interrupt_is_labelled_interrupted(tmp_path):
    def policy(req):
        if req.view.round == 2:
            raise KeyboardInterrupt
        return DISCOVER if req.view.round == 0 else "Nothing to do."

    with pytest.raises(KeyboardInterrupt, match="partial record"):
        ll.run_trial(ll.TrialConfig(task="debug", model="scripted", max_rounds=5, runs_dir=str(tmp_path)),
                     model=ScriptedModel(policy))
    run_dir = _only_run_dir(tmp_path)
    saved = _check_record(run_dir, "error")
    assert saved["row"]["reason"] == "interrupted" and saved["error"] == "interrupted by the user"
    assert [e["reason"] for e in _jsonl_lines(run_dir / rundir.EVENTS_FILE) if e["type"] == "run_end"] == ["interrupted"]


def test_a_model_error_is_labelled_error_not_max_rounds(tmp_path):
    def policy(req):
        if req.view.round == 1 and req.scope.agent == "Dev1":
            raise ll.ModelError("the provider is unavailable")
        return DISCOVER if req.view.round == 0 else "Nothing to do."

    res = ll.run_trial(ll.TrialConfig(task="debug", model="scripted", max_rounds=5, runs_dir=str(tmp_path)),
                       model=ScriptedModel(policy))
    assert (res.status, res.reason, res.row["reason"]) == ("error", "error", "error")


# --- SIGTERM ---------------------------------------------------------------------------------------------------

SLOW_TRIAL = """
import sys, time
import latte_lab as ll
from latte_lab.models.scripted import ScriptedModel

def policy(req):
    time.sleep(0.05)  # slow enough to be caught mid-trial
    if req.view.round == 0:
        return '<discover_task id="a" title="Fix it" description="Fix the module." dependencies="" />'
    return "Nothing to do."

print("starting", flush=True)
res = ll.run_trial(ll.TrialConfig(task="debug", model="scripted", max_rounds=1000, runs_dir=sys.argv[1]),
                   model=ScriptedModel(policy))
print("finished without a signal", res.status, flush=True)
"""


def test_sigterm_mid_trial_leaves_result_json_with_status_error(tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_TRIAL, str(runs)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until a few rounds are on disk
            events = list(runs.glob("*/events.jsonl"))
            if events and events[0].read_text().count('"round_start"') >= 3:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the trial did not start within 120 s")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGTERM, (out, err)  # the process still ends as SIGTERM asks
    assert "finished without a signal" not in out
    run_dir = _only_run_dir(runs)
    saved = _check_record(run_dir, "error")
    assert saved["error"] == "terminated by SIGTERM" and saved["row"]["reason"] == "interrupted"
    events = _jsonl_lines(run_dir / rundir.EVENTS_FILE)
    assert events[-1]["type"] == "run_end" and events[-1]["reason"] == "interrupted"
    assert any(e["type"] == "trial_error" and e["error"] == "terminated by SIGTERM" for e in events)
    assert ll.load_trial(run_dir).status == "error"


# --- a full disk -------------------------------------------------------------------------------------------------

def _fill_after(monkeypatch, n_ok: int, *, path_part: str):
    """Appends to files whose name contains ``path_part`` fail with ENOSPC after ``n_ok`` batches."""
    original = rundir.JsonlAppender.append_many
    calls = {"n": 0}

    def append_many(self, records):
        if path_part in self.path.name:
            calls["n"] += 1
            if calls["n"] > n_ok:
                raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, records)

    monkeypatch.setattr(rundir.JsonlAppender, "append_many", append_many)


def test_a_full_disk_stops_the_trial_with_a_one_line_error(tmp_path, monkeypatch):
    _fill_after(monkeypatch, 40, path_part="events")
    with pytest.warns(RuntimeWarning, match="stopped: the disk holding .* is full"):
        res = ll.run_trial(ll.TrialConfig(task="debug", seed=1, max_rounds=30, runs_dir=str(tmp_path)))
    assert res.status == "error" and res.reason == "error" and "\n" not in res.error
    assert res.error.startswith("the disk holding ") and "free some space" in res.error
    assert res.eval == {"error": "not evaluated: " + res.error}
    saved = _check_record(res.run_dir, "error")
    assert saved["error"] == res.error and saved["metrics"]  # the full result still fitted
    assert len(_jsonl_lines(res.run_dir / rundir.EVENTS_FILE)) == 40  # a whole prefix, nothing after the failure
    assert not (res.run_dir / rundir.RESERVE_FILE).exists()


def test_result_json_falls_back_to_the_reserved_space(tmp_path, monkeypatch):
    real = rundir._write_atomic

    def no_space_for_results(path, text):
        if path.name in (rundir.RESULT_FILE, rundir.LEDGER_FILE):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(rundir, "_write_atomic", no_space_for_results)
    res = ll.run_trial(ll.TrialConfig(task="debug", seed=1, max_rounds=3, runs_dir=str(tmp_path)))
    assert res.status == "error" and "is full" in res.error and res.row["status"] == "error"
    saved = _check_record(res.run_dir, "error")
    assert saved["metrics"] == {} and saved["row"]["trial_id"] == res.trial_id and saved["row"]["total_rounds"] == 3
    assert not (res.run_dir / rundir.RESERVE_FILE).exists() and not (res.run_dir / rundir.LEDGER_FILE).exists()
    assert ll.load_trial(res.run_dir).status == "error"


def test_a_disk_too_full_to_start_leaves_no_run_directory(tmp_path, monkeypatch):
    def no_space(path, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rundir, "_reserve", no_space)
    with pytest.raises(rundir.DiskFullError, match="the disk holding .* is full"):
        ll.run_trial(ll.TrialConfig(task="debug", max_rounds=2, runs_dir=str(tmp_path)))
    assert list(tmp_path.iterdir()) == []
