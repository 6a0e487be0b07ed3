"""A run directory read back as typed data, whatever latte_lab version wrote it: :func:`read_run`.

Where :func:`~latte_lab.rundir.result.load_trial` gives a :class:`~latte_lab.rundir.result.TrialResult` for
analysis and the notebooks, :func:`read_run` gives the run directory's records as the data contract
(:data:`latte_lab.schema.SCHEMA_VERSION`, ``docs/data-contract.md``) declares them: the config, the results
row, the events and the model calls, with the schema version they were written with. A run written before
versions were recorded reads as version ``"0"``; one of a newer major version is refused in one line.

>>> from importlib.resources import files                           # doctest: +SKIP
>>> run = read_run("runs/my-trial")                                 # doctest: +SKIP
>>> run.schema_version, run.config.team, run.row["success"], len(run.events), len(run.calls)  # doctest: +SKIP
('1.0', 'latte', True, 412, 61)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from latte_lab.config import TrialConfig
from latte_lab.errors import DataError
from latte_lab.rundir.format import (
    CALLS_FILE,
    CONFIG_FILE,
    EVENTS_FILE,
    RESULT_FILE,
    read_config,
    read_json,
    read_jsonl,
    read_result,
)
from latte_lab.schema import check_schema_version, schema_major

__all__ = ["Run", "read_run"]


@dataclass(frozen=True)
class Run:
    """A run directory's records, as :func:`read_run` read them."""

    path: Path
    """The run directory."""
    schema_version: str
    """The data contract's version the run was written with (``"0"``: before versions were recorded)."""
    config: TrialConfig = field(repr=False)
    """config.json: the trial's configuration."""
    status: str
    """result.json's status: ``ok``, ``error`` or ``budget``."""
    row: dict = field(repr=False)
    """The results row (result.json's ``row``): the columns of :data:`latte_lab.schema.TRIAL_COLUMNS`."""
    result: dict = field(repr=False)
    """result.json whole (``metrics``, ``eval``, ``error``, ...)."""
    events: list[dict] = field(repr=False)
    """events.jsonl: every event, in order (types and fields: :data:`latte_lab.events.EVENT_TYPES`)."""
    calls: list[dict] = field(repr=False)
    """calls.jsonl: every model call, in order (the cassette a replay answers from)."""


def read_run(path: str | Path) -> Run:
    """Reads a finished run directory as typed data (nothing is run or called).

    Parameters
    ----------
    path : str or Path
        A run directory: the folder holding ``config.json``, ``result.json`` and ``events.jsonl``.

    Returns
    -------
    Run
        Its config, status, results row, result, events and calls, and the schema version they were written
        with (``"0"`` for a run written before versions were recorded: it loads as it is).

    Raises
    ------
    DataError
        One line: the folder is not a finished run directory, a file is damaged, or it was written with a
        newer major schema version than this latte_lab reads (upgrade latte_lab).
    """
    path = Path(path)
    for name in (CONFIG_FILE, RESULT_FILE):
        if not (path / name).is_file():
            raise DataError(f"{path / name} is missing: {path} is not a finished latte_lab run directory")
    versions = [read_json(path / CONFIG_FILE).get("schema_version"), read_json(path / RESULT_FILE).get("schema_version")]
    events = read_jsonl(path / EVENTS_FILE)
    if events:
        versions.append(events[0].get("schema_version"))
    newest = max(versions, key=lambda v: (schema_major(v), str(v or "")))
    version = check_schema_version(newest, str(path))
    result = read_result(path)
    return Run(path=path, schema_version=version,
               config=read_config(path), status=str(result.get("status", "ok")), row=result["row"], result=result,
               events=events, calls=read_jsonl(path / CALLS_FILE))
