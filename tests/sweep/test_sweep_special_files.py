"""Symlinks and special files an agent leaves in its workspace: recorded as what they were
(``special_files.json``) in every sweep directory, whichever backend ran the trial; a run directory that
cannot be unpacked on the driver is the trial's attempt with status ``error``, recorded once, and a rerun
runs the trial again instead of taking a partial copy for a finished trial.

The Ray cluster runs of the same agent are in ``test_ray.py``; here the Ray driver's landing of an archive
is exercised with a stand-in for ``ray.get``.
"""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import tarfile
import types

import pytest
from sweep_helpers import SPECIAL_FILES_LEFT, SpecialFilesServer

import latte_lab as ll
from latte_lab import rundir
from latte_lab.sweep import distributed, run_sweep, sweepdir
from latte_lab.sweep.distributed import RayRunner, pack, unpack


def _specials(root) -> list[str]:
    """Everything under ``root`` that is neither a regular file nor a directory."""
    return [rel for path, rel, st, _ in sweepdir.walk_run_dir(root) if st is not None
            and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))]


def _a_run_dir(path, *, device: bool = False):
    ws = path / "workspace"
    (ws / "sub").mkdir(parents=True)
    (path / "config.json").write_text(ll.TrialConfig(task="debug").to_json())
    (path / "result.json").write_text(json.dumps({"trial_id": "t", "status": "ok", "row": {"trial_id": "t"}}))
    (ws / "a.py").write_text("x = 1\n")
    os.link(ws / "a.py", ws / "b.py")  # a hard link inside: two regular files
    os.symlink("/etc/passwd", ws / "passwd")
    os.symlink("a.py", ws / "a_link")
    os.symlink("/", ws / "sub" / "root")
    os.mkfifo(ws / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "sock"))
    sock.close()
    expected = {"workspace/a_link": "symlink -> a.py", "workspace/passwd": "symlink -> /etc/passwd",
                "workspace/pipe": "fifo", "workspace/sock": "socket", "workspace/sub/root": "symlink -> /"}
    if device:
        try:
            os.mknod(ws / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            expected["workspace/null"] = "character device 1:3"
        except OSError:
            pass
    return expected


def test_record_special_files_replaces_each_by_what_it_was_and_follows_nothing(tmp_path):
    run = tmp_path / "run"
    expected = _a_run_dir(run, device=True)
    assert sweepdir.record_special_files(run) == expected
    assert json.loads((run / sweepdir.SPECIAL_FILES).read_text()) == expected
    assert _specials(run) == []
    assert (run / "workspace" / "a.py").read_text() == (run / "workspace" / "b.py").read_text() == "x = 1\n"
    assert sweepdir.record_special_files(run) == {}  # a second look finds nothing and keeps the record
    assert json.loads((run / sweepdir.SPECIAL_FILES).read_text()) == expected


def test_an_archive_carries_regular_files_and_names_the_rest(tmp_path):
    run = tmp_path / "run"
    expected = _a_run_dir(run, device=True)
    unpack(pack(run), tmp_path / "copy")
    copy = tmp_path / "copy"
    assert _specials(copy) == []
    assert json.loads((copy / sweepdir.SPECIAL_FILES).read_text()) == expected
    assert (copy / "workspace" / "b.py").read_text() == "x = 1\n"
    assert rundir.read_result(copy)["status"] == "ok"
    assert len(_specials(run)) == len(expected)  # packing leaves the node's copy as it was


def test_an_archive_made_by_tarfile_with_an_absolute_symlink_is_unpacked_and_the_link_named(tmp_path):
    """What a node packed before (``tar.add`` keeps links): no AbsoluteLinkError, the link named instead."""
    run = tmp_path / "run"
    expected = _a_run_dir(run)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(run, arcname=".")
    unpack(buffer.getvalue(), tmp_path / "copy")
    assert _specials(tmp_path / "copy") == []
    named = json.loads((tmp_path / "copy" / sweepdir.SPECIAL_FILES).read_text())
    assert {k: v for k, v in named.items() if k != "workspace/sock"} == \
        {k: v for k, v in expected.items() if k != "workspace/sock"}  # tarfile itself skips sockets


def test_result_json_is_unpacked_last(tmp_path, monkeypatch):
    """A driver killed while unpacking leaves a directory without result.json: the next sweep records it as an
    attempt killed part way, never as a finished trial."""
    run = tmp_path / "run"
    _a_run_dir(run)
    extracted = []

    def extract(tar, member, dest):
        if len(extracted) == 3:
            raise KeyboardInterrupt("the driver stops here")
        extracted.append(member.name)
        tar.extract(member, dest, filter="data")

    monkeypatch.setattr(distributed, "_extract", extract)
    with pytest.raises(KeyboardInterrupt):
        unpack(pack(run), tmp_path / "copy")
    assert len(extracted) == 3 and not (tmp_path / "copy" / rundir.RESULT_FILE).exists()


def _runner(out, result):
    """A RayRunner landing ``result`` as the outcome of every task, without a cluster."""
    class Exceptions:
        class TaskCancelledError(Exception):
            pass

        class RayError(Exception):
            pass

    runner = RayRunner.__new__(RayRunner)
    runner.ray = types.SimpleNamespace(get=lambda ref: result, exceptions=Exceptions)
    runner.out = out
    return runner


def _evil_archive(run) -> bytes:
    """``run`` packed, then a member leaving the directory added before result.json."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("config.json", "workspace"):
            tar.add(run / name, arcname=name)
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
        tar.add(run / "result.json", arcname="result.json")
    return buffer.getvalue()


@pytest.mark.parametrize("damage", ["escaping member", "cut off", "not gzip"])
def test_an_archive_that_cannot_be_unpacked_is_one_error_attempt_and_the_rerun_runs_the_trial(tmp_path, damage):
    cfg = ll.TrialConfig(task="debug", team="static", max_rounds=2)
    node = tmp_path / "node"
    res = ll.run_trial(cfg, runs_dir=node)
    assert res.status == "ok"
    good = pack(res.run_dir)
    archive = {"escaping member": _evil_archive(res.run_dir), "cut off": good[: len(good) // 2],
               "not gzip": b"not an archive"}[damage]
    out = tmp_path / "out"
    rows = []
    _runner(out, {"trial_id": cfg.trial_id, "archive": archive, "interrupted": False, "node": "node-1"}) \
        ._land(object(), cfg, rows.append)

    assert len(rows) == 1 and rows[0]["status"] == "error", rows
    assert rows[0]["error"].startswith("its run directory from Ray node node-1 could not be unpacked (")
    assert rows[0]["trial_id"] == cfg.trial_id
    assert not (out / cfg.trial_id).exists() and not (tmp_path / "escaped.txt").exists()
    attempt = out / f"{cfg.trial_id}{sweepdir.FAILED_INFIX}0"
    assert rundir.read_result(attempt)["status"] == "error"
    assert not list(sweepdir.running_dir(out).iterdir())

    again = run_sweep([cfg], out=out, progress=False)  # the trial runs again, for real
    assert list(again["status"]) == ["ok"] and (out / cfg.trial_id / rundir.WORKSPACE_DIR / "signal_toolkit.py").is_file()
    assert rundir.read_result(attempt)["status"] == "error"  # the failed attempt stays what it was
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted([cfg.trial_id, attempt.name])


def test_a_landed_archive_with_special_files_is_a_finished_trial_naming_them(tmp_path):
    cfg = ll.TrialConfig(task="debug", team="static", max_rounds=2)
    res = ll.run_trial(cfg, runs_dir=tmp_path / "node")
    os.symlink("/etc/passwd", res.run_dir / "workspace" / "passwd")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:  # as a node packed it before
        tar.add(res.run_dir, arcname=".")
    out = tmp_path / "out"
    rows = []
    runner = _runner(out, {"trial_id": cfg.trial_id, "archive": buffer.getvalue(), "interrupted": False})
    runner._land(object(), cfg, rows.append)
    assert [r["status"] for r in rows] == ["ok"]
    assert json.loads((out / cfg.trial_id / sweepdir.SPECIAL_FILES).read_text()) == \
        {"workspace/passwd": "symlink -> /etc/passwd"}
    assert _specials(out / cfg.trial_id) == []


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_local_sweep_records_what_an_agent_left_and_each_trial_once(tmp_path, monkeypatch, n_jobs):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-special-files")
    server = SpecialFilesServer().start()
    try:
        grid = {"task": "debug", "team": "latte", "replicates": 2, "model": "openai/gpt-4o-mini",
                "base_url": server.openai_url, "sandbox": "local", "max_rounds": 4, "cache": "off"}
        df = run_sweep(grid, out=tmp_path / "sweep", n_jobs=n_jobs, progress=False)
    finally:
        server.stop()
    assert list(df["status"]) == ["ok", "ok"], df[["trial_id", "status", "error"]].to_dict("records")
    for run_dir in df["run_dir"]:
        assert json.loads((tmp_path / "sweep" / os.path.basename(run_dir) / sweepdir.SPECIAL_FILES).read_text()) \
            == SPECIAL_FILES_LEFT
    assert _specials(tmp_path / "sweep") == []
    assert len(ll.load_runs(tmp_path / "sweep").trials) == 2

