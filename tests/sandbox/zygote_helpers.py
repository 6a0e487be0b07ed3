"""What the tests of the pytest fork server (zygote) of the local backend share (tests/sandbox/test_sandbox_zygote_*.py):
whether a process is alive and what a run left behind, the count of runs the zygote forked (``Launches``; the
``launches`` and ``isolated_zygote_state`` fixtures are in tests/sandbox/conftest.py), a run both ways."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from latte_lab.sandbox import TestRun
from latte_lab.sandbox import zygote as zyg
from latte_lab.sandbox.judge import HOST_NAME

needs_zygote = pytest.mark.skipif(
    not (hasattr(os, "fork") and Path("/proc/self/stat").exists()), reason="the zygote needs fork and /proc"
)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_dead(pids: list[int], seconds: float = 3.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


HOST_PID_NAMESPACE = os.readlink("/proc/self/ns/pid")
# what a run writes beside the pids it records: the PID namespace they are numbered in
WRITE_NAMESPACE = "open('ns.txt', 'w').write(os.readlink('/proc/self/ns/pid'))"


def in_namespace(namespace: str) -> list[int]:
    """Host pids of the live processes of the PID namespace ``namespace`` (``pid:[...]``)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.readlink(f"/proc/{entry}/ns/pid") == namespace and alive(int(entry)):
                found.append(int(entry))
        except OSError:
            continue
    return found


def left_behind(root: Path, pids: list[int], seconds: float = 3.0) -> list[int]:
    """What is left of the run in ``root`` whose processes recorded ``pids`` and their namespace (ns.txt): as root
    a run has a PID namespace of its own (numbered from 1, seen from the host only through /proc/<pid>/ns), and
    nothing may be left in it; elsewhere the pids themselves must be gone."""
    namespace = (root / "ns.txt").read_text()
    if namespace == HOST_PID_NAMESPACE:
        return wait_dead(pids, seconds)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and in_namespace(namespace):
        time.sleep(0.05)
    return in_namespace(namespace)


def identity(pid: int) -> tuple[int, str]:
    """(pid, PID namespace) of a live process: a spare's child is the run's process, or (as root) the init of the
    run's own PID namespace, where the run's process is PID 2."""
    return pid, os.readlink(f"/proc/{pid}/ns/pid")


def ran_in(stdout: str, spare: tuple[int, str]) -> bool:
    """Whether the run whose output shows ``pid <n> <namespace>`` was the spare's (:func:`identity`)."""
    pid, namespace = re.search(r"pid (\d+) (\S+)", stdout).groups()
    return int(pid) == spare[0] if namespace == HOST_PID_NAMESPACE else namespace == spare[1]


class Launches:
    """Counts test runs that were (or were not) forked by the zygote; hidden evaluations, forked from the trusted
    evaluation server, apart."""

    def __init__(self, monkeypatch):
        self.zygote = 0
        self.exec = 0
        self.trusted = 0
        self.host = 0
        real = zyg.launch

        def spy(request, *args, **kwargs):
            run = real(request, *args, **kwargs)
            if request.kind == "judge":
                self.trusted += run is not None
            elif request.kind == "script" and request.args[0] == HOST_NAME:  # a hidden evaluation's workspace process
                self.host += run is not None
            elif run is None:
                self.exec += 1
            else:
                self.zygote += 1
            return run

        monkeypatch.setattr(zyg, "launch", spy)


# A workspace test that leaves processes behind (a child, a daemon out of its session), their pids in files
# beside the PID namespace they are numbered in; {tail} ends it.
TREE = """
import os, subprocess, sys, time

def test_tree():
    """ + WRITE_NAMESPACE + """
    subprocess.Popen([sys.executable, "-c",
        "import os, time; open('child.pid', 'w').write(str(os.getpid())); time.sleep(100)"])
    if os.fork() == 0:  # a double fork that leaves the session, without exec
        os.setsid()
        if os.fork() == 0:
            open('daemon.pid', 'w').write(str(os.getpid()))
            time.sleep(100)
        os._exit(0)
    open('main.pid', 'w').write(str(os.getpid()))
    time.sleep(0.5)
    {tail}
"""


def both_ways(monkeypatch, fn):
    """(exec-path result, zygote result) of ``fn()``."""
    monkeypatch.setattr(zyg, "USE_ZYGOTE", False)
    by_exec = fn()
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    by_zygote = fn()
    return by_exec, by_zygote


def outcome(run: TestRun) -> tuple:
    return (run.returncode, run.passed, run.failed, run.errors, run.skipped, run.failed_tests, run.timed_out)

