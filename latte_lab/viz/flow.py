"""What happened each round, agent by agent: one line of text per agent (``round_lines``), the running token
count (``tokens_by_round``), and the message-flow view of a team without a task graph (``flow``): agents as
lanes, rounds left to right, their actions as marks and every broadcast as arrows to the other agents.

>>> events = [{"type": "initialize", "agents": ["Dev1", "Dev2"]},
...           {"type": "agent_reply", "round": 1, "agent": "Dev1", "input_tokens": 900, "output_tokens": 100},
...           {"type": "edit_file", "round": 1, "agent": "Dev1", "path": "a.py"},
...           {"type": "broadcast", "round": 1, "sender": "Dev1", "message": "a.py is done"}]
>>> round_lines(events, 1)
['Dev1: edit a.py · broadcast “a.py is done”']
>>> tokens_by_round(events)
{0: 0, 1: 1000}
>>> ax = flow(events)
>>> ax.get_yticklabels()[0].get_text()
'Dev1'
"""

from __future__ import annotations

from collections.abc import Mapping

import latte_lab.viz.style as style
from latte_lab.graph import LEAD
from latte_lab.graph import SYSTEM_AGENT as SYSTEM

__all__ = ["agents_of", "flow", "round_lines", "tokens_by_round"]

MESSAGE_CHARS = 48  # a broadcast quoted in a round line is cut here (the event log has it whole)
ROUND_IN = 0.36  # width of one round in the flow view
LANE_IN = 0.34  # height of one agent's lane
BROADCAST_COLOR = "#1d4ed8"
PUBLISH_COLOR = "#b54708"
MARKS = {  # event type -> (marker, colour, legend label), drawn in this order inside a round's cell
    "read_file": ("o", "#98a2b3", "read a file"),
    "edit_file": ("s", "#344054", "edit a file"),
    "run_script": ("D", "#667085", "run a script"),
    "run_tests": ("^", None, "run the tests (green: all pass)"),
    "certify_complete": ("*", "#2d6a4f", "declare the work complete"),
}
TEST_PASS, TEST_FAIL = "#16a34a", "#dc2626"


def _records(events) -> list[dict]:
    if hasattr(events, "event_list"):
        return list(events.event_list)
    if hasattr(events, "to_dict"):
        return events.to_dict("records")
    return list(events)


def _round(e: Mapping) -> int | None:
    try:
        return int(e.get("round"))
    except (TypeError, ValueError):  # None, NaN or <NA>: an event outside the rounds
        return None


def agents_of(events) -> list[str]:
    """The team's agents, Lead first, in the order the trial declared them."""
    evs = _records(events)
    init = next((e for e in evs if e.get("type") == "initialize" and isinstance(e.get("agents"), list)), None)
    names = list(init["agents"]) if init else []
    for e in evs:
        a = e.get("agent") or e.get("sender")
        if e.get("type") in ("agent_reply", "broadcast", "publish") and isinstance(a, str) and a not in names:
            names.append(a)
    lead = init.get("lead") if init else None
    return sorted(names, key=lambda a: (a != lead, a != LEAD, len(a), a))


def _quote(text) -> str:
    text = " ".join(str(text or "").split())
    return f"“{text[:MESSAGE_CHARS - 1]}…”" if len(text) > MESSAGE_CHARS else f"“{text}”"


def _phrase(e: Mapping, short: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(agent, what they did) for one event, or (None, None) for events that are not an agent's action."""
    kind = e.get("type")
    task = short.get(e.get("task"), e.get("task"))
    agent = e.get("agent") or e.get("sender")
    if kind == "discover_task":
        return agent, f"discover {task}"
    if kind == "assign_task":
        return e.get("assigner") or agent, f"assign {task}→{e.get('assignee')}"
    if kind in ("claim_task", "complete_task"):
        return agent, f"{kind.split('_')[0]} {task}"
    if kind == "claim_blocked":
        return agent, f"claim {task} refused"
    if kind in ("release_task", "close_task"):
        return e.get("requester") or agent or LEAD, f"{kind.split('_')[0]} {task}"
    if kind == "create_verify_node":
        return e.get("requester") or agent, f"verify {task}"
    if kind in ("edit_file", "read_file", "run_script"):
        return agent, f"{kind.split('_')[0]} {e.get('path')}"
    if kind == "run_tests":
        total = sum(int(e.get(k) or 0) for k in ("passed", "failed", "errors"))
        return agent or SYSTEM, f"tests {int(e.get('passed') or 0)}/{total}"
    if kind == "broadcast":
        return agent, f"broadcast {_quote(e.get('message'))}"
    if kind == "publish":
        return agent, f"publish {e.get('topic')}"
    if kind == "certify_complete":
        return agent, "declare complete" + ("" if e.get("accepted") else " (refused)")
    if kind in ("parse_error", "action_error", "edit_blocked"):
        return agent, "error: " + str(e.get("message") or e.get("reason") or kind)[:40]
    return None, None


def round_lines(events, round: int, *, short: Mapping[str, str] | None = None) -> list[str]:
    """One line per agent that acted in ``round``: what it did, in order (node ids shortened by ``short``)."""
    short = short or {}
    per: dict[str, list[str]] = {}
    replied: list[str] = []
    for e in _records(events):
        if _round(e) != round:
            continue
        if e.get("type") in ("agent_reply", "planning_reply") and e.get("agent") not in replied:
            replied.append(e.get("agent"))
        agent, what = _phrase(e, short)
        if what:
            per.setdefault(str(agent), []).append(what)
    for a in replied:
        per.setdefault(str(a), ["no action"])
    order = agents_of(events)

    def key(a: str):  # the team's order, then agents it did not declare, the System (automatic tests) last
        return (a == SYSTEM, order.index(a) if a in order else len(order), len(a), a)

    return [f"{a}: {' · '.join(per[a])}" for a in sorted(per, key=key)]


def tokens_by_round(events) -> dict[int, int]:
    """Cumulative model tokens (input + output) at the end of every round, from round 0."""
    per: dict[int, int] = {}
    last = 0
    for e in _records(events):
        r = _round(e)
        if r is None:
            continue
        last = max(last, r)
        if e.get("type") in ("agent_reply", "planning_reply"):
            per[r] = per.get(r, 0) + int(e.get("input_tokens") or 0) + int(e.get("output_tokens") or 0)
    out, total = {}, 0
    for r in range(last + 1):
        total += per.get(r, 0)
        out[r] = total
    return out


def _cells(events) -> dict[tuple[str, int], list[dict]]:
    cells: dict[tuple[str, int], list[dict]] = {}
    for e in _records(events):
        r = _round(e)
        if r is None or e.get("type") not in MARKS:
            continue
        cells.setdefault((e.get("agent") or SYSTEM, r), []).append(e)
    return cells


def flow(events, *, upto: int | None = None, ax=None, rounds: int | None = None, legend: bool = True):
    """The message-flow view: one lane per agent, one column per round, a mark per kind of action (tests
    green when all pass) and, for every broadcast, arrows from the sender to every other agent. Draws rounds
    up to ``upto`` (all by default) on an axis of ``rounds`` rounds; returns the Axes.

    ``events``: a TrialResult, its ``events`` DataFrame or the event list.
    """
    with style.theme():
        return _flow(events, upto=upto, ax=ax, rounds=rounds, legend=legend)


def _flow(events, *, upto, ax, rounds, legend):
    from matplotlib.lines import Line2D

    plt = style.pyplot()
    evs = _records(events)
    agents = agents_of(evs)
    cells = _cells(evs)
    if any(a == SYSTEM for a, _ in cells):
        agents = agents + [SYSTEM]
    last = max([r for r in (_round(e) for e in evs) if r is not None], default=0)
    rounds = rounds or last
    upto = last if upto is None else upto
    lane = {a: i for i, a in enumerate(agents)}
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 1.2 + ROUND_IN * (rounds + 1)), 0.7 + LANE_IN * max(2, len(agents))),
                             layout="constrained")
    for i in lane.values():
        ax.axhline(i, color="#e4e7ec", lw=6, zorder=0, solid_capstyle="butt")
    kinds = list(MARKS)
    seen: set[str] = set()
    for (a, r), es in cells.items():
        if r > upto or a not in lane:
            continue
        present = [k for k in kinds if any(e["type"] == k for e in es)]
        for j, kind in enumerate(present):
            marker, color, _ = MARKS[kind]
            if kind == "run_tests":
                t = [e for e in es if e["type"] == kind][-1]
                color = TEST_PASS if not (t.get("failed") or t.get("errors")) and t.get("passed") else TEST_FAIL
            x = r - 0.3 + 0.6 * (j + 0.5) / max(1, len(present))
            ax.plot([x], [lane[a]], marker=marker, color=color, ms=5, ls="", zorder=3)
            seen.add(kind)
    messages = [e for e in evs if e.get("type") in ("broadcast", "publish") and _round(e) is not None
                and _round(e) <= upto and (e.get("sender") or e.get("agent")) in lane]
    by_round: dict[int, list[dict]] = {}
    for e in messages:
        by_round.setdefault(_round(e), []).append(e)
    segments: dict[str, list] = {BROADCAST_COLOR: [], PUBLISH_COLOR: []}
    heads: dict[str, list] = {BROADCAST_COLOR: [], PUBLISH_COLOR: []}  # (x, y, points down?)
    for r, es in by_round.items():
        for k, e in enumerate(es):
            sender = e.get("sender") or e.get("agent")
            x = r - 0.35 + 0.7 * (k + 0.5) / len(es)
            color = PUBLISH_COLOR if e["type"] == "publish" else BROADCAST_COLOR
            ax.plot([x], [lane[sender]], marker="o", ms=3, color=color, zorder=4)
            for other, i in lane.items():
                if other in (sender, SYSTEM):
                    continue
                segments[color].append([(x, lane[sender]), (x, i)])
                heads[color].append((x, i, i > lane[sender]))
            seen.add(e["type"])
    from matplotlib.collections import LineCollection

    for color, segs in segments.items():  # one collection per colour: hundreds of arrows draw fast
        if not segs:
            continue
        ax.add_collection(LineCollection(segs, colors=color, linewidths=0.6, alpha=0.55, zorder=2))
        down = [(x, y) for x, y, d in heads[color] if d]
        up = [(x, y) for x, y, d in heads[color] if not d]
        for pts, marker, dy in ((down, "v", -0.12), (up, "^", 0.12)):  # lanes grow downwards
            if pts:
                ax.scatter([x for x, _ in pts], [y + dy for _, y in pts], marker=marker, s=9, color=color,
                           alpha=0.8, zorder=3, lw=0)
    ax.set_xlim(-0.6, rounds + 0.6)
    ax.set_ylim(len(agents) - 0.5, -0.5)
    ax.set_yticks(range(len(agents)), agents)
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.grid(False)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    if legend:
        handles = [Line2D([], [], marker=MARKS[k][0], ls="", color=MARKS[k][1] or TEST_PASS, label=MARKS[k][2])
                   for k in kinds if k in seen]
        if "broadcast" in seen:
            handles.append(Line2D([], [], color=BROADCAST_COLOR, marker=">", ms=4, label="broadcast to every agent"))
        if "publish" in seen:
            handles.append(Line2D([], [], color=PUBLISH_COLOR, marker=">", ms=4, label="publish a document"))
        if handles:
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False,
                      fontsize=style.MIN_FONT_PT)
    return ax
