"""Sweeps on Ray: a local 2-node cluster (``ray.cluster_utils.Cluster``), each node with its own temporary
directory as its disk and its own response cache, gives the same rows as the local backend (the simulated
model, and a loopback OpenAI server); every run directory lands on the driver, the driver's cache gets
the calls, and resume needs only the driver. Symlinks and special files an agent leaves are named, as on
the local backend. A driver that started its own local cluster takes it along when it is killed."""

from __future__ import annotations

import json
import signal
import sqlite3
import time

import pytest
import ray
from ray.cluster_utils import Cluster
from sweep_helpers import (
    SPECIAL_FILES_LEFT,
    SpecialFilesServer,
    TeamServer,
    alive,
    descendants,
    start_script,
    wait_until,
)

import latte_lab as ll
from latte_lab import rundir
from latte_lab.sweep import sweepdir
from latte_lab.sweep.distributed import pack, unpack
from latte_lab.trial import comparable_row

CLUSTER_START_ATTEMPTS = 3  # a raylet gives up when its agents take over 15 s to start, as on a loaded machine
API_KEY = "sk-test-ray-nodes"
pytestmark = pytest.mark.slow  # a two-node cluster starts in tens of seconds
DRIVER_GONE_SECONDS = 10.0  # a killed driver's Ray processes must be gone within this

RAY_DRIVER = """
import sys
import latte_lab as ll
ll.run_sweep({"task": "debug", "team": ["latte", "leader_worker"], "replicates": 4, "max_rounds": 40},
             out=sys.argv[1], backend="ray", progress=False)
"""


def _cmdline(proc) -> str:
    try:
        return " ".join(proc.cmdline())
    except Exception:  # noqa: BLE001 - it has ended
        return ""


def test_a_driver_killed_with_sigkill_takes_its_local_cluster_along_within_10_s(tmp_path):
    """Runs first in this file, before the module's cluster starts: the driver starts a local cluster of its
    own (``ray.init()``), and its Ray processes (raylet, GCS, agents, workers running trials) must all end
    within DRIVER_GONE_SECONDS of a SIGKILL; Ray alone left the raylet's two agents for about a minute."""
    proc = start_script(RAY_DRIVER, str(tmp_path / "sweep"), env={"RAY_ADDRESS": ""})  # "": start a cluster
    tree: dict[int, object] = {}

    def trials_running() -> bool:
        for p in descendants(proc.pid):
            tree.setdefault(p.pid, p)
        return sum(_cmdline(p).startswith("ray::remote_trial") for p in alive(list(tree.values()))) >= 1

    wait_until(trials_running, "a trial runs on the driver's local cluster", proc=proc)
    for p in descendants(proc.pid):  # the latest processes too
        tree.setdefault(p.pid, p)
    names = sorted({_cmdline(p).split()[0].rsplit("/", 1)[-1] for p in alive(list(tree.values())) if _cmdline(p)})
    assert "ray::DashboardAgent" in names or "ray::RuntimeEnvAgent" in names, names
    proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    proc.communicate()
    while alive(list(tree.values())) and time.monotonic() - killed < DRIVER_GONE_SECONDS:
        time.sleep(0.1)
    left = [(p.pid, _cmdline(p)[:60]) for p in alive(list(tree.values()))]
    assert not left, f"alive {DRIVER_GONE_SECONDS} s after the driver was killed: {left}"
    print(f"the driver's Ray processes ended {time.monotonic() - killed:.1f} s after its SIGKILL")


def _keys(cache_path) -> set[str]:
    with sqlite3.connect(cache_path) as conn:
        return {row[0] for row in conn.execute("SELECT key FROM responses")}


class Nodes(list):
    """The module cluster's nodes' disks (a list, as the tests read it), and the cluster itself."""

    def __init__(self, disks, cluster):
        super().__init__(disks)
        self.cluster = cluster


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
        yield Nodes(disks, c)
    finally:
        ray.shutdown()
        c.shutdown()


def test_symlinks_and_special_files_left_on_a_node_are_named_on_the_driver_and_no_trial_is_lost(
        cluster, tmp_path, monkeypatch):
    """An agent leaves an absolute symlink, a relative one, a FIFO and a socket in its workspace (the local
    sandbox): the trial lands finished, with special_files.json naming them as the local backend does."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    server = SpecialFilesServer().start()
    try:
        grid = {"task": "debug", "team": "latte", "replicates": 2, "model": "openai/gpt-4o-mini",
                "base_url": server.openai_url, "sandbox": "local", "max_rounds": 4, "cache": "off"}
        out = tmp_path / "ray"
        df = ll.run_sweep(grid, out=out, backend="ray", progress=False)
        assert list(df["status"]) == ["ok", "ok"], df[["trial_id", "status", "error"]].to_dict("records")
        for trial_id in df["trial_id"]:
            assert json.loads((out / trial_id / sweepdir.SPECIAL_FILES).read_text()) == SPECIAL_FILES_LEFT
            assert (out / trial_id / rundir.WORKSPACE_DIR / "signal_toolkit.py").is_file()
        assert not [p for p in out.rglob("*") if p.is_symlink() or not (p.is_file() or p.is_dir())]
        hits = server.hits
        again = ll.run_sweep(grid, out=out, backend="ray", progress=False)  # nothing runs twice
        assert server.hits == hits and list(again["trial_id"]) == list(df["trial_id"])
    finally:
        server.stop()


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



def test_a_node_killed_mid_sweep_loses_no_trial_and_records_none_twice(cluster, tmp_path_factory, tmp_path):
    """A third node joins the module's cluster; once a trial runs on it (its staging directory appears on the
    node's disk) the node is killed. Ray runs that trial again on another node (ray_retries), and every trial
    of the grid lands on the driver exactly once: finished, one run directory each, no failed attempt. The
    trials get latte_lab from the driver through the runtime_env (ray_runtime_env="package")."""
    import threading

    ray.shutdown()  # the sweep joins the cluster itself, shipping latte_lab in the job's runtime_env
    disk = tmp_path_factory.mktemp("node-c-disk")
    node = cluster.cluster.add_node(num_cpus=1, env_vars={"TMPDIR": str(disk),
                                                          "LATTE_LAB_CACHE": str(disk / "cache.sqlite")})
    cluster.cluster.wait_for_nodes()
    grid = {"task": "debug", "team": "latte", "replicates": 6, "max_rounds": 8, "sandbox": "local"}
    out = tmp_path / "ray"
    found: dict = {}
    sweep = threading.Thread(target=lambda: found.update(df=ll.run_sweep(
        grid, out=out, backend="ray", progress=False, ray_address=cluster.cluster.address, ray_retries=2,
        ray_runtime_env="package")))
    sweep.start()
    wait_until(lambda: any(disk.glob("latte_lab-ray-*")) or not sweep.is_alive(), "a trial runs on the third node")
    assert sweep.is_alive(), "the sweep ended before a trial ran on the third node"
    cluster.cluster.remove_node(node)  # kills its raylet and the trial running there
    killed = time.monotonic()
    sweep.join(timeout=240)
    assert not sweep.is_alive(), "the sweep did not finish after the node was killed"
    df = found["df"]
    assert len(df) == 6 and df["trial_id"].is_unique and (df["status"] == "ok").all(), \
        df[["trial_id", "status", "error"]].to_dict("records")
    landed = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert landed == sorted(df["trial_id"]), landed  # one run directory per trial: no attempt kept aside
    for trial_id in landed:
        run = ll.read_run(out / trial_id)
        assert run.status == "ok" and run.row["trial_id"] == trial_id
        assert [e["type"] for e in run.events].count("run_start") == 1
    ray.shutdown()
    print(f"node killed; the sweep finished {time.monotonic() - killed:.1f} s later with {len(df)} trials, "
          f"each once")
