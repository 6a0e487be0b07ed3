"""The judge of a hidden evaluation: the pytest session that runs a task's hidden tests and decides every verdict,
in a process that never runs a line of workspace code.

Usage: ``python -s -P _judge_session.py [--import=<library> ...] --report=<file> --modules=<a,b> --trusted=<f,g>
[--call-timeout=<s>] -- <pytest arguments>``, in a directory of its own (the judge's: the hidden tests, their
data and a copy of the workspace's files, read as data) that no process running workspace code can see, with its
standard input one end of a ``SOCK_SEQPACKET`` socket to the workspace host (``_workspace_host.py``: a process
in the sandbox, in a copy of the workspace without anything hidden). The trusted evaluation server
(``_trusted_server.py``) loads this file by path with pytest imported once, and calls :func:`main` in each child
it forks. Only the standard library, pytest and the libraries named with ``--import`` are imported; nothing of
latte_lab.

How the tests reach the workspace: a module of the workspace (``--modules``: its top-level modules and packages)
is imported here as a :class:`RemoteModule` (:class:`WorkspaceFinder`, first on ``sys.meta_path``). Every
attribute read, call, item and length of it, and of what its calls return, is a request to a worker of the host
(:class:`Link`), which runs the workspace code and answers with plain data: None, bool, int, float, str, bytes,
lists, tuples, dicts, sets, numpy arrays and pandas frames, decoded here with strict types (:func:`decode`), so
that no object of the workspace's making is ever compared, hashed or asked for its truth here. An object that is
not plain data stays in the worker behind a handle (:class:`Remote`): its methods and attributes can be used, but
comparing it, asking whether something is in it, or its truth, fails the test with a note (the judge compares
plain data only). A function of a test passed to workspace code stays here; the worker asks the judge to call it.

A task author writes hidden tests plainly: ``from document import Document`` and ``assert
Document("a b").words == ["a", "b"]`` work as they read. What differs from an ordinary session: values cross by
copy (a list a method returns is a copy; change the object through its methods), workspace objects are not
compared directly (compare what their attributes and methods return), and files the workspace wrote are read as
data (``Path("findings.json").read_text()``), never imported or executed: an audit hook refuses to compile or run
any file of the judge's copy of the workspace (:func:`_refuse_workspace_code`).

A call that does not come back within ``--call-timeout`` seconds, a worker that dies or writes beyond its output
cap, a result the judge cannot decode: that test fails with a note saying which (a recursion or memory limit
too), the host replaces the worker, and the rest of the suite runs on a new one. What the worker's audit hook saw
workspace code try (frame walks, code swaps, pytest's internals) and any message out of protocol are reported as
tampering, never scored.

The report (``--report``) is a JSON line per event: ``{"collected": [...]}``, ``{"test": node, "outcome": ...}``,
``{"collect_error": node}``, ``{"note": node, "text": ...}``, ``{"tampering": what, "where": file:line}``, and
``{"end": exit status}`` last. Only this process writes it, in a directory only it and its parent can reach.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import socket
import sys
import types

# pytest leaves this module's frames out of failure reports: a test's report shows the test's own line and the
# workspace's exception (with the last lines of the worker's traceback), not the proxy's plumbing, whose source
# pytest would otherwise parse for each failure
__tracebackhide__ = True
CALL_TIMEOUT_SECONDS = 10.0  # one call into the workspace (with the calls it makes back), by default
IMPORT_OPTION = "--import="
# Names a workspace module never takes over here: the judge's own libraries (and the standard library's).
JUDGE_LIBRARIES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "numpy", "pandas"})


def _sibling(filename: str, name: str):
    """A module beside this file, imported by path once per process (a workspace can never shadow it)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), filename))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


VALUES = _sibling("_judge_values.py", "_latte_lab_judge_values")  # limits, errors
LINK = _sibling("_judge_link.py", "_latte_lab_judge_link")  # values as plain data, the socket, handles
MAX_FRAME_BYTES, MAX_DEPTH = VALUES.MAX_FRAME_BYTES, VALUES.MAX_DEPTH
WorkspaceError, NotPlainData, WorkspaceLost = VALUES.WorkspaceError, VALUES.NotPlainData, VALUES.WorkspaceLost
ProtocolError, RemoteError, remote_error = VALUES.ProtocolError, VALUES.RemoteError, VALUES.remote_error
Link, Remote, decode, encode = LINK.Link, LINK.Remote, LINK.decode, LINK.encode


class RemoteModule(types.ModuleType):
    """A module of the workspace: its attributes are looked up in the worker (by path, so a new worker serves
    them too)."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        link = _LINK[0]
        return link.request({"op": "get", "target": {"p": [self.__name__]}, "name": name, "keep": False},
                            opaque_path=(self.__name__, name))

    def __repr__(self):
        return f"<workspace module {self.__name__!r}>"


_LINK: list = []  # the session's Link


class WorkspaceFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the workspace's modules (and their submodules) as :class:`RemoteModule`: imported in the worker,
    never here."""

    def __init__(self, names):
        self.names = frozenset(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return RemoteModule(spec.name)

    def exec_module(self, module):
        _LINK[0].request({"op": "import", "name": module.__name__})


def workspace_modules(names) -> list:
    """Of the workspace's top-level module names, those a test's import is to reach in the workspace: not the
    standard library's, not the judge's own libraries, not another installed package's."""
    import importlib.util

    chosen = []
    for name in names:
        if (not name.isidentifier() or name in sys.stdlib_module_names or name in JUDGE_LIBRARIES
                or name in sys.modules):
            continue
        try:
            if importlib.util.find_spec(name) is not None:
                continue
        except (ImportError, ValueError):
            pass
        chosen.append(name)
    return chosen


def _refuse_workspace_code(root: str, trusted: frozenset):
    """An audit hook: no file of the judge's directory but the evaluation's own test files is ever compiled or
    run here (the workspace's files lie there as data)."""

    def inside(filename) -> bool:
        if isinstance(filename, bytes):
            filename = os.fsdecode(filename)
        if not isinstance(filename, str) or not os.path.isabs(filename):  # "<string>", "<frozen ...>"
            return False
        path = os.path.realpath(filename)
        return path.startswith(root) and path not in trusted

    def hook(event, args):
        if event == "compile" and len(args) > 1 and inside(args[1]):
            raise RuntimeError(f"the evaluation never runs workspace code: {args[1]} is read as data here; import "
                               "the workspace's modules (they run in the workspace's own process)")
        if event == "exec" and args and hasattr(args[0], "co_filename") and inside(args[0].co_filename):
            raise RuntimeError(f"the evaluation never runs workspace code ({args[0].co_filename})")

    return hook


# --- the session ----------------------------------------------------------------------------------------------------


class Report:
    """The session's report file and the plugin that fills it."""

    def __init__(self, path: str, link: Link, finder: WorkspaceFinder):
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at the session's end
        self.link, self.finder = link, finder
        self.phases: dict = {}

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record, ensure_ascii=True) + "\n")
        self.file.flush()

    def pytest_sessionstart(self, session):
        # first: before pytest's assertion rewriter, which would otherwise find a workspace file on sys.path
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        sys.meta_path.insert(0, self.finder)

    def pytest_collection_modifyitems(self, session, config, items):
        self.write({"collected": [item.nodeid for item in items]})

    def pytest_collectreport(self, report):
        if report.failed:
            self.write({"collect_error": report.nodeid})

    def pytest_runtest_logreport(self, report):
        self.phases.setdefault(report.nodeid, {})[report.when] = report.outcome

    def pytest_runtest_logfinish(self, nodeid, location):
        phases = self.phases.pop(nodeid, {})
        setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
        if setup == "failed" or teardown == "failed":
            outcome = "error"
        elif setup == "skipped" or call == "skipped":
            outcome = "skipped"
        elif call == "failed":
            outcome = "failed"
        elif call == "passed":
            outcome = "passed"
        else:
            outcome = "error"
        self.write({"test": nodeid, "outcome": outcome})

    def pytest_exception_interact(self, node, call, report):
        note = _note_of(call.excinfo.value if call.excinfo is not None else None)
        if note:
            self.write({"note": node.nodeid, "text": note})

    def finish(self, status: int) -> None:
        for what, where in self.link.seen:
            self.write({"tampering": what, "where": where})
        if self.link.out_of_protocol:
            self.write({"tampering": "a message out of protocol from the workspace's process", "where": ""})
        self.write({"end": status})
        self.file.close()


def _note_of(exc) -> str:
    return getattr(exc, "note", "") if isinstance(exc, WorkspaceError) else ""


def parse_args(args: list) -> tuple[dict, list]:
    options = {"imports": [], "report": None, "modules": [], "trusted": [], "call_timeout": CALL_TIMEOUT_SECONDS}
    i = 0
    while i < len(args) and args[i] != "--":
        arg = args[i]
        if arg.startswith(IMPORT_OPTION):
            options["imports"].append(arg[len(IMPORT_OPTION):])
        elif arg.startswith("--report="):
            options["report"] = arg.split("=", 1)[1]
        elif arg.startswith("--modules="):
            options["modules"] = [n for n in arg.split("=", 1)[1].split(",") if n]
        elif arg.startswith("--trusted="):
            options["trusted"] = [n for n in arg.split("=", 1)[1].split(",") if n]
        elif arg.startswith("--call-timeout="):
            options["call_timeout"] = float(arg.split("=", 1)[1])
        else:
            raise SystemExit(f"_judge_session: unknown option {arg!r}")
        i += 1
    if options["report"] is None:
        raise SystemExit("_judge_session: --report is required")
    return options, args[i + 1:]


def main(args: list) -> None:
    """Run the session and end the process with pytest's exit status."""
    options, pytest_args = parse_args(args)
    for name in options["imports"]:  # from site-packages, before anything else
        try:
            __import__(name)
        except ImportError:
            pass
    root = os.path.realpath(os.getcwd()) + os.sep
    trusted = frozenset(os.path.realpath(os.path.join(root, p)) for p in options["trusted"])
    sys.addaudithook(_refuse_workspace_code(root, trusted))
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    link = Link(control, options["call_timeout"])
    _LINK[:] = [link]
    finder = WorkspaceFinder(workspace_modules(options["modules"]))
    sys.meta_path.insert(0, finder)
    report = Report(options["report"], link, finder)
    import pytest

    status = 3
    try:
        status = int(pytest.main(pytest_args, plugins=[report]))
    finally:
        try:
            report.finish(status)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001
                    pass
            os._exit(status & 0xFF)


if __name__ == "__main__":
    main(sys.argv[1:])
