"""latte_lab.analysis.inference gives scipy's and statsmodels' numbers: Mann-Whitney U (exact and normal paths,
ties, every alternative), the F distribution's tail, and OLS with HC3 errors and its Type II Wald tests."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from latte_lab.analysis import inference, loaders, stats

ALTERNATIVES = ("two-sided", "less", "greater")
# samples of small integers make ties common; floats make them rare
values = st.one_of(st.lists(st.integers(0, 6).map(float), min_size=1, max_size=14),
                   st.lists(st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False), min_size=1, max_size=14))


@settings(max_examples=300, deadline=None)
@given(values, values, st.sampled_from(ALTERNATIVES))
def test_mann_whitney_u_is_scipys(x, y, alternative):
    ours = inference.mann_whitney_u(x, y, alternative)
    ref = sps.mannwhitneyu(x, y, alternative=alternative)
    assert ours[0] == pytest.approx(float(ref.statistic), abs=1e-9)
    assert ours[1] == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(("n1", "n2"), [(1, 1), (3, 8), (8, 8), (2, 40), (8, 120), (9, 9)])
def test_exact_path_matches_scipy(n1, n2):
    """Distinct values split at random between the samples, so U takes many values: the exact path (a sample of
    at most 8 values) and, for 9 + 9, the normal approximation."""
    rng = np.random.default_rng(n1 * 1000 + n2)
    for _ in range(30):
        data = rng.permutation(n1 + n2).astype(float)
        x, y = data[:n1], data[n1:]
        for alternative in ALTERNATIVES:
            ours = inference.mann_whitney_u(x, y, alternative)
            ref = sps.mannwhitneyu(x, y, alternative=alternative)
            assert ours[0] == float(ref.statistic)
            assert ours[1] == pytest.approx(float(ref.pvalue), rel=1e-12, abs=1e-300), (n1, n2, alternative)


def test_exact_counts_are_the_orderings():
    counts = inference._mwu_counts(3, 4)
    assert sum(counts) == math.comb(7, 3) and counts == counts[::-1]  # symmetric about m n / 2
    assert counts[:4] == [1, 1, 2, 3]  # U = 0, 1, 2, 3: the partitions of U into at most 3 parts of at most 4


def test_every_value_tied_gives_p_one():
    for alternative in ALTERNATIVES:
        assert inference.mann_whitney_u([2.0] * 5, [2.0] * 12, alternative) == (30.0, 1.0)
        assert sps.mannwhitneyu([2.0] * 5, [2.0] * 12, alternative=alternative).pvalue == 1.0


def test_bad_input_says_what_is_wrong():
    with pytest.raises(ValueError, match="alternative"):
        inference.mann_whitney_u([1.0], [2.0], "two_sided")
    with pytest.raises(ValueError, match="non-empty"):
        inference.mann_whitney_u([], [2.0])
    with pytest.raises(ValueError, match="NaN"):
        inference.mann_whitney_u([1.0, math.nan], [2.0])
    frame = pd.DataFrame({"team": ["static", "metagpt", "static"], "y": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="'latte' is not a level of 'team'"):
        inference.treatment_design(frame, "y", ["team"], {"team": "latte"})


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 1e4), st.integers(1, 60), st.floats(0.5, 5000))
def test_f_sf_is_scipys(f, d1, d2):
    # the far tail included (down to 1e-300): f_sf is scipy's own fdtrc, not a hand-written series
    assert inference.f_sf(f, d1, d2) == pytest.approx(float(sps.f.sf(f, d1, d2)), rel=1e-12, abs=1e-300)


def test_f_sf_edges():
    assert inference.f_sf(0.0, 3, 10) == 1.0 and inference.f_sf(math.inf, 3, 10) == 0.0
    assert math.isnan(inference.f_sf(math.nan, 3, 10)) and math.isnan(inference.f_sf(1.0, 0, 10))
    assert inference.f_sf(300.0, 4, 223) == pytest.approx(float(sps.f.sf(300.0, 4, 223)), rel=1e-9)  # a tiny tail


def test_normal_quantile_and_tail():
    assert inference.norm_ppf(0.975) == pytest.approx(float(sps.norm.ppf(0.975)), rel=1e-15)
    for z in (-3.0, 0.0, 1.5, 9.0, 30.0):
        assert inference.norm_sf(z) == pytest.approx(float(sps.norm.sf(z)), rel=1e-13)


def _statsmodels(frame: pd.DataFrame, factors, reference: str | None):
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    terms = [f"C({f}, Treatment(reference='{reference}'))" if f == "team" and reference else f"C({f})"
             for f in factors]
    formula = "y ~ " + " + ".join(terms)
    fit = smf.ols(formula, data=frame).fit(cov_type="HC3")
    anova = anova_lm(smf.ols(formula, data=frame).fit(), typ=2, robust="hc3")
    return fit, anova


def _compare(frame: pd.DataFrame, factors, reference=None):
    design = inference.treatment_design(frame, "y", factors, {"team": reference} if reference else None)
    ours = inference.ols(design)
    fit, anova = _statsmodels(frame, factors, reference)
    names = [n.replace(f", Treatment(reference='{reference}')", "").replace("C(", "").replace(")", "")
             for n in fit.params.index]
    assert list(design.columns) == names
    np.testing.assert_allclose(ours.params, fit.params.to_numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.bse, fit.bse.to_numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.pvalues, fit.pvalues.to_numpy(), rtol=1e-8, atol=1e-300)
    low, high = ours.conf_int()
    np.testing.assert_allclose(np.c_[low, high], fit.conf_int().to_numpy(), rtol=1e-9, atol=1e-12)
    assert ours.nobs == int(fit.nobs) and ours.df_resid == fit.df_resid
    assert ours.rsquared == pytest.approx(fit.rsquared, rel=1e-9)
    for (factor, cols), (_, row) in zip(design.terms, anova.iloc[:-1].iterrows()):
        f, df, p = ours.wald_f(cols)
        assert (f, df) == (pytest.approx(row["F"], rel=1e-9), row["df"]), factor
        assert p == pytest.approx(row["PR(>F)"], rel=1e-8, abs=1e-300), factor


def _factor(rng, levels, n):
    """n values with every level at least 3 times, in random order."""
    return rng.permutation(np.r_[np.repeat(levels, 3), rng.choice(levels, n - 3 * len(levels))])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(20, 80), st.booleans())
def test_ols_hc3_and_type2_wald_tests_are_statsmodels(seed, n, with_reference):
    rng = np.random.default_rng(seed)
    teams = ["latte", "static", "metagpt", "decentralized"] if with_reference else ["static", "metagpt", "pipeline"]
    reference = {"team": "latte"} if with_reference else None
    while True:  # redrawn until the design has full rank and no trial has leverage near 1 (HC3 is noise there)
        frame = pd.DataFrame({"team": _factor(rng, teams, n), "task": _factor(rng, ["debug", "eda", "textproc"], n),
                              "model": _factor(rng, ["a/x", "b/y"], n)})
        frame["y"] = 0.0
        X = inference.treatment_design(frame, "y", ["team", "task", "model"], reference).X
        if np.linalg.matrix_rank(X) == X.shape[1] and (X * np.linalg.pinv(X).T).sum(axis=1).max() < 0.9:
            break
    frame["y"] = rng.gamma(2.0, 1.0, n) * (1 + (frame["team"] == "metagpt")) + 0.3 * (frame["task"] == "eda")
    _compare(frame, ["team", "task", "model"], "latte" if with_reference else None)


def test_cost_regression_on_the_published_data_is_statsmodels():
    trials = loaders.load_published().trials
    for metric in ("tokens", "wall"):
        nc = stats.normalised_costs(trials, metric)[["norm_cost", "team", "task", "model"]].dropna()
        _compare(nc.rename(columns={"norm_cost": "y"}), ["team", "task", "model"], stats.REFERENCE_TEAM)
        coefs, anova = stats.cost_regression(trials, metric)
        fit, ref = _statsmodels(nc.rename(columns={"norm_cost": "y"}), ["team", "task", "model"], "latte")
        np.testing.assert_allclose(anova["sum_sq"], ref["sum_sq"], rtol=1e-9)
        np.testing.assert_allclose(anova["df"], ref["df"])
        assert coefs.attrs["r2"] == pytest.approx(fit.rsquared, rel=1e-9)


def test_stats_5_1_matches_scipy_on_the_published_data():
    s = stats.stats_5_1(loaders.load_published().trials).dropna(subset=["p"])
    assert len(s) >= 8
    nc = {m: stats.normalised_costs(loaders.load_published().trials, m) for m in ("tokens", "wall")}
    row = s[(s["metric"] == "tokens") & (s["team"] == "metagpt")].iloc[0]
    costs = nc["tokens"]
    ref = sps.mannwhitneyu(costs.loc[costs["team"] == "latte", "norm_cost"],
                           costs.loc[costs["team"] == "metagpt", "norm_cost"], alternative="less")
    assert (row["u"], row["p"]) == (pytest.approx(ref.statistic), pytest.approx(ref.pvalue, rel=1e-9))


def test_ols_on_trials_that_all_score_the_same_has_no_r2_and_does_not_fail():
    """Two trials with the same outcome (a tiny runs folder given to latte-lab figures): R^2 is undefined
    (NaN), the fit itself stands."""
    design = inference.Design(y=np.array([3.0, 3.0]), X=np.array([[1.0, 0.0], [1.0, 1.0]]), columns=("Intercept", "x[T.b]"),
                              terms=(("x", slice(1, 2)),))
    fit = inference.ols(design)
    assert math.isnan(fit.rsquared) and np.allclose(fit.params, [3.0, 0.0])


@pytest.mark.parametrize(("successes", "n"), [(0, 5), (3, 7), (18, 20), (20, 20), (1, 1), (50, 120)])
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_wilson_interval_is_statsmodels_and_stays_within_0_and_1(successes, n, level):
    from statsmodels.stats.proportion import proportion_confint

    from latte_lab.analysis.inference import wilson_interval

    low, high = wilson_interval(successes, n, level)
    theirs = proportion_confint(successes, n, alpha=1 - level, method="wilson")
    assert (low, high) == pytest.approx(theirs, abs=1e-12) and 0.0 <= low <= successes / n <= high <= 1.0
