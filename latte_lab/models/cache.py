"""The response cache: SQLite (WAL), keyed by SHA-256 of the canonical JSON of a request's key fields.

Why SQLite: one file, safe for several processes of a sweep writing at once (WAL + busy timeout),
indexed lookups in tens of microseconds, and readable with any SQLite tool. Only complete answers
(``finish_reason == "stop"``) are stored: errors, refusals and truncated outputs would otherwise be
replayed forever. A row that cannot be decoded is treated as a miss with a warning, never a crash.

>>> from latte_lab.models.base import ModelRequest, Message
>>> r = ModelRequest("openai", "gpt-4o", "sys", [Message("user", "hi")])
>>> len(request_key(r))
64
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Self

from latte_lab.config import DEFAULT_CACHE_MODE, check_cache_mode
from latte_lab.errors import CacheMissError, ConfigError, DataError
from latte_lab.models.base import Message, ModelRequest, ModelResponse, Scope, Usage
from latte_lab.models.keys import redact

KEY_SCHEMA_VERSION = 1  # bump when key_fields() or its canonical form changes, so old rows stop matching
_log = logging.getLogger(__name__)

CACHE_ENV = "LATTE_LAB_CACHE"
DEFAULT_CACHE_PATH = Path("~/.cache/latte_lab/responses.sqlite")
BUSY_TIMEOUT_MS = 60_000  # writers wait up to a minute for the lock; four sweep processes queue, never fail
INIT_ATTEMPTS = 20  # schema creation can race with another process converting the file to WAL
SHOWN_VALUE_CHARS = 60  # explain_miss shows short differing values inline, longer ones only by name

_SCHEMA = """
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


# json.dumps with these options builds this encoder anew at every call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_encode_string = json.encoder.encode_basestring  # what _ENCODER.encode does with a str
_STRING_JSON: dict[str, str] = {}  # long texts already encoded: a prompt's earlier messages recur every call
_STRING_JSON_MAX = 4096  # entries; the memo is emptied when full (a trial's windows need far fewer)
_MEMO_MIN_CHARS = 256  # shorter strings encode faster than they are looked up


def canonical_json(obj) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same object gives the same string in any process."""
    return _ENCODER.encode(obj)


def _string_json(text: str) -> str:
    if len(text) < _MEMO_MIN_CHARS:
        return _encode_string(text)
    out = _STRING_JSON.get(text)
    if out is None:
        if len(_STRING_JSON) >= _STRING_JSON_MAX:
            _STRING_JSON.clear()
        out = _STRING_JSON[text] = _encode_string(text)
    return out


def _message_json(role: str, content: str) -> str:
    if len(content) < _MEMO_MIN_CHARS:
        return f"[{_encode_string(role)},{_encode_string(content)}]"
    key = (role, content)
    out = _MESSAGE_JSON.get(key)
    if out is None:
        if len(_MESSAGE_JSON) >= _STRING_JSON_MAX:
            _MESSAGE_JSON.clear()
        out = _MESSAGE_JSON[key] = f"[{_encode_string(role)},{_encode_string(content)}]"
    return out


_MESSAGE_JSON: dict[tuple[str, str], str] = {}


def key_fields(request: ModelRequest) -> dict:
    """``request.key_fields()`` with numbers normalised, so temperature 1 and 1.0 share a key."""
    fields = request.key_fields()
    for name in ("temperature", "top_p"):
        if isinstance(fields.get(name), int) and not isinstance(fields.get(name), bool):
            fields[name] = float(fields[name])
    return fields


def key_from_fields(fields: dict) -> str:
    return hashlib.sha256(canonical_json({**fields, "schema": KEY_SCHEMA_VERSION}).encode("utf-8")).hexdigest()


def object_json(parts: dict[str, str]) -> str:
    """``canonical_json`` of an object whose values are given already in canonical JSON, so that a large
    value (a prompt's messages) is encoded once for both the request key and the cassette line.

    >>> object_json({"b": "[1,2]", "a": '"x"'}) == canonical_json({"b": [1, 2], "a": "x"})
    True
    """
    if not parts:
        return "{}"
    pieces = []
    for k in sorted(parts):  # one join: the values can be long, and are copied once
        pieces += (",", _encode_string(k), ":", parts[k])
    pieces[0] = "{"
    pieces.append("}")
    return "".join(pieces)


def value_json(value) -> str:
    """``canonical_json(value)``, with the values a request and a reply are made of (None, booleans, ints,
    finite floats, strings, flat dicts of those) written without the encoder's per-call set-up.

    >>> [value_json(v) for v in (None, True, 3, 0.7, "é", {"b": 1, "a": None})]
    ['null', 'true', '3', '0.7', '"é"', '{"a":null,"b":1}']
    """
    kind = type(value)
    if value is None:
        return "null"
    if kind is str:
        return _string_json(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float and value == value and value not in (_INF, -_INF):
        return float.__repr__(value)
    if kind is dict and all(type(k) is str for k in value):
        items = sorted(value.items())
        if all(v is None or type(v) in (str, bool, int) for _, v in items):
            return "{" + ",".join(f"{_encode_string(k)}:{value_json(v)}" for k, v in items) + "}"
    return _ENCODER.encode(value)


_INF = float("inf")
_SCHEMA_JSON = canonical_json(KEY_SCHEMA_VERSION)


MESSAGE_PIECES = "\x00messages"  # where key_and_parts keeps each message's JSON (no field has this name)


def _json_bytes(piece: str) -> bytes:
    """``piece.encode("utf-8")``, remembered for long pieces: a prompt's earlier messages recur at every call,
    and encoding a long text that is not ASCII costs more than hashing it."""
    if len(piece) < _MEMO_MIN_CHARS:
        return piece.encode("utf-8")
    out = _JSON_BYTES.get(piece)
    if out is None:
        if len(_JSON_BYTES) >= _STRING_JSON_MAX:
            _JSON_BYTES.clear()
        out = _JSON_BYTES[piece] = piece.encode("utf-8")
    return out


_JSON_BYTES: dict[str, bytes] = {}


def key_and_parts(fields: dict) -> tuple[str, dict[str, str]]:
    """``key_from_fields(fields)`` and the canonical JSON of each field (``parts["messages"]`` the whole list,
    ``parts[MESSAGE_PIECES]`` the list of each message's JSON), each encoded once.

    The key hashes the bytes of ``object_json`` of the parts and the schema version, fed to SHA-256 piece by
    piece, each message's UTF-8 bytes remembered (:func:`_json_bytes`), so the whole prompt is neither
    joined nor encoded again for it."""
    messages = [_message_json(role, content) for role, content in fields.get("messages", ())]
    parts = {k: "[" + ",".join(messages) + "]" if k == "messages" else value_json(v) for k, v in fields.items()}
    keyed = {**parts, "schema": _SCHEMA_JSON}
    digest = hashlib.sha256()
    pending: list[str] = []  # the short pieces between two messages, hashed together
    opening = "{"
    for k in sorted(keyed):
        pending += (opening, _encode_string(k), ":")
        opening = ","
        if k == "messages":
            pending.append("[")
            for i, piece in enumerate(messages):
                if i:
                    pending.append(",")
                digest.update("".join(pending).encode("utf-8"))
                pending.clear()
                digest.update(_json_bytes(piece))
            pending.append("]")
        else:
            pending.append(keyed[k])
    pending.append("}")
    digest.update("".join(pending).encode("utf-8"))
    parts[MESSAGE_PIECES] = messages
    return digest.hexdigest(), parts


def request_key(request: ModelRequest) -> str:
    """SHA-256 hex digest identifying everything that determines a reply."""
    return key_from_fields(key_fields(request))


def scope_key(scope: dict | Scope) -> str:
    """The group a request belongs to for :meth:`ResponseCache.explain_miss`: trial seed and agent."""
    s = asdict(scope) if isinstance(scope, Scope) else scope
    return canonical_json([s.get("seed"), s.get("agent")])


def request_from_fields(fields: dict) -> ModelRequest:
    """Rebuild a request from stored key fields (cassette lines, cache rows)."""
    try:
        return ModelRequest(
            provider=fields["provider"],
            model=fields["model"],
            system=fields["system"],
            messages=[Message(role, content) for role, content in fields["messages"]],
            temperature=fields["temperature"],
            max_tokens=fields["max_tokens"],
            top_p=fields.get("top_p"),
            stop=tuple(fields["stop"]) if fields.get("stop") else None,
            base_url=fields.get("base_url"),
            scope=Scope(**fields.get("scope", {})),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"stored request fields are incomplete or malformed ({exc!r})") from None


def _flatten(fields: dict) -> dict:
    flat = {k: v for k, v in fields.items() if k != "scope"}
    for k, v in (fields.get("scope") or {}).items():
        flat[f"scope.{k}"] = v
    return flat


def _describe(name: str, stored, wanted) -> str:
    if name == "messages" and isinstance(stored, list) and isinstance(wanted, list):
        if len(stored) != len(wanted):
            return f"messages ({len(stored)} stored vs {len(wanted)} requested)"
        first = next(i for i, (a, b) in enumerate(zip(stored, wanted)) if a != b)
        return f"messages (message {first} differs)"
    a, b = json.dumps(stored, ensure_ascii=False), json.dumps(wanted, ensure_ascii=False)
    if len(a) + len(b) <= SHOWN_VALUE_CHARS:
        return f"{name} ({a} stored vs {b} requested)"
    return name


def diff_fields(stored: dict, wanted: dict) -> list[str]:
    """Names of the key fields that differ (scope fields as ``scope.<name>``), with short values shown."""
    a, b = _flatten(stored), _flatten(wanted)
    return [_describe(n, a.get(n), b.get(n)) for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]


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
        raw = path if path is not None else os.environ.get(CACHE_ENV) or DEFAULT_CACHE_PATH
        self.path = Path(raw).expanduser()
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
                raise ConfigError(f"{self.path} cannot be read as a response cache ({exc}); point {CACHE_ENV} "
                                  "at a valid one") from None
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
                        conn.executescript(_SCHEMA)
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
                    f"{self.path} is not a usable SQLite cache ({exc}); delete it or point {CACHE_ENV} elsewhere"
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
                conn.executescript(_SCHEMA)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == INIT_ATTEMPTS - 1:
                    raise ConfigError(f"cannot initialise the response cache {self.path}: {exc}") from None
                time.sleep(0.05 * (attempt + 1))
            except sqlite3.DatabaseError as exc:
                raise ConfigError(
                    f"{self.path} is not a usable SQLite cache ({exc}); delete it or point {CACHE_ENV} elsewhere"
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
        row = self._connect().execute("SELECT * FROM responses WHERE key = ?", (key,)).fetchone()
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
            text = row["text"]
            if not isinstance(text, str):
                raise TypeError(f"text is {type(text).__name__}")
            return ModelResponse(
                text=text,
                usage=Usage(int(usage["input_tokens"]), int(usage["output_tokens"])),
                latency_s=float(row["latency_s"]),
                cached=True,
                finish_reason=str(row["finish_reason"]),
                model=str(row["model"]),
            )
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            warnings.warn(f"response cache row {key} is corrupt ({exc!r}); treating it as a miss", stacklevel=3)
            return None

    def __contains__(self, request: ModelRequest) -> bool:
        key = request_key(request)
        return self._connect().execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    # -- writes ---------------------------------------------------------------------------------------
    @staticmethod
    def _row(request: ModelRequest, response: ModelResponse) -> tuple | None:
        if response.finish_reason != "stop":
            return None
        fields = key_fields(request)
        return (
            key_from_fields(fields),
            scope_key(fields["scope"]),
            response.text,
            canonical_json({"input_tokens": response.usage.input_tokens,
                            "output_tokens": response.usage.output_tokens}),
            float(response.latency_s),
            response.finish_reason,
            response.model,
            time.time(),
            redact(canonical_json(fields)),
        )

    _INSERT = "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

    def put(self, request: ModelRequest, response: ModelResponse) -> bool:
        """Store a complete answer; returns False (and stores nothing) for errors, refusals, truncations,
        and once storing is off (a read-only cache, a full disk)."""
        row = self._row(request, response)
        if row is None or self.writes_off is not None:
            return False
        try:
            self._connect().execute(self._INSERT, row)
        except sqlite3.Error as exc:
            if not _cannot_write(exc):
                raise
            self._stop_writing(exc)
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
            if not _cannot_write(exc):
                raise
            raise ConfigError(f"cannot store responses in {self.path}: {exc}") from None
        return len(rows)

    # -- introspection --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def stats(self) -> CacheStats:
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        entries = len(self)  # before taking the lock: a first connection from this thread registers under it
        with self._lock:
            return CacheStats(self.hits, self.misses, self.tokens_saved, entries, size, str(self.path))

    def explain_miss(self, request: ModelRequest) -> str:
        """Why ``request`` is not cached: the fields that differ from the nearest stored request of its scope."""
        fields = key_fields(request)
        rows = self._connect().execute(
            "SELECT key, request FROM responses WHERE scope_key = ?", (scope_key(fields["scope"]),)
        ).fetchall()
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
