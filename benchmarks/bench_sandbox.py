"""What the isolating backend costs and what each backend stops.

Cost: median milliseconds of one memo-missing ``run_tests()`` of the debug task's public suite, of a no-op
script and of ``python -c pass``, on the local backend (exec path and fork servers) and on the bubblewrap
backend (a sandbox per run, and the kept sandboxes). Stops: the five hostile probes of ``latte_lab.sandbox.probes`` on each backend.
Run: ``.venv/bin/python benchmarks/bench_sandbox.py``.

``--pytest-table [--baseline DIR]``: what test runs on pytest's public API give up against the opt-in changes to
its internals (``LATTE_LAB_PYTEST_PATCHES=1``), in one run, against an older checkout ``DIR`` (its own ``.venv``,
e.g. a worktree of the baseline commit) where given: the median of 15 memo-missing runs of the debug suite, each
after a one-line change, as plain ``python -m pytest`` (a fresh interpreter, no sandbox), forked from the local
fork server on pytest's public API, and with everything on; the same in bubblewrap's kept sandbox; and one
simulated LATTE trial on debug (seed 0, local backend; the median of three, each in a fresh process). Every
figure comes from a fresh process of the checkout it names.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import REPEATS, median_ms

import latte_lab as ll
from latte_lab.sandbox import bwrap, clear_memo, run_sandboxed, warm, zygote
from latte_lab.sandbox.probes import PROBES, run_probe
from latte_lab.sandbox.process import count_processes, stop_sandbox
from latte_lab.workspace import Workspace


def run_costs(tmp: Path, backend: str, use_zygote: bool = True, use_warm: bool = True) -> dict[str, float]:
    zygote.USE_ZYGOTE = use_zygote
    warm.USE_WARM = use_warm
    clear_memo()
    task = ll.tasks.get("debug")
    ws = Workspace(tmp / f"{backend}-{use_zygote}-{use_warm}", memo=True, sandbox=backend)
    task.setup(ws)
    module = task.required_outputs[0]
    base = ws.read(module)
    ws.run_tests()  # the fork server's start-up, once per process, is not a per-run cost
    edits = iter(range(10**6))

    def distinct_run() -> None:
        ws.setup_file(module, f"{base}\n# edit {next(edits)}\n")
        assert not ws.run_tests().cached

    ws.setup_file("noop.py", "pass\n")
    return {
        "tests": median_ms(distinct_run),
        "script": median_ms(lambda: ws.run_script("noop.py")),
        "python": median_ms(lambda: run_sandboxed([sys.executable, "-c", "pass"], ws.root, timeout=60, sandbox=backend)),
    }


def process_control_costs() -> None:
    """What each run's process-tree control costs in this process: the search of the process table after
    a run (skipped when the run's subreaper reports that nothing is left) and the process-count check made
    every PROCESS_CHECK_INTERVAL_SECONDS while it runs (whole table, or the run's tree from /proc)."""
    import subprocess

    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        full = median_ms(lambda: count_processes(leader.pid), 20)
        tree = median_ms(lambda: count_processes(leader.pid, tree_only=True), 20)
    finally:
        leader.kill()
        leader.wait()
    search = median_ms(lambda: stop_sandbox(leader.pid, "no-such-marker", 0.0), 20)
    print(f"process control per run, median ms ({len(psutil_pids())} processes on the machine):")
    print(f"  search after a run (stop_sandbox, nothing left): {search:7.2f}  -> 0 when the subreaper reports "
          "nothing left (local and zygote runs)")
    print(f"  process count while running, whole table:        {full:7.2f}")
    print(f"  process count while running, the run's tree:     {tree:7.2f}")


def psutil_pids() -> list[int]:
    import psutil

    return psutil.pids()


# One figure, measured in a fresh process of a checkout (its own interpreter, in its directory), with only what
# every version of latte_lab has had: a workspace, a task, the memo, run_tests; a trial through bench_trial.py.
WORKER = r"""
import json, statistics, subprocess, sys, tempfile, time, warnings
from pathlib import Path
warnings.simplefilter("ignore")
what, backend, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
if what == "trial":
    sys.path.insert(0, "benchmarks")
    from bench_trial import measure_trials
    print(json.dumps([measure_trials(1, "debug", "latte", "simulated", backend)["rows"][0]["total"] * 1000]))
    raise SystemExit
import latte_lab as ll
from latte_lab.sandbox import clear_memo
from latte_lab.workspace import Workspace
task = ll.tasks.get("debug")
with tempfile.TemporaryDirectory() as tmp:
    ws = Workspace(Path(tmp) / "ws", memo=True, sandbox=backend)
    task.setup(ws)
    module = task.required_outputs[0]
    base = ws.read(module)
    plain = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *ws.test_args]
    env = {"PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}

    def once():
        if what == "plain":
            subprocess.run(plain, cwd=ws.root, env=env, capture_output=True, check=False)
        else:
            assert not ws.run_tests().cached
    if what != "plain":
        ws.run_tests()  # a server's start, once per process, is not a per-run cost
    times = []
    for i in range(repeats):
        ws.setup_file(module, f"{base}\n# edit {i}\n")
        clear_memo()
        t0 = time.perf_counter()
        once()
        times.append(1000 * (time.perf_counter() - t0))
    print(json.dumps(times))
"""

SUITE_REPEATS = 15
ROUNDS = 3  # every condition's runs are made in this many rounds, the conditions taking turns in each
TRIAL_REPEATS = 3


def measure(checkout: Path, what: str, backend: str, patches: bool, repeats: int) -> list[float]:
    """Milliseconds of each of ``repeats`` runs of ``what`` ("plain", "tests"; "trial": one) in a fresh process
    of ``checkout``."""
    env = {k: v for k, v in os.environ.items() if k not in ("LATTE_LAB_PYTEST_PATCHES", "LATTE_LAB_MEMO_DIR")}
    if patches:
        env["LATTE_LAB_PYTEST_PATCHES"] = "1"
    out = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c", WORKER, what, backend, str(repeats)],
                         cwd=checkout, capture_output=True, text=True, env={**env, "PYTHONWARNINGS": "ignore"},
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"{checkout}: {what} on {backend} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def pytest_table(baseline: Path | None) -> None:
    """The table of ``--pytest-table`` (see the module docstring)."""
    here = Path(__file__).resolve().parent.parent
    works = bwrap.probe()[0]
    # (label, what, backend, this tree with the opt-in changes?, the baseline's figure: its default, or None)
    rows = [("plain `python -m pytest` (fresh interpreter, no sandbox)", "plain", "local", False, True),
            ("local, fork server, public API (default now)", "tests", "local", False, None),
            ("local, fork server, everything on (baseline's default)", "tests", "local", True, True)]
    if works:
        rows += [("bwrap, kept sandbox, public API (default now)", "tests", "bwrap", False, None),
                 ("bwrap, kept sandbox, everything on (baseline's default)", "tests", "bwrap", True, True)]
    trials = [("trial debug/latte seed 0, local, public API (default now)", False, None),
              ("trial debug/latte seed 0, local, everything on", True, True)]
    load = os.getloadavg()[0]
    # every condition in turn, ROUNDS times over (trials: TRIAL_REPEATS), so that a drift of the machine's load
    # reaches all of them alike; a condition's figure is the median of its samples from every round
    conditions = [(label, what, backend, patches, in_baseline, SUITE_REPEATS // ROUNDS, ROUNDS)
                  for label, what, backend, patches, in_baseline in rows]
    conditions += [(label, "trial", "local", patches, in_baseline, 1, TRIAL_REPEATS)
                   for label, patches, in_baseline in trials]
    samples = {label: ([], []) for label, *_ in conditions}
    for turn in range(max(ROUNDS, TRIAL_REPEATS)):
        for label, what, backend, patches, in_baseline, repeats, rounds in conditions:
            if turn >= rounds:
                continue
            if baseline and in_baseline:
                samples[label][0].extend(measure(baseline, what, backend, False, repeats))
            samples[label][1].extend(measure(here, what, backend, patches, repeats))
    figures = [(label, statistics.median(before) if before else None, statistics.median(after))
               for label, (before, after) in samples.items()]
    base = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=baseline,
                          check=False).stdout.strip() if baseline else ""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=here,
                          check=False).stdout.strip()
    print(f"memo-missing runs of the debug suite: median of {SUITE_REPEATS} ({ROUNDS} rounds), ms; trials: median "
          f"of {TRIAL_REPEATS}, "
          f"ms; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} cores")
    print(f"{'':60} {'before ' + base if base else '':>16} {'after ' + head:>16}")
    for label, before, after in figures:
        shown = f"{before:.0f}" if before is not None else "-"
        print(f"{label:60} {shown:>16} {after:>16.0f}")
    public, patched = figures[1][2], figures[2][2]
    print(f"public API against everything on (local fork server): {public - patched:+.0f} ms per run "
          f"({public / patched:.2f}x); plain python -m pytest {figures[0][2]:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pytest-table", action="store_true", help="only the public-API table (see the docstring)")
    ap.add_argument("--baseline", type=Path, help="an older checkout with its own .venv, measured in the same run")
    args = ap.parse_args()
    if args.pytest_table:
        pytest_table(args.baseline.resolve() if args.baseline else None)
        return
    process_control_costs()
    print()
    works, why, _ = bwrap.probe()
    with tempfile.TemporaryDirectory() as tmp:
        rows = {"local, exec path": run_costs(Path(tmp), "local", use_zygote=False),
                "local, fork server": run_costs(Path(tmp), "local")}
        if works:
            rows["bwrap, a sandbox per run"] = run_costs(Path(tmp), "bwrap", use_warm=False)
            rows["bwrap, warm sandbox"] = run_costs(Path(tmp), "bwrap")
            warm.shutdown()
    print(f"median of {REPEATS} runs, milliseconds (python -c, not a script file, always takes a sandbox of its own)")
    print(f"{'backend':<26} {'debug run_tests':>16} {'no-op script':>13} {'python -c pass':>15}")
    for name, row in rows.items():
        print(f"{name:<26} {row['tests']:>16.0f} {row['script']:>13.0f} {row['python']:>15.0f}")
    if works:
        boxed = rows["bwrap, warm sandbox"]["tests"]
        print(f"a bwrap test run (warm sandbox) costs {boxed - rows['local, fork server']['tests']:+.0f} ms against "
              f"the local default ({boxed / rows['local, fork server']['tests']:.2f}x) and "
              f"{boxed - rows['bwrap, a sandbox per run']['tests']:+.0f} ms against a bubblewrap sandbox per run")
    else:
        print(f"bwrap: not measured ({why})")
    backends = ["local", "bwrap"] if works else ["local"]
    print("\nwhat each backend stops (probe: stopped? / detail)")
    for name in PROBES:
        for backend in backends:
            result = run_probe(name, backend)
            verdict = "stopped" if result.stopped else "NOT stopped"
            print(f"{name:<9} {backend:<6} {verdict:<12} workspace ok: {result.workspace_ok!s:<5} {result.detail}")


if __name__ == "__main__":
    main()
