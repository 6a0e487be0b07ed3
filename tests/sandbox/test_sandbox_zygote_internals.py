"""pytest's own internals in a test run, whichever way it starts (forked from the zygote or a kept sandbox, or a
fresh interpreter)."""

from __future__ import annotations

import json

import pytest
from sandbox_helpers import BACKENDS
from zygote_helpers import needs_zygote

from latte_lab.sandbox import warm
from latte_lab.sandbox import zygote as zyg
from latte_lab.workspace import Workspace

pytestmark = [needs_zygote, pytest.mark.usefixtures("no_shared_memo")]


# What a run's pytest holds under a few private names a fork server could be tempted to replace: the module that
# defined each (pytest's own, for every one).
SEE_INTERNALS = """
import json, _pytest._code.code as code, _pytest._code.source as source, _pytest.assertion.rewrite as rewrite
import _pytest.config as config, _pytest.fixtures as fixtures

def test_internals():
    owner = lambda fn: fn.__module__
    print("INTERNALS " + json.dumps({
        "statement_trees": owner(source.getstatementrange_ast), "code_paths": owner(code.Code.path.fget),
        "fixture_scans": owner(vars(fixtures)["dir"]) if "dir" in vars(fixtures) else "_pytest.fixtures",
        "rewrites": owner(rewrite._rewrite_test), "config": owner(config.get_config)}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_sees_pytests_own_internals_whichever_way_it_starts(tmp_path, monkeypatch, backend, launches):
    """A test run's pytest is pytest's own, whichever way the run starts (forked from a fork server or a kept
    sandbox, or a fresh interpreter): the fork servers use pytest's public API only."""
    ws = Workspace(tmp_path / "ws", memo=False, sandbox=backend)
    ws.setup_file("test_internals.py", SEE_INTERNALS)

    def internals() -> dict:
        run = ws.run_tests(("-s", "test_internals.py"), timeout=60)
        assert run.passed == 1, run.stdout[-3000:]
        return json.loads(next(line for line in run.stdout.splitlines() if line.startswith("INTERNALS "))[10:])

    forked = internals()
    for switch_off in ((zyg, "USE_ZYGOTE"), (warm, "USE_WARM")):
        monkeypatch.setattr(*switch_off, False)
    fresh = internals()
    assert forked == fresh and all(module.startswith("_pytest.") for module in fresh.values()), (forked, fresh)
    assert launches.zygote == (1 if backend == "local" else 0)
