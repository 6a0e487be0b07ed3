"""The lesson's checker: a one-line verdict, a hint that never gives the answer away."""

from __future__ import annotations

import dataclasses

import pytest

import latte_lab as ll
from latte_lab import teaching

QUICK = [e for e in teaching.EXERCISES if e != "ex8"]  # ex8 runs a trial: tested with the trial tests


@pytest.mark.parametrize("ex", QUICK)
def test_reference_answers_pass_and_none_waits(ex):
    expected = teaching.EXERCISES[ex]._expected()
    verdict = teaching.check(ex, expected)
    assert verdict.ok is True and bool(verdict) and str(verdict).startswith(f"✓ {ex}")
    assert f"{teaching._shown(expected)} is correct" in str(verdict)  # the teacher's edition shows each answer
    waiting = teaching.check(ex, None)
    assert waiting.ok is None and not waiting and "no answer yet" in str(waiting)
    assert "\n" not in str(verdict) + str(waiting)


def _wrong_answers(ex, expected):
    if ex == "ex1":
        return [["plots"], ["plots", "docs", "stats"], ["plots", "docs", "lint"], ["model"], ["plan"], ["x"], "plots"]
    spec = teaching.setup("ex2")
    common = [expected + 1, expected - 1, expected * 2, "twelve", True]
    return {"ex2": [spec.total_work, 4], "ex3": [spec.total_work / 2, spec.critical_path_length],
            "ex4": [1, len(spec) + 6, 2.5], "ex5": [34, 5], "ex6": [12, 13, 16, 3],
            "ex7": [-expected]}.get(ex, []) + common


@pytest.mark.parametrize("ex", QUICK)
def test_wrong_answers_get_a_hint_and_never_the_answer(ex):
    expected = teaching.EXERCISES[ex]._expected()
    for wrong in _wrong_answers(ex, expected):
        verdict = teaching.check(ex, wrong)
        assert verdict.ok is False, (ex, wrong)
        text = str(verdict)
        assert text.startswith(f"✗ {ex}") and "Hint: " in text and "\n" not in text
        hint = verdict.hint
        if isinstance(expected, list):
            missing = set(expected) - set(wrong if isinstance(wrong, list) else [])
            assert not any(repr(m) in hint for m in missing), hint
        else:
            assert str(expected) not in hint and f"{expected:g}" not in hint, hint


def test_hints_point_at_the_mistake():
    assert "pending" in teaching.check("ex1", ["plots", "docs", "stats"]).hint  # in progress
    assert "waits for 'stats'" in teaching.check("ex1", ["model"]).hint
    assert "missing" in teaching.check("ex1", ["plots"]).hint
    spec = teaching.setup("ex2")
    assert "durations" in teaching.check("ex2", 4).hint  # counted nodes on the longest chain
    assert "total work" in teaching.check("ex2", spec.total_work).hint
    assert "round the work bound up" in teaching.check("ex3", spec.total_work / 2).hint
    assert "larger one" in teaching.check("ex3", spec.critical_path_length).hint
    assert "critical path" in teaching.check("ex6", 5).hint
    assert "whole number" in teaching.check("ex4", 2.5).hint
    assert "number" in teaching.check("ex5", "twelve").hint


def test_the_material_of_the_exercises():
    g = teaching.setup("ex1")
    assert isinstance(g, ll.CoordinationGraph) and g.frontier() == teaching.EXERCISES["ex1"]._expected()
    assert teaching.setup("ex5") == teaching.setup("ex6") == ll.scheduling.graham_example()
    assert teaching.setup("ex8").team == "latte"
    table = teaching.exercises()
    assert table["exercise"].tolist() == [f"ex{k}" for k in range(1, 9)]
    assert 5 <= len(table) <= 8
    with pytest.raises(ll.LatteError, match="ex1, ex2"):
        teaching.check("ex42", 1)


def test_no_public_name_hands_out_an_answer():
    """The students' install holds the checker, so the reference answers are in it; none is a public name."""
    ex = teaching.EXERCISES["ex2"]
    assert not hasattr(ex, "answer") and "answer" not in teaching.__all__ and "answer_key" not in teaching.__all__
    assert "_expected" not in repr(ex) and "critical_path_length" not in repr(ex)
    public = [f.name for f in dataclasses.fields(ex) if not f.name.startswith("_")]
    assert public == ["id", "title", "setup", "grade"]
    assert teaching.setup("ex2") != ex._expected() and str(ex._expected()) not in teaching.exercises().to_string()
