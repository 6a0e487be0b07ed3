"""How close the simulated model comes to the published trials: the calibration's moments, and the held-out
validation of LATTE's comparisons with the teams the fit never saw.

Both follow ``docs/calibration.md``, the pre-registration written before any fit:

- :func:`moments` computes the 25 fitted moments from trial rows (rounds, output tokens per dispatched
  agent-round, worker calls per round, overwrites, for latte and static on each task; the share of latte
  runs with a Release), the same way for the published trials and for ours; :func:`published_moments`
  adds each moment's scale (the published between-trial spread) and :func:`moment_loss` is the fit's loss.
- :func:`direction_table` compares LATTE with each held-out team on accuracy, tokens and wall clock, per
  task, with bootstrap intervals on both sides; a comparison counts only when both intervals exclude zero.
- :func:`validate_sim` prints both for the shipped study (``latte_lab/data/sim_validation.csv`` and
  ``latte_lab/data/calibration.json``, written by ``make calibrate`` and ``make validate-sim``).

>>> import pandas as pd
>>> rows = pd.DataFrame({"task": ["debug"] * 2, "team": ["latte", "static"], "total_rounds": [10, 20],
...                      "total_output_tokens": [1000, 3000], "dispatched_agent_rounds": [20, 30],
...                      "cross_agent_overwrites": [2, 4], "n_release": [1, 0]})
>>> float(moments(rows).loc[("rounds", "debug", "static")])
20.0
>>> float(moments(rows).loc[("release_share", "all", "latte")])
1.0
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

FIT_TEAMS = ("latte", "static")
HELD_OUT = ("leader_worker", "decentralized", "pipeline")
PUBLISHED_NAME = {"pipeline": "metagpt"}  # the published rows a team of ours stands beside
TASKS = ("debug", "eda", "textproc")
MEASURES = {"accuracy": "accuracy", "tokens": "total_tokens", "wall": "wall_clock_seconds"}
PER_TRIAL = {  # moment -> how one trial's value is computed from its row
    "rounds": lambda t: t["total_rounds"].astype(float),
    "output_tokens_per_call": lambda t: t["total_output_tokens"] / t["dispatched_agent_rounds"].where(
        t["dispatched_agent_rounds"] > 0),
    "worker_calls_per_round": lambda t: t["dispatched_agent_rounds"] / t["total_rounds"].where(t["total_rounds"] > 0),
    "overwrites": lambda t: t["cross_agent_overwrites"].astype(float),
}
VALIDATION_FILE = "sim_validation.csv"
CALIBRATION_FILE = "calibration.json"


def _per_trial(trials: pd.DataFrame) -> dict[tuple[str, str, str], pd.Series]:
    out = {}
    for task in TASKS:
        for team in FIT_TEAMS:
            t = trials[(trials["task"] == task) & (trials["team"] == team)]
            if t.empty:
                continue
            for name, f in PER_TRIAL.items():
                out[(name, task, team)] = f(t).dropna()
    return out


def moments(trials: pd.DataFrame) -> pd.Series:
    """The calibration's moments of trial rows (one per trial), indexed by (moment, task, team); the share of
    latte runs with a Release is ("release_share", "all", "latte") when the rows have ``n_release``."""
    values = {k: float(v.mean()) for k, v in _per_trial(trials).items() if len(v)}
    latte = trials[trials["team"] == "latte"]
    if "n_release" in trials and len(latte) and latte["n_release"].notna().any():
        values[("release_share", "all", "latte")] = float((latte["n_release"].fillna(0) > 0).mean())
    index = pd.MultiIndex.from_tuples(list(values), names=["moment", "task", "team"])
    return pd.Series(list(values.values()), index=index, dtype=float)


def published_moments(published=None) -> pd.DataFrame:
    """The published moments with their scale: columns ``value`` and ``scale`` (the published between-trial
    standard deviation in the cell; sqrt(p (1 - p)) for the Release share, which the authors published only
    as a share of runs: ``operator_usage.json``)."""
    from latte_lab.analysis.loaders import load_published

    data = published if published is not None else load_published()
    trials = data.trials
    rows = []
    for (name, task, team), v in _per_trial(trials).items():
        rows.append({"moment": name, "task": task, "team": team, "value": float(v.mean()),
                     "scale": float(v.std(ddof=1)) if len(v) > 1 else float("nan"), "n": len(v)})
    ops = data.operator_usage
    share = ops[(ops["team"] == "latte") & (ops["operator"] == "release_task")]["fraction"]
    if len(share):
        p = float(share.iloc[0])
        rows.append({"moment": "release_share", "task": "all", "team": "latte", "value": p,
                     "scale": float(np.sqrt(p * (1 - p))), "n": float("nan")})
    return pd.DataFrame(rows).set_index(["moment", "task", "team"])


def moment_loss(simulated: pd.Series, published: pd.DataFrame) -> float:
    """The fit's loss: the sum over the published moments of ((simulated - published) / scale)^2; a moment the
    simulation did not produce (no trial of that cell) counts as a miss of 10 scales."""
    loss = 0.0
    for key, row in published.iterrows():
        sim = simulated.get(key)
        if sim is None or not np.isfinite(sim) or not np.isfinite(row["scale"]) or row["scale"] <= 0:
            loss += 100.0
            continue
        loss += ((sim - row["value"]) / row["scale"]) ** 2
    return float(loss)


def moment_table(simulated: pd.Series, published: pd.DataFrame) -> pd.DataFrame:
    """Simulated against published moments, cell by cell, with the distance in scales."""
    t = published[["value", "scale"]].rename(columns={"value": "published"}).copy()
    t.insert(0, "simulated", [simulated.get(k, np.nan) for k in t.index])
    t["z"] = (t["simulated"] - t["published"]) / t["scale"]
    return t


# ------------------------------------------------------------------------------------ validation

def _boot_diff(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, n_boot: int) -> tuple[float, float, float]:
    """Mean(a) - mean(b) and its 95% percentile bootstrap interval (trials resampled within each group)."""
    diff = float(a.mean() - b.mean())
    ia = rng.integers(0, len(a), size=(n_boot, len(a)))
    ib = rng.integers(0, len(b), size=(n_boot, len(b)))
    boots = a[ia].mean(axis=1) - b[ib].mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return diff, float(lo), float(hi)


def _sign(lo: float, hi: float) -> int:
    return 1 if lo > 0 else -1 if hi < 0 else 0


def direction_table(simulated: pd.DataFrame, published: pd.DataFrame, *, n_boot: int = 2000,
                    seed: int = 0) -> pd.DataFrame:
    """LATTE against each held-out team, per task and measure (accuracy, tokens, wall clock): the difference
    of means (LATTE minus the other) with a 95% bootstrap interval in the simulated and in the published
    trials; ``resolved`` when both intervals exclude zero, ``agree`` (only then) when the signs match."""
    rng = np.random.default_rng(seed)
    rows = []
    for task in TASKS:
        for team in HELD_OUT:
            for measure, col in MEASURES.items():
                sides = {}
                for side, trials, other in (("sim", simulated, team), ("paper", published, PUBLISHED_NAME.get(team, team))):
                    a = trials[(trials["task"] == task) & (trials["team"] == "latte")][col].dropna().to_numpy(float)
                    b = trials[(trials["task"] == task) & (trials["team"] == other)][col].dropna().to_numpy(float)
                    sides[side] = _boot_diff(a, b, rng, n_boot) if len(a) and len(b) else (np.nan, np.nan, np.nan)
                (sd, slo, shi), (pd_, plo, phi) = sides["sim"], sides["paper"]
                s_sign, p_sign = _sign(slo, shi), _sign(plo, phi)
                resolved = bool(s_sign and p_sign)
                rows.append({"task": task, "versus": team, "measure": measure, "sim_diff": sd, "sim_lo": slo,
                             "sim_hi": shi, "paper_diff": pd_, "paper_lo": plo, "paper_hi": phi,
                             "resolved": resolved, "agree": bool(resolved and s_sign == p_sign)})
    return pd.DataFrame(rows)


def agreement(table: pd.DataFrame) -> tuple[int, int, float]:
    """(resolved comparisons, of them agreeing with the paper, the agreement rate; NaN when none resolved)."""
    resolved = int(table["resolved"].sum())
    agree = int(table["agree"].sum())
    return resolved, agree, (agree / resolved if resolved else float("nan"))


@dataclass
class SimValidation:
    """What :func:`validate_sim` found: the fit (moments of each profile against the published ones), the
    held-out direction tables per profile, and the fit's record."""

    moments: dict[str, pd.DataFrame]
    directions: dict[str, pd.DataFrame]
    fit: dict

    def summary(self) -> pd.DataFrame:
        """Per profile: the fit's loss on the 25 moments, resolved held-out comparisons, agreements, rate."""
        rows = []
        for profile, table in self.directions.items():
            resolved, agree, rate = agreement(table)
            m = self.moments.get(profile)
            loss = float((m["z"] ** 2).fillna(100.0).sum()) if m is not None else float("nan")
            rows.append({"profile": profile, "moment_loss": loss, "resolved": resolved, "agree": agree,
                         "agreement_rate": rate, "comparisons": len(table)})
        return pd.DataFrame(rows).set_index("profile")

    def __repr__(self) -> str:
        parts = ["Held-out validation (LATTE against leader_worker, decentralized and the pipeline; per task; "
                 "only comparisons resolved on both sides count):", self.summary().round(3).to_string()]
        for profile, m in self.moments.items():
            parts += [f"\nFitted moments, profile {profile!r} (simulated against published; z in published SDs):",
                      m.round(2).to_string()]
        return "\n".join(parts)


def _data_path(name: str) -> Path:
    return Path(str(resources.files("latte_lab.data").joinpath(name)))


def validate_sim(trials: pd.DataFrame | str | Path | None = None, published=None, *, n_boot: int = 2000) -> SimValidation:
    """The validation of the simulated model's profiles: for each profile in ``trials`` (its ``profile``
    column, or the model spec's profile), the fitted moments against the published ones and the held-out
    direction table. ``trials`` defaults to the shipped study (``latte_lab/data/sim_validation.csv``, made by
    ``make validate-sim``); a path to such a CSV or a DataFrame of trial rows also works.
    Printing the result shows both tables."""
    from latte_lab.analysis.loaders import load_published

    if trials is None:
        trials = _data_path(VALIDATION_FILE)
    if not isinstance(trials, pd.DataFrame):
        path = Path(trials)
        if not path.exists():
            raise FileNotFoundError(f"no validation study at {path}; run `make validate-sim` to make one")
        trials = pd.read_csv(path)
    trials = trials.copy()
    if "profile" not in trials:
        trials["profile"] = trials["model"].map(profile_of)
    pub = published if published is not None else load_published()
    pub_moments = published_moments(pub)
    out_m, out_d = {}, {}
    for profile, t in trials.groupby("profile", sort=True):
        out_m[profile] = moment_table(moments(t), pub_moments)
        out_d[profile] = direction_table(t, pub.trials, n_boot=n_boot)
    fit_path = _data_path(CALIBRATION_FILE)
    fit = json.loads(fit_path.read_text()) if fit_path.exists() else {}
    return SimValidation(out_m, out_d, fit)


def published_trials(task: str, team: str) -> pd.DataFrame:
    """The published trials of one task and team (for checks and notebooks)."""
    from latte_lab.analysis.loaders import load_published

    t = load_published().trials
    return t[(t["task"] == task) & (t["team"] == team)]


def profile_of(model: str) -> str:
    """The simulated profile a model spec names: ``simulated/calibrated`` -> ``calibrated``; ``simulated`` ->
    ``default``; overrides after ``?`` are kept (``default?p_reread=0.2``)."""
    spec = str(model)
    if not spec.startswith("simulated"):
        return spec
    rest = spec.split("/", 1)[1] if "/" in spec else "default"
    return rest or "default"
