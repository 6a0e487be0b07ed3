"""Wall time of the paper-sized grid with 1 and with 2 worker processes, and the parallel efficiency.

The grid: 3 tasks x 5 teams x 2 simulated profiles x 10 replicates = 300 trials (offline). Each job count
runs the whole grid into a fresh directory. Target: 2 jobs at least 1.8x faster than 1 (efficiency 0.9).
Each run has its own empty response cache. The machine's load average is printed before and after each run: other processes on the machine slow
the runs down unevenly, so a figure measured under load says little.

    python benchmarks/bench_sweep.py [--replicates 10] [--jobs 1 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import latte_lab as ll

TASKS = ["eda", "debug", "textproc"]
TEAMS = ["latte", "static", "leader_worker", "decentralized", "pipeline"]
PROFILES = ["simulated/default", "simulated/careful"]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--keep", default=None, help="keep the sweep directories under this folder")
    args = ap.parse_args()

    grid = {"task": TASKS, "team": TEAMS, "model": PROFILES, "replicates": args.replicates}
    n = len(ll.sweep.expand_grid(grid, "x"))
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_sweep-"))
    print(f"grid: {len(TASKS)} tasks x {len(TEAMS)} teams x {len(PROFILES)} profiles x {args.replicates} "
          f"replicates = {n} trials")
    walls: dict[int, float] = {}
    try:
        for jobs in args.jobs:
            out = root / f"jobs{jobs}"
            shutil.rmtree(out, ignore_errors=True)
            # a fresh response cache per run: with a shared one the second run would replay the first's calls
            os.environ["LATTE_LAB_CACHE"] = str(root / f"cache-jobs{jobs}.sqlite")
            before = load()
            start = time.perf_counter()
            df = ll.run_sweep(grid, out=out, n_jobs=jobs, progress=False)
            walls[jobs] = time.perf_counter() - start
            ok = int((df["status"] == "ok").sum())
            print(f"n_jobs={jobs}: {walls[jobs]:.1f} s wall for {len(df)} trials ({ok} ok), "
                  f"{walls[jobs] / len(df):.2f} s per trial; before: {before}; after: {load()}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if 1 in walls:
        for jobs, wall in walls.items():
            if jobs > 1:
                speedup = walls[1] / wall
                print(f"speedup with {jobs} jobs: {speedup:.2f}x; parallel efficiency {speedup / jobs:.2f} "
                      f"(target for 2 jobs: 1.80x, 0.90)")


if __name__ == "__main__":
    main()
