"""Process-tree control of sandboxed runs, through psutil (Linux, macOS and the BSDs alike).

"Every process of a run" is found three ways: the session and process group of the run's first process
(its leader, started in a new session), every descendant of those by parent pid, and every process whose
initial environment carries the run's random marker (:data:`MARKER_VAR`). A process that leaves the
session and whose parent exits falls out of the first two; the marker catches it unless it ``exec``s
with a scrubbed environment. Where the leader is a child subreaper (Linux) such a process is re-parented
to the leader and stays a descendant, so nothing escapes.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterable

import psutil

MARKER_VAR = "LATTE_SANDBOX_RUN"  # env var whose random value tags every process of one run
KILL_DEADLINE_SECONDS = 5.0  # give up re-killing after this (processes in D state cannot die sooner)
STOP_POLL_SECONDS = 0.02  # how often the processes of a stopping run are looked up again
_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied, ProcessLookupError, PermissionError)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except _GONE:
        return False


def _table() -> dict[int, tuple[int, bool]]:
    """{pid: (parent pid, alive)} of every process we may see (zombies are not alive)."""
    table: dict[int, tuple[int, bool]] = {}
    for proc in psutil.process_iter(["ppid", "status"]):
        ppid, status = proc.info["ppid"], proc.info["status"]
        if ppid is not None:
            table[proc.pid] = (ppid, status not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD, None))
    return table


def _has_marker(pid: int, value: str) -> bool:
    try:
        return psutil.Process(pid).environ().get(MARKER_VAR) == value
    except (*_GONE, OSError):
        return False


def sandbox_processes(leader: int, marker: str | None = None) -> set[int]:
    """Live (non-zombie) processes of the run whose first process is ``leader``.

    Members: the leader, its session and process group, every descendant of those, and (if ``marker``
    is given) every process whose environment carries ``MARKER_VAR=marker`` and its descendants. This
    process is never a member.
    """
    me = os.getpid()
    table = _table()
    members = {leader} if leader in table else set()
    for pid in table:
        if pid == me or pid in members:
            continue
        try:
            if os.getpgid(pid) == leader or os.getsid(pid) == leader:
                members.add(pid)
        except OSError:
            continue
    if marker:
        members |= {pid for pid in table if pid != me and pid not in members and _has_marker(pid, marker)}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(members)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in members and child != me:
                members.add(child)
                stack.append(child)
    return {pid for pid in members if table[pid][1]}


def count_processes(leader: int, *, tree_only: bool = False) -> int:
    """Live processes of the leader's session, process group and tree: the cheap check a running
    sandbox makes every few hundred milliseconds (no environment is read).

    ``tree_only``: the leader is a child subreaper (the sandbox's reapers are, on Linux), so every process
    of the run is its descendant; on Linux they are then counted from ``/proc/<pid>/task/*/children``
    alone, without reading the whole process table.
    """
    if tree_only and _PROC_CHILDREN:
        return _count_tree(leader)
    me = os.getpid()
    pids: set[int] = set()
    for pid in psutil.pids():
        try:
            if pid != me and (pid == leader or os.getsid(pid) == leader or os.getpgid(pid) == leader):
                pids.add(pid)
        except OSError:
            continue
    try:
        pids.update(child.pid for child in psutil.Process(leader).children(recursive=True))
    except _GONE:
        pass
    return sum(1 for pid in pids if _alive(pid))


def _proc_children_supported() -> bool:
    me = os.getpid()
    return os.path.exists(f"/proc/{me}/task/{me}/children")


_PROC_CHILDREN = sys.platform.startswith("linux") and _proc_children_supported()


def _count_tree(leader: int) -> int:
    """Live (non-zombie) processes of the tree below ``leader``, the leader included, from /proc."""
    me = os.getpid()
    seen: set[int] = set()
    stack = [leader]
    count = 0
    while stack:
        pid = stack.pop()
        if pid in seen or pid == me:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().rpartition(b")")[2].split(None, 1)[0]
            tids = os.listdir(f"/proc/{pid}/task")
        except (OSError, IndexError):
            continue
        if state in (b"Z", b"X"):
            continue
        count += 1
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    stack.extend(int(child) for child in fh.read().split())
            except (OSError, ValueError):
                continue
    return count


def _signal_all(leader: int | None, pids: Iterable[int], sig: int) -> None:
    if leader is not None:
        try:
            os.killpg(leader, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_sandbox(leader: int, marker: str | None, grace: float) -> int:
    """SIGTERM every process of the run, wait up to ``grace`` s, then SIGKILL until none is left.

    The leader is killed last: while it lives (a reaper, a child subreaper) the processes whose parents
    die are re-parented to it and stay in its tree, where the next look finds them. Returns how many
    processes were found. Safe to call when everything has already exited.
    """
    members = sandbox_processes(leader, marker)
    found = set(members)
    if not members:
        return 0  # everything already exited (the usual case after a normal run)
    _signal_all(leader, members, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while members and time.monotonic() < deadline:
        time.sleep(STOP_POLL_SECONDS)
        members = sandbox_processes(leader, marker)
        found |= members
    kill_deadline = time.monotonic() + KILL_DEADLINE_SECONDS
    while True:
        others = members - {leader}
        _signal_all(None if others else leader, others or members, signal.SIGKILL)
        time.sleep(STOP_POLL_SECONDS / 2)
        members = sandbox_processes(leader, marker)
        found |= members
        if not members or time.monotonic() > kill_deadline:
            break
    return len(found)


def user_task_count(uid: int) -> int:
    """Processes and threads ``uid`` already runs: what the kernel's RLIMIT_NPROC counts."""
    total = 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        uids, threads = proc.info["uids"], proc.info["num_threads"]
        if uids is not None and uids.real == uid:
            total += threads or 1
    return total


PR_SET_DUMPABLE = 4  # linux/prctl.h


def make_undumpable() -> bool:
    """Make this process non-dumpable (Linux): its ``/proc/<pid>/environ``, ``mem`` and ``fd`` can then
    be read only with CAP_SYS_PTRACE, which sandboxed code never holds. Call it in a process that holds
    API keys before it starts agent code. Returns whether it took effect (False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = _libc()
    return libc is not None and libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


@functools.cache
def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


# --- the process cap: a pids cgroup ------------------------------------------------------------------
# RLIMIT_NPROC counts every process of the user and is not enforced for root (nor with CAP_SYS_RESOURCE),
# so as root a fork bomb ran far past it. A pids cgroup caps the processes (and threads) of one run
# whoever runs them: the kernel refuses the fork beyond ``pids.max`` with EAGAIN, and counts the refusals.

CGROUP_PREFIX = "latte_lab-"  # a run's cgroup: latte_lab-<pid of the process that made it>-<random>
CGROUP_REMOVE_SECONDS = 2.0  # a cgroup is removed once its last process has exited; give up after this
SHELL = "/bin/sh"  # joins a bubblewrap sandbox to its cgroup before it execs bwrap


class PidsCgroup:
    """One cgroup of the pids controller, made by this process for one run (or one kept sandbox).

    >>> cg = PidsCgroup.make(16)
    >>> cg is None or (cg.limit_hits(), cg.current()) == (0, 0)
    True
    >>> cg is None or cg.remove()
    True
    """

    def __init__(self, path: str):
        self.path = path
        self.procs = f"{path}/cgroup.procs"  # writing "0" there moves the writer in

    @classmethod
    def make(cls, cap: int | None) -> PidsCgroup | None:
        """A new cgroup whose processes may number at most ``cap`` (None: no cap yet), or None where none can
        be made here (not root and nothing delegated, no pids controller, another system than Linux)."""
        base = pids_cgroup_base()
        if base is None:
            return None
        path = f"{base}/{CGROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            os.mkdir(path)
        except OSError:
            return None
        cgroup = cls(path)
        try:
            cgroup.set_max(cap)
        except OSError:
            cgroup.remove()
            return None
        return cgroup

    def _read(self, name: str) -> str:
        with open(f"{self.path}/{name}") as fh:
            return fh.read()

    def set_max(self, cap: int | None) -> None:
        with open(f"{self.path}/pids.max", "w") as fh:
            fh.write("max" if cap is None else str(cap))

    def current(self) -> int:
        """Processes and threads in the cgroup now."""
        return int(self._read("pids.current"))

    def peak(self) -> int | None:
        """The most processes and threads it held at once (``pids.peak``, Linux 6.1 on; None before)."""
        try:
            return int(self._read("pids.peak"))
        except (OSError, ValueError):
            return None

    def limit_hits(self) -> int:
        """How many forks the cap refused so far (``pids.events``)."""
        try:
            for line in self._read("pids.events").splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def join_command(self) -> list[str]:
        """A command prefix that moves itself into the cgroup, then execs the rest (bubblewrap's processes,
        whose children the kernel then keeps in it)."""
        return [SHELL, "-c", 'echo 0 >"$0" && exec "$@"', self.procs]

    def remove(self) -> bool:
        """Kill what is left in the cgroup and remove it; whether it is gone (else a later :meth:`make` of
        this process tries again, once its process has exited)."""
        deadline = time.monotonic() + CGROUP_REMOVE_SECONDS
        while True:
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
            try:
                pids = [int(pid) for pid in self._read("cgroup.procs").split()]
            except (OSError, ValueError):
                pids = []
            _signal_all(None, pids, signal.SIGKILL)
            time.sleep(STOP_POLL_SECONDS / 4)


_PIDS_BASE: dict[int, str | None] = {}  # per process (a forked child finds its own)


def pids_cgroup_base() -> str | None:
    """The directory this process may make run cgroups in (its own cgroup of the pids controller), found
    once per process; None where it cannot. Removes what earlier, dead processes left there."""
    me = os.getpid()
    if me not in _PIDS_BASE:
        base = _find_pids_base()
        if base is not None and not _can_make(base):
            base = None
        _PIDS_BASE[me] = base
        if base is not None:
            _remove_stale(base)
    return _PIDS_BASE[me]


def _find_pids_base() -> str | None:
    """This process's cgroup directory in the pids controller's hierarchy: the cgroup v1 hierarchy that has
    it, else the unified (v2) one when it offers the controller."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/self/cgroup") as fh:
            own = fh.read().splitlines()
        with open("/proc/self/mountinfo") as fh:
            mounts = fh.read().splitlines()
    except OSError:
        return None
    v1 = v2 = None
    for line in own:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "pids" in controllers.split(","):
            v1 = path
        elif number == "0" and controllers == "":
            v2 = path
    for wanted, path in (("cgroup", v1), ("cgroup2", v2)):
        if path is None:
            continue
        for line in mounts:
            fields, _, fs = line.partition(" - ")
            fields, fs = fields.split(), fs.split()
            if len(fields) < 5 or len(fs) < 3 or fs[0] != wanted:
                continue
            if wanted == "cgroup" and "pids" not in fs[2].split(","):
                continue
            root, point = fields[3], fields[4]
            if not (path == root or path.startswith(root.rstrip("/") + "/")):
                continue  # our cgroup lies outside what this mount shows
            directory = os.path.normpath(f"{point}/{path[len(root):]}")
            if wanted == "cgroup2":
                try:
                    with open(f"{directory}/cgroup.controllers") as fh:
                        if "pids" not in fh.read().split():
                            continue
                except OSError:
                    continue
            return directory
    return None


def _can_make(base: str) -> bool:
    """Whether a cgroup with a ``pids.max`` can be made in ``base`` (on cgroup v2 the controller must be
    enabled for ``base``'s children, which is tried once)."""
    probe = f"{base}/{CGROUP_PREFIX}{os.getpid()}-probe-{uuid.uuid4().hex[:8]}"
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        if not os.path.exists(f"{probe}/pids.max"):
            try:
                with open(f"{base}/cgroup.subtree_control", "w") as fh:
                    fh.write("+pids")
            except OSError:
                return False
        return os.path.exists(f"{probe}/pids.max")
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


def _remove_stale(base: str) -> None:
    """Remove the empty run cgroups of processes that no longer run (killed before they could)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(CGROUP_PREFIX):
            continue
        owner = name[len(CGROUP_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not psutil.pid_exists(int(owner)):
            try:
                os.rmdir(f"{base}/{name}")
            except OSError:
                pass
