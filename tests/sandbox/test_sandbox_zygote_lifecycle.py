"""The pytest fork server's (zygote's) life: the switches that turn it off, the fallback when it cannot start, a
restart when it died, its end with its parent, the spare made ahead of each run, the memo, forked processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from zygote_helpers import (
    HOST_PID_NAMESPACE,
    TREE,
    alive,
    identity,
    left_behind,
    needs_zygote,
    outcome,
    ran_in,
    wait_dead,
)

from latte_lab.sandbox import clear_memo, run_pytest
from latte_lab.sandbox import run as runmod
from latte_lab.sandbox import zygote as zyg
from latte_lab.workspace import Workspace

pytestmark = [needs_zygote, pytest.mark.usefixtures("no_shared_memo")]


SIMPLE = "def test_ok():\n    assert True\n"


def test_switches_select_the_exec_path(tmp_path, monkeypatch, launches):
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_ok.py", SIMPLE)
    monkeypatch.setenv(zyg.ZYGOTE_DISABLE_VAR, "1")
    assert not zyg.zygote_enabled()
    assert ws.run_tests(("test_ok.py",), timeout=30).passed == 1
    monkeypatch.delenv(zyg.ZYGOTE_DISABLE_VAR)
    monkeypatch.setattr(zyg, "USE_ZYGOTE", False)
    assert ws.run_tests(("test_ok.py",), timeout=30).passed == 1
    assert launches.zygote == launches.exec == 0  # the zygote was not even asked


def test_failed_start_falls_back_with_one_warning(tmp_path, monkeypatch, launches, isolated_zygote_state):
    broken = tmp_path / "broken_zygote.py"
    broken.write_text("import sys\nsys.stderr.write('zygote exploded\\n')\nsys.exit(3)\n")
    monkeypatch.setattr(zyg, "FORK_SERVER_SCRIPT", str(broken))
    monkeypatch.setattr(zyg, "ZYGOTE_MAX_START_FAILURES", 2)
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_ok.py", SIMPLE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = [ws.run_tests(("test_ok.py",), timeout=30) for _ in range(zyg.ZYGOTE_MAX_START_FAILURES + 1)]
    assert [r.passed for r in runs] == [1] * len(runs)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "zygote exploded" in messages[0]
    assert not zyg.zygote_enabled()  # gave up after the failed starts
    assert launches.zygote == 0 and launches.exec == zyg.ZYGOTE_MAX_START_FAILURES


def test_dead_zygote_is_restarted_transparently(tmp_path, launches, isolated_zygote_state):
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_ok.py", SIMPLE)
    assert ws.run_tests(("test_ok.py",), timeout=30).passed == 1
    (first,) = zyg._ZYGOTES.values()
    os.kill(first.pid, signal.SIGKILL)
    first.proc.wait(timeout=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a restart is not a fallback: no warning
        assert ws.run_tests(("test_ok.py",), timeout=30).passed == 1
    (second,) = zyg._ZYGOTES.values()
    assert second.pid != first.pid and second.alive() and launches.zygote == 2


def test_zygote_stops_when_the_parent_exits(tmp_path):
    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    (ws_dir / "test_ok.py").write_text(SIMPLE)
    script = textwrap.dedent(
        f"""
        from latte_lab.sandbox import run_pytest, zygote
        zygote.SPARES = "always"  # whatever the machine's load
        run = run_pytest({str(ws_dir)!r}, ["test_ok.py"], timeout=30, sandbox="local")
        (z,) = zygote._ZYGOTES.values()
        import psutil
        spares = [p.pid for p in psutil.Process(z.pid).children(recursive=True)]  # the next run's, waiting
        print(run.passed, z.pid, z.home, ",".join(map(str, spares)))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != zyg.ZYGOTE_DISABLE_VAR}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    passed, pid, home, spares = out.stdout.split()
    assert passed == "1", out.stderr
    assert spares  # a reaper, and its child once forked
    assert wait_dead([int(pid), *map(int, spares.split(","))]) == [] and not Path(home).exists()


def _spares(zygote) -> list:
    """The zygote's idle spare: its reaper and that reaper's child (waiting for a request), once forked."""
    import psutil

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reapers = [p for p in psutil.Process(zygote.pid).children() if alive(p.pid)]
        if len(reapers) == 1 and len([p for p in reapers[0].children() if alive(p.pid)]) == 1:
            return [reapers[0], *reapers[0].children()]
        time.sleep(0.02)
    raise AssertionError(f"no spare under the zygote: {psutil.Process(zygote.pid).children(recursive=True)}")


def test_each_run_takes_the_spare_made_ahead_and_a_lost_spare_is_replaced(tmp_path, monkeypatch, launches,
                                                                          isolated_zygote_state):
    """Runs start in a reaper and child forked before their request; one killed while it waits costs
    nothing but its head start: the run is forked on demand, without a warning."""
    monkeypatch.setattr(zyg, "SPARES", "always")  # whatever the machine's load
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_ok.py", "import os\n\ndef test_ok():\n    print('pid', os.getpid(), "
                                "os.readlink('/proc/self/ns/pid'))\n    assert 0\n")
    first = ws.run_tests(("test_ok.py",), timeout=30)
    (zygote,) = zyg._ZYGOTES.values()
    reaper, child = _spares(zygote)
    spare = identity(child.pid)
    second = ws.run_tests(("test_ok.py",), timeout=30)
    assert ran_in(second.stdout, spare)  # the run was the spare's
    assert outcome(first) == outcome(second) and first.failed == 1
    reaper, child = _spares(zygote)  # a new one for the next run
    for process in (child, reaper):
        process.kill()
    assert wait_dead([child.pid, reaper.pid]) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = ws.run_tests(("test_ok.py",), timeout=30)
    assert outcome(third) == outcome(first) and not ran_in(third.stdout, identity(child.pid) if alive(child.pid)
                                                             else (child.pid, "(gone)"))
    assert launches.zygote == 3 and launches.exec == 0
    _spares(zygote)


def test_memo_and_run_tests_unchanged(tmp_path, launches):
    clear_memo()
    ws = Workspace(tmp_path / "ws", sandbox="local")
    ws.setup_file("test_ok.py", SIMPLE)
    first = ws.run_tests(("test_ok.py",), timeout=30)
    second = ws.run_tests(("test_ok.py",), timeout=30)
    assert not first.cached and second.cached and launches.zygote == 1
    hidden = run_pytest(ws.root, ["test_h.py"], timeout=30, extra_files={"test_h.py": "def test_h():\n    assert 0\n"},
                        sandbox="local")
    assert hidden.failed == 1 and not (ws.root / "test_h.py").exists() and launches.zygote == 2


def _forked_worker(ws_dir: str, queue) -> None:
    run = run_pytest(ws_dir, ["test_ok.py"], timeout=30, sandbox="local")
    (zygote,) = zyg._ZYGOTES.values()
    queue.put((run.passed, zygote.pid))


def test_forked_process_starts_its_own_zygote(tmp_path, launches):
    import multiprocessing

    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_ok.py", SIMPLE)
    assert ws.run_tests(("test_ok.py",), timeout=30).passed == 1
    (mine,) = [z for z in zyg._ZYGOTES.values() if z.mode != "trusted"]  # (an earlier evaluation's server apart)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    worker = ctx.Process(target=_forked_worker, args=(str(ws.root), queue))
    worker.start()
    passed, theirs = queue.get(timeout=60)
    worker.join(timeout=30)
    assert passed == 1 and theirs != mine.pid
    assert wait_dead([theirs]) == []  # the worker's zygote ended with the worker (EOF)
    assert mine.alive() and ws.run_tests(("test_ok.py",), timeout=30).passed == 1


@pytest.mark.parametrize("use_zygote", [True, False])
def test_a_run_that_leaves_nothing_skips_the_process_search(tmp_path, monkeypatch, use_zygote):
    monkeypatch.setattr(zyg, "USE_ZYGOTE", use_zygote)
    searches = []
    real = runmod.stop_sandbox
    monkeypatch.setattr(runmod, "stop_sandbox", lambda *a, **k: searches.append(a) or real(*a, **k))
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_ok.py", "def test_ok():\n    assert True\n")
    assert ws.run_tests(("test_ok.py",), timeout=30).passed == 1
    assert searches == []  # the reaper, a subreaper, reported that nothing of the run is left
    ws.setup_file("test_tree.py", TREE.format(tail="assert True"))
    run = ws.run_tests(("test_tree.py",), timeout=30)
    # a run that leaves processes behind is searched and stopped; in a PID namespace of the run's own (root), its
    # init has killed every process of it before the reaper reported, so there is nothing to search for
    namespaced = (ws.root / "ns.txt").read_text() != HOST_PID_NAMESPACE
    assert run.passed == 1 and len(searches) == (0 if namespaced else 1)
    pids = [int((ws.root / name).read_text()) for name in ("main.pid", "child.pid", "daemon.pid")]
    assert left_behind(ws.root, pids) == []


@pytest.mark.parametrize("policy", ["never", "idle"])
def test_without_spares_every_run_is_forked_at_its_request(tmp_path, monkeypatch, launches, isolated_zygote_state,
                                                           policy):
    """``never``: no process waits beside the zygote; ``idle`` on a machine kept busy: none either."""
    import psutil

    monkeypatch.setattr(zyg, "SPARES", policy)
    busy = []
    if policy == "idle":  # every CPU busy, as under a sweep
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in os.sched_getaffinity(0)]
    try:
        ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
        ws.setup_file("test_ok.py", SIMPLE)
        runs = [ws.run_tests(("test_ok.py",), timeout=30) for _ in range(3)]
        (zygote,) = [z for z in zyg._ZYGOTES.values() if z.mode == "pytest"]
        time.sleep(0.3)
        left = [p for p in psutil.Process(zygote.pid).children(recursive=True) if alive(p.pid)]
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    assert [r.passed for r in runs] == [1, 1, 1] and launches.zygote == 3
    assert left == []
