"""The sandbox's guarantees with the pytest fork server (zygote) on: no plugin, no key, nothing left behind, a fork
bomb contained, the memory and output limits, concurrent runs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from zygote_helpers import TREE, WRITE_NAMESPACE, both_ways, left_behind, needs_zygote, outcome

from latte_lab.sandbox import SandboxLimits, TestRun
from latte_lab.sandbox import limits as lim
from latte_lab.sandbox import run as runmod
from latte_lab.sandbox import zygote as zyg
from latte_lab.workspace import Workspace

pytestmark = [needs_zygote, pytest.mark.usefixtures("no_shared_memo")]


PLUGIN_PROBE = """
import sys

def test_no_plugin_module_was_loaded():
    assert sorted(m for m in ("nbval", "xdist", "pytest_timeout", "jsonschema", "nbformat") if m in sys.modules) == []
"""


def test_runs_carry_no_installed_plugin_the_run_did_not_load(tmp_path, monkeypatch, launches, isolated_zygote_state):
    """pytest plugins installed beside latte_lab (nbval, xdist, pytest-timeout) are not loaded by agents' runs
    (PYTEST_DISABLE_PLUGIN_AUTOLOAD); the zygote's own rehearsal session loads none either, so a forked run
    holds none of their modules, as an exec'd run does not (and the zygote starts without seconds of imports)."""
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_plugins.py", PLUGIN_PROBE)
    by_exec, by_zygote = both_ways(monkeypatch, lambda: ws.run_tests(("test_plugins.py",)))
    assert (by_exec.passed, by_zygote.passed) == (1, 1), by_zygote.stdout
    assert launches.zygote == 1


def test_no_key_reaches_the_zygote_or_the_run(tmp_path, monkeypatch, launches, isolated_zygote_state):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-zygote-test")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_zygote")
    monkeypatch.setattr(runmod, "ENV_ALLOWLIST", (*runmod.ENV_ALLOWLIST, "OPENAI_API_KEY"))
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_env.py", "import os\n\ndef test_env():\n    print(sorted(os.environ))\n    assert 0\n")
    run = ws.run_tests(("test_env.py",), timeout=30)
    assert run.failed == 1 and launches.zygote == 1
    assert "OPENAI_API_KEY" not in run.stdout and "GITHUB_TOKEN" not in run.stdout
    (zygote,) = zyg._ZYGOTES.values()
    environ = Path(f"/proc/{zygote.pid}/environ").read_bytes()
    assert b"sk-zygote-test" not in environ and b"ghp_zygote" not in environ and b"PYTHONPATH" not in environ
    status = Path(f"/proc/{zygote.pid}/status").read_text()
    assert "\nThreads:\t1\n" in status  # single-threaded: safe to fork
    assert os.readlink(f"/proc/{zygote.pid}/cwd") == zygote.home  # never in a workspace


@pytest.mark.parametrize("timeout", [True, False])
def test_run_leaves_nothing_behind(tmp_path, launches, timeout):
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_tree.py", TREE.format(tail="time.sleep(100)" if timeout else "assert True"))
    run = ws.run_tests(("test_tree.py",), timeout=5 if timeout else 30)  # room for the child to start under load
    assert run.timed_out is timeout and launches.zygote == 1
    assert run.passed == (0 if timeout else 1)
    pids = [int((ws.root / name).read_text()) for name in ("main.pid", "child.pid", "daemon.pid")]
    assert left_behind(ws.root, pids) == []


BOMB = """
import os, time

def spawn(depth):
    for _ in range(2):
        try:
            pid = os.fork()
        except OSError:
            continue
        if pid == 0:
            with open('pids.txt', 'a') as fh:
                fh.write(f'{os.getpid()}\\n')
            if depth > 0:
                spawn(depth - 1)
            time.sleep(60)
            os._exit(0)

def test_bomb():
    """ + WRITE_NAMESPACE + """
    spawn(7)
    time.sleep(60)
"""


def test_fork_bomb_is_contained(tmp_path, launches):
    ws = Workspace(tmp_path / "ws", memo=False, limits=SandboxLimits(max_processes=lim.MAX_PROCESSES), sandbox="local")
    ws.setup_file("test_bomb.py", BOMB)
    run = ws.run_tests(("test_bomb.py",), timeout=10)
    assert not run.ok and run.errors >= 1 and launches.zygote == 1
    assert any("process limit exceeded" in note for note in run.notes)
    pids = [int(x) for x in (ws.root / "pids.txt").read_text().split()]
    assert len(pids) > 20 and left_behind(ws.root, pids) == []


def test_memory_limit_and_huge_output(tmp_path, monkeypatch, launches):
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file(
        "test_limits.py",
        "import sys\n\n"
        "def test_alloc():\n    bytearray(4 * 2**30)\n\n"
        "def test_flood():\n"
        "    sys.stdout.write('BEGIN')\n    block = 'x' * 2**20\n"
        "    for _ in range(100):\n        sys.stdout.write(block)\n    sys.stdout.write('END')\n",
    )
    by_exec, by_zygote = both_ways(monkeypatch, lambda: ws.run_tests(("-s", "test_limits.py"), timeout=60))
    assert launches.zygote == 1
    for run in (by_exec, by_zygote):
        assert run.truncated and "BEGIN" in run.stdout and "bytes elided" in run.stdout
        assert len(run.stdout) < lim.OUTPUT_CAPTURE_BYTES + 100
        assert (run.passed, run.failed) == (1, 1) and "MemoryError" in run.stdout
    assert outcome(by_zygote) == outcome(by_exec)
    assert [n for n in by_zygote.notes if "elided" not in n] == [n for n in by_exec.notes if "elided" not in n]


def test_concurrent_runs_from_threads(tmp_path, launches):
    results: dict[int, TestRun] = {}

    def work(i: int) -> None:
        ws = Workspace(tmp_path / f"ws{i}", memo=False, sandbox="local")
        ws.setup_file("mod.py", f"N = {i}\n")
        ws.setup_file("test_n.py", "import mod\n\ndef test_n():\n    assert mod.N % 2 == 0\n")
        results[i] = ws.run_tests(("test_n.py",), timeout=60)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {i: (r.passed, r.failed) for i, r in results.items()} == {
        i: ((1, 0) if i % 2 == 0 else (0, 1)) for i in range(6)
    }
    assert launches.zygote == 6 and len([z for z in zyg._ZYGOTES.values() if z.mode == "pytest"]) == 1
