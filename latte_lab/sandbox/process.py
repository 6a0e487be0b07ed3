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
