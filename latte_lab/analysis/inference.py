"""The few statistical tests latte_lab's analysis reports, in numpy (scipy only for the F tail).

Which path uses which library:

- ``latte-lab figures`` and the analysis functions (``stats_5_1``, ``section53``, ``robust_statistics``,
  ``cost_regression``) run this module: numpy, the standard library's normal distribution, and
  ``scipy.special.fdtrc`` for the F distribution's tail (:func:`f_sf`, a fifth of a second to import). They
  import neither ``scipy.stats`` nor statsmodels: that costs about a second of CPU, a third of the
  command's own work on the published data.
- Notebook ``03_reproduce_paper`` fits the same cost regression with statsmodels itself
  (``smf.ols(formula, data).fit(cov_type="HC3")``, its ``.summary()``, and
  ``anova_lm(..., typ=2, robust="hc3")``) beside :func:`~latte_lab.analysis.stats.cost_regression`, and
  asserts that the two agree.
- ``tests/analysis/test_analysis_inference.py`` checks every function here against ``scipy.stats`` and statsmodels
  on drawn samples (with a fixed hypothesis seed) and on the published data.

What each function reproduces:

- :func:`wilson_interval` is statsmodels' ``proportion_confint(successes, n, alpha, method="wilson")``: the
  interval of a share (a success rate) that stays within [0, 1] and keeps its coverage at small n and at
  shares near 0 or 1, where the normal approximation's ``p ± 1.96·sqrt(p(1-p)/n)`` runs past 1 or collapses
  to a point;
- :func:`mann_whitney_u` is ``scipy.stats.mannwhitneyu(x, y, alternative=...)`` with its defaults
  (``method="auto"``: the exact null distribution when a sample has at most 8 values and nothing is tied,
  else the normal approximation with the tie correction and the continuity correction);
- :func:`ols` with :meth:`OLSFit.wald_f` is statsmodels' ``ols(...).fit(cov_type="HC3")`` (normal-based
  p-values and intervals, as statsmodels uses for a robust covariance) and the Type II ANOVA of
  ``anova_lm(fit, typ=2, robust="hc3")`` (a Wald F test of each term's coefficients with the HC3
  covariance), and :func:`treatment_design` is patsy's treatment coding of ``C(factor)`` terms.

>>> u, p = mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], "less")
>>> u, round(p, 4)
(0.0, 0.05)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

EXACT_MAX_SIZE = 8  # scipy's "auto": the exact test when a sample has at most this many values and no ties
_NORMAL = NormalDist()


# --- a share ---------------------------------------------------------------------------------------

def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a share: ``successes`` of ``n`` trials, at ``level`` confidence.

    >>> [round(x, 3) for x in wilson_interval(18, 20)]
    [0.699, 0.972]
    >>> wilson_interval(20, 20)[1]
    1.0
    """
    if n <= 0:
        return (math.nan, math.nan)
    z = norm_ppf(1 - (1 - level) / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exactly 0 and 1 at the ends, not rounding's
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


# --- ranks and the normal distribution -------------------------------------------------------------

def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``x``, ties sharing their mean rank (scipy's ``rankdata(method="average")``)."""
    return _ranks_and_ties(x)[0]


def _ranks_and_ties(x) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`average_ranks` of ``x``, how many values share each distinct value), from one sort."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], len(xs)]  # one past each run of equal values
    ranks = np.empty(len(x))
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks, ends - starts


def norm_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z (accurate far into the tail)."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def norm_ppf(q: float) -> float:
    """The standard normal quantile of ``q``."""
    return _NORMAL.inv_cdf(q)


# --- Mann-Whitney U --------------------------------------------------------------------------------

def mann_whitney_u(x, y, alternative: str = "two-sided") -> tuple[float, float]:
    """(U of ``x``, p-value) of the Mann-Whitney U test, as ``scipy.stats.mannwhitneyu`` with its defaults.

    ``alternative``: ``"two-sided"``, ``"less"`` (``x`` tends to be smaller) or ``"greater"``. Raises
    ``ValueError`` for an empty sample, a NaN or another alternative (callers drop missing values first).

    >>> u, p = mann_whitney_u([1, 2, 2, 9], [3, 4, 5, 6, 7, 8, 10, 11, 12])  # a tie: the normal approximation
    >>> u, round(p, 4)
    (6.0, 0.0756)
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(f"alternative must be 'two-sided', 'less' or 'greater', not {alternative!r}")
    if not (len(x) and len(y)):
        raise ValueError("mann_whitney_u needs two non-empty samples")
    xy = np.concatenate([x, y])
    if np.isnan(xy).any():
        raise ValueError("mann_whitney_u: the samples contain NaN")
    n1, n2 = len(x), len(y)
    ranks, ties = _ranks_and_ties(xy)
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    u2 = n1 * n2 - u1
    if alternative == "greater":
        u, factor = u1, 1
    elif alternative == "less":
        u, factor = u2, 1
    else:
        u, factor = max(u1, u2), 2
    if (n1 > EXACT_MAX_SIZE and n2 > EXACT_MAX_SIZE) or (ties > 1).any():
        n = n1 + n2
        tie_term = float((ties.astype(float) ** 3 - ties).sum())
        s = math.sqrt(max(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))), 0.0))
        numerator = u - n1 * n2 / 2 - 0.5
        if s == 0.0:  # every value tied: the statistic sits at its mean
            p = 1.0 if numerator < 0 else (0.5 if numerator == 0 else 0.0)
        else:
            p = norm_sf(numerator / s)
    else:
        p = _mwu_exact_sf(round(u), n1, n2)
    return u1, min(max(p * factor, 0.0), 1.0)


def _mwu_exact_sf(u: int, n1: int, n2: int) -> float:
    """P(U >= u) under the null hypothesis, from the exact counts of the orderings of n1 + n2 values."""
    counts = _mwu_counts(min(n1, n2), max(n1, n2))
    return sum(counts[u:]) / math.comb(n1 + n2, n1)


def _mwu_counts(m: int, n: int) -> list[int]:
    """How many of the C(m+n, m) orderings give U = 0, 1, ..., m n: the coefficients of the Gaussian
    binomial [m+n, m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), in integers (exact)."""
    size = m * n + 1
    c = [0] * size
    c[0] = 1
    for i in range(1, m + 1):
        k = n + i
        for d in range(size - 1, k - 1, -1):  # times (1 - q^k); terms above m n are never needed
            c[d] -= c[d - k]
        for d in range(i, size):  # divided by (1 - q^i)
            c[d] += c[d - i]
    return c


# --- the F distribution ----------------------------------------------------------------------------

def f_sf(f: float, d1: float, d2: float) -> float:
    """P(F > f) for an F(d1, d2) variable: ``scipy.special.fdtrc`` (Cephes' incomplete beta, accurate far into
    the tail; imported here, a fifth of a second, rather than all of ``scipy.stats``).

    >>> round(f_sf(3.0, 1, 10), 6)
    0.113937
    """
    if math.isnan(f) or d1 <= 0 or d2 <= 0:
        return math.nan
    if f <= 0:
        return 1.0
    if math.isinf(f):
        return 0.0
    from scipy.special import fdtrc

    return float(fdtrc(d1, d2, f))


# --- OLS with HC3 errors ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Design:
    """A design matrix with an intercept and treatment-coded factors, as patsy builds ``y ~ C(a) + C(b)``."""

    y: np.ndarray
    X: np.ndarray
    columns: tuple[str, ...]  # "Intercept", then "factor[T.level]" per level but the reference
    terms: tuple[tuple[str, slice], ...]  # (factor, its columns), in the formula's order


def treatment_design(frame, response: str, factors, references=None) -> Design:
    """``response ~ C(f1) + C(f2) + ...`` with patsy's treatment coding: an intercept, then per factor a 0/1
    column for every level but the reference, levels sorted; the reference is ``references[f]`` when given
    (``Treatment(reference=...)``), else the first level."""
    references = references or {}
    n = len(frame)
    cols, names, terms = [np.ones(n)], ["Intercept"], []
    for f in factors:
        values = frame[f].to_numpy()
        levels = sorted(set(values.tolist()))
        ref = references.get(f, levels[0])
        if ref not in levels:  # no column would be left out: the design would be collinear with the intercept
            raise ValueError(f"treatment_design: the reference {ref!r} is not a level of {f!r} ({levels})")
        start = len(cols)
        for level in levels:
            if level != ref:
                cols.append((values == level).astype(float))
                names.append(f"{f}[T.{level}]")
        terms.append((f, slice(start, len(cols))))
    y = frame[response].to_numpy(dtype=float)
    return Design(y, np.column_stack(cols), tuple(names), tuple(terms))


@dataclass(frozen=True)
class OLSFit:
    params: np.ndarray
    cov_hc3: np.ndarray
    nobs: int
    df_resid: float
    ssr: float
    rsquared: float

    @property
    def bse(self) -> np.ndarray:
        """HC3 standard errors."""
        return np.sqrt(np.diag(self.cov_hc3))

    @property
    def pvalues(self) -> np.ndarray:
        """Two-sided normal p-values of the coefficients (statsmodels' for a robust covariance)."""
        return np.array([2.0 * norm_sf(abs(z)) for z in self.params / self.bse])  # NaN stays NaN

    def conf_int(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        q = norm_ppf(0.5 + level / 2.0)
        return self.params - q * self.bse, self.params + q * self.bse

    def wald_f(self, columns: slice) -> tuple[float, int, float]:
        """(F, restrictions, p) of the hypothesis that the coefficients of ``columns`` are all 0, with the HC3
        covariance (statsmodels' ``f_test(L, cov_p=cov_HC3)``; ``anova_lm(typ=2, robust="hc3")`` for a term
        that no other term contains)."""
        idx = np.arange(len(self.params))[columns]
        rb = self.params[idx]
        cov = self.cov_hc3[np.ix_(idx, idx)]
        rank = int(np.linalg.matrix_rank(cov))
        f = float(rb @ np.linalg.pinv(cov) @ rb) / rank if rank else math.nan
        return f, len(idx), f_sf(f, rank, self.df_resid)


def ols(design: Design) -> OLSFit:
    """Least squares of ``design.y`` on ``design.X`` (minimum-norm through the pseudo-inverse, as statsmodels),
    with the HC3 covariance: (X'X)^-1 X' diag(e_i^2 / (1 - h_i)^2) X (X'X)^-1."""
    X, y = design.X, design.y
    pinv = np.linalg.pinv(X)
    params = pinv @ y
    resid = y - X @ params
    leverage = (X * pinv.T).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a trial alone in its level (leverage 1): infinite
        scale = (resid / (1.0 - leverage)) ** 2
    cov = pinv @ (scale[:, None] * pinv.T)
    ssr = float(resid @ resid)
    centered = y - y.mean()
    df_resid = float(len(y) - np.linalg.matrix_rank(X))
    total = float(centered @ centered)
    r2 = 1.0 - ssr / total if total > 0 else float("nan")  # every trial the same: nothing to explain
    return OLSFit(params, cov, len(y), df_resid, ssr, r2)
