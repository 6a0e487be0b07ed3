"""The zygotes: pre-warmed fork servers, the local backend's fast path for pytest runs and agents' scripts, and the
trusted evaluation server of hidden evaluations' judges (client side; the servers are ``_zygote_server.py`` and
``_trusted_server.py``, over the shared core ``_server_core.py``). What follows describes the pytest server; the
script server is the same process model without pytest: it imports nothing for the runs, and each run gets the
``__main__``, ``sys.argv``, ``sys.path`` and ``sys.modules`` a fresh ``python <script>`` gets.

A fresh ``python -m pytest`` spends 0.3-0.7 s starting the interpreter and importing pytest before it
runs a single test; a trial makes ~40 such runs. The zygote is one long-lived interpreter per
(interpreter, start-up environment) that has imported pytest and nothing from any workspace; each test
run is a child forked from it. Limits travel with each request (they are set in the forked child), so
one zygote serves every SandboxLimits.

* Started lazily by the first test run of this process, through the same allowlisted environment as any
  sandbox run minus the per-run variables (PYTHONPATH, run marker; HOME/TMPDIR are its own empty
  directory), in a new session, with cwd in that directory: it never holds a key, never opens a
  workspace. Shut down at exit (atexit: its control socket is closed, it exits on EOF).
* Before serving, the zygote rehearses one session on a suite of its own, through pytest's public API, so the
  plugin imports, regular expressions and lazy imports of a session are made once instead of in every run.
  It is never sent a file of a workspace: what a run finds in its memory is pytest's and the rehearsal's.
* Everything of a run other than how the process starts is shared with the exec path
  (:func:`latte_lab.sandbox.run.run_sandboxed`): the environment, the rlimits (``apply_limits`` of ``_child.py``), the
  pipes and their capped reading, the timeout, the process-count watchdog and the process-tree kill (with
  the run's reaper as leader: every process of the run, even a setsid()'d double fork, is a descendant
  of the reaper, a Linux child subreaper).
* Fallback: if the zygote cannot start, dies, or does not answer, the run takes the exec path (a
  RuntimeWarning once per process); a dead zygote is restarted transparently by the next run; after
  :data:`ZYGOTE_MAX_START_FAILURES` failed starts the process stays on the exec path.
* Threads: any number of threads may run tests at once. Sending a request is serialised by a lock (a few
  microseconds); the zygote forks each request at once, and every run then has its own pipes and its own
  reply socket, so runs proceed concurrently (the zygote itself is single-threaded).
* Known differences from the exec path, none visible to a task suite: modules pytest and its built-in
  plugins import are already imported when the run starts (a workspace file ``pytest.py`` or
  ``pluggy.py``, which would break the exec path's pytest, is not imported), the run's process is a
  child of the reaper rather than of this process, and /proc/<pid>/environ of a forked (not exec'd)
  process shows the zygote's environment (the run marker is found in os.environ and in everything the
  run exec's; the reaper makes the marker unnecessary for the kill).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping
from pathlib import Path

from latte_lab.sandbox.paths import FORK_SERVER_SCRIPT, TRUSTED_SERVER_SCRIPT
from latte_lab.sandbox.process import MARKER_VAR
from latte_lab.sandbox.request import RunHandle, RunRequest
from latte_lab.sandbox.threads import readable

USE_ZYGOTE = True  # run pytest in children forked from a pre-warmed server; False: always exec
ZYGOTE_DISABLE_VAR = "LATTE_LAB_NO_ZYGOTE"  # =1 in the environment also disables it
ZYGOTE_START_TIMEOUT_SECONDS = 60.0  # interpreter start + pytest imports, on a loaded machine
ZYGOTE_REPLY_TIMEOUT_SECONDS = 10.0  # request sent -> the forked child's pid is back
ZYGOTE_REAPER_EXIT_SECONDS = 0.5  # after a run's status: how long to wait for its reaper to exit
ZYGOTE_MAX_START_FAILURES = 3  # after this many failed starts the process stays on the exec path
ZIP_END_SEARCH_BYTES = 65557  # a zip archive's end record lies within this many bytes of its end
# The trusted evaluation server (mode "trusted"): the judges of hidden evaluations, forked from a process that has
# imported pytest and the judge's session script from the installed packages only (see that file). Its second mode, for sessions whose suite reads its data with an installed library (the boot arguments start
# with ``--import=<library>``): the same server with _trusted_server.LIBRARIES loaded ahead.
TRUSTED_LIBRARIES_MODE = "trusted-libraries"
TRUSTED_MODES = ("trusted", TRUSTED_LIBRARIES_MODE)
IMPORT_OPTION = "--import="  # _judge_session.IMPORT_OPTION
# When a zygote keeps the next run's processes forked ahead (see _zygote_server): "idle" while a CPU is
# idle (a sweep with a run on every CPU gains nothing from them), "always", or "never". Read when a zygote
# starts.
SPARES = "idle"
# Variables of a run's environment that differ from run to run: the zygote starts without them.
PER_RUN_VARS = frozenset({"PYTHONPATH", "HOME", "TMPDIR", MARKER_VAR, "PYTEST_DISABLE_PLUGIN_AUTOLOAD"})


USE_TRUSTED_SERVER = True  # judges forked from the trusted evaluation server; False: a fresh interpreter each
TRUSTED_SERVER_DISABLE_VAR = "LATTE_LAB_NO_TRUSTED_SERVER"  # =1 in the environment: a fresh interpreter each


def trusted_server_enabled() -> bool:
    """Whether the judges of hidden evaluations are forked from the trusted evaluation server
    (:data:`USE_TRUSTED_SERVER` and no ``LATTE_LAB_NO_TRUSTED_SERVER=1``; fork servers must be on too)."""
    return USE_TRUSTED_SERVER and os.environ.get(TRUSTED_SERVER_DISABLE_VAR, "").strip().lower() in ("", "0", "false")


def zygote_enabled() -> bool:
    """True when test runs go through the zygote: :data:`USE_ZYGOTE`, no ``LATTE_LAB_NO_ZYGOTE=1``,
    a platform with ``fork`` and file-descriptor passing, and not given up after failed starts."""
    if not USE_ZYGOTE or os.environ.get(ZYGOTE_DISABLE_VAR, "").strip().lower() not in ("", "0", "false"):
        return False
    if not (hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(socket, "SOCK_SEQPACKET")):
        return False
    return _ZYGOTE_STATE["start_failures"] < ZYGOTE_MAX_START_FAILURES


class ZygoteError(Exception):
    """The zygote could not start or serve a request; the caller falls back to the exec path."""


class _Zygote:
    """The parent's handle on one zygote process."""

    def __init__(self, env: Mapping[str, str], mode: str = "pytest"):
        self.mode = mode
        self.owner = os.getpid()  # a forked copy of this process (a sweep worker) starts its own
        self.home = tempfile.mkdtemp(prefix="latte_lab-zygote-")
        self.lock = threading.Lock()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log_path = Path(self.home) / "zygote.log"
        try:
            with open(log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    self._argv(theirs.fileno()),
                    cwd=self.home,
                    env=self._env(env),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as exc:
            mine.close()
            self._remove_home()
            raise ZygoteError(f"could not start the zygote: {exc}") from None
        finally:
            theirs.close()
        self.sock = mine
        try:
            mine.settimeout(ZYGOTE_START_TIMEOUT_SECONDS)
            ready = json.loads(mine.recv(4096) or b"{}")
            if "ready" not in ready:
                raise ZygoteError("exited during start-up")
            self.pid = int(ready["ready"])
            mine.settimeout(None)
        except (OSError, ValueError, ZygoteError) as exc:
            try:
                detail = log_path.read_bytes()[-2000:].decode("utf-8", "replace").strip()
            except OSError:
                detail = ""
            self.close()
            raise ZygoteError(f"the zygote did not start ({exc}){': ' + detail if detail else ''}") from None

    def _argv(self, fd: int) -> list[str]:
        """The server's command line, ``fd`` being its end of the control socket."""
        if self.mode in TRUSTED_MODES:  # as the boot script starts: no user site, no unsafe sys.path entry
            return [sys.executable, "-s", "-P", TRUSTED_SERVER_SCRIPT, str(fd), self.mode, SPARES]
        return [sys.executable, FORK_SERVER_SCRIPT, str(fd), self.mode, SPARES]

    def _env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The server's environment: the start-up environment, in its own empty home."""
        return {**env, "HOME": self.home, "TMPDIR": self.home}

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None and self.sock.fileno() >= 0

    def send(self, data: bytes, fds: list[int]) -> None:
        with self.lock:
            try:
                if fds:
                    socket.send_fds(self.sock, [data], fds)
                else:
                    self.sock.send(data)
            except OSError as exc:
                raise ZygoteError(f"the zygote is not answering: {exc}") from None

    def _remove_home(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)

    def close(self) -> None:
        """Stop the zygote: EOF on its control socket, then SIGKILL if it lingers. Idempotent.

        In a process forked from the owner (a sweep worker) only that process's copy of the socket
        is closed: the zygote belongs to the owner.
        """
        if self.owner != os.getpid():
            try:
                self.sock.close()
            except OSError:
                pass
            return
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        self._remove_home()


class StatusRun(RunHandle):
    """``poll`` and ``wait`` of a run whose exit status arrives on its reply socket (``_receive``)."""

    label = "a forked run"  # what a wait that timed out names
    _sock: socket.socket | None = None

    def _message(self, timeout: float | None) -> dict | None:
        """The next message on the reply socket within ``timeout`` (None: forever): None if there is none yet
        (or the status is already in), ``{}`` at end of file or for one that does not parse."""
        if self.returncode is not None or self._sock is None:
            return None
        if not readable(self._sock, timeout):
            return None
        try:
            data = self._sock.recv(65536)
            return json.loads(data) if data else {}
        except (OSError, ValueError):
            return {}

    def _receive(self, timeout: float | None) -> None:  # pragma: no cover - every run kind has its own
        raise NotImplementedError

    def poll(self) -> int | None:
        self._receive(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired(self.label, timeout or 0)
            self._receive(remaining)
        return self.returncode


class ZygoteRun(StatusRun):
    """One run forked by the zygote, with the part of ``subprocess.Popen`` the sandbox uses.

    ``pid`` is the run's reaper (the leader for :func:`~latte_lab.sandbox.process.stop_sandbox`: the run's process is its child
    and everything the run leaves behind ends up below it); ``child_pid`` the pytest process.
    """

    reaper_processes = 1  # processes of the run's tree that are not the run's own (2 with a PID namespace's init)
    label = "pytest (zygote)"

    def __init__(self, sock: socket.socket, out_r: int, err_r: int, child_pid: int, leader: int):
        self._sock: socket.socket | None = sock
        self.stdout = open(out_r, "rb", buffering=0)  # noqa: SIM115 - closed when the run is drained
        self.stderr = open(err_r, "rb", buffering=0)  # noqa: SIM115
        self.pid = leader
        self.child_pid = child_pid
        self.returncode: int | None = None
        self.tree_empty = False  # the reaper, a subreaper, reported no process of the run left

    def _close_sock(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _receive(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` (None: forever) for the run's exit status."""
        message = self._message(timeout)
        if message is None:
            return
        if "status" not in message:
            # EOF without a status: the reaper was killed (with the run, at a timeout) first.
            self.returncode = -signal.SIGKILL
            self._close_sock()
            return
        self.returncode = os.waitstatus_to_exitcode(int(message["status"]))
        self.tree_empty = message.get("orphans") is False and message.get("subreaper") is True
        if not message.get("orphans"):
            # The reaper exits right after reporting; wait for that (EOF) so the kill step finds
            # nothing left and returns at once.
            if readable(self._sock, ZYGOTE_REAPER_EXIT_SECONDS):
                try:
                    self._sock.recv(16)
                except OSError:
                    pass
        self._close_sock()



class ServerTable:
    """A process's live servers of one kind (its zygotes, its warm sandboxes), keyed by what they were started
    for: the table, its lock, the count of failed starts and the one warning said when a server is
    unavailable. A process forked from this one starts its own servers (its copy of the table is emptied, only
    its copies of their sockets closed) and gets a new lock (another thread may have held it at the fork)."""

    def __init__(self, unavailable: str):
        self.unavailable = unavailable  # the warning's first words
        self.table: collections.OrderedDict[tuple, _Zygote] = collections.OrderedDict()
        self.lock = threading.Lock()
        self.state = {"start_failures": 0, "warned": False, "atexit": False}
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        self.lock = threading.Lock()
        inherited = list(self.table.values())
        self.table.clear()
        for server in inherited:
            server.close()  # only our copy of its socket

    def warn(self, reason: str) -> None:
        """The warning, once per process."""
        with self.lock:
            if self.state["warned"]:
                return
            self.state["warned"] = True
        warnings.warn(f"{self.unavailable}: {reason}", RuntimeWarning, stacklevel=4)


_SERVERS = ServerTable("latte_lab: pytest fork server unavailable, test runs use a fresh interpreter")
_ZYGOTES = _SERVERS.table
_ZYGOTE_STATE = _SERVERS.state
_warn = _SERVERS.warn


def _start_env(child_env: Mapping[str, str]) -> dict[str, str]:
    """The run's environment without its per-run variables: what the zygote starts with."""
    return {k: v for k, v in child_env.items() if k not in PER_RUN_VARS}


def _get(child_env: Mapping[str, str], mode: str = "pytest") -> _Zygote | None:
    """The live zygote for this interpreter, mode and start-up environment, started if need be."""
    env = _start_env(child_env)
    key = (sys.executable, mode, SPARES, tuple(sorted(env.items())))
    with _SERVERS.lock:
        zygote = _ZYGOTES.get(key)
        if zygote is not None and zygote.alive():
            return zygote
        if zygote is not None:  # died (or inherited from the process we were forked from)
            del _ZYGOTES[key]
            zygote.close()
        if _ZYGOTE_STATE["start_failures"] >= ZYGOTE_MAX_START_FAILURES:
            return None
        try:
            zygote = _Zygote(env, mode)
        except ZygoteError as exc:
            _ZYGOTE_STATE["start_failures"] += 1
            error = str(exc)
        else:
            _ZYGOTES[key] = zygote
            if not _ZYGOTE_STATE["atexit"]:
                import atexit

                atexit.register(shutdown_zygotes)
                _ZYGOTE_STATE["atexit"] = True
            return zygote
    _warn(error)
    return None


def shutdown_zygotes() -> None:
    """Stop every zygote this process started (registered with atexit; safe to call any time:
    the next test run starts a new one)."""
    with _SERVERS.lock:
        zygotes = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for zygote in zygotes:
        zygote.close()


def server_mode(request: RunRequest) -> str:
    """The fork server a run is forked from: "trusted" (a hidden evaluation's judge), "trusted-libraries" (one whose
    suite reads its data with an installed library: ``--import=`` in its boot arguments), "script" or "pytest"."""
    if request.kind == "judge":
        args = request.args
        return TRUSTED_LIBRARIES_MODE if args and args[0].startswith(IMPORT_OPTION) else "trusted"
    return request.kind


def forkable(request: RunRequest) -> bool:
    """Whether a fork server may start ``request``: fork servers on (and the trusted one, for a judge), and a kind
    they serve; a script only when it is no zip archive named .py (which python would run as an application)."""
    if not zygote_enabled():
        return False
    if request.kind == "judge":
        return trusted_server_enabled()
    if request.kind == "script":
        try:
            with open(request.cwd / request.argv[1], "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(fh.tell() - ZIP_END_SEARCH_BYTES, 0))
                return b"PK\x05\x06" not in fh.read()
        except OSError:
            return False
    return request.kind == "pytest"


def launch(request: RunRequest, child_env: Mapping[str, str], child_limits: Mapping[str, int | None]) -> ZygoteRun | None:
    """Start ``request`` (:func:`forkable`) in a child of a fork server; None (after a warning) to use the exec
    path. ``child_env`` is the run's whole environment, ``child_limits`` the config of its reaper (limits and
    confinement)."""
    mode = server_mode(request)
    zygote = _get(child_env, mode)
    if zygote is None:
        return None
    message = run_request(os.path.abspath(request.cwd), child_env, child_limits, request)

    def send(fds: list[int]) -> None:
        nonlocal zygote
        try:
            zygote.send(message, fds)
        except ZygoteError:
            if zygote.alive():
                raise
            # It died since the last run (nothing was sent): restart it, once, transparently.
            zygote = _get(child_env, mode)
            if zygote is None:
                raise
            zygote.send(message, fds)

    try:
        sock, (out_r, err_r), reply = hand_over(send, 2, "the zygote", request.stdin)
    except ZygoteError as exc:
        _warn(str(exc))  # a dead zygote is restarted by the next run
        return None
    run = ZygoteRun(sock, out_r, err_r, int(reply["pid"]), int(reply["leader"]))
    if reply.get("init"):  # the reaper and the init of the run's PID namespace
        run.reaper_processes = 2
    return run


def run_request(cwd: str, env: Mapping[str, str], limits: Mapping[str, int | None], request: RunRequest,
                **extra) -> bytes:
    """A fork server's message for one run (see ``_server_core``): ``args`` for pytest, ``script``, or ``trusted`` (a
    judge's boot arguments), from the request's kind; ``extra`` adds fields (a kept sandbox's)."""
    payload = {"cwd": cwd, "env": dict(env), "limits": dict(limits), **extra}
    payload[{"judge": "trusted", "script": "script", "pytest": "args"}[request.kind]] = request.args
    return json.dumps(payload).encode()


def hand_over(send, pipes: int, server: str, stdin: int | None = None) -> tuple[socket.socket, list[int], dict]:
    """One run's request handed to a fork server: ``pipes`` new pipes (the run's stdout, stderr, ...), the run's
    standard input (``stdin``, a descriptor the caller keeps; ``/dev/null`` when None) and a reply socket, whose
    ends for the run ``send(fds)`` passes on (write ends first, then the input, then the socket). Returns the
    reply socket, the read ends and the server's first reply (``{"pid": ...}``); raises :class:`ZygoteError`,
    with every descriptor it made closed, if ``send`` does or the server answers no pid within
    :data:`ZYGOTE_REPLY_TIMEOUT_SECONDS`."""
    ends = [os.pipe() for _ in range(pipes)]
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    devnull = os.open(os.devnull, os.O_RDONLY) if stdin is None else None
    try:
        try:
            send([w for _r, w in ends] + [stdin if devnull is None else devnull, theirs.fileno()])
        finally:
            for _r, w in ends:
                os.close(w)
            if devnull is not None:
                os.close(devnull)
            theirs.close()
        mine.settimeout(ZYGOTE_REPLY_TIMEOUT_SECONDS)
        try:
            data = mine.recv(65536)
            reply = json.loads(data) if data else {}
        except (OSError, ValueError) as exc:
            raise ZygoteError(f"no answer from {server}: {exc}") from None
        if "pid" not in reply:
            raise ZygoteError(str(reply.get("error", f"{server} closed the request unanswered")))
        mine.settimeout(None)
        return mine, [r for r, _w in ends], reply
    except ZygoteError:
        for r, _w in ends:
            os.close(r)
        mine.close()
        raise
