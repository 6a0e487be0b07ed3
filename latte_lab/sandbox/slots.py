"""How many sandboxed runs (scripts, test runs, evaluations) the trials of a sweep start at once.

A sweep that keeps many real-model trials in flight (:mod:`latte_lab.sweep.inflight`) runs them as threads
of a few processes; they wait on the network, but what they run in the sandbox takes a core each. The sweep
makes one :class:`SlotGate` of as many slots as the machine has cores, shared by its processes, and each
process holds a slot for every sandboxed run (:func:`held`, :func:`bounded`). Outside such a sweep there is
no gate and nothing waits. A thread that already holds a slot takes no second one (an evaluation that runs
the public tests), so nested runs cannot deadlock.

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

_gate: dict = {"gate": None}
_local = threading.local()


class SlotGate:
    """``n`` slots shared by the processes a sweep starts (pass it to them when they are created), with the
    number in use and the most ever in use at once."""

    def __init__(self, n: int, ctx):
        self.n = n
        self._semaphore = ctx.BoundedSemaphore(n)
        self._busy = ctx.Value("i", 0)
        self._peak = ctx.Value("i", 0)

    def __repr__(self) -> str:
        return f"SlotGate({self.n} slots, {self.busy()} in use)"

    def acquire(self) -> None:
        self._semaphore.acquire()
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


@contextlib.contextmanager
def held():
    """A slot of this process's gate for the duration of the block (none when there is no gate, or when this
    thread holds one already)."""
    gate = _gate["gate"]
    depth = getattr(_local, "depth", 0)
    if gate is None or depth:
        _local.depth = depth + 1
        try:
            yield
        finally:
            _local.depth = depth
        return
    gate.acquire()
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


__all__ = ["SlotGate", "bounded", "held", "using"]
