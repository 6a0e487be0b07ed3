"""Facts about a project's data reach a simulated agent's patches only through its prompt
(``latte_lab.models.sim.evidence``): the data profile shows them, and constants keep only what was shown."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from latte_lab.models.sim import evidence as E
from latte_lab.models.sim.fixbook import fix_book
from latte_lab.models.sim.skill import Skill
from latte_lab.tasks import get

EDA = get("eda")
DATA = "employee_data.csv"


def _profile_output(tmp_path, csv_text: str) -> str:
    (tmp_path / DATA).write_text(csv_text)
    (tmp_path / "p.py").write_text(E.profile_script(DATA))
    return subprocess.run([sys.executable, "p.py"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout


def _eda_skill(text: str) -> Skill:
    project = fix_book().project_for({}, EDA.description)
    return Skill(project, text, ())


def _eda_data() -> str:
    return fix_book().project_for({}, EDA.description).start[DATA]


def _config(skill: Skill) -> dict[str, str]:
    unit = skill.unit("config")
    return skill.version(unit, "config.py", True, random.Random(0))


# ------------------------------------------------------------------------------- the profile ----

def test_the_profile_shows_a_value_apart_from_the_rest_and_names_no_test(tmp_path):
    rows = ["a,b,c"] + [f"{i},{(i % 10) + 1},x{i % 3}" for i in range(1, 41)] + ["41,99,x1", "42,99,x2"]
    out = _profile_output(tmp_path, "\n".join(rows) + "\n")
    lines = out.splitlines()
    assert lines[0] == f"{E.PROFILE_MARK}{DATA}: 42 rows"
    b = next(line for line in lines if line.startswith("b:"))
    assert "numeric, 1 to 99" in b and "99 (2 rows) lies apart from the rest (1 to 10)" in b
    a = next(line for line in lines if line.startswith("a:"))
    assert "lies apart" not in a  # an id column: evenly spread, nothing apart
    assert next(line for line in lines if line.startswith("c:")).startswith("c: text, 3 distinct")
    assert "FAILED" not in out and "PASSED" not in out and "test" not in out.lower()


def test_the_profile_of_the_shipped_data_shows_the_placeholder(tmp_path):
    out = _profile_output(tmp_path, _eda_data())
    line = next(line for line in out.splitlines() if "lies apart" in line)
    assert E.shown("99", line) and "(1 to 10)" in line


# ---------------------------------------------------------------------- constants, gated ----

def test_config_written_before_any_profile_holds_no_fact_about_the_data():
    """Only what the prompt shows about the data counts (the data file read, a profile's or an analysis's
    report): the description naming var_01 and var_08 says nothing of which column each one is."""
    out = _config(_eda_skill(EDA.description))
    assert out["MISSING_VALUES"] == "MISSING_VALUES = {}"
    assert out["COLUMN_MAP"] == "COLUMN_MAP = {}"
    skill = _eda_skill(EDA.description)
    assert out["TARGET"] == skill.solution_symbols("config.py")["TARGET"]  # no data value in it: as the reference


def test_a_number_outside_a_report_about_the_data_is_no_evidence():
    """A 99 in a message, a test id or a plan is not the data's: the placeholder stays unknown."""
    noise = "Round 99 of the plan.\nFAILED test_suite.py::test_case_99 - assert 99 == 98\nvar_01 is 99 wide"
    out = _config(_eda_skill(EDA.description + "\n\n" + noise))
    assert out["MISSING_VALUES"] == "MISSING_VALUES = {}" and out["COLUMN_MAP"] == "COLUMN_MAP = {}"
    assert E.data_evidence(noise, {}, (DATA,)) == ""


def test_config_written_after_the_profile_is_the_correct_one(tmp_path):
    profile = _profile_output(tmp_path, _eda_data())
    skill = _eda_skill(EDA.description + "\n" + profile)
    out = _config(skill)
    correct = skill.solution_symbols("config.py")
    assert out["MISSING_VALUES"] == correct["MISSING_VALUES"] and "99" in out["MISSING_VALUES"]
    assert out["COLUMN_MAP"] == correct["COLUMN_MAP"]


def test_a_config_written_blind_is_stale_once_the_profile_is_shown(tmp_path):
    blind = _eda_skill(EDA.description)
    written = blind.patch(None, "config.py", _config(blind))
    unit = blind.unit("config")
    assert not blind.stale(unit, "config.py", written)  # nothing shown yet that it lacks
    profile = _profile_output(tmp_path, _eda_data())
    informed = _eda_skill(EDA.description + "\n" + profile)
    assert informed.stale(unit, "config.py", written)
    assert not informed.stale(unit, "config.py", informed.patch(written, "config.py", _config(informed)))


@pytest.mark.parametrize("text,evidence,expected", [
    ("X = [1, 99, 2]", "", "X = [1, 2]"),
    ("X = (99,)", "", "X = ()"),
    ("X = {99, 'a'}", "", "X = {'a'}"),
    ("X = {99}", "", "X = []"),  # an empty set has no literal; the agent writes an empty list
    ("X = 99", "", None),  # a scalar it has not seen: not written
    ("X = 99", "it is 99.0 here", "X = 99"),
    ("X: dict = {'k': 99}", "", "X: dict = {}"),
    ("def f():\n    return 99", "", "def f():\n    return 99"),  # code is not gated
    ("X = {'k': 98}", "", "X = {'k': 98}"),  # 98 is no value of the data
])
def test_gate_constant(text, evidence, expected):
    assert E.gate_constant(text, frozenset({"99"}), evidence) == expected


def test_shown_matches_whole_numbers_and_words_only():
    assert E.shown("99", "max 99.") and E.shown("99", "99.0 (2 rows)") and E.shown("var_05", "var_05: numeric")
    assert not E.shown("99", "1999") and not E.shown("99", "99.5") and not E.shown("99", "0.99")
    assert not E.shown("var_05", "var_050")
