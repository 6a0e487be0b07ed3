"""Protocol tests of the Leader-Worker, decentralized and pipeline teams with scripted replies."""

from __future__ import annotations

import pytest
from trial_helpers import WAIT, of, requests_of, script

import latte_lab as ll
from latte_lab.models.scripted import ScriptedModel
from latte_lab.trial import run_trial

SOL = None


def solution(task="debug"):
    return ll.tasks.get(task).reference_solution()


def edit_all(task="debug") -> str:
    return "".join(f'<edit_file path="{p}">{c}</edit_file>' for p, c in solution(task).items())




def run(tmp_path, model, team, rounds=6, task="debug", **kw):
    cfg = ll.TrialConfig(task=task, team=team, model="scripted", max_rounds=rounds,
                         runs_dir=str(tmp_path / "runs"), **kw)
    res = run_trial(cfg, model=model)
    assert res.status == "ok", res.error
    return res






# ---------------------------------------------------------------- Leader-Worker


def test_leader_worker_order_context_and_certified_success(tmp_path):
    model = script({
        "Lead": {0: "<broadcast>Dev1: fix everything in signal_toolkit.py</broadcast>", 2: "<certify_complete />"},
        "Dev1": {1: edit_all()},
    })
    res = run(tmp_path, model, "leader_worker")
    # who acts: the Lead first, then every worker, every round
    for e in of(res, "round_dispatch"):
        assert e["agents"] == ["Lead", "Dev1", "Dev2", "Dev3", "Dev4"]
        assert (e["n_dispatched"], e["n_total"]) == (5, 5)
        assert (e["n_dispatched_released"], e["n_total_released"]) == (4, 5)
    replies = [e["agent"] for e in of(res, "agent_reply", round=1)]
    assert replies[0] == "Lead"
    # the Lead's broadcast reaches the workers in the same round (the Lead acts first)
    assert "Dev1: fix everything" in requests_of(model, "Dev1")[0].messages[-1].content
    # the latest test output is injected at the start of each agent's step from round 2 on
    assert "CURRENT TEST STATUS" not in requests_of(model, "Dev2")[0].messages[-1].content
    for agent in ("Lead", "Dev2"):
        assert "=== CURRENT TEST STATUS (round 2) ===" in requests_of(model, agent)[1].messages[-1].content
    assert requests_of(model, "Lead")[2].view.tests_passed is True
    # tests green after round 2 but success needs the Lead's certification (round 3)
    assert res.success and res.rounds == 3 and res.reason == "certified"
    assert of(res, "certify_complete", agent="Lead", accepted=True)
    # the orchestrator ran the tests after every round
    assert [e["round"] for e in of(res, "run_tests", agent="System")].count(1) == 1
    assert res.metrics["idle_fraction"] == 0 and res.metrics["idle_fraction_released"] == pytest.approx(0.2)


def test_leader_worker_certification_refused_while_red(tmp_path):
    model = script({"Lead": {0: "<certify_complete />"}})
    res = run(tmp_path, model, "leader_worker", rounds=2)
    assert of(res, "certify_complete", accepted=False) and not res.success
    assert "Completion not accepted" in requests_of(model, "Lead")[1].messages[-1].content


def test_leader_worker_tests_alone_switch(tmp_path):
    model = script({"Dev1": {0: edit_all()}})
    res = run(tmp_path, model, "leader_worker", flat_success="tests")
    assert res.success and res.rounds == 1 and res.reason == "tests_passed"


def test_leader_worker_read_file_switch(tmp_path):
    model = script({"Dev1": {0: '<read_file path="signal_toolkit.py" />'}})
    run(tmp_path, model, "leader_worker", rounds=2)
    assert "=== signal_toolkit.py ===" in requests_of(model, "Dev1")[1].messages[-1].content
    model = script({"Dev1": {0: '<read_file path="signal_toolkit.py" />'}})
    res = run(tmp_path, model, "leader_worker", rounds=2, read_file_in_flat=False)
    assert of(res, "read_file_ignored") and "=== signal_toolkit.py ===" not in requests_of(model, "Dev1")[1].messages[-1].content


def test_leader_worker_lead_cannot_edit(tmp_path):
    model = script({"Lead": {0: edit_all()}})
    res = run(tmp_path, model, "leader_worker", rounds=1)
    assert of(res, "operator_blocked", agent="Lead", operator="edit_file") and not of(res, "edit_file")


# ---------------------------------------------------------------- decentralized


def test_decentralized_peers_broadcast_and_any_peer_certifies(tmp_path):
    model = script({
        "Dev3": {0: "<broadcast>I'm taking rms</broadcast>", 1: edit_all()},
        "Dev5": {2: "<certify_complete />"},
    })
    res = run(tmp_path, model, "decentralized")
    for e in of(res, "round_dispatch"):
        assert e["agents"] == ["Dev1", "Dev2", "Dev3", "Dev4", "Dev5"] and e["n_total"] == 5
    assert "Lead" not in {e["agent"] for e in of(res, "agent_reply")}
    # peers act in parallel: a broadcast is seen in the next round, not the same one
    assert "I'm taking rms" not in requests_of(model, "Dev1")[0].messages[-1].content
    assert "I'm taking rms" in requests_of(model, "Dev1")[1].messages[-1].content
    assert res.success and res.rounds == 3 and of(res, "certify_complete", agent="Dev5", accepted=True)
    assert res.metrics["idle_fraction"] == 0


def test_decentralized_without_certification_runs_to_the_budget(tmp_path):
    model = script({"Dev1": {0: edit_all()}})
    res = run(tmp_path, model, "decentralized", rounds=3)
    assert not res.success and res.reason == "max_rounds" and res.rounds == 3


# ---------------------------------------------------------------- pipeline


def _pipeline_script(task="debug", *, design_again=False, qa_fix_round=None):
    files = list(solution(task))
    eng = {}
    for i, f in enumerate(files):  # one file per turn, in order
        eng[i] = f'<edit_file path="{f}">{solution(task)[f]}</edit_file>'
    return script({
        "ProductManager": {0: '<publish topic="requirements">Make the tests pass.</publish>'},
        "Architect": {0: f'<publish topic="design">Files: {", ".join(files)}</publish>'},
        "ProjectManager": {0: '<publish topic="tasks">' + "\n".join(f"{k+1}. {f}" for k, f in enumerate(files))
                              + "</publish>" + ('<publish topic="design">changed my mind</publish>' if design_again else "")},
        "Engineer": eng,
        "QAEngineer": {0: "<run_tests />"},
    })


def test_pipeline_phase_order_and_fixed_decomposition(tmp_path):
    model = _pipeline_script(design_again=True)
    res = run(tmp_path, model, "pipeline", rounds=10)
    phases = [e["phase"] for e in of(res, "phase_start")]
    assert phases == ["requirements", "design", "tasks", "implementation", "qa"]
    order = [e["agents"] for e in of(res, "round_dispatch")]
    assert order[:4] == [["ProductManager"], ["Architect"], ["ProjectManager"], ["Engineer"]]
    assert order[4] == ["QAEngineer"]
    # revisions within the task-list phase are allowed (refusals after it: next test)
    assert of(res, "operator_blocked", agent="ProjectManager", operator="publish", reason="plan_fixed") == []
    assert res.success and res.reason == "tests_passed"
    # the bus delivers by topic: the Architect saw the requirements, the Engineer the task list
    assert "Make the tests pass." in requests_of(model, "Architect")[0].messages[-1].content
    assert "signal_toolkit.py" in requests_of(model, "Engineer")[0].view.extra["documents"]["tasks"]


def test_pipeline_refuses_replanning_after_the_task_list(tmp_path):
    model = script({
        "ProductManager": {0: '<publish topic="requirements">R</publish>'},
        "Architect": {0: '<publish topic="design">D: signal_toolkit.py</publish>'},
        "ProjectManager": {0: '<publish topic="tasks">1. signal_toolkit.py</publish>'},
        "Engineer": {0: '<publish topic="design">new design</publish>'},
    })
    res = run(tmp_path, model, "pipeline", rounds=5)
    assert of(res, "operator_blocked", agent="Engineer", operator="publish", reason="plan_fixed")


def test_pipeline_engineer_writes_one_file_per_turn(tmp_path):
    model = script({
        "ProductManager": {0: '<publish topic="requirements">R</publish>'},
        "Architect": {0: '<publish topic="design">D</publish>'},
        "ProjectManager": {0: '<publish topic="tasks">1. a.py\n2. b.py</publish>'},
        "Engineer": {0: '<edit_file path="a.py">x = 1</edit_file><edit_file path="b.py">y = 2</edit_file>',
                     1: '<edit_file path="b.py">y = 2</edit_file>'},
    })
    res = run(tmp_path, model, "pipeline", rounds=6)
    assert [e["path"] for e in of(res, "edit_file")] == ["a.py", "b.py"]
    assert of(res, "edit_blocked", reason="one_file_per_action")
    assert requests_of(model, "Engineer")[1].view.extra["next_file"] == "b.py"


def test_pipeline_qa_loop_is_bounded(tmp_path):
    model = script({
        "ProductManager": {0: '<publish topic="requirements">R</publish>'},
        "Architect": {0: '<publish topic="design">D</publish>'},
        "ProjectManager": {0: '<publish topic="tasks">1. signal_toolkit.py</publish>'},
        "Engineer": {0: '<publish topic="code_complete">done</publish>'},
        "QAEngineer": {k: '<run_tests /><publish topic="bug_report">rms is wrong</publish>' for k in range(10)},
    })
    res = run(tmp_path, model, "pipeline", rounds=20)
    assert res.reason == "qa_rounds_exhausted" and not res.success
    assert len([e for e in of(res, "round_dispatch") if "QAEngineer" in e["agents"]]) == 5
    # each bug report is answered by the Engineer in the same round
    assert all(e["agents"] == ["QAEngineer", "Engineer"] for e in of(res, "round_dispatch")[4:])
    assert "rms is wrong" in requests_of(model, "Engineer")[1].messages[-1].content


# ---------------------------------------------------------------- every team on every task


def _generic_policy(task_id):
    task = ll.tasks.get(task_id)
    sol = task.reference_solution()
    edits = "".join(f'<edit_file path="{p}">{c}</edit_file>' for p, c in sol.items())
    files = list(sol)

    def policy(req):
        v = req.view
        role = v.role
        if role == "lead" and v.phase == "planning":
            tag = "discover_task" if "run_tests" in v.allowed_actions else "plan_task"
            return f'<{tag} id="all" title="Do the project">Everything.</{tag}>'
        if role == "lead" and "assign_task" in v.allowed_actions:
            idle = [w for w, t in v.extra["workers"].items() if t is None]
            pending = [n for n in v.graph if n["status"] == "pending"]
            return "".join(f'<assign_task id="{n["id"]}" to="{w}" />' for n, w in zip(pending, idle)) or WAIT
        if role == "lead":
            return "<certify_complete />" if v.tests_passed else "<broadcast>Dev1: do everything</broadcast>"
        if role == "worker" and "claim_task" in v.allowed_actions:
            t = v.current_task
            if t is None:
                return WAIT
            if t["status"] == "assigned":
                return f'<claim_task id="{t["id"]}" />'
            return edits + f'<complete_task id="{t["id"]}" />'
        if role in ("worker", "peer"):
            if v.agent == "Dev1" and not v.tests_passed:
                return edits
            return "<certify_complete />" if (role == "peer" and v.tests_passed) else WAIT
        if role == "product_manager":
            return '<publish topic="requirements">R</publish>'
        if role == "architect":
            return '<publish topic="design">D</publish>'
        if role == "project_manager":
            return '<publish topic="tasks">' + "\n".join(files) + "</publish>"
        if role == "engineer":
            nxt = v.extra.get("next_file")
            return f'<edit_file path="{nxt}">{sol[nxt]}</edit_file>' if nxt else '<publish topic="code_complete">ok</publish>'
        if role == "qa":
            return "<run_tests />"
        return WAIT

    return ScriptedModel(policy)


@pytest.mark.parametrize("team", ["latte", "static", "leader_worker", "decentralized", "pipeline"])
@pytest.mark.parametrize("task", ["debug", "eda", "textproc"])
def test_every_team_runs_every_task_to_a_result(tmp_path, team, task):
    res = run(tmp_path, _generic_policy(task), team, rounds=12, task=task)
    assert res.success, (res.reason, [e for e in res.event_list if e["type"] in ("operator_blocked", "parse_error")])
    assert res.accuracy == 1.0
    assert res.row["team"] == team and res.row["task"] == task and res.row["status"] == "ok"
    assert (res.run_dir / "result.json").exists() and (res.run_dir / "calls.jsonl").exists()
