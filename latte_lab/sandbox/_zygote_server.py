"""The fork server of the local backend's test runs and agents' scripts (client side:
:mod:`latte_lab.sandbox.zygote`).

Started as ``python .../latte_lab/sandbox/_zygote_server.py <control fd> <mode> <spares>`` (the file path, like
:mod:`latte_lab.sandbox._child`, so a workspace can never shadow it), with the same allowlisted environment as any
sandbox run minus the per-run variables (no ``PYTHONPATH``, no run marker, a private ``HOME``), so it never holds a
key and never opens a workspace. Its mode is its second argument: ``pytest`` (it imports pytest and ``runpy``, what
``python -m pytest`` imports before it runs anything from the workspace, and rehearses a session on a suite of its
own, through pytest's public API only) or ``script`` (it imports nothing for the runs, and each run starts from the
modules a fresh interpreter starts with); its third says when it forks the next run's processes ahead
(``idle``, ``always`` or ``never``). It tells the parent it is ready and serves requests until its control socket
reaches end of file. What it does per run, and its protocol, is the shared core's (``_server_core.py``).
"""

import sys

STARTUP_MODULES = frozenset(sys.modules)  # what a fresh interpreter has imported before it runs a script
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


if __name__ == "__main__":
    CORE = _load("_server_core.py", "_latte_lab_server_core")
    CORE.prepare(sys.argv[2], sys.argv[3], STARTUP_MODULES)
    CORE.serve(int(sys.argv[1]))
