"""The one home of the DAG algorithms: order, depth, bottom levels, critical path, layered positions."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import latte_lab as ll
from latte_lab.graph import dag


@st.composite
def dags(draw, max_nodes=14):
    """A random DAG listed in a shuffled (not necessarily topological) order, with node weights."""
    n = draw(st.integers(1, max_nodes))
    deps = {f"n{i}": sorted({f"n{j}" for j in draw(st.lists(st.integers(0, i - 1), max_size=3))}) if i else []
            for i in range(n)}
    order = draw(st.permutations(list(deps)))
    weights = {k: draw(st.integers(1, 6)) for k in order}
    return {k: deps[k] for k in order}, weights


def _nx(deps):
    g = nx.DiGraph()
    g.add_nodes_from(deps)
    g.add_edges_from((d, n) for n, ds in deps.items() for d in ds)
    return g


@settings(max_examples=150, deadline=None)
@given(dags())
def test_against_networkx(case):
    deps, w = case
    order = dag.topological_order(deps)
    assert sorted(order) == sorted(deps)
    position = {n: i for i, n in enumerate(order)}
    assert all(position[d] < position[n] for n, ds in deps.items() for d in ds)
    g = _nx(deps)
    depth = dag.depths(deps)
    assert all(depth[n] == max((depth[d] + 1 for d in deps[n]), default=0) for n in deps)
    levels = dag.bottom_levels(deps, w)
    succ = {n: [s for s in deps if n in deps[s]] for n in deps}
    assert all(levels[n] == w[n] + max((levels[s] for s in succ[n]), default=0) for n in deps)
    path = dag.critical_path(deps, w)
    assert all(a in deps[b] for a, b in zip(path, path[1:])) and not deps[path[0]] and not succ[path[-1]]
    assert sum(w[n] for n in path) == max(levels.values())
    edge_weighted = nx.DiGraph()  # node weights moved onto the edges of a chain with a source and a sink
    edge_weighted.add_edges_from((d, n, {"w": w[n]}) for n, ds in deps.items() for d in ds)
    edge_weighted.add_edges_from(("^", n, {"w": w[n]}) for n in deps if not deps[n])
    assert nx.dag_longest_path_length(edge_weighted, weight="w") == max(levels.values())
    unweighted = dag.critical_path(deps)
    assert len(unweighted) == nx.dag_longest_path_length(g) + 1


def test_ties_go_to_the_earliest_listed_nodes():
    deps = {"x": [], "y": [], "z": ["x", "y"], "u": ["x"], "v": ["y"]}
    assert dag.critical_path(deps) == ["x", "z"]
    assert dag.critical_path({"y": [], "x": [], "z": ["x", "y"]}) == ["y", "z"]
    assert dag.critical_path({}) == []


def test_dependencies_outside_the_mapping_are_ignored():
    deps = {"b": ["a"], "c": ["b", "gone"]}
    assert dag.topological_order(deps) == ["b", "c"]
    assert dag.depths(deps) == {"b": 0, "c": 1}
    assert dag.critical_path(deps) == ["b", "c"]


def test_a_cycle_is_named():
    with pytest.raises(ll.DataError, match="cycle"):
        dag.topological_order({"a": ["b"], "b": ["a"], "c": []})
    with pytest.raises(ll.DataError, match="cycle"):
        dag.depths({"a": ["b"], "b": ["a"]})


def test_the_coordination_graph_and_workloads_share_it():
    g = ll.CoordinationGraph()
    for nid, deps in (("x", []), ("y", []), ("z", ["x", "y"])):
        g.discover(nid, deps, by="Lead")
    assert g.critical_path() == dag.critical_path({"x": [], "y": [], "z": ["x", "y"]}) == ["x", "z"]
    spec = ll.scheduling.diamond(3, durations=[1, 4, 2])
    deps = dict(zip(spec.ids, spec.deps))
    assert spec.critical_path() == dag.critical_path(deps, dict(zip(spec.ids, spec.durations)))


def test_depths_are_networkx_topological_generations():
    import random

    import networkx as nx

    rng = random.Random(7)
    for n in (1, 5, 30, 120):
        names = [f"n{i}" for i in range(n)]
        order = names[:]
        rng.shuffle(order)  # listed out of topological order too
        deps = {v: [names[j] for j in rng.sample(range(i), min(i, rng.randint(0, 3)))]
                for i, v in enumerate(names)}
        deps = {v: deps[v] for v in order}
        g = nx.DiGraph()
        g.add_nodes_from(deps)
        g.add_edges_from((d, v) for v, ds in deps.items() for d in ds)
        expected = {v: k for k, layer in enumerate(nx.topological_generations(g)) for v in layer}
        assert dag.depths(deps) == {v: expected[v] for v in deps}
