"""What a pytest fork server (``_zygote_server.py``) does before it serves: the imports of ``python -m
pytest``, test modules rewritten ahead of the runs (:func:`prime`, read by :func:`use_primed_rewrites`), one
rehearsed session (:func:`rehearse`) and the plugin manager a session starts from (:func:`prebuild_config`),
so that every run forked from it starts with that work done.

Loaded by path, like the server itself. Only the standard library and pytest are imported; nothing from
latte_lab and nothing from a workspace: :func:`prime` is sent the text of test files, and parses, rewrites
and compiles it without running it.
"""

import os
import sys


def warm() -> None:
    """Import what ``python -m pytest`` imports before it touches the workspace."""
    import importlib
    import runpy  # noqa: F401  (python -m imports it)

    import pytest  # noqa: F401
    from _pytest.config import default_plugins

    for name in default_plugins:
        try:
            importlib.import_module(f"_pytest.{name}")
        except Exception:  # noqa: BLE001 - a plugin that fails here fails the same way in the run
            pass
    # Imported by every session once it starts (argument parsing, the debugging and faulthandler plugins).
    for name in ("_pytest._argcomplete", "pdb", "faulthandler"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass


# Test modules rewritten ahead of the runs: {(path, SHA-256 of the source): code}. Filled by ``prime``
# messages (the parent sends the text of a workspace's test files; this process only parses, rewrites
# and compiles it, never executes it or opens a workspace file) and read by every forked run.
REWRITTEN: dict[tuple[str, bytes], object] = {}
MAX_REWRITTEN = 128  # entries kept (oldest dropped first); a dropped one is rewritten by the run itself


def use_primed_rewrites() -> None:
    """Let a run take a test module's rewritten code from :data:`REWRITTEN` when its source is
    byte-identical, instead of parsing, rewriting and compiling it again (a fifth of a small suite's
    run). The decision to rewrite, the module's import and everything after it stay pytest's own; a run
    whose configuration asks for the assertion pass hook rewrites for itself."""
    import hashlib
    import importlib.util

    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    original = getattr(rewrite, "_rewrite_test", None)
    if original is None:
        return

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


REHEARSAL = """
import pytest

def test_passes():
    assert [1, 2] == [1, 2]

def test_fails():
    assert {"a": [1.0, 2.0]} == {"a": pytest.approx([1.0, 2.5])}

class TestGroup:
    def test_raises(self):
        raise ValueError("rehearsal")
"""


def rehearse() -> None:
    """Run one pytest session on a throwaway suite of our own, the way a run does, so that what every
    session compiles or imports on first use (regular expressions, lazily imported modules, pytest's
    caches) is ready in the runs forked from here instead of made again in each. Only the suite's own
    module is forgotten afterwards. Best effort: a failure here leaves the zygote as it was."""
    import contextlib
    import io
    import tempfile

    import pytest

    cwd = os.getcwd()
    before = set(sys.modules)
    # Plugins installed beside pytest are the runs' own business (their environment says whether they
    # load); the rehearsal never loads them: nbval alone pulls in jsonschema and seconds of imports.
    autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        with tempfile.TemporaryDirectory(prefix="latte_lab-rehearsal-") as tmp:
            with open(os.path.join(tmp, "test_rehearsal.py"), "w") as fh:
                fh.write(REHEARSAL)
            with open(os.path.join(tmp, "pytest.ini"), "w") as fh:
                fh.write("[pytest]\n")  # no configuration from the directories above
            os.chdir(tmp)
            sink = io.StringIO()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                pytest.main(["-q", "-rfE", "-p", "no:cacheprovider", f"--junitxml={tmp}/junit.xml",
                             "-o", "junit_family=xunit1", "test_rehearsal.py"])
    except Exception:  # noqa: BLE001
        pass
    finally:
        os.chdir(cwd)
        if autoload is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload
        for name in set(sys.modules) - before:
            if name == "test_rehearsal" or name.startswith("test_rehearsal."):
                del sys.modules[name]


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


def prebuild_config(options=RUN_OPTIONS, prog=RUN_PROG) -> None:
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
        return
    original = getattr(config_module, "get_config", None)
    original = getattr(original, "made_ahead_from", original)  # pytest's own, if wrapped by an earlier call
    if original is None or not hasattr(getattr(config_module, "Config", None), "InvocationParams") \
            or os.environ.get("PYTEST_DEBUG"):
        return
    try:
        PREBUILT = (blocked_plugins(options), prog, original(list(options), prog=prog))
    except Exception:  # noqa: BLE001 - another pytest: every run makes its own
        PREBUILT = None
        return
    if config_module.get_config is original:
        config_module.get_config = _taking_prebuilt(original, config_module.Config.InvocationParams)


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
