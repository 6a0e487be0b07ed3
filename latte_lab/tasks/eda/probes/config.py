"""Profile employee_data.csv column by column and check config.py against what the data shows."""

import importlib.util
import sys

import pandas as pd

df = pd.read_csv("employee_data.csv")
print(f"{len(df)} rows x {df.shape[1]} columns")
for col in df.columns:
    s = df[col]
    if pd.api.types.is_numeric_dtype(s):
        print(f"{col}: {s.dtype}, {s.nunique()} distinct, min {s.min()}, max {s.max()}, "
              f"integers={bool((s == s.round()).all())}")
    else:
        print(f"{col}: text, values {sorted(s.unique())[:6]}")


def placeholders(frame):
    """Numeric columns whose largest value repeats and sits far beyond all the others."""
    found = {}
    for col in frame.columns:
        s = frame[col]
        if not pd.api.types.is_numeric_dtype(s):
            continue
        top = s.max()
        rest = s[s != top]
        if (s == top).sum() >= 5 and len(rest) and rest.max() > 0 and top > 2 * rest.max():
            found[col] = (top, int((s == top).sum()), rest.min(), rest.max())
    return found


try:
    spec = importlib.util.spec_from_file_location("config", "config.py")
    config = importlib.util.module_from_spec(spec)
    sys.path.insert(0, ".")
    spec.loader.exec_module(config)
except FileNotFoundError:
    config = None
    print("FAILED config::exists - config.py is missing")
except Exception as exc:  # noqa: BLE001 - any error of config.py is a finding
    config = None
    print(f"FAILED config::exists - config.py does not import: {exc!r}")

declared = dict(getattr(config, "MISSING_VALUES", {}) or {}) if config else {}
cmap = dict(getattr(config, "COLUMN_MAP", {}) or {}) if config else {}
for col, (top, n, lo, hi) in placeholders(df).items():
    name = cmap.get(col, col)
    if declared.get(name) == top:
        print(f"PASSED data_quality::placeholder - {name} ({col}) placeholder {top:g} declared")
    else:
        print(f"FAILED data_quality::placeholder - {col} holds {top:g} in {n} rows while its other values "
              f"lie in {lo:g}-{hi:g}: a placeholder for missing answers, not a score")

if config is not None:
    problems = []
    if sorted(cmap) != sorted(df.columns):
        problems.append(f"COLUMN_MAP covers {sorted(cmap)}, the table has {sorted(df.columns)}")
    semantic = df.copy()
    for col, (top, *_) in placeholders(df).items():  # judge the mapping on the answered rows
        semantic[col] = semantic[col].where(semantic[col] != top)
    semantic = semantic.rename(columns=cmap)
    expect = {
        "emp_id": lambda s: s.is_unique and (s == s.round()).all(),
        "dept": lambda s: not pd.api.types.is_numeric_dtype(s),
        "churned": lambda s: set(s.unique()) <= {0, 1},
        "n_projects": lambda s: (s == s.round()).all() and s.max() <= 10,
        "satisfaction": lambda s: s.min() >= 1 and s.max() <= 10 and not (s == s.round()).all(),
        "weekly_hours": lambda s: 20 <= s.mean() <= 80 and not (s == s.round()).all(),
        "tenure_months": lambda s: (s == s.round()).all() and s.max() <= 120 and s.nunique() > 10,
        "salary": lambda s: s.min() >= 10_000,
    }
    for name, ok in expect.items():
        if name not in semantic.columns:
            problems.append(f"no column is mapped to {name}")
        elif not ok(semantic[name].dropna()):
            problems.append(f"the column mapped to {name} does not look like {name}")
    target = getattr(config, "TARGET", None)
    if target != "churned":
        problems.append(f"TARGET is {target!r}, but the binary outcome column is churned")
    features = set(getattr(config, "NUMERIC_FEATURES", [])) | set(getattr(config, "CATEGORICAL_FEATURES", []))
    if target in features or "emp_id" in features:
        problems.append("the target or the id column is listed as a feature")
    for p in problems:
        print(f"FAILED config::mapping - {p}")
    if not problems:
        print("PASSED config::mapping")
