"""Pictures of a trial: the coordination graph at a round, its animation, and who did what when.

Matplotlib, networkx drawing and ipywidgets are imported inside the functions, so importing latte_lab
stays fast. Every function takes a :class:`~latte_lab.trial.TrialResult` (or its snapshots/events).

>>> ll.viz.draw_graph(res, round=3)        # doctest: +SKIP
>>> ll.viz.animate(res)                    # doctest: +SKIP  (a slider with a play button in Jupyter)
>>> ll.viz.gantt(res)                      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

STATUS_COLORS = {  # one colour per node status, used by every graph picture
    "pending": "#d0d5dd",
    "assigned": "#f2c14e",
    "in_progress": "#f08a4b",
    "done": "#5aa469",
    "verified": "#2d6a4f",
}
VERIFY_EDGE = "#7b2cbf"


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
    order, so a node keeps its place across rounds (graph evolution panels and animations)."""
    depth: dict[str, int] = {}
    order: list[str] = []
    for snap in snapshots:
        for node in _nodes(snap):
            nid = node["id"]
            d = 1 + max((depth.get(p, 0) for p in node.get("deps", [])), default=-1)
            depth[nid] = max(depth.get(nid, 0), d)
            if nid not in order:
                order.append(nid)
    columns: dict[int, list[str]] = {}
    for nid in order:
        columns.setdefault(depth[nid], []).append(nid)
    pos = {}
    for col, ids in columns.items():
        for row, nid in enumerate(ids):
            pos[nid] = (float(col), -float(row) + (len(ids) - 1) / 2.0)
    return pos


def _at_round(snaps: list[dict], round: int | None) -> dict:
    if not snaps:
        raise ValueError("this trial has no graph snapshots (flat teams have no task graph)")
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
    animation (``.to_jshtml()`` renders it in any HTML viewer)."""
    import matplotlib.pyplot as plt

    snaps = _snapshots(obj)
    if not snaps:
        raise ValueError("this trial has no graph snapshots (flat teams have no task graph)")
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


def activity(events) -> Any:
    """Per agent and round, what the agent did: a tidy DataFrame (agent, round, kind, detail)."""
    import pandas as pd

    rows = []
    kinds = {"edit_file": "path", "read_file": "path", "run_script": "path", "run_tests": None,
             "claim_task": "task", "complete_task": "task", "broadcast": None, "discover_task": "task",
             "publish": "topic", "certify_complete": None}
    for e in (events.to_dict("records") if hasattr(events, "to_dict") else events):
        kind = e.get("type")
        if kind not in kinds:
            continue
        agent = e.get("agent") or e.get("sender")
        if not agent or agent == "System":
            continue
        field = kinds[kind]
        rows.append({"agent": agent, "round": e.get("round"), "kind": kind, "detail": e.get(field) if field else ""})
    return pd.DataFrame(rows, columns=["agent", "round", "kind", "detail"])


def gantt(obj, *, ax=None):
    """Which task each worker held in each round (graph teams) or what each agent did (flat teams)."""
    import matplotlib.pyplot as plt

    events = obj.event_list if hasattr(obj, "event_list") else list(obj)
    holding: dict[str, tuple[str, int]] = {}
    bars: list[tuple[str, str, int, int]] = []
    last_round = max((e.get("round") or 0 for e in events), default=0)
    for e in events:
        t, r = e["type"], e.get("round") or 0
        if t == "claim_task":
            holding[e["agent"]] = (e["task"], r)
        elif t in ("complete_task",) and e.get("agent") in holding:
            task, start = holding.pop(e["agent"])
            bars.append((e["agent"], task, start, r))
        elif t in ("release_task", "close_task") and e.get("prev_owner") in holding:
            task, start = holding.pop(e["prev_owner"])
            bars.append((e["prev_owner"], task, start, r))
    for agent, (task, start) in holding.items():
        bars.append((agent, task, start, last_round))
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * max(1, len({b[0] for b in bars}))))
    if not bars:  # flat teams: one mark per acting round
        act = activity(events)
        agents = sorted(act["agent"].unique()) if len(act) else []
        for i, a in enumerate(agents):
            rounds = sorted(set(act.loc[act["agent"] == a, "round"].dropna()))
            ax.scatter(rounds, [i] * len(rounds), marker="s", s=40)
        ax.set_yticks(range(len(agents)), agents)
    else:
        agents = sorted({b[0] for b in bars}, key=lambda a: (len(a), a))
        palette = plt.get_cmap("tab20")
        tasks_seen: dict[str, int] = {}
        for agent, task, start, end in bars:
            colour = palette(tasks_seen.setdefault(task, len(tasks_seen)) % 20)
            y = agents.index(agent)
            ax.barh(y, max(end - start, 0.6), left=start, color=colour, edgecolor="white")
            ax.text(start + 0.1, y, task, va="center", fontsize=6)
        ax.set_yticks(range(len(agents)), agents)
    ax.set_xlabel("round")
    ax.invert_yaxis()
    return ax


def trial_form(**defaults: Any):
    """A form (ipywidgets) to configure and run one trial; see :mod:`latte_lab.viz.widgets`."""
    from latte_lab.viz.widgets import trial_form as _form

    return _form(**defaults)


def compare(results):
    """One row per trial result with the columns that tell teams apart."""
    from latte_lab.viz.widgets import compare as _compare

    return _compare(results)


__all__ = ["STATUS_COLORS", "activity", "animate", "compare", "draw_graph", "gantt", "graph_panels", "layout",
           "trial_form"]
