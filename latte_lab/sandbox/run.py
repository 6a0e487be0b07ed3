"""Run one untrusted command: allowlisted environment, rlimits, capped output, a timeout that kills the
tree, on one of two backends chosen through one interface (``sandbox="bwrap" | "local" | "auto"``).

Everything agents run goes through :func:`run_sandboxed`, which takes a :class:`~latte_lab.sandbox.request.RunRequest`
(what to run, where, within which limits, what kind of run) and a backend, which starts it
(:mod:`latte_lab.sandbox.backends`: the backend alone decides how, fast where it can). What every run gets,
whichever way it was started, is this module's:

* resource limits (CPU, address space, file size, processes) set *in the child* by the small wrapper
  ``_child.py``, the run's reaper (no ``preexec_fn``), which also drops every capability and sets
  ``no_new_privs`` before the command starts;
* an environment built from an allowlist; no variable whose name contains KEY, SECRET or TOKEN ever
  reaches the child, even when allowlisted, and the process that starts agent code is the reaper,
  started with that environment: its ``/proc/<pid>/environ`` holds no key either;
* stdin from ``/dev/null``; stdout/stderr read in chunks while the child runs, keeping only the first
  and last half of ``SandboxLimits.output_bytes`` per stream, so printing 100 MB costs no memory;
* a wall-clock timeout that sends SIGTERM to every process of the run, waits a short grace period,
  then SIGKILLs whatever is left. Processes a script leaves behind when it exits normally are stopped
  too: a run is a discrete step, nothing survives it;
* a cap on the workspace's size (``SandboxLimits.disk_bytes``) and the temporary directory's.

Backends. ``bwrap`` runs each command in its own bubblewrap sandbox: new namespaces, a read-only system, no
network, no view of other processes, a tmpfs workspace capped in size; it is the default wherever it works
("auto": chosen once per process and said once). ``local`` runs the command as this user on the real file
system, with the limits above; what it does not stop is listed in the README (reading files by absolute path,
writing anywhere the user can, the network, other processes of the user that hold keys in their initial
environment). Each owns its fast paths (:mod:`latte_lab.sandbox.backends`): the local backend forks test runs,
scripts and judges from fork servers (:mod:`latte_lab.sandbox.zygote`), with the same guarantees; the bwrap
backend forks a workspace's own test runs and scripts, and hidden suites, inside sandboxes kept between runs
and reset before every run (:mod:`latte_lab.sandbox.warm`), which show a run what a sandbox of its own shows.

Fork bombs: RLIMIT_NPROC is not enforced by the kernel for root, so where a pids cgroup can be made (root,
or a delegated cgroup; :class:`~latte_lab.sandbox.process.PidsCgroup`) every run gets one capped at
``SandboxLimits.max_processes``: on the local backend the command joins it before it starts (its reaper stays
out), a bubblewrap sandbox runs whole in it (its cap counts bwrap and the init besides), and a kept sandbox
has one whose cap is set before each run. The kernel refuses the fork beyond the cap and counts the
refusals, which the run's notes report (:data:`PROCESS_LIMIT_NOTE`). Elsewhere RLIMIT_NPROC holds for other
users than root, and the note says so. In every case the parent also counts the run's processes every
:data:`PROCESS_CHECK_INTERVAL_SECONDS` and stops the whole run when it exceeds the cap (the only cap for
root without a cgroup, which a fast fork bomb outruns); the CPU limit bounds busy loops whose parent is
gone; the timeout bounds everything else.

Temporary files: a run's HOME and TMPDIR are a directory of its own, removed after it (``/tmp`` in the
bubblewrap sandbox, whose ``/tmp`` and ``/dev/shm`` are size-capped tmpfs of the sandbox); on the local
backend, as root, the run also gets a ``/tmp`` and ``/dev/shm`` of its own (:func:`local.confinement`).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from latte_lab.errors import WorkspaceError
from latte_lab.sandbox.backends import Backend, backend_for, mib, resolve_sandbox
from latte_lab.sandbox.export import WRITE_BACK_FAILED, apply_export
from latte_lab.sandbox.limits import CPU_LIMIT_SLACK_SECONDS, SandboxLimits
from latte_lab.sandbox.output import OutputCapture, Spool, drain, pump
from latte_lab.sandbox.process import (
    MARKER_VAR,
    make_undumpable,
    pids_cgroup_base,
    stop_sandbox,
    user_task_count,
)
from latte_lab.sandbox.request import RunContext, RunHandle, RunRequest, RunResult

EXPORT_SECONDS = 30.0  # after a stop request: time for a bwrap sandbox to stop and hand back its files

# Environment: only these names are copied from the parent (and only if their name contains none of
# FORBIDDEN_ENV_WORDS); the variables in sandbox_env() are then set explicitly.
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM", "SYSTEMROOT")
FORBIDDEN_ENV_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL")

OUTSIDE_WORKSPACE = "path {path!r} is outside the workspace; use a path relative to the project root"
PROCESS_LIMIT_NOTE = "process limit exceeded: the run reached its process limit ({cap}) and could not start more processes"
# How the cap holds where no pids cgroup can be made: said with the note of a run that reached it.
NO_CGROUP_RLIMIT = "enforced by RLIMIT_NPROC: no pids cgroup can be made here"
NO_CGROUP_WATCHDOG = ("no pids cgroup can be made here and RLIMIT_NPROC does not bind root: the processes were "
                      "counted a few times a second, and a fast fork bomb outruns the count")

__all__ = ["OUTSIDE_WORKSPACE", "OutputCapture", "RunRequest", "RunResult", "confined", "resolve_sandbox",
           "run_sandboxed", "sandbox_env"]


def confined(root: Path, rel: str) -> Path:
    """``root / rel`` for a relative path that stays inside ``root``; WorkspaceError otherwise."""
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    full = root.joinpath(*parts)
    if not parts or rel.startswith(("/", "~")) or ".." in parts or not full.resolve().is_relative_to(root.resolve()):
        raise WorkspaceError(OUTSIDE_WORKSPACE.format(path=rel))
    return full


def sandbox_env(root: Path, home: str, marker: str, extra: Mapping[str, str] | None = None,
                mplconfig: str | None = None) -> dict[str, str]:
    """The whole environment of a run in ``root``: the allowlist, fixed settings, ``extra``, the marker;
    never a variable whose name contains one of :data:`FORBIDDEN_ENV_WORDS`."""
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", os.defpath)])
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        HOME=home,
        TMPDIR=home,
        PYTHONPATH=str(root),
        PYTHONHASHSEED="0",  # deterministic set/dict iteration of str keys across runs
        PYTHONDONTWRITEBYTECODE="1",  # no __pycache__ in the workspace (keeps the memo key stable)
        PYTHONUNBUFFERED="1",  # output printed before a timeout is not lost in a buffer
        PYTHONIOENCODING="utf-8",
        MPLBACKEND="Agg",
        MPLCONFIGDIR=mplconfig or host_mplconfig(),
        OMP_NUM_THREADS="1",  # BLAS thread pools reserve address space; one thread fits the AS limit
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        NO_COLOR="1",
    )
    env.update(extra or {})
    env[MARKER_VAR] = marker
    return {k: v for k, v in env.items() if not any(word in k.upper() for word in FORBIDDEN_ENV_WORDS)}


def host_mplconfig() -> str:
    """matplotlib's font cache shared by local runs (rebuilding it costs a second per run)."""
    return str(Path(tempfile.gettempdir()) / f"latte_lab-mplconfig-{os.getuid()}")


def child_limits(limits: SandboxLimits, timeout: float) -> dict[str, int | None]:
    """The limits json of ``_child.py`` for one run (CPU capped by the timeout, RLIMIT_NPROC on top of
    what the user already runs, since the kernel counts all of the user's processes)."""
    cpu = limits.cpu_seconds
    if cpu is not None:
        cpu = min(cpu, math.ceil(timeout) + CPU_LIMIT_SLACK_SECONDS)
    nproc = limits.max_processes
    if nproc is not None and os.geteuid() != 0:  # root is exempt in the kernel: no need to count
        nproc += user_task_count(os.geteuid())
    return {"cpu": cpu, "as": limits.address_space_bytes, "fsize": limits.file_size_bytes, "nproc": nproc}


def limit_notes(stderr: str, returncode: int, limits: SandboxLimits, cpu: int | None, timed_out: bool) -> list[str]:
    """What the run ran into, in words an agent understands."""
    notes = []
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        cap = limits.address_space_bytes
        size = f" ({cap / 2**30:g} GiB address space)" if cap else ""
        notes.append(f"memory limit exceeded{size}: the script tried to allocate more memory than allowed")
    if returncode == -signal.SIGXCPU:
        notes.append(f"CPU time limit exceeded ({cpu} s of CPU per process)")
    elif returncode == -signal.SIGKILL and not timed_out:
        notes.append("killed by SIGKILL (CPU hard limit or the system's out-of-memory killer)")
    if "File too large" in stderr or returncode == -signal.SIGXFSZ:
        cap = limits.file_size_bytes
        size = f" ({cap / 2**20:g} MiB per file)" if cap else ""
        notes.append(f"file size limit exceeded{size}")
    if "Resource temporarily unavailable" in stderr and "fork" in stderr.lower() and limits.max_processes is not None:
        how = "" if pids_cgroup_base() is not None else f" ({NO_CGROUP_RLIMIT})"
        notes.append(PROCESS_LIMIT_NOTE.format(cap=limits.max_processes) + how)
    return notes


def _hide_secrets() -> None:
    """A process that holds keys and starts agent code keeps its memory and environment unreadable."""
    if any(word in name.upper() for name in os.environ for word in FORBIDDEN_ENV_WORDS):
        make_undumpable()


def run_sandboxed(
    argv: Sequence[str] | RunRequest,
    cwd: Path | str | None = None,
    *,
    timeout: float | None = None,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    sandbox: str | Backend = "auto",
    stdin: int | None = None,
) -> RunResult:
    """Run a :class:`~latte_lab.sandbox.request.RunRequest` (or ``argv`` in ``cwd``, the request of its kind:
    :func:`~latte_lab.sandbox.request.kind_of`) inside the sandbox described in the module docstring, on the
    backend ``sandbox`` names (:func:`~latte_lab.sandbox.backends.backend_for`).

    ``env`` adds variables to the allowlisted environment (names with KEY/SECRET/TOKEN are still dropped);
    ``stdin``: a descriptor that becomes the run's standard input, closed here once the run has it (``/dev/null``
    when None). Never raises for anything the child does (timeouts, limits, crashes, huge output); raises
    :class:`ConfigError` for a non-positive timeout or an unknown sandbox and :class:`WorkspaceError` if
    the directory is missing.
    """
    request = argv if isinstance(argv, RunRequest) else RunRequest(
        argv, cwd if cwd is not None else ".", timeout=timeout, limits=limits, env=env, stdin=stdin)
    held_input = [request.stdin] if request.stdin is not None else []  # closed once: when the run has it, or on the way out
    try:
        request = request.checked()
        backend = backend_for(sandbox, request)
    except BaseException:
        _close_all(held_input)
        raise
    _hide_secrets()
    limits, timeout = request.limits, request.timeout
    rlimits = child_limits(limits, timeout)
    out, err = OutputCapture(limits.output_bytes), OutputCapture(limits.output_bytes)
    with tempfile.TemporaryDirectory(prefix="latte_lab-home-") as home, contextlib.ExitStack() as cleanup:
        cleanup.callback(_close_all, held_input)
        start = time.monotonic()
        marker, host_mpl = uuid.uuid4().hex, host_mplconfig()
        home_in_run, mpl_in_run = backend.run_paths(Path(home), host_mpl)
        env = sandbox_env(request.cwd, home_in_run, marker, request.env, mplconfig=mpl_in_run)
        run = RunContext(env, marker, Path(home), rlimits, cleanup, host_mpl)
        proc = backend.launch(request, run)
        _close_all(held_input)  # the run holds it now: its end of file is the run's alone to give
        spool = Spool(2 * (limits.disk_bytes or 2**40) + 2**20) if proc.export_fd is not None else None
        stopped = ""
        try:
            stopped = pump(proc, out, err, spool, start + timeout, limits, list(proc.watched))
            if spool is not None and proc.poll() is None:
                proc.request_stop()  # its init stops every process, then hands back the workspace
                pump(proc, out, err, spool, time.monotonic() + limits.sigterm_grace_seconds + EXPORT_SECONDS,
                     limits, [])
        finally:
            # Stop the run (at a timeout) or whatever it left behind (after a normal exit).
            grace = limits.sigterm_grace_seconds if (stopped or proc.poll() is None) else 0.0
            # When the run's reaper proved that nothing of the run is left (``tree_empty``), the search of
            # the process table (tens of ms) would find nothing.
            if not (proc.poll() is not None and proc.tree_empty):
                stop_sandbox(proc.pid, run.marker, grace)
            drain(proc, out, err, spool)
            returncode = proc.wait()
            refused = proc.cgroup.limit_hits() - proc.cgroup_hits if proc.cgroup is not None else 0
            proc.close()
        seconds = time.monotonic() - start
        stdout, stderr = out.text(), err.text()
        notes = _stop_notes(stopped, limits, capped=proc.cgroup is not None)
        if refused > 0:
            notes.append(PROCESS_LIMIT_NOTE.format(cap=limits.max_processes))
        if stopped != "processes":
            notes += limit_notes(stderr, returncode, limits, rlimits["cpu"], stopped == "timeout")
        notes += proc.notes(stderr)
        if spool is not None:
            notes += _hand_back(proc, spool, limits, stderr, request.export)
        truncated = out.elided > 0 or err.elided > 0
        if truncated:
            notes.append(
                f"output truncated: kept the first and last {limits.output_bytes // 2 // 1024} KiB "
                f"of {out.total} bytes on stdout and {err.total} bytes on stderr"
            )
        return proc.finish(RunResult(
            returncode=returncode,
            stdout=stdout,
            stderr=stderr,
            seconds=round(seconds, 6),
            timed_out=stopped == "timeout",
            truncated=truncated,
            notes=tuple(dict.fromkeys(notes)),
            timeout=float(timeout),
        ))


def _close_all(fds: list[int]) -> None:
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass


def _stop_notes(stopped: str, limits: SandboxLimits, capped: bool = False) -> list[str]:
    if stopped == "processes":
        how = "" if capped else f" ({NO_CGROUP_WATCHDOG})"
        return [f"process limit exceeded: the script started more than {limits.max_processes} processes "
                f"(fork bomb?); all of them were stopped{how}"]
    if stopped == "disk":
        return [f"disk limit exceeded: the workspace grew past {mib(limits.disk_bytes)} (or the temporary "
                f"directory past {mib(limits.tmp_bytes)}); the run was stopped"]
    return []


def _hand_back(proc: RunHandle, spool: Spool, limits: SandboxLimits, stderr: str,
               names: Sequence[str] | None) -> list[str]:
    """Write the workspace a bwrap sandbox returned into the directory it ran in; notes on what the run ran into."""
    notes = []
    report = proc.report
    if report.get("disk_full") or (not report and "No space left on device" in stderr):
        notes.append(f"disk limit reached: the workspace holds at most {mib(limits.disk_bytes)}; writes beyond it "
                     "failed with 'No space left on device'")
    if report.get("tmp_full"):
        notes.append(f"disk limit reached: the temporary directory holds at most {mib(limits.tmp_bytes)}")
    if not report.get("exported"):
        if report.get("export_failed"):
            notes.append("the sandbox could not hand back the workspace the run left (a file or directory the run "
                         "made unreadable?): files changed by this run are lost")
        elif report:  # the copy into the sandbox failed: the workspace stays as it was
            notes.append(f"the workspace did not fit the sandbox's disk limit ({mib(limits.disk_bytes)}); "
                         "it was left unchanged")
        else:
            notes.append("the sandbox ended before it handed back the workspace: files changed by this run are lost")
        return notes
    if spool.overflow:
        return [*notes, "the workspace the run left was too large to hand back: files changed by this run are lost"]
    spool.file.seek(0)
    try:
        apply_export(spool.file, proc.root, list(names) if names is not None else None)
    except (OSError, tarfile.TarError) as exc:
        notes.append(f"{WRITE_BACK_FAILED}: {exc}")
    finally:
        spool.file.close()
    return notes
