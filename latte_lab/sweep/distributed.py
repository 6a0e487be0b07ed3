"""Sweeps over a Ray cluster: each trial runs on some node and comes back whole to the driver.

A remote trial runs in a temporary directory of its node, with the node's own response cache, and
returns its run directory as a gzip-compressed tar archive. The run directory's cassette
(``calls.jsonl``) holds every call the trial made, so the archive also carries the cache rows the trial
fetched. The driver unpacks the archive in the sweep's running area, moves it into place like a local
trial, and merges the calls into its own cache (:func:`latte_lab.models.cassette.import_cassettes`).
So ``out`` on the driver holds every run directory: analysis and resume need nothing but the driver.

Rate limits and the sweep's budget are shared through one small actor
(:class:`latte_lab.models.ratelimit.RayState`). Teams and tasks registered in importable modules are
registered again on the nodes; the nodes need latte_lab and those modules installed.
"""

from __future__ import annotations

import io
import shutil
import socket
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from latte_lab import rundir, sweepdir
from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError, DataError
from latte_lab.sweep.local import GRACE_SECONDS, INTERRUPTED_ERROR, POLL_SECONDS, SweepSettings

FREE_MODELS = ("simulated", "scripted")  # no provider calls, nothing to merge into a cache


def pack(run_dir: Path) -> bytes:
    """A run directory as a gzip-compressed tar archive (paths relative to the directory)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        tar.add(run_dir, arcname=".")
    return buffer.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """Unpacks :func:`pack`'s archive into ``dest`` (created); members that would leave it are refused."""
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()  # Python before 3.11.4: the same refusal, by hand
        for member in tar.getmembers():
            target = (dest / member.name).resolve()
            if not (target == root or root in target.parents) or member.issym() or member.islnk():
                raise DataError(f"the archive of {dest.name} has a member leaving its directory: {member.name!r}")
        tar.extractall(dest)


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
    try:
        import ray
    except ImportError:
        raise ConfigError("backend='ray' needs Ray: pip install 'latte_lab[distributed]'") from None
    return ray


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


class RayRunner:
    """Runs a sweep's trials as Ray tasks and lands each run directory in ``out`` on the driver."""

    def __init__(self, out: Path, settings: SweepSettings, configs: list[TrialConfig], *,
                 n_jobs: int | str | None = None, address: str | None = None):
        self.ray = import_ray()
        self.out = out
        self.entries = _entries(configs)
        if not self.ray.is_initialized():
            if address is None:
                self.ray.init(include_dashboard=False)
            else:
                self.ray.init(address=address)
        from latte_lab.models.ratelimit import RayState

        self.settings = SweepSettings(settings.limits, RayState(), settings.budget)
        cpus = int(self.ray.cluster_resources().get("CPU", 1))
        self.in_flight = n_jobs if isinstance(n_jobs, int) and not isinstance(n_jobs, bool) else max(1, cpus)
        self.remote = self.ray.remote(num_cpus=1, max_retries=0)(remote_trial)

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
        unpack(result["archive"], staging)
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
        (path / rundir.CONFIG_FILE).write_text(cfg.to_json(), encoding="utf-8")
        sweepdir.mark_failed(path, error, reason=reason)
        return rundir.read_result(sweepdir.finish_attempt(path, self.out, cfg.trial_id))["row"]
