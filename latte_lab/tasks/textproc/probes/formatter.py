"""Format a few strings and compare with the description's examples."""

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


@check("formatter::truncate_wrap")
def _():
    f = load("formatter").Formatter()
    assert f.truncate("Hello world", 5) == "He..." and f.truncate("Hi", 5) == "Hi"
    assert f.wrap("", 4) == [] and f.wrap("aa bb cc", 5) == ["aa bb", "cc"]
    assert f.wrap("a verylongword b", 4) == ["a", "verylongword", "b"]


@check("formatter::case_space")
def _():
    f = load("formatter").Formatter()
    assert f.to_titlecase("don't STOP") == "Don't Stop" and f.to_uppercase("ab") == "AB"
    assert f.remove_extra_whitespace("  a \t b\n ") == "a b"


for name, fn in CHECKS:
    try:
        skipped = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is a finding
        detail = str(exc) or traceback.format_exception_only(exc)[-1].strip()
        print(f"FAILED {name} - {type(exc).__name__}: {detail}"[:300])
    else:
        print(f"SKIPPED {name} - {skipped}" if skipped else f"PASSED {name}")
