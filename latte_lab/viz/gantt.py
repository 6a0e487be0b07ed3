"""Who did what when: one Gantt chart for recorded trials and for scheduling simulations.

Both kinds of result become one table of attempts (worker, node, start, end, outcome): a
:class:`~latte_lab.scheduling.ScheduleResult` has it as ``.intervals``, a trial's event log is converted by
:func:`latte_lab.scheduling.trials.attempts`. Teams without a task graph have no attempts; for them the
chart marks each round an agent acted.

>>> import latte_lab as ll
>>> from latte_lab.scheduling import random_dag, simulate
>>> res = simulate(random_dag(12, seed=0), 3, straggler_p=0.4, heartbeat=0, seed=2)
>>> ax = ll.viz.gantt(res)
>>> [t.get_text() for t in ax.get_yticklabels()]
['W1', 'W2', 'W3']
"""

from __future__ import annotations

from typing import Any

__all__ = ["OUTCOME_STYLE", "activity", "gantt"]

ATTEMPT_COLOR = "#5b8def"
STRAGGLER_COLOR = "#d62828"
BOUND_COLOR = "#344054"
OUTCOME_STYLE = {  # how an attempt ended -> (bar alpha, hatch); a thrown-away attempt is faded and hatched
    "done": (0.9, None),
    "released": (0.45, "///"),
    "closed": (0.45, "..."),
    "open": (0.6, None),
}
MAX_LABELLED_BARS = 80  # beyond this many bars, node names would overlap
ACTIVITY_FIELDS = {"edit_file": "path", "read_file": "path", "run_script": "path", "run_tests": None,
                   "claim_task": "task", "complete_task": "task", "broadcast": None, "discover_task": "task",
                   "publish": "topic", "certify_complete": None}
"""Event types that count as an agent acting, and the field that says on what."""


def activity(events) -> Any:
    """Per agent and round, what the agent did: a tidy DataFrame (agent, round, kind, detail).

    >>> activity([{"type": "edit_file", "round": 2, "agent": "Dev1", "path": "a.py"}]).values.tolist()
    [['Dev1', 2, 'edit_file', 'a.py']]
    """
    import pandas as pd

    rows = []
    for e in (events.to_dict("records") if hasattr(events, "to_dict") else events):
        kind = e.get("type")
        if kind not in ACTIVITY_FIELDS:
            continue
        agent = e.get("agent") or e.get("sender")
        if not agent or agent == "System":
            continue
        field = ACTIVITY_FIELDS[kind]
        rows.append({"agent": agent, "round": e.get("round"), "kind": kind, "detail": e.get(field) if field else ""})
    return pd.DataFrame(rows, columns=["agent", "round", "kind", "detail"])


def _worker_key(name: str):
    return (len(name), name)  # W2 before W10


def gantt(obj, *, ax=None, title: str | None = None, labels: bool | None = None):
    """One bar per attempt at a node, per worker and round: straggling attempts in red, released or closed
    ones faded and hatched, attempts still open at the end faded; a dashed line at the lower bound when the
    result knows it (a ScheduleResult). Returns the Axes.

    ``obj``: a ScheduleResult, a TrialResult, or a trial's event list. ``labels``: write node ids on the
    bars (default: when there are at most 80 bars).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from latte_lab.scheduling.trials import attempts

    sim = hasattr(obj, "intervals") and hasattr(obj, "n_workers")
    events = None if sim else (obj.event_list if hasattr(obj, "event_list") else list(obj))
    iv = obj.intervals if sim else attempts(events)
    if sim:
        workers = [f"W{i + 1}" for i in range(obj.n_workers)]
    else:
        workers = sorted(set(iv["worker"]), key=_worker_key)
    act = activity(events) if iv.empty and not sim else None
    if act is not None:
        workers = sorted(act["agent"].unique(), key=_worker_key)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.6 + 0.38 * max(1, len(workers))))
    if act is not None:
        _activity_marks(ax, act, workers)
    else:
        labels = len(iv) <= MAX_LABELLED_BARS if labels is None else labels
        row = {w: i for i, w in enumerate(workers)}
        straggled = iv["straggled"] if "straggled" in iv else [False] * len(iv)
        for r, late in zip(iv.itertuples(index=False), straggled):
            alpha, hatch = OUTCOME_STYLE.get(r.outcome, OUTCOME_STYLE["done"])
            ax.barh(row[r.worker], r.end - r.start, left=r.start, height=0.72, alpha=alpha, hatch=hatch,
                    color=STRAGGLER_COLOR if late else ATTEMPT_COLOR, edgecolor="white")
            if labels:
                ax.text(r.start + 0.08, row[r.worker], r.node, va="center", fontsize=6,
                        color="white" if r.outcome == "done" else "black")
        ax.set_yticks(range(len(workers)), workers)
        handles = [Patch(color=ATTEMPT_COLOR, label="attempt")]
        if sim:
            handles.append(Patch(color=STRAGGLER_COLOR, label="straggler"))
        handles += [Patch(facecolor="white", edgecolor="#667085", hatch=OUTCOME_STYLE[k][1], label=k)
                    for k in ("released", "closed") if (iv["outcome"] == k).any()]
        right = float(iv["end"].max()) if len(iv) else 1.0
        bound = getattr(obj, "lower_bound", None)
        if bound is not None:
            ax.axvline(bound, color=BOUND_COLOR, ls="--", lw=1)
            handles.append(plt.Line2D([], [], color=BOUND_COLOR, ls="--", label="lower bound"))
            right = max(right, bound)
        ax.set_xlim(0, right + 0.5)
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.invert_yaxis()
    ax.set_xlabel("round")
    if title is None and hasattr(obj, "summary"):
        title = obj.summary().splitlines()[0]
    if title:
        ax.set_title(title, fontsize=8)
    return ax


def _activity_marks(ax, act, agents: list[str]) -> None:
    """Teams without a task graph: one square per round in which an agent acted."""
    for i, a in enumerate(agents):
        rounds = sorted(set(act.loc[act["agent"] == a, "round"].dropna()))
        ax.scatter(rounds, [i] * len(rounds), marker="s", s=40)
    ax.set_yticks(range(len(agents)), agents)
