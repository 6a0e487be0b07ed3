"""Suite-wide settings: no network, no user cache, a non-interactive matplotlib backend."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ["LATTE_STRICT_EVENTS"] = "1"  # an undeclared event type or field fails the test that emits it
# Trials and task suites run on the local sandbox backend, whose pytest fork server makes a test run
# 0.5-1 s cheaper than a bubblewrap sandbox; the sandbox tests and one trial test ask for bwrap by name.
os.environ.setdefault("LATTE_LAB_SANDBOX", "local")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own response cache, never the user's ~/.cache."""
    monkeypatch.setenv("LATTE_LAB_CACHE", str(tmp_path_factory.mktemp("cache") / "responses.sqlite"))


BROWSER_TEST = "test_notebooks_in_browser.py"


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
