"""Where the sandbox's own files lie on the host and inside a bubblewrap sandbox, what a run's interpreter needs of
the host, and what no process that runs agent or workspace code may read. The one home of these paths: both
backends and the fork servers' clients import them from here.

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
import site
import sys
import tempfile
from pathlib import Path

import latte_lab

PACKAGE_DIR = os.path.realpath(os.path.dirname(latte_lab.__file__))
TASKS_DIR = os.path.join(PACKAGE_DIR, "tasks")
JUDGE_ROOT_PREFIX = "latte_lab-judges-"

# The sandbox's scripts on the host, started by path (a workspace can never shadow them).
HERE = os.path.dirname(os.path.abspath(__file__))
CHILD_SCRIPT = os.path.join(HERE, "_child.py")  # every run's reaper (and a bubblewrap sandbox's init)
FORK_SERVER_SCRIPT = os.path.join(HERE, "_zygote_server.py")  # the fork server of test runs and scripts
TRUSTED_SERVER_SCRIPT = os.path.join(HERE, "_trusted_server.py")  # the fork server of hidden evaluations' judges
SANDBOX_SERVER_SCRIPT = os.path.join(HERE, "_sandbox_server.py")  # a kept bubblewrap sandbox's init
# What a kept sandbox's init reads, bound into the sandbox read-only (every script it loads by path)
SANDBOX_SERVER_FILES = ("_sandbox_server.py", "_server_core.py", "_script_run.py", "_pytest_warm.py", "_child.py",
                        "_init_files.py")
INIT_FILES_SCRIPT = os.path.join(HERE, "_init_files.py")  # what _child.py loads as a sandbox's init

# Inside a bubblewrap sandbox.
SANDBOX_DIR = "/run/latte_lab"  # where the run's own files appear
CHILD_PATH = f"{SANDBOX_DIR}/child.py"  # CHILD_SCRIPT, in a one-off sandbox
INIT_FILES_PATH = f"{SANDBOX_DIR}/_init_files.py"  # INIT_FILES_SCRIPT, beside it
SERVER_DIR = f"{SANDBOX_DIR}/server"  # SANDBOX_SERVER_FILES, in a kept sandbox
INPUT_PATH = f"{SANDBOX_DIR}/workspace"  # the workspace's files at the start of the run, read-only
MPL_INPUT_PATH = f"{SANDBOX_DIR}/mplconfig"  # the host's matplotlib cache (fonts), read-only
TMP_PATH = "/tmp"  # the sandbox's own, a size-capped tmpfs: the run's HOME and TMPDIR
MPL_PATH = f"{TMP_PATH}/matplotlib"
# What of the host's matplotlib directory a run gets: its font cache, which takes a second to build; nothing
# else (local runs share that directory and may leave anything there, which a bwrap run would copy every time)
MPL_CACHE_FILES = "fontlist-*.json"

# The host's system directories, bound read-only into a bubblewrap sandbox (a Python installation below them needs
# no bind of its own).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def python_dirs() -> list[str]:
    """Directories a run's interpreter needs: its prefixes and site-packages (never the project itself), outside
    :data:`SYSTEM_DIRS`."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found.add(str(Path(os.path.realpath(sys.executable)).parent.parent))
    found.update(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
        found.add(site.getusersitepackages())
    dirs = sorted({os.path.realpath(d) for d in found if os.path.isdir(d)} | {d for d in found if os.path.isdir(d)})
    return [d for d in dirs if not d.startswith(tuple(s + "/" for s in SYSTEM_DIRS))]


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
