"""The workspace's side of a hidden evaluation: the one process of an evaluation that runs workspace code.

Usage: ``python .latte_lab-host.py '<config json>'``, started by the sandbox as an agent's script is started
(:func:`latte_lab.sandbox.judge.run_judged`), in a throwaway copy of the workspace that holds nothing hidden
(no hidden test, no expected value, no reference), with its standard input one end of a Unix
``SOCK_SEQPACKET`` socket whose other end the judge holds. The judge (``_judge_session.py``) runs the hidden
tests in a process of its own, outside every sandbox; this process never sees a test, a verdict or an
expected value. Only the standard library is imported here (numpy and pandas only to describe their own
objects, when the workspace code already imported them).

Two kinds of process:

* the **host** (this script's first process): it imports no workspace code. On ``{"op": "spawn"}`` it forks
  a worker and passes the judge one end of a new ``SOCK_STREAM`` socket pair (``SCM_RIGHTS``); on ``{"op":
  "end", "worker": pid}`` it kills that worker's whole session and answers how it ended (its wait status, and
  whether it wrote more than :data:`OUTPUT_CAP_BYTES`). It forwards each worker's output to its own
  stdout/stderr, which the sandbox captures as a run's (capped, head and tail kept), and kills a worker that
  writes beyond the cap. End of file from the judge ends every worker and the host.
* a **worker**: it imports the workspace's modules and runs their code, one call at a time, as the judge asks
  (:func:`serve`). A worker that hangs, dies or floods its output is replaced by a new one; the test that met
  it fails with a note, the rest of the suite runs on.

Messages on a worker's socket are frames (a 4-byte big-endian length, then UTF-8 JSON). A request is
``{"id": n, "op": ..., ...}``; its reply ``{"id": n, "value": <plain>}`` or ``{"id": n, "error": {...}}``, with
``"seen"``: what the worker's audit hook saw workspace code do since the last reply. Either side may send a
request while it waits for a reply (the worker calls back a function the test passed it: ``"op":
"callback"``), and serves the other side's requests meanwhile.

Values cross as plain data (:func:`encode`): None, bool, int, float, str as JSON, lists as arrays, and tagged
objects ``{"t": [...]}`` (tuple), ``{"d": [[k, v], ...]}`` (dict), ``{"s": [...]}`` / ``{"f": [...]}`` (set,
frozenset), ``{"b": base64}`` (bytes), ``{"nd": [dtype, shape, base64]}`` / ``{"ndl": [dtype, shape, list]}``
(numpy arrays), ``{"sr": ...}`` / ``{"df": ...}`` (pandas Series, DataFrame); any other object stays here
behind a handle ``{"h": n, "type": name}`` (``{"o": name}`` when the judge asked not to keep it), and a function
of the judge's is ``{"cb": n}``. A subclass of a plain type crosses as that type's value: whatever its
comparisons say, the judge compares what the value is. Nothing here can make the judge run code: it decodes
every message with strict types and keeps its tests, its verdicts and its expectations to itself.
"""

import json
import os
import select
import signal
import socket
import sys

OUTPUT_CAP_BYTES = 8 * 2**20  # a worker's stdout and stderr together; beyond it the worker is killed
CONTROL_MESSAGE_BYTES = 2**16
EXIT_WAIT_SECONDS = 2.0  # after SIGKILL: how long to wait for a worker to be reaped
READ_BYTES = 2**16
VALUES_SCRIPT = "_workspace_values.py"  # beside this file, unless its config names another (the judge's copy)


def _load_values(path: str):
    """The values module (``_workspace_values.py``), loaded by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_latte_lab_workspace_values", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VALUES = _load_values(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   json.loads(sys.argv[1]).get("values", VALUES_SCRIPT)
                                   if __name__ == "__main__" and len(sys.argv) > 1 else VALUES_SCRIPT))
# what the host and its workers use of it, under the names they always had
MAX_FRAME_BYTES, MAX_DEPTH, MAX_TEXT_CHARS = VALUES.MAX_FRAME_BYTES, VALUES.MAX_DEPTH, VALUES.MAX_TEXT_CHARS
BUILTIN_TYPES, LIMIT_EXCEPTIONS = VALUES.BUILTIN_TYPES, VALUES.LIMIT_EXCEPTIONS
ProtocolError, JudgeError, Values, Callback = VALUES.ProtocolError, VALUES.JudgeError, VALUES.Values, VALUES.Callback
send_frame, recv_frame, describe_error, resolve = VALUES.send_frame, VALUES.recv_frame, VALUES.describe_error, VALUES.resolve
_exception_from, _text = VALUES._exception_from, VALUES._text


class Worker:
    """Serves the judge's requests on ``sock``, running workspace code in this process."""

    def __init__(self, sock):
        self.sock = sock
        self.values = Values(self)
        self.next_id = 1
        self.seen: list = []

    def reply(self, message: dict) -> None:
        if self.seen:
            message["seen"] = self.seen[:50]
            self.seen.clear()
        try:
            send_frame(self.sock, message)
        except ValueError as exc:  # too large
            send_frame(self.sock, {"id": message.get("id"), "error": describe_error(exc)})

    def request(self, message: dict):
        """Ask the judge (a callback), serving its requests until the reply comes."""
        number = self.next_id
        self.next_id += 1
        message["id"] = -number  # the worker's requests count down, the judge's up
        self.reply(message)
        while True:
            incoming = recv_frame(self.sock)
            if incoming is None:
                os._exit(0)  # the judge is gone
            if "op" in incoming:
                self.serve_one(incoming)
                continue
            if incoming.get("id") != -number:
                raise ProtocolError(f"a reply to request {incoming.get('id')!r}, not to {-number}")
            if "error" in incoming:
                raise _exception_from(incoming["error"])
            return self.values.decode(incoming.get("value"))

    def serve_one(self, message: dict) -> None:
        ident = message.get("id")
        try:
            value = self.run(message)
        except (KeyboardInterrupt, SystemExit) as exc:
            self.reply({"id": ident, "error": describe_error(exc)})
        except BaseException as exc:  # noqa: BLE001 - the workspace's exception, described for the judge
            self.reply({"id": ident, "error": describe_error(exc)})
        else:
            self.reply({"id": ident, "value": value})

    def run(self, message: dict):
        op = message.get("op")
        values = self.values
        if message.get("release"):
            values.release(message["release"])
        keep = message.get("keep", True)
        if op == "import":
            import importlib

            importlib.import_module(str(message["name"]))
            return None
        target = values.decode(message.get("target"))
        if op == "get":
            return values.encode(getattr(target, str(message["name"])), keep)
        if op == "call":
            args = values.decode(message.get("args") or [])
            kwargs = {str(k): values.decode(v) for k, v in message.get("kwargs") or []}
            return values.encode(target(*args, **kwargs), keep)
        if op == "set":
            setattr(target, str(message["name"]), values.decode(message.get("value")))
            return None
        if op == "del":
            delattr(target, str(message["name"]))
            return None
        if op == "item":
            return values.encode(target[values.decode(message.get("key"))], keep)
        if op == "setitem":
            target[values.decode(message.get("key"))] = values.decode(message.get("value"))
            return None
        if op == "delitem":
            del target[values.decode(message.get("key"))]
            return None
        if op == "len":
            return int.__index__(len(target))
        if op == "list":
            return values.encode(list(target), keep)
        if op == "str":
            return _text(target)
        if op == "isinstance":
            return bool(isinstance(values.decode(message.get("object")), target))
        if op == "release":
            return None
        raise ProtocolError(f"an unknown operation {op!r}")


def _observe(worker: Worker, root: str):
    """An audit hook that notes what workspace code does to reach past its inputs (frame walks, code swaps,
    the garbage collector's object lists, pytest's internals, latte_lab's files): recorded as tampering by the
    judge, never scored. The workspace's frame that did it is named."""
    events = frozenset({"sys._getframe", "object.__setattr__", "gc.get_objects", "gc.get_referrers",
                        "gc.get_referents", "import", "open", "exec", "compile"})
    watched_imports = ("_pytest", "pluggy", "pytest", "latte_lab")

    own = os.path.realpath(__file__)

    def where():
        """The workspace's file and line that did it: the code the event came from (past the import machinery's
        frozen frames) must be the workspace's own, not a library it called."""
        frame = sys._getframe(3)  # where, _hook, hook, then the code that raised the event
        while frame is not None and frame.f_code.co_filename.startswith("<frozen "):
            frame = frame.f_back
        if frame is None:
            return None
        name = frame.f_code.co_filename
        return f"{name[len(root):]}:{frame.f_lineno}" if name.startswith(root) and name != own else None

    busy = []  # the hook's own sys._getframe raises the event again

    def hook(event, args):
        if event not in events or busy or len(worker.seen) >= 50:
            return
        busy.append(1)
        try:
            _hook(event, args)
        finally:
            busy.clear()

    def _hook(event, args):
        if event == "object.__setattr__":
            if len(args) < 2 or args[1] != "__code__":
                return
            what = "a function's code replaced (__code__)"
        elif event == "import":
            name = str(args[0]) if args else ""
            if name.split(".", 1)[0] not in watched_imports:
                return
            what = f"imports {name}"
        elif event == "open":
            path = args[0] if args else None
            if not isinstance(path, str) or "latte_lab" not in path or root in path:
                return
            what = f"opened {path[:200]}"
        elif event in ("exec", "compile"):
            return
        else:
            what = f"calls {event}"
        here = where()
        if here is None or (what, here) in worker.seen:
            return
        if event == "import":  # ``import a.b`` imports a and a.b: one record, the module named
            if any(h == here and w.startswith(what + ".") for w, h in worker.seen):
                return
            worker.seen[:] = [(w, h) for w, h in worker.seen if not (h == here and what.startswith(w + "."))]
        worker.seen.append((what, here))

    return hook


CHANNEL_FD_FROM_TOP = 8  # the worker's channel sits this far below its descriptor limit


def _out_of_the_way(sock):
    """The worker's socket moved to a descriptor near the top of its range: code that writes to the first few
    dozen descriptors (looking for a report to forge) does not break its own evaluation by chance."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    target = max(min(soft, 4096) - CHANNEL_FD_FROM_TOP, sock.fileno())
    if target == sock.fileno():
        return sock
    try:
        os.dup2(sock.fileno(), target)
    except OSError:
        return sock
    moved = socket.socket(fileno=target)
    sock.close()
    return moved


def worker_main(sock, out_fd: int, err_fd: int, root: str) -> None:
    """A forked worker: its own session, its output on the host's pipes, then serve until end of file."""
    code = 0
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (devnull, out_fd, err_fd):
            os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        sock = _out_of_the_way(sock)
        worker = Worker(sock)
        sys.addaudithook(_observe(worker, root))
        while True:
            message = recv_frame(sock)
            if message is None:
                break
            if "op" not in message:
                raise ProtocolError("a reply with no request")
            worker.serve_one(message)
    except BaseException:  # noqa: BLE001 - the judge sees the end of file and asks the host why
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    os._exit(code)


# --- the host -------------------------------------------------------------------------------------------------


class Host:
    """Forks workers on the judge's request and watches their output."""

    def __init__(self, control: socket.socket, root: str):
        self.control, self.root = control, root
        self.workers: dict[int, dict] = {}  # pid -> {"pipes": [fd, fd], "written": n, "flooded": bool, "status"}
        self.pipes: dict[int, tuple[int, int]] = {}  # read end -> (pid, fd to write to)

    def spawn(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            self.control.close()
            mine.close()
            for fd in (out_r, err_r, *self.pipes):
                os.close(fd)
            worker_main(theirs, out_w, err_w, self.root)
        theirs.close()
        os.close(out_w)
        os.close(err_w)
        self.workers[pid] = {"pipes": [out_r, err_r], "written": 0, "flooded": False, "status": None}
        self.pipes[out_r] = (pid, 1)
        self.pipes[err_r] = (pid, 2)
        try:
            socket.send_fds(self.control, [json.dumps({"worker": pid}).encode()], [mine.fileno()])
        finally:
            mine.close()

    def forward(self, fd: int) -> None:
        pid, out = self.pipes[fd]
        try:
            chunk = os.read(fd, READ_BYTES)
        except OSError:
            chunk = b""
        if not chunk:
            del self.pipes[fd]
            os.close(fd)
            return
        state = self.workers.get(pid)
        if state is None:
            return
        state["written"] += len(chunk)
        if state["written"] > OUTPUT_CAP_BYTES:
            if not state["flooded"]:
                state["flooded"] = True
                self._kill(pid)
            return
        try:
            os.write(out, chunk)
        except OSError:
            pass

    def _kill(self, pid: int) -> None:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.workers:
                self.workers[pid]["status"] = status

    def end(self, pid: int) -> None:
        """Kill the worker (whatever it is doing) and say how it ended."""
        state = self.workers.get(pid)
        if state is None:
            self.control.send(json.dumps({"worker": pid, "unknown": True}).encode())
            return
        if state["status"] is None:
            self._kill(pid)
            try:
                _, status = os.waitpid(pid, 0)
                state["status"] = status
            except ChildProcessError:
                pass
        for fd in list(state["pipes"]):
            while fd in self.pipes:
                self.forward(fd)
        self._kill(pid)  # what is left of its session
        report = {"worker": pid, "status": state["status"], "flooded": state["flooded"],
                  "written": state["written"]}
        del self.workers[pid]
        self.control.send(json.dumps(report).encode())

    def serve(self) -> None:
        wakeup_r, wakeup_w = os.pipe()
        os.set_blocking(wakeup_w, False)
        signal.set_wakeup_fd(wakeup_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        try:
            while True:
                readable = select.select([self.control, wakeup_r, *self.pipes], [], [])[0]
                if wakeup_r in readable:
                    os.read(wakeup_r, 512)
                    self.reap()
                for fd in readable:
                    if fd in self.pipes:
                        self.forward(fd)
                if self.control in readable:
                    data = self.control.recv(CONTROL_MESSAGE_BYTES)
                    if not data:
                        break
                    try:
                        message = json.loads(data)
                    except ValueError:
                        continue
                    if message.get("op") == "spawn":
                        self.spawn()
                    elif message.get("op") == "end" and isinstance(message.get("worker"), int):
                        self.end(message["worker"])
        finally:
            for pid in list(self.workers):
                self._kill(pid)


def main(argv: list) -> int:
    config = json.loads(argv[0]) if argv else {}
    global OUTPUT_CAP_BYTES
    OUTPUT_CAP_BYTES = int(config.get("output_cap", OUTPUT_CAP_BYTES))
    root = os.getcwd().rstrip("/") + "/"
    if sys.path and sys.path[0] != root.rstrip("/"):
        sys.path.insert(0, root.rstrip("/"))
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    Host(control, root).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
