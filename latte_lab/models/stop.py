"""Stopping the trials that run in this process's threads, at their next model call.

A signal reaches only a process's main thread, so trials run as threads (a sweep's trials in flight,
:mod:`latte_lab.sweep.inflight`) are stopped through this flag instead: once :func:`request` is called,
every model call of a trial guarded by :func:`latte_lab.models.budget.guard` raises :class:`TrialStopped`
before it starts, and a call waiting for its rate-limit slot stops waiting. The trial then ends as an
interrupted one (status ``error``, reason ``interrupted``), its record complete; calls already under way
finish and are recorded first.

>>> armed()
False
>>> with arming():
...     request("stopped by the sweep")
...     check()
Traceback (most recent call last):
latte_lab.models.stop.TrialStopped: stopped by the sweep
>>> requested() is None     # leaving the block clears it
True
"""

from __future__ import annotations

import contextlib
import threading
import time

from latte_lab.errors import LatteError

STOP_MESSAGE = "interrupted by the user"


class TrialStopped(LatteError):
    """The trial was asked to stop (Ctrl-C or SIGTERM reached the process running it in a thread)."""


_event = threading.Event()
_state = {"armed": 0, "reason": STOP_MESSAGE}
_lock = threading.Lock()


def armed() -> bool:
    """Whether trials started now are guarded against a stop (:func:`arming` is in force)."""
    return _state["armed"] > 0


@contextlib.contextmanager
def arming():
    """Within the block, trials started in this process check the flag before each model call; the flag is
    cleared when the last such block ends."""
    with _lock:
        _state["armed"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["armed"] -= 1
            if _state["armed"] == 0:
                _event.clear()
                _state["reason"] = STOP_MESSAGE


def request(reason: str = STOP_MESSAGE) -> None:
    """Asks every trial of this process to stop at its next model call."""
    with _lock:
        _state["reason"] = reason
    _event.set()


def requested() -> str | None:
    """Why the trials were asked to stop, or None."""
    return _state["reason"] if _event.is_set() else None


def check() -> None:
    """Raises :class:`TrialStopped` once a stop was requested."""
    if _event.is_set():
        raise TrialStopped(_state["reason"])


def wait(seconds: float) -> None:
    """Sleeps ``seconds`` (a rate-limit slot's wait), ending early with :class:`TrialStopped` on a stop."""
    if seconds <= 0:
        return
    if not armed():
        time.sleep(seconds)
        return
    if _event.wait(seconds):
        raise TrialStopped(_state["reason"])


__all__ = ["STOP_MESSAGE", "TrialStopped", "armed", "arming", "check", "request", "requested", "wait"]
