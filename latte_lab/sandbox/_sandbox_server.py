"""The init of a warm bubblewrap sandbox: one sandbox kept for a workspace's test runs, each run forked from
a process that has already imported pytest, in a sandbox reset before every run to what a fresh one shows.

Started by :mod:`latte_lab.sandbox.warm` inside bubblewrap as ``python <dir>/_sandbox_server.py <control fd>
'<init json>'``, by path (like :mod:`latte_lab.sandbox._child`, so a workspace can never shadow it), with
the allowlisted environment of a run minus the per-run variables: it never holds a key. It is PID 1 of the
sandbox's PID namespace, so nothing in the sandbox can signal it, and it is not dumpable, so nothing can
read its memory or descriptors through ``/proc`` or ``ptrace``. Its sandbox is the one
:func:`latte_lab.sandbox.bwrap.command` describes (namespaces, a read-only system, no network, no
capabilities), for one workspace: the host's workspace directory is bound read-only at
``init["input"]``, the workspace path itself is a size-capped tmpfs.

At start: leave for a network namespace without loopback (``init["no_loopback"]``, the only use of the
capability bwrap left it), drop every capability, set ``no_new_privs``, then prepare its runs as the fork servers
do (the shared core, ``_server_core.py``, loaded by path and prepared in ``init["mode"]``: ``pytest``, its
imports and its rehearsal; or ``script``, nothing imported for the runs, each of which starts from the modules a
fresh interpreter starts with), and say ``{"ready": 1}`` on the control socket.

Per run (one at a time; the host never sends a second before the first's status), a message with five
descriptors attached: the write ends of the run's stdout, stderr and workspace-export pipes, the run's standard
input and one end of a per-run reply socket. The message is the fork server's request (``cwd``, ``env``, ``limits``, and ``args``
for pytest or ``script`` for ``python <script>``) plus ``grace`` and ``export_names``. The server

1. kills every other process of the namespace (none is left after a normal run);
2. removes the System V IPC objects of the namespace, empties the workspace, ``/tmp`` and ``/dev/shm`` and
   copies the host's workspace in again (and the matplotlib cache), so that nothing of an earlier run
   survives that the host does not have;
3. forks the run (``_server_core.run_child``: the limits, the capability drop, the run's environment and
   ``sys.path``, pytest as ``python -m pytest`` runs it, or the script as ``python <script>`` does) and sends
   ``{"pid": <pid>}``;
4. waits for it to end; end of file on the reply socket (the host's ``shutdown``) asks for a stop:
   SIGTERM to every process of the namespace, ``grace`` seconds, SIGKILL;
5. kills and reaps every process the run left, then writes the workspace as a tar stream to the export
   pipe from a forked process (so the files never pass through the server's own memory) and sends
   ``{"status", "orphans", "subreaper": true, "disk_full", "tmp_full", "exported", "export_failed"}``, as
   ``_child.py`` reports a one-off sandbox's run (``orphans``: a process that would not die, which makes the
   host stop the whole sandbox; ``export_failed``: the copy came in whole but the workspace the run left
   could not be written out, e.g. a file the run made unreadable).

After a run, while a CPU is idle (``init["spares"]``: the host's ``zygote.SPARES``), the init forks the next
run's process ahead, as the fork server does (``_server_core.fork_spare`` and ``spare_child``): it copies its
memory and waits, not dumpable, for its request, which step 3 hands it instead of forking. It is forked after
step 5 has left no other process, so step 1 has nothing to kill before it.

End of file on the control socket ends the server, and with it, the kernel ends every process of the namespace.
"""

import sys

STARTUP_MODULES = frozenset(sys.modules)  # what a fresh interpreter has imported before it runs a script
_HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else ""
sys.path[:] = [p for p in sys.path if p not in ("", _HERE)]

import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402

MAX_MESSAGE_BYTES = 2**20  # one request (env + args)


def _load(filename: str, name: str):
    """A module beside this file, imported by path."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE or ".", filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _empty(directory: str) -> None:
    """Remove everything inside ``directory`` that lies on its file system (not the directory itself), whatever
    modes a run left. Mount points and what is below them stay: bwrap binds a Python installation or a
    workspace that lives under ``/tmp`` inside the sandbox's own ``/tmp``, read-only or emptied on its own."""
    try:
        device = os.lstat(directory).st_dev
    except OSError:
        return
    _empty_on(directory, device)


def _empty_on(directory: str, device: int) -> bool:
    """Empty ``directory`` of what lies on ``device``; whether it is empty now."""
    try:
        entries = list(os.scandir(directory))
    except PermissionError:  # a run made it unreadable: it is ours, so open it up
        try:
            os.chmod(directory, 0o700)
            entries = list(os.scandir(directory))
        except OSError:
            return False
    except OSError:
        return False
    empty = True
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if st.st_dev != device:  # a mount point
                empty = False
            elif entry.is_dir(follow_symlinks=False):
                if not os.access(entry.path, os.W_OK | os.X_OK):
                    os.chmod(entry.path, 0o700)
                if _empty_on(entry.path, device):
                    os.rmdir(entry.path)
                else:
                    empty = False
            else:
                os.unlink(entry.path)
        except OSError:
            empty = False
    return empty


IPC_RMID = 0  # linux/ipc.h


def _remove_sysv_ipc() -> None:
    """Remove the System V shared memory segments, semaphore sets and message queues of the sandbox's IPC
    namespace (a fresh sandbox has none; they outlive the processes that made them)."""
    libc = CHILD._libc()
    if libc is None:
        return
    for kind, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                         ("sem", lambda i: libc.semctl(i, 0, IPC_RMID)),
                         ("msg", lambda i: libc.msgctl(i, IPC_RMID, None))):
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 1 and fields[1].isdigit():
                remove(int(fields[1]))


def _reset(init: dict) -> bool:
    """Empty what a run may write and copy the host's workspace in again; whether every file made it."""
    _remove_sysv_ipc()
    for directory in (init["workspace"], init["tmp"], init["shm"]):
        _empty(directory)
    pairs = [(init["input"], init["workspace"])] + ([tuple(init["mpl"])] if init.get("mpl") else [])
    return all([FILES.copy_in(*pair) for pair in pairs])


def _export(fd: int, init: dict, names: list | None) -> bool:
    """The workspace as a tar stream on ``fd`` (closed here), written by a forked process; whether it was
    all written."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            FILES.export(fd, init["workspace"], names)
            code = 0
        except BaseException:  # noqa: BLE001 - the host is told the export failed
            pass
        os._exit(code)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


# The next run's process, forked ahead while a CPU is idle after a run: it copies its memory and waits for its
# request (the fork servers' spare child, ``_server_core.spare_child``). (the init's end of its link, pid)
SPARE: list = []


def _spare(link: socket.socket) -> None:
    signal.set_wakeup_fd(-1)  # the init's
    CORE.spare_child(link)  # not dumpable until it has its request; never returns


def _fork_spare(control: socket.socket) -> None:
    spare = CORE.fork_spare(_spare, control.fileno())
    if spare is not None:
        SPARE[:] = spare


def _drop_spare() -> None:
    """End the spare unused (the server is ending)."""
    if SPARE:
        link, pid = SPARE
        SPARE.clear()
        link.close()  # it exits on end of file; the kill makes sure
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def _start_run(request: dict, out_fd: int, err_fd: int, in_fd: int) -> int:
    """The run's pid: the spare, handed the request, or a child forked now."""
    if SPARE:
        spare = tuple(SPARE)
        SPARE.clear()
        handed = CORE.hand_to_spare(spare, json.dumps(request).encode(), [out_fd, err_fd, in_fd])
        spare[0].close()
        if handed:
            return spare[1]
        try:  # it died: forked anew below (wait_for_child reaps what is left of it)
            os.kill(spare[1], signal.SIGKILL)
        except OSError:
            pass
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)  # the server's; its descriptor number is about to be reused
        CORE.prctl(CORE.PR_SET_DUMPABLE, 1)  # the run, as exec would make it
        CORE.run_child(request, out_fd, err_fd, in_fd)  # never returns
    return pid


def _serve_run(request: dict, fds: list[int], init: dict, wakeup_r: int) -> None:
    out_fd, err_fd, export_fd, in_fd, reply_fd = fds
    reply = socket.socket(fileno=reply_fd)
    held = [out_fd, err_fd, export_fd, in_fd]  # descriptors still open here

    def close(fd: int) -> None:
        held.remove(fd)
        os.close(fd)

    try:
        if not SPARE:  # (a spare was forked after the last run's end, which left no other process)
            CHILD.end_namespace()  # what an earlier run left (after a normal run: nothing)
        copied = _reset(init)
        pid = _start_run(request, out_fd, err_fd, in_fd)
        close(out_fd)
        close(err_fd)
        close(in_fd)
        reply.send(json.dumps({"pid": pid}).encode())
        status = CHILD.wait_for_child(pid, True, reply.fileno(), float(request.get("grace", 1.0)), wakeup_r)
        CHILD.end_namespace()
        # None is left, unless one would not die within end_namespace's deadline (uninterruptible sleep): then
        # the host stops the whole sandbox, and the next run gets a new one
        report = {"status": status, "orphans": CHILD._reap()[1], "subreaper": True,
                  "disk_full": FILES.full(init["workspace"]), "tmp_full": FILES.full(init["tmp"])}
        held.remove(export_fd)
        if copied:  # a partial copy must never replace the workspace
            report["exported"] = _export(export_fd, init, request.get("export_names"))
            report["export_failed"] = not report["exported"]
        else:
            os.close(export_fd)
            report["exported"] = False
        reply.send(json.dumps(report).encode())
    except Exception as exc:  # noqa: BLE001 - said on the reply socket; the host falls back or reports
        try:
            reply.send(json.dumps({"error": f"warm sandbox: {type(exc).__name__}: {exc}"}).encode())
        except OSError:
            pass
    finally:
        for fd in list(held):
            close(fd)
        reply.close()


def serve(control_fd: int, init: dict) -> None:
    import gc
    import select

    control = socket.socket(fileno=control_fd)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes wait_for_child's select
    wakeup_r = CHILD.wakeup_pipe()
    CORE.prctl(CORE.PR_SET_DUMPABLE, 0)
    # The export's forked writer (step 5) would otherwise import tarfile at every run: 3-4 ms of each. The
    # runs do not see it: a run drops every module imported after the fork server's own (WARM_MODULES).
    import tarfile  # noqa: F401
    gc.collect()
    gc.freeze()  # fewer copy-on-write faults in the runs
    control.send(json.dumps({"ready": os.getpid()}).encode())
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE_BYTES, 5)
        except OSError:
            break
        if not data:
            break  # the host closed its end, or died
        try:
            message = json.loads(data)
        except ValueError:
            message = None
        if len(fds) != 5 or not isinstance(message, dict):
            for fd in fds:
                os.close(fd)
            continue
        _serve_run(message, list(fds), init, wakeup_r)
        # The next run's process, while the host works on this one's result, unless a message is already there
        if CORE.USE_SPARES and not select.select([control], [], [], 0)[0]:
            if CORE.SPARES == "always" or CORE.idle_cpu():
                _fork_spare(control)
    _drop_spare()
    os._exit(0)


if __name__ == "__main__":
    INIT = json.loads(sys.argv[2])
    CHILD = _load("_child.py", "_latte_lab_sandbox_child")
    FILES = _load("_init_files.py", "_latte_lab_init_files")
    if INIT.get("no_loopback"):
        try:
            CHILD.leave_network()
        except OSError as exc:
            sys.stderr.write(f"sandbox: warning: the loopback interface stays up: {exc}\n")
    CHILD.drop_privileges()
    CORE = _load("_server_core.py", "_latte_lab_server_core")
    CORE.prepare(INIT.get("mode", "pytest"), INIT.get("spares", "idle"), STARTUP_MODULES)
    serve(int(sys.argv[1]), INIT)
