"""Suite-wide settings: no network, no user cache, a non-interactive matplotlib backend."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own response cache, never the user's ~/.cache."""
    monkeypatch.setenv("LATTE_LAB_CACHE", str(tmp_path_factory.mktemp("cache") / "responses.sqlite"))
