"""The eda task: generator, planted properties, setup, hidden suite, reference solution, work units.

Most hidden-suite checks run in-process (``run_hidden`` calls the suite's test methods on
deliverables written to a temporary directory) so that many variants stay fast; two tests run the
real ``task.evaluate`` subprocess end to end.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import latte_lab as ll
from latte_lab.errors import WorkspaceError
from latte_lab.models.sim.source import get_symbols, splice
from latte_lab.sandbox import outcomes_by_class, parse_junit
from latte_lab.tasks import eda as eda_pkg
from latte_lab.tasks.eda import generator
from latte_lab.tasks.suite import count_tests
from latte_lab.workspace import Workspace

HIDDEN_PATH = Path(eda_pkg.__file__).parent / "hidden" / "test_hidden.py"
EXPECTED_CLASSES = {
    "TestOutputContract": 9,
    "TestConfigCompleteness": 7,
    "TestConfigAccuracy": 5,
    "TestPlantedFindings": 6,
    "TestNarrative": 4,
    "TestDataQuality": 2,
}
DELIVERABLES = ("config.py", "findings.json", "summary.txt")


@pytest.fixture(scope="module")
def task():
    return ll.tasks.get("eda")


@pytest.fixture(scope="module")
def hidden() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("eda_hidden_suite", HIDDEN_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def solution(task) -> dict[str, str]:
    return task.reference_solution()


def run_hidden(hidden: types.ModuleType, files: dict[str, str], root: Path) -> dict[str, bool]:
    """{"Class::test[param]": passed} for every hidden test, run in-process on ``files``."""
    for p in root.iterdir():
        p.unlink()
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")
    (root / "_planted.json").write_text(json.dumps(eda_pkg.planted()), encoding="utf-8")
    hidden.HERE = root
    outcomes: dict[str, bool] = {}
    planted = eda_pkg.planted()
    data = pd.read_csv(root.parent / "data.csv")

    def fixture(name: str):
        if name == "planted":
            return planted
        if name == "data":
            return data
        if name == "config":  # the judge imports it from the workspace's process; here, from ``root``
            sys.path.insert(0, str(root))
            try:
                return hidden._load_config()
            finally:
                sys.path.remove(str(root))
        if name == "findings":
            return json.loads((root / "findings.json").read_text())
        if name == "summary":
            return (root / "summary.txt").read_text()
        raise KeyError(name)

    for cls_name in EXPECTED_CLASSES:
        cls = getattr(hidden, cls_name)
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("test"):
                continue
            params = [p for p in inspect.signature(fn).parameters if p != "self"]
            cases = [{}]
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == "parametrize":
                    argname, values = mark.args
                    cases = [{argname: v} for v in values]
            for case in cases:
                node = f"{cls_name}::{name}" + (f"[{next(iter(case.values()))}]" if case else "")
                try:
                    kwargs = {p: case[p] if p in case else fixture(p) for p in params}
                    fn(cls(), **kwargs)
                    outcomes[node] = True
                except (AssertionError, pytest.fail.Exception, FileNotFoundError, KeyError,
                        AttributeError, json.JSONDecodeError):
                    outcomes[node] = False
    sys.modules.pop("config", None)
    return outcomes


@pytest.fixture
def hidden_root(tmp_path) -> Path:
    (tmp_path / "data.csv").write_text(eda_pkg._data(), encoding="utf-8")
    root = tmp_path / "ws"
    root.mkdir()
    return root


# --- data ----------------------------------------------------------------------------------------


def test_shipped_table_is_the_generators_output():
    table, mapping = generator.generate_opaque()
    assert generator.to_csv_text(table) == eda_pkg._data()
    assert generator.planted_properties(mapping) == eda_pkg.planted()


def test_table_shape_and_opaque_names():
    df = pd.read_csv(pd.io.common.StringIO(eda_pkg._data()))
    assert df.shape == (400, 8)
    assert sorted(df.columns) == [f"var_{i:02d}" for i in range(1, 9)]
    assert list(df.columns) != sorted(df.columns)  # the column order is shuffled too
    assert not df.isna().any().any()


def test_planted_properties_hold_in_the_data():
    truth = eda_pkg.planted()
    df = pd.read_csv(pd.io.common.StringIO(eda_pkg._data())).rename(columns=truth["column_map"])
    assert set(df["churned"].unique()) == {0, 1}
    # the placeholder: outside the 1-10 scale, and it hides the driver from an analysis that keeps it
    placeholder = truth["missing_values"]["satisfaction"]
    assert (df["satisfaction"] == placeholder).sum() == truth["placeholder_rows"] == generator.PLACEHOLDER_ROWS
    assert abs(df["satisfaction"].corr(df["churned"])) < 0.05
    df["satisfaction"] = df["satisfaction"].where(df["satisfaction"] != placeholder)
    assert df["satisfaction"].between(1, 10).sum() == len(df) - truth["placeholder_rows"]
    corr = {c: df[c].corr(df["churned"]) for c in truth["numeric_features"]}
    assert min(corr, key=corr.get) == "satisfaction" and corr["satisfaction"] < -0.25
    assert max(abs(v) for k, v in corr.items() if k != "satisfaction") < abs(corr["satisfaction"])
    low_sat = df.loc[df["satisfaction"] < 4, "churned"].mean()
    high_sat = df.loc[df["satisfaction"] >= 7, "churned"].mean()
    assert low_sat > high_sat + 0.2
    hist, _ = np.histogram(df["salary"], bins=12)
    trough = hist[3:9].min()
    assert hist[:4].max() > 3 * trough and hist[6:].max() > 2 * trough  # two humps around a dip
    rates = df.groupby("dept")["churned"].mean()
    assert rates.idxmax() == truth["highest_churn_dept"] == "Sales"
    assert rates.idxmin() == truth["lowest_churn_dept"] == "Engineering"


def test_generator_is_deterministic_and_seeded():
    a = generator.generate_semantic()
    assert a.equals(generator.generate_semantic())
    assert not a.equals(generator.generate_semantic(seed=7))


# --- task surface ----------------------------------------------------------------------------------


def test_registered_with_official_alias(task):
    assert ll.tasks.get("simple_eda").id == "eda"
    assert task.official_name == "simple_eda" and task.default_max_rounds == 40
    assert task.accuracy_metric == "hidden_pass_rate"
    assert task.required_outputs == DELIVERABLES


def test_description_states_names_without_leaking_the_mapping(task):
    for name in generator.SEMANTIC_COLUMNS:
        assert name in task.description
    for key in ("COLUMN_MAP", "TARGET", "NUMERIC_FEATURES", "CATEGORICAL_FEATURES", *generator.DEPARTMENTS):
        assert key in task.description
    for opaque in [f"var_{i:02d}" for i in range(2, 8)]:
        assert opaque not in task.description


def test_setup_writes_data_and_protects_public_suite(task, tmp_path):
    ws = Workspace(tmp_path / "w")
    task.setup(ws)
    assert ws.list_files() == ["employee_data.csv", "test_suite.py"]
    assert ws.test_args == ("test_suite.py",)
    with pytest.raises(WorkspaceError):
        ws.write("test_suite.py", "", agent="Dev1")
    text = "\n".join(ws.read(p) for p in ws.list_files())
    assert "satisfaction" not in text and "churned" not in text  # nothing reveals the mapping


def test_public_suite_checks_form_only(task, solution, tmp_path):
    ws = Workspace(tmp_path / "w")
    task.setup(ws)
    run = ws.run_tests()
    assert (run.passed, run.failed) == (0, 17)
    for path, text in solution.items():
        ws.write(path, text, agent="Dev1")
    assert ws.run_tests().passed == 17


def test_hidden_suite_size():
    assert count_tests(HIDDEN_PATH.read_text()) == EXPECTED_CLASSES


def test_evaluate_start_and_solution_end_to_end(task, solution, tmp_path):
    ws = Workspace(tmp_path / "w")
    task.setup(ws)
    before = ws.list_files()
    start = task.evaluate(ws)
    assert start.passed == 0 and start.total == 33
    assert start.per_class == {c: (0, n) for c, n in EXPECTED_CLASSES.items()}
    assert start.missing_outputs == DELIVERABLES
    assert ws.list_files() == before  # hidden files never reach the workspace
    for path, text in solution.items():
        ws.write(path, text, agent="Dev1")
    # pytest configuration the agents write must not change how the hidden suite runs
    ws.write("conftest.py", "import pytest\n\n@pytest.fixture\ndef planted():\n    return {}\n", agent="Dev1")
    ws.write("pytest.ini", "[pytest]\naddopts = -k nothing_matches\n", agent="Dev1")
    done = task.evaluate(ws)
    assert (done.passed, done.total, done.rate) == (33, 33, 1.0)
    assert done.per_class == {c: (n, n) for c, n in EXPECTED_CLASSES.items()}
    assert done.missing_outputs == ()


def test_parse_junit_reads_outcomes():
    xml = (
        '<testsuites><testsuite><testcase classname="test_hidden.TestA" name="t1" file="test_hidden.py"/>'
        '<testcase classname="test_hidden.TestA" name="t2" file="test_hidden.py"><failure message="x"/></testcase>'
        '<testcase classname="test_hidden.TestB" name="t3" file="test_hidden.py"><error message="y"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert outcomes_by_class(parse_junit(xml)) == {"TestA": {"t1": "passed", "t2": "failed"}, "TestB": {"t3": "error"}}


def test_count_tests_counts_parametrized_cases():
    src = (
        "import pytest\nclass TestA:\n    def test_a(self): pass\n"
        "    @pytest.mark.parametrize('x', [1, 2, 3])\n    def test_b(self, x): pass\n"
        "    def helper(self): pass\nclass Other:\n    def test_c(self): pass\n"
    )
    assert count_tests(src) == {"TestA": 4}


# --- hidden suite semantics (in-process) -----------------------------------------------------------


def test_reference_solution_passes_every_hidden_test(hidden, solution, hidden_root):
    outcomes = run_hidden(hidden, solution, hidden_root)
    assert len(outcomes) == 33 and all(outcomes.values()), [k for k, v in outcomes.items() if not v]


def test_missing_deliverables_fail_every_hidden_test(hidden, hidden_root):
    outcomes = run_hidden(hidden, {}, hidden_root)
    assert not any(outcomes.values())


def test_broken_config_fails_config_tests_only(hidden, solution, hidden_root):
    outcomes = run_hidden(hidden, {**solution, "config.py": "COLUMN_MAP = {\n"}, hidden_root)
    failed = {k for k, v in outcomes.items() if not v}
    assert any(k.startswith("TestConfigAccuracy") for k in failed)
    assert not any(k.startswith(("TestPlantedFindings", "TestNarrative")) for k in failed)


def _apply(files: dict[str, str], unit, solution: dict[str, str]) -> dict[str, str]:
    """``files`` with the unit's part of the reference solution spliced in (whole files when it names
    no symbols)."""
    out = dict(files)
    for path in unit.files:
        if unit.symbols:
            correct = get_symbols(solution[path], path)
            out[path] = splice(out.get(path, ""), path, {s: correct[s] for s in unit.symbols if s in correct})
        else:
            out[path] = solution[path]
    return out


def _topological(units):
    """Units in dependency order (dependencies outside ``units`` ignored)."""
    ids = {u.id for u in units}
    done, order = set(), []
    while len(order) < len(units):
        ready = [u for u in units if u.id not in done and set(u.deps) & ids <= done]
        assert ready, "work unit dependencies form a cycle"
        order.append(ready[0])
        done.add(ready[0].id)
    return order


def test_work_units_in_dependency_order_solve_the_task(task, hidden, solution, hidden_root):
    units = task.work_units()
    ids = {u.id for u in units}
    assert all(set(u.deps) <= ids for u in units)
    assert all(u.tests for u in units)
    files: dict[str, str] = {}
    for unit in _topological(units):
        files = _apply(files, unit, solution)
    assert json.loads(files["findings.json"]) == json.loads(solution["findings.json"])
    outcomes = run_hidden(hidden, files, hidden_root)
    assert all(outcomes.values()), [k for k, v in outcomes.items() if not v]


def test_the_hidden_unit_is_what_a_plan_from_the_description_misses(task, hidden, solution, hidden_root):
    units = task.work_units()
    hidden_units = [u for u in units if not u.visible]
    assert [u.id for u in hidden_units] == ["data_quality"]
    files: dict[str, str] = {}
    for unit in _topological([u for u in units if u.visible]):
        files = _apply(files, unit, solution)
    outcomes = run_hidden(hidden, files, hidden_root)
    failed = sorted(k for k, ok in outcomes.items() if not ok)
    assert failed == ["TestDataQuality::test_placeholder_declared"]
    assert "99" not in task.description and "placeholder value that column uses" in task.description


def test_the_fix_book_finds_the_task_by_its_description(task):
    from latte_lab.models.sim.fixbook import fix_book

    project = fix_book().project_for({}, task.description)
    assert set(project.start) == {"employee_data.csv", "test_suite.py"}
    assert set(project.solution) == {"config.py", "findings.json", "summary.txt"}


# --- wording robustness of the direction checks ----------------------------------------------------

NEGATIVE = [
    "Satisfaction is the strongest churn driver: the correlation is negative (r = -0.34).",
    "Employees with low satisfaction churn far more often.",
    "Churn is much higher among low-satisfaction employees (62% vs 32%).",
    "Lower satisfaction is associated with higher churn.",
    "Higher satisfaction scores go with lower attrition.",
    "Point-biserial correlation between var_01 and churned: -0.338",
    "More satisfied employees are less likely to churn.",
    "Dissatisfied staff are more likely to churn",
    "Higher satisfaction means better retention.",
    "Churn rate falls as satisfaction rises: 62.5% below 5 versus 31.9% at 5 or above.",
    "Satisfaction and churn are inversely related.",
    "Satisfaction is positively correlated with retention (r = 0.34).",
    "Improving satisfaction would have a positive effect: more satisfied staff churn less.",
]
POSITIVE = [
    "Satisfaction is positively correlated with churn (r = 0.34).",
    "Employees with high satisfaction churn more often.",
    "Higher satisfaction is associated with higher churn.",
    "Low satisfaction employees are less likely to leave.",
    "correlation between satisfaction and churn: 0.34",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_negative_wordings_are_read_as_negative(hidden, text):
    assert hidden.satisfaction_direction(text) == {"negative"}


@pytest.mark.parametrize("text", POSITIVE)
def test_positive_wordings_are_read_as_positive(hidden, text):
    assert "positive" in hidden.satisfaction_direction(text)


@pytest.mark.parametrize(
    "text",
    [
        "Sales has the highest churn rate (56.8%), Engineering the lowest (35.5%).",
        "Churn by department: Sales 56.8%, Support 52.3%, HR 40.0%, Engineering 35.5%",
        "churn rate: Engineering=0.355, HR=0.400, Sales=0.568, Support=0.523",
        "Churn is lowest in Engineering and highest in Sales",
        "The department with most churn is Sales; Engineering churns least.",
    ],
)
def test_department_extremes_read_right(hidden, text):
    claims = hidden.department_claims(text, list(generator.DEPARTMENTS))
    assert claims == {"highest": {"Sales"}, "lowest": {"Engineering"}}


def test_department_extremes_reversed_are_caught(hidden):
    claims = hidden.department_claims(
        "Engineering has the highest churn (56%) while Sales has the lowest (35%)", list(generator.DEPARTMENTS)
    )
    assert claims == {"highest": {"Engineering"}, "lowest": {"Sales"}}


@pytest.mark.parametrize(
    ("text", "bimodal"),
    [
        ("Salary is bimodal with two tiers around 42k and 88k", True),
        ("Salary shows two distinct clusters", True),
        ("salary (var_06) has two peaks", True),
        ("Pay follows a two-tier structure", True),
        ("salary is unimodal, roughly normal", False),
        ("Salary is not bimodal", False),
        ("Salary mean 61k, sd 25k", False),
    ],
)
def test_bimodality_wordings(hidden, text, bimodal):
    assert hidden.claims_bimodal(text) is bimodal


def test_summary_numbers_come_from_the_data(solution):
    truth = eda_pkg.planted()
    df = pd.read_csv(pd.io.common.StringIO(eda_pkg._data())).rename(columns=truth["column_map"])
    answered = df["satisfaction"] != truth["missing_values"]["satisfaction"]
    r = df.loc[answered, "satisfaction"].corr(df.loc[answered, "churned"])
    assert f"{r:.3f}" in solution["summary.txt"]
    sales = df.loc[df["dept"] == "Sales", "churned"].mean()
    assert f"{100 * sales:.1f}%" in solution["findings.json"]
    assert re.search(r"\b\d+ employee records\b", solution["summary.txt"])


def test_department_claims_ignore_head_counts_and_other_metrics(hidden):
    departments = list(generator.DEPARTMENTS)
    text = (
        "Churn by department: Sales (n=95) 56.8%, Support (n=109) 52.3%, HR (n=75) 40.0%, "
        "Engineering (n=121) 35.5%. HR has the lowest average salary."
    )
    assert hidden.department_claims(text, departments) == {"highest": {"Sales"}, "lowest": {"Engineering"}}

