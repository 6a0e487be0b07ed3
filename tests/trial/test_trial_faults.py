"""Trials that meet a full disk, SIGTERM, an interrupt or a refused connection: each leaves one run directory
whose result.json says what happened, and whose JSONL files parse line by line."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import latte_lab as ll
from latte_lab import rundir
from latte_lab.models.scripted import ScriptedModel
from latte_lab.trial import comparable_events

# Trials that must still be running when a signal arrives: never served from the session's shared memo.
pytestmark = pytest.mark.usefixtures("no_shared_memo")

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


@pytest.mark.parametrize("step", ["setup", "planning"])
@pytest.mark.parametrize("team", ll.teams.names())
def test_an_interrupt_before_the_first_round_still_leaves_a_whole_record(tmp_path, monkeypatch, team, step):
    """A SIGTERM or Ctrl-C landing while the team sets up (before a graph team has its graph): the record
    is written as for any interrupt, not lost to an error in its own making."""
    from latte_lab.trial import team_class

    def stopped(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(team_class(team), step, stopped)
    with pytest.raises(KeyboardInterrupt, match="partial record"):
        ll.run_trial(ll.TrialConfig(task="debug", team=team, max_rounds=3, runs_dir=str(tmp_path)))
    saved = _check_record(_only_run_dir(tmp_path), "error")
    assert saved["row"]["reason"] == "interrupted" and saved["row"]["tasks_done"] == 0


def test_an_interrupt_during_the_evaluation_still_leaves_a_whole_record(tmp_path, monkeypatch):
    """A notebook's stop button pressed while the hidden suite runs, after the last round."""
    def interrupted(self, workspace):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(ll.tasks.get("debug")), "evaluate", interrupted)
    with pytest.raises(KeyboardInterrupt, match="partial record"):
        ll.run_trial(ll.TrialConfig(task="debug", max_rounds=2, runs_dir=str(tmp_path)))
    run_dir = _only_run_dir(tmp_path)
    saved = _check_record(run_dir, "error")
    assert saved["row"]["reason"] == "interrupted" and "while its record was being written" in saved["error"]
    assert not (run_dir / rundir.RESERVE_FILE).exists()
    assert len(ll.load_runs(tmp_path, include_errors=True).trials) == 1


def test_a_record_that_cannot_be_completed_is_written_as_failed_and_the_error_raised(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("latte_lab.metrics.trial_metrics", broken)
    with pytest.raises(ZeroDivisionError):
        ll.run_trial(ll.TrialConfig(task="debug", max_rounds=2, runs_dir=str(tmp_path)))
    saved = _check_record(_only_run_dir(tmp_path), "error")
    assert saved["error"] == "the trial's record could not be completed: ZeroDivisionError: division by zero"


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
from latte_lab.trial import comparable_events

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
    original = rundir.JsonlAppender.append_text  # every append, of one record or a batch, is one of these
    calls = {"n": 0}

    def append_text(self, text):
        if path_part in self.path.name:
            calls["n"] += 1
            if calls["n"] > n_ok:
                raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, text)

    monkeypatch.setattr(rundir.JsonlAppender, "append_text", append_text)


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
    real = rundir.format._write_atomic

    def no_space_for_results(path, text):
        if path.name in (rundir.RESULT_FILE, rundir.LEDGER_FILE):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(rundir.format, "_write_atomic", no_space_for_results)
    res = ll.run_trial(ll.TrialConfig(task="debug", seed=1, max_rounds=3, runs_dir=str(tmp_path)))
    assert res.status == "error" and "is full" in res.error and res.row["status"] == "error"
    saved = _check_record(res.run_dir, "error")
    assert saved["metrics"] == {} and saved["row"]["trial_id"] == res.trial_id and saved["row"]["total_rounds"] == 3
    assert saved["reason"] == saved["row"]["reason"] == res.reason == "error"  # as the README says
    assert saved["row"]["success"] is False and res.success is False and "SUCCESS" not in res.summary()
    assert not (res.run_dir / rundir.RESERVE_FILE).exists() and not (res.run_dir / rundir.LEDGER_FILE).exists()
    assert ll.load_trial(res.run_dir).status == "error"


def test_a_ledger_that_does_not_fit_makes_the_trial_an_error(tmp_path, monkeypatch):
    """The disk fills exactly when the ledger is written: the record is incomplete, so the trial is an error
    (reason error, in result.json's own ``reason`` too), not a success with a ledger missing."""
    real = rundir.format._write_atomic

    def no_space_for_the_ledger(path, text):
        if path.name == rundir.LEDGER_FILE:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(rundir.format, "_write_atomic", no_space_for_the_ledger)
    res = ll.run_trial(ll.TrialConfig(task="debug", seed=1, max_rounds=3, runs_dir=str(tmp_path)))
    assert res.status == "error" and res.reason == "error" and res.error.startswith("the disk holding ")
    saved = _check_record(res.run_dir, "error")
    assert saved["reason"] == saved["row"]["reason"] == "error" and saved["row"]["success"] is False


def test_the_command_line_on_a_full_disk_exits_non_zero(tiny_tmpfs):
    done = subprocess.run([sys.executable, "-m", "latte_lab.cli", "run", "--task", "debug", "--runs-dir",
                           str(tiny_tmpfs / "runs"), "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stderr and "is full (No space left on device)" in done.stdout + done.stderr
    saved = json.loads((_only_run_dir(tiny_tmpfs / "runs") / rundir.RESULT_FILE).read_text())
    assert saved["status"] == "error" and saved["reason"] == saved["row"]["reason"] == "error"


def test_a_disk_too_full_to_start_leaves_no_run_directory(tmp_path, monkeypatch):
    def no_space(path, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rundir.format, "_reserve", no_space)
    with pytest.raises(rundir.DiskFullError, match="the disk holding .* is full"):
        ll.run_trial(ll.TrialConfig(task="debug", max_rounds=2, runs_dir=str(tmp_path)))
    assert list(tmp_path.iterdir()) == []


@pytest.fixture()
def tiny_tmpfs(tmp_path):
    """A 256 KiB tmpfs (root only; a debug trial writes more than that): skipped with the reason when it cannot be mounted."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 256 KiB tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_trial_on_a_256_kib_tmpfs_ends_with_a_readable_error_record(tiny_tmpfs):
    runs = tiny_tmpfs / "runs"
    code = textwrap.dedent(f"""
        import warnings, latte_lab as ll
        warnings.simplefilter("ignore")
        res = ll.run_trial(ll.TrialConfig(task="debug", team="latte", seed=0, max_rounds=40, runs_dir={str(runs)!r}))
        print(res.status)
        print(res.error)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stderr == "", done.stderr  # no traceback
    status, error = done.stdout.splitlines()
    assert status == "error" and error.startswith("the disk holding ") and "No space left on device" in error
    run_dir = _only_run_dir(runs)
    saved = _check_record(run_dir, "error")
    assert saved["error"] == error
    assert _jsonl_lines(run_dir / rundir.EVENTS_FILE) and _jsonl_lines(run_dir / rundir.CALLS_FILE)


# --- the response cache: read-only, full ---------------------------------------------------------------------

def _scripted_policy(req):
    if req.view.round == 0:
        return DISCOVER
    task = (req.view.current_task or {}).get("id")
    return f'<claim_task id="{task}" />' if task else "Nothing to do."


def _fill_cache(path: Path, runs: Path, *, checkpoint: bool = True) -> ll.TrialResult:
    """A trial of an 'openai' model whose replies a script writes, stored in the cache at ``path``; then,
    with ``checkpoint``, the cache is one file (no -wal or -shm beside it)."""
    from latte_lab.models.cache import CachedModel, ResponseCache

    cache = ResponseCache(path)
    try:
        cfg = ll.TrialConfig(task="debug", model="openai/gpt-4o-mini", max_rounds=3, runs_dir=str(runs))
        res = ll.run_trial(cfg, model=CachedModel(ScriptedModel(_scripted_policy), cache, "read_write"))
    finally:
        cache.close()
    with ResponseCache(path, read_only=True) as stored:
        assert res.status == "ok" and len(stored) > 3
    if not checkpoint:
        return res
    last = sqlite3.connect(path)  # the last connection to close checkpoints the WAL and removes its files
    last.execute("SELECT COUNT(*) FROM responses").fetchone()
    last.close()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    return res


@pytest.fixture()
def read_only_mount(tmp_path):
    """(source, mount): ``mount`` shows ``source`` read-only (a bind mount; root only, else skipped)."""
    src, dst = tmp_path / "cache-src", tmp_path / "cache-ro"
    src.mkdir()
    dst.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    for cmd in (["mount", "--bind", str(src), str(dst)], ["mount", "-o", "remount,bind,ro", str(dst)]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(dst)], check=False, capture_output=True)
            pytest.skip(f"cannot make a read-only bind mount here: {done.stderr.strip() or done.returncode}")
    try:
        yield src, dst
    finally:
        subprocess.run(["umount", "-l", str(dst)], check=False)


@pytest.mark.parametrize("checkpoint", [True, False], ids=["one-file", "with-wal-files"])
def test_replay_works_from_a_read_only_bind_mount_of_a_valid_cache(read_only_mount, tmp_path, monkeypatch,
                                                                  checkpoint):
    src, ro = read_only_mount
    original = _fill_cache(src / "responses.sqlite", tmp_path / "runs", checkpoint=checkpoint)
    files = {p.name: p.stat().st_mtime_ns for p in ro.iterdir()}
    assert ("responses.sqlite-wal" in files) is not checkpoint
    with pytest.raises(OSError):
        (ro / "probe").write_text("x")  # the mount is read-only indeed
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = original.config.model_copy(update={"cache": "replay", "cache_path": str(ro / "responses.sqlite"),
                                            "runs_dir": str(tmp_path / "again")})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        again = ll.run_trial(cfg)
    assert not [w for w in seen if "cache" in str(w.message)]  # replay reads a read-only cache without a word
    assert again.status == "ok", again.error
    assert comparable_events(again.event_list) == comparable_events(original.event_list)
    assert {p.name: p.stat().st_mtime_ns for p in ro.iterdir()} == files  # nothing written or created
    # read_write on the same mount: the cache serves what it holds, with a warning, and stores nothing
    with pytest.warns(RuntimeWarning, match="is read-only: it serves stored responses and stores no new ones"):
        rw = ll.run_trial(cfg.model_copy(update={"cache": "read_write", "runs_dir": str(tmp_path / "rw")}),
                          model=_cached(ro / "responses.sqlite"))
    assert rw.status == "ok" and all(e["cached"] for e in rw.event_list if e["type"] == "agent_reply")


def _cached(path: Path):
    from latte_lab.models.cache import CachedModel, ResponseCache

    return CachedModel(ScriptedModel(_scripted_policy), ResponseCache(path), "read_write")


def test_a_full_cache_disk_turns_storing_off_and_the_trial_goes_on(tiny_tmpfs, tmp_path):
    cache_path = tiny_tmpfs / "responses.sqlite"
    model = _cached(cache_path)
    free = os.statvfs(tiny_tmpfs)
    (tiny_tmpfs / "filler").write_bytes(b"x" * (free.f_bavail * free.f_frsize - 48 * 1024))  # room for a few rows
    cfg = ll.TrialConfig(task="debug", model="openai/gpt-4o-mini", max_rounds=6, runs_dir=str(tmp_path / "runs"))
    with pytest.warns(RuntimeWarning, match="cannot store more responses .*storing is off for the rest of this trial"):
        res = ll.run_trial(cfg, model=model)
    assert res.status == "ok" and res.rounds == 6
    assert model.cache.writes_off is not None
    stored = len(model.cache)
    assert 0 < stored < sum(1 for e in res.event_list if e["type"] == "agent_reply")


# --- replaying a failed trial, damaged cassettes ----------------------------------------------------------------

def _failed_run(runs: Path) -> ll.TrialResult:
    def policy(req):
        if req.view.round == 2 and req.scope.agent == "Dev1":
            raise ll.ModelError("the provider is unavailable")
        return DISCOVER if req.view.round == 0 else "Nothing to do."

    res = ll.run_trial(ll.TrialConfig(task="debug", model="scripted", max_rounds=5, runs_dir=str(runs)),
                       model=ScriptedModel(policy))
    assert res.status == "error"
    return res


def test_replaying_a_failed_trial_says_the_original_failed(tmp_path, capsys):
    from latte_lab.cli import main

    res = _failed_run(tmp_path / "runs")
    code = main(["replay", str(res.run_dir), "--runs-dir", str(tmp_path / "r"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1
    assert "the original trial failed (ModelError: the provider is unavailable)" in out
    assert "matches" not in out


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-25], r"calls.jsonl, line \d+: cut off mid-line"),
    (lambda b: b.replace(b'"Nothing to do."', b'"Nothing \xff do."', 1), r"calls.jsonl, line \d+: byte \d+ is not UTF-8"),
])
def test_a_damaged_cassette_is_one_line_everywhere_it_is_read(tmp_path, capsys, damage, message):
    from latte_lab.cli import main
    from latte_lab.models.cassette import CassetteModel, import_cassettes

    res = ll.run_trial(ll.TrialConfig(task="debug", model="scripted", max_rounds=2, runs_dir=str(tmp_path)),
                       model=ScriptedModel(lambda req: DISCOVER if req.view.round == 0 else "Nothing to do."))
    cassette = res.run_dir / rundir.CALLS_FILE
    cassette.write_bytes(damage(cassette.read_bytes()))
    for read in (lambda: CassetteModel(res.run_dir), lambda: ll.replay(res.run_dir),
                 lambda: import_cassettes([res.run_dir], None)):
        with pytest.raises(ll.DataError, match=message) as info:
            read()
        assert "\n" not in str(info.value)
    assert main(["replay", str(res.run_dir), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err


def test_a_trial_freezes_older_objects_for_the_garbage_collector_while_it_runs_only(tmp_path):
    """Objects older than a running trial are left out of garbage collections while it runs (``gc.freeze``),
    handed back when it ends, also when it fails; a process that froze objects itself is left as it is."""
    import gc

    frozen_before = gc.get_freeze_count()
    gc.unfreeze()
    try:
        during: list[int] = []
        cfg = {"task": "debug", "team": "latte", "model": "simulated", "seed": 0, "max_rounds": 2,
               "runs_dir": str(tmp_path / "a")}
        ll.run_trial(cfg, progress=lambda info: during.append(gc.get_freeze_count()))
        assert during and all(n > 0 for n in during) and gc.get_freeze_count() == 0

        failing = ScriptedModel([])  # no reply scripted: the first call fails and the trial ends with an error
        res = ll.run_trial({**cfg, "runs_dir": str(tmp_path / "b")}, model=failing)
        assert res.status == "error" and gc.get_freeze_count() == 0

        gc.freeze()  # the process's own: the trial neither adds to it nor hands it back
        from latte_lab import trial as trial_module

        during.clear()
        ll.run_trial({**cfg, "runs_dir": str(tmp_path / "c")},
                     progress=lambda info: during.append(trial_module._FROZEN["mine"]))
        assert during and not any(during) and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        if frozen_before:
            gc.freeze()


def test_a_sweep_on_a_full_disk_is_refused_in_one_line(tiny_tmpfs):
    filler = tiny_tmpfs / "filler"
    with open(filler, "wb") as fh, contextlib.suppress(OSError):  # fill every block of the tmpfs
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    with pytest.raises((ll.errors.LatteError, rundir.DiskFullError)) as caught:
        ll.run_sweep({"task": "debug", "replicates": 1, "max_rounds": 2}, out=tiny_tmpfs / "sweep", progress=False)
    assert "\n" not in str(caught.value) and ("full" in str(caught.value) or "No space" in str(caught.value))
