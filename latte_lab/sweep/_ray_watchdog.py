"""Ends a local Ray cluster with the sweep driver that started it, however the driver ends.

Run by path, so that it starts in milliseconds without importing latte_lab::

    python _ray_watchdog.py <driver pid> <pid of a process ray.init started> ...

It is the driver's child, in a session of its own (a Ctrl-C in the terminal, or a signal to the driver's
process group, does not reach it). Every :data:`POLL_SECONDS` it notes the cluster's processes (the ones
given, and everything they started: the raylet's agents and workers, and their sandboxes). Once the driver
is gone (its parent changed, even after a SIGKILL) or the cluster is (``ray.shutdown()``), it kills
whatever of those is still alive and exits. Without it, a driver killed with SIGKILL leaves the raylet's
agents alive for about a minute: they try to report the raylet's death to the GCS, which died with the
driver, and wait out a hard-coded 60 s timeout.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil

POLL_SECONDS = 0.2  # how often the driver is checked and the cluster's processes noted: well within the 10 s allowed
KILL_ROUNDS = 3  # kills repeated for processes started while the first ones were being killed
KILL_WAIT_SECONDS = 1.0  # a SIGKILLed process is gone within this (a zombie counts as gone)


def _running(proc: psutil.Process) -> bool:
    """Alive and still the process first seen under that pid (a killed one may linger as a zombie)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(tracked: dict[int, psutil.Process]) -> None:
    for _ in range(KILL_ROUNDS):
        alive = []
        for proc in list(tracked.values()):
            if not _running(proc):
                continue
            try:
                for child in proc.children(recursive=True):
                    tracked.setdefault(child.pid, child)
                    alive.append(child)
            except psutil.Error:
                pass
            alive.append(proc)
        if not alive:
            return
        for proc in alive:
            try:
                proc.kill()
            except psutil.Error:
                pass
        deadline = time.monotonic() + KILL_WAIT_SECONDS
        while any(_running(p) for p in alive) and time.monotonic() < deadline:
            time.sleep(0.02)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    driver = int(argv[0])
    roots: list[psutil.Process] = []
    for pid in argv[1:]:
        try:
            roots.append(psutil.Process(int(pid)))
        except psutil.Error:
            pass
    tracked: dict[int, psutil.Process] = {p.pid: p for p in roots}
    while os.getppid() == driver:
        alive_roots = [p for p in roots if p.is_running()]
        if not alive_roots:
            break
        tracked = {pid: p for pid, p in tracked.items() if _running(p)}  # a pid reused later is another process
        for root in alive_roots:
            try:
                for child in root.children(recursive=True):
                    tracked.setdefault(child.pid, child)
            except psutil.Error:
                pass
        time.sleep(POLL_SECONDS)
    _kill(tracked)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
