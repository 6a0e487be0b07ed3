"""``load_runs`` on a sweep directory holding a damaged trial: the trial is left out with a one-line warning
naming its directory and the damage, listed in ``TrialData.damaged`` and ``trials.attrs["damaged"]``, and
every other trial is read as usual."""

from __future__ import annotations

import shutil
import warnings

import pytest

import latte_lab as ll
from latte_lab import rundir
from latte_lab.errors import DataError


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("damaged") / "sweep"
    df = ll.run_sweep({"task": "debug", "team": ["latte", "static"], "max_rounds": 3}, out=out, progress=False)
    assert (df["status"] == "ok").all()
    return out


def _cut(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGE = {
    "result.json cut off": (rundir.RESULT_FILE, _cut, "result.json: not valid JSON"),
    "result.json garbage": (rundir.RESULT_FILE, lambda p: p.write_bytes(b"\xff\xfe garbage"), "is not UTF-8"),
    "config.json garbage": (rundir.CONFIG_FILE, lambda p: p.write_text("{garbage"), "config.json: not valid JSON"),
    "config.json not a config": (rundir.CONFIG_FILE, lambda p: p.write_text('{"task": 3}'),
                                 "config.json: not a valid trial config"),
    "events.jsonl cut off": (rundir.EVENTS_FILE, _cut, "events.jsonl, line"),
    "snapshots.jsonl cut off": (rundir.SNAPSHOTS_FILE, _cut, "snapshots.jsonl, line"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_trial_is_left_out_named_with_its_reason_and_the_rest_is_read(sweep, tmp_path, damage):
    out = tmp_path / "sweep"
    shutil.copytree(sweep, out)
    whole = ll.load_runs(out).trials
    name, spoil, reason = DAMAGE[damage]
    victim = out / sorted(whole["trial_id"])[0]
    spoil(victim / name)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = ll.load_runs(out)
    lines = [str(w.message) for w in caught]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert lines[0].startswith(f"load_runs left out the damaged run directory {victim.name}: {victim / name}")
    assert reason in lines[0]
    assert caught[0].filename == __file__  # the warning points at the caller's line

    assert list(data.trials["trial_id"]) == sorted(whole["trial_id"])[1:]
    assert len(data.damaged) == 1 and data.damaged[0]["path"] == str(victim) and reason in data.damaged[0]["reason"]
    assert data.trials.attrs["damaged"] == data.damaged
    assert data.trials.query("team == team").attrs["damaged"] == data.damaged  # pandas carries attrs along
    assert "damaged=1" in repr(data)
    assert set(data.snapshots["trial_id"]) <= set(data.trials["trial_id"])


def test_an_intact_sweep_has_nothing_damaged(sweep):
    data = ll.load_runs(sweep)
    assert data.damaged == [] and data.trials.attrs["damaged"] == []
    assert ll.load_published().damaged == []


def test_a_sweep_whose_every_trial_is_damaged_is_one_line_error(sweep, tmp_path):
    out = tmp_path / "sweep"
    shutil.copytree(sweep, out)
    for result in out.glob(f"*/{rundir.RESULT_FILE}"):
        _cut(result)
    with pytest.raises(DataError) as info:
        ll.load_runs(out)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"every run directory under {out} is damaged (2; the first: ")
