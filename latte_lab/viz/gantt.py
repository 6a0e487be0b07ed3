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

import textwrap
from typing import Any

from latte_lab.graph import SYSTEM_AGENT

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
TITLE_CHAR_EM = 0.6  # the width of one character of a title, in ems (DejaVu Sans averages a little less)
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
        if not agent or agent == SYSTEM_AGENT:
            continue
        field = ACTIVITY_FIELDS[kind]
        rows.append({"agent": agent, "round": e.get("round"), "kind": kind, "detail": e.get(field) if field else ""})
    return pd.DataFrame(rows, columns=["agent", "round", "kind", "detail"])


def _worker_key(name: str):
    return (len(name), name)  # W2 before W10


ACTIVITY_COLORS = {  # a flat team's round per agent, by the weightiest thing it did
    "edit_file": ("#344054", "edited a file"),
    "run_tests": ("#5b8def", "ran the tests"),
    "run_script": ("#7b2cbf", "ran a script"),
    "certify_complete": ("#2d6a4f", "declared the work complete"),
    "read_file": ("#98a2b3", "read a file"),
    "publish": ("#b54708", "published a document"),
    "broadcast": ("#f2c14e", "only messaged"),
}


def _short_ids(obj) -> dict[str, str]:
    snaps = list(getattr(obj, "snapshots", []) or [])
    if not snaps:
        return {}
    import latte_lab.viz.graph_drawing as gd

    nodes, order = gd.collect_nodes(snaps)
    return gd.short_ids(nodes, order)


def gantt(obj, *, ax=None, title: str | None = None, labels: bool | None = None, pyplot: bool = True):
    """One bar per attempt at a node, per worker and round: straggling attempts in red, released or closed
    ones faded and hatched, attempts still open at the end faded; a dashed line at the lower bound when the
    result knows it (a ScheduleResult). A team without a task graph gets one bar per agent and round it
    acted in, coloured by what it did. Returns the Axes.

    ``obj``: a ScheduleResult, a TrialResult, or a trial's event list. ``labels``: write node ids on the
    bars, where they fit (default: when there are at most 80 bars). Trial node ids are shortened to the T1,
    T2, ... of the graph drawings. ``pyplot=False`` (without ``ax``) draws on a Figure that pyplot does not
    manage: nothing shows or closes it on its own, for code that renders it itself (a widget callback).
    """
    import latte_lab.viz.style as style
    from latte_lab.scheduling.trials import attempts

    plt = style.pyplot()
    sim = hasattr(obj, "intervals") and hasattr(obj, "n_workers")
    events = None if sim else (obj.event_list if hasattr(obj, "event_list") else list(obj))
    iv = obj.intervals if sim else attempts(events)
    if sim:
        workers = [f"W{i + 1}" for i in range(obj.n_workers)]
    else:
        workers = sorted(set(iv["worker"]), key=_worker_key)
    act = activity(events) if iv.empty and not sim else None
    if act is not None:
        from latte_lab.viz.flow import agents_of

        order = agents_of(events)
        workers = sorted(act["agent"].unique(), key=lambda a: (order.index(a) if a in order else 99, a))
    with style.theme():
        if ax is None:
            _, ax = style.subplots(figsize=(style.TWO_COLUMN, 0.75 + 0.3 * max(2, len(workers))),
                                   layout="constrained", pyplot=pyplot)
        if act is not None:
            _activity_bars(ax, act, workers)
        else:
            _attempt_bars(ax, obj, iv, workers, sim, labels, _short_ids(obj) if not sim else {})
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        ax.grid(axis="y", visible=False)
        if title is None and hasattr(obj, "summary"):
            title = obj.summary().splitlines()[0]
        if title:  # a run's summary is long: wrapped to the figure's width, never cut at its edges
            chars = max(20, int(ax.figure.get_figwidth() * 72 / (style.FONT_PT * TITLE_CHAR_EM)))
            ax.set_title(textwrap.fill(title, chars), fontsize=style.FONT_PT)
    return ax


def _attempt_bars(ax, obj, iv, workers, sim: bool, labels: bool | None, short: dict[str, str]) -> None:
    from matplotlib.patches import Patch

    import latte_lab.viz.graph_drawing as gd
    import latte_lab.viz.style as style

    labels = len(iv) <= MAX_LABELLED_BARS if labels is None else labels
    row = {w: i for i, w in enumerate(workers)}
    straggled = iv["straggled"] if "straggled" in iv else [False] * len(iv)
    right = float(iv["end"].max()) if len(iv) else 1.0
    bound = getattr(obj, "lower_bound", None)
    if bound is not None:
        right = max(right, bound)
    ax.set_xlim(0, right + 0.5)
    ax.set_ylim(len(workers) - 0.5, -0.5)
    fig = ax.figure
    ax_w_in = ax.get_position().width * fig.get_figwidth()
    per_round_in = ax_w_in / (right + 0.5)
    for r, late in zip(iv.itertuples(index=False), straggled):
        alpha, hatch = OUTCOME_STYLE.get(r.outcome, OUTCOME_STYLE["done"])
        bars = ax.barh(row[r.worker], r.end - r.start, left=r.start, height=0.72, alpha=alpha, hatch=hatch,
                       color=STRAGGLER_COLOR if late else ATTEMPT_COLOR, edgecolor="white")
        name = short.get(r.node, str(r.node))
        if labels and gd._text_width_in(name) + 0.04 <= (r.end - r.start) * per_round_in:
            t = ax.text(r.start + 0.02 / per_round_in * 2, row[r.worker], name, va="center", fontsize=style.MIN_FONT_PT,
                        color="white" if r.outcome == "done" else "black", clip_on=True)
            t.set_clip_path(bars.patches[0])  # never into the next bar, whatever the final figure size
    ax.set_yticks(range(len(workers)), workers)
    handles = [Patch(color=ATTEMPT_COLOR, label="attempt at a node")]
    if sim:
        handles.append(Patch(color=STRAGGLER_COLOR, label="straggler"))
    handles += [Patch(facecolor="white", edgecolor="#667085", hatch=OUTCOME_STYLE[k][1], label=k)
                for k in ("released", "closed") if (iv["outcome"] == k).any()]
    if (iv["outcome"] == "open").any():
        handles.append(Patch(color=ATTEMPT_COLOR, alpha=OUTCOME_STYLE["open"][0], label="open at the end"))
    if bound is not None:
        ax.axvline(bound, color=BOUND_COLOR, ls="--", lw=1)
        handles.append(plt_line(BOUND_COLOR, "--", "lower bound"))
    if short:
        handles.append(Patch(color="none", label="T1, T2, …: nodes as in ll.viz.draw"))
    ax.legend(handles=handles, fontsize=style.MIN_FONT_PT, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def plt_line(color: str, ls: str, label: str):
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, ls=ls, label=label)


def _activity_bars(ax, act, agents: list[str]) -> None:
    """Teams without a task graph: a bar per round an agent acted, coloured by the weightiest action."""
    from matplotlib.patches import Patch

    import latte_lab.viz.style as style

    weight = {k: i for i, k in enumerate(ACTIVITY_COLORS)}
    used = set()
    for i, a in enumerate(agents):
        mine = act[act["agent"] == a].dropna(subset=["round"])
        for r, kinds in mine.groupby("round")["kind"]:
            kind = min((k for k in kinds if k in weight), key=weight.get, default=None)
            if kind is None:
                continue
            used.add(kind)
            ax.barh(i, 0.9, left=float(r) - 0.45, height=0.7, color=ACTIVITY_COLORS[kind][0], edgecolor="white")
    ax.set_yticks(range(len(agents)), agents)
    rounds = act["round"].dropna()
    ax.set_xlim(-0.5, (float(rounds.max()) if len(rounds) else 1) + 0.5)
    ax.set_ylim(len(agents) - 0.5, -0.5)
    handles = [Patch(color=c, label=label) for k, (c, label) in ACTIVITY_COLORS.items() if k in used]
    ax.legend(handles=handles, fontsize=style.MIN_FONT_PT, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False,
              title="a round in which the agent", title_fontsize=style.MIN_FONT_PT)
