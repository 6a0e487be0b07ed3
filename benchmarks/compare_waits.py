"""What a latte_lab user waits for, for this commit and a baseline commit, measured in one run: one table.

Usage::

    python benchmarks/compare_waits.py [--baseline REF] [--skip-test] [--skip-demo] [--dir DIR]

For each commit (the baseline first, then ``HEAD``) a fresh ``git clone`` of this repository is made in
``DIR`` and, in it, ``make demo`` is timed: creating the virtual environment, installing (each commit
with its own Makefile: pip at older commits, the lock with uv at newer ones) and running the demo, as a
user who has just cloned the project waits for it. The package managers' download caches are whatever
this machine holds; say which when you quote the figure. Then ``make test`` in each clone, timed
(``--skip-test`` leaves it out: it takes minutes).

Then the benchmarks that measure one row each, so that both commits see the same hour of the machine:

* ``bench_figures.py --baseline`` (``latte-lab figures`` on the published data, fresh processes, the two
  checkouts alternating);
* ``bench_trial.py --baseline`` (a simulated LATTE trial end to end and the orchestration per round, the
  baseline's half in its own environment; the limit with one pytest session per tested state);
* ``bench_graph.py`` in each clone with that clone's environment (this commit's script copied into the
  baseline's clone, so both run the same measurement: a 10^5-node graph built and driven, and networkx
  building the same DAG in the same process).

Every command's whole output is kept in ``DIR/logs``; the table at the end is read from those outputs.
Nothing here asserts anything: it prints figures. A figure that could not be read shows as ``?`` with the
log to look at.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line, machine_speed_ms  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BASELINE = "07f0dd7"  # the commit the speed work of issue 18 is measured against (its "before")
ROWS = (  # (key, what a user waits for, what it should come under: issue 18)
    ("demo", "fresh clone, then `make demo`", "< 60 s"),
    ("test", "`make test`", "< 120 s"),
    ("figures", "`latte-lab figures`, fresh process", "< 3 s"),
    ("trial", "simulated LATTE debug trial (median of 3 seeds)", "< 1 s"),
    ("orchestration", "orchestration per round, model excluded / included", "< 1 ms"),
    ("graph", "10^5-node graph built + driven (best of 3)", "< 1 s, and below networkx"),
)


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def _timed(cmd: list[str], cwd: Path, log: Path, env: dict | None = None) -> tuple[float, int, str]:
    """(wall seconds, exit status, output) of ``cmd``, its output kept in ``log``."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, check=False)
    wall = time.perf_counter() - start
    log.write_text(f"$ {' '.join(cmd)}  (in {cwd})\nexit {proc.returncode} after {wall:.1f} s\n\n{proc.stdout}")
    return wall, proc.returncode, proc.stdout


def _clean_env() -> dict:
    """The environment a user's shell would give make: no virtual environment of this process leaking in."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "LATTE_LAB_MEMO_DIR")}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def _find(pattern: str, text: str) -> str:
    """The pattern's first group in ``text``, or ``?``."""
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1) if m else "?"


def _cells(pattern: str, text: str) -> list[str]:
    """The numbers after a row label of bench_trial's before/after table."""
    line = _find(rf"^{re.escape(pattern)}\s+(.*)$", text)
    return line.split() if line != "?" else ["?", "?"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE, help=f"the commit to compare with (default {BASELINE})")
    ap.add_argument("--skip-test", action="store_true", help="leave out make test (minutes per commit)")
    ap.add_argument("--skip-demo", action="store_true",
                    help="reuse clones already in --dir instead of cloning and timing make demo")
    ap.add_argument("--dir", type=Path, help="where the clones and logs go (default: a new temporary folder)")
    args = ap.parse_args(argv)

    root = args.dir or Path(tempfile.mkdtemp(prefix="latte_lab-waits-"))
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    commits = {"before": _git("rev-parse", "--short", args.baseline), "after": _git("rev-parse", "--short", "HEAD")}
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    if dirty:
        print(f"note: the work tree has uncommitted changes; 'after' is the commit {commits['after']}, without them")
    machine = machine_speed_ms()
    print(f"clones and logs in {root}")
    rows: dict[str, dict[str, str]] = {key: {} for key, _, _ in ROWS}
    clones = {side: root / side for side in commits}
    shared = REPO.parent / "shared"  # the tests that read the authors' data beside the checkout find it
    if shared.is_dir() and not (root / "shared").exists():
        (root / "shared").symlink_to(shared)
    env = _clean_env()

    for side, commit in commits.items():
        clone = clones[side]
        if not args.skip_demo:
            if clone.exists():
                shutil.rmtree(clone)
            subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(clone)], check=True)
            subprocess.run(["git", "checkout", "--quiet", commit], cwd=clone, check=True)
            wall, status, _ = _timed(["make", "demo"], clone, logs / f"demo-{side}.log", env)
            rows["demo"][side] = f"{wall:.1f} s" + ("" if status == 0 else f" (exit {status})")
        elif not (clone / ".venv").is_dir():
            raise SystemExit(f"--skip-demo: no clone with a .venv at {clone}")
        else:  # the table names what each reused clone holds
            commits[side] = _git("rev-parse", "--short", "HEAD", cwd=clone)
    print(f"before = {commits['before']}, after = {commits['after']}")
    if not args.skip_test:
        for side in commits:
            # -i: a recipe line that fails (an older commit's doctest that today's packages break) does not
            # stop the lines after it, so every part of the command is timed; the failures are counted.
            wall, _, out = _timed(["make", "-i", "test"], clones[side], logs / f"test-{side}.log", env)
            summaries = re.findall(r"^(?:doctests: )?(\d+ (?:passed|failed)[^\n]*?) in [\d.]+s", out, re.MULTILINE)
            ignored = out.count("(ignored)")
            rows["test"][side] = (f"{wall:.1f} s ({'; '.join(summaries) or '?'})"
                                  + (f", {ignored} failing step(s)" if ignored else ""))

    after_python = str(clones["after"] / ".venv" / "bin" / "python")
    bench = clones["after"] / "benchmarks"
    _, _, out = _timed([after_python, str(bench / "bench_figures.py"), "--baseline", str(clones["before"])],
                       clones["after"], logs / "bench_figures.log", env)
    for side, label in (("before", "baseline"), ("after", "this checkout")):
        rows["figures"][side] = _find(rf"^  {label}[^:]*: wall (best [\d.]+ s, median [\d.]+ s)", out)

    _, _, out = _timed([after_python, str(bench / "bench_trial.py"), "--baseline", str(clones["before"])],
                       clones["after"], logs / "bench_trial.log", env)
    trial = _cells("trial end to end (s, median)", out)
    rounds = _cells("rounds (median)", out)
    without = _cells("orchestration per round, model excluded (ms)", out)
    with_model = _cells("orchestration per round, model included (ms)", out)
    columns = [*(["?"] * (2 - len(trial))), *range(len(trial))]  # a failed baseline half: the after column only
    for side, j in zip(("before", "after"), columns):
        if j == "?":
            rows["trial"][side] = rows["orchestration"][side] = f"? (see {logs / 'bench_trial.log'})"
            continue
        rows["trial"][side] = f"{trial[j]} s ({rounds[j]} rounds)"
        rows["orchestration"][side] = f"{without[j]} / {with_model[j]} ms"
    limit = _find(r"^the limit with one pytest session per tested state: .*: ([\d.]+) s \(target", out)

    for side in commits:  # this commit's graph benchmark in both clones, each importing its own latte_lab
        script = clones[side] / "benchmarks" / "bench_graph_current.py"
        shutil.copy(REPO / "benchmarks" / "bench_graph.py", script)
        shutil.copy(REPO / "benchmarks" / "timing.py", clones[side] / "benchmarks" / "timing.py")
        python = str(clones[side] / ".venv" / "bin" / "python")
        _, _, out = _timed([python, str(script)], clones[side], logs / f"bench_graph-{side}.log", env)
        total = _find(r"^graph build \+ drive \d+ nodes: ([\d.]+) s wall", out)
        build = _find(r"^graph build \d+ nodes, .*?: ([\d.]+) s wall", out)
        ratio = _find(r"CoordinationGraph / networkx CPU time: ([\d.]+)", out)
        rows["graph"][side] = f"{total} s (build {build} s; {ratio}x networkx's CPU)"

    print(f"\n| what a user waits for | before ({commits['before']}) | after ({commits['after']}) | target |")
    print("|---|---|---|---|")
    for key, label, target in ROWS:
        cells = rows[key]
        if cells:
            print(f"| {label} | {cells.get('before', '-')} | {cells.get('after', '-')} | {target} |")
    print(f"\nthe limit of a trial with one pytest session per tested state (bench_trial, seed 0): {limit} s")
    print(machine_line(machine))
    print(f"logs: {logs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
