"""The exec path of both backends: a fresh interpreter runs ``_child.py``, the run's reaper, which sets the limits,
starts the command and reports its exit status on a pipe (:func:`launch`, :class:`ReaperRun`).

The reaper is the leader of the run's process tree (a Linux child subreaper that ignores SIGTERM), so
every process the run leaves behind, even a double-forked ``setsid()`` daemon that scrubbed its
environment, stays below it until the parent stops the tree. The bubblewrap backend starts the same
reaper as the init of its PID namespace (``command``: bwrap's command line around it) and talks to it through
the same :class:`ReaperRun`.

What confines a local run besides the limits (:func:`confinement`): as root, a ``/tmp`` and ``/dev/shm`` of
its own, thrown away with it, what no untrusted run may see hidden (:mod:`latte_lab.sandbox.paths`), and a PID
namespace with a ``/proc`` of its own.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from latte_lab.sandbox.limits import SHM_BYTES, SandboxLimits
from latte_lab.sandbox.paths import CHILD_SCRIPT, PACKAGE_DIR, covered_dirs, hidden_paths, python_dirs
from latte_lab.sandbox.request import RunHandle
from latte_lab.sandbox.threads import readable

REAPER_EXIT_SECONDS = 0.5  # after a run's status: how long to wait for its reaper to exit
STATUS_MAX_BYTES = 2**16  # one status line


class ReaperRun(RunHandle):
    """A run started through ``_child.py``, with the part of ``subprocess.Popen`` the sandbox uses.

    ``pid`` is the tree's leader for :func:`~latte_lab.sandbox.process.stop_sandbox`; ``returncode``
    is the command's, from the reaper's status line (``report`` holds the rest of that line).
    """

    def __init__(self, popen: subprocess.Popen, status_fd: int, *, reaper_processes: int = 1,
                 control_fd: int | None = None, export_fd: int | None = None, namespace_init: bool = False):
        self.popen = popen
        self.namespace_init = namespace_init  # the reaper is the init of the run's own PID namespace
        self.pid = popen.pid
        self.stdout, self.stderr = popen.stdout, popen.stderr
        self.reaper_processes = reaper_processes  # processes of the tree that are not the run's own
        self.export_fd = export_fd
        self.report: dict = {}
        self.returncode: int | None = None
        self._status_fd: int | None = status_fd
        self._control_fd = control_fd
        self._buffer = b""

    def request_stop(self) -> None:
        """Ask the reaper to stop the run itself (end of file on its control pipe)."""
        if self._control_fd is not None:
            os.close(self._control_fd)
            self._control_fd = None

    def _close_status(self) -> None:
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None

    def _receive(self, timeout: float | None) -> None:
        if self.returncode is not None or self._status_fd is None:
            return
        if not readable(self._status_fd, timeout):
            return
        chunk = os.read(self._status_fd, STATUS_MAX_BYTES)
        self._buffer += chunk
        if b"\n" in self._buffer:
            try:
                self.report = json.loads(self._buffer.split(b"\n", 1)[0])
                self.returncode = os.waitstatus_to_exitcode(int(self.report["status"]))
            except (ValueError, KeyError, TypeError):
                self.returncode = -signal.SIGKILL
            if not self.report.get("orphans"):
                # The reaper exits right after reporting; wait for that so the kill step finds nothing.
                if readable(self._status_fd, REAPER_EXIT_SECONDS):
                    os.read(self._status_fd, STATUS_MAX_BYTES)
            self._close_status()
        elif not chunk:
            # End of file without a status: the reaper failed to start the run, or was killed with it.
            try:
                code = self.popen.wait(timeout=REAPER_EXIT_SECONDS)
            except subprocess.TimeoutExpired:
                code = None
            self.returncode = code if code is not None and code > 0 else -signal.SIGKILL
            self._close_status()

    @property
    def tree_empty(self) -> bool:
        """No process of the run is left: the reaper, a child subreaper, reported that it has no child left;
        or the reaper was the init of the run's PID namespace and the sandbox around it has exited (when a
        namespace's init exits, the kernel kills every process of the namespace before its parent reaps it)."""
        if self.report.get("orphans") is not False:
            return False
        if self.report.get("subreaper") is True:
            return True
        if not self.namespace_init:
            return False
        try:  # it exits right after its report (the workspace was handed back before it)
            self.popen.wait(timeout=REAPER_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            return False
        return True

    def poll(self) -> int | None:
        self._receive(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is not None:
            self._receive(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.popen.args, timeout)
        while self.returncode is None:
            self._receive(None)
        try:
            self.popen.wait(timeout=REAPER_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            pass  # still being stopped; the caller's process-tree kill reaps it
        return self.returncode

    def close(self) -> None:
        self.request_stop()
        self._close_status()
        if self.export_fd is not None:
            os.close(self.export_fd)
            self.export_fd = None


def private_tmp_possible() -> bool:
    """Whether a run may get a ``/tmp`` and ``/dev/shm`` of its own here (a mount namespace: Linux, as root; the
    run falls back to the host's when the kernel refuses one all the same)."""
    return sys.platform.startswith("linux") and os.geteuid() == 0


def confinement(root: Path, home: str, env: Mapping[str, str], limits: SandboxLimits, argv: Sequence[str], *,
                untrusted: bool = True) -> dict:
    """What ``_child.py`` confines a local run with besides the rlimits: ``private_tmp`` (see its
    ``private_tmp``), a ``/tmp`` capped at ``limits.tmp_bytes`` and a ``/dev/shm`` at :data:`SHM_BYTES`, both
    thrown away with the run, in which the host directories the run needs are bound back (the workspace, the
    interpreter and its packages, matplotlib's shared cache) and its HOME (``home``) is a new empty directory;
    for an ``untrusted`` run (anything but a judge's session), latte_lab's package and the judges' directory
    hidden (:func:`latte_lab.sandbox.paths.hidden_paths`), the project of an editable install and the folders of
    run directories covered but for the run's workspace and the interpreter
    (:func:`latte_lab.sandbox.paths.covered_dirs`), and a PID namespace with a ``/proc`` of its own.
    Empty where :func:`private_tmp_possible` says no: the run then writes to the host's ``/tmp`` and
    ``/dev/shm``, and only its HOME is private (capped by the parent's watch, removed after the run)."""
    if not private_tmp_possible():
        return {}
    tmp = os.path.realpath("/tmp")
    mpl = env.get("MPLCONFIGDIR")
    if mpl and os.path.realpath(mpl).startswith(tmp + "/"):
        os.makedirs(mpl, mode=0o700, exist_ok=True)  # the shared font cache: a run must find it, not make its own
    wanted = {str(root), *(p for p in (mpl, os.path.dirname(argv[0]) if argv and os.path.isabs(argv[0]) else None) if p)}
    keep: list[str] = []
    for path in sorted({os.path.realpath(p) for p in wanted} | set(_interpreter_dirs())):
        if path.startswith(tmp + "/") and os.path.isdir(path) and not any(path.startswith(k + "/") for k in keep):
            keep.append(path)
    spec = {"tmp": tmp, "keep": [os.path.relpath(p, tmp) for p in keep], "tmp_bytes": limits.tmp_bytes,
            "shm_bytes": SHM_BYTES}
    if untrusted:
        needed = [*python_dirs(), os.path.dirname(os.path.realpath(sys.executable)), PACKAGE_DIR]
        spec.update(cover=covered_dirs(root, needed), hide=hidden_paths(root), proc=True)
    if os.path.realpath(home).startswith(tmp + "/"):
        spec["home"] = home
    return {"private_tmp": spec}


@functools.cache
def _interpreter_dirs() -> tuple[str, ...]:
    """Real paths of what a run's interpreter reads: its installation, its packages, this package's scripts."""
    found = {*python_dirs(), os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(CHILD_SCRIPT)}
    found.update(p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p))
    return tuple(sorted(os.path.realpath(p) for p in found))


def launch(argv: Sequence[str], cwd: Path, env: Mapping[str, str], config: dict, *, command: Sequence[str] | None = None,
           control: bool = False, export: bool = False, reaper_processes: int = 1, stdin: int | None = None) -> ReaperRun:
    """Start ``_child.py`` with ``config`` (limits and options) to run ``argv`` in ``cwd``.

    ``command`` replaces the default ``python -I -S _child.py <config> -- argv`` (the bubblewrap
    backend wraps it); ``control`` and ``export`` open the stop and workspace pipes of that backend;
    ``stdin``: a descriptor for the run's standard input (``/dev/null`` when None).
    """
    status_r, status_w = os.pipe()
    passed, mine = [status_w], []
    config = {**config, "status_fd": status_w}
    control_w = export_r = None
    if control:
        control_r, control_w = os.pipe()
        passed.append(control_r)
        config["control_fd"] = control_r
    if export:
        export_r, export_w = os.pipe()
        passed.append(export_w)
        config["export_fd"] = export_w
    mine = [fd for fd in (status_r, control_w, export_r) if fd is not None]
    if command is None:
        command = [sys.executable, "-I", "-S", CHILD_SCRIPT, json.dumps(config), "--", *argv]
    else:
        command = [*command, json.dumps(config), "--", *argv]
    try:
        popen = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            pass_fds=passed,
        )
    except BaseException:
        for fd in (*passed, *mine):
            os.close(fd)
        raise
    for fd in passed:
        os.close(fd)
    if (config.get("private_tmp") or {}).get("proc"):
        reaper_processes += 1  # the init of the run's own PID namespace, between the reaper and the command
    return ReaperRun(popen, status_r, reaper_processes=reaper_processes, control_fd=control_w, export_fd=export_r,
                     namespace_init=bool(config.get("pid1")))
