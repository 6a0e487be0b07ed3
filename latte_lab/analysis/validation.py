"""How close the simulated model comes to the published trials: the calibration's process moments, and the
validation of LATTE's comparisons with every other team.

Both follow the second pre-registration of ``docs/calibration.md``, written before any of this code:

- :func:`moments` computes the 26 process moments from trial rows (the graph's size by round; overwrites and
  messages of latte and static on each task; latte's idle fraction on each task; the share of runs that used
  Release, Verify, Close and a duplicate Discover, and static's Close), the same way for the published trials
  and for ours; :func:`published_moments` adds each moment's scale and :func:`moment_loss` is the fit's loss.
  No team outcome (accuracy, tokens, wall clock, rounds) is among them.
- :func:`effects_table` compares LATTE with each other team on accuracy, tokens, wall clock and rounds, per
  task, with bootstrap intervals on both sides; the paper's *clear effects* (its interval excludes zero) are
  classed as reproduced, no difference or reversed in ours.
- :func:`validate_sim` prints both for the shipped study (``latte_lab/data/sim_validation.csv`` and
  ``latte_lab/data/calibration.json``, written by ``make calibrate`` and ``make validate-sim``).

>>> import pandas as pd
>>> rows = pd.DataFrame({"task": ["debug"] * 2, "team": ["latte", "static"], "cross_agent_overwrites": [2, 4],
...                      "total_messages": [10, 20], "idle_fraction": [0.5, 0.0], "op_release_task": [1, 0],
...                      "graph_size_per_round": [[3, 4, 6], [8, 8]]})
>>> float(moments(rows).loc[("overwrites", "debug", "static")])
4.0
>>> float(moments(rows).loc[("graph_r3", "all", "latte")])  # no trial of ours reached round 3
nan
>>> float(moments(rows).loc[("share_release_task", "all", "latte")])
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
OTHERS = ("static", "leader_worker", "decentralized", "pipeline")  # the teams LATTE is compared with
HELD_OUT = ("leader_worker", "decentralized", "pipeline")  # teams no moment of the fit comes from
PUBLISHED_NAME = {"pipeline": "metagpt"}  # the published rows a team of ours stands beside
TASKS = ("debug", "eda", "textproc")
MEASURES = {"accuracy": "accuracy", "tokens": "total_tokens", "wall": "wall_clock_seconds", "rounds": "total_rounds"}
TRAJECTORY_ROUNDS = {"latte": (0, 3, 6, 9, 12), "static": (0,)}
TRIAL_MOMENTS = {  # moment -> (column, teams)
    "overwrites": ("cross_agent_overwrites", ("latte", "static")),
    "messages": ("total_messages", ("latte", "static")),
    "idle": ("idle_fraction", ("latte",)),
}
OPERATOR_SHARES = {"latte": ("release_task", "create_verify_node", "close_task", "discover_task_skipped"),
                   "static": ("close_task",)}
VALIDATION_FILE = "sim_validation.csv"
CALIBRATION_FILE = "calibration.json"
MISSING_PENALTY = 100.0  # a moment the simulation did not produce counts as a miss of 10 scales


def _sizes(value) -> list[int]:
    """A trial's graph sizes by round (a list, or its JSON text as a CSV holds it); [] when absent."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [int(v) for v in value]
    if isinstance(value, str) and value.startswith("["):
        return [int(v) for v in json.loads(value)]
    return []


def _cell(trials: pd.DataFrame, task: str | None, team: str) -> pd.DataFrame:
    t = trials[trials["team"] == team]
    return t if task is None else t[t["task"] == task]


def moments(trials: pd.DataFrame) -> pd.Series:
    """The calibration's process moments of trial rows (one per trial), indexed by (moment, task, team); a
    moment whose column the rows lack, or that no trial reaches, is NaN."""
    values: dict[tuple[str, str, str], float] = {}
    for team, rounds in TRAJECTORY_ROUNDS.items():
        t = _cell(trials, None, team)
        sizes = [_sizes(v) for v in t["graph_size_per_round"]] if "graph_size_per_round" in t else []
        for r in rounds:
            at = [s[r] for s in sizes if len(s) > r]
            values[(f"graph_r{r}", "all", team)] = float(np.mean(at)) if at else float("nan")
    for name, (col, teams) in TRIAL_MOMENTS.items():
        for team in teams:
            for task in TASKS:
                t = _cell(trials, task, team)
                v = t[col].dropna().astype(float) if col in t else pd.Series(dtype=float)
                values[(name, task, team)] = float(v.mean()) if len(v) else float("nan")
    for team, ops in OPERATOR_SHARES.items():
        t = _cell(trials, None, team)
        for op in ops:
            col = f"op_{op}"
            v = t[col].fillna(0).astype(float) if col in t else pd.Series(dtype=float)
            values[(f"share_{op}", "all", team)] = float((v > 0).mean()) if len(v) else float("nan")
    index = pd.MultiIndex.from_tuples(list(values), names=["moment", "task", "team"])
    return pd.Series(list(values.values()), index=index, dtype=float)


def published_moments(published=None) -> pd.DataFrame:
    """The published moments with their scale (columns ``value``, ``scale``, ``n``): a trial moment's scale is
    the published between-trial standard deviation in its cell; a trajectory moment's, the file's standard error
    at that round times the square root of the team's published trial rows (the file gives no count per round);
    an operator share p's, sqrt(p (1 - p))."""
    from latte_lab.analysis.loaders import load_published

    data = published if published is not None else load_published()
    trials = data.trials
    rows = []
    traj = data.trajectories
    for team, rounds in TRAJECTORY_ROUNDS.items():
        n = int((trials["team"] == team).sum())
        for r in rounds:
            hit = traj[(traj["team"] == team) & (traj["round"] == r)]
            if len(hit):
                rows.append({"moment": f"graph_r{r}", "task": "all", "team": team, "value": float(hit["mean"].iloc[0]),
                             "scale": float(hit["sem"].iloc[0]) * np.sqrt(n), "n": n})
    for name, (col, teams) in TRIAL_MOMENTS.items():
        for team in teams:
            for task in TASKS:
                v = _cell(trials, task, team)[col].dropna().astype(float)
                rows.append({"moment": name, "task": task, "team": team, "value": float(v.mean()),
                             "scale": float(v.std(ddof=1)) if len(v) > 1 else float("nan"), "n": len(v)})
    ops = data.operator_usage
    for team, names in OPERATOR_SHARES.items():
        for op in names:
            share = ops[(ops["team"] == team) & (ops["operator"] == op)]["fraction"]
            if len(share):
                p = float(share.iloc[0])
                rows.append({"moment": f"share_{op}", "task": "all", "team": team, "value": p,
                             "scale": float(np.sqrt(p * (1 - p))), "n": float("nan")})
    return pd.DataFrame(rows).set_index(["moment", "task", "team"])


def moment_loss(simulated: pd.Series, published: pd.DataFrame) -> float:
    """The fit's loss: the sum over the published moments of ((simulated - published) / scale)^2; a moment the
    simulation did not produce counts as :data:`MISSING_PENALTY`."""
    loss = 0.0
    for key, row in published.iterrows():
        sim = simulated.get(key)
        if sim is None or not np.isfinite(sim) or not np.isfinite(row["scale"]) or row["scale"] <= 0:
            loss += MISSING_PENALTY
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


def _verdict(paper: int, ours: int) -> str:
    if not paper:
        return "not clear"
    return "no difference" if not ours else "reproduced" if ours == paper else "reversed"


def effects_table(simulated: pd.DataFrame, published: pd.DataFrame, *, n_boot: int = 2000,
                  seed: int = 0) -> pd.DataFrame:
    """LATTE against each other team, per task and measure (accuracy, tokens, wall clock, rounds): the difference
    of means (LATTE minus the other) with a 95% bootstrap interval in the simulated and in the published trials.
    ``clear`` when the published interval excludes zero; ``verdict`` then says whether ours reproduces it, shows
    no difference or reverses it; ``same_sign`` compares the two point estimates, clear or not."""
    rng = np.random.default_rng(seed)
    rows = []
    for task in TASKS:
        for team in OTHERS:
            for measure, col in MEASURES.items():
                sides = {}
                for side, trials, other in (("sim", simulated, team), ("paper", published, PUBLISHED_NAME.get(team, team))):
                    a = _cell(trials, task, "latte")[col].dropna().to_numpy(float) if col in trials else np.array([])
                    b = _cell(trials, task, other)[col].dropna().to_numpy(float) if col in trials else np.array([])
                    sides[side] = _boot_diff(a, b, rng, n_boot) if len(a) and len(b) else (np.nan, np.nan, np.nan)
                (sd, slo, shi), (pd_, plo, phi) = sides["sim"], sides["paper"]
                s_sign, p_sign = _sign(slo, shi), _sign(plo, phi)
                rows.append({"task": task, "versus": team, "measure": measure, "sim_diff": sd, "sim_lo": slo,
                             "sim_hi": shi, "paper_diff": pd_, "paper_lo": plo, "paper_hi": phi,
                             "clear": bool(p_sign), "verdict": _verdict(p_sign, s_sign),
                             "same_sign": bool(np.isfinite(sd) and np.isfinite(pd_) and np.sign(sd) == np.sign(pd_))})
    return pd.DataFrame(rows)


def effect_counts(table: pd.DataFrame) -> dict[str, int]:
    """The paper's clear effects by verdict, and the point estimates of the same sign among all comparisons."""
    clear = table[table["clear"]]
    return {"comparisons": len(table), "clear": len(clear),
            "reproduced": int((clear["verdict"] == "reproduced").sum()),
            "no difference": int((clear["verdict"] == "no difference").sum()),
            "reversed": int((clear["verdict"] == "reversed").sum()),
            "same sign": int(table["same_sign"].sum())}


@dataclass
class SimValidation:
    """What :func:`validate_sim` found: per profile, the process moments against the published ones and the
    table of LATTE's effects against the paper's; and the fit's record."""

    moments: dict[str, pd.DataFrame]
    effects: dict[str, pd.DataFrame]
    fit: dict
    trials: pd.DataFrame

    def summary(self) -> pd.DataFrame:
        """Per profile: the loss on the process moments, the paper's clear effects by verdict, signs that agree."""
        rows = []
        for profile, table in self.effects.items():
            m = self.moments.get(profile)
            loss = float((m["z"] ** 2).fillna(MISSING_PENALTY).sum()) if m is not None else float("nan")
            rows.append({"profile": profile, "moment_loss": loss, **effect_counts(table)})
        return pd.DataFrame(rows).set_index("profile")

    def latte_process(self, profile: str) -> pd.DataFrame:
        """LATTE's process on each task under one profile, beside the published figures (:func:`latte_process`)."""
        return latte_process(self.trials[self.trials["profile"] == profile])

    def clear_effects(self, profile: str) -> pd.DataFrame:
        """The paper's clear effects with ours beside them, for one profile."""
        t = self.effects[profile]
        cols = ["task", "versus", "measure", "paper_diff", "paper_lo", "paper_hi", "sim_diff", "sim_lo", "sim_hi",
                "verdict"]
        return t[t["clear"]][cols].reset_index(drop=True)

    def __repr__(self) -> str:
        parts = ["Validation (LATTE against static, leader_worker, decentralized and the pipeline; per task; accuracy, "
                 "tokens, wall clock, rounds; the paper's clear effects are those whose published 95% interval "
                 "excludes zero):", self.summary().round(2).to_string()]
        for profile, m in self.moments.items():
            parts += [f"\nProcess moments, profile {profile!r} (simulated against published; z in published "
                      "scales):", m.round(2).to_string()]
        return "\n".join(parts)


PAPER_TEXT = {  # figures the paper states in its text only (A6.3), not in the published files
    "graph_r0": ("3.8 (pooled over tasks; A6.3)", 3.8),
    "lead_share": ("30.8% (pooled over tasks; A6.3)", 0.308),
}


def latte_process(trials: pd.DataFrame, published=None) -> pd.DataFrame:
    """LATTE's process on each task beside the published figures: rounds, the graph at round 0, nodes discovered
    after planning (final graph minus the seed), the share of execution rounds in which the Lead ran, overwrites.
    Published: rounds and overwrites from the trial rows per task; the seed graph and the Lead's share from the
    paper's text (pooled); nodes discovered from the trajectories (round 12 minus round 0, pooled)."""
    from latte_lab.analysis.loaders import load_published

    pub = published if published is not None else load_published()
    traj = pub.trajectories[pub.trajectories["team"] == "latte"].set_index("round")["mean"]
    grown = float(traj.get(12, np.nan) - traj.get(0, np.nan))
    rows = []
    for task in TASKS:
        ours = _cell(trials, task, "latte")
        theirs = _cell(pub.trials, task, "latte")
        final = ours["graph_size_final"].astype(float) if "graph_size_final" in ours else pd.Series(dtype=float)
        seed = ours["graph_size_initial"].astype(float) if "graph_size_initial" in ours else pd.Series(dtype=float)
        rows.append({"task": task, "trials": len(ours),
                     "rounds": ours["total_rounds"].mean(), "rounds (paper)": theirs["total_rounds"].mean(),
                     "graph at round 0": seed.mean(), "graph at round 0 (paper)": PAPER_TEXT["graph_r0"][1],
                     "discovered after planning": (final - seed).mean(),
                     "discovered (paper, rounds 0-12)": grown,
                     "Lead ran": ours["lead_active_fraction"].mean() if "lead_active_fraction" in ours else np.nan,
                     "Lead ran (paper)": PAPER_TEXT["lead_share"][1],
                     "overwrites": ours["cross_agent_overwrites"].mean(),
                     "overwrites (paper)": theirs["cross_agent_overwrites"].mean()})
    return pd.DataFrame(rows).set_index("task")


def _data_path(name: str) -> Path:
    return Path(str(resources.files("latte_lab.data").joinpath(name)))


def validate_sim(trials: pd.DataFrame | str | Path | None = None, published=None, *, n_boot: int = 2000) -> SimValidation:
    """The validation of the simulated model's profiles: for each profile in ``trials`` (its ``profile``
    column, or the model spec's profile), the process moments against the published ones and the effects table.
    ``trials`` defaults to the shipped study (``latte_lab/data/sim_validation.csv``, made by ``make
    validate-sim``); a path to such a CSV or a DataFrame of trial rows also works. Printing the result shows the
    summary and the moments; :meth:`SimValidation.clear_effects` lists the paper's clear effects."""
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
    out_m, out_e = {}, {}
    for profile, t in trials.groupby("profile", sort=True):
        out_m[profile] = moment_table(moments(t), pub_moments)
        out_e[profile] = effects_table(t, pub.trials, n_boot=n_boot)
    fit_path = _data_path(CALIBRATION_FILE)
    fit = json.loads(fit_path.read_text()) if fit_path.exists() else {}
    return SimValidation(out_m, out_e, fit, trials)


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
