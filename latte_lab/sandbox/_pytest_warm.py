"""What a pytest fork server (``_server_core.prepare``) does before it serves, through pytest's public API only:
the imports of ``python -m pytest`` (:func:`warm`) and one rehearsed session on a suite of its own
(:func:`rehearse`), which imports pytest's plugins and makes what a session makes on first use, so that every
run forked from it starts with that work done.

Loaded by path, like the server itself. Only the standard library and pytest are imported; nothing from
latte_lab and nothing from a workspace.
"""

import os
import sys


def warm() -> None:
    """Import what ``python -m pytest`` imports before it touches the workspace (pytest's plugins, and what a
    session imports once it starts, come with the rehearsal)."""
    import runpy  # noqa: F401  (python -m imports it)

    import pytest  # noqa: F401


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


