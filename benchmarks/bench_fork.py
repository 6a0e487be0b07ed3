"""What a fork saves: forking a recorded 30-round trial at round 20 against running the same 30 rounds again
from round 0 (latte_lab.fork). Both ways run in this process on the local sandbox; "cold" clears the
process's test-run memo before each run (no test run of an earlier one is reused), "warm" keeps it (a
session that has run the parent, as a notebook that forks a trial it just ran).

Prints the medians (ms) of both and their ratio. Usage: python benchmarks/bench_fork.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import latte_lab as ll
from latte_lab.fork import fork
from latte_lab.sandbox.pytest import clear_memo

ROUNDS, AT = 30, 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each way (default: 5)")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="latte_lab-bench-fork-")
    cfg = ll.TrialConfig(task="debug", team="latte", model="simulated", seed=0, max_rounds=ROUNDS, sandbox="local",
                         runs_dir=f"{base}/parent")
    parent = ll.run_trial(cfg)
    assert parent.rounds == ROUNDS, f"the parent ended after {parent.rounds} rounds, not {ROUNDS}"
    print(f"parent: {parent.trial_id}, {parent.rounds} rounds, {parent.tokens:,} tokens")
    for label, cold in (("cold memo", True), ("warm memo", False)):
        times = {"rerun 0..30": [], f"fork at {AT}": []}
        for i in range(args.repeats):
            for way in times:
                if cold:
                    clear_memo()
                start = time.perf_counter()
                if way.startswith("rerun"):
                    ll.run_trial(cfg.model_copy(update={"runs_dir": f"{base}/rerun-{label}-{i}"}))
                else:
                    fork(parent.run_dir, AT, runs_dir=f"{base}/fork-{label}-{i}")
                times[way].append(time.perf_counter() - start)
        rerun, forked = (1000 * statistics.median(v) for v in times.values())
        print(f"{label}: rerun from round 0 {rerun:7.0f} ms · fork at round {AT} {forked:7.0f} ms · "
              f"fork / rerun {forked / rerun:.2f}")


if __name__ == "__main__":
    main()
