"""A real-model study at the provider's speed limit, rehearsed on the provider emulator: today's sweep (one
trial per worker process, 4 per CPU) against the sweep with trials in flight (``--in-flight``), in one run.

    python benchmarks/bench_real_study.py [--trials 200] [--baseline-trials 32] [--tpm 4000000] [--latency 3]
                                          [--error-rate 0.01] [--in-flight 96] [--max-rounds 6] [--no-kill]
                                          [--keep DIR]

The study: ``--trials`` trials of ``openai/gpt-4o-mini`` (the debug task, the LATTE team, ``--max-rounds``
rounds, seeds 0, 1, ...) through ``latte-lab sweep``, against ``latte-lab emulate`` with a median latency of
``--latency`` seconds (lognormal, sigma 0.5), a limit of ``--tpm`` tokens per minute (T; the sweep is told the
same limit) and ``--error-rate`` of calls failing (three quarters answered 5xx, a quarter dropped). Each
phase has an emulator of its own, on one port (so the trials have the same ids in every phase), its own
sweep folder and its own response cache:

1. today's sweep: ``--jobs 8`` (4 per CPU on 2 CPUs), on the first ``--baseline-trials`` trials (at one trial
   per process, all ``--trials`` would take ``--trials / 8`` waves of a trial's length);
2. the estimate: ``latte-lab sweep --dry-run`` of the whole study, from phase 1's trials
   (``--estimate-from``), at T and ``--in-flight``;
3. the sweep with trials in flight: ``--in-flight`` trials in 2 processes, all ``--trials``;
4. kill and rerun (unless ``--no-kill``): phase 3's study again in a fresh folder, SIGKILLed (the whole
   process group, as a crash or an out-of-memory kill would) once half its trials are in place, then run
   again to its end; its trials must end with the same totals as phase 3's.

For each phase it prints the tokens per minute achieved against T (over the whole run, and sustained: while
trials were still waiting to start), the wall time against the ideal (the tokens billed / T), the calls
retried (the emulator's 429s, 5xx and dropped connections), the calls lost or paid twice (the emulator's log
against every run directory's record: :mod:`latte_lab.models.emulator.reconcile`), the dollars counted
(the trials' ledgers) against the dollars billed (the emulator's usage at the price table's prices) and the
memory per trial in flight (the proportional set size of the sweep's processes at their peak, less that of
the idle sweep, over the most trials in flight). Targets: at least 90% of T sustained, no call lost or paid
twice, dollars exact; after the kill, the same totals.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

import latte_lab as ll
from latte_lab.models.emulator import read_log, spawn, summary
from latte_lab.models.emulator.reconcile import reconcile

MODEL = "openai/gpt-4o-mini"
SAMPLE_SECONDS = 1.0  # how often the sweep's memory and trials in flight are sampled
BASELINE_JOBS = 8  # today's sweep: 4 worker processes per CPU on a 2-CPU laptop
INFLIGHT_PROCESSES = 2
EXACT_DOLLARS = 1e-9


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sampler:
    """The sweep process tree's total PSS and its trials in flight (run directories in the running area), every
    :data:`SAMPLE_SECONDS`."""

    def __init__(self, pid: int, out: Path):
        self.pid, self.out = pid, out
        self.samples: list[tuple[float, int, int]] = []  # (time, pss bytes, trials in flight)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _pss(self) -> int:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0
        total = 0
        for proc in procs:
            try:
                total += proc.memory_full_info().pss
            except psutil.Error:
                continue
        return total

    def _run(self) -> None:
        running = self.out / ".sweep" / "running"
        while not self._stop.wait(SAMPLE_SECONDS):
            in_flight = sum(1 for p in running.iterdir() if p.is_dir()) if running.is_dir() else 0
            self.samples.append((time.time(), self._pss(), in_flight))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def per_trial_mib(self) -> tuple[float, int]:
        """(MiB per trial in flight, the most trials in flight): the peak PSS less the idle sweep's (the first
        sample, before any trial), over the most trials in flight."""
        if not self.samples:
            return math.nan, 0
        idle = min(s[1] for s in self.samples[:3])
        peak_flight = max(s[2] for s in self.samples)
        peak = max(s[1] for s in self.samples)
        return ((peak - idle) / peak_flight / 2**20 if peak_flight else math.nan), peak_flight


def sweep_command(out: Path, url: str, trials: int, args, *, jobs: int, in_flight: int | None) -> list[str]:
    command = [sys.executable, "-m", "latte_lab.cli", "sweep", "--tasks", "debug", "--teams", "latte",
               "--models", MODEL, "--base-url", url + "/v1", "--replicates", str(trials), "--max-rounds",
               str(args.max_rounds), "--jobs", str(jobs), "--rate-limit", f"{url}/v1=-/{args.tpm:g}",
               "--out", str(out), "--quiet"]
    if in_flight:
        command += ["--in-flight", str(in_flight)]
    return command


def run_sweep_process(command: list[str], out: Path, cache: Path, *, kill_at: int | None = None):
    """Runs ``command`` (a ``latte-lab sweep``) with its own cache; returns (seconds, sampler, the time it was
    killed or None, its output). With ``kill_at``, SIGKILLs its whole process group once that many trials are in
    place."""
    env = {**os.environ, "LATTE_LAB_CACHE": str(cache)}
    env.pop("OPENAI_API_KEY", None)
    start = time.time()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    sampler = Sampler(proc.pid, out)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
    reader.start()
    killed = None
    while proc.poll() is None:
        time.sleep(0.5)
        if kill_at is not None and len(finished(out)) >= kill_at:
            killed = time.time()
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    seconds = time.time() - start
    sampler.stop()
    reader.join(5)
    if proc.returncode not in (0, 1) and killed is None:
        raise SystemExit(f"the sweep failed ({proc.returncode}):\n{''.join(output)}")
    return seconds, sampler, killed, "".join(output)


def finished(out: Path) -> list[Path]:
    return [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")
            and ll.sweep.sweepdir.attempt_of(p.name)[1] is None] if out.is_dir() else []


def rows_of(out: Path) -> dict[str, dict]:
    rows = {}
    for path in finished(out):
        payload = json.loads((path / "result.json").read_text())
        rows[payload["trial_id"]] = payload["row"]
    return rows


def rates(entries: list[dict], tpm: float) -> dict:
    """Tokens per minute over the whole run and while trials were still waiting to start (the last trial's first
    call ends the window), against ``tpm``."""
    billed = [e for e in entries if e.get("outcome") == "ok"]
    if not billed:
        return {"overall": math.nan, "sustained": math.nan, "span": 0.0, "tokens": 0}
    start = min(e["arrived"] for e in entries)
    end = max(e["finished"] for e in entries)
    firsts: dict[str, float] = {}
    for e in entries:
        trial = (e.get("call") or "").split("/")[0]
        if trial:
            firsts[trial] = min(firsts.get(trial, math.inf), e["arrived"])
    last_start = max(firsts.values()) if firsts else end
    tokens = sum(e["input_tokens"] + e["output_tokens"] for e in billed)
    window = [e for e in billed if e["finished"] <= last_start]
    sustained = (sum(e["input_tokens"] + e["output_tokens"] for e in window) / (last_start - start) * 60
                 if last_start - start > 60 else math.nan)
    return {"overall": tokens / (end - start) * 60, "sustained": sustained, "span": end - start, "tokens": tokens,
            "last_start": last_start - start}


def phase(name: str, port: int, args, root: Path, trials: int, *, jobs: int, in_flight: int | None,
          kill: bool = False) -> dict:
    out, cache, log = root / name, root / f"{name}-cache.sqlite", root / f"{name}-emulator.jsonl"
    settings = dict(latency_s=args.latency, latency_sigma=0.5, tokens_per_minute=args.tpm,
                    error_rate=args.error_rate * 0.75, drop_rate=args.error_rate * 0.25, seed=0, port=port)
    result: dict = {"name": name, "trials": trials, "jobs": jobs, "in_flight": in_flight}
    with spawn(log_path=log, **settings) as emu:
        command = sweep_command(out, emu.url, trials, args, jobs=jobs, in_flight=in_flight)
        print(f"  {name}: {' '.join(command[3:])}", flush=True)
        seconds, sampler, killed, output = run_sweep_process(command, out, cache,
                                                             kill_at=trials // 2 if kill else None)
        result.update(seconds=seconds, memory=sampler.per_trial_mib(), killed=killed)
        if kill:
            result["finished_at_kill"] = len(finished(out))
            result["in_flight_at_kill"] = len(list((out / ".sweep" / "running").glob("*")))
            print(f"  {name}: killed after {seconds:.0f} s with {result['finished_at_kill']} trials in place and "
                  f"{result['in_flight_at_kill']} in flight; running it again", flush=True)
            again, sampler2, _, output = run_sweep_process(command, out, cache)
            result.update(seconds_again=again)
        entries = read_log(log)
    if kill:
        result["under_way_at_kill"] = under_way(entries, killed)
    result["summary"] = summary(entries)
    result["rates"] = rates(entries, args.tpm)
    result["reconcile"] = reconcile(entries, out)
    result["rows"] = rows_of(out)
    result["output_tail"] = output.strip().splitlines()[-4:]
    return result


def under_way(entries: list[dict], killed_at: float) -> dict:
    """The calls billed twice whose first answer the killed sweep never recorded: asked before the kill, answered
    as it came or just before it, before the trial could write the reply to its cache and cassette (the rerun,
    finding it in neither, asked again)."""
    billed: dict[str, list[dict]] = {}
    for e in entries:
        if e.get("outcome") == "ok" and e.get("call"):
            billed.setdefault(e["call"], []).append(e)
    twice = {call: sorted(es, key=lambda e: e["arrived"]) for call, es in billed.items() if len(es) > 1}
    at_kill = [es[0] for es in twice.values() if es[0]["arrived"] < killed_at <= es[1]["arrived"]]
    return {"paid_twice": sum(len(es) - 1 for es in twice.values()), "under_way": len(at_kill),
            "dollars": math.fsum(e["dollars"] for e in at_kill)}


def estimate(port: int, args, root: Path, basis: Path) -> dict:
    url = f"http://127.0.0.1:{port}/v1"
    grid = {"task": "debug", "team": "latte", "model": MODEL, "base_url": url, "replicates": args.trials,
            "max_rounds": args.max_rounds}
    plan = ll.sweep.dry_run(grid, root / "estimate", n_jobs=INFLIGHT_PROCESSES, in_flight=args.in_flight,
                            rate_limits={url: (None, args.tpm)}, basis=basis)
    table = plan.table()
    timing = plan.time_estimate(table)
    print("\n".join("    " + line for line in plan.report().splitlines()), flush=True)
    return {"calls": float(table["calls_to_run"].sum()), "tokens": float(table["tokens_to_run"].sum()),
            "dollars": float(table["dollars_to_run"].sum()), "seconds": timing["seconds"], "bound": timing["bound"]}


def fmt_rate(rate: float, tpm: float) -> str:
    return "-" if math.isnan(rate) else f"{rate:,.0f} ({rate / tpm:.0%} of T)"


def table(baseline: dict, new: dict, args) -> str:
    rows = []

    def add(label, a, b, target=""):
        rows.append((label, a, b, target))

    def retried(r):
        o = r["summary"]["outcomes"]
        return f"{r['summary']['retried']} (429: {o.get('rate_limit', 0)}, 5xx: {o.get('5xx', 0)}, dropped: {o.get('drop', 0)})"

    def ideal(r):
        tokens = r["rates"]["tokens"]
        return f"{r['rates']['span'] / 60:.1f} min / {tokens / args.tpm:.1f} min"

    def lost(r):
        c = r["reconcile"]
        return f"{len(c['lost'])} / {c['paid_twice']}"

    def dollars(r):
        c = r["reconcile"]
        same = abs(c["dollars_recorded"] - c["dollars_by_provider"]) <= EXACT_DOLLARS
        return f"${c['dollars_recorded']:.6f} / ${c['dollars_by_provider']:.6f}" + (" (equal)" if same else " (DIFFER)")

    def memory(r):
        mib, peak = r["memory"]
        return f"{mib:.0f} MiB ({peak} in flight)"

    def statuses(r):
        rows = r["rows"].values()
        ok = sum(1 for row in rows if row["status"] == "ok")
        return f"{ok} ok, {len(r['rows']) - ok} not"

    add("trials", f"{baseline['trials']} (8 processes)", f"{new['trials']} ({args.in_flight} in flight, 2 processes)")
    add("trials ended ok (ran their rounds)", statuses(baseline), statuses(new), "all")
    add("calls billed / tokens billed", f"{baseline['summary']['billed_calls']:,} / {baseline['rates']['tokens']:,}",
        f"{new['summary']['billed_calls']:,} / {new['rates']['tokens']:,}")
    add("tokens per minute, sustained", fmt_rate(baseline["rates"]["sustained"], args.tpm),
        fmt_rate(new["rates"]["sustained"], args.tpm), ">= 90% of T")
    add("tokens per minute, whole run", fmt_rate(baseline["rates"]["overall"], args.tpm),
        fmt_rate(new["rates"]["overall"], args.tpm))
    add("wall time / ideal (tokens / T)", ideal(baseline), ideal(new))
    per_trial = baseline["rates"]["span"] / baseline["trials"]
    add(f"wall time for {args.trials} trials", f"~{per_trial * args.trials / 60:.0f} min (projected)",
        f"{new['rates']['span'] / 60:.1f} min")
    add("calls retried", retried(baseline), retried(new))
    add("calls lost / paid twice", lost(baseline), lost(new), "0 / 0")
    add("dollars counted / billed", dollars(baseline), dollars(new), "exact")
    add("memory per trial in flight (PSS)", memory(baseline), memory(new))
    widths = [max(len(str(r[i])) for r in rows + [("", "today's sweep", "in flight", "target")]) for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(("", "today's sweep", "in flight", "target"), widths))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="trials of the study (default: 200)")
    parser.add_argument("--baseline-trials", type=int, default=32, help="trials of today's sweep (default: 32)")
    parser.add_argument("--tpm", type=float, default=4_000_000, help="tokens per minute, T (default: 4,000,000)")
    parser.add_argument("--latency", type=float, default=3.0, help="median seconds per call (default: 3)")
    parser.add_argument("--error-rate", type=float, default=0.01, help="share of calls failing (default: 0.01)")
    parser.add_argument("--in-flight", type=int, default=96, help="trials in flight (default: 96)")
    parser.add_argument("--max-rounds", type=int, default=6, help="rounds per trial (default: 6)")
    parser.add_argument("--no-kill", action="store_true", help="leave out the kill and rerun")
    parser.add_argument("--keep", default=None, help="keep the sweeps in this folder (default: a temporary one)")
    args = parser.parse_args()

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-real-study-"))
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    started = time.time()
    print(f"study: {args.trials} trials of {MODEL} (debug, latte, {args.max_rounds} rounds); emulator: median latency "
          f"{args.latency:g} s, T = {args.tpm:,.0f} tokens per minute, {args.error_rate:.0%} of calls failing; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", flush=True)
    try:
        baseline = phase("today", port, args, root, args.baseline_trials, jobs=BASELINE_JOBS, in_flight=None)
        print("  the estimate (latte-lab sweep --dry-run --estimate-from today):", flush=True)
        guess = estimate(port, args, root, root / "today")
        new = phase("inflight", port, args, root, args.trials, jobs=INFLIGHT_PROCESSES, in_flight=args.in_flight)
        killed = None if args.no_kill else phase("killed", port, args, root, args.trials, jobs=INFLIGHT_PROCESSES,
                                                 in_flight=args.in_flight, kill=True)
        print()
        print(table(baseline, new, args))
        print()
        measured = {"calls": new["summary"]["billed_calls"], "tokens": new["rates"]["tokens"],
                    "dollars": new["reconcile"]["dollars_by_provider"], "seconds": new["rates"]["span"]}
        parts = [f"{k} {guess[k]:,.{4 if k == 'dollars' else 0}f} vs {measured[k]:,.{4 if k == 'dollars' else 0}f} "
                 f"({guess[k] / measured[k] - 1:+.0%})" for k in ("calls", "tokens", "dollars", "seconds")]
        print(f"dry-run estimate against the in-flight run (target: within 25%): {'; '.join(parts)} "
              f"(time bound by {guess['bound']})")
        if killed is not None:
            same = [t for t, row in new["rows"].items() if t in killed["rows"] and all(
                row[k] == killed["rows"][t][k] for k in ("total_tokens", "success", "accuracy", "total_rounds"))]
            c, w = killed["reconcile"], killed["under_way_at_kill"]
            print(f"kill and rerun: SIGKILL with {killed['finished_at_kill']} trials in place and "
                  f"{killed['in_flight_at_kill']} in flight; after the rerun {len(killed['rows'])} trials, "
                  f"{len(same)} with the same tokens, success, accuracy and rounds as the uninterrupted run "
                  f"(total tokens {sum(r['total_tokens'] for r in killed['rows'].values()):,} vs "
                  f"{sum(r['total_tokens'] for r in new['rows'].values()):,}); calls lost {len(c['lost'])}, paid twice "
                  f"{c['paid_twice']}, of which {w['under_way']} were under way at the kill (answered, never recorded by "
                  f"the killed process, so asked again: ${w['dollars']:.6f}); dollars counted "
                  f"${c['dollars_recorded']:.6f} + those ${w['dollars']:.6f} = "
                  f"${c['dollars_recorded'] + w['dollars']:.6f} / billed ${c['dollars_by_provider']:.6f}")
        print(f"benchmark: {(time.time() - started) / 60:.1f} min; load {os.getloadavg()[0]:.1f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
