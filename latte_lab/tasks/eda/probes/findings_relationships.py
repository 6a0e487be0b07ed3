"""Churn against every feature and across departments, and what findings.json says of it."""

import importlib.util
import json
import re
import sys

import pandas as pd

df = pd.read_csv("employee_data.csv")
try:
    spec = importlib.util.spec_from_file_location("config", "config.py")
    config = importlib.util.module_from_spec(spec)
    sys.path.insert(0, ".")
    spec.loader.exec_module(config)
    cmap, target = dict(config.COLUMN_MAP), config.TARGET
    declared = dict(getattr(config, "MISSING_VALUES", {}) or {})
except Exception as exc:  # noqa: BLE001 - nothing to relate without a target
    print(f"FAILED findings_relationships::schema - config.py unusable ({exc!r}): no target to relate to")
    raise SystemExit(0)
named = df.rename(columns=cmap)
for col in df.columns:
    s = df[col]
    rest = s[s != s.max()]
    if pd.api.types.is_numeric_dtype(s) and (s == s.max()).sum() >= 5 and len(rest) and rest.max() > 0 \
            and s.max() > 2 * rest.max():
        name = cmap.get(col, col)
        flag = "PASSED" if declared.get(name) == s.max() else "FAILED"
        print(f"{flag} data_quality::placeholder - {col} ({name}) holds {s.max():g} in {(s == s.max()).sum()} rows: "
              "correlations below leave those rows out")
        named[name] = named[name].where(named[name] != s.max())
if target not in named:
    print(f"FAILED findings_relationships::schema - TARGET {target!r} is not a column after renaming")
    raise SystemExit(0)
numeric = [c for c in named.columns if c != target and pd.api.types.is_numeric_dtype(named[c])
           and not named[c].is_unique]
corr = {c: named[c].corr(named[target]) for c in numeric}
for c, r in sorted(corr.items(), key=lambda kv: -abs(kv[1])):
    print(f"corr({c}, {target}) = {r:+.3f}")
text_cols = [c for c in named.columns if not pd.api.types.is_numeric_dtype(named[c])]
rates = {}
for c in text_cols:
    rates = named.groupby(c)[target].mean().sort_values()
    print(f"{target} rate by {c}:", ", ".join(f"{k} {v:.1%}" for k, v in rates.items()))

try:
    findings = json.loads(open("findings.json", encoding="utf-8").read())
except (FileNotFoundError, json.JSONDecodeError) as exc:
    print(f"FAILED findings_relationships::exists - findings.json unreadable: {exc!r}")
    raise SystemExit(0)
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
if len(rates):
    hi, lo = rates.index[-1], rates.index[0]
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
