"""Profile employee_data.csv column by column and check config.py against what the data shows."""

import csv
import importlib.util
import sys


def load_table(path="employee_data.csv"):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    table = {}
    for col in rows[0]:
        values = [r[col] for r in rows]
        try:
            table[col] = [float(v) for v in values]
        except ValueError:
            table[col] = values
    return table


def numeric(values):
    return bool(values) and isinstance(values[0], float)


def placeholders(table):
    """Numeric columns whose largest value repeats and sits far beyond all the others."""
    found = {}
    for col, values in table.items():
        if not numeric(values):
            continue
        top = max(values)
        rest = [v for v in values if v != top]
        if values.count(top) >= 5 and rest and max(rest) > 0 and top > 2 * max(rest):
            found[col] = (top, values.count(top), min(rest), max(rest))
    return found


table = load_table()
print(f"{len(next(iter(table.values())))} rows x {len(table)} columns")
for col, values in table.items():
    if numeric(values):
        whole = all(v == int(v) for v in values)
        print(f"{col}: numeric, {len(set(values))} distinct, min {min(values):g}, max {max(values):g}, integers={whole}")
    else:
        print(f"{col}: text, values {sorted(set(values))[:6]}")

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
found = placeholders(table)
for col, (top, n, lo, hi) in found.items():
    name = cmap.get(col, col)
    if declared.get(name) == top:
        print(f"PASSED data_quality::placeholder - {name} ({col}) placeholder {top:g} declared")
    else:
        print(f"FAILED data_quality::placeholder - {col} holds {top:g} in {n} rows while its other values "
              f"lie in {lo:g}-{hi:g}: a placeholder for missing answers, not a score")

if config is not None:
    problems = []
    if sorted(cmap) != sorted(table):
        problems.append(f"COLUMN_MAP covers {sorted(cmap)}, the table has {sorted(table)}")
    semantic = {}
    for col, values in table.items():  # judge the mapping on the answered rows
        top = found.get(col, (None,))[0]
        semantic[cmap.get(col, col)] = [v for v in values if v != top]

    def whole(v):
        return all(x == int(x) for x in v)

    expect = {
        "emp_id": lambda v: numeric(v) and len(set(v)) == len(v) and whole(v),
        "dept": lambda v: not numeric(v),
        "churned": lambda v: numeric(v) and set(v) <= {0.0, 1.0},
        "n_projects": lambda v: numeric(v) and whole(v) and max(v) <= 10,
        "satisfaction": lambda v: numeric(v) and min(v) >= 1 and max(v) <= 10 and not whole(v),
        "weekly_hours": lambda v: numeric(v) and 20 <= sum(v) / len(v) <= 80 and not whole(v),
        "tenure_months": lambda v: numeric(v) and whole(v) and max(v) <= 120 and len(set(v)) > 10,
        "salary": lambda v: numeric(v) and min(v) >= 10_000,
    }
    for name, ok in expect.items():
        if name not in semantic:
            problems.append(f"no column is mapped to {name}")
        elif not ok(semantic[name]):
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
