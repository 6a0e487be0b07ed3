"""Deterministic generator of the eda task's opaque HR table.

The table follows the released task's recipe (reference §8.1): 400 employees, eight columns whose
names are shuffled to ``var_01..var_08`` and whose order is shuffled again, with three planted
properties the hidden suite checks the team's findings against. One data-quality problem is planted
on top (not in the released table): the satisfaction survey was not answered for
``PLACEHOLDER_ROWS`` employees, whose score is recorded as the placeholder ``PLACEHOLDER`` (outside
the 1-10 scale). Churn was drawn from the true scores, so an analysis that takes the placeholder for a
score finds satisfaction unrelated to churn; one that treats it as missing finds the planted driver. ``employee_data.csv`` in this
package is this generator's output (a test checks they agree); tasks read the shipped file so that a
future numpy changing a random stream cannot silently change the task.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

N_ROWS = 400  # the released table's size
DATA_SEED = 42  # rows
NAME_SEED = 542  # which opaque name each semantic column gets
ORDER_SEED = 2042  # column order in the CSV
PLACEHOLDER_SEED = 7  # which employees did not answer the satisfaction survey
PLACEHOLDER_ROWS = 28  # 7 % of the table: enough to hide the driver from a naive correlation
PLACEHOLDER = 99.0  # recorded satisfaction of an unanswered survey

SEMANTIC_COLUMNS = (
    "emp_id",
    "dept",
    "tenure_months",
    "n_projects",
    "weekly_hours",
    "salary",
    "satisfaction",
    "churned",
)
DEPARTMENTS = ("Engineering", "Sales", "Support", "HR")
DEPT_SHARES = (0.30, 0.25, 0.25, 0.20)
DEPT_CHURN_SHIFT = {"Engineering": -0.12, "Sales": 0.14, "Support": 0.0, "HR": -0.04}
LOW_TIER_SHARE = 0.55  # share of employees in the low salary tier
LOW_TIER_CHURN_SHIFT = 0.12  # extra churn probability of the low tier
NUMERIC_FEATURES = ("tenure_months", "n_projects", "weekly_hours", "salary", "satisfaction")
CATEGORICAL_FEATURES = ("dept",)
TARGET = "churned"
ID_COLUMN = "emp_id"


def generate_semantic(seed: int = DATA_SEED, n: int = N_ROWS) -> pd.DataFrame:
    """The table with its true column names, before the names are hidden."""
    rng = np.random.default_rng(seed)
    dept = rng.choice(np.array(DEPARTMENTS), size=n, p=DEPT_SHARES)
    tenure = np.clip(np.round(rng.gamma(3.0, 12.0, size=n)), 0, 72).astype(int)
    projects = rng.integers(1, 9, size=n)
    hours = np.clip(np.round(rng.normal(45.0, 8.0, size=n), 1), 30.0, 70.0)
    low_tier = rng.random(n) < LOW_TIER_SHARE
    salary_raw = np.where(low_tier, rng.normal(42_000, 7_000, size=n), rng.normal(88_000, 12_000, size=n))
    salary = (np.round(np.clip(salary_raw, 18_000, 140_000) / 100) * 100).astype(int)
    satisfaction = np.round(rng.uniform(1.0, 10.0, size=n), 1)
    p = np.clip(0.78 - 0.07 * satisfaction, 0.03, 0.88)
    p = p + LOW_TIER_CHURN_SHIFT * low_tier + np.array([DEPT_CHURN_SHIFT[d] for d in dept])
    p = np.clip(p, 0.02, 0.95)
    churned = (rng.random(n) < p).astype(int)
    unanswered = np.random.default_rng(PLACEHOLDER_SEED).choice(n, size=min(PLACEHOLDER_ROWS, n), replace=False)
    satisfaction = satisfaction.copy()
    satisfaction[unanswered] = PLACEHOLDER
    return pd.DataFrame(
        {
            "emp_id": np.arange(1, n + 1),
            "dept": dept,
            "tenure_months": tenure,
            "n_projects": projects,
            "weekly_hours": hours,
            "salary": salary,
            "satisfaction": satisfaction,
            "churned": churned,
        }
    )


def opaque_mapping(seed: int = NAME_SEED) -> dict[str, str]:
    """Opaque name -> semantic name, sorted by opaque name."""
    rng = np.random.default_rng(seed)
    names = [f"var_{i:02d}" for i in range(1, len(SEMANTIC_COLUMNS) + 1)]
    order = rng.permutation(len(SEMANTIC_COLUMNS))
    return {names[i]: SEMANTIC_COLUMNS[int(order[i])] for i in range(len(names))}


def generate_opaque() -> tuple[pd.DataFrame, dict[str, str]]:
    """The table agents see (opaque names, shuffled order) and the true mapping."""
    semantic = generate_semantic()
    mapping = opaque_mapping()
    renamed = semantic.rename(columns={v: k for k, v in mapping.items()})
    rng = np.random.default_rng(ORDER_SEED)
    columns = list(renamed.columns)
    order = [columns[int(i)] for i in rng.permutation(len(columns))]
    return renamed[order], mapping


def to_csv_text(df: pd.DataFrame) -> str:
    """CSV text with fixed formatting (LF line ends, no index), stable across platforms."""
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def planted_properties(mapping: dict[str, str]) -> dict:
    """What the hidden suite knows and the agents do not: the true mapping and the planted truths."""
    inverse = {v: k for k, v in mapping.items()}
    return {
        "column_map": dict(mapping),
        "target": TARGET,
        "target_column": inverse[TARGET],
        "id_column": ID_COLUMN,
        "numeric_features": list(NUMERIC_FEATURES),
        "categorical_features": list(CATEGORICAL_FEATURES),
        "satisfaction_column": inverse["satisfaction"],
        "salary_column": inverse["salary"],
        "dept_column": inverse["dept"],
        "satisfaction_direction": "negative",
        "salary_bimodal": True,
        "highest_churn_dept": "Sales",
        "lowest_churn_dept": "Engineering",
        "departments": list(DEPARTMENTS),
        "missing_values": {"satisfaction": PLACEHOLDER},
        "placeholder_rows": PLACEHOLDER_ROWS,
    }


if __name__ == "__main__":  # regenerate the shipped files: python -m latte_lab.tasks.eda.generator
    import json
    from pathlib import Path

    here = Path(__file__).parent
    table, true_map = generate_opaque()
    (here / "files" / "employee_data.csv").write_text(to_csv_text(table), encoding="utf-8")
    (here / "hidden" / "planted.json").write_text(
        json.dumps(planted_properties(true_map), indent=2) + "\n", encoding="utf-8"
    )
