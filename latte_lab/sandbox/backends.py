"""The two ways a run is confined, each starting a :class:`~latte_lab.sandbox.request.RunRequest` its own way and
owning its own fast paths: :class:`LocalBackend` (this user, with limits; fork servers) and
:class:`BubblewrapBackend` (a bubblewrap sandbox; sandboxes kept between runs, and the staging directories that
let one kept sandbox serve many workspaces). :func:`backend_for` gives the backend a ``sandbox`` name means;
:func:`latte_lab.sandbox.run.run_sandboxed` runs a request on it.

Every backend's :meth:`~Backend.launch` starts the run and hands back a
:class:`~latte_lab.sandbox.request.RunHandle`; whether the run was forked from a server, started in a sandbox kept
for its directory, or started afresh, the handle is read, limited, stopped and finished the same way. A fast path
that cannot serve a run (a server that does not start or answer, a kept sandbox in use) gives it to the slow path,
with the same result.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import latte_lab.sandbox.bwrap as bwrap
import latte_lab.sandbox.local as local
import latte_lab.sandbox.stage as stage
import latte_lab.sandbox.warm as warm
import latte_lab.sandbox.zygote as zygote
from latte_lab.config import SANDBOXES
from latte_lab.errors import ConfigError
from latte_lab.sandbox.limits import SHM_BYTES
from latte_lab.sandbox.output import tree_bytes
from latte_lab.sandbox.paths import CHILD_SCRIPT, MPL_PATH, TMP_PATH
from latte_lab.sandbox.process import PidsCgroup
from latte_lab.sandbox.request import RunContext, RunHandle, RunRequest, RunResult

SANDBOX_VAR = "LATTE_LAB_SANDBOX"  # what "auto" means when set: bwrap or local
FAST_KINDS = ("pytest", "script")  # what a kept sandbox serves (the local backend's fork servers serve judges too)

_CHOICE: dict[str, str] = {}
_CHOICE_LOCK = threading.Lock()
log = logging.getLogger("latte_lab.sandbox")


def resolve_sandbox(sandbox: str = "auto") -> str:
    """The backend a run with ``sandbox`` uses: ``"bwrap"`` or ``"local"``.

    ``"auto"`` (or ``$LATTE_LAB_SANDBOX``) is bwrap wherever a bubblewrap sandbox can start here, else
    local; the choice is made and said once per process. Asking for ``"bwrap"`` where it cannot run is
    a :class:`ConfigError` that says why.
    """
    if sandbox == "auto":
        sandbox = os.environ.get(SANDBOX_VAR, "").strip().lower() or "auto"
    if sandbox not in SANDBOXES:
        raise ConfigError(f"unknown sandbox {sandbox!r}; use one of {', '.join(SANDBOXES)}")
    if sandbox == "local":
        return "local"
    works, why, _ = bwrap.probe()
    if sandbox == "bwrap":
        if not works:
            raise ConfigError(f"sandbox='bwrap' cannot run here: {why}; install bubblewrap or use sandbox='local'")
        return "bwrap"
    with _CHOICE_LOCK:
        if "auto" in _CHOICE:
            return _CHOICE["auto"]
        _CHOICE["auto"] = "bwrap" if works else "local"
    if works:
        log.info("latte_lab: agent code runs in bubblewrap sandboxes (sandbox='auto' chose 'bwrap')")
    else:
        warnings.warn(f"latte_lab: agent code runs on the local sandbox backend, without isolation: {why}. "
                      "See the README for what the local backend does not stop.", RuntimeWarning, stacklevel=3)
    return _CHOICE["auto"]


class Backend:
    """How runs are confined. :meth:`launch` starts one; :meth:`scratch` gives a directory to fill and run in."""

    name = ""

    def launch(self, request: RunRequest, run: RunContext) -> RunHandle:  # pragma: no cover - each has its own
        """Start ``request`` (checked: ``cwd`` resolved) with the run's ``run`` parts; a handle on it."""
        raise NotImplementedError

    def run_paths(self, home: Path, host_mplconfig: str) -> tuple[str, str]:
        """The run's HOME (and TMPDIR) and matplotlib directory as the run sees them, given its private directory
        on the host and the host's matplotlib directory."""
        return str(home), host_mplconfig

    @contextlib.contextmanager
    def scratch(self) -> Iterator[tuple[Path, bool]]:
        """A fresh directory (not yet made) to fill and run in, and whether a request there may ``reuse`` a sandbox
        kept for it; removed afterwards."""
        with stage.scratch(False) as made:
            yield made

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def run_cgroup(request: RunRequest, overhead: int, run: RunContext) -> PidsCgroup | None:
    """A pids cgroup for one run, capped at ``limits.max_processes`` plus the sandbox's ``overhead`` processes,
    removed when the run ends; None without a cap or where none can be made."""
    if request.limits.max_processes is None:
        return None
    cgroup = PidsCgroup.make(request.limits.max_processes + overhead)
    if cgroup is not None:
        run.cleanup.callback(cgroup.remove)
    return cgroup


class LocalBackend(Backend):
    """Runs as this user on the real file system, with the limits (and, as root, a ``/tmp``, ``/dev/shm``, PID
    namespace and ``/proc`` of the run's own, hiding what no untrusted run may see: :func:`local.confinement`).
    What it does not stop is listed in the README. Fast path: pytest sessions, scripts and judges are forked from
    the fork servers (:mod:`latte_lab.sandbox.zygote`), with the same guarantees."""

    name = "local"

    def launch(self, request: RunRequest, run: RunContext) -> RunHandle:
        env = run.env
        cgroup = run_cgroup(request, 0, run)  # the command joins it; its reaper stays out
        config = {**run.rlimits, **local.confinement(request.cwd, str(run.home), env, request.limits, request.argv,
                                                     untrusted=request.kind != "judge")}
        if cgroup is not None:
            config["cgroup"] = cgroup.procs
        handle = zygote.launch(request, env, config) if zygote.forkable(request) else None
        if handle is None:
            handle = local.launch(request.argv, request.cwd, env, config, stdin=request.stdin)
        handle.cgroup, handle.root = cgroup, request.cwd
        handle.watched = _disk_caps(request, run.home)
        handle.notes = _local_notes(request)
        return handle


def _disk_caps(request: RunRequest, home: Path) -> list[tuple[Path, int]]:
    """The local backend's watched directories with their caps. A workspace already over its cap (left
    so by an earlier run) may not grow further, but a run that cleans it up is not stopped."""
    limits, caps = request.limits, []
    if limits.disk_bytes is not None:
        caps.append((request.cwd, max(limits.disk_bytes, tree_bytes(request.cwd))))
    if limits.tmp_bytes is not None:
        caps.append((home, limits.tmp_bytes))
    return caps


def _local_notes(request: RunRequest):
    def notes(stderr: str) -> list[str]:
        if "No space left on device" in stderr and local.private_tmp_possible():
            return [f"disk limit reached: the run's /tmp holds at most {mib(request.limits.tmp_bytes)} and its "
                    f"/dev/shm {mib(SHM_BYTES)}; writes beyond them failed with 'No space left on device'"]
        return []
    return notes


def mib(n: int | None) -> str:
    return "no limit" if n is None else f"{n / 2**20:g} MiB"


class BubblewrapBackend(Backend):
    """Runs each request in a bubblewrap sandbox (:mod:`latte_lab.sandbox.bwrap`): new namespaces, a read-only
    system, no network, no view of other processes, a tmpfs workspace capped in size, whose files are handed back
    when the run ends. Fast path, for a request that may ``reuse`` a sandbox: it runs forked inside a sandbox kept
    for its directory (:mod:`latte_lab.sandbox.warm`); a workspace's own run happens in this process's public stage
    (:class:`~latte_lab.sandbox.stage.Staging`), so that one kept sandbox serves every workspace in turn; a scratch
    directory is this process's hidden stage."""

    name = "bwrap"

    def run_paths(self, home: Path, host_mplconfig: str) -> tuple[str, str]:
        return TMP_PATH, MPL_PATH  # the sandbox's own /tmp; the host's matplotlib cache is copied in

    def launch(self, request: RunRequest, run: RunContext) -> RunHandle:
        mpl, env = run.host_mplconfig, run.env
        staging = None
        handle: RunHandle | None = None
        if request.reuse and request.kind in FAST_KINDS and warm.warm_enabled():
            if not stage.is_stage(request.cwd):
                staging = stage.Staging.take(request.cwd, request.report)
                if staging is not None:
                    run.cleanup.callback(staging.release)  # after the run's files are handed on
                    if env.get("PYTHONPATH") == str(request.cwd):
                        env = {**env, "PYTHONPATH": str(staging.path)}
                    request = request.moved(staging.path)
            handle = warm.launch(request, env, run.rlimits, mpl)
        if handle is None:
            # the whole sandbox in the run's cgroup: bwrap and its init besides the run's own processes
            cgroup = run_cgroup(request, bwrap.SANDBOX_PROCESSES, run)
            command = bwrap.command(request.cwd, request.limits, CHILD_SCRIPT, mpl)
            config = {**run.rlimits, **bwrap.init_config(request.cwd, request.limits, mpl,
                                                          list(request.export) if request.export is not None else None)}
            handle = local.launch(request.argv, request.cwd, env, config,
                                  command=[*(cgroup.join_command() if cgroup else ()), *command], control=True,
                                  export=True, reaper_processes=bwrap.SANDBOX_PROCESSES, stdin=request.stdin)
            handle.cgroup = cgroup
        handle.root = request.cwd
        if staging is not None:
            handle.finish = staging.hand_on
        return handle

    @contextlib.contextmanager
    def scratch(self) -> Iterator[tuple[Path, bool]]:
        with stage.scratch(warm.warm_enabled()) as made:
            yield made


LOCAL, BUBBLEWRAP = LocalBackend(), BubblewrapBackend()


def backend_for(sandbox: str | Backend = "auto", request: RunRequest | None = None) -> Backend:
    """The backend ``sandbox`` names (:func:`resolve_sandbox`), or ``sandbox`` itself; a judge's request runs on the
    local backend whatever ``sandbox`` says (trusted code, on the host: its process never runs workspace code)."""
    if request is not None and request.kind == "judge":
        return LOCAL
    if isinstance(sandbox, Backend):
        return sandbox
    return BUBBLEWRAP if resolve_sandbox(sandbox) == "bwrap" else LOCAL


__all__ = ["BUBBLEWRAP", "Backend", "BubblewrapBackend", "LOCAL", "LocalBackend", "RunResult", "backend_for",
           "resolve_sandbox"]
