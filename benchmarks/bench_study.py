"""A simulated study of 1,000 trials through the sweep (``latte_lab.run_sweep``, what ``latte-lab sweep`` runs):
trials per minute, 2 jobs against 1, where the time goes, and the floor (the pytest sessions alone).

    python benchmarks/bench_study.py [--trials 1000] [--jobs 2] [--backend auto|local|bwrap] [--quick]
                                     [--sample 120] [--bwrap-sample 30] [--label NAME] [--keep DIR]
    python benchmarks/bench_study.py --hidden-pairs 10   # the hidden evaluation alone: server against fresh

The study: 3 tasks x 5 teams x 67 seeds on the simulated model, cut to ``--trials`` in the sweep's own
(interleaved) order, on the default sandbox backend unless ``--backend`` says otherwise. ``--quick``: 60 trials.
It runs, each into a fresh sweep directory and with every memo of test runs empty:

1. the first ``--sample`` trials with 1 job and then with 2 jobs, for the efficiency of 2 jobs against 1 (the
   same trials both times: a study's later trials find more of their test runs already memoised, so rates of
   samples of different sizes do not compare);
2. the whole study with ``--jobs`` jobs: trials per minute and where each worker's time went;
3. the first ``--bwrap-sample`` trials on bwrap and on local, 2 jobs, when both backends work here;
4. ``benchmarks/bench_figures.py --under-load`` when that script has the mode.

Where the time goes is measured inside the worker processes (they are forked from this one, so the timers
installed here are theirs too), as exclusive wall time: a section's time excludes the sections it contains.
Every trial's time is split into: pytest sessions (a run's own seconds in the sandbox, as ``TestRun.seconds``
measures them, without a fork server's start), the hidden evaluation's sessions, agents' scripts, the
sandbox's overhead around each (staging, copying, reading the report), memo look-ups (hashing the
workspace; a hit costs only this), writing the run directory (its files, moving it into place), and
orchestration (the rest: rounds, the model, the team's bookkeeping). Process start-up is the time from the
pool's start to each worker's first trial plus the fork servers' starts. The floor is what the pytest
sessions alone would take on the same jobs: those the study ran, and one per distinct tested state (a memo
that every worker shares, hit by every repeat); and what the sessions and the agents' scripts together take,
every sandboxed run the trials need.

The machine's load and a fixed workload's speed are printed at the start and the end: numbers taken while
other processes run say little about the code. ``--label`` names the checkout in the table (to compare a run
on an older commit, run this script from a worktree of it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_speed_ms  # noqa: E402

import latte_lab as ll  # noqa: E402

TASKS = ["debug", "eda", "textproc"]
TEAMS = ["latte", "static", "leader_worker", "decentralized", "pipeline"]
HERE = Path(__file__).resolve().parent
BUCKETS = ("pytest sessions", "hidden evaluation sessions", "agents' scripts", "sandbox overhead",
           "memo look-ups", "writing run directories", "orchestration")


# --- timers, installed in this process before the pool forks its workers --------------------------------------

class Profile:
    """Exclusive wall time per bucket within one trial (per process), written as one JSON line per trial."""

    def __init__(self):
        self.path: Path | None = None
        self.stack: list[list] = []  # [bucket, start, time of nested sections]
        self.reset()

    def reset(self) -> None:
        self.buckets: dict[str, float] = defaultdict(float)
        self.counts: Counter = Counter()
        self.sessions: list[tuple[str | None, str, float]] = []  # (memo key, kind, seconds)
        self.pending_key: str | None = None
        self.zygote_in_run = 0.0

    @contextlib.contextmanager
    def section(self, bucket: str):
        frame = [bucket, time.perf_counter(), 0.0]
        self.stack.append(frame)
        try:
            yield frame
        finally:
            self.stack.pop()
            elapsed = time.perf_counter() - frame[1]
            if self.stack:
                self.stack[-1][2] += elapsed
            if bucket:
                self.buckets[bucket] += elapsed - frame[2]
            frame.append(elapsed)

    def write(self, record: dict) -> None:
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as fh:  # one short line per write: O_APPEND keeps it whole
                fh.write(json.dumps(record) + "\n")


PROFILE = Profile()


def _timed(owner, name: str, bucket: str) -> None:
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        with PROFILE.section(bucket):
            return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def install_timers(profile_path: Path) -> None:
    """Wraps the functions whose time is reported (module attributes, looked up when called)."""
    from latte_lab import rundir
    from latte_lab.sandbox import judge, zygote
    from latte_lab.sandbox import pytest as sandbox_pytest
    from latte_lab.sweep import local
    from latte_lab.workspace import files

    PROFILE.path = profile_path
    def sandboxed(original, kind):
        def wrapper(*args, **kwargs):
            PROFILE.zygote_in_run = 0.0
            key, PROFILE.pending_key = PROFILE.pending_key, None
            with PROFILE.section("sandbox overhead") as frame:
                run = original(*args, **kwargs)
            session = max(0.0, min(run.seconds - PROFILE.zygote_in_run, frame[3] - frame[2]))
            PROFILE.buckets["sandbox overhead"] -= session
            PROFILE.buckets[kind] += session
            PROFILE.counts[kind] += 1
            PROFILE.sessions.append((key, kind, session))
            return run
        return wrapper

    # the runs: run_sandboxed as the modules that start runs imported it (its own module's name is not looked up)
    sandbox_pytest.run_sandboxed = sandboxed(sandbox_pytest.run_sandboxed, "pytest sessions")
    # a hidden evaluation: its judge's session and its workspace's process, which run at once (the latter in a thread)
    judge.run_judged = sandboxed(judge.run_judged, "hidden evaluation sessions")
    files.run_sandboxed = sandboxed(files.run_sandboxed, "agents' scripts")
    _timed(files, "run_pytest", "sandbox overhead")  # staging, the report: around the run itself
    _timed(files.Workspace, "run_script", "sandbox overhead")  # a script's staging (bwrap's public stage)

    original_memo_get = {}
    for module in (files, sandbox_pytest):
        _timed(module, "memo_key", "memo look-ups")
        original_memo_get[module] = module.memo_get

        def memo_get(memo_dir, key, _original=original_memo_get[module]):
            with PROFILE.section("memo look-ups"):
                hit = _original(memo_dir, key)
            PROFILE.counts["memo hits" if hit is not None else "memo misses"] += 1
            if hit is None:
                PROFILE.pending_key = key
            return hit

        module.memo_get = memo_get

    zygote_init = zygote._Zygote.__init__

    def zygote_start(self, *args, **kwargs):
        with PROFILE.section("process start-up (fork servers)") as frame:
            zygote_init(self, *args, **kwargs)
        PROFILE.zygote_in_run += frame[3]
        PROFILE.counts["fork servers started"] += 1

    zygote._Zygote.__init__ = zygote_start

    for name in ("__init__", "write_config", "append_event", "append_snapshots", "write_ledger", "write_result",
                 "close"):
        _timed(rundir.RunWriter, name, "writing run directories")
    try:  # the sweep directory's module (latte_lab.sweepdir in older checkouts)
        from latte_lab.sweep import sweepdir
    except ImportError:
        from latte_lab import sweepdir
    timed = [(rundir, "new_run_dir"), (sweepdir, "finish_attempt"), (sweepdir, "record_special_files")]
    if hasattr(rundir, "record_special_files"):  # a trial's own call, where the run directory's format has it
        timed.append((rundir, "record_special_files"))
    try:  # the trial's state at each round's end, where trials save it
        from latte_lab.teams.state import StateWriter

        timed.append((StateWriter, "save"))
    except ImportError:
        pass
    for module, name in timed:
        _timed(module, name, "writing run directories")

    run_attempt = local.run_attempt

    def attempt(cfg, out):
        PROFILE.reset()
        start = time.time()
        try:
            with PROFILE.section("orchestration"):
                return run_attempt(cfg, out)
        finally:
            PROFILE.write({"trial_id": cfg.trial_id, "pid": os.getpid(), "start": start, "end": time.time(),
                           "buckets": dict(PROFILE.buckets), "counts": dict(PROFILE.counts),
                           "sessions": PROFILE.sessions})

    local.run_attempt = attempt


# --- one sweep -------------------------------------------------------------------------------------------------

def study(n_trials: int, backend: str) -> list:
    seeds = -(-n_trials // (len(TASKS) * len(TEAMS)))
    grid = {"task": TASKS, "team": TEAMS, "model": "simulated", "replicates": seeds}
    if backend != "auto":
        grid["sandbox"] = backend
    return ll.sweep.expand_grid(grid, "unused")[:n_trials]


def fresh_state(memo_dir: Path) -> None:
    """No memo, fork server or kept sandbox carried over from an earlier sweep of this script."""
    from latte_lab.sandbox import Sandbox, clear_memo

    clear_memo()
    Sandbox.close_all()
    shutil.rmtree(memo_dir, ignore_errors=True)


def run(configs: list, jobs: int, root: Path, name: str) -> dict:
    out = root / name
    profile = root / f"{name}.profile.jsonl"
    memo = root / f"{name}.memo"
    fresh_state(memo)
    PROFILE.path = profile
    # the sweep's own default memo directory, if it has one, is inside out; an explicit one is set per sweep
    saved = os.environ.get("LATTE_LAB_MEMO_DIR")
    os.environ.pop("LATTE_LAB_MEMO_DIR", None)
    load_before = os.getloadavg()[0]
    cpu_before = cpu_seconds()
    start = time.time()
    df = ll.run_sweep([c.model_copy() for c in configs], out=out, n_jobs=jobs, progress=False)
    wall = time.time() - start
    if saved is not None:
        os.environ["LATTE_LAB_MEMO_DIR"] = saved
    fresh_state(memo)  # this process's fork servers end here: their CPU (and their runs') is counted once waited for
    cpu = cpu_seconds() - cpu_before
    records = [json.loads(line) for line in profile.read_text().splitlines()] if profile.exists() else []
    return {"name": name, "jobs": jobs, "trials": len(df), "ok": int((df["status"] == "ok").sum()), "wall": wall,
            "start": start, "records": records, "load": (load_before, os.getloadavg()[0]), "cpu": cpu}


def cpu_seconds() -> float:
    """CPU seconds of this process and of every descendant it (or they) waited for: the workers, their fork
    servers and sandboxes, the test runs. Other processes on the machine add little to it, unlike wall time."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def rate(result: dict) -> float:
    return 60.0 * result["trials"] / result["wall"]


# --- the report ------------------------------------------------------------------------------------------------

def breakdown(result: dict) -> list[tuple[str, float, str]]:
    """(what, seconds of worker time, note) for the whole sweep."""
    records, jobs, wall = result["records"], result["jobs"], result["wall"]
    totals: dict[str, float] = defaultdict(float)
    counts: Counter = Counter()
    for rec in records:
        for bucket, seconds in rec["buckets"].items():
            totals[bucket] += seconds
        counts.update(rec["counts"])
    first = {}
    for rec in records:
        first[rec["pid"]] = min(first.get(rec["pid"], rec["start"]), rec["start"])
    startup_workers = sum(t - result["start"] for t in first.values())
    in_trials = sum(rec["end"] - rec["start"] for rec in records)
    capacity = jobs * wall
    rows = []
    n = max(1, len(records))
    for bucket in BUCKETS:
        note = ""
        if bucket == "pytest sessions":
            note = f"{counts['pytest sessions']} runs, {counts['pytest sessions'] / n:.1f} per trial"
        elif bucket == "hidden evaluation sessions":
            note = f"{counts['hidden evaluation sessions']} runs"
        elif bucket == "agents' scripts":
            note = f"{counts[bucket]} runs"
        elif bucket == "memo look-ups":
            hits, misses = counts["memo hits"], counts["memo misses"]
            note = f"{hits} hits of {hits + misses} look-ups ({hits / max(1, hits + misses):.0%})"
        rows.append((bucket, totals.get(bucket, 0.0), note))
    servers = totals.get("process start-up (fork servers)", 0.0)
    rows.append(("process start-up", startup_workers + servers,
                 f"workers to their first trial {startup_workers:.1f} s; {counts['fork servers started']} fork "
                 f"servers started, {servers:.1f} s"))
    rows.append(("idle and the sweep's own work", capacity - in_trials - startup_workers,
                 "planning, handing out trials, the last trials' tail, other processes"))
    return rows


def floors(result: dict) -> tuple[float, float, int, int, float, int]:
    """(seconds of the sessions run, seconds of one session per distinct state, runs, distinct states, seconds
    of the agents' scripts, scripts run)."""
    ran = scripts = 0.0
    unique: dict[str, float] = {}
    n_runs = n_scripts = 0
    for rec in result["records"]:
        for key, kind, seconds in rec["sessions"]:
            if kind == "agents' scripts":
                scripts += seconds
                n_scripts += 1
                continue
            n_runs += 1
            ran += seconds
            if key is None:
                unique[f"unkeyed-{n_runs}"] = seconds
            else:
                unique.setdefault(key, seconds)
    return ran, sum(unique.values()), n_runs, len(unique), scripts, n_scripts


def report(label: str, backend: str, results: dict, bwrap_pair: tuple | None, figures: str) -> None:
    full = results["full"]
    print()
    print(f"== bench_study [{label}] == {time.strftime('%Y-%m-%d %H:%M:%S')}, backend {backend}, "
          f"{os.cpu_count()} CPUs")
    print(f"study: {full['trials']} trials ({full['ok']} ok), {full['jobs']} jobs: {full['wall']:.1f} s wall, "
          f"{rate(full):.1f} trials/min (target 100), load {full['load'][0]:.2f} -> {full['load'][1]:.2f}")
    if "one" in results and "two" in results:
        one, two = results["one"], results["two"]
        speedup = two["trials"] / two["wall"] / (one["trials"] / one["wall"])
        print(f"2 jobs against 1, on the first {one['trials']} trials (a sample; the same trials both times): "
              f"1 job {rate(one):.1f}/min, 2 jobs {rate(two):.1f}/min: {speedup:.2f}x (target 1.8x); CPUs in use "
              f"on average {one['cpu'] / one['wall']:.2f} and {two['cpu'] / two['wall']:.2f}, CPU per trial "
              f"{one['cpu'] / one['trials']:.2f} s and {two['cpu'] / two['trials']:.2f} s")
    per_trial = full["cpu"] / max(1, full["trials"])
    print(f"CPU: {per_trial:.2f} s per trial (the sweep's processes and their test runs); {full['jobs']} CPUs kept "
          f"busy by them alone would run {60 * full['jobs'] / per_trial:.1f} trials/min")
    capacity = full["jobs"] * full["wall"]
    print(f"where the time goes ({full['jobs']} workers x {full['wall']:.1f} s = {capacity:.1f} worker-seconds):")
    for what, seconds, note in breakdown(full):
        print(f"  {what:<32} {seconds:8.1f} s {100 * seconds / capacity:5.1f}%  {note}")
    ran, unique, n_runs, n_states, scripts, n_scripts = floors(full)
    jobs = full["jobs"]
    for what, seconds, count in (("the sessions the study ran", ran, f"{n_runs} sessions"),
                                 ("one session per distinct state", unique, f"{n_states} sessions"),
                                 ("the sessions and the agents' scripts (every sandboxed run the trials need)",
                                  ran + scripts, f"{n_runs} sessions and {n_scripts} scripts")):
        wall = seconds / jobs
        per_min = 60.0 * full["trials"] / wall if wall else float("inf")
        print(f"floor, {what}: {count}, {seconds:.1f} s; on {jobs} jobs {wall:.1f} s wall = "
              f"{per_min:.0f} trials/min")
    if bwrap_pair is not None:
        b, lo = bwrap_pair
        print(f"bwrap against local, first {b['trials']} trials, {b['jobs']} jobs: bwrap {b['wall']:.1f} s, local "
              f"{lo['wall']:.1f} s: {b['wall'] / lo['wall']:.2f}x (target 1.3x)")
    print(figures)


def figures_under_load() -> str:
    script = HERE / "bench_figures.py"
    try:
        helptext = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                                  timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"figures under load: skipped ({exc})"
    if "--under-load" not in helptext:
        return "figures under load: skipped (benchmarks/bench_figures.py has no --under-load mode in this checkout)"
    proc = subprocess.run([sys.executable, str(script), "--under-load"], capture_output=True, text=True)
    tail = "\n".join("  " + line for line in proc.stdout.strip().splitlines()[-15:])
    return f"figures under load (benchmarks/bench_figures.py --under-load):\n{tail}"


def hidden_pairs(pairs: int, backends: list[str]) -> list[str]:
    """The hidden evaluation alone: ``pairs`` evaluations forked from the trusted evaluation server and as many in
    a fresh interpreter, alternating (so both see the same machine), of a half-solved textproc and an unsolved
    debug workspace, on each backend; median wall seconds per evaluation. Empty in a checkout without the
    server."""
    import statistics

    from latte_lab.sandbox import zygote
    lines = []
    with tempfile.TemporaryDirectory(prefix="bench_hidden-") as tmp:
        for backend in backends:
            for task, solved in (("textproc", 0.5), ("debug", 0.0)):
                t = ll.tasks.get(task)
                ws = ll.Workspace(Path(tmp) / f"{backend}-{task}", memo=False, sandbox=backend)
                t.setup(ws)
                solution = sorted(t.reference_solution().items())
                for path, text in solution[: round(len(solution) * solved)]:
                    ws.write(path, text, agent="Dev1")
                times: dict[bool, list[float]] = {True: [], False: []}
                scores = set()
                for i in range(2 * pairs + 1):  # the first, with the server, starts it: not counted
                    use = i % 2 == 0
                    zygote.USE_TRUSTED_SERVER = use
                    start = time.perf_counter()
                    ev = t.evaluate(ws)
                    if i:
                        times[use].append(time.perf_counter() - start)
                    scores.add((ev.passed, ev.failed, ev.errors))
                zygote.USE_TRUSTED_SERVER = True
                server, fresh = statistics.median(times[True]), statistics.median(times[False])
                lines.append(f"  {backend:5s} {task:8s} server {server:.3f} s, fresh interpreter {fresh:.3f} s "
                             f"({server / fresh:.2f}x); the same score every time: {len(scores) == 1}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--backend", choices=("auto", "local", "bwrap"), default="auto",
                    help="the sandbox backend (auto: the default, bwrap where it works)")
    ap.add_argument("--quick", action="store_true", help="60 trials, samples of 30 and 15")
    ap.add_argument("--sample", type=int, default=None, help="trials of the 1-job/2-job comparison (default 120)")
    ap.add_argument("--bwrap-sample", type=int, default=None, help="trials of bwrap against local (default 30; 0: skip)")
    ap.add_argument("--label", default=None, help="what to call this checkout in the table (default: its commit)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the sweep directories under this folder")
    ap.add_argument("--no-figures", action="store_true", help="skip bench_figures.py --under-load")
    ap.add_argument("--hidden-pairs", type=int, default=0,
                    help="only the hidden evaluation: this many evaluations forked from the trusted evaluation "
                         "server and as many in a fresh interpreter, alternating, on each backend")
    args = ap.parse_args()
    if args.hidden_pairs > 0:
        from latte_lab.sandbox import resolve_sandbox

        backends = ["local"]
        try:
            backends.append(resolve_sandbox("bwrap"))
        except Exception:  # noqa: BLE001 - bubblewrap cannot run here
            pass
        print(f"bench_study --hidden-pairs {args.hidden_pairs}: median wall seconds of one hidden evaluation "
              f"(load {os.getloadavg()[0]:.2f})", flush=True)
        lines = hidden_pairs(args.hidden_pairs, backends)
        print("\n".join(lines) or "  this checkout has no trusted evaluation server")
        return
    if args.quick:
        args.trials = 60
    sample = args.sample if args.sample is not None else (30 if args.quick else 120)
    bwrap_sample = args.bwrap_sample if args.bwrap_sample is not None else (15 if args.quick else 30)
    for name, value in (("--trials", args.trials), ("--jobs", args.jobs)):
        if value < 1:
            sys.exit(f"bench_study: {name} must be at least 1, got {value}")
    sample = min(sample, args.trials)
    checkout = Path(ll.__file__).resolve().parents[1]  # the latte_lab measured, wherever this script lies
    label = args.label or subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                                         capture_output=True, text=True).stdout.strip() or "this checkout"
    from latte_lab.sandbox import resolve_sandbox

    backend = resolve_sandbox(args.backend)
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_study-"))
    root.mkdir(parents=True, exist_ok=True)
    install_timers(root / "unused.jsonl")
    speed = machine_speed_ms()
    print(f"bench_study [{label}]: {args.trials} trials on {backend}; load {os.getloadavg()[0]:.2f}, machine speed "
          f"{speed:.1f} ms (CPU ms of a fixed workload, lower is faster)", flush=True)
    results: dict[str, dict] = {}
    bwrap_pair = None
    try:
        configs = study(args.trials, args.backend)
        if sample > 0 and args.jobs > 1:
            results["one"] = run(configs[:sample], 1, root, "sample-1job")
            print(f"  sample, 1 job: {results['one']['wall']:.1f} s, {rate(results['one']):.1f}/min", flush=True)
            results["two"] = run(configs[:sample], 2, root, "sample-2jobs")
            print(f"  sample, 2 jobs: {results['two']['wall']:.1f} s, {rate(results['two']):.1f}/min", flush=True)
        results["full"] = run(configs, args.jobs, root, "study")
        print(f"  study: {results['full']['wall']:.1f} s, {rate(results['full']):.1f}/min", flush=True)
        if bwrap_sample > 0:
            try:
                resolve_sandbox("bwrap")
            except Exception as exc:  # noqa: BLE001 - bubblewrap cannot run here
                print(f"  bwrap against local: skipped ({exc})")
            else:
                b = run(study(bwrap_sample, "bwrap"), 2, root, "sample-bwrap")
                lo = run(study(bwrap_sample, "local"), 2, root, "sample-local")
                bwrap_pair = (b, lo)
        figures = "figures under load: skipped (--no-figures)" if args.no_figures else figures_under_load()
        report(label, backend, results, bwrap_pair, figures)
        print(f"machine speed at the end: {machine_speed_ms():.1f} ms (at the start {speed:.1f}); load "
              f"{os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    threading.current_thread().name = "bench_study"
    main()
