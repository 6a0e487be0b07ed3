"""Pictures of scheduling workloads and runs: the workload with its critical path, makespan against the
number of workers, straggler runs side by side, and sliders to explore them.

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

from typing import TYPE_CHECKING

from latte_lab.scheduling import WorkloadSpec, simulate
from latte_lab.viz.gantt import gantt
from latte_lab.viz.graph import draw_graph, layout

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["draw_workload", "explore", "plot_makespan", "straggler_figure"]


def draw_workload(spec: WorkloadSpec, *, ax=None, title: str | None = None):
    """The workload as a coordination graph (``ll.viz.draw_graph``) with its duration-weighted critical
    path drawn in red and the initial frontier outlined; returns the Axes."""
    import matplotlib.pyplot as plt
    import networkx as nx

    g = spec.to_graph()
    pos = layout([{"round": 0, "graph": g.snapshot()}])
    if ax is None:
        depth = max(p[0] for p in pos.values())
        _, ax = plt.subplots(figsize=(min(14, max(5, 1.1 * (depth + 2))), 4))
    draw_graph(g, ax=ax, pos=pos, legend=False,
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
    for nid, d in zip(spec.ids, spec.durations):
        x, y = pos[nid]
        ax.annotate(str(d), (x, y), xytext=(0, -14), textcoords="offset points", ha="center", fontsize=6,
                    color="#475467")
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
        gantt(res, ax=ax, labels=len(spec) <= 40)
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
        if handle is None:  # no notebook front end to update in place: show the new figure below
            display(figure())
        else:
            handle.update(figure())

    workers_w.observe(update, names="value")
    p_w.observe(update, names="value")
    return workers_w, p_w
