"""Agents' scripts forked from the script zygote of the local backend: every run is the run a fresh
``python <script>`` gives (output, errors, exit status, what the script can see of its interpreter), and
the sandbox's limits and guarantees hold for it as for any run."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from latte_lab.sandbox import SandboxLimits
from latte_lab.sandbox import zygote as zyg
from latte_lab.sandbox.process import MARKER_VAR
from latte_lab.workspace import Workspace

pytestmark = pytest.mark.skipif(not (hasattr(os, "fork") and Path("/proc/self/stat").exists()),
                                reason="the zygote needs fork and /proc")

INTROSPECT = f"""
import gc, os, signal, sys, threading, warnings
print(list(globals()))
print(__name__, __doc__, __package__, __spec__, type(__loader__).__name__, __loader__.name, __loader__.path)
print(__file__, __cached__, __annotations__, type(__builtins__).__name__)
print(sys.argv, sys.orig_argv[1:], sys.path, sys.flags)
print(sorted(sys.modules))
print(os.getcwd(), sorted((k, v) for k, v in os.environ.items() if k not in ("HOME", "TMPDIR", {MARKER_VAR!r})))
print(repr(sys.stdin.read()), sys.stdout.write_through, sys.stderr.write_through, sys.getrecursionlimit())
print(threading.active_count(), gc.isenabled(), signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGPIPE))
print(sys.excepthook is sys.__excepthook__, warnings.filters, sys.getdefaultencoding(), sys.stdout.encoding)
"""

SCRIPTS = {
    "introspect.py": INTROSPECT,
    "sub/nested.py": "import sys\nprint(sys.argv, sys.path[0], __file__)\nimport helper\nprint(helper.VALUE)\n",
    "sub/helper.py": "VALUE = 'found beside the script'\n",
    "chained.py": """
        def inner():
            return {}["key"]
        try:
            inner()
        except KeyError as exc:
            raise RuntimeError("while looking it up") from exc
    """,
    "group.py": "raise ExceptionGroup('two', [ValueError('a'), TypeError('b')])\n",
    "exit_code.py": "import sys\nprint('before')\nsys.exit(3)\n",
    "exit_text.py": "raise SystemExit('stopped with a message')\n",
    "exit_none.py": "import sys\nsys.exit()\n",
    "interrupt.py": "raise KeyboardInterrupt\n",
    "syntax.py": "x = (\n",
    "indent.py": "def f():\nreturn 1\n",
    "nul.py": "x = 1\x00\n",
    "latin1.py": "# -*- coding: latin-1 -*-\nprint('caf\xe9')\n",
    "not_utf8.py": "print('\xff')\n",
    "late.py": """
        import atexit, sys, threading, time
        atexit.register(lambda: print("at exit"))
        def late():
            time.sleep(0.2)
            print("the thread finished after the main module")
        threading.Thread(target=late).start()
        print("main module done")
        sys.stderr.write("to stderr\\n")
    """,
    "main_guard.py": """
        import pickle
        class Point:
            def __init__(self, x):
                self.x = x
        if __name__ == "__main__":
            print(pickle.loads(pickle.dumps(Point(3))).x)
    """,
    "files.py": """
        import os, subprocess, sys
        here = os.path.dirname(__file__)
        print(open(os.path.join(here, "data.txt")).read().strip())
        with open("written.txt", "w") as fh:
            fh.write("w")
        print(subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout.strip())
    """,
    "data.txt": "from the data file\n",
    "warns.py": "import warnings\nwarnings.warn('careful', UserWarning)\nprint('after the warning')\n",
    "unicode.py": "print('ünïcödé ✓')\nimport sys\nprint('é', file=sys.stderr)\n",
}


def _bytes(text: str) -> bytes:
    if "latin-1" in text or "\xff" in text:
        return text.encode("latin-1")
    return textwrap.dedent(text).lstrip().encode("utf-8")


def _normal(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+", "0x?", text)


def corpus_workspace(root: Path, sandbox: str = "local") -> Workspace:
    """A workspace holding the scripts above (the warm bubblewrap sandbox's tests use it too)."""
    ws = Workspace(root, memo=False, sandbox=sandbox)
    for path, text in SCRIPTS.items():
        ws.setup_file(path, _bytes(text))
    return ws


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    return corpus_workspace(tmp_path / "ws")


@pytest.mark.parametrize("script", [p for p in SCRIPTS if p.endswith(".py") and p != "sub/helper.py"])
def test_a_forked_script_runs_as_a_fresh_interpreter_runs_it(workspace, monkeypatch, script):
    forks = []
    real = zyg.launch
    monkeypatch.setattr(zyg, "launch", lambda request, *a, **k: forks.append(request.args) or real(request, *a, **k))
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    forked = workspace.run_script(script)
    monkeypatch.setattr(zyg, "USE_ZYGOTE", False)
    fresh = workspace.run_script(script)
    assert forks == [[script]]
    assert (forked.returncode, _normal(forked.stdout), _normal(forked.stderr)) == \
        (fresh.returncode, _normal(fresh.stdout), _normal(fresh.stderr))


def test_what_a_script_sees_and_how_it_ends(workspace, monkeypatch):
    """The corpus above exercises what it should (the comparisons alone would pass on two empty runs)."""
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    run = workspace.run_script
    assert run("exit_code.py").returncode == 3 and run("exit_none.py").returncode == 0
    assert run("exit_text.py").stderr == "stopped with a message\n"
    assert run("interrupt.py").returncode == -2
    assert "SyntaxError: '(' was never closed" in run("syntax.py").stderr
    assert "RuntimeError: while looking it up" in run("chained.py").stderr
    late = run("late.py")
    assert late.stdout.splitlines() == ["main module done", "the thread finished after the main module", "at exit"]
    assert run("main_guard.py").stdout == "3\n"
    assert run("files.py").stdout == "from the data file\n42\n" and workspace.exists("written.txt")
    assert run("latin1.py").stdout == "café\n"
    nested = run("sub/nested.py").stdout
    assert "found beside the script" in nested and str(workspace.root / "sub") in nested


LIMITS = SandboxLimits(cpu_seconds=1, output_bytes=4096)


def assert_scripts_keep_the_limits(ws: Workspace) -> None:
    """A busy loop meets the CPU limit, a flood is capped, a sleeper is timed out (its files kept); ``ws`` has
    :data:`LIMITS`. The warm bubblewrap sandbox's tests use it too."""
    ws.setup_file("spin.py", "while True:\n    pass\n")
    ws.setup_file("flood.py", "print('x' * 100_000)\n")
    ws.setup_file("hang.py", "import time\nopen('started.txt', 'w').write('yes')\ntime.sleep(60)\n")
    spin = ws.run_script("spin.py")
    assert spin.returncode != 0 and any("CPU" in n for n in spin.notes), spin
    flood = ws.run_script("flood.py")
    assert flood.truncated and len(flood.stdout) < 5000
    hang = ws.run_script("hang.py", timeout=1)
    assert hang.timed_out and ws.read("started.txt") == "yes"


def test_forked_scripts_keep_the_sandbox_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    assert_scripts_keep_the_limits(Workspace(tmp_path / "ws", memo=False, sandbox="local", limits=LIMITS))


def test_a_script_zygote_is_apart_from_the_pytest_one(workspace, monkeypatch):
    """Scripts never fork from the process that holds test files' rewritten code."""
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    workspace.setup_file("test_x.py", "def test_x():\n    assert True\n")
    assert workspace.run_tests(("test_x.py",), timeout=30).passed == 1
    assert workspace.run_script("exit_none.py").returncode == 0
    modes = sorted(z.mode for z in zyg._ZYGOTES.values() if z.alive())
    assert "script" in modes and "pytest" in modes
