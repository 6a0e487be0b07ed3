"""Sweeps over a Ray cluster: each trial runs on some node and comes back whole to the driver.

A remote trial runs in a temporary directory of its node, with the node's own response cache, and
returns its run directory as a gzip-compressed tar archive. The run directory's cassette
(``calls.jsonl``) holds every call the trial made, so the archive also carries the cache rows the trial
fetched. The driver unpacks the archive in the sweep's running area, moves it into place like a local
trial, and merges the calls into its own cache (:func:`latte_lab.models.cassette.import_cassettes`).
So ``out`` on the driver holds every run directory: analysis and resume need nothing but the driver.
Symlinks and special files an agent left do not travel: ``special_files.json`` says what they were, as
on the local backend (:mod:`latte_lab.sweep.sweepdir`). An archive that cannot be unpacked is recorded as the
trial's attempt with status ``error``, never as a finished trial, and the sweep goes on.

Rate limits and the sweep's budget are shared through one small actor on the driver's node
(:class:`latte_lab.models.ratelimit.RayState`). Teams and tasks registered in importable modules are
registered again on the nodes.

Each trial asks for :class:`RayOptions` ``cpus`` and ``memory`` (``--ray-cpus``, ``--ray-memory``). A trial
whose node is lost (the node dies, its worker is killed) is run again on another node, up to ``retries`` times:
a trial runs in a temporary directory of its node and only its returned archive lands, once, on the driver, so
a retried trial is never lost nor recorded twice. The ``runtime_env`` ships this driver's latte_lab package
(``py_modules``) to the nodes when the sweep joins a cluster by address (``"auto"``), so the nodes need only
Python and latte_lab's dependencies, not latte_lab itself; a dict is passed to Ray as it is, with the package
added to its ``py_modules``.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from pathlib import Path

import latte_lab.sweep.sweepdir as sweepdir
from latte_lab import rundir
from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError, DataError, LatteError
from latte_lab.sweep.local import GRACE_SECONDS, INTERRUPTED_ERROR, POLL_SECONDS, SweepSettings

FREE_MODELS = ("simulated", "scripted")  # no provider calls, nothing to merge into a cache
DEFAULT_RETRIES = 3  # runs of a trial on another node after its node was lost (Ray's max_retries)
MEMORY_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_memory(value: int | float | str | None) -> int | None:
    """Bytes from ``2G``, ``512M``, ``1.5g``, ``1048576`` (None: no memory reserved); a ConfigError of one line
    otherwise.

    >>> parse_memory("2G"), parse_memory("512m"), parse_memory(1024), parse_memory(None)
    (2147483648, 536870912, 1024, None)
    """
    if value is None:
        return None
    text = str(value).strip().lower().removesuffix("b").removesuffix("i")
    unit = text[-1:] if text[-1:] in MEMORY_UNITS and text[-1:] else ""
    try:
        amount = float(text[:len(text) - len(unit)]) * MEMORY_UNITS[unit]
    except ValueError:
        amount = -1
    if amount <= 0:
        raise ConfigError(f"ray memory {value!r} is not an amount of memory such as 2G, 512M or a number of bytes")
    return int(amount)


class RayOptions:
    """What each trial asks of a Ray cluster: ``cpus`` (default 1), ``memory`` (bytes or ``2G``; default none
    reserved), ``retries`` after a lost node (default :data:`DEFAULT_RETRIES`) and ``runtime_env`` (``"auto"``,
    ``"package"``, ``None`` or a dict: see the module docstring)."""

    def __init__(self, cpus: float = 1, memory: int | str | None = None, retries: int = DEFAULT_RETRIES,
                 runtime_env: dict | str | None = "auto"):
        if not isinstance(cpus, int | float) or isinstance(cpus, bool) or cpus <= 0:
            raise ConfigError(f"ray cpus per trial must be a number > 0; got {cpus!r}")
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ConfigError(f"ray retries must be a whole number >= 0; got {retries!r}")
        if not (runtime_env in (None, "auto", "package") or isinstance(runtime_env, dict)):
            raise ConfigError(f"ray runtime_env must be 'auto', 'package', None or a dict; got {runtime_env!r}")
        self.cpus, self.memory, self.retries, self.runtime_env = cpus, parse_memory(memory), retries, runtime_env

    def env_for(self, joined_by_address: bool) -> dict | None:
        """The job's runtime_env when this sweep starts Ray (None: the nodes' own environment); Ray takes a
        local package to upload only at ``ray.init``."""
        import latte_lab

        ship = self.runtime_env == "package" or isinstance(self.runtime_env, dict) or (
            self.runtime_env == "auto" and joined_by_address)
        if not ship:
            return None
        env = dict(self.runtime_env) if isinstance(self.runtime_env, dict) else {}
        package = str(Path(latte_lab.__file__).resolve().parent)
        env["py_modules"] = [*env.get("py_modules", []), package]
        return env


CONNECT_TIMEOUT_S = 5.0  # a cluster's head answers at once; Ray itself retries a dead address for minutes


def check_reachable(address: str) -> None:
    """A ``host:port`` address whose port does not answer is a one-line ConfigError at once (``ray.init`` would
    retry it for minutes, logging each try); ``auto`` and ``ray://`` addresses are left to Ray."""
    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ConfigError(init_failed_message(address, exc)) from None


def init_failed_message(address: str | None, exc: BaseException) -> str:
    """One line for a ``ray.init`` that failed: where, Ray's first line, and what to check."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    if address:
        return (f"could not connect to the Ray cluster at {address!r} ({first[:200]}); check that its head is "
                "running (ray status), that the address and port are right, and that this Ray and Python version "
                "match the cluster's")
    return (f"could not start a local Ray cluster ({first[:200]}); check free memory and /tmp space, that no stale "
            "Ray processes are left (ray stop), or join a running cluster with ray_address / --ray-address")


def pack(run_dir: Path) -> bytes:
    """A run directory as a gzip-compressed tar archive of its regular files and directories (paths relative
    to the directory), ``result.json`` last. Symlinks and special files, and files that cannot be read, are
    left out and named in the archive's ``special_files.json`` (see :mod:`latte_lab.rundir.special`)."""
    run_dir = Path(run_dir)
    notes: dict[str, str] = {}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for path, rel, st, err in sweepdir.walk_run_dir(run_dir):
            if rel in (rundir.RESULT_FILE, sweepdir.SPECIAL_FILES):
                continue  # added last, and with this archive's notes
            if err is not None:
                notes[rel] = f"not copied from its Ray node: {err.strerror or err}"
                continue
            what = sweepdir.describe_special(path, st)
            if what is not None:
                notes[rel] = what
                continue
            if stat.S_ISDIR(st.st_mode):
                tar.addfile(_member(rel, st, tarfile.DIRTYPE))
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                notes[rel] = f"not copied from its Ray node: {exc.strerror or exc}"
                continue
            tar.addfile(_member(rel, st, tarfile.REGTYPE, len(data)), io.BytesIO(data))
        known = sweepdir.read_special_files(run_dir)
        if known or notes:
            data = json.dumps({**known, **notes}, indent=2).encode("utf-8")
            tar.addfile(_member(sweepdir.SPECIAL_FILES, None, tarfile.REGTYPE, len(data)), io.BytesIO(data))
        result = run_dir / rundir.RESULT_FILE
        if result.is_file() and not result.is_symlink():
            data = result.read_bytes()
            tar.addfile(_member(rundir.RESULT_FILE, result.stat(), tarfile.REGTYPE, len(data)), io.BytesIO(data))
    return buffer.getvalue()


def _member(name: str, st, kind: bytes, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    info.mode = stat.S_IMODE(st.st_mode) if st is not None else 0o644
    info.mtime = st.st_mtime if st is not None else time.time()
    return info


def _what_member_is(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"symlink -> {member.linkname}"
    if member.islnk():
        return f"hard link -> {member.linkname}"
    if member.isfifo():
        return "fifo"
    if member.ischr() or member.isblk():
        return f"{'character' if member.ischr() else 'block'} device {member.devmajor}:{member.devminor}"
    return f"special file (tar type {member.type!r})"


def unpack(data: bytes, dest: Path) -> None:
    """Unpacks :func:`pack`'s archive into ``dest`` (created). A member that would leave ``dest`` makes the
    whole archive a DataError before anything is written. Symlinks and special files are not made, nor hard
    links but to a regular file of the archive: each becomes an entry of ``special_files.json``.
    ``result.json`` comes last, so a directory unpacked part way (the driver killed meanwhile) never looks
    like a finished trial."""
    dest = Path(dest)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()  # reads the whole archive: a damaged one fails before anything is written
        root = dest.resolve()
        files, last, notes, regular = [], [], {}, set()
        for member in members:
            rel = posixpath.normpath(member.name)
            target = (root / rel).resolve()
            leaves = member.name.startswith("/") or rel == ".." or rel.startswith("../")
            if leaves or not (target == root or root in target.parents):
                raise DataError(f"the archive of {dest.name} has a member leaving its directory: {member.name!r}")
            if rel == ".":
                continue
            if member.isreg() or member.isdir():
                (last if rel == rundir.RESULT_FILE else files).append(member)
                regular.add(rel)
            elif member.islnk() and posixpath.normpath(member.linkname) in regular - {rundir.RESULT_FILE}:
                files.append(member)  # a second name of a file already unpacked: a regular file too
            else:
                notes[rel] = _what_member_is(member)
        dest.mkdir(parents=True)
        for member in files:
            _extract(tar, member, dest)
        sweepdir.note_special_files(dest, notes)
        for member in last:
            _extract(tar, member, dest)


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extract(member, dest, filter="data")
    else:  # Python before 3.11.4: the members were checked by hand above
        tar.extract(member, dest)


def remote_trial(payload: str, settings: SweepSettings, entries: dict) -> dict:
    """On a node: runs one trial in a temporary directory and returns it packed (see the module docstring)."""
    from latte_lab.registry import install
    from latte_lab.trial import run_trial

    install(entries)
    cfg = TrialConfig.model_validate_json(payload)
    staging = Path(tempfile.mkdtemp(prefix="latte_lab-ray-"))
    interrupted = False
    try:
        # the driver's paths mean nothing here: the node's disk and the node's cache
        node_cfg = cfg.model_copy(update={"runs_dir": str(staging), "cache_path": None})
        with settings.applied():
            try:
                run_dir = run_trial(node_cfg, run_name=cfg.trial_id).run_dir
            except KeyboardInterrupt:
                interrupted, run_dir = True, staging / cfg.trial_id
        archive = pack(run_dir) if run_dir.is_dir() else None
        return {"trial_id": cfg.trial_id, "archive": archive, "interrupted": interrupted,
                "node": socket.gethostname()}
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def import_ray():
    from latte_lab.errors import require_extra

    return require_extra("ray", "distributed", "backend='ray'")


def _entries(configs: list[TrialConfig]) -> dict:
    """The user's registrations that the trials use (the nodes import their modules; others may not exist there)."""
    from latte_lab.registry import user_entries

    used = {"team": {c.team for c in configs}, "task": {c.task for c in configs}}
    entries = {kind: [row for row in rows if row[0] in used.get(kind, ())] for kind, rows in user_entries().items()}
    entries = {kind: rows for kind, rows in entries.items() if rows}
    in_main = [f"{kind} {name!r}" for kind, rows in entries.items() for name, module, _ in rows if module == "__main__"]
    if in_main:
        raise ConfigError(f"{', '.join(in_main)} is defined in __main__ (a notebook cell or script), which Ray's worker "
                          "nodes cannot import; move it into a module installed on every node, or use backend='local'")
    return entries


WATCHDOG_SCRIPT = Path(__file__).with_name("_ray_watchdog.py")


def _children() -> set:
    import psutil

    try:
        return set(psutil.Process().children())
    except psutil.Error:
        return set()


def _is_ray(proc) -> bool:
    import psutil

    try:
        return any("ray" in part for part in proc.cmdline())
    except psutil.Error:
        return False


def watch_local_cluster(processes: list) -> subprocess.Popen | None:
    """Starts the watchdog that ends the local cluster whose head ``processes`` this process just started
    once this process is gone, however it ends (:mod:`latte_lab.sweep._ray_watchdog`: within a second of a
    SIGKILL, where Ray alone leaves its agents for a minute)."""
    if not processes:
        return None
    proc = subprocess.Popen([sys.executable, str(WATCHDOG_SCRIPT), str(os.getpid()), *(str(p.pid) for p in processes)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    threading.Thread(target=proc.wait, name="latte-ray-watchdog-reaper", daemon=True).start()
    return proc


class RayRunner:
    """Runs a sweep's trials as Ray tasks and lands each run directory in ``out`` on the driver."""

    def __init__(self, out: Path, settings: SweepSettings, configs: list[TrialConfig], *,
                 n_jobs: int | str | None = None, address: str | None = None, options: RayOptions | None = None):
        self.ray = import_ray()
        self.out = out
        self.entries = _entries(configs)
        options = options or RayOptions()
        if self.ray.is_initialized() and options.runtime_env == "package":
            raise ConfigError("ray_runtime_env='package' ships latte_lab when the sweep starts Ray, but Ray is already "
                              "initialized: call ray.shutdown() first, or pass runtime_env={'py_modules': "
                              "[latte_lab]} to your own ray.init")
        started = not self.ray.is_initialized()
        if started:
            address = address or os.environ.get("RAY_ADDRESS") or None
            env = options.env_for(joined_by_address=address is not None)
            try:
                if address is None:
                    before = _children()
                    self.ray.init(include_dashboard=False, runtime_env=env)
                    watch_local_cluster([p for p in _children() - before if _is_ray(p)])
                else:
                    check_reachable(address)
                    self.ray.init(address=address, runtime_env=env)
            except ConfigError:
                raise
            except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, bare Exception
                raise ConfigError(init_failed_message(address, exc)) from None
        from latte_lab.models.ratelimit import RayState

        self.settings = SweepSettings(settings.limits, RayState(), settings.budget)
        cpus = self.ray.cluster_resources().get("CPU", 1)
        slots = max(1, int(cpus // options.cpus))
        self.in_flight = n_jobs if isinstance(n_jobs, int) and not isinstance(n_jobs, bool) else slots
        # retry_exceptions stays False: a trial that raised is an answer, not a lost node, and is not run again
        remote_options = {"num_cpus": options.cpus, "max_retries": options.retries, "retry_exceptions": False}
        if options.memory is not None:
            remote_options["memory"] = options.memory
        if isinstance(options.runtime_env, dict) and not started:  # Ray already running: per task, as given
            remote_options["runtime_env"] = options.runtime_env
        self.remote = self.ray.remote(**remote_options)(remote_trial)

    def run(self, todo: list[TrialConfig], on_row: Callable[[dict], None],
            may_start: Callable[[], str | None]) -> str | None:
        """Runs ``todo``; returns why it stopped early (``interrupted`` or a budget message) or None."""
        queue = deque(todo)
        pending: dict = {}
        stopped = None
        try:
            while queue or pending:
                while queue and len(pending) < self.in_flight:
                    why = may_start()
                    if why is not None:
                        stopped = why
                        queue.clear()
                        break
                    cfg = queue.popleft()
                    pending[self.remote.remote(cfg.model_dump_json(), self.settings, self.entries)] = cfg
                if not pending:
                    break
                done, _ = self.ray.wait(list(pending), num_returns=1, timeout=POLL_SECONDS)
                for ref in done:
                    self._land(ref, pending.pop(ref), on_row)
        except KeyboardInterrupt:
            stopped = "interrupted"
            self._interrupt(pending, on_row)
        return stopped

    def _interrupt(self, pending: dict, on_row) -> None:
        for ref in pending:
            self.ray.cancel(ref)  # KeyboardInterrupt in the task: the trial records itself as interrupted
        deadline = time.monotonic() + GRACE_SECONDS
        while pending and time.monotonic() < deadline:
            done, _ = self.ray.wait(list(pending), num_returns=1, timeout=0.1)
            for ref in done:
                self._land(ref, pending.pop(ref), on_row)
        for ref, cfg in pending.items():
            self.ray.cancel(ref, force=True)
            on_row(self._record_lost(cfg, INTERRUPTED_ERROR + "; its run directory stayed on its Ray node",
                                     "interrupted"))
        pending.clear()

    def _land(self, ref, cfg: TrialConfig, on_row) -> None:
        """Unpacks a finished task's run directory into ``out`` and merges its calls into the driver's cache."""
        ray = self.ray
        try:
            result = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            on_row(self._record_lost(cfg, INTERRUPTED_ERROR + "; its run directory stayed on its Ray node",
                                     "interrupted"))
            return
        except ray.exceptions.RayError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            on_row(self._record_lost(cfg, f"the Ray task failed: {first}", "error"))
            return
        if result.get("archive") is None:
            on_row(self._record_lost(cfg, "the trial left no run directory on its Ray node", "error"))
            return
        staging = sweepdir.running_dir(self.out) / cfg.trial_id
        try:
            unpack(result["archive"], staging)
        except (LatteError, tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            on_row(self._record_lost(cfg, f"its run directory from Ray node {result.get('node', '?')} could not "
                                          f"be unpacked ({why}); what was unpacked is kept", "error"))
            return
        if result.get("interrupted") and not (staging / rundir.RESULT_FILE).exists():
            sweepdir.mark_failed(staging, INTERRUPTED_ERROR, reason="interrupted")
        final = sweepdir.finish_attempt(staging, self.out, cfg.trial_id)
        self._merge_cache(cfg, final)
        on_row(rundir.read_result(final)["row"])

    @staticmethod
    def _merge_cache(cfg: TrialConfig, run_dir: Path) -> None:
        if cfg.model.startswith(FREE_MODELS) or cfg.cache == "off" or not (run_dir / rundir.CALLS_FILE).exists():
            return
        from latte_lab.models.cache import ResponseCache
        from latte_lab.models.cassette import import_cassettes

        with ResponseCache(cfg.cache_path) as cache:
            try:
                import_cassettes(run_dir, cache)
            except DataError:
                pass

    def _record_lost(self, cfg: TrialConfig, error: str, reason: str) -> dict:
        """An attempt whose run directory never reached the driver: its config and a result saying why."""
        path = sweepdir.running_dir(self.out) / cfg.trial_id
        path.mkdir(parents=True, exist_ok=True)
        (path / rundir.CONFIG_FILE).write_text(rundir.config_json(cfg), encoding="utf-8")
        sweepdir.mark_failed(path, error, reason=reason)
        return rundir.read_result(sweepdir.finish_attempt(path, self.out, cfg.trial_id))["row"]
