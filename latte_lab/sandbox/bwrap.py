"""The isolating backend: every run in a bubblewrap sandbox (Linux), its own, or one kept and reset before each
run to what a fresh one shows: for test runs, one kept by the process, serving its workspaces in turn; for
agents' scripts, a second one kept by the process, likewise (:mod:`latte_lab.sandbox.warm`).

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
import site
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path, PurePosixPath

from latte_lab.sandbox.limits import SHM_BYTES, SandboxLimits
from latte_lab.sandbox.local import PYTEST_PATCHES_SCRIPT
from latte_lab.sandbox.paths import TASKS_DIR

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of /etc a Python run needs: user names, time zone, the dynamic linker's cache, certificates,
# fonts (matplotlib). Never all of /etc, which holds host secrets (shadow, ssh keys).
ETC_ENTRIES = (
    "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/localtime", "/etc/timezone",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ssl", "/etc/ca-certificates",
    "/etc/alternatives", "/etc/fonts", "/etc/mime.types",
)
SANDBOX_DIR = "/run/latte_lab"  # where the run's own files appear inside the sandbox
CHILD_PATH = f"{SANDBOX_DIR}/child.py"
PYTEST_PATCHES_PATH = f"{SANDBOX_DIR}/pytest_patches.py"  # ``_pytest_patches.py``, for a run with them (opt-in)
INPUT_PATH = f"{SANDBOX_DIR}/workspace"  # the workspace's files at the start of the run, read-only
MPL_INPUT_PATH = f"{SANDBOX_DIR}/mplconfig"  # the host's matplotlib cache (fonts), read-only
TMP_PATH = "/tmp"
MPL_PATH = f"{TMP_PATH}/matplotlib"
# What of the host's matplotlib directory a run gets: its font cache, which takes a second to build; nothing
# else (local runs share that directory and may leave anything there, which a bwrap run would copy every time)
MPL_CACHE_FILES = "fontlist-*.json"
SANDBOX_PROCESSES = 2  # processes of a one-off sandbox that are not the run's: bwrap and the init
PROBE_TIMEOUT_SECONDS = 20.0  # bwrap's first start on a loaded machine
BWRAP_VAR = "LATTE_LAB_BWRAP"  # path of the bwrap binary, when not on PATH


def executable() -> str | None:
    return os.environ.get(BWRAP_VAR) or shutil.which("bwrap")


def python_dirs() -> list[str]:
    """Directories the interpreter needs: its prefixes and site-packages (never the project itself)."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found.add(str(Path(os.path.realpath(sys.executable)).parent.parent))
    found.update(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
        found.add(site.getusersitepackages())
    dirs = sorted({os.path.realpath(d) for d in found if os.path.isdir(d)} | {d for d in found if os.path.isdir(d)})
    return [d for d in dirs if not d.startswith(tuple(s + "/" for s in SYSTEM_DIRS))]


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
    files = {child_script: CHILD_PATH, PYTEST_PATCHES_SCRIPT: PYTEST_PATCHES_PATH}
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


def apply_export(stream, root: Path, names: list[str] | None = None) -> None:
    """Make ``root`` hold exactly the files of the tar ``stream`` (the sandbox's workspace at its end);
    with ``names``, only those top-level entries of ``root`` are touched.

    Members that would land outside ``root`` (absolute names, ``..``, links pointing out) and special
    files are skipped; unchanged files are not rewritten.

    A workspace of directories and regular files (every run's, nearly) is applied straight from the
    stream, each file compared with ``root``'s in memory (:func:`_apply_plain`); one with a link in it is
    extracted into a temporary directory first and mirrored from there, which gives the same files.
    """
    if stream.seekable():
        start = stream.tell()
        if _apply_plain(stream, root, names):
            return
        stream.seek(start)
    with tempfile.TemporaryDirectory(prefix="latte_lab-export-") as tmp:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            tar.extractall(tmp, filter=_safe)
        mirror(Path(tmp), root, names)


# A directory that does not exist: the filter's check that a member stays inside it is then a check of the
# member's name alone, as it is for the extraction into a fresh temporary directory that this pass replaces.
_CLEAN_DESTINATION = "/nonexistent/latte_lab-export"


def _apply_plain(stream, root: Path, names: list[str] | None) -> bool:
    """What :func:`apply_export` does by extracting and mirroring, done in one pass: every member kept by the
    same filter lands in ``root`` as the mirror would leave it (a file's bytes and its filtered mode bits, a
    directory made), and whatever else ``root`` holds (within ``names``) is removed. False, with ``root``
    perhaps half done, as soon as a member is anything else (a link) or comes before its directory: the
    caller then applies the whole stream the other way, which makes ``root`` right whatever this left."""
    wanted: set[str] = set()
    directories = {""}  # made real directories of root in this pass (a file's parent must be one)
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            kept = _safe(member, _CLEAN_DESTINATION)  # judged as the extraction into an empty directory judges it
            if kept is None:
                continue
            rel = PurePosixPath(kept.name).as_posix()
            parent = rel.rpartition("/")[0]
            if rel in ("", ".") or rel.startswith("/") or ".." in rel.split("/") or parent not in directories:
                return False
            target = root / rel
            if kept.isdir():
                if target.is_symlink() or (target.exists() and not target.is_dir()):
                    _remove(target)
                target.mkdir(exist_ok=True)
                directories.add(rel)
            elif kept.isreg() and kept.mode is not None:
                data = tar.extractfile(member).read()
                if target.is_symlink() or target.is_dir():
                    _remove(target)
                try:
                    st = target.lstat()
                except FileNotFoundError:
                    st = None
                if st is not None and not stat.S_ISREG(st.st_mode):  # a FIFO, a socket: never read
                    target.unlink()
                    st = None
                if st is None or st.st_size != len(data) or target.read_bytes() != data:
                    with open(target, "wb") as fh:
                        fh.write(data)
                    st = None
                if st is None or stat.S_IMODE(st.st_mode) != kept.mode & 0o777:
                    os.chmod(target, kept.mode & 0o777)
            else:
                return False
            wanted.add(rel)
    _remove_unwanted(root, wanted, names)
    return True


def _safe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def mirror(src: Path, dst: Path, names: list[str] | None = None, *, regular_only: bool = False) -> None:
    """Make ``dst`` equal to ``src`` (files, symlinks, directories; with ``names`` only those top-level
    entries), touching only what differs. ``regular_only``: a special file in ``src`` (a FIFO, a device)
    raises ``shutil.SpecialFileError`` instead of being read as a file."""
    wanted: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = Path(dirpath).relative_to(src)
        for name in dirnames + filenames:
            rel = rel_dir / name
            wanted.add(rel.as_posix())
            s, d = src / rel, dst / rel
            if s.is_symlink():
                if not d.is_symlink() or os.readlink(d) != os.readlink(s):
                    _remove(d)
                    os.symlink(os.readlink(s), d)
            elif s.is_dir():
                if d.is_symlink() or (d.exists() and not d.is_dir()):
                    _remove(d)
                d.mkdir(exist_ok=True)
            else:
                if regular_only and not stat.S_ISREG(s.lstat().st_mode):
                    raise shutil.SpecialFileError(f"{s} is not a regular file")
                if d.is_symlink() or d.is_dir():
                    _remove(d)
                if not d.exists() or d.stat().st_size != s.stat().st_size or d.read_bytes() != s.read_bytes():
                    shutil.copyfile(s, d)
                os.chmod(d, s.stat().st_mode & 0o777)
        dirnames[:] = [n for n in dirnames if not (src / rel_dir / n).is_symlink()]
    _remove_unwanted(dst, wanted, names)


def _remove_unwanted(dst: Path, wanted: set[str], names: list[str] | None) -> None:
    """Remove every entry of ``dst`` (within the top-level ``names``) whose relative path is not ``wanted``."""
    for dirpath, dirnames, filenames in os.walk(dst, topdown=False):
        rel_dir = Path(dirpath).relative_to(dst)
        for name in dirnames + filenames:
            rel = (rel_dir / name).as_posix()
            if rel not in wanted and (names is None or rel.split("/", 1)[0] in names):
                _remove(dst / rel)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists():  # a FIFO, a socket, a device node
        path.unlink()
