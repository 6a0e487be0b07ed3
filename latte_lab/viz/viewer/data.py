"""A trial's run directory read into the data of its viewer page: every round's events, each call's prompt and
reply (texts stored once and named by number), the graph's layout at every round, the edits as diffs.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from latte_lab import rundir

LONG_FIELD_CHARS = 120  # an event's text longer than this is stored once in the page's text table
PX_PER_IN = 80  # graph layout inches -> SVG pixels
DROP_FIELDS = ("ts", "trial_id", "text", "content")  # event fields the page never shows (texts are stored once)
# the event types an action tag can produce, so a reply's actions are paired with their outcomes
OUTCOME_TYPES = {
    "claim_task": ("claim_task", "claim_blocked"), "complete_task": ("complete_task", "complete_blocked"),
    "discover_task": ("discover_task",), "plan_task": ("discover_task", "plan_task"),
    "assign_task": ("assign_task", "assign_blocked"), "release_task": ("release_task", "release_blocked"),
    "close_task": ("close_task", "close_blocked"), "verify_task": ("create_verify_node", "verify_task"),
    "edit_file": ("edit_file",), "read_file": ("read_file",), "run_tests": ("run_tests",),
    "run_script": ("run_script",), "broadcast": ("broadcast",), "request_status": ("request_status",),
    "synthesize": ("synthesize",), "certify_complete": ("certify",), "publish": ("publish",),
}


class _Texts:
    """A table of strings, each stored once; a page names them by index."""

    def __init__(self):
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.items)
            self.items.append(text)
        return i


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None (JSON.parse refuses NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _actor(ev: dict) -> str | None:
    for key in ("agent", "sender", "assigner", "requester"):
        if isinstance(ev.get(key), str):
            return ev[key]
    return None


_TAG = re.compile(r"<(/?)([a-z]+(?:_[a-z]+)*)\b")


def action_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, tag)`` of each action tag in a reply, for highlighting (body tags span to their close).

    >>> action_spans('ok <claim_task id="a" /> then <broadcast>hi</broadcast>')
    [(3, 24, 'claim_task'), (30, 55, 'broadcast')]
    """
    from latte_lab.actions import _BODY_TAGS, ACTION_TAGS

    spans, pos = [], 0
    while (m := _TAG.search(text, pos)) is not None:
        tag = m.group(2)
        if m.group(1) or tag not in ACTION_TAGS:
            pos = m.end()
            continue
        close = text.find(">", m.end())
        if close < 0:
            break
        end = close + 1
        if tag in _BODY_TAGS and text[close - 1] != "/":
            closing = text.find(f"</{tag}>", end)
            end = len(text) if closing < 0 else closing + len(tag) + 3
        elif text[close - 1] != "/" and text.startswith(f"</{tag}>", end):
            end += len(tag) + 3
        spans.append((m.start(), end, tag))
        pos = end
    return spans


def _graph(snaps: list[dict]) -> dict | None:
    if not snaps:
        return None
    import latte_lab.viz.graph_drawing as gd

    plan = gd.plan(snaps)
    order = plan.order
    index = {n: i for i, n in enumerate(order)}
    y_top = plan.ylim[1]
    nodes = [{"id": n, "short": plan.short[n], "title": str(plan.nodes[n].get("title") or n),
              "x": round((plan.pos[n][0] - plan.xlim[0]) * PX_PER_IN, 1),
              "y": round((y_top - plan.pos[n][1]) * PX_PER_IN, 1),
              "lx": round((plan.label_end.get(n, plan.pos[n][0]) - plan.xlim[0]) * PX_PER_IN, 1),
              "verify": bool(plan.nodes[n].get("is_verify"))} for n in order]
    edges = [[index[a], index[b]] for a, b in plan.edges if a in index and b in index]
    frames, last = [], None
    for snap in snaps:
        state = [[index[n["id"]], n.get("status") or "pending", n.get("agent") or ""]
                 for n in snap["graph"]["nodes"] if n["id"] in index]
        present = [[index[d], index[n["id"]]] for n in snap["graph"]["nodes"] for d in n.get("deps", [])
                   if d in index and n["id"] in index]
        if (state, present) == last:  # an unchanged round: the earlier frame stands
            continue
        last = (state, present)
        frames.append({"round": snap["round"], "nodes": state, "edges": present})
    return {"nodes": nodes, "edges": edges, "frames": frames, "node_px": plan.node_in * PX_PER_IN,
            "w": round(plan.width * PX_PER_IN, 1), "h": round(plan.height * PX_PER_IN, 1)}


def _calls(run_dir: Path, texts: _Texts) -> list[dict]:
    """The cassette's calls, with every message text put in ``texts`` (numbers mapped to table indices)."""
    path = run_dir / rundir.CALLS_FILE
    if not path.exists():
        return []
    numbers: dict[int, int] = {}
    roles: dict[int, str] = {}
    calls = []
    for record in rundir.iter_jsonl(path):
        if record.get("type") != "call":
            continue
        req, resp = record.get("request", {}), record.get("response", {})
        if "new_messages" in record:
            for n, role, content in record["new_messages"]:
                numbers[n], roles[n] = texts.add(content), role
            system = numbers.get(req.get("system_id"))
            reply = numbers.get(resp.get("text_id"))
            ids = req.get("message_ids", [])
            messages = [[roles.get(n), numbers.get(n)] for n in ids]
        else:  # a line holding its texts whole
            system = texts.add(req.get("system", ""))
            messages = [[role, texts.add(content)] for role, content in req.get("messages", [])]
            reply = texts.add(resp.get("text", ""))
        scope = record.get("scope") or req.get("scope") or {}
        usage = resp.get("usage") or {}
        calls.append({"agent": scope.get("agent"), "ci": scope.get("call_index"), "sys": system,
                      "msgs": messages, "reply": reply, "in": usage.get("input_tokens", 0),
                      "out": usage.get("output_tokens", 0)})
    return calls


def _starting_files(task: str) -> dict[str, str]:
    try:
        from latte_lab import tasks

        files = tasks.get(task).starting_files()
    except Exception:  # noqa: BLE001 - a task not registered here: first edits show whole
        return {}
    return {str(k): v for k, v in files.items() if isinstance(v, str)}


def trial_data(run_dir: str | Path, texts: _Texts | None = None) -> dict:
    """Everything a trial page shows, JSON-ready; texts go into ``texts`` (a new table when None, returned
    under ``"T"``)."""
    run_dir = Path(run_dir)
    own_table = texts is None
    texts = texts or _Texts()
    result = rundir.load_trial(run_dir)
    events = result.event_list
    calls = _calls(run_dir, texts)
    if not calls:  # no cassette (removed, or never written): the replies the event log holds, without prompts
        calls = [{"agent": ev.get("agent"), "ci": ev.get("call_index"), "sys": None, "msgs": [],
                  "reply": texts.add(ev["text"]), "in": ev.get("input_tokens") or 0,
                  "out": ev.get("output_tokens") or 0}
                 for ev in events if ev.get("type") == "agent_reply" and isinstance(ev.get("text"), str)]
    row = result.row
    agents: list[str] = []
    for ev in events:
        if ev.get("type") == "initialize":
            agents = list(ev.get("agents") or [])
    for ev in events:
        a = _actor(ev)
        if a and a not in agents:
            agents.append(a)
    # each call's round comes from its agent_reply event; roles too
    round_of: dict[tuple, int] = {}
    for ev in events:
        if ev.get("type") == "agent_reply":
            round_of[(ev.get("agent"), ev.get("call_index"))] = ev.get("round") or 0
    seen: dict[str, set] = defaultdict(set)  # message indices an agent's earlier prompts held
    for c in calls:
        c["round"] = round_of.get((c["agent"], c["ci"]), 0)
        old = seen[c["agent"]]
        for m in c["msgs"]:
            m.append(0 if m[1] in old else 1)  # 1: new in this call (this round's view)
        old.update(m[1] for m in c["msgs"])
        old.add(c["reply"])  # the agent's own reply comes back in its next prompt: not new there
        c["acts"] = [list(s) for s in action_spans(texts.items[c["reply"]])] if c["reply"] is not None else []
        if c["agent"] and c["agent"] not in agents:
            agents.append(c["agent"])
    # events, compacted; edits become diffs
    files = _starting_files(result.config.task)  # the first edit of a file is diffed against its start
    out_events = []
    for ev in events:
        e = {k: v for k, v in ev.items() if k not in DROP_FIELDS}
        if ev.get("type") == "edit_file" and isinstance(ev.get("content"), str):
            path = str(ev.get("path"))
            before, after = files.get(path), ev["content"]
            diff = "\n".join(difflib.unified_diff(
                (before or "").splitlines(), after.splitlines(), f"a/{path}" if before is not None else "/dev/null",
                f"b/{path}", n=2, lineterm=""))
            e["diff"] = texts.add(diff)
            e["added"] = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
            e["removed"] = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
            e["first"] = before is None
            files[path] = after
        if ev.get("type") == "agent_reply" and calls:
            continue  # the cassette's call holds it, prompt and all
        if isinstance(ev.get("failed_tests"), list):
            e["failed_tests"] = "\n".join(map(str, ev["failed_tests"]))
        for k, v in list(e.items()):  # long texts go to the table, named "@key"
            if isinstance(v, str) and len(v) > LONG_FIELD_CHARS:
                del e[k]
                e["@" + k] = texts.add(v)
        e["who"] = _actor(ev)
        out_events.append(e)
    # pair each action of a reply with the event it produced (same agent, same round, in order)
    by_agent_round: dict[tuple, list[int]] = defaultdict(list)
    for i, e in enumerate(out_events):
        if e.get("who") and e.get("type") != "agent_reply" and e.get("round") is not None:
            by_agent_round[(e["who"], e["round"])].append(i)
    used: set[int] = set()
    for c in calls:
        pool = by_agent_round.get((c["agent"], c["round"]), [])
        for act in c["acts"]:
            wanted = OUTCOME_TYPES.get(act[2], (act[2],))
            hit = next((i for i in pool if i not in used and str(out_events[i].get("type", "")).startswith(wanted)), -1)
            if hit >= 0:
                used.add(hit)
            act.append(hit)
    rounds = sorted({e["round"] for e in out_events if isinstance(e.get("round"), int)} | {c["round"] for c in calls})
    if not rounds:
        rounds = [0]
    tokens = {r: 0 for r in range(rounds[0], rounds[-1] + 1)}
    for c in calls:
        tokens[c["round"]] = tokens.get(c["round"], 0) + int(c["in"] or 0) + int(c["out"] or 0)
    snaps = list(result.snapshots)
    data = {
        "id": result.trial_id, "run_dir": str(run_dir),
        "config": result.config.model_dump() if hasattr(result.config, "model_dump") else dict(result.config),
        "outcome": {"status": result.status, "error": result.error, "success": result.success,
                    "reason": result.reason, "accuracy": result.accuracy, "rounds": result.rounds,
                    "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
                    "dollars": row.get("dollars"), "virtual_seconds": result.virtual_seconds,
                    "real_seconds": result.real_seconds},
        "agents": agents, "first": rounds[0], "last": rounds[-1],
        "tokens": [tokens[r] for r in range(rounds[0], rounds[-1] + 1)],
        "calls": calls, "events": out_events, "graph": _graph(snaps),
    }
    data = _clean(data)
    if own_table:
        data["T"] = texts.items
    return data


