"""How many sandboxed runs (scripts, test runs, evaluations) the trials of a sweep start at once.

A sweep that keeps many real-model trials in flight (:mod:`latte_lab.sweep.inflight`) runs them as threads
of a few processes; they wait on the network, but what they run in the sandbox takes a core each. The sweep
makes one :class:`SlotGate` of as many slots as the machine has cores, shared by its processes, and each
process holds a slot for every sandboxed run (:func:`held`, :func:`bounded`). Outside such a sweep there is
no gate and nothing waits. A thread that already holds a slot takes no second one (an evaluation that runs
the public tests), so nested runs cannot deadlock.

A trial's final evaluation (``held(evaluation=True)``) gives way to the runs of trials still at work: those
keep their calls to the provider going, while an evaluation only completes a trial whose calls are over.
A thread entering its evaluation first calls the callback :func:`on_evaluation` set for it, which is how a
sweep learns that the trial no longer calls the provider and starts another in its place.

>>> import multiprocessing
>>> gate = SlotGate(2, multiprocessing.get_context("fork"))
>>> with using(gate):
...     with held():
...         with held():        # nested in one thread: still one slot
...             gate.busy()
1
>>> gate.peak()
1
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable

EVALUATION_POLL_SECONDS = 0.05  # how often an evaluation waiting behind trials' runs looks for a free slot

_gate: dict = {"gate": None}
_local = threading.local()


class SlotGate:
    """``n`` slots shared by the processes a sweep starts (pass it to them when they are created), with the
    number in use and the most ever in use at once; evaluations give way to other runs."""

    def __init__(self, n: int, ctx):
        self.n = n
        self._semaphore = ctx.BoundedSemaphore(n)
        self._busy = ctx.Value("i", 0)
        self._peak = ctx.Value("i", 0)
        self._waiting = ctx.Value("i", 0)  # runs other than evaluations waiting for a slot

    def __repr__(self) -> str:
        return f"SlotGate({self.n} slots, {self.busy()} in use)"

    def acquire(self, *, evaluation: bool = False) -> None:
        if evaluation:  # a slot that no other run is waiting for
            while self._waiting.value or not self._semaphore.acquire(timeout=EVALUATION_POLL_SECONDS):
                if self._waiting.value:
                    time.sleep(EVALUATION_POLL_SECONDS)
        else:
            with self._waiting.get_lock():
                self._waiting.value += 1
            try:
                self._semaphore.acquire()
            finally:
                with self._waiting.get_lock():
                    self._waiting.value -= 1
        with self._busy.get_lock():
            self._busy.value += 1
            self._peak.value = max(self._peak.value, self._busy.value)

    def release(self) -> None:
        with self._busy.get_lock():
            self._busy.value -= 1
        self._semaphore.release()

    def busy(self) -> int:
        return self._busy.value

    def peak(self) -> int:
        """The most slots ever in use at once."""
        return self._peak.value


@contextlib.contextmanager
def using(gate: SlotGate | None):
    """Sandboxed runs of this process take a slot of ``gate`` within the block (None: no gate)."""
    previous = _gate["gate"]
    _gate["gate"] = gate
    try:
        yield gate
    finally:
        _gate["gate"] = previous


def on_evaluation(callback: Callable[[], None] | None) -> None:
    """Sets what this thread calls when it enters a trial's evaluation (None: nothing)."""
    _local.on_evaluation = callback


@contextlib.contextmanager
def held(*, evaluation: bool = False):
    """A slot of this process's gate for the duration of the block (none when there is no gate, or when this
    thread holds one already). ``evaluation``: a trial's final evaluation, which gives way to other runs."""
    if evaluation:
        callback = getattr(_local, "on_evaluation", None)
        if callback is not None:
            callback()
    gate = _gate["gate"]
    depth = getattr(_local, "depth", 0)
    if gate is None or depth:
        _local.depth = depth + 1
        try:
            yield
        finally:
            _local.depth = depth
        return
    gate.acquire(evaluation=evaluation)
    _local.depth = 1
    try:
        yield
    finally:
        _local.depth = 0
        gate.release()


def bounded(method):
    """A function run under :func:`held`."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with held():
            return method(*args, **kwargs)
    return wrapper


__all__ = ["SlotGate", "bounded", "held", "on_evaluation", "using"]
