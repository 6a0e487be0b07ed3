"""The eda task's reference solution, computed from the shipped table.

Every number in ``findings.json`` and ``summary.txt`` is computed here from ``employee_data.csv``
(deterministic: same CSV, same text), with placeholder values (``missing_values``: semantic column ->
placeholder) treated as missing.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd

from latte_lab.tasks.eda.generator import CATEGORICAL_FEATURES, DEPARTMENTS, NUMERIC_FEATURES, TARGET

TIER_SPLIT = 65_000  # salary threshold between the two tiers (the trough of the histogram)
SAT_LOW, SAT_HIGH = 4.0, 7.0  # satisfaction bands compared in the findings
IQR_FENCE = 1.5  # Tukey's outlier fence


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _config_text(mapping: dict[str, str], missing_values: dict[str, float], target: str = TARGET) -> str:
    lines = [
        '"""Shared schema for employee_data.csv: opaque column name -> semantic name."""',
        "",
        "COLUMN_MAP = {",
        *[f'    "{k}": "{v}",' for k, v in sorted(mapping.items())],
        "}",
        f'TARGET = "{target}"',
        f"NUMERIC_FEATURES = {list(NUMERIC_FEATURES)!r}",
        f"CATEGORICAL_FEATURES = {list(CATEGORICAL_FEATURES)!r}",
        'ID_COLUMN = "emp_id"',
        f"MISSING_VALUES = {{{', '.join(f'{k!r}: {v:g}' for k, v in sorted(missing_values.items()))}}}",
        "",
    ]
    return "\n".join(lines).replace("'", '"')


def compute_stats(csv_text: str, mapping: dict[str, str], missing_values: dict[str, float]) -> dict:
    """The figures the findings quote, from the opaque table, the true mapping and the placeholders."""
    df = pd.read_csv(io.StringIO(csv_text)).rename(columns=mapping)
    inverse = {v: k for k, v in mapping.items()}
    placeholders = {col: int((df[col] == value).sum()) for col, value in missing_values.items()}
    for col, value in missing_values.items():
        df[col] = df[col].where(df[col] != value)
    low_tier = df["salary"] < TIER_SPLIT
    sat_low, sat_high = df["satisfaction"] < SAT_LOW, df["satisfaction"] >= SAT_HIGH
    hist, edges = np.histogram(df["salary"], bins=12)
    corr = {c: float(df[c].corr(df[TARGET])) for c in NUMERIC_FEATURES}  # pairwise: missing rows skipped
    by_dept = df.groupby("dept")[TARGET].mean()
    return {
        "opaque": inverse,
        "n": len(df),
        "cells": int(df.size),
        "missing": int(df.isna().sum().sum()),
        "placeholders": placeholders,
        "placeholder_values": dict(missing_values),
        "churn_rate": float(df[TARGET].mean()),
        "low_tier_share": float(low_tier.mean()),
        "low_tier_mean": float(df.loc[low_tier, "salary"].mean()),
        "high_tier_mean": float(df.loc[~low_tier, "salary"].mean()),
        "trough_bin": (float(edges[int(np.argmin(hist[3:9])) + 3]), float(edges[int(np.argmin(hist[3:9])) + 4])),
        "low_tier_churn": float(df.loc[low_tier, TARGET].mean()),
        "high_tier_churn": float(df.loc[~low_tier, TARGET].mean()),
        "sat_mean": float(df["satisfaction"].mean()),
        "sat_min": float(df["satisfaction"].min()),
        "sat_max": float(df["satisfaction"].max()),
        "sat_low_churn": float(df.loc[sat_low, TARGET].mean()),
        "sat_high_churn": float(df.loc[sat_high, TARGET].mean()),
        "corr": corr,
        "tenure_mean": float(df["tenure_months"].mean()),
        "tenure_median": float(df["tenure_months"].median()),
        "iqr_outliers": {col: _iqr_outliers(df[col]) for col in NUMERIC_FEATURES},
        "hours_at_bounds": int(((df["weekly_hours"] <= 30.0) | (df["weekly_hours"] >= 70.0)).sum()),
        "dept_churn": {d: float(by_dept[d]) for d in DEPARTMENTS},
        "dept_counts": {d: int((df["dept"] == d).sum()) for d in DEPARTMENTS},
    }


def _iqr_outliers(values: pd.Series) -> int:
    q1, q3 = values.quantile([0.25, 0.75])
    spread = IQR_FENCE * (q3 - q1)
    return int(((values < q1 - spread) | (values > q3 + spread)).sum())


def _entry(finding: str, evidence: str) -> dict[str, str]:
    return {"finding": finding, "supporting_evidence": evidence}


def findings(s: dict) -> dict[str, list[dict[str, str]]]:
    o = s["opaque"]
    dept_rates = ", ".join(f"{d} {_pct(s['dept_churn'][d])}" for d in sorted(s["dept_churn"], key=s["dept_churn"].get, reverse=True))
    top = max(s["dept_churn"], key=s["dept_churn"].get)
    bottom = min(s["dept_churn"], key=s["dept_churn"].get)
    c = s["corr"]
    return {
        "distributions": [
            _entry(
                f"Salary ({o['salary']}) is bimodal: two pay tiers with a trough between them.",
                f"{_pct(s['low_tier_share'])} of employees earn below {TIER_SPLIT:,} (tier mean "
                f"{s['low_tier_mean']:,.0f}); the rest average {s['high_tier_mean']:,.0f}; the histogram's "
                f"emptiest bin is {s['trough_bin'][0]:,.0f}-{s['trough_bin'][1]:,.0f}.",
            ),
            _entry(
                f"Satisfaction ({o['satisfaction']}) is spread evenly over its 1-10 scale.",
                f"mean {s['sat_mean']:.2f}, range {s['sat_min']:.1f}-{s['sat_max']:.1f}.",
            ),
            _entry(
                f"Tenure ({o['tenure_months']}) is right-skewed.",
                f"mean {s['tenure_mean']:.1f} months vs median {s['tenure_median']:.1f} months.",
            ),
        ],
        "relationships": [
            _entry(
                f"Satisfaction ({o['satisfaction']}) is the dominant churn driver, with a negative "
                "relationship: lower satisfaction goes with higher churn.",
                f"correlation with churned ({o['churned']}) r = {c['satisfaction']:.3f}, the largest in "
                f"magnitude of all features; churn rate {_pct(s['sat_low_churn'])} for satisfaction below "
                f"{SAT_LOW:g} vs {_pct(s['sat_high_churn'])} for {SAT_HIGH:g} and above.",
            ),
            _entry(
                f"Salary ({o['salary']}) has a weaker negative relationship with churn.",
                f"r = {c['salary']:.3f}; tenure r = {c['tenure_months']:.3f}, weekly hours r = "
                f"{c['weekly_hours']:.3f}, projects r = {c['n_projects']:.3f}.",
            ),
        ],
        "subgroup_effects": [
            _entry(
                f"Churn differs by department ({o['dept']}): {top} has the highest churn rate and "
                f"{bottom} the lowest.",
                f"churn rate by department: {dept_rates}.",
            ),
            _entry(
                "The low salary tier churns more than the high tier.",
                f"churn {_pct(s['low_tier_churn'])} below {TIER_SPLIT:,} vs {_pct(s['high_tier_churn'])} above.",
            ),
        ],
        "outliers": [
            _entry(
                "Outliers are rare under the 1.5 x IQR rule; weekly hours is the only column with any.",
                "IQR outliers per column: "
                + ", ".join(f"{col} ({o[col]}) {n}" for col, n in s["iqr_outliers"].items())
                + ".",
            ),
            _entry(
                f"Weekly hours ({o['weekly_hours']}) are capped at 30 and 70.",
                f"{s['hours_at_bounds']} rows sit exactly at a bound.",
            ),
        ],
        "missing_data": [
            _entry(
                f"{col.capitalize()} ({o[col]}) holds the placeholder {s['placeholder_values'][col]:g} for "
                "unanswered surveys, outside its scale: these rows are missing values and are left out of "
                f"every {col} figure.",
                f"{n} of {s['n']} rows ({_pct(n / s['n'])}) hold {s['placeholder_values'][col]:g}; no other "
                "column has missing or placeholder values (0 empty cells).",
            )
            for col, n in s["placeholders"].items()
        ],
    }


def summary(s: dict) -> str:
    o = s["opaque"]
    top = max(s["dept_churn"], key=s["dept_churn"].get)
    bottom = min(s["dept_churn"], key=s["dept_churn"].get)
    return (
        f"We analysed {s['n']} employee records with eight opaque columns and identified the target: "
        f"{o['churned']} is churned, a binary flag with an overall churn rate of {_pct(s['churn_rate'])}. "
        f"Satisfaction ({o['satisfaction']}) is the dominant churn driver: the relationship is negative "
        f"(r = {s['corr']['satisfaction']:.3f}), and employees with low satisfaction churn far more often "
        f"({_pct(s['sat_low_churn'])} below {SAT_LOW:g} against {_pct(s['sat_high_churn'])} at {SAT_HIGH:g} "
        f"or above). The salary distribution ({o['salary']}) is bimodal, with two tiers around "
        f"{s['low_tier_mean']:,.0f} and {s['high_tier_mean']:,.0f}; the low tier churns at "
        f"{_pct(s['low_tier_churn'])} compared with {_pct(s['high_tier_churn'])} in the high tier. Churn also "
        f"differs by department: {top} has the highest rate ({_pct(s['dept_churn'][top])}) and {bottom} the "
        f"lowest ({_pct(s['dept_churn'][bottom])}). Tenure is right-skewed with "
        f"{s['iqr_outliers']['tenure_months']} outliers beyond the IQR fences, weekly hours are capped at 30 and 70, and "
        + "; ".join(f"{n} unanswered {col} scores recorded as {s['placeholder_values'][col]:g} are treated as missing"
                    for col, n in s["placeholders"].items())
        + ". "
        "Retention efforts should start with satisfaction, then the low pay tier and the Sales team.\n"
    )


def build(csv_text: str, mapping: dict[str, str], missing_values: dict[str, float]) -> dict[str, str]:
    """{path: content} of the three deliverables."""
    s = compute_stats(csv_text, mapping, missing_values)
    return {
        "config.py": _config_text(mapping, missing_values),
        "findings.json": json.dumps(findings(s), indent=2) + "\n",
        "summary.txt": summary(s),
    }
