"""Scheduling on a coordination graph, for teaching: synthetic workloads and schedulers (pure numbers).

A :class:`WorkloadSpec` is a DAG of subtasks with a duration in rounds for each. :func:`simulate` runs
``n_workers`` workers over it round by round, driving a real :class:`~latte_lab.graph.CoordinationGraph`
with the LATTE operators, so the graph is consistent at every round and can be drawn with
``ll.viz.draw_graph(result, round=r)``.

Everything here is pure: no I/O, no clock, no drawing, randomness only from the seed (an int or a numpy
Generator). The pictures of these results live in :mod:`latte_lab.viz.scheduling` and
:mod:`latte_lab.viz.gantt`.

>>> from latte_lab import scheduling as sched
>>> spec = sched.diamond(3, durations=[1, 4, 2])
>>> res = sched.simulate(spec, n_workers=2, policy="self")
>>> res.makespan, spec.lower_bound(2)
(6, 6)
"""

from __future__ import annotations

from latte_lab.scheduling.listsched import (
    LIST_PRIORITIES,
    ListSchedule,
    graham_bound,
    heft,
    list_schedule,
    upward_rank,
)
from latte_lab.scheduling.result import ScheduleResult
from latte_lab.scheduling.simulate import DISCOVERY_POLICIES, POLICIES, PRIORITIES, compare, compare_discovery, simulate
from latte_lab.scheduling.trials import TrialWorkload, attempts, from_trial
from latte_lab.scheduling.workloads import WorkloadSpec, chain, diamond, fan_out, from_task, graham_example, random_dag

__all__ = [
    "DISCOVERY_POLICIES",
    "LIST_PRIORITIES",
    "POLICIES",
    "PRIORITIES",
    "ListSchedule",
    "ScheduleResult",
    "TrialWorkload",
    "WorkloadSpec",
    "attempts",
    "chain",
    "compare",
    "compare_discovery",
    "diamond",
    "fan_out",
    "from_task",
    "from_trial",
    "graham_bound",
    "graham_example",
    "heft",
    "list_schedule",
    "random_dag",
    "simulate",
    "upward_rank",
]

_DRAWINGS = {  # pictures of scheduling results live in viz; point anyone looking here to them
    "draw_workload": "ll.viz.scheduling.draw_workload",
    "plot_gantt": "ll.viz.gantt",
    "plot_makespan": "ll.viz.scheduling.plot_makespan",
    "straggler_figure": "ll.viz.scheduling.straggler_figure",
    "explore": "ll.viz.scheduling.explore",
}


def __getattr__(name: str):
    if name in _DRAWINGS:
        raise AttributeError(f"latte_lab.scheduling holds numbers only; draw with {_DRAWINGS[name]}(...) instead "
                             f"of scheduling.{name}")
    raise AttributeError(f"module 'latte_lab.scheduling' has no attribute {name!r}")
