"""Warm bubblewrap sandboxes: a workspace's test runs forked inside one sandbox kept for it, reset before each
run. What a run sees there is what a sandbox of its own shows; nothing of an earlier run survives; timeouts,
process limits and a dead sandbox are handled; hidden suites and concurrent runs never use one."""

from __future__ import annotations

import json
import os
import re
import signal
import warnings
from pathlib import Path

import pytest
from sandbox_helpers import needs_bwrap, survivors, token

import latte_lab as ll
from latte_lab.sandbox import SandboxLimits, run_pytest, warm
from latte_lab.workspace import Workspace

pytestmark = needs_bwrap

PROBE = '''
import json, os, subprocess, sys

def _readable(path):
    try:
        open(path, "rb").read(1)
        return True
    except OSError:
        return False

def test_probe():
    status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)
    seen = {
        "init": [os.path.basename(a) for a in open("/proc/1/cmdline", "rb").read().decode().split("\\0")
                 if a.endswith(".py")][0],
        "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
        "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
        "files": sorted(os.listdir(".")), "data": open("data.txt").read(),
        "cap_eff": status["CapEff"].strip(), "no_new_privs": status["NoNewPrivs"].strip(),
        "init_environ": _readable("/proc/1/environ"), "init_mem": _readable("/proc/1/mem"),
        "key": [k for k in os.environ if "KEY" in k],
        "sysv_shm": len(open("/proc/sysvipc/shm").read().splitlines()) - 1,
        "loopback": open("/sys/class/net/lo/operstate").read() if os.path.exists("/sys/class/net/lo") else None,
    }
    print("SEEN " + json.dumps(seen))
    open("seen.json", "w").write(json.dumps(seen))
    # traces for the next run to find, if the sandbox kept them
    open("/tmp/left_by_run.txt", "w").write("x")
    open("/dev/shm/left_by_run", "w").write("x")
    os.makedirs("/tmp/locked/inner", exist_ok=True)
    os.chmod("/tmp/locked", 0)
    open("made_by_run.txt", "w").write("x")
    import ctypes
    ctypes.CDLL(None).shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600: outlives the process
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # TOKEN"], start_new_session=True)
'''


@pytest.fixture(autouse=True)
def _own_sandboxes():
    warm.shutdown()
    yield
    warm.shutdown()


def probe_workspace(path, tok: str) -> Workspace:
    ws = Workspace(path, memo=False, sandbox="bwrap")
    ws.setup_file("test_probe.py", PROBE.replace("TOKEN", tok))
    ws.setup_file("data.txt", "first\n")
    return ws


def seen(ws: Workspace) -> dict:
    run = ws.run_tests(["-s", "test_probe.py"], timeout=60)
    assert run.passed == 1, run.stdout + run.stderr
    return json.loads(ws.read("seen.json"))


def live_sandboxes() -> list[warm.WarmSandbox]:
    return [s for s in warm._SANDBOXES.values() if s.alive()]


def test_runs_share_one_sandbox_that_keeps_nothing_of_an_earlier_run(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-reach-any-run")
    tok = token()
    ws = probe_workspace(tmp_path / "ws", tok)
    first = seen(ws)
    (sandbox,) = live_sandboxes()
    assert not survivors(tok)  # the process the run left is gone once the run has ended
    assert (ws.root / "made_by_run.txt").exists()  # the run's files came back to the host
    (ws.root / "made_by_run.txt").unlink()
    ws.setup_file("data.txt", "second\n")
    second = seen(ws)
    assert live_sandboxes() == [sandbox] and sandbox.proc.poll() is None  # the same sandbox, still up
    assert first["init"] == second["init"] == "_sandbox_server.py"
    assert not {"left_by_run.txt", "locked"} & set(second["tmp"]) and second["tmp"] == first["tmp"]
    assert second["shm"] == first["shm"] == [] and second["sysv_shm"] == first["sysv_shm"] == 0
    assert second["processes"] == first["processes"]  # the init and the run: the sleeper left by run 1 is gone
    assert "made_by_run.txt" not in second["files"] and second["data"] == "second\n"  # the host's files, anew
    assert second["cap_eff"] == "0000000000000000" and second["no_new_privs"] == "1"
    assert not second["init_environ"] and not second["init_mem"]  # the init cannot be read
    assert second["key"] == []

    monkeypatch.setattr(warm, "USE_WARM", False)  # a sandbox of its own shows the run the same
    own = seen(ws)
    assert own["init"] == "child.py"
    for field in ("shm", "sysv_shm", "cap_eff", "no_new_privs", "key", "loopback", "processes"):
        assert own[field] == second[field], field
    # A sandbox's /tmp is its own, but shows the directories leading to its workspace when that is under
    # /tmp (as here); the warm run's workspace is the process's stage, under /var/tmp.
    assert [name for name in own["tmp"] if not str(ws.root).startswith(f"/tmp/{name}/")] == second["tmp"]


def test_reports_are_word_for_word_those_of_a_sandbox_of_its_own(tmp_path, monkeypatch):
    task = ll.tasks.get("debug")
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="bwrap")
    task.setup(ws)
    warm_run = ws.run_tests()
    assert live_sandboxes()
    monkeypatch.setattr(warm, "USE_WARM", False)
    own_run = ws.run_tests()

    def text(run):
        stdout = re.sub(r"0x[0-9a-f]+", "0x?", re.sub(r"in \d+\.\d+s", "in Ns", run.stdout))  # addresses, time
        return stdout, run.stderr, run.cases, run.returncode

    assert text(warm_run) == text(own_run)
    assert warm_run.failed > 0


def test_a_timeout_stops_the_run_hands_back_its_files_and_the_sandbox_serves_the_next(tmp_path):
    tok = token()
    ws = probe_workspace(tmp_path / "ws", tok)
    seen(ws)
    (sandbox,) = live_sandboxes()
    ws.setup_file("test_slow.py", (
        "import subprocess, sys, time\n"
        "def test_slow():\n"
        "    open('partial.txt', 'w').write('so far\\n')\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # {tok}'], start_new_session=True)\n"
        "    time.sleep(100)\n"
    ))
    run = ws.run_tests(["test_slow.py"], timeout=1.5)
    assert run.timed_out and ws.read("partial.txt") == "so far\n"
    assert not survivors(tok)
    assert seen(ws)["init"] == "_sandbox_server.py" and live_sandboxes() == [sandbox]


def test_a_fork_bomb_in_a_test_is_stopped_and_the_next_run_is_clean(tmp_path):
    tok = token()
    ws = probe_workspace(tmp_path / "ws", tok)
    ws.limits = SandboxLimits(max_processes=16)
    seen(ws)
    ws.setup_file("test_bomb.py", (
        "import subprocess, sys, time\n"
        "def test_bomb():\n"
        "    for _ in range(64):\n"
        f"        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # {tok}'])\n"
        "    time.sleep(60)\n"
    ))
    run = ws.run_tests(["test_bomb.py"], timeout=60)
    assert any("process limit exceeded" in note for note in run.notes), run.notes
    assert not survivors(tok)
    after = seen(ws)
    assert after["init"] == "_sandbox_server.py"


def test_a_dead_sandbox_is_replaced_and_its_run_says_so(tmp_path):
    tok = token()
    ws = probe_workspace(tmp_path / "ws", tok)
    seen(ws)
    (sandbox,) = live_sandboxes()
    os.kill(sandbox.proc.pid, signal.SIGKILL)  # bwrap itself: the init's control socket ends with it
    sandbox.proc.wait()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = seen(ws)
    assert not [w for w in caught if "sandbox" in str(w.message)]  # one that died between runs: replaced, no word
    assert again["init"] == "_sandbox_server.py"
    (replacement,) = live_sandboxes()
    assert replacement is not sandbox

    ws.setup_file("test_kill.py", "import os, signal\ndef test_kill():\n    os.kill(1, signal.SIGKILL)\n    os.kill(os.getppid(), signal.SIGKILL)\n")
    run = ws.run_tests(["test_kill.py"], timeout=30)  # nothing in the sandbox can kill its init
    assert run.passed == 1 and live_sandboxes() == [replacement]


def test_hidden_suites_run_in_the_processs_staging_sandbox_and_concurrent_runs_in_their_own(tmp_path):
    from latte_lab.sandbox import stage as stage_mod

    tok = token()
    ws = probe_workspace(tmp_path / "ws", tok)

    def hidden_init() -> str:
        run = run_pytest(ws.root, ["-s", "test_hidden.py"], sandbox="bwrap", timeout=60,
                         extra_files={"test_hidden.py": PROBE.replace("TOKEN", tok)})
        assert run.passed == 1, run.stdout
        return json.loads(run.stdout.split("SEEN ", 1)[1].splitlines()[0])["init"]

    assert hidden_init() == hidden_init() == "_sandbox_server.py"
    (stage,) = live_sandboxes()  # one for every hidden run of the process, none for the workspace
    assert stage.root != ws.root.resolve()
    assert list(stage.root.iterdir()) == []  # emptied after each run: a hidden suite is not left on disk
    assert not (ws.root / "test_hidden.py").exists() and not (ws.root / "seen.json").exists()

    assert seen(ws)["init"] == "_sandbox_server.py"
    (mine,) = [s for s in live_sandboxes() if s is not stage]  # the workspaces' own runs: apart from it
    with mine.busy:  # another workspace's run is under way
        assert seen(ws)["init"] == "child.py"
    with stage_mod.EVAL_STAGE.lock:  # another hidden run is under way: a temporary copy, a sandbox of its own
        assert hidden_init() == "child.py"
    assert seen(ws)["init"] == hidden_init() == "_sandbox_server.py" and len(live_sandboxes()) == 2


def test_a_sandbox_that_cannot_start_leaves_runs_on_their_own_sandboxes(tmp_path, monkeypatch):
    monkeypatch.setitem(warm._STATE, "start_failures", 0)
    monkeypatch.setitem(warm._STATE, "warned", False)
    monkeypatch.setattr(warm.WarmSandbox, "_argv", lambda self, fd: ["/bin/false"])
    ws = probe_workspace(tmp_path / "ws", token())
    with pytest.warns(RuntimeWarning, match="warm bubblewrap sandbox unavailable, test runs use a sandbox each"):
        assert seen(ws)["init"] == "child.py"
    for _ in range(warm.MAX_START_FAILURES):
        seen(ws)
    assert not warm.warm_enabled()  # given up after MAX_START_FAILURES starts


CWD_TEST = """
import os

def test_where():
    print("CWD", os.getcwd())
    assert os.path.exists("mine.txt") and not os.path.exists("theirs.txt")
    open("made.txt", "w").write(os.path.basename(os.getcwd()))
    assert False, os.getcwd()
"""


def test_workspaces_take_turns_in_one_staged_sandbox_each_seeing_and_shown_only_its_own(tmp_path):
    from latte_lab.sandbox import stage as stage_mod

    runs = {}
    for name in ("a", "b"):
        ws = Workspace(tmp_path / name, memo=False, sandbox="bwrap")
        ws.setup_file("test_where.py", CWD_TEST)
        ws.setup_file("mine.txt", name)
        runs[name] = (ws, ws.run_tests(["-s"], timeout=60))
        (tmp_path / name / "mine.txt").rename(tmp_path / name / "theirs.txt")  # the next one must not see it
    (stage,) = live_sandboxes()  # both workspaces' runs were forked in it, in turn
    assert stage.root == Path(stage_mod.PUBLIC_STAGE.path) / "workspace" and not str(stage.root).startswith("/tmp/")
    assert list(stage.root.iterdir()) == []  # emptied after each run
    for ws, run in runs.values():
        assert run.failed == 1 and run.failed_tests == ("test_where.py::test_where",), run.stdout
        root = str(ws.root.resolve())
        assert f"CWD {root}\n" in run.stdout and f"AssertionError: {root}" in run.stdout  # its own path
        assert str(stage.root) not in run.stdout + run.stderr
        assert ws.read("made.txt") == "workspace"  # the run's files came back to its workspace
        assert not (ws.root / ".latte_lab-junit.xml").exists()


def test_a_stage_that_cannot_take_the_files_leaves_the_run_to_its_workspace(tmp_path, monkeypatch):
    from latte_lab.sandbox import stage as stage_mod

    ws = probe_workspace(tmp_path / "ws", token())
    real = stage_mod.mirror

    def full_disk(src, dst, names=None, **options):
        if "latte_lab-stage-" in str(dst):
            raise OSError(28, "No space left on device")
        return real(src, dst, names, **options)

    monkeypatch.setattr(stage_mod, "mirror", full_disk)
    assert seen(ws)["init"] == "_sandbox_server.py"  # in a sandbox kept for the workspace
    (own,) = live_sandboxes()
    assert own.root == ws.root.resolve() and (ws.root / "made_by_run.txt").exists()


def test_what_cannot_be_handed_on_to_the_workspace_is_said_and_the_workspace_kept(tmp_path, monkeypatch):
    from latte_lab.sandbox import stage as stage_mod

    ws = probe_workspace(tmp_path / "ws", token())
    before = sorted(p.name for p in ws.root.iterdir())
    real = stage_mod.mirror

    def full_disk(src, dst, names=None, **options):
        if "latte_lab-stage-" in str(src) and Path(dst) == ws.root.resolve():
            raise OSError(28, "No space left on device")
        return real(src, dst, names, **options)

    monkeypatch.setattr(stage_mod, "mirror", full_disk)
    run = ws.run_tests(["-s", "test_probe.py"], timeout=60)
    assert run.passed == 1
    assert any(n.startswith("the workspace could not be written back: [Errno 28]") for n in run.notes), run.notes
    assert sorted(p.name for p in ws.root.iterdir()) == before  # nothing of the run's, nothing half-written


def test_a_workspace_holding_a_fifo_runs_in_its_own_directory(tmp_path):
    ws = probe_workspace(tmp_path / "ws", token())
    os.mkfifo(ws.root / "pipe")  # a copy of it would block: the stage is not used
    ws.run_tests(["-s", "test_probe.py"], timeout=60)
    (own,) = live_sandboxes()
    assert own.root == ws.root.resolve()


def test_sandboxes_are_bounded_and_a_trial_leaves_only_the_staged_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(warm, "MAX_SANDBOXES", 1)
    ws = probe_workspace(tmp_path / "a", token())
    seen(ws)
    (old,) = live_sandboxes()
    run = run_pytest(ws.root, ["-s", "test_hidden.py"], sandbox="bwrap", timeout=60,
                     extra_files={"test_hidden.py": PROBE.replace("TOKEN", token())})
    assert run.passed == 1, run.stdout
    assert len(live_sandboxes()) == 1 and old.proc.poll() is not None  # the least recently used one stopped

    monkeypatch.setattr(warm, "MAX_SANDBOXES", 4)
    warm.shutdown()
    result = ll.run_trial(ll.TrialConfig(task="debug", seed=0, max_rounds=3, sandbox="bwrap"), runs_dir=tmp_path / "runs")
    # the trial's test runs took the process's staged sandbox, kept for the next trial; its hidden evaluation's
    # workspace process took the process's evaluation stage's script sandbox (its judge runs outside every
    # sandbox), kept too; none was started for its workspace, whose own (had a run needed one) is stopped at its end
    assert result.rounds >= 1
    assert sorted((s.root.name, s.mode) for s in live_sandboxes()) == [("repo", "script"), ("workspace", "pytest")]
    assert all(str(s.root.parent.name).startswith("latte_lab-") for s in live_sandboxes())


def test_a_workspace_the_run_made_unreadable_is_not_handed_back_and_the_run_says_so(tmp_path):
    ws = probe_workspace(tmp_path / "ws", token())
    seen(ws)
    ws.setup_file("test_lock.py", "import os\ndef test_lock():\n    os.makedirs('shut/in')\n    os.chmod('shut', 0)\n")
    run = ws.run_tests(["test_lock.py"], timeout=30)
    assert run.returncode == 0 and "1 passed" in run.stdout  # pytest's own outcome is kept
    assert run.errors == 1  # but its report stayed in the sandbox with the rest
    assert any("could not hand back the workspace" in note for note in run.notes), run.notes
    assert not (ws.root / "shut").exists()  # nothing half-written on the host
    assert seen(ws)["init"] == "_sandbox_server.py"  # the next run's reset removed it inside


@pytest.fixture
def scripts(tmp_path) -> Workspace:
    from test_sandbox_scripts import corpus_workspace

    return corpus_workspace(tmp_path / "scripts", "bwrap")


def _script_names() -> list[str]:
    from test_sandbox_scripts import SCRIPTS

    return [p for p in SCRIPTS if p.endswith(".py") and p != "sub/helper.py"]


@pytest.mark.parametrize("script", _script_names())
def test_a_script_in_a_warm_sandbox_runs_as_in_a_sandbox_of_its_own(scripts, monkeypatch, script):
    from test_sandbox_scripts import _normal

    warm_run = scripts.run_script(script)
    assert [s.mode for s in live_sandboxes()] == ["script"]
    monkeypatch.setattr(warm, "USE_WARM", False)
    own = scripts.run_script(script)
    assert (warm_run.returncode, _normal(warm_run.stdout), _normal(warm_run.stderr)) == \
        (own.returncode, _normal(own.stdout), _normal(own.stderr))


def test_scripts_and_tests_have_sandboxes_apart_and_scripts_keep_the_limits(tmp_path):
    from test_sandbox_scripts import LIMITS, assert_scripts_keep_the_limits

    ws = Workspace(tmp_path / "ws", memo=False, sandbox="bwrap", limits=LIMITS)
    ws.setup_file("test_x.py", "def test_x():\n    assert True\n")
    ws.setup_file("modules.py", "import sys\nprint(sorted(m for m in sys.modules if 'pytest' in m))\n")
    assert ws.run_tests(["test_x.py"], timeout=30).passed == 1
    assert ws.run_script("modules.py").stdout == "[]\n"  # never forked from the process that imported pytest
    assert sorted(s.mode for s in live_sandboxes()) == ["pytest", "script"]
    assert_scripts_keep_the_limits(ws)
    assert ws.run_script("modules.py").stdout == "[]\n" and len(live_sandboxes()) == 2


def test_what_bwrap_binds_under_tmp_survives_the_reset(tmp_path, monkeypatch):
    from latte_lab.sandbox import bwrap

    installed = tmp_path / "clone" / ".venv" / "lib"  # a clone under /tmp, its venv bound read-only inside /tmp
    installed.mkdir(parents=True)
    (installed / "module.py").write_text("VALUE = 1\n")
    real = bwrap.python_dirs
    monkeypatch.setattr(bwrap, "python_dirs", lambda: [*real(), str(tmp_path / "clone" / ".venv")])
    assert str(tmp_path).startswith("/tmp/")  # and so is the workspace: a tmpfs mounted inside the sandbox's /tmp
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="bwrap")
    ws.setup_file("test_sees.py", f"def test_sees():\n    assert open({str(installed / 'module.py')!r}).read() == 'VALUE = 1\\n'\n")
    for _ in range(3):
        assert ws.run_tests(["test_sees.py"], timeout=30).passed == 1
    assert (installed / "module.py").exists() and len(live_sandboxes()) == 1


def test_a_warm_sandbox_ends_with_the_process_that_started_it(tmp_path):
    import subprocess
    import sys

    tok = token()
    root = tmp_path / tok  # bwrap's command line names the workspace: every process of the sandbox is found by it
    code = (
        "import sys, time\n"
        "from latte_lab.workspace import Workspace\n"
        f"ws = Workspace({str(root)!r}, memo=False, sandbox='bwrap')\n"
        "ws.setup_file('test_x.py', 'def test_x():\\n    pass\\n')\n"
        "ws.setup_file('x.py', 'pass\\n')\n"
        "assert ws.run_tests(['test_x.py'], timeout=30).passed == 1 and ws.run_script('x.py').ok\n"
        "from latte_lab.sandbox.stage import PUBLIC_STAGE\n"
        "print('up', PUBLIC_STAGE.path, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        up, stage = proc.stdout.readline().split()
        # the workspace's runs happened in the process's public stage: bwrap's command line names that directory
        assert up == "up" and tok not in stage
        assert len(survivors(stage, seconds=0)) >= 4, stage  # both sandboxes up (tests and scripts: bwrap, its init, ...)
    finally:
        proc.kill()
        proc.wait()
    assert not survivors(stage)  # end of file on their control sockets ended them, and their namespaces


def test_full_disks_are_said_and_emptied_for_the_next_run(tmp_path):
    ws = Workspace(tmp_path / "ws", memo=False, sandbox="bwrap",
                   limits=SandboxLimits(disk_bytes=2 * 2**20, tmp_bytes=2**20))
    ws.setup_file("test_fill.py", (
        "def test_fill_tmp():\n"
        "    try:\n"
        "        open('/tmp/big', 'wb').write(b'x' * 2**21)\n"
        "    except OSError:\n"
        "        pass\n"
    ))
    ws.setup_file("test_tmp_is_empty.py", "import os\ndef test_empty():\n    assert 'big' not in os.listdir('/tmp')\n")
    full = ws.run_tests(["test_fill.py"], timeout=30)
    assert any("the temporary directory holds at most 1 MiB" in n for n in full.notes), full.notes
    assert ws.run_tests(["test_tmp_is_empty.py"], timeout=30).passed == 1
    ws.setup_file("big.bin", b"x" * (3 * 2**20))  # more than the workspace's tmpfs holds
    over = ws.run_tests(["test_tmp_is_empty.py"], timeout=30)
    assert any("did not fit the sandbox's disk limit" in n for n in over.notes), over.notes
    assert (ws.root / "big.bin").stat().st_size == 3 * 2**20  # the host's workspace is left as it was
    (ws.root / "big.bin").unlink()
    assert ws.run_tests(["test_tmp_is_empty.py"], timeout=30).passed == 1 and len(live_sandboxes()) == 1


AGE = '''
import os
def test_age():
    ticks = int(open("/proc/self/stat").read().rpartition(")")[2].split()[19])
    age = float(open("/proc/uptime").read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")
    open("age.txt", "w").write(f"{age:.3f}")
'''


def test_the_next_runs_process_is_forked_ahead_and_a_dead_one_is_replaced(tmp_path, monkeypatch):
    import time

    import psutil

    from latte_lab.sandbox import zygote

    def age_of_the_run(ws: Workspace, after: float = 1.0) -> float:
        time.sleep(after)  # the host at work between two runs
        assert ws.run_tests(["test_age.py"], timeout=30).passed == 1
        return float(ws.read("age.txt"))

    for policy in ("never", "always"):
        monkeypatch.setattr(zygote, "SPARES", policy)
        ws = Workspace(tmp_path / policy, memo=False, sandbox="bwrap")
        ws.setup_file("test_age.py", AGE)
        age_of_the_run(ws, after=0)  # starts the sandbox
        age = age_of_the_run(ws)
        if policy == "never":
            assert age < 0.9, age  # forked at the request
        else:
            assert age >= 0.9, age  # forked ahead, right after the last run
            sandbox = list(warm._SANDBOXES.values())[-1]  # the one just used (least recently used first)
            (init,) = psutil.Process(sandbox.proc.pid).children()
            deadline = time.monotonic() + 5
            while not init.children() and time.monotonic() < deadline:
                time.sleep(0.01)  # the init forks the spare after it has sent the run's report, which the host
                # may have read and acted on already
            (spare,) = init.children()
            spare.kill()  # a spare that died: the run is forked at its request instead
            deadline = time.monotonic() + 5
            while spare.is_running() and spare.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
                time.sleep(0.01)  # (the init reaps it at the next run)
            assert age_of_the_run(ws) < 0.9
