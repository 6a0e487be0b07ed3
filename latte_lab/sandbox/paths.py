"""Where the sandbox's own files lie on the host, and what no process that runs agent or workspace code may read.

Hidden from every such run (:func:`hidden_paths`), on both backends and for every install: latte_lab's task
folders (:data:`TASKS_DIR`: the tasks' reference solutions, hidden tests and planted data; in an editable install
the project's ``latte_lab/tasks/``, in a wheel install ``site-packages/latte_lab/tasks/``), and the directory where
the judges of hidden evaluations keep their tests and the data they read (:func:`judge_root`). The bubblewrap
backend never binds the judges' directory and covers the task folders with an empty file system wherever it
binds the directory that holds them (:func:`latte_lab.sandbox.bwrap.hiding_args`); the local backend, as root, covers both in the run's
own mount namespace and gives the run a PID namespace and a ``/proc`` of its own, so that no ``/proc/<pid>/root``
or ``/cwd`` of another process leads back to them (``_child.private_tmp``). The local backend as another user
cannot hide a file from that user: see the README's list of what it does not stop.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import latte_lab

PACKAGE_DIR = os.path.realpath(os.path.dirname(latte_lab.__file__))
TASKS_DIR = os.path.join(PACKAGE_DIR, "tasks")
JUDGE_ROOT_PREFIX = "latte_lab-judges-"


def judge_root() -> str:
    """The directory (this user's, mode 0700) under which each hidden evaluation's judge gets a directory of
    its own; made on first use."""
    root = os.path.join(os.path.realpath(tempfile.gettempdir()), f"{JUDGE_ROOT_PREFIX}{os.getuid()}")
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    return root


def hidden_paths(cwd: Path | str) -> list[str]:
    """Real paths an untrusted run in ``cwd`` must not see (none that holds ``cwd`` itself)."""
    here = os.path.realpath(cwd)
    paths = [TASKS_DIR, judge_root()]
    return [p for p in paths if os.path.exists(p) and here != p and not here.startswith(p + os.sep)]
