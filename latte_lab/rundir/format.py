"""The run directory's files: their names, how they are written (whole lines, whole files, a full disk said in
one line) and read back (the one JSONL reader).

A run directory ``<runs_dir>/<trial_id>/`` holds:

- ``config.json``: the :class:`~latte_lab.config.TrialConfig`.
- ``events.jsonl``: one event per line, appended as it happens. The event types and their fields are
  declared in :mod:`latte_lab.events` (``latte_lab.events.describe()`` prints them as a table).
- ``snapshots.jsonl``: the graph per round for graph teams (round 0 = after planning), as keyframes and
  operation deltas (:mod:`latte_lab.graph.history`).
- ``calls.jsonl``: the cassette, every model call in order, enough to replay the trial offline.
- ``ledger.csv``: tokens per call with agent and round, billed vs replayed, dollars.
- ``workspace/``: the shared files as the team left them.
- ``result.json``: ``{"trial_id", "status", "error", "row", "metrics", "eval"}``; its ``row`` is the
  trial's line in the results schema (:data:`latte_lab.schema.TRIAL_COLUMNS`).
- ``special_files.json`` (in a sweep directory, when the agents left any): the symlinks and special files
  of the workspace, replaced by what they were (:mod:`latte_lab.rundir.special`).

>>> import tempfile
>>> tmp = tempfile.TemporaryDirectory()
>>> run = RunWriter(new_run_dir(tmp.name, "demo"))
>>> run.append_event({"type": "round_start", "seq": 0})
>>> [e["type"] for e in read_jsonl(run.path / EVENTS_FILE)]
['round_start']
>>> run.close(); tmp.cleanup()
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError, DataError
from latte_lab.graph.history import GraphHistory
from latte_lab.schema import SCHEMA_VERSION, check_schema_version

CONFIG_FILE = "config.json"
EVENTS_FILE = "events.jsonl"
SNAPSHOTS_FILE = "snapshots.jsonl"
CALLS_FILE = "calls.jsonl"
LEDGER_FILE = "ledger.csv"
RESULT_FILE = "result.json"
STATE_FILE = "state.jsonl"  # the trial's state at each round's end, from which a fork starts (latte_lab.teams.state)
WORKSPACE_DIR = "workspace"
# A sweep folder: its finished trials' run directories, and its own area (latte_lab.sweep.sweepdir) in which the
# trials run until they end.
SWEEP_DIR = ".sweep"
RUNNING_DIR = "running"

__all__ = [
    "RUNNING_DIR",
    "SWEEP_DIR",
    "CALLS_FILE", "CONFIG_FILE", "EVENTS_FILE", "LEDGER_FILE", "RESULT_FILE", "SNAPSHOTS_FILE", "STATE_FILE",
    "WORKSPACE_DIR",
    "DiskFullError", "JsonlAppender", "RunWriter", "check_writable_dir", "config_json", "disk_full_message", "finished_row",
    "is_disk_full", "iter_jsonl", "iter_snapshots", "new_run_dir", "promote", "read_config", "read_json", "read_jsonl",
    "read_result", "read_snapshots", "write_json_atomic",
]


# --- reading ------------------------------------------------------------------------------------------------

def iter_jsonl(path: str | Path) -> Iterator[dict]:
    """The JSON objects of a JSONL file, one per non-blank line, in order.

    Damage gets a one-line :class:`DataError` naming the file and line: bytes that are not UTF-8, a
    line cut off at the end of the file, a line that is not a JSON object.
    """
    path = Path(path)
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    with fh:
        for i, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}, line {i}: byte {exc.start + 1} is not UTF-8; the file is damaged "
                                "(restore it or remove that line)") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                if not raw.endswith(b"\n"):
                    raise DataError(f"{path}, line {i}: cut off mid-line (its writer stopped or the disk "
                                    "filled); remove that last line to read the rest") from None
                raise DataError(f"{path}, line {i}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(record, dict):
                raise DataError(f"{path}, line {i}: expected a JSON object, got {type(record).__name__}")
            yield record


def read_jsonl(path: str | Path, *, missing_ok: bool = True) -> list[dict]:
    """Every record of a JSONL file (see :func:`iter_jsonl`); ``[]`` for a missing file if ``missing_ok``."""
    path = Path(path)
    if missing_ok and not path.exists():
        return []
    return list(iter_jsonl(path))


def read_snapshots(run_dir: str | Path) -> GraphHistory:
    """The graph per round of a run directory, read when first used (see :mod:`latte_lab.graph.history`)."""
    path = Path(run_dir) / SNAPSHOTS_FILE
    return GraphHistory(loader=lambda: read_jsonl(path))


def iter_snapshots(run_dir: str | Path) -> Iterator[dict]:
    """The graph snapshots of a run directory, ``{"round", "t", "graph"}`` in round order."""
    yield from read_snapshots(run_dir)


def read_json(path: str | Path) -> dict:
    """A JSON object from a file, with a one-line DataError when it is missing, not UTF-8 or not JSON."""
    path = Path(path)
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path} is missing") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: byte {exc.start + 1} is not UTF-8; the file is damaged") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_config(run_dir: str | Path) -> TrialConfig:
    """The TrialConfig a run directory was made with."""
    path = Path(run_dir) / CONFIG_FILE
    data = read_json(path)
    check_schema_version(data.pop("schema_version", None), str(path))
    try:
        return TrialConfig(**data)
    except (TypeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise DataError(f"{path}: not a valid trial config ({first})") from None


def read_result(run_dir: str | Path) -> dict:
    """The ``result.json`` payload; its row's ``run_dir`` is where the directory is now."""
    run_dir = Path(run_dir)
    payload = read_json(run_dir / RESULT_FILE)
    row = payload.get("row")
    if not isinstance(row, dict):
        raise DataError(f"{run_dir / RESULT_FILE}: no 'row' object")
    row["run_dir"] = str(run_dir)
    return payload


def finished_row(run_dir: str | Path) -> dict | None:
    """The results row of a trial that finished with status ok, else None (missing, damaged, errored)."""
    try:
        payload = read_result(run_dir)
    except DataError:
        return None
    return payload["row"] if payload.get("status") == "ok" else None


# --- writing ------------------------------------------------------------------------------------------------

def config_json(config: TrialConfig) -> str:
    """config.json's text: ``schema_version`` (:data:`latte_lab.schema.SCHEMA_VERSION`), then the config's fields."""
    return json.dumps({"schema_version": SCHEMA_VERSION, **json.loads(config.to_json())}, indent=2)


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
RESULT_RESERVE_BYTES = 32 * 1024
"""Space set aside when a run directory is made, so that a result.json marking the trial as failed can
still be written when the disk fills up (its results row alone is about 5 KB)."""
RESERVE_FILE = RESULT_FILE + ".reserve"


class DiskFullError(Exception):
    """The disk holding a run directory is full; the trial stops.

    Not a LatteError: the team engine turns LatteErrors raised by an action into a message to the agent
    and carries on, and a full disk must stop the trial instead.
    """


def is_disk_full(exc: BaseException) -> bool:
    """True for an OSError saying that the disk (or the user's quota) is full."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def disk_full_message(path: str | Path, exc: OSError | None = None) -> str:
    """One line saying which disk is full and what to do."""
    why = exc.strerror if exc is not None and exc.strerror else "No space left on device"
    return f"the disk holding {path} is full ({why}): free some space, then run the trial again"


def unwritable_message(path: str | Path, exc: OSError) -> str:
    """One line saying that run directories cannot be written in ``path``, why, and what to do."""
    path = Path(path)
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), path)
        why = "it is a file, not a directory" if blocker == path else f"{blocker} is a file, not a directory"
    elif exc.errno == errno.EROFS:
        why = "it is on a read-only file system"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = "permission denied (the directory is read-only for this user)"
    elif exc.errno == errno.ENOENT:
        why = "its file system allows no new directory there (No such file or directory)"
    else:
        why = exc.strerror or str(exc)
    return f"cannot write run directories in {path}: {why}; choose a writable directory"


def check_writable_dir(path: str | Path) -> Path:
    """Makes ``path`` (and its parents) if needed and proves it writable by creating and removing a file in
    it. A path where run directories cannot be written (a file, a read-only or virtual file system, no
    permission) is a one-line ConfigError naming it and why; a full disk is a :class:`DiskFullError`."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".latte_lab-write-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFullError(disk_full_message(path, exc)) from None
        raise ConfigError(unwritable_message(path, exc)) from None
    return path


def new_run_dir(runs_dir: str | Path, name: str) -> Path:
    """A new empty directory ``runs_dir/name`` (``name-2``, ``name-3``, ... if taken: never overwritten).

    A ``runs_dir`` where it cannot be made is a one-line ConfigError (see :func:`check_writable_dir`)."""
    runs_dir = Path(runs_dir)
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        k = 1
        path = runs_dir / name
        while True:
            try:
                path.mkdir()
                return path
            except FileExistsError:  # mkdir itself decides, so two processes never share a directory
                k += 1
                path = runs_dir / f"{name}-{k}"
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFullError(disk_full_message(runs_dir, exc)) from None
        raise ConfigError(unwritable_message(runs_dir, exc)) from None


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_json_default)  # json.dumps would build one per line


def _dumps(record: Any) -> str:
    return _ENCODER.encode(record)


class JsonlAppender:
    """Appends JSON records to a file, each batch whole or not at all.

    A batch is one write on an ``O_APPEND`` descriptor; if it fails part way (a full disk), the file is cut
    back to where the batch began, so every line on disk parses, and the error is raised.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        return self._fd

    def append(self, record: dict) -> None:
        self.append_many((record,))

    def append_many(self, records: Iterable[dict]) -> None:
        self.append_text("".join(_dumps(r) + "\n" for r in records))

    def append_text(self, text: str) -> None:
        """Appends lines already serialised (each ending with a newline), whole or not at all."""
        data = text.encode("utf-8", "backslashreplace")  # a lone surrogate in a JSON string: its \u escape
        if not data:
            return
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        try:
            done = os.write(self._fd, data)  # all of it, unless interrupted part way
            if done < len(data):
                view = memoryview(data)
                while done < len(data):
                    done += os.write(self._fd, view[done:])
        except OSError:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def write_json_atomic(path: Path, payload: dict) -> None:
    """Writes ``payload`` as a JSON file whole or not at all (a temporary file renamed over it)."""
    _write_atomic(Path(path), json.dumps(payload, indent=2, default=str))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _reserve(path: Path, size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.write(fd, bytes(size))  # a file system without fallocate: write the blocks instead
    finally:
        os.close(fd)


class RunWriter:
    """Writes the files of one run directory (which must exist, e.g. from :func:`new_run_dir`).

    Space for a short result.json is reserved first. The first write that finds the disk full raises
    :class:`DiskFullError` with a one-line message; from then on events and snapshots are no longer
    appended (what is on disk is a whole prefix), and :meth:`write_result` falls back to the reserve.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.workspace = self.path / WORKSPACE_DIR
        self.calls_path = self.path / CALLS_FILE
        self.disk_full: str | None = None  # the one-line message once the disk has filled up
        try:
            _reserve(self.path / RESERVE_FILE, RESULT_RESERVE_BYTES)
            self._events = JsonlAppender(self.path / EVENTS_FILE)
            self._snapshots = JsonlAppender(self.path / SNAPSHOTS_FILE)
            self._state = JsonlAppender(self.path / STATE_FILE)
        except OSError as exc:
            self._give_up(exc)

    def _give_up(self, exc: OSError):
        """Raises DiskFullError for a full disk (noting it), or the error itself."""
        if not is_disk_full(exc):
            raise exc
        if self.disk_full is None:
            self.disk_full = disk_full_message(self.path, exc)
        raise DiskFullError(self.disk_full) from None

    def _append(self, appender: JsonlAppender, text: str) -> None:
        """Lines already serialised, whole or not at all; nothing once the disk has filled up."""
        if self.disk_full is not None:
            return
        try:
            appender.append_text(text)
        except OSError as exc:
            self._give_up(exc)

    def write_config(self, config: TrialConfig) -> None:
        try:
            _write_atomic(self.path / CONFIG_FILE, config_json(config))
        except OSError as exc:
            self._give_up(exc)

    def append_event(self, event: dict) -> None:
        self._append(self._events, _dumps(event) + "\n")

    def append_snapshots(self, snapshots: Iterable[dict]) -> None:
        self._append(self._snapshots, "".join(_dumps(r) + "\n" for r in snapshots))

    def append_state(self, line: dict) -> None:
        """One line of ``state.jsonl`` (the trial's state at a round's end)."""
        self._append(self._state, _dumps(line) + "\n")

    def append_state_lines(self, text: str) -> None:
        """Lines of ``state.jsonl`` already serialised (a fork's copy of its parent's)."""
        self._append(self._state, text)

    def write_ledger(self, csv_text: str) -> None:
        """The cost ledger's CSV text (``CostLedger.to_csv``); skipped once the disk is full."""
        if self.disk_full is not None:
            return
        try:
            _write_atomic(self.path / LEDGER_FILE, csv_text)
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            self.disk_full = disk_full_message(self.path, exc)

    def write_result(self, payload: dict) -> dict:
        """Writes result.json and returns what was written.

        When the disk is full, a short result marking the trial as failed goes into the reserved space
        instead: status ``error``, the one-line error, the scalar results row, no metrics.
        """
        reserve = self.path / RESERVE_FILE
        payload = {"schema_version": SCHEMA_VERSION, **payload}
        try:
            _write_atomic(self.path / RESULT_FILE, json.dumps(payload, indent=2, default=_json_default))
        except OSError as exc:
            if not is_disk_full(exc) or not reserve.exists():
                raise
            self.disk_full = self.disk_full or disk_full_message(self.path, exc)
            payload = _short_result(payload, self.disk_full)
            data = json.dumps(payload, default=_json_default).encode("utf-8")
            if len(data) > RESULT_RESERVE_BYTES:
                payload = _short_result(payload, self.disk_full, fields=SHORT_ROW_FIELDS)
                data = json.dumps(payload, default=_json_default).encode("utf-8")
            with open(reserve, "r+b") as fh:  # overwrites blocks already allocated: needs no free space
                fh.write(data)
                fh.truncate(len(data))
            os.replace(reserve, self.path / RESULT_FILE)
            return payload
        reserve.unlink(missing_ok=True)
        return payload

    def close(self) -> None:
        for appender in (getattr(self, "_events", None), getattr(self, "_snapshots", None),
                         getattr(self, "_state", None)):
            if appender is not None:
                appender.close()


SHORT_ROW_FIELDS = ("source", "task", "team", "model", "seed", "trial", "trial_id", "status", "error", "run_dir",
                    "n_workers", "reason", "total_rounds")
"""What a failed trial's row keeps when even its scalar results do not fit in the reserve."""


def _short_result(payload: dict, disk_full: str, fields: Iterable[str] | None = None) -> dict:
    """A result small enough for the reserve: status error, reason error, the scalar row (or only ``fields`` of
    it)."""
    error = str(payload.get("error") or disk_full)[:2000] if payload.get("status") != "ok" else disk_full
    row = {k: v for k, v in (payload.get("row") or {}).items() if not isinstance(v, list | dict)}
    if fields is not None:
        row = {k: row.get(k) for k in fields}
    # a trial whose record did not fit is an error, not a result
    row.update(status="error", error=error, reason="error", success=False, accuracy=None)
    return {"schema_version": SCHEMA_VERSION, "trial_id": payload.get("trial_id"), "status": "error",
            "reason": "error", "error": error, "row": row, "metrics": {}, "eval": {},
            "note": "written to the reserved space: the disk was full, so the metrics were left out"}


def promote(tmp: str | Path, final: str | Path) -> Path:
    """Renames a finished run directory to ``final``; an earlier directory there is kept beside it as
    ``<final>-failed-<k>`` (never deleted). Returns ``final``."""
    tmp, final = Path(tmp), Path(final)
    if final.exists():
        k = 0
        while (aside := final.with_name(f"{final.name}-failed-{k}")).exists():
            k += 1
        final.rename(aside)
    tmp.rename(final)
    result = final / RESULT_FILE
    if result.exists():  # the row names its directory, and it has just moved
        payload = read_json(result)
        if isinstance(payload.get("row"), dict):
            payload["row"]["run_dir"] = str(final)
            try:
                _write_atomic(result, json.dumps(payload, indent=2, default=_json_default))
            except OSError as exc:  # read_result puts the right run_dir in the row anyway
                if not is_disk_full(exc):
                    raise
    return final
