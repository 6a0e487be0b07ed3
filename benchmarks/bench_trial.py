"""Seconds for one simulated LATTE trial on debug, end to end; the simulated model's own work per call; and
the orchestration overhead per round.

The model's work per call is timed in CPU seconds (``time.process_time`` around ``generate``), so other
processes on the machine do not inflate it; the trial is wall seconds. The overhead per round excludes
the test/script subprocesses and the hidden evaluation (timed by wrapping the workspace's runners) and,
separately, the simulated model's own computation.
Targets: under 3 s per trial, under 1 ms of model work per call, under 5 ms of orchestration per round.

    python benchmarks/bench_trial.py [--seeds 3] [--task debug] [--team latte]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import latte_lab as ll
from latte_lab import workspace as wsmod


class Timer:
    def __init__(self):
        self.seconds = 0.0
        self.cpu = 0.0
        self.calls = 0

    def wrap(self, fn):
        def inner(*a, **k):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **k)
            finally:
                self.seconds += time.perf_counter() - t0
                self.cpu += time.process_time() - c0
                self.calls += 1

        return inner


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--task", default="debug")
    ap.add_argument("--team", default="latte")
    ap.add_argument("--model", default="simulated")
    args = ap.parse_args()

    tools, model_t = Timer(), Timer()
    ws_cls = wsmod.Workspace
    ws_cls.run_tests = tools.wrap(ws_cls.run_tests)
    ws_cls.run_script = tools.wrap(ws_cls.run_script)
    task = ll.tasks.get(args.task)
    task_cls = type(task)
    task_cls.evaluate = tools.wrap(task_cls.evaluate)
    from latte_lab.models import make_model

    totals, overheads, overheads_no_model, rounds_all, per_call = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            tools.seconds = tools.cpu = tools.calls = 0
            model_t.seconds = model_t.cpu = model_t.calls = 0
            model = make_model(args.model)
            model.generate = model_t.wrap(model.generate)
            cfg = ll.TrialConfig(task=args.task, team=args.team, model=args.model, seed=seed, runs_dir=tmp)
            t0 = time.perf_counter()
            res = ll.run_trial(cfg, model=model)
            total = time.perf_counter() - t0
            rounds = max(res.rounds, 1)
            totals.append(total)
            rounds_all.append(res.rounds)
            overheads.append((total - tools.seconds) / rounds)
            overheads_no_model.append((total - tools.seconds - model_t.seconds) / rounds)
            per_call.append(model_t.cpu / max(model_t.calls, 1))
            print(f"seed {seed}: {total:6.2f} s end to end · {res.rounds} rounds · success={res.success} · "
                  f"subprocess/eval {tools.seconds:5.2f} s in {tools.calls} runs · simulated model "
                  f"{model_t.seconds:5.2f} s in {model_t.calls} calls ({1000 * per_call[-1]:.2f} ms CPU per call)")
    print(f"simulated {args.team} trial on {args.task}: median {statistics.median(totals):.2f} s end to end "
          f"(target < 3 s), median {statistics.median(rounds_all)} rounds")
    print(f"simulated model's own work: median {1000 * statistics.median(per_call):.3f} ms CPU per call "
          "(target < 1 ms)")
    print(f"orchestration overhead per round excluding test subprocesses: "
          f"{1000 * statistics.median(overheads):.2f} ms (includes the simulated model's own work)")
    print(f"orchestration overhead per round excluding test subprocesses and model calls: "
          f"{1000 * statistics.median(overheads_no_model):.2f} ms (target < 5 ms)")


if __name__ == "__main__":
    main()
