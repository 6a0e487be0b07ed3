"""No process that runs agent or workspace code can read a task's reference solution, hidden tests or planted
data (latte_lab/sandbox/paths.py): searched for from an agent's script and from workspace code inside a hidden
evaluation, on both backends, by latte_lab.tasks.hidden_search (sys.path, .pth lines, editable finders,
site-packages, /proc/*/cwd and /proc/*/root). This checkout is an editable install; tests/package/test_wheel_install.py
runs the same search from a wheel install."""

from __future__ import annotations

import json
import os
from pathlib import Path

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


def test_a_local_run_sees_no_other_trials_directory_nor_the_project(tmp_path):
    """Other trials' run directories (a finished workspace may hold a solution; every record holds replies) and an
    editable install's project (its runs/) are covered for a local run, but for its own workspace and the
    interpreter. The folders lie outside /tmp, which every local run has of its own anyway."""
    import shutil
    import sys
    import tempfile

    from latte_lab.sandbox import paths
    from latte_lab.sandbox.request import RunRequest
    from latte_lab.sandbox.run import run_sandboxed

    _hiding_possible("local")
    places = [Path(tempfile.mkdtemp(prefix=".latte_lab-test-runs-", dir=Path.home()))]
    if paths.project_dir():
        places.append(Path(tempfile.mkdtemp(prefix=".latte_lab-test-runs-", dir=paths.project_dir())))
    try:
        for runs in places:
            done = runs / "debug-latte-s0" / "workspace"
            done.mkdir(parents=True)
            (done / "solution.py").write_text("ANSWER = 42\n")
            (done.parent / "calls.jsonl").write_text("{}\n")
            mine = runs / "debug-latte-s1" / "workspace"
            mine.mkdir(parents=True)
            (mine / "mine.txt").write_text("mine\n")
            paths.note_runs_dir(runs)
            probe = ("import json, os, sys\n"
                     f"runs = {str(runs)!r}\n"
                     "print(json.dumps({'other': os.path.exists(os.path.join(runs, 'debug-latte-s0/workspace/solution.py')),"
                     " 'listing': sorted(os.listdir(runs)), 'mine': open('mine.txt').read(),"
                     f" 'package': os.path.isdir({paths.PACKAGE_DIR!r}), 'tasks': os.listdir({paths.TASKS_DIR!r})}}))\n")
            run = run_sandboxed(RunRequest([sys.executable, "-c", probe], mine, timeout=60), sandbox="local")
            assert run.returncode == 0, run.stderr
            seen = json.loads(run.stdout.strip().splitlines()[-1])
            assert seen == {"other": False, "listing": ["debug-latte-s1"], "mine": "mine\n", "package": True,
                            "tasks": []}
            assert (done / "solution.py").read_text() == "ANSWER = 42\n"  # the host's copy is untouched
    finally:
        for runs in places:
            shutil.rmtree(runs, ignore_errors=True)
