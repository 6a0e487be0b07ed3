"""The coordination graph drawn: at one round, as small multiples over rounds, and animated.

Each function takes a :class:`~latte_lab.trial.TrialResult`, a
:class:`~latte_lab.scheduling.ScheduleResult`, a list of snapshots ``[{"round", "graph"}, ...]``, one
snapshot, or a live :class:`~latte_lab.graph.CoordinationGraph`. matplotlib and networkx drawing are
imported inside the functions, so importing latte_lab stays fast.

>>> import latte_lab as ll
>>> from latte_lab.scheduling import diamond, simulate
>>> res = simulate(diamond(3), n_workers=2)
>>> ax = ll.viz.draw_graph(res, round=1)
>>> ax.get_title()
'round 1: 5 nodes'
>>> fig = ll.viz.graph_panels(res, rounds=[0, 2, 4])
>>> len(fig.axes)
4
"""

from __future__ import annotations

from collections.abc import Iterable

from latte_lab import dag
from latte_lab.errors import DataError

__all__ = ["STATUS_COLORS", "VERIFY_EDGE", "animate", "draw_graph", "graph_panels", "layout"]

STATUS_COLORS = {  # one colour per node status, used by every graph picture
    "pending": "#d0d5dd",
    "assigned": "#f2c14e",
    "in_progress": "#f08a4b",
    "done": "#5aa469",
    "verified": "#2d6a4f",
}
VERIFY_EDGE = "#7b2cbf"
NO_SNAPSHOTS = ("this result has no graph snapshots to draw (teams without a task graph record none); "
                "ll.viz.gantt shows what their agents did")


def _snapshots(obj) -> list[dict]:
    if hasattr(obj, "snapshots"):
        return list(obj.snapshots)
    if isinstance(obj, dict) and "graph" in obj:
        return [obj]
    if isinstance(obj, dict) and "nodes" in obj:
        return [{"round": 0, "graph": obj}]
    if hasattr(obj, "snapshot"):  # a live CoordinationGraph
        return [{"round": 0, "graph": obj.snapshot()}]
    return list(obj)


def _nodes(snapshot: dict) -> list[dict]:
    return list(snapshot["graph"]["nodes"])


def layout(snapshots: Iterable[dict]) -> dict[str, tuple[float, float]]:
    """Fixed positions for every node that ever appears: columns by dependency depth, rows in creation
    order, so a node keeps its place across rounds (graph evolution panels and animations).

    >>> from latte_lab.graph import CoordinationGraph
    >>> g = CoordinationGraph()
    >>> g.discover("a", by="Lead"); g.discover("b", ["a"], by="Lead"); g.discover("c", ["a"], by="Lead")
    >>> layout([{"round": 0, "graph": g.snapshot()}])
    {'a': (0.0, 0.0), 'b': (1.0, 0.5), 'c': (1.0, -0.5)}
    """
    deps: dict[str, list[str]] = {}
    for snap in snapshots:
        for node in _nodes(snap):
            known = deps.setdefault(node["id"], [])
            known.extend(d for d in node.get("deps", []) if d not in known)
    return dag.layered_positions(deps)


def _at_round(snaps: list[dict], round: int | None) -> dict:
    if not snaps:
        raise DataError(NO_SNAPSHOTS)
    if round is None:
        return snaps[-1]
    best = snaps[0]
    for s in snaps:
        if s["round"] <= round:
            best = s
    return best


def draw_graph(obj, round: int | None = None, *, ax=None, pos: dict | None = None, labels: bool = True,
               title: str | None = None, legend: bool = True):
    """Draws the coordination graph at ``round`` (default: the last one); returns the Axes."""
    import matplotlib.pyplot as plt
    import networkx as nx
    from matplotlib.patches import Patch

    snaps = _snapshots(obj)
    snap = _at_round(snaps, round)
    pos = pos or layout(snaps)
    g = nx.DiGraph()
    for node in _nodes(snap):
        g.add_node(node["id"], **node)
        for dep in node.get("deps", []):
            g.add_edge(dep, node["id"])
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4, 1.2 * (1 + max((p[0] for p in pos.values()), default=0))), 4))
    missing = {n: (0.0, 0.0) for n in g if n not in pos}
    pos = {**pos, **missing}
    colors = [STATUS_COLORS.get(g.nodes[n].get("status"), "#999999") for n in g]
    edge_colors = [VERIFY_EDGE if g.nodes[v].get("is_verify") or g.nodes[u].get("is_verify") else "#667085"
                   for u, v in g.edges]
    nx.draw_networkx_edges(g, pos, ax=ax, edge_color=edge_colors, arrows=True, arrowsize=10, width=1.0,
                           node_size=420)
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=colors, node_size=420, edgecolors="#344054", linewidths=0.6)
    if labels:
        text = {n: n if not g.nodes[n].get("agent") else f"{n}\n{g.nodes[n]['agent']}" for n in g}
        nx.draw_networkx_labels(g, pos, labels=text, ax=ax, font_size=6)
    ax.set_title(title or f"round {snap['round']}: {len(g)} nodes", fontsize=9)
    if legend:
        ax.legend(handles=[Patch(color=c, label=s) for s, c in STATUS_COLORS.items()], fontsize=6,
                  loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.margins(0.18)
    ax.set_axis_off()
    return ax


def graph_panels(obj, rounds: Iterable[int] | None = None, *, ncols: int = 4):
    """Small multiples of the graph at several rounds with one fixed layout; returns the Figure."""
    import matplotlib.pyplot as plt

    snaps = _snapshots(obj)
    if rounds is None:
        available = [s["round"] for s in snaps]
        step = max(1, len(available) // 8)
        rounds = available[::step][:8]
    rounds = list(rounds)
    pos = layout(snaps)
    nrows = -(-len(rounds) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.8 * nrows), squeeze=False)
    for ax in axes.flat[len(rounds):]:
        ax.set_axis_off()
    for ax, r in zip(axes.flat, rounds):
        draw_graph(snaps, r, ax=ax, pos=pos, labels=len(pos) <= 30, legend=False)
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=c, label=s) for s, c in STATUS_COLORS.items()], loc="lower center",
               ncol=len(STATUS_COLORS), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def animate(obj, *, interval_ms: int = 700, widget: bool | None = None):
    """The graph round by round: an ipywidgets slider with a play button in Jupyter, else a matplotlib
    animation (``.to_jshtml()`` renders it in any HTML viewer).

    >>> from latte_lab.scheduling import chain, simulate
    >>> anim = animate(simulate(chain(3), n_workers=1), widget=False)
    >>> "<script" in anim.to_jshtml()
    True
    """
    import matplotlib.pyplot as plt

    snaps = _snapshots(obj)
    if not snaps:
        raise DataError(NO_SNAPSHOTS)
    pos = layout(snaps)
    if widget is None:
        try:
            import ipywidgets  # noqa: F401
            from IPython import get_ipython

            widget = get_ipython() is not None
        except ImportError:
            widget = False
    if widget:
        import ipywidgets as w
        from IPython.display import clear_output, display

        out = w.Output()
        slider = w.IntSlider(min=0, max=len(snaps) - 1, value=0, description="round",
                             continuous_update=False)
        play = w.Play(min=0, max=len(snaps) - 1, interval=interval_ms)
        w.jslink((play, "value"), (slider, "value"))

        def show(change=None):
            with out:
                clear_output(wait=True)
                fig, ax = plt.subplots(figsize=(7, 4))
                draw_graph(snaps, snaps[slider.value]["round"], ax=ax, pos=pos)
                plt.show()
                plt.close(fig)

        slider.observe(show, names="value")
        show()
        box = w.VBox([w.HBox([play, slider]), out])
        display(box)
        return box
    from matplotlib.animation import FuncAnimation

    fig, ax = plt.subplots(figsize=(7, 4))

    def frame(i):
        ax.clear()
        draw_graph(snaps, snaps[i]["round"], ax=ax, pos=pos)

    anim = FuncAnimation(fig, frame, frames=len(snaps), interval=interval_ms)
    plt.close(fig)
    return anim
