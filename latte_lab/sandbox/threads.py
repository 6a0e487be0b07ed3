"""What running many trials as threads of one process (:mod:`latte_lab.sweep.inflight`) asks of the code they
share: one lock for Python's ``ast`` module, and waits on file descriptors that work whatever their number.

- CPython 3.11's ``ast`` module is not safe to use from several threads at once (a parse in one thread can
  fail another's with ``SystemError: AST constructor recursion depth mismatch``): every parse in latte_lab
  takes :data:`AST_LOCK` (:func:`parse`).
- ``select.select`` refuses descriptors numbered 1024 and up, and a process with dozens of trials in flight
  holds more than a thousand open files and sockets: :func:`readable` waits with ``poll`` instead.

>>> parse("x = 1").body[0].targets[0].id
'x'
>>> import os
>>> r, w = os.pipe()
>>> readable(r, 0), os.write(w, b"!"), readable(r, 0)
(False, 1, True)
"""

from __future__ import annotations

import ast
import math
import select
import threading

AST_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)`` under :data:`AST_LOCK`."""
    with AST_LOCK:
        return ast.parse(source, filename)


def readable(fd, timeout: float | None) -> bool:
    """Whether ``fd`` (a descriptor, or an object with ``fileno()``) has data to read, or its end, within
    ``timeout`` seconds (None: however long it takes)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)  # hang-ups and errors are always reported
    return bool(poller.poll(None if timeout is None else max(0, math.ceil(timeout * 1000))))


__all__ = ["AST_LOCK", "parse", "readable"]
