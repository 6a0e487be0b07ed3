"""The coordination graph's state machine: :class:`CoordinationGraph`, its queries and its seven operators.

Import it from :mod:`latte_lab.graph`, whose docstring describes the rules. How it stays fast: the frontier
(pending nodes whose dependencies are all finished) is maintained incrementally. Each node keeps the number
of its unfinished dependencies, and the ready nodes live in an insertion-ordered dict keyed by id. An
operator touches only its node and that node's successors, so a Complete costs O(out-degree) and every
other operator O(1) (Verify: O(out-degree of the target)). ``frontier()`` returns the ready ids in creation
order: the dict is re-sorted by creation sequence only when a node became ready out of creation order (rare
in practice; O(k log k) for k ready nodes), and the list is cached until the ready set changes, so an
unchanged frontier costs one O(k) copy. :func:`frontier_bruteforce` recomputes it from scratch and exists
only as a test oracle.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import latte_lab.graph._serial as _serial
import latte_lab.graph.dag as dag
from latte_lab.errors import LatteError, OperatorError
from latte_lab.graph._nodes import (
    ASSIGNED,
    DONE,
    IN_PROGRESS,
    LEAD,
    PENDING,
    SYSTEM_AGENT,
    VERIFIED,
    VERIFY_SUFFIX,
    Node,
    Status,
    UnknownNodeError,
    is_active,
    is_finished,
    new_node,
)

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

ROLES = ("paper", "official")  # rule sets: the paper's Appendix A3, or the released code's looser rules
UNKNOWN_DEP_POLICIES = ("reject", "drop")  # Discover: reject unknown deps (paper), or drop them (released)
VERIFY_REROUTES = ("unstarted", "all", "none")  # which successors of v wait for v's review (latte_lab.graph)
DEDUPE_BY_SET_ABOVE = 8  # Discover finds repeated deps by scanning the kept list up to this many deps


class CoordinationGraph:
    """The shared task graph of a team (a DAG), with the seven operators of LATTE.

    Parameters
    ----------
    roles:
        ``"paper"`` enforces the paper's caller permissions and preconditions; ``"official"`` reproduces
        the released code's looser rules (see :mod:`latte_lab.graph`).
    lead:
        The Lead's agent name, for the Lead-only operators and to stop the Lead claiming work.
    on_unknown_dep:
        What Discover does with a dependency id that is not in the graph: ``"reject"`` (OperatorError,
        the paper) or ``"drop"`` (drop it and list it under ``"dropped_deps"`` in the operation's log entry,
        the released code). Each ``discover`` call may override it.
    workers:
        The team's worker names. Under the paper's rules Assign rejects any other name (A3: w in W);
        None accepts any name but the Lead's and the orchestrator's.
    verify_reroute:
        Which successors of v Verify(v) puts behind the review node (:mod:`latte_lab.graph`); each ``verify``
        call may override it.
    """

    def __init__(self, roles: str = "paper", *, lead: str = LEAD, on_unknown_dep: str = "reject",
                 workers: Iterable[str] | None = None, verify_reroute: str = "unstarted"):
        if roles not in ROLES:
            raise LatteError(f"unknown roles {roles!r}; use one of {', '.join(ROLES)}")
        if on_unknown_dep not in UNKNOWN_DEP_POLICIES:
            raise LatteError(
                f"unknown on_unknown_dep {on_unknown_dep!r}; use one of {', '.join(UNKNOWN_DEP_POLICIES)}")
        if not isinstance(lead, str) or not lead:
            raise LatteError(f"lead must be a non-empty agent name such as {LEAD!r}")
        if verify_reroute not in VERIFY_REROUTES:
            raise LatteError(f"unknown verify_reroute {verify_reroute!r}; use one of {', '.join(VERIFY_REROUTES)}")
        self.workers = tuple(workers) if workers is not None else None
        if self.workers is not None and (lead in self.workers or not all(isinstance(w, str) and w for w in self.workers)):
            raise LatteError(f"workers must be non-empty names other than the Lead's, got {list(self.workers)!r}")
        self.verify_reroute = verify_reroute
        self.roles = roles
        self.lead = lead
        self.on_unknown_dep = on_unknown_dep
        self._paper = roles == "paper"  # which precondition set applies (from_log replays with official)
        self._check_callers = True  # off only while replaying a log of already-accepted operations
        self._nodes: dict[str, Node] = {}
        # Discover's entries are 6-tuples, plain Claims' and Completes' (op, node, agent): tuples of strings,
        # which the garbage collector stops tracking (_serial.entry_dict makes each a dict when read)
        self._log: list[dict[str, Any] | tuple] = []
        self._counts: dict[Status, int] = {s: 0 for s in Status}
        self._owned: dict[str, dict[str, None]] = {}  # agent -> ids it holds assigned/in_progress
        self._ready: dict[str, int] = {}  # ready node id -> creation seq, insertion-ordered
        self._ready_max = -1  # largest seq inserted since the last sort (may be stale-high: safe)
        self._ready_sorted = True
        self._frontier_cache: list[str] | None = None

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._nodes))

    def __repr__(self) -> str:
        counts = ", ".join(f"{s.value}={n}" for s, n in self._counts.items() if n)
        return f"<CoordinationGraph roles={self.roles!r} nodes={len(self)}{': ' + counts if counts else ''}>"

    @property
    def version(self) -> int:
        """Number of operations applied so far: it changes exactly when V, E or an agent/status does."""
        return len(self._log)

    @property
    def log(self) -> list[dict[str, Any]]:
        """The applied operations, oldest first, as plain dicts (a copy; rejected operations are absent)."""
        return self.log_since(0)

    def log_since(self, start: int) -> list[dict[str, Any]]:
        """Copies of the log entries from index ``start`` on: O(new entries), for callers that poll.

        >>> g = CoordinationGraph(on_unknown_dep="drop")
        >>> g.discover("a", ["ghost"], by="Dev1")
        >>> g.log_since(0)[0]["dropped_deps"]
        ['ghost']
        """
        return [dict(e) if type(e) is dict else _serial.entry_dict(e) for e in self._log[start:]]

    def nodes(self) -> list[str]:
        """All node ids in creation order."""
        return list(self._nodes)

    def _get(self, node_id: str) -> Node:
        try:
            return self._nodes[node_id]
        except (KeyError, TypeError):
            raise UnknownNodeError(
                f"no node {node_id!r} in the graph ({len(self._nodes)} nodes); discover it first") from None

    def node(self, node_id: str) -> dict[str, Any]:
        """A fresh plain-dict record of one node (changing it does not change the graph)."""
        return self._get(node_id).record()

    def status(self, node_id: str) -> Status:
        return self._get(node_id).status

    def agent(self, node_id: str) -> str | None:
        """The node's owner: set by Assign/Claim, kept after Complete/Close, cleared by Release."""
        return self._get(node_id).agent

    def deps(self, node_id: str) -> list[str]:
        """Direct predecessors (declared dependencies plus verify nodes rerouted in front of it)."""
        return list(self._get(node_id).deps)

    def successors(self, node_id: str) -> list[str]:
        """Direct successors in creation order."""
        return [s.id for s in self._get(node_id).succ]

    def counts(self) -> dict[str, int]:
        """Number of nodes per status, every status present (O(1): kept up to date by the operators)."""
        return {s.value: n for s, n in self._counts.items()}

    def all_done(self) -> bool:
        """True when every node is done or verified. An empty graph is not done: nothing was planned."""
        return bool(self._nodes) and self._counts[DONE] + self._counts[VERIFIED] == len(self._nodes)

    def nodes_of(self, agent: str) -> list[str]:
        """Ids the agent holds in status assigned or in_progress, in creation order."""
        held = self._owned.get(agent)
        if not held:
            return []
        if len(held) == 1:
            return list(held)
        return sorted(held, key=lambda i: self._nodes[i].seq)

    def frontier(self) -> list[str]:
        """Pending nodes whose dependencies are all done/verified, in creation order (a new list)."""
        if self._frontier_cache is None:
            if not self._ready_sorted:
                items = sorted(self._ready.items(), key=itemgetter(1))
                self._ready = dict(items)
                self._ready_max = items[-1][1] if items else -1
                self._ready_sorted = True
            self._frontier_cache = list(self._ready)
        return list(self._frontier_cache)

    def critical_path(self) -> list[str]:
        """The longest dependency chain (by node count) among nodes not yet done/verified.

        Finished nodes are left out because they no longer delay anything; ties go to the chain that starts
        at, and then runs through, the earliest-created nodes (:func:`latte_lab.graph.dag.critical_path`). O(V + E).
        """
        return dag.critical_path({n.id: list(n.deps) for n in self._nodes.values() if not is_finished(n.status)})

    # ------------------------------------------------------------------ internal state changes

    def _add_ready(self, n: Node) -> None:
        if n.seq < self._ready_max:
            self._ready_sorted = False
        else:
            self._ready_max = n.seq
        self._ready[n.id] = n.seq
        self._frontier_cache = None

    def _remove_ready(self, n: Node) -> None:
        if self._ready.pop(n.id, None) is not None:
            self._frontier_cache = None
            if not self._ready:
                self._ready_max = -1
                self._ready_sorted = True

    def _transition(self, n: Node, status: Status, agent: str | None) -> None:
        """Move ``n`` to (status, agent), keeping counts, the owner index and the frontier in step.

        Every Claim and Complete passes here, so the status tests are written out rather than calling
        ``_active``/``_finished``."""
        old_status, old_agent = n.status, n.agent
        owned = self._owned
        if (old_status is ASSIGNED or old_status is IN_PROGRESS) and old_agent is not None:
            held = owned[old_agent]
            del held[n.id]
            if not held:
                del owned[old_agent]
        if status is ASSIGNED or status is IN_PROGRESS:
            held = owned.get(agent)  # type: ignore[arg-type]
            if held is None:
                owned[agent] = {n.id: None}  # type: ignore[index]
            else:
                held[n.id] = None
        counts = self._counts
        counts[old_status] -= 1
        counts[status] += 1
        n.status, n.agent = status, agent
        if n.unfinished == 0:
            if old_status is PENDING:
                if status is not PENDING:
                    self._remove_ready(n)
            elif status is PENDING:
                self._add_ready(n)
        # No operator un-finishes a node, so only the finishing direction needs successor updates.
        if (status is DONE or status is VERIFIED) and old_status is not DONE and old_status is not VERIFIED:
            for s in n.succ:
                s.unfinished -= 1
                if s.unfinished == 0 and s.status is PENDING:
                    self._add_ready(s)

    def _op_node(self, op: str, node_id: str) -> Node:
        n = self._nodes.get(node_id) if type(node_id) is str or isinstance(node_id, str) else None
        if n is None:
            raise OperatorError(op, node_id if isinstance(node_id, str) else repr(node_id),
                                f"no such node (the graph has {len(self._nodes)} nodes); discover it first")
        return n

    def _require_lead(self, op: str, node_id: str, by: str) -> None:
        if self._check_callers and by != self.lead:
            raise OperatorError(op, node_id, f"only the Lead ({self.lead!r}) may {op}; the caller was {by!r}")

    @staticmethod
    def _require_name(op: str, node_id: str, by: str) -> None:
        if not isinstance(by, str) or not by:
            raise OperatorError(op, node_id, f"the caller must be a non-empty agent name, got {by!r}")

    def _require_worker(self, op: str, node_id: str, agent: str) -> None:
        if not isinstance(agent, str) or not agent:
            raise OperatorError(op, node_id, f"the worker must be a non-empty agent name, got {agent!r}")
        if self._check_callers and (agent == self.lead or agent == SYSTEM_AGENT):
            raise OperatorError(op, node_id, f"{agent!r} is not a worker; only workers may {op}")

    # ------------------------------------------------------------------ the seven operators

    def discover(self, node_id: str, deps: Iterable[str] = (), title: str = "", description: str = "",
                 by: str = LEAD, *, on_unknown_dep: str | None = None) -> None:
        """Discover(v, deps): add pending node ``node_id`` with edges from each dependency.

        Callable by anyone (Lead, workers, ``"System"``). Rejects an existing id, unknown dependencies
        (unless ``on_unknown_dep="drop"``) and anything that would close a cycle. Repeated deps count once.
        """
        op = "discover"
        nodes = self._nodes
        if type(deps) is not list and type(deps) is not tuple:
            if isinstance(deps, str):
                raise OperatorError(op, node_id if isinstance(node_id, str) else None,
                                    f"deps must be a list of ids, not the string {deps!r}")
            deps = list(deps)
        if not (type(node_id) is str and node_id not in nodes and type(title) is str
                and type(description) is str and type(by) is str and by and node_id.strip()):
            self._discover_arguments(node_id, title, description, by)
        policy = self.on_unknown_dep if on_unknown_dep is None else on_unknown_dep
        if policy not in UNKNOWN_DEP_POLICIES:
            raise OperatorError(op, node_id, f"on_unknown_dep must be one of {UNKNOWN_DEP_POLICIES}")
        kept: list[Node] = []
        dropped: tuple[str, ...] = ()
        # A repeated id counts once; a set only pays off beyond a handful of dependencies.
        seen: set[str] | None = set() if len(deps) > DEDUPE_BY_SET_ABOVE else None
        for d in deps:
            if type(d) is not str and not isinstance(d, str):
                raise OperatorError(op, node_id, f"dependency ids must be strings, got {d!r}")
            dn = nodes.get(d)
            if dn is None:
                if d == node_id:
                    raise OperatorError(op, node_id, "a node cannot depend on itself (that is a cycle)")
                if d in dropped:
                    continue
                if policy == "reject":
                    raise OperatorError(op, node_id, f"unknown dependency {d!r}; discover it first or drop it")
                dropped += (d,)
            elif seen is None:
                if dn not in kept:
                    kept.append(dn)
            elif d not in seen:
                seen.add(d)
                kept.append(dn)
        # A new node has no successors, so edges into it cannot close a cycle: no search is needed. The
        # self-dependency check above is the only way a Discover could close one, and it is rejected.
        # Stored as a tuple of strings (the node's deps and the log entry share it): the garbage collector
        # then stops tracking it, and building a large graph spends much of its time in that collector.
        dep_ids = tuple(deps) if len(kept) == len(deps) else tuple(d.id for d in kept)
        seq = len(nodes)
        n = new_node(node_id, title, description, dep_ids, by, seq)
        nodes[node_id] = n
        self._counts[PENDING] += 1
        unfinished = 0
        for d in kept:
            d.succ.append(n)
            if d.status is not DONE and d.status is not VERIFIED:
                unfinished += 1
        if unfinished:
            n.unfinished = unfinished
        else:
            self._add_ready(n)
        self._log.append((node_id, dep_ids, title, description, by, dropped))

    def _discover_arguments(self, node_id: Any, title: Any, description: Any, by: Any) -> None:
        """Raises the OperatorError that explains what is wrong with Discover's arguments."""
        op = "discover"
        if not isinstance(node_id, str) or not node_id.strip():
            raise OperatorError(op, None, f"the node id must be a non-empty string, got {node_id!r}")
        if node_id in self._nodes:
            raise OperatorError(op, node_id, "a node with this id already exists; pick a new id")
        if not isinstance(title, str) or not isinstance(description, str):
            raise OperatorError(op, node_id, "title and description must be strings")
        self._require_name(op, node_id, by)

    def assign(self, node_id: str, agent: str, by: str = LEAD) -> None:
        """Assign(v, w): give pending ``node_id`` to ``agent`` (status assigned).

        Lead-only under the paper's rules. Dependencies need not be finished (the released code does
        not check them; the log entry records ``deps_done``); the worker then claims it once they are.
        """
        op = "assign"
        n = self._op_node(op, node_id)
        self._require_name(op, node_id, by)
        if self._paper:
            self._require_lead(op, node_id, by)
        if not isinstance(agent, str) or not agent:
            raise OperatorError(op, node_id, f"the assignee must be a non-empty agent name, got {agent!r}")
        if self._paper and self._check_callers and agent in (self.lead, SYSTEM_AGENT):
            raise OperatorError(op, node_id, f"{agent!r} is not a worker; assign the node to a worker")
        if self._paper and self._check_callers and self.workers is not None and agent not in self.workers:
            raise OperatorError(op, node_id, f"{agent!r} is not a worker of this team; workers: "
                                             f"{', '.join(self.workers)}")
        if n.status is not PENDING:
            raise OperatorError(op, node_id, f"status is {n.status.value}; Assign needs pending "
                                             "(release it first to reassign)")
        n.assigned_by = by
        self._transition(n, ASSIGNED, agent)
        self._log.append({"op": op, "node": node_id, "agent": agent, "by": by, "deps_done": n.unfinished == 0})

    def claim(self, node_id: str, agent: str) -> None:
        """Claim(v) by worker ``agent``: dependencies finished and (pending and free, or assigned to it)."""
        op = "claim"
        n = self._op_node(op, node_id)
        self._require_worker(op, node_id, agent)
        if n.status is PENDING:
            pass
        elif n.status is ASSIGNED:
            if n.agent != agent:
                raise OperatorError(op, node_id, f"assigned to {n.agent!r}, not {agent!r}")
        else:
            owner = f" by {n.agent!r}" if n.agent else ""
            raise OperatorError(op, node_id, f"status is {n.status.value}{owner}; only pending or "
                                             "assigned-to-you nodes can be claimed")
        if n.unfinished:
            waiting = [d for d in n.deps if not is_finished(self._nodes[d].status)]
            raise OperatorError(op, node_id, f"dependencies not finished: {', '.join(waiting)}")
        self._transition(n, IN_PROGRESS, agent)
        self._log.append((op, node_id, agent))

    def complete(self, node_id: str, agent: str) -> None:
        """Complete(v) by its owner: in_progress -> done (official rules also accept assigned).

        Completing a verify node marks its target verified (paper rules, when the target is done).
        """
        op = "complete"
        n = self._op_node(op, node_id)
        self._require_worker(op, node_id, agent)
        if n.status is IN_PROGRESS or (not self._paper and n.status is ASSIGNED):
            if n.agent != agent:
                raise OperatorError(op, node_id, f"owned by {n.agent!r}, not {agent!r}")
        else:
            need = "in_progress" if self._paper else "assigned or in_progress"
            raise OperatorError(op, node_id, f"status is {n.status.value}; Complete needs {need} "
                                             "(claim it first)")
        n.completed_by = agent
        self._transition(n, DONE, agent)
        if n.is_verify:
            entry: dict[str, Any] = {"op": op, "node": node_id, "agent": agent}
            self._mark_verified(n, entry)
            self._log.append(entry)
        else:
            self._log.append((op, node_id, agent))

    def _mark_verified(self, n: Node, entry: dict[str, Any]) -> None:
        """A finished verify node makes its done target verified (paper rules; the released code has no
        verified status). ``roles``, not the precondition set: a replayed paper log must do the same."""
        if self.roles == "paper" and n.is_verify and n.verify_of is not None:
            target = self._nodes[n.verify_of]
            if target.status is DONE:
                self._transition(target, VERIFIED, target.agent)
                entry["verified"] = target.id

    def release(self, node_id: str, by: str = LEAD) -> None:
        """Release(v): return an assigned/in_progress node to pending with no owner (Lead-only, paper)."""
        op = "release"
        n = self._op_node(op, node_id)
        self._require_name(op, node_id, by)
        if self._paper:
            self._require_lead(op, node_id, by)
        if not is_active(n.status):
            raise OperatorError(op, node_id, f"status is {n.status.value}; Release needs assigned or in_progress")
        prev_agent, prev_status = n.agent, n.status.value
        n.assigned_by = None
        self._transition(n, PENDING, None)
        self._log.append({"op": op, "node": node_id, "by": by, "prev_agent": prev_agent,
                          "prev_status": prev_status})

    def close(self, node_id: str, by: str = LEAD) -> None:
        """Close(v): the Lead force-completes an assigned/in_progress node (official: any unfinished one).

        Closing a verify node marks its target verified, as completing it does.
        """
        op = "close"
        n = self._op_node(op, node_id)
        self._require_lead(op, node_id, by)
        if self._paper and not is_active(n.status):
            raise OperatorError(op, node_id, f"status is {n.status.value}; Close needs assigned or in_progress")
        if is_finished(n.status):
            raise OperatorError(op, node_id, f"status is {n.status.value}; the node is already finished")
        prev_agent, prev_status = n.agent, n.status.value
        n.completed_by = by
        n.closed = True
        self._transition(n, DONE, n.agent)
        entry = {"op": op, "node": node_id, "by": by, "prev_agent": prev_agent, "prev_status": prev_status}
        self._mark_verified(n, entry)
        self._log.append(entry)

    def verify(self, node_id: str, by: str = LEAD, *, reroute: str | None = None) -> str:
        """Verify(v): add pending node ``<v>-verify`` after v, and in front of v's successors per ``reroute``.

        ``"unstarted"`` (default of the graph's ``verify_reroute``): successors that are pending or
        assigned get an edge from the verify node, so they wait for the review; started or finished ones
        are left alone. ``"all"``: every successor gets the edge. ``"none"``: no successor does. Returns
        the verify node's id.
        """
        op = "verify"
        mode = self.verify_reroute if reroute is None else reroute
        if mode not in VERIFY_REROUTES:
            raise OperatorError(op, node_id, f"reroute must be one of {VERIFY_REROUTES}, got {mode!r}")
        n = self._op_node(op, node_id)
        if self._paper:
            self._require_lead(op, node_id, by)
            if n.status is not DONE:
                raise OperatorError(op, node_id, f"status is {n.status.value}; Verify needs done")
        self._require_name(op, node_id, by)
        vid = node_id + VERIFY_SUFFIX
        if vid in self._nodes:
            raise OperatorError(op, node_id, f"node {vid!r} already exists; the node was verified before")
        if mode == "unstarted":
            reroute = [s for s in n.succ if s.status is PENDING or s.status is ASSIGNED]
        else:
            reroute = list(n.succ) if mode == "all" else []
        description = (f"Review the work of task {node_id!r} ({n.title}): check correctness, edge cases "
                       f"and what downstream tasks expect; fix problems or broadcast them, then complete "
                       f"{vid!r}.")
        v = new_node(vid, f"Verify: {n.title}", description, (node_id,), by, len(self._nodes), True, node_id)
        self._nodes[vid] = v
        self._counts[PENDING] += 1
        n.succ.append(v)
        if not is_finished(n.status):
            v.unfinished = 1
        else:
            self._add_ready(v)
        for s in reroute:
            v.succ.append(s)
            s.deps = (*s.deps, vid)
            if s.unfinished == 0 and s.status is PENDING:
                self._remove_ready(s)
            s.unfinished += 1
        self._log.append({"op": op, "node": node_id, "by": by, "verify_id": vid, "reroute": mode,
                          "rerouted": [s.id for s in reroute]})
        return vid

    # ------------------------------------------------------------------ as data (bodies in _serial)

    def snapshot(self) -> dict[str, Any]:
        """The whole graph as plain JSON-serialisable data (the log is not included)."""
        return _serial.snapshot(self)

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> CoordinationGraph:
        """Rebuild a graph from :meth:`snapshot` output; the result snapshots to an equal dict.

        The log of the rebuilt graph starts empty. Malformed input raises :class:`~latte_lab.errors.DataError`.
        """
        return _serial.from_snapshot(cls, snapshot)

    def state(self) -> dict[str, Any]:
        """Everything the graph holds (its nodes, its log, the frontier's order) as plain values, for a team's
        state at a round's end; :meth:`from_state` rebuilds the very same graph. Unlike a :meth:`snapshot`, the
        log travels with it, so the graph's history records on from it as from the original."""
        return _serial.state(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> CoordinationGraph:
        """The graph :meth:`state` describes; malformed input raises :class:`~latte_lab.errors.DataError`.

        >>> g = CoordinationGraph()
        >>> g.discover("a", by="Lead"); g.discover("b", ["a"], by="Lead"); g.claim("a", "Dev1")
        >>> h = CoordinationGraph.from_state(g.state())
        >>> h.snapshot() == g.snapshot() and h.log == g.log and h.frontier() == g.frontier()
        True
        """
        return _serial.from_state(cls, state)

    @classmethod
    def from_log(cls, log: Iterable[dict[str, Any]], roles: str = "paper", *, lead: str = LEAD,
                 on_unknown_dep: str = "reject", workers: Iterable[str] | None = None,
                 verify_reroute: str = "unstarted") -> CoordinationGraph:
        """Rebuild a graph by replaying a log of applied operations (``g.log``).

        Replay skips caller permissions and uses the official (looser) preconditions, which accept every
        operation either rule set accepted, so a log from either ``roles`` replays; the rebuilt graph
        then takes the given settings. Pass the original ``lead``: node records keep caller names.
        A log that cannot be replayed raises :class:`~latte_lab.errors.DataError` naming the entry.
        """
        return _serial.from_log(cls, log, roles, lead=lead, on_unknown_dep=on_unknown_dep, workers=workers,
                                verify_reroute=verify_reroute)

    def replay_entry(self, entry: dict[str, Any]) -> None:
        """Applies one entry of another graph's ``log`` to this graph (under this graph's rules), e.g. to
        rebuild intermediate states step by step; ``from_log`` replays a whole log at once."""
        _serial.apply_entry(self, entry)

    def to_networkx(self) -> nx.DiGraph:
        """A networkx DiGraph (edges dep -> node) whose node attributes are the node records."""
        return _serial.to_networkx(self)


def frontier_bruteforce(graph: CoordinationGraph) -> list[str]:
    """The frontier recomputed from scratch in O(V + E): the oracle for the incremental one."""
    nodes = graph._nodes
    return [n.id for n in nodes.values()
            if n.status is PENDING and all(nodes[d].status is DONE or nodes[d].status is VERIFIED for d in n.deps)]
