"""What a run may not take from the machine, on both backends and on each way a run starts (forked from a
server, or a fresh interpreter / a one-off sandbox): a process cap that holds as root (a pids cgroup), a
``/tmp`` and ``/dev/shm`` the run cannot leave files in, and a workspace whose special files and hard links
never hang or redirect a read or a write."""

from __future__ import annotations

import os
import socket
import stat
import sys

import pytest
from sandbox_helpers import BACKENDS, needs_bwrap, token

from latte_lab.errors import WorkspaceError
from latte_lab.sandbox import SandboxLimits, local, process, run_sandboxed, warm
from latte_lab.sandbox import run as runmod
from latte_lab.sandbox.probes import run_probe
from latte_lab.workspace import Workspace

CGROUP = process.pids_cgroup_base() is not None
needs_cgroup = pytest.mark.skipif(not CGROUP, reason="no pids cgroup can be made here")
needs_private_tmp = pytest.mark.skipif(not local.private_tmp_possible(), reason="needs root for a mount namespace")
# forked: from the local fork server / inside a kept bwrap sandbox; exec: a fresh interpreter / a one-off sandbox
STARTS = ["forked", "exec"]


@pytest.fixture(params=STARTS)
def start(request, monkeypatch):
    if request.param == "exec":
        monkeypatch.setenv("LATTE_LAB_NO_ZYGOTE", "1")
        monkeypatch.setenv("LATTE_LAB_NO_WARM_SANDBOX", "1")
    return request.param


# ---- the process cap ----------------------------------------------------------------------------------


@needs_cgroup
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fork_bomb_never_has_more_processes_alive_than_the_cap(backend, start):
    """11 levels of fork (2,048 processes uncapped); every process stays alive until none forks any more, so the
    count of processes it made is its peak. As root RLIMIT_NPROC does not apply: the run's pids cgroup holds."""
    result = run_probe("forkbomb", backend)
    peak = int(result.detail.split(" processes alive at once")[0])
    assert result.stopped and 1 < peak <= SandboxLimits().max_processes, result.detail
    assert "process limit exceeded: the run reached its process limit (128)" in result.detail
    assert result.workspace_ok
    base = process.pids_cgroup_base()
    mine = {f"{base}/{name}" for name in os.listdir(base) if name.startswith(f"{process.CGROUP_PREFIX}{os.getpid()}-")}
    assert mine == {sandbox.cgroup.path for sandbox in warm._SANDBOXES.values()}  # each run's own removed after it


@needs_cgroup
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_cap_counts_the_runs_own_processes_and_a_run_within_it_is_untouched(backend, start, tmp_path):
    ws = Workspace(tmp_path / "ws", sandbox=backend, limits=SandboxLimits(max_processes=4))
    ws.setup_file("spawn.py", (
        "import os, subprocess, sys\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']) for _ in range(3)]\n"
        "open('out.txt', 'w').write('three children\\n')\n"
        "try:\n"
        "    subprocess.Popen([sys.executable, '-c', 'pass'])\n"
        "    print('a fifth process')\n"
        "except OSError as exc:\n"
        "    print('refused:', exc.strerror)\n"
        "for kid in kids:\n    kid.kill()\n    kid.wait()\n"
    ))
    run = ws.run_script("spawn.py")
    assert run.ok and run.stdout == "refused: Resource temporarily unavailable\n", (run.stdout, run.stderr)
    assert ws.read("out.txt") == "three children\n"  # the workspace stays the run's to write
    assert "process limit exceeded: the run reached its process limit (4) and could not start more processes" \
        in run.notes
    ws.limits = SandboxLimits(max_processes=5)
    run = ws.run_script("spawn.py")
    assert run.ok and run.stdout == "a fifth process\n" and run.notes == ()


def test_without_a_cgroup_the_note_says_how_the_cap_holds(tmp_path, monkeypatch):
    """Where no pids cgroup can be made, RLIMIT_NPROC caps the processes (not for root: then the parent's
    count stops the run), and the note says which."""
    monkeypatch.setitem(process._PIDS_BASE, os.getpid(), None)
    stderr = "BlockingIOError: [Errno 11] Resource temporarily unavailable\n  in os.fork()\n"
    (note,) = runmod.limit_notes(stderr, 1, SandboxLimits(max_processes=8), 60, False)
    assert note == ("process limit exceeded: the run reached its process limit (8) and could not start more "
                    "processes (enforced by RLIMIT_NPROC: no pids cgroup can be made here)")
    tok = token()
    ws = Workspace(tmp_path / "ws", sandbox="local", limits=SandboxLimits(max_processes=4))
    ws.setup_file("spawn.py", (
        "import subprocess, sys, time\n"
        f"kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)  # {tok}']) for _ in range(8)]\n"
        "time.sleep(30)\n"
    ))
    run = ws.run_script("spawn.py", timeout=20)
    assert not run.ok and not run.timed_out
    if os.geteuid() == 0:
        assert run.notes[0].startswith("process limit exceeded: the script started more than 4 processes")
        assert "no pids cgroup can be made here and RLIMIT_NPROC does not bind root" in run.notes[0]
    else:
        assert any("enforced by RLIMIT_NPROC" in note for note in run.notes), run.notes


# ---- /tmp and /dev/shm --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_a_run_writes_to_tmp_or_dev_shm_stays_on_the_host(backend, start):
    if backend == "local" and not local.private_tmp_possible():
        pytest.skip("the local backend confines /tmp only as root")
    result = run_probe("tmp", backend)
    assert result.stopped and result.workspace_ok, result.detail
    assert "left on the host: nothing" in result.detail


@needs_private_tmp
def test_a_local_run_has_a_private_capped_tmp_and_still_sees_its_workspace(tmp_path, start):
    """The workspace (here under /tmp) and matplotlib's shared cache stay the host's; everything else under
    /tmp is the run's own, capped, and gone after it; tempfile's directory is the run's private HOME."""
    tok = token()
    host_file = f"/tmp/{tok}-host"
    open(host_file, "w").close()
    try:
        ws = Workspace(tmp_path / "ws", sandbox="local")
        ws.setup_file("tmp.py", (
            "import os, sys, tempfile\n"
            "print(tempfile.gettempdir() == os.environ['HOME'] == os.environ['TMPDIR'])\n"
            f"print(os.path.exists('{host_file}'), os.path.isdir(os.environ['MPLCONFIGDIR']))\n"
            "open('in_workspace.txt', 'w').write('kept')\n"
            f"open(os.path.join(tempfile.gettempdir(), '{tok}'), 'w').write('x')\n"
            f"open('/tmp/{tok}', 'w').write('x')\n"
        ))
        run = ws.run_script("tmp.py")
    finally:
        os.unlink(host_file)
    assert run.ok and run.stdout == "True\nFalse True\n", run.stdout + run.stderr
    assert ws.read("in_workspace.txt") == "kept" and not os.path.exists(f"/tmp/{tok}")
    ws.setup_file("shm.py", f"for i in range(3):\n    open(f'/dev/shm/{tok}-{{i}}', 'wb').write(b'x' * 30 * 2**20)\n")
    run = ws.run_script("shm.py")
    assert not run.ok and "OSError: [Errno 28] No space left on device" in run.stderr
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(tok)]
    assert any(note.startswith("disk limit reached: the run's /tmp holds at most 64 MiB and its /dev/shm 64 MiB")
               for note in run.notes), run.notes


# ---- special files and hard links in a workspace --------------------------------------------------------


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path / "ws", sandbox="local")


def _specials(ws: Workspace) -> dict[str, str]:
    """{name: what the refusal calls it} of a FIFO, a socket and (as root) a character device in ``ws``."""
    os.mkfifo(ws.root / "pipe.py")
    made = {"pipe.py": "a named pipe (FIFO)"}
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws.root / "sock.py"))
    sock.close()
    made["sock.py"] = "a socket"
    if os.geteuid() == 0:
        os.mknod(ws.root / "dev.py", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
        made["dev.py"] = "a character device"
    return made


@pytest.mark.timeout(30)  # the old code blocked forever on a FIFO: a hang is a failure here
def test_special_files_are_refused_with_one_line_never_opened(ws):
    ws.setup_file("ok.py", "x = 1\n")
    ws.protect("ok.py")
    for name, kind in _specials(ws).items():
        for action, call, args in (("read", ws.read, ()), ("write", ws.write, ("y = 2\n",)), ("run", ws.run_script, ())):
            with pytest.raises(WorkspaceError) as caught:
                call(name, *args)
            message = str(caught.value)
            assert message == f"cannot {action} {name!r}: it is {kind}, not a regular file; use another path"
            assert "\n" not in message
    assert set(ws.snapshot_files()) == {"ok.py"}
    assert set(ws.list_files()) >= {"ok.py", "pipe.py"}
    # a protected file a run replaced by a FIFO is put back (the FIFO removed, not written to)
    os.unlink(ws.root / "ok.py")
    os.mkfifo(ws.root / "ok.py")
    assert ws._restore_protected() == ["ok.py"]
    assert ws.read("ok.py") == "x = 1\n"


def test_a_hard_link_to_a_file_outside_is_never_written_through(ws, tmp_path):
    host = tmp_path / "host.txt"
    host.write_text("host data\n")
    os.link(host, ws.root / "notes.txt")  # what a local run could make of any file of the machine
    with pytest.raises(WorkspaceError, match=r"^cannot write 'notes.txt': it is a hard link \(one of 2 names"):
        ws.write("notes.txt", "overwritten\n", agent="Dev1")
    with pytest.raises(WorkspaceError, match="hard link"):
        ws.setup_file("notes.txt", "overwritten\n")
    assert host.read_text() == "host data\n" and ws.writes == []
    os.unlink(ws.root / "notes.txt")  # deleted, the name is the workspace's own again
    ws.write("notes.txt", "mine\n", agent="Dev1")
    assert host.read_text() == "host data\n" and ws.read("notes.txt") == "mine\n"


def test_a_protected_file_replaced_by_a_hard_link_is_restored_without_writing_the_host_file(ws, tmp_path):
    host = tmp_path / "host.py"
    host.write_text("host data\n")
    ws.setup_file("test_x.py", "def test_x():\n    pass\n")
    ws.protect("test_x.py")
    os.unlink(ws.root / "test_x.py")
    os.link(host, ws.root / "test_x.py")
    assert ws._restore_protected() == ["test_x.py"]
    assert host.read_text() == "host data\n" and os.stat(host).st_nlink == 1
    assert ws.read("test_x.py") == "def test_x():\n    pass\n"


@needs_bwrap
def test_a_special_file_in_the_workspace_does_not_stop_a_bwrap_run(ws):
    os.mkfifo(ws.root / "pipe")
    ws.setup_file("hello.py", "print('hello')\n")
    run = run_sandboxed([sys.executable, "hello.py"], ws.root, timeout=30, sandbox="bwrap")
    assert run.ok and run.stdout == "hello\n" and run.notes == (), (run.stderr, run.notes)
