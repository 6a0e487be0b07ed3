"""Pictures of scheduling workloads and runs: the workload with its critical path, makespan against the
number of workers, straggler runs side by side, sliders to explore them, planned against Discovering teams as
the discovery rate rises, and a recorded team against the schedulers.

The numbers come from :mod:`latte_lab.scheduling`; matplotlib, seaborn and ipywidgets are imported inside
the functions.

>>> from latte_lab import scheduling as sched
>>> from latte_lab.viz import scheduling as sviz
>>> spec = sched.random_dag(12, seed=0)
>>> ax = sviz.draw_workload(spec)
>>> ax = sviz.plot_makespan(sched.compare(spec, [1, 2, 3], ["self", "static"]))
>>> ax.get_ylabel()
'makespan (rounds)'
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from latte_lab.scheduling import WorkloadSpec, compare_discovery, random_dag, simulate
from latte_lab.viz.gantt import gantt
from latte_lab.viz.graph import draw_graph, layout

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["discovery_figure", "draw_workload", "explore", "plot_discovery", "plot_efficiency", "plot_makespan",
           "straggler_figure"]

TITLE_CHARS = 100  # straggler_figure: a panel title longer than this wraps (the legend takes the right side)
DISCOVERY_RATES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8)  # discovery_figure: probabilities swept
DISCOVERY_SEEDS = range(20)  # discovery_figure: runs averaged per point
DISCOVERY_WORKERS = 24  # enough workers that the critical path, not the work, sets the pace
TEAM_STYLE = {  # team -> (colour, line style): Discovering teams solid, planned ones dashed
    "self (Discover)": ("#1d4ed8", "-"), "lead (Discover)": ("#7c3aed", "-"),
    "self (planned)": ("#ea580c", "--"), "static (planned)": ("#b91c1c", "--"), "lead (planned)": ("#a16207", "--"),
}


def draw_workload(spec: WorkloadSpec, *, ax=None, title: str | None = None, critical_path: bool = True):
    """The workload as a coordination graph (``ll.viz.draw_graph``): each node's own id in it (the id that
    ``spec`` and the exercises use) and its duration beside it, its duration-weighted critical path in red
    (unless ``critical_path=False``, e.g. for an exercise), the initial frontier outlined, and hidden nodes
    ringed with a dashed line; returns the Axes."""
    import matplotlib.pyplot as plt
    import networkx as nx

    snapshot = spec.to_graph(known_only=False).snapshot()
    duration = dict(zip(spec.ids, spec.durations))
    for node in snapshot["nodes"]:  # the duration beside the node, where the id would be repeated
        d = duration[node["id"]]
        node["title"] = f"{d} round" + ("s" if d != 1 else "")
    snaps = [{"round": 0, "graph": snapshot}]
    pos = layout(snaps)
    if ax is None:
        depth = max(p[0] for p in pos.values())
        _, ax = plt.subplots(figsize=(min(14, max(5, 1.1 * (depth + 2))), 4))
    if title is None:
        title = (f"{spec.name}: critical path {spec.critical_path_length} rounds (red), frontier outlined"
                 if critical_path else f"{spec.name}: rounds beside each node, frontier outlined")
    draw_graph(snaps, ax=ax, pos=pos, legend=False, title=title, ids=True)
    if critical_path:
        path = spec.critical_path()
        G = nx.DiGraph(list(zip(path, path[1:])))
        G.add_nodes_from(path)
        nx.draw_networkx_edges(G, pos, ax=ax, edge_color="#d62828", width=2.4, arrows=True, arrowsize=12,
                               node_size=420)
    F = nx.DiGraph()
    F.add_nodes_from(spec.to_graph().frontier())
    nx.draw_networkx_nodes(F, pos, ax=ax, node_color="none", node_size=620, edgecolors="#1d3557", linewidths=2.0)
    if spec.hidden:
        H = nx.DiGraph()
        H.add_nodes_from(spec.hidden)
        nx.draw_networkx_nodes(H, pos, ax=ax, node_color="none", node_size=620, edgecolors="#7c3aed",
                               linewidths=1.4).set_linestyle("--")
    return ax


def plot_makespan(df: pd.DataFrame, *, ax=None, title: str | None = None):
    """Makespan against the number of workers per policy (mean over seeds, 95% interval), with the
    critical path and total work / N lower bounds; ``df`` is :func:`compare` output for one workload."""
    import matplotlib.pyplot as plt

    from latte_lab.errors import require_extra

    sns = require_extra("seaborn", "lab", "plot_makespan")

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
                     seed: int = 0, policy: str = "self", straggler_factor: float = 3.0, pyplot: bool = True):
    """Two Gantt charts of the same run (same stragglers), without and with heartbeat release.
    ``pyplot=False``: on a Figure that pyplot does not manage (see :func:`~latte_lab.viz.gantt.gantt`)."""
    runs = [simulate(spec, n_workers, policy, straggler_p=straggler_p, straggler_factor=straggler_factor,
                     heartbeat=hb, seed=seed) for hb in (None, heartbeat)]
    import latte_lab.viz.style as style

    fig, axes = style.subplots(2, 1, figsize=(9.5, 1.6 + 0.7 * n_workers), pyplot=pyplot)
    right = max(max(r.makespan, r.lower_bound) for r in runs) + 0.5
    for ax, res in zip(axes, runs):
        gantt(res, ax=ax, labels=len(spec) <= 40)
        ax.set_xlim(0, right)  # one time axis for both, so the makespans compare at a glance
        ax.title.set_text(textwrap.fill(ax.get_title(), TITLE_CHARS))  # a long run summary: two lines, not cut
    fig.tight_layout()
    return style.finish(fig) if pyplot else fig


def explore(spec: WorkloadSpec, *, n_workers: int = 4, straggler_p: float = 0.2, heartbeat: int = 2,
            straggler_factor: float = 3.0, seed: int = 0, max_workers: int = 8):
    """Sliders for the number of workers and the straggler probability over :func:`straggler_figure`.

    The figure for the default values is displayed as an ordinary output (so it shows in a static render
    of the notebook); moving a slider replaces it in place through its display id.
    """
    from latte_lab.errors import require_extra

    w = require_extra("ipywidgets", "lab", "the scheduling explorer")
    from IPython.display import display

    import latte_lab.viz.style as style

    workers_w = w.IntSlider(value=n_workers, min=1, max=max_workers, description="workers", continuous_update=False)
    p_w = w.FloatSlider(value=straggler_p, min=0.0, max=0.6, step=0.05, description="straggler p",
                        continuous_update=False)
    display(w.HBox([workers_w, p_w]))

    def figure():  # not a pyplot figure: the inline backend's hook, run on another thread, leaves it alone
        return style.png_image(straggler_figure(spec, workers_w.value, p_w.value, heartbeat=heartbeat, seed=seed,
                                                straggler_factor=straggler_factor, pyplot=False))

    handle = display(figure(), display_id=True)

    def update(_change=None):
        if handle is None:  # no notebook front end to update in place: show the new figure below
            display(figure())
        else:
            handle.update(figure())

    workers_w.observe(update, names="value")
    p_w.observe(update, names="value")
    return workers_w, p_w


def discovery_workload() -> WorkloadSpec:
    """The workload of :func:`discovery_figure`: 200 nodes in 12 layers, up to two dependencies each, two
    rounds per node on average."""
    return random_dag(200, layers=12, max_deps=2, mean_duration=2, seed=0)


def plot_discovery(df: pd.DataFrame, *, axes=None):
    """Two panels from :func:`~latte_lab.scheduling.compare_discovery` output: the mean makespan (band: 95%
    interval of the mean over seeds) against the discovery probability per team, with the lower bound, and the
    worker-rounds lost stalled (idle while found work waited). Returns the two Axes."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    teams = [t for t in TEAM_STYLE if t in set(df["team"])] + sorted(set(df["team"]) - set(TEAM_STYLE))
    for ax, column, label in ((axes[0], "makespan", "makespan (rounds)"),
                              (axes[1], "stalled_worker_rounds", "stalled worker-rounds per run")):
        for team in teams:
            colour, ls = TEAM_STYLE.get(team, ("#475467", "-"))
            stats = df[df["team"] == team].groupby("discovery")[column].agg(["mean", "sem", "count"])
            half = 1.96 * stats["sem"].fillna(0.0)
            ax.plot(stats.index, stats["mean"], color=colour, ls=ls, marker="o", ms=4, label=team)
            ax.fill_between(stats.index, stats["mean"] - half, stats["mean"] + half, color=colour, alpha=0.15, lw=0)
        ax.set_xlabel("discovery probability\n(share of nodes hidden until a dependency completes)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    bound = df.groupby("discovery")["lower_bound"].first()
    axes[0].plot(bound.index, bound.values, color="#111827", ls=":", lw=1.2, label="lower bound (all nodes known)")
    axes[0].legend(fontsize=7, frameon=True, loc="lower right")
    name = df["workload"].iloc[0] if len(df) else ""
    n = df["n_workers"].iloc[0] if len(df) else 0
    axes[0].set_title(f"planned vs Discovering teams on {name}, {n} workers", fontsize=9)
    axes[1].set_title("capacity lost waiting: idle workers while found work waited", fontsize=9)
    return axes


def discovery_figure(spec: WorkloadSpec | None = None, *, rates=DISCOVERY_RATES, n_workers: int = DISCOVERY_WORKERS,
                     seeds=DISCOVERY_SEEDS, **kwargs):
    """Makespan and stalled worker-rounds against the discovery probability for planned and Discovering teams
    (:func:`plot_discovery` over :func:`~latte_lab.scheduling.compare_discovery`); returns the Figure."""
    import matplotlib.pyplot as plt

    df = compare_discovery(spec or discovery_workload(), rates, n_workers, seeds=seeds, **kwargs)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    plot_discovery(df, axes=axes)
    fig.tight_layout()
    import latte_lab.viz.style as style

    return style.finish(fig)


def plot_efficiency(trial_workload, *, ax=None, seeds=(0,)):
    """A recorded team's makespan beside the schedulers' on the same graph (``TrialWorkload.compare``), with
    the lower bound dashed; returns the Axes."""
    import matplotlib.pyplot as plt

    table = trial_workload.compare(seeds=seeds)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.9 + 0.4 * len(table)), layout="constrained")
    colours = ["#b91c1c" if s.startswith("team") else "#5b8def" for s in table["schedule"]]
    ax.barh(table["schedule"], table["makespan"], color=colours)
    for y, (m, e) in enumerate(zip(table["makespan"], table["efficiency"])):
        ax.text(m, y, f" {m:g} ({e:.0%})", va="center", fontsize=7)
    ax.axvline(trial_workload.lower_bound, color="#344054", ls="--", lw=1, label="lower bound")
    ax.invert_yaxis()
    ax.set_xlabel("makespan (rounds); efficiency = lower bound / makespan")
    ax.set_title(f"{trial_workload.trial_id or 'trial'}: the team against ideal schedulers on its own graph",
                 fontsize=8)
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    return ax

