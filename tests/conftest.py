"""Suite-wide settings: no network, no user cache, a non-interactive matplotlib backend."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

# The tests mirror latte_lab's packages, a folder each (tests/sandbox, tests/models, ...), none of them a package:
# pytest imports a test file by its bare name from its own folder (its default "prepend" import mode), so every
# basename is unique across folders. Helpers (sandbox_helpers, conftest_models, sweep_helpers, trial_helpers, ...)
# sit beside the tests that use them and are imported by bare name from any folder, as are the few test modules
# that others import from (test_trial_real_provider, test_task_eda, test_viewer): every folder goes on sys.path
# here, before any test file is imported.
TESTS = Path(__file__).resolve().parent
for _folder in sorted(TESTS.iterdir(), reverse=True):
    if _folder.is_dir() and any(_folder.glob("*.py")) and str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ["LATTE_STRICT_EVENTS"] = "1"  # an undeclared event type or field fails the test that emits it
# Trials and task suites run on the local sandbox backend, whose pytest fork server makes a test run
# 0.5-1 s cheaper than a bubblewrap sandbox; the sandbox tests and one trial test ask for bwrap by name.
os.environ.setdefault("LATTE_LAB_SANDBOX", "local")
# A suite started as a background job of a non-interactive shell (`make test &` in a script) inherits SIGINT
# ignored, and so would every process it starts. The tests of Ctrl-C need it as a terminal delivers it:
# Python's handler here, the default (and so Python's handler) in the interpreters the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _hypothesis_profiles() -> None:
    """The suite draws the same hypothesis examples on every run and machine ("deterministic", the default):
    a property test cannot pass today and fail tomorrow on new draws, and a failure replays as it was. Set
    HYPOTHESIS_PROFILE=explore to draw new examples (and keep what fails in .hypothesis/) while developing."""
    from hypothesis import settings

    settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
    settings.register_profile("explore", derandomize=False)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


_hypothesis_profiles()


NOTEBOOK_RUNS_ENV = "LATTE_TEST_NOTEBOOK_RUNS"


def pytest_configure(config):
    """One test-run memo directory for the whole session ($LATTE_LAB_MEMO_DIR, made here in the controlling
    process, so the xdist workers, the notebooks' kernels, JupyterLab and every script a test starts share
    it): a workspace state that any test has run the suite on before costs nothing again. Tests of the memo
    and of the sandbox itself use workspaces with ``memo=False`` or their own directory."""
    if hasattr(config, "workerinput") or os.environ.get("LATTE_LAB_MEMO_DIR"):
        return
    import tempfile

    config._latte_memo_dir = tempfile.mkdtemp(prefix="latte_lab-test-memo-")
    os.environ["LATTE_LAB_MEMO_DIR"] = config._latte_memo_dir
    # The notebooks as the browser test's Run All left them: the documentation site's build shows them rather
    # than run each notebook a second time (tests/package/test_docs_site.py, which runs last).
    config._latte_notebook_runs = tempfile.mkdtemp(prefix="latte_lab-test-notebooks-")
    os.environ[NOTEBOOK_RUNS_ENV] = config._latte_notebook_runs


def pytest_collection_finish(session):
    """Every test module, latte_lab and its libraries are imported: the garbage collector stops walking them
    (a worker holds about a million objects; each full collection walked them all)."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    import shutil

    for attr, env in (("_latte_memo_dir", "LATTE_LAB_MEMO_DIR"), ("_latte_notebook_runs", NOTEBOOK_RUNS_ENV)):
        folder = getattr(config, attr, None)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
            os.environ.pop(env, None)


@pytest.fixture
def no_shared_memo(monkeypatch):
    """For tests of the memo and of the runs themselves: workspaces made in the test memoise in the process
    only (``clear_memo()`` forgets that), never in the session's shared directory."""
    monkeypatch.delenv("LATTE_LAB_MEMO_DIR", raising=False)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own response cache, never the user's ~/.cache."""
    monkeypatch.setenv("LATTE_LAB_CACHE", str(tmp_path_factory.mktemp("cache") / "responses.sqlite"))


BROWSER_TEST = "test_notebooks_in_browser.py"
DOCS_SITE_TEST = "test_docs_site.py"


def pytest_collection_modifyitems(config, items):
    """The notebooks (nbval's cells) count as slow: each runs trials, sweeps or the paper analysis in a kernel
    of its own (``make test-fast`` leaves them out).

    A notebook that the browser test runs in the same session (it runs every top-level notebook with Run
    All in JupyterLab and fails on any cell showing an error) is not run a second time by nbval; where the
    browser test cannot run (no chromium, no playwright: its module is skipped and collects nothing), nbval
    runs them all. The solution notebooks are nbval's alone."""
    in_browser = {item.callspec.params.get("notebook") for item in items
                  if item.path.name == BROWSER_TEST and hasattr(item, "callspec")}
    kept, twice = [], []
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
            if item.path.parent.name == "notebooks" and item.path.name in in_browser:
                twice.append(item)
                continue
        kept.append(item)
    if twice:
        config.hook.pytest_deselected(items=twice)
        items[:] = kept
    # The longest files first, so that no xdist worker starts one when the other is nearly done: the browser
    # test, then the files with tests marked slow (the notebooks, Ray, the wheel, fresh interpreters), then
    # the rest in collection order (the Makefile turns off xdist's own reordering, by number of tests).
    # The documentation site's build goes last: by then the browser test has saved every notebook it ran, and
    # the build shows those rather than run them again (where it has none, it runs them itself).
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: 0 if item.path.name == BROWSER_TEST else 3 if item.path.name == DOCS_SITE_TEST
               else 1 if item.path in slow_files else 2)
