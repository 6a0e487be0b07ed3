"""What every fork server of the sandbox shares: each run's reaper and process, forked from a server that has made
once what every run would otherwise make anew, and the spares (the next run's processes, forked ahead).

Loaded by path (never by name: a workspace can never shadow it) by the three servers:

* ``_zygote_server.py``, the fork server of the local backend's test runs (mode ``pytest``) and agents' scripts
  (mode ``script``), which serves requests on its control socket (:func:`serve`);
* ``_trusted_server.py``, the fork server of hidden evaluations' judges (mode ``pytest``, with the judge's session
  as its :data:`SESSION`), likewise;
* ``_sandbox_server.py``, the init of a kept bubblewrap sandbox, which starts its runs itself, one at a time
  (:func:`fork_spare`, :func:`hand_to_spare`, :func:`spare_child`, :func:`run_child`).

A server's mode comes from its own arguments: it calls :func:`prepare` with it once, before it serves. The API the
servers use, and nothing else of this module:

* :func:`prepare` (``mode``, ``spares``, the modules the server's interpreter started with),
  :func:`prepare_spares` and :func:`keep_loaded` (a server that imports more for its runs, after :func:`prepare`:
  the runs keep those too);
* :data:`SESSION`: a trusted server's judge session, ``SESSION(boot arguments) -> exit code``;
* :func:`run_child`: in a forked process, become the run (as a fresh ``python -m pytest``, ``python <script>`` or
  ``python -s -P <judge session>`` would be) and end with its exit status;
* :func:`serve`: the fork server's loop on its control socket;
* :func:`fork_spare`, :func:`drop_spare`, :func:`hand_to_spare`, :func:`spare_child`, :func:`idle_cpu`,
  :data:`USE_SPARES`, :data:`SPARES`: the next run's processes forked ahead;
* :func:`prctl`, :data:`PR_SET_DUMPABLE`, :data:`CHILD` (``_child.py``: limits, privileges, namespaces).

Single-threaded on purpose: a server forks, and forking a process with threads is unsafe. It never starts a
thread and never imports anything from a workspace.

Protocol of :func:`serve` (``AF_UNIX`` ``SOCK_SEQPACKET``, one JSON object per message):

* control socket, server -> parent, once: ``{"ready": <server pid>}``;
* control socket, parent -> server, per run: ``{"cwd", "env", "limits"}`` and ``"args"`` (pytest), ``"script"``
  (what follows ``python``: the script's path, then its arguments) or ``"trusted"`` (what follows ``python -s -P
  <judge session>``), with four file descriptors attached (``SCM_RIGHTS``): the write ends of the run's stdout
  and stderr pipes, its standard input (``/dev/null``, or a socket to the judge of a hidden evaluation) and one
  end of a fresh per-run reply socket. ``env`` is the run's *whole* environment (built by the parent from its
  allowlist), ``limits`` the json dict of ``_child.apply_limits``;
* reply socket, per run: ``{"pid": <child>, "leader": <reaper>, "init": <bool>}`` once the run started (``init``:
  the child is the init of the run's own PID namespace, which forked the run's process), then
  ``{"status": <wait status of the child>, "orphans": <bool>, "subreaper": <bool>}`` when it ended (or
  ``{"error": ...}``).

Per run the server has a *reaper* that calls ``setsid()``, ignores SIGTERM, becomes a Linux child subreaper
(``PR_SET_CHILD_SUBREAPER``) and forks the *child*. Both are forked ahead, as a *spare*, while the server waits for
the request: the spare's child copies its memory (:func:`_prefault`, so the run takes no copy-on-write faults) and
waits, not dumpable, until the server hands the request and its descriptors to the reaper, which passes them on
(:func:`_spare_reaper`). A spare that is gone is replaced by forking at the request. So every process the run
leaves behind -- even a double-forked grandchild that called ``setsid()`` -- is re-parented to the reaper and stays
a descendant of it, where the parent's process-tree kill finds it (a forked process keeps the server's initial
environment in ``/proc/<pid>/environ``, so the run marker cannot find those). The reaper ignores SIGTERM so that
it survives the parent's SIGTERM round and is only SIGKILLed together with the rest.

The child (:func:`run_child`) calls ``setsid()``, sets the rlimits, drops every capability and sets
``no_new_privs``, points fds 0/1/2 at the run's standard input and the two pipes, closes every other descriptor,
``chdir``s into the workspace, replaces ``os.environ`` with the run's environment, rebuilds ``sys.path`` as the
interpreter would (the working directory or the script's, then ``PYTHONPATH``, then the interpreter's own path),
drops the modules only the server's plumbing imported, and runs the run. It then waits for non-daemon threads,
runs ``atexit`` handlers, flushes, and leaves with ``os._exit(<exit status>)``.
"""

import sys

_HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else ""
BASE_PATH = tuple(p for p in sys.path if p not in ("", _HERE))  # the interpreter's own sys.path

import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import traceback  # noqa: E402

try:  # every reaper's prctl and every child's capability drop use it: imported once here, not per run
    import ctypes  # noqa: E402, F401
except ImportError:  # pragma: no cover - without it the run only loses the reaper's subreaper
    pass


def _load_sibling(filename: str, name: str):
    """A module beside this file, imported by path, not by name (a workspace can never shadow it)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE or ".", filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODES = ("pytest", "script")
MODE = "script"  # what the runs are: "pytest" (pytest imported, a session rehearsed: public API only) or "script"
WARM_MODULES: frozenset = frozenset(sys.modules)  # what a run keeps of the server's modules (set by prepare)
SESSION = None  # a trusted server's judge session: SESSION(boot arguments) -> exit code


def prepare(mode: str, spares: str, startup_modules: frozenset) -> None:
    """Make the server ready for its runs: in mode ``pytest``, import what ``python -m pytest`` imports before it
    runs anything from the workspace and rehearse a session on a suite of its own (``_pytest_warm.py``, pytest's
    public API only); in mode ``script``, nothing (each run starts from ``startup_modules``, what the server's
    interpreter had imported when it started, as a fresh ``python <script>`` does). ``spares``: "idle", "always"
    or "never" (:data:`SPARES`)."""
    global MODE, WARM_MODULES
    if mode not in MODES:
        raise ValueError(f"unknown fork server mode {mode!r}")
    MODE = mode
    prepare_spares(spares)
    if mode == "pytest":
        warm = _load_sibling("_pytest_warm.py", "_latte_lab_pytest_warm")
        warm.warm()
        warm.rehearse()
        keep_loaded()
    else:
        WARM_MODULES = frozenset(startup_modules)


def prepare_spares(spares: str) -> None:
    """When the next run's processes are forked ahead: "idle" (while a CPU is idle), "always" or "never"."""
    global SPARES, USE_SPARES
    SPARES = spares
    USE_SPARES = spares != "never" and hasattr(socket, "send_fds") and sys.platform.startswith("linux")


def keep_loaded() -> None:
    """The modules loaded now are a run's to keep (what the server imports later is its own)."""
    global WARM_MODULES
    WARM_MODULES = frozenset(sys.modules)


EXIT_SETUP_FAILED = 126  # as _child: "found but could not be executed"
MAX_MESSAGE_BYTES = 2**20  # one request (env + args); SOCK_SEQPACKET keeps message boundaries
# Keep the next run's reaper and child forked ahead, their memory copied (:func:`_spare_reaper`): "idle" (while a
# CPU is idle, :func:`idle_cpu`), "always" or "never"; set by :func:`prepare`.
SPARES = "idle"
USE_SPARES = False
SPARE_DELAY_SECONDS = 0.005  # after a request, how long the zygote waits before it looks for an idle CPU
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
PR_SET_DUMPABLE = 4


CHILD = _load_sibling("_child.py", "_latte_lab_sandbox_child")  # the reaper's module: limits, privileges, namespaces
apply_limits, drop_privileges = CHILD.apply_limits, CHILD.drop_privileges
SCRIPT = _load_sibling("_script_run.py", "_latte_lab_script_run")  # a forked process run as ``python <script>``


def _send(sock: socket.socket, obj: dict) -> None:
    sock.send(json.dumps(obj).encode())


def prctl(option: int, value: int) -> bool:
    """``prctl(option, value)`` on Linux; whether it succeeded."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - without it only the parent's other tracking applies
        return False


def _python_path(cwd: str, env: dict) -> list[str]:
    """sys.path entries of ``python -m`` for ``cwd`` and ``env``: cwd, then PYTHONPATH (absolute)."""
    entries = [cwd]
    value = env.get("PYTHONPATH", "")
    if value:
        parts = value.split(os.pathsep)
        for i, part in enumerate(parts):
            if part:
                entries.append(os.path.abspath(part))
            elif i < len(parts) - 1:
                entries.append(cwd)
    return entries


def _finish(code: int) -> None:
    """What interpreter shutdown does that matters to a run, then ``os._exit``."""
    try:
        import threading

        threading._shutdown()  # wait for non-daemon threads, as Py_Finalize does
    except Exception:  # noqa: BLE001
        pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except Exception:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)


def run_child(request: dict, out_fd: int, err_fd: int, in_fd: int) -> None:
    """In the forked child: set up the process as a fresh ``python -m pytest`` would see it, run."""
    code = EXIT_SETUP_FAILED
    try:
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        # A run exec'd by _child.py starts with SIGINT at its default, where Python installs its handler,
        # whatever the parent ignored (a background job ignores SIGINT).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(in_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
        for warning in apply_limits(request["limits"]):
            sys.stderr.write(f"sandbox: warning: {warning}\n")
        drop_privileges()
        cwd = request["cwd"]
        os.chdir(cwd)
        cwd = os.getcwd()
        env = request["env"]
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = [*_python_path(cwd, env), *BASE_PATH]
        sys.path_importer_cache.clear()
        importlib.invalidate_caches()
        if "tempfile" in sys.modules:
            sys.modules["tempfile"].tempdir = None  # TMPDIR is the run's private directory
        for name in set(sys.modules) - WARM_MODULES:
            module = sys.modules.get(name)
            origin = getattr(getattr(module, "__spec__", None), "origin", None)
            # A pytest run keeps the extension modules pytest's imports loaded (some cannot be initialised
            # twice); a script starts from exactly what a fresh interpreter has (the script zygote loads no
            # extension that minds being imported again).
            if MODE == "script" or origin is None or str(origin).endswith(".py"):
                sys.modules.pop(name, None)
        if "script" in request:
            code = SCRIPT.run_script(request["script"], request["env"])
        elif "trusted" in request:
            if SESSION is None:
                raise RuntimeError("a hidden evaluation sent to a fork server that is not the trusted one")
            code = SESSION(request["trusted"])
        else:
            import runpy

            sys.argv[:] = ["pytest", *request["args"]]  # argv[0] becomes pytest/__main__.py in runpy
            try:
                runpy.run_module("pytest", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exc:
                code = SCRIPT.exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - report like an uncaught exception at top level
        try:
            traceback.print_exc()
        except Exception:  # noqa: BLE001
            pass
        code = 1
    _finish(code)


# As root on Linux (the local backend gives runs a mount namespace of their own there), each run's process is
# the init of a PID namespace of its own, which mounts its own /proc: no /proc/<pid>/root or /cwd of a host
# process leads a run to what it must not see (_child.private_tmp's "proc").
PID_NAMESPACES = sys.platform.startswith("linux") and os.geteuid() == 0


def _become_reaper() -> bool:
    """A reaper's set-up: its own session, SIGTERM ignored, subreaper, not dumpable, its next child the init of
    a PID namespace of its own (:data:`PID_NAMESPACES`, :func:`_fork_run`); whether it is a subreaper."""
    os.setsid()
    if PID_NAMESPACES and CHILD.new_pid_namespace():
        CHILD.IN_OWN_PID_NAMESPACE = True
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # dies with the rest, at the SIGKILL round
    subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1)
    # Not dumpable: the run cannot reach the reaper's descriptors through /proc (the child is made
    # dumpable again, as exec would).
    prctl(PR_SET_DUMPABLE, 0)
    return subreaper


def _fork_run(body, *close) -> tuple[int, int | None]:
    """Fork the run's process, which runs ``body()`` (never returning). In a PID namespace of its own (made by
    :func:`_become_reaper`) it is PID 2, forked by the namespace's init, a small process that reaps, kills every
    process of the namespace once the run's has ended and passes its wait status on; so the run's process sees
    signals as any process does (an init ignores those it has no handler for). Returns the pid of the reaper's
    child (the run's, or the init's) and the read end of the init's status pipe (None without one). ``close``:
    descriptors of the reaper's that the run does not keep."""
    if not CHILD.IN_OWN_PID_NAMESPACE:
        pid = os.fork()
        if pid == 0:
            for fd in close:
                os.close(fd)
            body()
        return pid, None
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (status_r, *close):
            os.close(fd)
        _namespace_init(body, status_w)
    os.close(status_w)
    return pid, status_r


def _namespace_init(body, status_w: int) -> None:
    """PID 1 of a run's PID namespace: fork the run's process, reap until it ends, kill what is left of the
    namespace, write the run's wait status to ``status_w``."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        run = os.fork()
        if run == 0:
            os.close(status_w)
            body()
        limit = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536
        os.closerange(3, status_w)  # the run's descriptors are the run's: its pipes end when it does
        os.closerange(status_w + 1, limit)
        status = None
        while status is None:
            try:
                pid, st = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid == run:
                status = st
        CHILD.end_namespace()
        if status is not None:
            os.write(status_w, f"{status}\n".encode())
    except BaseException:  # noqa: BLE001
        pass
    os._exit(0)


def _report(reply: socket.socket, pid: int, subreaper: bool, status_r: int | None = None) -> None:
    """The reaper's part once the child runs: its pid, then its exit status (the run's, from the namespace's init
    through ``status_r``), then reaping what it left."""
    try:  # "init": the run's process is PID 2 of its own namespace, below an init (one more process of the tree)
        _send(reply, {"pid": pid, "leader": os.getpid(), "init": status_r is not None})
    except OSError:  # the parent gave up on this request (and runs it another way): stop it
        os.kill(pid, signal.SIGKILL)
        raise
    _, status = os.waitpid(pid, 0)
    if status_r is not None:
        data = os.read(status_r, 64)
        os.close(status_r)
        if data.strip().isdigit():
            status = int(data)
    try:
        orphans = os.waitpid(-1, os.WNOHANG) is not None
    except ChildProcessError:
        orphans = False
    # A subreaper without children has no process of the run left below it: the parent skips its
    # search of the process table.
    _send(reply, {"status": status, "orphans": orphans, "subreaper": subreaper})
    reply.close()
    while True:  # processes the run left behind until the parent stops them
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break


def _reaper(request: dict, out_fd: int, err_fd: int, in_fd: int, reply_fd: int) -> None:
    """In the forked reaper: start the child, report its pid and exit status, reap leftovers."""
    reply = socket.socket(fileno=reply_fd)
    try:
        subreaper = _become_reaper()

        def body():
            reply.detach()
            prctl(PR_SET_DUMPABLE, 1)
            run_child(request, out_fd, err_fd, in_fd)

        try:
            pid, status_r = _fork_run(body)
        except OSError as exc:
            _send(reply, {"error": f"could not fork the test process: {exc}"})
            os._exit(0)
        for fd in (out_fd, err_fd, in_fd):
            os.close(fd)
        _report(reply, pid, subreaper, status_r)
    except BaseException:  # noqa: BLE001
        pass
    os._exit(0)


# --- spares: the next run's reaper and child, forked while the zygote waits --------------------------------
MADV_POPULATE_WRITE = 23  # linux/mman.h (Linux 5.14): fault a range in writable, as if written to


def _prefault() -> None:
    """Give this process its own copy of the memory it shares with the zygote, all at once: a forked run
    otherwise takes a copy-on-write fault on each page it first writes (pytest's objects' reference
    counts, the allocator's pools), thousands per session, each a trap; copied in one call per region
    they cost a fraction of that, and a spare pays it before its run starts. Best effort (an older
    kernel refuses the advice; then the run takes its faults as before)."""
    try:
        import ctypes

        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as maps:
            regions = []
            for line in maps:
                fields = line.split()
                # private writable memory of no file: the heap, the allocator's arenas, stacks
                if fields[1] == "rw-p" and (len(fields) < 6 or fields[5] == "[heap]"):
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    regions.append((start, end - start))
        for start, size in regions:
            if madvise(start, size, MADV_POPULATE_WRITE) != 0:
                if ctypes.get_errno() == 22:  # EINVAL: the kernel has no such advice
                    return
    except Exception:  # noqa: BLE001
        pass


def _spare_reaper(link: socket.socket) -> None:
    """A reaper forked before its request: it forks its child at once (which copies its memory and waits),
    then waits on ``link`` for the request the zygote hands on (with its four descriptors), passes it to
    the child and goes on as any reaper. The zygote closing ``link`` unused ends both."""
    try:
        subreaper = _become_reaper()
        to_child, child_link = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # not dumpable until it has its request, as the reaper
        pid, status_r = _fork_run(lambda: spare_child(child_link), link.fileno(), to_child.fileno())
        child_link.close()
        try:
            data, fds, _flags, _addr = socket.recv_fds(link, MAX_MESSAGE_BYTES, 4)
        except OSError:
            data, fds = b"", []
        if not data or len(fds) != 4:  # the zygote let it go (it closed its end), or a malformed handover
            os.kill(pid, signal.SIGKILL)
            os._exit(0)
        link.close()
        *run_fds, reply_fd = fds
        reply = socket.socket(fileno=reply_fd)
        try:
            socket.send_fds(to_child, [data], run_fds)
        except OSError as exc:
            os.kill(pid, signal.SIGKILL)
            _send(reply, {"error": f"could not start the test process: {exc}"})
            os._exit(0)
        for fd in run_fds:
            os.close(fd)
        to_child.close()
        _report(reply, pid, subreaper, status_r)
    except BaseException:  # noqa: BLE001
        pass
    os._exit(0)


def idle_cpu() -> bool:
    """Whether a CPU this process may use is idle now: no more processes running, besides this one, than
    CPUs less one (``/proc/loadavg``'s count of runnable tasks; elsewhere the 1-minute load average). A
    spare, and its copy of its memory, then cost the run nothing. On a busy machine (a sweep's runs on
    every CPU) they would only move work around (the copy takes the place of the faults it saves) and add
    a little: sweeps measured 2-3% slower with spares, so a busy zygote forks at the request instead."""
    try:
        cpus = len(os.sched_getaffinity(0))
        try:
            with open("/proc/loadavg") as fh:
                running = int(fh.read().split()[3].split("/")[0]) - 1  # this process is one of them
        except (OSError, ValueError, IndexError):
            running = os.getloadavg()[0]
        return running <= cpus - 1
    except (OSError, AttributeError):
        return False


def spare_child(link: socket.socket) -> None:
    """A spare's child: copies its memory while a CPU is idle (:func:`_prefault`), waits for its request,
    then runs it as a child forked at the request would (:func:`run_child`)."""
    if SPARES == "always" or idle_cpu():
        _prefault()
    try:
        data, fds, _flags, _addr = socket.recv_fds(link, MAX_MESSAGE_BYTES, 3)
        request = json.loads(data) if data and len(fds) == 3 else None
    except (OSError, ValueError):
        request = None
    if request is None:
        os._exit(0)
    link.close()
    # Waiting, it could not be traced or read through /proc by another process of the user (a run in
    # progress); from here it is dumpable, as a child forked at its request is.
    prctl(PR_SET_DUMPABLE, 1)
    run_child(request, *fds)


def fork_spare(body=None, control_fd: int | None = None) -> tuple[socket.socket, int] | None:
    """A spare reaper (:func:`_spare_reaper`, or ``body``, which never returns) and the zygote's end of its
    link, or None if it cannot fork. The spare closes the control socket (``control_fd``, by default
    :data:`CONTROL_FD`)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = os.fork()
    except OSError:
        mine.close()
        theirs.close()
        return None
    if pid == 0:
        mine.close()
        os.close(CONTROL_FD if control_fd is None else control_fd)
        (body or _spare_reaper)(theirs)
    theirs.close()
    return mine, pid


def drop_spare(spare: tuple[socket.socket, int] | None) -> None:
    """Ends a spare unused: with its link closed its reaper kills its child and exits."""
    if spare is not None:
        spare[0].close()


def hand_to_spare(spare: tuple[socket.socket, int] | None, data: bytes, fds: list[int]) -> bool:
    """Passes a request to the spare; False if there is none or it is gone (the zygote forks instead)."""
    if spare is None:
        return False
    try:
        socket.send_fds(spare[0], [data], fds)
        return True
    except OSError:
        return False


CONTROL_FD = -1  # the control socket's descriptor, which forked spares close


def serve(control_fd: int) -> None:
    global CONTROL_FD
    CONTROL_FD = control_fd
    control = socket.socket(fileno=control_fd)
    # The zygote never waits for its reapers: the kernel reaps them (no zombies).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    gc.collect()
    gc.freeze()  # fewer copy-on-write page faults in the children
    spare = fork_spare() if USE_SPARES else None  # (a fresh zygote's first run comes soon)
    _send(control, {"ready": os.getpid()})
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE_BYTES, 4)
        except InterruptedError:
            continue
        except OSError:
            break
        if not data:
            break  # the parent closed its end (or died)
        if not fds:  # every request comes with its run's descriptors
            continue
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        out_fd, err_fd, in_fd, reply_fd = fds
        try:
            request = json.loads(data)
        except ValueError:
            request = None
        if request is not None and hand_to_spare(spare, data, fds):
            spare[0].close()  # it is the run's reaper now
            spare = None
        elif request is not None:
            drop_spare(spare)  # gone, or never started
            spare = None
            pid = -1
            try:
                pid = os.fork()
            except OSError as exc:
                try:
                    _send(socket.socket(fileno=os.dup(reply_fd)), {"error": f"zygote fork failed: {exc}"})
                except OSError:
                    pass
            if pid == 0:
                os.close(control.detach())
                _reaper(request, out_fd, err_fd, in_fd, reply_fd)
        for fd in fds:
            os.close(fd)
        # The next run's spare, made on an idle CPU while this run runs: looked at once the run has started
        # (its parent then waits), unless the next message is already there.
        if USE_SPARES and spare is None and not select.select([control], [], [], SPARE_DELAY_SECONDS)[0]:
            if SPARES == "always" or idle_cpu():
                spare = fork_spare()
    drop_spare(spare)
    os._exit(0)
