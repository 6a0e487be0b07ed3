"""Per-trial metrics from a trial's event log (pure: no I/O, no clock).

The trial engine calls :func:`trial_metrics` once per trial and stores the dict in result.json and the
trial row (column definitions also in ``latte_lab.schema.TRIAL_COLUMNS``).

Released definitions (reference §7.1-7.2; only successful ``edit_file`` events count as edits):

- ``cross_agent_overwrites``: per file path, edits in log order; adjacent pairs by different agents.
- ``n_concurrent_collisions``: distinct (path, round) edited by >= 2 distinct agents (file x round).
- ``wasted_chars``: for each colliding (path, round), ``n_chars`` of all its edits except the last.
- ``total_code_chars``: sum of ``n_chars`` of all edits.
- ``total_messages``: ``agent_reply`` events of agents other than ``Lead``.
- ``total_message_chars``: characters of those replies, each truncated at 2,000 as the released logger.
- ``dispatched_agent_rounds`` / ``possible_agent_rounds``: sums of ``round_dispatch`` n_dispatched /
  n_total; ``idle_agent_rounds`` = possible - dispatched; ``idle_fraction`` = idle / possible (0 if none).
- ``idle_fraction_released``: the same from the ``*_released`` fields (the released code's figures,
  e.g. 4/5 per round for leader_worker); falls back to n_dispatched/n_total when absent.
- ``total_rounds``: number of ``round_start`` events.

The paper's intended definitions:

- ``function_overwrites``: per (path, symbol) in edit ``symbols``, adjacent edits by different agents.
- ``function_concurrent_writes``: distinct (path, symbol, round) written by >= 2 distinct agents.
- ``discarded_chars``: for each edit, characters of its written lines (``content``) that do not appear
  as a line of the final version of that file (a file absent at the end discards everything);
  NaN without ``final_files``.
- ``n_broadcasts``, ``message_chars``: broadcast events and the characters of their text.
- ``active_agent_rounds``: sum over round_dispatch of the team agents that actually ran
  (``agents``); ``team_agent_rounds``: sum of the team size (``initialize.agents``, else the largest
  n_total); ``inactive_agent_rounds`` = team - active; ``active_fraction`` = active / team.
- ``n_completed_nodes``, ``node_completion_mean_s``, ``node_completion_p95_s``: virtual seconds from a
  node's first claim (when a worker starts it: in_progress) to its first complete/close after that (the
  first claim, so a straggler that is released and re-run counts its whole delay). §5.3's "node
  execution time"; a node closed without ever being claimed has none.
- ``node_completion_from_assign_mean_s``, ``node_completion_from_assign_p95_s``: the same from the
  node's first assign or claim, whichever came first (queueing after an early Assign included: the
  static team assigns every node in round 1).
- ``planning_seconds``: virtual clock at ``planning_phase_end`` (0 without a planning phase).
- ``op_<type>``: count of each operator event type (``OPERATOR_EVENT_TYPES``).
- ``graph_size_initial`` / ``graph_size_final`` / ``graph_size_per_round``: node counts per snapshot
  (round order); NaN / empty without snapshots.
- ``n_parse_errors``, ``heartbeat_alerts``, ``n_verify`` (create_verify_node), ``n_release``
  (release_task), ``fix_tasks`` (fix_task_injected): event counts.
- ``lead_invocations``: rounds (>= 1) whose round_dispatch lists the Lead among the agents that ran;
  ``lead_active_fraction`` = lead_invocations / total_rounds (A6.3's "Lead remains active in ... of
  execution rounds"; NaN without rounds).

>>> ev = [{"type": "edit_file", "agent": "A", "path": "f.py", "round": 1, "n_chars": 5},
...       {"type": "edit_file", "agent": "B", "path": "f.py", "round": 1, "n_chars": 7}]
>>> m = trial_metrics(ev)
>>> m["cross_agent_overwrites"], m["n_concurrent_collisions"], m["wasted_chars"]
(1, 1, 5)
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from latte_lab.events import OPERATOR_EVENT_TYPES, REPLY_LOG_CHARS
from latte_lab.graph import LEAD
from latte_lab.graph.history import GraphHistory

NODE_START_EVENTS = {"claim": ("claim_task",), "assign": ("assign_task", "claim_task")}
NODE_END_EVENTS = ("complete_task", "close_task")

__all__ = [
    "OPERATOR_EVENT_TYPES",
    "node_completion_times",
    "operator_counts",
    "trial_metrics",
]


def _records(events) -> list[dict]:
    if hasattr(events, "to_dict") and hasattr(events, "columns"):  # a pandas DataFrame
        return [{k: v for k, v in r.items() if not _isnan(v)} for r in events.to_dict("records")]
    return list(events)


def _isnan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e.get("type") == kind]


def _adjacent_changes(groups: Mapping) -> int:
    n = 0
    for agents in groups.values():
        n += sum(1 for a, b in itertools.pairwise(agents) if a != b)
    return n


def _percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), without importing numpy."""
    xs = sorted(values)
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def operator_counts(events: Iterable[dict]) -> dict[str, int]:
    """Number of events of each operator type (every type in OPERATOR_EVENT_TYPES, zeros included)."""
    counts = Counter(e.get("type") for e in _records(events))
    return {op: counts.get(op, 0) for op in OPERATOR_EVENT_TYPES}


def node_completion_times(events: Iterable[dict], start_at: str = "claim") -> dict[str, float]:
    """Virtual seconds from each node's first claim (``start_at="claim"``) or first assign/claim
    (``"assign"``) to its next complete/close."""
    if start_at not in NODE_START_EVENTS:
        raise ValueError(f"start_at must be one of {sorted(NODE_START_EVENTS)}, got {start_at!r}")
    starts = NODE_START_EVENTS[start_at]
    start: dict[str, float] = {}
    done: dict[str, float] = {}
    for e in _records(events):
        kind, node = e.get("type"), e.get("task")
        if node is None or e.get("t") is None:
            continue
        if kind in starts and node not in start:
            start[node] = float(e["t"])
        elif kind in NODE_END_EVENTS and node in start and node not in done:
            done[node] = float(e["t"]) - start[node]
    return done


def _discarded_chars(edits: list[dict], final_files: Mapping[str, str]) -> int:
    final_lines = {p: {ln.rstrip() for ln in text.splitlines()} for p, text in final_files.items()}
    total = 0
    for e in edits:
        keep = final_lines.get(e.get("path"), set())
        for line in str(e.get("content") or "").splitlines():
            if line.rstrip() not in keep:
                total += len(line)
    return total


def _graph_sizes(snapshots) -> list[int]:
    if isinstance(snapshots, GraphHistory):
        return [n for _, n in sorted(zip(snapshots.rounds(), snapshots.sizes()))]
    sizes = []
    items = snapshots.items() if isinstance(snapshots, Mapping) else enumerate(snapshots)
    for key, snap in items:
        graph = snap.get("graph", snap) if isinstance(snap, Mapping) else {}
        r = snap.get("round", key) if isinstance(snap, Mapping) else key
        sizes.append((int(r), len(graph.get("nodes", []))))
    return [n for _, n in sorted(sizes)]


def trial_metrics(events, final_files: Mapping[str, str] | None = None, snapshots=None) -> dict:
    """Every per-trial metric of the module docstring from one trial's events (a list of dicts or a
    DataFrame), the final workspace files {path: text} and the per-round snapshots
    ({"round", "graph"} records, {round: graph} or a GraphHistory)."""
    ev = _records(events)
    edits = _of(ev, "edit_file")

    by_path: dict[str, list] = defaultdict(list)
    by_symbol: dict[tuple, list] = defaultdict(list)
    writers: dict[tuple, set] = defaultdict(set)
    sym_writers: dict[tuple, set] = defaultdict(set)
    edits_at: dict[tuple, list] = defaultdict(list)
    for e in edits:
        path, agent, rnd = e.get("path"), e.get("agent"), e.get("round")
        by_path[path].append(agent)
        writers[(path, rnd)].add(agent)
        edits_at[(path, rnd)].append(int(e.get("n_chars") or 0))
        for sym in e.get("symbols") or ():
            by_symbol[(path, sym)].append(agent)
            sym_writers[(path, sym, rnd)].add(agent)
    colliding = [k for k, who in writers.items() if len(who) >= 2]

    replies = [e for e in _of(ev, "agent_reply") if e.get("agent") != LEAD]

    def reply_len(e: dict) -> int:
        text = e.get("text")
        n = len(text) if isinstance(text, str) else int(e.get("n_chars") or 0)
        return min(n, REPLY_LOG_CHARS)

    dispatch = _of(ev, "round_dispatch")
    dispatched = sum(int(d.get("n_dispatched") or 0) for d in dispatch)
    possible = sum(int(d.get("n_total") or 0) for d in dispatch)
    dispatched_rel = sum(int(d.get("n_dispatched_released", d.get("n_dispatched")) or 0) for d in dispatch)
    possible_rel = sum(int(d.get("n_total_released", d.get("n_total")) or 0) for d in dispatch)

    init = _of(ev, "initialize")
    team = list(init[0].get("agents") or []) if init else []
    team_size = len(team) or max((int(d.get("n_total") or 0) for d in dispatch), default=0)
    active = sum(len([a for a in d.get("agents") or [] if not team or a in team]) for d in dispatch)
    team_rounds = team_size * len(dispatch)
    lead_rounds = sum(1 for d in dispatch if LEAD in (d.get("agents") or []) and (d.get("round") or 0) >= 1)

    durations = list(node_completion_times(ev, "claim").values())
    from_assign = list(node_completion_times(ev, "assign").values())
    planned = _of(ev, "planning_phase_end")
    rounds = len(_of(ev, "round_start"))
    broadcasts = _of(ev, "broadcast")
    sizes = _graph_sizes(snapshots) if snapshots is not None else []

    out = {
        "cross_agent_overwrites": _adjacent_changes(by_path),
        "n_concurrent_collisions": len(colliding),
        "wasted_chars": sum(sum(edits_at[k][:-1]) for k in colliding),
        "total_code_chars": sum(int(e.get("n_chars") or 0) for e in edits),
        "total_messages": len(replies),
        "total_message_chars": sum(reply_len(e) for e in replies),
        "dispatched_agent_rounds": dispatched,
        "possible_agent_rounds": possible,
        "idle_agent_rounds": possible - dispatched,
        "idle_fraction": (possible - dispatched) / possible if possible else 0.0,
        "idle_fraction_released": (possible_rel - dispatched_rel) / possible_rel if possible_rel else 0.0,
        "total_rounds": rounds,
        "function_overwrites": _adjacent_changes(by_symbol),
        "function_concurrent_writes": sum(1 for who in sym_writers.values() if len(who) >= 2),
        "discarded_chars": _discarded_chars(edits, final_files) if final_files is not None else math.nan,
        "n_broadcasts": len(broadcasts),
        "message_chars": sum(len(str(b.get("message") or "")) for b in broadcasts),
        "active_agent_rounds": active,
        "team_agent_rounds": team_rounds,
        "inactive_agent_rounds": team_rounds - active,
        "active_fraction": active / team_rounds if team_rounds else math.nan,
        "n_completed_nodes": len(durations),
        "node_completion_mean_s": sum(durations) / len(durations) if durations else math.nan,
        "node_completion_p95_s": _percentile(durations, 95),
        "node_completion_from_assign_mean_s": sum(from_assign) / len(from_assign) if from_assign else math.nan,
        "node_completion_from_assign_p95_s": _percentile(from_assign, 95),
        "planning_seconds": float(planned[0].get("t") or 0.0) if planned else 0.0,
        "graph_size_initial": sizes[0] if sizes else math.nan,
        "graph_size_final": sizes[-1] if sizes else math.nan,
        "graph_size_per_round": sizes,
        "n_parse_errors": len(_of(ev, "parse_error")),
        "lead_invocations": lead_rounds,
        "lead_active_fraction": lead_rounds / rounds if rounds else math.nan,
        "heartbeat_alerts": len(_of(ev, "heartbeat_alert")),
        "n_verify": len(_of(ev, "create_verify_node")),
        "n_release": len(_of(ev, "release_task")),
        "fix_tasks": len(_of(ev, "fix_task_injected")),
    }
    out.update({f"op_{k}": v for k, v in operator_counts(ev).items()})
    return out
