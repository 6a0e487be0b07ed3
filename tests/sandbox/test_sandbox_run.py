"""Tests of the generic sandboxed runner on both backends: environment, limits, timeouts that kill the
tree, processes left behind, output capture, fork bombs."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS, survivors, token

import latte_lab as ll
from latte_lab.sandbox import OutputCapture, SandboxLimits, output
from latte_lab.sandbox import limits as lim
from latte_lab.sandbox import process as procmod
from latte_lab.sandbox import run as runmod
from latte_lab.teams.replies import SCRIPT_STDERR_TAIL, SCRIPT_STDOUT_TAIL, run_script_reply
from latte_lab.workspace import Workspace


@pytest.fixture(params=BACKENDS)
def ws(request, tmp_path) -> Workspace:
    return Workspace(tmp_path / "repo", sandbox=request.param)


# ---- sandbox: environment, limits, processes ---------------------------------------------------


def test_no_secret_reaches_agent_code(ws, monkeypatch):
    secrets = {
        "OPENAI_API_KEY": "sk-test-1",
        "ANTHROPIC_API_KEY": "sk-ant-2",
        "MY_SECRET": "hunter2",
        "GITHUB_TOKEN": "ghp_3",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(runmod, "ENV_ALLOWLIST", (*runmod.ENV_ALLOWLIST, "OPENAI_API_KEY"))
    ws.setup_file("env.py", "import json, os\nprint(json.dumps(dict(os.environ)))\n")
    run = ws.run_script("env.py")
    assert run.ok, run.stderr
    for name, value in secrets.items():
        assert name not in run.stdout and value not in run.stdout
    seen = json.loads(run.stdout)
    assert seen["PYTHONHASHSEED"] == "0" and seen["PYTHONDONTWRITEBYTECODE"] == "1"
    assert seen["PYTHONPATH"] == str(ws.root) and seen["MPLBACKEND"] == "Agg"
    if ws.backend == "local":
        assert seen["HOME"] != os.environ.get("HOME") and not Path(seen["HOME"]).exists()  # private, removed
    else:
        assert seen["HOME"] == "/tmp" and seen["MPLCONFIGDIR"] == "/tmp/matplotlib"  # the sandbox's own tmpfs
    extra = runmod.sandbox_env(ws.root, "/tmp/h", "m", {"SERVICE_KEY": "x", "FOO": "bar"})
    assert "SERVICE_KEY" not in extra and extra["FOO"] == "bar"


def test_stdin_is_empty_and_limits_are_set_in_the_child(ws):
    ws.setup_file(
        "lim.py",
        "import resource, sys\n"
        "print(sys.stdin.read() == '')\n"
        "for n in ('RLIMIT_CPU', 'RLIMIT_AS', 'RLIMIT_FSIZE'):\n"
        "    print(resource.getrlimit(getattr(resource, n))[0])\n",
    )
    ws.limits = SandboxLimits(cpu_seconds=50, address_space_bytes=2**31, file_size_bytes=2**22)
    lines = ws.run_script("lim.py", timeout=20).stdout.split()
    assert lines == ["True", "21", str(2**31), str(2**22)]  # CPU capped at timeout + 1 s


def test_timeout_kills_script_and_its_child(ws):
    tok = token()
    ws.setup_file(
        f"spin_{tok}.py",
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(100)', '{tok}'])\n"
        "print('spinning', flush=True)\n"
        "while True:\n    pass\n",
    )
    start = time.monotonic()
    run = ws.run_script(f"spin_{tok}.py", timeout=2)
    elapsed = time.monotonic() - start
    assert run.timed_out and not run.ok
    assert elapsed < 2 + lim.SIGTERM_GRACE_SECONDS + 3
    assert "spinning" in run.stdout
    assert run_script_reply(run).startswith("⏱️ Script timed out after 2 s and was stopped")
    assert survivors(tok) == []
    ws.setup_file("after.py", "print('still works')\n")
    assert ws.run_script("after.py").stdout == "still works\n"


def test_processes_that_left_the_group_are_stopped(ws):
    # The grandchild calls setsid() (new session and process group) and outlives its parent.
    tok = token()
    ws.setup_file(
        f"daemon_{tok}.py",
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.close(1); os.close(2)\n"
        "        time.sleep(100)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('parent done')\n",
    )
    run = ws.run_script(f"daemon_{tok}.py", timeout=10)
    assert run.ok and run.stdout == "parent done\n"
    assert survivors(tok) == []


def test_memory_limit_reported_cleanly(ws):
    ws.setup_file("alloc.py", "x = bytearray(4 * 2**30)\nprint('allocated')\n")
    run = ws.run_script("alloc.py", timeout=20)
    assert run.returncode == 1 and "allocated" not in run.stdout
    assert "MemoryError" in run.stderr
    assert any("memory limit exceeded" in note for note in run.notes)
    reply = run_script_reply(run)
    assert reply.startswith("❌ Script exited with code 1:") and "memory limit exceeded" in reply


def test_cpu_and_file_size_limits_reported(ws):
    ws.limits = SandboxLimits(cpu_seconds=1, file_size_bytes=2**20)
    ws.setup_file("busy.py", "while True:\n    pass\n")
    run = ws.run_script("busy.py", timeout=30)
    assert not run.timed_out and run.returncode == -signal.SIGXCPU
    assert any("CPU time limit" in note for note in run.notes)
    ws.setup_file("fill.py", "open('big.bin', 'wb').write(b'0' * 2**21)\n")
    run = ws.run_script("fill.py", timeout=15)
    assert run.returncode != 0 and any("file size limit" in note for note in run.notes)
    assert (ws.root / "big.bin").stat().st_size <= 2**20


def test_huge_output_is_capped_while_reading(ws):
    ws.setup_file(
        "flood.py",
        "import sys\nsys.stdout.write('BEGIN')\nblock = 'x' * 2**20\n"
        "for _ in range(100):\n    sys.stdout.write(block)\nsys.stdout.write('END')\n",
    )
    tracemalloc.start()
    try:
        run = ws.run_script("flood.py", timeout=30)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    total = 100 * 2**20 + 8
    assert run.ok and run.truncated
    assert run.stdout.startswith("BEGIN") and run.stdout.endswith("END")
    assert f"[... {total - lim.OUTPUT_CAPTURE_BYTES} bytes elided ...]" in run.stdout
    assert len(run.stdout) < lim.OUTPUT_CAPTURE_BYTES + 100
    assert peak < 16 * 2**20  # Python-level allocations in the parent stay O(capture limit)
    assert any("output truncated" in note for note in run.notes)
    reply = run_script_reply(run)
    assert reply.startswith("✅ Script completed:\noutput truncated") and reply.endswith("END")
    assert len(reply) < SCRIPT_STDOUT_TAIL + 300


@pytest.mark.parametrize("max_processes", [lim.MAX_PROCESSES, 2000])
def test_fork_bomb_is_contained(ws, max_processes):
    # Bounded bomb: a binary tree of up to 510 sleeping processes, each recording that it started.
    tok = token()
    ws.setup_file(
        f"bomb_{tok}.py",
        "import os, time\n"
        "def spawn(depth):\n"
        "    for _ in range(2):\n"
        "        try:\n"
        "            pid = os.fork()\n"
        "        except OSError:\n"
        "            continue\n"
        "        if pid == 0:\n"
        "            with open('pids.txt', 'a') as fh:\n"
        "                fh.write(f'{os.getpid()}\\n')\n"
        "            if depth > 0:\n"
        "                spawn(depth - 1)\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "spawn(7)\n"
        "time.sleep(60)\n",
    )
    ws.limits = SandboxLimits(max_processes=max_processes)
    start = time.monotonic()
    run = ws.run_script(f"bomb_{tok}.py", timeout=2)
    assert time.monotonic() - start < 2 + lim.SIGTERM_GRACE_SECONDS + procmod.KILL_DEADLINE_SECONDS + 3
    assert not run.ok
    started = len((ws.root / "pids.txt").read_text().split())
    assert started > 20
    assert survivors(tok) == []
    if max_processes == lim.MAX_PROCESSES:
        assert any("process limit exceeded" in note for note in run.notes)
        if procmod.pids_cgroup_base() is not None:  # the cap holds in the kernel: never one process more
            assert started < max_processes and run.timed_out
    else:
        assert run.timed_out
    ws.setup_file("after.py", "print('ok')\n")
    assert ws.run_script("after.py").ok


def test_output_capture_keeps_head_and_tail():
    cap = OutputCapture(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qr"):
        cap.feed(chunk)
    assert cap.total == 18 and cap.elided == 8
    assert cap.text() == "abcde\n[... 8 bytes elided ...]\nnopqr"
    small = OutputCapture(10)
    small.feed(b"hello")
    assert small.text() == "hello" and small.elided == 0


def test_both_streams_flooded_without_deadlock(ws):
    ws.setup_file(
        "both.py",
        "import sys\nfor i in range(200):\n"
        "    sys.stdout.write('o' * 50_000)\n    sys.stderr.write('e' * 50_000)\n"
        "sys.stderr.write('LAST')\n",
    )
    run = ws.run_script("both.py", timeout=30)
    assert run.ok and run.truncated and not run.timed_out
    assert run.stderr.endswith("LAST") and "bytes elided" in run.stdout
    reply = run_script_reply(run)
    assert reply.startswith("✅ Script completed:") and reply.endswith("LAST")
    stdout_part, stderr_part = reply.split("\n[stderr]\n")
    assert stdout_part.endswith("o" * SCRIPT_STDOUT_TAIL) and len(stderr_part) == SCRIPT_STDERR_TAIL


def test_output_written_a_line_at_a_time_is_read_in_batches(ws, monkeypatch):
    """A run writes a line at a time (PYTHONUNBUFFERED); the parent reads at most about once per
    OUTPUT_PAUSE_SECONDS, not once per line, and still gets every line, in order."""
    reads = []
    feed = OutputCapture.feed
    monkeypatch.setattr(OutputCapture, "feed", lambda self, chunk: (reads.append(len(chunk)), feed(self, chunk))[1])
    ws.setup_file("lines.py", "import time\nfor i in range(200):\n    print(f'line {i}')\n    time.sleep(0.001)\n")
    run = ws.run_script("lines.py", timeout=60)
    assert run.ok and run.stdout.splitlines() == [f"line {i}" for i in range(200)]
    # one read per line (200) before the pause; now one per pause of the run's duration, and a few more
    assert len(reads) <= run.seconds / output.OUTPUT_PAUSE_SECONDS + 10, (len(reads), run.seconds)


def test_child_wrapper_runs_as_a_module_too(tmp_path):
    import subprocess

    code = "import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0])"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "latte_lab.sandbox._child",
            '{"fsize": 4096}',
            "--",
            sys.executable,
            "-c",
            code,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert out.returncode == 0 and out.stdout.strip() == "4096"
    bad = subprocess.run(
        [sys.executable, "-m", "latte_lab.sandbox._child", "not json", "--", "true"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 126 and "invalid limits" in bad.stderr


def test_a_run_is_asked_for_by_what_it_is_never_by_how_to_start_it():
    """run_sandboxed takes a request (or a command's argv) and the backend: no flag chooses a way to start the run,
    which is the backend's alone (latte_lab.sandbox.backends)."""
    import inspect

    from latte_lab.sandbox import RunRequest, backend_for, backends

    assert list(inspect.signature(runmod.run_sandboxed).parameters) == [
        "argv", "cwd", "timeout", "limits", "env", "sandbox", "stdin"]
    here = str(Path(__file__).parent)
    assert RunRequest([sys.executable, "-m", "pytest", "-q", f"--junitxml={here}/r.xml"], here, timeout=9).kind == "pytest"
    assert RunRequest([sys.executable, "analysis.py"], here, timeout=9).kind == "script"
    assert RunRequest([sys.executable, "-c", "pass"], here, timeout=9).kind == "command"
    judge = RunRequest([sys.executable, "-s", "-P", "session.py", "--report=x", "--", "-q"], here, timeout=9, kind="judge")
    assert judge.args == ["--report=x", "--", "-q"] and backend_for("bwrap", judge) is backends.LOCAL
    moved = RunRequest([sys.executable, "-m", "pytest", f"--junitxml={here}/r.xml", "test_a.py"], here,
                       timeout=9).moved(Path("/stage"))
    assert moved.argv[3:] == ("--junitxml=/stage/r.xml", "test_a.py") and moved.cwd == Path("/stage")
    with pytest.raises(ll.ConfigError, match="unknown kind of run 'docker'"):
        RunRequest(["ls"], here, timeout=9, kind="docker")
