"""Recorded trials as scheduling data: who held which node in which rounds.

A trial's event log says when a worker Claimed a node and when it Completed it, was Released from it or
had it Closed. :func:`attempts` turns that into one row per attempt, in the same form as
:attr:`~latte_lab.scheduling.ScheduleResult.intervals`, so a real team and a simulated one are drawn and
measured alike.

Rounds are the trial's own (round 0 is the Lead's planning). Within a round the Lead acts before the
workers, so an attempt claimed in round ``r`` and completed in round ``r2`` occupied its worker in rounds
``r .. r2`` (``end = r2 + 1``, exclusive), while a Release or Close in round ``r2`` comes before the worker's
turn and ends the attempt at ``end = r2``.

>>> events = [{"type": "claim_task", "round": 1, "agent": "Dev1", "task": "a"},
...           {"type": "complete_task", "round": 2, "agent": "Dev1", "task": "a"},
...           {"type": "claim_task", "round": 3, "agent": "Dev2", "task": "b"},
...           {"type": "release_task", "round": 5, "task": "b", "prev_owner": "Dev2"},
...           {"type": "claim_task", "round": 5, "agent": "Dev1", "task": "b"}]
>>> attempts(events).values.tolist()
[['Dev1', 'a', 1, 3, 'done', 0], ['Dev2', 'b', 3, 5, 'released', 0], ['Dev1', 'b', 5, 6, 'open', 1]]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ATTEMPT_COLUMNS", "attempts"]

ATTEMPT_COLUMNS = ["worker", "node", "start", "end", "outcome", "attempt"]
"""worker, node, start round, end round (exclusive), outcome ("done", "released", "closed" or "open": still
held when the log ends), attempt (0 for a node's first)."""


def _event_dicts(events: Any) -> list[dict]:
    if hasattr(events, "event_list"):
        return list(events.event_list)
    if hasattr(events, "to_dict"):  # a DataFrame of events
        return events.to_dict("records")
    return list(events)


def attempts(events: Iterable[dict] | Any) -> pd.DataFrame:
    """One row per attempt at a node (columns :data:`ATTEMPT_COLUMNS`), in claim order.

    ``events`` is a trial's event list (or a ``TrialResult``, or its ``events`` DataFrame). An attempt still
    held when the log ends is ``"open"`` and ends after the last round in the log.
    """
    import pandas as pd

    evs = _event_dicts(events)
    last_round = max((int(e.get("round") or 0) for e in evs), default=0)
    holding: dict[str, tuple[str, int]] = {}  # node -> (worker, start round)
    tries: dict[str, int] = {}
    rows: list[tuple] = []

    def finish(node: str, end: int, outcome: str) -> None:
        worker, start = holding.pop(node)
        rows.append((worker, node, start, max(end, start + 1), outcome, tries[node]))
        tries[node] += 1

    for e in evs:
        kind, node, r = e.get("type"), e.get("task"), int(e.get("round") or 0)
        if kind == "claim_task" and node is not None:
            if node in holding:  # a claim on a node someone still holds ends nothing: keep the first
                continue
            tries.setdefault(node, 0)
            holding[node] = (e.get("agent"), r)
        elif node in holding:
            if kind == "complete_task":
                finish(node, r + 1, "done")
            elif kind == "release_task":
                finish(node, r, "released")
            elif kind == "close_task":
                finish(node, r, "closed")
    for node in list(holding):
        finish(node, last_round + 1, "open")
    rows.sort(key=lambda x: (x[2], len(x[0] or ""), x[0] or "", x[3]))  # by start, then worker (W2 before W10)
    return pd.DataFrame(rows, columns=ATTEMPT_COLUMNS)
