"""What one test run can leave for the next where runs share a sandbox (docs/concepts/sandbox.md): one probe per
item of that page's review, on both backends (bubblewrap where it works).

Per backend, four runs share what the backend keeps between runs -- the local fork server, or the process's kept
bubblewrap sandbox with its public stage -- as a trial's runs do: run 0 in workspace A notes what a run sees; run 1
in A plants something for every item (a file in /tmp, a daemon, a key in a keyring, ...); run 2 in A and run 3 in
workspace B note what they see again. Each test below checks one item: run 2 and 3 saw nothing of run 1, and saw
what run 0 saw. A check that the runs really shared one server keeps the probes from passing by running apart.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import textwrap
import uuid
from pathlib import Path

import pytest
from sandbox_helpers import BACKENDS

from latte_lab.sandbox import clear_memo, local, warm
from latte_lab.sandbox import run as runmod
from latte_lab.sandbox import zygote as zyg
from latte_lab.workspace import Workspace

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/self/stat").exists(),
                                reason="the shared servers need fork and /proc")

# add_key and keyctl, by machine (the probes of the kernel's keyrings call them through ctypes)
KEY_SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine())
KEYRINGS = (-4, -3, -5)  # KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
LOCAL_WRITES_ANYWHERE = "the local backend runs as this user on the real file system (README): not stopped there"

COMMON = '''
import ctypes, gc, json, os, resource, sys, types
TOK = {tok!r}
KEYS = {keys!r}
SYSV_KEY = {sysv_key!r}
PLACES = {places!r}
MEMO_DIR = {memo_dir!r}
LIBC = ctypes.CDLL(None, use_errno=True)

def mq_open(name, flags):
    for lib in (LIBC, ctypes.CDLL("librt.so.1", use_errno=True)):
        if hasattr(lib, "mq_open"):
            return lib.mq_open(name.encode(), flags, 0o600, None)
    return -1
'''

PLANT = COMMON + '''
def attempt(what, fn):
    try:
        result = fn()
        done[what] = result if isinstance(result, (bool, int)) else True
    except Exception as exc:
        done[what] = type(exc).__name__

done = {{}}

def write(path):
    with open(path, "w") as fh:
        fh.write(TOK)
    return True

def test_plant():
    attempt("env", lambda: os.environ.__setitem__("PLANTED_" + TOK, TOK) or os.putenv("PUT_" + TOK, TOK))
    for directory in ("/tmp", os.environ["TMPDIR"], "/dev/shm"):
        attempt("tmp " + directory, lambda d=directory: write(os.path.join(d, "planted-" + TOK)))
    attempt("mpl", lambda: write(os.path.join(os.environ["MPLCONFIGDIR"], "planted-" + TOK)))
    for place in PLACES:
        attempt("elsewhere " + place, lambda p=place: write(p))
    attempt("workspace", lambda: write("planted-" + TOK + ".txt"))
    # a daemon: double fork, a session of its own, its name carrying the token
    attempt("process", lambda: os.system(
        sys.executable + " -c 'import os, time\\nif os.fork() == 0:\\n os.setsid()\\n time.sleep(60)  # " + TOK + "' &"))
    keep = open("planted-fd-" + TOK + ".txt", "w")  # not closed, inheritable: for whatever the run starts
    os.set_inheritable(keep.fileno(), True)
    import json as json_module, builtins, pytest
    __import__("planted_mod_" + TOK)
    json_module.PLANTED = builtins.PLANTED = pytest.PLANTED = TOK
    json_module.dumps = lambda *a, **k: TOK
    sys.path.append("/planted-" + TOK)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_STACK, (2**20, resource.getrlimit(resource.RLIMIT_STACK)[1]))
    os.umask(0o077)
    attempt("nice", lambda: os.nice(5))
    if KEYS:
        add_key = KEYS[0]
        for ring in (-4, -3, -5):
            attempt("key " + str(ring), lambda r=ring: LIBC.syscall(add_key, b"user", ("planted-" + TOK).encode(),
                                                                    TOK.encode(), len(TOK), ctypes.c_int(r)))
    attempt("mqueue", lambda: mq_open("/planted-" + TOK, os.O_CREAT | os.O_RDWR))
    if SYSV_KEY is not None:
        attempt("shm", lambda: LIBC.shmget(SYSV_KEY, 4096, 0o1600))
        attempt("sem", lambda: LIBC.semget(SYSV_KEY, 1, 0o1600))
        attempt("msg", lambda: LIBC.msgget(SYSV_KEY, 0o1600))
    if MEMO_DIR:
        for name in os.listdir(MEMO_DIR) if os.path.isdir(MEMO_DIR) else ["no-memo-directory-in-here"]:
            attempt("memo " + name, lambda n=name: write(os.path.join(MEMO_DIR, n)))
    os.chdir("/")
    print("PLANTED " + json_module.JSONEncoder().encode(done))
'''

SEE = COMMON + '''
def names_with_token(directory):
    try:
        return [name for name in os.listdir(directory) if TOK in name]
    except OSError:
        return []

def cmdline(pid):
    try:
        return open(f"/proc/{{pid}}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
    except OSError:
        return ""

def start_time(pid):
    return open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[19]

def server():
    """The process the run was forked from, and when it started: the same one for runs that share it."""
    pid, found = os.getpid(), None
    while pid > 1:  # the topmost: a run's reaper is a forked copy of the server too
        pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
        if "_zygote_server.py" in cmdline(pid):
            found = ["fork server", start_time(pid)]
    if found:
        return found
    if "_sandbox_server.py" in cmdline(1):
        return ["kept sandbox", start_time(1)]
    return ["none", ""]

def sysv():
    found = []
    for kind in ("shm", "sem", "msg"):
        try:
            rows = open(f"/proc/sysvipc/{{kind}}").read().splitlines()[1:]
        except OSError:
            continue
        found += [kind for row in rows if row.split() and row.split()[0] == str(SYSV_KEY)]
    return found

def code_files():
    files = set()
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            files.add(obj.__code__.co_filename)
        elif isinstance(obj, dict):
            files.update(v.co_filename for v in obj.values() if isinstance(v, types.CodeType))
    return files

def test_see():
    import builtins, pytest
    fds = {{}}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{{fd}}")
        except OSError:
            pass
    here = os.path.dirname(os.path.realpath(__file__))
    seen = {{
        "server": server(),
        "env": sorted(k for k, v in os.environ.items() if TOK in k or TOK in v),
        "env_names": sorted(os.environ),
        "tmp": names_with_token("/tmp") + names_with_token(os.environ["TMPDIR"]),
        "shm": names_with_token("/dev/shm"),
        "mpl": names_with_token(os.environ["MPLCONFIGDIR"]),
        "elsewhere": [p for p in PLACES if os.path.exists(p)],
        "workspace": names_with_token("."),
        "processes": [pid for pid in os.listdir("/proc") if pid.isdigit() and TOK in cmdline(pid)
                      and int(pid) != os.getpid()],
        "fds": sorted(target for target in fds.values() if TOK in target),
        "fd_count": len(fds),
        "modules": sorted(m for m in sys.modules if TOK in m),
        "attributes": [name for name, owner in (("json", json), ("builtins", builtins), ("pytest", pytest))
                       if hasattr(owner, "PLANTED")] + (["json.dumps"] if json.dumps("") != '""' else []),
        "sys_path": [p for p in sys.path if TOK in p],
        "server_memory": sorted(f for f in code_files() if TOK in f),
        "cwd_is_workspace": os.path.realpath(os.getcwd()) == here,
        "limits": {{name: resource.getrlimit(getattr(resource, name)) for name in
                   ("RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE")}},
        "umask": os.umask(0o022),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "keys": [ring for ring in (-4, -3, -5) if KEYS and LIBC.syscall(
            KEYS[1], 10, ctypes.c_int(ring), b"user", ("planted-" + TOK).encode(), 0) > 0]
                + [line for line in open("/proc/keys").read().splitlines() if TOK in line],
        "mqueue": mq_open("/planted-" + TOK, os.O_RDWR) >= 0,
        "sysv": sysv() if SYSV_KEY is not None else [],
    }}
    print("SEEN " + json.dumps(seen))
'''


def _local_private_ipc() -> bool:
    return local.private_tmp_possible()


KINDS = ("tests", "scripts")  # the runs a trial makes: public test runs, and agents' scripts
PARAMS = [pytest.param((backend.values[0], kind), id=f"{backend.id}-{kind}", marks=backend.marks)
          for backend in BACKENDS for kind in KINDS]


def run_probe(ws: Workspace, module: str, function: str, kind: str):
    """``module.function()`` (a probe file's one test), run as the public tests run (pytest) or as an agent's
    script would run it."""
    if kind == "tests":
        return ws.run_tests(("-s", f"{module}.py"), timeout=120)
    script = f"run_{module}.py"
    if not ws.exists(script):
        ws.setup_file(script, f"import {module}\n{module}.{function}()\n")
    return ws.run_script(script, timeout=120)


def ran(run, kind: str) -> bool:
    return run.passed == 1 if kind == "tests" else run.returncode == 0


def observe(ws: Workspace, kind: str) -> dict:
    """What the run saw. On the local backend as root a run lives in a PID namespace of its own and cannot see
    the fork server it was forked from: which server that was is taken from this side (the one that served)."""
    served = []
    real = zyg._get

    def spy(*args, **kwargs):
        zygote = real(*args, **kwargs)
        if zygote is not None:
            served.append(zygote)
        return zygote

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(zyg, "_get", spy)
        run = run_probe(ws, "test_see", "test_see", kind)
    lines = [line for line in run.stdout.splitlines() if line.startswith("SEEN ")]
    assert ran(run, kind) and lines, run.stdout[-3000:] + run.stderr[-2000:]
    seen = json.loads(lines[0][5:])
    if served and seen["server"][0] != "kept sandbox":
        seen["server"] = ["fork server", str(served[-1].pid)]
    return seen


def _clean_host(tok: str, sysv_key: int) -> None:
    """Whatever a probe managed to leave on the host: keys, message queues, System V objects (only if a protection
    failed), and the file a local run leaves in the matplotlib directory local runs share (by design), which
    would otherwise pile up there run after run of the suite."""
    for directory in (runmod.host_mplconfig(), "/tmp", "/dev/shm"):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, f"planted-{tok}"))
    libc = ctypes.CDLL(None, use_errno=True)
    for lib in (libc, ctypes.CDLL("librt.so.1")):
        if hasattr(lib, "mq_unlink"):
            lib.mq_unlink(f"/planted-{tok}".encode())
            break
    if KEY_SYSCALLS:
        for line in open("/proc/keys").read().splitlines():
            if tok in line:
                libc.syscall(KEY_SYSCALLS[1], 21, int(line.split()[0], 16))  # KEYCTL_INVALIDATE
    for get, remove in ((lambda: libc.shmget(sysv_key, 0, 0), lambda i: libc.shmctl(i, 0, None)),
                        (lambda: libc.semget(sysv_key, 0, 0), lambda i: libc.semctl(i, 0, 0)),
                        (lambda: libc.msgget(sysv_key, 0), lambda i: libc.msgctl(i, 0, None))):
        ident = get()
        if ident >= 0:
            remove(ident)


@pytest.fixture(scope="module", params=PARAMS)
def probes(request, tmp_path_factory):
    """{"backend", "kind", "token", "before", "planted", "after", "other", "memo_hit", "host_elsewhere"} of the four
    runs (``kind``: test runs, or agents' scripts, which are not memoised: no "memo_hit")."""
    backend, kind = request.param
    tok = "t" + uuid.uuid4().hex[:12]
    sysv_key = int(tok[1:8], 16)
    root = tmp_path_factory.mktemp(f"reuse-{backend}-{kind}")
    memo_dir = root / "memo"
    bwrap = backend == "bwrap"
    site = next(p for p in __import__("sys").path if p.endswith("site-packages"))
    # places outside every writable part of a sandbox; on the local backend nothing stops a write there, so none
    # is tried (the run would change the host)
    places = [f"/var/tmp/planted-{tok}", f"{site}/planted-{tok}.pth", f"/planted-{tok}", f"/etc/planted-{tok}",
              f"/run/latte_lab/planted-{tok}", f"{Path(__import__('sys').executable).parent}/planted-{tok}"] \
        if bwrap else []
    fields = {"tok": tok, "keys": KEY_SYSCALLS, "places": places,
              "sysv_key": sysv_key if bwrap or _local_private_ipc() else None,
              "memo_dir": str(memo_dir) if bwrap else ""}
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(zyg.ZYGOTE_DISABLE_VAR, raising=False)
        mp.delenv(warm.WARM_DISABLE_VAR, raising=False)
        mp.setattr(zyg, "USE_ZYGOTE", True)
        mp.setattr(warm, "USE_WARM", True)
        clear_memo()
        a = Workspace(root / "a", memo=True, memo_dir=memo_dir, sandbox=backend)
        b = Workspace(root / "b", memo=False, sandbox=backend)
        see = textwrap.dedent(SEE).format(**fields)
        a.setup_file("test_see.py", see)
        b.setup_file("test_see.py", see)
        hit = None
        try:
            before = observe(a, kind)  # memoised in memo_dir (a test run)
            a.setup_file(f"test_plant_{tok}.py", textwrap.dedent(PLANT).format(**fields))
            a.setup_file(f"planted_mod_{tok}.py", "X = 1\n")
            run = run_probe(a, f"test_plant_{tok}", "test_plant", kind)
            lines = [line for line in run.stdout.splitlines() if line.startswith("PLANTED ")]
            assert ran(run, kind) and lines, run.stdout[-3000:] + run.stderr[-2000:]
            planted = json.loads(lines[0][8:])
            after = observe(a, kind)
            other = observe(b, kind)
            if kind == "tests":  # back to run 0's files: the memo's answer, read from its directory
                for name in os.listdir(a.root):
                    if tok in name:
                        os.unlink(a.root / name)
                clear_memo()
                hit = a.run_tests(("-s", "test_see.py"), timeout=120)
        finally:
            _clean_host(tok, sysv_key)
    host_elsewhere = [p for p in places if os.path.exists(p)]
    return {"backend": backend, "kind": kind, "token": tok, "before": before, "planted": planted, "after": after, "other": other,
            "memo_hit": hit, "host_elsewhere": host_elsewhere}


def both(probes, key):
    """What run 2 (same workspace) and run 3 (another workspace) saw of ``key``."""
    return probes["after"][key], probes["other"][key]


def test_the_runs_shared_one_server(probes):
    """Without this the probes below could pass because every run had a server of its own."""
    kind = "kept sandbox" if probes["backend"] == "bwrap" else "fork server"
    servers = {tuple(probes[run]["server"]) for run in ("before", "after", "other")}
    assert len(servers) == 1 and next(iter(servers))[0] == kind, servers


def test_files_of_another_workspace(probes):
    """The public stage held workspace A's files, and A's planted file, before B's run: B sees none of them."""
    assert probes["planted"]["workspace"] is True
    assert probes["other"]["workspace"] == []
    assert f"planted-{probes['token']}.txt" in probes["after"]["workspace"]  # handed back to A, as a run's edits are


def test_tmp_and_tmpdir(probes):
    if probes["backend"] == "local" and not local.private_tmp_possible():
        pytest.skip("the local backend gives a run a /tmp of its own only as root; HOME and TMPDIR are its own")
    assert probes["planted"][f"tmp {'/tmp'}"] is True
    assert both(probes, "tmp") == ([], [])


def test_dev_shm(probes):
    if probes["backend"] == "local" and not local.private_tmp_possible():
        pytest.skip("the local backend gives a run a /dev/shm of its own only as root")
    assert probes["planted"]["tmp /dev/shm"] is True
    assert both(probes, "shm") == ([], [])


def test_matplotlib_cache(probes):
    if probes["backend"] == "local":
        pytest.skip(f"a local run shares the host's matplotlib cache directory: {LOCAL_WRITES_ANYWHERE}")
    assert probes["planted"]["mpl"] is True
    assert both(probes, "mpl") == ([], [])


def test_files_outside_the_workspace(probes):
    if probes["backend"] == "local":
        pytest.skip(LOCAL_WRITES_ANYWHERE)
    attempts = {k: v for k, v in probes["planted"].items() if k.startswith("elsewhere ")}
    assert attempts and not any(v is True for v in attempts.values()), attempts
    assert both(probes, "elsewhere") == ([], []) and probes["host_elsewhere"] == []


def test_environment(probes):
    assert probes["planted"]["env"] is True  # set (os.environ and putenv)
    assert both(probes, "env") == ([], [])
    assert probes["after"]["env_names"] == probes["before"]["env_names"] == probes["other"]["env_names"]


def test_background_processes(probes):
    assert probes["planted"]["process"] == 0
    assert both(probes, "processes") == ([], [])


def test_open_file_descriptors(probes):
    assert both(probes, "fds") == ([], [])
    assert probes["after"]["fd_count"] == probes["before"]["fd_count"] == probes["other"]["fd_count"]


def test_modules_and_objects_of_the_fork_server(probes):
    """Imports, attributes set on modules the server imported, ``sys.path``: all the planting run's own."""
    for seen in both(probes, "modules") + both(probes, "attributes") + both(probes, "sys_path"):
        assert seen == []


def test_another_workspaces_code_in_the_servers_memory(probes):
    """On pytest's public API a server is never sent a workspace's files, so no later run finds one's code."""
    assert both(probes, "server_memory") == ([], [])


def test_working_directory(probes):
    assert both(probes, "cwd_is_workspace") == (True, True)


def test_rlimits_umask_and_priority(probes):
    for key in ("limits", "umask", "nice"):
        assert probes["after"][key] == probes["before"][key] == probes["other"][key], key


@pytest.mark.skipif(KEY_SYSCALLS is None, reason=f"no keyring system call numbers for {platform.machine()}")
def test_kernel_keyrings(probes):
    """Refused to every run (a seccomp filter): the keyrings are the kernel's, not a sandbox's."""
    assert all(probes["planted"][f"key {ring}"] == -1 for ring in KEYRINGS), probes["planted"]
    assert both(probes, "keys") == ([], [])


def test_posix_message_queues(probes):
    """Refused to every run (a seccomp filter): a kept sandbox's IPC namespace serves run after run."""
    assert probes["planted"]["mqueue"] == -1
    assert both(probes, "mqueue") == (False, False)


def test_system_v_ipc(probes):
    if probes["backend"] == "local" and not _local_private_ipc():
        pytest.skip("a local run gets an IPC namespace of its own only as root")
    assert all(probes["planted"][kind] >= 0 for kind in ("shm", "sem", "msg")), probes["planted"]
    assert both(probes, "sysv") == ([], [])


def test_the_memo(probes):
    """A run cannot reach the memo's directory, so the memo's answer for run 0's files is run 0's result."""
    if probes["backend"] == "local":
        pytest.skip(f"a local run can write the memo's directory: {LOCAL_WRITES_ANYWHERE}")
    if probes["kind"] == "scripts":
        pytest.skip("agents' scripts are not memoised (a script may write the workspace)")
    attempts = {k: v for k, v in probes["planted"].items() if k.startswith("memo ")}
    assert attempts and not any(v is True for v in attempts.values()), attempts
    hit = probes["memo_hit"]
    assert hit.cached and hit.passed == 1 and "SEEN " in hit.stdout
