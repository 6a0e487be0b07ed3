"""The trusted evaluation server: a fork server for the judges of hidden evaluations (client side:
:mod:`latte_lab.sandbox.zygote` in mode ``trusted``, called from :func:`latte_lab.sandbox.judge.run_judged`).

A judge (``_judge_session.py``) is a pytest session that runs a task's hidden tests and decides their verdicts;
it never runs workspace code (a worker in the sandbox does, ``_workspace_host.py``). Starting a fresh ``python -s
-P <judge session>`` for every evaluation spends most of its time importing pytest; this server does that once.
It is started as ``python -s -P .../latte_lab/sandbox/_trusted_server.py <control fd> <mode> <spares>`` (by
path, like the other servers; ``<mode>`` is ``trusted`` or ``trusted-libraries``; ``-s -P``: no user site directory, and neither the working directory nor the
script's directory on ``sys.path``), in an empty directory of its own, with the allowlisted environment of a run
minus its per-run variables: it never holds a key and never opens a workspace. It runs on the host, on both
backends: what it runs is trusted code, and no process of its runs ever runs a line of workspace code.

Before it serves it imports, from the interpreter's own ``sys.path`` only (the standard library and
site-packages): pytest, with the fork servers' rehearsal (``_server_core.py`` loaded by path and prepared in mode
``pytest``: pytest's public API only, a session on a suite of the server's own); and the judge's session script
(``_judge_session.py``, by path). In its mode ``trusted-libraries`` (:func:`load_libraries`) it also imports the
libraries a hidden suite reads its data with (:data:`LIBRARIES`: numpy, pandas); only evaluations that ask for a
library (``--import=pandas``) are sent to that mode.

Each request is served as the pytest fork server serves one (``_server_core.serve``: a reaper and a child
forked per evaluation; the child sets its limits, drops its capabilities, points 0-2 at the run's standard input
(its socket to the workspace host) and pipes, closes every other descriptor, enters the judge's directory, takes
the run's whole environment, forgets the modules the server's plumbing imported). The child then does what
``python -s -P <judge session> <arguments>`` does: ``sys.path`` is the interpreter's own, ``sys.argv`` the
session's, ``random`` reseeded from the system, and :func:`_judge_session.main` runs the session.

The server is not dumpable and ignores the signals it can; nothing a child does goes back into it (its memory is
copied on fork).
"""

import sys

STARTUP_MODULES = frozenset(sys.modules)
_HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else ""
sys.path[:] = [p for p in sys.path if p not in ("", _HERE)]

import importlib.util  # noqa: E402
import os  # noqa: E402


def _load(filename: str, name: str):
    """A module beside this file, imported by path, not by name (a workspace can never shadow it)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE or ".", filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the fork servers' machinery (the reaper, the child's set-up, the spares), with pytest imported and rehearsed
# through its public API; the spares' policy is set again from the server's arguments below
CORE = _load("_server_core.py", "_latte_lab_server_core")
CORE.prepare("pytest", "idle", STARTUP_MODULES)
import random  # noqa: E402

import pytest  # noqa: E402, F401

JUDGE = _load("_judge_session.py", "_latte_lab_judge_session")
JUDGE_NAME = os.path.join(_HERE or ".", "_judge_session.py")  # sys.argv[0] of the session, as python gives it
LIBRARIES = ("numpy", "pandas")  # what mode "trusted-libraries" has loaded before it forks a session
CORE.keep_loaded()  # a run keeps these; what the server imports later, it does not
BASE_PATH = tuple(CORE.BASE_PATH)  # the interpreter's own sys.path (this server runs with -P)


IGNORED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM",
                   "SIGPROF", "SIGTSTP", "SIGTTIN", "SIGTTOU")


def protect() -> None:
    """Not dumpable (its memory and descriptors out of reach of ``/proc`` and ``ptrace``), and deaf to every
    signal in :data:`IGNORED_SIGNALS` (a run of the same user cannot end it by them; SIGKILL and SIGSTOP
    remain). Its runs get back the dispositions a fresh interpreter has (:func:`run_session`)."""
    import signal

    CORE.prctl(CORE.PR_SET_DUMPABLE, 0)
    for name in IGNORED_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_IGN)


def run_session(args: list) -> int:
    """In the forked child, set up by ``_server_core.run_child``: the session ``python -s -P <judge session>
    <args>`` runs. :func:`_judge_session.main` ends the process itself; an exception on the way is reported
    and ends it with status 1, as the interpreter would."""
    import signal

    for name in IGNORED_SIGNALS:  # as a fresh interpreter starts (SIGINT: Python's own handler)
        signal.signal(getattr(signal, name), signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL)
    sys.path[:] = list(BASE_PATH)  # -P: neither the judge's directory nor the script's
    sys.argv[:] = [JUDGE_NAME, *args]
    sys.modules["__main__"] = JUDGE
    random.seed()  # a fresh interpreter seeds from the system; the server's state is every child's otherwise
    JUDGE.main([str(a) for a in args])
    return 0  # not reached: main() ends the process


CORE.SESSION = run_session
LIBRARIES_MODE = "trusted-libraries"  # zygote.TRUSTED_LIBRARIES_MODE


def load_libraries() -> None:
    """Mode ``trusted-libraries``: import :data:`LIBRARIES` from the interpreter's own sys.path (the server's
    directory is empty and ``-P`` keeps it off), and keep them in every session."""
    for name in LIBRARIES:
        try:
            __import__(name)
        except ImportError:  # not installed: a session that asks for it records that itself
            pass
    CORE.keep_loaded()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == LIBRARIES_MODE:
        load_libraries()
    CORE.prepare_spares(sys.argv[3] if len(sys.argv) > 3 else "idle")
    protect()
    CORE.serve(int(sys.argv[1]))
