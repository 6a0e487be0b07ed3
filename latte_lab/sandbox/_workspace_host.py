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

import base64
import json
import os
import select
import signal
import socket
import struct
import sys

OUTPUT_CAP_BYTES = 8 * 2**20  # a worker's stdout and stderr together; beyond it the worker is killed
MAX_FRAME_BYTES = 64 * 2**20  # one message either way (a DataFrame of a few hundred thousand cells)
MAX_DEPTH = 64  # nesting of a value
MAX_TEXT_CHARS = 4000  # an exception's message, a traceback, a str() of an object
CONTROL_MESSAGE_BYTES = 2**16
EXIT_WAIT_SECONDS = 2.0  # after SIGKILL: how long to wait for a worker to be reaped
READ_BYTES = 2**16
BUILTIN_TYPES = (bool, int, float, str, bytes, bytearray, list, tuple, dict, set, frozenset)
LIMIT_EXCEPTIONS = ("RecursionError", "MemoryError")


class ProtocolError(Exception):
    """A message that does not follow the protocol."""


# --- frames -------------------------------------------------------------------------------------------------


def send_frame(sock, obj) -> None:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    if len(data) > MAX_FRAME_BYTES:
        raise ValueError(f"a message of {len(data):,} bytes, more than the {MAX_FRAME_BYTES:,} allowed")
    sock.sendall(struct.pack(">I", len(data)) + data)


def _recv_exact(sock, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 2**20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_frame(sock):
    """The next message, or None at end of file."""
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME_BYTES:
        raise ProtocolError(f"a frame of {size:,} bytes")
    data = _recv_exact(sock, size)
    if data is None:
        return None
    return json.loads(data.decode("utf-8", "surrogatepass"))


# --- values ---------------------------------------------------------------------------------------------------


def _type_name(obj) -> str:
    kind = type(obj)
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", None) or getattr(kind, "__name__", "object")
    return str(name if module in ("builtins", "__main__") else f"{module}.{name}")[:200]


class Values:
    """This worker's side of the value encoding: the objects behind handles, the judge's functions."""

    def __init__(self, worker):
        self.worker = worker
        self.objects: dict[int, object] = {}
        self.ids: dict[int, int] = {}  # id(object) -> handle
        self.next_handle = 1

    def handle(self, obj) -> int:
        handle = self.ids.get(id(obj))
        if handle is None or self.objects.get(handle) is not obj:
            handle = self.next_handle
            self.next_handle += 1
            self.objects[handle] = obj
            self.ids[id(obj)] = handle
        return handle

    def release(self, handles) -> None:
        for handle in handles:
            obj = self.objects.pop(handle, None)
            if obj is not None and self.ids.get(id(obj)) == handle:
                del self.ids[id(obj)]

    def encode(self, obj, keep: bool = True, depth: int = 0):
        if depth > MAX_DEPTH:
            raise ValueError(f"a value nested more than {MAX_DEPTH} levels deep")
        kind = type(obj)
        if obj is None or kind is bool or kind is str:
            return obj
        if kind is int:
            return obj
        if kind is float:
            return obj
        if isinstance(obj, Callback):
            return {"cb": obj.number}
        if isinstance(obj, BUILTIN_TYPES):
            return self._builtin(obj, keep, depth)
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            if isinstance(obj, numpy.ndarray):
                return self._array(obj, numpy, keep, depth)
            if isinstance(obj, numpy.generic):
                return self.encode(obj.item(), keep, depth + 1)
        pandas = sys.modules.get("pandas")
        if pandas is not None:
            if isinstance(obj, pandas.DataFrame):
                return {"df": {"columns": self.encode(list(obj.columns), keep, depth + 1),
                               "index": self.encode(list(obj.index), keep, depth + 1),
                               "data": [self.encode(obj.iloc[:, i].to_numpy(), keep, depth + 1)
                                        for i in range(obj.shape[1])]}}
            if isinstance(obj, pandas.Series):
                return {"sr": {"name": self.encode(obj.name, keep, depth + 1),
                               "index": self.encode(list(obj.index), keep, depth + 1),
                               "data": self.encode(obj.to_numpy(), keep, depth + 1)}}
        if not keep:
            return {"o": _type_name(obj)}
        return {"h": self.handle(obj), "type": _type_name(obj)}

    def _builtin(self, obj, keep, depth):
        """A plain type or a subclass of one: its value as that type holds it (not as the subclass says)."""
        enc = self.encode
        if isinstance(obj, bool):
            return bool(obj)
        if isinstance(obj, int):
            return int.__index__(obj)
        if isinstance(obj, float):
            return float.__float__(obj)
        if isinstance(obj, str):
            return str.__str__(obj)
        if isinstance(obj, (bytes, bytearray)):
            return {"b": base64.b64encode(bytes(obj)).decode("ascii")}
        if isinstance(obj, tuple):
            return {"t": [enc(x, keep, depth + 1) for x in tuple.__iter__(obj)]}
        if isinstance(obj, list):
            return [enc(x, keep, depth + 1) for x in list.__iter__(obj)]
        if isinstance(obj, dict):
            return {"d": [[enc(k, keep, depth + 1), enc(v, keep, depth + 1)] for k, v in dict.items(obj)]}
        if isinstance(obj, frozenset):
            return {"f": [enc(x, keep, depth + 1) for x in frozenset.__iter__(obj)]}
        return {"s": [enc(x, keep, depth + 1) for x in set.__iter__(obj)]}

    def _array(self, array, numpy, keep, depth):
        if array.dtype.kind in "biufc" and not array.dtype.hasobject:
            data = numpy.ascontiguousarray(array)
            return {"nd": [data.dtype.str, list(data.shape), base64.b64encode(data.tobytes()).decode("ascii")]}
        return {"ndl": [array.dtype.kind, list(array.shape), self.encode(array.tolist(), keep, depth + 1)]}

    def decode(self, value, depth: int = 0):
        """An argument from the judge: plain data, a handle of this worker, a path, a function of the judge."""
        if depth > MAX_DEPTH:
            raise ProtocolError("an argument nested too deeply")
        if isinstance(value, list):
            return [self.decode(x, depth + 1) for x in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            raise ProtocolError(f"a tagged value with keys {sorted(value)[:5]}")
        ((tag, body),) = value.items()
        dec = self.decode
        if tag == "t":
            return tuple(dec(x, depth + 1) for x in body)
        if tag == "d":
            return {dec(k, depth + 1): dec(v, depth + 1) for k, v in body}
        if tag == "s":
            return {dec(x, depth + 1) for x in body}
        if tag == "f":
            return frozenset(dec(x, depth + 1) for x in body)
        if tag == "b":
            return base64.b64decode(body)
        if tag == "h":
            if body not in self.objects:
                raise ProtocolError(f"no object behind handle {body!r}")
            return self.objects[body]
        if tag == "p":
            return resolve(body)
        if tag == "cb":
            return Callback(self.worker, body)
        if tag in ("nd", "ndl"):
            import numpy

            if tag == "nd":
                dtype, shape, data = body
                return numpy.frombuffer(base64.b64decode(data), dtype=numpy.dtype(dtype)).reshape(shape).copy()
            kind, shape, items = body
            return numpy.array(dec(items, depth + 1), dtype=object if kind == "O" else None)
        if tag in ("df", "sr"):
            import pandas

            if tag == "df":
                columns = dec(body["columns"], depth + 1)
                data = {c: dec(col, depth + 1) for c, col in zip(columns, body["data"], strict=True)}
                return pandas.DataFrame(data, index=dec(body["index"], depth + 1), columns=columns)
            return pandas.Series(dec(body["data"], depth + 1), index=dec(body["index"], depth + 1),
                                 name=dec(body["name"], depth + 1))
        raise ProtocolError(f"an unknown tag {tag!r}")


def resolve(path):
    """The object a path names: ``[module, attribute, ...]``."""
    import importlib

    if not isinstance(path, list) or not path or not all(isinstance(p, str) for p in path):
        raise ProtocolError(f"a malformed path {path!r}")
    obj = importlib.import_module(path[0])
    for name in path[1:]:
        obj = getattr(obj, name)
    return obj


def _text(value, limit: int = MAX_TEXT_CHARS) -> str:
    text = str(value)
    if len(text) > limit:
        half = limit // 2
        text = f"{text[:half]}\n[... {len(text) - limit} characters elided ...]\n{text[-half:]}"
    return text


def describe_error(exc: BaseException) -> dict:
    """What the judge is told of an exception: the built-in classes it derives from, its own class, its message
    and traceback (both capped)."""
    import builtins
    import traceback

    bases = [k.__name__ for k in type(exc).__mro__ if getattr(builtins, k.__name__, None) is k]
    try:
        message = _text(exc)
    except BaseException as inner:  # noqa: BLE001 - a __str__ that fails
        message = f"<str() of the exception failed: {type(inner).__name__}>"
    try:
        if isinstance(exc, RecursionError):  # thousands of frames: their count and the last few are enough
            frames = traceback.extract_tb(exc.__traceback__)
            tb = "".join(traceback.format_list(frames[-8:]))
            tb = f"[{len(frames)} frames; the last {min(len(frames), 8)}:]\n{tb}"
        else:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=30))
        tb = _text(tb, 2 * MAX_TEXT_CHARS)
    except BaseException:  # noqa: BLE001
        tb = ""
    return {"types": bases, "type": _type_name(exc), "message": message, "traceback": tb}


class Callback:
    """A function of the judge's, passed to workspace code: calling it asks the judge to call it."""

    def __init__(self, worker, number):
        self.worker, self.number = worker, number

    def __call__(self, *args, **kwargs):
        return self.worker.request({"op": "callback", "cb": self.number,
                                    "args": [self.worker.values.encode(a) for a in args],
                                    "kwargs": [[k, self.worker.values.encode(v)] for k, v in kwargs.items()]})

    def __repr__(self):
        return f"<function of the evaluation #{self.number}>"


class JudgeError(Exception):
    """An exception a function of the judge raised, as workspace code sees it."""


def _exception_from(error: dict) -> BaseException:
    import builtins

    message = str(error.get("message", ""))
    for name in error.get("types") or ():
        kind = getattr(builtins, str(name), None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            try:
                return kind(message)
            except TypeError:
                continue
    return JudgeError(message)


# --- a worker -------------------------------------------------------------------------------------------------


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
