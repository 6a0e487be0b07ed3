"""Sweeps on Ray: a local 2-node cluster (``ray.cluster_utils.Cluster``), each node with its own temporary
directory as its disk and its own response cache, gives the same rows as the local backend (the simulated
model, and a loopback OpenAI server); every run directory lands on the driver, the driver's cache gets
the calls, and resume needs only the driver."""

from __future__ import annotations

import sqlite3
import time

import pytest
import ray
from ray.cluster_utils import Cluster
from sweep_helpers import TeamServer

import latte_lab as ll
from latte_lab import rundir
from latte_lab.sweep.distributed import pack, unpack
from latte_lab.trial import comparable_row

CLUSTER_START_ATTEMPTS = 3  # a raylet gives up when its agents take over 15 s to start, as on a loaded machine
API_KEY = "sk-test-ray-nodes"
pytestmark = pytest.mark.slow  # a two-node cluster starts in tens of seconds


def _keys(cache_path) -> set[str]:
    with sqlite3.connect(cache_path) as conn:
        return {row[0] for row in conn.execute("SELECT key FROM responses")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    disks = [tmp_path_factory.mktemp("node-a-disk"), tmp_path_factory.mktemp("node-b-disk")]
    envs = [{"TMPDIR": str(d), "LATTE_LAB_CACHE": str(d / "cache.sqlite"), "OPENAI_API_KEY": API_KEY} for d in disks]
    for attempt in range(CLUSTER_START_ATTEMPTS):
        try:
            c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                              "env_vars": envs[0]})
            c.add_node(num_cpus=1, env_vars=envs[1])
            break
        except Exception:  # noqa: BLE001 - Ray raises a bare Exception when a node does not come up
            if attempt == CLUSTER_START_ATTEMPTS - 1:
                raise
            time.sleep(2)
    ray.init(address=c.address)
    try:
        yield disks
    finally:
        ray.shutdown()
        c.shutdown()


def test_ray_cluster_gives_the_local_rows_lands_every_run_dir_on_the_driver_and_resumes_there(
        cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    server = TeamServer().start()
    try:
        grid = [{"task": "debug", "team": team, "model": model, "max_rounds": 3, "seed": 1,
                 "base_url": None if model == "simulated" else server.openai_url}
                for model in ("openai/gpt-4o-mini", "simulated") for team in ("latte", "leader_worker")]
        # two single-CPU nodes: trials run on either, each in its node's temporary directory
        local = ll.run_sweep(grid, out=tmp_path / "local", n_jobs=2, progress=False)

        driver_cache = tmp_path / "driver-cache.sqlite"
        monkeypatch.setenv("LATTE_LAB_CACHE", str(driver_cache))
        out = tmp_path / "ray"
        remote = ll.run_sweep(grid, out=out, backend="ray", progress=False)
        hits = server.hits

        assert (local["status"] == "ok").all(), local[["trial_id", "status", "error"]].to_dict("records")
        assert (remote["status"] == "ok").all(), remote[["trial_id", "status", "error"]].to_dict("records")
        assert list(remote["trial_id"]) == list(local["trial_id"])
        for a, b in zip(remote.to_dict("records"), local.to_dict("records")):
            a, b = comparable_row(a), comparable_row(b)
            differ = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
            if a["model"] == "simulated":  # a deterministic model: the very same row
                assert not differ, differ
            else:  # a server's answers are the same, the latency each call measured is not (nor times built on it)
                assert all(k.endswith(("_s", "_seconds")) for k in differ), differ
        for trial_id in remote["trial_id"]:  # every run directory is on the driver, whole
            run_dir = out / trial_id
            for name in (rundir.CONFIG_FILE, rundir.EVENTS_FILE, rundir.CALLS_FILE, rundir.RESULT_FILE):
                assert (run_dir / name).is_file(), run_dir / name
            assert (run_dir / rundir.WORKSPACE_DIR / "signal_toolkit.py").is_file()
            assert rundir.read_result(run_dir)["row"]["run_dir"] == str(run_dir)

        # Ray places each trial on a free CPU; which node that is depends on timing, so the test asks only
        # that every trial ran in some node's temporary directory and that each node used has its own cache
        ran_on = {str(rundir.read_config(out / t).runs_dir).rpartition("/latte_lab-ray-")[0] for t in remote["trial_id"]}
        disks = {str(d): d for d in cluster}
        assert ran_on and ran_on <= set(disks), ran_on
        node_keys = {d: _keys(disks[d] / "cache.sqlite") for d in ran_on if (disks[d] / "cache.sqlite").exists()}
        assert node_keys and all(node_keys.values()), "each node that ran a server trial filled its own cache"
        assert _keys(driver_cache) == set().union(*node_keys.values())  # the driver merged what the nodes fetched
        for disk in cluster:
            assert not list(disk.glob("latte_lab-ray-*")), "a node kept a staging directory"

        ray.shutdown()  # resume from the driver alone: nothing is left to run, so no cluster is needed
        stamps = {p.name: (p / rundir.EVENTS_FILE).stat().st_mtime_ns for p in out.iterdir() if p.name[0] != "."}
        again = ll.run_sweep(grid, out=out, backend="ray", progress=False)
        assert not ray.is_initialized() and server.hits == hits
        assert list(again["trial_id"]) == list(remote["trial_id"])
        assert {p.name: (p / rundir.EVENTS_FILE).stat().st_mtime_ns for p in out.iterdir() if p.name[0] != "."} \
            == stamps
    finally:
        server.stop()


def test_a_run_dir_archive_round_trips_and_refuses_members_leaving_it(tmp_path):
    run = tmp_path / "run"
    (run / "workspace").mkdir(parents=True)
    (run / "result.json").write_text("{}")
    (run / "workspace" / "a.py").write_text("x = 1\n")
    unpack(pack(run), tmp_path / "copy")
    assert (tmp_path / "copy" / "workspace" / "a.py").read_text() == "x = 1\n"

    import io
    import tarfile

    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises((tarfile.TarError, ll.DataError)):
        unpack(evil.getvalue(), tmp_path / "evil")
    assert not (tmp_path / "escaped.txt").exists()
