"""The blocks of prompt text, each written once: a render function and a parse function side by side.

The teams render what an agent reads through this module (the Lead's view of the graph, the ready
tasks, the current task and its prerequisites, heartbeat alerts, tool results, assignments and
documents), and :mod:`latte_lab.models.view` reads a prompt back through it, as a model reading its
prompt would. A header worded here is worded for both sides, so rewording one cannot blind the
simulated model. ``parse_x(render_x(...))`` gives back what was rendered (``tests/teams/test_prompts.py``);
each parse returns None for text that is not its block.

The texts are the library's wording of the paper's prompts; the long instructions (system prompts) are
files in ``latte_lab/teams/prompts/``. Like :mod:`latte_lab.actions`, this module sits low in the
layers and imports nothing from models, teams, sandbox, workspace or tasks.

>>> text = render_ready([{"id": "a", "title": "Parse", "description": "read the input"}])
>>> print(text)
=== AVAILABLE TASKS (ready to claim) ===
• a: Parse — read the input
>>> parse_ready(text)
[{'id': 'a', 'title': 'Parse', 'description': 'read the input'}]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from latte_lab.graph import SYSTEM_AGENT as SYSTEM

__all__ = [
    "SYSTEM", "render_turn", "segments", "render_project", "parse_project", "render_team_status",
    "parse_team_status",
    "render_file", "parse_file", "render_file_not_found", "parse_file_not_found",
    "render_tests", "parse_tests", "failures_in", "render_test_status", "render_fix_note", "render_not_accepted",
    "render_script", "render_script_error", "parse_script",
    "render_task", "parse_task", "render_predecessors", "parse_predecessors",
    "render_ready", "parse_ready", "render_graph", "parse_graph", "render_heartbeat", "parse_heartbeat",
    "render_assigned", "parse_assigned", "render_task_update", "parse_task_update",
    "render_task_released", "render_task_closed", "parse_task_gone",
    "task_taken", "render_duplicate_task", "duplicate_task", "says_tests_still_fail",
    "render_claim_busy", "render_claim_lost", "parse_claims_refused", "claim_refused", "forbids_self_claim",
    "render_document", "parse_document", "render_next_file", "parse_next_file",
    "render_edit_locked", "render_edit_refused", "render_edit_needs_task", "parse_edit_refused",
]

# ----------------------------------------------------------------------------- a user turn ----
CONTINUE = "Continue."  # the turn of an agent that is asked with nothing new
_SEGMENT = re.compile(r"\[From ([^\]\n]+)\]: ")


def render_turn(buffer: Iterable[tuple[str, str]]) -> str:
    """The messages of one user turn, each marked with its sender.

    >>> render_turn([("System", "hi"), ("Dev2", "done")])
    '[From System]: hi\\n\\n[From Dev2]: done'
    """
    return "\n\n".join(f"[From {s}]: {t}" for s, t in buffer) or f"[From {SYSTEM}]: {CONTINUE}"


def segments(content: str) -> list[tuple[str, str]]:
    """(sender, text) of every message joined into one user turn, in order (text before the first
    marker is the System's)."""
    parts = _SEGMENT.split(content)
    out = []
    if parts[0].strip():
        out.append((SYSTEM, parts[0].strip()))
    for i in range(1, len(parts) - 1, 2):
        out.append((parts[i], parts[i + 1].strip("\n")))
    return out


# ------------------------------------------------------------------------- the project ----
_PROJECT = re.compile(r"^=== PROJECT: ([^\n]*) ===\n(.*)\n\nSuccess Criteria: (.*)\n\nRepository files: ([^\n]*)$",
                      re.DOTALL)


def render_project(title: str, description: str, criteria: str, files: Sequence[str]) -> str:
    """The project introduction every agent receives: title, description, success criteria, files."""
    return (f"=== PROJECT: {title} ===\n{description.strip()}\n\nSuccess Criteria: "
            f"{criteria.strip()}\n\nRepository files: {', '.join(files)}")


def parse_project(text: str) -> dict | None:
    """``title``, ``description``, ``criteria`` and ``files`` of the project introduction."""
    if m := _PROJECT.match(text):
        return {"title": m.group(1), "description": m.group(2), "criteria": m.group(3),
                "files": m.group(4).split(", ") if m.group(4) else []}
    return None


TEAM_STATUS_HEADER = "=== TEAM STATUS ==="
_STATUS_LINE = re.compile(r"^- ([^:\n]+): (?:working on (\S+)|idle)$")


def render_team_status(team: dict[str, str | None]) -> str:
    """The answer to ``<request_status>``: each agent's task, or idle (None)."""
    lines = [f"- {name}: " + (f"working on {task}" if task else "idle") for name, task in team.items()]
    return TEAM_STATUS_HEADER + "\n" + "\n".join(lines)


def parse_team_status(text: str) -> dict[str, str | None] | None:
    if not text.startswith(TEAM_STATUS_HEADER):
        return None
    return {m.group(1): m.group(2) for line in text.split("\n")[1:] if (m := _STATUS_LINE.match(line))}


# ----------------------------------------------------------------------------------- files ----
_FILE_HEADER = re.compile(r"^=== (\S+) ===\n")
_CAP_NOTE = re.compile(r"\n\[\.\.\. \d+ more characters not shown \.\.\.\]$")
_NOT_FOUND = re.compile(r"^\[file not found: ([^\]]+)\]")


def render_file(path: str, shown: str, hidden: int = 0) -> str:
    """A file as ``<read_file>`` shows it: ``shown`` is its text up to the cap, ``hidden`` the characters cut."""
    note = f"\n[... {hidden} more characters not shown ...]" if hidden > 0 else ""
    return f"=== {path} ===\n{shown}{note}"


def parse_file(text: str) -> tuple[str, str] | None:
    """(path, shown text) of a file block."""
    if m := _FILE_HEADER.match(text):
        return m.group(1), _CAP_NOTE.sub("", text[m.end():])
    return None


def render_file_not_found(path: str, error: str) -> str:
    return f"[file not found: {path}] {error}"


def parse_file_not_found(text: str) -> str | None:
    """The path of a file that could not be read."""
    m = _NOT_FOUND.match(text)
    return m.group(1) if m else None


# ----------------------------------------------------------------------------------- tests ----
TESTS_PASSED = "✅ Tests passed!"
TESTS_FAILED = "❌ Tests failed:"
TESTS_TIMED_OUT = "⏱️ Tests timed out"
_STATUS_HEADER = re.compile(r"^=== CURRENT TEST STATUS \(round \d+\) ===\n")
_FIX_NOTE = "All tasks are done but the tests still fail"
_NOT_ACCEPTED = "⚠️ Completion not accepted: the tests still fail.\n"
_FAILED_LINE = re.compile(r"^(?:FAILED|ERROR)\s+(\S+)", re.MULTILINE)


def render_tests(passed: bool, output: str, notes: Sequence[str] = (), timed_out: str | None = None) -> str:
    """A test result: the verdict, what the run ran into (``notes``) and pytest's output. ``timed_out``
    is the limit the run hit ("its time limit", "30 s"), None when it did not.

    >>> render_tests(False, "1 failed", timed_out="30 s")
    '⏱️ Tests timed out after 30 s and were stopped:\\n1 failed'
    """
    if passed:
        return f"{TESTS_PASSED}\n{output}"
    header = f"{TESTS_TIMED_OUT} after {timed_out} and were stopped:" if timed_out is not None else TESTS_FAILED
    return "\n".join([header, *notes, output])


def render_test_status(round: int, tests: str) -> str:
    """The test result the flat teams show every agent at the start of a round."""
    return f"=== CURRENT TEST STATUS (round {round}) ===\n{tests}"


def render_fix_note(task: str, tail: str) -> str:
    """What everyone is told when every task is done and the tests are red (a fix task was added)."""
    return f"{_FIX_NOTE}; a fix task '{task}' was added.\n{tail}"


def render_not_accepted(tests: str) -> str:
    return _NOT_ACCEPTED + tests


def says_tests_still_fail(text: str) -> bool:
    """Whether the text is news that the tests are still red (:func:`render_fix_note`,
    :func:`render_not_accepted`)."""
    return "tests still fail" in text


def parse_tests(text: str) -> tuple[str, bool] | None:
    """(output, passed) when the text is a test result of any form the teams send."""
    m = _STATUS_HEADER.match(text)
    body = text[m.end():] if m else text
    if body.startswith((TESTS_PASSED, TESTS_FAILED, TESTS_TIMED_OUT)):
        return text, body.startswith(TESTS_PASSED)
    if text.startswith(_FIX_NOTE) or text.startswith(_NOT_ACCEPTED):
        return text, False
    return None


def failures_in(text: str | None) -> tuple[str, ...]:
    """Failing test ids named in a test output (``FAILED``/``ERROR`` lines), in order, once each.

    >>> failures_in("FAILED t.py::test_a - x\\nERROR t.py::test_b\\nFAILED t.py::test_a")
    ('t.py::test_a', 't.py::test_b')
    """
    if not text:
        return ()
    return tuple(dict.fromkeys(m.group(1) for m in _FAILED_LINE.finditer(text)))


# --------------------------------------------------------------------------------- scripts ----
_SCRIPT_HEADERS = ("✅ Script completed:", "❌ Script exited", "⏱️ Script timed out", "❌ Could not run")


def render_script(stdout: str, returncode: int = 0, notes: Sequence[str] = (), stderr: str = "",
                  timed_out: str | None = None) -> str:
    """A script's result: the verdict, the ``notes``, its stdout and, when any, its stderr."""
    if timed_out is not None:
        header = f"⏱️ Script timed out after {timed_out} and was stopped:"
    elif returncode == 0:
        header = _SCRIPT_HEADERS[0]
    else:
        header = f"❌ Script exited with code {returncode}:"
    text = "\n".join([header, *notes]) + "\n" + stdout
    if stderr:
        text += f"\n[stderr]\n{stderr}"
    return text


def render_script_error(path: str, error: str) -> str:
    return f"❌ Could not run '{path}': {error}"


def parse_script(text: str) -> str | None:
    """The text of a script result (any verdict), None for other text."""
    return text if text.startswith(_SCRIPT_HEADERS) else None


# ----------------------------------------------------------------- a worker's current task ----
TASK_HEADER = "=== YOUR CURRENT TASK ==="
PREDECESSORS_HEADER = "=== ITS PREREQUISITES (direct predecessors) ==="
_PRED_LINE = re.compile(r"^• ([^:\s]+): (.*) \[(\w+)(?:, done by ([^\]]+))?\]$")
_CHANGED = "  changed: "
_CHANGED_FILE = re.compile(r"^([^\s(;]+)(?: \(([^)]*)\))?$")
_TASK_FIELDS = {"ID": "id", "Status": "status", "Title": "title"}


def render_task(task: dict) -> str:
    """A worker's task: ``id``, ``status``, ``title``, ``description`` and, when the key is there, its
    direct ``predecessors`` (:func:`render_predecessors`)."""
    text = (f"{TASK_HEADER}\nID: {task['id']}\nStatus: {task['status']}\n"
            f"Title: {task['title']}\n{task['description'] or ''}")
    if "predecessors" in task:
        text += render_predecessors(task["predecessors"])
    return text


def parse_task(text: str) -> dict | None:
    """The task of a :func:`render_task` block (``predecessors`` only when the block lists them)."""
    if not text.startswith(TASK_HEADER):
        return None
    fields = {"id": "", "status": "", "title": ""}
    rest: list[str] = []
    preds: list[str] | None = None
    for line in text.split("\n")[1:]:
        key, sep, value = line.partition(": ")
        if preds is not None:
            preds.append(line)
        elif line.strip() == PREDECESSORS_HEADER:
            preds = []
        elif sep and key in _TASK_FIELDS and not rest:
            fields[_TASK_FIELDS[key]] = value.strip()
        else:
            rest.append(line)
    block = {**fields, "description": "\n".join(rest).strip()}
    if preds is not None:
        block["predecessors"] = parse_predecessors(preds)
    return block


def render_predecessors(preds: Sequence[dict]) -> str:
    """The direct predecessors shown with a task (D4): each one's ``id``, ``title``, ``status``,
    ``done_by``, ``files`` (path -> symbols written) and ``description``; "" when there are none."""
    if not preds:
        return ""
    lines = ["", PREDECESSORS_HEADER]
    for p in preds:
        who = f", done by {p['done_by']}" if p["done_by"] else ""
        lines.append(f"• {p['id']}: {p['title']} [{p['status']}{who}]")
        if p["files"]:
            lines.append(_CHANGED + "; ".join(f"{path} ({', '.join(syms)})" if syms else path
                                              for path, syms in p["files"].items()))
        if p["description"]:
            lines.append("  " + p["description"].replace("\n", "\n  "))
    return "\n".join(lines)


def parse_predecessors(lines: Sequence[str]) -> list[dict]:
    """The predecessors listed in the lines after :data:`PREDECESSORS_HEADER`."""
    out: list[dict] = []
    for line in lines:
        if m := _PRED_LINE.match(line):
            out.append({"id": m.group(1), "title": m.group(2), "status": m.group(3), "done_by": m.group(4),
                        "files": {}, "description": ""})
        elif out and line.startswith(_CHANGED):
            for part in line[len(_CHANGED):].split("; "):
                if fm := _CHANGED_FILE.match(part.strip()):
                    syms = [x.strip() for x in (fm.group(2) or "").split(",") if x.strip()]
                    out[-1]["files"][fm.group(1)] = syms
        elif out and line.startswith("  "):
            out[-1]["description"] = (out[-1]["description"] + "\n" + line[2:]).strip()
    return out


# ------------------------------------------------------------------------- the ready tasks ----
READY_HEADER = "=== AVAILABLE TASKS (ready to claim) ==="
NO_READY = "No tasks are currently available. Wait for dependencies to complete."
_READY_LINE = re.compile(r"^• ([^:\n]+): ([^\n]*?)(?: — (.*))?$")


def render_ready(frontier: Sequence[dict]) -> str:
    """The ready tasks offered to an idle worker (``id``, ``title``, ``description`` as previewed)."""
    if not frontier:
        return NO_READY
    return READY_HEADER + "\n" + "\n".join(f"• {t['id']}: {t['title']} — {t['description']}" for t in frontier)


def parse_ready(text: str) -> list[dict] | None:
    if text.startswith(READY_HEADER):
        out = []
        for line in text.split("\n")[1:]:
            if m := _READY_LINE.match(line):
                out.append({"id": m.group(1).strip(), "title": m.group(2).strip(),
                            "description": (m.group(3) or "").strip()})
        return out
    if text.startswith(NO_READY):
        return []
    return None


# ------------------------------------------------------------------ the graph the Lead sees ----
GRAPH_HEADER = "=== CURRENT TASKS ==="
GRAPH_READY_HEADER = "=== READY TO ASSIGN (deps satisfied) ==="
GRAPH_TEAM_HEADER = "=== TEAM ==="
CRITICAL_PATH = "Critical path: "
STATUS_ICON = {"pending": "⏳", "assigned": "📌", "in_progress": "🔨"}
_ICON_STATUS = {icon: status for status, icon in STATUS_ICON.items()}
_GRAPH_LINE = re.compile(r"^(\S+) ([^:\s]+): (.*?) \((?:Owner: ([^)]+)|Unassigned)\)(?: \[Requires: ([^\]]*)\])?$")
_DONE_COUNT = re.compile(r"^\[(\d+) completed task")
_TEAM_LINE = re.compile(r"^(\S+): (?:working on (\S+)|idle)$")


def render_graph(graph: dict) -> str:
    """The graph as the Lead sees it each time it is invoked (reference §5.1). ``graph`` holds
    ``done_count`` (finished tasks, not listed), ``nodes`` (the open ones: ``id``, ``title``,
    ``status``, ``owner``, ``deps``), ``ready`` (``id``, ``title``), ``workers`` (name -> task or None)
    and ``critical_path`` (ids)."""
    lines = [GRAPH_HEADER]
    if graph["done_count"]:
        lines.append(f"[{graph['done_count']} completed task(s) — not shown]")
    for n in graph["nodes"]:
        owner = f"(Owner: {n['owner']})" if n["owner"] else "(Unassigned)"
        deps = f" [Requires: {', '.join(n['deps'])}]" if n["deps"] else ""
        lines.append(f"{STATUS_ICON.get(n['status'], '•')} {n['id']}: {n['title']} {owner}{deps}")
    lines.append(GRAPH_READY_HEADER)
    lines += [f"• {t['id']}: {t['title']}" for t in graph["ready"]] or ["(none)"]
    lines.append(GRAPH_TEAM_HEADER)
    lines += [f"{w}: " + (f"working on {cur}" if cur else "idle") for w, cur in graph["workers"].items()]
    if graph["critical_path"]:
        lines.append(CRITICAL_PATH + " → ".join(graph["critical_path"]))
    return "\n".join(lines)


def parse_graph(text: str) -> dict | None:
    """The fields of :func:`render_graph` (a status without an icon reads as pending)."""
    if not text.startswith(GRAPH_HEADER):
        return None
    out: dict = {"done_count": 0, "nodes": [], "ready": [], "workers": {}, "critical_path": []}
    section = "tasks"
    for line in text.split("\n")[1:]:
        if line.startswith(GRAPH_READY_HEADER):
            section = "ready"
        elif line.startswith(GRAPH_TEAM_HEADER):
            section = "team"
        elif line.startswith(CRITICAL_PATH):
            out["critical_path"] = [x.strip() for x in line[len(CRITICAL_PATH):].split("→")]
        elif section == "tasks":
            if m := _DONE_COUNT.match(line):
                out["done_count"] = int(m.group(1))
            elif m := _GRAPH_LINE.match(line):
                deps = [d.strip() for d in (m.group(5) or "").split(",") if d.strip()]
                out["nodes"].append({"id": m.group(2), "title": m.group(3),
                                     "status": _ICON_STATUS.get(m.group(1), "pending"), "owner": m.group(4),
                                     "deps": deps})
        elif section == "ready" and line.startswith("• "):
            nid, _, title = line[2:].partition(":")
            out["ready"].append({"id": nid.strip(), "title": title.strip()})
        elif section == "team" and (m := _TEAM_LINE.match(line)):
            out["workers"][m.group(1)] = m.group(2)
    return out


# ------------------------------------------------------------------------------- heartbeat ----
_HEARTBEAT = re.compile(r"^⚠️ Heartbeat: (\S+) (.*?)(\d+) rounds.*?<release_task id=\"([^\"]+)\"", re.DOTALL)


def render_heartbeat(agent: str, task: str, rounds: int, last: int, rule: str = "paper") -> str:
    """The Lead's alert that ``agent`` looks stuck on ``task``. Under the paper's rule ``rounds`` is the
    rounds without an action and ``last`` the round of its last action; otherwise ``rounds`` is the
    rounds on the task and ``last`` the round of its last edit or script."""
    if rule == "paper":
        why = f"has emitted no action for {rounds} rounds (last action: round {last})"
    else:
        why = (f"has been on task '{task}' for {rounds} rounds without editing any files "
               f"or running any scripts (last activity: round {last})")
    return (f"⚠️ Heartbeat: {agent} {why}. They may be stuck — check in with them or use "
            f"<release_task id=\"{task}\" /> to reassign.")


def parse_heartbeat(text: str) -> dict | None:
    """``agent``, ``task`` and ``rounds`` of a heartbeat alert."""
    if m := _HEARTBEAT.match(text):
        return {"agent": m.group(1), "task": m.group(4), "rounds": int(m.group(3))}
    return None


# ---------------------------------------------------------------------- task notifications ----
_ASSIGNED = re.compile(r"^You have been assigned task '([^']+)': ([^\n]*)\n?(.*)$", re.DOTALL)
_TASK_NOW = re.compile(r"^Your task '([^']+)' is now (\w+)")
_TASK_GONE = re.compile(r"^Task '([^']+)' was (released|closed) by")


def render_assigned(task: str, title: str, description: str) -> str:
    """The Lead's message to the worker it assigned ``task``."""
    return f"You have been assigned task '{task}': {title}\n{description or ''}"


def parse_assigned(text: str) -> dict | None:
    if m := _ASSIGNED.match(text):
        return {"id": m.group(1), "title": m.group(2), "description": m.group(3).strip()}
    return None


def render_task_update(task: str, status: str, new_deps: Sequence[str] = (),
                       deps_done: Sequence[str] = ()) -> str:
    """A worker's task changed in the graph: its status, the dependencies it gained and the ones that
    finished since the worker last looked."""
    text = f"Your task '{task}' is now {status}."
    if new_deps:
        text += f" It now also waits for: {', '.join(new_deps)}."
    if deps_done:
        text += f" Finished since you last looked: {', '.join(deps_done)}."
    return text


def parse_task_update(text: str) -> tuple[str, str] | None:
    """(task, status)."""
    m = _TASK_NOW.match(text)
    return (m.group(1), m.group(2)) if m else None


def render_task_released(task: str, by: str) -> str:
    return f"Task '{task}' was released by {by}; it is back in the pool."


def render_task_closed(task: str, by: str) -> str:
    return f"Task '{task}' was closed by {by}."


def parse_task_gone(text: str) -> tuple[str, str] | None:
    """(task, "released" or "closed") when the worker's task was taken from it."""
    m = _TASK_GONE.match(text)
    return (m.group(1), m.group(2)) if m else None


def task_taken(text: str, task: str) -> bool:
    """Whether the text says ``task`` was released or closed (anywhere in it)."""
    return f"Task '{task}' was" in text


def render_duplicate_task(task: str) -> str:
    """A discovery refused because the id is taken."""
    return f"⚠️ Task id '{task}' already exists; choose a new id."


def duplicate_task(text: str, task: str) -> bool:
    """Whether the text says a discovery of ``task`` was refused as a duplicate."""
    return f"Task id '{task}' already exists" in text


# ------------------------------------------------------------------------- refused claims ----
_CLAIM_REFUSED = re.compile(r"Claim of '([^']+)' rejected")
SELF_CLAIM_OFF = "⚠️ Self-assignment is not available in this run. Wait for the lead to assign tasks."
# What a prompt says when workers may not take unassigned tasks themselves: SELF_CLAIM_OFF, and the
# wording of the system prompts in latte_lab/teams/prompts/ (static_worker.txt)
NO_SELF_CLAIM_PHRASES = ("cannot pick unassigned tasks", "Self-assignment is not available", "do not self-assign")


def render_claim_busy(task: str, current: str) -> str:
    """A claim refused because the worker is on another task."""
    return f"⚠️ Claim of '{task}' rejected: you are working on '{current}'. Complete it first."


def render_claim_lost(task: str, reason: str) -> str:
    """A claim the graph refused (another worker took the task first, most often)."""
    return f"⚠️ Claim of '{task}' rejected: {reason}. Pick another ready task."


def parse_claims_refused(text: str) -> list[str]:
    """The tasks whose claims the text says were refused, in order."""
    return [m.group(1) for m in _CLAIM_REFUSED.finditer(text)]


def claim_refused(text: str, task: str) -> bool:
    """Whether the text says a claim of ``task`` was refused."""
    return f"Claim of '{task}' rejected" in text


def forbids_self_claim(text: str) -> bool:
    """Whether the text tells workers not to take unassigned tasks themselves."""
    return any(phrase in text for phrase in NO_SELF_CLAIM_PHRASES)


# ----------------------------------------------------------------------- published documents ----
_DOC = re.compile(r"^\[([a-z_]+)\]\n(.*)$", re.DOTALL)
_NEXT_FILE = re.compile(r"^Next file of the task list: (\S+)")


def render_document(topic: str, text: str) -> str:
    """A document published under ``topic`` (the pipeline team)."""
    return f"[{topic}]\n{text}"


def parse_document(text: str) -> tuple[str, str] | None:
    """(topic, text)."""
    m = _DOC.match(text)
    return (m.group(1), m.group(2)) if m else None


def render_next_file(path: str | None) -> str:
    """The pipeline Engineer's next file, or the note that every file is written."""
    if path:
        return f"Next file of the task list: {path}"
    return "Every file of the task list is written; publish <publish topic=\"code_complete\">summary</publish>."


def parse_next_file(text: str) -> str | None:
    m = _NEXT_FILE.match(text)
    return m.group(1) if m else None


# --------------------------------------------------------------------------- refused edits ----
_EDIT_REFUSED = re.compile(r"^⚠️ Edit to (?:existing file )?'([^']+)' (?:refused|blocked|was not written)")


def render_edit_locked(path: str, owner: str) -> str:
    return f"⚠️ Edit to '{path}' blocked: {owner} already wrote this file this round. Retry next round."


def render_edit_refused(path: str, error: str) -> str:
    return f"⚠️ Edit to '{path}' refused: {error}"


def render_edit_needs_task(path: str) -> str:
    return f"⚠️ Edit to existing file '{path}' blocked: claim a task before modifying project files."


def parse_edit_refused(text: str) -> str | None:
    """The path of an edit that was not written."""
    m = _EDIT_REFUSED.match(text)
    return m.group(1) if m else None
