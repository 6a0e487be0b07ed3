"""The team registry: names, aliases, clear errors, and a user's team and task working everywhere
(TrialConfig, run_trial, replay, load_runs, sweeps with worker processes, from a module or __main__)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import user_protocol_example as example

import latte_lab as ll
from latte_lab.config import TEAM_ALIASES
from latte_lab.registry import Registry, pool_options
from latte_lab.trial import comparable_events, replay, run_trial

BUILTIN_TEAMS = ["latte", "static", "leader_worker", "decentralized", "pipeline"]


def test_builtin_names_in_order_and_aliases_resolve():
    assert ll.teams.names()[:5] == BUILTIN_TEAMS
    for alias, name in TEAM_ALIASES.items():
        assert ll.teams.get(alias) is ll.teams.get(name)
        assert ll.TrialConfig(task="debug", team=alias).team == name
    for name in BUILTIN_TEAMS:
        cls = ll.teams.get(name)
        assert cls.name == name and issubclass(cls, ll.teams.Team) and ll.teams.REGISTRY.is_builtin(name)
        assert cls.__module__ == f"latte_lab.teams.{name}"  # one module per team


def test_unknown_team_lists_the_known_ones():
    with pytest.raises(ll.ConfigError) as info:
        ll.teams.get("swarm")
    msg = str(info.value)
    assert "'swarm'" in msg and all(n in msg for n in BUILTIN_TEAMS) and "no_graph" in msg
    with pytest.raises(ll.ConfigError, match="known teams: latte, static"):
        ll.TrialConfig(task="debug", team="swarm")


def test_registering_cannot_shadow_a_builtin_or_an_alias():
    with pytest.raises(ll.ConfigError, match="already registered"):
        ll.teams.register("latte")(type("Other", (ll.teams.LatteTeam,), {}))
    with pytest.raises(ll.ConfigError, match="alias of team 'latte'"):
        ll.teams.register("dynamic")(type("Other", (ll.teams.LatteTeam,), {}))
    with pytest.raises(ll.ConfigError, match="non-empty name"):
        ll.teams.register(" spaced ")(type("Other", (ll.teams.LatteTeam,), {}))
    assert ll.teams.get("latte").__name__ == "LatteTeam"


def test_re_registering_the_same_class_is_allowed_and_replace_is_explicit():
    reg = Registry("widget")

    class A:
        name = "a"

    reg.register(A)
    reg.register(A)  # a notebook cell run twice
    again = type("A", (), {"__module__": A.__module__, "__qualname__": A.__qualname__})
    reg.register("a")(again)  # the same cell run again defines a new class object with the same name
    assert reg.get("a") is again
    with pytest.raises(ll.ConfigError, match="already registered"):
        reg.register("a")(type("B", (), {}))
    other = reg.register("a", replace=True)(type("B", (), {}))
    assert reg.get("a") is other and reg.names() == ["a"]


def test_user_team_and_task_run_replay_and_load(tmp_path):
    assert "round_robin" in ll.teams.names() and "mini" in ll.tasks.names()
    cfg = ll.TrialConfig(task="mini", team="round_robin", seed=1, runs_dir=str(tmp_path / "runs"))
    assert cfg.rounds == example.MiniTask.default_max_rounds
    res = run_trial(cfg)
    assert res.status == "ok", res.error
    assert res.row["team"] == "round_robin" and res.row["task"] == "mini"
    # the protocol is the user's: after planning the Lead never runs, the orchestrator assigns
    assert not [e for e in res.event_list if e["type"] == "lead_invoked"]
    assigns = [e for e in res.event_list if e["type"] == "assign_task"]
    assert assigns and all(e["round"] >= 1 for e in assigns)
    again = replay(res.run_dir, runs_dir=tmp_path / "replays")
    assert comparable_events(again.event_list) == comparable_events(res.event_list)
    data = ll.load_runs(tmp_path / "runs")
    assert list(data.trials["team"]) == ["round_robin"] and list(data.trials["task"]) == ["mini"]


def test_user_task_reference_solution_passes_its_suite(tmp_path):
    task = ll.tasks.get("mini")
    ws = ll.Workspace(tmp_path / "ws")
    task.setup(ws)
    assert not ws.run_tests().ok and task.evaluate(ws).rate < 1
    for path, text in task.reference_solution().items():
        ws.write(path, text, agent="Reference")
    result = task.evaluate(ws)
    assert ws.run_tests().ok and result.rate == 1.0 and result.total == 3
    assert task.official_name == "mini"


@pytest.mark.slow  # fresh interpreters
def test_sweep_with_two_processes_runs_a_team_registered_in_a_module(tmp_path):
    grid = {"task": "mini", "team": ["round_robin", "latte"], "replicates": 1, "max_rounds": 4}
    df = ll.run_sweep(grid, out=tmp_path / "sweep", n_jobs=2, progress=False)
    assert sorted(df["team"]) == ["latte", "round_robin"] and (df["status"] == "ok").all()


def test_pool_options_refuse_main_registrations_without_fork():
    reg = ll.teams.REGISTRY
    cls = type("MainTeam", (ll.teams.LatteTeam,), {"__module__": "__main__"})
    reg.register("main_only_team")(cls)
    try:
        assert pool_options()["mp_context"].get_start_method() == "fork"
        with pytest.raises(ll.ConfigError, match="main_only_team.*n_jobs=1"):
            pool_options("spawn")
    finally:
        reg._entries.pop("main_only_team")


MAIN_SCRIPT = """
import json, sys
exec(compile(open(sys.argv[1]).read(), "notebook-cell", "exec"))   # defines the classes in __main__
import latte_lab as ll
assert ll.teams.get("round_robin").__module__ == "__main__"
df = ll.run_sweep({"task": "mini", "team": ["round_robin", "leader_worker"], "replicates": 2, "max_rounds": 3},
                  out=sys.argv[2], n_jobs=2, progress=False)
print(json.dumps(df[["team", "task", "status", "run_dir"]].to_dict("records")))
"""


@pytest.mark.slow  # fresh interpreters
def test_sweep_with_two_processes_runs_a_team_defined_in_main(tmp_path):
    """A team and a task defined in ``__main__`` (what a notebook cell does) reach the worker processes."""
    proc = subprocess.run([sys.executable, "-c", MAIN_SCRIPT, example.__file__, str(tmp_path / "sweep")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(r["team"] for r in rows) == ["leader_worker", "leader_worker", "round_robin", "round_robin"]
    assert all(r["status"] == "ok" and r["task"] == "mini" for r in rows)
    for r in rows:
        if r["team"] == "round_robin":
            events = [json.loads(x) for x in (Path(r["run_dir"]) / "events.jsonl").read_text().splitlines()]
            assert not [e for e in events if e["type"] == "lead_invoked"]  # the user's protocol ran there
