"""Recorded trials as workloads: attempts from the event log, from_trial, scheduling efficiency."""

from __future__ import annotations

import pytest

import latte_lab as ll
from latte_lab.scheduling import attempts, from_trial, simulate


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    """The trial of the lesson's exercise 8 (a LATTE team on the eda task, simulated model)."""
    return ll.run_trial(ll.teaching.setup("ex8").model_copy(update={"runs_dir": str(tmp_path_factory.mktemp("r"))}))


def test_a_real_trial_as_a_workload(trial):
    tw = from_trial(trial)
    final = trial.snapshots[-1]["graph"]["nodes"]
    assert set(tw.spec.ids) == {n["id"] for n in final} and len(tw.spec) == len(final)
    assert all(d >= 1 for d in tw.spec.durations)
    assert tw.n_workers == trial.config.n_workers and tw.team == "latte" and tw.trial_id == trial.trial_id
    planned = {n["id"] for n in trial.snapshots[0]["graph"]["nodes"]}
    assert set(tw.late) == set(tw.spec.ids) - planned
    assert not tw.unfinished and trial.success
    tries = tw.attempts
    last_complete = max(e["round"] for e in trial.event_list if e["type"] in ("complete_task", "close_task"))
    assert tw.actual_makespan == last_complete - 1 <= tw.trial_rounds == trial.rounds
    assert tw.spec.lower_bound(tw.n_workers) == tw.lower_bound <= tw.actual_makespan
    assert 0 < tw.efficiency <= 1
    assert tw.wasted_worker_rounds == int((tries.loc[tries["outcome"] == "released", "end"]
                                           - tries.loc[tries["outcome"] == "released", "start"]).sum())
    table = tw.compare(seeds=[0, 1])
    assert table["schedule"].tolist() == ["team (recorded)", "self", "lead", "static", "list: critical_path", "heft"]
    assert table.loc[0, "makespan"] == tw.actual_makespan
    assert (table["makespan"] >= tw.lower_bound).all() and (table["efficiency"] <= 1).all()
    assert table.loc[1, "makespan"] == simulate(tw.spec, tw.n_workers, "self").makespan
    assert "scheduling efficiency" in tw.summary()
    again = from_trial(trial.run_dir)  # a run directory reads back to the same workload
    assert again.spec == tw.spec and again.actual_makespan == tw.actual_makespan


def test_durations_come_from_the_finishing_attempt():
    events = [{"type": "run_start", "round": None, "n_workers": 2, "team": "latte", "trial_id": "t"},
              {"type": "claim_task", "round": 1, "agent": "Dev1", "task": "a"},
              {"type": "release_task", "round": 4, "task": "a", "prev_owner": "Dev1"},  # 3 rounds thrown away
              {"type": "claim_task", "round": 4, "agent": "Dev2", "task": "a"},
              {"type": "complete_task", "round": 6, "agent": "Dev2", "task": "a"},
              {"type": "assign_task", "round": 6, "task": "b", "assignee": "Dev1"},
              {"type": "complete_task", "round": 7, "agent": "Dev1", "task": "b"},  # released code: no Claim
              {"type": "claim_task", "round": 6, "agent": "Dev2", "task": "c"},
              {"type": "close_task", "round": 9, "task": "c", "prev_owner": "Dev2"}]
    nodes = [{"id": "a", "deps": [], "status": "done"}, {"id": "b", "deps": ["a"], "status": "done"},
             {"id": "c", "deps": ["a"], "status": "done"}]

    class Trial:
        event_list = events
        snapshots = [{"round": 0, "graph": {"nodes": nodes[:1]}}, {"round": 9, "graph": {"nodes": nodes}}]

    tw = from_trial(Trial())
    assert dict(zip(tw.spec.ids, tw.spec.durations)) == {"a": 2, "b": 1, "c": 3}
    assert tw.actual_makespan == 8 and tw.late == ("b", "c") and tw.wasted_worker_rounds == 3
    assert attempts(events)["outcome"].tolist() == ["released", "done", "done", "closed"]


def test_an_unfinished_trial_counts_its_rounds():
    events = [{"type": "claim_task", "round": 1, "agent": "Dev1", "task": "a"},
              {"type": "complete_task", "round": 2, "agent": "Dev1", "task": "a"},
              {"type": "claim_task", "round": 3, "agent": "Dev1", "task": "b"},
              {"type": "run_end", "round": 10}]

    class Trial:
        event_list = events
        snapshots = [{"round": 10, "graph": {"nodes": [{"id": "a", "deps": [], "status": "done"},
                                                       {"id": "b", "deps": ["a"], "status": "in_progress"},
                                                       {"id": "c", "deps": ["b"], "status": "pending"}]}}]

    tw = from_trial(Trial())
    assert tw.unfinished == ("b", "c") and tw.actual_makespan == 10
    assert dict(zip(tw.spec.ids, tw.spec.durations)) == {"a": 1, "b": 8, "c": 1}
    assert tw.n_workers == 1 and "2 unfinished" in tw.summary()


def test_a_team_without_a_graph_has_no_workload():
    class Flat:
        event_list = [{"type": "edit_file", "round": 1, "agent": "Dev1"}]
        snapshots: list = []

    with pytest.raises(ll.DataError, match="no graph snapshots"):
        from_trial(Flat())
    with pytest.raises(ll.DataError, match="missing"):
        from_trial("/nonexistent/run")


def test_the_lessons_trial_exercise_is_checked_against_the_given_trial(trial):
    expected = round(from_trial(trial).efficiency, 2)
    assert ll.teaching.check("ex8", expected, trial=trial)
    assert expected < 1, "the lesson's trial should leave a gap to its bound (teaching._trial_config)"
    wrong = ll.teaching.check("ex8", round(1 / expected, 2), trial=trial)
    assert not wrong and "at most 1" in str(wrong) and f"{expected}" not in str(wrong)
