"""What a trial or a sweep refuses before it starts, in one line naming the culprit: a runs directory or
sweep directory where nothing can be written (an existing file, a read-only or virtual file system), and a
grid with an empty axis or a value listed twice (``seeds: [1, 1, 1]``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sweep_helpers import TeamServer
from trial_helpers import script

import latte_lab as ll
from latte_lab.cli import main
from latte_lab.sweep import dry_run, expand_grid, run_sweep

# /proc and /sys refuse a new directory even to root, for whom a chmod 0o555 directory is still writable
VIRTUAL = ["/proc/latte_lab_runs", "/sys/latte_lab_runs"]


def _unwritable(tmp_path) -> list[tuple[str, str]]:
    """(path, the reason its error gives) of places where run directories cannot be written."""
    a_file = tmp_path / "results.csv"
    a_file.write_text("not a directory\n")
    return [(str(a_file), "it is a file, not a directory"),
            (str(a_file / "runs"), f"{a_file} is a file, not a directory"),
            (VIRTUAL[0], "its file system allows no new directory there"),
            (VIRTUAL[1], "permission denied")]


def _one_line(text: str) -> str:
    assert text.count("\n") <= 1 and "Traceback" not in text, text
    return text.strip()


def test_run_trial_refuses_a_runs_dir_it_cannot_write_before_any_model_call(tmp_path):
    for path, why in _unwritable(tmp_path):
        model = script({})
        with pytest.raises(ll.ConfigError) as info:
            ll.run_trial({"task": "debug", "max_rounds": 2}, model=model, runs_dir=path)
        message = _one_line(str(info.value))
        assert message.startswith(f"cannot write run directories in {path}: {why}"), message
        assert message.endswith("choose a writable directory")
        assert model.calls == []
    assert (tmp_path / "results.csv").read_text() == "not a directory\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod 0o555 directory; /proc and /sys stand in")
def test_a_read_only_directory_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(ll.ConfigError, match=f"cannot write run directories in {locked}: permission denied"):
            ll.run_trial({"task": "debug", "max_rounds": 2}, model=script({}), runs_dir=locked)
        with pytest.raises(ll.ConfigError, match=f"cannot write run directories in {locked}: permission denied"):
            run_sweep({"task": "debug", "max_rounds": 2}, out=locked, progress=False)
    finally:
        locked.chmod(0o755)


def test_run_sweep_refuses_an_out_it_cannot_write_before_any_model_call(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-refusals")
    server = TeamServer().start()
    try:
        for path, why in _unwritable(tmp_path):
            grid = {"task": "debug", "team": ["latte", "static"], "max_rounds": 2, "model": "openai/gpt-4o-mini",
                    "base_url": server.openai_url}
            with pytest.raises(ll.ConfigError) as info:
                run_sweep(grid, out=path, n_jobs=2, progress=False)
            assert _one_line(str(info.value)).startswith(f"cannot write run directories in {path}: {why}")
        assert server.hits == 0
    finally:
        server.stop()
    assert (tmp_path / "results.csv").read_text() == "not a directory\n"


def test_the_cli_refuses_an_unwritable_runs_dir_or_out_in_one_line(tmp_path, capsys):
    for path, why in _unwritable(tmp_path):
        for argv in (["run", "--task", "debug", "--max-rounds", "2", "--runs-dir", path],
                     ["demo", "--runs-dir", path],
                     ["sweep", "--tasks", "debug", "--max-rounds", "2", "--out", path, "--quiet"]):
            assert main(argv) == 1, argv
            captured = capsys.readouterr()
            assert captured.out == "", (argv, captured.out)  # not even the trial's announcement
            assert _one_line(captured.err).startswith(f"latte-lab: error: cannot write run directories in {path}: "
                                                      f"{why}"), captured.err


def test_the_installed_command_exits_non_zero_with_one_line_and_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "latte_lab.cli", "run", "--task", "debug", "--runs-dir", VIRTUAL[0]],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert _one_line(proc.stderr).startswith(f"latte-lab: error: cannot write run directories in {VIRTUAL[0]}")


@pytest.mark.parametrize(("grid", "key"), [
    ({"task": "debug", "seeds": [1, 1, 1]}, "'seeds' lists 1 more than once"),
    ({"task": "debug", "seeds": []}, "'seeds' is an empty list"),
    ({"task": [], "team": "latte"}, "'task' is an empty list"),
    ({"task": "debug", "team": []}, "'team' is an empty list"),
    ({"task": "debug", "model": ["simulated", "simulated"]}, "'model' lists 'simulated' more than once"),
    ({"task": "debug", "max_rounds": []}, "'max_rounds' is an empty list"),
    ({"task": "debug", "seeds": 3}, "'seeds' must be a list"),
    ({"task": "debug", "seed": [1, 2]}, "sets 'seed', which the sweep sets for each trial"),
])
def test_a_grid_with_an_empty_axis_or_a_repeated_value_is_refused_naming_its_key(tmp_path, grid, key):
    for call in (lambda: expand_grid(grid, tmp_path), lambda: dry_run(grid, tmp_path),
                 lambda: run_sweep(grid, out=tmp_path / "out", progress=False)):
        with pytest.raises(ll.ConfigError) as info:
            call()
        assert key in _one_line(str(info.value)), str(info.value)
    assert not (tmp_path / "out").exists()  # refused before the sweep directory was made


def test_distinct_seeds_are_replicates_and_a_valid_grid_still_expands(tmp_path):
    configs = expand_grid({"task": "debug", "team": ["latte", "static"], "seeds": [3, 1]}, tmp_path)
    assert [(c.team, c.seed, c.trial) for c in configs] == [("latte", 3, 0), ("static", 3, 0), ("latte", 1, 1),
                                                            ("static", 1, 1)]


def test_the_cli_refuses_an_empty_list_in_one_line(tmp_path, capsys):
    assert main(["sweep", "--tasks", ",", "--out", str(tmp_path / "s"), "--quiet"]) == 1
    captured = capsys.readouterr()
    assert _one_line(captured.err) == ("latte-lab: error: the grid's 'task' is an empty list, so the sweep would "
                                       "have no trials; give it at least one value")
    assert main(["sweep", "--tasks", "debug", "--teams", "latte,latte", "--out", str(tmp_path / "s"), "--quiet"]) == 1
    assert "the grid's 'team' lists 'latte' more than once" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "s").exists()
