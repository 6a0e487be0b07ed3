"""An agent's structured view, read back from its prompt text: it carries nothing the prompt does not show.

Teams build a prompt (system text and a window of messages) and a *frame* (who is asked, in which role,
round and phase, with which actions); :func:`view_from_prompt` reads everything else from the text of
the messages in the window, as a model reading its prompt would: the files it has read or written, the
latest test result and the failures it names, script outputs, its task, the ready tasks offered to it,
the graph the Lead is shown, heartbeat alerts, published documents and the messages new this turn.
What fell out of the window is gone, and a test output cut to its tail names only the failures in it.

The texts recognised are the ones latte_lab's teams and tools write (``latte_lab.teams.replies`` and
the team modules); a team with its own formats gets the generic parts (files, tests, scripts,
messages).

>>> from latte_lab.models.base import AgentView, Message
>>> frame = AgentView(task="demo", role="worker", agent="Dev1")
>>> msgs = [Message("user", "[From System]: === a.py ===\\nx = 1\\n\\n[From System]: ❌ Tests failed:\\n"
...                 "FAILED t.py::TestA::test_x - assert 1 == 2\\n1 failed")]
>>> v = view_from_prompt(frame, "You are Dev1.", msgs)
>>> v.files_read, v.test_failures, v.tests_passed
({'a.py': 'x = 1'}, ('t.py::TestA::test_x',), False)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from latte_lab.graph import SYSTEM_AGENT as SYSTEM  # the sender of the engine's own messages
from latte_lab.models.base import AgentView, Message

SEGMENT = re.compile(r"\[From ([^\]\n]+)\]: ")  # how the engine joins the messages of one turn
_FAILED_LINE = re.compile(r"^(?:FAILED|ERROR)\s+(\S+)", re.MULTILINE)
_FILE_HEADER = re.compile(r"^=== (\S+) ===\n")
_CAP_NOTE = re.compile(r"\n\[\.\.\. \d+ more characters not shown \.\.\.\]$")
_NOT_FOUND = re.compile(r"^\[file not found: ([^\]]+)\]")
_TEST_HEADERS = ("✅ Tests passed!", "❌ Tests failed:", "⏱️ Tests timed out")
_SCRIPT_HEADERS = ("✅ Script completed:", "❌ Script exited", "⏱️ Script timed out", "❌ Could not run")
_STATUS_HEADER = re.compile(r"^=== CURRENT TEST STATUS \(round \d+\) ===\n")
_FIX_NOTE = "All tasks are done but the tests still fail"
_NOT_ACCEPTED = "⚠️ Completion not accepted: the tests still fail.\n"
_TASK_BLOCK = "=== YOUR CURRENT TASK ==="
_ASSIGNED = re.compile(r"^You have been assigned task '([^']+)': ([^\n]*)\n?(.*)$", re.DOTALL)
_TASK_NOW = re.compile(r"^Your task '([^']+)' is now (\w+)")
_TASK_GONE = re.compile(r"^Task '([^']+)' was (released|closed) by")
_READY_BLOCK = "=== AVAILABLE TASKS (ready to claim) ==="
_NO_READY = "No tasks are currently available"
_READY_LINE = re.compile(r"^• ([^:\n]+): ([^\n]*?)(?: — (.*))?$")
_GRAPH_BLOCK = "=== CURRENT TASKS ==="
_GRAPH_LINE = re.compile(r"^(\S+) ([^:\s]+): (.*?) \((?:Owner: ([^)]+)|Unassigned)\)(?: \[Requires: ([^\]]*)\])?$")
_DONE_COUNT = re.compile(r"^\[(\d+) completed task")
_TEAM_LINE = re.compile(r"^(\S+): (?:working on (\S+)|idle)$")
_ICON_STATUS = {"⏳": "pending", "📌": "assigned", "🔨": "in_progress"}
_HEARTBEAT = re.compile(r"^⚠️ Heartbeat: (\S+) (.*?)(\d+) rounds.*?<release_task id=\"([^\"]+)\"", re.DOTALL)
_DOC = re.compile(r"^\[([a-z_]+)\]\n(.*)$", re.DOTALL)
_NEXT_FILE = re.compile(r"^Next file of the task list: (\S+)")
_EDIT_REFUSED = re.compile(r"^⚠️ Edit to (?:existing file )?'([^']+)' (?:refused|blocked|was not written)")


def segments(content: str) -> list[tuple[str, str]]:
    """(sender, text) of every message joined into one user turn, in order (text before the first
    marker is the System's)."""
    parts = SEGMENT.split(content)
    out = []
    if parts[0].strip():
        out.append((SYSTEM, parts[0].strip()))
    for i in range(1, len(parts) - 1, 2):
        out.append((parts[i], parts[i + 1].strip("\n")))
    return out


def failures_in(text: str | None) -> tuple[str, ...]:
    """Failing test ids named in a test output (``FAILED``/``ERROR`` lines), in order, once each."""
    if not text:
        return ()
    return tuple(dict.fromkeys(m.group(1) for m in _FAILED_LINE.finditer(text)))


def _test_text(text: str) -> tuple[str, bool] | None:
    """(output, passed) when the segment is a test result of any form the teams send."""
    m = _STATUS_HEADER.match(text)
    body = text[m.end():] if m else text
    if body.startswith(_TEST_HEADERS):
        return text, body.startswith(_TEST_HEADERS[0])
    if text.startswith(_FIX_NOTE) or text.startswith(_NOT_ACCEPTED):
        return text, False
    return None


_PREDECESSORS = "=== ITS PREREQUISITES (direct predecessors) ==="
_PRED_LINE = re.compile(r"^• ([^:\s]+): (.*) \[(\w+)(?:, done by ([^\]]+))?\]$")
_CHANGED_FILE = re.compile(r"^([^\s(;]+)(?: \(([^)]*)\))?$")


def _predecessors(lines: list[str]) -> list[dict]:
    """The direct predecessors a worker is shown with its task (D4): what they were and produced."""
    out: list[dict] = []
    for line in lines:
        if m := _PRED_LINE.match(line):
            out.append({"id": m.group(1), "title": m.group(2), "status": m.group(3), "done_by": m.group(4),
                        "files": {}, "description": ""})
        elif out and line.startswith("  changed: "):
            for part in line[len("  changed: "):].split("; "):
                if fm := _CHANGED_FILE.match(part.strip()):
                    syms = [x.strip() for x in (fm.group(2) or "").split(",") if x.strip()]
                    out[-1]["files"][fm.group(1)] = syms
        elif out and line.startswith("  "):
            out[-1]["description"] = (out[-1]["description"] + "\n" + line[2:]).strip()
    return out


def _task_block(text: str) -> dict:
    lines = text.split("\n")
    fields = {"id": "", "status": "", "title": ""}
    rest: list[str] = []
    preds: list[str] | None = None
    for line in lines[1:]:
        key, sep, value = line.partition(": ")
        if preds is not None:
            preds.append(line)
        elif line.strip() == _PREDECESSORS:
            preds = []
        elif sep and key in ("ID", "Status", "Title") and not rest:
            fields[{"ID": "id", "Status": "status", "Title": "title"}[key]] = value.strip()
        else:
            rest.append(line)
    block = {**fields, "description": "\n".join(rest).strip()}
    if preds is not None:
        block["predecessors"] = _predecessors(preds)
    return block


def _graph_block(text: str) -> tuple[list[dict], dict]:
    nodes, extra = [], {"done_count": 0, "ready": [], "workers": {}, "critical_path": []}
    section = "tasks"
    for line in text.split("\n")[1:]:
        if line.startswith("=== READY TO ASSIGN"):
            section = "ready"
        elif line.startswith("=== TEAM ==="):
            section = "team"
        elif line.startswith("Critical path: "):
            extra["critical_path"] = [x.strip() for x in line[len("Critical path: "):].split("→")]
        elif section == "tasks":
            if m := _DONE_COUNT.match(line):
                extra["done_count"] = int(m.group(1))
            elif m := _GRAPH_LINE.match(line):
                deps = [d.strip() for d in (m.group(5) or "").split(",") if d.strip()]
                nodes.append({"id": m.group(2), "title": m.group(3), "status": _ICON_STATUS.get(m.group(1), "pending"),
                              "owner": m.group(4), "deps": deps})
        elif section == "ready" and line.startswith("• "):
            extra["ready"].append(line[2:].split(":", 1)[0].strip())
        elif section == "team" and (m := _TEAM_LINE.match(line)):
            extra["workers"][m.group(1)] = m.group(2)
    return nodes, extra


def _segment_op(sender: str, text: str) -> tuple:
    """What one segment of a user turn tells the reader, as ``(kind, *payload)``: a pure function of
    the text, so a message's segments are read once however many prompts show it."""
    if sender != SYSTEM:
        if m := _DOC.match(text):
            return ("doc", m.group(1), m.group(2))
        if m := _ASSIGNED.match(text):
            return ("assigned", {"id": m.group(1), "title": m.group(2), "description": m.group(3).strip(),
                                 "status": "assigned"})
        return ("",)
    if tested := _test_text(text):
        return ("test", *tested)
    if text.startswith(_SCRIPT_HEADERS):
        return ("script", text)
    if m := _NOT_FOUND.match(text):
        return ("file", m.group(1), "")
    if m := _EDIT_REFUSED.match(text):
        return ("unfile", m.group(1))
    if text.startswith(_TASK_BLOCK):
        return ("task", _task_block(text))
    if m := _TASK_NOW.match(text):
        return ("task_now", m.group(1), m.group(2))
    if m := _TASK_GONE.match(text):
        return ("task_gone", m.group(1))
    if text.startswith(_READY_BLOCK):
        frontier = []
        for line in text.split("\n")[1:]:
            if m := _READY_LINE.match(line):
                frontier.append({"id": m.group(1).strip(), "title": m.group(2).strip(),
                                 "description": (m.group(3) or "").strip()})
        return ("ready", frontier)
    if text.startswith(_NO_READY):
        return ("ready", [])
    if text.startswith(_GRAPH_BLOCK):
        return ("graph", *_graph_block(text))
    if m := _HEARTBEAT.match(text):
        return ("alert", {"agent": m.group(1), "task": m.group(4), "rounds": int(m.group(3))})
    if m := _NEXT_FILE.match(text):
        return ("next_file", m.group(1))
    if m := _FILE_HEADER.match(text):
        return ("file", m.group(1), _CAP_NOTE.sub("", text[m.end():]))
    if m := _DOC.match(text):
        return ("doc", m.group(1), m.group(2))
    return ("",)


# A prompt's earlier messages recur in every later prompt of the agent's window, so each message text is
# read once per process. The entries are never handed out: views get fresh copies of what they hold.
_READ: dict[tuple[str, str], tuple] = {}
_READ_MAX = 4096  # entries; emptied when full (a trial's windows need far fewer)


def _edits(actions) -> tuple:
    from latte_lab.actions import EditFile

    return tuple((a.path, a.content) for a in actions if isinstance(a, EditFile))


def note_reply(text: str, actions) -> None:
    """Remembers what a reply wrote (its parsed ``actions``), for when the reply is read back as history."""
    if len(_READ) >= _READ_MAX:
        _READ.clear()
    _READ["assistant", text] = _edits(actions)


def _read_message(msg: Message) -> tuple:
    key = (msg.role, msg.content)
    read = _READ.get(key)
    if read is None:
        if msg.role == "assistant":
            from latte_lab.actions import parse_actions

            read = _edits(parse_actions(msg.content).actions)
        else:
            read = tuple((sender, text, _segment_op(sender, text)) for sender, text in segments(msg.content))
        if len(_READ) >= _READ_MAX:
            _READ.clear()
        _READ[key] = read
    return read


def _fresh(value):
    """A copy of a parsed value (dicts and lists of plain values) that the caller may change."""
    if type(value) is dict:
        return {k: _fresh(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if type(value) is list:
        return [_fresh(v) if type(v) in _CONTAINERS else v for v in value]
    return value


_CONTAINERS = (dict, list)


def view_from_prompt(frame: AgentView, system: str, messages: Sequence[Message]) -> AgentView:
    """The view of a prompt: ``frame``'s task, role, agent, round, phase, actions and teammates, and
    every other field read from the messages (oldest first; later text wins)."""
    files: dict[str, str] = {}
    test_output: str | None = None
    tests_passed: bool | None = None
    scripts: list[str] = []
    current: dict | None = None
    frontier: list[dict] = []
    graph: list[dict] = []
    extra: dict = {}
    documents: dict[str, str] = {}
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    new_messages: list[dict] = []
    alerts: list[dict] = []
    for i, msg in enumerate(messages):
        read = _read_message(msg)
        if msg.role == "assistant":
            for path, content in read:
                files[path] = content
            continue
        newest = i == last_user
        for sender, text, op in read:
            if newest:
                new_messages.append({"sender": sender, "text": text})
            kind = op[0]
            if not kind:
                continue
            if kind == "doc":
                documents[op[1]] = op[2]
            elif kind == "assigned":
                if current is None:
                    current = dict(op[1])
                    frontier = []  # the ready list shown before it got a task is about idle time
            elif kind == "test":
                test_output, tests_passed = op[1], op[2]
            elif kind == "script":
                scripts.append(op[1])
            elif kind == "file":
                files[op[1]] = op[2]
            elif kind == "unfile":
                files.pop(op[1], None)
            elif kind == "task":
                current = _fresh(op[1])
                frontier = []
            elif kind == "task_now":
                if current is not None and current["id"] == op[1]:
                    current = {**current, "status": op[2]}
            elif kind == "task_gone":
                if current is not None and current["id"] == op[1]:
                    current = None
            elif kind == "ready":
                frontier = _fresh(op[1])
            elif kind == "graph":
                graph, extra = _fresh(op[1]), _fresh(op[2])
            elif kind == "alert":
                if newest:
                    alerts.append(dict(op[1]))
            elif kind == "next_file":
                if newest:
                    extra["next_file"] = op[1]
    if documents:
        extra["documents"] = documents
    return replace(
        frame, current_task=current, frontier=frontier, graph=graph, test_output=test_output,
        test_failures=failures_in(test_output), tests_passed=tests_passed, messages=new_messages,
        files_read=files, alerts=alerts, script_output=scripts, extra=extra,
    )


def frame_of(view: AgentView) -> AgentView:
    """The frame of a view: who is asked, in which role, round and phase, with which actions."""
    return AgentView(task=view.task, role=view.role, agent=view.agent, round=view.round, phase=view.phase,
                     allowed_actions=tuple(view.allowed_actions), teammates=tuple(view.teammates))
