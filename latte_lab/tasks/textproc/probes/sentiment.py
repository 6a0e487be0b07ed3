"""Run SentimentAnalyzer on a few sentences and compare with the description's rules."""

import importlib
import traceback

CHECKS = []


def check(name):
    def register(fn):
        CHECKS.append((name, fn))
        return fn
    return register


def load(name):
    return importlib.import_module(name)


@check("sentiment::analyze")
def _():
    a = load("sentiment").SentimentAnalyzer(positive_words={"good"}, negative_words={"bad"})
    assert a.analyze("") == {"score": 0.0, "label": "neutral", "positive_count": 0, "negative_count": 0}
    got = a.analyze("Good, GOOD... bad!")
    assert got["positive_count"] == 2 and got["negative_count"] == 1, got
    assert abs(got["score"] - 1 / 3) < 1e-9 and got["label"] == "positive", got
    assert a.analyze("bad")["label"] == "negative"


for name, fn in CHECKS:
    try:
        skipped = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is a finding
        detail = str(exc) or traceback.format_exception_only(exc)[-1].strip()
        print(f"FAILED {name} - {type(exc).__name__}: {detail}"[:300])
    else:
        print(f"SKIPPED {name} - {skipped}" if skipped else f"PASSED {name}")
