"""Round-by-round simulation of workers on a workload, driving a real CoordinationGraph.

Three policies:

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

First attempts draw their straggler coin from one array per run, so runs that differ only in policy,
workers or heartbeat see the same stragglers (common random numbers).

>>> from latte_lab.scheduling import chain, fan_out
>>> res = simulate(chain(3, durations=[2, 1, 3]), n_workers=4, policy="self")
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
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from latte_lab.errors import ConfigError
from latte_lab.graph import LEAD, CoordinationGraph
from latte_lab.scheduling.workloads import WorkloadSpec, _generator, _positive_int

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["POLICIES", "PRIORITIES", "ScheduleResult", "compare", "simulate"]

POLICIES = ("self", "lead", "static")
PRIORITIES = ("fifo", "critical_path")  # frontier order: creation order (LATTE's frontier) or longest tail first
DEFAULT_LEAD_EVERY = 3  # "lead" policy: rounds between the Lead's assignment passes
SAFETY_ROUNDS = 1000  # simulate: slack added to the max_rounds guard (only a runaway loop can reach it)

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
        """Claim, Complete and Release events in a trial's form and round order (within a round: the Lead's
        Release, then Claims, then Completes), so :func:`latte_lab.scheduling.trials.attempts` reads them back
        as :attr:`intervals`. A node's work ends in the round before its completion takes effect here, which
        in a trial is the round of the worker's Complete."""
        events = []
        for r in self.intervals.itertuples(index=False):
            events.append((r.start, 1, {"type": "claim_task", "round": r.start, "agent": r.worker, "task": r.node}))
            if r.outcome == "done":
                events.append((r.end - 1, 2, {"type": "complete_task", "round": r.end - 1, "agent": r.worker,
                                              "task": r.node}))
            else:
                events.append((r.end, 0, {"type": "release_task", "round": r.end, "agent": LEAD, "task": r.node,
                                          "prev_owner": r.worker}))
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

    >>> from latte_lab.scheduling import diamond
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

    >>> from latte_lab.scheduling import chain
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
