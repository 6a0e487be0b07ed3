"""The dynamic coordination graph of LATTE: nodes, dependency edges, statuses and the seven operators.

A node is a subtask; an edge ``u -> v`` means v cannot start before u is finished (done or verified).
Every operator checks its preconditions first and only then mutates, so a rejected operator raises
:class:`~latte_lab.errors.OperatorError` and leaves the graph exactly as it was (paper Appendix A3;
the readings where the paper is silent are in ``DESIGN.md``).

The frontier (pending nodes whose dependencies are all finished) is maintained incrementally, so an
operator costs time in proportion to the nodes it touches, not to the size of the graph
(``benchmarks/bench_graph.py``); :func:`frontier_bruteforce` recomputes it from scratch as a test oracle.

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

Beside the graph: :mod:`latte_lab.graph.dag` (free functions over any dependency graph: order, depth, critical
path) and :mod:`latte_lab.graph.history` (the graph at every recorded round, as keyframes and deltas).

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

from latte_lab.graph._core import DEDUPE_BY_SET_ABOVE as DEDUPE_BY_SET_ABOVE  # a tuning constant, not API
from latte_lab.graph._core import (
    ROLES,
    UNKNOWN_DEP_POLICIES,
    VERIFY_REROUTES,
    CoordinationGraph,
    frontier_bruteforce,
)
from latte_lab.graph._nodes import LEAD, SYSTEM_AGENT, VERIFY_SUFFIX, Status, UnknownNodeError
from latte_lab.graph._serial import SNAPSHOT_FORMAT

__all__ = [
    "LEAD",
    "ROLES",
    "SNAPSHOT_FORMAT",
    "SYSTEM_AGENT",
    "UNKNOWN_DEP_POLICIES",
    "VERIFY_REROUTES",
    "VERIFY_SUFFIX",
    "CoordinationGraph",
    "Status",
    "UnknownNodeError",
    "frontier_bruteforce",
]
