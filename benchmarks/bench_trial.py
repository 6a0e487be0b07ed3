"""Seconds for one simulated LATTE trial on debug, end to end; the simulated model's own work per call; the
orchestration per round; and what one memo-missing run of the debug suite costs, from a fresh interpreter
down to pytest's own work.

The model's work per call is timed in CPU seconds (``time.process_time`` around ``generate``), so other
processes on the machine do not inflate it; the trial is wall seconds. The orchestration per round excludes
the test/script subprocesses and the hidden evaluation (timed by wrapping the workspace's runners) and,
separately, the simulated model's own computation.
Targets: under 1 s per trial, under 1 ms of model work per call, under 1 ms of orchestration per round.
Then the same trials again, every test run now served by the memo, with a timer around each main part of a
round (the model, cassette lines, events, memo lookups, edits, parsing, reads, the Lead's summary,
prompts): where the orchestration's milliseconds go when nothing is waited for.

``--baseline DIR`` runs the same trial measurement on an older checkout (its own ``DIR/.venv``, e.g. a
worktree of the baseline commit) in the same run, and prints both side by side:

    python benchmarks/bench_trial.py [--seeds 3] [--task debug] [--team latte] [--baseline ../wt-base]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from timing import REPEATS, machine_line, machine_speed_ms, median_ms

STATES: list[dict[str, str]] = []  # workspace files of the first trial's memo-missing public test runs


class Timer:
    def __init__(self):
        self.seconds = 0.0
        self.cpu = 0.0
        self.calls = 0

    def reset(self) -> None:
        self.seconds = self.cpu = 0.0
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


def measure_trials(seeds: int, task_id: str, team: str, model_name: str, sandbox: str | None = None) -> dict:
    """Trial figures per seed. Written against the API every version of latte_lab has had, so that the
    same function measures a baseline checkout."""
    import latte_lab as ll
    from latte_lab import workspace as wsmod
    from latte_lab.models import make_model

    tools, model_t = Timer(), Timer()
    misses = [0]
    ws_cls = wsmod.Workspace
    original_run_tests = ws_cls.run_tests

    def counting_run_tests(self, *a, **k):
        run = original_run_tests(self, *a, **k)
        missed = not getattr(run, "cached", False)
        misses[0] += missed
        if missed and record_states and hasattr(self, "snapshot_files"):
            STATES.append(self.snapshot_files())  # the files of one workspace state the agents tested
        return run

    ws_cls.run_tests = tools.wrap(counting_run_tests)
    ws_cls.run_script = tools.wrap(ws_cls.run_script)
    task_cls = type(ll.tasks.get(task_id))
    task_cls.evaluate = tools.wrap(task_cls.evaluate)
    rows = []
    record_states = False
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(seeds):
            record_states = seed == 0  # the first trial's states, replayed through the floor below
            tools.reset()
            model_t.reset()
            misses[0] = 0
            model = make_model(model_name)
            model.generate = model_t.wrap(model.generate)
            # a baseline whose TrialConfig has no sandbox field runs locally, the only backend it has
            extra = {"sandbox": sandbox} if sandbox and "sandbox" in ll.TrialConfig.model_fields else {}
            cfg = ll.TrialConfig(task=task_id, team=team, model=model_name, seed=seed, runs_dir=tmp, **extra)
            t0, c0 = time.perf_counter(), time.process_time()
            res = ll.run_trial(cfg, model=model)
            total, cpu = time.perf_counter() - t0, time.process_time() - c0
            rounds = max(res.rounds, 1)
            rows.append({
                "seed": seed, "total": total, "rounds": res.rounds, "success": bool(res.success),
                "tools": tools.seconds, "tool_calls": tools.calls, "misses": misses[0],
                "model": model_t.seconds, "model_calls": model_t.calls,
                "per_call_cpu": model_t.cpu / max(model_t.calls, 1),
                "overhead": (total - tools.seconds) / rounds,
                "overhead_no_model": (total - tools.seconds - model_t.seconds) / rounds,
                # This process's CPU seconds (the test runs' own processes excluded): what the load of the
                # machine inflates least.
                "overhead_cpu": (cpu - tools.cpu) / rounds,
                "overhead_cpu_no_model": (cpu - tools.cpu - model_t.cpu) / rounds,
            })
    # The wrapped runner stays installed: the suite-run figures below run the suite too, and their states
    # are not the trial's (with one seed, recording would otherwise go on through them)
    record_states = False
    return {"rows": rows}


def summary(result: dict) -> dict:
    rows = result["rows"]

    def med(key):
        return statistics.median(r[key] for r in rows)

    return {
        "trial end to end (s, median)": (med("total"), "{:.2f}"),
        "rounds (median)": (med("rounds"), "{:.0f}"),
        "successes": (sum(r["success"] for r in rows), "{:.0f}"),
        "test/script runs + evaluation (median)": (med("tool_calls"), "{:.0f}"),
        "  of which memo-missing test runs": (med("misses"), "{:.0f}"),
        "  their seconds (median)": (med("tools"), "{:.2f}"),
        "simulated model CPU per call (ms)": (1000 * med("per_call_cpu"), "{:.3f}"),
        "orchestration per round, model included (ms)": (1000 * med("overhead"), "{:.2f}"),
        "orchestration per round, model excluded (ms)": (1000 * med("overhead_no_model"), "{:.2f}"),
        "  the same in CPU ms, model included": (1000 * med("overhead_cpu"), "{:.2f}"),
        "  the same in CPU ms, model excluded": (1000 * med("overhead_cpu_no_model"), "{:.2f}"),
    }


def print_rows(result: dict, label: str) -> None:
    for r in result["rows"]:
        print(f"  {label} seed {r['seed']}: {r['total']:6.2f} s end to end · {r['rounds']} rounds · "
              f"success={r['success']} · subprocess/eval {r['tools']:5.2f} s in {r['tool_calls']} runs "
              f"({r['misses']} memo-missing) · simulated model {r['model']:5.2f} s in {r['model_calls']} calls "
              f"({1000 * r['per_call_cpu']:.2f} ms CPU per call)")


def run_baseline(directory: Path, args) -> dict | None:
    python = directory / ".venv" / "bin" / "python"
    if not python.exists():
        print(f"baseline: {python} is missing; make the baseline's venv first (make .venv/.installed-stamp)")
        return None
    out = subprocess.run(
        [str(python), str(Path(__file__).resolve()), "--json", "--seeds", str(args.seeds), "--task", args.task,
         "--team", args.team, "--model", args.model, "--sandbox", args.sandbox],
        cwd=directory, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if out.returncode != 0:
        print(f"baseline run failed:\n{out.stderr[-3000:]}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_suite_runs(task_id: str = "debug") -> dict[str, float]:
    """Milliseconds (median of REPEATS) of one run of the task's public suite after a one-line change,
    each way latte_lab can run it, down to pytest's own work with everything already imported."""
    import latte_lab as ll
    from latte_lab.sandbox import bwrap, clear_memo, warm, zygote
    from latte_lab.sandbox.pytest import JUNIT_OPTIONS, PYTEST_ARGS, config_args
    from latte_lab.workspace import Workspace

    task = ll.tasks.get(task_id)
    module = task.required_outputs[0]
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ways = [("local, exec path: fresh `python -m pytest` in the sandbox", False, "local"),
                ("local, zygote: forked from the warm fork server", True, "local")]
        if bwrap.probe()[0]:
            ways[:0] = [("bwrap: a fresh bubblewrap sandbox per run", False, "bwrap"),
                        ("bwrap, warm: forked in the process's kept sandbox", True, "bwrap")]
        for label, use_zygote, backend in ways:
            zygote.USE_ZYGOTE = warm.USE_WARM = use_zygote
            clear_memo()
            ws = Workspace(Path(tmp) / label.split(":")[0].replace(", ", "-"), memo=True, sandbox=backend)
            task.setup(ws)
            base = ws.read(module)
            ws.run_tests()  # the zygote's start-up, once per process, is not a per-run cost
            edits = iter(range(10**6))

            def distinct_run(ws=ws, base=base, edits=edits) -> None:
                ws.setup_file(module, f"{base}\n# edit {next(edits)}\n")
                assert not ws.run_tests().cached

            figures[label] = median_ms(distinct_run)
            figures["memo hit: the same files again"] = median_ms(ws.run_tests)
        zygote.USE_ZYGOTE = warm.USE_WARM = True
        warm.shutdown()
        # The floor of every way that runs pytest per change: pytest.main in this process, where pytest and
        # its plugins are imported and warm; no process, no sandbox (the workspace's modules are dropped
        # after each run, as a fresh process would not have them).
        root = Path(tmp) / "bare"
        ws = Workspace(root, memo=False, sandbox="local")
        task.setup(ws)
        base = ws.read(module)
        argv = [*PYTEST_ARGS[2:], *config_args(root), *ws.test_args, f"--junitxml={root / '.junit.xml'}", *JUNIT_OPTIONS]
        import contextlib
        import io

        import pytest

        edits = iter(range(10**6))

        def bare_run(edit: bool = True) -> None:
            if edit:
                ws.setup_file(module, f"{base}\n# edit {next(edits)}\n")
            before = set(sys.modules)
            cwd, path = os.getcwd(), list(sys.path)
            autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # as every sandboxed run
            try:
                os.chdir(root)
                sys.path.insert(0, str(root))
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    pytest.main(argv)
            finally:
                os.chdir(cwd)
                sys.path[:] = path
                for name in set(sys.modules) - before:
                    del sys.modules[name]
                if autoload is None:
                    del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
                else:
                    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload

        bare_run()  # pytest's lazy imports, once
        import gc

        gc.collect()
        gc.freeze()  # as the zygote does: the collector skips this process's own objects
        try:
            figures["floor: pytest.main in this warm process, no fork, no sandbox"] = median_ms(bare_run)
            if STATES:  # the first trial's own states, each once, through the same floor
                seconds = []
                for files in STATES:
                    for path, text in files.items():
                        ws.setup_file(path, text)
                    t0 = time.perf_counter()
                    bare_run(edit=False)
                    seconds.append(time.perf_counter() - t0)
                figures[TRIAL_STATES_LABEL] = 1000 * sum(seconds)
        finally:
            gc.unfreeze()
    return figures


TRIAL_STATES_LABEL = "floor over the first trial's memo-missing states, all of them (ms in all)"

# The parts of a round timed by round_parts: (label, module, class, method). A part some checkout lacks is left out.
ROUND_PARTS = (
    ("the simulated model (generate)", "latte_lab.models.sim.model", "SimulatedModel", "generate"),
    ("cassette lines (request key, redaction, write)", "latte_lab.models.cassette", "Cassette", "record"),
    ("events (JSON, one line each)", "latte_lab.events", "EventLog", "emit"),
    ("test runs served by the memo (key over every file)", "latte_lab.workspace", "Workspace", "run_tests"),
    ("edits (write, changed symbols, event)", "latte_lab.teams.engine", "Team", "do_edit_file"),
    ("parsing replies", "latte_lab.teams.engine", "Team", "parse"),
    ("reads", "latte_lab.teams.engine", "Team", "do_read_file"),
    ("the Lead's summary", "latte_lab.teams.graph_team", "GraphTeam", "lead_summary"),
    ("prompts (requests)", "latte_lab.teams.engine", "Team", "_request"),
)


def round_parts(seeds: int, task_id: str, team: str, sandbox: str | None) -> tuple[int, float, dict[str, float]]:
    """(rounds, seconds in all, seconds per part) of the same trials run again in this process, where every
    test run is then served by the memo: the round's own work with nothing to wait for, split by part with a
    timer around each (a part nested in another is counted in both)."""
    import importlib

    import latte_lab as ll

    timers: dict[str, Timer] = {}
    restore = []
    for label, module, cls, method in ROUND_PARTS:
        owner = getattr(importlib.import_module(module), cls, None)
        if owner is None or not hasattr(owner, method):
            continue
        timers[label] = Timer()
        restore.append((owner, method, owner.__dict__.get(method)))
        setattr(owner, method, timers[label].wrap(getattr(owner, method)))
    rounds, total = 0, 0.0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            extra = {"sandbox": sandbox} if sandbox else {}
            configs = [ll.TrialConfig(task=task_id, team=team, model="simulated", seed=seed, runs_dir=tmp, **extra)
                       for seed in range(seeds)]
            for cfg in configs:  # every state tested once, so that the timed runs below all hit the memo
                ll.run_trial(cfg)
            for timer in timers.values():
                timer.reset()
            for cfg in configs:
                t0 = time.perf_counter()
                rounds += ll.run_trial(cfg).rounds
                total += time.perf_counter() - t0
    finally:
        for owner, method, original in restore:
            if original is None:
                delattr(owner, method)
            else:
                setattr(owner, method, original)
    return rounds, total, {label: timer.seconds for label, timer in timers.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--task", default="debug")
    ap.add_argument("--team", default="latte")
    ap.add_argument("--model", default="simulated")
    ap.add_argument("--sandbox", choices=("auto", "local", "bwrap"), default="auto",
                    help="the trials' sandbox backend, for the baseline too where it has the switch")
    ap.add_argument("--baseline", type=Path, help="an older checkout with its own .venv, measured in the same run")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the baseline's half of a comparison
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.json:
        print(json.dumps(measure_trials(args.seeds, args.task, args.team, args.model, args.sandbox)))
        return

    load = os.getloadavg()[0]
    machine = machine_speed_ms()
    before = run_baseline(args.baseline, args) if args.baseline else None
    after = measure_trials(args.seeds, args.task, args.team, args.model, args.sandbox)
    here = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent, check=False).stdout.strip() or "this tree"
    from latte_lab.sandbox import resolve_sandbox

    print(f"simulated {args.team} trial on {args.task}, {args.seeds} seeds, sandbox={args.sandbox} "
          f"({resolve_sandbox(args.sandbox)}, the baseline too where it has the switch); load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} now, on {os.cpu_count()} cores (wall times grow with it)")
    if before is not None:
        base = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=args.baseline, check=False).stdout.strip() or str(args.baseline)
        print_rows(before, f"before ({base})")
    print_rows(after, f"after ({here})")
    cols = [("before " + base, summary(before))] if before is not None else []
    cols.append(("after " + here, summary(after)))
    print(f"\n{'':48}" + "".join(f"{name:>18}" for name, _ in cols))
    for key in cols[-1][1]:
        print(f"{key:48}" + "".join(f"{col[key][1].format(col[key][0]):>18}" for _, col in cols))
    print("targets: trial < 1 s; model < 1 ms CPU per call; orchestration < 1 ms per round")

    rounds, total, parts = round_parts(args.seeds, args.task, args.team, args.sandbox)
    print(f"\nwhere a round's time goes when every test run is served by the memo (nothing to wait for; the same "
          f"{args.seeds} trials again, {rounds} rounds): {1000 * total / rounds:.2f} ms per round in all")
    for label, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {label:60} {1000 * seconds / rounds:6.3f} ms per round")
    model = parts.get(ROUND_PARTS[0][0], 0.0)
    print(f"  {'without the model':60} {1000 * (total - model) / rounds:6.3f} ms per round")

    print(f"\none memo-missing run of the {args.task} public suite after a one-line change "
          f"(median of {REPEATS}, ms):")
    runs = measure_suite_runs(args.task)
    for label, ms in runs.items():
        print(f"  {label:60} {ms:8.1f}")
    # The limit of any design that runs pytest once per workspace state the agents test: the first trial's
    # memo-missing states run by pytest.main in this warm process, plus everything else that trial did.
    first = after["rows"][0]
    if TRIAL_STATES_LABEL in runs:
        floor_s = runs[TRIAL_STATES_LABEL] / 1000
        print(f"\nthe limit with one pytest session per tested state: seed 0's {first['misses']} memo-missing "
              f"states at the floor, {floor_s:.2f} s, plus its {first['total'] - first['tools']:.2f} s outside "
              f"its tool runs: {floor_s + first['total'] - first['tools']:.2f} s (target < 1 s; the trial took "
              f"{first['total']:.2f} s)")
    print(f"load average now {os.getloadavg()[0]:.1f}")
    print(machine_line(machine))


if __name__ == "__main__":
    main()
