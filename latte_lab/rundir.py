"""The run directory of a trial: its files, how they are written and read back, and ``load_trial``.

A run directory ``<runs_dir>/<trial_id>/`` holds:

- ``config.json``: the :class:`~latte_lab.config.TrialConfig`.
- ``events.jsonl``: one event per line, appended as it happens. The event types and their fields are
  declared in :mod:`latte_lab.events` (``latte_lab.events.describe()`` prints them as a table).
- ``snapshots.jsonl``: the graph per round for graph teams (round 0 = after planning), as keyframes and
  operation deltas (:mod:`latte_lab.history`).
- ``calls.jsonl``: the cassette, every model call in order, enough to replay the trial offline.
- ``ledger.csv``: tokens per call with agent and round, billed vs replayed, dollars.
- ``workspace/``: the shared files as the team left them.
- ``result.json``: ``{"trial_id", "status", "error", "row", "metrics", "eval"}``; its ``row`` is the
  trial's line in the results schema (:data:`latte_lab.schema.TRIAL_COLUMNS`).

>>> import tempfile
>>> run = RunWriter(new_run_dir(tempfile.mkdtemp(), "demo"))
>>> run.append_event({"type": "round_start", "seq": 0})
>>> [e["type"] for e in read_jsonl(run.path / EVENTS_FILE)]
['round_start']
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from latte_lab.config import TrialConfig
from latte_lab.errors import DataError
from latte_lab.history import GraphHistory

CONFIG_FILE = "config.json"
EVENTS_FILE = "events.jsonl"
SNAPSHOTS_FILE = "snapshots.jsonl"
CALLS_FILE = "calls.jsonl"
LEDGER_FILE = "ledger.csv"
RESULT_FILE = "result.json"
WORKSPACE_DIR = "workspace"

__all__ = [
    "CALLS_FILE", "CONFIG_FILE", "EVENTS_FILE", "LEDGER_FILE", "RESULT_FILE", "SNAPSHOTS_FILE", "WORKSPACE_DIR",
    "JsonlAppender", "RunWriter", "TrialResult", "finished_row", "iter_jsonl", "iter_snapshots", "load_trial", "new_run_dir",
    "promote", "read_config", "read_json", "read_jsonl", "read_result", "read_snapshots",
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
    """The graph per round of a run directory, read when first used (see :mod:`latte_lab.history`)."""
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

def new_run_dir(runs_dir: str | Path, name: str) -> Path:
    """A new empty directory ``runs_dir/name`` (``name-2``, ``name-3``, ... if taken: never overwritten)."""
    runs_dir = Path(runs_dir)
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


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def _dumps(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False, default=_json_default)


class JsonlAppender:
    """Appends JSON records to a file, each batch whole or not at all.

    A batch is one write on an ``O_APPEND`` descriptor; if it fails part way (a full disk), the file is cut
    back to where the batch began, so every line on disk parses, and the error is raised.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size

    def append(self, record: dict) -> None:
        self.append_many((record,))

    def append_many(self, records: Iterable[dict]) -> None:
        data = "".join(_dumps(r) + "\n" for r in records).encode("utf-8")
        if not data:
            return
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        view, done = memoryview(data), 0
        try:
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


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class RunWriter:
    """Writes the files of one run directory (which must exist, e.g. from :func:`new_run_dir`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.workspace = self.path / WORKSPACE_DIR
        self.calls_path = self.path / CALLS_FILE
        self._events = JsonlAppender(self.path / EVENTS_FILE)
        self._snapshots = JsonlAppender(self.path / SNAPSHOTS_FILE)

    def write_config(self, config: TrialConfig) -> None:
        _write_atomic(self.path / CONFIG_FILE, config.to_json())

    def append_event(self, event: dict) -> None:
        self._events.append(event)

    def append_snapshots(self, snapshots: Iterable[dict]) -> None:
        self._snapshots.append_many(snapshots)

    def write_ledger(self, frame) -> None:
        """The cost ledger (a pandas DataFrame) as CSV."""
        _write_atomic(self.path / LEDGER_FILE, frame.to_csv(index=False))

    def write_result(self, payload: dict) -> None:
        _write_atomic(self.path / RESULT_FILE, json.dumps(payload, indent=2, default=_json_default))

    def close(self) -> None:
        self._events.close()
        self._snapshots.close()


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
            _write_atomic(result, json.dumps(payload, indent=2, default=_json_default))
    return final


# --- a trial read back --------------------------------------------------------------------------------------

@dataclass
class TrialResult:
    """What a trial produced. ``row`` is its line in the tidy results schema (``ll.load_runs``)."""

    config: TrialConfig
    trial_id: str
    status: str  # "ok" or "error"
    error: str | None
    success: bool
    accuracy: float | None
    rounds: int
    input_tokens: int
    output_tokens: int
    virtual_seconds: float
    real_seconds: float
    reason: str
    metrics: dict = field(default_factory=dict)
    eval: dict = field(default_factory=dict)
    row: dict = field(default_factory=dict)
    run_dir: Path | None = None
    event_list: list[dict] = field(default_factory=list, repr=False)
    snapshots: Sequence[dict] = field(default_factory=GraphHistory, repr=False)
    """The graph per round (graph teams): ``snapshots[i]`` is ``{"round", "t", "graph"}``."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def events(self):
        """The event log as a pandas DataFrame (one row per event)."""
        import pandas as pd

        return pd.DataFrame(self.event_list)

    def summary(self) -> str:
        acc = "n/a" if self.accuracy is None else f"{self.accuracy:.0%}"
        head = f"{self.trial_id}: {'SUCCESS' if self.success else 'no success'} ({self.reason})"
        if self.status != "ok":
            head += f" — ERROR: {self.error}"
        return (f"{head}\n  accuracy {acc} · rounds {self.rounds} · tokens {self.tokens:,} "
                f"(in {self.input_tokens:,} / out {self.output_tokens:,}) · virtual {self.virtual_seconds:.1f} s · "
                f"real {self.real_seconds:.1f} s\n  run directory: {self.run_dir}")

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:  # a compact card in notebooks
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"


def load_trial(run_dir: str | Path) -> TrialResult:
    """Reads a finished run directory back into a TrialResult (no model calls, nothing rerun)."""
    run_dir = Path(run_dir)
    for name in (CONFIG_FILE, RESULT_FILE):
        if not (run_dir / name).exists():
            raise DataError(f"{run_dir / name} is missing: {run_dir} is not a finished latte_lab run directory")
    config = read_config(run_dir)
    payload = read_result(run_dir)
    row = payload["row"]
    return TrialResult(
        config=config, trial_id=payload.get("trial_id", config.trial_id), status=payload.get("status", "ok"),
        error=payload.get("error"), success=bool(row.get("success")), accuracy=row.get("accuracy"),
        rounds=int(row.get("total_rounds") or 0), input_tokens=int(row.get("total_input_tokens") or 0),
        output_tokens=int(row.get("total_output_tokens") or 0),
        virtual_seconds=float(row.get("wall_clock_seconds") or 0.0), real_seconds=float(row.get("real_seconds") or 0.0),
        reason=row.get("reason", ""), metrics=payload.get("metrics", {}), eval=payload.get("eval", {}), row=row,
        run_dir=run_dir, event_list=read_jsonl(run_dir / EVENTS_FILE), snapshots=read_snapshots(run_dir),
    )
