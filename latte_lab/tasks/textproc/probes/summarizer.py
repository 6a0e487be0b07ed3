"""Summarize short texts and check the selection and ordering rules."""

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


@check("summarizer::summarize")
def _():
    s = load("summarizer").Summarizer()
    text = "Cats purr. Dogs bark loudly at dogs. Birds sing."
    assert s.summarize(text, 0) == "" and s.summarize("", 2) == ""
    assert s.summarize("Only one.", 3) == "Only one."
    assert s.summarize(text, 1) == "Dogs bark loudly at dogs.", s.summarize(text, 1)
    two = s.summarize("Alpha beta. Gamma. Alpha beta alpha.", 2)
    assert two == "Alpha beta. Alpha beta alpha.", two


for name, fn in CHECKS:
    try:
        skipped = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is a finding
        detail = str(exc) or traceback.format_exception_only(exc)[-1].strip()
        print(f"FAILED {name} - {type(exc).__name__}: {detail}"[:300])
    else:
        print(f"SKIPPED {name} - {skipped}" if skipped else f"PASSED {name}")
