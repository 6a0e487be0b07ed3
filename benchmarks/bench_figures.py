"""Seconds for `latte-lab figures` on the published data in a fresh process (target: under 3 s), and where
they go.

Usage: ``python benchmarks/bench_figures.py [--baseline DIR] [--repeats N] [--under-load]``

Runs ``python -m latte_lab.cli figures --data <published> --out <tmp>`` as a subprocess, so the time includes
interpreter start-up and imports, as a user sees it. With ``--baseline DIR`` (another checkout of latte_lab,
e.g. a git worktree of an older commit) the same command runs from that checkout's code too, with this
interpreter and libraries, the runs alternating so both see the same machine load. The published folder is
the copy bundled with latte_lab, or $LATTE_PUBLISHED_DIR when set.

Then each checkout's stages in one fresh process, one after another (CPU seconds): the imports, loading,
the tables and statistics, drawing each figure and saving it (with that checkout's own save routine).
The CLI of this checkout draws the figures in forked processes while it computes the tables, so its wall
time is below the sum of its stages.

Last, a timeline of one real `latte-lab figures` run per checkout (wall seconds since the interpreter was
started, per process: the main one computing the tables, the forked ones drawing): the same command, its
phases wrapped by a small launcher that logs when each starts and ends, so the critical path shows.

With ``--under-load`` it measures only what a busy machine does to the command (target: under 3 s while
another job keeps one core busy): a fixed background load, one process spinning on one core (pinned to the
last CPU this process may use), runs throughout; each checkout's `latte-lab figures` runs in fresh
processes, alternating, and the median of ``--repeats`` (default 5) is printed beside the same runs
without the load, measured in the same session.

Both checkouts run with compiled bytecode allowed (PYTHONDONTWRITEBYTECODE removed) after one warm-up run,
since a fresh process that compiles pandas and matplotlib from source measures the compiler, not latte_lab.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line, machine_speed_ms  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 3.0  # the budget for regenerating every figure and table
REPEATS = 3  # fresh processes per checkout; the best time discounts a cold disk cache and load spikes
LOAD_REPEATS = 5  # fresh processes per checkout and condition in --under-load (the median is the figure)

STAGES = r'''
import sys, time
from pathlib import Path
last = [time.process_time()]
def mark(label):
    now = time.process_time(); print(f"{label}\t{now - last[0]:.3f}"); last[0] = now
import pandas, numpy; mark("import pandas, numpy")
import latte_lab.cli; mark("import latte_lab.cli")
import matplotlib.pyplot; mark("import matplotlib.pyplot")
import importlib.util
if importlib.util.find_spec("latte_lab.analysis.inference"):  # the tests in numpy: no scipy, no statsmodels
    import latte_lab.analysis.inference; mark("import latte_lab.analysis.inference")
else:
    import scipy.stats; mark("import scipy.stats")
    import statsmodels.formula.api, statsmodels.stats.anova; mark("import statsmodels")
import matplotlib.backends.backend_pdf; mark("import the PDF backend (fontTools)")
from latte_lab.analysis import loaders, report, stats
try:  # every picture in latte_lab.viz; older checkouts drew the paper figures in latte_lab.analysis
    from latte_lab.viz import figures, paper as writer
except ImportError:
    from latte_lab.analysis import figures, report as writer
from latte_lab import data as bundled
data = loaders.load_published(Path(sys.argv[1])); mark("load the published data")
t = data.trials
stats.table2(t); stats.stats_5_1(t); stats.section53(t); mark("table2, stats_5_1, section53")
stats.robust_statistics(t); mark("robust_statistics (bootstrap, Holm)")
stats.cost_regression(t, "tokens"); stats.cost_regression(t, "wall"); mark("cost_regression x2")
report.compare_with_paper(data); mark("compare_with_paper")
out = Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
made = {"figure2a": lambda: figures.figure2a(t), "figure2b": lambda: figures.figure2b(t),
        "figure3a": lambda: figures.figure3a(data.operator_usage),
        "figure3b": lambda: figures.figure3b(data.trajectories),
        "figure3c": lambda: figures.figure3c(data.snapshots), "figure4": lambda: figures.figure4(t)}
for name, make in made.items():
    fig = make(); mark(f"draw {name}")
    writer._save_figure(fig, out, name, []); mark(f"save {name} (PNG + PDF)")
'''

TIMELINE = r'''
import os, sys, time
log_path, started = sys.argv[1], float(sys.argv[2])
from latte_lab.analysis import loaders, report, stats
try:  # the writer of the figures: latte_lab.viz.paper, or in older checkouts latte_lab.analysis.report
    from latte_lab.viz import paper as writer
except ImportError:
    writer = report

def log(label, t0, c0):
    line = f"{os.getpid()}\t{label}\t{t0 - started:.3f}\t{time.time() - started:.3f}\t{time.process_time() - c0:.3f}\n"
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, line.encode()); os.close(fd)

log("start python, import latte_lab.cli, pandas", started, 0.0)

def timed(owner, name, label, first=None):
    orig = getattr(owner, name, None)
    if orig is None:
        return
    pending = [first]
    def wrapper(*a, **k):
        if pending[0]:
            t0, c0 = time.time(), time.process_time()
            exec(pending[0][1]); pending[0] = None
            log(first[0], t0, c0)
        if label is None:  # only the import before the first call is of interest
            return orig(*a, **k)
        t0, c0 = time.time(), time.process_time()
        try:
            return orig(*a, **k)
        finally:
            log(label(a) if callable(label) else label, t0, c0)
    setattr(owner, name, wrapper)

timed(loaders, "load_published", "load the published data")
timed(stats, "table2", "table2")
timed(stats, "stats_5_1", "stats_5_1")
own_tests = hasattr(stats, "inference")  # the tests in numpy; older checkouts import scipy and statsmodels
timed(stats, "_mwu", None, None if own_tests else ("import scipy.stats", "import scipy.stats"))
timed(stats, "section53", "section53")
timed(stats, "robust_statistics", "robust_statistics")
timed(stats, "cost_regression", lambda a: f"cost_regression {a[1]}",
      None if own_tests else ("import statsmodels", "import statsmodels.formula.api, statsmodels.stats.anova"))
timed(report, "compare_with_paper", "compare_with_paper")
timed(report, "_report", "report.md")
timed(writer, "_import_figure_stack", "import matplotlib, the PDF and PNG writers")
timed(writer, "_make_figure", lambda a: f"draw {a[0]}",
      ("import matplotlib (first figure)", "import matplotlib.pyplot, matplotlib.backends.backend_pdf"))
timed(writer, "_save_figure", lambda a: f"save {a[2]} (PNG + PDF)")
from latte_lab.cli import main
t0, c0 = time.time(), time.process_time()
code = main(["figures", "--data", sys.argv[3], "--out", sys.argv[4]])
log("end", t0, c0)
sys.exit(code)
'''


def _env(checkout: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)  # ahead of the installed (editable) latte_lab
    env["MPLBACKEND"] = "Agg"
    return env


def _cli(checkout: Path, data: Path, out: Path) -> tuple[float, float]:
    """(wall, CPU of the process and its children) of one fresh `latte-lab figures`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "latte_lab.cli", "figures", "--data", str(data), "--out", str(out)],
                          capture_output=True, text=True, env=_env(checkout), cwd=out.parent, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"latte-lab figures failed in {checkout}:\n{proc.stdout}\n{proc.stderr}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _stages(checkout: Path, data: Path, out: Path) -> list[tuple[str, float]]:
    proc = subprocess.run([sys.executable, "-c", STAGES, str(data), str(out)], capture_output=True, text=True,
                          env=_env(checkout), cwd=out.parent, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"the stage breakdown failed in {checkout}:\n{proc.stderr}")
    return [(label, float(sec)) for label, sec in (line.split("\t") for line in proc.stdout.splitlines())]


def _timeline(checkout: Path, data: Path, out: Path) -> list[tuple[int, str, float, float, float]]:
    """(pid, phase, start, end, CPU seconds) of one `latte-lab figures` run, times since the interpreter started."""
    log = out.parent / f"timeline-{out.name}.tsv"
    started = time.time()
    proc = subprocess.run([sys.executable, "-c", TIMELINE, str(log), repr(started), str(data), str(out)],
                          capture_output=True, text=True, env=_env(checkout), cwd=out.parent, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"the timeline run failed in {checkout}:\n{proc.stderr}")
    rows = [line.split("\t") for line in log.read_text().splitlines()]
    return sorted(((int(p), label, float(a), float(b), float(c)) for p, label, a, b, c in rows),
                  key=lambda r: (r[2], r[3]))


def _print_timeline(label: str, rows) -> None:
    main_pid = rows[0][0]
    roles = {main_pid: "main"}
    for pid, *_ in rows:
        roles.setdefault(pid, f"fork {len(roles)}")
    end = max(r[3] for r in rows)
    print(f"\n{label}: timeline of one run (wall seconds since the interpreter started; ends at {end:.2f} s)")
    print(f"  {'process':8s} {'phase':46s} {'start':>6s} {'end':>6s} {'CPU':>6s}")
    for pid, phase, a, b, cpu in rows:
        if phase != "end":
            print(f"  {roles[pid]:8s} {phase:46s} {a:6.2f} {b:6.2f} {cpu:6.2f}")


SPIN = "while True:\n    pass\n"


class BackgroundLoad:
    """One process spinning on one core (the last CPU this process may use) while the block runs."""

    def __enter__(self):
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.cpu = cpus[-1] if cpus else None
        self.proc = subprocess.Popen([sys.executable, "-c", SPIN])
        if self.cpu is not None:
            os.sched_setaffinity(self.proc.pid, {self.cpu})
        time.sleep(0.5)  # spinning before the first timed run starts
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def under_load(checkouts: dict[str, Path], data: Path, repeats: int) -> None:
    """Median wall seconds of fresh `latte-lab figures` runs per checkout, with and without one core kept busy."""
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for checkout in checkouts.values():  # warm-up: bytecode written, disk cache filled
            _cli(checkout, data, Path(tmp) / "warm")
        for i in range(repeats):  # the conditions and checkouts alternate, so all see the same machine
            for condition in ("idle", "one core busy"):
                for label, checkout in checkouts.items():
                    if condition == "idle":
                        result = _cli(checkout, data, Path(tmp) / f"idle{i}")
                    else:
                        with BackgroundLoad():
                            result = _cli(checkout, data, Path(tmp) / f"busy{i}")
                    runs.setdefault((label, condition), []).append(result)
    print(f"latte-lab figures on the published data, fresh processes, median of {repeats} (target < "
          f"{TARGET_SECONDS:.0f} s wall with one core busy); background load: one process spinning on one core; "
          f"{os.cpu_count()} cores, load average now {os.getloadavg()[0]:.1f}")
    for label in checkouts:
        for condition in ("idle", "one core busy"):
            walls = [w for w, _ in runs[(label, condition)]]
            cpus = [c for _, c in runs[(label, condition)]]
            print(f"  {label:40s} {condition:14s} wall median {statistics.median(walls):5.2f} s "
                  f"(min {min(walls):.2f}, max {max(walls):.2f}); CPU of the process tree median "
                  f"{statistics.median(cpus):.2f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, help="another latte_lab checkout to time beside this one")
    ap.add_argument("--repeats", type=int, default=None,
                    help=f"fresh processes per checkout (default {REPEATS}; {LOAD_REPEATS} with --under-load)")
    ap.add_argument("--under-load", action="store_true",
                    help="time the command with one core kept busy by a spinning process (and without), only that")
    args = ap.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        raise SystemExit(f"--repeats {args.repeats}: give at least 1")
    from latte_lab.data import published_dir

    data = published_dir()
    checkouts = {"this checkout": REPO}
    if args.baseline:
        if not (args.baseline / "latte_lab" / "__init__.py").is_file():
            raise SystemExit(f"--baseline {args.baseline} is not a latte_lab checkout (no latte_lab/__init__.py)")
        checkouts = {f"baseline {args.baseline}": args.baseline.resolve(), **checkouts}
    machine = machine_speed_ms()
    if args.under_load:
        under_load(checkouts, data, args.repeats or LOAD_REPEATS)
        print(machine_line(machine))
        return 0
    args.repeats = args.repeats or REPEATS
    times: dict[str, list[tuple[float, float, float]]] = {k: [] for k in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        for checkout in checkouts.values():  # warm-up: bytecode written, disk cache filled
            _cli(checkout, data, Path(tmp) / "warm")
        for i in range(args.repeats):
            for label, checkout in checkouts.items():
                load = os.getloadavg()[0]
                times[label].append((*_cli(checkout, data, Path(tmp) / f"run{i}"), load))
        written = sorted(p.name for p in (Path(tmp) / "run0").iterdir())
        stages = {label: _stages(checkout, data, Path(tmp) / "stages") for label, checkout in checkouts.items()}
        timelines = {label: _timeline(checkout, data, Path(tmp) / f"timeline{i}")
                     for i, (label, checkout) in enumerate(checkouts.items())}

    print(f"latte-lab figures on the published data, fresh process, best and median of {args.repeats} "
          f"(target < {TARGET_SECONDS:.0f} s wall); load average now {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")
    for label, runs in times.items():
        walls, cpus = [w for w, _, _ in runs], [c for _, c, _ in runs]
        print(f"  {label}: wall best {min(walls):.2f} s, median {statistics.median(walls):.2f} s; CPU of the "
              f"process tree best {min(cpus):.2f} s, median {statistics.median(cpus):.2f} s")
        print("    runs (wall, CPU, 1-minute load average as it started): "
              + "; ".join(f"{w:.2f} s, {c:.2f} s, load {a:.1f}" for w, c, a in runs))
    print(f"files written: {len(written)} ({sum(n.endswith('.png') for n in written)} PNG, "
          f"{sum(n.endswith('.pdf') for n in written)} PDF, tables and report.md)")
    print("\nwhere the CPU goes, stage by stage in one process (seconds):")
    labels = list(dict.fromkeys(label for rows in stages.values() for label, _ in rows))
    names = list(stages)
    seconds = {n: dict(rows) for n, rows in stages.items()}
    print("  " + f"{'stage':40s}" + "".join(f"{n[:28]:>30s}" for n in names))
    for label in labels:  # a stage one checkout lacks (scipy's import, say) shows as -
        print("  " + f"{label:40s}" + "".join(f"{seconds[n][label]:30.2f}" if label in seconds[n] else f"{'-':>30s}"
                                              for n in names))
    print("  " + f"{'total':40s}" + "".join(f"{sum(s for _, s in stages[n]):30.2f}" for n in names))
    for label, rows in timelines.items():
        _print_timeline(label, rows)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    print(machine_line(machine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
