"""The pytest fork server (zygote) of the local backend against the exec path: the same outcome on every task
suite, the same process state as a fresh interpreter, and plain pytest's reports word for word. The rest of
the zygote's tests: test_sandbox_zygote_guarantees.py, _lifecycle.py and _internals.py beside this file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from zygote_helpers import both_ways, needs_zygote, outcome

import latte_lab as ll
from latte_lab.sandbox import SandboxLimits, TestRun
from latte_lab.sandbox import pytest as sbpytest
from latte_lab.sandbox import run as runmod
from latte_lab.sandbox.process import MARKER_VAR
from latte_lab.workspace import Workspace

pytestmark = [needs_zygote, pytest.mark.usefixtures("no_shared_memo")]

TASK_NAMES = ll.tasks.names()


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
