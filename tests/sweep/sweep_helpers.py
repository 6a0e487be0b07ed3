"""Helpers of the sweep tests: a loopback OpenAI-compatible team server, sweep scripts run as processes,
and process-tree snapshots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from conftest_models import FakeProvider, Reply, openai_body

import latte_lab as ll
from latte_lab import prompts

WAIT_SECONDS = 180  # a loaded 2-core machine may take this long to get a sweep going


class TeamServer(FakeProvider):
    """Answers like a small LATTE team (the Lead plans one task, a worker fixes it), each reply after
    ``delay_s``; ``usage`` is the (input, output) tokens every reply reports."""

    solution = ll.tasks.get("debug").reference_solution()["signal_toolkit.py"]

    def __init__(self, delay_s: float = 0.0, usage=(11, 7)):
        super().__init__()
        self.delay_s, self.usage = delay_s, usage
        if delay_s:
            self.queue(*[Reply(delay_s=delay_s) for _ in range(100_000)])

    def default_body(self, path, body):
        last = body["messages"][-1]["content"]
        if "PLANNING" in last:
            text = 'Plan.\n<discover_task id="t1" title="Fix the module">Fix every bug.</discover_task>'
        elif prompts.READY_HEADER in last:
            text = 'Taking it. <claim_task id="t1" />'
        elif prompts.TASK_HEADER in last:
            text = f'<edit_file path="signal_toolkit.py">{self.solution}</edit_file>\n<complete_task id="t1" />'
        else:
            text = "Nothing to change."
        return openai_body(text, model=body["model"], usage=self.usage)

    def times(self) -> list[float]:
        with self._lock:
            return [r["time"] for r in self.requests]


LEAVE_SPECIAL_FILES = """import os, socket
os.symlink("/etc/passwd", "passwd")
os.symlink("signal_toolkit.py", "toolkit_link")
os.mkfifo("pipe")
sock = socket.socket(socket.AF_UNIX)
sock.bind("sock")
sock.close()
print("left them")
"""
SPECIAL_FILES_LEFT = {"workspace/passwd": "symlink -> /etc/passwd", "workspace/pipe": "fifo",
                      "workspace/sock": "socket", "workspace/toolkit_link": "symlink -> signal_toolkit.py"}


class SpecialFilesServer(TeamServer):
    """A :class:`TeamServer` whose worker, before fixing the module, runs a script leaving an absolute and a
    relative symlink, a FIFO and a socket in the workspace (:data:`SPECIAL_FILES_LEFT`)."""

    def default_body(self, path, body):
        if prompts.TASK_HEADER not in body["messages"][-1]["content"]:
            return super().default_body(path, body)
        text = (f'<edit_file path="leave.py">{LEAVE_SPECIAL_FILES}</edit_file>\n<run_script path="leave.py" />\n'
                f'<edit_file path="signal_toolkit.py">{self.solution}</edit_file>\n<complete_task id="t1" />')
        return openai_body(text, model=body["model"], usage=self.usage)


def start_script(code: str, *args: str, env: dict | None = None, new_session: bool = False) -> subprocess.Popen:
    """``python -c code args...`` with the test's environment (and ``env`` on top), output captured."""
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})}, start_new_session=new_session)


def wait_until(predicate, what: str, timeout: float = WAIT_SECONDS, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the sweep ended before {what}:\n{out}\n{err}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting until {what}")


def finished_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")
                  and ll.rundir.attempt_of(p.name)[1] is None) if out.is_dir() else []


def running_dirs(out: Path) -> list[Path]:
    running = out / ".sweep" / "running"
    return sorted(p for p in running.iterdir() if p.is_dir()) if running.is_dir() else []


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out
