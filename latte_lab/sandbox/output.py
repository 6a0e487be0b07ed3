"""A run's output, read while it runs: stdout and stderr capped (head and tail kept, the rest counted), the workspace a
bubblewrap sandbox hands back spooled, and the loop that reads them until the run ends or must be stopped.
"""

from __future__ import annotations

import fcntl
import os
import selectors
import subprocess
import tempfile
import time
from pathlib import Path

from latte_lab.sandbox.limits import OUTPUT_CAPTURE_BYTES, SandboxLimits
from latte_lab.sandbox.process import count_processes
from latte_lab.sandbox.request import RunHandle

PIPE_DRAIN_SECONDS = 1.0  # after the child exits, how long to keep reading what is still buffered
PROCESS_CHECK_INTERVAL_SECONDS = 0.2  # how often a running sandbox's process count is checked
DISK_CHECK_INTERVAL_SECONDS = 0.05  # how often the local backend sizes the workspace (~0.1 ms for a task's)
READ_CHUNK_BYTES = 2**16  # one pipe read
OUTPUT_PAUSE_SECONDS = 0.02  # after reading a run's output, how long to let more gather before reading again
PIPE_BUFFER_BYTES = 2**20  # requested pipe capacity (Linux F_SETPIPE_SZ) for fewer wake-ups
EXPORT_SPOOL_BYTES = 8 * 2**20  # a returned workspace is kept in memory up to this, then in a file


class OutputCapture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest.

    Memory stays O(limit) whatever the child prints.

    >>> cap = OutputCapture(10)
    >>> for chunk in (b"abc", b"defgh", b"ijklmnop", b"qr"):
    ...     cap.feed(chunk)
    >>> cap.text()
    'abcde\\n[... 8 bytes elided ...]\\nnopqr'
    """

    def __init__(self, limit: int = OUTPUT_CAPTURE_BYTES):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        if len(chunk) >= self.half:
            self.tail = bytearray(chunk[-self.half :])
        else:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def elided(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        if self.elided <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[... {self.elided} bytes elided ...]\n{tail}"


class Spool:
    """The returned workspace (a tar stream), in memory up to a point, then in a file; capped."""

    def __init__(self, limit: int):
        self.file = tempfile.SpooledTemporaryFile(max_size=EXPORT_SPOOL_BYTES)
        self.limit = limit
        self.total = 0

    @property
    def overflow(self) -> bool:
        return self.total > self.limit

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if not self.overflow:
            self.file.write(chunk)


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (symlinks not followed)."""
    total, stack = 0, [str(path)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    total += entry.stat(follow_symlinks=False).st_size  # what was written, even before it hits the disk
            except OSError:
                continue
    return total


def _enlarge_pipe(fd: int) -> None:
    if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux only
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BUFFER_BYTES)
        except OSError:
            pass  # above /proc/sys/fs/pipe-max-size for unprivileged users: keep the default


def _streams(proc: RunHandle, out: OutputCapture, err: OutputCapture, spool: Spool | None) -> list[tuple[int, object]]:
    streams = [(s.fileno(), c) for s, c in ((proc.stdout, out), (proc.stderr, err)) if s is not None and not s.closed]
    if spool is not None and getattr(proc, "export_fd", None) is not None:
        streams.append((proc.export_fd, spool))
    return streams


def pump(
    proc: RunHandle,
    out: OutputCapture,
    err: OutputCapture,
    spool: Spool | None,
    deadline: float,
    limits: SandboxLimits,
    watched: list[tuple[Path, int]],
) -> str:
    """Read the run's pipes until it ends or must be stopped. Returns why it must be stopped: "timeout",
    "processes" (more than allowed), "disk" (a watched directory grew past its limit), or ""."""
    overhead = getattr(proc, "reaper_processes", 0)
    sel = selectors.DefaultSelector()
    for fd, sink in _streams(proc, out, err, spool):
        _enlarge_pipe(fd)
        sel.register(fd, selectors.EVENT_READ, sink)
    next_disk_check = time.monotonic()
    next_check = next_disk_check + PROCESS_CHECK_INTERVAL_SECONDS
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if proc.poll() is not None:
                return ""
            if now >= next_check:
                next_check = now + PROCESS_CHECK_INTERVAL_SECONDS
                cap = limits.max_processes
                if cap is not None and count_processes(proc.pid, tree_only=True) - overhead > cap:
                    return "processes"
            if watched and now >= next_disk_check:
                next_disk_check = now + DISK_CHECK_INTERVAL_SECONDS
                if any(tree_bytes(path) > cap for path, cap in watched):
                    return "disk"
            soonest = min(next_check, next_disk_check) if watched else next_check
            wait = max(min(deadline - now, soonest - now, 0.1), 0.001)
            if not sel.get_map():  # every pipe closed: only the exit (or the deadline) is left to wait for
                try:
                    proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    pass
                continue
            read, drained = False, True
            for key, _ in sel.select(wait):
                chunk = os.read(key.fd, READ_CHUNK_BYTES)
                if chunk:
                    key.data.feed(chunk)
                    read, drained = True, drained and len(chunk) < READ_CHUNK_BYTES
                else:
                    sel.unregister(key.fd)
            if read and drained:
                # A run writes its output a line at a time (PYTHONUNBUFFERED): a failing test session wrote
                # about 400 times and woke this process as often. The pipes hold what comes meanwhile (their
                # capacity is enlarged), so read them again only after a pause, waiting meanwhile on the
                # run's end alone, which still ends the wait at once. A run that fills a read is read on.
                try:
                    proc.wait(timeout=max(min(OUTPUT_PAUSE_SECONDS, deadline - time.monotonic()), 0.001))
                except subprocess.TimeoutExpired:
                    pass
    finally:
        sel.close()


def drain(proc: RunHandle, out: OutputCapture, err: OutputCapture, spool: Spool | None) -> None:
    """Read what is left in the pipes (bounded in time: a stray writer cannot hold us)."""
    sel = selectors.DefaultSelector()
    for fd, sink in _streams(proc, out, err, spool):
        sel.register(fd, selectors.EVENT_READ, sink)
    deadline = time.monotonic() + PIPE_DRAIN_SECONDS
    try:
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(max(deadline - time.monotonic(), 0)):
                chunk = os.read(key.fd, READ_CHUNK_BYTES)
                if chunk:
                    key.data.feed(chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
