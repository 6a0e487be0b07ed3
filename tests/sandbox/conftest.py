"""Fixtures of the tests of the pytest fork server (zygote): the count of runs it forked, and a zygote state of the
test's own."""

from __future__ import annotations

import pytest
from zygote_helpers import Launches

from latte_lab.sandbox import zygote as zyg


@pytest.fixture
def launches(monkeypatch) -> Launches:
    monkeypatch.setattr(zyg, "USE_ZYGOTE", True)
    monkeypatch.delenv(zyg.ZYGOTE_DISABLE_VAR, raising=False)
    return Launches(monkeypatch)


@pytest.fixture
def isolated_zygote_state():
    """Tests that break or replace the zygote: start from none and leave none behind."""
    zyg.shutdown_zygotes()
    saved = dict(zyg._ZYGOTE_STATE)
    zyg._ZYGOTE_STATE.update(start_failures=0, warned=False)
    yield
    zyg.shutdown_zygotes()
    zyg._ZYGOTE_STATE.update(start_failures=saved["start_failures"], warned=saved["warned"])

