"""What the judge of a hidden evaluation (``_judge_session.py``) knows of values and errors before any link to the
workspace: its limits, the errors a test fails with when the workspace misbehaves (:class:`WorkspaceError` and
kin), an exception of the workspace made into one of them (:func:`remote_error`), and numpy's and pandas' values
rebuilt from plain data (:func:`_decode_array`).

Loaded by path by the judge's session (``_judge_link.py`` too); only the standard library, and numpy or pandas
when a value needs them, are imported.
"""

import base64

# pytest leaves this module's frames out of failure reports (see _judge_session.py)
__tracebackhide__ = True
MAX_FRAME_BYTES = 64 * 2**20  # _workspace_host.MAX_FRAME_BYTES
MAX_DEPTH = 64
NUMERIC_KINDS = "biufc"
LIMIT_NOTES = {"RecursionError": "recursion limit", "MemoryError": "memory limit"}
TRACEBACK_LINES = 7  # of the worker's traceback, shown with a workspace exception


class WorkspaceError(Exception):
    """Something went wrong between the judge and the workspace (the test fails, with ``note`` as its note)."""

    note = ""


class NotPlainData(WorkspaceError):
    """A workspace object was compared, searched or asked for its truth: the judge compares plain data only."""


class WorkspaceLost(WorkspaceError):
    """The worker did not answer, died, flooded its output, or broke the protocol; a new one serves the next call."""


class ProtocolError(Exception):
    """A message that does not follow the protocol (decoding is strict)."""


class RemoteError(WorkspaceError):
    """An exception raised by workspace code. Its class derives from the built-in exceptions the original did
    (so ``pytest.raises(ValueError)`` sees a workspace ``ValueError``); ``remote_type`` names the original class
    and ``remote_traceback`` is the worker's traceback."""

    remote_type = ""
    remote_traceback = ""

    def __str__(self):
        message = self.args[0] if self.args else ""
        text = f"{self.remote_type}: {message}" if self.remote_type else str(message)
        if self.remote_traceback:  # where in the workspace: the last lines of the worker's traceback
            tail = self.remote_traceback.rstrip().splitlines()[-TRACEBACK_LINES:]
            text += "\n  (in the workspace)\n" + "\n".join(tail)
        return text


_ERROR_CLASSES: dict = {}


def _error_class(base):
    cls = _ERROR_CLASSES.get(base)
    if cls is None:
        cls = type(f"Workspace{base.__name__}", (RemoteError, base), {"__module__": "workspace"})
        _ERROR_CLASSES[base] = cls
    return cls


def remote_error(error) -> RemoteError:
    """The exception to raise here for a worker's description of one (only built-in bases are taken; one that is
    not an ``Exception``, such as ``SystemExit``, becomes a plain :class:`RemoteError`)."""
    import builtins

    if not isinstance(error, dict):
        raise ProtocolError("an error that is not an object")
    types_ = error.get("types")
    message, name, tb = error.get("message", ""), error.get("type", ""), error.get("traceback", "")
    if not isinstance(types_, list) or not all(isinstance(x, str) for x in (message, name, tb)):
        raise ProtocolError("a malformed error")
    exc = None
    for base_name in types_:
        base = getattr(builtins, base_name, None) if isinstance(base_name, str) else None
        if isinstance(base, type) and issubclass(base, Exception) and base is not Exception:
            try:
                exc = _error_class(base)(message)
                break
            except TypeError:  # a constructor that wants more (UnicodeDecodeError): a more general base
                continue
    if exc is None:
        exc = RemoteError(message)
    exc.remote_type = name[:200]
    exc.remote_traceback = tb
    limit = next((LIMIT_NOTES[b] for b in types_ if b in LIMIT_NOTES), None)
    if limit is not None:
        exc.note = f"the workspace code hit its {limit} ({name})"
    return exc


# --- values -----------------------------------------------------------------------------------------------------

_PLAIN = (type(None), bool, int, float, str)


def _is_shape(shape) -> bool:
    return type(shape) is list and len(shape) <= 32 and all(type(n) is int and n >= 0 for n in shape)


def _library(name):
    try:
        return __import__(name)
    except ImportError:
        raise ProtocolError(f"a {name} value, and {name} is not installed for the evaluation") from None


def _decode_array(dtype, shape, data):
    numpy = _library("numpy")
    if type(dtype) is not str or type(data) is not str or not _is_shape(shape):
        raise ProtocolError("a malformed array")
    try:
        kind = numpy.dtype(dtype)
    except TypeError:
        raise ProtocolError(f"an array of dtype {dtype[:40]!r}") from None
    if kind.kind not in NUMERIC_KINDS or kind.hasobject or kind.fields is not None or kind.subdtype is not None:
        raise ProtocolError(f"an array of dtype {dtype[:40]!r}")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise ProtocolError("a malformed array") from None
    size = 1
    for n in shape:
        size *= n
    if size * kind.itemsize != len(raw):
        raise ProtocolError("an array whose data does not fill its shape")
    return numpy.frombuffer(raw, dtype=kind).reshape(shape).copy()
