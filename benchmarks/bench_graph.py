"""Speed of the coordination graph: building and driving large DAGs, incremental vs from-scratch frontier.

Prints figures only (no assertions). Run: ``.venv/bin/python benchmarks/bench_graph.py``.

(a) a seeded layered DAG (LAYERS layers, each node with 1-3 dependencies in the previous layer) is built
    with Discover and driven to completion by WORKERS workers that repeatedly claim from the frontier and
    complete what they hold, one "round" at a time;
(b) a smaller DAG driven the same way while the frontier is read after every operation, once with the
    incremental ``frontier()`` and once with ``frontier_bruteforce`` (recomputed from scratch). The
    from-scratch run over the whole drive would take minutes, so both are timed on the same fixed prefix of
    operations and the ratio of the per-operation times is printed.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from latte_lab.graph import CoordinationGraph, frontier_bruteforce

SEED = 0  # fixed so every run drives the same DAG
LARGE_NODES = 100_000  # (a) graph size from the brief: a graph far larger than any team builds
SMALL_NODES = 20_000  # (b) graph size for the incremental vs from-scratch comparison
LAYERS = 100  # depth of the layered DAG
WORKERS = 1_000  # concurrent workers claiming from the frontier
PREFIX_OPS = 500  # (b) operations timed for both frontier methods (from-scratch is O(V + E) per call)


def build(n_nodes: int, seed: int = SEED) -> CoordinationGraph:
    """A layered DAG: layer 0 has no deps; every later node depends on 1-3 nodes of the previous layer."""
    rng = random.Random(seed)
    g = CoordinationGraph()
    width = n_nodes // LAYERS
    prev: list[str] = []
    for layer in range(LAYERS):
        cur = []
        for j in range(width):
            node_id = f"L{layer}-{j}"
            deps = rng.sample(prev, rng.randint(1, min(3, len(prev)))) if prev else []
            g.discover(node_id, deps, title=node_id, by="Lead")
            cur.append(node_id)
        prev = cur
    return g


def drive(g: CoordinationGraph, n_workers: int, check=None, max_ops: int | None = None) -> int:
    """Claim frontier nodes for idle workers, then complete every held node; repeat until all done.

    ``check(g)`` runs after every operation when given. Returns the number of operations applied.
    """
    workers = [f"Dev{i}" for i in range(1, n_workers + 1)]
    ops = 0
    while not g.all_done():
        ready = g.frontier()
        held = list(zip(workers, ready))
        for worker, node_id in held:
            g.claim(node_id, worker)
            ops += 1
            if check is not None:
                check(g)
            if max_ops is not None and ops >= max_ops:
                return ops
        for worker, node_id in held:
            g.complete(node_id, worker)
            ops += 1
            if check is not None:
                check(g)
            if max_ops is not None and ops >= max_ops:
                return ops
    return ops


def main() -> None:
    t0 = time.perf_counter()
    g = build(LARGE_NODES)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_ops = drive(g, WORKERS)
    t_drive = time.perf_counter() - t0
    print(f"graph build {LARGE_NODES} nodes ({LAYERS} layers, 1-3 deps): {t_build:.2f} s")
    print(f"graph drive {LARGE_NODES} nodes / {WORKERS} workers ({n_ops} operations): {t_drive:.2f} s")
    print(f"graph build + drive {LARGE_NODES} nodes: {t_build + t_drive:.2f} s "
          f"({1e6 * t_drive / n_ops:.2f} us per operation)")

    def incremental(graph: CoordinationGraph) -> None:
        graph.frontier()

    def from_scratch(graph: CoordinationGraph) -> None:
        frontier_bruteforce(graph)

    g = build(SMALL_NODES)
    t0 = time.perf_counter()
    n_full = drive(g, WORKERS, check=incremental)
    t_full = time.perf_counter() - t0
    print(f"graph drive {SMALL_NODES} nodes with incremental frontier after every operation "
          f"({n_full} operations): {t_full:.2f} s")

    g = build(SMALL_NODES)
    t0 = time.perf_counter()
    n_inc = drive(g, WORKERS, check=incremental, max_ops=PREFIX_OPS)
    t_inc = time.perf_counter() - t0
    g = build(SMALL_NODES)
    t0 = time.perf_counter()
    n_bf = drive(g, WORKERS, check=from_scratch, max_ops=PREFIX_OPS)
    t_bf = time.perf_counter() - t0
    per_inc, per_bf = t_inc / n_inc, t_bf / n_bf
    print(f"frontier check after each of the first {PREFIX_OPS} operations, {SMALL_NODES} nodes: "
          f"incremental {1e6 * per_inc:.1f} us/op, from scratch {1e6 * per_bf:.1f} us/op")
    print(f"incremental vs from-scratch speed-up (same {PREFIX_OPS}-operation prefix): {per_bf / per_inc:.0f}x")
    print(f"from-scratch estimate for the whole {n_full}-operation drive: {per_bf * n_full:.0f} s "
          f"(incremental measured: {t_full:.2f} s)")


if __name__ == "__main__":
    main()
