"""Warm bubblewrap sandboxes, the bubblewrap backend's fast path: test runs and scripts, each forked inside one
sandbox kept by the process (client side; the sandbox's init is ``_sandbox_server.py``, over the fork servers'
shared core ``_server_core.py``).

A one-off bubblewrap sandbox per test run costs a fresh interpreter that imports pytest (about 250 ms of the
350 ms such a run takes here); a simulated trial makes twenty or more of them. A warm sandbox is started on
a process's first test run and kept: its init has imported pytest once, and every later run of a
workspace's public suite is a child forked from it, as from the local backend's fork server
(:mod:`latte_lab.sandbox.zygote`).

What a run sees is what a one-off sandbox shows (:mod:`latte_lab.sandbox.bwrap`): the same namespaces,
read-only system, missing network, size-capped tmpfs workspace and ``/tmp``, no capabilities, and the same
per-run environment (with the ``PWD`` bwrap sets) and rlimits, and the same process cap (the sandbox runs in a
pids cgroup of its own, whose cap is set before each run to the sandbox's own processes plus the run's). Before
each run the init kills whatever an earlier run left, removes its System V IPC objects, empties the workspace, ``/tmp`` and ``/dev/shm``, and
copies the host's workspace in again; after it, it kills every process the run left and hands the workspace
back as a one-off sandbox does (docs/concepts/sandbox.md reviews what one run could leave for the next, with a
probe for each item in tests/sandbox/test_sandbox_reuse_probes.py). The differences, none visible to a task's suite: in test runs pytest is
imported before the run starts (as with the fork server), ``/proc/1/cmdline`` names this init rather than
``_child.py``, process ids grow from run to run, and a test run's directory is the process's stage
(under ``/var/tmp``) rather than its workspace's, which its output is shown with instead. (The kernel's user keyring is shared by every
bubblewrap sandbox of the user, one-off or warm alike: see :mod:`latte_lab.sandbox.bwrap`.)

Which runs (a request with ``reuse``, :class:`~latte_lab.sandbox.request.RunRequest`): a workspace's own pytest
runs, each in this process's public staging directory, which holds exactly that workspace's files during the run,
so that one sandbox serves every workspace of the process in turn (:mod:`latte_lab.sandbox.stage`; a run that
finds the stage taken runs in its workspace's directory, in a sandbox kept for that workspace);
and agents' ``python <script>`` runs, in the same staging directory (one run at a time), in a second sandbox
kept by the process whose init imports nothing for them (each run starts from the modules a fresh interpreter has, as with the local script fork
server). A hidden suite runs
in a copy of the workspace in this process's one staging directory (its scratch directory), whose sandbox serves
every hidden run of the process: no sandbox an agent's run is forked in ever holds a hidden file, and no sandbox is
sent a workspace's file ahead of its run. One run at a time per sandbox (a second run at once takes a one-off sandbox). The host's workspace
directory is bound into the sandbox when
it starts; a directory replaced since (same path, another inode) gets a new sandbox.

Lifetime: at most :data:`MAX_SANDBOXES` per process (the least recently used is stopped first); a trial
stops its workspace's own sandboxes when it ends (:func:`release`; the staged ones stay for the process's
next trial), and every one stops at exit or when this
process dies (end of file on its control socket ends the init, and the kernel ends its namespace). Not
started with ``--die-with-parent``, which would tie the sandbox to the thread that happened to start it.

Fallback: if a warm sandbox cannot start or stops answering, the run takes a one-off sandbox (a
``RuntimeWarning`` once per process); after :data:`MAX_START_FAILURES` failed starts the process stays on
one-off sandboxes. ``USE_WARM = False`` or ``LATTE_LAB_NO_WARM_SANDBOX=1`` turns warm sandboxes off.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

import latte_lab.sandbox.bwrap as bwrap
import latte_lab.sandbox.zygote as zygote
from latte_lab.sandbox.limits import SandboxLimits
from latte_lab.sandbox.paths import (
    HERE,
    INPUT_PATH,
    MPL_CACHE_FILES,
    MPL_INPUT_PATH,
    MPL_PATH,
    SANDBOX_SERVER_FILES,
    SERVER_DIR,
    TMP_PATH,
)
from latte_lab.sandbox.process import PidsCgroup, count_processes, stop_sandbox
from latte_lab.sandbox.request import RunRequest

USE_WARM = True
WARM_DISABLE_VAR = "LATTE_LAB_NO_WARM_SANDBOX"  # =1 in the environment turns warm sandboxes off
MAX_SANDBOXES = 4  # live warm sandboxes per process (a test sandbox holds about 35 MB, a script one 15 MB)
MAX_START_FAILURES = 3
CLOSE_SECONDS = 2.0  # after end of file on its control socket: how long the sandbox may take to end
MODES = ("pytest", "script")  # a kept sandbox's runs: test runs, or agents' scripts


def warm_enabled() -> bool:
    """True when bwrap test runs may use warm sandboxes: :data:`USE_WARM`, no ``LATTE_LAB_NO_WARM_SANDBOX=1``,
    fork and descriptor passing, and not given up after failed starts."""
    if not USE_WARM or os.environ.get(WARM_DISABLE_VAR, "").strip().lower() not in ("", "0", "false"):
        return False
    if not (hasattr(os, "fork") and hasattr(socket, "send_fds")):
        return False
    return _STATE["start_failures"] < MAX_START_FAILURES


class WarmSandbox(zygote._Zygote):
    """One live warm sandbox for the workspace ``root``: its test runs (``mode`` "pytest") or its scripts
    ("script")."""

    def __init__(self, root: Path, limits: SandboxLimits, env: Mapping[str, str], mpl_dir: str | None,
                 mode: str = "pytest"):
        self.root, self.limits, self.mpl_dir = root, limits, mpl_dir
        self.busy = threading.Lock()  # one run at a time
        self.broken = False  # a run got no report: the sandbox is stopped when that run is closed
        # The whole sandbox in a pids cgroup, capped before each run at its own processes plus the run's cap.
        self.cgroup = PidsCgroup.make(None)
        try:
            super().__init__(env, mode=mode)
        except BaseException:
            if self.cgroup is not None:
                self.cgroup.remove()
            raise
        # bwrap and the init: the processes of the sandbox that are not a run's
        self.overhead = max(count_processes(self.proc.pid, tree_only=True), 1)
        self.own_tasks = self.cgroup.current() if self.cgroup is not None else 0

    def _argv(self, fd: int) -> list[str]:
        files = {os.path.join(HERE, name): f"{SERVER_DIR}/{name}" for name in SANDBOX_SERVER_FILES}
        mpl = self.mpl_dir if self.mpl_dir and os.path.isdir(self.mpl_dir) else None
        init = {"mode": self.mode, "spares": zygote.SPARES, "no_loopback": not self.limits.loopback,
                "workspace": str(self.root), "input": INPUT_PATH, "tmp": TMP_PATH, "shm": "/dev/shm",
                "mpl": [MPL_INPUT_PATH, MPL_PATH, MPL_CACHE_FILES] if mpl else None}
        return [*(self.cgroup.join_command() if self.cgroup is not None else ()),
                *bwrap.sandbox_args(self.root, self.limits, mpl, files, die_with_parent=False),
                sys.executable, f"{SERVER_DIR}/_sandbox_server.py", str(fd), json.dumps(init)]

    def _env(self, env: Mapping[str, str]) -> dict[str, str]:
        return {**env, "HOME": TMP_PATH, "TMPDIR": TMP_PATH}

    def close(self) -> None:
        """Stop the sandbox: end of file on the init's control socket ends it and its namespace; if it
        lingers, every process of bwrap's tree is killed. Idempotent; in a forked copy of the owner only
        that copy's socket is closed."""
        if self.owner != os.getpid():
            self.sock.close()
            return
        self.sock.close()
        try:
            self.proc.wait(timeout=CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            stop_sandbox(self.proc.pid, None, 0.0)
            self.proc.wait()
        self._remove_home()
        if self.cgroup is not None:
            self.cgroup.remove()


class WarmRun(zygote.StatusRun):
    """One run in a warm sandbox, with the part of ``subprocess.Popen`` the sandbox uses (as
    :class:`~latte_lab.sandbox.local.ReaperRun`: ``report`` is the init's report of the run).

    ``pid`` is bwrap's: the process count of the run is that of bwrap's tree less the sandbox's own
    processes (``reaper_processes``), and a stop from outside (only when the init stopped answering) ends the
    whole sandbox."""

    label = "a run in a warm sandbox"

    def __init__(self, sandbox: WarmSandbox, sock: socket.socket, out_r: int, err_r: int, export_r: int,
                 cgroup_hits: int = 0):
        self.sandbox = sandbox
        self._sock: socket.socket | None = sock
        self.stdout = open(out_r, "rb", buffering=0)  # noqa: SIM115 - closed when the run is drained
        self.stderr = open(err_r, "rb", buffering=0)  # noqa: SIM115
        self.export_fd: int | None = export_r
        self.pid = sandbox.proc.pid
        self.reaper_processes = sandbox.overhead
        self.cgroup = sandbox.cgroup
        self.cgroup_hits = cgroup_hits  # forks the sandbox's cgroup refused before this run
        self.report: dict = {}
        self.returncode: int | None = None

    def request_stop(self) -> None:
        """Ask the init to stop the run (end of file on the reply socket); it then hands back the workspace."""
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _receive(self, timeout: float | None) -> None:
        message = self._message(timeout)
        if message is None:
            return
        if "status" in message:
            self.report = message
            self.returncode = os.waitstatus_to_exitcode(int(message["status"]))
        else:  # the init failed, or the sandbox died: it is stopped and the next run starts a new one
            self.returncode = -signal.SIGKILL
            self.sandbox.broken = True
        self._sock.close()
        self._sock = None

    @property
    def tree_empty(self) -> bool:
        """The init reported the run, which it does once it has killed and reaped every process of it."""
        return self.report.get("orphans") is False and self.report.get("subreaper") is True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.export_fd is not None:
            os.close(self.export_fd)
            self.export_fd = None
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            if sandbox.broken or sandbox.proc.poll() is not None:
                _drop(sandbox)
            sandbox.busy.release()


_SERVERS = zygote.ServerTable("latte_lab: warm bubblewrap sandbox unavailable, test runs use a sandbox each")
_SANDBOXES = _SERVERS.table  # least recently used first
_STATE = _SERVERS.state
_warn = _SERVERS.warn


def _key(root: Path, limits: SandboxLimits, env: Mapping[str, str], mpl_dir: str | None, mode: str) -> tuple:
    st = os.stat(root)
    return (str(root), mode, st.st_dev, st.st_ino, sys.executable, zygote.SPARES, limits.disk_bytes,
            limits.tmp_bytes, limits.loopback, mpl_dir, tuple(sorted(env.items())))


def _drop(sandbox: WarmSandbox) -> None:
    with _SERVERS.lock:
        for key, live in list(_SANDBOXES.items()):
            if live is sandbox:
                del _SANDBOXES[key]
    sandbox.close()


def _get(root: Path, limits: SandboxLimits, run_env: Mapping[str, str], mpl_dir: str | None,
         mode: str) -> WarmSandbox | None:
    """The idle live sandbox for this workspace, mode and settings, started if need be, with its run lock
    held; None when it is busy (or cannot start: after a warning)."""
    env = zygote._start_env(run_env)
    try:
        key = _key(root, limits, env, mpl_dir, mode)
    except OSError:
        return None
    stale: list[WarmSandbox] = []
    with _SERVERS.lock:
        sandbox = _SANDBOXES.get(key)
        if sandbox is not None and not sandbox.alive():
            del _SANDBOXES[key]
            stale.append(sandbox)
            sandbox = None
        if sandbox is not None:
            _SANDBOXES.move_to_end(key)
    if sandbox is None:
        if _STATE["start_failures"] >= MAX_START_FAILURES:
            return None
        try:
            sandbox = WarmSandbox(root, limits, env, mpl_dir, mode)
        except (zygote.ZygoteError, OSError) as exc:
            _STATE["start_failures"] += 1
            for old in stale:
                old.close()
            _warn(str(exc))
            return None
        with _SERVERS.lock:
            if key in _SANDBOXES:  # another thread started one meanwhile: use that one
                stale.append(sandbox)
                sandbox = _SANDBOXES[key]
            else:
                _SANDBOXES[key] = sandbox
            while len(_SANDBOXES) > MAX_SANDBOXES:
                oldest_key = next(iter(_SANDBOXES))
                if not _SANDBOXES[oldest_key].busy.acquire(blocking=False):
                    break  # in use: stopped later
                stale.append(_SANDBOXES.pop(oldest_key))
            if not _STATE["atexit"]:
                import atexit

                atexit.register(shutdown)
                _STATE["atexit"] = True
    for old in stale:
        old.close()
    if not sandbox.busy.acquire(blocking=False):
        return None
    return sandbox


def launch(request: RunRequest, run_env: Mapping[str, str], rlimits: Mapping[str, int | None],
           mpl_dir: str | None) -> WarmRun | None:
    """Start ``request`` (a pytest session or a script, in ``request.cwd``) in a warm sandbox of that directory;
    None to use a one-off sandbox (the sandbox is busy with another run, or cannot start or answer: then after a
    warning). ``run_env`` and ``rlimits`` are the run's environment and the config of its limits."""
    root, limits = request.cwd, request.limits
    sandbox = _get(root, limits, run_env, mpl_dir, request.kind)
    if sandbox is None:
        return None
    # PWD: bwrap's --chdir sets it for a one-off sandbox's processes
    message = zygote.run_request(str(root), {**run_env, "PWD": str(root)}, rlimits, request,
                                 grace=limits.sigterm_grace_seconds,
                                 export_names=list(request.export) if request.export is not None else None)
    hits = 0
    if sandbox.cgroup is not None:
        cap = limits.max_processes
        try:
            sandbox.cgroup.set_max(None if cap is None else sandbox.own_tasks + cap)
        except OSError:
            pass  # (the cgroup is gone only with the sandbox, which then fails this run's start)
        hits = sandbox.cgroup.limit_hits()

    try:  # pipes: the run's stdout, stderr and the workspace's export
        sock, (out_r, err_r, export_r), _reply = zygote.hand_over(lambda fds: sandbox.send(message, fds), 3,
                                                                  "the warm sandbox", request.stdin)
    except zygote.ZygoteError as exc:
        _drop(sandbox)
        sandbox.busy.release()
        _warn(str(exc))
        return None
    return WarmRun(sandbox, sock, out_r, err_r, export_r, hits)


def release(root: Path | str) -> None:
    """Stop the warm sandboxes of the workspace ``root`` that no run is using (a trial's, when it ends)."""
    root = str(Path(root).resolve())
    stale = []
    with _SERVERS.lock:
        for key, sandbox in list(_SANDBOXES.items()):
            if key[0] == root and sandbox.busy.acquire(blocking=False):
                stale.append(_SANDBOXES.pop(key))
    for sandbox in stale:
        sandbox.close()


def shutdown() -> None:
    """Stop every warm sandbox of this process (registered with atexit; safe at any time)."""
    with _SERVERS.lock:
        sandboxes = list(_SANDBOXES.values())
        _SANDBOXES.clear()
    for sandbox in sandboxes:
        sandbox.close()
