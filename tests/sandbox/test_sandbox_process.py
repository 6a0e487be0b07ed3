"""Tests of process-tree control through psutil: who belongs to a run, counting, stopping."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import types

import psutil
import pytest

from latte_lab.sandbox import process

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

# A leader in its own session that starts: a child (same session), a forked child whose own child
# calls setsid() (found as a descendant), and a process outside the session and the tree that carries
# the run's marker in its environment.
TREE = textwrap.dedent(
    """
    import os, subprocess, sys, time
    marker = sys.argv[1]
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
        time.sleep(60)
        os._exit(0)
    inner = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)"
    subprocess.run([sys.executable, "-c", inner], env={**os.environ, "LATTE_SANDBOX_RUN": marker})
    print("ready", flush=True)
    time.sleep(60)
    """
)


def _start_tree(marker: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", TREE, marker], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


@needs_fork
def test_members_found_counted_and_stopped():
    marker = "m" + os.urandom(8).hex()
    leader = _start_tree(marker)
    try:
        deadline = time.monotonic() + 5
        while len(process.sandbox_processes(leader.pid, marker)) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        members = process.sandbox_processes(leader.pid, marker)
        assert len(members) == 5 and leader.pid in members and os.getpid() not in members
        without_marker = process.sandbox_processes(leader.pid)
        assert len(without_marker) == 4  # the marked process left the session and the tree
        assert process.count_processes(leader.pid) == 4
        assert process.stop_sandbox(leader.pid, marker, grace=1.0) == 5
        leader.wait(timeout=5)
        assert all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE
                   for p in members)
    finally:
        process.stop_sandbox(leader.pid, marker, grace=0)
        leader.stdout.close()
    assert process.sandbox_processes(leader.pid, marker) == set()
    assert process.stop_sandbox(leader.pid, marker, grace=1.0) == 0  # nothing left: returns at once


def test_user_task_count_counts_threads_of_that_user(monkeypatch):
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        me = psutil.Process()
        assert process.user_task_count(me.uids().real) >= me.num_threads() >= 4
    finally:
        stop.set()
        for t in threads:
            t.join()

    class Fake:
        def __init__(self, uid, threads):
            self.info = {"uids": None if uid is None else types.SimpleNamespace(real=uid), "num_threads": threads}

    table = [Fake(1000, 3), Fake(1000, None), Fake(0, 7), Fake(None, 2)]  # None: not readable
    monkeypatch.setattr(process.psutil, "process_iter", lambda attrs: iter(table))
    assert process.user_task_count(1000) == 4 and process.user_task_count(0) == 7


def test_a_missing_leader_is_empty():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert process.sandbox_processes(gone.pid) == set() and process.count_processes(gone.pid) == 0


@needs_fork
def test_tree_count_from_proc_matches_the_full_count():
    code = ("import subprocess, sys, time; ps = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']) "
            "for _ in range(2)]; print('ready', flush=True); time.sleep(60)")
    leader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert leader.stdout.readline().strip() == "ready"
        assert process.count_processes(leader.pid, tree_only=True) == 3 == process.count_processes(leader.pid)
    finally:
        process.stop_sandbox(leader.pid, None, grace=0)
        leader.wait(timeout=5)
        leader.stdout.close()
    assert process.count_processes(leader.pid, tree_only=True) == 0
