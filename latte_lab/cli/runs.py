"""``latte-lab runs [DIR]``: the trials and sweeps under a folder, newest first, one line each.

A trial is a run directory (:mod:`latte_lab.rundir`: a folder with ``config.json``); a sweep is a folder
with a ``.sweep/`` area (:mod:`latte_lab.sweep.sweepdir`) whose trials sit beside it, and whose trials under way
are in ``.sweep/running/``. Only ``result.json`` and ``config.json`` are read, so a thousand trials list in
well under a second. :func:`find_runs` is the same listing for Python.

Each trial's status is its result's (``ok``, ``budget``, ``error``) or what its files say instead:

- ``running``: no result.json yet (a trial of a sweep that is not running any more is ``stopped``);
- ``stopped``: an attempt left in ``.sweep/running/`` by a sweep whose process has ended (the next run of
  the sweep sets it aside and runs the trial again);
- ``damaged``: result.json or config.json cannot be read (cut off, not JSON), or a trial a sweep finished
  has lost its result.json; what can be read is shown.

The status says how the run went, not how the team did: a trial that ran to its end is ``ok`` whether or
not the team succeeded (``success`` says that). A sweep's attempt that did not finish
(``<trial id>.failed-<N>``) whose trial has finished since is left out of the command's table
(:func:`superseded_attempts`; ``--attempts`` lists them).

>>> import tempfile, pathlib
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> (tmp / "t1").mkdir(); _ = (tmp / "t1" / "config.json").write_text('{"task": "debug", "team": "latte"}')
>>> [(r.status, r.task, r.team) for r in find_runs(tmp)]
[('running', 'debug', 'latte')]
"""

from __future__ import annotations

import argparse
import os
import socket
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from latte_lab.cli._common import UsageError, cell, default_runs_dir, local_time, table
from latte_lab.config import TASK_ALIASES, TEAM_ALIASES
from latte_lab.errors import DataError
from latte_lab.rundir import CONFIG_FILE, RESULT_FILE, attempt_of, read_json
from latte_lab.schema import SUCCESS_AND_ACCURACY
from latte_lab.sweep.sweepdir import LOCK_FILE, RUNNING_DIR, SWEEP_DIR

__all__ = ["STATUSES", "RunEntry", "SweepEntry", "add_parser", "find_runs", "find_sweeps", "read_entry", "select",
           "superseded_attempts"]

STATUSES = ("ok", "budget", "error", "running", "stopped", "damaged")
"""Every status a trial can be listed with (see the module docstring)."""


@dataclass(frozen=True)
class RunEntry:
    """One trial as its result.json and config.json describe it (None where they do not say)."""

    path: Path
    status: str
    trial_id: str
    task: str | None = None
    team: str | None = None
    model: str | None = None
    seed: int | None = None
    rounds: int | None = None
    success: bool | None = None
    """Whether the team succeeded (the results row's ``success``); None when no result says."""
    accuracy: float | None = None
    tokens: int | None = None
    dollars: float | None = None
    started: float | None = None
    """When config.json was written (the trial's start), seconds since the epoch."""
    finished: float | None = None
    """When result.json was written (the trial's end)."""
    sweep: Path | None = None
    """The sweep folder holding the trial, if any."""
    problem: str | None = None
    """Why a damaged trial is damaged, or the error of a failed one (one line)."""

    @property
    def when(self) -> float | None:
        """The trial's end, or its start while it has no end."""
        return self.finished if self.finished is not None else self.started


@dataclass(frozen=True)
class SweepEntry:
    """A sweep folder: its trials and, while a sweep works in it, that sweep's process."""

    path: Path
    trials: tuple[RunEntry, ...]
    holder: str | None = None
    """``process <pid>`` while a sweep process on this machine holds the folder, else None."""

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.trials:
            out[r.status] = out.get(r.status, 0) + 1
        return out


def _read_json(path: Path) -> tuple[dict | None, str | None]:
    """(the JSON object in ``path``, None), (None, None) when there is no such file, or (None, why) when it
    cannot be read."""
    if not path.exists():
        return None, None
    try:
        return read_json(path), None
    except DataError as exc:
        return None, str(exc)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _number(value, kind):
    """``kind(value)``, or None for a missing, NaN or malformed value."""
    if value is None or isinstance(value, bool) and kind is not bool:
        return None
    try:
        out = kind(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return None if out != out else out  # NaN


def read_entry(run_dir: Path, *, sweep: Path | None = None, running: bool | None = None) -> RunEntry:
    """One trial of :func:`find_runs`. ``sweep``: the sweep folder holding it. ``running``: for a trial in a
    sweep's ``.sweep/running/``, whether that sweep is still at work (None elsewhere).

    A trial a sweep has put in place always has its result.json (it is renamed there whole, see
    :mod:`latte_lab.sweep.sweepdir`), so one without is damaged, not running."""
    config, config_problem = _read_json(run_dir / CONFIG_FILE)
    result, result_problem = _read_json(run_dir / RESULT_FILE)
    if result is None and not result_problem and sweep is not None and running is None:
        result_problem = f"{RESULT_FILE} is missing, which a trial its sweep has finished always has"
    row = result.get("row") if result else None
    if result is not None and not isinstance(row, dict):
        result, result_problem = None, f"{run_dir / RESULT_FILE}: no 'row' object"
    row = row or {}
    config = config or {}
    problem = result_problem or config_problem
    if result_problem or (config_problem and result is None):
        status = "damaged"
    elif result is not None:
        status = str(result.get("status") or row.get("status") or "ok")
        problem = row.get("error") or result.get("error") or problem
    elif running is False:
        status = "stopped"
    else:
        status = "running"
    tokens = _number(row.get("total_tokens"), int)
    if tokens is None and row.get("total_input_tokens") is not None:
        tokens = _number(row.get("total_input_tokens"), int)
        tokens = None if tokens is None else tokens + (_number(row.get("total_output_tokens"), int) or 0)
    return RunEntry(
        path=run_dir, status=status,
        trial_id=str(row.get("trial_id") or (result or {}).get("trial_id") or run_dir.name),
        task=row.get("task") or config.get("task"), team=row.get("team") or config.get("team"),
        model=row.get("model") or config.get("model"),
        seed=_number(row.get("seed", config.get("seed")), int),
        rounds=_number(row.get("total_rounds"), int), accuracy=_number(row.get("accuracy"), float),
        success=row.get("success") if isinstance(row.get("success"), bool) else None,
        tokens=tokens, dollars=_number(row.get("dollars"), float),
        started=_mtime(run_dir / CONFIG_FILE), finished=_mtime(run_dir / RESULT_FILE),
        sweep=sweep, problem=_one_line(problem, run_dir))


def _one_line(problem, run_dir: Path) -> str | None:
    """A problem's first line, with the run directory's files named by their names alone."""
    if not problem:
        return None
    return str(problem).strip().splitlines()[0].replace(f"{run_dir}{os.sep}", "")


def _sweep_holder(sweep: Path) -> str | None:
    """``process <pid>`` while a sweep holds the lock of ``sweep``, else None.

    The lock is looked at, never taken: taking it even for a moment could make a sweep starting then refuse
    to run. Linux lists the locks held in /proc/locks; elsewhere a live process of this machine named in
    the lock file counts as holding it (the file keeps the PID of the last sweep after it has ended)."""
    path = sweep / SWEEP_DIR / LOCK_FILE
    data, _ = _read_json(path)
    if not data:
        return None
    try:
        pid = int(data["pid"])
    except (KeyError, TypeError, ValueError):
        pid = None
    held = _flock_held(path)
    if held is None:
        if pid is None or data.get("host") not in (None, socket.gethostname()):
            return None
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, OverflowError):
            return None
        except PermissionError:  # alive, another user's
            pass
    elif not held:
        return None
    return f"process {pid}" if pid is not None else "a process"


def _flock_held(path: Path) -> bool | None:
    """Whether a process holds a ``flock`` on ``path`` (/proc/locks lists each lock with its file's inode);
    None where that cannot be told."""
    try:
        inode = path.stat().st_ino
        listed = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in listed:  # "1: FLOCK  ADVISORY  WRITE 8349 fe:00:2147501 0 EOF" (a waiter's: "1: -> FLOCK ...")
        fields = line.split()
        at = fields.index("FLOCK") + 4 if "FLOCK" in fields else len(fields)
        if at < len(fields) and fields[at].rpartition(":")[2] == str(inode):
            return True
    return False


def _walk(folder: Path, sweep: Path | None, holders: dict[Path, str | None]) -> Iterator[RunEntry]:
    try:
        children = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    names = {c.name for c in children}
    if CONFIG_FILE in names or RESULT_FILE in names:
        yield read_entry(folder, sweep=sweep)
        return
    if SWEEP_DIR in names:
        sweep = folder
        holders[folder] = _sweep_holder(folder)
        try:
            under_way = sorted(p for p in (folder / SWEEP_DIR / RUNNING_DIR).iterdir() if p.is_dir())
        except OSError:  # no trial under way
            under_way = []
        for child in under_way:
            yield read_entry(child, sweep=folder, running=holders[folder] is not None)
    for child in children:
        if child.name.startswith(".") or not child.is_dir(follow_symlinks=False):
            continue
        yield from _walk(Path(child.path), sweep, holders)


def find_runs(root: str | Path) -> list[RunEntry]:
    """Every trial under ``root`` (``root`` itself may be one), newest first (see :attr:`RunEntry.when`).

    Folders whose name starts with a dot are skipped, except a sweep's ``.sweep/running/``. Nothing below a
    trial is read (its workspace may hold anything).
    """
    return _find(Path(root))[0]


def find_sweeps(root: str | Path) -> list[SweepEntry]:
    """The sweep folders under ``root``, each with its trials, newest trial first."""
    return _find(Path(root))[1]


def _find(root: Path) -> tuple[list[RunEntry], list[SweepEntry]]:
    if not root.is_dir():
        raise UsageError(f"no folder {root}: give the folder your trials went to (latte-lab runs DIR)")
    holders: dict[Path, str | None] = {}
    entries = sorted(_walk(root, None, holders), key=lambda r: (r.when or 0.0, str(r.path)), reverse=True)
    sweeps = [SweepEntry(path, tuple(r for r in entries if r.sweep == path), holder)
              for path, holder in sorted(holders.items())]
    return entries, sweeps


def superseded_attempts(entries: Iterable[RunEntry]) -> list[RunEntry]:
    """The attempts (``<trial id>.failed-<N>``) of trials whose own run directory beside them has a result:
    a sweep set them aside and ran the trial again to its end, so they are history, not failures to act on."""
    entries = list(entries)
    finished = {(r.path.parent, r.path.name) for r in entries
                if attempt_of(r.path.name)[1] is None and r.status in ("ok", "budget", "error")}
    return [r for r in entries if attempt_of(r.path.name)[1] is not None
            and (r.path.parent, attempt_of(r.path.name)[0]) in finished]


def _matches(value: str | None, wanted: Iterable[str]) -> bool:
    return value is not None and any(value == w or value.startswith(w + "/") for w in wanted)


def select(entries: Iterable[RunEntry], *, task=(), team=(), status=(), model=()) -> list[RunEntry]:
    """The entries matching every filter given: each filter is a collection of accepted values (empty:
    any). Teams and tasks may be given by their official names (``dynamic``, ``debug_sprint``); a model
    matches itself or a provider (``openai`` matches ``openai/gpt-4o``)."""
    team = {TEAM_ALIASES.get(t, t) for t in team}
    task = {TASK_ALIASES.get(t, t) for t in task}
    return [r for r in entries
            if (not task or r.task in task) and (not team or r.team in team)
            and (not status or r.status in status) and (not model or _matches(r.model, model))]


# --- the command --------------------------------------------------------------------------------------------

HEADER = ["STATUS", "SUCCESS", "TASK", "TEAM", "MODEL", "SEED", "ROUNDS", "ACCURACY", "TOKENS", "DOLLARS", "WHEN",
          "PATH"]
NUMBERS = {5, 6, 7, 8, 9}  # header indexes of right-aligned columns
DEFINITION_WIDTH = 110  # characters per line of what success and accuracy mean, printed under the table

EPILOG = """\
examples:
  latte-lab runs                               every trial under runs/, newest first
  latte-lab runs runs/sweep --team latte,static --limit 20
  latte-lab runs --status error,damaged        what failed, and why (listed below the table)
  latte-lab runs runs/sweep --attempts         also the attempts a sweep set aside and ran again
  latte-lab show debug-latte-s0-6ce190142a     one of them in detail"""


def _values(text: str) -> list[str]:
    """``"latte,static"`` -> ``["latte", "static"]``."""
    return [v.strip() for v in text.split(",") if v.strip()]


def _statuses(text: str) -> list[str]:
    values = _values(text)
    unknown = [v for v in values if v not in STATUSES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown status {', '.join(unknown)}; use {', '.join(STATUSES)}")
    return values


def _limit(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of trials (0 shows them all)")
    return int(text)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    runs_dir = default_runs_dir()
    p = sub.add_parser(
        "runs", help="list the trials and sweeps under a folder, newest first",
        description="List every trial under DIR (run directories, searched recursively; sweeps' trials "
        "included) with its status, success, task, team, model, seed, rounds, accuracy, tokens, dollars, when "
        "it ended (or started, while it runs) and its path, newest first; then the sweeps among them. Reads "
        "only result.json and config.json. STATUS is how the run went (ok: it ran to its end, whatever the "
        "team achieved; error, budget: it stopped early); SUCCESS is whether the team succeeded. DOLLARS is - "
        "for a model without a price (the simulated model). A trial whose files cannot be read is listed as "
        "damaged, one without a result as running (or stopped, when its sweep has ended). A sweep's attempt "
        "that did not finish (<trial id>.failed-<N>) is left out once its trial has finished (--attempts lists "
        "it). Filters take commas (--team latte,static); official names are accepted. Statuses: "
        f"{', '.join(STATUSES)}.",
        epilog=EPILOG)
    p.add_argument("dir", nargs="?", default=runs_dir, metavar="DIR",
                   help=f"folder to search (default: {runs_dir}, where trials go unless told otherwise)")
    p.add_argument("--task", type=_values, default=[], help="only these tasks (default: every task)")
    p.add_argument("--team", type=_values, default=[], help="only these teams (default: every team)")
    p.add_argument("--model", type=_values, default=[],
                   help="only these models; a provider (openai) matches its models (default: every model)")
    p.add_argument("--status", type=_statuses, default=[], help="only trials with these statuses (default: all)")
    p.add_argument("--limit", type=_limit, default=0, metavar="N",
                   help="show the N newest trials (default: 0, all of them)")
    p.add_argument("--attempts", action="store_true",
                   help="also list the attempts a sweep set aside (<trial id>.failed-<N>) whose trial has finished since")
    p.set_defaults(func=run)
    return p


def _yes(value: bool | None) -> str:
    return cell(None) if value is None else ("yes" if value else "no")


def _row(r: RunEntry) -> list[str]:
    return [r.status, _yes(r.success), cell(r.task), cell(r.team), cell(r.model), cell(r.seed), cell(r.rounds),
            cell(r.accuracy, "{:.0%}"), cell(r.tokens, "{:,}"), cell(r.dollars, "{:.2f}"), local_time(r.when),
            str(r.path)]


def _counts(entries: Iterable[RunEntry]) -> str:
    counts: dict[str, int] = {}
    entries = list(entries)
    for r in entries:
        counts[r.status] = counts.get(r.status, 0) + 1
    text = ", ".join(f"{counts[s]} {s}" for s in STATUSES if s in counts)
    succeeded = sum(r.success is True for r in entries)
    judged = sum(r.success is not None for r in entries)
    return text + (f"; {succeeded} of {judged} succeeded" if judged else "")


def run(args) -> int:
    root = Path(args.dir)
    entries, sweeps = _find(root)
    hidden = [] if args.attempts else superseded_attempts(entries)
    if hidden:
        gone = {id(r) for r in hidden}
        entries = [r for r in entries if id(r) not in gone]
        sweeps = [SweepEntry(s.path, tuple(r for r in s.trials if id(r) not in gone), s.holder) for s in sweeps]
    shown = select(entries, task=args.task, team=args.team, status=args.status, model=args.model)
    filtered = len(shown) != len(entries)
    if not shown:
        print(f"no trials under {root}" + (f" match (of {len(entries)})" if entries else ""))
        return 0
    listed = shown[:args.limit] if args.limit else shown
    print("\n".join(table(HEADER, [_row(r) for r in listed], right=NUMBERS)))
    print()
    which = f"{len(shown)} of {len(entries)} trials" if filtered else f"{len(entries)} trials"
    more = f"; the {len(listed)} newest shown (--limit 0 for all)" if len(listed) < len(shown) else ""
    print(f"{which} under {root} ({_counts(shown)}){more}")
    kept = {id(r) for r in shown}
    for s in sweeps:
        mine = [r for r in s.trials if id(r) in kept]
        if mine:
            state = f"; in use by a sweep ({s.holder})" if s.holder else ""
            print(f"sweep {s.path}: {len(mine)} trials ({_counts(mine)}), latest {local_time(mine[0].when)}{state}")
    if hidden:
        print(f"{len(hidden)} earlier attempts of trials that have finished since are not listed (--attempts lists "
              "them)")
    for r in listed:
        if r.problem and r.status in ("damaged", "error", "stopped"):
            print(f"{r.status} {r.path}: {r.problem}")
    print(textwrap.fill(SUCCESS_AND_ACCURACY, DEFINITION_WIDTH))
    return 0
