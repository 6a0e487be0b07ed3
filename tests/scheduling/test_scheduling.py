"""Properties of the scheduling simulator: bounds, exact cases, straggler mitigation, determinism, graph state."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import latte_lab as ll
from latte_lab.graph import frontier_bruteforce
from latte_lab.scheduling import (
    POLICIES,
    WorkloadSpec,
    chain,
    compare,
    diamond,
    fan_out,
    from_task,
    random_dag,
    simulate,
)
from latte_lab.scheduling.trials import attempts

WORKLOADS = [
    random_dag(30, seed=0),
    random_dag(25, layers=3, max_deps=2, seed=7),
    random_dag(20, layers=20, seed=3),  # one node per layer: a chain with extra edges
    diamond(4, durations=[1, 3, 2, 5]),
    fan_out(6, durations=[1, 2, 3, 4, 5, 6]),
    from_task("debug"),
    from_task("textproc"),
]


def _check_final_graph(res):
    g = res.graph
    assert g.all_done()
    assert g.counts()["done"] == len(res.spec)
    assert g.frontier() == [] == frontier_bruteforce(g)
    assert all(g.node(n)["completed_by"] for n in res.spec.ids)


@pytest.mark.parametrize("spec", WORKLOADS, ids=lambda s: s.name)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n_workers", [1, 2, 3, 5, 8])
def test_makespan_respects_both_lower_bounds(spec, policy, n_workers):
    for kwargs in ({}, {"straggler_p": 0.3, "heartbeat": 1, "seed": 4}, {"straggler_p": 0.3, "seed": 5}):
        res = simulate(spec, n_workers, policy, **kwargs)
        assert res.makespan >= spec.critical_path_length
        assert res.makespan >= spec.total_work / n_workers
        assert res.makespan >= res.lower_bound == max(res.critical_path, math.ceil(res.work_bound))
        _check_final_graph(res)


@pytest.mark.parametrize("spec", WORKLOADS[:3], ids=lambda s: s.name)
def test_one_worker_does_all_the_work_back_to_back(spec):
    for policy, extra in (("self", {}), ("static", {}), ("lead", {"lead_every": 1})):
        res = simulate(spec, 1, policy, **extra)
        assert res.makespan == spec.total_work
        assert res.utilisation == 1.0 and res.idle_worker_rounds == 0
    # with a Lead passing by every 3 rounds the lone worker waits between nodes
    assert simulate(spec, 1, "lead", lead_every=3).makespan > spec.total_work


@pytest.mark.parametrize("n_workers", [1, 2, 4, 16])
def test_chain_makespan_is_its_total_duration(n_workers):
    spec = chain(7, durations=[2, 1, 3, 1, 4, 2, 1])
    for policy, extra in (("self", {}), ("static", {}), ("lead", {"lead_every": 1})):
        res = simulate(spec, n_workers, policy, **extra)
        assert res.makespan == spec.total_work == 14
    # a Lead that only assigns every k rounds adds waiting to every link of the chain
    assert simulate(spec, n_workers, "lead", lead_every=3).makespan > 14


@pytest.mark.parametrize("width", [1, 3, 8])
@pytest.mark.parametrize("extra_workers", [0, 1, 5])
def test_fan_out_with_enough_workers_takes_root_plus_longest_leaf(width, extra_workers):
    rng = np.random.default_rng(width)
    leaves = rng.integers(1, 7, size=width).tolist()
    spec = fan_out(width, durations=leaves)
    res = simulate(spec, width + extra_workers, "self")
    assert res.makespan == 1 + max(leaves)
    assert res.rounds["frontier"].tolist()[:2] == [1, width]


def test_lead_every_one_matches_self_scheduling():
    spec = random_dag(40, seed=2)
    for n in (2, 5):
        a = simulate(spec, n, "self", straggler_p=0.2, heartbeat=1, seed=9)
        b = simulate(spec, n, "lead", lead_every=1, straggler_p=0.2, heartbeat=1, seed=9)
        assert a.makespan == b.makespan
        assert a.intervals.equals(b.intervals)
        assert any(e["op"] == "assign" for e in b.graph.log)
        assert not any(e["op"] == "assign" for e in a.graph.log)


def test_heartbeat_release_reduces_makespan_under_stragglers_on_average():
    spec = random_dag(40, seed=1)
    seeds = range(20)
    kwargs = {"straggler_p": 0.2, "straggler_factor": 5.0}
    for policy in POLICIES:
        without = [simulate(spec, 4, policy, seed=s, **kwargs).makespan for s in seeds]
        with_hb = [simulate(spec, 4, policy, seed=s, heartbeat=1, **kwargs) for s in seeds]
        assert np.mean([r.makespan for r in with_hb]) < np.mean(without)
        assert sum(r.n_released for r in with_hb) > 0
        for r in with_hb:
            _check_final_graph(r)


def test_released_attempts_are_rerun_and_logged_as_release():
    spec = fan_out(3, durations=4)
    # when every attempt straggles and is released, nothing finishes: the guard stops the run and says why
    with pytest.raises(ll.ConfigError, match="max_rounds"):
        simulate(spec, 4, "self", straggler_p=1.0, heartbeat=0, max_rounds=50)
    res = simulate(spec, 4, "self", straggler_p=0.5, straggler_factor=4.0, heartbeat=0, seed=1)
    iv = res.intervals
    released = iv[iv["outcome"] == "released"]
    assert len(released) == res.n_released == sum(e["op"] == "release" for e in res.graph.log)
    for row in released.itertuples():
        assert row.straggled and row.end - row.start == row.expected + 1  # held 1 round beyond expected
        rerun = iv[(iv["node"] == row.node) & (iv["attempt"] == row.attempt + 1)]
        assert len(rerun) == 1 and rerun["start"].iloc[0] >= row.end
    assert (iv[iv["outcome"] == "done"]["node"].value_counts() == 1).all()
    assert res.wasted_worker_rounds == int((released["end"] - released["start"]).sum())


def test_straggler_free_runs_never_release():
    spec = random_dag(30, seed=0)
    res = simulate(spec, 3, "static", heartbeat=0)
    assert res.n_released == 0 and res.n_straggled == 0
    assert (res.intervals["end"] - res.intervals["start"] == res.intervals["expected"]).all()


@pytest.mark.parametrize("policy", POLICIES)
def test_deterministic_per_seed(policy):
    spec = random_dag(50, seed=11)
    kwargs = {"straggler_p": 0.25, "heartbeat": 1}
    a = simulate(spec, 4, policy, seed=3, **kwargs)
    b = simulate(spec, 4, policy, seed=3, **kwargs)
    c = simulate(spec, 4, policy, seed=np.random.default_rng(3), **kwargs)
    assert a.intervals.equals(b.intervals) and a.rounds.equals(b.rounds)
    assert a.graph.log == b.graph.log
    assert a.intervals.equals(c.intervals)  # a Generator built from the seed behaves like the seed
    assert random_dag(50, seed=11) == spec
    others = [simulate(spec, 4, policy, seed=s, **kwargs).intervals for s in range(4, 9)]
    assert any(not a.intervals.equals(o) for o in others)


def test_common_random_numbers_across_policies():
    # without heartbeat every node runs once, and its straggler coin does not depend on the policy
    spec = random_dag(30, seed=5)
    flags = [simulate(spec, n, p, straggler_p=0.3, seed=2).intervals.set_index("node")["straggled"].sort_index()
             for p in POLICIES for n in (2, 6)]
    assert all(f.equals(flags[0]) for f in flags)


def test_intervals_never_overlap_and_respect_dependencies():
    spec = random_dag(60, seed=8)
    for policy in POLICIES:
        res = simulate(spec, 5, policy, straggler_p=0.2, heartbeat=1, seed=1)
        iv = res.intervals
        for _, rows in iv.groupby("worker"):
            rows = rows.sort_values("start")
            assert (rows["start"].to_numpy()[1:] >= rows["end"].to_numpy()[:-1]).all()
        done = iv[iv["outcome"] == "done"].set_index("node")
        for nid, deps in zip(spec.ids, spec.deps):
            starts = iv.loc[iv["node"] == nid, "start"]
            for d in deps:
                assert (starts >= done.at[d, "end"]).all()
        assert res.makespan == done["end"].max()
        assert res.busy_worker_rounds + res.idle_worker_rounds == 5 * res.makespan
        assert 0 < res.utilisation <= 1


def test_static_workers_run_only_their_own_nodes():
    spec = random_dag(24, seed=2)
    res = simulate(spec, 3, "static")
    iv = res.intervals.set_index("node")
    for i, nid in enumerate(spec.ids):
        assert iv.at[nid, "worker"] == f"W{i % 3 + 1}"
    assign = [e for e in res.graph.log if e["op"] == "assign"]
    assert len(assign) == len(spec)


def test_snapshots_replay_the_rounds():
    spec = diamond(3, durations=[2, 1, 3])
    res = simulate(spec, 2, "self")
    snaps = res.snapshots
    assert [s["round"] for s in snaps] == list(range(res.makespan + 1))
    assert ll.CoordinationGraph.from_snapshot(snaps[-1]["graph"]).snapshot() == res.graph.snapshot()
    first = {n["id"]: n["status"] for n in snaps[0]["graph"]["nodes"]}
    assert first == {"src": "in_progress", "m0": "pending", "m1": "pending", "m2": "pending", "sink": "pending"}
    for s, stats in zip(snaps, res.rounds.itertuples()):
        statuses = [n["status"] for n in s["graph"]["nodes"]]
        assert statuses.count("in_progress") == stats.busy
        assert statuses.count("done") == stats.done


def test_frontier_sizes_match_the_graph():
    spec = random_dag(30, seed=4)
    res = simulate(spec, 3, "self")
    assert len(res.frontier_sizes) == res.makespan + 1
    assert res.frontier_sizes[0] == len(spec.to_graph().frontier())
    assert max(res.frontier_sizes) >= 1


def test_critical_path_priority_is_never_worse_on_a_fan_out():
    spec = fan_out(5, durations=[1, 1, 1, 1, 6])
    fifo = simulate(spec, 2, "self").makespan
    cp = simulate(spec, 2, "self", priority="critical_path").makespan
    assert cp == spec.lower_bound(2) == 7 and fifo == 9


def test_compare_one_row_per_run():
    spec = random_dag(20, seed=0)
    df = compare(spec, [1, 2, 4], ["self", "static"], seeds=[0, 1], straggler_p=0.2, heartbeat=[None, 1])
    assert len(df) == 3 * 2 * 2 * 2
    assert {"policy", "n_workers", "seed", "heartbeat", "makespan", "critical_path", "work_bound",
            "lower_bound", "utilisation", "idle_worker_rounds"} <= set(df.columns)
    assert (df["makespan"] >= df["lower_bound"]).all()
    assert df["heartbeat"].isna().sum() == len(df) // 2 and set(df["heartbeat"].dropna()) == {1}


def test_workload_builders():
    assert chain(3).critical_path() == ["c0", "c1", "c2"]
    d = diamond(2, durations=[1, 4], source=2, sink=3)
    assert d.critical_path() == ["src", "m1", "sink"] and d.critical_path_length == 9
    spec = from_task("debug")
    units = ll.tasks.get("debug").work_units()
    assert spec.ids == tuple(u.id for u in units)
    assert all(d >= 1 for d in spec.durations)
    dag = random_dag(100, layers=10, max_deps=3, seed=0)
    assert all(1 <= len(d) <= 3 for d in dag.deps[10:]) and not any(dag.deps[:10])
    assert np.mean(dag.durations) == pytest.approx(3.0, abs=0.8)
    assert set(random_dag(10, mean_duration=1).durations) == {1}
    frame = dag.to_frame()
    assert len(frame) == 100 and frame["critical"].sum() == len(dag.critical_path())


@pytest.mark.parametrize("bad", [
    lambda: WorkloadSpec(("a", "a"), ((), ()), (1, 1)),
    lambda: WorkloadSpec(("a", "b"), (("b",), ()), (1, 1)),
    lambda: WorkloadSpec(("a",), ((),), (0,)),
    lambda: simulate(chain(2), 0),
    lambda: simulate(chain(2), 2, "round_robin"),
    lambda: simulate(chain(2), 2, straggler_p=1.5),
    lambda: simulate(chain(2), 2, straggler_factor=0.5),
    lambda: simulate(chain(2), 2, heartbeat=-1),
    lambda: simulate(chain(2), 2, seed=-3),
    lambda: random_dag(0),
])
def test_bad_input_raises_config_error(bad):
    with pytest.raises(ll.ConfigError):
        bad()


def test_event_list_reads_back_as_the_intervals():
    for seed in range(4):
        res = simulate(random_dag(20, seed=seed), 3, "self", straggler_p=0.4, heartbeat=0, seed=seed)
        kinds = [e["type"] for e in res.event_list]
        assert kinds.count("claim_task") == len(res.intervals)
        assert kinds.count("release_task") == res.n_released
        rounds = [e["round"] for e in res.event_list]
        assert rounds == sorted(rounds)
        back = attempts(res.event_list)
        assert back.equals(res.intervals[back.columns])


@settings(max_examples=60, deadline=None)
@given(n_nodes=st.integers(1, 25), layers=st.integers(1, 6), max_deps=st.integers(1, 3), dag_seed=st.integers(0, 99),
       n_workers=st.integers(1, 6), policy=st.sampled_from(POLICIES), straggler_p=st.sampled_from([0.0, 0.3]),
       heartbeat=st.sampled_from([None, 0, 2]), lead_every=st.integers(1, 4), seed=st.integers(0, 99))
def test_any_run_finishes_within_the_rules(n_nodes, layers, max_deps, dag_seed, n_workers, policy, straggler_p,
                                           heartbeat, lead_every, seed):
    spec = random_dag(n_nodes, layers=layers, max_deps=max_deps, seed=dag_seed)
    res = simulate(spec, n_workers, policy, straggler_p=straggler_p, heartbeat=heartbeat, lead_every=lead_every,
                   seed=seed)
    assert res.makespan >= res.lower_bound
    _check_final_graph(res)
    assert len(res.rounds) == res.makespan + 1
    if straggler_p == 0.0:
        assert res.n_released == 0 and len(res.intervals) == len(spec)


def test_ready_counts_include_static_preassigned_nodes():
    spec = random_dag(20, seed=6)
    s = simulate(spec, 3, "self").rounds
    assert (s["frontier"] == s["ready"]).all()  # nothing is assigned ahead of time
    st_ = simulate(spec, 3, "static").rounds
    assert (st_["frontier"] == 0).all() and st_["ready"].iloc[0] == len(spec.to_graph().frontier())
