"""Table 2, the §5.1 and §5.3 statistics, and the statistics the paper lacks.

Every function takes a ``trials`` frame in the schema of ``latte_lab.schema`` (published or
ours) and returns a DataFrame. The constructions follow the released analysis exactly (reference §10):

- Table 2: accuracy per the task's rule over trials with an accuracy; tokens and wall clock over all
  trials that have them (not only successful ones); per model and pooled; the aggregate pools the
  per-trial values of all tasks; mean ± SEM (ddof=1).
- §5.1 normalised costs: per task, the mean cost of the *successful* trials of all teams is 100 %;
  a team's value is the mean over its successful trials (tasks and models pooled) of cost / normaliser;
  one-sided Mann-Whitney U: LATTE less costly (``alternative='less'``), LATTE more accurate on
  per-trial accuracy (``'greater'``).
- §5.3: per-trial coordination metrics over all trials having them; one-sided Mann-Whitney (LATTE less).
- Figure 2's numbers: :func:`expected_cost_per_success` (2A) and :func:`pareto_points` (2B), which
  :mod:`latte_lab.viz.figures` draws.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from latte_lab import schema
from latte_lab.analysis import inference
from latte_lab.errors import DataError

REFERENCE_TEAM = "latte"  # every test compares a baseline against LATTE
BOOTSTRAP_RESAMPLES = 2000  # enough for stable 95 % percentile intervals at 2-3 digits
BOOTSTRAP_SEED = 0  # intervals are reproducible run to run

COST_FIELDS = {"tokens": "total_tokens", "wall": "wall_clock_seconds"}
"""§5.1 cost metrics and their trial columns."""

SECTION53_METRICS = (
    "cross_agent_overwrites",
    "n_concurrent_collisions",
    "wasted_chars",
    "total_messages",
    "total_message_chars",
    "active_fraction_released",
    "node_completion_mean_s",
    "node_completion_p95_s",
    "function_overwrites",
    "function_concurrent_writes",
    "discarded_chars",
)
"""§5.3 metrics (the last five exist only for our own trials); active_fraction_released = 1 - idle."""


def usable(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials that finished (status ok); crashed trials have no published row either."""
    if "status" in trials.columns:
        trials = trials[trials["status"].fillna("ok") == "ok"]
    return trials


def sem(values) -> float:
    """Standard error of the mean with ddof=1 (NaN for fewer than 2 values)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


def _summary(values) -> tuple[int, float, float]:
    x = pd.to_numeric(pd.Series(values), errors="coerce").dropna().to_numpy(dtype=float)
    return len(x), (float(x.mean()) if len(x) else math.nan), sem(x)


def _is(column: pd.Series, value) -> np.ndarray:
    return column.eq(value).to_numpy(dtype=bool, na_value=False)


def _numeric(column: pd.Series) -> np.ndarray:
    """A column as floats, NaN where it is missing or not a number (as :func:`_summary` reads values)."""
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _summary_of(x: np.ndarray) -> tuple[int, float, float]:
    """:func:`_summary` of values already converted by :func:`_numeric`."""
    x = x[~np.isnan(x)]
    return len(x), (float(x.mean()) if len(x) else math.nan), sem(x)


def _mwu(a, b, alternative: str) -> tuple[float, float]:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) == 0 or len(b) == 0:
        return math.nan, math.nan
    return inference.mann_whitney_u(a, b, alternative)


def rank_biserial(a, b) -> float:
    """Rank-biserial correlation r = 2U/(n_a n_b) - 1 for a vs b (positive: a tends to be larger), with U
    the Mann-Whitney statistic of ``a`` (ties count one half)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    na, nb = len(a), len(b)
    if not (na and nb):
        return math.nan
    u = inference.average_ranks(np.concatenate([a, b]))[:na].sum() - na * (na + 1) / 2.0
    return 2.0 * u / (na * nb) - 1.0


def bootstrap_ci(values, stat=np.mean, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                 level: float = 0.95) -> tuple[float, float]:
    """Seeded percentile bootstrap interval of ``stat``."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_resamples, len(x)))
    stats = stat(x[idx], axis=1)
    lo, hi = np.percentile(stats, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


# --- Table 2 ---------------------------------------------------------------------------------------

def table2(trials: pd.DataFrame) -> pd.DataFrame:
    """Table 2 in the fixed table2.csv form: one row per model x task x team (model/task 'all' = pooled).

    Columns model, task, team, n_acc, acc_mean, acc_sem, n_tokens, tokens_mean, tokens_sem, n_wall,
    wall_mean, wall_sem (accuracy 0-1, tokens in counts, wall clock in seconds).
    """
    schema.require_columns(trials, ("model", "task", "team", "accuracy", "total_tokens", "wall_clock_seconds"))
    t = usable(trials)
    rows = []
    models = sorted(t["model"].dropna().unique()) + [schema.ALL]
    tasks = schema.ordered(t["task"].dropna().unique(), schema.TASK_ORDER) + [schema.ALL]
    teams = schema.ordered(t["team"].dropna().unique(), schema.TEAM_ORDER)
    # every cell is a row mask over whole columns converted once (the same values, in the same order, as
    # filtering the frame cell by cell, which took most of the table's time)
    everyone = np.ones(len(t), dtype=bool)
    model_is = {m: everyone if m == schema.ALL else _is(t["model"], m) for m in models}
    task_is = {k: everyone if k == schema.ALL else _is(t["task"], k) for k in tasks}
    team_is = {k: _is(t["team"], k) for k in teams}
    acc, tokens, wall = (_numeric(t[c]) for c in ("accuracy", "total_tokens", "wall_clock_seconds"))
    for model in models:
        for task in tasks:
            in_task = model_is[model] & task_is[task]
            for team in teams:
                cell = in_task & team_is[team]
                n_a, a_m, a_s = _summary_of(acc[cell])
                n_t, t_m, t_s = _summary_of(tokens[cell])
                n_w, w_m, w_s = _summary_of(wall[cell])
                if n_a + n_t + n_w == 0:
                    continue
                rows.append({"model": model, "task": task, "team": team, "n_acc": n_a, "acc_mean": a_m,
                             "acc_sem": a_s, "n_tokens": n_t, "tokens_mean": t_m, "tokens_sem": t_s,
                             "n_wall": n_w, "wall_mean": w_m, "wall_sem": w_s})
    return pd.DataFrame(rows, columns=["model", "task", "team", "n_acc", "acc_mean", "acc_sem", "n_tokens",
                                       "tokens_mean", "tokens_sem", "n_wall", "wall_mean", "wall_sem"])


def format_table2(table: pd.DataFrame, model: str = schema.ALL) -> pd.DataFrame:
    """The paper's layout of one model block: rows (metric, task), columns teams, cells 'mean ± SEM'
    (accuracy integer %, tokens integer K, wall clock minutes with 1 decimal)."""
    t = table[table["model"] == model]
    specs = (("Acc. (%)", "acc", 100.0, "{:.0f} ± {:.0f}"), ("Tokens (K)", "tokens", 1e-3, "{:.0f} ± {:.0f}"),
             ("Wall-clock (m)", "wall", 1 / 60, "{:.1f} ± {:.1f}"))
    teams = schema.ordered(t["team"].unique(), schema.TEAM_ORDER)
    tasks = [schema.ALL] + [x for x in schema.ordered(t["task"].unique(), schema.TASK_ORDER) if x != schema.ALL]
    cells: dict = {}  # (task, team) -> the first such row of the block
    for r in t.to_dict("records"):
        cells.setdefault((r["task"], r["team"]), r)
    rows = []
    for label, key, scale, fmt in specs:
        for task in tasks:
            row = {"metric": label, "task": task}  # task ids, as everywhere (ll.analysis.task_names maps them)
            for team in teams:
                cell = cells.get((task, team))
                if cell is None or pd.isna(cell[f"{key}_mean"]):
                    row[schema.TEAM_LABELS.get(team, team)] = ""
                    continue
                m, s = cell[f"{key}_mean"] * scale, cell[f"{key}_sem"] * scale
                row[schema.TEAM_LABELS.get(team, team)] = fmt.format(m, 0.0 if pd.isna(s) else s)
            rows.append(row)
    return pd.DataFrame(rows)


# --- §5.1 ------------------------------------------------------------------------------------------

def normalised_costs(trials: pd.DataFrame, metric: str = "tokens") -> pd.DataFrame:
    """Successful trials with their cost as a fraction of the task's mean successful-trial cost.

    Returns the trial rows (team, task, model, ...) with a ``norm_cost`` column.
    """
    col = COST_FIELDS.get(metric)
    if col is None:
        raise DataError(f"unknown cost metric {metric!r}; use one of {sorted(COST_FIELDS)}")
    schema.require_columns(trials, ("task", "team", "success", col))
    t = usable(trials)
    t = t[t["success"].fillna(False).astype(bool) & t[col].notna()].copy()
    norm = t.groupby("task")[col].transform("mean")
    t["norm_cost"] = t[col] / norm
    return t


def _against_reference(groups: dict, alternative: str, metric: str, tests: bool = True) -> list[dict]:
    ref = groups.get(REFERENCE_TEAM)
    rows = []
    for team in schema.ordered(groups, schema.TEAM_ORDER):
        vals = groups[team]
        n, mean, s = _summary(vals)
        u = p = math.nan
        if tests and team != REFERENCE_TEAM and ref is not None:
            u, p = _mwu(ref, vals, alternative)
        rows.append({"metric": metric, "team": team, "n": n, "mean": mean, "sem": s, "u": u, "p": p})
    return rows


def stats_5_1(trials: pd.DataFrame, tests: bool = True) -> pd.DataFrame:
    """§5.1: normalised pooled tokens and wall clock (successful trials) and accuracy (all trials with
    one), each with the one-sided Mann-Whitney U test against LATTE.

    Columns metric (tokens, wall, accuracy), team, n, mean, sem, u, p (u and p NaN for LATTE, and for
    every team with ``tests=False``, which needs no scipy: the means and SEMs alone).
    """
    rows = []
    for metric in ("tokens", "wall"):
        nc = normalised_costs(trials, metric)
        groups = {team: g["norm_cost"].to_numpy() for team, g in nc.groupby("team")}
        rows += _against_reference(groups, "less", metric, tests)
    t = usable(trials)
    acc = t[t["accuracy"].notna()]
    groups = {team: g["accuracy"].to_numpy(dtype=float) for team, g in acc.groupby("team")}
    rows += _against_reference(groups, "greater", "accuracy", tests)
    return pd.DataFrame(rows, columns=["metric", "team", "n", "mean", "sem", "u", "p"])


# --- §5.3 ------------------------------------------------------------------------------------------

def coordination_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials with released event metrics (the §5.3 / Figure 4 sample), plus active_fraction_released."""
    t = usable(trials)
    if "cross_agent_overwrites" in t.columns:
        t = t[t["cross_agent_overwrites"].notna()]
    t = t.copy()
    t["active_fraction_released"] = 1.0 - pd.to_numeric(t["idle_fraction"], errors="coerce")
    return t


def section53(trials: pd.DataFrame) -> pd.DataFrame:
    """§5.3 coordination numbers: per metric and team n, mean, SEM and the one-sided Mann-Whitney U
    (LATTE less) against LATTE; metrics with no values (e.g. node times in published data) are left out."""
    schema.require_columns(trials, ("team", "idle_fraction"))
    t = coordination_trials(trials)
    rows = []
    for metric in SECTION53_METRICS:
        if metric not in t.columns:
            continue
        vals = t[["team", metric]].dropna()
        if vals.empty:
            continue
        groups = {team: pd.to_numeric(g[metric]).to_numpy(dtype=float) for team, g in vals.groupby("team")}
        rows += _against_reference(groups, "less", metric)
    return pd.DataFrame(rows, columns=["metric", "team", "n", "mean", "sem", "u", "p"])


# --- beyond the paper ------------------------------------------------------------------------------

def _holm(p: pd.Series) -> pd.Series:
    """Holm step-down adjusted p-values (as statsmodels' ``multipletests(method="holm")``, which also runs a
    full garbage collection on every call); NaN stays NaN and is not counted as a test."""
    out = pd.Series(np.nan, index=p.index)
    ok = p.notna().to_numpy()
    if ok.any():
        raw = p.to_numpy(dtype=float)[ok]
        order = np.argsort(raw, kind="mergesort")
        stepped = np.maximum.accumulate(raw[order] * np.arange(len(raw), 0, -1))
        adjusted = np.empty(len(raw))
        adjusted[order] = np.minimum(stepped, 1.0)
        out[ok] = adjusted
    return out


def robust_statistics(trials: pd.DataFrame, s51: pd.DataFrame | None = None,
                      s53: pd.DataFrame | None = None) -> pd.DataFrame:
    """The §5.1 and §5.3 comparisons with what the paper lacks: Holm-corrected p-values (within each
    family: §5.1, §5.3), seeded bootstrap 95 % CIs of each mean, and rank-biserial effect sizes
    (r > 0: LATTE lower for costs and coordination metrics, higher for accuracy).

    ``s51`` and ``s53``: :func:`stats_5_1` and :func:`section53` of the same ``trials`` when the caller
    has them already (they are computed otherwise)."""
    frames = []
    s51 = stats_5_1(trials) if s51 is None else s51
    s53 = section53(trials) if s53 is None else s53
    for family, table, values in (("5.1", s51, _values_5_1(trials)), ("5.3", s53, _values_53(trials))):
        if table.empty:
            continue
        table = table.copy()
        table.insert(0, "family", family)
        lo, hi, eff = [], [], []
        for _, r in table.iterrows():
            vals = values[r["metric"]].get(r["team"], np.array([]))
            a, b = bootstrap_ci(vals)
            lo.append(a)
            hi.append(b)
            ref = values[r["metric"]].get(REFERENCE_TEAM)
            if r["team"] == REFERENCE_TEAM or ref is None:
                eff.append(math.nan)
            else:
                higher_is_better = r["metric"] == "accuracy"
                rb = rank_biserial(ref, vals)
                eff.append(rb if higher_is_better else -rb)
        table["ci_low"], table["ci_high"], table["rank_biserial"] = lo, hi, eff
        table["p_holm"] = _holm(table["p"])
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _values_5_1(trials) -> dict:
    out = {}
    for metric in ("tokens", "wall"):
        nc = normalised_costs(trials, metric)
        out[metric] = {team: g["norm_cost"].to_numpy() for team, g in nc.groupby("team")}
    t = usable(trials)
    acc = t[t["accuracy"].notna()]
    out["accuracy"] = {team: g["accuracy"].to_numpy(dtype=float) for team, g in acc.groupby("team")}
    return out


def _values_53(trials) -> dict:
    t = coordination_trials(trials)
    out = {}
    for metric in SECTION53_METRICS:
        if metric in t.columns:
            vals = t[["team", metric]].dropna()
            out[metric] = {team: pd.to_numeric(g[metric]).to_numpy(dtype=float)
                           for team, g in vals.groupby("team")}
    return out


def cost_regression(trials: pd.DataFrame, metric: str = "tokens"):
    """Normalised cost ~ team + task + model (successful trials), OLS with HC3 errors.

    Why: cells are unbalanced (16-20 trials, MetaGPT missing models on some tasks), so the pooled
    Mann-Whitney mixes task and model composition into the team contrast. An additive OLS with LATTE
    as the baseline level adjusts for task and model; HC3 standard errors tolerate the very unequal
    variances of teams (MetaGPT's costs vary far more); Type II sums of squares test each factor after
    the others regardless of order, which is the sensible choice for unbalanced data without
    interactions. Returns (coefficients DataFrame, Type II ANOVA DataFrame with HC3), the numbers of
    statsmodels' ``ols(...).fit(cov_type="HC3")`` and ``anova_lm(typ=2, robust="hc3")`` (computed by
    :mod:`latte_lab.analysis.inference`).
    """
    nc = normalised_costs(trials, metric)
    nc = nc[["norm_cost", "team", "task", "model"]].dropna()
    if nc["team"].nunique() < 2:
        raise DataError("cost_regression needs successful trials of at least two teams")
    factors = ["team"] + [c for c in ("task", "model") if nc[c].nunique() > 1]
    refs = {"team": REFERENCE_TEAM} if REFERENCE_TEAM in set(nc["team"]) else {}
    design = inference.treatment_design(nc, "norm_cost", factors, refs)
    fit = inference.ols(design)
    low, high = fit.conf_int()
    coefs = pd.DataFrame({"coef": fit.params, "se_hc3": fit.bse, "p": fit.pvalues, "ci_low": low, "ci_high": high},
                         index=pd.Index(design.columns, name="term"))
    coefs.attrs["n"] = fit.nobs
    coefs.attrs["r2"] = fit.rsquared
    rows = []
    for factor, cols in design.terms:
        f, df, p = fit.wald_f(cols)
        rows.append((factor, f * df * fit.ssr / fit.df_resid, float(df), f, p))
    rows.append(("Residual", fit.ssr, fit.df_resid, math.nan, math.nan))
    anova = pd.DataFrame(rows, columns=["term", "sum_sq", "df", "F", "PR(>F)"])
    return coefs.reset_index(), anova


# --- the numbers behind Figure 2 ------------------------------------------------------------------

def expected_cost_per_success(trials: pd.DataFrame) -> pd.DataFrame:
    """Figure 2A numbers: per model, team and cost metric, the mean cost of successful trials with a
    positive cost divided by the pass rate (fraction of the model x team trials with public success,
    tasks pooled); the error is the SEM of those costs divided by the pass rate."""
    schema.require_columns(trials, ("model", "team", "success", "total_tokens", "wall_clock_seconds"))
    t = usable(trials)
    rows = []
    for (model, team), g in t.groupby(["model", "team"]):
        ok = g["success"].fillna(False).astype(bool)
        rate = float(ok.mean()) if len(g) else 0.0
        for metric, col in COST_FIELDS.items():
            vals = pd.to_numeric(g.loc[ok, col], errors="coerce")
            vals = vals[vals > 0]
            value = err = math.nan
            if rate > 0 and len(vals):
                value = float(vals.mean()) / rate
                err = sem(vals) / rate
            rows.append({"model": model, "team": team, "metric": metric, "pass_rate": rate,
                         "n_success": len(vals), "expected_cost": value, "err": err})
    return pd.DataFrame(rows, columns=["model", "team", "metric", "pass_rate", "n_success",
                                       "expected_cost", "err"])


def pareto_points(trials: pd.DataFrame, s51: pd.DataFrame | None = None) -> pd.DataFrame:
    """Figure 2B numbers: per team the normalised token cost (successful trials) and accuracy (all
    trials) with SEMs, and whether the team is on the Pareto frontier (no other team is at least as
    cheap and as accurate and strictly better in one). ``s51``: ``stats_5_1(trials)`` if already computed."""
    s = stats_5_1(trials, tests=False) if s51 is None else s51  # means and SEMs; no p-values needed
    cost = s[s["metric"] == "tokens"].set_index("team")
    acc = s[s["metric"] == "accuracy"].set_index("team")
    teams = [t for t in schema.ordered(cost.index, schema.TEAM_ORDER) if t in acc.index]
    pts = pd.DataFrame({"team": teams, "cost": [float(cost.loc[t, "mean"]) for t in teams],
                        "cost_sem": [cost.loc[t, "sem"] for t in teams],
                        "accuracy": [acc.loc[t, "mean"] for t in teams],
                        "accuracy_sem": [acc.loc[t, "sem"] for t in teams]},
                       columns=["team", "cost", "cost_sem", "accuracy", "accuracy_sem"])
    on = []
    for _, p in pts.iterrows():
        dominated = ((pts["cost"] <= p["cost"]) & (pts["accuracy"] >= p["accuracy"])
                     & ((pts["cost"] < p["cost"]) | (pts["accuracy"] > p["accuracy"]))).any()
        on.append(not dominated)
    pts["on_frontier"] = on
    return pts
