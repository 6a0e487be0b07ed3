"""Try the Tokenizer extensions on small examples from the description."""

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


@check("tokenizer::sentences")
def _():
    t = load("tokenizer").Tokenizer()
    got = t.tokenize_sentences("Pi is 3.14. Wait... Really?  Yes!")
    assert got == ["Pi is 3.14.", "Wait...", "Really?", "Yes!"], got
    assert t.tokenize_sentences("no stop at the end") == ["no stop at the end"]


@check("tokenizer::ngrams")
def _():
    t = load("tokenizer").Tokenizer()
    assert t.get_ngrams(["a", "b", "c"], 2) == [("a", "b"), ("b", "c")]
    assert t.get_ngrams(["a"], 2) == [] and t.get_bigrams(["x", "y"]) == [("x", "y")]
    try:
        t.get_ngrams(["a"], 0)
    except ValueError:
        pass
    else:
        raise AssertionError("get_ngrams(tokens, 0) must raise ValueError")


for name, fn in CHECKS:
    try:
        skipped = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is a finding
        detail = str(exc) or traceback.format_exception_only(exc)[-1].strip()
        print(f"FAILED {name} - {type(exc).__name__}: {detail}"[:300])
    else:
        print(f"SKIPPED {name} - {skipped}" if skipped else f"PASSED {name}")
