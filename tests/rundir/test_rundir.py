"""The run directory: the one JSONL reader, whole-line appends, never-overwritten directories, load_trial."""

from __future__ import annotations

import errno
import json
import os
import shutil

import pytest

import latte_lab as ll
from latte_lab import rundir
from latte_lab.errors import DataError


def _lines_all_parse(path) -> int:
    text = path.read_bytes().decode("utf-8")
    assert text == "" or text.endswith("\n")
    return len([json.loads(line) for line in text.splitlines()])


# --- the reader -----------------------------------------------------------------------------------------------

def test_reader_skips_blank_lines_and_keeps_order(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n{"a": "é\u2028"}\n', encoding="utf-8")
    assert rundir.read_jsonl(p) == [{"a": 1}, {"a": "é\u2028"}]
    assert rundir.read_jsonl(tmp_path / "absent.jsonl") == []
    with pytest.raises(DataError, match="absent.jsonl"):
        rundir.read_jsonl(tmp_path / "absent.jsonl", missing_ok=False)


@pytest.mark.parametrize("data, message", [
    (b'{"a": 1}\n{"b": "\xff\xfe"}\n', r"x.jsonl, line 2: byte 8 is not UTF-8; the file is damaged"),
    (b'{"a": 1}\n{"b": 2', r"x.jsonl, line 2: cut off mid-line .*remove that last line"),
    (b'{"a": 1}\nnot json\n{"c": 3}\n', r"x.jsonl, line 2: not valid JSON \(Expecting value at column 1\)"),
    (b'[1, 2]\n', r"x.jsonl, line 1: expected a JSON object, got list"),
])
def test_reader_names_the_file_and_line_of_damage_in_one_line(tmp_path, data, message):
    p = tmp_path / "x.jsonl"
    p.write_bytes(data)
    with pytest.raises(DataError, match=message) as info:
        rundir.read_jsonl(p)
    assert "\n" not in str(info.value)
    assert info.value.__context__ is None or info.value.__suppress_context__  # no chained traceback


def test_read_json_errors(tmp_path):
    p = tmp_path / "r.json"
    with pytest.raises(DataError, match="r.json is missing"):
        rundir.read_json(p)
    p.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(DataError, match="not UTF-8"):
        rundir.read_json(p)
    p.write_text('{"a": ')
    with pytest.raises(DataError, match="not valid JSON"):
        rundir.read_json(p)
    p.write_text("[]")
    with pytest.raises(DataError, match="expected a JSON object"):
        rundir.read_json(p)


# --- writing --------------------------------------------------------------------------------------------------

def test_appender_writes_whole_batches_or_nothing(tmp_path, monkeypatch):
    p = tmp_path / "events.jsonl"
    app = rundir.JsonlAppender(p)
    app.append({"seq": 0, "text": "x" * 100})
    real_write = os.write
    calls = []

    def full_disk(fd, data):  # the disk fills part way through the batch
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:37]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError) as info:
        app.append_many([{"seq": 1, "text": "y" * 100}, {"seq": 2}])
    assert info.value.errno == errno.ENOSPC and len(calls) == 2
    monkeypatch.setattr(os, "write", real_write)
    assert _lines_all_parse(p) == 1  # the half-written batch is gone
    app.append({"seq": 3})  # and appending goes on after the failure
    app.close()
    assert [r["seq"] for r in rundir.read_jsonl(p)] == [0, 3]


def test_appender_continues_an_existing_file(tmp_path):
    p = tmp_path / "e.jsonl"
    p.write_text('{"seq": 0}\n')
    app = rundir.JsonlAppender(p)
    app.append_many([{"seq": 1}, {"seq": 2, "path": tmp_path}])
    app.close()
    assert [r["seq"] for r in rundir.read_jsonl(p)] == [0, 1, 2]
    assert rundir.read_jsonl(p)[2]["path"] == str(tmp_path)


def test_new_run_dir_never_reuses_a_directory(tmp_path):
    a = rundir.new_run_dir(tmp_path / "runs", "t")
    b = rundir.new_run_dir(tmp_path / "runs", "t")
    c = rundir.new_run_dir(tmp_path / "runs", "t")
    assert [a.name, b.name, c.name] == ["t", "t-2", "t-3"] and all(p.is_dir() for p in (a, b, c))


def test_promote_keeps_an_earlier_attempt_and_updates_the_row(tmp_path):
    final = tmp_path / "trial"
    final.mkdir()
    (final / "result.json").write_text(json.dumps({"status": "error", "row": {"run_dir": str(final)}}))
    tmp = rundir.new_run_dir(tmp_path, "trial-tmp")
    w = rundir.RunWriter(tmp)
    w.write_result({"trial_id": "trial", "status": "ok", "row": {"run_dir": str(tmp), "x": 1}})
    w.close()
    assert rundir.promote(tmp, final) == final
    assert not tmp.exists()
    assert json.loads((tmp_path / "trial-failed-0" / "result.json").read_text())["status"] == "error"
    saved = json.loads((final / "result.json").read_text())
    assert saved["row"] == {"run_dir": str(final), "x": 1}
    assert rundir.finished_row(final)["run_dir"] == str(final)
    assert rundir.finished_row(tmp_path / "trial-failed-0") is None  # errored
    assert rundir.finished_row(tmp_path / "nowhere") is None


# --- a whole trial, written and read back ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def latte_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    res = ll.run_trial(ll.TrialConfig(task="debug", team="latte", seed=1, max_rounds=4, runs_dir=str(runs)))
    return res


def test_trial_writes_every_file_and_every_line_parses(latte_run):
    d = latte_run.run_dir
    for name in (rundir.CONFIG_FILE, rundir.EVENTS_FILE, rundir.SNAPSHOTS_FILE, rundir.CALLS_FILE,
                 rundir.LEDGER_FILE, rundir.RESULT_FILE):
        assert (d / name).is_file(), name
    assert (d / rundir.WORKSPACE_DIR).is_dir()
    assert _lines_all_parse(d / rundir.EVENTS_FILE) == len(latte_run.event_list)
    assert _lines_all_parse(d / rundir.SNAPSHOTS_FILE) == len(latte_run.snapshots) >= 2
    assert not list(d.glob("*.tmp"))


def test_load_trial_reads_back_what_run_trial_returned(latte_run):
    back = ll.load_trial(latte_run.run_dir)
    assert back.config == latte_run.config
    assert back.row == json.loads((latte_run.run_dir / rundir.RESULT_FILE).read_text())["row"]
    assert back.row["trial_id"] == latte_run.row["trial_id"] and back.metrics.keys() == latte_run.metrics.keys()
    assert (back.status, back.reason, back.rounds, back.tokens) == (latte_run.status, latte_run.reason,
                                                                   latte_run.rounds, latte_run.tokens)
    assert back.event_list == json.loads(json.dumps(latte_run.event_list, default=str))
    assert back.snapshots == latte_run.snapshots


def test_a_moved_run_directory_reads_with_its_new_place(latte_run, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(latte_run.run_dir, moved)
    back = ll.load_trial(moved)
    assert back.run_dir == moved and back.row["run_dir"] == str(moved)


def test_load_trial_refuses_an_unfinished_or_damaged_directory(latte_run, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(latte_run.run_dir, d)
    (d / rundir.RESULT_FILE).unlink()
    with pytest.raises(DataError, match="result.json is missing: .* is not a finished latte_lab run directory"):
        ll.load_trial(d)
    shutil.copy(latte_run.run_dir / rundir.RESULT_FILE, d / rundir.RESULT_FILE)
    with open(d / rundir.EVENTS_FILE, "ab") as fh:
        fh.write(b'{"type": "round_st')
    with pytest.raises(DataError, match="events.jsonl, line .*: cut off mid-line"):
        ll.load_trial(d)
    (d / rundir.CONFIG_FILE).write_text('{"task": "debug", "team": 3}')
    with pytest.raises(DataError, match="config.json: not a valid trial config"):
        ll.load_trial(d)
