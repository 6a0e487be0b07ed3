"""The dynamic coordination graph of LATTE: nodes, dependency edges, statuses and the seven operators.

A node is a subtask; an edge ``u -> v`` means v cannot start before u is finished (done or verified).
Every operator checks its preconditions first and only then mutates, so a rejected operator raises
:class:`~latte_lab.errors.OperatorError` and leaves the graph exactly as it was (paper Appendix A3;
the readings where the paper is silent are in ``DESIGN.md``).

The frontier (pending nodes whose dependencies are all finished) is maintained incrementally: each
node keeps the number of its unfinished dependencies, and the ready nodes live in an insertion-ordered
dict keyed by id. An operator touches only its node and that node's successors, so a Complete costs
O(out-degree) and every other operator O(1) (Verify: O(out-degree of the target)).
``frontier()`` returns the ready ids in creation order: the dict is re-sorted by creation sequence only
when a node became ready out of creation order (rare in practice; O(k log k) for k ready nodes), and the
list is cached until the ready set changes, so an unchanged frontier costs one O(k) copy.
:func:`frontier_bruteforce` recomputes it from scratch and exists only as a test oracle.

Two rule sets (``roles``):

- ``"paper"`` (default): Appendix A3 with caller permissions. Assign/Release/Close/Verify are Lead-only,
  Claim/Complete worker-only, Discover open to everyone (the Lead, workers and ``"System"``).
- ``"official"``: the looser rules of the authors' released code. Anyone may Assign (to any name, a
  worker or not), Release and Verify; Close is Lead-only but also closes pending nodes; Complete accepts
  the owner's node in status assigned as well as in_progress; Verify does not require the target to be
  done; and no node ever becomes verified (the released code has no such status).

Verified (paper rules): when a verify node ``<v>-verify`` finishes, by Complete or by the Lead's Close,
its target v becomes verified if it is done. Verify routes v's successors through the review node
according to ``verify_reroute``: ``"unstarted"`` (pending or assigned successors wait for the review;
the default), ``"all"`` (every successor, the released code) or ``"none"`` (only the edge v -> v-verify,
Appendix A3's literal postcondition).

Owners: Complete and Close keep the last owner in ``agent`` (the paper's lambda(v) <- (w, done)); the
finisher is recorded in ``completed_by`` (and ``closed`` says the Lead force-completed the node).
Invariants: a pending node has no agent; an assigned or in_progress node has one.

>>> g = CoordinationGraph()
>>> g.discover("plan", title="Plan the fix", by="Lead")
>>> g.discover("fix", deps=["plan"], title="Fix rms", by="Lead")
>>> g.frontier()
['plan']
>>> g.claim("plan", "Dev1"); g.complete("plan", "Dev1")
>>> g.frontier()
['fix']
>>> g.verify("plan", by="Lead")    # downstream work that has not started now waits for the review
'plan-verify'
>>> g.frontier(), g.deps("fix")
(['plan-verify'], ['plan', 'plan-verify'])
>>> g.assign("plan-verify", "Dev2", by="Lead"); g.claim("plan-verify", "Dev2")
>>> g.complete("plan-verify", "Dev2")
>>> g.status("plan"), g.frontier()
(<Status.VERIFIED: 'verified'>, ['fix'])
>>> g.close("fix", by="Lead")
Traceback (most recent call last):
...
latte_lab.errors.OperatorError: close on node 'fix' rejected: status is pending; Close needs assigned or in_progress
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from enum import Enum
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from latte_lab import dag
from latte_lab.errors import DataError, LatteError, OperatorError

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

__all__ = [
    "ROLES",
    "SYSTEM_AGENT",
    "VERIFY_SUFFIX",
    "CoordinationGraph",
    "Status",
    "UnknownNodeError",
    "frontier_bruteforce",
]

ROLES = ("paper", "official")  # rule sets: the paper's Appendix A3, or the released code's looser rules
UNKNOWN_DEP_POLICIES = ("reject", "drop")  # Discover: reject unknown deps (paper), or drop them (released)
VERIFY_REROUTES = ("unstarted", "all", "none")  # which successors of v wait for v's review (module docstring)
LEAD = "Lead"  # the Lead's agent name everywhere: teams, events, metrics, schedulers
SYSTEM_AGENT = "System"  # the orchestrator's own name; it may Discover (fix-task injection) and nothing else
VERIFY_SUFFIX = "-verify"  # Verify(v) adds node f"{v}{VERIFY_SUFFIX}", as in the released code
SNAPSHOT_FORMAT = 1  # bumped when the snapshot layout changes, so old run directories are detected
DEDUPE_BY_SET_ABOVE = 8  # Discover finds repeated deps by scanning the kept list up to this many deps


class Status(str, Enum):
    """A node's status; a ``str`` so ``g.status("t1") == "pending"`` holds and JSON stays plain."""

    PENDING = "pending"
    ASSIGNED = "assigned"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    VERIFIED = "verified"

    def __str__(self) -> str:
        return self.value


# Module-level aliases: the hot paths compare enum members by identity.
_PENDING = Status.PENDING
_ASSIGNED = Status.ASSIGNED
_IN_PROGRESS = Status.IN_PROGRESS
_DONE = Status.DONE
_VERIFIED = Status.VERIFIED
_STATUS_BY_VALUE = {s.value: s for s in Status}


class UnknownNodeError(LatteError, KeyError):
    """A query named a node the graph does not hold."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def _finished(status: Status) -> bool:
    return status is _DONE or status is _VERIFIED


def _active(status: Status) -> bool:
    return status is _ASSIGNED or status is _IN_PROGRESS


class _Node:
    """Mutable per-node state, made by :func:`_new_node`; never handed out (callers get plain dicts from
    ``node()``)."""

    __slots__ = (
        "agent",
        "assigned_by",
        "closed",
        "completed_by",
        "created_by",
        "deps",
        "description",
        "id",
        "is_verify",
        "seq",
        "status",
        "succ",
        "title",
        "unfinished",
        "verify_of",
    )

    def record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "status": self.status.value,
            "agent": self.agent,
            "deps": [d.id for d in self.deps],
            "successors": [s.id for s in self.succ],
            "is_verify": self.is_verify,
            "verify_of": self.verify_of,
            "created_by": self.created_by,
            "created_seq": self.seq,
            "assigned_by": self.assigned_by,
            "completed_by": self.completed_by,
            "closed": self.closed,
        }


_new_node_object = object.__new__


def _new_node(node_id: str, title: str, description: str, deps: list[_Node], created_by: str, seq: int,
              is_verify: bool = False, verify_of: str | None = None) -> _Node:
    """A pending node with no owner. A plain function rather than ``_Node.__init__``: building a graph of
    10^5 nodes spends a sixth of its time here, and skipping the class call saves a fifth of that."""
    n = _new_node_object(_Node)
    n.id = node_id
    n.title = title
    n.description = description
    n.status = _PENDING
    n.agent = None
    n.deps = deps  # predecessor nodes in edge-insertion order
    n.succ = []  # successor nodes, always in creation order
    n.is_verify = is_verify
    n.verify_of = verify_of
    n.created_by = created_by
    n.seq = seq
    n.assigned_by = None
    n.completed_by = None
    n.closed = False
    n.unfinished = 0  # dependencies not yet done/verified
    return n


def _discover_entry(e: tuple) -> dict[str, Any]:
    """The log entry of a Discover, stored as ``(node, deps, title, description, by, dropped)``."""
    entry = {"op": "discover", "node": e[0], "deps": list(e[1]), "title": e[2], "description": e[3], "by": e[4]}
    if e[5]:
        entry["dropped_deps"] = list(e[5])
    return entry


_RECORD_KEYS = frozenset(
    ("id", "title", "description", "status", "agent", "deps", "successors", "is_verify", "verify_of",
     "created_by", "created_seq", "assigned_by", "completed_by", "closed"))


class CoordinationGraph:
    """The shared task graph of a team (a DAG), with the seven operators of LATTE.

    Parameters
    ----------
    roles:
        ``"paper"`` enforces the paper's caller permissions and preconditions; ``"official"`` reproduces
        the released code's looser rules (see the module docstring).
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
        Which successors of v Verify(v) puts behind the review node (module docstring); each ``verify``
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
            raise LatteError("lead must be a non-empty agent name such as 'Lead'")
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
        self._nodes: dict[str, _Node] = {}
        self._log: list[dict[str, Any] | tuple] = []  # Discover's entries are tuples (_discover_entry)
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
        return [dict(e) if type(e) is dict else _discover_entry(e) for e in self._log[start:]]

    def nodes(self) -> list[str]:
        """All node ids in creation order."""
        return list(self._nodes)

    def _get(self, node_id: str) -> _Node:
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
        return [d.id for d in self._get(node_id).deps]

    def successors(self, node_id: str) -> list[str]:
        """Direct successors in creation order."""
        return [s.id for s in self._get(node_id).succ]

    def counts(self) -> dict[str, int]:
        """Number of nodes per status, every status present (O(1): kept up to date by the operators)."""
        return {s.value: n for s, n in self._counts.items()}

    def all_done(self) -> bool:
        """True when every node is done or verified. An empty graph is not done: nothing was planned."""
        return bool(self._nodes) and self._counts[_DONE] + self._counts[_VERIFIED] == len(self._nodes)

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
        at, and then runs through, the earliest-created nodes (:func:`latte_lab.dag.critical_path`). O(V + E).
        """
        return dag.critical_path({n.id: [d.id for d in n.deps] for n in self._nodes.values() if not _finished(n.status)})

    # ------------------------------------------------------------------ internal state changes

    def _add_ready(self, n: _Node) -> None:
        if n.seq < self._ready_max:
            self._ready_sorted = False
        else:
            self._ready_max = n.seq
        self._ready[n.id] = n.seq
        self._frontier_cache = None

    def _remove_ready(self, n: _Node) -> None:
        if self._ready.pop(n.id, None) is not None:
            self._frontier_cache = None
            if not self._ready:
                self._ready_max = -1
                self._ready_sorted = True

    def _transition(self, n: _Node, status: Status, agent: str | None) -> None:
        """Move ``n`` to (status, agent), keeping counts, the owner index and the frontier in step.

        Every Claim and Complete passes here, so the status tests are written out rather than calling
        ``_active``/``_finished``."""
        old_status, old_agent = n.status, n.agent
        owned = self._owned
        if (old_status is _ASSIGNED or old_status is _IN_PROGRESS) and old_agent is not None:
            held = owned[old_agent]
            del held[n.id]
            if not held:
                del owned[old_agent]
        if status is _ASSIGNED or status is _IN_PROGRESS:
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
            if old_status is _PENDING:
                if status is not _PENDING:
                    self._remove_ready(n)
            elif status is _PENDING:
                self._add_ready(n)
        # No operator un-finishes a node, so only the finishing direction needs successor updates.
        if (status is _DONE or status is _VERIFIED) and old_status is not _DONE and old_status is not _VERIFIED:
            for s in n.succ:
                s.unfinished -= 1
                if s.unfinished == 0 and s.status is _PENDING:
                    self._add_ready(s)

    def _op_node(self, op: str, node_id: str) -> _Node:
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
                 by: str = "Lead", *, on_unknown_dep: str | None = None) -> None:
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
        kept: list[_Node] = []
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
        seq = len(nodes)
        n = _new_node(node_id, title, description, kept, by, seq)
        nodes[node_id] = n
        self._counts[_PENDING] += 1
        unfinished = 0
        for d in kept:
            d.succ.append(n)
            if d.status is not _DONE and d.status is not _VERIFIED:
                unfinished += 1
        if unfinished:
            n.unfinished = unfinished
        else:
            self._add_ready(n)
        # Stored as a tuple of strings, made a dict when read (log_since): the garbage collector then
        # stops tracking it, and building a large graph spends half its time in that collector.
        dep_ids = tuple(deps) if len(kept) == len(deps) else tuple(d.id for d in kept)
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

    def assign(self, node_id: str, agent: str, by: str = "Lead") -> None:
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
        if n.status is not _PENDING:
            raise OperatorError(op, node_id, f"status is {n.status.value}; Assign needs pending "
                                             "(release it first to reassign)")
        n.assigned_by = by
        self._transition(n, _ASSIGNED, agent)
        self._log.append({"op": op, "node": node_id, "agent": agent, "by": by, "deps_done": n.unfinished == 0})

    def claim(self, node_id: str, agent: str) -> None:
        """Claim(v) by worker ``agent``: dependencies finished and (pending and free, or assigned to it)."""
        op = "claim"
        n = self._op_node(op, node_id)
        self._require_worker(op, node_id, agent)
        if n.status is _PENDING:
            pass
        elif n.status is _ASSIGNED:
            if n.agent != agent:
                raise OperatorError(op, node_id, f"assigned to {n.agent!r}, not {agent!r}")
        else:
            owner = f" by {n.agent!r}" if n.agent else ""
            raise OperatorError(op, node_id, f"status is {n.status.value}{owner}; only pending or "
                                             "assigned-to-you nodes can be claimed")
        if n.unfinished:
            waiting = [d.id for d in n.deps if not _finished(d.status)]
            raise OperatorError(op, node_id, f"dependencies not finished: {', '.join(waiting)}")
        self._transition(n, _IN_PROGRESS, agent)
        self._log.append({"op": op, "node": node_id, "agent": agent})

    def complete(self, node_id: str, agent: str) -> None:
        """Complete(v) by its owner: in_progress -> done (official rules also accept assigned).

        Completing a verify node marks its target verified (paper rules, when the target is done).
        """
        op = "complete"
        n = self._op_node(op, node_id)
        self._require_worker(op, node_id, agent)
        if n.status is _IN_PROGRESS or (not self._paper and n.status is _ASSIGNED):
            if n.agent != agent:
                raise OperatorError(op, node_id, f"owned by {n.agent!r}, not {agent!r}")
        else:
            need = "in_progress" if self._paper else "assigned or in_progress"
            raise OperatorError(op, node_id, f"status is {n.status.value}; Complete needs {need} "
                                             "(claim it first)")
        n.completed_by = agent
        self._transition(n, _DONE, agent)
        entry: dict[str, Any] = {"op": op, "node": node_id, "agent": agent}
        self._mark_verified(n, entry)
        self._log.append(entry)

    def _mark_verified(self, n: _Node, entry: dict[str, Any]) -> None:
        """A finished verify node makes its done target verified (paper rules; the released code has no
        verified status). ``roles``, not the precondition set: a replayed paper log must do the same."""
        if self.roles == "paper" and n.is_verify and n.verify_of is not None:
            target = self._nodes[n.verify_of]
            if target.status is _DONE:
                self._transition(target, _VERIFIED, target.agent)
                entry["verified"] = target.id

    def release(self, node_id: str, by: str = "Lead") -> None:
        """Release(v): return an assigned/in_progress node to pending with no owner (Lead-only, paper)."""
        op = "release"
        n = self._op_node(op, node_id)
        self._require_name(op, node_id, by)
        if self._paper:
            self._require_lead(op, node_id, by)
        if not _active(n.status):
            raise OperatorError(op, node_id, f"status is {n.status.value}; Release needs assigned or in_progress")
        prev_agent, prev_status = n.agent, n.status.value
        n.assigned_by = None
        self._transition(n, _PENDING, None)
        self._log.append({"op": op, "node": node_id, "by": by, "prev_agent": prev_agent,
                          "prev_status": prev_status})

    def close(self, node_id: str, by: str = "Lead") -> None:
        """Close(v): the Lead force-completes an assigned/in_progress node (official: any unfinished one).

        Closing a verify node marks its target verified, as completing it does.
        """
        op = "close"
        n = self._op_node(op, node_id)
        self._require_lead(op, node_id, by)
        if self._paper and not _active(n.status):
            raise OperatorError(op, node_id, f"status is {n.status.value}; Close needs assigned or in_progress")
        if _finished(n.status):
            raise OperatorError(op, node_id, f"status is {n.status.value}; the node is already finished")
        prev_agent, prev_status = n.agent, n.status.value
        n.completed_by = by
        n.closed = True
        self._transition(n, _DONE, n.agent)
        entry = {"op": op, "node": node_id, "by": by, "prev_agent": prev_agent, "prev_status": prev_status}
        self._mark_verified(n, entry)
        self._log.append(entry)

    def verify(self, node_id: str, by: str = "Lead", *, reroute: str | None = None) -> str:
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
            if n.status is not _DONE:
                raise OperatorError(op, node_id, f"status is {n.status.value}; Verify needs done")
        self._require_name(op, node_id, by)
        vid = node_id + VERIFY_SUFFIX
        if vid in self._nodes:
            raise OperatorError(op, node_id, f"node {vid!r} already exists; the node was verified before")
        if mode == "unstarted":
            reroute = [s for s in n.succ if s.status is _PENDING or s.status is _ASSIGNED]
        else:
            reroute = list(n.succ) if mode == "all" else []
        description = (f"Review the work of task {node_id!r} ({n.title}): check correctness, edge cases "
                       f"and what downstream tasks expect; fix problems or broadcast them, then complete "
                       f"{vid!r}.")
        v = _new_node(vid, f"Verify: {n.title}", description, [n], by, len(self._nodes), True, node_id)
        self._nodes[vid] = v
        self._counts[_PENDING] += 1
        n.succ.append(v)
        if not _finished(n.status):
            v.unfinished = 1
        else:
            self._add_ready(v)
        for s in reroute:
            v.succ.append(s)
            s.deps.append(v)
            if s.unfinished == 0 and s.status is _PENDING:
                self._remove_ready(s)
            s.unfinished += 1
        self._log.append({"op": op, "node": node_id, "by": by, "verify_id": vid, "reroute": mode,
                          "rerouted": [s.id for s in reroute]})
        return vid

    # ------------------------------------------------------------------ serialisation

    def snapshot(self) -> dict[str, Any]:
        """The whole graph as plain JSON-serialisable data (the log is not included)."""
        return {
            "format": SNAPSHOT_FORMAT,
            "roles": self.roles,
            "lead": self.lead,
            "on_unknown_dep": self.on_unknown_dep,
            "workers": list(self.workers) if self.workers is not None else None,
            "verify_reroute": self.verify_reroute,
            "nodes": [n.record() for n in self._nodes.values()],
        }

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> CoordinationGraph:
        """Rebuild a graph from :meth:`snapshot` output; the result snapshots to an equal dict.

        The log of the rebuilt graph starts empty. Malformed input raises :class:`DataError`.
        """
        def bad(why: str) -> DataError:
            return DataError(f"graph snapshot is malformed: {why}; pass the dict CoordinationGraph.snapshot() made")

        if not isinstance(snapshot, dict) or not isinstance(snapshot.get("nodes"), list):
            raise bad("expected a dict with a 'nodes' list")
        if snapshot.get("format", SNAPSHOT_FORMAT) != SNAPSHOT_FORMAT:
            raise bad(f"format {snapshot.get('format')!r}, this version reads {SNAPSHOT_FORMAT}")
        try:
            g = cls(snapshot.get("roles", "paper"), lead=snapshot.get("lead", "Lead"),
                    on_unknown_dep=snapshot.get("on_unknown_dep", "reject"), workers=snapshot.get("workers"),
                    verify_reroute=snapshot.get("verify_reroute", "unstarted"))
        except LatteError as exc:
            raise bad(str(exc)) from None
        records = snapshot["nodes"]
        for i, r in enumerate(records):
            if not isinstance(r, dict) or not isinstance(r.get("id"), str) or not r["id"]:
                raise bad(f"node #{i} has no string id")
            missing = _RECORD_KEYS - r.keys()
            if missing:
                raise bad(f"node {r['id']!r} lacks {sorted(missing)}")
            if r["id"] in g._nodes:
                raise bad(f"node id {r['id']!r} appears twice")
            if r["created_seq"] != i:
                raise bad(f"node {r['id']!r} has created_seq {r['created_seq']!r} at position {i}")
            status = _STATUS_BY_VALUE.get(r["status"])
            if status is None:
                raise bad(f"node {r['id']!r} has unknown status {r['status']!r}")
            agent = r["agent"]
            if status is _PENDING and agent is not None:
                raise bad(f"pending node {r['id']!r} has agent {agent!r}")
            if _active(status) and not (isinstance(agent, str) and agent):
                raise bad(f"{status.value} node {r['id']!r} has no agent")
            n = _new_node(r["id"], str(r["title"]), str(r["description"]), [], r["created_by"], i,
                      bool(r["is_verify"]), r["verify_of"])
            n.status, n.agent = status, agent
            n.assigned_by, n.completed_by, n.closed = r["assigned_by"], r["completed_by"], bool(r["closed"])
            g._nodes[n.id] = n
        for r in records:
            n = g._nodes[r["id"]]
            if not isinstance(r["deps"], list):
                raise bad(f"node {n.id!r} deps is not a list")
            for d in r["deps"]:
                dn = g._nodes.get(d)
                if dn is None or dn is n or dn in n.deps:
                    raise bad(f"node {n.id!r} has unknown, self or repeated dependency {d!r}")
                n.deps.append(dn)
                dn.succ.append(n)
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
            n.unfinished = sum(1 for d in n.deps if not _finished(d.status))
            if _active(n.status):
                g._owned.setdefault(n.agent, {})[n.id] = None  # type: ignore[arg-type]
            if n.status is _PENDING and n.unfinished == 0:
                g._add_ready(n)
        return g

    @classmethod
    def from_log(cls, log: Iterable[dict[str, Any]], roles: str = "paper", *, lead: str = "Lead",
                 on_unknown_dep: str = "reject", workers: Iterable[str] | None = None,
                 verify_reroute: str = "unstarted") -> CoordinationGraph:
        """Rebuild a graph by replaying a log of applied operations (``g.log``).

        Replay skips caller permissions and uses the official (looser) preconditions, which accept every
        operation either rule set accepted, so a log from either ``roles`` replays; the rebuilt graph
        then takes the given settings. Pass the original ``lead``: node records keep caller names.
        """
        g = cls(roles, lead=lead, on_unknown_dep=on_unknown_dep, workers=workers, verify_reroute=verify_reroute)
        g._paper, g._check_callers = False, False
        entries = [dict(e) for e in log]
        try:
            for i, e in enumerate(entries):
                try:
                    g._replay(e)
                except (KeyError, TypeError) as exc:
                    raise DataError(f"log entry #{i} {e!r} is malformed ({exc!r})") from None
                except OperatorError as exc:
                    raise DataError(f"log entry #{i} cannot be replayed: {exc}") from None
        finally:
            g._paper, g._check_callers = roles == "paper", True
        g._log = entries
        return g

    def replay_entry(self, entry: dict[str, Any]) -> None:
        """Applies one entry of another graph's ``log`` to this graph (under this graph's rules), e.g. to
        rebuild intermediate states step by step; ``from_log`` replays a whole log at once."""
        self._replay(entry)

    def _replay(self, e: dict[str, Any]) -> None:
        op = e["op"]
        if op == "discover":
            self.discover(e["node"], e["deps"], e.get("title", ""), e.get("description", ""), e["by"],
                          on_unknown_dep="reject")
        elif op == "assign":
            self.assign(e["node"], e["agent"], e["by"])
        elif op == "claim":
            self.claim(e["node"], e["agent"])
        elif op == "complete":
            self.complete(e["node"], e["agent"])
        elif op == "release":
            self.release(e["node"], e["by"])
        elif op == "close":
            self.close(e["node"], e["by"])
        elif op == "verify":
            self.verify(e["node"], e["by"], reroute=e.get("reroute", "unstarted"))
        else:
            raise DataError(f"unknown operation {op!r} in the log")

    def to_networkx(self) -> nx.DiGraph:
        """A networkx DiGraph (edges dep -> node) whose node attributes are the node records."""
        import networkx as nx

        G = nx.DiGraph()
        for n in self._nodes.values():
            attrs = n.record()
            del attrs["id"], attrs["deps"], attrs["successors"]
            G.add_node(n.id, **attrs)
        for n in self._nodes.values():
            for d in n.deps:
                G.add_edge(d.id, n.id)
        return G


def frontier_bruteforce(graph: CoordinationGraph) -> list[str]:
    """The frontier recomputed from scratch in O(V + E): the oracle for the incremental one."""
    return [n.id for n in graph._nodes.values()
            if n.status is _PENDING and all(d.status is _DONE or d.status is _VERIFIED for d in n.deps)]
