"""The task registry and the contract every registered task must keep (parametrized over
``ll.tasks.names()``, so a registered task of one's own is held to it too)."""

from __future__ import annotations

import pytest

import latte_lab as ll
from latte_lab.config import TASK_ALIASES
from latte_lab.errors import LatteError, TaskError, WorkspaceError
from latte_lab.tasks import Task
from latte_lab.workspace import Workspace

TASK_NAMES = ll.tasks.names()


def test_names_list_the_builtins_first():
    names = ll.tasks.names()
    assert names[:3] == ["debug", "eda", "textproc"]
    for name in names:
        assert isinstance(ll.tasks.get(name), Task)
        assert ll.tasks.get(name).id == name
        assert ll.tasks.get(name) is not ll.tasks.get(name)  # a fresh instance per lookup


def test_user_task_registration_errors_are_clear():
    with pytest.raises(ll.ConfigError, match="already registered"):
        ll.tasks.register("debug")(type("Other", (Task,), {}))
    with pytest.raises(ll.ConfigError, match="alias of task 'debug'"):
        ll.tasks.register("debug_sprint")(type("Other", (Task,), {}))
    with pytest.raises(ll.ConfigError, match="non-empty name"):
        ll.tasks.register(type("Nameless", (Task,), {}))


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(TaskError) as info:
        ll.tasks.get("nope")
    assert isinstance(info.value, LatteError)
    message = str(info.value)
    assert "'nope'" in message
    for name in ll.tasks.names():
        assert name in message


@pytest.mark.parametrize("alias,task_id", sorted(TASK_ALIASES.items()))
def test_official_names_are_aliases(alias, task_id):
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
