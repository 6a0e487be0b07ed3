"""The coordination graph's vocabulary: its statuses, the agent names it knows, and the state of one node.

:class:`Status` and the names here are re-exported by :mod:`latte_lab.graph`; import them from there.
``Node`` is the graph's mutable per-node state and never leaves the package (callers get the plain-dict
records that ``Node.record`` makes).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from latte_lab.errors import LatteError

LEAD = "Lead"  # the Lead's agent name everywhere: teams, events, metrics, schedulers
SYSTEM_AGENT = "System"  # the orchestrator's own name; it may Discover (fix-task injection) and nothing else
VERIFY_SUFFIX = "-verify"  # Verify(v) adds node f"{v}{VERIFY_SUFFIX}", as in the released code


class Status(str, Enum):
    """A node's status; a ``str`` so ``g.status("t1") == "pending"`` holds and JSON stays plain."""

    PENDING = "pending"
    ASSIGNED = "assigned"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    VERIFIED = "verified"

    def __str__(self) -> str:
        return self.value


# Module-level names: the hot paths compare enum members by identity.
PENDING = Status.PENDING
ASSIGNED = Status.ASSIGNED
IN_PROGRESS = Status.IN_PROGRESS
DONE = Status.DONE
VERIFIED = Status.VERIFIED
STATUS_BY_VALUE = {s.value: s for s in Status}


class UnknownNodeError(LatteError, KeyError):
    """A query named a node the graph does not hold."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def is_finished(status: Status) -> bool:
    return status is DONE or status is VERIFIED


def is_active(status: Status) -> bool:
    return status is ASSIGNED or status is IN_PROGRESS


RECORD_KEYS = frozenset(
    ("id", "title", "description", "status", "agent", "deps", "successors", "is_verify", "verify_of",
     "created_by", "created_seq", "assigned_by", "completed_by", "closed"))  # the fields of a node record


class Node:
    """Mutable per-node state, made by :func:`new_node`; never handed out (callers get the plain dicts that
    :meth:`record` makes)."""

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
            "deps": list(self.deps),
            "successors": [s.id for s in self.succ],
            "is_verify": self.is_verify,
            "verify_of": self.verify_of,
            "created_by": self.created_by,
            "created_seq": self.seq,
            "assigned_by": self.assigned_by,
            "completed_by": self.completed_by,
            "closed": self.closed,
        }


_new_object = object.__new__


def new_node(node_id: str, title: str, description: str, deps: tuple[str, ...], created_by: str, seq: int,
              is_verify: bool = False, verify_of: str | None = None) -> Node:
    """A pending node with no owner. A plain function rather than ``Node.__init__``: building a graph of
    10^5 nodes spends a sixth of its time here, and skipping the class call saves a fifth of that."""
    n = _new_object(Node)
    n.id = node_id
    n.title = title
    n.description = description
    n.status = PENDING
    n.agent = None
    # Predecessor ids in edge-insertion order, a tuple of strings: the garbage collector stops tracking it
    # (a list of nodes was a third of the objects of a large graph, and its full collections rescan them all).
    n.deps = deps
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
