"""A process forked from a fork server, run as ``python <script> <args>`` would run (:func:`run_script`).

Loaded by path by ``_server_core.py``; only the standard library is imported.
"""

import os
import signal
import sys


def exit_code(code: object) -> int:
    """The process exit status Python gives ``raise SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:  # noqa: BLE001
        pass
    return 1


def run_script(argv: list, env: dict) -> int:
    """Run ``python <argv[0]> <argv[1:]>`` in this process as the interpreter runs a script file: a fresh
    ``__main__`` (``__file__`` absolute, the source file loader, no spec), ``sys.argv`` as given,
    ``sys.path[0]`` the script's directory, the code compiled from the file's bytes, an uncaught exception
    shown by ``sys.excepthook`` from the script's own frame on (exit status 1), ``SystemExit`` and
    ``KeyboardInterrupt`` ending the process as they end an interpreter. Returns the exit status."""
    import _frozen_importlib_external as bootstrap_external
    import builtins

    path = argv[0]
    full = os.path.abspath(path)
    sys.argv[:] = list(argv)
    sys.orig_argv[:] = [sys.executable, *argv]
    sys.path[0] = os.path.dirname(os.path.realpath(full))
    main = type(sys)("__main__")
    main.__annotations__ = {}
    main.__builtins__ = builtins
    main.__file__ = full
    main.__cached__ = None
    main.__loader__ = bootstrap_external.SourceFileLoader("__main__", full)
    sys.modules["__main__"] = main
    try:
        with open(full, "rb") as fh:
            source = fh.read()
        code = compile(source, full, "exec", dont_inherit=True)
    except BaseException:  # noqa: BLE001 - unreadable, a syntax or encoding error, null bytes: the
        # interpreter words these its own way; let it run the script itself, in this very process
        _exec_interpreter(argv, env)
    del source
    try:
        exec(code, main.__dict__)
    except SystemExit as exc:
        return exit_code(exc.code)
    except BaseException as exc:  # noqa: BLE001 - the interpreter reports it and exits with 1
        return _uncaught(exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
    return 0


def _exec_interpreter(argv: list, env: dict) -> None:
    """Replace this process by ``python <argv>``: the same process, limits, descriptors and directory."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as subprocess does before it execs a program
    os.execve(sys.executable, [sys.executable, *argv], env)


def _uncaught(exc: BaseException, tb) -> int:
    """What the interpreter does with an exception that ended the script (``tb``: from the script's frame)."""
    exc.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    try:
        sys.excepthook(type(exc), exc, tb)
    except BaseException:  # noqa: BLE001 - as PyErr_Print: say so, then the original with the default hook
        try:
            sys.stderr.write("Error in sys.excepthook:\n")
            sys.__excepthook__(*sys.exc_info())
            sys.stderr.write("\nOriginal exception was:\n")
            sys.__excepthook__(type(exc), exc, tb)
        except BaseException:  # noqa: BLE001
            pass
    if isinstance(exc, KeyboardInterrupt):  # the interpreter ends by SIGINT, so its parent sees the signal
        try:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        except Exception:  # noqa: BLE001
            pass
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return 1


