"""Checking and repairing a response cache file (``latte-lab cache check [--repair]``).

A cache whose file was damaged (a disk fault, a copy cut short, a crash of the machine under a file system
that lies about syncing) still serves every row it can read: the rows on damaged pages are misses with a
warning (:class:`~latte_lab.models.cache.ResponseCache`). :func:`check_cache` says what is damaged: what
SQLite's ``PRAGMA integrity_check`` (or ``quick_check``) finds, the rows that cannot be read, and the rows
read whole that do not decode as a response. :func:`repair_cache` copies every row that reads and decodes
into a fresh file and swaps it in with one rename, keeping the damaged file (and its ``-wal``) as a backup
beside it.

Rows are read one range of rowids at a time, and a range that meets a damaged page is read again row by
row, so a damaged page costs the rows it holds and nothing after it. The rowids to read come from the
table and from both of its indexes, so a damaged index loses nothing the table still holds, and the other
way round.

Repair while no trial or sweep uses the cache: a process that holds it open keeps writing to the damaged
file, which is the backup once the fresh file is in place.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from latte_lab.errors import DataError
from latte_lab.models.cache import CACHE_ENV, SCHEMA

ROWID_RANGE = 512  # rows read per query; a range that meets a damaged page is read again row by row
INTEGRITY_PROBLEMS_SHOWN = 20  # lines of integrity_check kept: enough to see what is damaged
KEYS_SHOWN = 5  # keys of undecodable rows named in the report
_COLUMNS = ("key", "scope_key", "text", "usage", "latency_s", "finish_reason", "model", "created", "request")
_INDEXES = ("sqlite_autoindex_responses_1", "responses_scope")  # the key's index, the scope's index


@dataclass
class CacheCheck:
    """What :func:`check_cache` found in one cache file."""

    path: Path
    integrity: list[str]  # what SQLite's check reports; ["ok"] for a sound file
    readable: int = 0  # rows that read and decode
    unreadable: int = 0  # rows some index names that could not be read from the table
    unreadable_ranges: int = 0  # rowid ranges on damaged pages (rows there that no index names are unknown)
    undecodable: list[str] = field(default_factory=list)  # keys of rows read whole that are no response
    schema_error: str | None = None  # why no row could be read at all (the file's header or schema damaged)

    @property
    def ok(self) -> bool:
        return (self.integrity == ["ok"] and not self.unreadable and not self.unreadable_ranges
                and not self.undecodable and self.schema_error is None)

    def lines(self) -> list[str]:
        """The report, one finding a line."""
        out = [f"cache: {self.path}"]
        if self.schema_error is not None:
            out.append(f"unreadable: {self.schema_error}; no row can be read")
            return out
        if self.integrity == ["ok"]:
            out.append("integrity: ok")
        else:
            out.append(f"integrity: {len(self.integrity)} problem(s) found by SQLite:")
            out += [f"  {line}" for line in self.integrity]
        lost = f"{self.unreadable} unreadable (on damaged pages)"
        if self.unreadable_ranges:
            lost += f", and {self.unreadable_ranges} damaged range(s) of rows no index counts"
        out.append(f"rows: {self.readable} readable, {lost}, {len(self.undecodable)} that do not decode")
        if self.undecodable:
            shown = ", ".join(k[:16] for k in self.undecodable[:KEYS_SHOWN])
            more = f" and {len(self.undecodable) - KEYS_SHOWN} more" if len(self.undecodable) > KEYS_SHOWN else ""
            out.append(f"  rows that do not decode: {shown}{more}")
        return out


def _open(path: Path) -> sqlite3.Connection:
    """A connection that reads the file (and its -wal) without writing anything to it."""
    base = path.resolve().as_uri()
    error: sqlite3.Error | None = None
    for uri in (base + "?mode=ro", base + "?mode=ro&immutable=1"):  # the second for a read-only folder
        try:
            conn = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            error = exc
            continue
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as exc:  # cannot open (permissions, no -shm): try the next way
            conn.close()
            error = exc
            continue
        except sqlite3.DatabaseError:  # a damaged header or schema: the check says so
            pass
        return conn
    raise DataError(f"cannot open the response cache {path} for reading ({error}); check its permissions")


def _collect(conn: sqlite3.Connection, query: str, into: set[int]) -> bool:
    """Adds the rowids ``query`` yields until it meets a damaged page; False when it met one."""
    try:
        for (rowid,) in conn.execute(query):
            into.add(rowid)
    except sqlite3.DatabaseError:
        return False
    return True


def _decodes(row: tuple) -> bool:
    """Whether a stored row is a response ResponseCache can serve (it checks the same, row by row)."""
    key, scope, text, usage, latency, finish, model, created, request = row
    try:
        if isinstance(text, bytes):
            text.decode("utf-8", "surrogatepass")
        elif not isinstance(text, str):
            return False
        if isinstance(model, bytes):
            model.decode("utf-8", "surrogatepass")
        elif not isinstance(model, str):
            return False
        counts = json.loads(usage)
        int(counts["input_tokens"]), int(counts["output_tokens"]), float(latency), float(created)
        json.loads(request)
    except (ValueError, TypeError, KeyError, IndexError):
        return False
    return isinstance(key, str) and isinstance(scope, str) and finish == "stop"


def check_cache(path: str | os.PathLike, *, quick: bool = False,
                keep: Callable[[list[tuple]], None] | None = None) -> CacheCheck:
    """What is damaged in the cache file at ``path``. Nothing is written to the file.

    ``quick=True`` runs ``PRAGMA quick_check`` (no check that the indexes match the table) instead of
    ``integrity_check``. ``keep``, when given, receives the rows that read and decode, a batch at a time,
    as stored (the columns of the ``responses`` table).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"no response cache at {path}; give the cache file's path (default: ${CACHE_ENV})")
    conn = _open(path)
    try:
        return _check(conn, path, quick, keep or _discard)
    finally:
        conn.close()


def _discard(rows: list[tuple]) -> None:
    pass


def _check(conn: sqlite3.Connection, path: Path, quick: bool, keep: Callable[[list[tuple]], None]) -> CacheCheck:
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'responses'").fetchone()
    except sqlite3.DatabaseError as exc:
        return CacheCheck(path, [str(exc)], schema_error=f"{exc}")
    pragma = "quick_check" if quick else "integrity_check"
    try:
        integrity = [r[0] for r in conn.execute(f"PRAGMA {pragma}({INTEGRITY_PROBLEMS_SHOWN})")]
    except sqlite3.DatabaseError as exc:
        integrity = [f"{pragma} stopped: {exc}"]
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    if "responses" not in tables:
        raise DataError(f"{path} is not a latte_lab response cache (no responses table); point {CACHE_ENV} at one")
    named: set[int] = set()  # rowids some index holds: rows known to exist
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    complete = False  # whether an index was read whole: then ``named`` holds every row
    for index in _INDEXES:
        if index in indexes:
            complete = _collect(conn, f"SELECT rowid FROM responses INDEXED BY {index}", named) or complete
    highest: set[int] = set()
    _collect(conn, "SELECT max(rowid) FROM responses", highest)
    last = max(named | {r for r in highest if r is not None} | {0})

    report = CacheCheck(path, integrity)
    failed: set[int] = set()
    select = f"SELECT rowid, {', '.join(_COLUMNS)} FROM responses"
    for start in range(1, last + 1, ROWID_RANGE):
        end = min(start + ROWID_RANGE, last + 1)
        try:
            found = conn.execute(f"{select} WHERE rowid >= ? AND rowid < ?", (start, end)).fetchall()
        except sqlite3.DatabaseError:
            found = []
            for rowid in range(start, end):
                try:
                    found += conn.execute(f"{select} WHERE rowid = ?", (rowid,)).fetchall()
                except sqlite3.DatabaseError:
                    failed.add(rowid)
        _keep(report, keep, found)
    try:  # rows past the last rowid the indexes and max() gave (when they are damaged too)
        _keep(report, keep, conn.execute(f"{select} WHERE rowid > ?", (last,)).fetchall())
    except sqlite3.DatabaseError:
        report.unreadable_ranges += not complete
    report.unreadable = len(failed & named)
    if not complete:  # rowids no index names that could not be read: rows may have been there
        unknown = sorted(failed - named)
        report.unreadable_ranges += sum(1 for i, r in enumerate(unknown) if i == 0 or unknown[i - 1] != r - 1)
    return report


def _keep(report: CacheCheck, keep: Callable[[list[tuple]], None], found: list[tuple]) -> None:
    rows = []
    for _rowid, *row in found:
        if _decodes(tuple(row)):
            rows.append(tuple(row))
        else:
            report.undecodable.append(str(row[0]))
    report.readable += len(rows)
    if rows:
        keep(rows)


@dataclass
class CacheRepair:
    """What :func:`repair_cache` found and did."""

    check: CacheCheck  # the damage found
    kept: int  # rows in the fresh file
    backup: Path | None  # the damaged file, moved aside (None when the file was sound and left as it was)

    def lines(self) -> list[str]:
        path = self.check.path
        if self.backup is None:
            return [f"nothing to repair: {path} is sound"]
        return [f"repaired: {path} now holds the {self.kept} row(s) that could be read, in a fresh file",
                f"backup: the damaged file is kept as {self.backup}"]


def repair_cache(path: str | os.PathLike, *, quick: bool = False) -> CacheRepair:
    """Checks the cache at ``path`` (:func:`check_cache`) while copying every row that reads and decodes into
    a fresh file, then, unless the file was sound, puts the fresh file in its place with one rename; the
    damaged file (and its ``-wal``) is kept beside it as ``<name>.damaged-<time>``.

    Run it while no trial or sweep uses the cache (see the module docstring).
    """
    path = Path(path).expanduser()
    fresh = path.with_name(f".{path.name}.repair-{os.getpid()}")
    fresh.unlink(missing_ok=True)
    conn = sqlite3.connect(fresh, isolation_level=None)
    insert = (f"INSERT OR REPLACE INTO responses ({', '.join(_COLUMNS)}) "
              f"VALUES ({', '.join('?' * len(_COLUMNS))})")
    try:
        conn.execute("PRAGMA journal_mode=WAL")  # as ResponseCache makes it; the -wal goes when it closes
        conn.executescript(SCHEMA)
        conn.execute("BEGIN")
        check = check_cache(path, quick=quick, keep=lambda rows: conn.executemany(insert, rows))
        conn.execute("COMMIT")
        kept = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except BaseException:
        conn.close()
        fresh.unlink(missing_ok=True)
        raise
    conn.close()
    if check.ok:
        fresh.unlink()
        return CacheRepair(check, kept, None)
    backup = _backup_name(path)
    try:
        os.link(path, backup)  # the damaged file stays whole under its new name
    except OSError:
        shutil.copy2(path, backup)
    for suffix in ("-wal", "-shm"):  # they belong to the damaged file: next to the fresh one they would be read
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, backup.with_name(backup.name + suffix))
    os.replace(fresh, path)
    _sync_folder(path.parent)
    return CacheRepair(check, kept, backup)


def _backup_name(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    backup, n = path.with_name(f"{path.name}.damaged-{stamp}"), 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return backup


def _sync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
