"""Free functions over a DAG given as ``{node: its dependencies}``: order, depth, bottom levels, critical path.

The coordination graph, the scheduling workloads and the drawings all ask the same few questions of a
dependency graph; they are answered once, here. A graph is a mapping from each node id to the ids it depends
on, listed in the order that breaks ties (creation order, as in :class:`~latte_lab.graph.CoordinationGraph`).
Dependencies that are not keys of the mapping are ignored, so a caller can pass a subgraph (say, the nodes
still open) without pruning the lists. Nothing here mutates its input.

>>> deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
>>> topological_order(deps), depths(deps)
(['a', 'b', 'c', 'd'], {'a': 0, 'b': 1, 'c': 1, 'd': 2})
>>> bottom_levels(deps, {"a": 1, "b": 3, "c": 2, "d": 1})
{'a': 5, 'b': 4, 'c': 3, 'd': 1}
>>> critical_path(deps, {"a": 1, "b": 3, "c": 2, "d": 1}), critical_path(deps)
(['a', 'b', 'd'], ['a', 'b', 'd'])
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from latte_lab.errors import DataError

__all__ = ["bottom_levels", "critical_path", "depths", "topological_order"]

Deps = Mapping[str, Iterable[str]]


def _index(deps: Deps) -> tuple[list[str], list[list[int]]]:
    """Node ids in mapping order and, per node, the positions of its (in-mapping) dependencies."""
    ids = list(deps)
    pos = {n: i for i, n in enumerate(ids)}
    return ids, [[pos[d] for d in ds if d in pos] for ds in deps.values()]


def _order(ids: list[str], dep_idx: list[list[int]]) -> list[int]:
    """Positions in topological order, ties to the earliest-listed node (Kahn's algorithm with a heap).

    A mapping that is already in topological order (the common case) is returned as it is, in O(V + E).
    """
    if all(d < i for i, ds in enumerate(dep_idx) for d in ds):
        return list(range(len(ids)))
    indeg = [len(ds) for ds in dep_idx]
    succ: list[list[int]] = [[] for _ in ids]
    for i, ds in enumerate(dep_idx):
        for d in ds:
            succ[d].append(i)
    heap = [i for i, k in enumerate(indeg) if k == 0]
    heapq.heapify(heap)
    out: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        out.append(i)
        for s in succ[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, s)
    if len(out) != len(ids):
        stuck = [ids[i] for i, k in enumerate(indeg) if k > 0]
        raise DataError(f"the dependency graph has a cycle through {', '.join(stuck[:5])}"
                        f"{' ...' if len(stuck) > 5 else ''}; a task graph must be acyclic")
    return out


def topological_order(deps: Deps) -> list[str]:
    """Every node after all of its dependencies; among nodes free to go next, the earliest-listed first.

    Raises :class:`~latte_lab.errors.DataError` naming the nodes on a cycle.

    >>> topological_order({"late": ["early"], "early": []})
    ['early', 'late']
    """
    ids, dep_idx = _index(deps)
    return [ids[i] for i in _order(ids, dep_idx)]


def _levels(deps: Deps, weight: Mapping[str, float] | Callable[[str], float] | None):
    ids, dep_idx = _index(deps)
    order = _order(ids, dep_idx)
    succ: list[list[int]] = [[] for _ in ids]
    for i, ds in enumerate(dep_idx):
        for d in ds:
            succ[d].append(i)
    if weight is None:
        w = [1] * len(ids)
    elif callable(weight):
        w = [weight(n) for n in ids]
    else:
        w = [weight[n] for n in ids]
    level: list[Any] = [0] * len(ids)
    nxt = [-1] * len(ids)  # the successor a heaviest chain continues with (earliest-listed on ties)
    for i in reversed(order):
        best, via = 0, -1
        for s in succ[i]:
            if via < 0 or level[s] > best or (level[s] == best and s < via):
                best, via = level[s], s
        level[i] = w[i] + best
        nxt[i] = via
    return ids, dep_idx, level, nxt


def bottom_levels(deps: Deps, weight: Mapping[str, float] | Callable[[str], float] | None = None) -> dict[str, Any]:
    """For each node, its weight plus the heaviest chain of successors after it (weights default to 1).

    This is the classic list-scheduling priority (HLFET's static level; HEFT's upward rank when the weight
    is a node's mean execution time), and its maximum is the critical path length.

    >>> bottom_levels({"a": [], "b": ["a"], "c": []}, {"a": 2, "b": 5, "c": 1})
    {'a': 7, 'b': 5, 'c': 1}
    """
    ids, _, level, _ = _levels(deps, weight)
    return dict(zip(ids, level))


def critical_path(deps: Deps, weight: Mapping[str, float] | Callable[[str], float] | None = None) -> list[str]:
    """The heaviest dependency chain (by node count when no weight is given), as node ids.

    Ties go to the chain that starts at the earliest-listed node and then continues with the earliest-listed
    successor. Empty for an empty graph. O(V + E) when the mapping is in topological order.

    >>> critical_path({"x": [], "y": [], "z": ["x", "y"]})
    ['x', 'z']
    >>> critical_path({"x": [], "y": [], "z": ["x", "y"]}, {"x": 1, "y": 2, "z": 1})
    ['y', 'z']
    """
    ids, dep_idx, level, nxt = _levels(deps, weight)
    if not ids:
        return []
    top = max(level)
    i = next(i for i, lv in enumerate(level) if lv == top and not dep_idx[i])
    path = [i]
    while nxt[path[-1]] >= 0:
        path.append(nxt[path[-1]])
    return [ids[j] for j in path]


def depths(deps: Deps) -> dict[str, int]:
    """The dependency depth of every node: 0 for nodes without dependencies, else one more than the deepest
    dependency (the topological generations). In mapping order.

    >>> depths({"a": [], "b": ["a"], "c": ["a", "b"], "d": []})
    {'a': 0, 'b': 1, 'c': 2, 'd': 0}
    """
    ids, dep_idx = _index(deps)
    depth = [0] * len(ids)
    for i in _order(ids, dep_idx):
        depth[i] = max((depth[d] + 1 for d in dep_idx[i]), default=0)
    return dict(zip(ids, depth))
