"""Round-by-round simulation of workers on a workload, applying LATTE's operators to a coordination graph.

Three policies:

- ``"self"``: idle workers Claim from the frontier at once (LATTE's self-scheduling workers);
- ``"lead"``: the Lead Assigns frontier nodes to idle workers only every ``lead_every`` rounds (and when a
  heartbeat fires), modelling a central bottleneck;
- ``"static"``: every known node is Assigned round-robin before work starts; a worker runs only its own
  nodes, each once its dependencies are done.

Round ``t`` runs in the order of the paper's Algorithm 1: (1) nodes whose work ends at ``t`` Complete;
(2) heartbeat: with ``heartbeat=H`` a node held more than ``H`` rounds beyond its expected duration is
Released by the Lead; (3) the frontier is read; (4) dispatch by the policy (Assign and/or Claim). A node of
duration ``d`` claimed at ``t`` occupies its worker in rounds ``t .. t+d-1`` and completes at ``t+d``, so a
chain's makespan is exactly its total duration. A straggling attempt (probability ``straggler_p`` each
time a node starts) takes ``ceil(d * straggler_factor)`` rounds; a released node goes back to pending and
is re-run from scratch by an idle worker (the released worker sits that round out), which is the paper's
straggler mitigation (§4 D3, Release).

Discovery during execution. Hidden nodes (``spec.hidden``, or each node with a dependency hidden with
probability ``discovery``) are unknown when work starts; the worker that completes one of a hidden node's
dependencies finds it. With ``discover=True`` (LATTE: "self" and "lead") the finder Discovers it into the
graph at once. With ``discover=False`` (a plan made up front; always so for "static", as in the paper's
static ablation) found nodes wait until the Lead revises the plan, every ``replan_every`` rounds. A known
node enters the graph once everything it depends on is there.

First attempts draw their straggler coin from one array per run, and hidden nodes from the next draws, so
runs that differ only in policy, workers, heartbeat or discovery rate see the same stragglers, and a higher
discovery rate hides a superset of the nodes (common random numbers).

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
from typing import TYPE_CHECKING, Any

import numpy as np

from latte_lab.errors import ConfigError
from latte_lab.scheduling.result import (
    ASSIGN,
    CLAIM,
    COMPLETE,
    DISCOVER,
    INTERVAL_COLUMNS,
    LEAD_INDEX,
    RELEASE,
    ROUND_COLUMNS,
    ScheduleResult,
    worker_name,
)
from latte_lab.scheduling.workloads import WorkloadSpec, _generator, _positive_int

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["DISCOVERY_POLICIES", "POLICIES", "PRIORITIES", "compare", "compare_discovery", "simulate"]

POLICIES = ("self", "lead", "static")
PRIORITIES = ("fifo", "critical_path")  # frontier order: creation order (LATTE's frontier) or longest tail first
DEFAULT_LEAD_EVERY = 3  # "lead" policy: rounds between the Lead's assignment passes
DEFAULT_REPLAN_EVERY = 4  # planned teams revisit the plan as often as LATTE's heartbeat (H = 4) wakes its Lead
DISCOVERY_POLICIES = (("self", True), ("lead", True), ("self", False), ("static", False))
"""(policy, discover) pairs compared by :func:`compare_discovery`: LATTE's Discovering teams and planned ones."""
SAFETY_ROUNDS = 1000  # slack added to the max_rounds guard (only a runaway loop can reach it)

# node states while a run finds hidden nodes
_UNKNOWN, _FOUND, _KNOWN, _PLACED = range(4)  # hidden; found, waiting for a re-plan; planned; in the graph


def simulate(spec: WorkloadSpec, n_workers: int, policy: str = "self", *, straggler_p: float = 0.0,
             straggler_factor: float = 3.0, heartbeat: int | None = None, seed: int | np.random.Generator = 0,
             lead_every: int = DEFAULT_LEAD_EVERY, priority: str = "fifo", discovery: float | None = None,
             discover: bool | None = None, replan_every: int = DEFAULT_REPLAN_EVERY,
             max_rounds: int | None = None) -> ScheduleResult:
    """Run ``n_workers`` workers over ``spec`` with ``policy`` ("self", "lead" or "static").

    ``straggler_p``: probability that an attempt straggles and takes ``ceil(d * straggler_factor)``
    rounds. ``heartbeat=H``: the Lead Releases a node held more than ``H`` rounds beyond its expected
    duration, and it is re-run from scratch (None: never). ``lead_every``: rounds between the Lead's
    passes under "lead". ``priority``: frontier order, "fifo" (creation order, as LATTE's frontier) or
    "critical_path" (largest bottom level first). ``discovery``: hide each node that has a dependency with
    this probability (None: use ``spec.hidden``). ``discover``: whether found nodes are Discovered at once
    (default: yes, except under "static"); otherwise they wait for a re-plan, every ``replan_every`` rounds.
    ``max_rounds`` guards against a runaway run (default: generous, from the work and straggler factor);
    exceeding it raises ConfigError.

    >>> from latte_lab.scheduling import diamond
    >>> spec = diamond(2, durations=[3, 1])
    >>> simulate(spec, 2, "static").intervals[["worker", "node", "start", "end"]].values.tolist()
    [['W1', 'src', 0, 1], ['W1', 'm1', 1, 2], ['W2', 'm0', 1, 4], ['W2', 'sink', 4, 5]]

    A hidden node is found when the source completes (round 1). Discovered at once, it starts then; a plan
    made up front takes it in at the next re-plan, round 3:

    >>> hidden = diamond(2, durations=[3, 1]).with_hidden(["m0"])
    >>> [simulate(hidden, 2, "self", discover=d, replan_every=3).makespan for d in (True, False)]
    [5, 7]
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
    replan_every = _positive_int("replan_every", replan_every)
    static = policy == "static"
    if discover is None:
        discover = not static
    if discover and static:
        raise ConfigError("a static plan assigns all its work up front and takes nodes found mid-run only at a "
                          "re-plan (as the paper's static ablation); use discover=False, or policy 'self' or 'lead'")
    if discovery is not None:
        if spec.hidden:
            raise ConfigError(f"{spec.name!r} already has hidden nodes; pass discovery=None to use them, or a "
                              "workload without hidden nodes")
        if not 0.0 <= discovery <= 1.0:
            raise ConfigError(f"discovery must be a probability in [0, 1], got {discovery!r}")
    n = len(spec)
    if max_rounds is None:
        max_rounds = SAFETY_ROUNDS + 10 * math.ceil(spec.total_work * straggler_factor) * max(lead_every, replan_every)
    int_seed = None if isinstance(seed, np.random.Generator) else seed
    rng = _generator(seed)
    first_coin = rng.random(n).tolist()  # the straggler coin of each node's first attempt (common random numbers)
    retry_rng = np.random.default_rng(int(rng.integers(2**63)))  # coins of re-runs after a Release
    if discovery is not None:
        spec = spec.with_discovery(discovery, rng)

    dur, succ = spec.durations, spec._succ_index
    remaining = [len(d) for d in spec.deps]  # dependencies not yet done
    unplaced = list(remaining)  # dependencies not yet in the graph
    state = [_UNKNOWN if h else _KNOWN for h in spec.hidden_mask]
    rank: list[int] | None = None
    if priority == "critical_path":
        levels = spec.bottom_levels
        rank = [0] * n
        for r, i in enumerate(sorted(range(n), key=lambda i: (-levels[i], i))):
            rank[i] = r
    key = [0] * n  # frontier order: creation order in the graph (fifo) or critical-path rank
    owner = [-1] * n  # static: the worker each node is planned for
    own_ready: list[list[tuple[int, int]]] = [[] for _ in range(n_workers)]  # static: (key, node) heaps
    with_work: set[int] = set()  # static: workers whose own ready heap is not empty
    front: list[tuple[int, int]] = []  # the graph's frontier: pending, unassigned, dependencies done
    ops: list[tuple[int, int, int]] = []
    op_ends: list[int] = []
    waiting: list[int] = []  # found nodes a planned team has not taken into its plan yet, in the order found
    n_placed = ready = waiting_ready = done = plan_next = 0

    def make_ready(i: int) -> None:
        nonlocal ready
        ready += 1
        if owner[i] >= 0:
            heapq.heappush(own_ready[owner[i]], (key[i], i))
            with_work.add(owner[i])
        else:
            heapq.heappush(front, (key[i], i))

    def place(i: int, by: int) -> None:
        """Discover ``i``, then every planned node that was waiting only for it to be in the graph."""
        nonlocal n_placed
        queue, head = [i], 0
        while head < len(queue):
            j = queue[head]
            head += 1
            state[j] = _PLACED
            key[j] = n_placed if rank is None else rank[j]
            n_placed += 1
            ops.append((DISCOVER, j, by if j == i else LEAD_INDEX))
            if owner[j] >= 0:
                ops.append((ASSIGN, j, owner[j]))
            if remaining[j] == 0:
                make_ready(j)
            for s in succ[j]:
                unplaced[s] -= 1
                if unplaced[s] == 0 and state[s] == _KNOWN:
                    queue.append(s)

    def plan(i: int, by: int) -> None:
        nonlocal plan_next
        state[i] = _KNOWN
        if static:
            owner[i] = plan_next % n_workers
            plan_next += 1
        if unplaced[i] == 0:
            place(i, by)

    # the plan made up front, and the graph the Lead starts with
    for i in range(n):
        if state[i] == _KNOWN and static:
            owner[i] = plan_next % n_workers
            plan_next += 1
    for i in range(n):
        if state[i] == _KNOWN and unplaced[i] == 0:
            state[i] = _PLACED
            key[i] = n_placed if rank is None else rank[i]
            n_placed += 1
            ops.append((DISCOVER, i, LEAD_INDEX))
            if remaining[i] == 0:
                make_ready(i)
            for s in succ[i]:
                unplaced[s] -= 1
    if static:
        ops.extend((ASSIGN, i, owner[i]) for i in range(n) if state[i] == _PLACED)

    idle = set(range(n_workers))
    running: dict[int, tuple[int, int, bool, int]] = {}  # worker -> (node, start, straggled, attempt)
    ends_at: dict[int, list[tuple[int, int, int]]] = {}  # round -> [(worker, node, attempt)]
    deadlines: dict[int, list[tuple[int, int, int]]] = {}  # heartbeat release rounds
    attempts = [0] * n
    rows: list[tuple] = []
    round_stats: list[tuple[int, ...]] = []

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
        # (1) completions; a completion reveals the hidden nodes that depend on it
        for w, i, k in ends_at.pop(t, ()):
            cur = running.get(w)
            if cur is None or cur[0] != i or cur[3] != k:
                continue  # this attempt was released earlier
            rows.append((cur[1], w, i, t, cur[2], "done", k))
            ops.append((COMPLETE, i, w))
            del running[w]
            idle.add(w)
            done += 1
            for s in succ[i]:
                remaining[s] -= 1
                st = state[s]
                if st == _UNKNOWN:
                    if discover:
                        plan(s, w)
                    else:
                        state[s] = _FOUND
                        waiting.append(s)
                        waiting_ready += remaining[s] == 0
                elif remaining[s] == 0:
                    if st == _PLACED:
                        make_ready(s)
                    elif st == _FOUND:
                        waiting_ready += 1
        # (2) heartbeat: the Lead releases stragglers; the node goes back to pending
        resting: set[int] = set()
        flagged = False
        for w, i, k in deadlines.pop(t, ()):
            cur = running.get(w)
            if cur is None or cur[0] != i or cur[3] != k:
                continue
            rows.append((cur[1], w, i, t, cur[2], "released", k))
            ops.append((RELEASE, i, LEAD_INDEX))
            del running[w]
            idle.add(w)
            resting.add(w)
            owner[i] = -1
            make_ready(i)
            flagged = True
        # a planned team takes the nodes it found into its plan
        if waiting and t % replan_every == 0:
            for s in waiting:
                waiting_ready -= remaining[s] == 0
                plan(s, LEAD_INDEX)
            waiting.clear()
        frontier_size, ready_size = len(front), ready
        if done == n:
            round_stats.append((t, frontier_size, ready_size, 0, done, n_placed, 0))
            op_ends.append(len(ops))
            break
        # (3)-(4) dispatch
        if idle:
            if static:
                for w in sorted(idle - resting if front else (idle & with_work) - resting):
                    if front:  # a released node: the Lead reassigns it to the first free worker
                        i = heapq.heappop(front)[1]
                        owner[i] = w
                        ops.append((ASSIGN, i, w))
                    elif own_ready[w]:
                        i = heapq.heappop(own_ready[w])[1]
                        if not own_ready[w]:
                            with_work.discard(w)
                    else:
                        continue
                    ops.append((CLAIM, i, w))
                    start(w, i, t)
            elif front and (policy == "self" or t % lead_every == 0 or flagged):
                for w in sorted(idle - resting):
                    if not front:
                        break
                    i = heapq.heappop(front)[1]
                    if policy == "lead":
                        ops.append((ASSIGN, i, w))
                    ops.append((CLAIM, i, w))
                    start(w, i, t)
        round_stats.append((t, frontier_size, ready_size, len(running), done, n_placed,
                            min(n_workers - len(running), ready + waiting_ready)))
        op_ends.append(len(ops))
        t += 1

    import pandas as pd

    rows.sort()  # by start round, then worker number (both unique together)
    names, ids = [worker_name(w) for w in range(n_workers)], spec.ids
    starts, ws, nodes, ends, late, outcome, attempt = zip(*rows)
    intervals = pd.DataFrame(dict(zip(INTERVAL_COLUMNS, (
        [names[w] for w in ws], [ids[i] for i in nodes], starts, ends, late, outcome, attempt,
        [dur[i] for i in nodes]))))
    return ScheduleResult(
        spec=spec, policy=policy, n_workers=n_workers, seed=int_seed, straggler_p=float(straggler_p),
        straggler_factor=float(straggler_factor), heartbeat=None if heartbeat is None else int(heartbeat),
        lead_every=lead_every, priority=priority, discover=bool(discover), replan_every=replan_every,
        makespan=t, intervals=intervals, rounds=pd.DataFrame(round_stats, columns=ROUND_COLUMNS),
        discovery=None if discovery is None else float(discovery), _ops=ops, _op_ends=op_ends)

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


def compare_discovery(spec: WorkloadSpec, rates: Iterable[float], n_workers: int, *,
                      policies: Iterable[tuple[str, bool]] = DISCOVERY_POLICIES, seeds: Iterable[int] = (0,),
                      **kwargs: Any) -> pd.DataFrame:
    """Planned and Discovering teams as the discovery probability rises: one row per rate x (policy,
    discover) x seed (:meth:`ScheduleResult.row`, plus ``team``, e.g. "self (Discover)" or "static (planned)").

    The same seed hides a superset of the nodes at a higher rate, so the curves differ only by what was
    hidden. Further keyword arguments go to :func:`simulate`.

    >>> from latte_lab.scheduling import random_dag
    >>> df = compare_discovery(random_dag(40, layers=6, max_deps=1, seed=0), [0.0, 0.5], 6, seeds=[0, 1])
    >>> table = df.groupby(["team", "discovery"])[["makespan", "stalled_worker_rounds"]].mean().unstack()
    >>> table.index.tolist(), table["makespan"].values.tolist()
    (['lead (Discover)', 'self (Discover)', 'self (planned)', 'static (planned)'], [[30.0, 31.5], [24.0, 24.5], [24.0, 26.5], [37.0, 33.0]])
    >>> table["stalled_worker_rounds"].values.tolist()
    [[34.0, 34.5], [0.0, 0.0], [0.0, 11.5], [41.0, 51.5]]
    """
    import pandas as pd

    rows = []
    for rate in rates:
        for policy, discover in policies:
            for seed in seeds:
                row = simulate(spec, n_workers, policy, seed=seed, discovery=rate, discover=discover, **kwargs).row()
                row["team"] = f"{policy} ({'Discover' if discover else 'planned'})"
                rows.append(row)
    df = pd.DataFrame(rows)
    df["heartbeat"] = df["heartbeat"].astype("Int64")
    return df
