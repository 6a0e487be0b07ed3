"""The judge's link to the workspace host of a hidden evaluation: values sent as plain data and read back with
strict types (:func:`encode`, :func:`decode`), the socket to a worker of the host (:class:`Link`, which asks the
host for a new worker when one is lost), and a workspace object kept in its worker behind a handle
(:class:`Remote`). The protocol is in ``_workspace_host.py``'s docstring; what a test sees is in
``_judge_session.py``'s.

Loaded by path by the judge's session; only the standard library is imported (numpy and pandas when a value needs
them).
"""

import base64
import importlib.util
import json
import os
import select
import socket
import struct
import sys
import time
import weakref

# pytest leaves this module's frames out of failure reports (see _judge_session.py)
__tracebackhide__ = True
CONTROL_TIMEOUT_SECONDS = 10.0  # the host's answer to a request for a worker, or for how one ended
CONTROL_MESSAGE_BYTES = 2**16


def _sibling(filename: str, name: str):
    """A module beside this file, imported by path once per process (a workspace can never shadow it)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), filename))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


VALUES = _sibling("_judge_values.py", "_latte_lab_judge_values")
MAX_FRAME_BYTES, MAX_DEPTH, NUMERIC_KINDS = VALUES.MAX_FRAME_BYTES, VALUES.MAX_DEPTH, VALUES.NUMERIC_KINDS
WorkspaceError, NotPlainData, WorkspaceLost = VALUES.WorkspaceError, VALUES.NotPlainData, VALUES.WorkspaceLost
ProtocolError, RemoteError, remote_error = VALUES.ProtocolError, VALUES.RemoteError, VALUES.remote_error
_PLAIN, _is_shape, _library, _decode_array = VALUES._PLAIN, VALUES._is_shape, VALUES._library, VALUES._decode_array


def decode(link, value, depth=0, opaque_path=None):
    """A value from the worker, with strict types: only what the protocol allows, built here."""
    if depth > MAX_DEPTH:
        raise ProtocolError("a value nested too deeply")
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list:
        return [decode(link, x, depth + 1) for x in value]
    if kind is not dict:
        raise ProtocolError(f"a value of JSON type {kind.__name__}")
    if len(value) == 2 and "h" in value and "type" in value:
        handle, name = value["h"], value["type"]
        if type(handle) is not int or type(name) is not str:
            raise ProtocolError("a malformed handle")
        return link.remote_for(handle, name[:200])
    if len(value) != 1:
        raise ProtocolError("a tagged value with more than one tag")
    ((tag, body),) = value.items()
    if tag == "t" and type(body) is list:
        return tuple(decode(link, x, depth + 1) for x in body)
    if tag == "d" and type(body) is list:
        out = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise ProtocolError("a malformed dict item")
            key = decode(link, pair[0], depth + 1)
            try:
                out[key] = decode(link, pair[1], depth + 1)
            except TypeError:
                raise ProtocolError("a dict key that is not hashable") from None
        return out
    if tag in ("s", "f") and type(body) is list:
        try:
            items = [decode(link, x, depth + 1) for x in body]
            return set(items) if tag == "s" else frozenset(items)
        except TypeError:
            raise ProtocolError("a set item that is not hashable") from None
    if tag == "b" and type(body) is str:
        try:
            return base64.b64decode(body, validate=True)
        except ValueError:
            raise ProtocolError("malformed bytes") from None
    if tag == "o" and type(body) is str and opaque_path is not None:
        return link.remote_for_path(opaque_path, body[:200])
    if tag == "cb" and type(body) is int:
        function = link.callbacks.get(body)
        if function is None:
            raise ProtocolError(f"no function of the evaluation numbered {body}")
        return function
    if tag == "nd" and type(body) is list and len(body) == 3:
        return _decode_array(*body)
    if tag == "ndl" and type(body) is list and len(body) == 3:
        kind_, shape, items = body
        numpy = _library("numpy")
        if type(kind_) is not str or not _is_shape(shape):
            raise ProtocolError("a malformed array")
        array = numpy.array(decode(link, items, depth + 1), dtype=object if kind_ == "O" else None)
        if list(array.shape) != shape and array.size:
            raise ProtocolError("an array whose items do not fill its shape")
        return array
    if tag in ("df", "sr") and type(body) is dict:
        return _decode_frame(link, tag, body, depth)
    raise ProtocolError(f"an unknown tagged value {tag!r}")


def _decode_frame(link, tag, body, depth):
    pandas = _library("pandas")
    try:
        index = decode(link, body["index"], depth + 1)
        if tag == "sr":
            return pandas.Series(decode(link, body["data"], depth + 1), index=index,
                                 name=decode(link, body["name"], depth + 1))
        columns = decode(link, body["columns"], depth + 1)
        data = [decode(link, col, depth + 1) for col in body["data"]]
        if type(columns) is not list or len(columns) != len(data):
            raise ProtocolError("a DataFrame whose columns and data disagree")
        frame = pandas.DataFrame({i: col for i, col in enumerate(data)}, index=index)
        frame.columns = columns
        return frame
    except (KeyError, TypeError, ValueError):
        raise ProtocolError("a malformed pandas value") from None


def encode(link, value, depth=0):
    """An argument for the worker: plain data, a workspace object, or a function of the evaluation (called back)."""
    if depth > MAX_DEPTH:
        raise ValueError("an argument nested too deeply for the workspace")
    if value is None or isinstance(value, (bool, str)):
        return str.__str__(value) if isinstance(value, str) else value
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Remote):
        return object.__getattribute__(value, "_reference")()
    if isinstance(value, tuple):
        return {"t": [encode(link, x, depth + 1) for x in value]}
    if isinstance(value, list):
        return [encode(link, x, depth + 1) for x in value]
    if isinstance(value, dict):
        return {"d": [[encode(link, k, depth + 1), encode(link, v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"f" if isinstance(value, frozenset) else "s": [encode(link, x, depth + 1) for x in value]}
    if isinstance(value, (bytes, bytearray)):
        return {"b": base64.b64encode(bytes(value)).decode("ascii")}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(value, numpy.ndarray):
            if value.dtype.kind in NUMERIC_KINDS and not value.dtype.hasobject:
                data = numpy.ascontiguousarray(value)
                return {"nd": [data.dtype.str, list(data.shape), base64.b64encode(data.tobytes()).decode("ascii")]}
            return {"ndl": [value.dtype.kind, list(value.shape), encode(link, value.tolist(), depth + 1)]}
        if isinstance(value, numpy.generic):
            return encode(link, value.item(), depth + 1)
    pandas = sys.modules.get("pandas")
    if pandas is not None:
        if isinstance(value, pandas.DataFrame):
            return {"df": {"columns": encode(link, list(value.columns), depth + 1),
                           "index": encode(link, list(value.index), depth + 1),
                           "data": [encode(link, value.iloc[:, i].to_numpy(), depth + 1)
                                    for i in range(value.shape[1])]}}
        if isinstance(value, pandas.Series):
            return {"sr": {"name": encode(link, value.name, depth + 1), "index": encode(link, list(value.index), depth + 1),
                           "data": encode(link, value.to_numpy(), depth + 1)}}
    if callable(value):
        return {"cb": link.callback_number(value)}
    raise TypeError(f"a {type(value).__name__} cannot be sent to the workspace: only plain data, workspace objects "
                    "and functions")


# --- the worker link ----------------------------------------------------------------------------------------------


class Link:
    """The judge's side of the host and its current worker: requests, their replies, and the callbacks served
    while waiting for them."""

    def __init__(self, control: socket.socket, call_timeout: float):
        self.control = control
        self.call_timeout = call_timeout
        self.sock = None
        self.worker = None
        self.generation = 0
        self.next_id = 1
        self.depth = 0
        self.deadline = 0.0
        self.buffer = bytearray()
        self.callbacks: dict = {}
        self.callback_numbers: dict = {}
        self.remotes = weakref.WeakValueDictionary()  # (generation, handle) -> Remote: one proxy per object
        self.released: list = []
        self.host_gone = ""  # why no worker can be had any more
        self.seen: dict = {}  # (what, where) -> None: what the worker saw workspace code do
        self.out_of_protocol = 0

    # -- workers --------------------------------------------------------------------------------------------------
    def _control(self, message: dict, want_fd: bool = False):
        if self.host_gone:
            raise WorkspaceLost(self.host_gone)
        try:
            self.control.send(json.dumps(message).encode())
            if not select.select([self.control], [], [], CONTROL_TIMEOUT_SECONDS)[0]:
                raise OSError("no answer")
            data, fds, _flags, _addr = socket.recv_fds(self.control, CONTROL_MESSAGE_BYTES, 1)
        except OSError as exc:
            self.host_gone = f"the workspace process is gone ({exc})"
            raise WorkspaceLost(self.host_gone) from None
        if not data:
            self.host_gone = "the workspace process ended"
            for fd in fds:
                os.close(fd)
            raise WorkspaceLost(self.host_gone)
        try:
            reply = json.loads(data)
            if type(reply) is not dict:
                raise ValueError
        except ValueError:
            reply = None
        if reply is None or (want_fd and len(fds) != 1) or (not want_fd and fds):
            for fd in fds:
                os.close(fd)
            self.out_of_protocol += 1
            self.host_gone = "the workspace process answered out of protocol"
            raise WorkspaceLost(self.host_gone)
        return reply, (fds[0] if want_fd else None)

    def _spawn(self) -> None:
        reply, fd = self._control({"op": "spawn"}, want_fd=True)
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            self.out_of_protocol += 1
            raise WorkspaceLost("the workspace process handed over something that is not a socket") from None
        if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM or type(reply.get("worker")) is not int:
            sock.close()
            self.out_of_protocol += 1
            raise WorkspaceLost("the workspace process handed over something that is not a worker's socket")
        sock.setblocking(False)
        self.sock, self.worker = sock, reply["worker"]
        self.generation += 1
        self.buffer = bytearray()
        self.released = []

    def lose(self, why: str) -> str:
        """End the current worker (whatever it is doing); the note on how it ended."""
        sock, worker = self.sock, self.worker
        self.sock = self.worker = None
        if sock is not None:
            sock.close()
        if worker is None:
            return why
        try:
            report, _ = self._control({"op": "end", "worker": worker})
        except WorkspaceLost:
            return why
        status = report.get("status")
        if report.get("flooded") is True:
            return "output limit: the workspace code wrote more than its output cap, and its process was stopped"
        if why:
            return why
        if type(status) is int:
            code = os.waitstatus_to_exitcode(status)
            if code < 0:
                name = _signal_name(-code)
                hint = " (out of memory, or its CPU limit)" if name in ("SIGKILL", "SIGXCPU") else ""
                return f"the workspace process was killed by {name}{hint}"
            return f"the workspace process ended with status {code} (sys.exit or os._exit in workspace code?)"
        return "the workspace process ended"

    # -- frames ---------------------------------------------------------------------------------------------------
    def _send(self, message: dict) -> None:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
        payload = memoryview(struct.pack(">I", len(data)) + data)
        while payload:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [self.sock], [], remaining)[1]:
                raise TimeoutError
            try:
                sent = self.sock.send(payload)
            except BlockingIOError:
                continue
            except OSError:
                raise EOFError from None
            payload = payload[sent:]

    def _fill(self, n: int) -> None:
        while len(self.buffer) < n:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.sock], [], [], remaining)[0]:
                raise TimeoutError
            try:
                chunk = self.sock.recv(max(n - len(self.buffer), 2**16))
            except BlockingIOError:
                continue
            except OSError:
                raise EOFError from None
            if not chunk:
                raise EOFError
            self.buffer += chunk

    def _receive(self) -> dict:
        self._fill(4)
        (size,) = struct.unpack(">I", self.buffer[:4])
        if size > MAX_FRAME_BYTES:
            raise ProtocolError(f"a frame of {size:,} bytes")
        self._fill(4 + size)
        data = bytes(self.buffer[4:4 + size])
        del self.buffer[:4 + size]
        try:
            message = json.loads(data.decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            raise ProtocolError("a message that is not JSON") from None
        if type(message) is not dict:
            raise ProtocolError("a message that is not an object")
        return message

    # -- requests -------------------------------------------------------------------------------------------------
    def request(self, message: dict, opaque_path=None):
        """Send ``message`` to the worker and return the decoded value of its reply (raising its error), serving
        the worker's callbacks meanwhile."""
        if self.sock is None:
            self._spawn()
        top = self.depth == 0
        if top:
            self.deadline = time.monotonic() + self.call_timeout
        ident = self.next_id
        self.next_id += 1
        message["id"] = ident
        if self.released:
            message["release"], self.released = self.released, []
        generation = self.generation
        self.depth += 1
        try:
            self._send(message)
            while True:
                incoming = self._receive()
                self._note_seen(incoming.get("seen"))
                if "op" in incoming:
                    self._serve_callback(incoming)
                    continue
                if incoming.get("id") != ident:
                    raise ProtocolError(f"a reply to {incoming.get('id')!r} while {ident} was asked")
                if "error" in incoming:
                    raise remote_error(incoming["error"])
                if "value" not in incoming:
                    raise ProtocolError("a reply with neither value nor error")
                return decode(self, incoming["value"], opaque_path=opaque_path)
        except TimeoutError:
            raise self._lost(generation, f"time limit: the workspace code did not answer within "
                                         f"{self.call_timeout:g} s (an endless loop, or a wait?)") from None
        except EOFError:
            raise self._lost(generation, "") from None
        except ProtocolError as exc:
            self.out_of_protocol += 1
            raise self._lost(generation, f"the workspace process broke the protocol: {exc}") from None
        finally:
            self.depth -= 1

    def _lost(self, generation: int, why: str) -> WorkspaceLost:
        note = self.lose(why) if generation == self.generation and self.sock is not None else (
            why or "the workspace process ended")
        exc = WorkspaceLost(note)
        exc.note = note
        return exc

    def _note_seen(self, seen) -> None:
        if type(seen) is not list:
            return
        for item in seen[:50]:
            if type(item) is list and len(item) == 2 and all(type(x) is str for x in item):
                self.seen.setdefault((item[0][:300], item[1][:300]), None)

    def _serve_callback(self, message: dict) -> None:
        ident = message.get("id")
        if message.get("op") != "callback" or type(ident) is not int or ident >= 0:
            raise ProtocolError(f"a request {str(message.get('op'))[:40]!r} from the workspace")
        function = self.callbacks.get(message.get("cb"))
        args, kwargs = message.get("args"), message.get("kwargs")
        if function is None or type(args) is not list or type(kwargs) is not list:
            raise ProtocolError("a malformed call of an evaluation function")
        try:
            decoded_args = [decode(self, a) for a in args]
            decoded_kwargs = {}
            for pair in kwargs:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                    raise ProtocolError("a malformed keyword argument")
                decoded_kwargs[pair[0]] = decode(self, pair[1])
        except ProtocolError:
            raise
        try:
            reply = {"id": ident, "value": encode(self, function(*decoded_args, **decoded_kwargs))}
        except WorkspaceLost:
            raise
        except Exception as exc:  # noqa: BLE001 - the test's function raised: the workspace code sees it raise
            reply = {"id": ident, "error": {"types": [k.__name__ for k in type(exc).__mro__ if k.__module__ == "builtins"],
                                            "type": type(exc).__name__, "message": str(exc)[:2000], "traceback": ""}}
        self._send(reply)

    def callback_number(self, function) -> int:
        number = self.callback_numbers.get(id(function))
        if number is None or self.callbacks.get(number) is not function:
            number = len(self.callbacks) + 1
            self.callbacks[number] = function
            self.callback_numbers[id(function)] = number
        return number

    def remote_for(self, handle: int, type_name: str):
        key = (self.generation, handle)
        remote = self.remotes.get(key)
        if remote is None:
            if handle in self.released:  # its last proxy died, and the worker sent it again before the release
                self.released.remove(handle)
            remote = Remote(self, None, handle, self.generation, type_name)
            self.remotes[key] = remote
        return remote

    def remote_for_path(self, path: tuple, type_name: str):
        return Remote(self, path, None, 0, type_name)


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# --- objects of the workspace ------------------------------------------------------------------------------------


def _refuse(what: str):
    def method(self, *args):
        kind = object.__getattribute__(self, "_type")
        exc = NotPlainData(f"{what} a {kind} object of the workspace: the evaluation compares plain data only "
                           "(None, bool, int, float, str, bytes, lists, tuples, dicts, sets, numpy arrays, pandas "
                           "frames), so a test must compare what the object's attributes or methods return")
        exc.note = f"{what} a {kind} object, not plain data"
        raise exc

    return method


class Remote:
    """An object of the workspace, in its worker: named by a path from a module (``document.Document``, which
    any worker can look up again) or by a handle of the worker that made it. Attributes, calls, items, lengths
    and iteration are the worker's; comparisons, membership and truth are refused (:class:`NotPlainData`)."""

    __slots__ = ("_link", "_path", "_handle", "_generation", "_type", "__weakref__")

    def __init__(self, link, path, handle, generation, type_name):
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_generation", generation)
        object.__setattr__(self, "_type", type_name)

    def _reference(self):
        path = object.__getattribute__(self, "_path")
        if path is not None:
            return {"p": list(path)}
        link = object.__getattribute__(self, "_link")
        if object.__getattribute__(self, "_generation") != link.generation or link.sock is None:
            exc = WorkspaceLost("an object made by a workspace process that has since been replaced")
            exc.note = "used an object of a workspace process that was replaced after an earlier failure"
            raise exc
        return {"h": object.__getattribute__(self, "_handle")}

    def _ask(self, op: str, **fields):
        link = object.__getattribute__(self, "_link")
        return link.request({"op": op, "target": self._reference(), **fields})

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        path = object.__getattribute__(self, "_path")
        if path is not None:  # a name any worker can look up again: the attribute, or a longer path to it
            return object.__getattribute__(self, "_link").request(
                {"op": "get", "target": {"p": list(path)}, "name": name, "keep": False}, opaque_path=(*path, name))
        return self._ask("get", name=name)

    def __setattr__(self, name, value):
        self._ask("set", name=name, value=encode(object.__getattribute__(self, "_link"), value))

    def __delattr__(self, name):
        self._ask("del", name=name)

    def __call__(self, *args, **kwargs):
        link = object.__getattribute__(self, "_link")
        return self._ask("call", args=[encode(link, a) for a in args],
                         kwargs=[[k, encode(link, v)] for k, v in kwargs.items()])

    def __getitem__(self, key):
        return self._ask("item", key=encode(object.__getattribute__(self, "_link"), key))

    def __setitem__(self, key, value):
        link = object.__getattribute__(self, "_link")
        self._ask("setitem", key=encode(link, key), value=encode(link, value))

    def __delitem__(self, key):
        self._ask("delitem", key=encode(object.__getattribute__(self, "_link"), key))

    def __len__(self):
        n = self._ask("len")
        if type(n) is not int or n < 0:
            raise WorkspaceLost("the workspace gave a length that is not a count")
        return n

    def __iter__(self):
        items = self._ask("list")
        if type(items) is not list:
            raise WorkspaceLost("the workspace gave items that are not a list")
        return iter(items)

    def __str__(self):
        text = self._ask("str")
        if type(text) is not str:
            raise WorkspaceLost("the workspace gave a str() that is not a string")
        return text

    def __repr__(self):
        kind = object.__getattribute__(self, "_type")
        path = object.__getattribute__(self, "_path")
        return f"<workspace {'.'.join(path)}>" if path else f"<workspace {kind} object>"

    def __instancecheck__(self, obj):
        return self._ask("isinstance", object=encode(object.__getattribute__(self, "_link"), obj)) is True

    def __del__(self):
        try:
            if object.__getattribute__(self, "_path") is None:
                link = object.__getattribute__(self, "_link")
                if object.__getattribute__(self, "_generation") == link.generation:
                    link.released.append(object.__getattribute__(self, "_handle"))
        except Exception:  # noqa: BLE001 - at interpreter shutdown
            pass

    __hash__ = object.__hash__

    def __eq__(self, other):
        if other is self:
            return True
        return _refuse("compared")(self)

    def __ne__(self, other):
        if other is self:
            return False
        return _refuse("compared")(self)

    __lt__ = __le__ = __gt__ = __ge__ = _refuse("ordered")
    __contains__ = _refuse("searched (in)")
    __bool__ = _refuse("asked for the truth of")
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse("did arithmetic with")
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = _refuse("did arithmetic with")
    __neg__ = __pos__ = __abs__ = _refuse("did arithmetic with")
    __float__ = __int__ = __index__ = __complex__ = _refuse("converted to a number")
