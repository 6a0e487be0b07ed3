"""The task registry and the contract every built-in task must keep.

Parametrized over ``ll.tasks.names()``, so every task package present in the tree is covered as soon
as it lands (eda and textproc are written separately from debug).
"""

from __future__ import annotations

import pytest

import latte_lab as ll
from latte_lab.errors import LatteError, TaskError, WorkspaceError
from latte_lab.tasks import Task
from latte_lab.workspace import Workspace

ALIASES = {"debug_sprint": "debug", "simple_eda": "eda"}  # the released code's names
TASK_NAMES = ll.tasks.names()


def test_names_lists_registered_builtins_sorted():
    names = ll.tasks.names()
    assert names == sorted(names)
    assert "debug" in names
    for name in names:
        assert isinstance(ll.tasks.get(name), Task)
        assert ll.tasks.get(name).id == name


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(TaskError) as info:
        ll.tasks.get("nope")
    assert isinstance(info.value, LatteError)
    message = str(info.value)
    assert "'nope'" in message
    for name in ll.tasks.names():
        assert name in message


@pytest.mark.parametrize("alias,task_id", sorted(ALIASES.items()))
def test_official_names_are_aliases(alias, task_id):
    if task_id not in TASK_NAMES:
        pytest.skip(f"task {task_id!r} is not in this tree yet")
    task = ll.tasks.get(alias)
    assert task.id == task_id and task.official_name == alias


@pytest.mark.parametrize("name", TASK_NAMES)
def test_task_declares_its_contract(name):
    task = ll.tasks.get(name)
    assert task.title and task.description and task.success_criteria
    assert task.official_name and task.default_max_rounds > 0
    assert task.public_tests and task.test_args
    assert task.accuracy_metric in ("hidden_pass_rate", "success")
    units = task.work_units()
    ids = {u.id for u in units}
    assert len(ids) == len(units)
    assert all(set(u.deps) <= ids for u in units)
    assert set(task.reference_solution()) <= set(task.required_outputs) | {f for u in units for f in u.files}


@pytest.mark.parametrize("name", TASK_NAMES)
def test_setup_is_deterministic_and_protects_public_tests(name, tmp_path):
    task = ll.tasks.get(name)
    first, second = Workspace(tmp_path / "a"), Workspace(tmp_path / "b")
    task.setup(first)
    task.setup(second)
    assert first.snapshot_files() == second.snapshot_files()
    assert first.list_files() == second.list_files()
    assert first.test_args == task.test_args
    assert first.writes == []  # setup is not an agent edit
    for path in task.public_tests:
        assert first.exists(path)
        with pytest.raises(WorkspaceError):
            first.write(path, "# overwritten\n", agent="Dev1")


@pytest.mark.parametrize("name", TASK_NAMES)
def test_reference_solution_passes_public_and_hidden_suites(name, tmp_path):
    task = ll.tasks.get(name)
    ws = Workspace(tmp_path / "ws")
    task.setup(ws)
    for path, text in task.reference_solution().items():
        ws.write(path, text, agent="Reference")
    public = ws.run_tests()
    assert public.ok and public.failed == 0 and public.errors == 0 and public.passed > 0, public.stdout
    result = task.evaluate(ws)
    assert result.missing_outputs == ()
    assert result.total > 0 and result.rate == 1.0, result.output
    assert all(ok == total for ok, total in result.per_class.values())
    assert sum(total for _, total in result.per_class.values()) == result.total
