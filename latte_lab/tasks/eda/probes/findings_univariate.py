"""Distributions, outliers and missing data of employee_data.csv, and what findings.json says of them."""

import importlib.util
import json
import sys

import numpy as np
import pandas as pd

df = pd.read_csv("employee_data.csv")
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
named = df.rename(columns=cmap)
inverse = {v: k for k, v in cmap.items()}

for col in df.columns:
    s = df[col]
    if not pd.api.types.is_numeric_dtype(s):
        continue
    top = s.max()
    rest = s[s != top]
    if (s == top).sum() >= 5 and len(rest) and rest.max() > 0 and top > 2 * rest.max():
        name = cmap.get(col, col)
        flag = "PASSED" if declared.get(name) == top else "FAILED"
        print(f"{flag} data_quality::placeholder - {col} ({name}) holds {top:g} in {(s == top).sum()} rows "
              f"({100 * (s == top).mean():.1f}%); its other values lie in {rest.min():g}-{rest.max():g}")
        named[name] = named[name].where(named[name] != top)

print("missing cells:", int(named.isna().sum().sum()))
for col in named.columns:
    s = named[col].dropna()
    if pd.api.types.is_numeric_dtype(s) and s.nunique() > 12:
        q1, q3 = s.quantile([0.25, 0.75])
        n_out = int(((s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))).sum())
        hist, _ = np.histogram(s, bins=12)
        print(f"{col}: mean {s.mean():.2f} median {s.median():.2f} skew {s.skew():.2f} IQR-outliers {n_out} "
              f"histogram {hist.tolist()}")

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
        s = named["salary"].dropna()
        hist, _ = np.histogram(s, bins=12)
        two_humps = hist[:4].max() > 2 * hist[3:9].min() and hist[6:].max() > 2 * hist[3:9].min()
        says_two = any(w in dist for w in ("bimodal", "two tiers", "two-tier", "two pay tiers", "two modes"))
        says_one = any(w in dist for w in ("unimodal", "normal", "single peak"))
        if two_humps and (not says_two or says_one):
            print("FAILED findings_univariate::salary_shape - salary has two humps; the distributions do not say so")
        elif says_two:
            print("PASSED findings_univariate::salary_shape")
    elif findings.get("distributions"):
        print("FAILED findings_univariate::salary_shape - no distribution entry describes salary")
    missing = text("missing_data")
    for name, value in declared.items():
        if f"{value:g}" not in missing:
            print(f"FAILED findings_univariate::missing_data - missing_data does not report {name}'s placeholder")
    for col in df.columns:
        s = df[col]
        rest = s[s != s.max()]
        if pd.api.types.is_numeric_dtype(s) and (s == s.max()).sum() >= 5 and len(rest) and rest.max() > 0 \
                and s.max() > 2 * rest.max() and f"{s.max():g}" not in missing:
            print(f"FAILED findings_univariate::missing_data - missing_data says nothing of {col}'s placeholder {s.max():g}")
