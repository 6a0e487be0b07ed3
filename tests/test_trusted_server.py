"""The trusted evaluation server (latte_lab/sandbox/_trusted_server.py): what one hidden evaluation could leave for
the next (docs/concepts/sandbox.md, "The trusted evaluation server"), one probe per item, on both backends.

Per backend, three evaluations share the server, as a study's do: the first, in workspace A, notes what an
evaluation sees; the second, in A, imports a workspace module that plants something for every item (patched
modules, files, environment variables, signals to its parent and the server, descriptors and a daemon holding
them, an audit hook, the random generator's state); the third, in workspace B, notes again. Each test checks one
item: the third saw nothing of the second, and what the first saw. A check that the three shared one server keeps
the probes from passing by running apart.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
import uuid
from pathlib import Path

import psutil
import pytest
from sandbox_helpers import BACKENDS, survivors

from latte_lab.sandbox import trusted, warm
from latte_lab.sandbox import zygote as zyg
from latte_lab.sandbox.lifetime import Sandbox
from latte_lab.sandbox.trusted import run_trusted_pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/self/stat").exists(),
                                reason="the server needs fork and /proc")

SERVERS = ("_trusted_server.py", "_sandbox_server.py")  # what the server's (and a reaper's) command line names

COMMON = '''
import glob, json, os, random, sys
TOK = {tok!r}
SERVERS = {servers!r}

def ppid(pid):
    with open(f"/proc/{{pid}}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])

def servers():
    """The run's parent and the server above it: processes whose command line names a server."""
    found, pid = [], os.getppid()
    for _ in range(2):
        if pid <= 0:
            break
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as fh:
                cmdline = fh.read().decode("utf-8", "replace")
        except OSError:
            break
        if not any(name in cmdline for name in SERVERS):
            break
        found.append(pid)
        pid = ppid(pid)
    return found

def places():
    """Where a file could be left: the run's own directories, /tmp, /dev/shm, and the server's directory (its
    working directory through /proc, and the directories the local server is started in)."""
    dirs = [os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), "/tmp", "/dev/shm"]
    dirs += [f"/proc/{{pid}}/cwd" for pid in servers()]
    dirs += glob.glob("/tmp/latte_lab-zygote-*")
    return [d for d in dict.fromkeys(dirs) if d]
'''

PLANT = COMMON + '''
import signal, socket, subprocess
import _pytest.reports, json as _json, pluggy, unittest
done = {{}}

def attempt(what, fn):
    try:
        result = fn()
        done[what] = result if isinstance(result, (bool, int, list)) else True
    except Exception as exc:
        done[what] = type(exc).__name__

# modules and objects of the server's memory (the guard puts back pytest's, pluggy's and unittest's at the next
# check; json, sys and builtins' additions stay for this evaluation)
_pytest.reports.PLANTED = TOK
unittest.TestCase.planted = TOK
pluggy.PLANTED = TOK
_json.dumps = lambda *a, **k: TOK
__builtins__["PLANTED"] = TOK if isinstance(__builtins__, dict) else None
sys.modules["added_" + TOK] = type(sys)("added_" + TOK)
sys.path.insert(0, "/planted-" + TOK)
sys.setrecursionlimit(123)
done["modules"] = _json.dumps() == TOK
# files, including a module the next evaluation would import if its directory were on its sys.path
for d in places():
    attempt("file " + d, lambda d=d: open(os.path.join(d, f"planted_{{TOK}}.py"), "w").write("X = 1\\n") > 0)
# environment
os.environ["PLANTED_" + TOK] = "1"
os.putenv("PLANTED_PUT_" + TOK, "1")
done["env"] = os.environ.get("PLANTED_" + TOK) == "1"
# signals to the run's parent and to the server (SIGKILL and SIGSTOP are their own probes' business)
targets = servers()
done["signal targets"] = len(targets)
for pid in targets:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM):
        attempt(f"signal {{pid}} {{sig.name}}", lambda pid=pid, sig=sig: os.kill(pid, sig))
# descriptors: a file, a socket pair, a high descriptor, and a daemon in a session of its own holding them
held = open(os.path.join(os.getcwd(), f"held_{{TOK}}"), "w")
left, right = socket.socketpair()
os.dup2(held.fileno(), 200)
os.set_inheritable(200, True)
subprocess.Popen(["sh", "-c", "sleep 60; :", TOK], start_new_session=True, pass_fds=(200, left.fileno()),
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
done["fds"] = True
# an audit hook that would speak in every later evaluation's output
sys.addaudithook(lambda event, args: event == "open" and os.write(2, (TOK + " audit\\n").encode()))
# the random generator's state
done["random"] = random.random()
'''

TEST_PLANT = '''
import json, pytest
dumps = json.dumps  # the plant replaces json.dumps
import planted_{tok} as plant

def test_plant():
    pytest.fail("REPORT " + dumps(plant.done))  # its traceback is read (opened) after the session's capture
'''

SEE = COMMON + '''
import json as _json, pytest

def test_see():
    import _pytest.reports, pluggy, unittest
    seen = {{
        "modules": [hasattr(_pytest.reports, "PLANTED"), hasattr(unittest.TestCase, "planted"),
                    hasattr(pluggy, "PLANTED"), _json.dumps([1]) == "[1]", hasattr(__import__("builtins"), "PLANTED"),
                    "added_" + TOK in sys.modules, "/planted-" + TOK in sys.path, sys.getrecursionlimit() == 123],
        "files": sorted(d for d in places() if os.path.exists(os.path.join(d, f"planted_{{TOK}}.py"))),
        "import": __import__("importlib.util").util.find_spec(f"planted_{{TOK}}") is not None,
        "env": sorted(k for k in os.environ if TOK in k),
        "fds": sorted(os.readlink(f"/proc/self/fd/{{fd}}") for fd in os.listdir("/proc/self/fd")
                      if TOK in os.path.realpath(f"/proc/self/fd/{{fd}}")) + ([200] if _open(200) else []),
        "servers": len(servers()),
        "random": random.random(),
        "cwd": sorted(os.listdir(".")),
    }}
    pytest.fail("REPORT " + _json.dumps(seen), pytrace=False)

def _open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
'''


def _report(run) -> dict:
    found = re.findall(r"REPORT (\{.*\})", run.stdout)
    assert found, run.stdout[-3000:] + run.stderr[-2000:]
    return json.loads(found[-1])


def server_identity(backend: str) -> list:
    """The live trusted servers of this process: (kind, pid) each."""
    if backend == "bwrap":
        return [("kept sandbox", s.proc.pid) for key, s in warm._SANDBOXES.items() if key[1] == "trusted"]
    return [("fork server", z.pid) for key, z in zyg._ZYGOTES.items() if key[1] == "trusted"]


def evaluate(root: Path, files: dict[str, str], test: str, backend: str):
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return run_trusted_pytest(root, {test: (root / test).read_text()}, [test], sandbox=backend, timeout=60)


@pytest.fixture(scope="module", params=BACKENDS)
def probes(request, tmp_path_factory):
    backend = request.param
    tok = "t" + uuid.uuid4().hex[:12]
    fields = {"tok": tok, "servers": SERVERS}
    root = tmp_path_factory.mktemp(f"trusted-{backend}")
    see = textwrap.dedent(SEE).format(**fields)
    with pytest.MonkeyPatch.context() as mp:
        for var in (zyg.ZYGOTE_DISABLE_VAR, warm.WARM_DISABLE_VAR, trusted.SERVER_DISABLE_VAR):
            mp.delenv(var, raising=False)
        mp.setattr(zyg, "USE_ZYGOTE", True)
        mp.setattr(warm, "USE_WARM", True)
        mp.setattr(trusted, "USE_SERVER", True)
        result = {"backend": backend, "token": tok, "server": []}
        result["before"] = _report(evaluate(root / "a", {"test_see.py": see}, "test_see.py", backend))
        result["server"].append(server_identity(backend))
        planted = evaluate(root / "a", {f"planted_{tok}.py": textwrap.dedent(PLANT).format(**fields),
                                        "test_plant.py": textwrap.dedent(TEST_PLANT).format(tok=tok)},
                           "test_plant.py", backend)
        result["planted"] = _report(planted)
        result["planted_stderr"] = planted.stderr
        result["server"].append(server_identity(backend))
        after = evaluate(root / "b", {"test_see.py": see}, "test_see.py", backend)
        result["after"] = _report(after)
        result["after_output"] = after.stdout + after.stderr
        result["server"].append(server_identity(backend))
        result["daemons"] = [p.pid for p in survivors(tok, 1.0)]
        yield result


def test_the_evaluations_shared_one_server(probes):
    """Without this the probes below could pass because every evaluation had a server of its own."""
    kind = "kept sandbox" if probes["backend"] == "bwrap" else "fork server"
    assert [len(s) for s in probes["server"]] == [1, 1, 1], probes["server"]
    assert {s[0] for s in probes["server"]} == {(kind, probes["server"][0][0][1])}


def test_modules_and_objects_of_the_server(probes):
    """Patched pytest, pluggy, unittest, json and builtins, an added module, sys.path, the recursion limit."""
    assert probes["planted"]["modules"] is True
    assert probes["after"]["modules"] == probes["before"]["modules"] == [False, False, False, True, False, False,
                                                                         False, False]


def test_files_in_the_servers_directories_and_tmp(probes):
    """A file (a module) left in the run's directories, /tmp, /dev/shm or the server's directory: the next
    evaluation finds none where it looks, and cannot import it."""
    planted = {k: v for k, v in probes["planted"].items() if k.startswith("file ")}
    assert any(v is True for v in planted.values()), planted  # at least its own directories took the file
    assert any(k.startswith("file /proc/") for k in planted) or probes["backend"] == "bwrap"
    assert probes["after"]["files"] == probes["before"]["files"] == []
    assert probes["after"]["import"] is probes["before"]["import"] is False
    assert f"held_{probes['token']}" not in probes["after"]["cwd"]


def test_the_servers_directory_cannot_be_reached_through_proc(probes):
    """The server is not dumpable: a run cannot open its working directory through /proc."""
    planted = probes["planted"]
    through_proc = {k: v for k, v in planted.items() if k.startswith("file /proc/")}
    assert through_proc and all(v == "PermissionError" for v in through_proc.values()), through_proc


def test_environment(probes):
    assert probes["planted"]["env"] is True
    assert probes["after"]["env"] == probes["before"]["env"] == []


def test_signals_to_the_parent_and_the_server(probes):
    """Every signal the server may ignore, sent to the run's parent and to the server: the server lives on and
    serves the next evaluation (the shared-server check above), which sees the same parents as the first."""
    assert probes["planted"]["signal targets"] >= 1
    assert probes["after"]["servers"] == probes["before"]["servers"] == probes["planted"]["signal targets"]


def test_open_descriptors_and_a_daemon_holding_them(probes):
    assert probes["planted"]["fds"] is True
    assert probes["after"]["fds"] == probes["before"]["fds"] == []
    assert probes["daemons"] == [], "the run's daemon outlived its evaluation"


def test_an_audit_hook(probes):
    tok = probes["token"]
    assert f"{tok} audit" in probes["planted_stderr"]
    assert tok not in probes["after_output"]


def test_random_state(probes):
    """Each evaluation's generator is seeded anew, as a fresh interpreter's is: no two draw the same."""
    draws = [probes["before"]["random"], probes["planted"]["random"], probes["after"]["random"]]
    assert len(set(draws)) == 3, draws


# -- beyond the shared server ------------------------------------------------------------------------------------


def test_a_killed_server_is_replaced(tmp_path, monkeypatch):
    """A local run of the same user can SIGKILL the server: the next evaluation starts a new one and scores as
    before; Sandbox.close_all stops it."""
    monkeypatch.delenv(trusted.SERVER_DISABLE_VAR, raising=False)
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    see = "def test_ok():\n    assert True\n"
    first = evaluate(tmp_path / "a", {"test_ok.py": see}, "test_ok.py", "local")
    (old,) = server_identity("local")
    kill = textwrap.dedent('''
        import os, signal
        def test_kill():
            with open(f"/proc/{os.getppid()}/stat") as fh:
                server = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{server}/cmdline", "rb") as fh:
                assert b"_trusted_server.py" in fh.read()  # never another process
            os.kill(server, signal.SIGKILL)
    ''')
    evaluate(tmp_path / "b", {"test_kill.py": kill}, "test_kill.py", "local")
    again = evaluate(tmp_path / "c", {"test_ok.py": see}, "test_ok.py", "local")
    assert (first.passed, again.passed, again.failed, again.errors) == (1, 1, 0, 0)
    (new,) = server_identity("local")
    assert new != old
    Sandbox.close_all()  # a sweep's worker, at its end: the server stops with the other fork servers
    assert server_identity("local") == [] and not psutil.pid_exists(new[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_server_and_a_fresh_interpreter_agree(tmp_path, monkeypatch, backend):
    """The same evaluation, forked from the server and in a fresh interpreter: the same verdicts, the same
    tampering found, the same report."""
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    monkeypatch.setattr(warm, "USE_WARM", True)
    suite = textwrap.dedent('''
        import sys, unittest, pytest
        import helpers

        def test_passes():
            assert helpers.double(2) == 4

        def test_fails():
            assert helpers.double(3) == 7

        def test_flags():
            assert sys.flags.safe_path and sys.flags.no_user_site and sys.argv[0] == ".latte_lab-trusted-boot.py"

        class TestCase(unittest.TestCase):
            def test_unittest(self):
                self.assertEqual(helpers.double(1), 2)

        @pytest.mark.parametrize("x", [1, 2])
        def test_param(x):
            assert x == 1
    ''')
    helper = textwrap.dedent('''
        import _pytest.reports as r
        _orig = r.TestReport.from_item_and_call.__func__
        def _fake(cls, item, call):
            rep = _orig(cls, item, call)
            rep.outcome = "passed"
            return rep
        r.TestReport.from_item_and_call = classmethod(_fake)
        def double(x):
            return 2 * x
    ''')
    runs = {}
    for use in (True, False):
        monkeypatch.setattr(trusted, "USE_SERVER", use)
        run = evaluate(tmp_path / str(use), {"helpers.py": helper, "test_suite.py": suite}, "test_suite.py", backend)
        runs[use] = (run.passed, run.failed, run.errors, run.skipped, run.cases, run.failed_tests, run.tampering,
                     run.returncode, re.sub(r"0x[0-9a-f]+|\d+\.\d+s", "", run.stdout).replace(str(tmp_path / str(use)), ""))
    assert runs[True] == runs[False]
    assert runs[True][:3] == (4, 2, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_library_the_suite_names_is_the_installed_one_and_only_there(tmp_path, monkeypatch, backend):
    """eda's hidden suite reads its data with pandas (``Task.hidden_imports``). With ``imports=("pandas",)`` the
    suite gets the installed pandas, never the workspace's ``pandas.py``, whether the session is forked from the
    server's "trusted-libraries" mode or run in a fresh interpreter; a session that names no library starts as a
    fresh interpreter does, without pandas, so the workspace's module is what its code imports (as in the agents'
    own runs), on the server as in a fresh interpreter."""
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    monkeypatch.setattr(warm, "USE_WARM", True)
    fake = "IS_THE_WORKSPACES = True\n"
    suite = textwrap.dedent('''
        import sys
        LOADED_AT_START = "pandas" in sys.modules
        import pandas

        def test_installed_pandas():
            assert not hasattr(pandas, "IS_THE_WORKSPACES") and hasattr(pandas, "DataFrame")

        def test_loaded_before_the_suite():
            assert LOADED_AT_START
    ''')
    seen = {}
    for use in (True, False):
        monkeypatch.setattr(trusted, "USE_SERVER", use)
        for imports in (("pandas",), ()):
            root = tmp_path / f"{use}-{len(imports)}"
            root.mkdir()
            (root / "pandas.py").write_text(fake)
            (root / "test_suite.py").write_text(suite)
            run = run_trusted_pytest(root, {"test_suite.py": suite}, ["test_suite.py"], sandbox=backend, timeout=60,
                                     imports=imports)
            seen[use, imports] = dict(run.cases)
    named = {"test_suite.py::test_installed_pandas": "passed", "test_suite.py::test_loaded_before_the_suite": "passed"}
    unnamed = {"test_suite.py::test_installed_pandas": "failed", "test_suite.py::test_loaded_before_the_suite": "failed"}
    assert seen == {(True, ("pandas",)): named, (False, ("pandas",)): named, (True, ()): unnamed, (False, ()): unnamed}
    live = warm._SANDBOXES if backend == "bwrap" else zyg._ZYGOTES
    assert {"trusted", zyg.TRUSTED_LIBRARIES_MODE} <= {key[1] for key in live}  # the server's two modes served them


def test_imports_must_be_module_names(tmp_path):
    with pytest.raises(ValueError, match="module names"):
        run_trusted_pytest(tmp_path, {"test_x.py": "def test_x(): pass\n"}, ["test_x.py"], imports=["pandas; rm"])


def test_the_server_files_spell_the_option_and_mode_as_the_client_does():
    """The boot script and the server run without latte_lab, so they keep their own copies of these names."""
    import importlib.util

    def load(name):
        spec = importlib.util.spec_from_file_location(f"_probe_{name}", Path(zyg.__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    boot = load("_trusted_boot")
    assert boot.IMPORT_OPTION == zyg.IMPORT_OPTION and boot.PREFIX == trusted.CHANNEL_PREFIX
    assert zyg.server_mode(None, False, [f"{boot.IMPORT_OPTION}pandas", "t.py", "--"]) == zyg.TRUSTED_LIBRARIES_MODE
    server_text = Path(zyg.__file__).with_name("_trusted_server.py").read_text()
    assert f'LIBRARIES_MODE = "{zyg.TRUSTED_LIBRARIES_MODE}"' in server_text
