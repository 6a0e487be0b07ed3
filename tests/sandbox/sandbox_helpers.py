"""Helpers of the sandbox tests: the backends to run on, and finding processes a run left behind.

Processes are found by a unique token in their command line, never by pid: inside a bubblewrap sandbox a
process's pid is that of its PID namespace, meaningless on the host.
"""

from __future__ import annotations

import time
import uuid

import psutil
import pytest

from latte_lab.sandbox import bwrap

BWRAP_WORKS, BWRAP_WHY, _ = bwrap.probe()
needs_bwrap = pytest.mark.skipif(not BWRAP_WORKS, reason=f"bubblewrap sandbox unavailable: {BWRAP_WHY}")
BACKENDS = [pytest.param("local", id="local"), pytest.param("bwrap", id="bwrap", marks=needs_bwrap)]


def token() -> str:
    return "t" + uuid.uuid4().hex[:12]


def with_token(tok: str) -> list[psutil.Process]:
    """Live processes whose command line mentions ``tok``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(tok in part for part in proc.info["cmdline"] or ()):
            found.append(proc)
    return found


def survivors(tok: str, seconds: float = 3.0) -> list[psutil.Process]:
    """Processes mentioning ``tok`` still alive after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := with_token(tok)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
