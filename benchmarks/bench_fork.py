"""What a fork saves: forking a recorded 30-round trial at round 20, restored from the state saved at that
round's end, against the same fork replaying rounds 1-20 (as forks did before the saved state) and against
running the 30 rounds again from round 0 (latte_lab.forking). The parent is the first seed from ``--seed``
whose debug trial runs all 30 rounds. Both ways run in this process on the local sandbox; "cold" clears the
process's test-run memo before each run (no test run of an earlier one is reused), "warm" keeps it (a
session that has run the parent, as a notebook that forks a trial it just ran).

Prints the medians (ms) of both and their ratio, and the tools each way ran: the agents' and the
orchestrator's test runs and scripts (``Workspace.run_tests``, ``Workspace.run_script``), and of those the
runs that started a sandboxed process (not served by the memo). The final hidden evaluation is not counted: every
trial makes one. Usage: python benchmarks/bench_fork.py [--repeats N] [--at K] [--seed S]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time

import latte_lab as ll
from latte_lab import forking
from latte_lab.sandbox.pytest import clear_memo

ROUNDS, AT = 30, 20


@contextlib.contextmanager
def no_saved_state():
    """A fork as before the saved state: none is found, so the fork replays its parent's rounds (its calls from
    the cassette, its tools run again)."""
    saved = forking.read_state
    forking.read_state = lambda *args, **kwargs: None
    try:
        yield
    finally:
        forking.read_state = saved


class ToolCount:
    """Counts the workspace's tool runs while it is installed (the class's methods, wrapped)."""

    def __init__(self):
        self.calls = self.processes = 0
        self._saved = {}

    def __enter__(self):
        for name in ("run_tests", "run_script"):
            real = getattr(ll.Workspace, name)
            self._saved[name] = real

            def wrapped(ws, *args, _real=real, _name=name, **kwargs):
                run = _real(ws, *args, **kwargs)
                self.calls += 1
                self.processes += not getattr(run, "cached", False)
                return run

            setattr(ll.Workspace, name, wrapped)
        return self

    def __exit__(self, *exc):
        for name, real in self._saved.items():
            setattr(ll.Workspace, name, real)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each way (default: 5)")
    parser.add_argument("--at", type=int, default=AT, help=f"the fork's round (default: {AT})")
    parser.add_argument("--seed", type=int, default=0, help="the first seed tried for the parent (default: 0)")
    args = parser.parse_args()
    at = args.at
    base = tempfile.mkdtemp(prefix="latte_lab-bench-fork-")
    for seed in range(args.seed, args.seed + 50):  # the first seed whose trial runs all ROUNDS rounds
        cfg = ll.TrialConfig(task="debug", team="latte", model="simulated", seed=seed, max_rounds=ROUNDS,
                             sandbox="local", runs_dir=f"{base}/parent")
        parent = ll.run_trial(cfg)
        if parent.rounds == ROUNDS:
            break
    else:
        raise SystemExit(f"no seed from {args.seed} ran {ROUNDS} rounds")
    print(f"parent: {parent.trial_id}, {parent.rounds} rounds, {parent.tokens:,} tokens")
    for label, cold in (("cold memo", True), ("warm memo", False)):
        times = {f"rerun 0..{ROUNDS}": [], f"fork at {at}, replaying rounds 1-{at} (before)": [],
                 f"fork at {at}, restored from the saved state": []}
        tools = {}
        for i in range(args.repeats):
            for way in times:
                if cold:
                    clear_memo()
                with ToolCount() as count:
                    start = time.perf_counter()
                    if way.startswith("rerun"):
                        ll.run_trial(cfg.model_copy(update={"runs_dir": f"{base}/rerun-{label}-{i}"}))
                    elif "replaying" in way:
                        with no_saved_state():
                            ll.fork(parent.run_dir, at, runs_dir=f"{base}/replay-{label}-{i}")
                    else:
                        ll.fork(parent.run_dir, at, runs_dir=f"{base}/fork-{label}-{i}")
                    times[way].append(time.perf_counter() - start)
                tools[way] = (count.calls, count.processes)
        rerun, replayed, forked = (1000 * statistics.median(v) for v in times.values())
        print(f"{label}: rerun from round 0 {rerun:7.0f} ms · fork at round {at} replaying {replayed:7.0f} ms · "
              f"restored {forked:7.0f} ms · restored / replaying {forked / replayed:.2f}")
        for way, (calls, processes) in tools.items():
            print(f"    {way}: {calls} tool runs, {processes} of them sandboxed processes (the rest from the memo)")


if __name__ == "__main__":
    main()
