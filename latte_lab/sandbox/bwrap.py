"""The bubblewrap sandbox's command line (Linux): what a run in it sees and may do, and whether one can start here
(:func:`probe`). The bubblewrap backend (:mod:`latte_lab.sandbox.backends`) starts every run in such a sandbox, its
own, or one kept and reset before each run to what a fresh one shows (:mod:`latte_lab.sandbox.warm`).

What a run sees and may do:

* new user, PID, network, IPC, UTS and mount namespaces; a fresh ``/proc`` that shows only the run's
  own processes (no other process's environment, hence no key, is visible), no ``/sys``;
* a read-only view of the system (``/usr``, ``/bin``, ``/lib*``, a few files of ``/etc``) and of the
  Python installation; nothing else of the host's file system: not the user's home, not the project
  directory, not a ``.env``;
* the workspace at its own path as a size-capped tmpfs (``SandboxLimits.disk_bytes``) holding a copy of
  the workspace's files, and ``/tmp`` as a second size-capped tmpfs; when the run ends, the workspace's
  files are written back to the host (the only way anything leaves the sandbox);
* no network: its own network namespace, whose loopback interface is down unless
  ``SandboxLimits.loopback`` (then the run can reach servers it starts itself, still nothing outside);
* no capabilities, ``no_new_privs``, no nested user namespaces;
* at most ``SandboxLimits.max_processes`` processes at once: the whole sandbox runs in a pids cgroup of its
  own where one can be made (see :mod:`latte_lab.sandbox.run`), joined before bwrap starts;
* its first process (``_child.py``) is the namespace's init: when the command ends, or the parent asks
  for a stop at a timeout, it kills every process of the namespace, so nothing outlives the run, and
  the whole sandbox dies with the parent (``--die-with-parent``).

One thing the namespaces do not separate: the kernel's keyrings (``add_key``/``keyctl``, reachable from Python
only through ``ctypes``), which a run as root could find in ``/proc/keys`` and write to, the host user's
included. Every run is refused them (and POSIX message queues) by a seccomp filter (``_child.py``); what one
run can leave for the next where runs share a sandbox is reviewed in docs/concepts/sandbox.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from latte_lab.sandbox.limits import SHM_BYTES, SandboxLimits
from latte_lab.sandbox.paths import (
    CHILD_PATH,
    INIT_FILES_PATH,
    INIT_FILES_SCRIPT,
    INPUT_PATH,
    MPL_CACHE_FILES,
    MPL_INPUT_PATH,
    MPL_PATH,
    SYSTEM_DIRS,
    TASKS_DIR,
    TMP_PATH,
    python_dirs,
)

# What of /etc a Python run needs: user names, time zone, the dynamic linker's cache, certificates,
# fonts (matplotlib). Never all of /etc, which holds host secrets (shadow, ssh keys).
ETC_ENTRIES = (
    "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/localtime", "/etc/timezone",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ssl", "/etc/ca-certificates",
    "/etc/alternatives", "/etc/fonts", "/etc/mime.types",
)
SANDBOX_PROCESSES = 2  # processes of a one-off sandbox that are not the run's: bwrap and the init
PROBE_TIMEOUT_SECONDS = 20.0  # bwrap's first start on a loaded machine
BWRAP_VAR = "LATTE_LAB_BWRAP"  # path of the bwrap binary, when not on PATH


def executable() -> str | None:
    return os.environ.get(BWRAP_VAR) or shutil.which("bwrap")


def _system_args() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ETC_ENTRIES:
        args += ["--ro-bind-try", path, path]
    for path in python_dirs():
        args += ["--ro-bind", path, path]
    return args


def hiding_args() -> list[str]:
    """What covers latte_lab's task folders (their reference solutions and hidden tests) with an empty read-only
    file system, where a directory the sandbox binds holds them (a wheel install's site-packages); an editable
    install's project is not bound at all (:mod:`latte_lab.sandbox.paths`)."""
    bound = [*SYSTEM_DIRS, *python_dirs()]
    package = TASKS_DIR
    if not any(package == d or package.startswith(d.rstrip("/") + "/") for d in bound):
        return []
    return ["--size", "4096", "--tmpfs", package, "--remount-ro", package]


_PROBE: dict[str, object] = {}
_PROBE_LOCK = threading.Lock()


def probe() -> tuple[bool, str, tuple[str, ...]]:
    """(works, why not, extra namespace flags) for this machine, found once per process by starting a
    real sandbox that runs this interpreter."""
    with _PROBE_LOCK:
        if "result" in _PROBE:
            return _PROBE["result"]  # type: ignore[return-value]
        result = _probe()
        _PROBE["result"] = result
        return result


def _probe() -> tuple[bool, str, tuple[str, ...]]:
    if not sys.platform.startswith("linux"):
        return False, f"bubblewrap needs Linux (this is {sys.platform})", ()
    binary = executable()
    if binary is None:
        return False, "the bwrap program is not installed (Debian/Ubuntu: apt-get install bubblewrap)", ()
    error = ""
    for extra in (("--unshare-user", "--disable-userns"), ()):
        argv = [binary, "--unshare-all", *extra, "--die-with-parent", "--as-pid-1", "--cap-drop", "ALL",
                *_system_args(), "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/",
                sys.executable, "-I", "-S", "-c", "print('ok')"]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS,
                                 stdin=subprocess.DEVNULL, env={"PATH": os.defpath})
        except (OSError, subprocess.TimeoutExpired) as exc:
            error = str(exc)
            continue
        if out.returncode == 0 and out.stdout.strip() == "ok":
            return True, "", extra
        error = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
    return False, f"bwrap cannot start a sandbox here ({error})", ()


def command(cwd: Path, limits: SandboxLimits, child_script: str, mpl_dir: str | None) -> list[str]:
    """The bwrap command line, up to the config of ``_child.py`` (the sandbox's init), for a run in
    ``cwd``: the workspace's files are copied into a tmpfs at the same path."""
    files = {child_script: CHILD_PATH, INIT_FILES_SCRIPT: INIT_FILES_PATH}
    return [*sandbox_args(cwd, limits, mpl_dir, files), sys.executable, "-I", "-S", CHILD_PATH]


def sandbox_args(cwd: Path, limits: SandboxLimits, mpl_dir: str | None, files: dict[str, str], *,
                 die_with_parent: bool = True) -> list[str]:
    """bwrap and its options, up to the command, for a sandbox around the workspace ``cwd``: the host's
    ``files`` ({host path: path inside}) bound read-only; the workspace itself a size-capped tmpfs at its
    own path, with the host's directory bound read-only at :data:`INPUT_PATH`. ``die_with_parent``: bwrap's
    option of that name (which ties the sandbox to the thread that starts it)."""
    _ok, _why, extra = probe()
    args = [executable() or "bwrap", "--unshare-all", *extra, *(["--die-with-parent"] if die_with_parent else []),
            "--as-pid-1", "--new-session", "--cap-drop", "ALL"]
    if not limits.loopback:
        args += ["--cap-add", "CAP_SYS_ADMIN"]  # for the init to leave for a network without loopback
    # /tmp first: bwrap mounts in order, and a Python installation or project under /tmp (a clone there,
    # a venv there) must be bound on top of the sandbox's own /tmp, not hidden beneath it
    args += [*_size(limits.tmp_bytes), "--tmpfs", TMP_PATH]
    args += _system_args()
    args += hiding_args()
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
             "--remount-ro", "/dev"]
    args += ["--ro-bind", str(cwd), INPUT_PATH]
    for host_path, inside in files.items():
        args += ["--ro-bind", host_path, inside]
    if mpl_dir and os.path.isdir(mpl_dir):
        args += ["--ro-bind", mpl_dir, MPL_INPUT_PATH]
    return [*args, *_size(limits.disk_bytes), "--tmpfs", str(cwd), "--remount-ro", "/", "--chdir", str(cwd)]


def init_config(cwd: Path, limits: SandboxLimits, mpl_dir: str | None, export_names: list[str] | None) -> dict:
    """What ``_child.py`` does as the sandbox's init besides running the command."""
    copy_in = [[INPUT_PATH, str(cwd)]]
    if mpl_dir and os.path.isdir(mpl_dir):
        copy_in.append([MPL_INPUT_PATH, MPL_PATH, MPL_CACHE_FILES])
    return {"pid1": True, "no_loopback": not limits.loopback, "copy_in": copy_in, "export_dir": str(cwd),
            "export_names": export_names, "tmp_dir": TMP_PATH, "grace": limits.sigterm_grace_seconds}


def _size(limit: int | None) -> list[str]:
    return ["--size", str(limit)] if limit is not None else []
