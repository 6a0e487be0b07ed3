"""Grids of trials: task x team x model x replicate, interleaved, resumable, on this machine or on Ray.

>>> df = run_sweep({"task": ["debug"], "team": ["latte", "static"], "replicates": 3},
...                out="runs/sweep", n_jobs=2)                       # doctest: +SKIP
>>> print(dry_run({"task": "debug", "model": "openai/gpt-4o", "replicates": 10}, "runs/gpt"))  # doctest: +SKIP

Each trial ends up in ``out`` exactly once (the layout is described in :mod:`latte_lab.rundir`): a
finished trial is never run twice, so calling ``run_sweep`` again resumes where it stopped; an attempt
that did not finish is kept as ``<trial_id>.failed-<N>`` and the trial runs again. One sweep at a time
may work in a directory: a second gets a clear error naming the first one's process.

- ``backend="local"``: ``n_jobs`` worker processes (1: in this process), which never outlive the sweep.
  They share one memo of test runs, ``<out>/.sweep/memo`` (``$LATTE_LAB_MEMO_DIR`` or an enclosing
  ``sharing_memo`` instead, when set): a workspace state that any trial of the sweep, or of an earlier sweep
  in ``out``, has tested runs no session.
- ``in_flight=N`` (with the local backend): up to N trials running at once as threads of ``n_jobs`` worker
  processes, for real-model trials, which wait on the network; their sandboxed runs still take one of as
  many slots as the machine has cores (see :mod:`latte_lab.sweep.inflight`).
- ``backend="ray"``: one task per trial on a Ray cluster; every run directory comes back to ``out`` on
  the driver (see :mod:`latte_lab.sweep.distributed`).
- Ctrl-C (a notebook's stop button) or SIGTERM: no queued trial starts, running ones are stopped and
  recorded as interrupted, and the rows so far come back with a one-line summary.
- Rate limits per provider API are shared by every trial (:mod:`latte_lab.models.ratelimit`); a budget
  (``max_dollars``, ``max_billed_tokens``) stops the sweep from starting new trials and stops running ones
  at their next model call (:mod:`latte_lab.models.budget`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from latte_lab import rundir
from latte_lab.config import BACKENDS, TrialConfig
from latte_lab.errors import ConfigError, DataError
from latte_lab.sweep import sweepdir
from latte_lab.sweep.estimate import SweepPlan
from latte_lab.sweep.grid import GRID_AXES, check_jobs, expand_grid, max_jobs

STATE_FILE = "state.sqlite"  # in <out>/.sweep: the sweep's rate-limit pacing and spend, shared by its workers

__all__ = ["BACKENDS", "GRID_AXES", "SweepPlan", "check_jobs", "dry_run", "expand_grid", "max_jobs", "run_sweep"]


def _budget_raised(path: Path, cfg: TrialConfig) -> bool:
    """Whether ``cfg`` allows more than the budget that stopped the trial in ``path``."""
    try:
        before = rundir.read_config(path)
    except DataError:
        return True
    for name in ("max_dollars", "max_billed_tokens"):
        old, new = getattr(before, name), getattr(cfg, name)
        if old is not None and (new is None or new > old):
            return True
    return False


def _plan(configs: list[TrialConfig], out: Path, *, settle: bool) -> SweepPlan:
    """Which trials of the grid are finished in ``out``. With ``settle`` (under the sweep's lock), a
    directory in a trial's place that is not a finished trial, or a trial stopped by a budget that has
    since been raised, is set aside as an attempt so the trial can run again."""
    plan = SweepPlan(out, configs)
    for cfg in configs:
        path = out / cfg.trial_id
        if not path.is_dir():
            continue
        try:
            payload = rundir.read_result(path)
        except DataError:
            payload = None
        if sweepdir.is_finished(payload) and not (payload["status"] == "budget" and _budget_raised(path, cfg)):
            plan.done[cfg.trial_id] = payload["row"]
        elif settle:
            if payload is None:
                sweepdir.mark_failed(path, "found without a readable result.json; set aside to run the trial again")
            sweepdir.set_aside(path, out, cfg.trial_id)
    return plan


def _shared_memo(out: Path):
    """The memo of test runs the sweep's trials share: ``<out>/.sweep/memo``, unless one is set already
    (``$LATTE_LAB_MEMO_DIR``, or an enclosing :func:`~latte_lab.sandbox.pytest.sharing_memo`, which a series
    of sweeps over the same seeds may share)."""
    import contextlib

    from latte_lab.sandbox.pytest import default_memo_dir, sharing_memo

    return contextlib.nullcontext() if default_memo_dir() is not None else sharing_memo(sweepdir.memo_dir(out))


def dry_run(grid: dict[str, Any] | Iterable[TrialConfig | dict], out: str | Path = "runs/sweep", *,
            n_jobs: int | str | None = None, in_flight: int | None = None,
            rate_limits: Mapping[str, Any] | None = None, basis: str | Path | None = None) -> SweepPlan:
    """What :func:`run_sweep` would do, without running anything: the grid, the trials already finished
    in ``out`` and an estimate of the rest in calls, tokens, dollars and time at the rate limits
    (``print(dry_run(...))``, or ``.table()`` as a DataFrame; :mod:`latte_lab.sweep.estimate`). ``n_jobs``,
    ``in_flight`` and ``rate_limits`` as :func:`run_sweep` takes them; ``basis``: a folder of earlier trials to
    estimate from (a rehearsal's, a pilot's), instead of ``out``."""
    out = Path(out)
    configs = expand_grid(grid, out)
    plan = _plan(configs, out, settle=False)
    if in_flight is not None:
        from latte_lab.sweep.inflight import check_in_flight

        plan.in_flight = check_in_flight(in_flight, len(configs))
        plan.jobs = check_jobs("auto" if n_jobs is None else n_jobs, len(configs))
    else:
        plan.jobs = check_jobs(1 if n_jobs is None else n_jobs, len(configs))
    plan.rate_limits = dict(rate_limits or {})
    plan.limits()  # a bad limit is an error now, not when the report is printed
    if basis is not None:
        plan.basis = Path(basis)
        if not plan.basis.is_dir():
            raise ConfigError(f"no folder {plan.basis} to estimate from")
    return plan


@contextlib.contextmanager
def _full_disk_in_one_line(out: Path):
    """A full disk under ``out`` (the sweep's lock, its state, a trial's record) ends the sweep with a
    :class:`~latte_lab.rundir.format.DiskFullError` of one line (the command prints it), not a traceback."""
    try:
        yield
    except OSError as exc:
        if not rundir.is_disk_full(exc):
            raise
        raise rundir.DiskFullError(rundir.disk_full_message(out, exc)) from None


def _check_simulated_profiles(configs) -> None:
    """Every simulated profile the grid names exists (an unknown one is a ConfigError of one line, before any
    trial or progress bar); building a simulated model costs nothing and needs no key."""
    from latte_lab.models import make_model

    for spec in sorted({c.model for c in configs if c.model.split("/", 1)[0].split("?", 1)[0] == "simulated"}):
        make_model(spec)


def run_sweep(grid: dict[str, Any] | Iterable[TrialConfig | dict], out: str | Path = "runs/sweep", *,
              n_jobs: int | str | None = None, backend: str = "local", progress: bool = True,
              max_dollars: float | None = None, max_billed_tokens: int | None = None,
              rate_limits: Mapping[str, Any] | None = None, ray_address: str | None = None,
              in_flight: int | None = None, ray_cpus: float = 1, ray_memory: int | str | None = None,
              ray_retries: int | None = None, ray_runtime_env: dict | str | None = "auto"):
    """Runs every trial of ``grid`` not already finished in ``out``; returns one row per trial of the
    grid that has one (finished earlier, or run now), in grid order, as a DataFrame. Its
    ``attrs["summary"]`` is the one-line summary (printed with progress or when the sweep stopped early)
    and ``attrs["stopped"]`` why it stopped early (``"interrupted"``, a budget message) or None.

    ``grid``: see :func:`expand_grid`. ``n_jobs``: worker processes, 1 (the default, in this process) to
    4 per CPU, or ``"auto"`` (one per CPU); with Ray, the most trials in flight (default: the cluster's
    CPUs). ``in_flight``: keep up to this many trials running at once, as threads of ``n_jobs`` worker
    processes (default: one per CPU), for real-model trials, which wait on the network rather than compute
    (:mod:`latte_lab.sweep.inflight`). ``max_dollars`` / ``max_billed_tokens``: what this call may bill in
    all; per-trial budgets are TrialConfig fields, so grid keys. ``rate_limits``: ``{provider or base URL: (rpm, tpm)}`` on top of
    the defaults (:mod:`latte_lab.models.ratelimit`). ``ray_address``: an existing cluster (``"auto"``,
    ``"ray://host:10001"``); by default a running ``ray.init`` is used, else a local one is started, which
    ends with this process however it ends (:mod:`latte_lab.sweep._ray_watchdog`). ``ray_cpus`` /
    ``ray_memory``: what each trial reserves on its node (CPUs, default 1; memory as bytes or ``"2G"``, default
    none); ``ray_retries``: runs of a trial on another node after its node was lost (default 3; never recorded
    twice); ``ray_runtime_env``: ``"auto"`` ships this latte_lab package to the nodes when joining a cluster by
    address, ``"package"`` always, None never, a dict is Ray's runtime_env with the package added
    (:mod:`latte_lab.sweep.distributed`).

    Refused before any trial runs, in one line: an ``out`` where nothing can be written (a file, a
    read-only file system), a grid with an empty list or a value listed twice (:func:`expand_grid`), and
    an unknown simulated profile.

    Parameters
    ----------
    grid : dict or iterable of TrialConfig or dict
        ``{field: value or [values], "replicates": n}`` (see :func:`expand_grid`), or the configs themselves.
    out : str or Path, optional
        The sweep directory (default ``runs/sweep``).
    n_jobs : int or str, optional
        Local worker processes (default 1; ``"auto"``: one per CPU); with Ray, the most trials in flight.
    backend : str, optional
        ``local`` (default) or ``ray``.
    progress : bool, optional
        A progress bar and the summary line (default True).
    max_dollars : float, optional
        What this call may bill in all.
    max_billed_tokens : int, optional
        Tokens this call may bill in all.
    rate_limits : mapping, optional
        ``{provider or base URL: (rpm, tpm)}`` on top of the defaults.
    in_flight : int, optional
        Keep up to this many trials running at once as threads of ``n_jobs`` worker processes (default: one
        per CPU), for real-model trials (local backend only; default None: one trial per worker process).
    ray_address : str, optional
        An existing Ray cluster (default: the running ``ray.init``, else a local cluster).
    ray_cpus : float, optional
        CPUs each trial reserves on its node (default 1).
    ray_memory : int or str, optional
        Memory each trial reserves (bytes, or ``"2G"``; default none).
    ray_retries : int, optional
        Runs of a trial on another node after its node was lost (default 3).
    ray_runtime_env : dict or str, optional
        ``"auto"`` (default), ``"package"``, None or a Ray runtime_env dict.

    Returns
    -------
    pandas.DataFrame
        One results row per trial of the grid that has one, in grid order; ``attrs["summary"]`` and
        ``attrs["stopped"]``.
    """
    import pandas as pd

    from latte_lab.models import budget as budget_mod
    from latte_lab.models import ratelimit
    from latte_lab.sweep import local
    from latte_lab.sweep.progress import SweepProgress, summary

    if backend not in BACKENDS:
        raise ConfigError(f"unknown sweep backend {backend!r}; use 'local' or 'ray'")
    out = Path(out)
    configs = expand_grid(grid, out)
    _check_simulated_profiles(configs)
    ray_options = None
    if backend == "ray":  # Ray installed and its options sound, before any trial or progress bar
        from latte_lab.sweep.distributed import DEFAULT_RETRIES, RayOptions, import_ray

        import_ray()
        ray_options = RayOptions(ray_cpus, ray_memory, DEFAULT_RETRIES if ray_retries is None else ray_retries,
                                 ray_runtime_env)
    if in_flight is not None:
        from latte_lab.sweep.inflight import check_in_flight

        if backend != "local":
            raise ConfigError("in_flight is for backend='local'; with Ray, n_jobs is the most trials in flight")
        in_flight = check_in_flight(in_flight, len(configs))
        jobs = check_jobs("auto" if n_jobs is None else n_jobs, len(configs))
    elif backend == "local":
        jobs = check_jobs(1 if n_jobs is None else n_jobs, len(configs))
    elif n_jobs is not None and n_jobs != "auto" and not (isinstance(n_jobs, int) and n_jobs >= 1):
        raise ConfigError(f"with backend='ray', n_jobs is the most trials in flight: a whole number >= 1 or 'auto'; "
                          f"got {n_jobs!r}")
    sweep_budget = budget_mod.SweepBudget(max_dollars, max_billed_tokens)
    limits = {str(k): ratelimit.as_limit(v, f"rate_limits[{k!r}]") for k, v in (rate_limits or {}).items()}
    for path in (out, out / sweepdir.SWEEP_DIR / sweepdir.RUNNING_DIR):  # before any trial: its record must land
        rundir.check_writable_dir(path)
    new: dict[str, dict] = {}
    with _full_disk_in_one_line(out), sweepdir.SweepLock(out), local.sigterm_stops_the_sweep():
        sweepdir.recover_running(out)
        plan = _plan(configs, out, settle=True)
        todo = plan.todo
        state_path = out / sweepdir.SWEEP_DIR / STATE_FILE
        for suffix in ("", "-wal", "-shm"):  # this call's spend starts at zero
            Path(f"{state_path}{suffix}").unlink(missing_ok=True)
        settings = local.SweepSettings(limits, ratelimit.SqliteState(state_path), sweep_budget)
        runner = None
        if backend == "ray" and todo:  # joins or starts the cluster: a failure is one line, before the progress bar
            from latte_lab.sweep.distributed import RayRunner

            runner = RayRunner(out, settings, todo, n_jobs=n_jobs, address=ray_address, options=ray_options)
        bar = SweepProgress(len(configs), list(plan.done.values()), enabled=progress and bool(todo))
        stopped = None

        def on_row(row: dict) -> None:
            new[row.get("trial_id")] = row
            bar.update(row)

        def may_start() -> str | None:
            return None if sweep_budget.unlimited else sweep_budget.reached(*settings.state.spend())

        try:
            if not todo:
                pass
            elif runner is not None:
                settings_ray = runner.settings
                stopped = runner.run(todo, on_row, lambda: None if sweep_budget.unlimited
                                     else sweep_budget.reached(*settings_ray.state.spend()))
            elif in_flight is not None:
                from latte_lab.sweep.inflight import InFlightPool

                with _shared_memo(out):  # the workers, started inside, share it
                    stopped = InFlightPool(in_flight, out, settings, processes=jobs).run(todo, on_row, may_start)
            elif jobs == 1:
                with settings.applied(), _shared_memo(out):
                    stopped = local.run_serial(todo, out, on_row, may_start)
            else:
                with _shared_memo(out):  # the workers, forked inside, share it
                    stopped = local.LocalPool(jobs, out, settings).run(todo, on_row, may_start)
        except KeyboardInterrupt:  # between trials, or while landing one
            stopped = "interrupted"
        finally:
            bar.close()
    rows = [plan.done.get(c.trial_id) or new.get(c.trial_id) for c in configs]
    frame = pd.DataFrame([r for r in rows if r is not None])
    line = summary(out, len(configs), list(plan.done.values()), list(new.values()), stopped)
    frame.attrs["summary"] = line
    frame.attrs["stopped"] = stopped
    if progress or stopped:
        print(line, flush=True)
    return frame
