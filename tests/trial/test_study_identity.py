"""A trial of a study is the trial run alone: a sample of a 2-job sweep (whose workers share one memo of test
runs, so a trial takes results another trial's session produced) against the same trials run one by one by
``ll.run_trial`` in a fresh process memo, byte for byte in calls.jsonl and field for field in the results row
and the events, wall-clock fields aside."""

from __future__ import annotations

import json

import pytest

import latte_lab as ll
from latte_lab import rundir
from latte_lab.sandbox import clear_memo
from latte_lab.sweep import sweepdir
from latte_lab.trial import comparable_events, comparable_row

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_shared_memo")]

# two seeds of each task, so that trials of different seeds meet in the same workspace states
SAMPLE = [("debug", "latte"), ("eda", "static"), ("textproc", "pipeline")]
ROUNDS = 6


def test_trials_of_a_sweep_are_the_trials_run_alone(tmp_path):
    configs = [ll.TrialConfig(task=task, team=team, model="simulated", seed=seed, max_rounds=ROUNDS)  # default backend
               for seed in (0, 1) for task, team in SAMPLE]
    out = tmp_path / "sweep"
    clear_memo()
    df = ll.run_sweep(configs, out=out, n_jobs=2, progress=False)
    assert (df["status"] == "ok").all()
    assert any(sweepdir.memo_dir(out).glob("*.json")), "the workers kept no shared memo"

    served_by_others = 0
    for cfg in configs:
        clear_memo()  # alone: nothing memoised but what the trial itself tests
        alone = ll.run_trial(cfg.model_copy(update={"runs_dir": str(tmp_path / "alone")}))
        swept = out / cfg.trial_id
        assert (swept / rundir.CALLS_FILE).read_bytes() == (alone.run_dir / rundir.CALLS_FILE).read_bytes(), cfg.trial_id
        assert comparable_row(rundir.read_result(swept)["row"]) == comparable_row(alone.row), cfg.trial_id
        swept_events = rundir.read_jsonl(swept / rundir.EVENTS_FILE)
        alone_events = rundir.read_jsonl(alone.run_dir / rundir.EVENTS_FILE)
        assert comparable_events(swept_events) == comparable_events(alone_events), cfg.trial_id
        served_by_others += sum(1 for s, a in zip(swept_events, alone_events, strict=True)
                                if s["type"] == "run_tests" and s.get("test_cached") and not a.get("test_cached"))
        assert json.loads((swept / rundir.RESULT_FILE).read_text())["eval"] == alone.eval, cfg.trial_id
    # the comparison covered test results that came from other trials' sessions
    assert served_by_others > 0
