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

A run directory in a sweep directory holds regular files and directories only, whichever backend ran it:
a symlink or special file an agent left in its workspace (a FIFO, a socket, a device) is replaced by an
entry of ``special_files.json`` saying what it was (``{"workspace/passwd": "symlink -> /etc/passwd",
"workspace/pipe": "fifo"}``; :func:`record_special_files`). Such a file cannot travel from a Ray node
safely, and a reader that opens every file of a run directory would follow the link or block on the FIFO.

>>> attempt_of("debug-latte-s0-1a2b3c4d5e.failed-2"), attempt_of("debug-latte-s0-1a2b3c4d5e")
(('debug-latte-s0-1a2b3c4d5e', 2), ('debug-latte-s0-1a2b3c4d5e', None))
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from latte_lab.errors import ConfigError, DataError
from latte_lab.rundir import RESULT_FILE, read_config, read_json

__all__ = [
    "FAILED_INFIX", "FINAL_STATUSES", "SPECIAL_FILES", "SWEEP_DIR", "SweepLock", "attempt_of", "describe_special",
    "finish_attempt", "is_finished", "mark_failed", "memo_dir", "note_special_files", "read_special_files", "record_special_files",
    "recover_running", "running_dir", "set_aside", "walk_run_dir",
]

SWEEP_DIR = ".sweep"
RUNNING_DIR = "running"
MEMO_DIR = "memo"
LOCK_FILE = "lock"
FAILED_INFIX = ".failed-"
SPECIAL_FILES = "special_files.json"  # in a run directory: {relative path: what was there} (record_special_files)
FINAL_STATUSES = ("ok", "budget")
"""Statuses of a finished trial; ``budget`` only when the trial's own budget stopped it (reason
``budget``), not the sweep's (reason ``sweep_budget``)."""
KILLED_ERROR = "the sweep stopped before this attempt finished (its process was killed); run the sweep again"


def is_finished(payload: dict | None) -> bool:
    """Whether a result.json payload is a finished trial (see :data:`FINAL_STATUSES`)."""
    if not payload:
        return False
    status = payload.get("status")
    return status == "ok" or (status == "budget" and (payload.get("row") or {}).get("reason") == "budget")


def attempt_of(name: str) -> tuple[str, int | None]:
    """(trial id, attempt number) of a directory name in a sweep directory; None for the trial's own.

    """
    stem, sep, n = name.rpartition(FAILED_INFIX)
    if sep and n.isdigit():
        return stem, int(n)
    return name, None


def memo_dir(out: str | Path) -> Path:
    """Where a sweep in ``out`` memoises its trials' test runs (made by the first run stored there)."""
    return Path(out) / SWEEP_DIR / MEMO_DIR


def running_dir(out: str | Path) -> Path:
    """Where a sweep in ``out`` runs its trials until they end."""
    path = Path(out) / SWEEP_DIR / RUNNING_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_json(path: Path, payload: dict) -> None:
    """Writes a JSON file whole or not at all (a temporary file renamed over it)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
            _write_json(path, payload)
        except OSError:
            pass


def walk_run_dir(run_dir: str | Path) -> Iterator[tuple[Path, str, os.stat_result | None, OSError | None]]:
    """``(path, name relative to run_dir, lstat or None, error or None)`` of everything under ``run_dir``,
    each directory before what it holds, names sorted; symlinks are never followed. A directory that cannot
    be listed, or an entry that cannot be stat'ed, comes with its error."""
    run_dir = Path(run_dir)
    stack = [run_dir]
    while stack:
        directory = stack.pop()
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            yield directory, directory.relative_to(run_dir).as_posix(), None, exc
            continue
        for name in names:
            path = directory / name
            rel = path.relative_to(run_dir).as_posix()
            try:
                st = os.lstat(path)
            except OSError as exc:
                yield path, rel, None, exc
                continue
            yield path, rel, st, None
            if stat.S_ISDIR(st.st_mode):
                stack.append(path)


def describe_special(path: str | Path, st: os.stat_result) -> str | None:
    """What a symlink or special file is, in a few words (``symlink -> /etc/passwd``, ``fifo``, ``socket``,
    ``character device 1:3``); None for a regular file or a directory."""
    mode = st.st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISLNK(mode):
        try:
            return f"symlink -> {os.readlink(path)}"
        except OSError:
            return "symlink (its target could not be read)"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "character" if stat.S_ISCHR(mode) else "block"
        return f"{kind} device {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    return f"special file (mode {oct(stat.S_IFMT(mode))})"


def read_special_files(run_dir: str | Path) -> dict[str, str]:
    """The run directory's :data:`SPECIAL_FILES` entries; ``{}`` when it has none (or the file is damaged)."""
    path = Path(run_dir) / SPECIAL_FILES
    try:
        return read_json(path) if path.exists() else {}
    except DataError:
        return {}


def note_special_files(run_dir: str | Path, entries: dict[str, str]) -> None:
    """Adds ``entries`` to the run directory's :data:`SPECIAL_FILES` (written whole or not at all)."""
    if entries:
        _write_json(Path(run_dir) / SPECIAL_FILES, {**read_special_files(run_dir), **entries})


def record_special_files(run_dir: str | Path) -> dict[str, str]:
    """Replaces every symlink and special file under ``run_dir`` by an entry of its :data:`SPECIAL_FILES`
    (see the module docstring); returns the entries. Regular files and directories are left as they are;
    nothing is ever followed or opened. The entries are written before anything is removed, so a failure
    (a full disk) leaves the files where they were."""
    found = {rel: what for path, rel, st, _ in walk_run_dir(run_dir)
             if st is not None and (what := describe_special(path, st)) is not None}
    note_special_files(run_dir, found)
    left = {}
    for rel in found:
        try:
            os.unlink(Path(run_dir) / rel)
        except OSError as exc:
            left[rel] = f"{found[rel]} (left in place: {exc.strerror})"
    note_special_files(run_dir, left)
    return {**found, **left}


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
    """Writes result.json of an attempt that did not finish: status ``error``, ``error`` and ``reason``,
    the row built from its config.json (or, with ``keep_row``, its own row with the status changed)."""
    payload = failed_result(run_dir, error, reason=reason, keep_row=keep_row)
    _write_json(Path(run_dir) / RESULT_FILE, payload)
    return payload


def failed_result(run_dir: str | Path, error: str, *, reason: str = "error", keep_row: bool = False) -> dict:
    """The result.json :func:`mark_failed` writes, for a writer of its own (a damaged result.json there is
    moved aside first, as ``result.json.damaged``)."""
    run_dir = Path(run_dir)
    row: dict = {}
    if keep_row:
        try:
            row = dict(read_json(run_dir / RESULT_FILE).get("row") or {})
        except DataError:
            row = {}
    if not row:
        try:
            cfg = read_config(run_dir)
            row = {"task": cfg.task, "team": cfg.team, "model": cfg.model, "seed": cfg.seed, "trial": cfg.trial,
                   "trial_id": cfg.trial_id, "n_workers": cfg.n_workers, "success": False}
        except DataError:
            row = {"trial_id": attempt_of(run_dir.name)[0], "success": False}
    result = run_dir / RESULT_FILE
    if not keep_row and result.exists():
        try:
            read_json(result)
        except DataError:  # keep the damaged file beside the new one: nothing is lost
            os.replace(result, result.with_name(RESULT_FILE + ".damaged"))
    row.update(status="error", error=error, reason=reason, run_dir=str(run_dir), source="latte_lab")
    return {"trial_id": row.get("trial_id"), "status": "error", "reason": reason, "error": error, "row": row,
            "metrics": {}, "eval": {}}


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
