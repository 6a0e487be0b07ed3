"""The values of a hidden evaluation's workspace host (``_workspace_host.py``): the frames its sockets carry
(:func:`send_frame`, :func:`recv_frame`), how a value crosses to the judge as plain data and back
(:class:`Values`: encode, decode, handles), and how an exception of the workspace is described to the judge
(:func:`describe_error`). The protocol is in the host's docstring.

Loaded by path by the host (the judge copies it beside the host's copy in the workspace's copy); only the standard
library is imported.
"""

import base64
import json
import struct
import sys

MAX_FRAME_BYTES = 64 * 2**20  # one message either way (a DataFrame of a few hundred thousand cells)
MAX_DEPTH = 64  # nesting of a value
MAX_TEXT_CHARS = 4000  # an exception's message, a traceback, a str() of an object
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
