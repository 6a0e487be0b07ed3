"""The event log of a trial and the registry of its event types.

Every event a team or the trial engine emits is declared here once, with its fields and what it means.
Each event also carries the common fields ``type``, ``seq`` (0, 1, ...), ``round`` (0 = planning, null
before the first round), ``t`` (virtual clock in seconds: model latency of the slowest call of each
parallel batch plus a nominal cost per tool call; deterministic) and ``ts`` (unix wall time).

>>> log = EventLog(None, clock=lambda: 1.5, strict=True)
>>> log.emit("claim_task", agent="Dev1", task="t1")["t"]
1.5
>>> EVENT_TYPES["claim_task"].fields
('agent', 'task')
>>> log.emit("claim_task", agent="Dev1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
latte_lab.events.EventSchemaError: event 'claim_task' lacks the field(s) task; ...

A team of your own may emit event types of its own: declare them first with :func:`register`.
:func:`describe` renders the registry as a Markdown table (the reference of ``events.jsonl``).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from latte_lab.errors import LatteError

COMMON_FIELDS = ("type", "seq", "round", "t", "ts")
"""Fields every event carries, set by :class:`EventLog`."""

VOLATILE_EVENT_FIELDS = ("ts", "real_seconds", "cached", "test_cached", "schema_version")
"""Event fields that legitimately differ between a trial and its replay (wall time, memo/cache hits, and the
data contract's version when a newer latte_lab replays an older run)."""

REPLY_LOG_CHARS = 2000
"""The released logger's cut of ``agent_reply`` text (``n_chars_logged``; reference §7.2)."""

STRICT_ENV = "LATTE_STRICT_EVENTS"
"""Set to 1 to make an undeclared event type or field an error instead of a warning (the test suite
does, so every event the library emits is declared)."""


class EventSchemaError(LatteError):
    """An event does not match its declaration in the registry."""


class EventSchemaWarning(UserWarning):
    """An event does not match its declaration; the event is still recorded."""


@dataclass(frozen=True)
class EventType:
    """One declared event type: its required fields, optional fields and a one-line meaning."""

    name: str
    fields: tuple[str, ...]
    optional: tuple[str, ...]
    meaning: str

    def __post_init__(self) -> None:
        # every emitted event is checked: the sets it is checked against are built once
        object.__setattr__(self, "_required", frozenset(self.fields))
        object.__setattr__(self, "_known", frozenset((*self.fields, *self.optional, *COMMON_FIELDS)))

    def problem(self, given: Iterable[str]) -> str | None:
        """What is wrong with an event of this type carrying ``given`` fields, or None."""
        given = set(given)
        if self._required <= given <= self._known:
            return None
        missing = [f for f in self.fields if f not in given]
        unknown = sorted(given - set(self.fields) - set(self.optional) - set(COMMON_FIELDS))
        if missing:
            return f"event {self.name!r} lacks the field(s) {', '.join(missing)}"
        if unknown:
            return f"event {self.name!r} has undeclared field(s) {', '.join(unknown)}"
        return None


EVENT_TYPES: dict[str, EventType] = {}
"""Every declared event type by name, in declaration order."""


def register(name: str, fields: str | Iterable[str] = (), meaning: str = "", *,
             optional: str | Iterable[str] = (), replace: bool = False) -> EventType:
    """Declares an event type; ``fields``/``optional`` are names (a space-separated string or a list).

    A name can be declared once; ``replace=True`` redeclares it (e.g. when a notebook cell reruns).

    >>> register("coin_flip", "agent side", "an agent flipped a coin").fields
    ('agent', 'side')
    >>> del EVENT_TYPES["coin_flip"]
    """
    def names(spec) -> tuple[str, ...]:
        return tuple(spec.split()) if isinstance(spec, str) else tuple(spec)

    if not name or not isinstance(name, str):
        raise EventSchemaError("an event type needs a non-empty string name")
    if name in EVENT_TYPES and not replace:
        raise EventSchemaError(f"event type {name!r} is already declared; pass replace=True to redeclare it")
    clash = [f for f in (*names(fields), *names(optional)) if f in COMMON_FIELDS]
    if clash:
        raise EventSchemaError(f"event type {name!r}: {', '.join(clash)} are set by the log itself")
    if not meaning:
        raise EventSchemaError(f"event type {name!r} needs a one-line meaning")
    declared = EventType(name, names(fields), names(optional), meaning)
    EVENT_TYPES[name] = declared
    return declared


def check(event: dict) -> str | None:
    """What is wrong with ``event`` against the registry, or None when it matches its declaration."""
    declared = EVENT_TYPES.get(event.get("type"))
    if declared is None:
        return (f"event type {event.get('type')!r} is not declared; declare it with "
                "latte_lab.events.register(name, fields, meaning)")
    return declared.problem(event)


def describe() -> str:
    """The registry as a Markdown table: type, fields (optional ones in brackets), meaning."""
    lines = ["| type | fields | meaning |", "|---|---|---|"]
    for e in EVENT_TYPES.values():
        fields = " ".join([*e.fields, *(f"[{f}]" for f in e.optional)])
        lines.append(f"| `{e.name}` | {fields} | {e.meaning} |")
    return "\n".join(lines)


class EventLog:
    """Append-only typed events, each checked against the registry and handed to ``sink`` as it happens.

    ``sink`` receives each event dict (the run directory writes it as one JSONL line); None keeps the
    events in memory only. ``strict`` makes an undeclared type or field an :class:`EventSchemaError`;
    otherwise it is a warning once per type (default: strict when ``$LATTE_STRICT_EVENTS`` is 1).
    """

    def __init__(self, sink: Callable[[dict], None] | None, clock: Callable[[], float], *,
                 strict: bool | None = None):
        self.events: list[dict] = []
        self._sink = sink
        self._clock = clock
        self._strict = os.environ.get(STRICT_ENV) == "1" if strict is None else strict
        self._warned: set[str] = set()
        self.round: int | None = None

    def emit(self, type: str, **fields: Any) -> dict:
        event = {"type": type, "seq": len(self.events), "round": self.round, "t": round(self._clock(), 6),
                 "ts": time.time()}
        event.update(fields)
        declared = EVENT_TYPES.get(type)
        problem = declared.problem(fields) if declared is not None else check(event)
        if problem is not None:
            if self._strict:
                raise EventSchemaError(f"{problem}; see latte_lab.events.describe() for the declared events")
            if type not in self._warned:
                self._warned.add(type)
                warnings.warn(problem, EventSchemaWarning, stacklevel=2)
        self.events.append(event)
        if self._sink is not None:
            self._sink(event)
        return event

    def close(self) -> None:
        self._sink = None


# --- the declared event types --------------------------------------------------------------------------------

# trial engine
register("run_start", "trial_id task team model seed n_workers",
         "the trial began; the first event (schema_version: the data contract's, latte_lab.schema.SCHEMA_VERSION)",
         optional="schema_version")
register("run_end", "reason success tests_passed rounds",
         "the trial ended; reason is how (all_tasks_done, max_rounds, error, interrupted, ...)")
register("fork_point", "parent fork_round changes",
         "a fork left its parent here: the rounds before were the parent's, restored from the state it saved then "
         "(restored) or replayed from its cassette; from here on the fork's changes apply", optional="restored")
register("trial_error", "error", "the trial failed or was interrupted; error is one line",
         optional="traceback")
register("evaluation", (), "the hidden suite scored the final workspace (error when it could not)",
         optional="passed failed errors total rate per_class missing_outputs public_confirmed notes failed_tests error")
register("tampering", "kind path line detail source",
         "the workspace reached into its tests instead of doing the work (a conftest.py, pytest configuration, "
         "a patch of pytest or unittest, ...): source 'scan' found it in the files, 'evaluation' caught it while "
         "the hidden suite ran; recorded, never scored")
# rounds and dispatch
register("initialize", "agents lead", "the team was built: every agent name and the Lead's (null if none)",
         optional="num_teammates")
register("round_start", (), "a round began (its number is the event's round)")
register("round_dispatch", "n_dispatched n_total agents n_dispatched_released n_total_released",
         "who ran this round: agents (Lead included) and the dispatched/possible counts "
         "(workers for graph teams, everyone who could run for flat teams; *_released = released code's)",
         optional="dynamic")
register("apply_order", "agents", "the order in which this round's replies were applied")
register("agent_reply", "agent role text n_chars n_chars_logged input_tokens output_tokens latency_s cached "
         "call_index", "one model reply of one agent")
register("parse_error", "agent tag message", "a malformed or unknown tag in a reply; the agent is told")
register("action_error", "agent action message", "an action the workspace or team refused")
# planning (graph teams)
register("planning_phase_start", (), "the Lead began planning (round 0)")
register("planning_reply", "agent turn text", "one planning reply of the Lead")
register("planning_phase_end", "tasks_discovered turns reason", "planning ended (graph_ready or max_turns)")
register("planning_failed", "message", "planning produced no task: the trial cannot start")
register("lead_invoked", "reasons", "the Lead runs this round (graph changed, heartbeat, idle H rounds)")
register("lead_skipped", "reason consecutive_skips", "the Lead does not run this round")
register("heartbeat_alert", "agent task rounds_active last_activity_round rounds_without_activity rule",
         "a worker holding a task was flagged to the Lead (rule: paper = no action for H rounds; released = "
         "no edit or script for H rounds)")
register("fix_task_injected", "task", "all tasks were done but the tests failed: a fix task was added")
# graph operators
register("discover_task", "agent task title dependencies", "a node was added to the graph")
register("discover_task_skipped", "agent task reason", "a discover with an id already in the graph")
register("discover_task_warning", "agent task dropped_dep reason", "an unknown dependency was dropped "
         "(unknown_deps='drop')")
register("assign_task", "task assigner assignee", "the Lead assigned a node to a worker")
register("claim_task", "agent task", "a worker claimed a node")
register("claim_blocked", "agent task reason", "a claim was refused")
register("complete_task", "agent task", "a worker completed its node")
register("release_task", "task prev_owner requester reason", "a node went back to pending with no owner")
register("release_task_blocked", "agent task reason", "a release was refused")
register("close_task", "task prev_owner agent", "the Lead force-completed a node")
register("close_task_blocked", "agent task reason", "a close was refused")
register("create_verify_node", "task verify_id requester successors_rerouted reroute",
         "the Lead asked for a review: a verify node was added (reroute: which successors now wait for it)")
register("verify_task_blocked", "agent task reason", "a verify was refused")
register("task_verified", "task verify_id", "a verify node completed: its target is verified")
register("operator_blocked", "agent operator task reason", "an operator this agent may not use now")
# files, scripts, tests
register("edit_file", "agent path n_chars symbols created content",
         "a file was written (symbols: top-level functions/classes changed)")
register("edit_blocked", "agent path reason", "a write was refused")
register("read_file", "agent path ok", "a file was read (ok false: it does not exist)")
register("read_file_ignored", "agent path", "a read the team ignores (released flat teams)")
register("run_script", "agent path returncode", "a script ran (error: it could not be started)",
         optional="timed_out real_seconds stdout_tail stderr_tail error")
register("run_tests", "agent returncode passed failed errors real_seconds test_cached failed_tests stdout_tail",
         "the public tests ran (test_cached: memoised on identical files; infrastructure_error: the run could not "
         "test the code at all, e.g. pytest missing)", optional="infrastructure_error")
# messages and team-specific actions
register("broadcast", "sender message", "a message to every teammate")
register("request_status", "agent", "an agent asked for the team's status")
register("synthesize", "agent text", "the Lead's synthesis of results")
register("certify_complete", "agent accepted", "an agent declared the work complete (accepted: tests pass)")
register("phase_start", "phase", "the pipeline entered a phase")
register("publish", "sender topic text", "a pipeline role published a document")

BUILTIN_EVENT_TYPES = tuple(EVENT_TYPES)
"""The event types latte_lab itself declares (the data contract's; a team of your own may add more)."""

ACTION_EVENT_TYPES = frozenset({
    "edit_file", "read_file", "run_script", "run_tests", "discover_task", "assign_task", "claim_task",
    "complete_task", "release_task", "close_task", "create_verify_node", "broadcast", "publish",
    "certify_complete", "request_status", "synthesize",
})
"""Event types that record an agent's action taking effect (counted per round in progress displays)."""

OPERATOR_EVENT_TYPES = (
    "discover_task",
    "assign_task",
    "claim_task",
    "complete_task",
    "release_task",
    "close_task",
    "create_verify_node",
    "task_verified",
    "synthesize",
    "claim_blocked",
    "discover_task_skipped",
    "operator_blocked",
)
"""Event types counted as operator usage (Figure 3A); the first nine are the published JSON's keys."""
