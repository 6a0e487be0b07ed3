"""What a scheduling run produced: its attempts, its rounds, and the coordination graph it drove.

A run records the LATTE operators it applied (Discover, Assign, Claim, Complete, Release) as it goes; the
:class:`~latte_lab.graph.CoordinationGraph` is rebuilt from that record on first use, with every operator's
precondition checked then, and the per-round snapshots the same way. So a run of 100,000 nodes costs only
its schedule, and a small one can still be drawn round by round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from latte_lab.graph import LEAD, CoordinationGraph
from latte_lab.scheduling.workloads import WorkloadSpec, node_title

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["INTERVAL_COLUMNS", "ROUND_COLUMNS", "ScheduleResult"]

INTERVAL_COLUMNS = ["worker", "node", "start", "end", "straggled", "outcome", "attempt", "expected"]
ROUND_COLUMNS = ["round", "frontier", "ready", "busy", "done", "nodes", "stalled"]

# operations recorded by a run, as (code, node index, worker index or LEAD_INDEX)
DISCOVER, ASSIGN, CLAIM, COMPLETE, RELEASE = range(5)
LEAD_INDEX = -1


def worker_name(w: int) -> str:
    return LEAD if w == LEAD_INDEX else f"W{w + 1}"


@dataclass
class ScheduleResult:
    """One run of :func:`~latte_lab.scheduling.simulate`. Rounds are integers from 0; ``makespan`` is the
    round in which the last node completed (the number of rounds the work took)."""

    spec: WorkloadSpec
    """The workload, with the nodes that were hidden in this run marked."""
    policy: str
    n_workers: int
    seed: int | None
    """The int seed, or None when a Generator was passed."""
    straggler_p: float
    straggler_factor: float
    heartbeat: int | None
    lead_every: int
    priority: str
    discover: bool
    """Whether a found hidden node was Discovered at once (else it waited for the next re-plan)."""
    replan_every: int
    makespan: int
    intervals: pd.DataFrame
    """One row per attempt: worker, node, start, end (exclusive), straggled, outcome ("done" or
    "released"), attempt (0 for the first), expected (the node's duration)."""
    rounds: pd.DataFrame
    """One row per round: frontier (|F_t|, the graph's pending ready nodes) and ready (nodes in the graph
    whose deps are done but that have not started, including static pre-assigned ones), both before
    dispatch; after dispatch: busy workers, nodes done, nodes in the graph, and stalled (idle workers while
    ready work the team had found waited: for a Lead pass, a re-plan or its pre-assigned worker)."""
    discovery: float | None = None
    """The probability with which nodes were hidden in this run (None: the workload's own hidden nodes)."""
    _ops: list[tuple[int, int, int]] = field(repr=False, default_factory=list)
    _op_ends: list[int] = field(repr=False, default_factory=list)

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
    def n_hidden(self) -> int:
        """Nodes unknown when work started."""
        return len(self.spec.hidden)

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
    def stalled_worker_rounds(self) -> int:
        """Worker-rounds in which a worker sat idle while a node the team had found was ready to start: the
        capacity a policy loses by waiting for a Lead, a re-plan or a node's pre-assigned worker. A list
        schedule (the "self" policy) never stalls, except for a released worker sitting out its round."""
        return int(self.rounds["stalled"].sum())

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

    def _apply(self, g: CoordinationGraph, ops: list[tuple[int, int, int]]) -> None:
        spec = self.spec
        for code, i, w in ops:
            nid = spec.ids[i]
            if code == CLAIM:
                g.claim(nid, worker_name(w))
            elif code == COMPLETE:
                g.complete(nid, worker_name(w))
            elif code == ASSIGN:
                g.assign(nid, worker_name(w), by=LEAD)
            elif code == RELEASE:
                g.release(nid, by=LEAD)
            else:
                g.discover(nid, spec.deps[i], title=node_title(nid, spec.durations[i]), by=worker_name(w))

    @cached_property
    def graph(self) -> CoordinationGraph:
        """The coordination graph at the end of the run (every node done), rebuilt on first use from the
        operations the run applied; a rejected operator would raise OperatorError here."""
        g = CoordinationGraph(lead=LEAD)
        self._apply(g, self._ops)
        return g

    @cached_property
    def snapshots(self) -> list[dict[str, Any]]:
        """The graph at the end of every round, ``[{"round": t, "graph": snapshot}, ...]``: the form
        ``ll.viz.draw_graph`` / ``graph_panels`` / ``animate`` take. Rebuilt on first use, so long simulations
        do not hold one snapshot per round in memory."""
        g = CoordinationGraph(lead=LEAD)
        out, pos = [], 0
        for t, end in enumerate(self._op_ends):
            self._apply(g, self._ops[pos:end])
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
        """The run as one flat row (what :func:`~latte_lab.scheduling.compare` collects)."""
        return {
            "workload": self.spec.name, "n_nodes": len(self.spec), "policy": self.policy,
            "n_workers": self.n_workers, "seed": self.seed, "straggler_p": self.straggler_p,
            "straggler_factor": self.straggler_factor, "heartbeat": self.heartbeat,
            "lead_every": self.lead_every, "priority": self.priority, "discovery": self.discovery,
            "discover": self.discover, "replan_every": self.replan_every, "n_hidden": self.n_hidden,
            "makespan": self.makespan, "critical_path": self.critical_path, "work_bound": self.work_bound,
            "lower_bound": self.lower_bound, "utilisation": self.utilisation,
            "idle_worker_rounds": self.idle_worker_rounds, "busy_worker_rounds": self.busy_worker_rounds,
            "wasted_worker_rounds": self.wasted_worker_rounds, "stalled_worker_rounds": self.stalled_worker_rounds,
            "n_straggled": self.n_straggled, "n_released": self.n_released,
        }

    def summary(self) -> str:
        hb = f", heartbeat {self.heartbeat}" if self.heartbeat is not None else ""
        found = ""
        if self.n_hidden:
            how = "Discovered at once" if self.discover else f"planned at re-plans every {self.replan_every} rounds"
            found = f", {self.n_hidden} hidden nodes {how}"
        return (f"{self.policy} x {self.n_workers} workers on {self.spec.name}{hb}{found}: makespan {self.makespan} "
                f"(lower bound {self.lower_bound}: critical path {self.critical_path}, work/N "
                f"{self.work_bound:.1f}), utilisation {self.utilisation:.0%}, {self.n_straggled} straggled, "
                f"{self.n_released} released")

    def __repr__(self) -> str:
        return f"<ScheduleResult {self.summary()}>"
