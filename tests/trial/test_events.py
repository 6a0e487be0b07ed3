"""The event registry: every event the library emits is declared, and a log checks what it records."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import latte_lab
from latte_lab import events
from latte_lab.events import (
    ACTION_EVENT_TYPES,
    EVENT_TYPES,
    OPERATOR_EVENT_TYPES,
    EventLog,
    EventSchemaError,
    EventSchemaWarning,
)

PACKAGE = Path(latte_lab.__file__).parent


def _emit_calls():
    """Every ``<x>.emit("<type>", field=..., ...)`` call in the package: (where, type, fields, has **)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "emit"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names = {k.arg for k in node.keywords if k.arg is not None}
                spread = any(k.arg is None for k in node.keywords)
                yield f"{path.relative_to(PACKAGE.parent)}:{node.lineno}", node.args[0].value, names, spread


def test_every_emit_in_the_package_names_a_declared_type_with_its_fields():
    calls = list(_emit_calls())
    assert len(calls) > 60  # the scan finds the engine's and every team's events
    for where, kind, names, spread in calls:
        assert kind in EVENT_TYPES, f"{where}: event {kind!r} is not declared in latte_lab.events"
        declared = EVENT_TYPES[kind]
        unknown = names - set(declared.fields) - set(declared.optional)
        assert not unknown, f"{where}: {kind} passes undeclared field(s) {sorted(unknown)}"
        if not spread:
            missing = set(declared.fields) - names
            assert not missing, f"{where}: {kind} lacks required field(s) {sorted(missing)}"


def test_named_groups_of_event_types_are_declared():
    assert set(ACTION_EVENT_TYPES) <= set(EVENT_TYPES)
    assert set(OPERATOR_EVENT_TYPES) <= set(EVENT_TYPES)
    assert len(EVENT_TYPES) >= 44
    for e in EVENT_TYPES.values():
        assert e.meaning and "\n" not in e.meaning, e.name
        assert not set(e.fields) & set(e.optional), e.name


def test_strict_log_refuses_unknown_types_and_missing_or_extra_fields():
    log = EventLog(None, clock=lambda: 0.0, strict=True)
    with pytest.raises(EventSchemaError, match="'coin_flip' is not declared.*register"):
        log.emit("coin_flip", agent="Dev1")
    with pytest.raises(EventSchemaError, match="'claim_task' lacks the field\\(s\\) task"):
        log.emit("claim_task", agent="Dev1")
    with pytest.raises(EventSchemaError, match="undeclared field\\(s\\) mood"):
        log.emit("claim_task", agent="Dev1", task="t1", mood="happy")
    assert log.events == []  # nothing malformed was recorded
    e = log.emit("run_script", agent="Dev1", path="a.py", returncode=None, error="no such file")  # optional field
    assert (e["type"], e["seq"], e["round"]) == ("run_script", 0, None)


def test_lenient_log_records_and_warns_once_per_type():
    log = EventLog(None, clock=lambda: 2.0, strict=False)
    with pytest.warns(EventSchemaWarning, match="coin_flip"):
        log.emit("coin_flip", side="heads")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log.emit("coin_flip", side="tails")  # the second one is quiet
    assert [e["side"] for e in log.events] == ["heads", "tails"] and log.events[1]["seq"] == 1


def test_strictness_follows_the_environment(monkeypatch):
    monkeypatch.setenv(events.STRICT_ENV, "1")
    with pytest.raises(EventSchemaError):
        EventLog(None, clock=lambda: 0.0).emit("coin_flip")
    monkeypatch.setenv(events.STRICT_ENV, "0")
    with pytest.warns(EventSchemaWarning):
        EventLog(None, clock=lambda: 0.0).emit("coin_flip")


def test_a_registered_type_is_accepted_and_documented():
    try:
        declared = events.register("coin_flip", "agent side", "an agent flipped a coin", optional="bias")
        log = EventLog(None, clock=lambda: 0.0, strict=True)
        log.emit("coin_flip", agent="Dev1", side="heads")
        log.emit("coin_flip", agent="Dev1", side="tails", bias=0.5)
        assert declared.fields == ("agent", "side") and len(log.events) == 2
        assert "| `coin_flip` | agent side [bias] | an agent flipped a coin |" in events.describe()
        with pytest.raises(EventSchemaError, match="already declared"):
            events.register("coin_flip", "agent", "again")
        events.register("coin_flip", "agent", "again", replace=True)
        assert EVENT_TYPES["coin_flip"].fields == ("agent",)
    finally:
        EVENT_TYPES.pop("coin_flip", None)


@pytest.mark.parametrize("args, message", [
    (("", "a", "m"), "non-empty"),
    (("x_event", "round agent", "m"), "round are set by the log"),
    (("x_event", "agent", ""), "one-line meaning"),
])
def test_register_rejects_bad_declarations(args, message):
    with pytest.raises(EventSchemaError, match=message):
        events.register(*args)
    assert "x_event" not in EVENT_TYPES


def test_the_log_hands_each_event_to_its_sink_in_order():
    seen = []
    clock = iter([0.5, 1.25, 2.0])
    log = EventLog(seen.append, clock=lambda: next(clock), strict=True)
    log.round = 3
    log.emit("round_start")
    log.emit("apply_order", agents=["Dev1"])
    assert [(e["type"], e["seq"], e["round"], e["t"]) for e in seen] == [("round_start", 0, 3, 0.5),
                                                                        ("apply_order", 1, 3, 1.25)]
    log.close()
    log.emit("round_start")  # after close the log keeps events in memory only
    assert len(seen) == 2 and len(log.events) == 3
