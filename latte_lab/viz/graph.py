"""The coordination graph drawn: at one round (``draw``, ``draw_graph``) and as small multiples over rounds
(``graph_panels``); the animation is in :mod:`latte_lab.viz.animation`.

Each function takes a :class:`~latte_lab.trial.TrialResult`, a
:class:`~latte_lab.scheduling.ScheduleResult`, a list of snapshots ``[{"round", "graph"}, ...]``, one
snapshot, or a live :class:`~latte_lab.graph.CoordinationGraph`. The layout is computed once from the
final graph (every node that ever appears), layered left to right by dependency depth and spaced by the
width of the labels, so a node keeps its place across rounds and no label overlaps another. The renderer
is :mod:`latte_lab.viz.graph_drawing` (shared with the paper's Figure 3C).

>>> import latte_lab as ll
>>> from latte_lab.scheduling import diamond, simulate
>>> res = simulate(diamond(3), n_workers=2)
>>> ax = ll.viz.draw_graph(res, round=1)
>>> ax.get_title()
'round 1 · 5 nodes · 1 done'
>>> fig = ll.viz.graph_panels(res, rounds=[0, 2, 4])
>>> [ax.get_title(loc="left") for ax in fig.axes][:2]
['round 0 · 0/5 done', 'round 2 · 1/5 done']
>>> d = ll.viz.draw(res)                        # displays itself in Jupyter; hover a node for its details
>>> "<title>" in d._repr_html_()
True
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable

import latte_lab.viz.graph_drawing as gd
import latte_lab.viz.style as style
from latte_lab.errors import DataError
from latte_lab.viz.graph_drawing import LEGEND_ROW_IN, MARGIN_IN, TITLE_IN
from latte_lab.viz.style import STATUS_COLORS

__all__ = ["STATUS_COLORS", "GraphDrawing", "Layout", "draw", "draw_graph", "graph_panels", "layout"]

NO_SNAPSHOTS = ("this result has no graph snapshots to draw (teams without a task graph record none); "
                "ll.viz.flow and ll.viz.gantt show what their agents did")


def snapshots_of(obj) -> list[dict]:
    """The ``{"round", "graph"}`` records of any object the drawing functions accept."""
    if hasattr(obj, "snapshots"):
        return list(obj.snapshots)
    if isinstance(obj, dict) and "graph" in obj:
        return [obj]
    if isinstance(obj, dict) and "nodes" in obj:
        return [{"round": 0, "graph": obj}]
    if hasattr(obj, "snapshot"):  # a live CoordinationGraph
        return [{"round": 0, "graph": obj.snapshot()}]
    return list(obj)


class Layout(dict):
    """Node positions in inches (``{node id: (x, y)}``), with the full plan as ``.plan``."""

    def __init__(self, plan: gd.GraphPlan):
        super().__init__(plan.pos)
        self.plan = plan


def layout(obj, *, mode: str | None = None) -> Layout:
    """Fixed positions for every node that ever appears: columns by dependency depth (networkx topological
    generations), spaced by label width, nodes of a column ordered to cut edge crossings. Pass the result
    as ``pos=`` to :func:`draw_graph` to overlay your own marks.

    >>> from latte_lab.graph import CoordinationGraph
    >>> g = CoordinationGraph()
    >>> g.discover("a", by="Lead"); g.discover("b", ["a"], by="Lead"); g.discover("c", ["a"], by="Lead")
    >>> pos = layout([{"round": 0, "graph": g.snapshot()}])
    >>> pos["a"][0] < pos["b"][0] == pos["c"][0], pos["b"][1] > pos["c"][1]
    (True, True)
    """
    snaps = snapshots_of(obj)
    if not snaps:
        raise DataError(NO_SNAPSHOTS)
    return Layout(gd.plan(snaps, mode=mode))


def at_round(snaps: list[dict], round: int | None) -> dict:
    """The last snapshot at or before ``round`` (the last one when ``round`` is None)."""
    if not snaps:
        raise DataError(NO_SNAPSHOTS)
    return gd.at_round(snaps, round)


def round_title(snap: dict) -> str:
    nodes = snap["graph"]["nodes"]
    done = sum(n.get("status") in ("done", "verified") for n in nodes)
    return f"round {snap['round']} · {len(nodes)} nodes" + (f" · {done} done" if done else "")


_legend_rows = gd.legend_rows


def _plan_of(snaps: list[dict], pos, mode: str | None, short: dict[str, str] | None = None) -> gd.GraphPlan:
    if isinstance(pos, Layout) and not short:
        return pos.plan
    plan = gd.plan(snaps, mode=mode, short=short)
    if pos:  # positions of the caller's own: keep the labels, move the nodes
        plan.pos = {**plan.pos, **{n: tuple(map(float, xy)) for n, xy in pos.items()}}
        w = {n: plan.label_end[n] - plan.pos[n][0] for n in plan.label_end}
        plan.label_end = {n: plan.pos[n][0] + w.get(n, plan.node_in / 2) for n in plan.pos}
        xs = [x for x, _ in plan.pos.values()]
        ys = [y for _, y in plan.pos.values()]
        m = plan.node_in
        plan.xlim = (min(xs) - m, max(plan.label_end.values()) + m)
        plan.ylim = (min(ys) - m, max(ys) + m)
    return plan


def graph_figure(plan: gd.GraphPlan, *, extra_bottom: float = 0.0, legend_entries: int = 0,
                 min_width: float = 0.0, legend_labels=()):
    """A figure whose graph axes draws ``plan`` at scale 1 (an inch of layout is an inch of paper), with
    room for a title above and a legend plus ``extra_bottom`` inches below; returns (fig, ax, legend ncol)."""
    plt = style.pyplot()
    width = max(plan.width + 2 * MARGIN_IN, min_width, 3.0)
    ncol, rows = _legend_rows(legend_entries, width, legend_labels) if legend_entries else (1, 0)
    legend_h = rows * LEGEND_ROW_IN + (0.1 if rows else 0)
    height = TITLE_IN + plan.height + legend_h + extra_bottom + MARGIN_IN
    fig = plt.figure(figsize=(width, height))
    left = (width - plan.width) / 2
    ax = fig.add_axes((left / width, (legend_h + extra_bottom + MARGIN_IN / 2) / height, plan.width / width,
                       plan.height / height))
    return fig, ax, ncol


def draw_graph(obj, round: int | None = None, *, ax=None, pos=None, labels: bool = True, title: str | None = None,
               legend: bool = True, mode: str | None = None, new: Iterable[str] = (), ids: bool = False):
    """Draws the coordination graph at ``round`` (default: the last one) and returns the Axes.

    Without ``ax`` the figure is sized to the graph, so labels keep their point size. ``labels=False`` (or
    ``mode="none"``) draws small unlabelled nodes; ``mode="compact"`` writes only short ids and owners.
    ``new``: node ids to ring (added since the previous picture). ``ids=True`` writes each node's own id in
    it instead of a short T1, T2, ... (for graphs whose ids a reader types, as in the scheduling lesson).
    """
    snaps = snapshots_of(obj)
    snap = at_round(snaps, round)
    if not labels:
        mode = "none"
    short = {n["id"]: str(n["id"]) for s in snaps for n in s["graph"]["nodes"]} if ids else None
    plan = _plan_of(snaps, pos, mode, short)
    handles = gd.legend_handles(plan, new=bool(new)) if legend else []
    if ax is None:
        fig, ax, ncol = graph_figure(plan, legend_entries=len(handles), legend_labels=[h.get_label() for h in handles])
        if handles:
            fig.legend(handles=handles, loc="lower center", ncol=ncol, frameon=False, fontsize=gd.LABEL_PT,
                       bbox_to_anchor=(0.5, 0.0))
    elif handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=gd.LABEL_PT)
    scene = gd.render(ax, plan, snap, new=new)
    if ids:
        _fit_ids(scene, plan)
    ax.set_title(title or round_title(snap), fontsize=style.TITLE_PT)
    return ax


ID_CHAR_EM = 0.62  # width of one bold character of a node's id, in ems


def _fit_ids(scene, plan: gd.GraphPlan) -> None:
    """Shrinks an id written in its node until it fits the node (a short id always fits; "report" would not)."""
    inside_pt = 0.9 * plan.node_in * 72
    for key, text in getattr(scene, "ids", {}).items():
        n = len(text.get_text()) if isinstance(key, str) else 0  # keyed by node id: the text in the node
        if n:
            text.set_fontsize(min(gd.LABEL_PT, inside_pt / (ID_CHAR_EM * n)))


class GraphDrawing:
    """A drawn graph that displays itself once in Jupyter: an SVG whose nodes show their id, title,
    owner, status and dependencies when hovered, plus (for big graphs, drawn without labels) a table of
    every node. ``.fig`` is the matplotlib Figure; ``.save(path)`` writes PNG, PDF or SVG."""

    def __init__(self, fig, ax, plan: gd.GraphPlan, snapshot: dict):
        self.fig, self.ax, self.plan, self.snapshot = fig, ax, plan, snapshot

    def table(self):
        """One row per node of the drawn round: short id, id, title, status, owner, dependencies."""
        import pandas as pd

        rows = [{"short": self.plan.short.get(n["id"], ""), "id": n["id"], "title": n.get("title", ""),
                 "status": n.get("status"), "owner": n.get("agent") or n.get("owner") or "",
                 "deps": ", ".join(self.plan.short.get(d, d) for d in n.get("deps", []))}
                for n in self.snapshot["graph"]["nodes"]]
        return pd.DataFrame(rows, columns=["short", "id", "title", "status", "owner", "deps"])

    def _tooltip(self, node: dict) -> str:
        deps = ", ".join(self.plan.short.get(d, d) for d in node.get("deps", [])) or "none"
        owner = node.get("agent") or node.get("owner") or "nobody"
        return (f"{self.plan.short.get(node['id'], '')} {node['id']}\n{node.get('title', '')}\n"
                f"status {gd.status_word(node.get('status', ''))} · owner {owner} · depends on {deps}")

    def svg(self) -> str:
        buf = io.StringIO()
        self.fig.savefig(buf, format="svg")
        text = buf.getvalue()
        text = text[text.find("<svg"):]  # drop the XML prologue and doctype: the SVG goes inside HTML
        tips = {f"node{self.plan.order.index(n['id'])}": self._tooltip(n) for n in self.snapshot["graph"]["nodes"]
                if n["id"] in self.plan.pos}

        def add_title(m: re.Match) -> str:
            tip = tips.get(m.group(1))
            return m.group(0) + (f"<title>{html.escape(tip)}</title>" if tip else "")

        return re.sub(r'<g id="(node\d+)">', add_title, text)

    def _repr_html_(self) -> str:
        out = f'<div style="overflow-x:auto">{self.svg()}</div>'
        if self.plan.mode == "none":
            n = len(self.snapshot["graph"]["nodes"])
            out += (f"<details><summary>all {n} nodes (hover a node in the drawing for one)</summary>"
                    f"{self.table().to_html(index=False)}</details>")
        return out

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=110)
        return buf.getvalue()

    def save(self, path, **kwargs) -> None:
        kwargs.setdefault("dpi", style.FIG_DPI)
        with style.saving():  # a PDF gets the theme's TrueType fonts
            self.fig.savefig(path, **kwargs)


def draw(obj, round: int | None = None, *, mode: str | None = None, title: str | None = None,
         legend: bool = True) -> GraphDrawing:
    """The graph at ``round`` (default: the last) as a :class:`GraphDrawing`: titles beside the nodes up to
    40 nodes, small unlabelled nodes with hover tooltips and a node table beyond. Nodes added since the
    previous snapshot are ringed.

    A trial of a team without a task graph (leader_worker, decentralized, pipeline) records no snapshots:
    its message flow up to ``round`` (:func:`latte_lab.viz.flow`) is drawn instead and returned as a Figure,
    so one notebook cell works for every team."""
    snaps = snapshots_of(obj)
    if not snaps and _has_events(obj):
        return _flow_instead(obj, upto=round, title=title)
    snap = at_round(snaps, round)
    i = next(i for i, s in enumerate(snaps) if s is snap)
    before = {n["id"] for n in snaps[i - 1]["graph"]["nodes"]} if i > 0 else None
    new = [n["id"] for n in snap["graph"]["nodes"] if before is not None and n["id"] not in before]
    plan = gd.plan(snaps, mode=mode)
    handles = gd.legend_handles(plan, new=bool(new)) if legend else []
    with style.theme():
        fig, ax, ncol = graph_figure(plan, legend_entries=len(handles), legend_labels=[h.get_label() for h in handles])
        gd.render(ax, plan, snap, new=new, gid_prefix="node")
        ax.set_title(title or round_title(snap), fontsize=style.TITLE_PT)
        if handles:
            fig.legend(handles=handles, loc="lower center", ncol=ncol, frameon=False, fontsize=gd.LABEL_PT,
                       bbox_to_anchor=(0.5, 0.0))
    style.pyplot().close(fig)  # shown by the GraphDrawing, not a second time by the inline backend
    return style.finish(GraphDrawing(fig, ax, plan, snap))


def graph_panels(obj, rounds: Iterable[int] | None = None, *, ncols: int = 4):
    """Small multiples of the graph at several rounds with one fixed layout: short ids in the nodes,
    owners under them, nodes new since the previous panel ringed, and a key of titles below; returns the
    Figure. ``rounds`` defaults to at most eight evenly spaced rounds. A trial of a team without a task graph
    gets its message flow instead (as :func:`draw` does)."""
    snaps = snapshots_of(obj)
    if not snaps and _has_events(obj):
        return _flow_instead(obj)
    if not snaps:
        raise DataError(NO_SNAPSHOTS)
    if rounds is None:
        available = [s["round"] for s in snaps]
        step = max(1, -(-len(available) // 8))
        rounds = available[::step]
        if rounds[-1] != available[-1]:
            rounds = rounds[:7] + [available[-1]]
    return style.finish(gd.panels(snaps, list(rounds), ncols=ncols))


def _has_events(obj) -> bool:
    return getattr(obj, "event_list", None) is not None or getattr(obj, "events", None) is not None


def _flow_instead(obj, *, upto: int | None = None, title: str | None = None):
    """The message flow of a graphless team's trial, as a closed Figure (a notebook shows it once)."""
    from latte_lab.viz.flow import flow

    events = getattr(obj, "event_list", None)
    if events is None:
        events = obj.events
    config = getattr(obj, "config", None)
    team = getattr(config, "team", None) or "this team"
    ax = flow(events, upto=upto)
    fig = ax.figure
    when = f" up to round {upto}" if upto is not None else ""
    ax.set_title(title or f"{team} keeps no task graph: what its agents did{when}", fontsize=style.TITLE_PT)
    return style.finish(fig)
