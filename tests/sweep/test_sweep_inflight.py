"""Trials in flight (run_sweep(in_flight=N), latte_lab.sweep.inflight): more trials running than processes,
each trial exactly once, sandboxed runs held to their slots, the sweep budget, Ctrl-C and resume, and the dry
run's estimate of calls, tokens, dollars and time. Real-model trials go to a provider emulator each test
starts on a loopback port."""

from __future__ import annotations

import json
import math
import os
import signal

import pytest
from sweep_helpers import alive, descendants, finished_dirs, running_dirs, start_script, wait_until

import latte_lab as ll
from latte_lab.models import budget, ratelimit
from latte_lab.models.emulator import Emulator
from latte_lab.models.emulator.reconcile import reconcile
from latte_lab.sweep import expand_grid, inflight, local, run_sweep, sweepdir

SAME = ("total_tokens", "success", "accuracy", "total_rounds")  # what a trial played over the wire shares with its simulated self

INFLIGHT_SWEEP = """
import json, sys
import latte_lab as ll
url, out, cache = sys.argv[1:4]
grid = {"task": "debug", "team": "latte", "replicates": 6, "max_rounds": 6, "model": "openai/gpt-4o-mini",
        "base_url": url, "cache_path": cache}
df = ll.run_sweep(grid, out=out, in_flight=6, n_jobs=2, progress=False)
print("ROWS " + json.dumps(df[["trial_id", "status", "reason"]].to_dict("records")))
"""


@pytest.fixture(name="no_keys")
def no_keys_fixture(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LATTE_BASE_URL_API_KEY", ratelimit.RATE_LIMITS_ENV):
        monkeypatch.delenv(name, raising=False)


def grid_for(emu, cache, replicates: int, max_rounds: int, **more) -> dict:
    return {"task": "debug", "team": "latte", "replicates": replicates, "max_rounds": max_rounds,
            "model": "openai/gpt-4o-mini", "base_url": emu.openai_url, "cache_path": str(cache), **more}


def by_seed(rows) -> dict:
    return {int(r["seed"]): tuple(None if isinstance(r[k], float) and math.isnan(r[k]) else r[k] for k in SAME)
            for r in rows}


def test_trials_in_flight_are_the_simulated_trials_each_landed_once_and_billed_once(tmp_path, no_keys):
    simulated = run_sweep({"task": "debug", "team": "latte", "replicates": 6, "max_rounds": 3},
                          out=tmp_path / "sim", progress=False)
    out = tmp_path / "sweep"
    with Emulator(latency_s=0.05) as emu:
        df = run_sweep(grid_for(emu, tmp_path / "cache.sqlite", 6, 3), out=out, in_flight=6, n_jobs=2, progress=False)
        entries = emu.entries()
    assert len(df) == 6 and (df["status"] == "ok").all() and df["trial_id"].is_unique
    assert by_seed(df.to_dict("records")) == by_seed(simulated.to_dict("records"))
    assert len(finished_dirs(out)) == 6 and not running_dirs(out)
    assert not [p for p in out.iterdir() if sweepdir.attempt_of(p.name)[1] is not None]
    check = reconcile(entries, out)
    assert (check["lost"], check["paid_twice"], check["recorded_not_billed"]) == ([], 0, [])
    assert check["recorded"] == check["billed_by_provider"] == sum(1 for e in entries if e["outcome"] == "ok")
    assert check["dollars_recorded"] == pytest.approx(check["dollars_by_provider"], abs=1e-12)
    assert df["dollars"].sum() == pytest.approx(check["dollars_by_provider"], abs=1e-12)


def test_sandboxed_runs_of_the_trials_in_flight_take_one_of_the_slots(tmp_path, no_keys):
    out = tmp_path / "sweep"
    settings = local.SweepSettings({}, ratelimit.SqliteState(tmp_path / "state.sqlite"), budget.SweepBudget())
    pool = inflight.InFlightPool(4, out, settings, processes=2, slots=1)
    rows = []
    with Emulator(latency_s=0.05) as emu:
        stopped = pool.run(expand_grid(grid_for(emu, tmp_path / "cache.sqlite", 4, 2), out), rows.append, lambda: None)
    assert stopped is None and len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert pool.peak_in_flight == 4  # four trials at once in two processes
    assert pool.gate.peak() == 1  # ... and never two sandboxed runs at once
    assert pool.gate.busy() == 0


def test_a_sweep_budget_stops_the_trials_in_flight_and_nothing_is_lost_or_paid_twice(tmp_path, no_keys):
    out = tmp_path / "sweep"
    with Emulator(latency_s=0.05) as emu:
        df = run_sweep(grid_for(emu, tmp_path / "cache.sqlite", 8, 8), out=out, in_flight=4, n_jobs=2,
                       progress=False, max_dollars=0.004)
        entries = emu.entries()
    assert df.attrs["stopped"].startswith("the sweep's budget of $0.00 is spent")
    assert set(df["status"]) <= {"ok", "budget"} and (df["status"] == "budget").any()
    assert len(df) < 8 and df["trial_id"].is_unique  # queued trials never started
    assert not running_dirs(out)
    check = reconcile(entries, out)
    assert (check["lost"], check["paid_twice"], check["recorded_not_billed"]) == ([], 0, [])
    assert check["dollars_recorded"] == pytest.approx(check["dollars_by_provider"], abs=1e-12)
    assert check["dollars_by_provider"] >= 0.004


@pytest.mark.slow
def test_ctrl_c_stops_every_trial_in_flight_and_the_rerun_finishes_them_with_the_same_totals(tmp_path, no_keys):
    out, cache = tmp_path / "sweep", tmp_path / "cache.sqlite"
    with Emulator(latency_s=0.2) as emu:
        proc = start_script(INFLIGHT_SWEEP, emu.openai_url, str(out), str(cache), new_session=True)
        wait_until(lambda: len(running_dirs(out)) == 6 and len({e["call"].split("/")[0] for e in emu.entries()
                                                                  if e["call"]}) == 6,
                   "six trials in flight, each with a call answered", proc=proc)
        tree = descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole group
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in stderr, stderr
        rows = json.loads(next(line for line in stdout.splitlines() if line.startswith("ROWS "))[5:])
        assert [r["reason"] for r in rows if r["status"] != "ok"] and all(
            r["reason"] == "interrupted" for r in rows if r["status"] != "ok"), rows
        assert not running_dirs(out) and not alive(tree)

        df = run_sweep(grid_for(emu, cache, 6, 6), out=out, in_flight=6, n_jobs=2, progress=False)
        entries = emu.entries()
    assert len(df) == 6 and (df["status"] == "ok").all()
    simulated = run_sweep({"task": "debug", "team": "latte", "replicates": 6, "max_rounds": 6},
                          out=tmp_path / "sim", progress=False)
    assert by_seed(df.to_dict("records")) == by_seed(simulated.to_dict("records"))  # the same totals
    check = reconcile(entries, out)
    assert (check["lost"], check["paid_twice"], check["recorded_not_billed"]) == ([], 0, [])
    assert check["dollars_recorded"] == pytest.approx(check["dollars_by_provider"], abs=1e-12)


def test_the_dry_run_estimates_calls_tokens_dollars_and_time_from_a_rehearsal(tmp_path, capsys):
    from latte_lab.cli import main

    rehearsal = tmp_path / "rehearsal"
    done = run_sweep({"task": "debug", "team": "latte", "replicates": 2, "max_rounds": 2}, out=rehearsal,
                     progress=False)
    calls = [len((rehearsal / t / "ledger.csv").read_text().splitlines()) - 1 for t in done["trial_id"]]
    grid = {"task": "debug", "team": "latte", "replicates": 10, "max_rounds": 2, "model": "openai/gpt-4o-mini"}
    plan = ll.sweep.dry_run(grid, tmp_path / "study", in_flight=5, rate_limits={"openai": (None, 1000)},
                            basis=rehearsal)
    row = plan.table().iloc[0]
    assert row["to_run"] == 10 and row["calls_to_run"] == pytest.approx(10 * sum(calls) / 2)
    assert row["tokens_to_run"] == 10 * round(done["total_tokens"].mean())
    assert row["dollars_to_run"] == pytest.approx((done["total_input_tokens"].mean() * 0.15
                                                   + done["total_output_tokens"].mean() * 0.60) / 1e6 * 10, rel=1e-6)
    timing = plan.time_estimate()
    assert timing["bound"] == "the 1,000 tokens per minute of openai"
    assert timing["seconds"] == pytest.approx(row["tokens_to_run"] / 1000 * 60)
    assert timing["bounds"]["5 trials at once"] == pytest.approx(done["real_seconds"].mean() * 10 / 5)
    assert main(["sweep", "--tasks", "debug", "--models", "openai/gpt-4o-mini", "--replicates", "10", "--max-rounds",
                 "2", "--in-flight", "5", "--rate-limit", "openai=-/1000", "--estimate-from", str(rehearsal),
                 "--out", str(tmp_path / "study"), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert f"calls to run: {row['calls_to_run']:,.0f}; tokens: {row['tokens_to_run']:,.0f}" in text
    assert "time: " in text and "bound by the 1,000 tokens per minute of openai (5 trials at once:" in text
    assert f"mean of 2 runs in {rehearsal} with other models" in text
    with pytest.raises(ll.ConfigError, match="in_flight must be a whole number from 1 to 1024"):
        ll.sweep.dry_run(grid, tmp_path / "study", in_flight=0)
    with pytest.raises(ll.ConfigError, match="in_flight is for backend='local'"):
        run_sweep(grid, out=tmp_path / "x", in_flight=4, backend="ray")


def test_a_low_open_files_limit_spreads_the_trials_over_more_processes(monkeypatch):
    monkeypatch.setattr(inflight, "open_files_limit", lambda: (1024, 1024))
    per_process = (1024 - inflight.FILES_PER_PROCESS) // inflight.FILES_PER_TRIAL
    assert inflight.processes_for(per_process * 2, 2) == 2
    assert inflight.processes_for(per_process * 2 + 1, 2) == 3
    assert inflight.processes_for(300, 2) == -(-300 // per_process)
    monkeypatch.setattr(inflight, "open_files_limit", lambda: (1024, 1 << 20))
    assert inflight.processes_for(1000, 2) == 2  # a worker raises its own soft limit up to the hard one


def test_an_evaluation_gives_way_to_the_runs_of_trials_still_at_work():
    import multiprocessing
    import threading

    from latte_lab.sandbox.slots import SlotGate

    gate = SlotGate(1, multiprocessing.get_context("fork"))
    order = []

    def take(name: str, evaluation: bool) -> None:
        gate.acquire(evaluation=evaluation)
        order.append(name)
        gate.release()

    gate.acquire()  # the one slot is busy
    test_run = threading.Thread(target=take, args=("test run", False))
    test_run.start()
    wait_until(lambda: gate._waiting.value == 1, "the test run waits", timeout=30)
    evaluation = threading.Thread(target=take, args=("evaluation", True))
    evaluation.start()  # asks after the test run, but would take the slot first in a plain semaphore's race
    gate.release()
    test_run.join(30)
    evaluation.join(30)
    assert order == ["test run", "evaluation"] and gate.busy() == 0 and gate.peak() == 1
