"""Recorded trials as scheduling data: who held which node in which rounds, and what an ideal scheduler
would have done with the same graph.

A trial's event log says when a worker Claimed a node and when it Completed it, was Released from it or
had it Closed. :func:`attempts` turns that into one row per attempt, in the same form as
:attr:`~latte_lab.scheduling.ScheduleResult.intervals`, so a real team and a simulated one are drawn and
measured alike. :func:`from_trial` makes the trial's final graph a workload (each node lasting the rounds
its finishing attempt took) and sets the team's makespan beside the lower bounds and the schedulers'.

Rounds are the trial's own (round 0 is the Lead's planning). Within a round the Lead acts before the
workers, so an attempt claimed in round ``r`` and completed in round ``r2`` occupied its worker in rounds
``r .. r2`` (``end = r2 + 1``, exclusive), while a Release or Close in round ``r2`` comes before the worker's
turn and ends the attempt at ``end = r2``.

>>> events = [{"type": "claim_task", "round": 1, "agent": "Dev1", "task": "a"},
...           {"type": "complete_task", "round": 2, "agent": "Dev1", "task": "a"},
...           {"type": "claim_task", "round": 3, "agent": "Dev2", "task": "b"},
...           {"type": "release_task", "round": 5, "task": "b", "prev_owner": "Dev2"},
...           {"type": "claim_task", "round": 5, "agent": "Dev1", "task": "b"}]
>>> attempts(events).values.tolist()
[['Dev1', 'a', 1, 3, 'done', 0], ['Dev2', 'b', 3, 5, 'released', 0], ['Dev1', 'b', 5, 6, 'open', 1]]
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from latte_lab.errors import DataError
from latte_lab.graph import dag
from latte_lab.scheduling.listsched import heft, list_schedule
from latte_lab.scheduling.simulate import POLICIES, simulate
from latte_lab.scheduling.workloads import WorkloadSpec

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ATTEMPT_COLUMNS", "TrialWorkload", "attempts", "from_trial"]

FIRST_ROUND = 1  # a trial's round 0 is the Lead's planning; work starts in round 1
FINISHED_OUTCOMES = ("done", "closed")

ATTEMPT_COLUMNS = ["worker", "node", "start", "end", "outcome", "attempt"]
"""worker, node, start round, end round (exclusive), outcome ("done", "released", "closed" or "open": still
held when the log ends), attempt (0 for a node's first)."""


def _event_dicts(events: Any) -> list[dict]:
    if hasattr(events, "event_list"):
        return list(events.event_list)
    if hasattr(events, "to_dict"):  # a DataFrame of events
        return events.to_dict("records")
    return list(events)


def attempts(events: Iterable[dict] | Any) -> pd.DataFrame:
    """One row per attempt at a node (columns :data:`ATTEMPT_COLUMNS`), in claim order.

    ``events`` is a trial's event list (or a ``TrialResult``, or its ``events`` DataFrame). An attempt still
    held when the log ends is ``"open"`` and ends after the last round in the log.
    """
    import pandas as pd

    evs = _event_dicts(events)
    last_round = max((int(e.get("round") or 0) for e in evs), default=0)
    holding: dict[str, tuple[str, int]] = {}  # node -> (worker, start round)
    assigned: dict[str, tuple[str, int]] = {}  # node -> (assignee, round): the start when no Claim follows
    tries: dict[str, int] = {}
    rows: list[tuple] = []

    def finish(node: str, end: int, outcome: str) -> None:
        worker, start = holding.pop(node)
        rows.append((worker, node, start, max(end, start + 1), outcome, tries[node]))
        tries[node] += 1

    for e in evs:
        kind, node, r = e.get("type"), e.get("task"), int(e.get("round") or 0)
        if kind == "claim_task" and node is not None:
            if node in holding:  # a claim on a node someone still holds ends nothing: keep the first
                continue
            tries.setdefault(node, 0)
            holding[node] = (e.get("agent"), r)
        elif kind == "assign_task" and node is not None:
            assigned[node] = (e.get("assignee"), r)
        elif kind == "complete_task" and node not in holding and assigned.get(node, (None,))[0] == e.get("agent"):
            tries.setdefault(node, 0)  # the released code's rules let an assignee Complete without a Claim
            holding[node] = assigned.pop(node)
            finish(node, r + 1, "done")
        elif node in holding:
            if kind == "complete_task":
                finish(node, r + 1, "done")
            elif kind == "release_task":
                finish(node, r, "released")
            elif kind == "close_task":
                finish(node, r, "closed")
    for node in list(holding):
        finish(node, last_round + 1, "open")
    rows.sort(key=lambda x: (x[2], len(x[0] or ""), x[0] or "", x[3]))  # by start, then worker (W2 before W10)
    return pd.DataFrame(rows, columns=ATTEMPT_COLUMNS)


@dataclass
class TrialWorkload:
    """A recorded trial's coordination graph as a workload, beside what the team actually did."""

    spec: WorkloadSpec
    """The final graph in dependency order. A node lasts from the round its finishing attempt was claimed to
    the round it was completed or closed, the round in which its successors could be claimed (the Lead and
    then the workers act in order within a round); an unfinished node lasts the rounds it was held. A node
    claimed and completed in one round counts as one round, so a team chaining such nodes within a round can
    beat the lower bound by those rounds."""
    attempts: pd.DataFrame
    """Every attempt at a node (:func:`attempts`)."""
    n_workers: int
    actual_makespan: int
    """Rounds from the first round of work (round 1) to the round of the last Complete or Close, in the
    workload's terms (a chain claimed in round 1 and completed in round ``r`` took ``r - 1``); the trial's
    rounds when nodes were left unfinished."""
    trial_rounds: int
    """Rounds the trial ran, its final checks included."""
    late: tuple[str, ...]
    """Nodes discovered during execution, after the planning round."""
    unfinished: tuple[str, ...]
    """Nodes not done or verified when the trial ended."""
    trial_id: str | None = None
    team: str | None = None

    @property
    def lower_bound(self) -> int:
        """No schedule of this graph on ``n_workers`` workers is shorter."""
        return self.spec.lower_bound(self.n_workers)

    @property
    def efficiency(self) -> float:
        """The team's scheduling efficiency: lower bound / actual makespan (1.0 = no schedule is shorter)."""
        return self.lower_bound / self.actual_makespan

    @property
    def wasted_worker_rounds(self) -> int:
        """Worker-rounds of attempts that were released (their work thrown away)."""
        iv = self.attempts[self.attempts["outcome"] == "released"]
        return int((iv["end"] - iv["start"]).sum())

    def compare(self, policies: Iterable[str] = POLICIES, seeds: Iterable[int] = (0,)) -> pd.DataFrame:
        """The team's makespan beside the schedulers' on the same graph and workers: one row per schedule
        (the team, each simulated policy averaged over ``seeds``, the critical-path list schedule and HEFT),
        with its makespan, the lower bound, and efficiency = lower bound / makespan.

        Every node is known to the schedulers from the start: they show what an ideal team could have done
        with the graph this one ended up with."""
        import pandas as pd

        rows = [("team (recorded)", float(self.actual_makespan))]
        for policy in policies:
            runs = [simulate(self.spec, self.n_workers, policy, seed=s).makespan for s in seeds]
            rows.append((policy, sum(runs) / len(runs)))
        rows.append(("list: critical_path", float(list_schedule(self.spec, self.n_workers).makespan)))
        rows.append(("heft", float(heft(self.spec, self.n_workers).makespan)))
        df = pd.DataFrame(rows, columns=["schedule", "makespan"])
        df["lower_bound"] = self.lower_bound
        df["efficiency"] = df["lower_bound"] / df["makespan"]
        return df

    def summary(self) -> str:
        left = f", {len(self.unfinished)} unfinished" if self.unfinished else ""
        return (f"{self.trial_id or 'trial'} ({self.team or 'team'}, {self.n_workers} workers): {len(self.spec)} "
                f"nodes ({len(self.late)} discovered during execution{left}), makespan {self.actual_makespan} "
                f"rounds against a lower bound of {self.lower_bound} (critical path "
                f"{self.spec.critical_path_length}, work/N {self.spec.work_bound(self.n_workers):.1f}): "
                f"scheduling efficiency {self.efficiency:.2f}")

    def __repr__(self) -> str:
        return f"<TrialWorkload {self.summary()}>"


def from_trial(result: Any) -> TrialWorkload:
    """A recorded trial as a workload: ``result`` is a TrialResult, a run directory, or anything with the
    trial's ``snapshots`` and ``event_list``. Teams without a task graph record no snapshots and have no
    workload.

    >>> events = [{"type": "run_start", "round": None, "team": "latte", "n_workers": 2},
    ...           {"type": "claim_task", "round": 1, "agent": "Dev1", "task": "a"},
    ...           {"type": "complete_task", "round": 2, "agent": "Dev1", "task": "a"},
    ...           {"type": "claim_task", "round": 3, "agent": "Dev1", "task": "b"},
    ...           {"type": "claim_task", "round": 3, "agent": "Dev2", "task": "c"},
    ...           {"type": "complete_task", "round": 4, "agent": "Dev2", "task": "c"},
    ...           {"type": "complete_task", "round": 5, "agent": "Dev1", "task": "b"}]
    >>> graph = {"nodes": [{"id": "a", "deps": [], "status": "done"}, {"id": "b", "deps": ["a"], "status": "done"},
    ...                    {"id": "c", "deps": ["a"], "status": "done"}]}
    >>> class Trial:
    ...     event_list, snapshots = events, [{"round": 0, "graph": graph}]
    >>> tw = from_trial(Trial())
    >>> tw.spec.durations, tw.actual_makespan, tw.lower_bound
    ((1, 2, 1), 4, 3)

    The team could have claimed ``b`` and ``c`` in round 2, when ``a`` completed: it lost a round.
    """
    if isinstance(result, (str, os.PathLike)):
        from latte_lab.rundir import load_trial

        result = load_trial(result)
    snaps = list(getattr(result, "snapshots", None) or [])
    evs = _event_dicts(result)
    if not snaps:
        raise DataError("this trial has no graph snapshots, so no task graph to schedule (teams without a graph "
                        "record none); use a trial of a graph team such as latte or static")
    final = snaps[-1]["graph"]["nodes"]
    deps = {n["id"]: list(n.get("deps") or []) for n in final}
    order = dag.topological_order(deps)
    tries = attempts(evs)
    # the round in which an attempt's successors could be claimed: its Complete, or the Lead's Close
    ready_at = tries["end"] - (tries["outcome"] == "done").astype(int)
    finishing = tries.assign(ready_at=ready_at)[tries["outcome"].isin(FINISHED_OUTCOMES)].groupby("node").last()
    held = tries.groupby("node")["end"].max() - tries.groupby("node")["start"].min()
    status = {n["id"]: n.get("status") for n in final}
    unfinished = tuple(nid for nid in order if status.get(nid) not in ("done", "verified"))
    durations = []
    for nid in order:
        if nid in finishing.index:
            durations.append(max(1, int(finishing.at[nid, "ready_at"] - finishing.at[nid, "start"])))
        else:
            durations.append(max(1, int(held.get(nid, 1))))
    start = next((e for e in evs if e.get("type") == "run_start"), {})
    n_workers = int(start.get("n_workers") or 0) or int(tries["worker"].nunique()) or 1
    planned = {n["id"] for n in snaps[0]["graph"]["nodes"]} if snaps[0].get("round", 0) == 0 else set()
    last_round = max((int(e.get("round") or 0) for e in evs), default=0)
    actual = last_round if unfinished or finishing.empty else int(finishing["ready_at"].max()) - FIRST_ROUND
    spec = WorkloadSpec(tuple(order), tuple(tuple(deps[n]) for n in order), tuple(durations),
                        name=str(start.get("trial_id") or getattr(result, "trial_id", None) or "trial"))
    return TrialWorkload(spec=spec, attempts=tries, n_workers=n_workers, actual_makespan=max(1, actual),
                         trial_rounds=last_round, late=tuple(n for n in order if planned and n not in planned),
                         unfinished=unfinished, trial_id=start.get("trial_id") or getattr(result, "trial_id", None),
                         team=start.get("team"))
