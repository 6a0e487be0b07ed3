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


def pytest_collection_modifyitems(config, items):
    """The notebooks (nbval's cells) count as slow: each runs trials, sweeps or the paper analysis in a kernel
    of its own (``make test-fast`` leaves them out)."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
