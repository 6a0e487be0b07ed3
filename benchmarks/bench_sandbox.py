"""What the isolating backend costs and what each backend stops.

Cost: median milliseconds of one memo-missing ``run_tests()`` of the debug task's public suite, of a no-op
script and of ``python -c pass``, on the local backend (exec path and fork servers) and on the bubblewrap
backend (a sandbox per run, and the kept sandboxes). Stops: the five hostile probes of ``latte_lab.sandbox.probes`` on each backend.
Run: ``.venv/bin/python benchmarks/bench_sandbox.py``.

(The opt-in changes to pytest's internals, and this script's ``--pytest-table`` that measured what test runs on
pytest's public API give up against them, are gone since commit ae41039; run the script there for that figure,
e.g. from the branch ``issue51-pytest-patches-bench``.)
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
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
