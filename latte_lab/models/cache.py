"""The response cache: SQLite (WAL), keyed by SHA-256 of the canonical JSON of a request's key fields
(:func:`latte_lab.models.request_keys.request_key`).

Why SQLite: one file, safe for several processes of a sweep writing at once (WAL + busy timeout),
indexed lookups in tens of microseconds, and readable with any SQLite tool. Only complete answers
(``finish_reason == "stop"``) are stored: errors, refusals and truncated outputs would otherwise be
replayed forever. A row that cannot be decoded, or that sits on a damaged page of the file, is a miss
with a one-line warning, never a crash; a response that cannot be stored is a warning too, and the call's
response is returned all the same. ``latte-lab cache check [--repair]`` (:mod:`latte_lab.models.cache_check`)
reports the damage and copies every readable row into a fresh file.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from latte_lab.config import DEFAULT_CACHE_MODE, check_cache_mode
from latte_lab.errors import CacheMissError, ConfigError, DataError
from latte_lab.models.base import ModelRequest, ModelResponse, Usage
from latte_lab.models.keys import redact
from latte_lab.models.request_keys import (
    canonical_json,
    diff_fields,
    json_storable,
    key_fields,
    key_from_fields,
    request_key,
    scope_key,
)

_log = logging.getLogger(__name__)

CACHE_ENV = "LATTE_LAB_CACHE"
DEFAULT_CACHE_PATH = Path("~/.cache/latte_lab/responses.sqlite")
"""The default cache file where ``$XDG_CACHE_HOME`` is not set (:func:`default_cache_path`)."""


def default_cache_path() -> Path:
    """The cache file when none is given: ``$LATTE_LAB_CACHE``, else ``$XDG_CACHE_HOME/latte_lab/responses.sqlite``
    (the XDG base directory of the user's caches, when set to an absolute path), else
    ``~/.cache/latte_lab/responses.sqlite``; ``~`` expanded (tests/models/test_models_cache.py tries each)."""
    explicit = os.environ.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and os.path.isabs(os.path.expanduser(xdg)):  # the spec: a relative value is ignored
        return Path(xdg).expanduser() / "latte_lab" / "responses.sqlite"
    return DEFAULT_CACHE_PATH.expanduser()
BUSY_TIMEOUT_MS = 60_000  # writers wait up to a minute for the lock; four sweep processes queue, never fail
INIT_ATTEMPTS = 20  # schema creation can race with another process converting the file to WAL

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    scope_key TEXT NOT NULL,
    text TEXT NOT NULL,
    usage TEXT NOT NULL,
    latency_s REAL NOT NULL,
    finish_reason TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL,
    request TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_scope ON responses(scope_key);
"""


@dataclass
class CacheStats:
    hits: int
    misses: int
    tokens_saved: int  # input + output tokens served from the cache in this process (not billed)
    entries: int
    size_bytes: int
    path: str

    def __str__(self) -> str:
        return (
            f"{self.path}: {self.entries} entries, {self.size_bytes / 1e6:.1f} MB; this session "
            f"{self.hits} hits, {self.misses} misses, {self.tokens_saved} tokens saved"
        )


class ResponseCache:
    """A SQLite response cache shared by threads and processes.

    Each thread gets its own connection (sqlite3 connections must not be shared across threads);
    hit/miss counters are per instance, for the current session.

    ``read_only=True`` opens the cache for lookups only, as replay needs (a missing file is an empty
    cache; nothing is created). ``read_only=None`` decides from the file system: a cache that cannot be
    written (a read-only mount, no write permission) is opened read-only with a warning. When the disk
    fills up, storing stops for the rest of this instance's life (one trial), with a warning, and
    lookups go on.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, read_only: bool | None = None):
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self.writes_off: str | None = None  # why new responses are not stored, once they are not
        if read_only is None and not _writable(self.path):
            self.writes_off = (f"the response cache {self.path} is read-only: it serves stored responses and "
                               "stores no new ones")
            warnings.warn(self.writes_off, RuntimeWarning, stacklevel=2)
            read_only = True
        self.read_only = bool(read_only)
        if self.read_only:
            self.writes_off = self.writes_off or f"the response cache {self.path} was opened read-only"
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the cache directory {self.path.parent}: {exc}") from None
        self._uri: str | None = None  # how read-only connections open the file (None: an empty cache)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self.hits = 0
        self.misses = 0
        self.tokens_saved = 0
        self.damaged: str | None = None  # the first damage met (a page it cannot read, a row it cannot store)
        self.damaged_count = 0  # lookups and stores that failed on it
        if self.read_only:
            self._open_read_only()
        else:
            self._init_schema()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r}{', read_only=True' if self.read_only else ''})"

    def _open_read_only(self) -> None:
        """Finds a way to read the file without writing anything next to it, and checks it is a cache."""
        if not self.path.exists():
            return
        base = self.path.resolve().as_uri()
        # immutable=1 reads a WAL database on a read-only mount, where SQLite cannot create its -shm file
        for uri in (base + "?mode=ro", base + "?mode=ro&immutable=1"):
            try:
                conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
                try:
                    conn.execute("SELECT COUNT(*) FROM responses").fetchone()
                finally:
                    conn.close()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    raise ConfigError(f"{self.path} is not a latte_lab response cache (no responses table); "
                                      f"point {CACHE_ENV} at one") from None
                continue
            except sqlite3.DatabaseError as exc:
                raise ConfigError(f"{self.path} cannot be read as a response cache ({exc}); {_repair_hint(self.path)}"
                                  f" or point {CACHE_ENV} at a valid one") from None
            self._uri = uri
            return
        raise ConfigError(f"cannot open the response cache {self.path} for reading; check its permissions or "
                          f"point {CACHE_ENV} elsewhere")

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                # check_same_thread=False only so close() may run from any thread; each thread still
                # uses nothing but its own connection.
                if self.read_only:
                    if self._uri is None:  # no file: an empty cache, and nothing created on disk
                        conn = sqlite3.connect(":memory:", check_same_thread=False)
                        conn.executescript(SCHEMA)
                    else:
                        conn = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
                    conn.row_factory = sqlite3.Row
                else:
                    conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                           check_same_thread=False)
                    conn.row_factory = sqlite3.Row
                    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                    conn.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable across crashes of the process
            except sqlite3.Error as exc:
                raise ConfigError(
                    f"{self.path} is not a usable SQLite cache ({exc}); {_repair_hint(self.path)}, delete it or "
                    f"point {CACHE_ENV} elsewhere"
                ) from None
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _init_schema(self) -> None:
        conn = self._connect()
        for attempt in range(INIT_ATTEMPTS):
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(SCHEMA)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == INIT_ATTEMPTS - 1:
                    raise ConfigError(f"cannot initialise the response cache {self.path}: {exc}") from None
                time.sleep(0.05 * (attempt + 1))
            except sqlite3.DatabaseError as exc:
                raise ConfigError(
                    f"{self.path} is not a usable SQLite cache ({exc}); {_repair_hint(self.path)}, delete it or "
                    f"point {CACHE_ENV} elsewhere"
                ) from None

    def close(self) -> None:
        """Close every connection this instance opened (from any thread)."""
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- lookups --------------------------------------------------------------------------------------
    def get(self, request: ModelRequest) -> ModelResponse | None:
        """The stored response (``cached=True``, original latency and usage), or None on a miss."""
        key = request_key(request)
        try:
            row = self._connect().execute("SELECT * FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            self._note_damage(exc, "lookups that reach it are misses")
            row = None
        response = self._decode(key, row) if row is not None else None
        with self._lock:
            if response is None:
                self.misses += 1
            else:
                self.hits += 1
                self.tokens_saved += response.usage.total_tokens
        return response

    @staticmethod
    def _decode(key: str, row: sqlite3.Row) -> ModelResponse | None:
        try:
            usage = json.loads(row["usage"])
            return ModelResponse(
                text=_stored_text(row["text"], "text"),
                usage=Usage(int(usage["input_tokens"]), int(usage["output_tokens"])),
                latency_s=float(row["latency_s"]),
                cached=True,
                finish_reason=str(row["finish_reason"]),
                model=_stored_text(row["model"], "model"),
            )
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            warnings.warn(f"response cache row {key} is corrupt ({exc!r}); treating it as a miss", stacklevel=3)
            return None

    def __contains__(self, request: ModelRequest) -> bool:
        key = request_key(request)
        try:
            return self._connect().execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None
        except sqlite3.DatabaseError as exc:
            self._note_damage(exc, "lookups that reach it are misses")
            return False

    def _note_damage(self, exc: BaseException, consequence: str) -> None:
        """Counts a lookup or store that failed on a damaged file; the first one is a one-line warning."""
        with self._lock:
            self.damaged_count += 1
            if self.damaged is not None:
                return
            self.damaged = " ".join(f"{type(exc).__name__}: {exc}".split())
        warnings.warn(f"the response cache {self.path} is damaged ({self.damaged}): {consequence}, and the trial "
                      f"goes on; {_repair_hint(self.path)} once no trial uses it", RuntimeWarning, stacklevel=3)

    # -- writes ---------------------------------------------------------------------------------------
    @staticmethod
    def _row(request: ModelRequest, response: ModelResponse) -> tuple | None:
        if response.finish_reason != "stop":
            return None
        fields = key_fields(request)
        return (
            key_from_fields(fields),
            scope_key(fields["scope"]),
            _storable_text(response.text),
            canonical_json({"input_tokens": response.usage.input_tokens,
                            "output_tokens": response.usage.output_tokens}),
            float(response.latency_s),
            response.finish_reason,
            _storable_text(response.model),
            time.time(),
            json_storable(redact(canonical_json(fields))),
        )

    _INSERT = "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

    def put(self, request: ModelRequest, response: ModelResponse) -> bool:
        """Store a complete answer; returns False (and stores nothing) for errors, refusals, truncations,
        once storing is off (a read-only cache, a full disk), and when the row cannot be written (a damaged
        page: a warning, the first time). Never raises for the file's sake: the caller has its response."""
        if response.finish_reason != "stop" or self.writes_off is not None:
            return False
        try:
            self._connect().execute(self._INSERT, self._row(request, response))
        except sqlite3.Error as exc:
            if _cannot_write(exc):
                self._stop_writing(exc)
            else:  # a damaged page: this row is lost to the cache, the response is not
                self._note_damage(exc, "responses it cannot store are returned without being stored")
            return False
        except (ValueError, OverflowError) as exc:  # a value SQLite cannot hold
            self._note_damage(exc, "responses it cannot store are returned without being stored")
            return False
        return True

    def _stop_writing(self, exc: sqlite3.Error) -> None:
        with self._lock:
            if self.writes_off is not None:
                return
            self.writes_off = (f"the response cache {self.path} cannot store more responses ({exc}): storing is "
                               "off for the rest of this trial, which goes on with the responses stored so far")
        warnings.warn(self.writes_off, RuntimeWarning, stacklevel=3)

    def put_many(self, pairs: Iterable[tuple[ModelRequest, ModelResponse]]) -> int:
        """Store many answers in one transaction (imports, benchmarks); returns how many were stored."""
        if self.writes_off is not None:
            raise ConfigError(f"cannot store responses: {self.writes_off}")
        rows = [r for r in (self._row(q, a) for q, a in pairs) if r is not None]
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(self._INSERT, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            hint = "" if _cannot_write(exc) else f"; {_repair_hint(self.path)}"
            raise ConfigError(f"cannot store responses in {self.path}: {exc}{hint}") from None
        return len(rows)

    # -- introspection --------------------------------------------------------------------------------
    def __len__(self) -> int:
        try:
            return self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise DataError(f"cannot count the rows of the response cache {self.path} ({exc}); "
                            f"{_repair_hint(self.path)}") from None

    def stats(self) -> CacheStats:
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        entries = len(self)  # before taking the lock: a first connection from this thread registers under it
        with self._lock:
            return CacheStats(self.hits, self.misses, self.tokens_saved, entries, size, str(self.path))

    def explain_miss(self, request: ModelRequest) -> str:
        """Why ``request`` is not cached: the fields that differ from the nearest stored request of its scope."""
        fields = key_fields(request)
        try:
            rows = self._connect().execute(
                "SELECT key, request FROM responses WHERE scope_key = ?", (scope_key(fields["scope"]),)
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            return f"the cache could not be searched ({exc}); {_repair_hint(self.path)}"
        best: list[str] | None = None
        for row in rows:
            try:
                stored = json.loads(row["request"])
            except (ValueError, TypeError):
                continue
            diff = diff_fields(stored, fields)
            if best is None or len(diff) < len(best):
                best = diff
        scope = fields["scope"]
        where = f"seed {scope['seed']}, agent {scope['agent']!r}, call {scope['call_index']}"
        if best is None:
            return f"no stored request for this scope ({where})"
        if not best:
            return f"an identical request is stored ({where}) but its row could not be used"
        return f"nearest stored request of this scope ({where}) differs in: " + "; ".join(best)


def _repair_hint(path: Path) -> str:
    return f"run `latte-lab cache check --repair {path}` to keep its readable rows"


def _storable_text(text: str) -> str | bytes:
    """``text`` for a TEXT column, or, when it holds code points UTF-8 cannot encode (a lone surrogate in a
    reply), its bytes with those code points kept (``surrogatepass``), stored as a BLOB: the row reads
    back as the very same string (:func:`_stored_text`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _stored_text(value, column: str) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogatepass")
    if not isinstance(value, str):
        raise TypeError(f"{column} is {type(value).__name__}")
    return value


def _writable(path: Path) -> bool:
    """Whether the cache file (or, for a new one, the folder it goes in) can be written."""
    if path.exists():
        return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return os.access(parent, os.W_OK)


def _cannot_write(exc: sqlite3.Error) -> bool:
    """A full disk or a file that has become read-only, as opposed to a bug or a damaged file."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR)
    text = str(exc)
    return "disk is full" in text or "readonly database" in text or "disk I/O error" in text


class CachedModel:
    """Wraps a model with the response cache.

    Modes: ``read_write`` (serve hits, call ``inner`` on a miss and store complete answers), ``replay``
    (a miss raises :class:`CacheMissError` naming what differs; ``inner`` is never called and may be
    None), ``off`` (always call ``inner``).
    """

    def __init__(self, inner, cache: ResponseCache, mode: str = DEFAULT_CACHE_MODE):
        check_cache_mode(mode)
        if inner is None and mode != "replay":
            raise ConfigError(f"cache mode {mode!r} needs a model to call on a miss; only 'replay' works without")
        self.inner = inner
        self.cache = cache
        self.mode = mode
        self.provider = getattr(inner, "provider", None)
        self.model = getattr(inner, "model", None)
        self.base_url = getattr(inner, "base_url", None)

    def __repr__(self) -> str:
        return f"CachedModel({self.inner!r}, {self.cache!r}, mode={self.mode!r})"

    def generate(self, request: ModelRequest) -> ModelResponse:
        if self.mode == "off":
            return self.inner.generate(request)
        hit = self.cache.get(request)
        scope = request.scope
        if hit is not None:
            _log.debug("cache hit %s/%s agent=%s call=%d", request.provider, request.model, scope.agent,
                      scope.call_index)
            return hit
        _log.debug("cache miss %s/%s agent=%s call=%d", request.provider, request.model, scope.agent,
                  scope.call_index)
        if self.mode == "replay":
            raise CacheMissError(
                f"replay mode: no cached response for {request.provider}/{request.model} "
                f"(key {request_key(request)[:12]}); {self.cache.explain_miss(request)}. "
                f"Run in read_write mode to call the model, or import the run's cassette"
            )
        response = self.inner.generate(request)
        self.cache.put(request, response)
        return response
