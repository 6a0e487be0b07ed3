"""Fitting the simulated model's ``calibrated`` profile, and running the validation study, exactly as the second
pre-registration of ``docs/calibration.md`` set them.

- :func:`fit`: simulated method of moments on the published *process* (no team outcome). Each evaluation runs
  the same 24 trials (seeds 1000-1003 x latte, static x debug, eda, textproc: common random numbers) with six
  behaviour parameters set, and scores their process moments against the published ones
  (:func:`latte_lab.analysis.validation.moment_loss`). A 16-point Latin hypercube (numpy seed 49), then
  Nelder-Mead from the best point for at most 24 more evaluations. The record of every evaluation is written to
  ``calibration.json``; the best point, rounded, is the profile.
- :func:`validate`: seeds 0-29 of all five teams on every task under each profile, one row per trial, written
  to ``sim_validation.csv`` for :func:`latte_lab.analysis.validation.validate_sim`.

Both are resumable (finished trials are not rerun) and run from the command line::

    python -m latte_lab.sweep.calibrate fit --out runs/calibration          # make calibrate
    python -m latte_lab.sweep.calibrate validate --out runs/sim_validation  # make validate-sim

>>> spec({"seed_nodes": 3.5, "p_split": 0.4})
'simulated/default?seed_nodes=3.5&p_split=0.4'
>>> [round(x, 3) for x in clip([0.0, 2.0, 0.5, 0.5, 1.0, -1.0])]
[1.0, 1.0, 0.5, 0.5, 0.3, 0.0]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

# The pre-registered search (docs/calibration.md, the second pre-registration): parameter -> (low, high)
PARAMETERS: dict[str, tuple[float, float]] = {
    "seed_nodes": (1.0, 8.0),
    "p_split": (0.00, 1.00),
    "p_reread": (0.00, 1.00),
    "chattiness": (0.00, 1.00),
    "p_straggler": (0.00, 0.30),
    "p_delegate": (0.00, 1.00),
}
FIT_SEEDS = (1000, 1001, 1002, 1003)
FIT_TEAMS = ("latte", "static")
TASKS = ("debug", "eda", "textproc")
LHS_POINTS = 16
LHS_SEED = 49
NM_EVALUATIONS = 24
VALIDATION_SEEDS = tuple(range(30))
VALIDATION_TEAMS = ("latte", "static", "leader_worker", "decentralized", "pipeline")


def clip(x) -> list[float]:
    """A point moved into the searched box."""
    return [float(min(max(v, lo), hi)) for v, (lo, hi) in zip(x, PARAMETERS.values())]


def as_params(x) -> dict[str, float]:
    """A point as named parameters, rounded as the profile ships them (two decimals)."""
    return {name: round(v, 2) for (name, _), v in zip(PARAMETERS.items(), clip(x))}


def spec(params: dict[str, float]) -> str:
    """The model spec of the default profile with these parameters overridden."""
    return "simulated/default?" + "&".join(f"{k}={v}" for k, v in params.items())


def with_graph_sizes(rows):
    """Trial rows with ``graph_size_per_round`` (a JSON list) read from each trial's ``result.json``: the results
    row keeps scalars only, the trial's metrics hold the list."""
    sizes = []
    for run_dir in rows["run_dir"]:
        try:
            metrics = json.loads((Path(run_dir) / "result.json").read_text(encoding="utf-8")).get("metrics") or {}
        except (OSError, ValueError, TypeError):
            metrics = {}
        sizes.append(json.dumps(metrics.get("graph_size_per_round") or []))
    return rows.assign(graph_size_per_round=sizes)


def _key(params: dict[str, float]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]


def evaluate(params: dict[str, float], out: Path, *, n_jobs: int = 2, published=None) -> tuple[float, dict]:
    """Runs the 24 fit trials with ``params`` (resumable, under ``out/evals/<hash>``) and returns the loss and
    the simulated moments."""
    import latte_lab as ll
    from latte_lab.analysis import validation as V

    where = out / "evals" / _key(params)
    grid = {"task": list(TASKS), "team": list(FIT_TEAMS), "seeds": list(FIT_SEEDS), "model": spec(params),
            "sandbox": "local"}
    rows = ll.run_sweep(grid, out=where, n_jobs=n_jobs, progress=False)
    rows = rows[rows["status"] == "ok"] if "status" in rows else rows
    sim = V.moments(with_graph_sizes(rows))
    pub = V.published_moments(published)
    return V.moment_loss(sim, pub), {"|".join(k): round(float(v), 4) for k, v in sim.items()}


def fit(out: str | Path = "runs/calibration", *, n_jobs: int = 2, log=print) -> dict:
    """The pre-registered fit; returns (and writes to ``out/calibration.json``) its record: every evaluation
    with its parameters, loss and moments, and the best point."""
    from scipy.optimize import minimize
    from scipy.stats import qmc

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    record: dict = {"pre_registration": "docs/calibration.md (the second pre-registration)", "parameters": {k: list(v) for k, v in PARAMETERS.items()},
                    "seeds": list(FIT_SEEDS), "teams": list(FIT_TEAMS), "tasks": list(TASKS), "evaluations": []}
    seen: dict[str, float] = {}

    def loss_of(x) -> float:
        params = as_params(x)
        k = _key(params)
        if k in seen:
            return seen[k]
        loss, sim = evaluate(params, out, n_jobs=n_jobs)
        seen[k] = loss
        record["evaluations"].append({"stage": stage, "params": params, "loss": round(loss, 4), "moments": sim})
        log(f"evaluation {len(record['evaluations']):2d} ({stage}): loss {loss:9.2f}  {params}")
        (out / "calibration.json").write_text(json.dumps(record, indent=1))
        return loss

    from latte_lab.sandbox.pytest import sharing_memo

    lo = np.array([v[0] for v in PARAMETERS.values()])
    hi = np.array([v[1] for v in PARAMETERS.values()])
    stage = "latin_hypercube"
    sample = qmc.LatinHypercube(d=len(PARAMETERS), seed=LHS_SEED).random(LHS_POINTS)
    points = lo + sample * (hi - lo)
    scale = hi - lo

    def scaled(z):  # Nelder-Mead on the unit box, so one step size suits every parameter
        return loss_of(lo + np.clip(z, 0, 1) * scale)

    # The evaluations run the same seeds, so many of their trials reach the same files: one memo of test runs
    # for the whole fit (results are the same with or without it; only the sessions run differ).
    with sharing_memo(out / "memo"):
        losses = [loss_of(p) for p in points]
        best = points[int(np.argmin(losses))]
        stage = "nelder_mead"
        minimize(scaled, (best - lo) / scale, method="Nelder-Mead",
                 options={"maxfev": NM_EVALUATIONS, "xatol": 0.01, "fatol": 0.01})
    top = min(record["evaluations"], key=lambda e: e["loss"])
    record["best"] = top
    (out / "calibration.json").write_text(json.dumps(record, indent=1))
    log(f"best of {len(record['evaluations'])} evaluations: loss {top['loss']:.2f} at {top['params']}")
    return record


def validate(out: str | Path = "runs/sim_validation", *, profiles=("default", "calibrated"), n_jobs: int = 2,
             csv: str | Path | None = None):
    """Runs the held-out validation study (resumable) and returns its trial rows, with a ``profile`` column;
    writes them to ``csv`` when given."""
    import pandas as pd

    import latte_lab as ll
    from latte_lab.sandbox.pytest import sharing_memo

    frames = []
    with sharing_memo(Path(out) / "memo"):  # the profiles' trials start from the same files: one memo for both
        for profile in profiles:
            grid = {"task": list(TASKS), "team": list(VALIDATION_TEAMS), "seeds": list(VALIDATION_SEEDS),
                    "model": f"simulated/{profile}", "sandbox": "local"}
            rows = ll.run_sweep(grid, out=Path(out) / profile, n_jobs=n_jobs, progress=False)
            rows = rows[rows["status"] == "ok"].copy() if "status" in rows else rows.copy()
            rows = with_graph_sizes(rows)
            rows.insert(0, "profile", profile)
            frames.append(rows)
    trials = pd.concat(frames, ignore_index=True)
    keep = ["profile", "task", "team", "model", "seed", "trial_id", "success", "accuracy", "total_rounds",
            "total_input_tokens", "total_output_tokens", "total_tokens", "wall_clock_seconds",
            "dispatched_agent_rounds", "cross_agent_overwrites", "n_release", "lead_active_fraction",
            "idle_fraction", "total_messages", "graph_size_initial", "graph_size_final", "graph_size_per_round",
            "op_release_task", "op_create_verify_node", "op_close_task", "op_discover_task_skipped"]
    trials = trials[[c for c in keep if c in trials]]
    if csv is not None:
        trials.to_csv(csv, index=False)
    return trials


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m latte_lab.sweep.calibrate",
                                 description="Fit the simulated model's calibrated profile, or run the "
                                             "validation study (docs/calibration.md).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="the pre-registered simulated-method-of-moments fit to the published process")
    f.add_argument("--out", default="runs/calibration")
    f.add_argument("--jobs", type=int, default=2)
    f.add_argument("--write", help="copy calibration.json here too (e.g. latte_lab/data/calibration.json)")
    v = sub.add_parser("validate", help="seeds 0-29 of every team on every task under each profile")
    v.add_argument("--out", default="runs/sim_validation")
    v.add_argument("--jobs", type=int, default=2)
    v.add_argument("--csv", default="latte_lab/data/sim_validation.csv")
    v.add_argument("--profiles", default="default,calibrated")
    args = ap.parse_args(argv)
    if args.cmd == "fit":
        record = fit(args.out, n_jobs=args.jobs)
        if args.write:
            Path(args.write).write_text(json.dumps(record, indent=1))
    else:
        trials = validate(args.out, profiles=tuple(args.profiles.split(",")), n_jobs=args.jobs, csv=args.csv)
        from latte_lab.analysis.validation import validate_sim

        print(validate_sim(trials))


if __name__ == "__main__":
    main()
