"""Tests of the workspace: confinement, write log, sandbox (timeouts, limits, env, output), memo."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from latte_lab import workspace as wsmod
from latte_lab.errors import ConfigError, LatteError, WorkspaceError
from latte_lab.workspace import (
    STDLIB_SHADOW_NAMES,
    OutputCapture,
    RunResult,
    SandboxLimits,
    TestRun,
    Workspace,
    changed_symbols,
    clear_memo,
    extract_symbols,
    parse_pytest_output,
    run_pytest,
    script_reply,
)
from latte_lab.workspace import (
    tests_reply as reply_for_tests,
)

LINUX_PROC = Path("/proc/self/stat").exists()
needs_proc = pytest.mark.skipif(not LINUX_PROC, reason="process tracking needs Linux /proc")


def alive(pid: int) -> bool:
    """True while ``pid`` is a running (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def pids_in(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path / "repo")


# ---- confinement -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["../x.py", "a/../../x.py", "/etc/passwd", "~/x.py", "repo/../../x"])
def test_escapes_are_rejected(ws, bad):
    with pytest.raises(WorkspaceError, match="outside the workspace; use a path relative to the project"):
        ws.write(bad, "x")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.read(bad)
    assert not ws.exists(bad)


def test_symlink_escapes_are_rejected(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (ws.root / "link_dir").symlink_to(outside)
    (ws.root / "link_file.txt").symlink_to(outside / "secret.txt")
    for path in ("link_dir/secret.txt", "link_file.txt", "link_dir/new.py"):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            ws.read(path)
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            ws.write(path, "x")
    assert (outside / "secret.txt").read_text() == "s3cret"
    assert not (outside / "new.py").exists()


def test_prefixes_stripped_and_inner_dotdot_allowed(ws):
    rec = ws.write("repo/pkg/mod.py", "X = 1\n", agent="Dev1", round=2)
    assert rec.path == "pkg/mod.py"
    assert ws.read("./pkg/mod.py") == "X = 1\n"
    assert ws.read("pkg/sub/../mod.py") == "X = 1\n"
    assert ws.exists("repo/pkg/mod.py") and not ws.exists("pkg/other.py")
    assert ws.list_files() == ["pkg/mod.py"]


def test_missing_file_message_lists_near_names(ws):
    ws.setup_file("signal_toolkit.py", "x = 1\n")
    with pytest.raises(WorkspaceError, match="does not exist.*signal_toolkit.py"):
        ws.read("signal_tolkit.py")
    with pytest.raises(WorkspaceError, match="script 'nope.py' does not exist"):
        ws.run_script("nope.py")


def test_stdlib_shadow_writes_refused(ws):
    assert STDLIB_SHADOW_NAMES >= {"json", "signal", "os", "re", "typing"}
    assert STDLIB_SHADOW_NAMES <= set(sys.stdlib_module_names)
    for name in ("json.py", "signal.py", "string/__init__.py"):
        with pytest.raises(WorkspaceError, match="shadow the standard library module"):
            ws.write(name, "x = 1\n")
        assert not (ws.root / name).exists()
    # task module names and nested files are fine
    for name in ("formatter.py", "tokenizer.py", "keywords.py", "pkg/json.py"):
        ws.write(name, "x = 1\n")


def test_protected_files_read_only_and_restored_after_runs(ws):
    ws.setup_file("test_suite.py", "def test_ok():\n    assert True\n")
    ws.protect("test_suite.py")
    with pytest.raises(WorkspaceError, match="read-only"):
        ws.write("./test_suite.py", "def test_ok():\n    pass\n", agent="Dev1")
    ws.setup_file("test_suite.py", "def test_ok():\n    assert 1 == 1\n")  # setup may change it
    ws.setup_file("vandal.py", "open('test_suite.py', 'w').write('broken(')\n")
    run = ws.run_script("vandal.py")
    assert run.ok
    assert any("restored: test_suite.py" in note for note in run.notes)
    assert ws.read("test_suite.py") == "def test_ok():\n    assert 1 == 1\n"
    assert ws.writes == []
    with pytest.raises(WorkspaceError, match="does not exist"):
        ws.protect("missing_test.py")


def test_bad_inputs_raise_latte_errors(ws):
    with pytest.raises(WorkspaceError):
        ws.write("a.py", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(WorkspaceError, match="project root"):
        ws.read("./")
    ws.setup_file("s.py", "print(1)\n")
    with pytest.raises(ConfigError, match="timeout"):
        ws.run_script("s.py", timeout=0)
    with pytest.raises(ConfigError, match="cpu_seconds"):
        SandboxLimits(cpu_seconds=0)
    assert issubclass(WorkspaceError, LatteError)


def test_list_and_snapshot_skip_hidden_caches_and_binary(ws):
    ws.setup_file("a.py", "A = 1\n")
    ws.setup_file("data/table.csv", "x,y\n1,2\n")
    ws.setup_file(".git/config", "[core]\n")
    ws.setup_file("__pycache__/a.cpython-311.pyc", b"\x00\x01")
    ws.setup_file("figures/plot.png", b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert ws.list_files() == ["a.py", "data/table.csv", "figures/plot.png"]
    assert ws.snapshot_files() == {"a.py": "A = 1\n", "data/table.csv": "x,y\n1,2\n"}


# ---- write log and symbols --------------------------------------------------------------------

BASE = '''import math

SCALE = 2


def rms(xs):
    return sum(x * x for x in xs) / len(xs)


@staticmethod
def helper():
    return 1


class Document:
    """A document."""

    def __init__(self, text):
        self.text = text

    def words(self):
        return self.text.split()
'''


def test_write_log_function_method_class_and_module_edits(ws):
    rec = ws.write("doc.py", BASE, agent="Dev1", round=1)
    assert rec.created and rec.agent == "Dev1" and rec.round == 1 and rec.n_chars == len(BASE)
    assert rec.symbols == ("<module>", "rms", "helper", "Document", "Document.__init__", "Document.words")

    fixed = BASE.replace("/ len(xs)", "/ len(xs)) ** 0.5").replace("return sum(", "return (sum(")
    rec = ws.write("doc.py", fixed, agent="Dev2", round=2)
    assert not rec.created and rec.symbols == ("rms",)

    method = fixed.replace("return self.text.split()", "return self.text.lower().split()")
    assert ws.write("doc.py", method, agent="Dev1", round=3).symbols == ("Document.words",)

    added = method + "\n    def add_metadata(self, key, value):\n        self.metadata = {key: value}\n"
    assert ws.write("doc.py", added).symbols == ("Document.add_metadata",)

    shell = added.replace('"""A document."""', '"""A text document."""')
    assert ws.write("doc.py", shell).symbols == ("Document",)

    module = shell.replace("SCALE = 2", "SCALE = 3")
    assert ws.write("doc.py", module).symbols == ("<module>",)

    removed = module.replace("@staticmethod\ndef helper():\n    return 1\n", "")
    assert ws.write("doc.py", removed).symbols == ("helper",)

    broken = removed + "\ndef oops(:\n"
    assert ws.write("doc.py", broken).symbols == ("<file>",)
    assert ws.write("doc.py", removed).symbols == ("<file>",)
    assert ws.write("doc.py", removed).symbols == ()
    assert [w.path for w in ws.writes] == ["doc.py"] * 10


def test_json_and_other_files_symbols(ws):
    assert ws.write("findings.json", json.dumps({"a": [1], "b": 2})).symbols == ("a", "b")
    assert ws.write("findings.json", json.dumps({"a": [1], "b": 3, "c": 0})).symbols == ("b", "c")
    assert ws.write("findings.json", json.dumps({"b": 3, "c": 0})).symbols == ("a",)
    assert ws.write("findings.json", "{not json").symbols == ("<file>",)
    assert ws.write("summary.txt", "words").symbols == ("<file>",)
    assert ws.write("summary.txt", "words").symbols == ()


def test_extract_symbols_segments_splice_back():
    syms = extract_symbols(BASE, "doc.py")
    assert list(syms) == ["rms", "helper", "Document", "Document.__init__", "Document.words"]
    assert syms["helper"].startswith("@staticmethod\ndef helper")
    assert syms["Document.words"] == "    def words(self):\n        return self.text.split()"
    new_words = "    def words(self):\n        return [w.strip('.') for w in self.text.split()]"
    spliced = BASE.replace(syms["Document.words"], new_words)
    assert changed_symbols(BASE, spliced, "doc.py") == ("Document.words",)
    assert extract_symbols("def broken(:", "x.py") == {}
    assert extract_symbols('{"k": {"x": 1}}', "f.json") == {"k": '{\n  "x": 1\n}'}
    assert extract_symbols("text", "notes.md") == {}


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
    monkeypatch.setattr(wsmod, "ENV_ALLOWLIST", (*wsmod.ENV_ALLOWLIST, "OPENAI_API_KEY"))
    ws.setup_file("env.py", "import json, os\nprint(json.dumps(dict(os.environ)))\n")
    run = ws.run_script("env.py")
    assert run.ok, run.stderr
    for name, value in secrets.items():
        assert name not in run.stdout and value not in run.stdout
    seen = json.loads(run.stdout)
    assert seen["PYTHONHASHSEED"] == "0" and seen["PYTHONDONTWRITEBYTECODE"] == "1"
    assert seen["PYTHONPATH"] == str(ws.root) and seen["MPLBACKEND"] == "Agg"
    assert seen["HOME"] != os.environ.get("HOME") and not Path(seen["HOME"]).exists()  # private, removed
    extra = wsmod._sandbox_env(ws.root, "/tmp/h", "m", {"SERVICE_KEY": "x", "FOO": "bar"})
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


@needs_proc
def test_timeout_kills_script_and_its_child(ws):
    ws.setup_file(
        "spin.py",
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, time; "
        'open("child.pid", "w").write(str(os.getpid())); time.sleep(100)\'])\n'
        "import os\nopen('main.pid', 'w').write(str(os.getpid()))\n"
        "print('spinning', flush=True)\n"
        "while True:\n    pass\n",
    )
    start = time.monotonic()
    run = ws.run_script("spin.py", timeout=2)
    elapsed = time.monotonic() - start
    assert run.timed_out and not run.ok
    assert elapsed < 2 + wsmod.SIGTERM_GRACE_SECONDS + 3
    assert "spinning" in run.stdout
    assert script_reply(run).startswith("⏱️ Script timed out after 2 s and was stopped")
    for name in ("main.pid", "child.pid"):
        pid = pids_in(ws.root / name)
        assert pid and not alive(pid[0]), name
    ws.setup_file("after.py", "print('still works')\n")
    assert ws.run_script("after.py").stdout == "still works\n"


@needs_proc
def test_processes_that_left_the_group_are_stopped(ws):
    # The grandchild calls setsid() (new session and process group) and outlives its parent.
    ws.setup_file(
        "daemon.py",
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        open('daemon.pid', 'w').write(str(os.getpid()))\n"
        "        os.close(1); os.close(2)\n"
        "        time.sleep(100)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('parent done')\n",
    )
    run = ws.run_script("daemon.py", timeout=10)
    assert run.ok and run.stdout == "parent done\n"
    (pid,) = pids_in(ws.root / "daemon.pid")
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_memory_limit_reported_cleanly(ws):
    ws.setup_file("alloc.py", "x = bytearray(4 * 2**30)\nprint('allocated')\n")
    run = ws.run_script("alloc.py", timeout=20)
    assert run.returncode == 1 and "allocated" not in run.stdout
    assert "MemoryError" in run.stderr
    assert any("memory limit exceeded" in note for note in run.notes)
    reply = script_reply(run)
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
    assert f"[... {total - wsmod.OUTPUT_CAPTURE_BYTES} bytes elided ...]" in run.stdout
    assert len(run.stdout) < wsmod.OUTPUT_CAPTURE_BYTES + 100
    assert peak < 16 * 2**20  # Python-level allocations in the parent stay O(capture limit)
    assert any("output truncated" in note for note in run.notes)
    assert len(run.agent_text(500)) <= 500 and run.agent_text(500).endswith("END")


@needs_proc
@pytest.mark.parametrize("max_processes", [wsmod.MAX_PROCESSES, 2000])
def test_fork_bomb_is_contained(ws, max_processes):
    # Bounded bomb: a binary tree of up to 510 sleeping processes, each recording its pid.
    ws.setup_file(
        "bomb.py",
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
    run = ws.run_script("bomb.py", timeout=2)
    assert time.monotonic() - start < 2 + wsmod.SIGTERM_GRACE_SECONDS + wsmod.KILL_DEADLINE_SECONDS
    assert not run.ok
    pids = pids_in(ws.root / "pids.txt")
    assert len(pids) > 20
    assert [p for p in pids if alive(p)] == []
    if max_processes == wsmod.MAX_PROCESSES:
        assert any("process limit exceeded" in note for note in run.notes)
    else:
        assert run.timed_out
    ws.setup_file("after.py", "print('ok')\n")
    assert ws.run_script("after.py").ok


# ---- replies and parsing (pure) ----------------------------------------------------------------


def test_output_capture_keeps_head_and_tail():
    cap = OutputCapture(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qr"):
        cap.feed(chunk)
    assert cap.total == 18 and cap.elided == 8
    assert cap.text() == "abcde\n[... 8 bytes elided ...]\nnopqr"
    small = OutputCapture(10)
    small.feed(b"hello")
    assert small.text() == "hello" and small.elided == 0


def test_script_and_test_replies():
    ok = RunResult(0, "out" * 2000, "warn", 0.1, False, False)
    text = script_reply(ok)
    assert text.startswith("✅ Script completed:\n") and text.endswith("\n[stderr]\nwarn")
    assert text.count("out") == 1000  # last 3 000 chars of stdout
    bad = RunResult(2, "", "Traceback\nValueError: x", 0.1, False, False)
    assert script_reply(bad).startswith("❌ Script exited with code 2:")
    failing = TestRun(1, "F" * 5000 + "\n1 failed in 0.1s", "", 0.3, False, False, failed=1)
    reply = reply_for_tests(failing)
    assert reply.startswith("❌ Tests failed:\n") and len(reply) == len("❌ Tests failed:\n") + 1500
    assert reply_for_tests(TestRun(0, "", "", 0.1, False, False, passed=1)) == "✅ Tests passed!"
    timed = TestRun(-9, "", "", 5.0, True, False, errors=1, timeout=5.0)
    assert reply_for_tests(timed).startswith("⏱️ Tests timed out after 5 s and were stopped")
    mixed = RunResult(1, "o" * 10_000, "e" * 10_000, 0.1, False, False, notes=("memory limit exceeded",))
    text = mixed.agent_text(400)
    assert len(text) <= 400 and text.startswith("memory limit exceeded\n") and "[stderr]" in text


def test_parse_pytest_output_variants():
    out = (
        "F.E\n=== short test summary info ===\n"
        "FAILED test_suite.py::TestRms::test_basic - assert 1.0 == 2.0\n"
        "ERROR test_suite.py::TestPeaks::test_x - fixture 'y' not found\n"
        "1 failed, 1 passed, 1 error, 2 skipped, 1 xfailed in 0.31s\n"
    )
    parsed = parse_pytest_output(out)
    assert (parsed["passed"], parsed["failed"], parsed["errors"], parsed["skipped"]) == (1, 1, 1, 3)
    assert parsed["failed_tests"] == (
        "test_suite.py::TestRms::test_basic",
        "test_suite.py::TestPeaks::test_x",
    )
    collection = "ERROR test_suite.py\n!!! Interrupted: 1 error during collection !!!\n1 error in 0.12s\n"
    assert parse_pytest_output(collection)["errors"] == 1
    assert parse_pytest_output("no tests ran in 0.01s")["summary_found"]
    assert not parse_pytest_output("Segmentation fault")["summary_found"]


# ---- test runs and the memo ---------------------------------------------------------------------

SUITE = (
    "from mod import double\n\n"
    "class TestDouble:\n"
    "    def test_two(self):\n        assert double(2) == 4\n\n"
    "    def test_zero(self):\n        assert double(0) == 0\n\n"
    "def test_neg():\n    assert double(-1) == -2\n"
)


@pytest.fixture
def project(tmp_path) -> Workspace:
    clear_memo()
    ws = Workspace(tmp_path / "proj")
    ws.setup_file("mod.py", "def double(x):\n    return x + 2\n")
    ws.setup_file("test_suite.py", SUITE)
    ws.setup_file("data.txt", "v1\n")
    ws.protect("test_suite.py")
    ws.test_args = ("test_suite.py",)
    return ws


def test_run_tests_counts_and_node_ids(project):
    run = project.run_tests()
    assert (run.passed, run.failed, run.errors, run.total) == (1, 2, 0, 3)
    assert run.failed_tests == ("test_suite.py::TestDouble::test_zero", "test_suite.py::test_neg")
    assert not run.ok and not run.cached
    project.write("mod.py", "def double(x):\n    return 2 * x\n", agent="Dev1", round=1)
    fixed = project.run_tests()
    assert fixed.ok and fixed.passed == 3 and fixed.failed_tests == ()
    assert reply_for_tests(fixed) == "✅ Tests passed!"


def test_collection_error_and_timeout_are_errors_not_exceptions(project):
    project.write("mod.py", "def double(x:\n")
    run = project.run_tests()
    assert run.errors >= 1 and run.passed == 0 and not run.ok
    project.write("mod.py", "import time\ntime.sleep(30)\ndef double(x):\n    return 2 * x\n")
    run = project.run_tests(timeout=1.5)
    assert run.timed_out and run.errors >= 1 and not run.ok


def test_missing_pytest_gives_clear_message(project, monkeypatch):
    monkeypatch.setattr(wsmod, "_pytest_available", lambda: False)
    run = project.run_tests()
    assert run.errors == 1 and "pytest is not installed" in run.stdout and "pip install pytest" in run.stdout


def test_memo_hit_is_identical_and_any_change_misses(project, tmp_path):
    first = project.run_tests()
    second = project.run_tests()
    assert second.cached and not first.cached
    assert second == first.__class__(**{**first.__dict__, "cached": True})
    assert second.seconds == first.seconds
    project.setup_file("data.txt", "v2\n")  # a file the tests never read still changes the key
    third = project.run_tests()
    assert not third.cached
    assert project.run_tests(args=("test_suite.py", "-k", "neg")).cached is False
    other = Workspace(tmp_path / "other", memo=False)
    for rel, text in project.snapshot_files().items():
        other.setup_file(rel, text)
    assert not other.run_tests(("test_suite.py",)).cached
    assert not other.run_tests(("test_suite.py",)).cached


def test_memo_on_disk_survives_a_new_process_memo(project, tmp_path):
    memo_dir = tmp_path / "memo"
    disk = Workspace(project.root, memo_dir=memo_dir)
    first = disk.run_tests(("test_suite.py",))
    assert len(list(memo_dir.glob("*.json"))) == 1
    clear_memo()
    again = Workspace(project.root, memo_dir=memo_dir).run_tests(("test_suite.py",))
    assert again.cached and again.failed_tests == first.failed_tests and again.seconds == first.seconds
    (next(memo_dir.glob("*.json"))).write_text("{corrupt")
    clear_memo()
    assert not Workspace(project.root, memo_dir=memo_dir).run_tests(("test_suite.py",)).cached


def test_run_pytest_with_extra_files_leaves_workspace_untouched(project):
    hidden = "from mod import double\n\ndef test_hidden():\n    assert double(3) == 6\n"
    before = project.snapshot_files()
    run = run_pytest(project.root, ["test_hidden.py"], timeout=60, extra_files={"test_hidden.py": hidden})
    assert run.failed == 1 and run.failed_tests == ("test_hidden.py::test_hidden",)
    assert project.snapshot_files() == before and not project.exists("test_hidden.py")
    with pytest.raises(WorkspaceError, match="outside"):
        run_pytest(project.root, [], extra_files={"../evil.py": "x"})


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
    capped = Workspace(ws.root, agent_output_cap=300).script_reply(run)
    assert len(capped) <= 300 and capped.startswith("✅ Script completed:") and capped.endswith("LAST")
    assert "ooo" in capped  # stdout keeps its share even when stderr alone would fill the cap


def test_duplicate_quiet_flag_keeps_the_summary(project):
    run = project.run_tests(args=("-q", "test_suite.py"))
    assert (run.passed, run.failed, run.errors) == (1, 2, 0)


def test_child_wrapper_runs_as_a_module_too(tmp_path):
    import subprocess

    code = "import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0])"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "latte_lab._sandbox_child",
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
        [sys.executable, "-m", "latte_lab._sandbox_child", "not json", "--", "true"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 126 and "invalid limits" in bad.stderr


def test_write_under_a_file_is_a_clear_error(ws):
    ws.write("notes.txt", "x")
    with pytest.raises(WorkspaceError, match="parent of it is a file"):
        ws.write("notes.txt/inner.py", "y")
    assert len(ws.writes) == 1


def test_exec_path_and_zygote_give_the_same_test_run(project, monkeypatch):
    # Test runs use the pytest fork server by default; the exec path stays available (and is the
    # fallback). tests/test_zygote.py covers parity on every task suite and the sandbox guarantees.
    monkeypatch.delenv(wsmod.ZYGOTE_DISABLE_VAR, raising=False)
    runs = {}
    for mode, disabled in (("exec", "1"), ("zygote", "0")):
        monkeypatch.setenv(wsmod.ZYGOTE_DISABLE_VAR, disabled)
        assert wsmod.zygote_enabled() is (mode == "zygote")
        runs[mode] = run_pytest(project.root, ["test_suite.py"], timeout=60)
    fields = ("returncode", "passed", "failed", "errors", "failed_tests", "timed_out", "notes")
    assert [getattr(runs["exec"], f) for f in fields] == [getattr(runs["zygote"], f) for f in fields]
    assert runs["exec"].failed_tests == ("test_suite.py::TestDouble::test_zero", "test_suite.py::test_neg")
