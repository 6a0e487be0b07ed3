"""Discovery during execution: hidden nodes, Discovering and planned teams, and the graph they drive."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import latte_lab as ll
from latte_lab.graph import frontier_bruteforce
from latte_lab.scheduling import POLICIES, chain, compare_discovery, diamond, random_dag, simulate
from latte_lab.scheduling.result import CLAIM, DISCOVER


def test_hidden_nodes_are_validated_and_drawn_independently():
    spec = random_dag(200, seed=0)
    with pytest.raises(ll.ConfigError, match="no dependency"):
        spec.with_hidden(["t0"])
    with pytest.raises(ll.ConfigError, match="not nodes"):
        spec.with_hidden(["nope"])
    sets = [set(spec.with_discovery(p, seed=4).hidden) for p in (0.0, 0.2, 0.5, 1.0)]
    assert sets[0] == set() and sets[0] <= sets[1] <= sets[2] <= sets[3]  # the same coins, a rising rate
    assert sets[3] == {nid for nid, ds in zip(spec.ids, spec.deps) if ds}
    assert len(sets[2]) == pytest.approx(0.5 * len(sets[3]), rel=0.2)
    hidden = spec.with_discovery(0.3, seed=1)
    assert hidden.critical_path_length == spec.critical_path_length and hidden.bottom_levels == spec.bottom_levels
    g = hidden.to_graph()
    assert set(g.nodes()) <= set(hidden.known_ids) and not set(g.nodes()) & set(hidden.hidden)


# a chain c0 -> c1 -> c2 -> c3 of one round each with c2 hidden; worked by hand
@pytest.mark.parametrize(("discover", "replan_every", "makespan"), [
    (True, 4, 4),   # c1 completes at 2 and reveals c2, Discovered and claimed at once: 4
    (False, 3, 5),  # c2 waits for the re-plan at 3, runs 3..4; c3 (planned, waiting for c2 to exist) 4..5
    (False, 4, 6),  # the re-plan at 4: c2 4..5, c3 5..6
])
def test_a_hidden_link_of_a_chain(discover, replan_every, makespan):
    spec = chain(4).with_hidden(["c2"])
    res = simulate(spec, 2, "self", discover=discover, replan_every=replan_every)
    assert res.makespan == makespan
    assert res.stalled_worker_rounds == (makespan - 4)  # one idle worker beside c2, found but not planned
    log = res.graph.log
    by = {e["node"]: e["by"] for e in log if e["op"] == "discover"}
    assert by["c2"] == ("W1" if discover else "Lead") and by["c3"] == "Lead"
    order = [e["node"] for e in log if e["op"] == "discover"]
    assert order[:2] == ["c0", "c1"] and order.index("c2") < order.index("c3")


def test_discovering_self_scheduling_loses_nothing_on_a_tree():
    """With one parent each, a hidden node is found exactly when it becomes ready: a Discovering team runs the
    same schedule as one that knew everything (with a priority that does not depend on creation order)."""
    spec = random_dag(60, layers=6, max_deps=1, seed=2)
    base = simulate(spec, 8, "self", priority="critical_path")
    for seed in range(5):
        res = simulate(spec, 8, "self", discovery=0.6, seed=seed, priority="critical_path")
        assert res.n_hidden > 0 and res.stalled_worker_rounds == 0
        assert res.intervals.equals(base.intervals)


def test_planned_teams_lose_rounds_as_discovery_rises():
    df = compare_discovery(random_dag(120, layers=8, max_deps=1, seed=0), [0.0, 0.3, 0.6], 16, seeds=range(6))
    mean = df.groupby(["team", "discovery"])[["makespan", "stalled_worker_rounds"]].mean()
    planned = mean.loc["self (planned)"]
    assert planned.loc[0.0, "stalled_worker_rounds"] == 0
    assert planned["makespan"].is_monotonic_increasing and planned["stalled_worker_rounds"].is_monotonic_increasing
    assert planned.loc[0.6, "makespan"] > mean.loc[("self (Discover)", 0.6), "makespan"]
    assert (df.loc[df["team"] == "self (Discover)", "stalled_worker_rounds"] == 0).all()
    assert set(df["n_hidden"][df["discovery"] == 0.0]) == {0}
    assert df.groupby("discovery")["n_hidden"].mean().is_monotonic_increasing


def test_discovery_zero_is_the_workload_itself():
    spec = random_dag(40, seed=3)
    for policy in POLICIES:
        a = simulate(spec, 4, policy, straggler_p=0.2, heartbeat=1, seed=2)
        b = simulate(spec, 4, policy, straggler_p=0.2, heartbeat=1, seed=2, discovery=0.0)
        assert a.intervals.equals(b.intervals) and a.makespan == b.makespan


def test_discovery_keeps_the_straggler_coins():
    spec = random_dag(30, seed=5)
    flags = [simulate(spec, 3, "self", straggler_p=0.3, seed=2, discovery=p).intervals
             .set_index("node")["straggled"].sort_index() for p in (0.0, 0.4)]
    assert flags[0].equals(flags[1])


def test_self_scheduling_claims_the_head_of_the_graphs_frontier():
    """The simulator keeps its own ready queue; replayed into a CoordinationGraph, every round's claims are
    exactly the first nodes of the graph's frontier, in order."""
    spec = random_dag(50, seed=7)
    res = simulate(spec, 4, "self", discovery=0.4, straggler_p=0.2, heartbeat=1, seed=3)
    g = ll.CoordinationGraph()
    pos = 0
    for end in res._op_ends:
        ops = res._ops[pos:end]
        claims = [spec.ids[i] for code, i, _ in ops if code == CLAIM]
        first_claim = next((k for k, op in enumerate(ops) if op[0] == CLAIM), len(ops))
        res._apply(g, ops[:first_claim])
        assert claims == g.frontier()[:len(claims)]
        res._apply(g, ops[first_claim:])
        pos = end
    assert g.snapshot() == res.graph.snapshot()


@settings(max_examples=60, deadline=None)
@given(n_nodes=st.integers(2, 25), layers=st.integers(1, 6), max_deps=st.integers(1, 3), dag_seed=st.integers(0, 99),
       n_workers=st.integers(1, 6), policy=st.sampled_from(POLICIES), discover=st.booleans(),
       discovery=st.sampled_from([0.2, 0.6, 1.0]), straggler_p=st.sampled_from([0.0, 0.3]),
       heartbeat=st.sampled_from([None, 1]), replan_every=st.integers(1, 5), seed=st.integers(0, 99))
def test_any_run_with_discovery_finishes_within_the_rules(n_nodes, layers, max_deps, dag_seed, n_workers, policy,
                                                          discover, discovery, straggler_p, heartbeat,
                                                          replan_every, seed):
    if policy == "static":
        discover = False
    spec = random_dag(n_nodes, layers=layers, max_deps=max_deps, seed=dag_seed)
    res = simulate(spec, n_workers, policy, discovery=discovery, discover=discover, straggler_p=straggler_p,
                   heartbeat=heartbeat, replan_every=replan_every, seed=seed)
    g = res.graph  # replaying the run checks every operator's precondition
    assert g.all_done() and len(g) == n_nodes and g.frontier() == [] == frontier_bruteforce(g)
    assert res.makespan >= res.lower_bound
    snaps = res.snapshots
    assert [len(s["graph"]["nodes"]) for s in snaps] == res.rounds["nodes"].tolist()
    for s, row in zip(snaps, res.rounds.itertuples()):
        statuses = [n["status"] for n in s["graph"]["nodes"]]
        assert statuses.count("in_progress") == row.busy and statuses.count("done") == row.done
    hidden = set(res.spec.hidden)
    first = {s["round"]: {n["id"] for n in s["graph"]["nodes"]} for s in snaps}[0]
    assert not first & hidden
    discovered_by_workers = {e["node"] for e in g.log if e["op"] == "discover" and e["by"].startswith("W")}
    assert discovered_by_workers <= hidden and (discover or not discovered_by_workers)
    if not discover:
        assert (res.rounds["stalled"] >= 0).all()
    if policy == "self" and discover and straggler_p == 0.0:
        assert res.stalled_worker_rounds == 0  # a Discovering list schedule never idles beside ready work


@pytest.mark.parametrize("bad", [
    lambda: simulate(diamond(2), 2, "static", discover=True),
    lambda: simulate(diamond(2).with_hidden(["m0"]), 2, discovery=0.5),
    lambda: simulate(diamond(2), 2, discovery=1.5),
    lambda: simulate(diamond(2), 2, replan_every=0),
])
def test_bad_discovery_input(bad):
    with pytest.raises(ll.ConfigError):
        bad()


def test_discovered_nodes_get_a_creation_order_the_frontier_follows():
    spec = diamond(3, durations=[2, 1, 3]).with_hidden(["m1"])
    res = simulate(spec, 3, "self")
    creation = [e["node"] for e in res.graph.log if e["op"] == "discover"]
    assert creation == ["src", "m0", "m2", "m1", "sink"]  # sink waits in the plan until m1 is in the graph
    assert np.array_equal(res.rounds["nodes"].to_numpy()[:2], [3, 5])
    assert [e["node"] for e in res.graph.log if e["op"] == "claim"][:4] == ["src", "m0", "m2", "m1"]
    assert DISCOVER == 0
