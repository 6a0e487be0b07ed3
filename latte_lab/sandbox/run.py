"""Run one untrusted command: allowlisted environment, rlimits, capped output, a timeout that kills the
tree, on one of two backends chosen through one interface (``sandbox="bwrap" | "local" | "auto"``).

Everything agents run goes through :func:`run_sandboxed`:

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

Backends. ``bwrap`` (:mod:`latte_lab.sandbox.bwrap`) runs each command in its own bubblewrap sandbox:
new namespaces, a read-only system, no network, no view of other processes, a tmpfs workspace capped in
size; it is the default wherever it works ("auto": chosen once per process and said once). ``local``
runs the command as this user on the real file system, with the limits above; what it does not stop
is listed in the README (reading files by absolute path, writing anywhere the user can, the network,
other processes of the user that hold keys in their initial environment). Test runs on the local backend
may be forked from the pytest fork server (:mod:`latte_lab.sandbox.zygote`), with the same guarantees;
on the bwrap backend, a workspace's own test runs and scripts are forked inside sandboxes kept for that
workspace, and hidden suites inside one kept for the process's staging directory, each reset before every
run (:mod:`latte_lab.sandbox.warm`), which shows a run what a sandbox of its own shows.

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
import fcntl
import logging
import math
import os
import selectors
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from latte_lab.config import SANDBOXES
from latte_lab.errors import ConfigError, WorkspaceError
from latte_lab.sandbox import bwrap, local, warm, zygote
from latte_lab.sandbox.limits import CPU_LIMIT_SLACK_SECONDS, OUTPUT_CAPTURE_BYTES, SHM_BYTES, SandboxLimits
from latte_lab.sandbox.process import (
    MARKER_VAR,
    PidsCgroup,
    count_processes,
    make_undumpable,
    pids_cgroup_base,
    stop_sandbox,
    user_task_count,
)

PIPE_DRAIN_SECONDS = 1.0  # after the child exits, how long to keep reading what is still buffered
PROCESS_CHECK_INTERVAL_SECONDS = 0.2  # how often a running sandbox's process count is checked
DISK_CHECK_INTERVAL_SECONDS = 0.05  # how often the local backend sizes the workspace (~0.1 ms for a task's)
READ_CHUNK_BYTES = 2**16  # one pipe read
OUTPUT_PAUSE_SECONDS = 0.02  # after reading a run's output, how long to let more gather before reading again
PIPE_BUFFER_BYTES = 2**20  # requested pipe capacity (Linux F_SETPIPE_SZ) for fewer wake-ups
EXPORT_SECONDS = 30.0  # after a stop request: time for a bwrap sandbox to stop and hand back its files
EXPORT_SPOOL_BYTES = 8 * 2**20  # a returned workspace is kept in memory up to this, then in a file
ZIP_END_SEARCH_BYTES = 65557  # a zip archive's end record lies within this many bytes of its end
SANDBOX_VAR = "LATTE_LAB_SANDBOX"  # what "auto" means when set: bwrap or local

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


@dataclass(frozen=True)
class RunResult:
    """Outcome of one sandboxed command."""

    returncode: int  # negative: killed by that signal (POSIX convention of subprocess)
    stdout: str  # captured (head + elision note + tail when longer than the capture limit)
    stderr: str
    seconds: float  # wall time
    timed_out: bool
    truncated: bool  # some output was elided
    notes: tuple[str, ...] = ()  # what went wrong, in words an agent understands (limits hit, ...)
    timeout: float | None = None  # the timeout the run had (for the timeout message)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class OutputCapture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest.

    Memory stays O(limit) whatever the child prints.

    >>> cap = OutputCapture(10)
    >>> for chunk in (b"abc", b"defgh", b"ijklmnop", b"qr"):
    ...     cap.feed(chunk)
    >>> cap.text()
    'abcde\\n[... 8 bytes elided ...]\\nnopqr'
    """

    def __init__(self, limit: int = OUTPUT_CAPTURE_BYTES):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        if len(chunk) >= self.half:
            self.tail = bytearray(chunk[-self.half :])
        else:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def elided(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        if self.elided <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[... {self.elided} bytes elided ...]\n{tail}"


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


def _hide_secrets() -> None:
    """A process that holds keys and starts agent code keeps its memory and environment unreadable."""
    if any(word in name.upper() for name in os.environ for word in FORBIDDEN_ENV_WORDS):
        make_undumpable()


class _Spool:
    """The returned workspace (a tar stream), in memory up to a point, then in a file; capped."""

    def __init__(self, limit: int):
        self.file = tempfile.SpooledTemporaryFile(max_size=EXPORT_SPOOL_BYTES)
        self.limit = limit
        self.total = 0

    @property
    def overflow(self) -> bool:
        return self.total > self.limit

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if not self.overflow:
            self.file.write(chunk)


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (symlinks not followed)."""
    total, stack = 0, [str(path)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    total += entry.stat(follow_symlinks=False).st_size  # what was written, even before it hits the disk
            except OSError:
                continue
    return total


def _disk_caps(root: Path, home: Path, limits: SandboxLimits) -> list[tuple[Path, int]]:
    """The local backend's watched directories with their caps. A workspace already over its cap (left
    so by an earlier run) may not grow further, but a run that cleans it up is not stopped."""
    caps = []
    if limits.disk_bytes is not None:
        caps.append((root, max(limits.disk_bytes, tree_bytes(root))))
    if limits.tmp_bytes is not None:
        caps.append((home, limits.tmp_bytes))
    return caps


def run_sandboxed(
    argv: list[str],
    cwd: Path | str,
    *,
    timeout: float,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    pytest_args: list[str] | None = None,
    sandbox: str = "auto",
    export_names: list[str] | None = None,
    prime_tests: bool = False,
    keep_sandbox: bool = False,
    pytest_patches: bool = False,
    trusted: list[str] | None = None,
    stdin: int | None = None,
) -> RunResult:
    """Run ``argv`` in ``cwd`` inside the sandbox described in the module docstring.

    ``env`` adds variables to the allowlisted environment (names with KEY/SECRET/TOKEN are still
    dropped). With ``pytest_args`` (``argv`` being ``python -m pytest *pytest_args``) a local run is
    forked from the zygote when it is enabled and up, and a bwrap run from a kept sandbox; ``pytest_patches``
    (opt-in, see :func:`latte_lab.sandbox.pytest.pytest_patches`): with the changes to pytest's internals of
    ``_pytest_patches.py``, a forked run from a server that made them, any other through that file, which
    runs pytest as ``-m`` does. ``export_names``: in a bwrap sandbox only these
    top-level entries of ``cwd`` are handed back (a run in a throwaway copy needs only its report).
    ``prime_tests``: the fork server may keep the rewritten code of ``cwd``'s test files for later runs
    (never for files agents must not see: every later run is forked from it). ``keep_sandbox``: ``cwd`` is
    a directory its caller runs in again (a staging directory), so on the bwrap backend the run may take a
    kept sandbox even with ``export_names``. ``trusted``: ``argv`` is the judge of a hidden evaluation
    (``python -s -P <judge session> *trusted``, :mod:`latte_lab.sandbox.judge`): trusted code, which runs on the
    local backend whatever ``sandbox`` says, without what hides latte_lab's files from every other run, forked
    from the trusted evaluation server when fork servers are enabled and it is up. ``stdin``: a descriptor that
    becomes the run's standard input (a socket of a hidden evaluation), closed here once the run has it;
    ``/dev/null`` when None.
    Never raises for anything the child does (timeouts, limits, crashes, huge output); raises
    :class:`ConfigError` for a non-positive timeout or an unknown sandbox and :class:`WorkspaceError` if
    ``cwd`` is missing.
    """
    held_input = [stdin] if stdin is not None else []  # closed once: when the run has it, or on the way out
    try:
        limits = limits or SandboxLimits()
        if not isinstance(timeout, (int, float)) or not timeout > 0 or math.isinf(timeout):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        root = Path(cwd).resolve()
        if not root.is_dir():
            raise WorkspaceError(f"cannot run in {str(cwd)!r}: the directory does not exist")
        backend = "local" if trusted is not None else resolve_sandbox(sandbox)
    except BaseException:
        _close_all(held_input)
        raise
    if pytest_args is not None and pytest_patches:  # started as ``python -m pytest`` is, with cheaper failure reports
        argv = [argv[0], bwrap.PYTEST_PATCHES_PATH if backend == "bwrap" else local.PYTEST_PATCHES_SCRIPT, *pytest_args]
    _hide_secrets()
    marker = uuid.uuid4().hex
    rlimits = child_limits(limits, timeout)
    out, err = OutputCapture(limits.output_bytes), OutputCapture(limits.output_bytes)
    spool = _Spool(2 * (limits.disk_bytes or 2**40) + 2**20) if backend == "bwrap" else None
    cgroup: PidsCgroup | None = None  # the run's own (a warm sandbox has one of its own)
    with tempfile.TemporaryDirectory(prefix="latte_lab-home-") as home, contextlib.ExitStack() as cleanup:
        cleanup.callback(_close_all, held_input)
        start = time.monotonic()
        proc: local.ReaperRun | zygote.ZygoteRun | warm.WarmRun | None = None
        if backend == "bwrap":
            run_env = sandbox_env(root, bwrap.TMP_PATH, marker, env, mplconfig=bwrap.MPL_PATH)
            mpl = host_mplconfig()
            # a workspace's own runs, or runs in a directory its caller runs in again; not a throwaway copy's
            if (export_names is None or keep_sandbox) and warm.warm_enabled():
                if pytest_args is not None and (prime_tests or keep_sandbox):
                    proc = warm.launch(root, run_env, rlimits, limits, mpl, pytest_args=pytest_args,
                                       prime=prime_tests, export_names=export_names, patches=pytest_patches,
                                       stdin=stdin)
                elif pytest_args is None and _python_script(argv, root):
                    proc = warm.launch(root, run_env, rlimits, limits, mpl, script=argv[1:], export_names=export_names,
                                       stdin=stdin)
            if proc is None:
                # the whole sandbox in the run's cgroup: bwrap and its init besides the run's own processes
                cgroup = _run_cgroup(limits, bwrap.SANDBOX_PROCESSES, cleanup)
                command = bwrap.command(root, limits, local.CHILD_SCRIPT, mpl)
                proc = local.launch(argv, root, run_env, {**rlimits, **bwrap.init_config(root, limits, mpl, export_names)},
                                    command=[*(cgroup.join_command() if cgroup else ()), *command], control=True,
                                    export=True, reaper_processes=bwrap.SANDBOX_PROCESSES, stdin=stdin)
        else:
            run_env = sandbox_env(root, home, marker, env)
            cgroup = _run_cgroup(limits, 0, cleanup)  # the command joins it; its reaper stays out
            confined = {**rlimits, **local.confinement(root, home, run_env, limits, argv, untrusted=trusted is None)}
            if cgroup is not None:
                confined["cgroup"] = cgroup.procs
            if trusted is not None:
                if zygote.zygote_enabled() and zygote.trusted_server_enabled():
                    proc = zygote.launch(root, run_env, confined, trusted=trusted, stdin=stdin)
            elif pytest_args is not None and zygote.zygote_enabled():
                proc = zygote.launch(root, run_env, confined, pytest_args, prime=prime_tests, patches=pytest_patches,
                                     stdin=stdin)
            elif _python_script(argv, root) and zygote.zygote_enabled():
                proc = zygote.launch(root, run_env, confined, script=argv[1:], stdin=stdin)
            if proc is None:
                proc = local.launch(argv, root, run_env, confined, stdin=stdin)
        _close_all(held_input)  # the run holds it now: its end of file is the run's alone to give
        if isinstance(proc, warm.WarmRun):
            cgroup = proc.cgroup
        watched = [] if backend == "bwrap" else _disk_caps(root, Path(home), limits)
        stopped = ""
        try:
            stopped = _pump(proc, out, err, spool, start + timeout, limits, watched)
            if backend == "bwrap" and proc.poll() is None:
                proc.request_stop()  # its init stops every process, then hands back the workspace
                _pump(proc, out, err, spool, time.monotonic() + limits.sigterm_grace_seconds + EXPORT_SECONDS,
                      limits, [])
        finally:
            # Stop the run (at a timeout) or whatever it left behind (after a normal exit).
            grace = limits.sigterm_grace_seconds if (stopped or proc.poll() is None) else 0.0
            # When the run's reaper proved that nothing of the run is left (``tree_empty``), the search of
            # the process table (tens of ms) would find nothing.
            if not (proc.poll() is not None and proc.tree_empty):
                stop_sandbox(proc.pid, marker, grace)
            _drain(proc, out, err, spool)
            returncode = proc.wait()
            refused = cgroup.limit_hits() - getattr(proc, "cgroup_hits", 0) if cgroup is not None else 0
            if isinstance(proc, (local.ReaperRun, warm.WarmRun)):
                proc.close()
        seconds = time.monotonic() - start
    stdout, stderr = out.text(), err.text()
    notes = _stop_notes(stopped, limits, capped=cgroup is not None)
    if refused > 0:
        notes.append(PROCESS_LIMIT_NOTE.format(cap=limits.max_processes))
    if stopped != "processes":
        notes += limit_notes(stderr, returncode, limits, rlimits["cpu"], stopped == "timeout")
    if backend == "local" and "No space left on device" in stderr and local.private_tmp_possible():
        notes.append(f"disk limit reached: the run's /tmp holds at most {_mib(limits.tmp_bytes)} and its /dev/shm "
                     f"{_mib(SHM_BYTES)}; writes beyond them failed with 'No space left on device'")
    if spool is not None:
        notes += _hand_back(proc, spool, root, limits, stderr, export_names)
    truncated = out.elided > 0 or err.elided > 0
    if truncated:
        notes.append(
            f"output truncated: kept the first and last {limits.output_bytes // 2 // 1024} KiB "
            f"of {out.total} bytes on stdout and {err.total} bytes on stderr"
        )
    return RunResult(
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        seconds=round(seconds, 6),
        timed_out=stopped == "timeout",
        truncated=truncated,
        notes=tuple(dict.fromkeys(notes)),
        timeout=float(timeout),
    )


def _close_all(fds: list[int]) -> None:
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass


def _python_script(argv: list[str], root: Path) -> bool:
    """Whether ``argv`` is ``python <file>.py ...`` with this interpreter: a run the script zygote can fork
    (a zip archive named .py, which python would run as an application, is left to a fresh interpreter)."""
    if len(argv) < 2 or argv[0] != sys.executable or not argv[1].endswith(".py") or argv[1].startswith("-"):
        return False
    path = root / argv[1]
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - ZIP_END_SEARCH_BYTES, 0))
            return b"PK\x05\x06" not in fh.read()
    except OSError:
        return False


def _run_cgroup(limits: SandboxLimits, overhead: int, cleanup: contextlib.ExitStack) -> PidsCgroup | None:
    """A pids cgroup for one run, capped at ``limits.max_processes`` plus the sandbox's ``overhead`` processes,
    removed when ``cleanup`` ends; None without a cap or where none can be made."""
    if limits.max_processes is None:
        return None
    cgroup = PidsCgroup.make(limits.max_processes + overhead)
    if cgroup is not None:
        cleanup.callback(cgroup.remove)
    return cgroup


def _stop_notes(stopped: str, limits: SandboxLimits, capped: bool = False) -> list[str]:
    if stopped == "processes":
        how = "" if capped else f" ({NO_CGROUP_WATCHDOG})"
        return [f"process limit exceeded: the script started more than {limits.max_processes} processes "
                f"(fork bomb?); all of them were stopped{how}"]
    if stopped == "disk":
        return [f"disk limit exceeded: the workspace grew past {_mib(limits.disk_bytes)} (or the temporary "
                f"directory past {_mib(limits.tmp_bytes)}); the run was stopped"]
    return []


def _mib(n: int | None) -> str:
    return "no limit" if n is None else f"{n / 2**20:g} MiB"


WRITE_BACK_FAILED = "the workspace could not be written back"  # a note's start: the run's changes are lost


def _hand_back(proc: local.ReaperRun | warm.WarmRun, spool: _Spool, root: Path, limits: SandboxLimits, stderr: str,
               names: list[str] | None) -> list[str]:
    """Write the workspace a bwrap sandbox returned into ``root``; notes on what the run ran into."""
    notes = []
    report = proc.report
    if report.get("disk_full") or (not report and "No space left on device" in stderr):
        notes.append(f"disk limit reached: the workspace holds at most {_mib(limits.disk_bytes)}; writes beyond it "
                     "failed with 'No space left on device'")
    if report.get("tmp_full"):
        notes.append(f"disk limit reached: the temporary directory holds at most {_mib(limits.tmp_bytes)}")
    if not report.get("exported"):
        if report.get("export_failed"):
            notes.append("the sandbox could not hand back the workspace the run left (a file or directory the run "
                         "made unreadable?): files changed by this run are lost")
        elif report:  # the copy into the sandbox failed: the workspace stays as it was
            notes.append(f"the workspace did not fit the sandbox's disk limit ({_mib(limits.disk_bytes)}); "
                         "it was left unchanged")
        else:
            notes.append("the sandbox ended before it handed back the workspace: files changed by this run are lost")
        return notes
    if spool.overflow:
        return [*notes, "the workspace the run left was too large to hand back: files changed by this run are lost"]
    spool.file.seek(0)
    try:
        bwrap.apply_export(spool.file, root, names)
    except (OSError, tarfile.TarError) as exc:
        notes.append(f"{WRITE_BACK_FAILED}: {exc}")
    finally:
        spool.file.close()
    return notes


def _enlarge_pipe(fd: int) -> None:
    if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux only
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BUFFER_BYTES)
        except OSError:
            pass  # above /proc/sys/fs/pipe-max-size for unprivileged users: keep the default


def _streams(proc, out: OutputCapture, err: OutputCapture, spool: _Spool | None) -> list[tuple[int, object]]:
    streams = [(s.fileno(), c) for s, c in ((proc.stdout, out), (proc.stderr, err)) if s is not None and not s.closed]
    if spool is not None and getattr(proc, "export_fd", None) is not None:
        streams.append((proc.export_fd, spool))
    return streams


def _pump(
    proc: local.ReaperRun | zygote.ZygoteRun,
    out: OutputCapture,
    err: OutputCapture,
    spool: _Spool | None,
    deadline: float,
    limits: SandboxLimits,
    watched: list[tuple[Path, int]],
) -> str:
    """Read the run's pipes until it ends or must be stopped. Returns why it must be stopped: "timeout",
    "processes" (more than allowed), "disk" (a watched directory grew past its limit), or ""."""
    overhead = getattr(proc, "reaper_processes", 0)
    sel = selectors.DefaultSelector()
    for fd, sink in _streams(proc, out, err, spool):
        _enlarge_pipe(fd)
        sel.register(fd, selectors.EVENT_READ, sink)
    next_disk_check = time.monotonic()
    next_check = next_disk_check + PROCESS_CHECK_INTERVAL_SECONDS
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if proc.poll() is not None:
                return ""
            if now >= next_check:
                next_check = now + PROCESS_CHECK_INTERVAL_SECONDS
                cap = limits.max_processes
                if cap is not None and count_processes(proc.pid, tree_only=True) - overhead > cap:
                    return "processes"
            if watched and now >= next_disk_check:
                next_disk_check = now + DISK_CHECK_INTERVAL_SECONDS
                if any(tree_bytes(path) > cap for path, cap in watched):
                    return "disk"
            soonest = min(next_check, next_disk_check) if watched else next_check
            wait = max(min(deadline - now, soonest - now, 0.1), 0.001)
            if not sel.get_map():  # every pipe closed: only the exit (or the deadline) is left to wait for
                try:
                    proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    pass
                continue
            read, drained = False, True
            for key, _ in sel.select(wait):
                chunk = os.read(key.fd, READ_CHUNK_BYTES)
                if chunk:
                    key.data.feed(chunk)
                    read, drained = True, drained and len(chunk) < READ_CHUNK_BYTES
                else:
                    sel.unregister(key.fd)
            if read and drained:
                # A run writes its output a line at a time (PYTHONUNBUFFERED): a failing test session wrote
                # about 400 times and woke this process as often. The pipes hold what comes meanwhile (their
                # capacity is enlarged), so read them again only after a pause, waiting meanwhile on the
                # run's end alone, which still ends the wait at once. A run that fills a read is read on.
                try:
                    proc.wait(timeout=max(min(OUTPUT_PAUSE_SECONDS, deadline - time.monotonic()), 0.001))
                except subprocess.TimeoutExpired:
                    pass
    finally:
        sel.close()


def _drain(proc, out: OutputCapture, err: OutputCapture, spool: _Spool | None) -> None:
    """Read what is left in the pipes (bounded in time: a stray writer cannot hold us)."""
    sel = selectors.DefaultSelector()
    for fd, sink in _streams(proc, out, err, spool):
        sel.register(fd, selectors.EVENT_READ, sink)
    deadline = time.monotonic() + PIPE_DRAIN_SECONDS
    try:
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(max(deadline - time.monotonic(), 0)):
                chunk = os.read(key.fd, READ_CHUNK_BYTES)
                if chunk:
                    key.data.feed(chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
