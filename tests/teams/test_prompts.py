"""latte_lab.prompts: every block of prompt text reads back as it was rendered, and the headers are
worded in one place only (rewording one changes nothing the simulated model decides)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import latte_lab as ll
from latte_lab import prompts as P
from latte_lab.models.base import AgentView, Message
from latte_lab.models.view import view_from_prompt

# Text of the shapes the teams put in each field: ids without spaces or colons, one-line titles, and
# descriptions of one or more lines without surrounding blanks.
IDS = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)
AGENTS = st.from_regex(r"(Dev[1-9]|Lead|Alice)", fullmatch=True)
WORDS = st.from_regex(r"[A-Za-z0-9.,!?_+*/=-]{1,8}", fullmatch=True)
LINES = st.lists(WORDS, min_size=1, max_size=5).map(" ".join)
TEXT = st.lists(LINES, max_size=4).map("\n".join)
PATHS = st.from_regex(r"[a-z_]{1,8}(/[a-z_]{1,6})?\.py", fullmatch=True)
SYMBOLS = st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,8}", fullmatch=True), max_size=3, unique=True)
ROUNDTRIP = settings(max_examples=60, deadline=None)


@ROUNDTRIP
@given(st.lists(st.tuples(AGENTS, TEXT), max_size=4))
def test_turn_roundtrip(buffer):
    assert P.segments(P.render_turn(buffer)) == (buffer or [(P.SYSTEM, P.CONTINUE)])


@ROUNDTRIP
@given(LINES, TEXT, TEXT, st.lists(PATHS, max_size=4), st.dictionaries(AGENTS, st.none() | IDS, min_size=1, max_size=4))
def test_project_and_team_status_roundtrip(title, description, criteria, files, team):
    assert P.parse_project(P.render_project(title, description, criteria, files)) == {
        "title": title, "description": description, "criteria": criteria, "files": files}
    assert P.parse_team_status(P.render_team_status(team)) == team


@ROUNDTRIP
@given(PATHS, st.text(st.characters(blacklist_characters="[", blacklist_categories=("Cs",))),
       st.integers(0, 10**6))
def test_file_roundtrip(path, shown, hidden):
    assert P.parse_file(P.render_file(path, shown, hidden)) == (path, shown)
    assert P.parse_file_not_found(P.render_file_not_found(path, "no such file")) == path


@ROUNDTRIP
@given(st.booleans(), st.lists(st.tuples(PATHS, IDS), max_size=3), LINES, st.lists(LINES, max_size=2),
       st.sampled_from([None, "30 s", "its time limit"]), st.integers(0, 40))
def test_tests_roundtrip(passed, failing, summary, notes, timed_out, round):
    output = "\n".join([*(f"FAILED {p}::{t} - assert 0" for p, t in failing), summary])
    ids = tuple(dict.fromkeys(f"{p}::{t}" for p, t in failing))
    text = P.render_tests(passed, output, notes, timed_out)
    assert P.parse_tests(text) == (text, passed) and P.failures_in(text) == ids
    for wrapped in (P.render_test_status(round, text),):
        assert P.parse_tests(wrapped) == (wrapped, passed)
    for red in (P.render_fix_note("fix-tests", output), P.render_not_accepted(text)):
        assert P.parse_tests(red) == (red, False) and P.failures_in(red) == ids


@ROUNDTRIP
@given(TEXT, st.integers(-9, 9), st.lists(LINES, max_size=2), TEXT, st.sampled_from([None, "5 s"]), PATHS)
def test_script_roundtrip(stdout, code, notes, stderr, timed_out, path):
    text = P.render_script(stdout, code, notes, stderr, timed_out)
    assert P.parse_script(text) == text and P.parse_tests(text) is None
    assert P.parse_script(P.render_script_error(path, "not a file")) is not None
    assert P.parse_script(stdout) is None


PREDECESSORS = st.lists(st.fixed_dictionaries({
    "id": IDS, "title": LINES, "status": st.sampled_from(["pending", "in_progress", "done", "verified"]),
    "done_by": st.none() | AGENTS, "files": st.dictionaries(PATHS, SYMBOLS, max_size=3), "description": TEXT,
}), max_size=3)
TASKS = st.fixed_dictionaries({"id": IDS, "status": st.sampled_from(["assigned", "in_progress"]), "title": LINES,
                               "description": TEXT}, optional={"predecessors": PREDECESSORS})


@ROUNDTRIP
@given(TASKS)
def test_task_roundtrip(task):
    if task.get("predecessors") == []:  # no predecessors: nothing is shown, and nothing reads back
        del task["predecessors"]
    assert P.parse_task(P.render_task(task)) == task


@ROUNDTRIP
@given(PREDECESSORS)
def test_predecessors_roundtrip(preds):
    text = P.render_predecessors(preds)
    assert P.parse_predecessors(text.split("\n")[2:]) == preds


@ROUNDTRIP
@given(st.lists(st.fixed_dictionaries({"id": IDS, "title": LINES, "description": st.just("") | LINES}), max_size=4))
def test_ready_roundtrip(frontier):
    assert P.parse_ready(P.render_ready(frontier)) == frontier


GRAPHS = st.fixed_dictionaries({
    "done_count": st.integers(0, 30),
    "nodes": st.lists(st.fixed_dictionaries({
        "id": IDS, "title": LINES, "status": st.sampled_from(sorted(P.STATUS_ICON)), "owner": st.none() | AGENTS,
        "deps": st.lists(IDS, max_size=3)}), max_size=5),
    "ready": st.lists(st.fixed_dictionaries({"id": IDS, "title": LINES}), max_size=3),
    "workers": st.dictionaries(AGENTS, st.none() | IDS, max_size=4),
    "critical_path": st.lists(IDS, max_size=4),
})


@ROUNDTRIP
@given(GRAPHS)
def test_graph_roundtrip(graph):
    assert P.parse_graph(P.render_graph(graph)) == graph


@ROUNDTRIP
@given(AGENTS, IDS, st.integers(0, 99), st.integers(0, 99), st.sampled_from(["paper", "activity"]))
def test_heartbeat_roundtrip(agent, task, rounds, last, rule):
    text = P.render_heartbeat(agent, task, rounds, last, rule)
    assert P.parse_heartbeat(text) == {"agent": agent, "task": task, "rounds": rounds}


@ROUNDTRIP
@given(IDS, LINES, TEXT, st.sampled_from(["assigned", "in_progress", "pending"]), st.lists(IDS, max_size=2), AGENTS)
def test_task_notifications_roundtrip(task, title, description, status, deps, by):
    assert P.parse_assigned(P.render_assigned(task, title, description)) == {
        "id": task, "title": title, "description": description}
    assert P.parse_task_update(P.render_task_update(task, status, deps)) == (task, status)
    assert P.parse_task_gone(P.render_task_released(task, by)) == (task, "released")
    assert P.parse_task_gone(P.render_task_closed(task, by)) == (task, "closed")


@ROUNDTRIP
@given(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), st.text(), PATHS, AGENTS)
def test_documents_files_and_edits_roundtrip(topic, text, path, owner):
    assert P.parse_document(P.render_document(topic, text)) == (topic, text)
    assert P.parse_next_file(P.render_next_file(path)) == path
    assert P.parse_next_file(P.render_next_file(None)) is None
    for refusal in (P.render_edit_locked(path, owner), P.render_edit_refused(path, "outside the workspace"),
                    P.render_edit_needs_task(path)):
        assert P.parse_edit_refused(refusal) == path


@ROUNDTRIP
@given(st.lists(IDS, max_size=3), IDS, LINES, st.booleans())
def test_refusals_read_back(lost, other, reason, busy):
    texts = [P.render_claim_busy(n, other) if busy else P.render_claim_lost(n, reason) for n in lost]
    assert P.parse_claims_refused(P.render_turn(("System", t) for t in texts)) == lost
    assert all(P.claim_refused(t, n) for t, n in zip(texts, lost, strict=True))
    assert P.duplicate_task(P.render_duplicate_task(other), other)
    assert P.task_taken(P.render_task_released(other, "Lead"), other)
    assert P.task_taken(P.render_task_closed(other, "Lead"), other)
    assert P.says_tests_still_fail(P.render_fix_note(other, reason))
    assert P.says_tests_still_fail(P.render_not_accepted(P.render_tests(False, reason)))


def test_the_teams_that_forbid_self_claims_say_so_in_words_the_model_reads():
    from latte_lab.teams.prompt_text import prompt

    assert P.forbids_self_claim(P.SELF_CLAIM_OFF)
    assert P.forbids_self_claim(prompt("static_worker", agent="Dev1"))
    assert not P.forbids_self_claim(prompt("latte_worker", agent="Dev1"))


# ----- one place for the wording -----
# Each header reworded with its length kept (a simulated reply's latency follows the prompt's length).
REWORDED = {
    "READY_HEADER": "=== available tasks (READY TO CLAIM) ===",
    "NO_READY": "NO TASKS ARE CURRENTLY AVAILABLE. Wait for dependencies to complete.",
    "TASK_HEADER": "=== your current task ===",
    "PREDECESSORS_HEADER": "=== its prerequisites (DIRECT PREDECESSORS) ===",
    "GRAPH_HEADER": "=== current tasks ===",
    "GRAPH_READY_HEADER": "=== ready to assign (DEPS SATISFIED) ===",
    "GRAPH_TEAM_HEADER": "=== team ===",
    "CRITICAL_PATH": "CRITICAL PATH: ",
    "TESTS_PASSED": "✅ TESTS PASSED!",
    "TESTS_FAILED": "❌ TESTS FAILED:",
}


def reword(monkeypatch) -> None:
    for name, text in REWORDED.items():
        assert text != getattr(P, name) and len(text) == len(getattr(P, name)), name
        monkeypatch.setattr(P, name, text)


def decisions(res) -> list[tuple]:
    """What the agents decided and how it ended: every graph operator and edit, in order."""
    kinds = ("discover_task", "assign_task", "claim_task", "complete_task", "release_task", "close_task",
             "edit_file", "run_tests", "round_dispatch")
    keep = ("agent", "task", "assignee", "path", "round", "agents", "passed")
    return [(e["type"], *(e.get(k) for k in keep)) for e in res.event_list if e["type"] in kinds] + [
        (res.success, res.accuracy, res.rounds)]


def test_a_reworded_header_reads_back_in_the_view(monkeypatch):
    reword(monkeypatch)
    frame = AgentView(task="demo", role="worker", agent="Dev1")
    ready = P.render_ready([{"id": "a", "title": "Parse", "description": "read it"}])
    assert ready.startswith("=== available tasks")
    v = view_from_prompt(frame, "s", [Message("user", P.render_turn([("System", ready)]))])
    assert v.frontier == [{"id": "a", "title": "Parse", "description": "read it"}]
    task = P.render_task({"id": "b", "status": "assigned", "title": "Fix", "description": "Do it.",
                          "predecessors": [{"id": "a", "title": "Parse", "status": "done", "done_by": "Dev2",
                                            "files": {"p.py": ["f"]}, "description": "read it"}]})
    tests = P.render_tests(False, "FAILED t.py::test_x - boom\n1 failed")
    v = view_from_prompt(frame, "s", [Message("user", P.render_turn([("System", task), ("System", tests)]))])
    assert v.current_task["id"] == "b" and v.current_task["predecessors"][0]["files"] == {"p.py": ["f"]}
    assert v.test_failures == ("t.py::test_x",) and v.tests_passed is False
    graph = P.render_graph({"done_count": 1, "nodes": [{"id": "b", "title": "Fix", "status": "assigned",
                                                        "owner": "Dev1", "deps": []}],
                            "ready": [{"id": "c", "title": "Docs"}], "workers": {"Dev1": "b"},
                            "critical_path": ["b"]})
    v = view_from_prompt(frame, "s", [Message("user", P.render_turn([("System", graph)]))])
    assert [n["id"] for n in v.graph] == ["b"] and v.extra["ready"] == ["c"] and v.extra["critical_path"] == ["b"]


@pytest.mark.parametrize("team", ["latte", "static"])
def test_rewording_the_headers_changes_no_decision_of_the_simulated_model(tmp_path, monkeypatch, team):
    def run(out):
        return ll.run_trial(ll.TrialConfig(task="debug", team=team, model="simulated", seed=0, sandbox="local",
                                           runs_dir=str(out)))

    before = run(tmp_path / "plain")
    original = {name: getattr(P, name) for name in REWORDED}
    reword(monkeypatch)
    after = run(tmp_path / "reworded")
    prompts_of = {r: "".join(p.read_text() for p in sorted((tmp_path / r).rglob("calls.jsonl")))
                  for r in ("plain", "reworded")}
    for header in ("TASK_HEADER", "GRAPH_HEADER"):  # the prompts did change
        assert REWORDED[header] in prompts_of["reworded"] and original[header] not in prompts_of["reworded"]
        assert original[header] in prompts_of["plain"]
    assert decisions(after) == decisions(before)
