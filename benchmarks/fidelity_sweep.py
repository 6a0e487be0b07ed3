"""Protocol figures of a simulated sweep beside the paper's: how often the Lead ran, how many runs
released or verified, heartbeat alerts, node completion times from the claim and from the assign.

    python benchmarks/fidelity_sweep.py --out runs/fidelity --replicates 10 --n-jobs 2
    python benchmarks/fidelity_sweep.py --preset released     # every switch at the released code's value

The sweep is resumable (finished trials are not rerun). Presets: ``paper`` (the defaults), ``released``
(``TrialConfig.switches()``' released values), ``busy_every_round`` (the paper's rules except that busy
workers run every round), ``released_dispatch`` (busy workers every round and the released code's count of
"G_t has changed") and ``previous_defaults`` (latte_lab's readings before the paper's); ``--readings`` runs
LATTE and static under ``paper`` and ``released_dispatch`` and prints them side by side (docs/fidelity.md). The
paper's values come from ``latte_lab/data/paper_reference.csv`` and
``latte_lab/data/paper_protocol_reference.csv``.
"""

from __future__ import annotations

import argparse
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

import latte_lab as ll
from latte_lab import config, metrics

TASKS = ["eda", "debug", "textproc"]
TEAMS = ["latte", "static", "leader_worker", "decentralized", "pipeline"]
PRESETS = {
    **config.PRESETS,  # paper, released_dispatch (the released code's dispatch and change count), previous_defaults
    "released": ll.TrialConfig.switches(),
    "busy_every_round": {"dispatch": "busy_every_round"},
}
READINGS = ("paper", "released_dispatch")  # the two readings docs/fidelity.md sets side by side (--readings)


def paper_values() -> dict[tuple[str, str], float]:
    """(metric, team) -> the paper's printed value, in the unit printed below (% or s)."""
    out = {}
    data = resources.files("latte_lab.data")
    proto = pd.read_csv(data.joinpath("paper_protocol_reference.csv"))
    for r in proto.itertuples():
        out[(r.metric, r.team)] = float(r.value)
    ref = pd.read_csv(data.joinpath("paper_reference.csv"), dtype=str, keep_default_na=False)
    for r in ref[ref["metric"].str.startswith("node_completion")].itertuples():
        out[(r.metric, r.team)] = float(r.value)
    return out


def node_times(run_dir: Path) -> tuple[list[float], list[float]]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    return (list(metrics.node_completion_times(events, "claim").values()),
            list(metrics.node_completion_times(events, "assign").values()))


def pct(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def sec(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


def summarise(trials: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for team in [t for t in TEAMS if t in set(trials["team"])]:
        t = trials[trials["team"] == team]
        claim, assign = [], []
        for d in t["run_dir"]:
            c, a = node_times(Path(d))
            claim += c
            assign += a
        rounds, lead = t["total_rounds"].sum(), t["lead_invocations"].sum()
        rows.append({
            "team": team, "runs": len(t), "success": t["success"].mean(),
            "lead_active_mean": t["lead_active_fraction"].mean(),
            "lead_active_pooled": lead / rounds if rounds else math.nan,
            "runs_with_release": (t["n_release"] > 0).mean(), "runs_with_verify": (t["n_verify"] > 0).mean(),
            "heartbeat_alerts": int(t["heartbeat_alerts"].sum()), "alerts_per_run": t["heartbeat_alerts"].mean(),
            "nodes": len(claim),
            "claim_mean_s": sum(claim) / len(claim) if claim else math.nan,
            "claim_p95_s": float(np.percentile(claim, 95)) if claim else math.nan,
            "assign_mean_s": sum(assign) / len(assign) if assign else math.nan,
            "assign_p95_s": float(np.percentile(assign, 95)) if assign else math.nan,
            "planning_s": t["planning_seconds"].mean(),
        })
    return pd.DataFrame(rows)


def report(summary: pd.DataFrame) -> str:
    paper = paper_values()

    def ref(metric: str, team: str, fmt) -> str:
        v = paper.get((metric, team))
        return "" if v is None else f" (paper {fmt(v)})"

    lines = ["| team | runs | success | Lead ran (mean of runs / pooled) | runs with Release | runs with Verify "
             "| heartbeat alerts (total, per run) | node completion from claim: mean, p95 (s) "
             "| from assign: mean, p95 (s) | planning (s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary.itertuples():
        lines.append(
            f"| {r.team} | {r.runs} | {pct(r.success)} "
            f"| {pct(r.lead_active_mean)} / {pct(r.lead_active_pooled)}{ref('lead_active_fraction', r.team, '{:.1f}%'.format)} "
            f"| {pct(r.runs_with_release)}{ref('runs_with_release', r.team, '{:.0f}%'.format)} "
            f"| {pct(r.runs_with_verify)}{ref('runs_with_verify', r.team, '{:.0f}%'.format)} "
            f"| {r.heartbeat_alerts}, {r.alerts_per_run:.2f} "
            f"| {sec(r.claim_mean_s)}, {sec(r.claim_p95_s)}"
            f"{ref('node_completion_mean_s', r.team, '{:.1f}'.format)}{ref('node_completion_p95_s', r.team, '{:.0f}'.format)} "
            f"| {sec(r.assign_mean_s)}, {sec(r.assign_p95_s)} "
            f"| {sec(r.planning_s)}{ref('planning_seconds', r.team, '{:.1f}'.format)} |")
    return "\n".join(lines)


def readings_table(out: Path, replicates: int, n_jobs: int) -> str:
    """LATTE and static under each of READINGS: accuracy, tokens, the Lead's share of rounds, runs with a
    Release, and wall clock, beside the paper's values where it prints them."""
    paper = paper_values()
    lines = ["| reading | team | runs | accuracy | tokens K | wall min | Lead ran (mean of runs) | runs with Release |",
             "|---|---|---|---|---|---|---|---|"]
    for reading in READINGS:
        grid = {"task": TASKS, "team": ["latte", "static"], "replicates": replicates, **PRESETS[reading]}
        ll.run_sweep(grid, out=out / reading, n_jobs=n_jobs, progress=False)
        trials = ll.load_runs(out / reading).trials
        for team in ("latte", "static"):
            t = trials[trials["team"] == team]
            lead_ref = paper.get(("lead_active_fraction", team))
            rel_ref = paper.get(("runs_with_release", team))
            lines.append(
                f"| {reading} | {team} | {len(t)} | {pct(t['accuracy'].mean())} | {t['total_tokens'].mean() / 1000:.0f} "
                f"| {t['wall_clock_seconds'].mean() / 60:.1f} "
                f"| {pct(t['lead_active_fraction'].mean())}{'' if lead_ref is None else f' (paper {lead_ref:.1f}%)'} "
                f"| {pct((t['n_release'] > 0).mean())}{'' if rel_ref is None or team != 'latte' else f' (paper {rel_ref:.0f}%)'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/fidelity")
    ap.add_argument("--replicates", type=int, default=10)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="paper")
    ap.add_argument("--readings", action="store_true",
                    help="LATTE and static under the paper's and the released code's dispatch readings, side by side")
    args = ap.parse_args()
    if args.readings:
        print(f"{args.replicates} seeds x {len(TASKS)} tasks per reading and team, simulated model")
        print(readings_table(Path(args.out) / "readings", args.replicates, args.n_jobs))
        return
    out = Path(args.out) / args.preset
    grid = {"task": TASKS, "team": TEAMS, "replicates": args.replicates, **PRESETS[args.preset]}
    ll.run_sweep(grid, out=out, n_jobs=args.n_jobs, progress=False)
    trials = ll.load_runs(out).trials
    print(f"{len(trials)} trials, preset {args.preset}, {args.replicates} seeds x {len(TASKS)} tasks x "
          f"{len(TEAMS)} teams, simulated model")
    print(report(summarise(trials)))


if __name__ == "__main__":
    main()
