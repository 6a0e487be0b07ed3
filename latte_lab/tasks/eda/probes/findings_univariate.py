"""Distributions, outliers and missing data of employee_data.csv, and what findings.json says of them."""

import csv
import importlib.util
import json
import statistics
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


def histogram(values, bins=12):
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    return counts


table = load_table()
try:
    spec = importlib.util.spec_from_file_location("config", "config.py")
    config = importlib.util.module_from_spec(spec)
    sys.path.insert(0, ".")
    spec.loader.exec_module(config)
    cmap = dict(config.COLUMN_MAP)
    declared = dict(getattr(config, "MISSING_VALUES", {}) or {})
except Exception as exc:  # noqa: BLE001 - without a schema the columns keep their opaque names
    print(f"(config.py unusable: {exc!r}; opaque names kept)")
    cmap, declared = {}, {}

named, placeholder_values = {}, []
for col, values in table.items():
    name = cmap.get(col, col)
    if values and isinstance(values[0], float):
        top = max(values)
        rest = [v for v in values if v != top]
        if values.count(top) >= 5 and rest and max(rest) > 0 and top > 2 * max(rest):
            flag = "PASSED" if declared.get(name) == top else "FAILED"
            print(f"{flag} data_quality::placeholder - {col} ({name}) holds {top:g} in {values.count(top)} rows "
                  f"({100 * values.count(top) / len(values):.1f}%); its other values lie in {min(rest):g}-{max(rest):g}")
            placeholder_values.append(top)
            values = rest
    named[name] = values

for name, values in named.items():
    if values and isinstance(values[0], float) and len(set(values)) > 12:
        q1, _, q3 = statistics.quantiles(values, n=4)
        fence = 1.5 * (q3 - q1)
        n_out = sum(1 for v in values if v < q1 - fence or v > q3 + fence)
        print(f"{name}: mean {statistics.fmean(values):.2f} median {statistics.median(values):.2f} "
              f"IQR-outliers {n_out} histogram {histogram(values)}")

try:
    findings = json.loads(open("findings.json", encoding="utf-8").read())
except FileNotFoundError:
    findings = None
    print("FAILED findings_univariate::exists - findings.json is missing")
except json.JSONDecodeError as exc:
    findings = None
    print(f"FAILED findings_univariate::exists - findings.json is not JSON: {exc}")
if findings is not None:
    def text(key):
        return json.dumps(findings.get(key, "")).lower()

    for key in ("distributions", "outliers", "missing_data"):
        if not findings.get(key):
            print(f"FAILED findings_univariate::{key} - findings.json has no {key} entries")
    dist = text("distributions")
    if "salary" in named and "salary" in dist:
        counts = histogram(named["salary"])
        dip = min(counts[3:9])
        two_humps = max(counts[:4]) > 2 * dip and max(counts[6:]) > 2 * dip
        says_two = any(w in dist for w in ("bimodal", "two tiers", "two-tier", "two pay tiers", "two modes"))
        says_one = any(w in dist for w in ("unimodal", "normal", "single peak"))
        if two_humps and (not says_two or says_one):
            print("FAILED findings_univariate::salary_shape - salary has two humps; the distributions do not say so")
        elif says_two:
            print("PASSED findings_univariate::salary_shape")
    elif findings.get("distributions"):
        print("FAILED findings_univariate::salary_shape - no distribution entry describes salary")
    missing = text("missing_data")
    for value in placeholder_values:
        if f"{value:g}" not in missing:
            print(f"FAILED findings_univariate::missing_data - missing_data says nothing of the placeholder {value:g}")
