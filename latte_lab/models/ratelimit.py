"""Rate limits per provider API (requests and tokens per minute), shared by every trial of a sweep.

Calls are paced rather than counted in windows: each call reserves the next free slot of its provider
(the generic cell rate algorithm, GCRA), so calls are spread evenly and no minute holds more than the
limit, however many trials and agents call at once. A call's tokens are estimated from its prompt when
it reserves its slot and settled with the real usage when it returns.

Who shares the pacing depends on where its state lives:

- :class:`MemoryState`: the threads of one process (the default: the agents of a trial, and trials run
  one after another in a notebook);
- :class:`SqliteState`: the processes of one machine (a local sweep's workers), through one SQLite file;
- :class:`RayState`: a Ray cluster, through one small actor.

When the provider answers HTTP 429 (seen on every attempt, including the SDK's own retries), the pace
of that provider halves and every call waits until its ``Retry-After`` has passed; each call that then
succeeds gives back :data:`RECOVERY_PER_CALL` of the rate. A call refused on every attempt of the SDK takes a
new slot and tries again, up to :data:`RATE_LIMIT_ROUNDS` times in all. Providers announce the account's limits
in every reply's headers (:data:`LIMIT_HEADERS`); where those are lower than the configured limit, the pace
follows them, so a limit set above the account's costs a few refused calls, not a study of them.

Limits come from :data:`latte_lab.config.DEFAULT_RATE_LIMITS` (each provider's own API; servers given by
``base_url`` are not limited unless named), then ``$LATTE_LAB_RATE_LIMITS``, then :func:`configure` or
``run_sweep(rate_limits=...)``.

>>> parse_limits("openai=500/30000, http://localhost:8000/v1=60/-")["http://localhost:8000/v1"]
RateLimit(requests_per_minute=60.0, tokens_per_minute=None)
>>> state = MemoryState()
>>> [state.reserve("api", RateLimit(60, None), 10, now=100.0) for _ in range(3)]  # 1 call a second
[0.0, 1.0, 2.0]
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from latte_lab.config import DEFAULT_RATE_LIMITS
from latte_lab.errors import ConfigError, RateLimitError
from latte_lab.models import stop
from latte_lab.models.base import ModelRequest, ModelResponse, estimate_tokens

RATE_LIMITS_ENV = "LATTE_LAB_RATE_LIMITS"  # "openai=500/30000,anthropic=50/30000,<base url>=60/-"
BACKOFF_FACTOR = 0.5  # a 429 halves the pace (multiplicative decrease)
RECOVERY_PER_CALL = 0.05  # each successful call afterwards gives back 5% of the rate (additive increase)
MIN_RATE_FACTOR = 1 / 16  # never slower than 1/16 of the configured limit: a provider outage is an error, not a crawl
DEFAULT_HOLD_SECONDS = 1.0  # a 429 without Retry-After holds calls this long
SQLITE_BUSY_MS = 30_000  # a worker waits this long for another's pacing transaction (each takes microseconds)
# A call still refused for the rate limit after the SDK's own retries waits for a new slot, at the pace each 429
# has slowed, and tries again, this many times in all: a provider bills no refused call, and a limit set above
# the account's (the provider refusing what the pacing allows) costs time, not trials.
RATE_LIMIT_ROUNDS = 6
LONG_WAIT_SECONDS = 5.0  # a wait this long is worth one warning: the limit may be below what the account allows


@dataclass(frozen=True)
class RateLimit:
    """Requests and tokens (input + output) per minute allowed for one provider API; None = unlimited."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def __post_init__(self):
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ConfigError(f"RateLimit.{name} must be a positive number or None, got {value!r}")
            if value is not None:
                object.__setattr__(self, name, float(value))

    @property
    def unlimited(self) -> bool:
        return self.requests_per_minute is None and self.tokens_per_minute is None


def as_limit(value: Any, where: str = "rate limit") -> RateLimit:
    """A RateLimit from a RateLimit, ``(rpm, tpm)``, ``{"rpm": ..., "tpm": ...}`` or None (unlimited)."""
    if isinstance(value, RateLimit):
        return value
    if value is None:
        return RateLimit()
    if isinstance(value, tuple | list) and len(value) == 2:
        return RateLimit(*value)
    if isinstance(value, Mapping) and set(value) <= {"rpm", "tpm"}:
        return RateLimit(value.get("rpm"), value.get("tpm"))
    raise ConfigError(f"{where}: expected RateLimit(rpm, tpm), (rpm, tpm), {{'rpm': ..., 'tpm': ...}} or None; "
                      f"got {value!r}")


def parse_limits(text: str, where: str = f"${RATE_LIMITS_ENV}") -> dict[str, RateLimit]:
    """``key=rpm/tpm`` pairs separated by commas; ``-`` leaves one of them unlimited. ``where`` names the
    text's source in errors."""
    limits = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.rpartition("=")
        rpm, slash, tpm = value.partition("/")
        try:
            if not (sep and key and slash):
                raise ValueError
            limits[key.strip()] = RateLimit(*(None if v.strip() in ("-", "") else float(v) for v in (rpm, tpm)))
        except ValueError:
            raise ConfigError(f"{where}: cannot read {part!r}; write provider=rpm/tpm, e.g. "
                              "openai=500/30000 (- for unlimited)") from None
    return limits


def default_limits() -> dict[str, RateLimit]:
    """The configured defaults, with ``$LATTE_LAB_RATE_LIMITS`` on top."""
    limits = {key: as_limit(value) for key, value in DEFAULT_RATE_LIMITS.items()}
    limits.update(parse_limits(os.environ.get(RATE_LIMITS_ENV, "")))
    return limits


def limit_key(provider: str, base_url: str | None) -> str:
    """Whose limit a call counts against: the server at ``base_url``, else the provider's own API."""
    return base_url.rstrip("/") if base_url else provider


# --- pacing ---------------------------------------------------------------------------------------------------

def _effective(limit: RateLimit, state: dict) -> RateLimit:
    """``limit``, lowered to what the provider announced in its replies' headers where that is lower."""
    announced = state.get("announced")
    if not announced:
        return limit
    rpm, tpm = limit.requests_per_minute, limit.tokens_per_minute
    if announced[0] and rpm:
        rpm = min(rpm, announced[0])
    if announced[1] and tpm:
        tpm = min(tpm, announced[1])
    return RateLimit(rpm, tpm)


def _reserve(state: dict, limit: RateLimit, now: float, tokens: float) -> float:
    """Reserves the next slot for a call of ``tokens`` tokens in ``state`` (updated in place); returns
    how long the caller waits for it."""
    limit = _effective(limit, state)
    factor = state.get("factor", 1.0)
    slot = max(now, state.get("hold", 0.0))
    if limit.requests_per_minute:
        slot = max(slot, state.get("tat_requests", 0.0))
    if limit.tokens_per_minute:
        slot = max(slot, state.get("tat_tokens", 0.0))
    if limit.requests_per_minute:
        state["tat_requests"] = slot + 60.0 / (limit.requests_per_minute * factor)
    if limit.tokens_per_minute:
        state["tat_tokens"] = slot + max(tokens, 0.0) * 60.0 / (limit.tokens_per_minute * factor)
    return slot - now


def _settle(state: dict, limit: RateLimit, extra_tokens: float) -> None:
    """A call used ``extra_tokens`` more (or fewer) than it reserved; a success also restores pace."""
    limit = _effective(limit, state)
    if limit.tokens_per_minute and "tat_tokens" in state:
        state["tat_tokens"] += extra_tokens * 60.0 / (limit.tokens_per_minute * state.get("factor", 1.0))
    state["factor"] = min(1.0, state.get("factor", 1.0) + RECOVERY_PER_CALL)


def _throttle(state: dict, now: float, retry_after: float | None) -> None:
    state["factor"] = max(MIN_RATE_FACTOR, state.get("factor", 1.0) * BACKOFF_FACTOR)
    hold = retry_after if retry_after is not None and retry_after >= 0 else DEFAULT_HOLD_SECONDS
    state["hold"] = max(state.get("hold", 0.0), now + hold)


def _announce(state: dict, requests_per_minute: float | None, tokens_per_minute: float | None) -> None:
    state["announced"] = [requests_per_minute, tokens_per_minute]


class PacingState(Protocol):
    """Where pacing state and a sweep's running spend live; every method is one atomic step.

    ``reserve`` returns how long the caller waits for its slot; ``now`` (the state's clock,
    ``time.monotonic()``) is for tests that need every process to reserve at the same instant.
    """

    def reserve(self, key: str, limit: RateLimit, tokens: float, now: float | None = None) -> float: ...
    def settle(self, key: str, limit: RateLimit, extra_tokens: float) -> None: ...
    def throttle(self, key: str, retry_after: float | None) -> None: ...
    def announce(self, key: str, requests_per_minute: float | None, tokens_per_minute: float | None) -> None: ...
    def pace(self, key: str) -> float: ...
    def add_spend(self, dollars: float, tokens: int) -> tuple[float, int]: ...
    def spend(self) -> tuple[float, int]: ...


class MemoryState:
    """Pacing shared by the threads of one process (and, inside a Ray actor, by a whole cluster)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._states: dict[str, dict] = {}
        self._spend = [0.0, 0]

    def __repr__(self) -> str:
        return f"MemoryState({len(self._states)} APIs paced)"

    def reserve(self, key, limit, tokens, now=None):
        with self._lock:
            return _reserve(self._states.setdefault(key, {}), limit, time.monotonic() if now is None else now, tokens)

    def settle(self, key, limit, extra_tokens):
        with self._lock:
            _settle(self._states.setdefault(key, {}), limit, extra_tokens)

    def throttle(self, key, retry_after):
        with self._lock:
            _throttle(self._states.setdefault(key, {}), time.monotonic(), retry_after)

    def announce(self, key, requests_per_minute, tokens_per_minute):
        with self._lock:
            _announce(self._states.setdefault(key, {}), requests_per_minute, tokens_per_minute)

    def pace(self, key):
        with self._lock:
            return self._states.get(key, {}).get("factor", 1.0)

    def add_spend(self, dollars, tokens):
        with self._lock:
            self._spend[0] += dollars
            self._spend[1] += int(tokens)
            return self._spend[0], self._spend[1]

    def spend(self):
        with self._lock:
            return self._spend[0], self._spend[1]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS pacing (key TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spend (id INTEGER PRIMARY KEY CHECK (id = 0), dollars REAL NOT NULL, tokens INTEGER NOT NULL);
INSERT OR IGNORE INTO spend VALUES (0, 0.0, 0);
"""


class SqliteState:
    """Pacing shared by the processes of one machine through one SQLite file.

    Each step is one ``BEGIN IMMEDIATE`` transaction, so reservations from every process form one
    queue. Times are ``time.monotonic()``, which all processes of one Linux machine share.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._local = threading.local()
        self._pid = os.getpid()
        try:
            self._txn(lambda conn: conn.executescript(_SCHEMA), script=True)
        except sqlite3.Error as exc:  # a full disk above all: one line, not a traceback
            full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            raise ConfigError(f"cannot set up the rate-limit state {self.path}: {exc}"
                              + ("; free some space on its disk, then run again" if full else "")) from None

    def __repr__(self) -> str:
        return f"SqliteState({str(self.path)!r})"

    def __reduce__(self):  # a forked or spawned worker opens its own connection
        return (SqliteState, (str(self.path),))

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or self._pid != os.getpid():
            try:
                conn = sqlite3.connect(self.path, timeout=SQLITE_BUSY_MS / 1000, isolation_level=None)
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot open the rate-limit state {self.path}: {exc}") from None
            self._local.conn, self._pid = conn, os.getpid()
        return conn

    def _txn(self, step, script: bool = False):
        conn = self._conn()
        if script:
            return step(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = step(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    @staticmethod
    def _load(conn, key) -> dict:
        row = conn.execute("SELECT state FROM pacing WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else {}

    @staticmethod
    def _store(conn, key, state) -> None:
        conn.execute("INSERT OR REPLACE INTO pacing VALUES (?, ?)", (key, json.dumps(state)))

    def _update(self, key, change):
        def step(conn):
            state = self._load(conn, key)
            result = change(state)
            self._store(conn, key, state)
            return result
        return self._txn(step)

    def reserve(self, key, limit, tokens, now=None):
        return self._update(key, lambda s: _reserve(s, limit, time.monotonic() if now is None else now, tokens))

    def settle(self, key, limit, extra_tokens):
        self._update(key, lambda s: _settle(s, limit, extra_tokens))

    def throttle(self, key, retry_after):
        self._update(key, lambda s: _throttle(s, time.monotonic(), retry_after))

    def announce(self, key, requests_per_minute, tokens_per_minute):
        self._update(key, lambda s: _announce(s, requests_per_minute, tokens_per_minute))

    def pace(self, key):
        return self._load(self._conn(), key).get("factor", 1.0)

    def add_spend(self, dollars, tokens):
        def step(conn):
            conn.execute("UPDATE spend SET dollars = dollars + ?, tokens = tokens + ? WHERE id = 0",
                         (float(dollars), int(tokens)))
            return tuple(conn.execute("SELECT dollars, tokens FROM spend WHERE id = 0").fetchone())
        return self._txn(step)

    def spend(self):
        return tuple(self._conn().execute("SELECT dollars, tokens FROM spend WHERE id = 0").fetchone())


class RayState:
    """Pacing shared by a Ray cluster through one actor holding a :class:`MemoryState`.

    The actor computes each wait with its own clock and returns it as a duration, so the nodes' clocks
    need not agree. Pass the object to remote tasks (it pickles as the actor handle).
    """

    def __init__(self, actor=None):
        if actor is None:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # on the driver's node: a worker node lost mid-sweep must not take the sweep's shared state with it
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
            actor = ray.remote(num_cpus=0, scheduling_strategy=here)(MemoryState).remote()
        self.actor = actor

    def __repr__(self) -> str:
        return "RayState(actor)"

    def _call(self, name, *args):
        import ray

        return ray.get(getattr(self.actor, name).remote(*args))

    def reserve(self, key, limit, tokens, now=None):
        return self._call("reserve", key, limit, tokens, now)

    def settle(self, key, limit, extra_tokens):
        self._call("settle", key, limit, extra_tokens)

    def throttle(self, key, retry_after):
        self._call("throttle", key, retry_after)

    def announce(self, key, requests_per_minute, tokens_per_minute):
        self._call("announce", key, requests_per_minute, tokens_per_minute)

    def pace(self, key):
        return self._call("pace", key)

    def add_spend(self, dollars, tokens):
        return self._call("add_spend", dollars, tokens)

    def spend(self):
        return self._call("spend")


# --- the process-wide setting ----------------------------------------------------------------------------------

_setting_lock = threading.Lock()
_state: PacingState | None = None
_warned: set[str] = set()  # APIs whose long waits this process has reported
_overrides: dict[str, RateLimit] = {}


def configure(limits: Mapping[str, Any] | None = None, *, state: PacingState | None = None) -> None:
    """Sets this process's limits (on top of the defaults; a key maps to a RateLimit, ``(rpm, tpm)`` or
    None for unlimited) and, optionally, where the pacing state lives. A sweep calls this in each worker.

    >>> configure({"openai": (5000, 2_000_000)}); current_limits()["openai"].requests_per_minute
    5000.0
    >>> configure()   # back to the defaults
    """
    global _state, _overrides
    overrides = {str(k): as_limit(v, f"rate limit for {k!r}") for k, v in (limits or {}).items()}
    with _setting_lock:
        _overrides = overrides
        if state is not None:
            _state = state


@contextlib.contextmanager
def using(limits: Mapping[str, Any] | None = None, *, state: PacingState | None = None):
    """:func:`configure` for the duration of a ``with`` block; the previous setting comes back after."""
    global _state, _overrides
    with _setting_lock:
        saved = (_overrides, _state)
    configure(limits, state=state)
    try:
        yield
    finally:
        with _setting_lock:
            _overrides, _state = saved


def current_limits() -> dict[str, RateLimit]:
    """The limits in effect in this process (defaults, environment, :func:`configure`)."""
    return {**default_limits(), **_overrides}


def current_state() -> PacingState:
    """This process's pacing state (a MemoryState unless a sweep installed a shared one)."""
    global _state
    with _setting_lock:
        if _state is None:
            _state = MemoryState()
        return _state


def limiter_for(provider: str, base_url: str | None = None) -> Limiter | None:
    """The limiter of a provider API, or None when it has no limit."""
    key = limit_key(provider, base_url)
    limit = current_limits().get(key)
    if limit is None or limit.unlimited:
        return None
    return Limiter(key, limit, current_state())


class Limiter:
    """Paces the calls to one provider API through a shared :class:`PacingState`."""

    def __init__(self, key: str, limit: RateLimit, state: PacingState):
        self.key, self.limit, self.state = key, limit, state
        self._announced: tuple[float | None, float | None] = (None, None)  # as last passed to the state

    def __repr__(self) -> str:
        return (f"Limiter({self.key!r}, rpm={self.limit.requests_per_minute}, tpm={self.limit.tokens_per_minute}, "
                f"{self.state!r})")

    def acquire(self, tokens: float) -> float:
        """Waits for this call's slot; returns how long it waited."""
        delay = self.state.reserve(self.key, self.limit, tokens)
        if delay > LONG_WAIT_SECONDS and self.key not in _warned:
            _warned.add(self.key)
            warnings.warn(
                f"{self.key}: a call waits {delay:.0f} s for the rate limit ({_per_minute(self.limit)}); if your "
                f"account allows more, raise it with run_sweep(rate_limits=...) or ${RATE_LIMITS_ENV}",
                RuntimeWarning, stacklevel=3)
        stop.wait(delay)  # a sleep that a stop of the trials run in threads cuts short
        return max(delay, 0.0)

    def settle(self, reserved: float, used: float) -> None:
        self.state.settle(self.key, self.limit, used - reserved)

    def throttled(self, retry_after: float | None = None) -> None:
        self.state.throttle(self.key, retry_after)

    def on_response(self, response) -> None:
        """httpx response hook: a 429 slows the pace, whether or not the SDK then retries; limits the provider
        announces in its headers below the configured ones lower the pace (:func:`announced_limits`)."""
        headers = getattr(response, "headers", None) or {}
        if getattr(response, "status_code", None) == 429:
            self.throttled(retry_after_seconds(headers))
        announced = announced_limits(headers)
        if announced != (None, None) and announced != self._announced:
            self._announced = announced
            self.state.announce(self.key, *announced)


def _per_minute(limit: RateLimit) -> str:
    parts = [f"{v:,.0f} {what} per minute" for v, what in ((limit.requests_per_minute, "requests"),
                                                          (limit.tokens_per_minute, "tokens")) if v]
    return " and ".join(parts)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or a numeric ``retry-after`` header; None when absent or a date."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue
    return None


# The headers in which providers announce the account's limits per minute with every reply: (requests, tokens)
LIMIT_HEADERS = (("x-ratelimit-limit-requests", "x-ratelimit-limit-tokens"),  # OpenAI and compatible servers
                 ("anthropic-ratelimit-requests-limit", "anthropic-ratelimit-tokens-limit"))  # Anthropic


def announced_limits(headers: Mapping[str, str]) -> tuple[float | None, float | None]:
    """(requests, tokens) per minute a reply's headers announce (None where they say nothing usable).

    >>> announced_limits({"x-ratelimit-limit-requests": "500", "x-ratelimit-limit-tokens": "200000"})
    (500.0, 200000.0)
    >>> announced_limits({"anthropic-ratelimit-tokens-limit": "40000"}), announced_limits({})
    ((None, 40000.0), (None, None))
    """
    found: list[float | None] = [None, None]
    for names in LIMIT_HEADERS:
        for i, name in enumerate(names):
            value = headers.get(name)
            if value is None or found[i] is not None:
                continue
            try:
                number = float(value)
            except ValueError:
                continue
            if number > 0 and number == number:  # positive, not NaN
                found[i] = number
    return found[0], found[1]


def http_client(sdk, limiter: Limiter):
    """The SDK's default HTTP client with a response hook that tells ``limiter`` about 429s."""
    return sdk.DefaultHttpxClient(event_hooks={"response": [limiter.on_response]})


def prompt_tokens(request: ModelRequest) -> int:
    """The tokens a request's prompt is expected to take (what its slot reserves before the call)."""
    return estimate_tokens(request.system) + sum(estimate_tokens(m.content) for m in request.messages)


class RateLimitedModel:
    """Wraps a provider model: each call waits for its slot, then reports the tokens it really used."""

    def __init__(self, inner, limiter: Limiter):
        self.inner = inner
        self.limiter = limiter
        self.provider = getattr(inner, "provider", None)
        self.model = getattr(inner, "model", None)
        self.base_url = getattr(inner, "base_url", None)

    def __repr__(self) -> str:
        return f"RateLimitedModel({self.inner!r}, {self.limiter!r})"

    def generate(self, request: ModelRequest) -> ModelResponse:
        reserved = prompt_tokens(request)
        for attempt in range(1, RATE_LIMIT_ROUNDS + 1):
            self.limiter.acquire(reserved)
            try:
                response = self.inner.generate(request)
            except RateLimitError:  # refused on every attempt of the SDK: a slot at the slower pace, and again
                self.limiter.throttled()
                if attempt == RATE_LIMIT_ROUNDS:
                    raise
                continue
            self.limiter.settle(reserved, response.usage.total_tokens)
            return response
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


__all__ = [
    "LIMIT_HEADERS", "RATE_LIMITS_ENV", "Limiter", "MemoryState", "PacingState", "RateLimit", "RateLimitedModel", "RayState",
    "SqliteState", "announced_limits", "as_limit", "configure", "current_limits", "current_state", "default_limits", "http_client",
    "limit_key", "limiter_for", "parse_limits", "prompt_tokens", "retry_after_seconds", "using",
]
