"""Timing helpers shared by the benchmark scripts (standard library only: a benchmark may run this
folder's scripts against an older checkout of latte_lab)."""

from __future__ import annotations

import json
import statistics
import time

REPEATS = 10  # runs per condition


def _median_ms(fn, repeats: int, clock) -> float:
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return 1000 * statistics.median(times)


def median_ms(fn, repeats: int = REPEATS) -> float:
    """Milliseconds of wall time of ``fn()``, the median of ``repeats`` calls."""
    return _median_ms(fn, repeats, time.perf_counter)


def _fixed_work() -> None:
    """A fixed mix of what latte_lab's own code does most: dict and string work, JSON encoding, a sort."""
    rows = [{"id": f"task-{i}", "deps": [f"task-{j}" for j in range(i % 4)], "status": "pending"} for i in range(10_000)]
    index = {r["id"]: r for r in rows}
    for r in rows:
        for d in r["deps"]:
            index[d]["status"] = "done"
    json.dumps(rows)
    sorted((r["id"] for r in rows), key=len)


def machine_speed_ms(repeats: int = 9) -> float:
    """CPU milliseconds of one fixed workload (median of ``repeats``): the same code on the same machine takes
    longer when the machine is slower (a busy host, a lower clock), which the load average does not show.
    Printed beside a benchmark's figures, it tells two runs of different hours apart."""
    return _median_ms(_fixed_work, repeats, time.process_time)


def machine_line(start_ms: float | None = None) -> str:
    """The machine-speed figure, with the one measured at the start of the benchmark when given."""
    now = machine_speed_ms()
    head = "machine speed (CPU ms of a fixed workload, lower is faster):"
    return f"{head} {start_ms:.1f} at the start, {now:.1f} at the end" if start_ms is not None else f"{head} {now:.1f}"
