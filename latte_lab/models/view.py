"""An agent's structured view, read back from its prompt text: it carries nothing the prompt does not show.

Teams build a prompt (system text and a window of messages) and a *frame* (who is asked, in which role,
round and phase, with which actions); :func:`view_from_prompt` reads everything else from the text of
the messages in the window, as a model reading its prompt would: the files it has read or written, the
latest test result and the failures it names, script outputs, its task, the ready tasks offered to it,
the graph the Lead is shown, heartbeat alerts, published documents and the messages new this turn.
What fell out of the window is gone, and a test output cut to its tail names only the failures in it.

The texts recognised are the blocks of :mod:`latte_lab.prompts`, read by its parse functions: the
teams render them with its render functions, so the two sides share one wording. A team with its own
formats gets the generic parts (files, tests, scripts, messages).

>>> from latte_lab.models.base import AgentView, Message
>>> frame = AgentView(task="demo", role="worker", agent="Dev1")
>>> msgs = [Message("user", "[From System]: === a.py ===\\nx = 1\\n\\n[From System]: ❌ Tests failed:\\n"
...                 "FAILED t.py::TestA::test_x - assert 1 == 2\\n1 failed")]
>>> v = view_from_prompt(frame, "You are Dev1.", msgs)
>>> v.files_read, v.test_failures, v.tests_passed
({'a.py': 'x = 1'}, ('t.py::TestA::test_x',), False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from latte_lab import prompts
from latte_lab.models.base import AgentView, Message
from latte_lab.prompts import SYSTEM, failures_in, segments  # noqa: F401  (re-exported: the readers use them)


def _segment_op(sender: str, text: str) -> tuple:
    """What one segment of a user turn tells the reader, as ``(kind, *payload)``: a pure function of
    the text, so a message's segments are read once however many prompts show it. Each block is read by
    its parse function in :mod:`latte_lab.prompts`; the order decides between texts that two could read."""
    P = prompts
    if sender != SYSTEM:
        if doc := P.parse_document(text):
            return ("doc", *doc)
        if task := P.parse_assigned(text):
            return ("assigned", {**task, "status": "assigned"})
        return ("",)
    if tested := P.parse_tests(text):
        return ("test", *tested)
    if P.parse_script(text) is not None:
        return ("script", text)
    if (path := P.parse_file_not_found(text)) is not None:
        return ("file", path, "")
    if (path := P.parse_edit_refused(text)) is not None:
        return ("unfile", path)
    if (task := P.parse_task(text)) is not None:
        return ("task", task)
    if now := P.parse_task_update(text):
        return ("task_now", *now)
    if gone := P.parse_task_gone(text):
        return ("task_gone", gone[0])
    if (frontier := P.parse_ready(text)) is not None:
        return ("ready", frontier)
    if graph := P.parse_graph(text):
        extra = {"done_count": graph["done_count"], "ready": [t["id"] for t in graph["ready"]],
                 "workers": graph["workers"], "critical_path": graph["critical_path"]}
        return ("graph", graph["nodes"], extra)
    if alert := P.parse_heartbeat(text):
        return ("alert", alert)
    if (path := P.parse_next_file(text)) is not None:
        return ("next_file", path)
    if file := P.parse_file(text):
        return ("file", *file)
    if doc := P.parse_document(text):
        return ("doc", *doc)
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
