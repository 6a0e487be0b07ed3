"""Start pytest in a sandboxed run as ``python -m pytest`` does, reporting failures at a fraction of the cost.

Usage: ``python .../latte_lab/sandbox/_pytest_boot.py <pytest arguments>`` (by path, like
:mod:`latte_lab.sandbox._child`; inside bubblewrap it is bound read-only into the sandbox). It puts the
working directory first on ``sys.path`` where ``python -m`` puts it, applies :func:`speed_up_sessions`,
and runs pytest's ``__main__`` through ``runpy`` exactly as ``-m`` does, so ``sys.argv``, ``__main__`` and
the exit status are those of ``python -m pytest``. The fork server (``_zygote_server.py``) loads this file
for the same function and never runs :func:`main`.

Every change here makes pytest do the same work once instead of many times; what a run prints and
reports is pytest's own, word for word (the sandbox tests compare it with plain ``python -m pytest``).
Each one checks that pytest's internals are the ones it was written against and leaves pytest alone
otherwise.

Only the standard library and pytest are imported; nothing from latte_lab.
"""

import os
import sys


def share_statement_trees() -> None:
    """Parse a module's source once per run for all of its traceback entries.

    To print a failure pytest finds the statement around each traceback line by parsing the *whole*
    file and walking its syntax tree, and it keeps that tree for one failure only: a run with 30 failing
    tests parsed the test file and the module under test 30 times each (about half of such a run's CPU).
    Here the tree is kept per source text for the life of the process, so the report is the same text,
    made with one parse per file. Where pytest's internals differ (another version) nothing is changed.
    """
    import ast
    import warnings

    try:
        from _pytest._code import code as code_module
        from _pytest._code import source as source_module
    except ImportError:
        return
    original = getattr(source_module, "getstatementrange_ast", None)
    if original is None or getattr(code_module, "getstatementrange_ast", None) is not original:
        return
    trees: dict = {}

    def getstatementrange_ast(lineno, source, assertion=False, astnode=None):
        if astnode is None:
            content = str(source)
            astnode = trees.get(content)
            if astnode is None:
                with warnings.catch_warnings():  # as pytest: no duplicate warnings from compiling
                    warnings.simplefilter("ignore")
                    astnode = ast.parse(content, "source", "exec")
                trees[content] = astnode
        return original(lineno, source, assertion, astnode)

    source_module.getstatementrange_ast = getstatementrange_ast
    code_module.getstatementrange_ast = getstatementrange_ast


def cache_code_paths() -> None:
    """Make a traceback entry's file path once per file name and run.

    pytest turns the file name of every frame of every failure's traceback into a ``Path`` several
    times over (to cut and filter the traceback, then to print it): a run with 30 failing tests built
    about 800 paths, a fifth of its test loop. The ``Path`` of an absolute file name is the same every
    time, so it is kept; the check that the file exists is still made each time, as pytest makes it.
    """
    import inspect

    try:
        from _pytest._code import code as code_module
    except ImportError:
        return
    prop = code_module.Code.__dict__.get("path")
    fget = getattr(prop, "fget", None)
    absolutepath = getattr(code_module, "absolutepath", None)
    if not isinstance(prop, property) or absolutepath is None or fget is None or not {
            "getfile", "absolutepath", "exists"} <= set(fget.__code__.co_names):
        return
    paths: dict = {}

    def path(self):
        filename = inspect.getfile(self.raw)
        if not filename:
            return ""
        try:
            p = paths.get(filename)
            if p is None:
                p = absolutepath(filename)
                if os.path.isabs(filename):  # a relative one depends on the working directory
                    paths[filename] = p
            if not p.exists():
                raise OSError("path check failed.")
            return p
        except OSError:
            return filename

    code_module.Code.path = property(path, doc=prop.__doc__)


def cache_plugin_fixture_scans() -> None:
    """Look through each of pytest's own plugins for fixtures once per process, not once per session.

    At the start of every session pytest walks every attribute of every registered plugin (forty
    modules and objects, a few thousand names) to find its fixtures: an eighth of a small suite's run.
    For pytest's own plugins the answer depends only on their code, so the names that hold a fixture
    (or that pytest would warn about) are kept per plugin, with the exact namespace they were found in;
    a plugin whose names or values changed since (a conftest patching one, say) is walked again.
    Plugins that are not pytest's own (conftest files, installed plugins) are always walked.
    """
    try:
        from _pytest import fixtures
    except ImportError:
        return
    manager = getattr(fixtures, "FixtureManager", None)
    lookup = getattr(manager, "_lookup_in_type_dict", None)
    find = getattr(manager, "_find_wrapped_fixture_def", None)
    definition = getattr(fixtures, "FixtureFunctionDefinition", None)
    safe_getattr = getattr(fixtures, "safe_getattr", None)
    if None in (lookup, find, definition, safe_getattr) or "dir" in vars(fixtures) or \
            "dir" not in manager.parsefactories.__code__.co_names:
        return
    import builtins
    import operator
    import types

    builtin_dir = builtins.dir
    scans: dict = {}  # id(module or class) -> (it, its namespace then, the names holding a fixture)

    def namespace(owner) -> tuple:
        """What a plugin's fixtures depend on: the names and values of its namespace(s), in order."""
        spaces = [owner.__dict__] if isinstance(owner, types.ModuleType) else [b.__dict__ for b in owner.__mro__]
        return tuple(tuple(d) for d in spaces), tuple(tuple(d.values()) for d in spaces)

    def unchanged(before: tuple, now: tuple) -> bool:
        return before[0] == now[0] and all(
            all(map(operator.is_, a, b)) for a, b in zip(before[1], now[1]))

    def own(owner) -> bool:
        name = owner.__name__ if isinstance(owner, types.ModuleType) else getattr(owner, "__module__", "")
        return isinstance(name, str) and (name == "pytest" or name.startswith(("_pytest.", "pytest.")))

    def scan_dir(holder):
        names = builtin_dir(holder)
        # pytest looks a holder's fixtures up on the holder itself for modules and classes and on its
        # class for anything else; the names it walks are always the holder's own dir().
        owner = holder if isinstance(holder, (type, types.ModuleType)) else type(holder)
        if not own(owner):
            return names
        seen = scans.get(id(owner))
        space = namespace(owner)
        if seen is None or seen[0] is not owner or not unchanged(seen[1], space):
            matter = set()
            for name in names:  # an instance's own attributes never hold one: pytest looks on its class
                raw = lookup(None, owner, name)
                if (raw is not None and find(None, raw) is not None) or \
                        type(safe_getattr(owner, name, None)) is definition:
                    matter.add(name)
            seen = scans[id(owner)] = (owner, space, frozenset(matter))
        matter = seen[2]
        return [name for name in names if name in matter]

    fixtures.dir = scan_dir


def speed_up_sessions() -> None:
    """Every change of this module, for the process it runs in."""
    share_statement_trees()
    cache_code_paths()
    cache_plugin_fixture_scans()


def main() -> None:
    sys.path[0] = os.getcwd()  # where ``python -m`` puts the working directory (not this file's directory)
    import runpy

    speed_up_sessions()
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
