"""What the emulator imposes on a call, as a provider does: a latency, rate limits, and faults.

Every draw is a function of the emulator's seed, the request's content and how many times that content
arrived before (its attempt), never of arrival order: the same study sees the same latencies and the same
faults on every run, however its calls interleave.

Rate limits are buckets refilled continuously: ``requests_per_minute`` admits a request while at least one
request's worth is left; ``tokens_per_minute`` admits one while the bucket is not in debt, takes the
prompt's tokens when it is admitted and the reply's when it is answered. Each holds ``burst_s`` seconds of
its rate, so a client pacing itself at the limit is never refused for the jitter of its arrivals while no
minute serves more than the limit and the burst.

>>> conditions = Conditions(latency_s=3.0, latency_sigma=0.5, seed=7)
>>> a = conditions.draw("abc", 0)
>>> a == conditions.draw("abc", 0), a == conditions.draw("abc", 1)
(True, False)
>>> limits = Limits(Conditions(requests_per_minute=60, burst_s=1.0))   # one request a second, a burst of one
>>> limits.admit(100, now=0.0), limits.admit(100, now=0.5)
(None, ('requests', 0.5))
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
from dataclasses import dataclass

from latte_lab.errors import ConfigError

DEFAULT_BURST_S = 5.0  # seconds of each limit a bucket holds: absorbs the jitter of a client paced at the limit
FAULT_DELAY_SHARE = 1.0  # a 5xx or a dropped connection comes after up to this share of the call's latency


@dataclass(frozen=True)
class Draw:
    """What happens to one attempt of a request: its latency and its fault (``""``, ``"5xx"``, ``"drop"``)."""

    latency_s: float
    fault: str
    fault_after_s: float


@dataclass(frozen=True)
class Conditions:
    """A provider's behaviour: latency (lognormal: ``latency_s`` is its median, ``latency_sigma`` the standard
    deviation of its logarithm; 0 gives every call the median), limits per minute (None: unlimited), and the
    shares of attempts answered with a server error or a dropped connection."""

    latency_s: float = 0.0
    latency_sigma: float = 0.0
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    error_rate: float = 0.0
    drop_rate: float = 0.0
    burst_s: float = DEFAULT_BURST_S
    seed: int = 0

    def __post_init__(self):
        def positive(name: str, allow_zero: bool) -> None:
            value = getattr(self, name)
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and (
                value >= 0 if allow_zero else value > 0)
            if not ok:
                raise ConfigError(f"emulator: {name} must be a {'non-negative' if allow_zero else 'positive'} "
                                  f"number, got {value!r}")

        for name in ("latency_s", "latency_sigma"):
            positive(name, True)
        positive("burst_s", False)
        for name in ("requests_per_minute", "tokens_per_minute"):
            if getattr(self, name) is not None:
                positive(name, False)
        for name in ("error_rate", "drop_rate"):
            positive(name, True)
        if self.error_rate + self.drop_rate > 1:
            raise ConfigError(f"emulator: error_rate + drop_rate is at most 1, got "
                              f"{self.error_rate} + {self.drop_rate}")

    def draw(self, key: str, attempt: int) -> Draw:
        """The latency and fault of attempt ``attempt`` (0 for the first) of the request whose content hashes to
        ``key``."""
        digest = hashlib.sha256(f"{self.seed}\0{key}\0{attempt}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        latency = self.latency_s
        if self.latency_s > 0 and self.latency_sigma > 0:
            latency = rng.lognormvariate(math.log(self.latency_s), self.latency_sigma)
        u = rng.random()
        fault = "drop" if u < self.drop_rate else "5xx" if u < self.drop_rate + self.error_rate else ""
        return Draw(latency_s=latency, fault=fault, fault_after_s=latency * FAULT_DELAY_SHARE * rng.random())


class Bucket:
    """A limit per minute as a bucket refilled at its rate, holding ``burst_s`` seconds of it (at least one
    unit). Not thread-safe by itself: :class:`Limits` holds the lock."""

    def __init__(self, per_minute: float, burst_s: float = DEFAULT_BURST_S):
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.updated: float | None = None

    def _refill(self, now: float) -> None:
        if self.updated is not None:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait(self, need: float, now: float) -> float:
        """Seconds until ``need`` is in the bucket (0: now)."""
        self._refill(now)
        return max(0.0, (need - self.level) / self.rate)

    def take(self, amount: float, now: float) -> None:
        """Takes ``amount`` whatever the level (a reply's tokens, counted once it is written)."""
        self._refill(now)
        self.level -= amount

    def remaining(self, now: float) -> int:
        self._refill(now)
        return max(0, int(self.level))


class Limits:
    """The requests and tokens buckets of one emulator, under one lock."""

    def __init__(self, conditions: Conditions):
        self._lock = threading.Lock()
        self.requests = (Bucket(conditions.requests_per_minute, conditions.burst_s)
                         if conditions.requests_per_minute else None)
        self.tokens = Bucket(conditions.tokens_per_minute, conditions.burst_s) if conditions.tokens_per_minute else None

    def admit(self, prompt_tokens: int, now: float) -> tuple[str, float] | None:
        """None when the request is admitted (its prompt's tokens taken); else ``(which limit, seconds to wait)``."""
        with self._lock:
            waits = []
            if self.requests is not None:
                waits.append(("requests", self.requests.wait(1.0, now)))
            if self.tokens is not None:
                waits.append(("tokens", self.tokens.wait(0.0, now)))
            refused = [(name, wait) for name, wait in waits if wait > 0]
            if refused:
                return max(refused, key=lambda item: item[1])
            if self.requests is not None:
                self.requests.level -= 1.0
            if self.tokens is not None:
                self.tokens.level -= prompt_tokens
            return None

    def answered(self, output_tokens: int, now: float) -> None:
        with self._lock:
            if self.tokens is not None:
                self.tokens.take(output_tokens, now)

    def refund(self, prompt_tokens: int, now: float) -> None:
        """A request admitted but not answered (a 5xx, a dropped connection): its tokens come back, as a
        provider bills and counts no failed call."""
        with self._lock:
            if self.tokens is not None:
                self.tokens.take(-prompt_tokens, now)

    def headers(self, now: float) -> dict[str, int]:
        """Remaining and limit per kind, for the reply's rate-limit headers."""
        with self._lock:
            out = {}
            for name, bucket in (("requests", self.requests), ("tokens", self.tokens)):
                if bucket is not None:
                    out[f"limit-{name}"] = int(round(bucket.rate * 60))
                    out[f"remaining-{name}"] = bucket.remaining(now)
            return out


__all__ = ["DEFAULT_BURST_S", "Bucket", "Conditions", "Draw", "Limits"]
