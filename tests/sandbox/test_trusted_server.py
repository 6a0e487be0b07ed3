"""The trusted evaluation server (latte_lab/sandbox/_trusted_server.py), which forks the judges of hidden evaluations
(docs/concepts/sandbox.md, "Hidden evaluations"), and what one evaluation's workspace code could leave for the next.

A judge never runs workspace code: what an evaluation's workspace code could leave behind, it leaves in its own
workspace process, started as an agent's script is (a fork server's child, or a run of a kept sandbox, each reset
for the next). Per backend, three evaluations run as a study's do: the first, in workspace A, notes what the
workspace's process sees; the second, in A, imports a module that plants something for every item (files, the
environment, modules, a daemon, an audit hook); the third, in workspace B, notes again."""

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

from latte_lab.sandbox import warm
from latte_lab.sandbox import zygote as zyg
from latte_lab.sandbox.judge import run_judged
from latte_lab.sandbox.lifetime import Sandbox

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/self/stat").exists(),
                                reason="the server needs fork and /proc")

PLANT = '''
import os, subprocess, sys
TOK = {tok!r}
done = {{}}
for d in (os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), "/tmp", "/dev/shm"):
    try:
        open(os.path.join(d, f"planted_{{TOK}}.py"), "w").write("X = 1\\n")
        done[d] = True
    except OSError as exc:
        done[d] = type(exc).__name__
os.environ["PLANTED_" + TOK] = "1"
sys.modules["added_" + TOK] = type(sys)("added_" + TOK)
sys.addaudithook(lambda event, args: event == "open" and os.write(2, (TOK + " audit\\n").encode()))
subprocess.Popen(["sh", "-c", "sleep 60; :", TOK], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def planted():
    return done
'''

SEE = '''
import os, sys
TOK = {tok!r}

def seen():
    places = (os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), "/tmp", "/dev/shm")
    return {{
        "files": sorted(d for d in places if d and os.path.exists(os.path.join(d, f"planted_{{TOK}}.py"))),
        "env": sorted(k for k in os.environ if TOK in k),
        "modules": sorted(k for k in sys.modules if TOK in k),
        "cwd": sorted(os.listdir(".")),
    }}
'''

REPORT_TEST = '''
import json
import probe

def test_report():
    print("REPORT " + json.dumps(probe.{function}()))
    assert False
'''


def _report(run) -> dict:
    found = re.findall(r"REPORT (\{.*\})", run.stdout)
    assert found, run.stdout[-3000:] + run.stderr[-2000:]
    return json.loads(found[-1])


def judge_servers(modes=("trusted",)) -> list:
    """The live trusted servers of this process in ``modes``: (mode, pid) each (on both backends: judges run on the
    host)."""
    return [(key[1], z.pid) for key, z in zyg._ZYGOTES.items() if key[1] in modes]


def evaluate(root: Path, files: dict[str, str], tests: dict[str, str], backend: str, **kwargs):
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return run_judged(root, tests, list(tests), sandbox=backend, timeout=60, **kwargs)


@pytest.fixture(scope="module", params=BACKENDS)
def probes(request, tmp_path_factory):
    backend = request.param
    tok = "t" + uuid.uuid4().hex[:12]
    root = tmp_path_factory.mktemp(f"trusted-{backend}")
    see = textwrap.dedent(SEE).format(tok=tok)
    with pytest.MonkeyPatch.context() as mp:
        for var in (zyg.ZYGOTE_DISABLE_VAR, warm.WARM_DISABLE_VAR, zyg.TRUSTED_SERVER_DISABLE_VAR):
            mp.delenv(var, raising=False)
        mp.setattr(zyg, "USE_ZYGOTE", True)
        mp.setattr(warm, "USE_WARM", True)
        mp.setattr(zyg, "USE_TRUSTED_SERVER", True)
        result = {"backend": backend, "token": tok, "servers": []}
        test_see = {"test_see.py": REPORT_TEST.format(function="seen")}
        result["before"] = _report(evaluate(root / "a", {"probe.py": see}, test_see, backend))
        result["servers"].append(judge_servers())
        planted = evaluate(root / "a", {"probe.py": textwrap.dedent(PLANT).format(tok=tok)},
                           {"test_plant.py": REPORT_TEST.format(function="planted")}, backend)
        result["planted"] = _report(planted)
        result["planted_output"] = planted.stdout + planted.stderr
        result["servers"].append(judge_servers())
        after = evaluate(root / "b", {"probe.py": see}, test_see, backend)
        result["after"] = _report(after)
        result["after_output"] = after.stdout + after.stderr
        result["servers"].append(judge_servers())
        result["daemons"] = [p.pid for p in survivors(tok, 1.0)]
        yield result


def test_the_evaluations_shared_one_judge_server(probes):
    """Without this the probes below could pass because every evaluation had a server of its own."""
    assert [len(s) for s in probes["servers"]] == [1, 1, 1], probes["servers"]
    assert len({s[0] for s in probes["servers"]}) == 1


def test_files_left_by_workspace_code(probes):
    assert any(v is True for v in probes["planted"].values())  # its own directories took the file
    assert probes["after"]["files"] == probes["before"]["files"] == []
    assert not any(probes["token"] in name for name in probes["after"]["cwd"])


def test_environment_and_modules(probes):
    assert probes["after"]["env"] == probes["before"]["env"] == []
    assert probes["after"]["modules"] == probes["before"]["modules"] == []


def test_a_daemon_and_an_audit_hook(probes):
    tok = probes["token"]
    assert f"{tok} audit" in probes["planted_output"]  # the workspace's output is kept with the evaluation's
    assert tok not in probes["after_output"]
    assert probes["daemons"] == [], "the workspace's daemon outlived its evaluation"


# -- the server itself ----------------------------------------------------------------------------------------------


def test_a_killed_server_is_replaced(tmp_path, monkeypatch):
    """The server may die (a user's kill, the out-of-memory killer): the next evaluation starts a new one and scores
    as before; Sandbox.close_all stops it."""
    monkeypatch.delenv(zyg.TRUSTED_SERVER_DISABLE_VAR, raising=False)
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    tests = {"test_ok.py": "import mod\n\ndef test_ok():\n    assert mod.VALUE == 1\n"}
    first = evaluate(tmp_path / "a", {"mod.py": "VALUE = 1\n"}, tests, "local")
    (old,) = judge_servers()
    psutil.Process(old[1]).kill()
    psutil.Process(old[1]).wait(timeout=10)
    again = evaluate(tmp_path / "b", {"mod.py": "VALUE = 1\n"}, tests, "local")
    assert (first.passed, again.passed, again.failed, again.errors) == (1, 1, 0, 0)
    (new,) = judge_servers()
    assert new != old
    Sandbox.close_all()  # a sweep's worker, at its end: the server stops with the other fork servers
    assert judge_servers(zyg.TRUSTED_MODES) == [] and not psutil.pid_exists(new[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_server_and_a_fresh_interpreter_agree(tmp_path, monkeypatch, backend):
    """The same evaluation, its judge forked from the server and in a fresh interpreter: the same verdicts, the
    same tampering seen, the same report."""
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
            assert sys.flags.safe_path and sys.flags.no_user_site and sys.argv[0].endswith("/_judge_session.py")

        class TestCase(unittest.TestCase):
            def test_unittest(self):
                self.assertEqual(helpers.double(1), 2)

        @pytest.mark.parametrize("x", [1, 2])
        def test_param(x):
            assert x == 1
    ''')
    helper = textwrap.dedent('''
        import _pytest.reports as r
        def double(x):
            return 2 * x
    ''')
    runs = {}
    for use in (True, False):
        monkeypatch.setattr(zyg, "USE_TRUSTED_SERVER", use)
        run = evaluate(tmp_path / str(use), {"helpers.py": helper}, {"test_suite.py": suite}, backend)
        runs[use] = (run.passed, run.failed, run.errors, run.skipped, run.cases, run.failed_tests, run.tampering,
                     run.returncode, re.sub(r"0x[0-9a-f]+|\d+\.\d+s", "", run.stdout).replace(str(tmp_path / str(use)), ""))
    assert runs[True] == runs[False]
    assert runs[True][:3] == (4, 2, 0) and runs[True][6] == (("imports _pytest.reports", "helpers.py:2"),)


def test_a_suite_that_names_a_library_is_forked_from_the_mode_that_has_it(tmp_path, monkeypatch):
    """eda's hidden suite reads its data with pandas (``Task.hidden_imports``): its judge is forked from the
    server's "trusted-libraries" mode, which has pandas loaded; a judge that names none starts without it."""
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    monkeypatch.setattr(zyg, "USE_TRUSTED_SERVER", True)
    suite = "import sys\nLOADED = 'pandas' in sys.modules\n\ndef test_loaded():\n    assert LOADED\n"
    named = evaluate(tmp_path / "a", {}, {"test_suite.py": suite}, "local", imports=("pandas",))
    unnamed = evaluate(tmp_path / "b", {}, {"test_suite.py": suite}, "local")
    assert (named.passed, unnamed.failed) == (1, 1)
    assert {"trusted", zyg.TRUSTED_LIBRARIES_MODE} <= {mode for mode, _pid in judge_servers(zyg.TRUSTED_MODES)}
