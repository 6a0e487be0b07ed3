"""The one renderer of coordination graphs: a layered left-to-right layout spaced by label width, and the
drawing of one snapshot on it.

Every graph picture uses it: ``ll.viz.draw`` and its animation, the small multiples of
``ll.viz.graph_panels``, the trial viewer's page and the paper's Figure 3C (:mod:`latte_lab.viz.figures`).
The layout is computed once from every node that ever appears (the final graph), so a node keeps its
place across rounds. Coordinates are inches: drawn at scale 1, text keeps its point size and the
spacing computed from measured label widths holds exactly.

Three label modes:

- ``"beside"``: a short id inside each node, the title wrapped beside it with the owner and status
  under it; edges leave from the end of the label, so labels never overlap nodes, edges or each other;
- ``"compact"``: the short id inside, the owner under the node, titles in a key (small multiples, the
  paper figure);
- ``"none"``: small unlabelled nodes for big graphs; the titles go to tooltips and a table.

>>> from latte_lab.graph import CoordinationGraph
>>> g = CoordinationGraph()
>>> g.discover("a", by="Lead", title="Load the data"); g.discover("b", ["a"], by="Lead", title="Fit a model")
>>> p = plan([g.snapshot()])
>>> p.short, p.depth, p.pos["a"][0] < p.pos["b"][0]
({'a': 'T1', 'b': 'T2'}, {'a': 0, 'b': 1}, True)
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import latte_lab.viz.style as style
from latte_lab.graph import dag

LABELS_MAX_NODES = 40  # beyond this many nodes, titles would not fit a screen: nodes go unlabelled
LABEL_PT = style.MIN_FONT_PT
LINE_IN = LABEL_PT * 1.3 / 72  # height of one label line
NODE_IN = 0.30  # diameter of a node with a short id inside
SMALL_NODE_IN = 0.13  # diameter of an unlabelled node
TITLE_WRAP = 26  # characters per title line beside a node
TITLE_LINES = 2  # title lines beside a node; a longer title ends in an ellipsis (the tooltip has it whole)
LABEL_PAD_IN = 0.05  # between a node and its label
COLUMN_GAP_IN = {"beside": 0.42, "compact": 0.30, "none": 0.30}  # between one depth's labels and the next depth
ROW_GAP_IN = {"beside": 0.10, "compact": 0.06, "none": 0.05}
MAX_ROWS = {"beside": 14, "compact": 10, "none": 40}  # a taller depth column wraps into side-by-side sub-columns
STATUS_WORDS = {"in_progress": "in progress"}
TITLE_IN = 0.32  # room above a drawing for its title
LEGEND_ROW_IN = 0.19  # one row of legend entries
LEGEND_ENTRY_IN = 1.25  # width budget of one legend entry
MARGIN_IN = 0.12
KEY_COLUMN_CHARS = 40  # one entry of the id -> title key under small multiples (longer titles wrap)


def _text_width_in(text: str, size: float = LABEL_PT) -> float:
    return _measure(text, size) / 72


@lru_cache(maxsize=4096)
def _measure(text: str, size: float) -> float:
    from matplotlib.font_manager import FontProperties

    return _renderer().get_text_width_height_descent(text, FontProperties(size=size), ismath=False)[0]


@lru_cache(maxsize=1)
def _renderer():
    from matplotlib.backends.backend_agg import RendererAgg

    return RendererAgg(10, 10, 72)  # at 72 dpi a pixel is a point


def status_word(status: str) -> str:
    return STATUS_WORDS.get(status, status)


def wrap_title(title: str, width: int = TITLE_WRAP, lines: int = TITLE_LINES) -> list[str]:
    """The title in at most ``lines`` lines of about ``width`` characters, the last ending in … when cut.

    >>> wrap_title("Create config.py (COLUMN_MAP + feature lists) prerequisite for findings.json")
    ['Create config.py', '(COLUMN_MAP + feature…']
    """
    out = textwrap.wrap(str(title or ""), width, break_long_words=True) or [""]
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1].rstrip() + "…"
    return out


@dataclass
class GraphPlan:
    """Where every node of a run goes and what is written beside it (inches; y grows upwards)."""

    mode: str
    order: list[str]  # node ids in first-appearance order
    short: dict[str, str]  # node id -> T1, T2, ... (V3: the review of T3)
    depth: dict[str, int]
    pos: dict[str, tuple[float, float]]
    lines: dict[str, list[str]]  # title lines written beside a node (mode "beside")
    label_end: dict[str, float]  # x where a node's label ends: its out-edges start there
    node_in: float
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    nodes: dict[str, dict] = field(repr=False, default_factory=dict)  # last-known record of each node
    edges: list[tuple[str, str]] = field(repr=False, default_factory=list)  # every edge that ever appears

    @property
    def width(self) -> float:
        return self.xlim[1] - self.xlim[0]

    @property
    def height(self) -> float:
        return self.ylim[1] - self.ylim[0]

    @property
    def has_verify(self) -> bool:
        return any(n.get("is_verify") for n in self.nodes.values())

    def key(self) -> list[tuple[str, str]]:
        """``(short id, title)`` for every node, in first-appearance order (the key of compact drawings)."""
        return [(self.short[n], str(self.nodes[n].get("title") or n)) for n in self.order]


def short_ids(nodes: dict[str, dict], order: list[str]) -> dict[str, str]:
    """T1, T2, ... in first-appearance order; a verify node is V<k> after the node it reviews."""
    short: dict[str, str] = {}
    k = 0
    for n in order:
        if not nodes[n].get("is_verify"):
            k += 1
            short[n] = f"T{k}"
    for n in order:
        if nodes[n].get("is_verify"):
            target = nodes[n].get("verify_of") or (n[: -len("-verify")] if n.endswith("-verify") else None)
            if target in short and f"V{short[target][1:]}" not in short.values():
                short[n] = f"V{short[target][1:]}"
            else:
                k += 1
                short[n] = f"V{k}"
    return short


def collect_nodes(snapshots: Iterable[dict]) -> tuple[dict[str, dict], list[str]]:
    """Every node that ever appears, with its last-known record, and the order of first appearance.

    ``snapshots`` are graph snapshots (``{"nodes": [...]}``) or ``{"graph": snapshot}`` records.
    """
    nodes: dict[str, dict] = {}
    for snap in snapshots:
        graph = snap.get("graph", snap)
        for node in graph["nodes"]:
            nodes[node["id"]] = node
    return nodes, list(nodes)


def collect_edges(snapshots: Iterable[dict]) -> list[tuple[str, str]]:
    """Every (dependency, node) edge that ever appears, in first-appearance order (a review reroutes edges,
    so the final graph alone misses some)."""
    edges: dict[tuple[str, str], None] = {}
    for snap in snapshots:
        for node in snap.get("graph", snap)["nodes"]:
            for d in node.get("deps", []):
                edges[(d, node["id"])] = None
    return list(edges)


def plan(snapshots: Iterable[dict], *, mode: str | None = None, short: dict[str, str] | None = None) -> GraphPlan:
    """Lay out every node of ``snapshots`` (see the module docstring); ``mode`` defaults to ``"beside"``
    up to :data:`LABELS_MAX_NODES` nodes and ``"none"`` above. ``short`` overrides the short ids."""
    snapshots = list(snapshots)
    nodes, order = collect_nodes(snapshots)
    edges = [e for e in collect_edges(snapshots) if e[0] in nodes]
    if mode is None:
        mode = "beside" if len(order) <= LABELS_MAX_NODES else "none"
    if mode not in COLUMN_GAP_IN:
        raise ValueError(f"unknown label mode {mode!r}; use 'beside', 'compact' or 'none'")
    index = {n: i for i, n in enumerate(order)}
    deps: dict[str, list[str]] = {n: [] for n in order}
    for d, n in edges:
        deps[n].append(d)
    depth = dag.depths(deps)
    short = {**short_ids(nodes, order), **(short or {})}
    node_in = SMALL_NODE_IN if mode == "none" else NODE_IN
    lines: dict[str, list[str]] = {}
    label_w: dict[str, float] = {}
    row_h: dict[str, float] = {}
    owners = {str(n.get("agent") or n.get("owner") or "") for n in nodes.values()}
    owner_w = max(_text_width_in(o) for o in owners) if owners else 0.0
    for n in order:
        if mode == "beside":
            lines[n] = wrap_title(nodes[n].get("title") or n)
            status_w = owner_w + _text_width_in(" · in progress")
            label_w[n] = LABEL_PAD_IN + max([_text_width_in(s) for s in lines[n]] + [status_w])
            row_h[n] = max(node_in, (len(lines[n]) + 1) * LINE_IN)
        elif mode == "compact":
            label_w[n] = 0.0
            row_h[n] = node_in + LINE_IN  # the owner under the node
        else:
            label_w[n] = 0.0
            row_h[n] = node_in
    # columns: one per depth, wrapped into sub-columns when taller than MAX_ROWS
    by_depth: dict[int, list[str]] = {}
    for n in order:
        by_depth.setdefault(depth[n], []).append(n)
    rank: dict[str, float] = {}
    columns: list[list[str]] = []
    for d in sorted(by_depth):
        members = by_depth[d]
        if d > 0:  # barycentre of the dependencies' rows: fewer crossings, ties in creation order
            def bary(n: str) -> float:
                ranks = [rank[p] for p in deps[n] if p in rank]
                return sum(ranks) / len(ranks) if ranks else math.inf

            members = sorted(members, key=lambda n: (bary(n), index[n]))
        for i, n in enumerate(members):
            rank[n] = i / max(1, len(members) - 1)
        k = MAX_ROWS[mode]
        columns += [members[i:i + k] for i in range(0, len(members), k)]
    gap_x, gap_y = COLUMN_GAP_IN[mode], ROW_GAP_IN[mode]
    if mode == "compact":
        owner_col = max(node_in, owner_w)
    pos: dict[str, tuple[float, float]] = {}
    label_end: dict[str, float] = {}
    x = node_in / 2
    top = 0.0
    for col in columns:
        heights = [row_h[n] for n in col]
        total = sum(heights) + gap_y * (len(col) - 1)
        y = total / 2
        for n, h in zip(col, heights):
            pos[n] = (x, y - h / 2)
            y -= h + gap_y
        top = max(top, total / 2)
        for n in col:
            label_end[n] = x + node_in / 2 + label_w[n]
        width = max(label_w[n] for n in col) if mode == "beside" else (owner_col - node_in if mode == "compact" else 0)
        x += node_in + max(0.0, width) + gap_x
    right = max(label_end.values(), default=node_in) + (node_in / 2 if mode != "beside" else 0.02)
    left = -(owner_w - node_in) / 2 if mode == "compact" and owner_w > node_in else 0.0
    margin = 0.04
    bottom = -top - (LINE_IN if mode == "compact" else 0)
    return GraphPlan(mode=mode, order=order, short=short, depth=depth, pos=pos, lines=lines, label_end=label_end,
                     node_in=node_in, xlim=(left - margin, right + margin),
                     ylim=(bottom - margin - node_in / 2, top + margin + node_in / 2), nodes=nodes,
                     edges=edges)


class Scene:
    """Artists for every node and edge that ever appears, drawn once on ``ax``; :meth:`show` sets them to
    one snapshot (visibility, fill, owner and status), so an animation frame changes properties instead of
    rebuilding the picture. Node patches carry the gid ``<gid_prefix><k>`` (k: first-appearance index)."""

    def __init__(self, ax, p: GraphPlan, *, gid_prefix: str | None = None):
        from matplotlib.patches import Circle, FancyArrowPatch, Rectangle, RegularPolygon

        self.ax, self.plan = ax, p
        r = p.node_in / 2
        # add_artist, not add_patch: the limits are the plan's (set below), so the data limits add_patch would
        # grow with every arrow's Bezier extent are never read
        add = ax.add_artist
        self.edges = {}
        for dep, nid in p.edges:
            x0, y0 = p.pos[dep]
            x1, y1 = p.pos[nid]
            start = p.label_end[dep] + 0.05 if p.mode == "beside" else x0 + r
            review = bool(p.nodes[nid].get("is_verify") or p.nodes[dep].get("is_verify"))
            arrow = FancyArrowPatch((start, y0), (x1 - r, y1), arrowstyle="-|>", mutation_scale=7,
                                    lw=0.9 if review else 0.7, shrinkA=0, shrinkB=0.5, zorder=1,
                                    color=style.REVIEW_EDGE if review else style.DEP_EDGE, visible=False)
            self.edges[(dep, nid)] = add(arrow)
        self.nodes, self.rings, self.ids, self.meta = {}, {}, {}, {}
        for k, nid in enumerate(p.order):
            x, y = p.pos[nid]
            if p.nodes[nid].get("is_verify"):
                patch = RegularPolygon((x, y), 4, radius=r * 1.2, edgecolor=style.NODE_EDGE, lw=0.7, zorder=3)
            else:
                patch = Circle((x, y), r, edgecolor=style.NODE_EDGE, lw=0.7, zorder=3)
            if gid_prefix is not None:
                patch.set_gid(f"{gid_prefix}{k}")
            patch.set_visible(False)
            self.nodes[nid] = add(patch)
            self.rings[nid] = add(Circle((x, y), r * 1.45, facecolor="none", edgecolor=style.NEW_NODE_EDGE,
                                         lw=1.6, zorder=2, visible=False, clip_on=False))
            if p.mode == "none":
                continue
            self.ids[nid] = ax.text(x, y, p.short[nid], ha="center", va="center", fontsize=LABEL_PT, zorder=4,
                                    fontweight="bold", visible=False)
            if p.mode == "beside":
                lines = p.lines[nid]
                top = y + len(lines) * LINE_IN / 2
                # a white card under the label: an edge that passes behind it never strikes the text through
                self.ids[(nid, "card")] = add(Rectangle(
                    (x + r + LABEL_PAD_IN / 2, top - (len(lines) + 0.5) * LINE_IN),
                    p.label_end[nid] - x - r - LABEL_PAD_IN / 2, (len(lines) + 1) * LINE_IN, facecolor="white",
                    edgecolor="none", zorder=2, visible=False))
                for i, line in enumerate(lines):
                    self.ids[(nid, i)] = ax.text(x + r + LABEL_PAD_IN, top - i * LINE_IN, line, ha="left",
                                                 va="center", fontsize=LABEL_PT, color="#101828", zorder=4,
                                                 visible=False)
                self.meta[nid] = ax.text(x + r + LABEL_PAD_IN, top - len(lines) * LINE_IN, "", ha="left",
                                         va="center", fontsize=LABEL_PT, color=style.MUTED_TEXT, style="italic",
                                         zorder=4)
            else:
                self.meta[nid] = ax.text(x, y - r - LINE_IN * 0.55, "", ha="center", va="center",
                                         fontsize=LABEL_PT, color=style.MUTED_TEXT, zorder=4)
        ax.set_xlim(*p.xlim)
        ax.set_ylim(*p.ylim)
        ax.set_aspect("equal")
        ax.set_axis_off()

    def show(self, snapshot: dict, *, new: Iterable[str] = ()) -> None:
        """Shows the graph as it is in ``snapshot`` (``{"nodes": [...]}`` or a record holding ``"graph"``)."""
        graph = snapshot.get("graph", snapshot)
        present = {n["id"]: n for n in graph["nodes"] if n["id"] in self.nodes}
        new = set(new)
        live_edges = {(d, nid) for nid, n in present.items() for d in n.get("deps", []) if d in present}
        for key, arrow in self.edges.items():
            arrow.set_visible(key in live_edges)
        for nid, patch in self.nodes.items():
            node = present.get(nid)
            on = node is not None
            patch.set_visible(on)
            self.rings[nid].set_visible(on and nid in new)
            for key, text in self.ids.items():
                if key == nid or (isinstance(key, tuple) and key[0] == nid):
                    text.set_visible(on)
            if nid in self.meta:
                self.meta[nid].set_visible(on)
            if not on:
                continue
            status = node.get("status", "pending")
            patch.set_facecolor(style.STATUS_COLORS.get(status, "#ffffff"))
            if nid in self.ids:
                self.ids[nid].set_color(style.STATUS_TEXT.get(status, "black"))
            owner = node.get("agent") or node.get("owner")
            if nid in self.meta:
                if self.plan.mode == "beside":
                    self.meta[nid].set_text(f"{owner} · {status_word(status)}" if owner else status_word(status))
                else:
                    self.meta[nid].set_text(str(owner or ""))


def render(ax, p: GraphPlan, snapshot: dict, *, new: Iterable[str] = (), gid_prefix: str | None = None) -> Scene:
    """Draws ``snapshot`` on ``ax`` with the plan's positions; ``new`` nodes get a ring. Nodes absent from
    the plan are skipped. Returns the :class:`Scene` (call ``.show(other_snapshot)`` to redraw)."""
    scene = Scene(ax, p, gid_prefix=gid_prefix)
    scene.show(snapshot, new=new)
    return scene


def legend_handles(p: GraphPlan, *, statuses=None, new: bool | str = False) -> list:
    """Handles for every kind of mark :func:`render` draws for this plan."""
    from matplotlib.lines import Line2D

    if statuses is None:
        seen = {n.get("status") for n in p.nodes.values()}
        statuses = [s for s in style.STATUS_COLORS if s != "closed" or "closed" in seen]
    handles = style.status_handles(statuses)
    handles.append(Line2D([], [], color=style.DEP_EDGE, lw=0.8, marker=">", markersize=4, label="depends on"))
    if p.has_verify:
        handles.append(Line2D([], [], ls="", marker="D", markersize=6, markerfacecolor="white",
                              markeredgecolor=style.NODE_EDGE, label="verify node (Vk reviews Tk)"))
        handles.append(Line2D([], [], color=style.REVIEW_EDGE, lw=1.0, marker=">", markersize=4,
                              label="edge through a review"))
    if new:
        handles.append(Line2D([], [], ls="", marker="o", markersize=8, markerfacecolor="none",
                              markeredgecolor=style.NEW_NODE_EDGE, markeredgewidth=1.5,
                              label=new if isinstance(new, str) else "new this round"))
    return handles


def at_round(snaps: list[dict], round: int | None) -> dict:
    """The last snapshot at or before ``round`` (the last one when ``round`` is None)."""
    if round is None:
        return snaps[-1]
    best = snaps[0]
    for s in snaps:
        if s["round"] <= round:
            best = s
    return best


def legend_rows(n: int, width: float, labels: Iterable[str] = ()) -> tuple[int, int]:
    """(columns, rows) of a legend of ``n`` entries under a figure ``width`` inches wide; with ``labels``
    the columns are sized by the widest label."""
    labels = list(labels)
    entry = max([LEGEND_ENTRY_IN] + [_text_width_in(t) + 0.55 for t in labels])  # marker, gaps and the label
    ncol = max(1, min(n, int((width - 2 * MARGIN_IN) // entry)))
    return ncol, -(-n // ncol)


def key_lines(p: GraphPlan, width: float) -> list[str]:
    """The short id -> title key in as many columns as fit ``width`` inches of monospaced 7 pt text; a long
    title wraps under itself, never cut."""
    chars = int((width - 2 * MARGIN_IN) / (LABEL_PT * 0.6 / 72))
    per_col = KEY_COLUMN_CHARS + 2
    ncol = max(1, chars // per_col)
    blocks = [textwrap.wrap(f"{s:>4} {t}", KEY_COLUMN_CHARS, subsequent_indent=" " * 5) or [s] for s, t in p.key()]
    nrows = -(-sum(len(b) for b in blocks) // ncol)
    while True:  # an entry stays in one column, so the columns may need more rows than an even split
        cols: list[list[str]] = [[]]
        for b in blocks:
            if len(cols[-1]) + len(b) > nrows and cols[-1]:
                cols.append([])
            cols[-1].extend(b)
        if len(cols) <= ncol:  # never more columns than fit the width: a further one would run off the edge
            break
        nrows += 1
    nrows = max(len(c) for c in cols)
    return ["".join((c[r] if r < len(c) else "").ljust(per_col) for c in cols).rstrip() for r in range(nrows)]


def _panel_title(snap: dict, r: int, added: int) -> str:
    nodes = snap["graph"]["nodes"]
    done = sum(n.get("status") in ("done", "verified") for n in nodes)
    return f"round {r} · {done}/{len(nodes)} done"


def panels(snaps: list[dict], rounds: list[int], *, ncols: int = 4, max_width: float | None = None, title=None,
           short: dict[str, str] | None = None):
    """Small multiples of ``snaps`` at ``rounds`` on one compact plan (see ``ll.viz.graph_panels``);
    ``title(snapshot, round, nodes added)`` names a panel; with ``max_width`` the panels wrap into rows
    that fit it. Returns the Figure."""
    plt = style.pyplot()
    title = title or _panel_title
    mode = "compact" if len(collect_nodes(snaps)[1]) <= LABELS_MAX_NODES else "none"
    p = plan(snaps, mode=mode, short=short)
    picked = [at_round(snaps, r) for r in rounds]
    titles, previous = [], None
    for r, snap in zip(rounds, picked):
        present = {n["id"] for n in snap["graph"]["nodes"]}
        titles.append(title(snap, r, len(present - previous) if previous is not None else len(present)))
        previous = present
    cell_w = max(p.width + 0.2, max(_text_width_in(t, style.FONT_PT) for t in titles) + 0.15)
    if max_width:
        ncols = max(1, min(ncols, int(max_width // cell_w)))
    ncols = max(1, min(ncols, len(rounds)))
    nrows = -(-len(rounds) // ncols)
    cell_h = p.height + TITLE_IN
    width = max(cell_w * ncols, 3.0) if not max_width else max_width
    handles = legend_handles(p, new="new since the previous panel" if len(rounds) > 1 else False)
    ncol_leg, rows_leg = legend_rows(len(handles), width, [h.get_label() for h in handles])
    key = key_lines(p, width) if mode == "compact" else []
    key_h = len(key) * LINE_IN + (0.1 if key else 0)
    height = cell_h * nrows + rows_leg * LEGEND_ROW_IN + 0.1 + key_h + MARGIN_IN
    with style.theme():
        fig = plt.figure(figsize=(width, height))
        previous = None
        for k, snap in enumerate(picked):
            row, col = divmod(k, ncols)
            x0 = (width - cell_w * ncols) / 2 + col * cell_w + 0.1
            y0 = height - (row + 1) * cell_h
            ax = fig.add_axes((x0 / width, y0 / height, p.width / width, p.height / height))
            present = {n["id"] for n in snap["graph"]["nodes"]}
            render(ax, p, snap, new=present - previous if previous is not None else ())
            ax.set_title(titles[k], fontsize=style.FONT_PT, loc="left")
            previous = present
        fig.legend(handles=handles, loc="lower center", ncol=ncol_leg, frameon=False, fontsize=LABEL_PT,
                   bbox_to_anchor=(0.5, key_h / height))
        for i, line in enumerate(key):
            fig.text(MARGIN_IN / width, (key_h - (i + 0.5) * LINE_IN) / height, line, fontsize=LABEL_PT,
                     family="DejaVu Sans Mono", va="center")
    return fig
