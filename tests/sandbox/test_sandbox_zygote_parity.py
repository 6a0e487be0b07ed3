"""The pytest fork server (zygote) of the local backend: parity with the exec path on every task suite,
the sandbox guarantees with the zygote on, fallback, restart, shutdown and concurrency."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS

import latte_lab as ll
from latte_lab.sandbox import SandboxLimits, TestRun, clear_memo, run_pytest, warm
from latte_lab.sandbox import limits as lim
from latte_lab.sandbox import pytest as sbpytest
from latte_lab.sandbox import run as runmod
from latte_lab.sandbox import zygote as zyg
from latte_lab.sandbox.judge import HOST_NAME
from latte_lab.sandbox.process import MARKER_VAR
from latte_lab.workspace import Workspace

needs_zygote = pytest.mark.skipif(
    not (hasattr(os, "fork") and Path("/proc/self/stat").exists()), reason="the zygote needs fork and /proc"
)
pytestmark = [needs_zygote, pytest.mark.usefixtures("no_shared_memo")]

TASK_NAMES = ll.tasks.names()


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


@pytest.fixture
def launches(monkeypatch) -> Launches:
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    monkeypatch.delenv(zyg.ZYGOTE_DISABLE_VAR, raising=False)
    return Launches(monkeypatch)


@pytest.fixture
def isolated_zygote_state():
    """Tests that break or replace the zygote: start from none and leave none behind."""
    zyg.shutdown_zygotes()
    saved = dict(zyg._ZYGOTE_STATE)
    zyg._ZYGOTE_STATE.update(start_failures=0, warned=False)
    yield
    zyg.shutdown_zygotes()
    zyg._ZYGOTE_STATE.update(start_failures=saved["start_failures"], warned=saved["warned"])


def both_ways(monkeypatch, fn):
    """(exec-path result, zygote result) of ``fn()``."""
    monkeypatch.setattr(zyg, "USE_ZYGOTE", False)
    by_exec = fn()
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    by_zygote = fn()
    return by_exec, by_zygote


def outcome(run: TestRun) -> tuple:
    return (run.returncode, run.passed, run.failed, run.errors, run.skipped, run.failed_tests, run.timed_out)


# ---- parity on every task suite ---------------------------------------------------------------


def _task_runs(name: str, root: Path, monkeypatch) -> dict[str, object]:
    """Every run of one task, two at once (threads): the public suite and the hidden evaluation, on the
    starting workspace and on the reference solution. The evaluation's judge is forked from the trusted server and
    its workspace process from the script server (latte_lab.sandbox.judge); it runs beside the forked public
    runs."""
    task = ll.tasks.get(name)
    workspaces = {}
    for state in ("start", "reference"):
        ws = Workspace(root / state, memo=False, sandbox="local")
        task.setup(ws)
        if state == "reference":
            for path, text in task.reference_solution().items():
                ws.setup_file(path, text)
        workspaces[state] = ws
    results: dict[str, object] = {}

    def public_runs() -> None:
        for state, ws in workspaces.items():
            results[f"{state}/public"] = ws.run_tests()

    def evaluations() -> None:
        # One after the other: CPython 3.11's ast.parse (used by evaluate) is not safe in two threads
        # at once ("AST constructor recursion depth mismatch", CPython gh-106905).
        for state, ws in workspaces.items():
            results[f"{state}/evaluate"] = task.evaluate(ws)

    threads = [threading.Thread(target=public_runs), threading.Thread(target=evaluations)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4, sorted(results)
    return results


@pytest.mark.parametrize("name", TASK_NAMES)
def test_task_suites_same_outcome_both_ways(name, tmp_path, monkeypatch, launches):
    by_exec, by_zygote = both_ways(monkeypatch, lambda: _task_runs(name, tmp_path / str(launches.zygote), monkeypatch))
    assert launches.zygote == 2 and launches.exec == 0  # the zygote really ran both public runs
    for label in ("start/public", "reference/public"):
        exec_run, zygote_run = by_exec[label], by_zygote[label]
        assert outcome(zygote_run) == outcome(exec_run), (label, zygote_run.stdout[-3000:])
        assert exec_run.total > 0
    assert by_exec["reference/public"].ok
    for label in ("start/evaluate", "reference/evaluate"):
        exec_eval, zygote_eval = by_exec[label], by_zygote[label]
        assert (zygote_eval.passed, zygote_eval.failed, zygote_eval.errors) == (
            exec_eval.passed,
            exec_eval.failed,
            exec_eval.errors,
        )
        assert zygote_eval.per_class == exec_eval.per_class
    assert by_exec["reference/evaluate"].rate == 1.0 and by_exec["start/evaluate"].rate < 1.0


PROBE = '''
import json, os, resource, sys

def test_probe():
    limits = {n: resource.getrlimit(getattr(resource, n)) for n in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE")}
    own = [m for m in sys.modules if m == "mod" or m.startswith(("latte_lab", "_latte_lab"))]
    with open("probe.json", "w") as fh:
        json.dump({
            "env": dict(os.environ), "path": sys.path, "cwd": os.getcwd(), "argv": sys.argv,
            "limits": limits, "flags": list(sys.flags),
            "own_modules": own, "sid_is_pid": os.getsid(0) == os.getpid(),
            "main": sys.modules["__main__"].__dict__.get("__file__"),
        }, fh)
'''


def test_process_state_matches_a_fresh_interpreter(tmp_path, monkeypatch, launches):
    ws = Workspace(tmp_path / "ws", memo=False, limits=SandboxLimits(cpu_seconds=50, file_size_bytes=2**22), sandbox="local")
    ws.setup_file("test_probe.py", PROBE)

    def probe():
        assert ws.run_tests(("test_probe.py",), timeout=20).passed == 1
        return json.loads((ws.root / "probe.json").read_text())

    by_exec, by_zygote = both_ways(monkeypatch, probe)
    assert launches.zygote == 1
    for seen in (by_exec, by_zygote):
        for var in ("HOME", "TMPDIR", MARKER_VAR):
            assert seen["env"].pop(var)  # per-run values
        assert not any(w in k.upper() for k in seen["env"] for w in runmod.FORBIDDEN_ENV_WORDS)
    assert by_zygote["env"] == by_exec["env"]
    assert by_zygote["path"] == by_exec["path"] and by_zygote["path"][0] == str(ws.root)
    for key in ("cwd", "argv", "limits", "flags", "sid_is_pid", "main"):
        assert by_zygote[key] == by_exec[key], key
    assert by_zygote["own_modules"] == [] == by_exec["own_modules"]


def test_workspace_modules_never_leak_between_runs(tmp_path, launches):
    runs = []
    for value in (1, 2, 3):
        ws = Workspace(tmp_path / f"ws{value}", memo=False, sandbox="local")
        ws.setup_file("mod.py", f"VALUE = {value}\n")
        ws.setup_file("test_mod.py", f"import mod\n\ndef test_value():\n    assert mod.VALUE == {value}\n")
        runs.append(ws.run_tests(("test_mod.py",), timeout=30))
    assert [r.passed for r in runs] == [1, 1, 1] and launches.zygote == 3


def test_collection_errors_and_timeouts_match(tmp_path, monkeypatch, launches):
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("mod.py", "def double(x:\n")
    ws.setup_file("test_mod.py", "from mod import double\n\ndef test_d():\n    assert double(1) == 2\n")
    by_exec, by_zygote = both_ways(monkeypatch, lambda: ws.run_tests(("test_mod.py",), timeout=30))
    assert outcome(by_zygote) == outcome(by_exec) and by_zygote.errors >= 1 and by_zygote.returncode == 2
    ws.setup_file("mod.py", "import time\ntime.sleep(30)\n")
    run = ws.run_tests(("test_mod.py",), timeout=1.5)  # exec path: test_workspace's timeout test
    assert run.timed_out and run.errors >= 1 and run.returncode == -signal.SIGTERM
    assert launches.zygote == 2


def _report(run: TestRun) -> str:
    """pytest's text with what differs between any two runs (object addresses, durations) masked."""
    text = re.sub(r"0x[0-9a-f]+", "0x?", run.stdout)
    return re.sub(r"in [0-9.]+s", "in ?s", text)


def test_failure_reports_are_the_same_text_both_ways(tmp_path, monkeypatch, launches):
    """A run forked from the zygote prints the exec path's report, word for word."""
    task = ll.tasks.get("debug")
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    task.setup(ws)
    by_exec, by_zygote = both_ways(monkeypatch, ws.run_tests)
    assert by_exec.failed > 10 and outcome(by_zygote) == outcome(by_exec)
    assert _report(by_zygote) == _report(by_exec)
    assert launches.zygote == 1
    # Plain `python -m pytest` prints the same. Sandboxed runs never see CI or BUILD_NUMBER (pytest prints whole
    # diffs when either is set), so neither does this one.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    plain = subprocess.run([sys.executable, *sbpytest.PYTEST_ARGS, *ws.test_args], cwd=ws.root, capture_output=True,
                           text=True, timeout=120, env={**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert _report(TestRun(plain.returncode, plain.stdout, "", 0.0, False, False)) == _report(by_exec)


# Suites whose reports go through much of pytest's reporting: tracebacks through several files and the standard
# library, chained and grouped exceptions, fixtures failing in setup and
# teardown, a conftest fixture, a conftest that adds a fixture to one of pytest's own plugins (so the
# plugin's namespace changed since the fork server scanned it), warnings, captured output, xfail and skip.
REPORT_CORPUS = {
    "helpers.py": """
import json

def parse(text):
    return json.loads(text)

def deep(n):
    if n == 0:
        raise ValueError("bottom of " + "the stack")
    return deep(n - 1)

class Box:
    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v["missing"]
""",
    "conftest.py": """
import pytest
import _pytest.tmpdir as plugin_module

@pytest.fixture
def answer():
    return 41

@pytest.fixture
def injected():
    return "from a patched plugin"

plugin_module.injected = injected
del injected  # found through the plugin only
""",
    "test_corpus.py": """
import warnings
import pytest
from helpers import Box, deep, parse

def test_json_error():
    parse("{not json")

def test_deep():
    deep(5)

def test_code_from_a_file_that_is_not_there():
    exec(compile("def f():\\n    raise ValueError('generated')\\nf()", "/nowhere/generated.py", "exec"))

def test_method():
    assert Box({"a": 1}).get() == 1

def test_chained():
    try:
        {}["k"]
    except KeyError as exc:
        raise RuntimeError("while looking up") from exc

def test_group():
    raise ExceptionGroup("two", [ValueError("a"), TypeError("b")])

def test_compare(answer):
    assert [answer, {"x": (1, 2)}] == [42, {"x": (1, 3)}]

def test_injected(injected):
    assert injected == "something else"

@pytest.fixture
def broken_setup():
    raise OSError("setup failed")

def test_setup_error(broken_setup):
    pass

@pytest.fixture
def broken_teardown():
    yield 1
    raise RuntimeError("teardown failed")

def test_teardown_error(broken_teardown):
    print("printed before the end")
    assert broken_teardown == 2

def test_warns():
    warnings.warn("careful", UserWarning)

@pytest.mark.parametrize("n", [1, 2, 3])
def test_param(n):
    assert n % 2

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert 0

@pytest.mark.skip(reason="not today")
def test_skip():
    pass

class TestGroup:
    def setup_method(self):
        self.items = [1, 2]

    def test_len(self):
        assert len(self.items) == 3

    def test_ok(self):
        assert self.items
""",
    "test_broken_import.py": "import does_not_exist\n",
}


def test_reports_on_a_varied_suite_are_plain_pytests_word_for_word(tmp_path, monkeypatch, launches):
    """A report is plain ``python -m pytest``'s, every line, on the fork server and the exec path alike."""
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    for path, text in REPORT_CORPUS.items():
        ws.setup_file(path, textwrap.dedent(text).lstrip())
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    # The last two: a run blocking another of pytest's plugins (it cannot take the configuration the fork
    # server made ahead) and a usage error (which names the program as a run's configuration does).
    for args in (("test_corpus.py",), ("test_broken_import.py",), ("-p", "no:warnings", "test_corpus.py"),
                 ("--no-such-option", "test_corpus.py")):
        by_exec, by_zygote = both_ways(monkeypatch, lambda args=args: ws.run_tests(args, timeout=60))
        plain = subprocess.run([sys.executable, *sbpytest.PYTEST_ARGS, *args], cwd=ws.root, capture_output=True,
                               text=True, timeout=120, env={**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                                                            "PYTHONPATH": str(ws.root), "NO_COLOR": "1"})
        expected = _report(TestRun(plain.returncode, plain.stdout, "", 0.0, False, False))
        if args == ("test_corpus.py",):
            assert all(text in expected for text in ("ExceptionGroup", "teardown failed", "from a patched plugin",
                                                    "bottom of the stack", "UserWarning", "1 xfailed")), expected
        elif args == ("test_broken_import.py",):
            assert "No module named 'does_not_exist'" in expected
        elif args[0] == "-p":
            assert "bottom of the stack" in expected and "UserWarning" not in expected, expected
        else:
            assert "usage: python -m pytest" in plain.stderr, plain.stderr
        assert _report(by_zygote) == expected
        assert _report(by_exec) == expected
        if args[0] == "--no-such-option":
            # (the sandboxed command names its own ini file, so plain pytest's last lines differ)
            assert by_zygote.stderr == by_exec.stderr and "usage: python -m pytest" in by_zygote.stderr
    assert launches.zygote == 4


def test_an_edited_test_file_is_rewritten_afresh(tmp_path, monkeypatch, launches):
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("mod.py", "VALUE = 2\n")
    for expected, outcome_ in ((1, "failed"), (2, "passed"), (3, "failed")):
        ws.setup_file("test_mod.py", f"import mod\n\ndef test_value():\n    assert mod.VALUE == {expected}\n")
        run = ws.run_tests(("test_mod.py",), timeout=30)
        assert run.cases == (("test_mod.py::test_value", outcome_),), run.stdout
        if outcome_ == "failed":
            assert f"assert 2 == {expected}" in run.stdout  # the rewritten assert explains itself
    assert launches.zygote == 3


def test_rewrite_warnings_and_the_assertion_pass_hook_match(tmp_path, monkeypatch, launches):
    """Files whose rewrite warns, and runs that ask for the assertion pass hook, behave as on the exec path."""
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    ws.setup_file("test_tuple.py", "def test_t():\n    assert (1 == 2, 'always true')\n")
    by_exec, by_zygote = both_ways(monkeypatch, lambda: ws.run_tests(("test_tuple.py",), timeout=30))
    assert "assertion is always true" in by_exec.stdout
    assert _report(by_zygote) == _report(by_exec)
    ws = Workspace(tmp_path / "hook", memo=False, sandbox="local")
    ws.setup_file("pytest.ini", "[pytest]\nenable_assertion_pass_hook = true\n")
    ws.setup_file("conftest.py", "def pytest_assertion_pass(item, lineno, orig, expl):\n"
                                 "    print(f'PASSED ASSERT {orig}')\n")
    ws.setup_file("test_hook.py", "def test_h():\n    assert 1 + 1 == 2\n")
    by_exec, by_zygote = both_ways(monkeypatch, lambda: ws.run_tests(("test_hook.py", "-s"), timeout=30))
    assert "PASSED ASSERT 1 + 1 == 2" in by_exec.stdout and "PASSED ASSERT 1 + 1 == 2" in by_zygote.stdout
    assert launches.zygote == 2


SNOOP = """
import gc, json, types

def test_snoop():
    seen = set()
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            seen.update(v.co_filename for v in obj.values() if isinstance(v, types.CodeType))
    with open("snooped.json", "w") as fh:
        json.dump(sorted(seen), fh)
"""


def test_a_hidden_suite_never_reaches_the_zygotes_memory(tmp_path, launches, isolated_zygote_state):
    """Every run is forked from the zygote: code it keeps is readable by the next agent run. It keeps no
    workspace's code at all: neither the agents' test files nor the hidden suite an evaluation runs."""
    task = ll.tasks.get("debug")
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="local")
    task.setup(ws)
    task.evaluate(ws)
    ws.setup_file("test_snoop.py", SNOOP)
    assert ws.run_tests(("test_snoop.py",), timeout=60).passed == 1
    seen = json.loads((ws.root / "snooped.json").read_text())
    assert launches.zygote == 1, "the agent's run was not forked from the zygote (the evaluation never is)"
    assert launches.trusted == 1  # the evaluation was forked from the trusted evaluation server, a process of its own
    assert not any(path.endswith("test_suite.py") for path in seen), seen  # no workspace's test file
    assert not any("latte_lab-eval-" in path or Path(path).name.startswith("test_hidden") for path in seen), seen


# ---- sandbox guarantees with the zygote on -----------------------------------------------------


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


# ---- switch, fallback, restart, shutdown -------------------------------------------------------

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


# ---- pytest's own internals ------------------------------------------------------------------------------

# What a run's pytest holds under a few private names a fork server could be tempted to replace: the module that
# defined each (pytest's own, for every one).
SEE_INTERNALS = """
import json, _pytest._code.code as code, _pytest._code.source as source, _pytest.assertion.rewrite as rewrite
import _pytest.config as config, _pytest.fixtures as fixtures

def test_internals():
    owner = lambda fn: fn.__module__
    print("INTERNALS " + json.dumps({
        "statement_trees": owner(source.getstatementrange_ast), "code_paths": owner(code.Code.path.fget),
        "fixture_scans": owner(vars(fixtures)["dir"]) if "dir" in vars(fixtures) else "_pytest.fixtures",
        "rewrites": owner(rewrite._rewrite_test), "config": owner(config.get_config)}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_sees_pytests_own_internals_whichever_way_it_starts(tmp_path, monkeypatch, backend, launches):
    """A test run's pytest is pytest's own, whichever way the run starts (forked from a fork server or a kept
    sandbox, or a fresh interpreter): the fork servers use pytest's public API only."""
    ws = Workspace(tmp_path / "ws", memo=False, sandbox=backend)
    ws.setup_file("test_internals.py", SEE_INTERNALS)

    def internals() -> dict:
        run = ws.run_tests(("-s", "test_internals.py"), timeout=60)
        assert run.passed == 1, run.stdout[-3000:]
        return json.loads(next(line for line in run.stdout.splitlines() if line.startswith("INTERNALS "))[10:])

    forked = internals()
    for switch_off in ((zyg, "USE_ZYGOTE"), (warm, "USE_WARM")):
        monkeypatch.setattr(*switch_off, False)
    fresh = internals()
    assert forked == fresh and all(module.startswith("_pytest.") for module in fresh.values()), (forked, fresh)
    assert launches.zygote == (1 if backend == "local" else 0)
