"""latte-lab runs, show and export on a sweep of 12 simulated trials (4 teams x 3 seeds on the debug task,
3 rounds each), made once for the module; tests that damage a trial work on a copy."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

import latte_lab as ll
from latte_lab.cli import main
from latte_lab.cli.runs import find_runs

TEAMS = ("latte", "static", "leader_worker", "decentralized")
SEEDS = 3


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """runs/sweep with 12 finished trials whose result.json times are spread out, in an order that is not
    the sweep's, so that newest first is a real ordering."""
    out = tmp_path_factory.mktemp("cli_runs") / "runs" / "sweep"
    grid = {"task": ["debug"], "team": list(TEAMS), "model": ["simulated"], "replicates": SEEDS, "max_rounds": 3}
    df = ll.run_sweep(grid, out, n_jobs=1, progress=False)
    assert len(df) == len(TEAMS) * SEEDS and (df["status"] == "ok").all()
    base = time.time() - 86_400
    for i, run_dir in enumerate(sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))):
        started = base + ((i * 5) % 12) * 600  # a permutation of the 12 trials, 10 minutes apart
        os.utime(run_dir / "config.json", (started, started))
        os.utime(run_dir / "result.json", (started + 60, started + 60))
    return out


@pytest.fixture
def copy(sweep, tmp_path) -> Path:
    """A copy of the sweep (file times kept) that a test may damage."""
    target = tmp_path / "runs" / "sweep"
    shutil.copytree(sweep, target)
    return target


def table_rows(out: str) -> list[list[str]]:
    """The cells of the trials table `runs` printed (the lines between its header and the blank line)."""
    lines = out.splitlines()
    assert lines[0].split() == ["STATUS", "SUCCESS", "TASK", "TEAM", "MODEL", "SEED", "ROUNDS", "ACCURACY",
                                "TOKENS", "DOLLARS", "WHEN", "PATH"]
    rows = []
    for line in lines[1:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def runs(capsys, *args: str) -> tuple[list[list[str]], str]:
    assert main(["runs", *args]) == 0
    out = capsys.readouterr().out
    return (table_rows(out) if out.startswith("STATUS") else []), out


def one_line_error(capsys, argv: list[str], *words: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("latte-lab: error: "), err
    assert "Traceback" not in captured.err and not captured.out
    for word in words:
        assert word in err, err


def test_runs_lists_every_trial_newest_first(sweep, capsys):
    rows, out = runs(capsys, str(sweep))
    assert len(rows) == 12
    assert {r[0] for r in rows} == {"ok"}
    expected = sorted(find_runs(sweep), key=lambda r: (sweep / r.path.name / "result.json").stat().st_mtime,
                      reverse=True)
    assert [Path(r[-1]) for r in rows] == [r.path for r in expected]
    assert [r[3] for r in rows] != sorted(r[3] for r in rows)  # the order is the times', not the names'
    result = json.loads((Path(rows[0][-1]) / "result.json").read_text())["row"]
    status, success, task, team, model, seed, rounds, accuracy, tokens, dollars = rows[0][:10]
    assert (task, team, model, int(seed), int(rounds)) == (result["task"], result["team"], "simulated",
                                                          result["seed"], result["total_rounds"])
    assert tokens == f"{result['total_tokens']:,}" and accuracy == f"{result['accuracy']:.0%}"
    assert success == ("yes" if result["success"] else "no") and dollars == "-"  # the simulated model: no price
    succeeded = sum(json.loads((Path(r[-1]) / "result.json").read_text())["row"]["success"] for r in rows)
    assert f"12 trials under {sweep} (12 ok; {succeeded} of 12 succeeded)" in out
    assert f"sweep {sweep}: 12 trials (12 ok; {succeeded} of 12 succeeded)" in out


def test_runs_filters_and_limit(sweep, capsys):
    rows, _ = runs(capsys, str(sweep), "--team", "latte")
    assert len(rows) == SEEDS and {r[3] for r in rows} == {"latte"}
    rows, out = runs(capsys, str(sweep), "--team", "latte,static", "--task", "debug_sprint")  # an official name
    assert len(rows) == 2 * SEEDS and {r[3] for r in rows} == {"latte", "static"}
    assert f"6 of 12 trials under {sweep}" in out
    rows, _ = runs(capsys, str(sweep), "--team", "dynamic")  # the released code's name for latte
    assert {r[3] for r in rows} == {"latte"}
    assert len(runs(capsys, str(sweep), "--model", "simulated")[0]) == 12
    assert len(runs(capsys, str(sweep), "--status", "ok", "--team", "static")[0]) == SEEDS
    rows, out = runs(capsys, str(sweep), "--model", "openai")
    assert not rows and "no trials under" in out and "match (of 12)" in out
    rows, out = runs(capsys, str(sweep), "--status", "error,damaged")
    assert not rows
    newest = runs(capsys, str(sweep))[0]
    rows, out = runs(capsys, str(sweep), "--limit", "5")
    assert rows == newest[:5] and "the 5 newest shown" in out
    with pytest.raises(SystemExit) as stop:  # argparse's own usage error for a value it cannot take
        main(["runs", str(sweep), "--status", "finished"])
    assert stop.value.code == 2 and "unknown status finished" in capsys.readouterr().err


def test_runs_without_a_folder_reads_the_default_runs_folder(sweep, capsys, monkeypatch):
    monkeypatch.chdir(sweep.parent.parent)
    rows, out = runs(capsys)
    assert len(rows) == 12 and all(r[-1].startswith("runs/sweep/") for r in rows)


def test_damaged_unfinished_and_stopped_trials_are_listed_not_fatal(copy, capsys):
    trials = sorted(p for p in copy.iterdir() if p.is_dir() and not p.name.startswith("."))
    damaged, lost, no_config = trials[0], trials[1], trials[2]
    text = (damaged / "result.json").read_bytes()
    (damaged / "result.json").write_bytes(text[: len(text) // 2])  # cut off mid-file
    (lost / "result.json").unlink()  # a sweep puts its trials in place with their result: this one lost it
    (no_config / "config.json").write_text("{not json")
    under_way = copy / ".sweep" / "running" / "debug-latte-s9-0000000000"
    under_way.mkdir(parents=True)
    shutil.copy(trials[3] / "config.json", under_way / "config.json")
    unfinished = copy.parent / "debug-static-s7-0000000000"  # latte-lab run's trial, still running
    unfinished.mkdir()
    shutil.copy(trials[3] / "config.json", unfinished / "config.json")

    rows, out = runs(capsys, str(copy.parent))
    status = {Path(r[-1]): r[0] for r in rows}
    assert len(rows) == 14
    assert status[damaged] == status[lost] == "damaged"
    assert status[unfinished] == "running" and status[under_way] == "stopped"
    assert status[no_config] == "ok"  # its result says all the table needs
    row = next(r for r in rows if Path(r[-1]) == damaged)
    assert row[2:5] == ["debug", json.loads((damaged / "config.json").read_text())["team"], "simulated"]
    assert row[1] == row[7] == "-"  # no success, no accuracy: its result cannot be read
    assert f"damaged {damaged}: result.json: not valid JSON" in out
    assert f"damaged {lost}: result.json is missing" in out
    assert f"14 trials under {copy.parent} (10 ok, 1 running, 1 stopped, 2 damaged;" in out
    assert f"sweep {copy}: 13 trials (10 ok, 1 stopped, 2 damaged;" in out

    lock = os.open(copy / ".sweep" / "lock", os.O_RDWR)  # a sweep working in the folder
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        rows, out = runs(capsys, str(copy.parent), "--status", "running")
        assert {Path(r[-1]) for r in rows} == {unfinished, under_way}
        assert "in use by a sweep (process" in out
    finally:
        os.close(lock)


def test_show_prints_the_config_outcome_graph_rounds_and_row(sweep, capsys):
    run_dir = next(p for p in sorted(sweep.iterdir()) if p.name.startswith("debug-latte-s1-"))
    trial = ll.load_trial(run_dir)
    assert main(["show", "debug-latte-s1", "--runs-dir", str(sweep.parent)]) == 0  # the start of a trial id
    out = capsys.readouterr().out
    assert out.startswith(f"trial {trial.trial_id}  ({run_dir})")
    assert "config     task debug · team latte · model simulated · seed 1" in out
    assert f"accuracy {trial.accuracy:.0%}" in out and f"ended by {trial.reason}" in out
    assert f"rounds {trial.rounds} · tokens {trial.tokens:,}" in out
    last = trial.snapshots[-1]
    assert f"graph after round {last['round']} " in out
    graph = ll.CoordinationGraph.from_snapshot(last["graph"])
    for node in graph.nodes():
        line = next(x for x in out.splitlines() if x.split()[:1] == [node])
        assert line.split()[1] == graph.status(node).value
        assert line.split()[2] == (graph.agent(node) or "-")
    section = out.split("\nrounds (VIRTUAL T: ")[1].split("\n\n")[0].splitlines()[1:]
    assert section[0].split() == ["ROUND", "RAN", "REFUSED", "TESTS", "VIRTUAL", "T", "ACTIONS"]
    assert [x.split()[0] for x in section[1:]] == [str(r) for r in range(trial.rounds + 1)]
    assert "0 (planning)  Lead" in section[1] and "discover_task" in section[1]
    assert "results row (" in out and "  total_tokens" in out and "  trial_id" in out
    assert main(["show", str(run_dir)]) == 0 and capsys.readouterr().out == out  # the path: the same


def test_show_a_flat_team_and_a_damaged_trial(copy, capsys):
    trial = next(p for p in sorted(copy.iterdir()) if p.name.startswith("debug-static-s2-"))
    shutil.copytree(trial, copy / f"{trial.name}.failed-0")  # an earlier attempt, same trial id
    assert main(["show", trial.name, "--runs-dir", str(copy)]) == 0
    assert capsys.readouterr().out.startswith(f"trial {trial.name}  ({trial})")
    flat = next(p for p in sorted(copy.iterdir()) if p.name.startswith("debug-leader_worker-s0-"))
    assert main(["show", str(flat)]) == 0
    assert "graph: none recorded" in capsys.readouterr().out
    latte = next(p for p in sorted(copy.iterdir()) if p.name.startswith("debug-latte-s0-"))
    (latte / "result.json").write_text('{"trial_id": ')
    with (latte / "events.jsonl").open("ab") as fh:
        fh.write(b'{"type": "round_start", "ro')  # cut off mid-line
    assert main(["show", str(latte)]) == 0
    out = capsys.readouterr().out
    assert "status     damaged: result.json: not valid JSON" in out
    assert "graph after round" in out and "\nrounds (VIRTUAL T" in out
    assert "events.jsonl stops being readable here" in out and "cut off mid-line" in out
    assert "results row: none" in out


def test_export_parquet_and_csv_hold_the_load_runs_table(sweep, tmp_path, capsys):
    expected = ll.load_runs(sweep).trials
    assert main(["export", str(sweep), "-o", str(tmp_path / "t.parquet")]) == 0
    assert f"wrote 12 trials x {expected.shape[1]} columns" in capsys.readouterr().out
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert back.shape == expected.shape == (12, expected.shape[1])
    pd.testing.assert_frame_equal(back, expected, check_dtype=False)
    assert main(["export", str(sweep), "-o", str(tmp_path / "new" / "t.csv")]) == 0
    back = pd.read_csv(tmp_path / "new" / "t.csv")
    assert list(back.columns) == list(expected.columns) and len(back) == 12
    assert sorted(back["trial_id"]) == sorted(expected["trial_id"])
    assert not list(tmp_path.glob(".*.tmp")) and not list((tmp_path / "new").glob(".*.tmp"))


def test_export_notes_the_trials_it_leaves_out_in_one_line(copy, tmp_path, capsys):
    victim = next(p for p in sorted(copy.iterdir()) if p.name.startswith("debug-static-s0-"))
    payload = json.loads((victim / "result.json").read_text())
    payload["status"] = payload["row"]["status"] = "error"
    (victim / "result.json").write_text(json.dumps(payload))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the CLI turns load_runs' warning into a line of its own
        assert main(["export", str(copy), "-o", str(tmp_path / "t.csv")]) == 0
    out = capsys.readouterr().out
    assert "wrote 11 trials" in out and "note: load_runs(" in out and "status is not 'ok'" in out
    assert main(["export", str(copy), "-o", str(tmp_path / "t.csv"), "--include-errors"]) == 0
    assert "wrote 12 trials" in capsys.readouterr().out


def test_errors_are_one_line_with_status_2(sweep, tmp_path, capsys):
    one_line_error(capsys, ["runs", str(tmp_path / "missing")], "no folder", "missing")
    one_line_error(capsys, ["show", "nothing-like-it", "--runs-dir", str(sweep)], "no trial nothing-like-it")
    one_line_error(capsys, ["show", "debug-latte", "--runs-dir", str(sweep)], "matches 3 trials")
    one_line_error(capsys, ["show", str(tmp_path)], "is not a run directory")
    one_line_error(capsys, ["export", str(sweep), "-o", str(tmp_path / "t.xlsx")], "'.xlsx'", ".parquet")
    one_line_error(capsys, ["export", str(tmp_path / "missing"), "-o", str(tmp_path / "t.csv")], "no folder")
    assert not (tmp_path / "t.xlsx").exists() and not (tmp_path / "t.csv").exists()
    proc = subprocess.run([sys.executable, "-m", "latte_lab.cli", "show", "no-such-trial", "--runs-dir",
                           str(sweep)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout


def test_a_thousand_trials_list_quickly_from_their_result_and_config(sweep, tmp_path, capsys):
    source = next(p for p in sorted(sweep.iterdir()) if p.name.startswith("debug-latte-s0-"))
    config, result = (source / "config.json").read_bytes(), (source / "result.json").read_bytes()
    for i in range(1000):
        run_dir = tmp_path / f"s{i // 100}" / f"trial-{i:04d}"
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_bytes(config)
        (run_dir / "result.json").write_bytes(result)
    start = time.perf_counter()
    rows, out = runs(capsys, str(tmp_path), "--limit", "3")
    took = time.perf_counter() - start
    assert len(rows) == 3 and "1000 trials under" in out and "(1000 ok; " in out
    assert took < 5.0, f"listing 1000 trials took {took:.1f} s"


def test_attempts_of_trials_finished_since_are_left_out(copy, capsys):
    """A killed sweep rerun to completion: its set-aside attempts are history, listed only with --attempts."""
    from latte_lab.sweep.sweepdir import mark_failed

    trial = next(p for p in sorted(copy.iterdir()) if p.name.startswith("debug-static-s1-"))
    attempt = copy / f"{trial.name}.failed-0"
    shutil.copytree(trial, attempt)
    mark_failed(attempt, "interrupted: the sweep's process was killed")
    orphan = copy / "debug-latte-s9-0000000000.failed-0"  # an attempt whose trial never finished: still listed
    shutil.copytree(trial, orphan)
    mark_failed(orphan, "interrupted: the sweep's process was killed")
    rows, out = runs(capsys, str(copy))
    assert len(rows) == 13 and attempt not in {Path(r[-1]) for r in rows} and orphan in {Path(r[-1]) for r in rows}
    assert "1 earlier attempts of trials that have finished since are not listed (--attempts lists them)" in out
    rows, out = runs(capsys, str(copy), "--attempts")
    assert len(rows) == 14 and {r[0] for r in rows if Path(r[-1]) in (attempt, orphan)} == {"error"}
    assert "not listed" not in out


def test_show_keeps_node_rows_narrow(copy, capsys):
    """One node waiting on 35 others: its DEPS cell counts the rest instead of widening every row."""
    from latte_lab.cli.show import DEPS_WIDTH
    from latte_lab.graph.history import GraphHistory

    trial = next(p for p in sorted(copy.iterdir()) if p.name.startswith("debug-latte-s0-"))
    g = ll.CoordinationGraph()
    for i in range(35):
        g.discover(f"fix-unit-{i:02d}", deps=[], title=f"Fix unit {i}", by="Lead")
    g.discover("integrate", deps=[f"fix-unit-{i:02d}" for i in range(35)], title="Integrate", by="Lead")
    history = GraphHistory()
    history.record(3, 120.0, g)
    (trial / "snapshots.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history.records))
    assert main(["show", str(trial)]) == 0
    out = capsys.readouterr().out
    graph = out.split("\n\n")[1].splitlines()
    assert graph[0].startswith("graph after round 3 (virtual time 120 s): 36 nodes")
    row = next(line for line in graph if line.split()[:1] == ["integrate"])
    assert "(+" in row and "more)" in row
    assert max(len(line) for line in graph[1:]) <= len("  integrate") + 2 + len("pending") + 2 + 5 + 2 + DEPS_WIDTH \
        + 2 + len("Fix unit 34")
    rounds = out.split("\nrounds (VIRTUAL T: ")[1].split("\n\n")[0].splitlines()[1:]
    widths = {len(line) for line in rounds}
    assert len(widths) > 1  # the ACTIONS column comes last and is not padded to the busiest round


def test_dollars_do_not_depend_on_how_far_a_trial_got(tmp_path):
    """A simulated trial that failed before its first model call has no price either (not 0.00)."""
    import math

    from latte_lab.models.ledger import dollars_without_calls as _dollars_without_calls

    assert math.isnan(_dollars_without_calls(ll.TrialConfig(task="debug", model="simulated/careful")))
    assert _dollars_without_calls(ll.TrialConfig(task="debug", model="openai/gpt-4o")) == 0.0


def test_tables_that_show_success_and_accuracy_say_what_each_means(sweep, copy, capsys):
    """runs, the sweep's results and ll.viz.compare: success at a low accuracy reads as a contradiction
    without the definitions beside the table."""
    from latte_lab.schema import SUCCESS_AND_ACCURACY

    said = " ".join(SUCCESS_AND_ACCURACY.split())
    _, out = runs(capsys, str(sweep))
    assert said in " ".join(out.split())
    rows = [ll.load_trial(p) for p in sorted(sweep.iterdir()) if p.is_dir() and not p.name.startswith(".")][:2]
    table = ll.viz.compare(rows)
    assert {"success", "accuracy"} <= set(table.columns) and said in table._repr_html_()
    assert main(["sweep", "--tasks", "debug", "--teams", "latte", "--replicates", "1", "--max-rounds", "3",
                 "--out", str(copy), "--quiet"]) == 0  # every trial finished: only the table and the definitions
    assert said in " ".join(capsys.readouterr().out.split())
