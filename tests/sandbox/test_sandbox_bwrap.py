"""The bubblewrap backend: choosing it, what a run can see and do, the workspace it hands back, and the
same results as the local backend for every task suite and for a whole trial."""

from __future__ import annotations

import os
import socket
import sys
import warnings

import psutil
import pytest
from sandbox_helpers import BWRAP_WORKS, needs_bwrap

import latte_lab as ll
from latte_lab.errors import ConfigError
from latte_lab.sandbox import SandboxLimits, backends, bwrap, memo_key
from latte_lab.sandbox import run as runmod
from latte_lab.workspace import Workspace


@pytest.fixture
def no_bwrap(monkeypatch):
    """This machine as one where bubblewrap cannot run."""
    monkeypatch.setattr(bwrap, "probe", lambda: (False, "the bwrap program is not installed", ()))
    monkeypatch.setattr(backends, "_CHOICE", {})
    monkeypatch.delenv(backends.SANDBOX_VAR, raising=False)


def test_choice_of_backend(no_bwrap, monkeypatch, tmp_path):
    with pytest.raises(ConfigError, match="unknown sandbox 'docker'; use one of auto, bwrap, local"):
        backends.resolve_sandbox("docker")
    with pytest.raises(ConfigError, match="sandbox='bwrap' cannot run here: the bwrap program is not installed; "
                                          "install bubblewrap or use sandbox='local'"):
        Workspace(tmp_path / "ws", sandbox="bwrap")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [backends.resolve_sandbox("auto") for _ in range(3)] == ["local"] * 3
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1 and "without isolation: the bwrap program is not installed" in said[0]  # said once
    monkeypatch.setenv(backends.SANDBOX_VAR, "local")
    assert Workspace(tmp_path / "ws2").backend == "local"
    with pytest.raises(ConfigError, match="invalid TrialConfig: sandbox"):
        ll.TrialConfig(task="debug", sandbox="docker")
    assert ll.TrialConfig(task="debug", sandbox="local").trial_id == ll.TrialConfig(task="debug").trial_id


@needs_bwrap
def test_auto_is_bwrap_where_it_works(monkeypatch):
    monkeypatch.delenv(backends.SANDBOX_VAR, raising=False)
    assert backends.resolve_sandbox("auto") == "bwrap" and backends.resolve_sandbox("local") == "local"


VIEW = """
import json, os
def can_write(path):
    try:
        open(path, 'w').close()
        return True
    except OSError:
        return False
status = dict(line.split(':\\t', 1) for line in open('/proc/self/status').read().splitlines() if ':\\t' in line)
print(json.dumps({
    'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),
    'root': sorted(os.listdir('/')),
    'secret': os.path.exists(SECRET),
    'shadow': os.path.exists('/etc/shadow'),
    'write_usr': can_write('/usr/x'), 'write_etc': can_write('/etc/x'), 'write_here': can_write('here.txt'),
    'cap_eff': status['CapEff'].strip(), 'no_new_privs': status['NoNewPrivs'].strip(),
    'sys': os.path.exists('/sys/kernel'),
}))
"""


@needs_bwrap
def test_what_a_run_sees(tmp_path):
    import json

    secret = tmp_path / ".env"  # beside the workspace: a key file an agent must not read
    secret.write_text("OPENAI_API_KEY=sk-should-stay-outside\n")
    ws = Workspace(tmp_path / "ws", sandbox="bwrap")
    ws.setup_file("view.py", VIEW.replace("SECRET", repr(str(secret))))
    run = ws.run_script("view.py", timeout=60)
    assert run.ok, run.stderr
    seen = json.loads(run.stdout)
    assert seen["pids"][0] == 1 and len(seen["pids"]) <= 3  # the init, the script (and nothing of the host)
    assert not seen["secret"] and not seen["shadow"] and not seen["sys"]
    assert not seen["write_usr"] and not seen["write_etc"] and seen["write_here"]
    assert seen["cap_eff"] == "0000000000000000" and seen["no_new_privs"] == "1"
    assert (ws.root / "here.txt").exists()


@needs_bwrap
def test_the_workspace_comes_back_as_the_run_left_it(tmp_path):
    ws = Workspace(tmp_path / "ws", sandbox="bwrap")
    ws.setup_file("keep.txt", "unchanged\n")
    ws.setup_file("edit.txt", "before\n")
    ws.setup_file("gone.txt", "to be deleted\n")
    ws.setup_file("pkg/old.py", "x = 1\n")
    keep_mtime = (ws.root / "keep.txt").stat().st_mtime_ns
    ws.setup_file("change.py", (
        "import os, shutil\n"
        "open('edit.txt', 'w').write('after\\n')\n"
        "os.remove('gone.txt')\n"
        "shutil.rmtree('pkg')\n"
        "os.makedirs('new/deep')\n"
        "open('new/deep/made.txt', 'w').write('new\\n')\n"
        "os.symlink('new/deep/made.txt', 'inside_link')\n"
        "os.symlink('/etc/passwd', 'outside_link')\n"
    ))
    run = ws.run_script("change.py", timeout=60)
    assert run.ok, run.stderr
    assert ws.read("edit.txt") == "after\n" and ws.read("new/deep/made.txt") == "new\n"
    assert not (ws.root / "gone.txt").exists() and not (ws.root / "pkg").exists()
    assert (ws.root / "inside_link").is_symlink() and ws.read("inside_link") == "new\n"
    assert not (ws.root / "outside_link").exists()  # a link out of the workspace is not handed back
    assert (ws.root / "keep.txt").stat().st_mtime_ns == keep_mtime  # unchanged files are not rewritten


@needs_bwrap
def test_a_timed_out_run_still_hands_back_its_files(tmp_path):
    ws = Workspace(tmp_path / "ws", sandbox="bwrap")
    ws.setup_file("slow.py", "open('partial.txt', 'w').write('so far\\n')\nimport time\ntime.sleep(100)\n")
    run = ws.run_script("slow.py", timeout=2)
    assert run.timed_out and ws.read("partial.txt") == "so far\n"


@needs_bwrap
def test_protected_files_are_restored_after_a_bwrap_run(tmp_path):
    ws = Workspace(tmp_path / "ws", sandbox="bwrap")
    ws.setup_file("test_suite.py", "def test_ok():\n    assert True\n")
    ws.protect("test_suite.py")
    ws.setup_file("vandal.py", "open('test_suite.py', 'w').write('broken(')\n")
    run = ws.run_script("vandal.py", timeout=60)
    assert any("restored: test_suite.py" in note for note in run.notes)
    assert ws.run_tests(("test_suite.py",), timeout=60).passed == 1


LOOPBACK = """
import socket, threading
server = socket.socket()
server.bind(('127.0.0.1', 0))
server.listen()
threading.Thread(target=lambda: server.accept(), daemon=True).start()
client = socket.socket()
client.settimeout(3)
try:
    client.connect(server.getsockname())
    print('own server reached')
except OSError as exc:
    print('own server unreachable:', exc.strerror)
try:
    socket.create_connection(('127.0.0.1', HOST_PORT), timeout=3)
    print('host reached')
except OSError as exc:
    print('host unreachable')
"""


@needs_bwrap
def test_loopback_switch(tmp_path):
    with socket.socket() as host:
        host.bind(("127.0.0.1", 0))
        host.listen()
        script = LOOPBACK.replace("HOST_PORT", str(host.getsockname()[1]))
        closed = Workspace(tmp_path / "closed", sandbox="bwrap")
        closed.setup_file("net.py", script)
        assert closed.run_script("net.py", timeout=30).stdout.splitlines() == [
            "own server unreachable: Network is unreachable", "host unreachable"]
        opened = Workspace(tmp_path / "open", sandbox="bwrap", limits=SandboxLimits(loopback=True))
        opened.setup_file("net.py", script)
        assert opened.run_script("net.py", timeout=30).stdout.splitlines() == ["own server reached", "host unreachable"]


def test_memo_is_keyed_by_backend(tmp_path):
    ws = Workspace(tmp_path / "ws", sandbox="local")
    ws.setup_file("test_a.py", "def test_a():\n    pass\n")
    assert memo_key(ws.root, (), ws.limits, "local") != memo_key(ws.root, (), ws.limits, "bwrap")


@needs_bwrap
@pytest.mark.parametrize("name", ll.tasks.names())
def test_task_suites_score_the_same_on_both_backends(name, tmp_path):
    task = ll.tasks.get(name)
    results = {}
    for backend in ("local", "bwrap"):
        for state in ("start", "reference"):
            ws = Workspace(tmp_path / backend / state, sandbox=backend)
            task.setup(ws)
            if state == "reference":
                for path, text in task.reference_solution().items():
                    ws.setup_file(path, text)
            public, hidden = ws.run_tests(), task.evaluate(ws)
            results[backend, state] = ((public.passed, public.failed, public.errors, public.failed_tests),
                                       (hidden.passed, hidden.failed, hidden.errors, hidden.per_class))
    for state in ("start", "reference"):
        assert results["bwrap", state] == results["local", state], state
    assert results["bwrap", "reference"][1][0] > results["bwrap", "start"][1][0]


@needs_bwrap
def test_a_trial_runs_the_same_in_bubblewrap(tmp_path):
    runs = {backend: ll.run_trial(ll.TrialConfig(task="debug", seed=1, max_rounds=8, sandbox=backend),
                                  runs_dir=tmp_path / backend)
            for backend in ("local", "bwrap")}
    local, boxed = runs["local"], runs["bwrap"]
    assert boxed.success == local.success and boxed.accuracy == local.accuracy
    assert list(boxed.events["type"]) == list(local.events["type"])
    assert boxed.rounds == local.rounds and boxed.run_dir != local.run_dir


def test_bwrap_availability_is_probed_once():
    assert bwrap.probe() is bwrap.probe()
    assert bwrap.probe()[0] is BWRAP_WORKS


@needs_bwrap
def test_a_run_in_a_throwaway_copy_hands_back_only_what_was_asked(tmp_path):
    from latte_lab.sandbox import RunRequest, run_sandboxed

    (tmp_path / "keep.txt").write_text("mine\n")
    script = "open('report.txt', 'w').write('r')\nopen('other.txt', 'w').write('o')\nimport os\nos.remove('keep.txt')\n"
    (tmp_path / "s.py").write_text(script)
    run = run_sandboxed(RunRequest([sys.executable, "s.py"], tmp_path, timeout=60, export=["report.txt"]), sandbox="bwrap")
    assert run.ok, run.stderr
    assert (tmp_path / "report.txt").read_text() == "r" and (tmp_path / "keep.txt").exists()
    assert not (tmp_path / "other.txt").exists()


def test_a_bwrap_run_that_ended_skips_the_process_search(tmp_path, monkeypatch):
    if not bwrap.probe()[0]:
        pytest.skip("bubblewrap cannot run here")
    searches = []
    real = runmod.stop_sandbox
    monkeypatch.setattr(runmod, "stop_sandbox", lambda *a, **k: searches.append(a) or real(*a, **k))
    token = f"time.sleep(60.{os.getpid()})"
    code = (f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; {token}'], "
            "start_new_session=True); print('left one behind')")
    run = runmod.run_sandboxed([sys.executable, "-c", code], tmp_path, timeout=60, sandbox="bwrap")
    assert run.ok and "left one behind" in run.stdout
    # The namespace's init ended and bwrap exited: the kernel ended every process of the namespace.
    assert searches == []
    assert not [p for p in psutil.process_iter(["cmdline"]) if token in " ".join(p.info["cmdline"] or ())]


@needs_bwrap
def test_a_python_installation_under_tmp_is_bound_above_the_sandboxes_own_tmp(tmp_path, monkeypatch):
    # bwrap mounts in order: the sandbox's /tmp must come first, or a venv (or a clone) under /tmp is hidden
    venv = "/tmp/some-clone/.venv"
    monkeypatch.setattr(bwrap, "python_dirs", lambda: [venv])
    args = bwrap.command(tmp_path, SandboxLimits(), str(tmp_path / "child.py"), None)
    pairs = list(zip(args, args[1:]))
    tmp_at = pairs.index(("--tmpfs", "/tmp"))
    venv_at = pairs.index(("--ro-bind", venv))
    assert tmp_at < venv_at, args


@needs_bwrap
@pytest.mark.parametrize("warm_sandbox", [True, False], ids=["kept-sandbox", "one-off"])
def test_a_run_gets_the_hosts_font_cache_and_nothing_else_of_its_matplotlib_directory(tmp_path, monkeypatch, warm_sandbox):
    """matplotlib's font cache is copied into each run; anything else in the directory local runs share is not
    (a local run may leave files there, which every bwrap run would otherwise copy)."""
    from latte_lab.sandbox import warm

    if not warm_sandbox:
        monkeypatch.setenv(warm.WARM_DISABLE_VAR, "1")
    mpl = tmp_path / "mplconfig"
    mpl.mkdir()
    (mpl / "fontlist-v390.json").write_text('{"cached": true}')
    (mpl / "left-by-a-local-run.txt").write_text("x")
    monkeypatch.setattr(runmod, "host_mplconfig", lambda: str(mpl))
    ws = Workspace(tmp_path / "repo", sandbox="bwrap", memo=False)
    ws.setup_file("show.py", "import os\nprint(sorted(os.listdir(os.environ['MPLCONFIGDIR'])))\n")
    run = ws.run_script("show.py", timeout=60)
    assert run.ok, run.stderr
    assert run.stdout.strip() == "['fontlist-v390.json']"


def test_copying_a_cache_in_takes_what_it_can_and_never_fails_the_run(tmp_path):
    """The font cache is optional: a copy limited to a pattern copies the matching regular files it can and
    reports success even when the directory is gone (a failed copy of the workspace would void the run)."""
    from latte_lab.sandbox import _init_files

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "fontlist-v390.json").write_text("{}")
    (src / "fontlist-link.json").symlink_to(src / "fontlist-v390.json")
    (src / "other.txt").write_text("x")
    os.mkfifo(src / "fontlist-fifo.json")
    assert _init_files.copy_in(str(src), str(dst), bwrap.MPL_CACHE_FILES) is True
    assert sorted(os.listdir(dst)) == ["fontlist-v390.json"]
    assert _init_files.copy_in(str(tmp_path / "gone"), str(tmp_path / "dst2"), bwrap.MPL_CACHE_FILES) is True
