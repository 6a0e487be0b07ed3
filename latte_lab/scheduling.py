"""Scheduling on a coordination graph: synthetic workloads and a discrete-time scheduler, for teaching.

A :class:`WorkloadSpec` is a DAG of subtasks with a duration in rounds for each. :func:`simulate` runs
``n_workers`` workers over it round by round, driving a real :class:`~latte_lab.graph.CoordinationGraph`
with the LATTE operators, so the graph is consistent at every round and can be drawn with
``ll.viz.draw_graph(result, round=r)``. Three policies:

- ``"self"``: idle workers Claim from the frontier at once (LATTE's self-scheduling workers);
- ``"lead"``: the Lead Assigns frontier nodes to idle workers only every ``lead_every`` rounds (and when a
  heartbeat fires), modelling a central bottleneck;
- ``"static"``: every node is Assigned round-robin before work starts; a worker runs only its own nodes,
  each once its dependencies are done.

Round ``t`` runs in the order of the paper's Algorithm 1: (1) nodes whose work ends at ``t`` Complete;
(2) heartbeat: with ``heartbeat=H`` a node held more than ``H`` rounds beyond its expected duration is
Released by the Lead; (3) the frontier is read; (4) dispatch by the policy (Assign and/or Claim). A node of
duration ``d`` claimed at ``t`` occupies its worker in rounds ``t .. t+d-1`` and completes at ``t+d``, so a
chain's makespan is exactly its total duration. A straggling attempt (probability ``straggler_p`` each
time a node starts) takes ``ceil(d * straggler_factor)`` rounds; a released node goes back to pending and
is re-run from scratch by an idle worker (the released worker sits that round out), which is the paper's
straggler mitigation (§4 D3, Release).

Everything here is pure: no I/O, no clock, randomness only from the seed (an int or a numpy Generator).
First attempts draw their straggler coin from one array per run, so runs that differ only in policy,
workers or heartbeat see the same stragglers (common random numbers). The drawing helpers at the end
import matplotlib/seaborn/ipywidgets inside the functions.

>>> spec = chain(3, durations=[2, 1, 3])
>>> res = simulate(spec, n_workers=4, policy="self")
>>> res.makespan, res.critical_path, res.work_bound
(6, 6, 1.5)
>>> fan = fan_out(4, durations=[1, 2, 3, 2])
>>> simulate(fan, 4).makespan            # the root (1 round), then the longest leaf
4
>>> simulate(fan, 2).makespan, fan.lower_bound(2)    # two workers: the work bound ceil(9 / 2) binds
(5, 5)
>>> simulate(fan, 1).makespan == fan.total_work
True
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from latte_lab.errors import ConfigError
from latte_lab.graph import CoordinationGraph

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "POLICIES",
    "PRIORITIES",
    "ScheduleResult",
    "WorkloadSpec",
    "chain",
    "compare",
    "diamond",
    "draw_workload",
    "explore",
    "fan_out",
    "from_task",
    "plot_gantt",
    "plot_makespan",
    "random_dag",
    "simulate",
]

POLICIES = ("self", "lead", "static")
PRIORITIES = ("fifo", "critical_path")  # frontier order: creation order (LATTE's frontier) or longest tail first
LEAD = "Lead"  # the Lead's name in the simulated graph
DEFAULT_LEAD_EVERY = 3  # "lead" policy: rounds between the Lead's assignment passes
DEFAULT_MEAN_DURATION = 3.0  # random_dag: mean rounds per node (long enough for a heartbeat to pay off)
ROUNDS_PER_EFFORT = 2  # from_task: rounds for a work unit of effort 1.0 (the simulated model's scale)
SAFETY_ROUNDS = 1000  # simulate: slack added to the max_rounds guard (only a runaway loop can reach it)


# ---------------------------------------------------------------------------------------------- workloads

@dataclass(frozen=True)
class WorkloadSpec:
    """A DAG of subtasks: ids in topological (creation) order, their dependencies and durations.

    ``durations`` are whole rounds (>= 1). Build one with :func:`random_dag`, :func:`chain`,
    :func:`fan_out`, :func:`diamond` or :func:`from_task`, or directly:

    >>> spec = WorkloadSpec(ids=("a", "b", "c"), deps=((), ("a",), ("a",)), durations=(1, 3, 2))
    >>> spec.total_work, spec.critical_path_length, spec.critical_path()
    (6, 4, ['a', 'b'])
    >>> spec.lower_bound(2)                 # max(critical path 4, ceil(6 / 2))
    4
    """

    ids: tuple[str, ...]
    deps: tuple[tuple[str, ...], ...]
    durations: tuple[int, ...]
    name: str = "workload"
    """Shown in tables and plot titles."""

    def __post_init__(self) -> None:
        ids = tuple(self.ids)
        deps = tuple(tuple(d) for d in self.deps)
        durations = tuple(int(d) for d in self.durations)
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "deps", deps)
        object.__setattr__(self, "durations", durations)
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
    def bottom_levels(self) -> tuple[int, ...]:
        """For each node, its duration plus the longest duration-weighted path after it (HLFET priority)."""
        levels = [0] * len(self.ids)
        for i in range(len(self.ids) - 1, -1, -1):
            levels[i] = self.durations[i] + max((levels[s] for s in self._succ_index[i]), default=0)
        return tuple(levels)

    @property
    def critical_path_length(self) -> int:
        """Duration of the longest dependency chain: no number of workers finishes sooner."""
        return max(self.bottom_levels)

    def critical_path(self) -> list[str]:
        """The longest chain by total duration (ties: earliest-created nodes), as node ids."""
        levels = self.bottom_levels
        top = max(levels)
        i = next(i for i, b in enumerate(levels) if b == top and not self.deps[i])
        path = [i]
        while self._succ_index[i]:
            rest = levels[i] - self.durations[i]
            nxt = [s for s in self._succ_index[i] if levels[s] == rest]
            if not nxt:
                break
            i = min(nxt)
            path.append(i)
        return [self.ids[j] for j in path]

    def work_bound(self, n_workers: int) -> float:
        """Total work divided by the number of workers (a lower bound on the makespan)."""
        return self.total_work / _positive_int("n_workers", n_workers)

    def lower_bound(self, n_workers: int) -> int:
        """max(critical path, ceil(total work / n_workers)): no schedule of whole rounds beats it."""
        return max(self.critical_path_length, math.ceil(self.work_bound(n_workers) - 1e-9))

    def to_graph(self, *, lead: str = LEAD) -> CoordinationGraph:
        """A fresh CoordinationGraph with every node discovered by the Lead (all pending)."""
        g = CoordinationGraph(lead=lead)
        for nid, ds, d in zip(self.ids, self.deps, self.durations):
            g.discover(nid, ds, title=f"{nid} ({d} round{'s' if d != 1 else ''})", by=lead)
        return g

    def to_frame(self) -> pd.DataFrame:
        """One row per node: id, deps, duration, bottom level, and whether it is on the critical path."""
        import pandas as pd

        on_path = set(self.critical_path())
        return pd.DataFrame({
            "node": list(self.ids),
            "deps": [list(d) for d in self.deps],
            "duration": list(self.durations),
            "bottom_level": list(self.bottom_levels),
            "critical": [nid in on_path for nid in self.ids],
        })

    def __repr__(self) -> str:
        return (f"<WorkloadSpec {self.name!r}: {len(self)} nodes, work {self.total_work}, "
                f"critical path {self.critical_path_length}>")


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


def from_task(task_id: str, *, rounds_per_effort: int = ROUNDS_PER_EFFORT) -> WorkloadSpec:
    """The reference decomposition of a registered task: its work units, their deps, and
    ``ceil(effort * rounds_per_effort)`` rounds each (at least one).

    >>> from_task("eda")
    <WorkloadSpec 'eda': 4 nodes, work 10, critical path 8>
    """
    from latte_lab import tasks

    units = tasks.get(task_id).work_units()
    rounds_per_effort = _positive_int("rounds_per_effort", rounds_per_effort)
    return WorkloadSpec(tuple(u.id for u in units), tuple(tuple(u.deps) for u in units),
                        tuple(max(1, math.ceil(u.effort * rounds_per_effort - 1e-9)) for u in units),
                        name=task_id)


# ---------------------------------------------------------------------------------------------- simulation

INTERVAL_COLUMNS = ["worker", "node", "start", "end", "straggled", "outcome", "attempt", "expected"]
ROUND_COLUMNS = ["round", "frontier", "ready", "busy", "done"]


@dataclass
class ScheduleResult:
    """One run of :func:`simulate`. Rounds are integers from 0; ``makespan`` is the round in which the
    last node completed (the number of rounds the work took)."""

    spec: WorkloadSpec
    policy: str
    n_workers: int
    seed: int | None
    """The int seed, or None when a Generator was passed."""
    straggler_p: float
    straggler_factor: float
    heartbeat: int | None
    lead_every: int
    priority: str
    makespan: int
    intervals: pd.DataFrame
    """One row per attempt: worker, node, start, end (exclusive), straggled, outcome ("done" or
    "released"), attempt (0 for the first), expected (the node's duration)."""
    rounds: pd.DataFrame
    """One row per round: frontier (|F_t|, the graph's pending ready nodes) and ready (nodes whose deps
    are done but that have not started, including static pre-assigned ones), both before dispatch; busy
    workers after dispatch; nodes done."""
    graph: CoordinationGraph
    """The final graph (every node done)."""
    _round_log_ends: list[int] = field(repr=False, default_factory=list)

    @property
    def critical_path(self) -> int:
        """The duration-weighted critical path of the workload (lower bound on the makespan)."""
        return self.spec.critical_path_length

    @property
    def work_bound(self) -> float:
        """Total work / n_workers (the other lower bound)."""
        return self.spec.work_bound(self.n_workers)

    @property
    def lower_bound(self) -> int:
        return self.spec.lower_bound(self.n_workers)

    @property
    def busy_worker_rounds(self) -> int:
        """Worker-rounds spent on attempts, including straggling and released (wasted) ones."""
        return int((self.intervals["end"] - self.intervals["start"]).sum())

    @property
    def idle_worker_rounds(self) -> int:
        return self.n_workers * self.makespan - self.busy_worker_rounds

    @property
    def utilisation(self) -> float:
        """Busy worker-rounds / (n_workers * makespan)."""
        return self.busy_worker_rounds / (self.n_workers * self.makespan)

    @property
    def wasted_worker_rounds(self) -> int:
        """Worker-rounds of attempts that were released and thrown away."""
        iv = self.intervals[self.intervals["outcome"] == "released"]
        return int((iv["end"] - iv["start"]).sum())

    @property
    def n_released(self) -> int:
        return int((self.intervals["outcome"] == "released").sum())

    @property
    def n_straggled(self) -> int:
        return int(self.intervals["straggled"].sum())

    @property
    def frontier_sizes(self) -> list[int]:
        """|F_t| for every round t (before dispatch)."""
        return self.rounds["frontier"].tolist()

    @cached_property
    def snapshots(self) -> list[dict[str, Any]]:
        """The graph at the end of every round, ``[{"round": t, "graph": snapshot}, ...]``: the form
        ``ll.viz.draw_graph`` / ``graph_panels`` / ``animate`` take. Rebuilt on first use by replaying the
        graph's operation log, so long simulations do not hold one snapshot per round in memory."""
        log = self.graph.log
        g = CoordinationGraph(lead=self.graph.lead)
        out, pos = [], 0
        for t, end in enumerate(self._round_log_ends):
            for e in log[pos:end]:
                g.replay_entry(e)
            pos = end
            out.append({"round": t, "graph": g.snapshot()})
        return out

    @property
    def event_list(self) -> list[dict[str, Any]]:
        """Claim/complete/release events in round order, the form ``ll.viz.gantt`` reads."""
        events = []
        for r in self.intervals.itertuples(index=False):
            events.append((r.start, 1, {"type": "claim_task", "round": r.start, "agent": r.worker, "task": r.node}))
            if r.outcome == "done":
                end = {"type": "complete_task", "round": r.end, "agent": r.worker, "task": r.node}
            else:
                end = {"type": "release_task", "round": r.end, "agent": LEAD, "task": r.node,
                       "prev_owner": r.worker}
            events.append((r.end, 0, end))
        events.sort(key=lambda x: (x[0], x[1]))
        return [e for _, _, e in events]

    def row(self) -> dict[str, Any]:
        """The run as one flat row (what :func:`compare` collects)."""
        return {
            "workload": self.spec.name, "n_nodes": len(self.spec), "policy": self.policy,
            "n_workers": self.n_workers, "seed": self.seed, "straggler_p": self.straggler_p,
            "straggler_factor": self.straggler_factor, "heartbeat": self.heartbeat,
            "lead_every": self.lead_every, "priority": self.priority, "makespan": self.makespan,
            "critical_path": self.critical_path, "work_bound": self.work_bound,
            "lower_bound": self.lower_bound, "utilisation": self.utilisation,
            "idle_worker_rounds": self.idle_worker_rounds, "busy_worker_rounds": self.busy_worker_rounds,
            "wasted_worker_rounds": self.wasted_worker_rounds, "n_straggled": self.n_straggled,
            "n_released": self.n_released,
        }

    def summary(self) -> str:
        hb = f", heartbeat {self.heartbeat}" if self.heartbeat is not None else ""
        return (f"{self.policy} x {self.n_workers} workers on {self.spec.name}{hb}: makespan {self.makespan} "
                f"(lower bound {self.lower_bound}: critical path {self.critical_path}, work/N "
                f"{self.work_bound:.1f}), utilisation {self.utilisation:.0%}, {self.n_straggled} straggled, "
                f"{self.n_released} released")

    def __repr__(self) -> str:
        return f"<ScheduleResult {self.summary()}>"



def simulate(spec: WorkloadSpec, n_workers: int, policy: str = "self", *, straggler_p: float = 0.0,
             straggler_factor: float = 3.0, heartbeat: int | None = None, seed: int | np.random.Generator = 0,
             lead_every: int = DEFAULT_LEAD_EVERY, priority: str = "fifo",
             max_rounds: int | None = None) -> ScheduleResult:
    """Run ``n_workers`` workers over ``spec`` with ``policy`` ("self", "lead" or "static").

    ``straggler_p``: probability that an attempt straggles and takes ``ceil(d * straggler_factor)``
    rounds. ``heartbeat=H``: the Lead Releases a node held more than ``H`` rounds beyond its expected
    duration, and it is re-run from scratch (None: never). ``lead_every``: rounds between the Lead's
    passes under "lead". ``priority``: frontier order, "fifo" (creation order, as LATTE's frontier) or
    "critical_path" (largest bottom level first). ``max_rounds`` guards against a runaway run (default:
    generous, from the work and straggler factor); exceeding it raises ConfigError.

    >>> spec = diamond(2, durations=[3, 1])
    >>> simulate(spec, 2, "static").intervals[["worker", "node", "start", "end"]].values.tolist()
    [['W1', 'src', 0, 1], ['W1', 'm1', 1, 2], ['W2', 'm0', 1, 4], ['W2', 'sink', 4, 5]]
    """
    if not isinstance(spec, WorkloadSpec):
        raise ConfigError(f"spec must be a WorkloadSpec (see random_dag, chain, ...), got {type(spec).__name__}")
    n_workers = _positive_int("n_workers", n_workers)
    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    if priority not in PRIORITIES:
        raise ConfigError(f"unknown priority {priority!r}; use one of {', '.join(PRIORITIES)}")
    if not 0.0 <= straggler_p <= 1.0:
        raise ConfigError(f"straggler_p must be a probability in [0, 1], got {straggler_p!r}")
    if not straggler_factor >= 1.0:
        raise ConfigError(f"straggler_factor must be >= 1 (a straggler is slower), got {straggler_factor!r}")
    if heartbeat is not None and (isinstance(heartbeat, bool) or not isinstance(heartbeat, (int, np.integer))
                                  or heartbeat < 0):
        raise ConfigError(f"heartbeat must be None or a non-negative int of rounds, got {heartbeat!r}")
    lead_every = _positive_int("lead_every", lead_every)
    n = len(spec)
    if max_rounds is None:
        max_rounds = SAFETY_ROUNDS + 10 * math.ceil(spec.total_work * straggler_factor) * max(1, lead_every)
    int_seed = None if isinstance(seed, np.random.Generator) else seed
    rng = _generator(seed)
    first_coin = rng.random(n)  # the straggler coin of each node's first attempt (common random numbers)
    retry_rng = np.random.default_rng(int(rng.integers(2**63)))  # coins of re-runs after a Release

    ids, dur = spec.ids, spec.durations
    succ = spec._succ_index
    remaining = [len(d) for d in spec.deps]  # unfinished deps, mirrored from the graph for O(1) lookups
    if priority == "fifo":
        key = list(range(n))
    else:
        levels = spec.bottom_levels
        key = sorted(range(n), key=lambda i: (-levels[i], i))
        rank = [0] * n
        for r, i in enumerate(key):
            rank[i] = r
        key = rank
    index = spec._index
    workers = [f"W{i + 1}" for i in range(n_workers)]

    g = spec.to_graph(lead=LEAD)
    owner: list[int | None] = [None] * n  # static: the worker each node is pre-assigned to
    own_ready: list[list[tuple[int, int]]] = [[] for _ in workers]  # static: heap of (key, node) per worker
    if policy == "static":
        for i in range(n):
            owner[i] = i % n_workers
            g.assign(ids[i], workers[i % n_workers], by=LEAD)
            if remaining[i] == 0:
                heapq.heappush(own_ready[i % n_workers], (key[i], i))

    idle = set(range(n_workers))
    running: dict[int, tuple[int, int, bool, int]] = {}  # worker -> (node, start, straggled, attempt)
    ends_at: dict[int, list[tuple[int, int, int]]] = {}  # round -> [(worker, node, attempt)]
    deadlines: dict[int, list[tuple[int, int, int]]] = {}  # heartbeat release rounds
    attempts = [0] * n
    ready = sum(1 for r in remaining if r == 0)
    done = 0
    rows: list[tuple] = []
    round_stats: list[tuple[int, int, int, int, int]] = []
    log_ends: list[int] = []
    log_len = len(g.log_since(0))

    def start(w: int, i: int, t: int) -> None:
        nonlocal ready
        k = attempts[i]
        attempts[i] += 1
        coin = first_coin[i] if k == 0 else retry_rng.random()
        straggled = bool(coin < straggler_p)
        actual = math.ceil(dur[i] * straggler_factor - 1e-9) if straggled else dur[i]
        running[w] = (i, t, straggled, k)
        ends_at.setdefault(t + actual, []).append((w, i, k))
        if heartbeat is not None:
            deadline = t + dur[i] + heartbeat + 1  # held more than H rounds beyond its expected duration
            if deadline < t + actual:
                deadlines.setdefault(deadline, []).append((w, i, k))
        idle.discard(w)
        ready -= 1

    t = 0
    while True:
        if t > max_rounds:
            raise ConfigError(f"simulation did not finish within max_rounds={max_rounds} ({done}/{n} nodes "
                              "done); with straggler_p near 1 and a short heartbeat every attempt is released. "
                              "Raise max_rounds or lower straggler_p")
        # (1) completions
        for w, i, k in ends_at.pop(t, ()):
            cur = running.get(w)
            if cur is None or cur[0] != i or cur[3] != k:
                continue  # this attempt was released earlier
            g.complete(ids[i], workers[w])
            rows.append((cur[1], w, ids[i], t, cur[2], "done", k, dur[i]))
            del running[w]
            idle.add(w)
            done += 1
            for s in succ[i]:
                remaining[s] -= 1
                if remaining[s] == 0:
                    ready += 1
                    if owner[s] is not None:
                        heapq.heappush(own_ready[owner[s]], (key[s], s))
        # (2) heartbeat: the Lead releases stragglers; the node goes back to pending
        resting: set[int] = set()
        flagged = False
        for w, i, k in deadlines.pop(t, ()):
            cur = running.get(w)
            if cur is None or cur[0] != i or cur[3] != k:
                continue
            g.release(ids[i], by=LEAD)
            rows.append((cur[1], w, ids[i], t, cur[2], "released", k, dur[i]))
            del running[w]
            idle.add(w)
            resting.add(w)
            owner[i] = None
            ready += 1
            flagged = True
        frontier_size, ready_size = len(g.frontier()), ready
        if done == n:
            round_stats.append((t, frontier_size, ready_size, len(running), done))
            log_len += len(g.log_since(log_len))
            log_ends.append(log_len)
            break
        # (3)-(4) dispatch
        free = sorted(idle - resting)
        if free:
            if policy == "self" or (policy == "lead" and (t % lead_every == 0 or flagged)):
                frontier = g.frontier()
                if priority != "fifo":
                    frontier.sort(key=lambda v: key[index[v]])
                for w, v in zip(free, frontier):
                    if policy == "lead":
                        g.assign(v, workers[w], by=LEAD)
                    g.claim(v, workers[w])
                    start(w, index[v], t)
            elif policy == "static":
                frontier = g.frontier()  # only released nodes are pending under static: the Lead reassigns them
                if frontier and priority != "fifo":
                    frontier.sort(key=lambda v: key[index[v]])
                pos = 0
                for w in free:
                    if pos < len(frontier):
                        v = frontier[pos]
                        pos += 1
                        g.assign(v, workers[w], by=LEAD)
                        owner[index[v]] = w
                    elif own_ready[w]:
                        v = ids[heapq.heappop(own_ready[w])[1]]
                    else:
                        continue
                    g.claim(v, workers[w])
                    start(w, index[v], t)
        round_stats.append((t, frontier_size, ready_size, len(running), done))
        log_len += len(g.log_since(log_len))
        log_ends.append(log_len)
        t += 1

    import pandas as pd

    rows.sort()  # by start round, then worker number (both unique together)
    intervals = pd.DataFrame([(workers[w], v, s, e, *rest) for s, w, v, e, *rest in rows], columns=INTERVAL_COLUMNS)
    return ScheduleResult(
        spec=spec, policy=policy, n_workers=n_workers, seed=int_seed, straggler_p=float(straggler_p),
        straggler_factor=float(straggler_factor), heartbeat=None if heartbeat is None else int(heartbeat),
        lead_every=lead_every, priority=priority, makespan=t, intervals=intervals,
        rounds=pd.DataFrame(round_stats, columns=ROUND_COLUMNS), graph=g, _round_log_ends=log_ends)


def compare(spec: WorkloadSpec, n_workers_list: Iterable[int], policies: Iterable[str] = POLICIES,
            seeds: Iterable[int] = (0,), **kwargs: Any) -> pd.DataFrame:
    """Every combination of workers x policy x seed, one row per run (:meth:`ScheduleResult.row`).

    Further keyword arguments go to :func:`simulate`; a list value for ``heartbeat`` or ``straggler_p``
    is swept too (e.g. ``heartbeat=[None, 2]``).

    >>> df = compare(chain(4), [1, 2], ["self", "static"], seeds=[0, 1])
    >>> len(df), df["makespan"].unique().tolist()
    (8, [4])
    """
    import itertools

    import pandas as pd

    sweep = {k: list(v) for k, v in kwargs.items() if k in ("heartbeat", "straggler_p") and isinstance(v, list)}
    fixed = {k: v for k, v in kwargs.items() if k not in sweep}
    names = list(sweep)
    rows = []
    for values in itertools.product(*sweep.values()):
        extra = dict(zip(names, values))
        for n_workers in n_workers_list:
            for policy in policies:
                for seed in seeds:
                    rows.append(simulate(spec, n_workers, policy, seed=seed, **fixed, **extra).row())
    df = pd.DataFrame(rows)
    df["heartbeat"] = df["heartbeat"].astype("Int64")  # None stays <NA> instead of turning the column float
    return df


# ---------------------------------------------------------------------------------------------- pictures

def draw_workload(spec: WorkloadSpec, *, ax=None, title: str | None = None):
    """The workload as a coordination graph (``ll.viz.draw_graph``) with its duration-weighted critical
    path drawn in red and the initial frontier outlined; returns the Axes."""
    import matplotlib.pyplot as plt
    import networkx as nx

    from latte_lab import viz

    g = spec.to_graph()
    pos = viz.layout([{"round": 0, "graph": g.snapshot()}])
    if ax is None:
        depth = max(p[0] for p in pos.values())
        _, ax = plt.subplots(figsize=(min(14, max(5, 1.1 * (depth + 2))), 4))
    viz.draw_graph(g, ax=ax, pos=pos, legend=False,
                   title=title or f"{spec.name}: critical path {spec.critical_path_length} rounds (red), "
                                  "frontier outlined")
    path = spec.critical_path()
    G = nx.DiGraph(list(zip(path, path[1:])))
    G.add_nodes_from(path)
    nx.draw_networkx_edges(G, pos, ax=ax, edge_color="#d62828", width=2.4, arrows=True, arrowsize=12,
                           node_size=420)
    front = g.frontier()
    F = nx.DiGraph()
    F.add_nodes_from(front)
    nx.draw_networkx_nodes(F, pos, ax=ax, node_color="none", node_size=620, edgecolors="#1d3557", linewidths=2.0)
    for nid in spec.ids:
        x, y = pos[nid]
        ax.annotate(str(spec.durations[spec._index[nid]]), (x, y), xytext=(0, -14), textcoords="offset points",
                    ha="center", fontsize=6, color="#475467")
    return ax


def plot_gantt(result: ScheduleResult, *, ax=None, title: str | None = None, labels: bool | None = None):
    """Who ran which node when: one bar per attempt, stragglers in red, released attempts hatched, and
    the lower bound as a dashed line; returns the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    iv = result.intervals
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.6 + 0.38 * result.n_workers))
    if labels is None:
        labels = len(iv) <= 80
    colours = {False: "#5b8def", True: "#d62828"}
    for r in iv.itertuples(index=False):
        y = int(r.worker[1:]) - 1
        released = r.outcome == "released"
        ax.barh(y, r.end - r.start, left=r.start, height=0.72, color=colours[bool(r.straggled)],
                alpha=0.45 if released else 0.9, hatch="///" if released else None, edgecolor="white")
        if labels:
            ax.text(r.start + 0.08, y, r.node, va="center", fontsize=6, color="white" if not released else "black")
    ax.axvline(result.lower_bound, color="#344054", ls="--", lw=1)
    ax.set_yticks(range(result.n_workers), [f"W{i + 1}" for i in range(result.n_workers)])
    ax.invert_yaxis()
    ax.set_xlim(0, max(result.makespan, result.lower_bound) + 0.5)
    ax.set_xlabel("round")
    ax.legend(handles=[Patch(color=colours[False], label="attempt"), Patch(color=colours[True], label="straggler"),
                       Patch(facecolor="white", edgecolor="#667085", hatch="///", label="released"),
                       plt.Line2D([], [], color="#344054", ls="--", label="lower bound")],
              fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title(title or result.summary(), fontsize=8)
    return ax


def plot_makespan(df: pd.DataFrame, *, ax=None, title: str | None = None):
    """Makespan against the number of workers per policy (mean over seeds, 95% interval), with the
    critical path and total work / N lower bounds; ``df`` is :func:`compare` output for one workload."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    sns.lineplot(data=df, x="n_workers", y="makespan", hue="policy", style="policy", markers=True, dashes=False,
                 errorbar=("ci", 95), ax=ax)
    bounds = df.groupby("n_workers")[["critical_path", "work_bound", "lower_bound"]].first().reset_index()
    ax.plot(bounds["n_workers"], bounds["critical_path"], color="#667085", ls=":", label="critical path")
    ax.plot(bounds["n_workers"], bounds["work_bound"], color="#667085", ls="--", label="total work / N")
    ax.fill_between(bounds["n_workers"], 0, bounds["lower_bound"], color="#98a2b3", alpha=0.15,
                    label="impossible (below both bounds)")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("workers")
    ax.set_ylabel("makespan (rounds)")
    ax.legend(fontsize=7, frameon=False)
    name = df["workload"].iloc[0] if "workload" in df and len(df) else ""
    ax.set_title(title or f"makespan vs workers on {name}", fontsize=9)
    return ax


def straggler_figure(spec: WorkloadSpec, n_workers: int, straggler_p: float, *, heartbeat: int = 2,
                     seed: int = 0, policy: str = "self", straggler_factor: float = 3.0):
    """Two Gantt charts of the same run (same stragglers), without and with heartbeat release."""
    import matplotlib.pyplot as plt

    runs = [simulate(spec, n_workers, policy, straggler_p=straggler_p, straggler_factor=straggler_factor,
                     heartbeat=hb, seed=seed) for hb in (None, heartbeat)]
    fig, axes = plt.subplots(2, 1, figsize=(9.5, 1.6 + 0.7 * n_workers))
    right = max(max(r.makespan, r.lower_bound) for r in runs) + 0.5
    for ax, res in zip(axes, runs):
        plot_gantt(res, ax=ax, labels=len(spec) <= 40)
        ax.set_xlim(0, right)  # one time axis for both, so the makespans compare at a glance
    fig.tight_layout()
    return fig


def explore(spec: WorkloadSpec, *, n_workers: int = 4, straggler_p: float = 0.2, heartbeat: int = 2,
            straggler_factor: float = 3.0, seed: int = 0, max_workers: int = 8):
    """Sliders for the number of workers and the straggler probability over :func:`straggler_figure`.

    The figure for the default values is displayed as an ordinary output (so it shows in a static render
    of the notebook); moving a slider replaces it in place through its display id.
    """
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    workers_w = w.IntSlider(value=n_workers, min=1, max=max_workers, description="workers", continuous_update=False)
    p_w = w.FloatSlider(value=straggler_p, min=0.0, max=0.6, step=0.05, description="straggler p",
                        continuous_update=False)
    display(w.HBox([workers_w, p_w]))

    def figure():
        fig = straggler_figure(spec, workers_w.value, p_w.value, heartbeat=heartbeat, seed=seed,
                               straggler_factor=straggler_factor)
        plt.close(fig)
        return fig

    handle = display(figure(), display_id=True)

    def update(_change=None):
        handle.update(figure())

    workers_w.observe(update, names="value")
    p_w.observe(update, names="value")
    return workers_w, p_w
