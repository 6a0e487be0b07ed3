"""Timing helpers shared by the benchmark scripts (standard library only: a benchmark may run this
folder's scripts against an older checkout of latte_lab)."""

from __future__ import annotations

import statistics
import time

REPEATS = 10  # runs per condition


def median_ms(fn, repeats: int = REPEATS) -> float:
    """Milliseconds of wall time of ``fn()``, the median of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)
