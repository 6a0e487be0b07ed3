"""The debug task: planted bugs, public suite, reference solution, work units and evaluation.

Most checks run the public suite in-process (``run_suite`` below executes the suite's test methods
against a module built from source text), so the many variants stay fast; a few run the real pytest
subprocess through ``task.evaluate`` / ``ws.run_tests`` to check the plumbing end to end.
"""

from __future__ import annotations

import sys
import types

import pytest

import latte_lab as ll
from latte_lab.errors import TaskError, WorkspaceError
from latte_lab.sandbox import outcomes_by_class, parse_junit
from latte_lab.tasks.debug import (
    CHECK_ONLY_PREFIX,
    COMPOSITES,
    HIDDEN_COMPOSITE_BUGS,
    LEAVES,
    MODULE,
    TEST_FILE,
    is_check_only,
    top_level_defs,
)
from latte_lab.tasks.suite import count_tests as suite_classes
from latte_lab.tasks.suite import score
from latte_lab.workspace import Workspace, extract_symbols

EXPECTED_CLASSES = {
    "TestNormalize": 4,
    "TestMovingAverage": 3,
    "TestRms": 3,
    "TestFindPeaks": 4,
    "TestLinearDetrend": 3,
    "TestAutocorrelation": 3,
    "TestZeroCrossings": 4,
    "TestDownsample": 3,
    "TestBandEnergy": 2,
    "TestSmoothDetrend": 2,
    "TestPeakRate": 2,
}


@pytest.fixture(scope="module")
def task():
    return ll.tasks.get("debug")


@pytest.fixture(scope="module")
def start(task):
    return task.starting_files()[MODULE]


@pytest.fixture(scope="module")
def solution(task):
    return task.reference_solution()[MODULE]


@pytest.fixture(scope="module")
def suite(task):
    return task.starting_files()[TEST_FILE]


def run_suite(module_source: str, suite_source: str) -> dict[str, bool]:
    """Run every test method of the suite against ``module_source``: {"Class::test": passed}.

    The module is built fresh from text and bound as ``signal_toolkit`` only while the suite's
    namespace is created, so variants never leak into each other.
    """
    module = types.ModuleType("signal_toolkit")
    exec(compile(module_source, MODULE, "exec"), module.__dict__)  # noqa: S102 - the variant under test
    saved = sys.modules.get("signal_toolkit")
    sys.modules["signal_toolkit"] = module
    try:
        namespace: dict = {"__name__": "test_suite"}
        exec(compile(suite_source, TEST_FILE, "exec"), namespace)  # noqa: S102 - the public suite
    finally:
        if saved is None:
            del sys.modules["signal_toolkit"]
        else:
            sys.modules["signal_toolkit"] = saved
    results = {}
    for cls_name in suite_classes(suite_source):
        cls = namespace[cls_name]
        for attr in sorted(vars(cls)):
            if attr.startswith("test"):
                try:
                    getattr(cls(), attr)()
                except Exception:  # noqa: BLE001 - any exception is a failing test
                    results[f"{cls_name}::{attr}"] = False
                else:
                    results[f"{cls_name}::{attr}"] = True
    return results


def failing_classes(results: dict[str, bool]) -> set[str]:
    return {key.split("::")[0] for key, ok in results.items() if not ok}


def splice(source: str, replacements: dict[str, str]) -> str:
    """Replace each named top-level def of ``source`` by new source, the way the simulated model
    patches a file: locate the symbol with the workspace's ``extract_symbols`` and swap its text."""
    current = extract_symbols(source, MODULE)
    for name, new in replacements.items():
        old = current[name]
        assert source.count(old) == 1, f"{name} is not uniquely locatable"
        source = source.replace(old, new)
        current = extract_symbols(source, MODULE)
    return source


def apply_units(task, units, start: str) -> str:
    """Apply units in the given order to the starting module; check-only units change nothing."""
    solution_defs = extract_symbols(task.reference_solution()[MODULE], MODULE)
    text = start
    for unit in units:
        if is_check_only(unit):
            continue
        text = splice(text, {s: solution_defs[s] for s in unit.symbols})
    return text


def dependency_order(units):
    done, ordered, pending = set(), [], list(units)
    while pending:
        ready = [u for u in pending if set(u.deps) <= done]
        assert ready, f"cycle among {[u.id for u in pending]}"
        for u in ready:
            ordered.append(u)
            done.add(u.id)
            pending.remove(u)
    return ordered


# -- attributes and files ------------------------------------------------------------------------


def test_task_attributes(task):
    assert task.id == "debug" and task.official_name == "debug_sprint"
    assert ll.tasks.get("debug_sprint").id == "debug"
    assert task.accuracy_metric == "success"
    assert task.default_max_rounds == 40
    assert task.public_tests == (TEST_FILE,) and task.test_args == (TEST_FILE,)
    assert task.required_outputs == (MODULE,)
    assert task.public_test_command == ["python", "-m", "pytest", "-q", TEST_FILE]


def test_suite_has_the_papers_shape(suite):
    assert suite_classes(suite) == EXPECTED_CLASSES
    assert sum(EXPECTED_CLASSES.values()) == 33


def test_description_names_every_function_and_the_rules(task, solution):
    for name in top_level_defs(solution):
        assert f"{name}(" in task.description
    assert TEST_FILE in task.description and MODULE in task.description
    assert "33" in task.description and "read-only" in task.description
    assert "33" in task.success_criteria


def test_start_differs_from_solution_in_the_eight_leaves_and_two_composites(start, solution):
    before, after = top_level_defs(start), top_level_defs(solution)
    assert list(before) == list(after)
    changed = [name for name in before if before[name] != after[name]]
    hidden = [name for name, _ in HIDDEN_COMPOSITE_BUGS]
    assert changed == [name for name, *_ in LEAVES] + hidden
    assert all(before[name] == after[name] for name, *_ in COMPOSITES if name not in hidden)


def test_task_files_are_never_collected_by_the_project_pytest_run():
    from importlib import resources

    root = resources.files("latte_lab.tasks.debug")
    shipped = [p.name for d in ("files", "solution") for p in root.joinpath(d).iterdir()]
    assert shipped and all(name.endswith(".py.txt") for name in shipped)


# -- the planted bugs, in-process ------------------------------------------------------------------


def test_starting_module_fails_every_test(start, suite):
    results = run_suite(start, suite)
    assert len(results) == 33
    assert failing_classes(results) == set(EXPECTED_CLASSES)
    assert not any(results.values()), "every test of the 11 classes must fail at the start"


def test_reference_solution_passes_every_test(solution, suite):
    results = run_suite(solution, suite)
    assert len(results) == 33 and all(results.values())


@pytest.mark.parametrize("leaf", [name for name, *_ in LEAVES])
def test_fixing_one_leaf_passes_exactly_its_class(leaf, start, solution, suite):
    fixed = splice(start, {leaf: extract_symbols(solution, MODULE)[leaf]})
    cls = {name: c for name, c, *_ in LEAVES}[leaf]
    assert failing_classes(run_suite(fixed, suite)) == set(EXPECTED_CLASSES) - {cls}


@pytest.mark.parametrize("composite,cls,calls", COMPOSITES)
def test_composite_waits_for_each_of_its_leaves(composite, cls, calls, start, solution, suite):
    """Dependencies are real: with every leaf fixed but one the composite calls, its class fails."""
    solution_defs = extract_symbols(solution, MODULE)
    for held_back in calls:
        text = splice(start, {name: solution_defs[name] for name, *_ in LEAVES if name != held_back})
        assert cls in failing_classes(run_suite(text, suite)), f"{cls} passes with {held_back} still buggy"


# -- work units ----------------------------------------------------------------------------------


def test_work_units_are_well_formed(task, solution, suite):
    units = task.work_units()
    ids = [u.id for u in units]
    assert len(ids) == len(set(ids)) == 13
    defs = extract_symbols(solution, MODULE)
    node_prefixes = {f"{TEST_FILE}::{cls}::" for cls in EXPECTED_CLASSES}
    for unit in units:
        assert unit.files in ((MODULE,), ()) and unit.effort > 0
        assert set(unit.deps) <= set(ids)
        assert unit.tests and all(any(t in p for p in node_prefixes) for t in unit.tests)
        assert all(s in defs for s in unit.symbols)
    dependency_order(units)  # acyclic
    leaves = [u for u in units if u.symbols and u.visible]
    assert sorted(s for u in leaves for s in u.symbols) == sorted(name for name, *_ in LEAVES)
    assert all(not u.deps for u in leaves)
    hidden = [u for u in units if not u.visible]
    assert sorted(s for u in hidden for s in u.symbols) == sorted(name for name, _ in HIDDEN_COMPOSITE_BUGS)
    assert all(u.deps and not u.id.startswith("check-") for u in hidden)


def test_check_only_units_are_flagged_and_write_nothing(task):
    checks = [u for u in task.work_units() if not u.symbols]
    assert [u.id for u in checks] == [f"check-{name}" for name, *_ in COMPOSITES]
    for unit in checks:
        assert is_check_only(unit) and unit.files == () and unit.visible
        assert unit.description.startswith(CHECK_ONLY_PREFIX)
        assert unit.effort < min(u.effort for u in task.work_units() if u.symbols)
    assert not any(is_check_only(u) for u in task.work_units() if u.symbols)


def test_applying_every_unit_in_dependency_order_passes_everything(task, start, suite):
    text = apply_units(task, dependency_order(task.work_units()), start)
    results = run_suite(text, suite)
    assert len(results) == 33 and all(results.values())


def test_hidden_composite_bugs_show_only_once_their_leaves_are_fixed(task, start, suite):
    """Before the leaves are fixed the composite's tests fail anyway; after, they still fail, for the
    composite's own bug: the visible plan (leaves and checks) leaves exactly those tests red."""
    units = dependency_order(task.work_units())
    visible = apply_units(task, [u for u in units if u.visible], start)
    results = run_suite(visible, suite)
    failing = failing_classes(results)
    hidden = [u for u in units if not u.visible]
    assert failing == {t for u in hidden for t in u.tests}
    for unit in hidden:
        alone = apply_units(task, [unit], start)  # the composite fixed, its leaves still broken
        assert set(unit.tests) <= failing_classes(run_suite(alone, suite))


# -- scoring -----------------------------------------------------------------------------------


def test_score_counts_tests_that_never_ran_as_errors():
    outcomes = {"TestRms": {"test_a": "passed", "test_b": "failed"}, "TestFoo": {"test_c": "skipped"}}
    res = score({"TestRms": 3, "TestFoo": 1}, outcomes, (MODULE,), "out", skipped_as="error")
    assert (res.passed, res.failed, res.errors, res.total) == (1, 1, 2, 4)
    assert res.per_class == {"TestRms": (1, 3), "TestFoo": (0, 1)}
    assert res.missing_outputs == (MODULE,)


def test_parse_junit_reads_outcomes_per_class():
    xml = """<testsuites><testsuite>
      <testcase classname="test_suite.TestRms" name="test_a" file="test_suite.py"/>
      <testcase classname="test_suite.TestRms" name="test_b" file="test_suite.py"><failure message="x"/></testcase>
      <testcase classname="test_suite.TestRms" name="test_c" file="test_suite.py"><failure/><error/></testcase>
      <testcase classname="test_suite.TestDownsample" name="test_d" file="test_suite.py"><skipped/></testcase>
      <testcase classname="" name="test_suite" file="test_suite.py"><error message="collection failure"/></testcase>
    </testsuite></testsuites>"""
    assert outcomes_by_class(parse_junit(xml)) == {
        "TestRms": {"test_a": "passed", "test_b": "failed", "test_c": "error"},
        "TestDownsample": {"test_d": "skipped"},
        "test_suite": {"test_suite.py": "error"},
    }


# -- end to end through the workspace and pytest ------------------------------------------------


@pytest.fixture
def ws(task, tmp_path):
    workspace = Workspace(tmp_path / "ws")
    task.setup(workspace)
    return workspace


def test_setup_writes_the_starting_files_and_protects_the_suite(task, ws):
    assert ws.list_files() == sorted([MODULE, TEST_FILE])
    assert ws.test_args == (TEST_FILE,)
    assert ws.read(MODULE) == task.starting_files()[MODULE]
    with pytest.raises(WorkspaceError):
        ws.write(TEST_FILE, "def test_nothing():\n    pass\n", agent="Dev1")


def test_evaluate_starting_workspace_fails_all_33(task, ws):
    res = task.evaluate(ws)
    assert (res.passed, res.total) == (0, 33)
    assert res.per_class == {cls: (0, n) for cls, n in EXPECTED_CLASSES.items()}
    assert res.missing_outputs == ()
    run = ws.run_tests()
    assert run.failed == 33 and not run.ok
    assert {node.split("::")[1] for node in run.failed_tests} == set(EXPECTED_CLASSES)


def test_evaluate_partial_fix_scores_per_class(task, ws, start, solution):
    fixed = splice(start, {name: extract_symbols(solution, MODULE)[name] for name in ("rms", "downsample")})
    ws.write(MODULE, fixed, agent="Dev1")
    res = task.evaluate(ws)
    assert res.passed == 6 and res.failed == 27 and res.errors == 0
    assert res.per_class["TestRms"] == (3, 3) and res.per_class["TestDownsample"] == (3, 3)
    assert res.per_class["TestPeakRate"] == (0, 2)


def test_evaluate_reference_solution_is_a_success(task, ws):
    for path, text in task.reference_solution().items():
        ws.write(path, text, agent="Dev1")
    res = task.evaluate(ws)
    assert (res.passed, res.failed, res.errors, res.rate) == (33, 0, 0, 1.0)
    assert ws.run_tests().ok
    assert TEST_FILE in ws.list_files()  # evaluation never touches the workspace
    assert ws.read(TEST_FILE) == task.starting_files()[TEST_FILE]


def test_evaluate_ignores_a_conftest_that_would_hide_failures(task, ws):
    ws.write("conftest.py", "collect_ignore = ['test_suite.py']\n", agent="Dev1")
    res = task.evaluate(ws)
    assert (res.passed, res.total) == (0, 33)


def test_evaluate_syntax_error_and_missing_module(task, ws):
    ws.write(MODULE, "def broken(:\n", agent="Dev1")
    res = task.evaluate(ws)
    assert (res.passed, res.errors, res.total) == (0, 33, 33)
    (ws.root / MODULE).unlink()
    res = task.evaluate(ws)
    assert res.missing_outputs == (MODULE,) and res.passed == 0 and res.total == 33


def test_missing_package_file_raises_task_error():
    from latte_lab.tasks import debug

    debug._resource.cache_clear()
    try:
        with pytest.raises(TaskError, match="reinstall"):
            debug._resource("files/no_such_file.txt")
    finally:
        debug._resource.cache_clear()
