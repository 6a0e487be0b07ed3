"""Start a hidden evaluation's pytest session so that the code under test cannot steer its verdicts.

Usage: ``python -s -P <copy of this file> <pytest arguments>``, in a throwaway copy of a workspace
(:mod:`latte_lab.sandbox.trusted` makes the copy, starts this script and reads what it reports). Only the
standard library, pytest and the libraries the task names (``--import=pandas``) are imported; nothing from
latte_lab, and nothing from the workspace before they are loaded: ``-P`` keeps the working directory off
``sys.path`` until this script puts it there, after pytest, pluggy, unittest and those libraries are imported
from the interpreter's own site-packages. The trusted evaluation server (``_trusted_server.py``) loads this
file by path, with those imports made once, and calls :func:`main` in each child it forks, set up as that
command line would set it up.

What the session reports is not taken from pytest's reports, its exit status or a file the code under
test could write. A plugin of this script's own writes one line per test to a descriptor duplicated from
stderr before any workspace code runs, each line signed with a key made here (HMAC-SHA256) and numbered;
the key is the first line, written before the workspace is importable, and lives on only inside the HMAC
object. The parent (which reads the stream; nothing in the sandbox can read it back) accepts only lines
with a valid signature and the next number: a forged or replayed line is reported as tampering, a line
that never arrives leaves its test unscored (an error, never a pass).

A test's verdict comes from the exception information of its own setup, call and teardown, as this
plugin sees it, not from the report pytest builds from it. Before every test, and again at its end, the
plugin checks that pytest, pluggy, unittest and builtins are as they were when the session started
(module attributes, class attributes, registered plugins and hook implementations): whatever was changed
is put back and reported, and a test during which something changed is not counted as passed. An audit
hook, installed as the session starts, reports (with the workspace file and line that did it) every
change to those packages' functions (their code, their defaults: put back at the next check) and every
walk of the garbage collector's object lists. Nothing is refused, so that code which games the tests is
scored as the same code would be without the attempt.

The threat model is code that games pytest: configuration, hooks, reports, exit codes, report files,
unittest. Code written against this script's own objects in memory is out of its scope.
"""

import os
import sys
from itertools import chain
from operator import is_, methodcaller

PREFIX = "@@latte_lab-verdict "  # every line of the channel starts with it
PROTECTED = ("pytest", "_pytest", "pluggy", "unittest", "builtins", "iniconfig")
IMPORT_OPTION = "--import="  # a leading argument: an installed library the hidden suite reads its data with
# The installed libraries a hidden suite may ask for (eda's reads its data with pandas): the trusted evaluation
# server's second mode, "trusted-libraries", has them loaded before it forks a session.
LIBRARIES = ("numpy", "pandas")
# Module attributes that pytest itself sets and resets around every test (its assertion plugin's hooks)
# or fills in lazily; changing them cannot change a verdict, which never reads them.
VOLATILE = frozenset({
    ("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
    ("_pytest.assertion.util", "_config"), ("_pytest.assertion.rewrite", "_reprcompare"),
    ("_pytest.assertion.rewrite", "_assertion_pass"),
})
VOLATILE_MODULES = frozenset(module for module, _ in VOLATILE)
VOLATILE_CLASS_ATTRIBUTES = frozenset({"_pytest_diamond_inheritance_warning_shown"})  # set by pytest on first use
GC_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})  # recorded: they reach every object
_MISSING = object()
_VALUES = methodcaller("values")


def _protected(name):
    return name.split(".", 1)[0] in PROTECTED


class _Channel:
    """The signed, numbered lines this process reports on (a duplicate of stderr made at start)."""

    def __init__(self):
        import hashlib
        import hmac
        import json
        import secrets

        key = secrets.token_bytes(32)
        self._fd = os.dup(2)
        self._write = os.write
        self._dumps = json.dumps
        self._mac = hmac.new(key, digestmod=hashlib.sha256)
        self._seq = 0
        self._send(f"\n{PREFIX}key {key.hex()}\n")
        del key

    def _send(self, text):
        data = text.encode("utf-8", "backslashreplace")
        while data:
            try:
                n = self._write(self._fd, data)
            except InterruptedError:
                continue
            except OSError:
                return  # the reader is gone: what is not sent is unscored, never passed
            data = data[n:]

    def record(self, kind, payload):
        self._seq += 1
        body = f"{self._seq} {kind} {self._dumps(payload, ensure_ascii=True)}"
        mac = self._mac.copy()
        mac.update(body.encode("ascii"))
        self._send(f"{PREFIX}{mac.hexdigest()} {body}\n")


_ROOT = ""  # the workspace copy's directory, with a trailing separator
_TRUSTED_FILES = frozenset()  # the test files the evaluation brought (the only trusted files under _ROOT)


def _untrusted_frame():
    """The innermost frame of the workspace's own code on the current stack (a file under the working
    directory other than the evaluation's test files), or None when the operation comes from pytest,
    the standard library or the evaluation's tests alone."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_ROOT) and filename not in _TRUSTED_FILES:
            return frame
        frame = frame.f_back
    return None


def _where(frame):
    filename = frame.f_code.co_filename
    return f"{filename[len(_ROOT):] if filename.startswith(_ROOT) else filename}:{frame.f_lineno}"


class _Guard:
    """What the session's trusted packages look like at its start, checked and restored on demand."""

    def __init__(self, channel, pluginmanager):
        self.channel = channel
        self.pm = pluginmanager
        self.modules = {}
        self.classes = {}  # every class the protected modules define: its attributes at the start
        self.tampered = False  # set by the audit hook and by check(); read and cleared per test
        self.pending = {}  # (id, attribute) -> (function, attribute, original value), put back by check()
        self._busy = False
        self._snapshot_modules()
        self.plugins = list(pluginmanager.get_plugins())
        self.hooks = self._hookimpls()
        self._watch()

    def _snapshot_modules(self):
        for name, module in list(sys.modules.items()):
            if module is None or not _protected(name) or name in self.modules:
                continue
            namespace = vars(module)
            self.modules[name] = (module, dict(namespace))
            for value in list(namespace.values()):
                if isinstance(value, type) and value.__module__ == name and value not in self.classes:
                    self.classes[value] = dict(value.__dict__)

    def _watch(self):
        """Take the quick look's picture (:meth:`_as_watched`), right after a full check or a snapshot, when
        every namespace is as saved: the module names in ``sys.modules``, which module each protected name
        maps to, and every key and value object of the protected modules (but the ones with VOLATILE
        attributes) and of their classes, in order."""
        names = tuple(name for name in self.modules if name not in VOLATILE_MODULES)
        spaces = [vars(self.modules[name][0]) for name in names] + [cls.__dict__ for cls in self.classes]
        self.watched = (
            tuple(sys.modules), names, tuple(self.modules[name][0] for name in names), spaces,
            tuple(map(len, spaces)), tuple(chain.from_iterable(spaces)),
            tuple(chain.from_iterable(map(_VALUES, spaces))),
        )

    def _as_watched(self):
        """True when nothing :meth:`check` compares has changed since :meth:`_watch`: one walk in C over the
        same objects (by identity, calling nothing of theirs) instead of a comparison per namespace."""
        module_names, names, modules, spaces, lengths, keys, values = self.watched
        return (len(sys.modules) == len(module_names) and all(map(is_, sys.modules, module_names))
                and all(map(is_, map(sys.modules.get, names), modules)) and tuple(map(len, spaces)) == lengths
                and all(map(is_, chain.from_iterable(spaces), keys))
                and all(map(is_, chain.from_iterable(map(_VALUES, spaces)), values)))

    def _restore_module(self, name, changed):
        module, saved = self.modules[name]
        current = vars(module)
        if sys.modules.get(name, module) is not module:
            sys.modules[name] = module
            changed.append(f"sys.modules[{name!r}] replaced")
        for key in [k for k in current if k not in saved]:
            if (name, key) not in VOLATILE and not key.startswith("__"):
                changed.append(f"{name}.{key} added")
                del current[key]
        for key, value in saved.items():
            if current.get(key, _MISSING) is not value and (name, key) not in VOLATILE:
                changed.append(f"{name}.{key} replaced")
                current[key] = value

    def _restore_class(self, cls, changed):
        saved = self.classes[cls]
        current = cls.__dict__
        if len(current) == len(saved) and all(current.get(k, _MISSING) is v for k, v in saved.items()):
            return
        for key in [k for k in current if k not in saved]:
            if key in VOLATILE_CLASS_ATTRIBUTES:
                saved[key] = current[key]
                continue
            changed.append(f"{cls.__module__}.{cls.__qualname__}.{key} added")
            type.__delattr__(cls, key)
        for key, value in saved.items():
            if current.get(key, _MISSING) is not value and key not in ("__dict__", "__weakref__"):
                changed.append(f"{cls.__module__}.{cls.__qualname__}.{key} replaced")
                type.__setattr__(cls, key, value)

    def _hookimpls(self):
        found = {}
        for name, caller in vars(self.pm.hook).items():
            impls = getattr(caller, "_hookimpls", None)
            if isinstance(impls, list):
                found[name] = (caller, list(impls))
        return found

    def report(self, what, where):
        self.tampered = True
        self.channel.record("tamper", {"what": what, "where": where})

    def check(self):
        """Restore whatever changed since the session started; True when something had."""
        changed = []
        if self.pending:
            self._busy = True
            try:
                for target, name, value in self.pending.values():
                    setattr(target, name, value)
            finally:
                self._busy = False
            self.pending.clear()
            self.tampered = True
        for name in VOLATILE_MODULES & self.modules.keys():  # pytest changes these around every test
            self._restore_module(name, changed)
        watch = not self._as_watched()
        if watch:
            for name in self.modules:
                self._restore_module(name, changed)
            for cls in self.classes:
                self._restore_class(cls, changed)
        present = set(map(id, self.pm.get_plugins()))
        known = set(map(id, self.plugins))
        for plugin in list(self.pm.get_plugins()):
            if id(plugin) not in known:
                changed.append(f"plugin {self.pm.get_name(plugin) or type(plugin).__name__} registered")
                try:
                    self.pm.unregister(plugin)
                except Exception:  # noqa: BLE001 - reported already; the verdict does not depend on it
                    pass
        if present != known and len(present) < len(known):
            changed.append("a plugin was unregistered")
        for name, (caller, impls) in self.hooks.items():
            current = getattr(caller, "_hookimpls", None)
            if getattr(self.pm.hook, name, None) is not caller:
                setattr(self.pm.hook, name, caller)
                changed.append(f"hook {name} replaced")
            if not isinstance(current, list) or len(current) != len(impls) or any(
                    a is not b for a, b in zip(current, impls)):
                changed.append(f"hook {name} implementations changed")
                caller._hookimpls = list(impls)
        if watch or len(sys.modules) != len(self.watched[0]) or not all(map(is_, sys.modules, self.watched[0])):
            self._snapshot_modules()  # modules pytest imported since (lazily) join the snapshot
            self._watch()
        for what in changed:
            self.report(what, "")
        return bool(changed)

    def audit(self, event, args):
        """Record what the workspace's code does to the trusted packages' functions (their code, their
        defaults) and its walks of the collector; a function's changed attribute is put back at the next
        check. Nothing is refused here: refusing would fail code that, undone, might pass."""
        if self._busy or (event not in GC_EVENTS and event not in ("object.__setattr__", "object.__delattr__")):
            return
        self._busy = True
        try:
            if event in GC_EVENTS:
                what = event
            else:
                target, name = args[0], args[1]
                module = getattr(target, "__module__", None)
                if isinstance(target, type) or not callable(target) or not isinstance(module, str) or not _protected(module):
                    return
                what = f"{module}.{getattr(target, '__qualname__', type(target).__name__)}.{name} replaced"
            frame = _untrusted_frame()
            if frame is None:
                return
            if event == "object.__setattr__" and (id(target), name) not in self.pending:
                self.pending[(id(target), name)] = (target, name, getattr(target, name))
            self.report(what, _where(frame))
        finally:
            self._busy = False


class Verdicts:
    """The plugin that decides each test's outcome from its own exception information."""

    def __init__(self, channel, pytest):
        self.channel = channel
        self.guard = None
        self.skip_types = (pytest.skip.Exception,)
        self.xfail_type = pytest.xfail.Exception
        self.phases = {}

    def pytest_sessionstart(self, session):
        import unittest  # noqa: F401 - its classes are guarded from here on

        self.guard = _Guard(self.channel, session.config.pluginmanager)
        sys.addaudithook(self.guard.audit)
        self.channel.record("start", {})

    def pytest_collectreport(self, report):
        if report.failed:
            self.channel.record("collect_error", {"node": report.nodeid})

    def pytest_collection_finish(self, session):
        self.guard.check()
        self.channel.record("collected", {"nodes": [item.nodeid for item in session.items]})

    def pytest_runtest_protocol(self, item, nextitem):
        self.guard.check()
        self.guard.tampered = False
        self.phases[item.nodeid] = []

    def pytest_runtest_makereport(self, item, call):
        # called by pytest for each phase before its own report is made (this plugin's hookimpl runs
        # first: it is registered last); the phase's outcome is the exception pytest caught, if any
        changed = self.guard.check() if call.when == "teardown" else False
        excinfo = call.excinfo
        if changed or self.guard.tampered:
            outcome = "tampered"
        elif excinfo is None:
            outcome = "ok"
        elif isinstance(excinfo.value, self.skip_types):
            outcome = "skipped"
        elif isinstance(excinfo.value, self.xfail_type) or (call.when == "call" and _xfails(item, excinfo.value)):
            outcome = "xfailed"
        else:
            outcome = "failed"
        self.phases.setdefault(item.nodeid, []).append((call.when, outcome))
        if call.when == "teardown":
            self.channel.record("test", {"node": item.nodeid, "outcome": _fold(self.phases.pop(item.nodeid))})

    def pytest_sessionfinish(self, session, exitstatus):
        self.guard.check()
        self.channel.record("end", {"exitstatus": int(exitstatus)})


def _xfails(item, exc):
    """Whether the test carries an ``xfail`` mark that expects this exception (a failure it expects)."""
    for mark in item.iter_markers(name="xfail"):
        condition = mark.args[0] if mark.args else mark.kwargs.get("condition", True)
        if isinstance(condition, str) or not condition:
            continue
        raises = mark.kwargs.get("raises")
        if raises is None or isinstance(exc, raises):
            return True
    return False


def _fold(phases):
    """One outcome from a test's phases: passed only when every phase was clean."""
    outcomes = dict(phases)
    if "tampered" in outcomes.values():
        return "failed"
    if outcomes.get("setup") == "skipped" or outcomes.get("call") in ("skipped", "xfailed"):
        return "skipped" if outcomes.get("teardown", "ok") == "ok" else "error"
    if outcomes.get("setup") not in ("ok", None) or outcomes.get("teardown") not in ("ok", None):
        return "error"
    if outcomes.get("call") == "ok":
        return "passed"
    return "failed" if "call" in outcomes else "error"


def main(argv):
    """``argv``: ``--import=<library>`` options, then the trusted test files (relative paths) up to a ``--``,
    then pytest's arguments. Each library is imported from the interpreter's own site-packages before the copy
    joins ``sys.path``, so a module of the workspace by that name never stands in for it in the suite."""
    global _ROOT, _TRUSTED_FILES
    channel = _Channel()
    import _pytest.config  # noqa: F401
    import pluggy  # noqa: F401
    import pytest  # from site-packages: the working directory is not on sys.path yet (-P)

    while argv and argv[0].startswith(IMPORT_OPTION):
        name = argv.pop(0)[len(IMPORT_OPTION):]
        try:
            __import__(name)
        except ImportError:  # not installed: the suite's own import fails, as it would have
            sys.modules[name] = None  # and never takes the workspace's module of that name instead

    split = argv.index("--")
    root = os.getcwd()
    _ROOT = os.path.join(root, "")
    _TRUSTED_FILES = frozenset(os.path.join(root, path) for path in argv[:split])
    hooks = {"pytest_sessionstart": {"trylast": True}, "pytest_runtest_protocol": {"tryfirst": True},
             "pytest_runtest_makereport": {"tryfirst": True}, "pytest_sessionfinish": {"tryfirst": True}}
    for name, options in hooks.items():
        setattr(Verdicts, name, pytest.hookimpl(**options)(getattr(Verdicts, name)))
    sys.path.insert(0, root)  # where ``python -m pytest`` puts it: the workspace's modules import
    code = pytest.main(argv[split + 1:], plugins=[Verdicts(channel, pytest)])
    sys.stdout.flush()
    os._exit(int(code))


if __name__ == "__main__":
    main(sys.argv[1:])
