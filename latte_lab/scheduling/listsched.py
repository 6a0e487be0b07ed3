"""Classic list scheduling beside LATTE's policies: priority lists, HEFT, and Graham's bound.

A *list schedule* never leaves a worker idle while a node is ready: whenever workers are free, the ready
node highest in a priority list starts on the fastest free worker. The priority is one of

- ``"fifo"``: the workload's own order (creation order, as LATTE's frontier);
- ``"critical_path"``: the largest bottom level first (the node's duration plus the longest chain after it);
- ``"upward_rank"``: HEFT's upward rank, the bottom level measured in mean execution time over the workers
  (the same order as ``"critical_path"`` when all workers are equally fast);
- any sequence of node ids (a priority list of your own).

A worker of speed ``s`` runs a node of duration ``d`` in ``ceil(d / s)`` whole rounds. :func:`heft` is the
planner of Topcuoglu, Hariri and Wu (2002) without communication costs: nodes in decreasing upward rank,
each on the worker where it would finish earliest, in the first gap of that worker's plan where it fits.

Graham (1966): on ``m`` identical workers every list schedule finishes within
``W / m + (1 - 1/m) * L`` rounds (``W`` the total work, ``L`` the critical path), hence within ``2 - 1/m``
times the optimum, since the optimum is at least ``max(L, W / m)``.

>>> from latte_lab.scheduling import graham_example
>>> spec = graham_example()
>>> [list_schedule(spec, m, priority="fifo").makespan for m in (3, 4)]   # a fourth worker slows it down
[12, 15]
>>> list_schedule(spec, 4, priority="critical_path").makespan
12
>>> round(graham_bound(spec, 3), 2)
19.33
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from latte_lab.errors import ConfigError
from latte_lab.graph import dag
from latte_lab.scheduling.result import INTERVAL_COLUMNS, worker_name
from latte_lab.scheduling.workloads import WorkloadSpec, _positive_int

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["LIST_PRIORITIES", "ListSchedule", "graham_bound", "heft", "list_schedule", "upward_rank"]

LIST_PRIORITIES = ("fifo", "critical_path", "upward_rank")


@dataclass
class ListSchedule:
    """A schedule from :func:`list_schedule` or :func:`heft`: every node once, on one worker, no stragglers."""

    spec: WorkloadSpec
    speeds: tuple[float, ...]
    """One speed per worker (all 1.0: identical workers)."""
    priority: str
    """"fifo", "critical_path", "upward_rank", "custom" (a list of your own) or "heft"."""
    makespan: int
    intervals: pd.DataFrame
    """One row per node, the columns of :attr:`ScheduleResult.intervals <latte_lab.scheduling.ScheduleResult>`
    (``expected`` is the node's rounds on its worker)."""

    @property
    def n_workers(self) -> int:
        return len(self.speeds)

    @property
    def identical(self) -> bool:
        return len(set(self.speeds)) == 1

    @property
    def lower_bound(self) -> int:
        """No schedule of whole rounds beats it: the critical path at the fastest worker's speed, and the work
        divided by the workers' total speed."""
        return speed_lower_bound(self.spec, self.speeds)

    @property
    def graham_bound(self) -> float | None:
        """``W / m + (1 - 1/m) * L`` for identical unit-speed workers (None otherwise): no list schedule is
        slower."""
        return graham_bound(self.spec, self.n_workers) if set(self.speeds) == {1.0} else None

    def summary(self) -> str:
        speeds = "" if self.identical else f" (speeds {', '.join(f'{s:g}' for s in self.speeds)})"
        graham = "" if self.graham_bound is None else f", Graham's bound {self.graham_bound:.1f}"
        return (f"{self.priority} list schedule x {self.n_workers} workers{speeds} on {self.spec.name}: makespan "
                f"{self.makespan} (lower bound {self.lower_bound}{graham})")

    def row(self) -> dict[str, Any]:
        return {"workload": self.spec.name, "n_nodes": len(self.spec), "policy": f"list/{self.priority}",
                "n_workers": self.n_workers, "makespan": self.makespan, "lower_bound": self.lower_bound,
                "graham_bound": self.graham_bound}

    def __repr__(self) -> str:
        return f"<ListSchedule {self.summary()}>"


def graham_bound(spec: WorkloadSpec, n_workers: int) -> float:
    """Graham's bound ``W / m + (1 - 1/m) * L`` on the makespan of any list schedule on ``m`` identical
    workers; it is at most ``(2 - 1/m)`` times the optimum.

    The bound is tight: six one-round tasks and a three-round one listed last take 5 rounds on 3 workers,
    where 3 suffice (5 / 3 = 2 - 1/3):

    >>> from latte_lab.scheduling import WorkloadSpec
    >>> tight = WorkloadSpec(tuple("abcdefg"), ((),) * 7, (1, 1, 1, 1, 1, 1, 3))
    >>> graham_bound(tight, 3), list_schedule(tight, 3, priority="fifo").makespan, tight.lower_bound(3)
    (5.0, 5, 3)
    """
    m = _positive_int("n_workers", n_workers)
    return spec.total_work / m + (1 - 1 / m) * spec.critical_path_length


def _speeds(n_workers: int | None, speeds: Sequence[float] | None) -> tuple[float, ...]:
    if speeds is None:
        if n_workers is None:
            raise ConfigError("give n_workers, or speeds with one entry per worker")
        return (1.0,) * _positive_int("n_workers", n_workers)
    out = tuple(float(s) for s in speeds)
    if not out or any(not s > 0 for s in out):
        raise ConfigError(f"speeds must be one positive number per worker, got {list(speeds)!r}")
    if n_workers is not None and _positive_int("n_workers", n_workers) != len(out):
        raise ConfigError(f"n_workers={n_workers} but {len(out)} speeds; give one speed per worker")
    return out


def _rounds(d: int, speed: float) -> int:
    return max(1, math.ceil(d / speed - 1e-9))


def speed_lower_bound(spec: WorkloadSpec, speeds: Sequence[float]) -> int:
    """max(critical path at the fastest speed, ceil(total work / total speed)).

    >>> from latte_lab.scheduling import chain
    >>> speed_lower_bound(chain(2, durations=[4, 4]), [2, 1])    # 2 + 2 at speed 2; ceil(8 / 3) = 3
    4
    """
    fastest = max(speeds)
    path = max(dag.bottom_levels(spec._deps_map, {n: _rounds(d, fastest) for n, d in zip(spec.ids, spec.durations)})
               .values())
    return max(path, math.ceil(spec.total_work / sum(speeds) - 1e-9))


def upward_rank(spec: WorkloadSpec, speeds: Sequence[float] | None = None) -> dict[str, float]:
    """HEFT's upward rank of every node: its mean execution time over the workers plus the largest rank among
    its successors (no communication costs: the team shares one graph and one workspace).

    >>> from latte_lab.scheduling import diamond
    >>> upward_rank(diamond(2, durations=[3, 1]), speeds=[2, 1])
    {'src': 4.5, 'm0': 3.5, 'm1': 2.0, 'sink': 1.0}
    """
    sp = _speeds(None if speeds else 1, speeds)
    groups = Counter(sp).items()  # a team of 1,000 workers has a handful of distinct speeds
    mean = {n: sum(k * _rounds(d, s) for s, k in groups) / len(sp) for n, d in zip(spec.ids, spec.durations)}
    return dag.bottom_levels(spec._deps_map, mean)


def _priority_keys(spec: WorkloadSpec, priority: str | Sequence[str], speeds: tuple[float, ...]) -> tuple[str, list]:
    n = len(spec)
    if isinstance(priority, str):
        if priority == "fifo":
            return priority, list(range(n))
        if priority in ("critical_path", "upward_rank"):
            levels = spec.bottom_levels if priority == "critical_path" else tuple(upward_rank(spec, speeds).values())
            return priority, [(-lv, i) for i, lv in enumerate(levels)]
        raise ConfigError(f"unknown priority {priority!r}; use one of {', '.join(LIST_PRIORITIES)} or a list of "
                          "node ids")
    order = list(priority)
    if sorted(order) != sorted(spec.ids):
        raise ConfigError(f"a priority list must name every node of {spec.name!r} exactly once "
                          f"({len(order)} given, {n} nodes)")
    pos = {nid: k for k, nid in enumerate(order)}
    return "custom", [pos[nid] for nid in spec.ids]


def list_schedule(spec: WorkloadSpec, n_workers: int | None = None, *, priority: str | Sequence[str] = "critical_path",
                  speeds: Sequence[float] | None = None) -> ListSchedule:
    """The list schedule of ``spec``: whenever workers are free, the ready node highest in ``priority`` starts
    on the fastest free worker (ties: the lowest-numbered). Give ``n_workers`` identical workers, or
    ``speeds`` (one per worker). O((V + E) log V).

    >>> from latte_lab.scheduling import fan_out
    >>> spec = fan_out(5, durations=[1, 1, 1, 1, 6])
    >>> [list_schedule(spec, 2, priority=p).makespan for p in ("fifo", "critical_path")]
    [9, 7]
    """
    if not isinstance(spec, WorkloadSpec):
        raise ConfigError(f"spec must be a WorkloadSpec, got {type(spec).__name__}")
    sp = _speeds(n_workers, speeds)
    name, key = _priority_keys(spec, priority, sp)
    dur, succ = spec.durations, spec._succ_index
    remaining = [len(d) for d in spec.deps]
    ready = [(key[i], i) for i in range(len(spec)) if remaining[i] == 0]
    heapq.heapify(ready)
    free = [(-s, w) for w, s in enumerate(sp)]  # fastest first
    heapq.heapify(free)
    running: list[tuple[int, int, int]] = []  # (end, worker, node)
    rows: list[tuple] = []
    t = 0
    while ready or running:
        while ready and free:
            _, i = heapq.heappop(ready)
            _, w = heapq.heappop(free)
            d = _rounds(dur[i], sp[w])
            rows.append((t, w, i, t + d, d))
            heapq.heappush(running, (t + d, w, i))
        t = running[0][0]
        while running and running[0][0] == t:
            _, w, i = heapq.heappop(running)
            heapq.heappush(free, (-sp[w], w))
            for s in succ[i]:
                remaining[s] -= 1
                if remaining[s] == 0:
                    heapq.heappush(ready, (key[s], s))
    return _result(spec, sp, name, rows)


def _result(spec: WorkloadSpec, speeds: tuple[float, ...], priority: str, rows: list[tuple]) -> ListSchedule:
    import pandas as pd

    rows.sort()
    ids = spec.ids
    iv = pd.DataFrame([(worker_name(w), ids[i], s, e, False, "done", 0, d) for s, w, i, e, d in rows],
                      columns=INTERVAL_COLUMNS)
    return ListSchedule(spec=spec, speeds=speeds, priority=priority, makespan=int(iv["end"].max()), intervals=iv)


def heft(spec: WorkloadSpec, speeds: Sequence[float] | int) -> ListSchedule:
    """HEFT's plan: nodes in decreasing :func:`upward_rank` (ties: workload order), each on the worker where it
    finishes earliest (ties: the lowest-numbered), in the first gap of that worker's plan where it fits.
    ``speeds`` is one speed per worker, or a number of identical workers.

    A HEFT plan may keep a node for a faster worker rather than start it on a free slow one:

    >>> from latte_lab.scheduling import WorkloadSpec
    >>> spec = WorkloadSpec(("p", "q", "r"), ((), (), ()), (6, 6, 1))
    >>> heft(spec, [3, 1]).makespan, list_schedule(spec, speeds=[3, 1], priority="upward_rank").makespan
    (4, 6)
    """
    sp = _speeds(speeds, None) if isinstance(speeds, int) else _speeds(None, speeds)
    rank = upward_rank(spec, sp)
    index = spec._index
    order = sorted(range(len(spec)), key=lambda i: (-rank[spec.ids[i]], i))
    starts: list[list[int]] = [[] for _ in sp]  # per worker, its planned intervals sorted by start
    ends: list[list[int]] = [[] for _ in sp]
    finish = [0] * len(spec)
    rows: list[tuple] = []
    for i in order:
        ready = max((finish[index[d]] for d in spec.deps[i]), default=0)
        best = None
        for w, s in enumerate(sp):
            d = _rounds(spec.durations[i], s)
            st, en = starts[w], ends[w]
            k = bisect.bisect_right(en, ready)  # intervals ending at or before `ready` cannot block it
            begin = ready
            while k < len(st) and st[k] < begin + d:  # does not fit before interval k: try after it
                begin = max(begin, en[k])
                k += 1
            if best is None or begin + d < best[0]:
                best = (begin + d, w, begin, d, k)
        end, w, begin, d, k = best
        starts[w].insert(k, begin)
        ends[w].insert(k, end)
        finish[i] = end
        rows.append((begin, w, i, end, d))
    return _result(spec, sp, "heft", rows)
