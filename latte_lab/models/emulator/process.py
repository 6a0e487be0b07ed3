"""The emulator as a process of its own: started by ``latte-lab emulate`` or :func:`spawn`, stopped with its
parent.

A spawned emulator (:func:`spawn`) runs ``python -m latte_lab.cli emulate``; it says where it listens on its
first line of output, and exits when the process that started it ends, however that ends (it checks every
:data:`PARENT_CHECK_SECONDS`), so a benchmark or a notebook never leaves one behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from latte_lab.errors import LatteError

PARENT_CHECK_SECONDS = 0.25  # how often an emulator checks that the process that started it is alive
START_TIMEOUT_SECONDS = 120.0  # a loaded machine may take this long to import latte_lab and open the port
STOP_SECONDS = 5.0  # an emulator asked to stop is killed after this
READY_PREFIX = "latte-lab emulate: listening on "


def watch_parent(parent_pid: int, stop: threading.Event) -> None:
    """Sets ``stop`` once ``parent_pid`` is no longer this process's parent (it ended)."""
    def watch():
        while not stop.wait(PARENT_CHECK_SECONDS):
            if os.getppid() != parent_pid:
                stop.set()

    threading.Thread(target=watch, name="latte-emulator-parent", daemon=True).start()


def serve_until_stopped(emulator, stop: threading.Event, *, on_ready=None) -> None:
    """Serves ``emulator`` until ``stop`` is set (its parent ended, SIGTERM, Ctrl-C)."""
    emulator.start()
    try:
        if on_ready is not None:
            on_ready(emulator)
        while not stop.wait(PARENT_CHECK_SECONDS):
            pass
    finally:
        emulator.stop()


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event, *, interrupt: bool = True):
    """For the duration of the block, SIGTERM sets ``stop``, and SIGINT too when ``interrupt``; otherwise SIGINT
    is let pass (a command run against the emulator handles it, and a handler, unlike an ignored signal, is
    not inherited by the command). Outside the main thread, nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, (lambda signum, frame: stop.set()) if interrupt else (lambda signum, frame: None))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class EmulatorProcess:
    """An emulator running in a process of its own (:func:`spawn`): ``url``, ``openai_url``, ``log_path``,
    ``stop()``; usable as a context manager."""

    def __init__(self, proc: subprocess.Popen, url: str, log_path: Path | None):
        self.proc, self.url, self.log_path = proc, url, log_path

    def __repr__(self) -> str:
        return f"EmulatorProcess({self.url}, pid={self.proc.pid})"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def entries(self) -> list[dict]:
        """The request log written so far (needs ``log_path``)."""
        from latte_lab.models.emulator import read_log

        if self.log_path is None:
            raise LatteError("this emulator keeps no log file: spawn it with log_path=")
        return read_log(self.log_path)

    def stop(self) -> int | None:
        """Stops the emulator (SIGTERM, then SIGKILL after :data:`STOP_SECONDS`); returns its exit status."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_SECONDS)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        return self.proc.returncode

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


OPTION_NAMES = {
    "latency_s": "--latency", "latency_sigma": "--latency-sigma", "requests_per_minute": "--rpm",
    "tokens_per_minute": "--tpm", "error_rate": "--error-rate", "drop_rate": "--drop-rate", "burst_s": "--burst",
    "seed": "--seed", "profile": "--profile", "port": "--port",
}


def spawn(*, log_path: str | os.PathLike | None = None, **settings) -> EmulatorProcess:
    """Starts an emulator in a process of its own and waits until it listens. ``settings`` are those of
    :class:`~latte_lab.models.emulator.Conditions` (``latency_s``, ``tokens_per_minute``, ...) and
    ``profile``, ``port``; ``log_path`` is where its request log goes (JSON lines)."""
    args = [sys.executable, "-m", "latte_lab.cli", "emulate"]
    for name, value in settings.items():
        if name not in OPTION_NAMES:
            raise LatteError(f"spawn: unknown emulator setting {name!r}; known: {', '.join(OPTION_NAMES)}")
        if value is not None:
            args += [OPTION_NAMES[name], str(value)]
    if log_path is not None:
        args += ["--log", str(log_path)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    result: list[str] = []

    def read_first_line():
        result.append(proc.stdout.readline())

    reader = threading.Thread(target=read_first_line, daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_SECONDS)
    line = result[0] if result else ""
    if not line.startswith(READY_PREFIX):
        proc.kill()
        _, err = proc.communicate(timeout=STOP_SECONDS)
        raise LatteError(f"the emulator did not start: {(err or line).strip().splitlines()[-1:] or 'no output'}")
    url = line[len(READY_PREFIX):].split()[0]
    return EmulatorProcess(proc, url, Path(log_path) if log_path is not None else None)


__all__ = ["EmulatorProcess", "serve_until_stopped", "spawn", "stop_on_signals", "watch_parent"]
