"""Workloads: a DAG of subtasks with a duration in whole rounds each, and builders for common shapes.

>>> spec = chain(3, durations=[2, 1, 3])
>>> spec.total_work, spec.critical_path_length, spec.lower_bound(4)
(6, 6, 6)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from latte_lab.errors import ConfigError
from latte_lab.graph import LEAD, CoordinationGraph, dag

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["WorkloadSpec", "chain", "diamond", "fan_out", "from_task", "graham_example", "node_title", "random_dag"]

DEFAULT_MEAN_DURATION = 3.0  # random_dag: mean rounds per node (long enough for a heartbeat to pay off)
ROUNDS_PER_EFFORT = 2  # from_task: rounds for a work unit of effort 1.0 (the simulated model's scale)


@dataclass(frozen=True)
class WorkloadSpec:
    """A DAG of subtasks: ids in topological (creation) order, their dependencies and durations.

    ``durations`` are whole rounds (>= 1). Build one with :func:`random_dag`, :func:`chain`,
    :func:`fan_out`, :func:`diamond`, :func:`graham_example` or :func:`from_task`, or directly:

    >>> spec = WorkloadSpec(ids=("a", "b", "c"), deps=((), ("a",), ("a",)), durations=(1, 3, 2))
    >>> spec.total_work, spec.critical_path_length, spec.critical_path()
    (6, 4, ['a', 'b'])
    >>> spec.lower_bound(2)                 # max(critical path 4, ceil(6 / 2))
    4

    ``hidden`` nodes are not known when work starts (see :meth:`with_hidden`): the team finds one when one of
    its dependencies completes.

    >>> spec.with_hidden(["b"]).known_ids
    ('a', 'c')
    """

    ids: tuple[str, ...]
    deps: tuple[tuple[str, ...], ...]
    durations: tuple[int, ...]
    name: str = "workload"
    """Shown in tables and plot titles."""
    hidden: tuple[str, ...] = ()
    """Nodes unknown when work starts, in id order; each has at least one dependency, whose completion
    reveals it. A known node that depends on a hidden one is planned, but enters the coordination graph only
    once everything it depends on is there."""

    def __post_init__(self) -> None:
        ids = tuple(self.ids)
        deps = tuple(tuple(d) for d in self.deps)
        durations = tuple(int(d) for d in self.durations)
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "deps", deps)
        object.__setattr__(self, "durations", durations)
        object.__setattr__(self, "hidden", tuple(self.hidden))
        if not ids:
            raise ConfigError("a workload needs at least one node")
        if len(deps) != len(ids) or len(durations) != len(ids):
            raise ConfigError(f"ids, deps and durations must have one entry per node: got {len(ids)}, "
                              f"{len(deps)} and {len(durations)}")
        seen: set[str] = set()
        for nid, ds, d in zip(ids, deps, durations):
            if not isinstance(nid, str) or not nid:
                raise ConfigError(f"node ids must be non-empty strings, got {nid!r}")
            if nid in seen:
                raise ConfigError(f"node id {nid!r} appears twice")
            for dep in ds:
                if dep not in seen:
                    raise ConfigError(f"node {nid!r} depends on {dep!r}, which is not an earlier node; list "
                                      "nodes in topological order")
            if len(set(ds)) != len(ds):
                raise ConfigError(f"node {nid!r} lists a dependency twice: {list(ds)}")
            if d < 1:
                raise ConfigError(f"node {nid!r} has duration {d}; durations are whole rounds >= 1")
            seen.add(nid)
        self._check_hidden()

    def _check_hidden(self) -> None:
        if not self.hidden:
            return
        mask = self.hidden_mask
        if sum(mask) != len(self.hidden):
            unknown = sorted(set(self.hidden) - set(self.ids)) or sorted({h for h in self.hidden
                                                                          if self.hidden.count(h) > 1})
            raise ConfigError(f"hidden lists {unknown[:5]}, which are not nodes of the workload (or appear twice)")
        for nid, ds, h in zip(self.ids, self.deps, mask):
            if h and not ds:
                raise ConfigError(f"hidden node {nid!r} has no dependency, so no completion could reveal it; "
                                  "only nodes with dependencies can be hidden")

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_nodes(self) -> int:
        return len(self.ids)

    @property
    def total_work(self) -> int:
        """Sum of durations: the worker-rounds the whole workload needs without stragglers."""
        return sum(self.durations)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {nid: i for i, nid in enumerate(self.ids)}

    @cached_property
    def _dep_index(self) -> list[list[int]]:
        index = self._index
        return [[index[d] for d in ds] for ds in self.deps]

    @cached_property
    def _succ_index(self) -> list[list[int]]:
        succ: list[list[int]] = [[] for _ in self.ids]
        for i, ds in enumerate(self._dep_index):
            for d in ds:
                succ[d].append(i)
        return succ

    @cached_property
    def _deps_map(self) -> dict[str, tuple[str, ...]]:
        return dict(zip(self.ids, self.deps))

    @cached_property
    def bottom_levels(self) -> tuple[int, ...]:
        """For each node, its duration plus the longest duration-weighted path after it (HLFET priority)."""
        levels = dag.bottom_levels(self._deps_map, dict(zip(self.ids, self.durations)))
        return tuple(levels.values())

    @property
    def critical_path_length(self) -> int:
        """Duration of the longest dependency chain: no number of workers finishes sooner."""
        return max(self.bottom_levels)

    def critical_path(self) -> list[str]:
        """The longest chain by total duration (ties: earliest-created nodes), as node ids."""
        return dag.critical_path(self._deps_map, dict(zip(self.ids, self.durations)))

    def work_bound(self, n_workers: int) -> float:
        """Total work divided by the number of workers (a lower bound on the makespan)."""
        return self.total_work / _positive_int("n_workers", n_workers)

    def lower_bound(self, n_workers: int) -> int:
        """max(critical path, ceil(total work / n_workers)): no schedule of whole rounds beats it."""
        return max(self.critical_path_length, math.ceil(self.work_bound(n_workers) - 1e-9))

    @cached_property
    def hidden_mask(self) -> tuple[bool, ...]:
        """For each node, whether it is hidden."""
        hidden = set(self.hidden)
        return tuple(nid in hidden for nid in self.ids)

    @property
    def known_ids(self) -> tuple[str, ...]:
        """The nodes known when work starts."""
        return tuple(nid for nid, h in zip(self.ids, self.hidden_mask) if not h)

    def with_hidden(self, ids: Iterable[str]) -> WorkloadSpec:
        """This workload with exactly ``ids`` hidden (listed in id order).

        >>> diamond(2).with_hidden(["m1", "m0"]).hidden
        ('m0', 'm1')
        """
        chosen = set(ids)
        unknown = chosen - set(self.ids)
        if unknown:
            raise ConfigError(f"cannot hide {sorted(unknown)[:5]}: not nodes of {self.name!r}")
        # the same graph: keep its validated structure and cached indices and levels, recheck only what is hidden
        out = copy.copy(self)
        object.__setattr__(out, "hidden", tuple(nid for nid in self.ids if nid in chosen))
        out.__dict__.pop("hidden_mask", None)
        out._check_hidden()
        return out

    def with_discovery(self, probability: float, seed: int | np.random.Generator = 0) -> WorkloadSpec:
        """This workload with each node that has a dependency hidden with ``probability``, independently
        (seeded).

        >>> spec = random_dag(200, seed=0)
        >>> [len(spec.with_discovery(p, seed=1).hidden) for p in (0.0, 0.1, 0.5)]
        [0, 12, 93]
        """
        if not 0.0 <= probability <= 1.0:
            raise ConfigError(f"the discovery probability must be in [0, 1], got {probability!r}")
        coins = _generator(seed).random(len(self.ids))
        return self.with_hidden(nid for nid, ds, c in zip(self.ids, self.deps, coins) if ds and c < probability)

    def to_graph(self, *, lead: str = LEAD, known_only: bool = True) -> CoordinationGraph:
        """A fresh CoordinationGraph as the Lead would start it, all nodes pending: every known node whose
        dependencies are all known (or, with ``known_only=False``, every node)."""
        g = CoordinationGraph(lead=lead)
        placed = [False] * len(self.ids)
        for i, (nid, ds, d, h) in enumerate(zip(self.ids, self.deps, self.durations, self.hidden_mask)):
            if not known_only or (not h and all(placed[j] for j in self._dep_index[i])):
                g.discover(nid, ds, title=node_title(nid, d), by=lead)
                placed[i] = True
        return g

    def to_frame(self) -> pd.DataFrame:
        """One row per node: id, deps, duration, bottom level, whether it is on the critical path, and
        whether it is hidden."""
        import pandas as pd

        on_path = set(self.critical_path())
        return pd.DataFrame({
            "node": list(self.ids),
            "deps": [list(d) for d in self.deps],
            "duration": list(self.durations),
            "bottom_level": list(self.bottom_levels),
            "critical": [nid in on_path for nid in self.ids],
            "hidden": list(self.hidden_mask),
        })

    def __repr__(self) -> str:
        hidden = f", {len(self.hidden)} hidden" if self.hidden else ""
        return (f"<WorkloadSpec {self.name!r}: {len(self)} nodes, work {self.total_work}, "
                f"critical path {self.critical_path_length}{hidden}>")


def node_title(node_id: str, duration: int) -> str:
    """A node's title in the coordination graph of a workload."""
    return f"{node_id} ({duration} round{'s' if duration != 1 else ''})"


def _generator(seed: int | np.random.Generator) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _durations(value: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    out = tuple(int(v) for v in value)
    if len(out) != n:
        raise ConfigError(f"{what}: expected {n} durations, got {len(out)}")
    return out


def random_dag(n_nodes: int, *, layers: int | None = None, max_deps: int = 3, seed: int | np.random.Generator = 0,
               mean_duration: float = DEFAULT_MEAN_DURATION) -> WorkloadSpec:
    """A seeded layered DAG of ``n_nodes`` nodes ``t0 .. t{n-1}``.

    Nodes are split as evenly as possible over ``layers`` layers (default ``round(sqrt(n_nodes))``).
    Layer-0 nodes have no dependencies; every later node depends on one node of the previous layer
    (so the DAG really has ``layers`` levels) plus ``k - 1`` draws from all earlier layers, with ``k``
    uniform on ``1 .. max_deps`` (a repeated draw is merged, so a node has at most ``max_deps`` deps).

    Durations follow a shifted geometric distribution, ``P(d = k) = p (1 - p)^(k - 1)`` for ``k >= 1``
    with ``p = 1 / mean_duration``: whole rounds, mean ``mean_duration``, and a long right tail like real
    subtasks (most are quick, a few take much longer). ``mean_duration=1`` makes every node one round.

    >>> spec = random_dag(12, layers=3, seed=1)
    >>> len(spec), spec.deps[0], all(len(d) >= 1 for d in spec.deps[4:])
    (12, (), True)
    >>> random_dag(12, layers=3, seed=1) == spec
    True
    """
    n_nodes = _positive_int("n_nodes", n_nodes)
    max_deps = _positive_int("max_deps", max_deps)
    layers = max(1, round(math.sqrt(n_nodes))) if layers is None else _positive_int("layers", layers)
    layers = min(layers, n_nodes)
    if not mean_duration >= 1:
        raise ConfigError(f"mean_duration must be >= 1 round, got {mean_duration!r}")
    rng = _generator(seed)
    base, extra = divmod(n_nodes, layers)
    sizes = [base + (1 if i < extra else 0) for i in range(layers)]
    ids = [f"t{i}" for i in range(n_nodes)]
    deps: list[tuple[str, ...]] = []
    start = 0
    for layer, size in enumerate(sizes):
        prev_start = start - sizes[layer - 1] if layer else 0
        for _ in range(size):
            if layer == 0:
                deps.append(())
                continue
            k = int(rng.integers(1, max_deps + 1))
            first = int(rng.integers(prev_start, start))
            chosen = {first, *rng.integers(0, start, size=k - 1).tolist()}
            deps.append(tuple(ids[j] for j in sorted(chosen)))
        start += size
    if mean_duration == 1:
        durations = [1] * n_nodes
    else:
        durations = rng.geometric(1.0 / mean_duration, size=n_nodes).tolist()
    return WorkloadSpec(tuple(ids), tuple(deps), tuple(durations), name=f"random_dag({n_nodes})")


def chain(n: int, *, durations: int | Sequence[int] = 1) -> WorkloadSpec:
    """``n`` nodes ``c0 -> c1 -> ...``: no parallelism at all.

    >>> chain(3).deps
    ((), ('c0',), ('c1',))
    """
    n = _positive_int("n", n)
    ids = tuple(f"c{i}" for i in range(n))
    deps = tuple(((ids[i - 1],) if i else ()) for i in range(n))
    return WorkloadSpec(ids, deps, _durations(durations, n, "chain"), name=f"chain({n})")


def fan_out(n: int, *, durations: int | Sequence[int] = 1, root: int = 1) -> WorkloadSpec:
    """A ``root`` node (``root`` rounds) followed by ``n`` independent leaves ``l0 .. l{n-1}``.

    >>> fan_out(3, durations=[2, 1, 4]).critical_path()
    ['root', 'l2']
    """
    n = _positive_int("n", n)
    ids = ("root", *(f"l{i}" for i in range(n)))
    deps = ((), *((("root",),) * n))
    return WorkloadSpec(ids, deps, (int(root), *_durations(durations, n, "fan_out")), name=f"fan_out({n})")


def diamond(width: int = 2, *, durations: int | Sequence[int] = 2, source: int = 1, sink: int = 1) -> WorkloadSpec:
    """``src`` fanning out to ``width`` middle nodes ``m0 ..`` that all join into ``sink``.

    >>> d = diamond(3, durations=[1, 4, 2])
    >>> d.critical_path(), d.critical_path_length
    (['src', 'm1', 'sink'], 6)
    """
    width = _positive_int("width", width)
    mids = tuple(f"m{i}" for i in range(width))
    ids = ("src", *mids, "sink")
    deps = ((), *((("src",),) * width), mids)
    return WorkloadSpec(ids, deps, (int(source), *_durations(durations, width, "diamond"), int(sink)),
                        name=f"diamond({width})")


def graham_example(*, shorter: bool = False, fewer_edges: bool = False) -> WorkloadSpec:
    """Graham's (1969) timing-anomaly instance: nine tasks ``T1 .. T9`` of 3, 2, 2, 2, 4, 4, 4, 4 and 9 rounds,
    ``T1 -> T9`` and ``T4 -> T5 .. T8``. Under its own list order on 3 workers it takes 12 rounds, yet 15 on
    4 workers, 13 with every task one round ``shorter``, and 16 with ``fewer_edges`` (``T4 -> T5`` and
    ``T4 -> T6`` dropped): a list schedule can get slower when anything gets better.

    >>> graham_example().critical_path(), graham_example().total_work
    (['T1', 'T9'], 34)
    """
    ids = tuple(f"T{k}" for k in range(1, 10))
    durations = [3, 2, 2, 2, 4, 4, 4, 4, 9]
    deps: list[tuple[str, ...]] = [(), (), (), (), ("T4",), ("T4",), ("T4",), ("T4",), ("T1",)]
    if shorter:
        durations = [d - 1 for d in durations]
    if fewer_edges:
        deps[4] = deps[5] = ()
    variant = "".join((", shorter" if shorter else "", ", fewer edges" if fewer_edges else ""))
    return WorkloadSpec(ids, tuple(deps), tuple(durations), name=f"graham{variant and f'({variant[2:]})'}")


def from_task(task_id: str, *, rounds_per_effort: int = ROUNDS_PER_EFFORT) -> WorkloadSpec:
    """The reference decomposition of a registered task: its work units, their deps, and
    ``ceil(effort * rounds_per_effort)`` rounds each (at least one).

    >>> from_task("eda")
    <WorkloadSpec 'eda': 5 nodes, work 11, critical path 9>
    """
    from latte_lab import tasks
    from latte_lab.graph.dag import topological_order

    by_id = {u.id: u for u in tasks.get(task_id).work_units()}
    units = [by_id[nid] for nid in topological_order({u.id: u.deps for u in by_id.values()})]
    rounds_per_effort = _positive_int("rounds_per_effort", rounds_per_effort)
    return WorkloadSpec(tuple(u.id for u in units), tuple(tuple(u.deps) for u in units),
                        tuple(max(1, math.ceil(u.effort * rounds_per_effort - 1e-9)) for u in units),
                        name=task_id)
