"""Speed of the scheduling simulator: simulate() on a 10,000-node DAG with 100 workers.

Prints seconds only (best of REPEATS runs; no assertions). Run: ``.venv/bin/python benchmarks/bench_scheduling.py``.

Each policy runs once without stragglers and once with stragglers and heartbeat release; every run drives
the real CoordinationGraph (Discover, Assign, Claim, Complete, Release). Snapshots are rebuilt lazily from
the operation log, so they are not part of the timing; the time to rebuild the graph at every round is
printed separately for one run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from latte_lab.scheduling import POLICIES, random_dag, simulate

SEED = 0  # fixed so every run simulates the same DAG and stragglers
N_NODES = 10_000  # DAG size from the brief
N_WORKERS = 100  # workers from the brief
STRAGGLER_P = 0.1  # the straggler setting of the second run per policy
HEARTBEAT = 2  # rounds beyond the expected duration before the Lead releases a node
REPEATS = 3  # best of this many runs is printed (the first also pays for importing pandas)
SNAPSHOT_NODES = 1_000  # DAG size for the lazy per-round snapshot rebuild (quadratic: rounds x nodes)


def main() -> None:
    t0 = time.perf_counter()
    spec = random_dag(N_NODES, seed=SEED)
    print(f"random_dag({N_NODES}): {time.perf_counter() - t0:.3f} s  ({spec!r}, "
          f"{sum(len(d) for d in spec.deps)} edges)")
    for policy in POLICIES:
        for label, kwargs in (("no stragglers", {}),
                              (f"straggler_p={STRAGGLER_P}, heartbeat={HEARTBEAT}",
                               {"straggler_p": STRAGGLER_P, "heartbeat": HEARTBEAT})):
            times = []
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                res = simulate(spec, N_WORKERS, policy, seed=SEED, **kwargs)
                times.append(time.perf_counter() - t0)
            dt = min(times)
            print(f"simulate {policy:6s} x {N_WORKERS} workers, {label:32s}: {dt:6.3f} s  "
                  f"(makespan {res.makespan}, lower bound {res.lower_bound}, {len(res.graph.log)} graph operations, "
                  f"{res.makespan / dt:,.0f} rounds/s)")
    small = random_dag(SNAPSHOT_NODES, seed=SEED)
    res = simulate(small, N_WORKERS // 10, "self", seed=SEED)
    t0 = time.perf_counter()
    snaps = res.snapshots
    print(f"snapshots of {SNAPSHOT_NODES} nodes x {len(snaps)} rounds rebuilt from the log: "
          f"{time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
