"""Read summary.txt back against findings.json: length, target, main driver and its direction."""

import json
import re

try:
    summary = open("summary.txt", encoding="utf-8").read()
except FileNotFoundError:
    print("FAILED summary::exists - summary.txt is missing")
    raise SystemExit(0) from None
words = len(summary.split())
print(f"summary.txt: {words} words")
low = summary.lower()
failures = []
if words < 100:
    failures.append(f"length - {words} words, at least 100 needed")
if "churn" not in low:
    failures.append("target - the summary never names churn")
try:
    findings = json.loads(open("findings.json", encoding="utf-8").read())
except (FileNotFoundError, json.JSONDecodeError):
    findings = {}
    failures.append("findings - findings.json is missing or unreadable: nothing to summarise")
rel = json.dumps(findings.get("relationships", "")).lower()
for word in ("satisfaction", "salary", "department"):
    if word in rel and word not in low:
        failures.append(f"coverage - relationships discuss {word}; the summary does not")
for seg in re.split(r"(?<=[.!?])\s+", low):
    if "satisf" in seg and "positive" in seg and "negative" in rel:
        failures.append("direction - the summary calls the satisfaction link positive; findings say negative")
for f in failures:
    print(f"FAILED summary::{f}")
if not failures:
    print("PASSED summary::consistent - the summary agrees with findings.json")
