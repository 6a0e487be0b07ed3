"""Churn against every feature and across departments, and what findings.json says of it."""

import csv
import importlib.util
import json
import re
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


table = load_table()
try:
    spec = importlib.util.spec_from_file_location("config", "config.py")
    config = importlib.util.module_from_spec(spec)
    sys.path.insert(0, ".")
    spec.loader.exec_module(config)
    cmap, target = dict(config.COLUMN_MAP), config.TARGET
    declared = dict(getattr(config, "MISSING_VALUES", {}) or {})
except Exception as exc:  # noqa: BLE001 - nothing to relate without a target
    print(f"FAILED findings_relationships::schema - config.py unusable ({exc!r}): no target to relate to")
    raise SystemExit(0) from None

named, dropped = {}, {}
for col, values in table.items():
    name = cmap.get(col, col)
    named[name] = values
    if values and isinstance(values[0], float):
        top = max(values)
        rest = [v for v in values if v != top]
        if values.count(top) >= 5 and rest and max(rest) > 0 and top > 2 * max(rest):
            flag = "PASSED" if declared.get(name) == top else "FAILED"
            print(f"{flag} data_quality::placeholder - {col} ({name}) holds {top:g} in {values.count(top)} rows: "
                  "correlations below leave those rows out")
            dropped[name] = top
if target not in named:
    print(f"FAILED findings_relationships::schema - TARGET {target!r} is not a column after renaming")
    raise SystemExit(0)
y = named[target]
corr = {}
for name, values in named.items():
    if name == target or not values or not isinstance(values[0], float) or len(set(values)) == len(values):
        continue
    pairs = [(v, t) for v, t in zip(values, y) if v != dropped.get(name)]
    if len(pairs) > 2:
        corr[name] = statistics.correlation([p[0] for p in pairs], [p[1] for p in pairs])
for name, r in sorted(corr.items(), key=lambda kv: -abs(kv[1])):
    print(f"corr({name}, {target}) = {r:+.3f}")
rates = {}
for name, values in named.items():
    if values and not isinstance(values[0], float):
        groups = {}
        for g, t in zip(values, y):
            groups.setdefault(g, []).append(t)
        rates = {g: sum(v) / len(v) for g, v in groups.items()}
        print(f"{target} rate by {name}:", ", ".join(f"{g} {r:.1%}" for g, r in sorted(rates.items(), key=lambda kv: kv[1])))

try:
    findings = json.loads(open("findings.json", encoding="utf-8").read())
except (FileNotFoundError, json.JSONDecodeError) as exc:
    print(f"FAILED findings_relationships::exists - findings.json unreadable: {exc!r}")
    raise SystemExit(0) from None
rel = json.dumps(findings.get("relationships", "")).lower()
sub = json.dumps(findings.get("subgroup_effects", "")).lower()
if not findings.get("relationships") or not findings.get("subgroup_effects"):
    print("FAILED findings_relationships::exists - relationships or subgroup_effects is empty")
if corr:
    driver = max(corr, key=lambda c: abs(corr[c]))
    sign = "negative" if corr[driver] < 0 else "positive"
    other = "positive" if sign == "negative" else "negative"
    claim = [seg for seg in re.split(r"[.;]", rel) if driver.split("_")[0] in seg]
    if not claim:
        print(f"FAILED findings_relationships::driver - the strongest driver, {driver}, is not in relationships")
    elif any(other in seg and sign not in seg for seg in claim):
        print(f"FAILED findings_relationships::driver - relationships call {driver}'s link {other}; it is {sign}")
    else:
        print(f"PASSED findings_relationships::driver - {driver} ({corr[driver]:+.3f})")
if rates:
    hi, lo = max(rates, key=rates.get), min(rates, key=rates.get)
    problems = []
    for seg in re.split(r"[.;]", sub):
        if "highest" in seg and lo.lower() in seg and hi.lower() not in seg:
            problems.append(f"subgroup_effects give {lo} the highest rate")
        if "lowest" in seg and hi.lower() in seg and lo.lower() not in seg:
            problems.append(f"subgroup_effects give {hi} the lowest rate")
    if hi.lower() not in sub or lo.lower() not in sub:
        problems.append(f"subgroup_effects do not name {hi} (highest) and {lo} (lowest)")
    for p in problems:
        print(f"FAILED findings_relationships::subgroups - {p}")
    if not problems:
        print(f"PASSED findings_relationships::subgroups - {hi} highest, {lo} lowest")
