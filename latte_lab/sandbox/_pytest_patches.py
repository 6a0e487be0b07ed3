"""Opt-in changes to pytest's internals that make a sandboxed test run cheaper: on only with
``LATTE_LAB_PYTEST_PATCHES=1`` (:data:`latte_lab.sandbox.pytest.PATCHES_VAR`) and a pytest in the tested range.
By default every run uses pytest's public API only (a plain ``python -m pytest``, or a fork server that has
imported pytest and rehearsed a session).

Five changes, each a monkeypatch of a private name of pytest, each checking that pytest's internals are the
ones it was written against and leaving pytest alone otherwise (:func:`apply` says which took):

* ``statement_trees``: ``_pytest._code.source.getstatementrange_ast`` parses a source text once per process;
* ``code_paths``: ``_pytest._code.code.Code.path`` is made once per file name;
* ``fixture_scans``: a ``dir`` in ``_pytest.fixtures`` that scans each of pytest's own plugins for fixtures once;
* ``primed_rewrites``: ``_pytest.assertion.rewrite._rewrite_test`` takes a test module's code rewritten ahead
  (:func:`prime`, fork servers only);
* ``config_ahead``: ``_pytest.config.get_config`` hands a run's first session the plugin manager made ahead
  (:func:`prebuild_config`, fork servers only).

What a run prints and reports stays pytest's own, word for word (the sandbox tests compare it with plain
``python -m pytest``); ``tests/test_sandbox_zygote.py`` fails when a change no longer takes on the locked pytest.

Usage on the exec path: ``python .../latte_lab/sandbox/_pytest_patches.py <pytest arguments>`` (by path, like
:mod:`latte_lab.sandbox._child`; inside bubblewrap it is bound read-only into the sandbox): it puts the working
directory first on ``sys.path`` where ``python -m`` puts it, applies the first three changes and runs pytest's
``__main__`` through ``runpy`` exactly as ``-m`` does. A fork server loads this file by path and never runs
:func:`main`. Only the standard library and pytest are imported; nothing from latte_lab.
"""

import os
import sys


def share_statement_trees() -> bool:
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
        return False
    original = getattr(source_module, "getstatementrange_ast", None)
    if original is None or getattr(code_module, "getstatementrange_ast", None) is not original:
        return False
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
    return True


def cache_code_paths() -> bool:
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
        return False
    prop = code_module.Code.__dict__.get("path")
    fget = getattr(prop, "fget", None)
    absolutepath = getattr(code_module, "absolutepath", None)
    if not isinstance(prop, property) or absolutepath is None or fget is None or not {
            "getfile", "absolutepath", "exists"} <= set(fget.__code__.co_names):
        return False
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
    return True


def cache_plugin_fixture_scans() -> bool:
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
        return False
    manager = getattr(fixtures, "FixtureManager", None)
    lookup = getattr(manager, "_lookup_in_type_dict", None)
    find = getattr(manager, "_find_wrapped_fixture_def", None)
    definition = getattr(fixtures, "FixtureFunctionDefinition", None)
    safe_getattr = getattr(fixtures, "safe_getattr", None)
    if None in (lookup, find, definition, safe_getattr) or "dir" in vars(fixtures) or \
            "dir" not in manager.parsefactories.__code__.co_names:
        return False
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
    return True


def speed_up_sessions() -> dict[str, bool]:
    """The changes that make every session cheaper (the exec path's and a fork server's): which took."""
    return {"statement_trees": share_statement_trees(), "code_paths": cache_code_paths(),
            "fixture_scans": cache_plugin_fixture_scans()}


# Test modules rewritten ahead of the runs: {(path, SHA-256 of the source): code}. Filled by ``prime``
# messages (the parent sends the text of a workspace's test files; this process only parses, rewrites
# and compiles it, never executes it or opens a workspace file) and read by every forked run.
REWRITTEN: dict[tuple[str, bytes], object] = {}
MAX_REWRITTEN = 128  # entries kept (oldest dropped first); a dropped one is rewritten by the run itself


def use_primed_rewrites() -> bool:
    """Let a run take a test module's rewritten code from :data:`REWRITTEN` when its source is
    byte-identical, instead of parsing, rewriting and compiling it again (a fifth of a small suite's
    run). The decision to rewrite, the module's import and everything after it stay pytest's own; a run
    whose configuration asks for the assertion pass hook rewrites for itself."""
    import hashlib
    import importlib.util

    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return False
    original = getattr(rewrite, "_rewrite_test", None)
    if original is None:
        return False

    def _rewrite_test(fn, config):
        try:
            use = not config.getini("enable_assertion_pass_hook")
        except Exception:  # noqa: BLE001 - an unknown option: pytest's own path
            use = False
        if use and REWRITTEN:
            source = fn.read_bytes()
            code = REWRITTEN.get((str(fn), hashlib.sha256(source).digest()))
            if code is not None:
                return importlib.util.source_hash(source), code
        return original(fn, config)

    rewrite._rewrite_test = _rewrite_test
    return True


def prime(files: list) -> None:
    """Rewrite ``[[path, source text], ...]`` as pytest would for a run without the assertion pass
    hook, and keep the code for the runs. A file that does not parse, or whose rewrite warns (the
    warning belongs in the run's own report), is left to the run."""
    import ast
    import hashlib
    import warnings

    try:
        from _pytest.assertion.rewrite import rewrite_asserts
    except ImportError:
        return
    for path, text in files:
        source = text.encode("utf-8")
        key = (path, hashlib.sha256(source).digest())
        if key in REWRITTEN:
            continue
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tree = ast.parse(source, filename=path)
                rewrite_asserts(tree, source, path, None)
                code = compile(tree, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if caught:
            continue
        REWRITTEN[key] = code
        while len(REWRITTEN) > MAX_REWRITTEN:
            del REWRITTEN[next(iter(REWRITTEN))]


# The options of the public test command (``latte_lab.sandbox.pytest.PYTEST_ARGS`` without ``-m pytest``);
# only their ``-p no:`` part matters to the configuration made ahead.
RUN_OPTIONS = ("-q", "-rfE", "-p", "no:cacheprovider")
RUN_PROG = "python -m pytest"  # the program name pytest gives itself when run as ``python -m pytest``
PREBUILT = None  # (the "-p no:" names it was made for, the Config): taken by a run's first session


def blocked_plugins(args) -> tuple:
    """The ``-p no:NAME`` arguments that pytest's ``get_config`` acts on, read as it reads them
    (``consider_preparse(..., exclude_only=True)``): the one part of a command line that the
    configuration made before parsing depends on.

    >>> blocked_plugins(["-q", "-p", "no:cacheprovider", "-pno:warnings", "-p", "xdist", "-k", "p"])
    ('no:cacheprovider', 'no:warnings')
    """
    names, i, n = [], 0, len(args)
    while i < n:
        opt = args[i]
        i += 1
        if not isinstance(opt, str):
            continue
        if opt == "-p":
            if i >= n:
                break
            parg = args[i]
            i += 1
        elif opt.startswith("-p"):
            parg = opt[2:]
        else:
            continue
        parg = parg.strip() if isinstance(parg, str) else parg
        if isinstance(parg, str) and parg.startswith("no:"):
            names.append(parg)
    return tuple(names)


def prebuild_config(options=RUN_OPTIONS, prog=RUN_PROG) -> bool:
    """Make, ahead of the runs, what pytest's ``get_config`` makes at the start of every session -- a plugin
    manager with pytest's own forty plugins registered and their options added (about 5 % of a small
    suite's session) -- and let the first session of each forked run take it.

    It depends on nothing of a run but the ``-p no:`` arguments (:func:`blocked_plugins`) and the program
    name pytest shows in its usage messages, so a run whose arguments block other plugins, that calls
    ``pytest.main`` itself (another name) or passes it plugins, or that sets ``PYTEST_DEBUG`` (read when
    the plugin manager is made) makes its own, as does every later session of a run. The run's working
    directory and arguments become the configuration's invocation parameters, as ``get_config`` sets
    them. Everything after -- reading the configuration files, plugins named by the environment, conftest
    files -- is the run's own. Called again, it makes a new one (pytest's ``get_config`` is wrapped once).
    """
    global PREBUILT
    try:
        from _pytest import config as config_module
    except ImportError:
        return False
    original = getattr(config_module, "get_config", None)
    original = getattr(original, "made_ahead_from", original)  # pytest's own, if wrapped by an earlier call
    if original is None or not hasattr(getattr(config_module, "Config", None), "InvocationParams") \
            or os.environ.get("PYTEST_DEBUG"):
        return False
    try:
        PREBUILT = (blocked_plugins(options), prog, original(list(options), prog=prog))
    except Exception:  # noqa: BLE001 - another pytest: every run makes its own
        PREBUILT = None
        return False
    if config_module.get_config is original:
        config_module.get_config = _taking_prebuilt(original, config_module.Config.InvocationParams)
    return True


def _taking_prebuilt(original, invocation):
    """pytest's ``get_config``, returning :data:`PREBUILT` to the first call it fits (:func:`prebuild_config`)."""
    import pathlib

    def get_config(args=None, plugins=None, *, prog=None):
        global PREBUILT
        made, PREBUILT = PREBUILT, None
        if made is not None and plugins is None and prog == made[1] and not os.environ.get("PYTEST_DEBUG") \
                and blocked_plugins(list(args or ())) == made[0]:
            config = made[2]
            config.invocation_params = invocation(args=args or (), plugins=None, dir=pathlib.Path.cwd())
            return config
        return original(args, plugins, prog=prog)

    get_config.made_ahead_from = original
    return get_config


def main() -> None:
    sys.path[0] = os.getcwd()  # where ``python -m`` puts the working directory (not this file's directory)
    import runpy

    speed_up_sessions()
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
