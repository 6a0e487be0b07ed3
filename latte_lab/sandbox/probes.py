"""What a sandbox backend stops, measured: seven hostile probes run as agent code would run them.

* ``environ``: scan ``/proc/*/environ`` of every visible process for an API key held by the process
  that runs the workspace (started with the key in its environment, as a shell that exported it would);
* ``loopback``: connect to a listener on the host's 127.0.0.1;
* ``disk``: write 40 files of 60 MiB;
* ``daemon``: leave a double-forked ``setsid()`` daemon behind that ``exec``s with the run's marker
  removed from its environment;
* ``outside``: write a file next to the workspace, outside it;
* ``forkbomb``: 11 levels of ``os.fork()`` (up to 2,048 processes), every process alive until none forks any
  more, so the processes it made are the most it had alive at once: stopped when that peak stays within the
  process cap (``SandboxLimits.max_processes``) and the run's notes say the limit was reached;
* ``tmp``: write 1 MiB under ``/tmp`` and ``/dev/shm`` by absolute path, and note where ``tempfile`` puts its
  files: stopped when nothing of it is left on the host after the run.

Each probe reports whether it was stopped and whether the workspace still works afterwards.

>>> sorted(PROBES)
['daemon', 'disk', 'environ', 'forkbomb', 'loopback', 'outside', 'tmp']
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from latte_lab.sandbox.limits import SandboxLimits
from latte_lab.sandbox.request import RunRequest
from latte_lab.sandbox.run import RunResult, run_sandboxed

DISK_PROBE_FILES = 40
DISK_PROBE_FILE_BYTES = 60 * 2**20
PROBE_TIMEOUT_SECONDS = 120  # the disk probe writes up to 2.4 GB on the local backend's slow path
FORK_BOMB_LEVELS = 11  # 2**11 = 2,048 processes without a cap, 16 times the default one
CANARY_PREFIX = "sk-latte-canary-"

SCAN = """
import os
canary = {canary!r}.encode()
found, readable = [], 0
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            data = open(f'/proc/{pid}/environ', 'rb').read()
        except OSError:
            continue
        readable += 1
        if canary in data:
            found.append(pid)
print('SCAN', readable, ' '.join(found) or '-')
"""

# Runs in a separate process started with the canary key in its environment: a trial process whose
# shell exported a key. It runs the scan as a script and inside a test run, then checks the workspace.
HOLDER = """
import json, pathlib, sys
from latte_lab.sandbox import RunRequest, run_pytest, run_sandboxed
root, backend, canary = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(root / 'scan.py').write_text(sys.argv[4].replace('{canary!r}', repr(canary)))
(root / 'test_scan.py').write_text("import subprocess, sys\\ndef test_scan():\\n"
    "    print(subprocess.run([sys.executable, 'scan.py'], capture_output=True, text=True).stdout)\\n"
    "    assert 0\\n")
lines = run_sandboxed(RunRequest([sys.executable, 'scan.py'], root, timeout=60, reuse=True),
                      sandbox=backend).stdout.splitlines()
lines += run_pytest(root, ['-s', 'test_scan.py'], timeout=60, sandbox=backend).stdout.splitlines()
print(json.dumps({'scans': [line for line in lines if line.startswith('SCAN')]}))
"""

DISK = f"""
import os
block = b'x' * 2**20
for i in range({DISK_PROBE_FILES}):
    try:
        with open(f'fill{{i}}.bin', 'wb') as fh:
            for _ in range({DISK_PROBE_FILE_BYTES // 2**20}):
                fh.write(block)
    except OSError as exc:
        print('refused at file', i, exc.strerror)
        break
else:
    print('wrote everything')
"""

DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        env = {k: v for k, v in os.environ.items() if k != 'LATTE_SANDBOX_RUN'}
        os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]], env)
    os._exit(0)
time.sleep(0.5)
print('left a daemon behind')
"""

# Each process appends one "+" to bomb.log when it starts, forks as long as it can, then blocks reading a pipe
# whose write end every process holds until it has stopped forking: end of file comes once no process forks
# any more, and until then none has exited, so the "+" count is the peak of processes alive at once.
FORK_BOMB = f"""
import os
first = os.getpid()
r, w = os.pipe()
log = os.open('bomb.log', os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
os.write(log, b'+')
for _ in range({FORK_BOMB_LEVELS}):
    try:
        pid = os.fork()
    except OSError:
        os.write(log, b'!')
        break
    if pid == 0:
        os.write(log, b'+')
os.close(w)
os.read(r, 1)
if os.getpid() != first:
    os._exit(0)
data = open('bomb.log', 'rb').read()
print('alive at once', data.count(b'+'), 'refused forks', data.count(b'!'))
"""

TMP = """
import os, sys, tempfile
tok = sys.argv[1]
for directory in ('/tmp', '/dev/shm'):
    try:
        with open(os.path.join(directory, tok), 'wb') as fh:
            fh.write(b'x' * 2**20)
    except OSError as exc:
        print('refused', directory, exc.strerror)
print('tempfile', tempfile.gettempdir())
"""

OUTSIDE = """
import sys
try:
    open(sys.argv[1], 'w').write('escaped')
    print('wrote', sys.argv[1])
except OSError as exc:
    print('refused', exc.strerror)
"""


@dataclass(frozen=True)
class ProbeResult:
    """One probe on one backend."""

    probe: str
    backend: str
    stopped: bool  # the probe was refused or contained
    detail: str  # what happened, in a few words
    workspace_ok: bool  # a plain script still runs in the workspace afterwards
    seconds: float


def _script(root: Path, backend: str, name: str, text: str, *args: str, limits: SandboxLimits | None = None,
            timeout: float = 60) -> RunResult:
    """Write ``name`` into ``root`` and run it there as agent code is run (``python name *args``, in a directory its
    runs come back to)."""
    (root / name).write_text(text, encoding="utf-8")
    return run_sandboxed(RunRequest([sys.executable, name, *args], root, timeout=timeout, limits=limits, reuse=True),
                         sandbox=backend)


def _still_works(root: Path, backend: str) -> bool:
    return _script(root, backend, "still_ok.py", "print('ok')\n").stdout == "ok\n"


def probe_environ(root: Path, backend: str) -> tuple[bool, str, bool]:
    canary = CANARY_PREFIX + uuid.uuid4().hex
    env = {**os.environ, "OPENAI_API_KEY": canary}
    out = subprocess.run([sys.executable, "-c", HOLDER, str(root), backend, canary, SCAN], capture_output=True,
                         text=True, timeout=PROBE_TIMEOUT_SECONDS, env=env)
    try:
        report = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False, f"the key holder failed: {out.stderr.strip()[-300:]}", _still_works(root, backend)
    scans = [line.split() for line in report["scans"]]
    found = [scan[2] for scan in scans if scan[2] != "-"]
    readable = sorted({int(scan[1]) for scan in scans})
    stopped = len(scans) == 2 and not found and canary not in out.stdout
    detail = f"{len(scans)} scans, environ readable for {readable} processes, key found in {found or 'none'}"
    return stopped, detail, _still_works(root, backend)


def probe_loopback(root: Path, backend: str) -> tuple[bool, str, bool]:
    accepted: list[bool] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        port = server.getsockname()[1]
        done = threading.Event()

        def accept() -> None:
            while not done.is_set():
                try:
                    conn, _ = server.accept()
                except OSError:
                    continue
                accepted.append(True)
                conn.close()

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        said = _script(root, backend, "net.py", "import socket, sys\ns = socket.socket()\ns.settimeout(5)\ntry:\n"
                       "    s.connect(('127.0.0.1', int(sys.argv[1])))\n    print('connected')\n"
                       "except OSError as exc:\n    print('refused', exc.strerror)\n", str(port)).stdout.strip()
        done.set()
        thread.join()
    return not accepted and said.startswith("refused"), said, _still_works(root, backend)


def probe_disk(root: Path, backend: str) -> tuple[bool, str, bool]:
    limits = SandboxLimits()
    run = _script(root, backend, "fill.py", DISK, limits=limits, timeout=PROBE_TIMEOUT_SECONDS)
    size = sum(p.stat().st_size for p in root.glob("fill*.bin"))
    noted = [n for n in run.notes if n.startswith("disk limit")]
    stopped = size < DISK_PROBE_FILES * DISK_PROBE_FILE_BYTES and bool(noted)
    detail = f"{size / 2**20:.0f} MiB written (cap {(limits.disk_bytes or 0) / 2**20:g} MiB); " \
             f"note: {noted[0] if noted else 'none'}"
    cleaned = _script(root, backend, "clean.py", "import glob, os\nfor p in glob.glob('fill*.bin'):\n    os.remove(p)\n").ok
    return stopped, detail, cleaned and _still_works(root, backend)


def probe_daemon(root: Path, backend: str) -> tuple[bool, str, bool]:
    import psutil

    tok = "latte-probe-" + uuid.uuid4().hex[:12]
    said = _script(root, backend, "daemon.py", DAEMON, tok, timeout=30).stdout.strip()
    deadline = time.monotonic() + 3
    while True:
        left = [p.pid for p in psutil.process_iter(["cmdline", "status"])
                if p.info["status"] != psutil.STATUS_ZOMBIE and tok in " ".join(p.info["cmdline"] or ())]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid in left:  # a probe must not leave its daemon on the machine
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return not left and said == "left a daemon behind", f"{said}; alive after the run: {len(left)}", \
        _still_works(root, backend)


def probe_outside(root: Path, backend: str) -> tuple[bool, str, bool]:
    target = root.parent / f"outside-{uuid.uuid4().hex[:8]}.txt"
    said = _script(root, backend, "out.py", OUTSIDE, str(target), timeout=30).stdout.strip()
    escaped = target.exists()
    target.unlink(missing_ok=True)
    return not escaped, f"{said}; on the host: {'written' if escaped else 'absent'}", _still_works(root, backend)


def probe_forkbomb(root: Path, backend: str) -> tuple[bool, str, bool]:
    limits = SandboxLimits()
    run = _script(root, backend, "bomb.py", FORK_BOMB, limits=limits, timeout=PROBE_TIMEOUT_SECONDS)
    log = root / "bomb.log"
    data = log.read_bytes() if log.is_file() else b""
    peak, refused = data.count(b"+"), data.count(b"!")
    noted = [n for n in run.notes if n.startswith("process limit")]
    stopped = 0 < peak <= (limits.max_processes or 0) and bool(noted)
    detail = f"{peak} processes alive at once (cap {limits.max_processes}), {refused} forks refused; " \
             f"note: {noted[0] if noted else 'none'}"
    return stopped, detail, _still_works(root, backend)


def probe_tmp(root: Path, backend: str) -> tuple[bool, str, bool]:
    tok = "latte-probe-" + uuid.uuid4().hex[:12]
    said = _script(root, backend, "tmp.py", TMP, tok, timeout=30).stdout.strip().replace("\n", "; ")
    left = [d for d in ("/tmp", "/dev/shm", tempfile.gettempdir()) if os.path.exists(os.path.join(d, tok))]
    for directory in left:
        os.unlink(os.path.join(directory, tok))
    return not left, f"{said}; left on the host: {', '.join(sorted(set(left))) or 'nothing'}", \
        _still_works(root, backend)


PROBES: dict[str, Callable[[Path, str], tuple[bool, str, bool]]] = {
    "environ": probe_environ,
    "loopback": probe_loopback,
    "disk": probe_disk,
    "daemon": probe_daemon,
    "outside": probe_outside,
    "forkbomb": probe_forkbomb,
    "tmp": probe_tmp,
}


def run_probe(name: str, backend: str) -> ProbeResult:
    """Run one probe in a fresh workspace on ``backend`` ("local" or "bwrap")."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="latte_lab-probe-") as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        stopped, detail, ok = PROBES[name](root, backend)
    return ProbeResult(name, backend, stopped, detail, ok, round(time.monotonic() - start, 2))
