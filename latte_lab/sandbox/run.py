"""Run one untrusted command: allowlisted environment, rlimits, capped output, a timeout that kills the tree.

Everything agents run goes through :func:`run_sandboxed`:

* a new session (``start_new_session=True``) so the whole process group can be signalled;
* resource limits (CPU, address space, file size, processes) set *in the child* by the small wrapper
  ``_child.py``, which then ``execv``s the target (no ``preexec_fn``);
* an environment built from an allowlist; no variable whose name contains KEY, SECRET or TOKEN ever
  reaches the child, even when allowlisted;
* stdin from ``/dev/null``; stdout/stderr read in chunks while the child runs, keeping only the first
  and last half of ``SandboxLimits.output_bytes`` per stream, so printing 100 MB costs no memory;
* a wall-clock timeout that sends SIGTERM to every process of the run, waits a short grace period,
  then SIGKILLs whatever is left (:mod:`latte_lab.sandbox.process` finds them). Processes a script
  leaves behind when it exits normally are stopped too: a run is a discrete step, nothing survives it.

Fork bombs: RLIMIT_NPROC is not enforced by the kernel for root, so while a run is going the parent
also counts the run's processes every :data:`PROCESS_CHECK_INTERVAL_SECONDS` and stops the whole run
when it exceeds ``SandboxLimits.max_processes``; the CPU limit bounds busy loops whose parent is gone;
the timeout bounds everything else.

The wrapper is started as ``python -I -S .../latte_lab/sandbox/_child.py <limits json> -- <argv>``
(the file path, equivalent to ``-m latte_lab.sandbox._child`` but immune to a workspace file or
directory named ``latte_lab`` or ``resource`` on the path, and ~20 ms faster). Test runs may instead be
forked from the pytest fork server (:mod:`latte_lab.sandbox.zygote`), with the same guarantees.

What this sandbox is *not*: a security boundary against a deliberately hostile script. Agent code runs
as the same user with the same file system: it cannot see API keys through its environment, but it
could read files by absolute path (a ``.env``) or, as the same user, other processes' ``/proc/<pid>/
environ`` (a shell or Jupyter server that exported a key). For untrusted models beyond "buggy", run
trials in a container or as a separate user.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from latte_lab.errors import ConfigError, WorkspaceError
from latte_lab.sandbox import zygote
from latte_lab.sandbox.limits import CPU_LIMIT_SLACK_SECONDS, OUTPUT_CAPTURE_BYTES, SandboxLimits
from latte_lab.sandbox.process import MARKER_VAR, count_processes, stop_sandbox, user_task_count

PIPE_DRAIN_SECONDS = 1.0  # after the child exits, how long to keep reading what is still buffered
PROCESS_CHECK_INTERVAL_SECONDS = 0.2  # how often a running sandbox's process count is checked
READ_CHUNK_BYTES = 2**16  # one pipe read
PIPE_BUFFER_BYTES = 2**20  # requested pipe capacity (Linux F_SETPIPE_SZ) for fewer wake-ups

# Environment: only these names are copied from the parent (and only if their name contains none of
# FORBIDDEN_ENV_WORDS); the variables in sandbox_env() are then set explicitly.
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM", "SYSTEMROOT")
FORBIDDEN_ENV_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL")

CHILD_SCRIPT = str(Path(__file__).with_name("_child.py"))
OUTSIDE_WORKSPACE = "path {path!r} is outside the workspace; use a path relative to the project root"


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


def sandbox_env(root: Path, home: str, marker: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
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
        MPLCONFIGDIR=str(Path(tempfile.gettempdir()) / f"latte_lab-mplconfig-{os.getuid()}"),
        OMP_NUM_THREADS="1",  # BLAS thread pools reserve address space; one thread fits the AS limit
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        NO_COLOR="1",
    )
    env.update(extra or {})
    env[MARKER_VAR] = marker
    return {k: v for k, v in env.items() if not any(word in k.upper() for word in FORBIDDEN_ENV_WORDS)}


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
    if "Resource temporarily unavailable" in stderr and "fork" in stderr.lower():
        notes.append("process limit reached: the script could not start more processes")
    return notes


def run_sandboxed(
    argv: list[str],
    cwd: Path | str,
    *,
    timeout: float,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    pytest_args: list[str] | None = None,
) -> RunResult:
    """Run ``argv`` in ``cwd`` inside the sandbox described in the module docstring.

    ``env`` adds variables to the allowlisted environment (names with KEY/SECRET/TOKEN are still
    dropped). With ``pytest_args`` (``argv`` being ``python -m pytest *pytest_args``) the run is forked
    from the zygote when it is enabled and up, else ``argv`` is exec'd as usual. Never raises for
    anything the child does (timeouts, limits, crashes, huge output); raises :class:`ConfigError` for a
    non-positive timeout and :class:`WorkspaceError` if ``cwd`` is missing.
    """
    limits = limits or SandboxLimits()
    if not isinstance(timeout, (int, float)) or not timeout > 0 or math.isinf(timeout):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    root = Path(cwd)
    if not root.is_dir():
        raise WorkspaceError(f"cannot run in {str(root)!r}: the directory does not exist")
    marker = uuid.uuid4().hex
    rlimits = child_limits(limits, timeout)
    wrapper = [sys.executable, "-I", "-S", CHILD_SCRIPT, json.dumps(rlimits), "--", *argv]
    out, err = OutputCapture(limits.output_bytes), OutputCapture(limits.output_bytes)
    notes: list[str] = []
    timed_out = too_many = False
    with tempfile.TemporaryDirectory(prefix="latte_lab-home-") as home:
        run_env = sandbox_env(root.resolve(), home, marker, env)
        start = time.monotonic()
        proc: subprocess.Popen | zygote.ZygoteRun | None = None
        if pytest_args is not None and zygote.zygote_enabled():
            proc = zygote.launch(root, run_env, rlimits, pytest_args)
        if proc is None:
            proc = subprocess.Popen(
                wrapper,
                cwd=root,
                env=run_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        try:
            timed_out, too_many = _pump(proc, out, err, start + timeout, limits)
        finally:
            # Stop the run (at a timeout) or whatever it left behind (after a normal exit).
            grace = limits.sigterm_grace_seconds if (timed_out or proc.poll() is None) else 0.0
            stop_sandbox(proc.pid, marker, grace)
            _drain(proc, out, err)
            returncode = proc.wait()
        seconds = time.monotonic() - start
    if too_many:
        notes.append(
            f"process limit exceeded: the script started more than {limits.max_processes} processes "
            "(fork bomb?); all of them were stopped"
        )
    stdout, stderr = out.text(), err.text()
    if not too_many:
        notes += limit_notes(stderr, returncode, limits, rlimits["cpu"], timed_out)
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
        timed_out=timed_out,
        truncated=truncated,
        notes=tuple(dict.fromkeys(notes)),
        timeout=float(timeout),
    )


def _enlarge_pipe(fd: int) -> None:
    if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux only
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BUFFER_BYTES)
        except OSError:
            pass  # above /proc/sys/fs/pipe-max-size for unprivileged users: keep the default


def _pump(
    proc: subprocess.Popen | zygote.ZygoteRun,
    out: OutputCapture,
    err: OutputCapture,
    deadline: float,
    limits: SandboxLimits,
) -> tuple[bool, bool]:
    """Read both pipes until the child exits or the deadline passes. Returns (timed_out, too_many)."""
    overhead = getattr(proc, "reaper_processes", 0)
    sel = selectors.DefaultSelector()
    for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
        _enlarge_pipe(stream.fileno())
        sel.register(stream.fileno(), selectors.EVENT_READ, capture)
    next_check = time.monotonic() + PROCESS_CHECK_INTERVAL_SECONDS
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return True, False
            if proc.poll() is not None:
                return False, False
            if limits.max_processes is not None and now >= next_check:
                next_check = now + PROCESS_CHECK_INTERVAL_SECONDS
                if count_processes(proc.pid) - overhead > limits.max_processes:
                    return False, True
            if not sel.get_map():  # both pipes closed: only the exit (or the deadline) is left to wait for
                try:
                    proc.wait(timeout=max(min(deadline - now, next_check - now, 0.1), 0.001))
                except subprocess.TimeoutExpired:
                    pass
                continue
            wait = max(min(deadline - now, next_check - now, 0.1), 0.0)
            for key, _ in sel.select(wait):
                chunk = os.read(key.fd, READ_CHUNK_BYTES)
                if chunk:
                    key.data.feed(chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()


def _drain(proc: subprocess.Popen | zygote.ZygoteRun, out: OutputCapture, err: OutputCapture) -> None:
    """Read what is left in the pipes (bounded in time: a stray writer cannot hold us)."""
    sel = selectors.DefaultSelector()
    for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
        if stream is not None and not stream.closed:
            sel.register(stream.fileno(), selectors.EVENT_READ, capture)
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
