"""No process that runs agent or workspace code can read a task's reference solution, hidden tests or planted
data (latte_lab/sandbox/paths.py): searched for from an agent's script and from workspace code inside a hidden
evaluation, on both backends, by latte_lab.tasks.hidden_search (sys.path, .pth lines, editable finders,
site-packages, /proc/*/cwd and /proc/*/root). This checkout is an editable install; tests/package/test_wheel_install.py
runs the same search from a wheel install."""

from __future__ import annotations

import os

import pytest
from sandbox_helpers import BACKENDS

from latte_lab.sandbox import local
from latte_lab.tasks import hidden_search

pytestmark = pytest.mark.slow  # each search walks site-packages and the project: seconds per backend


def _hiding_possible(backend: str) -> None:
    if backend == "local" and not local.private_tmp_possible():
        pytest.skip("the local backend hides files from a run only as root (a mount namespace); as another user a "
                    "run reads what that user can: the README's list of what the local backend does not stop")


def test_the_search_finds_the_material_where_it_is_readable(monkeypatch):
    """On the host, and from a local run with the hiding switched off, the search finds the material: so an
    empty result below means hidden, not a search that cannot find."""
    assert len(hidden_search.search_here()) >= 20
    if local.private_tmp_possible():
        monkeypatch.setattr(local, "hidden_paths", lambda cwd: [])
        assert hidden_search.search_from_script("local")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_agents_script_finds_nothing(backend):
    _hiding_possible(backend)
    assert hidden_search.search_from_script(backend) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_workspace_code_in_a_hidden_evaluation_finds_nothing(backend):
    _hiding_possible(backend)
    assert hidden_search.search_from_evaluation(backend) == []


def test_the_material_is_the_tasks_own():
    wanted = hidden_search.hidden_material()
    assert sum(len(d) for d in wanted.values()) >= 15  # 18 today: solutions, hidden suites, planted data
    assert os.path.basename(hidden_search.places()[0]) == "tasks"
