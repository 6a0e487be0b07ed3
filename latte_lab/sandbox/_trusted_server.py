"""The trusted evaluation server: a fork server for hidden evaluations (client side: :mod:`latte_lab.sandbox.zygote`
in mode ``trusted``, called from :func:`latte_lab.sandbox.trusted.run_trusted_pytest`).

A hidden evaluation's session used to start a fresh ``python -s -P <boot script>`` for every evaluation, which
spends most of its time importing pytest. This server does that part once. It is started as ``python -s -P
.../latte_lab/sandbox/_trusted_server.py <control fd> trusted <spares>`` (by path, like the other servers, so
a workspace can never shadow it; ``-s -P``: no user site directory, and neither the working directory nor the
script's directory on ``sys.path``), in an empty directory of its own, with the allowlisted environment of a
run minus its per-run variables: it never holds a key and never opens a workspace. On the bubblewrap backend
the same code is the init of a kept sandbox of its own (``_sandbox_server.py`` in mode ``trusted``), PID 1 of
its namespace, reset before every evaluation.

Before it serves it imports, from the interpreter's own ``sys.path`` only (the standard library and
site-packages):

* pytest, with the pytest fork server's rehearsal (``_zygote_server.py`` loaded by path in mode ``pytest``:
  pytest's public API only, a session on a suite of the server's own; never the opt-in changes to pytest's
  internals);
* pluggy, unittest, ``_pytest.config`` and what the boot script's channel uses (the imports the boot script
  makes before any workspace code can run);
* the boot script itself (``_trusted_boot.py``, by path);
* in its mode ``trusted-libraries`` only (:func:`load_libraries`), the installed libraries a hidden suite reads
  its data with (``_trusted_boot.LIBRARIES``: numpy, pandas; a third of a second for pandas in each session
  otherwise). Only evaluations that ask for a library (``--import=pandas``) are sent to that mode, so no
  other session starts with them loaded, as none would in a fresh interpreter running the boot script.

It runs no workspace code, ever: it is never sent a workspace's file, and the only message it acts on is a run
request. Each request is served as the pytest fork server serves one (``_zygote_server.serve``: a reaper and a
child forked per evaluation; the child sets its limits, drops its capabilities, points 0-2 at the run's pipes,
closes every other descriptor, enters the copy, takes the run's whole environment, forgets the modules the
server's plumbing imported). The child then does what ``python -s -P <boot script> <arguments>`` does: ``sys.path``
is the interpreter's own (the copy is put first by the boot script, after pytest is imported), ``sys.argv``
the boot script's, ``random`` reseeded from the system, and :func:`_trusted_boot.main` runs the session with
its signed channel, its guards and its audit hook, all made in the child.

The server is not dumpable (nothing of the user can read or write its memory through ``/proc`` or ``ptrace``;
the runs have dropped every capability), ignores the signals it can (a run of the same user may still stop or
kill it: the next evaluation then starts a new server, or a fresh interpreter), and holds no writable state
a child can reach: its memory is copied on fork, its descriptors other than the run's are closed in the child,
and nothing a child writes is read back by the server. docs/concepts/sandbox.md reviews what an evaluation
could leave for the next; tests/test_trusted_server.py probes each item.
"""

import sys

_HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else ""
sys.path[:] = [p for p in sys.path if p not in ("", _HERE)]

import os  # noqa: E402


def _load(filename: str, name: str):
    """A module beside this file, imported by path, not by name (a workspace can never shadow it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE or ".", filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# pytest imported and rehearsed, through its public API (mode "pytest": the module's name does not end in
# "_script" or "_patched"), with the fork server's machinery: the reaper, the child's set-up, the spares.
ZYGOTE = _load("_zygote_server.py", "_latte_lab_zygote_server_trusted")
import hashlib  # noqa: E402, F401  (the boot script's channel)
import hmac  # noqa: E402, F401
import json  # noqa: E402, F401
import random  # noqa: E402
import secrets  # noqa: E402, F401
import unittest  # noqa: E402, F401

import _pytest.config  # noqa: E402, F401
import pluggy  # noqa: E402, F401
import pytest  # noqa: E402, F401

BOOT = _load("_trusted_boot.py", "_latte_lab_trusted_boot")
BOOT_NAME = ".latte_lab-trusted-boot.py"  # sys.argv[0] of the session (trusted.BOOT_NAME, its copy's name)
ZYGOTE.WARM_MODULES = frozenset(sys.modules)  # a run keeps these; what the server imports later, it does not
BASE_PATH = tuple(ZYGOTE.BASE_PATH)  # the interpreter's own sys.path (this server runs with -P)


IGNORED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM",
                   "SIGPROF", "SIGTSTP", "SIGTTIN", "SIGTTOU")


def protect() -> None:
    """Not dumpable (its memory and descriptors out of reach of ``/proc`` and ``ptrace``), and deaf to every
    signal in :data:`IGNORED_SIGNALS` (a run of the same user cannot end it by them; SIGKILL and SIGSTOP
    remain). Its runs get back the dispositions a fresh interpreter has (:func:`run_session`)."""
    import signal

    ZYGOTE._prctl(ZYGOTE.PR_SET_DUMPABLE, 0)
    for name in IGNORED_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_IGN)


def run_session(args: list) -> int:
    """In the forked child, set up by ``_zygote_server._run_child``: the session ``python -s -P <boot script>
    <args>`` runs. :func:`_trusted_boot.main` ends the process itself; an exception on the way is reported
    and ends it with status 1, as the interpreter would."""
    import signal

    for name in IGNORED_SIGNALS:  # as a fresh interpreter starts (SIGINT: Python's own handler)
        signal.signal(getattr(signal, name), signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL)
    sys.path[:] = list(BASE_PATH)  # -P: neither the copy nor the boot script's directory, until main() adds it
    sys.argv[:] = [BOOT_NAME, *args]
    sys.modules["__main__"] = BOOT
    random.seed()  # a fresh interpreter seeds from the system; the server's state is every child's otherwise
    BOOT.main([str(a) for a in args])
    return 0  # not reached: main() ends the process


ZYGOTE.TRUSTED = run_session
LIBRARIES_MODE = "trusted-libraries"  # zygote.TRUSTED_LIBRARIES_MODE


def load_libraries() -> None:
    """Mode ``trusted-libraries``: import ``_trusted_boot.LIBRARIES`` from the interpreter's own sys.path (the
    server's directory is empty and ``-P`` keeps it off), and keep them in every session."""
    for name in BOOT.LIBRARIES:
        try:
            __import__(name)
        except ImportError:  # not installed: a session that asks for it records that itself
            pass
    ZYGOTE.WARM_MODULES = frozenset(sys.modules)


if __name__ == "_latte_lab_trusted_server":  # the init of a kept bubblewrap sandbox (_sandbox_server.py)
    protect()

if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == LIBRARIES_MODE:
        load_libraries()
    ZYGOTE.SPARES = sys.argv[3] if len(sys.argv) > 3 else "idle"
    ZYGOTE.USE_SPARES = ZYGOTE.SPARES != "never" and ZYGOTE.USE_SPARES
    protect()
    ZYGOTE.serve(int(sys.argv[1]))
