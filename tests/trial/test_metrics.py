"""Per-trial metrics from a hand-written event log whose every answer is worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from latte_lab import metrics, schema


def ev(kind, rnd=None, t=0.0, **fields):
    return {"type": kind, "round": rnd, "t": t, **fields}


def edit(agent, path, rnd, n_chars, symbols=(), content=""):
    return ev("edit_file", rnd, agent=agent, path=path, n_chars=n_chars, symbols=list(symbols), content=content)


@pytest.fixture()
def log():
    return [
        ev("run_start", None, trial_id="x", task="debug", team="latte", model="simulated", seed=0, n_workers=2),
        ev("initialize", None, agents=["Lead", "Dev1", "Dev2"], lead="Lead"),
        ev("planning_phase_start", 0),
        ev("discover_task", 0, agent="Lead", task="t1", title="a", dependencies=[]),
        ev("discover_task", 0, agent="Lead", task="t2", title="b", dependencies=[]),
        ev("round_start", 1, t=0.0),
        ev("round_dispatch", 1, t=0.0, n_dispatched=2, n_total=2, agents=["Lead", "Dev1", "Dev2"],
           n_total_released=2, n_dispatched_released=2),
        ev("assign_task", 1, t=1.0, task="t1", assigner="Lead", assignee="Dev1"),
        ev("claim_task", 1, t=2.0, agent="Dev2", task="t2"),
        ev("agent_reply", 1, agent="Lead", text="L" * 50, n_chars=50),
        ev("agent_reply", 1, agent="Dev1", text="x" * 2500, n_chars=2500),
        ev("agent_reply", 1, agent="Dev2", text="y" * 100, n_chars=100),
        # Dev1 and Dev2 both write f.py in round 1: a file collision; symbol `g` written by both
        edit("Dev1", "f.py", 1, 30, symbols=["g"], content="def g():\n    return 1\n"),
        edit("Dev2", "f.py", 1, 40, symbols=["g", "h"], content="def g():\n    return 2\ndef h(): pass\n"),
        ev("edit_blocked", 1, agent="Dev1", path="f.py", reason="file_locked"),
        ev("broadcast", 1, sender="Dev2", message="hello"),
        ev("parse_error", 1, agent="Dev1", tag="claim_task", message="bad"),
        ev("complete_task", 1, t=11.0, agent="Dev1", task="t1"),
        ev("round_start", 2, t=20.0),
        ev("round_dispatch", 2, t=20.0, n_dispatched=1, n_total=2, agents=["Dev2"],
           n_total_released=2, n_dispatched_released=1),
        ev("heartbeat_alert", 2, agent="Dev2", task="t2", rounds_active=4, last_activity_round=1),
        ev("release_task", 2, t=21.0, task="t2", prev_owner="Dev2", requester="Lead", reason="lead_requested"),
        ev("claim_task", 2, t=22.0, agent="Dev1", task="t2"),
        ev("agent_reply", 2, agent="Dev2", text="z" * 10, n_chars=10),
        # Dev1 then Dev1 again on g.py (no overwrite), Dev2 rewrites f.py in a later round (overwrite)
        edit("Dev1", "g.py", 2, 5, symbols=["<file>"], content="X = 1\n"),
        edit("Dev1", "g.py", 2, 6, symbols=["<file>"], content="X = 22\n"),
        edit("Dev2", "f.py", 2, 50, symbols=["h"], content="def h():\n    return 3\n"),
        ev("close_task", 2, t=32.0, task="t2", prev_owner="Dev1", agent="Lead"),
        ev("create_verify_node", 2, task="t1", verify_id="t1-verify", requester="Lead", successors_rerouted=[]),
        ev("fix_task_injected", 2, task="fix-1"),
        ev("run_end", 2, reason="all_tasks_done", success=True, tests_passed=True, rounds=2),
    ]


def test_released_definitions(log):
    m = metrics.trial_metrics(log)
    # f.py edits Dev1, Dev2, Dev2 -> one agent change; g.py Dev1, Dev1 -> none
    assert m["cross_agent_overwrites"] == 1
    # (f.py, 1) has two writers; (g.py, 2) and (f.py, 2) one each
    assert m["n_concurrent_collisions"] == 1
    assert m["wasted_chars"] == 30  # all but the last edit of the colliding (f.py, 1)
    assert m["total_code_chars"] == 30 + 40 + 5 + 6 + 50
    assert m["total_messages"] == 3  # non-Lead replies
    assert m["total_message_chars"] == 2000 + 100 + 10  # the 2,500-char reply is capped at 2,000
    assert (m["dispatched_agent_rounds"], m["possible_agent_rounds"], m["idle_agent_rounds"]) == (3, 4, 1)
    assert m["idle_fraction"] == pytest.approx(0.25)
    assert m["idle_fraction_released"] == pytest.approx(0.25)
    assert m["total_rounds"] == 2


def test_intended_definitions(log):
    final = {"f.py": "def g():\n    return 2\ndef h():\n    return 3\n", "g.py": "X = 22\n"}
    snaps = [{"round": 0, "graph": {"nodes": [{"id": "t1"}, {"id": "t2"}]}},
             {"round": 2, "graph": {"nodes": [{"id": "t1"}, {"id": "t2"}, {"id": "t1-verify"}]}},
             {"round": 1, "graph": {"nodes": [{"id": "t1"}, {"id": "t2"}]}}]
    m = metrics.trial_metrics(log, final_files=final, snapshots=snaps)
    # (f.py, g): Dev1, Dev2 -> 1; (f.py, h): Dev2, Dev2 -> 0; (g.py, <file>): Dev1, Dev1 -> 0
    assert m["function_overwrites"] == 1
    assert m["function_concurrent_writes"] == 1  # (f.py, g, 1) written by Dev1 and Dev2
    # lost lines: "    return 1" (12), "def h(): pass" (13), "X = 1" (5)
    assert m["discarded_chars"] == 12 + 13 + 5
    assert (m["n_broadcasts"], m["message_chars"]) == (1, 5)
    # team of 3; round 1 all three ran, round 2 only Dev2
    assert (m["active_agent_rounds"], m["team_agent_rounds"], m["inactive_agent_rounds"]) == (4, 6, 2)
    assert m["active_fraction"] == pytest.approx(4 / 6)
    # from the claim: t1 was never claimed (none); t2: first claim at 2 -> close at 32 = 30 s
    assert m["n_completed_nodes"] == 1
    assert m["node_completion_mean_s"] == m["node_completion_p95_s"] == pytest.approx(30.0)
    # from the assign: t1: assign at 1 -> complete at 11 = 10 s; t2: 30 s
    assert m["node_completion_from_assign_mean_s"] == pytest.approx(20.0)
    assert m["node_completion_from_assign_p95_s"] == pytest.approx(10 + 0.95 * 20)
    assert m["planning_seconds"] == 0.0 and m["lead_active_fraction"] == pytest.approx(0.5)
    assert m["graph_size_per_round"] == [2, 2, 3]  # sorted by round
    assert (m["graph_size_initial"], m["graph_size_final"]) == (2, 3)
    assert m["n_parse_errors"] == 1 and m["heartbeat_alerts"] == 1
    assert m["lead_invocations"] == 1
    assert (m["n_verify"], m["n_release"], m["fix_tasks"]) == (1, 1, 1)
    assert m["op_discover_task"] == 2 and m["op_claim_task"] == 2 and m["op_synthesize"] == 0


def test_missing_inputs_give_nan_not_zero(log):
    m = metrics.trial_metrics(log)
    assert math.isnan(m["discarded_chars"])
    assert math.isnan(m["graph_size_final"]) and m["graph_size_per_round"] == []


def test_released_dispatch_fields_differ_for_flat_teams():
    # leader_worker: the Lead runs every round but the released code counted 4 of 5
    log = [ev("round_dispatch", r, n_dispatched=5, n_total=5, agents=["Lead", "W1", "W2", "W3", "W4"],
              n_total_released=5, n_dispatched_released=4) for r in (1, 2)]
    m = metrics.trial_metrics(log)
    assert m["idle_fraction"] == 0.0
    assert m["idle_fraction_released"] == pytest.approx(0.2)


def test_dataframe_input_and_empty_log(log):
    assert metrics.trial_metrics(pd.DataFrame(log))["cross_agent_overwrites"] == 1
    m = metrics.trial_metrics([])
    assert m["total_rounds"] == 0 and m["idle_fraction"] == 0.0 and math.isnan(m["active_fraction"])


def test_every_key_is_a_schema_column(log):
    m = metrics.trial_metrics(log, final_files={}, snapshots=[])
    assert set(m) <= set(schema.TRIAL_COLUMNS)


def test_operator_counts_and_completion_times(log):
    counts = metrics.operator_counts(log)
    assert set(counts) == set(metrics.OPERATOR_EVENT_TYPES)
    assert counts["release_task"] == 1 and counts["create_verify_node"] == 1
    assert metrics.node_completion_times(log) == {"t2": 30.0}
    assert metrics.node_completion_times(log, "assign") == {"t1": 10.0, "t2": 30.0}
    with pytest.raises(ValueError, match="start_at"):
        metrics.node_completion_times(log, "discover")
