"""The coordination graph as data: its operation log, snapshots, replay, and the networkx view.

These are the bodies of :meth:`CoordinationGraph.snapshot`, :meth:`~CoordinationGraph.from_snapshot`,
:meth:`~CoordinationGraph.from_log`, :meth:`~CoordinationGraph.replay_entry`, :meth:`~CoordinationGraph.state`,
:meth:`~CoordinationGraph.from_state` and :meth:`~CoordinationGraph.to_networkx`; call those. Loading checks every record (ids, statuses, owners,
edges, acyclicity) before the graph is used, because a snapshot or a log may come from an old or a
hand-edited run directory.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from latte_lab.errors import DataError, LatteError, OperatorError
from latte_lab.graph._nodes import (
    LEAD,
    PENDING,
    RECORD_KEYS,
    STATUS_BY_VALUE,
    Status,
    is_active,
    is_finished,
    new_node,
)

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

    from latte_lab.graph._core import CoordinationGraph

SNAPSHOT_FORMAT = 1  # bumped when the snapshot layout changes, so old run directories are detected
SNAPSHOT_SETTINGS = ("roles", "lead", "on_unknown_dep", "workers", "verify_reroute")  # constructor arguments


def entry_dict(e: tuple) -> dict[str, Any]:
    """The log entry stored as a tuple: a Discover's ``(node, deps, title, description, by, dropped)``, or a
    Claim's or a plain Complete's ``(op, node, agent)``.

    >>> entry_dict(("claim", "t1", "Dev1"))
    {'op': 'claim', 'node': 't1', 'agent': 'Dev1'}
    >>> entry_dict(("t2", ("t1",), "", "", "Lead", ()))["deps"]
    ['t1']
    """
    if len(e) == 3:
        return {"op": e[0], "node": e[1], "agent": e[2]}
    entry = {"op": "discover", "node": e[0], "deps": list(e[1]), "title": e[2], "description": e[3], "by": e[4]}
    if e[5]:
        entry["dropped_deps"] = list(e[5])
    return entry


def snapshot(g: CoordinationGraph) -> dict[str, Any]:
    return {
        "format": SNAPSHOT_FORMAT,
        "roles": g.roles,
        "lead": g.lead,
        "on_unknown_dep": g.on_unknown_dep,
        "workers": list(g.workers) if g.workers is not None else None,
        "verify_reroute": g.verify_reroute,
        "nodes": [n.record() for n in g._nodes.values()],
    }


def from_snapshot(cls: type[CoordinationGraph], snapshot: dict[str, Any]) -> CoordinationGraph:
    def bad(why: str) -> DataError:
        return DataError(f"graph snapshot is malformed: {why}; pass the dict CoordinationGraph.snapshot() made")

    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("nodes"), list):
        raise bad("expected a dict with a 'nodes' list")
    if snapshot.get("format", SNAPSHOT_FORMAT) != SNAPSHOT_FORMAT:
        raise bad(f"format {snapshot.get('format')!r}, this version reads {SNAPSHOT_FORMAT}")
    try:  # a setting the snapshot lacks takes the constructor's default
        g = cls(**{k: snapshot[k] for k in SNAPSHOT_SETTINGS if k in snapshot})
    except LatteError as exc:
        raise bad(str(exc)) from None
    records = snapshot["nodes"]
    for i, r in enumerate(records):
        if not isinstance(r, dict) or not isinstance(r.get("id"), str) or not r["id"]:
            raise bad(f"node #{i} has no string id")
        missing = RECORD_KEYS - r.keys()
        if missing:
            raise bad(f"node {r['id']!r} lacks {sorted(missing)}")
        if r["id"] in g._nodes:
            raise bad(f"node id {r['id']!r} appears twice")
        if r["created_seq"] != i:
            raise bad(f"node {r['id']!r} has created_seq {r['created_seq']!r} at position {i}")
        status = STATUS_BY_VALUE.get(r["status"])
        if status is None:
            raise bad(f"node {r['id']!r} has unknown status {r['status']!r}")
        agent = r["agent"]
        if status is PENDING and agent is not None:
            raise bad(f"pending node {r['id']!r} has agent {agent!r}")
        if is_active(status) and not (isinstance(agent, str) and agent):
            raise bad(f"{status.value} node {r['id']!r} has no agent")
        n = new_node(r["id"], str(r["title"]), str(r["description"]), (), r["created_by"], i,
                     bool(r["is_verify"]), r["verify_of"])
        n.status, n.agent = status, agent
        n.assigned_by, n.completed_by, n.closed = r["assigned_by"], r["completed_by"], bool(r["closed"])
        g._nodes[n.id] = n
    for r in records:
        n = g._nodes[r["id"]]
        if not isinstance(r["deps"], list):
            raise bad(f"node {n.id!r} deps is not a list")
        deps: list[str] = []
        for d in r["deps"]:
            dn = g._nodes.get(d) if isinstance(d, str) else None
            if dn is None or dn is n or d in deps:
                raise bad(f"node {n.id!r} has unknown, self or repeated dependency {d!r}")
            deps.append(d)
            dn.succ.append(n)
        n.deps = tuple(deps)
        if n.verify_of is not None and n.verify_of not in g._nodes:
            raise bad(f"verify node {n.id!r} targets unknown node {n.verify_of!r}")
    for r in records:
        n = g._nodes[r["id"]]
        n.succ.sort(key=lambda s: s.seq)
        if r["successors"] != [s.id for s in n.succ]:
            raise bad(f"node {n.id!r} successors {r['successors']!r} do not match the deps")
    # Acyclicity (Kahn): a snapshot edited by hand could hold a cycle the operators never allow.
    indeg = {n.id: len(n.deps) for n in g._nodes.values()}
    queue = [n for n in g._nodes.values() if not n.deps]
    seen = 0
    while queue:
        n = queue.pop()
        seen += 1
        for s in n.succ:
            indeg[s.id] -= 1
            if indeg[s.id] == 0:
                queue.append(s)
    if seen != len(g._nodes):
        raise bad("the dependency edges contain a cycle")
    for n in g._nodes.values():
        g._counts[n.status] += 1
        n.unfinished = sum(1 for d in n.deps if not is_finished(g._nodes[d].status))
        if is_active(n.status):
            g._owned.setdefault(n.agent, {})[n.id] = None  # type: ignore[arg-type]
        if n.status is PENDING and n.unfinished == 0:
            g._add_ready(n)
    return g


def from_log(cls: type[CoordinationGraph], log: Iterable[dict[str, Any]], roles: str, *, lead: str = LEAD,
             **settings: Any) -> CoordinationGraph:
    g = cls(roles, lead=lead, **settings)
    g._paper, g._check_callers = False, False
    entries = [dict(e) for e in log]
    try:
        for i, e in enumerate(entries):
            try:
                apply_entry(g, e)
            except (KeyError, TypeError) as exc:
                raise DataError(f"log entry #{i} {e!r} is malformed ({exc!r})") from None
            except OperatorError as exc:
                raise DataError(f"log entry #{i} cannot be replayed: {exc}") from None
    finally:
        g._paper, g._check_callers = roles == "paper", True
    g._log = entries
    return g


def apply_entry(g: CoordinationGraph, e: dict[str, Any]) -> None:
    """Applies one log entry through the public operator, so replay checks what the original call did."""
    op = e["op"]
    if op == "discover":
        g.discover(e["node"], e["deps"], e.get("title", ""), e.get("description", ""), e["by"],
                   on_unknown_dep="reject")
    elif op == "assign":
        g.assign(e["node"], e["agent"], e["by"])
    elif op == "claim":
        g.claim(e["node"], e["agent"])
    elif op == "complete":
        g.complete(e["node"], e["agent"])
    elif op == "release":
        g.release(e["node"], e["by"])
    elif op == "close":
        g.close(e["node"], e["by"])
    elif op == "verify":
        g.verify(e["node"], e["by"], reroute=e.get("reroute", "unstarted"))
    else:
        raise DataError(f"unknown operation {op!r} in the log")


def to_networkx(g: CoordinationGraph) -> nx.DiGraph:
    import networkx as nx

    G = nx.DiGraph()
    for n in g._nodes.values():
        attrs = n.record()
        del attrs["id"], attrs["deps"], attrs["successors"]
        G.add_node(n.id, **attrs)
    for n in g._nodes.values():
        for d in n.deps:
            G.add_edge(d, n.id)
    return G


# The fields of a node in a graph's state, in this order (``succ`` as the successors' ids).
STATE_NODE_FIELDS = ("id", "title", "description", "status", "agent", "deps", "succ", "is_verify", "verify_of",
                     "created_by", "seq", "assigned_by", "completed_by", "closed", "unfinished")


def state(g: CoordinationGraph) -> dict[str, Any]:
    """Everything the graph holds, log and frontier order included, as plain values (tuples kept; the log is the
    graph's own list, which the caller reads and never changes)."""
    nodes = []
    for n in g._nodes.values():
        nodes.append([n.id, n.title, n.description, n.status.value, n.agent, n.deps, [s.id for s in n.succ],
                      n.is_verify, n.verify_of, n.created_by, n.seq, n.assigned_by, n.completed_by, n.closed,
                      n.unfinished])
    settings = {k: getattr(g, k) for k in SNAPSHOT_SETTINGS}
    return {"settings": settings, "paper": g._paper, "check_callers": g._check_callers, "nodes": nodes,
            "log": g._log, "counts": {s.value: c for s, c in g._counts.items()},
            "owned": {agent: list(ids) for agent, ids in g._owned.items()}, "ready": dict(g._ready),
            "ready_max": g._ready_max, "ready_sorted": g._ready_sorted}


def from_state(cls: type[CoordinationGraph], data: dict[str, Any]) -> CoordinationGraph:
    try:
        g = cls(**data["settings"])
        g._paper, g._check_callers = bool(data["paper"]), bool(data["check_callers"])
        succ: dict[str, list[str]] = {}
        for fields in data["nodes"]:
            values = dict(zip(STATE_NODE_FIELDS, fields, strict=True))
            n = new_node(values["id"], values["title"], values["description"], tuple(values["deps"]),
                         values["created_by"], values["seq"], values["is_verify"], values["verify_of"])
            n.status = STATUS_BY_VALUE[values["status"]]
            n.agent, n.assigned_by, n.completed_by = values["agent"], values["assigned_by"], values["completed_by"]
            n.closed, n.unfinished = values["closed"], values["unfinished"]
            g._nodes[n.id] = n
            succ[n.id] = values["succ"]
        for node_id, ids in succ.items():
            g._nodes[node_id].succ = [g._nodes[i] for i in ids]
        g._log = list(data["log"])
        g._counts = {s: int(data["counts"].get(s.value, 0)) for s in Status}
        g._owned = {agent: dict.fromkeys(ids) for agent, ids in data["owned"].items()}
        g._ready = {k: int(v) for k, v in data["ready"].items()}
        g._ready_max, g._ready_sorted = int(data["ready_max"]), bool(data["ready_sorted"])
    except (KeyError, TypeError, ValueError, LatteError) as exc:
        raise DataError(f"graph state is malformed ({type(exc).__name__}: {exc}); pass what "
                        "CoordinationGraph.state() made") from None
    return g
