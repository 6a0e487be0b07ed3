"""A trial that cannot run its tests measures nothing: it refuses before round 1, or ends as an error."""

from __future__ import annotations

import pytest

import latte_lab as ll
from latte_lab.errors import ConfigError
from latte_lab.sandbox import pytest as sandbox_pytest
from latte_lab.trial import run_trial


def test_a_missing_test_runner_refuses_before_any_call(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox_pytest, "_pytest_available", lambda: False)
    cfg = ll.TrialConfig(task="debug", team="latte", model="simulated", runs_dir=str(tmp_path / "runs"))
    with pytest.raises(ConfigError, match=r"^pytest is not installed for .*pip install 'pytest>=9.0,<10'") as caught:
        run_trial(cfg)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "runs").exists()  # no run directory, no model call


def test_every_test_run_an_infrastructure_error_is_an_error_not_a_zero(tmp_path, monkeypatch, no_shared_memo):
    """pytest vanishing once the trial has started (say, uninstalled beneath it): every test run reports it,
    and the trial ends with status error instead of 'no success, accuracy 0%'."""
    real = sandbox_pytest.run_pytest

    def broken(cwd, args=(), **kw):
        if kw.get("extra_files"):
            return real(cwd, args, **kw)
        return sandbox_pytest._pytest_missing(kw.get("timeout", 60))

    sandbox_pytest.clear_memo()  # no stored run of these files may answer for the broken runner
    monkeypatch.setattr(sandbox_pytest, "run_pytest", broken)
    monkeypatch.setattr("latte_lab.workspace.files.run_pytest", broken, raising=False)
    cfg = ll.TrialConfig(task="debug", team="leader_worker", model="simulated", max_rounds=2, seed=0,
                         runs_dir=str(tmp_path / "runs"))
    res = run_trial(cfg)
    runs = [e for e in res.event_list if e["type"] == "run_tests"]
    assert runs and all(e["infrastructure_error"].startswith("pytest is not installed") for e in runs)
    assert res.status == "error" and res.accuracy is None and res.success is False
    assert res.error.startswith("every test run failed to start: pytest is not installed")
    assert res.row["status"] == "error"


def test_links_and_fifos_an_agent_leaves_are_named_in_a_plain_trials_record(tmp_path):
    """Outside a sweep too: what an agent's script leaves that is not a file is recorded as what it was and
    removed from the run directory (so nothing that reads it later follows a link or blocks on a FIFO)."""
    import json

    from trial_helpers import script

    code = "import os\nos.symlink('/etc/passwd', 'passwd')\nos.mkfifo('pipe')\n"
    model = script({"Dev1": {0: f'<edit_file path="leave.py">{code}</edit_file><run_script path="leave.py" />'}})
    cfg = ll.TrialConfig(task="debug", team="leader_worker", model="scripted", max_rounds=1, sandbox="local",
                         runs_dir=str(tmp_path / "runs"))
    res = run_trial(cfg, model=model)
    assert res.status == "ok", res.error
    found = json.loads((res.run_dir / "special_files.json").read_text())
    assert found == {"workspace/passwd": "symlink -> /etc/passwd", "workspace/pipe": "fifo"}
    assert not (res.run_dir / "workspace" / "passwd").is_symlink() and not (res.run_dir / "workspace" / "pipe").exists()
