"""What a sandboxed run asks for (:class:`RunRequest`), what a backend hands back while it runs (:class:`RunHandle`)
and what the run gives back at its end (:class:`RunResult`).

A request says what to run, where and within which limits, and what kind of run it is; nothing in it says how
the run is to be started. That is the backend's to decide (:mod:`latte_lab.sandbox.backends`): each backend
starts a request its own way, fast where it can (a fork server, a kept sandbox), and hands back a
:class:`RunHandle`, which :func:`latte_lab.sandbox.run.run_sandboxed` reads, limits and stops the same way
whichever way the run was started.

>>> import sys, tempfile
>>> RunRequest([sys.executable, "-m", "pytest", "-q"], tempfile.gettempdir(), timeout=60).kind
'pytest'
>>> RunRequest([sys.executable, "analysis.py", "--fast"], tempfile.gettempdir(), timeout=60).kind
'script'
>>> RunRequest(["ls", "-l"], tempfile.gettempdir(), timeout=5).kind
'command'
"""

from __future__ import annotations

import copy
import math
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from latte_lab.errors import ConfigError, WorkspaceError
from latte_lab.sandbox.limits import SandboxLimits

KINDS = ("command", "script", "pytest", "judge")
"""What a run is: any ``command``; a ``script`` (``python <file>.py <args>``, an agent's script); a ``pytest``
session (``python -m pytest <args>``); a ``judge`` (a hidden evaluation's session, ``python -s -P <judge
session> <args>``: trusted code, run on the host, on the local backend, whatever the sandbox)."""


def kind_of(argv: Sequence[str]) -> str:
    """The kind of run ``argv`` is, from its shape (a judge is never guessed: its request says so)."""
    if len(argv) >= 3 and argv[0] == sys.executable and list(argv[1:3]) == ["-m", "pytest"]:
        return "pytest"
    if len(argv) >= 2 and argv[0] == sys.executable and argv[1].endswith(".py") and not argv[1].startswith("-"):
        return "script"
    return "command"


@dataclass(frozen=True)
class RunRequest:
    """One run: ``argv`` in ``cwd`` within ``timeout`` seconds and ``limits``, its environment the allowlisted one
    plus ``env`` (names with KEY, SECRET, TOKEN, ... are dropped all the same).

    ``kind`` (:data:`KINDS`; by default from ``argv``'s shape, :func:`kind_of`) lets a backend start the run a
    faster way with the same result: a pytest session or a script forked from a process that has them ready.
    ``export``: on the bubblewrap backend, the top-level entries of ``cwd`` the run hands back (None: all of
    them; a run in a throwaway copy needs only its report). ``reuse``: ``cwd`` is a directory its caller runs in
    again (a workspace, or a scratch directory a backend gave it, :meth:`Backend.scratch`), so a sandbox kept
    between runs may serve the run. ``report``: the name of a file the run leaves in ``cwd`` for its caller to
    read (pytest's JUnit report): a run made in a copy of ``cwd`` hands it on even when it cannot hand on the
    rest. ``stdin``: a descriptor that becomes the run's standard input (a socket
    of a hidden evaluation), closed once the run has it; ``/dev/null`` when None.
    """

    argv: tuple[str, ...]
    cwd: Path
    timeout: float
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    env: Mapping[str, str] = field(default_factory=dict)
    kind: str = ""
    export: tuple[str, ...] | None = None
    reuse: bool = False
    report: str | None = None
    stdin: int | None = None

    def __init__(self, argv: Sequence[str], cwd: Path | str, *, timeout: float, limits: SandboxLimits | None = None,
                 env: Mapping[str, str] | None = None, kind: str | None = None, export: Sequence[str] | None = None,
                 reuse: bool = False, report: str | None = None, stdin: int | None = None):
        values = {"argv": tuple(str(a) for a in argv), "cwd": Path(cwd), "timeout": timeout,
                  "limits": limits or SandboxLimits(), "env": dict(env or {}), "kind": kind or kind_of(argv),
                  "export": tuple(export) if export is not None else None, "reuse": reuse, "report": report,
                  "stdin": stdin}
        for name, value in values.items():
            object.__setattr__(self, name, value)
        if self.kind not in KINDS:
            raise ConfigError(f"unknown kind of run {self.kind!r}; use one of {', '.join(KINDS)}")

    def checked(self) -> RunRequest:
        """The request with ``cwd`` resolved; ConfigError for a timeout that is not a positive number of seconds,
        WorkspaceError for a ``cwd`` that is not a directory."""
        timeout = self.timeout
        if not isinstance(timeout, (int, float)) or not timeout > 0 or math.isinf(timeout):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        root = self.cwd.resolve()
        if not root.is_dir():
            raise WorkspaceError(f"cannot run in {str(self.cwd)!r}: the directory does not exist")
        checked = copy.copy(self)
        object.__setattr__(checked, "cwd", root)
        return checked

    def moved(self, cwd: Path, *, reuse: bool | None = None) -> RunRequest:
        """The same run in ``cwd`` (a copy of the original directory): its arguments name ``cwd`` where they named
        the original."""
        old, new = str(self.cwd), str(cwd)
        argv = tuple(new + a[len(old):] if a == old or a.startswith(old + os.sep) else a for a in self.argv)
        argv = tuple(a.replace(f"={old}{os.sep}", f"={new}{os.sep}") for a in argv)  # --junitxml=<cwd>/...
        return RunRequest(argv, cwd, timeout=self.timeout, limits=self.limits, env=self.env, kind=self.kind,
                          export=self.export, reuse=self.reuse if reuse is None else reuse, report=self.report,
                          stdin=self.stdin)

    @property
    def args(self) -> list[str]:
        """What follows the interpreter and what it runs: pytest's arguments, a script's path and arguments, a
        judge's boot arguments (a command's whole argv)."""
        skip = {"pytest": 3, "script": 1, "judge": 4}.get(self.kind, 0)
        return list(self.argv[skip:])


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


@dataclass
class RunContext:
    """What :func:`~latte_lab.sandbox.run.run_sandboxed` gives a backend to start one run with: the run's whole
    environment (``env``, with the HOME and matplotlib directory the backend's :meth:`Backend.run_paths` gave), its
    marker (an environment variable of every process of the run, :data:`~latte_lab.sandbox.process.MARKER_VAR`), a
    private directory on the host for its HOME and TMPDIR (``home``), the rlimits of ``_child.py`` (``rlimits``),
    what is undone when the run ends (``cleanup``: a pids cgroup, a stage, ...) and the host's matplotlib directory
    (``host_mplconfig``)."""

    env: dict[str, str]
    marker: str
    home: Path
    rlimits: dict
    cleanup: ExitStack
    host_mplconfig: str


class RunHandle:
    """A started run, with the part of ``subprocess.Popen`` the sandbox uses (``pid``, ``stdout``, ``stderr``,
    ``poll``, ``wait``) and what :func:`~latte_lab.sandbox.run.run_sandboxed` needs besides to watch, stop and
    finish it, whichever way a backend started it.

    ``pid`` leads the run's process tree (:func:`~latte_lab.sandbox.process.stop_sandbox`); ``reaper_processes``
    of that tree are not the run's own (its reaper, an init); ``tree_empty``: the reaper proved that no process
    of the run is left. ``cgroup`` is the pids cgroup that caps the run (``cgroup_hits``: forks it refused before
    the run began), ``watched`` the directories whose size the parent checks (with their caps), ``export_fd`` the
    stream of the workspace the run hands back (its report in ``report``, written into ``root``, the directory it
    ran in). :meth:`finish` gives the run's result its last touches (a run made in a copy of its directory).
    """

    pid: int = 0
    stdout = None
    stderr = None
    returncode: int | None = None
    reaper_processes: int = 1
    tree_empty: bool = False
    cgroup = None
    cgroup_hits: int = 0
    watched: tuple[tuple[Path, int], ...] = ()
    export_fd: int | None = None
    report: dict = {}  # (never changed in place: a handle sets its own)
    root: Path | None = None
    label = "a run"  # what a wait that timed out names

    def poll(self) -> int | None:  # pragma: no cover - every handle has its own
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> int:  # pragma: no cover - every handle has its own
        raise NotImplementedError

    def request_stop(self) -> None:
        """Ask the run to stop itself (a bubblewrap sandbox's init: then it hands back the workspace)."""

    def notes(self, stderr: str) -> list[str]:
        """What the backend has to say about the run's end beyond the limits every run has."""
        return []

    def close(self) -> None:
        """Release what the handle holds (descriptors, a kept sandbox)."""

    def finish(self, result: RunResult) -> RunResult:
        return result
