"""Protocol tests of the LATTE and static teams with scripted replies (no simulated model involved)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from trial_helpers import WAIT, by_round, discover, of, requests_of, script

import latte_lab as ll
from latte_lab import prompts
from latte_lab.models.scripted import ScriptedModel
from latte_lab.trial import VOLATILE_ROW_FIELDS, comparable_events, comparable_row, load_trial, replay, run_trial


def run(tmp_path, model, team="latte", rounds=8, **kw):
    cfg = ll.TrialConfig(task="debug", team=team, model="scripted", seed=0, max_rounds=rounds,
                         runs_dir=str(tmp_path / "runs"), **kw)
    res = run_trial(cfg, model=model)
    assert res.status == "ok", res.error
    return res






def last_user_text(req) -> str:
    return req.messages[-1].content


# ---------------------------------------------------------------- heartbeat and Lead invocation


def test_lead_idle_limit_invokes_after_h_skipped_rounds(tmp_path):
    model = script({"Lead": {0: discover(("a", ""))}})
    res = run(tmp_path, model, rounds=11)
    invoked = {e["round"]: e["reasons"] for e in of(res, "lead_invoked")}
    assert invoked == {5: ["idle_limit"], 10: ["idle_limit"]}  # idle since planning: rounds 1-4, then 6-9
    assert [e["consecutive_skips"] for e in of(res, "lead_skipped")][:4] == [1, 2, 3, 4]


# ---------------------------------------------------------------- dispatch


def test_dispatch_busy_plus_min_frontier_idle(tmp_path):
    model = script({
        "Lead": {0: discover(("a", ""), ("b", ""), ("c", "a"))},
        "Dev1": {0: '<claim_task id="a" />'},
    })
    res = run(tmp_path, model, rounds=3)
    d = {e["round"]: e for e in of(res, "round_dispatch")}
    # round 1: frontier {a, b}, 4 idle workers -> Dev1, Dev2 dispatched (the Lead: nothing changed yet)
    assert d[1]["n_dispatched"] == 2 and d[1]["agents"] == ["Dev1", "Dev2"]
    # round 2: Dev1 busy with a (new to it), frontier {b} -> one idle worker; the claim invoked the Lead
    assert d[2]["agents"] == ["Lead", "Dev1", "Dev2"] and d[2]["n_dispatched"] == 2 and d[2]["n_total"] == 4
    # round 3: Dev1 has nothing new; b is still ready for Dev2
    assert d[3]["agents"] == ["Dev2"]


# ---------------------------------------------------------------- claims, verify, release


def test_contested_claim_one_winner_and_error_to_loser(tmp_path):
    model = script({
        "Lead": {0: discover(("a", ""), ("b", ""))},
        "Dev1": {0: '<claim_task id="a" />'},
        "Dev2": {0: '<claim_task id="a" />'},
    })
    res = run(tmp_path, model, rounds=2)
    assert [e["agent"] for e in of(res, "claim_task", task="a")] == ["Dev1"]
    blocked = of(res, "claim_blocked", task="a")
    assert [e["agent"] for e in blocked] == ["Dev2"]
    dev2_next = requests_of(model, "Dev2")[1]
    assert "Claim of 'a' rejected" in last_user_text(dev2_next)
    assert dev2_next.view.current_task is None


def test_contested_claim_arrival_order_gives_no_message(tmp_path):
    model = script({
        "Lead": {0: discover(("a", ""), ("b", ""))},
        "Dev1": {0: '<claim_task id="a" />'},
        "Dev2": {0: '<claim_task id="a" />'},
    })
    res = run(tmp_path, model, rounds=2, claim_resolution="arrival")
    assert len(of(res, "claim_task", task="a")) == 1
    dev2_next = requests_of(model, "Dev2")[1]
    assert "rejected" not in last_user_text(dev2_next)


def test_verify_holds_back_downstream_until_review_completes(tmp_path):
    model = script({
        "Lead": {0: discover(("a", ""), ("b", "a")), 2: '<verify_task id="a" />'},
        "Dev1": {0: '<claim_task id="a" />', 1: '<complete_task id="a" />', 2: '<claim_task id="a-verify" />',
                 3: '<complete_task id="a-verify" />', 4: '<claim_task id="b" />'},
    })
    res = run(tmp_path, model, rounds=6)
    snaps = {s["round"]: {n["id"]: n for n in s["graph"]["nodes"]} for s in res.snapshots}
    created = of(res, "create_verify_node")
    assert created and created[0]["successors_rerouted"] == ["b"] and created[0]["round"] == 3
    assert snaps[3]["a-verify"]["status"] in ("pending", "in_progress")
    assert snaps[3]["b"]["status"] == "pending"
    frontier_r3 = [n["id"] for n in requests_of(model, "Dev1")[2].view.frontier]
    assert "b" not in frontier_r3 and "a-verify" in frontier_r3
    assert of(res, "task_verified", task="a")
    verified_round = of(res, "task_verified", task="a")[0]["round"]
    assert snaps[verified_round]["a"]["status"] == "verified"
    assert of(res, "claim_task", task="b", agent="Dev1")  # b became claimable only after the review


def test_release_returns_node_to_frontier(tmp_path):
    model = by_round({"Lead": {0: discover(("a", "")), 2: '<release_task id="a" />'},
                      "Dev1": {1: '<claim_task id="a" />'}})
    res = run(tmp_path, model, rounds=3)
    rel = of(res, "release_task", task="a")  # the Lead ran in round 2 because of the claim
    assert rel and rel[0]["prev_owner"] == "Dev1" and rel[0]["round"] == 2
    snap2 = {n["id"]: n for n in res.snapshots[2]["graph"]["nodes"]}
    assert snap2["a"]["status"] == "pending" and snap2["a"]["agent"] is None
    dev1_after = [r for r in requests_of(model, "Dev1") if r.view.round == 2][0]
    assert dev1_after.view.current_task is None
    assert any(n["id"] == "a" for n in dev1_after.view.frontier)
    assert "released" in last_user_text(dev1_after)


# ---------------------------------------------------------------- termination


def test_red_tests_after_all_done_add_fix_task_in_latte(tmp_path):
    model = script({
        "Lead": {0: discover(("a", ""))},
        "Dev1": {0: '<claim_task id="a" />', 1: '<complete_task id="a" />'},
    })
    res = run(tmp_path, model, rounds=4)
    fix = of(res, "fix_task_injected")
    assert fix and fix[0]["task"] == "fix-failing-tests" and fix[0]["round"] == 2
    assert of(res, "discover_task", task="fix-failing-tests")[0]["dependencies"] == ["a"]
    assert res.reason == "max_rounds" and not res.success
    frontier_r3 = [n["id"] for n in [r for r in requests_of(model, "Dev1") if r.view.round == 3][0].view.frontier]
    assert frontier_r3 == ["fix-failing-tests"]


def test_red_tests_after_all_done_end_static_trial(tmp_path):
    model = script({
        "Lead": {0: discover(("a", "")).replace("discover_task", "plan_task"), 1: '<assign_task id="a" to="Dev1" />'},
        "Dev1": {0: '<claim_task id="a" />', 1: '<complete_task id="a" />'},
    })
    res = run(tmp_path, model, team="static", rounds=6)
    assert res.reason == "tests_failed" and not res.success and res.rounds == 2
    assert of(res, "fix_task_injected") == []


def test_green_tests_after_all_done_end_with_success(tmp_path):
    sol = ll.tasks.get("debug").reference_solution()["signal_toolkit.py"]
    model = script({
        "Lead": {0: discover(("a", ""))},
        "Dev1": {0: '<claim_task id="a" />',
                 1: f'<edit_file path="signal_toolkit.py">{sol}</edit_file><complete_task id="a" />'},
    })
    res = run(tmp_path, model, rounds=5)
    assert res.success and res.reason == "all_tasks_done" and res.rounds == 2 and res.accuracy == 1.0
    assert res.row["success"] is True and res.row["total_tasks"] == 1 and res.row["tasks_done"] == 1


def test_static_rejects_discovery_claims_release_verify_after_planning(tmp_path):
    model = script({
        "Lead": {0: discover(("a", ""), ("b", "")).replace("discover_task", "plan_task"),
                 1: '<discover_task id="c" title="More">x</discover_task><release_task id="a" />'
                    '<verify_task id="a" /><assign_task id="b" to="Dev2" />'},
        "Dev1": {0: '<claim_task id="a" />'},
        "Dev2": {0: '<discover_task id="d" title="Mine">y</discover_task>'},
    })
    res = run(tmp_path, model, team="static", rounds=6)
    assert of(res, "claim_blocked", agent="Dev1", task="a", reason="static_graph")
    blocked_ops = {(e["agent"], e["operator"]) for e in of(res, "operator_blocked")}
    assert ("Lead", "discover_task") in blocked_ops
    assert ("Lead", "release_task") in blocked_ops and ("Lead", "verify_task") in blocked_ops
    assert ("Dev2", "discover_task") in blocked_ops
    assert "c" not in [n["id"] for n in res.snapshots[-1]["graph"]["nodes"]]
    lead_next = [r for r in requests_of(model, "Lead") if r.view.round > 1]
    dev1_r2 = [r for r in requests_of(model, "Dev1") if r.view.round == 2][0]
    assert "Self-assignment is not available" in last_user_text(dev1_r2)
    # the Lead's refusals wait in its buffer until it next runs (nothing changed: the idle limit, round 6)
    assert lead_next[0].view.round == 6 and "not available" in last_user_text(lead_next[0])
    # the assigned claim (accepting an assignment) works in static
    assert res.snapshots[-1]["graph"]["nodes"][1]["agent"] == "Dev2"


def test_static_paper_dispatch_runs_every_worker(tmp_path):
    model = script({"Lead": {0: discover(("a", "")).replace("discover_task", "plan_task")}})
    res = run(tmp_path, model, team="static", rounds=2)
    assert all(e["n_dispatched"] == 4 for e in of(res, "round_dispatch"))
    res2 = run(tmp_path, script({"Lead": {0: discover(("a", "")).replace("discover_task", "plan_task")}}),
               team="static", rounds=2, dispatch="released")
    assert [e["n_dispatched"] for e in of(res2, "round_dispatch")] == [1, 1]


# ---------------------------------------------------------------- planning, errors, parse errors


def test_planning_without_nodes_ends_with_a_clear_failure(tmp_path):
    model = script({"Lead": ["<run_tests />", "I am not sure.", "Still thinking."]})
    res = run(tmp_path, model, planning_turns=3)
    assert res.status == "ok" and not res.success and res.reason == "planning_failed" and res.rounds == 0
    end = of(res, "planning_phase_end")[0]
    assert end["tasks_discovered"] == 0 and end["turns"] == 3
    nudges = [r for r in requests_of(model, "Lead")][2]
    assert "no <discover_task> tags" in last_user_text(nudges)
    # exploration runs once per action (the released code ran it twice)
    assert len([e for e in of(res, "run_tests") if e["round"] == 0]) == 1


def test_a_failing_model_gives_an_error_result_with_partial_events(tmp_path):
    def boom(req):
        if req.scope.agent == "Dev1":
            raise ll.ModelError("provider unavailable (simulated outage)")
        return discover(("a", "")) if req.view.round == 0 else WAIT

    res = run_trial(ll.TrialConfig(task="debug", model="scripted", max_rounds=3, runs_dir=str(tmp_path)),
                    model=ScriptedModel(boom))
    assert res.status == "error" and "simulated outage" in res.error
    assert of(res, "round_start") and of(res, "trial_error")
    saved = json.loads((res.run_dir / "result.json").read_text())
    assert saved["status"] == "error" and "simulated outage" in saved["error"]
    assert (res.run_dir / "events.jsonl").read_text().count("\n") == len(res.event_list)


def test_parse_errors_are_sent_back_to_the_agent(tmp_path):
    model = by_round({"Lead": {0: discover(("a", ""))}, "Dev1": {1: '<claim_task id="a" />', 2: "<complete_task />"}})
    res = run(tmp_path, model, rounds=3)
    assert of(res, "parse_error", agent="Dev1", round=2)
    dev1_r3 = [r for r in requests_of(model, "Dev1") if r.view.round == 3][0]  # the error is new context
    assert "Could not read your <complete_task>" in last_user_text(dev1_r3)


def test_worker_sees_only_its_own_task(tmp_path):
    model = script({"Lead": {0: discover(("a", ""), ("b", ""))}, "Dev1": {0: '<claim_task id="a" />'}})
    run(tmp_path, model, rounds=2)
    dev1 = requests_of(model, "Dev1")
    assert dev1[0].view.current_task is None and [n["id"] for n in dev1[0].view.frontier] == ["a", "b"]
    assert dev1[1].view.current_task["id"] == "a" and dev1[1].view.frontier == []
    assert prompts.TASK_HEADER in last_user_text(dev1[1])
    assert all("Task b" not in m.content for m in dev1[1].messages[-1:])


def test_history_windows_lead_10_workers_20(tmp_path):
    # heartbeat=1: the Lead is invoked every round; Dev1 runs the tests every round (new context each time)
    model = by_round({"Lead": {0: discover(("a", ""))},
                      "Dev1": {1: '<claim_task id="a" />', **{r: "<run_tests />" for r in range(2, 15)}}})
    run(tmp_path, model, rounds=14, heartbeat=1)
    assert max(len(r.messages) for r in requests_of(model, "Lead")) <= 11
    assert max(len(r.messages) for r in requests_of(model, "Dev1")) <= 21
    assert max(len(r.messages) for r in requests_of(model, "Dev1")) > 11


# ---------------------------------------------------------------- replay and determinism


def _latte_solving_model():
    task = ll.tasks.get("debug")
    sol = task.reference_solution()["signal_toolkit.py"]

    def policy(req):
        v = req.view
        if v.role == "lead":
            if v.phase == "planning":
                return discover(("a", ""), ("b", ""), ("c", "a,b"))
            idle = [w for w, t in v.extra["workers"].items() if t is None]
            return "".join(f'<assign_task id="{n["id"]}" to="{w}" />' for n, w in zip(v.frontier, idle)) or WAIT
        if v.current_task:
            t = v.current_task
            if t["status"] == "assigned":
                return f'<claim_task id="{t["id"]}" />'
            return f'<edit_file path="signal_toolkit.py">{sol}</edit_file><run_tests /><complete_task id="{t["id"]}" />'
        if v.frontier:  # self-scheduling: each idle worker claims its own pick of the ready tasks
            return f'<claim_task id="{v.frontier[int(v.agent[3:]) % len(v.frontier)]["id"]}" />'
        return WAIT

    return ScriptedModel(policy, latency_s=1.5)


def test_replay_gives_identical_events_and_result(tmp_path):
    res = run(tmp_path, _latte_solving_model(), rounds=10)
    assert res.success
    again = replay(res.run_dir, runs_dir=tmp_path / "replays")
    assert again.status == "ok"
    assert comparable_events(again.event_list) == comparable_events(res.event_list)
    assert comparable_row(again.row) == comparable_row(res.row)
    assert res.row["billed_tokens"] == res.row["total_tokens"] and res.row["replayed_tokens"] == 0
    assert again.row["billed_tokens"] == 0 and again.row["replayed_tokens"] == res.row["total_tokens"]
    ledger = (res.run_dir / "ledger.csv").read_text().splitlines()
    assert ledger[0].startswith("agent,round") and len(ledger) == 1 + len(of(res, "agent_reply"))
    loaded = load_trial(res.run_dir)
    assert loaded.success == res.success and loaded.row["total_tokens"] == res.row["total_tokens"]
    assert len(loaded.event_list) == len(res.event_list)


@pytest.mark.slow  # fresh interpreters
def test_two_processes_replaying_one_cassette_agree(tmp_path):
    res = run(tmp_path, _latte_solving_model(), rounds=10)
    code = (
        "import json, sys; from latte_lab.trial import replay, comparable_events\n"
        "r = replay(sys.argv[1], runs_dir=sys.argv[2])\n"
        "print(json.dumps({'row': {k: v for k, v in r.row.items() if k not in " + repr(VOLATILE_ROW_FIELDS) + "},"
        " 'events': comparable_events(r.event_list)}, default=str, sort_keys=True))\n"
    )
    outs = []
    for i in range(2):
        proc = subprocess.run([sys.executable, "-c", code, str(res.run_dir), str(tmp_path / f"p{i}")],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(proc.stdout.strip().splitlines()[-1])
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["row"]["success"] is True


@pytest.mark.slow  # fresh interpreters
@pytest.mark.parametrize("task", ["debug", "textproc"])
def test_simulated_trial_replays_exactly_in_a_fresh_process(tmp_path, task):
    """Run in one process, replay in another: nothing machine- or run-specific (timings, object
    addresses in tracebacks, paths) may leak into a prompt, or the cassette would not match."""
    run = (
        "import sys, latte_lab as ll\n"
        "r = ll.run_trial(ll.TrialConfig(task=sys.argv[1], team='latte', seed=3, runs_dir=sys.argv[2]))\n"
        "assert r.status == 'ok', r.error\nprint(r.run_dir)\n"
    )
    proc = subprocess.run([sys.executable, "-c", run, task, str(tmp_path / "a")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = proc.stdout.strip().splitlines()[-1]
    again = replay(run_dir, runs_dir=tmp_path / "b")
    assert again.status == "ok", again.error
    original = load_trial(run_dir)
    assert comparable_events(again.event_list) == comparable_events(original.event_list)
    assert comparable_row(again.row) == comparable_row(original.row)


@pytest.mark.slow  # fresh interpreters
def test_same_config_same_trial_in_two_processes_and_seeds_differ(tmp_path):
    code = (
        "import hashlib, json, sys, latte_lab as ll\n"
        "from latte_lab.trial import comparable_events, comparable_row\n"
        "r = ll.run_trial(ll.TrialConfig(task='debug', team='latte', seed=int(sys.argv[1]), runs_dir=sys.argv[2]))\n"
        "ev = comparable_events(r.event_list)\n"
        "print(hashlib.sha256(json.dumps([ev, comparable_row(r.row)], sort_keys=True, default=str).encode()).hexdigest())\n"
    )

    # Three interpreters at once (each its own run directory and zygote): seed 5 twice, seed 6 once.
    procs = [subprocess.Popen([sys.executable, "-c", code, str(seed), str(tmp_path / where)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for seed, where in ((5, "a"), (5, "b"), (6, "c"))]
    digests = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        digests.append(out.strip().splitlines()[-1])
    assert digests[0] == digests[1]
    assert digests[0] != digests[2]


def test_stable_output_masks_timing_and_addresses():
    from latte_lab.teams.engine import stable_output

    text = "self = <test_suite.TestRms object at 0x7f6a24fcd750>\n1 failed, 2 passed in 0.12s"
    assert stable_output(text) == "self = <test_suite.TestRms object at 0x…>\n1 failed, 2 passed"
    paths = "<module 'doc' from '/tmp/r/x-1/workspace/doc.py'> in /home/u/proj/src/a.py and /tmp/other/workspace/b.py"
    assert stable_output(paths, ["/home/u/proj"]) == "<module 'doc' from 'doc.py'> in src/a.py and b.py"


def test_trial_id_depends_on_config_and_seed():
    a = ll.TrialConfig(task="debug", seed=0)
    assert a.trial_id == ll.TrialConfig(task="debug", seed=0, runs_dir="elsewhere").trial_id
    assert a.trial_id != ll.TrialConfig(task="debug", seed=1).trial_id
    assert a.trial_id != ll.TrialConfig(task="debug", seed=0, team="static").trial_id


@pytest.mark.parametrize("fields, message", [
    ({"task": "nope"}, "known tasks"),
    ({"task": "debug", "team": "swarm"}, "known teams"),
    ({"task": "debug", "n_workers": 0}, "n_workers"),
    ({"task": "debug", "max_rounds": 0}, "max_rounds"),
    ({"task": "debug", "model": "gpt4"}, "unknown model spec"),
    ({"task": "debug", "model": "simulated", "base_url": "http://x"}, "base_url"),
    ({"task": "debug", "colour": "red"}, "unknown field"),
])
def test_config_validation_messages(fields, message):
    with pytest.raises(ll.ConfigError, match=message):
        ll.TrialConfig(**fields)


def test_released_preset_sets_every_switch():
    cfg = ll.TrialConfig.released(task="debug_sprint", team="dynamic")
    assert (cfg.task, cfg.team, cfg.max_rounds, cfg.max_tokens) == ("debug", "latte", 35, 8192)
    assert (cfg.dispatch, cfg.lead_idle_limit, cfg.claim_resolution, cfg.roles) == ("released", 6, "arrival", "official")
    assert cfg.unknown_deps == "drop" and cfg.file_lock and not cfg.read_file_in_flat and cfg.flat_success == "tests"
    assert ll.TrialConfig(task="debug").rounds == 40


def test_an_interrupted_trial_writes_its_partial_record_then_stops(tmp_path):
    def policy(req):
        if req.view.round == 2:
            raise KeyboardInterrupt
        return discover(("a", "")) if req.view.round == 0 else WAIT

    with pytest.raises(KeyboardInterrupt, match="partial record"):
        run_trial(ll.TrialConfig(task="debug", model="scripted", max_rounds=5, runs_dir=str(tmp_path)),
                  model=ScriptedModel(policy))
    [run_dir] = [p for p in tmp_path.iterdir() if p.is_dir()]
    saved = json.loads((run_dir / "result.json").read_text())
    assert saved["status"] == "error" and saved["error"] == "interrupted by the user"
    assert load_trial(run_dir).row["total_rounds"] == 2
