"""The sweep-directory format: one place per trial, the attempts that did not finish kept beside it, one
sweep at a time.

::

    <out>/<trial_id>/                 the trial, finished: status ok, or budget when its own budget stopped it
    <out>/<trial_id>.failed-<N>/      an attempt that did not finish (an error, an interrupt, a killed
                                      process, the sweep's budget), kept; the next sweep runs the trial again
    <out>/.sweep/lock                 held (flock) by the sweep working in <out>, with its PID
    <out>/.sweep/running/<trial_id>/  trials under way, renamed into place when they end
    <out>/.sweep/memo/                the test runs of the sweep's trials, memoised by content and shared by
                                      its workers (:func:`latte_lab.sandbox.pytest.sharing_memo`)

A trial's directory appears by one rename of a complete run directory (:mod:`latte_lab.rundir`), so
``<out>/<trial_id>`` is never partial and never replaced: a finished trial is never run again and never
renamed.

A run directory in a sweep directory holds regular files and directories only, whichever backend ran it: a
symlink or special file an agent left in its workspace is replaced by an entry of ``special_files.json``
(:mod:`latte_lab.rundir.special`). What a result says of how its trial ended, and the name an attempt that did
not finish is kept under, are the run directory's (:mod:`latte_lab.rundir.result`); this module re-exports them.

This module was ``latte_lab.sweepdir``; that name still imports it, with a DeprecationWarning.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from latte_lab.errors import ConfigError, DataError
from latte_lab.rundir import (
    FAILED_INFIX,
    FINAL_STATUSES,
    RESULT_FILE,
    RUNNING_DIR,
    SPECIAL_FILES,
    SWEEP_DIR,
    attempt_of,
    describe_special,
    failed_result,
    is_finished,
    note_special_files,
    read_config,
    read_json,
    read_special_files,
    record_special_files,
    walk_run_dir,
    write_json_atomic,
)

__all__ = [
    "FAILED_INFIX", "FINAL_STATUSES", "KILLED_ERROR", "LOCK_FILE", "RUNNING_DIR", "SPECIAL_FILES", "SWEEP_DIR",
    "SweepLock", "attempt_of", "describe_special", "failed_result", "finish_attempt", "is_finished", "mark_failed",
    "memo_dir", "note_special_files", "read_special_files", "record_special_files", "recover_running", "running_dir",
    "set_aside", "walk_run_dir",
]

MEMO_DIR = "memo"
LOCK_FILE = "lock"
KILLED_ERROR = "the sweep stopped before this attempt finished (its process was killed); run the sweep again"


def memo_dir(out: str | Path) -> Path:
    """Where a sweep in ``out`` memoises its trials' test runs (made by the first run stored there)."""
    return Path(out) / SWEEP_DIR / MEMO_DIR


def running_dir(out: str | Path) -> Path:
    """Where a sweep in ``out`` runs its trials until they end."""
    path = Path(out) / SWEEP_DIR / RUNNING_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def _set_row_dir(run_dir: Path) -> None:
    """The row in result.json names its directory, which has just moved (read_result corrects it anyway)."""
    path = run_dir / RESULT_FILE
    try:
        payload = read_json(path)
    except DataError:
        return
    if isinstance(payload.get("row"), dict) and payload["row"].get("run_dir") != str(run_dir):
        payload["row"]["run_dir"] = str(run_dir)
        try:
            write_json_atomic(path, payload)
        except OSError:
            pass


def finish_attempt(run_dir: str | Path, out: str | Path, trial_id: str) -> Path:
    """Moves an attempt that has ended into place: ``<out>/<trial_id>`` when it finished (see
    :func:`is_finished`), else ``<out>/<trial_id>.failed-<N>`` (N = 0, 1, ...). A finished trial already
    in place is never replaced: a second one is kept as an attempt, marked as the duplicate it is.
    An attempt without a result.json gets one with status ``error`` first, and symlinks and special files
    are recorded (:func:`record_special_files`). Returns the new path."""
    run_dir, out = Path(run_dir), Path(out)
    try:
        record_special_files(run_dir)
    except OSError:  # e.g. a full disk: the files stay as they are, and the attempt still moves into place
        pass
    try:
        payload = read_json(run_dir / RESULT_FILE)
    except DataError:
        payload = mark_failed(run_dir, KILLED_ERROR)
    if is_finished(payload):
        try:
            os.rename(run_dir, out / trial_id)  # a non-empty directory there makes this fail: never replaced
            _set_row_dir(out / trial_id)
            return out / trial_id
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            mark_failed(run_dir, f"a finished run of {trial_id} was already in {out}; this duplicate was set aside",
                        keep_row=True)
    return set_aside(run_dir, out, trial_id)


def set_aside(run_dir: str | Path, out: str | Path, trial_id: str) -> Path:
    """Renames ``run_dir`` to the next free ``<out>/<trial_id>.failed-<N>``, as it is; returns the new path."""
    run_dir, out = Path(run_dir), Path(out)
    n = 0
    while True:
        target = out / f"{trial_id}{FAILED_INFIX}{n}"
        if not target.exists():
            try:
                os.rename(run_dir, target)
                _set_row_dir(target)
                return target
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        n += 1


def mark_failed(run_dir: str | Path, error: str, *, reason: str = "error", keep_row: bool = False) -> dict:
    """Writes result.json of an attempt that did not finish (:func:`~latte_lab.rundir.result.failed_result`)."""
    payload = failed_result(run_dir, error, reason=reason, keep_row=keep_row)
    write_json_atomic(Path(run_dir) / RESULT_FILE, payload)
    return payload


def recover_running(out: str | Path) -> list[Path]:
    """Puts every attempt left under way by a sweep that was killed where it belongs (see
    :func:`finish_attempt`); returns their new paths. Call it while holding the :class:`SweepLock`."""
    moved = []
    for run_dir in sorted(p for p in running_dir(out).iterdir() if p.is_dir()):
        trial_id = run_dir.name
        try:
            trial_id = read_config(run_dir).trial_id
        except DataError:
            pass
        if not (run_dir / RESULT_FILE).exists():
            mark_failed(run_dir, KILLED_ERROR)
        moved.append(finish_attempt(run_dir, out, trial_id))
    return moved


class SweepLock:
    """An exclusive lock on a sweep directory (``flock`` on ``<out>/.sweep/lock``), released when its
    holder ends, however it ends. A second sweep on the directory gets a ConfigError naming the holder.

    Processes forked while it is held share it: a sweep's workers keep the directory locked until they
    have stopped too.
    """

    def __init__(self, out: str | Path):
        self.path = Path(out) / SWEEP_DIR / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> SweepLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode("utf-8", "replace")
            os.close(fd)
            raise ConfigError(f"{self.path.parent.parent} is in use by another sweep ({_describe_holder(holder)}); "
                              "wait for it to finish or stop it, or give this sweep another out") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "started": time.strftime("%Y-%m-%d %H:%M:%S")}).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the lock goes with the last descriptor of its open file (forked workers' too)
            self._fd = None

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        pid = int(info["pid"])
    except (ValueError, KeyError, TypeError):
        return "holder unknown"
    where = f"process {pid} on {info.get('host', '?')}, started {info.get('started', '?')}"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return where + "; that process has ended and its workers are stopping"
    except PermissionError:
        pass
    return where
