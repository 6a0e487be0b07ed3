"""Set resource limits on this process, then replace it with the sandboxed command.

Usage: ``python -I -S _child.py '<limits json>' -- <argv...>`` (also runnable as
``python -m latte_lab.sandbox._child ...``).

Why a wrapper module instead of ``preexec_fn``: ``preexec_fn`` runs Python code between ``fork`` and
``exec`` in a possibly multi-threaded parent, which can deadlock; ``subprocess`` documents it as unsafe
with threads. Here the limits are set by a fresh interpreter that then ``execv``s the target, so the
limits apply to the target and are inherited by everything it spawns.

The sandbox calls this file by path with ``-I -S`` (isolated mode, no ``site``): the workspace
directory is never on ``sys.path`` (a workspace file called ``resource.py`` cannot shadow the module we
need) and start-up stays at a few milliseconds. Only the standard library is imported, and this file's
own directory is removed from ``sys.path`` before any import.

Limits json keys (each optional; ``null`` or absent means "leave as is"):
``cpu`` seconds (RLIMIT_CPU), ``as`` bytes (RLIMIT_AS), ``fsize`` bytes (RLIMIT_FSIZE), ``nproc``
processes (RLIMIT_NPROC; the parent adds what the user already runs, because the kernel counts all of
the user's processes and threads, not only the sandbox's). The kernel does not enforce RLIMIT_NPROC for
root, so the parent also counts the sandbox's processes while it runs (see ``latte_lab.sandbox.run``).
"""

import sys

_HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else ""
sys.path[:] = [p for p in sys.path if p not in ("", _HERE)]

import json
import os
import resource

EXIT_SETUP_FAILED = 126  # the shell's "found but could not be executed" code
CPU_HARD_SLACK_SECONDS = 2  # hard CPU limit above the soft one: SIGXCPU (reportable) comes first


def _set(kind: int, value: int, hard_extra: int = 0) -> None:
    _soft, hard = resource.getrlimit(kind)
    new_hard = value + hard_extra
    if hard != resource.RLIM_INFINITY:  # an unprivileged process cannot raise its hard limit
        value, new_hard = min(value, hard), min(new_hard, hard)
    resource.setrlimit(kind, (value, new_hard))


def apply_limits(limits: dict) -> list[str]:
    """Apply the limits dict (see the module docstring) to the current process.

    Returns warnings for limits the platform refused (e.g. RLIMIT_AS on macOS); the run goes on
    without them rather than not at all. A malformed dict raises ValueError.
    """
    wanted = []
    if limits.get("cpu") is not None:
        # At the soft limit the kernel sends SIGXCPU, at the hard limit SIGKILL; equal limits would
        # make the kill win and hide the reason.
        wanted.append(("RLIMIT_CPU", int(limits["cpu"]), CPU_HARD_SLACK_SECONDS))
    if limits.get("as") is not None:
        wanted.append(("RLIMIT_AS", int(limits["as"]), 0))
    if limits.get("fsize") is not None:
        wanted.append(("RLIMIT_FSIZE", int(limits["fsize"]), 0))
    if limits.get("nproc") is not None:
        # root is exempt in the kernel; setting it anyway is harmless and documents intent.
        wanted.append(("RLIMIT_NPROC", int(limits["nproc"]), 0))
    # No core dumps: a crashing agent script must not drop hundreds of MiB into the workspace.
    wanted.append(("RLIMIT_CORE", 0, 0))
    warnings = []
    for name, value, extra in wanted:
        kind = getattr(resource, name, None)
        if kind is None:
            warnings.append(f"{name} is not available on this platform")
            continue
        try:
            _set(kind, value, extra)
        except (ValueError, OSError) as exc:
            warnings.append(f"could not set {name}: {exc}")
    return warnings


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: _child.py '<limits json>' -- <command...>\n")
        return EXIT_SETUP_FAILED
    try:
        warnings = apply_limits(json.loads(argv[0]))
    except (ValueError, TypeError, AttributeError) as exc:
        sys.stderr.write(f"sandbox: invalid limits {argv[0]!r}: {exc}\n")
        return EXIT_SETUP_FAILED
    for warning in warnings:
        sys.stderr.write(f"sandbox: warning: {warning}\n")
    target = argv[2:]
    try:
        os.execv(target[0], target)
    except OSError as exc:
        sys.stderr.write(f"sandbox: could not start {target[0]!r}: {exc}\n")
        return EXIT_SETUP_FAILED
    return EXIT_SETUP_FAILED  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
