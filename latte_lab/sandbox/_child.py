"""The first process of every sandboxed run: set the limits, start the command, reap what it leaves.

Usage: ``python -I -S _child.py '<config json>' -- <argv...>`` (also runnable as
``python -m latte_lab.sandbox._child ...``).

Why a wrapper instead of ``preexec_fn``: ``preexec_fn`` runs Python code between ``fork`` and ``exec``
in a possibly multi-threaded parent, which can deadlock; ``subprocess`` documents it as unsafe with
threads. Here a fresh interpreter forks the command, sets its limits and ``exec``s it, so the limits
apply to the command and are inherited by everything it spawns.

The sandbox calls this file by path with ``-I -S`` (isolated mode, no ``site``): the workspace directory
is never on ``sys.path`` (a workspace file called ``resource.py`` cannot shadow the module we need) and
start-up stays at a few milliseconds. Only the standard library is imported, and this file's own
directory is removed from ``sys.path`` before any import.

The wrapper is the run's *reaper*: it ignores SIGTERM (so it outlives the parent's SIGTERM round and dies
in the SIGKILL round with the rest) and, on Linux, is a child subreaper, so every process the run leaves
behind, even a double-forked ``setsid()`` daemon with a scrubbed environment, is re-parented to it and
stays in the tree the parent stops. As PID 1 of a bubblewrap sandbox (``pid1``) it is the namespace's
init: nothing in the sandbox can signal it, and when the command ends it kills every other process of
the namespace itself.

Config json keys (each optional):

* limits: ``cpu`` seconds (RLIMIT_CPU), ``as`` bytes (RLIMIT_AS), ``fsize`` bytes (RLIMIT_FSIZE),
  ``nproc`` processes (RLIMIT_NPROC, absolute: the parent adds what the user already runs);
  ``null`` or absent leaves a limit as it is;
* ``status_fd``: write one json line ``{"status": <wait status>, "orphans": bool, ...}`` there when the
  command ended (``"subreaper": true`` when the wrapper is a child subreaper: then ``"orphans": false``
  means that no process of the run is left) (without it the wrapper exits with the command's status, as a shell would);
* ``pid1``: act as the init of a PID namespace (see above);
* ``copy_in``: ``[[src, dst], ...]`` directory trees copied before the command starts (``[src, dst, pattern]``:
  only the files of ``src`` whose names match ``pattern``);
* ``export_fd`` and ``export_dir``: once every process of the sandbox is gone, a tar stream of
  ``export_dir`` is written to ``export_fd``;
* ``control_fd``: end of file on it is a request to stop the run (SIGTERM, a grace period, SIGKILL);
* ``grace``: that grace period in seconds;
* ``no_loopback``: move into a network namespace of its own first, whose loopback interface is down
  (needs CAP_SYS_ADMIN in the sandbox's user namespace, dropped right after);
* ``cgroup``: the ``cgroup.procs`` file of the run's pids cgroup, which the command joins before it starts
  (:func:`join_cgroup`; in the limits, so a fork server's child joins it too);
* ``private_tmp``: a ``/tmp`` and ``/dev/shm`` of the run's own (:func:`private_tmp`), made by the wrapper
  before it drops its capabilities (by a fork server's child, in :func:`apply_limits`), with what the run must
  not see hidden (``hide``) and, with ``proc``, the command the init of a PID namespace of its own, with its own
  ``/proc``.

Before the command runs, capabilities are dropped (bounding set, ambient, permitted) and
``no_new_privs`` is set: agent code run as root cannot read other processes' memory or environment
through CAP_SYS_PTRACE, and no set-uid program gives privileges back. A seccomp filter then refuses the
kernel's keyrings and POSIX message queues (:func:`refuse_shared_kernel_objects`): neither is reset between
the runs of a kept sandbox, and the keyrings are not separated by namespaces at all.
"""

import sys

_HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else ""
sys.path[:] = [p for p in sys.path if p not in ("", _HERE)]

import json
import os
import resource
import select
import signal
import time

EXIT_SETUP_FAILED = 126  # the shell's "found but could not be executed" code
CPU_HARD_SLACK_SECONDS = 2  # hard CPU limit above the soft one: SIGXCPU (reportable) comes first
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
MAX_CAPABILITIES = 64  # capability numbers probed for the bounding-set drop (Linux has 41 today)
CLONE_NEWNET = 0x40000000  # linux/sched.h
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2  # linux/prctl.h, linux/seccomp.h
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM = 1
# The system calls of the kernel's keyrings (add_key, request_key, keyctl) and of POSIX message queues
# (mq_open, mq_unlink, mq_timedsend, mq_timedreceive, mq_notify, mq_getsetattr), per architecture
# (linux/audit.h's AUDIT_ARCH_*); x86_64's x32 numbers have bit 30 set. Other architectures are not filtered.
X32_BIT = 0x40000000
SHARED_OBJECT_SYSCALLS = {
    0xC000003E: (248, 249, 250, 240, 241, 242, 243, 244, 245,  # x86_64
                 *(X32_BIT | n for n in (248, 249, 250, 240, 241, 242, 243, 245, 527))),
    0x40000003: (286, 287, 288, 277, 278, 279, 280, 281, 282, 418, 419),  # i386 (also a 64-bit process's int 0x80)
    0xC00000B7: (217, 218, 219, 180, 181, 182, 183, 184, 185),  # aarch64
}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8  # linux/mount.h
MS_BIND, MS_REC, MS_SLAVE = 0x1000, 0x4000, 0x80000
HIDDEN_TMPFS_OPTIONS = "size=4096,mode=0555"  # what covers a hidden directory: empty, read-only
MNT_DETACH = 2
STOP_POLL_SECONDS = 0.02  # how often a stopping run's processes are reaped
END_DEADLINE_SECONDS = 5.0  # killing a namespace's processes: give up after this (D state)


def _set(kind: int, value: int, hard_extra: int = 0) -> None:
    _soft, hard = resource.getrlimit(kind)
    new_hard = value + hard_extra
    if hard != resource.RLIM_INFINITY:  # an unprivileged process cannot raise its hard limit
        value, new_hard = min(value, hard), min(new_hard, hard)
    resource.setrlimit(kind, (value, new_hard))


def apply_limits(limits: dict) -> list[str]:
    """Apply the limits of the config dict (see the module docstring) to the current process.

    Returns warnings for limits the platform refused (e.g. RLIMIT_AS on macOS); the run goes on
    without them rather than not at all. A malformed dict raises ValueError.
    """
    wanted = []
    if limits.get("cpu") is not None:
        # At the soft limit the kernel sends SIGXCPU, at the hard limit SIGKILL; equal limits would
        # make the kill win and hide the reason.
        wanted.append(("RLIMIT_CPU", int(limits["cpu"]), CPU_HARD_SLACK_SECONDS))
    if limits.get("as") is not None:
        wanted.append(("RLIMIT_AS", int(limits["as"]), 0))
    if limits.get("fsize") is not None:
        wanted.append(("RLIMIT_FSIZE", int(limits["fsize"]), 0))
    if limits.get("nproc") is not None:
        # root is exempt in the kernel; setting it anyway is harmless and documents intent.
        wanted.append(("RLIMIT_NPROC", int(limits["nproc"]), 0))
    # No core dumps: a crashing agent script must not drop hundreds of MiB into the workspace.
    wanted.append(("RLIMIT_CORE", 0, 0))
    warnings = []
    if limits.get("private_tmp"):
        try:
            private_tmp(limits["private_tmp"])
        except HideError:
            raise
        except OSError as exc:
            warnings.append(f"/tmp and /dev/shm stay the host's: {exc}")
    if limits.get("cgroup"):
        try:
            join_cgroup(limits["cgroup"])
        except OSError as exc:
            warnings.append(f"could not join the run's pids cgroup (only RLIMIT_NPROC applies): {exc}")
    for name, value, extra in wanted:
        kind = getattr(resource, name, None)
        if kind is None:
            warnings.append(f"{name} is not available on this platform")
            continue
        try:
            _set(kind, value, extra)
        except (ValueError, OSError) as exc:
            warnings.append(f"could not set {name}: {exc}")
    return warnings


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def drop_privileges() -> None:
    """Drop every capability this process holds and set ``no_new_privs`` (Linux; elsewhere nothing).

    Order matters: the bounding set can only be reduced while CAP_SETPCAP is still effective.
    """
    libc = _libc()
    if libc is None:
        return
    import ctypes

    for cap in range(MAX_CAPABILITIES):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # EINVAL: no such cap
            break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(LINUX_CAPABILITY_VERSION_3, 0), (Data * 2)()
    libc.capset(ctypes.byref(header), data)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    refuse_shared_kernel_objects(libc)


def _seccomp_program() -> list[tuple[int, int, int, int]]:
    """A classic BPF program, as ``(code, jt, jf, k)``: EPERM for :data:`SHARED_OBJECT_SYSCALLS`, the rest allowed."""
    load_word, jump_if_equal, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    program = [(load_word, 0, 0, 4)]  # seccomp_data.arch
    for arch, numbers in SHARED_OBJECT_SYSCALLS.items():
        block = [(load_word, 0, 0, 0)]  # seccomp_data.nr
        for number in numbers:
            block += [(jump_if_equal, 0, 1, number), (ret, 0, 0, SECCOMP_RET_ERRNO | EPERM)]
        block.append((ret, 0, 0, SECCOMP_RET_ALLOW))
        program += [(jump_if_equal, 0, len(block), arch), *block]
    return [*program, (ret, 0, 0, SECCOMP_RET_ALLOW)]


def refuse_shared_kernel_objects(libc=None) -> bool:
    """Refuse this process and everything it starts the kernel's keyrings and POSIX message queues (EPERM), with
    a seccomp filter (after ``no_new_privs``); whether the filter is in place.

    Both outlive the process that made them: a key in a keyring, a queue in the IPC namespace. The keyrings
    are the kernel's, not a namespace's (a run as root could reach the host user's keyring, and a key one run
    adds is found by the next), and a kept sandbox's IPC namespace serves run after run; no task's code needs
    either. (System V IPC objects are removed between a kept sandbox's runs instead.)"""
    libc = libc or _libc()
    if libc is None:
        return False
    import ctypes

    class Instruction(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Instruction))]

    program = _seccomp_program()
    instructions = (Instruction * len(program))(*program)
    fprog = Program(len(program), instructions)
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


def join_cgroup(procs: str) -> None:
    """Move this process into the cgroup whose ``cgroup.procs`` is ``procs``: its pids cap then binds it and
    everything it starts, root or not."""
    with open(procs, "w") as fh:
        fh.write("0")


def _mount(libc, source, target: str, fstype, flags: int, data=None) -> None:
    if libc.mount(_c(source), _c(target), _c(fstype), flags, _c(data)) != 0:
        import ctypes

        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def _c(text):
    return None if text is None else os.fsencode(text)


def private_tmp(spec: dict) -> bool:
    """Give this process (and what it starts) a ``/tmp`` and a ``/dev/shm`` of its own: a new mount namespace
    (needs CAP_SYS_ADMIN: root) with a size-capped tmpfs on each, gone with the run's last process, and a new
    IPC namespace (System V objects and POSIX message queues of its own, gone with it too). The host
    directories the run needs that lie under ``/tmp`` (``spec["keep"]``, relative to it: the workspace, the
    interpreter, matplotlib's cache) are bound back at their paths, and ``spec["home"]`` (the run's HOME and
    TMPDIR) is made empty in the new ``/tmp``. ``spec["tmp_bytes"]``, ``spec["shm_bytes"]``: the sizes (None:
    tmpfs's default). ``spec["hide"]``: host paths covered by an empty read-only file system (a directory) or
    ``/dev/null`` (a file) (:func:`latte_lab.sandbox.paths.hidden_paths`); with ``spec["proc"]``, a process of a
    PID namespace made for its run (:data:`IN_OWN_PID_NAMESPACE`) also mounts a ``/proc`` that shows that namespace
    alone (elsewhere that is an error: the host's processes would show the way to what is hidden). False when no mount namespace can be made here (the host's stay); OSError when one
    was made but could not be set up (the host's ``/tmp`` is visible again)."""
    libc = _libc()
    # an IPC namespace of its own too: its System V objects and POSIX message queues end with the run
    if libc is None or (libc.unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0 and libc.unshare(CLONE_NEWNS) != 0):
        return False
    _mount(libc, None, "/", None, MS_REC | MS_SLAVE)  # nothing mounted here reaches the host
    tmp = spec.get("tmp") or "/tmp"
    old = os.open(tmp, os.O_PATH | os.O_DIRECTORY)  # the host's /tmp, once covered
    try:
        _mount(libc, "tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, _tmpfs_options(spec.get("tmp_bytes")))
        try:
            for rel in spec.get("keep") or ():
                target = os.path.join(tmp, rel)
                os.makedirs(target, exist_ok=True)
                _mount(libc, f"/proc/self/fd/{old}/{rel}", target, None, MS_BIND | MS_REC)
            if spec.get("home"):
                os.makedirs(spec["home"], mode=0o700, exist_ok=True)
        except OSError:
            libc.umount2(_c(tmp), MNT_DETACH)
            raise
    finally:
        os.close(old)
    if os.path.isdir("/dev/shm"):
        _mount(libc, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, _tmpfs_options(spec.get("shm_bytes")))
    try:
        hide(libc, spec.get("hide") or ())
        if spec.get("proc"):
            if not IN_OWN_PID_NAMESPACE:
                raise OSError(0, "the run has no PID namespace of its own")
            mount_proc(libc)
    except OSError as exc:
        raise HideError(exc.errno, f"could not hide what a run must not see: {exc.strerror}") from None
    return True


class HideError(OSError):
    """What a run must not see could not be hidden: the run does not start."""


def hide(libc, paths) -> None:
    """Cover each of ``paths`` (in this mount namespace): a directory by an empty read-only tmpfs, a file by
    ``/dev/null``. A path that is gone already (under the new ``/tmp``) needs nothing."""
    for path in paths:
        if os.path.isdir(path):
            _mount(libc, "tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, HIDDEN_TMPFS_OPTIONS)
        elif os.path.exists(path):
            _mount(libc, "/dev/null", path, None, MS_BIND)


IN_OWN_PID_NAMESPACE = False  # set in a process of a PID namespace made for its run (the namespace's init, and
# what it forks): its private_tmp then mounts that namespace's /proc


def new_pid_namespace() -> bool:
    """Make this process's next child the init of a PID namespace of its own (CAP_SYS_ADMIN: root); whether
    it will be. That child mounts its own ``/proc`` (:func:`mount_proc`): the run then sees only its own
    processes, and no ``/proc/<pid>/root`` or ``/proc/<pid>/cwd`` of the host's."""
    libc = _libc()
    return libc is not None and libc.unshare(CLONE_NEWPID) == 0


def mount_proc(libc=None) -> None:
    """A ``/proc`` of this PID namespace, over the host's (in this mount namespace)."""
    _mount(libc or _libc(), "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _tmpfs_options(size) -> str:
    return "mode=1777" + (f",size={int(size)}" if size is not None else "")


def leave_network() -> None:
    """Move into a network namespace of our own: a new one has only a loopback interface, and it is down."""
    libc = _libc()
    if libc is None or libc.unshare(CLONE_NEWNET) != 0:
        import ctypes

        raise OSError(ctypes.get_errno() if libc is not None else 0, "unshare(CLONE_NEWNET) failed")


def _files():
    """``_init_files.py`` (an init's work with files: the workspace copied in and exported), beside this file;
    loaded by path when a run needs it (a sandbox's init), never by a plain run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_latte_lab_init_files", os.path.join(_HERE or ".", "_init_files.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _start(argv: list[str], limits: dict) -> int:
    """Fork the command: a new session, default signals, no inherited descriptor but 0-2, the limits."""
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
        for warning in apply_limits(limits):
            sys.stderr.write(f"sandbox: warning: {warning}\n")
        os.execv(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"sandbox: could not start {argv[0]!r}: {exc}\n")
    os._exit(EXIT_SETUP_FAILED)


def _signal_run(pid1: bool, child: int, sig: int) -> None:
    try:
        if pid1 and os.getpid() == 1:
            os.kill(-1, sig)  # from a namespace's init: every other process of the namespace
        else:
            os.killpg(child, sig)
    except OSError:
        pass


def _reap() -> tuple[list[tuple[int, int]], bool]:
    """(children that ended, whether any child is left)."""
    done = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done, False
        if pid == 0:
            return done, True
        done.append((pid, status))


def wakeup_pipe() -> int:
    """The read end of a pipe that every signal this process receives writes a byte to (SIGCHLD wakes a
    ``select``; the handler must be set, not SIG_DFL)."""
    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    return wakeup_r


def wait_for_child(child: int, pid1: bool, control: int | None, grace: float, wakeup_r: int | None = None) -> int:
    """The command's wait status; with ``control``, end of file on it stops the run first. ``wakeup_r``:
    this process's :func:`wakeup_pipe` (one is made when None)."""
    if wakeup_r is None:
        wakeup_r = wakeup_pipe()
    stopping_at = None
    while True:
        ended, _left = _reap()
        for pid, status in ended:
            if pid == child:
                return status
        fds = [wakeup_r] + ([control] if control is not None and stopping_at is None else [])
        readable = select.select(fds, [], [], STOP_POLL_SECONDS if stopping_at is not None else None)[0]
        if wakeup_r in readable:
            os.read(wakeup_r, 512)
        if control in readable and not os.read(control, 64):  # the parent asks for a stop
            stopping_at = time.monotonic()
            _signal_run(pid1, child, signal.SIGTERM)
        if stopping_at is not None and time.monotonic() > stopping_at + grace:
            _signal_run(pid1, child, signal.SIGKILL)


def end_namespace() -> None:
    """As a namespace's init: kill every other process and reap them all."""
    if os.getpid() != 1:  # not the init of a PID namespace: kill(-1) would reach the whole machine
        return
    deadline = time.monotonic() + END_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        _ended, left = _reap()
        if not left:
            return
        time.sleep(STOP_POLL_SECONDS / 4)


def _mirror(status: int) -> int:
    """Exit the way the command did (its code, or the signal that killed it)."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code & 0xFF if code >= 0 else 128 - code


def run(config: dict, argv: list[str]) -> int:
    pid1 = bool(config.get("pid1"))
    if config.get("mount_proc"):  # the init of a PID namespace of the run's own (:func:`_run_through_init`)
        mount_proc()
    if config.get("no_loopback"):
        try:
            leave_network()
        except OSError as exc:
            sys.stderr.write(f"sandbox: warning: the loopback interface stays up: {exc}\n")
    if config.get("private_tmp"):  # here, while the capability to mount is still held; the command inherits it
        spec = config.pop("private_tmp")
        cwd = os.getcwd()
        try:
            private_tmp({**spec, "proc": False})
        except HideError:
            raise
        except OSError as exc:
            sys.stderr.write(f"sandbox: warning: /tmp and /dev/shm stay the host's: {exc}\n")
        os.chdir(cwd)  # through the mounts just made (the workspace may lie under /tmp)
        if spec.get("proc"):
            if not new_pid_namespace():
                raise HideError(0, "could not hide what a run must not see: no PID namespace can be made")
            return _run_through_init(config, argv)
    drop_privileges()
    files = _files() if config.get("copy_in") or config.get("export_fd") is not None else None
    copied = all([files.copy_in(*pair) for pair in config.get("copy_in") or ()]) if files is not None else True
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # dies with the rest, in the SIGKILL round
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select of wait_for_child
    libc = _libc()
    subreaper = False
    if libc is not None and not pid1:
        subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        # Its status pipe stays out of the command's reach (/proc/<pid>/fd needs CAP_SYS_PTRACE now):
        # a forged "nothing left" report would spare what the run left behind. exec makes the
        # command dumpable again.
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    child = _start(argv, config)
    status = wait_for_child(child, pid1, config.get("control_fd"), float(config.get("grace", 1.0)))
    if pid1:
        end_namespace()
    orphans = False if pid1 else _reap()[1]
    report = {"status": status, "orphans": orphans}
    if subreaper:  # with no child left, no process of the run is left (they all end up below it)
        report["subreaper"] = True
    if config.get("export_fd") is not None:
        report["disk_full"] = files.full(config["export_dir"])
        report["tmp_full"] = files.full(config["tmp_dir"]) if config.get("tmp_dir") else False
        if copied:  # a partial copy must never replace the workspace
            files.export(int(config["export_fd"]), config["export_dir"], config.get("export_names"))
        report["exported"] = copied
    if config.get("status_fd") is None:
        return _mirror(status)
    os.write(int(config["status_fd"]), (json.dumps(report) + "\n").encode())
    os.close(int(config["status_fd"]))
    while orphans:  # processes the run left behind, until the parent stops them
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    return 0


def _run_through_init(config: dict, argv: list[str]) -> int:
    """After :func:`new_pid_namespace`: fork the namespace's init (which mounts the namespace's ``/proc``, starts
    the command as PID 2, kills every process of the namespace when it ends, and reports as a bubblewrap
    sandbox's init does), and report what it reported, as this reaper."""
    report_r, report_w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(report_r)
        inner = {k: v for k, v in config.items() if k not in ("status_fd", "control_fd", "export_fd")}
        os._exit(run({**inner, "pid1": True, "mount_proc": True, "status_fd": report_w}, argv))
    os.close(report_w)
    drop_privileges()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # dies with the rest, in the SIGKILL round
    libc = _libc()
    subreaper = libc is not None and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    if libc is not None:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    data = b""
    while True:
        chunk = os.read(report_r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(report_r)
    _, init_status = os.waitpid(init, 0)
    try:
        report = json.loads(data.split(b"\n", 1)[0])
    except ValueError:  # the init was killed (with the run, at a timeout)
        report = {"status": init_status}
    report["orphans"] = _reap()[1]
    if subreaper:
        report["subreaper"] = True
    if config.get("status_fd") is None:
        return _mirror(int(report["status"]))
    os.write(int(config["status_fd"]), (json.dumps(report) + "\n").encode())
    os.close(int(config["status_fd"]))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: _child.py '<config json>' -- <command...>\n")
        return EXIT_SETUP_FAILED
    try:
        config = json.loads(argv[0])
        if not isinstance(config, dict):
            raise ValueError("not a json object")
    except ValueError as exc:
        sys.stderr.write(f"sandbox: invalid limits {argv[0]!r}: {exc}\n")
        return EXIT_SETUP_FAILED
    try:
        return run(config, argv[2:])
    except OSError as exc:
        sys.stderr.write(f"sandbox: could not set up the run: {exc}\n")
        return EXIT_SETUP_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
