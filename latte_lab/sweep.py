"""Grids of trials: task x team x model x replicate, interleaved, resumable, local or on Ray.

>>> df = run_sweep({"task": ["debug"], "team": ["latte", "static"], "replicates": 3},
...                out="runs/sweep", n_jobs=2)                       # doctest: +SKIP

A finished trial (its ``result.json`` with status ``ok``) is never run twice: rerunning the same call
resumes where it stopped. Conditions are interleaved (replicate-major order) so that a sweep stopped
half-way still has every condition at a similar number of replicates.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from latte_lab import rundir
from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError

GRID_KEYS = ("task", "team", "model")


def expand_grid(grid: dict[str, Any] | Iterable[TrialConfig | dict], out: str | Path) -> list[TrialConfig]:
    """The configs of a grid, in interleaved order; every config's runs_dir is ``out``.

    ``grid`` maps task/team/model to a value or a list, ``replicates`` to a count (seeds 0..n-1 plus
    ``seed_offset``) or ``seeds`` to an explicit list; any other key is a TrialConfig field (a list there
    is also expanded). A list of configs (or dicts) is taken as it is.
    """
    if not isinstance(grid, dict):
        configs = [c if isinstance(c, TrialConfig) else TrialConfig(**c) for c in grid]
        return [c.model_copy(update={"runs_dir": str(out)}) for c in configs]
    grid = dict(grid)
    if "seeds" in grid:
        seeds = list(grid.pop("seeds"))
        grid.pop("replicates", None)
    else:
        n = int(grid.pop("replicates", 1))
        if n < 1:
            raise ConfigError("replicates must be at least 1")
        offset = int(grid.pop("seed_offset", 0))
        seeds = [offset + i for i in range(n)]
    axes = {k: (v if isinstance(v, (list, tuple)) else [v]) for k, v in grid.items()}
    if "task" not in axes:
        raise ConfigError("a sweep grid needs at least 'task' (and usually 'team')")
    keys = list(axes)
    configs = []
    for rep, seed in enumerate(seeds):
        for combo in itertools.product(*(axes[k] for k in keys)):
            fields = dict(zip(keys, combo))
            configs.append(TrialConfig(**fields, seed=seed, trial=rep, runs_dir=str(out)))
    return configs


def _run_one(config_json: str) -> dict:
    """Runs one trial beside its final place and moves it there once it finished with status ok, so
    ``out/<trial_id>`` only ever holds a finished trial."""
    from latte_lab.trial import run_trial

    cfg = TrialConfig.model_validate_json(config_json)
    res = run_trial(cfg, run_name=cfg.trial_id + "-tmp")
    if res.status == "ok":
        final = rundir.promote(res.run_dir, Path(cfg.runs_dir) / cfg.trial_id)
        res.row["run_dir"] = str(final)
    return res.row


def run_sweep(grid, out: str | Path = "runs/sweep", *, n_jobs: int = 1, backend: str = "local",
              progress: bool = True):
    """Runs every trial of ``grid`` not already finished under ``out``; returns all rows as a DataFrame."""
    import pandas as pd

    if backend not in ("local", "ray"):
        raise ConfigError(f"unknown sweep backend {backend!r}; use 'local' or 'ray'")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    configs = expand_grid(grid, out)
    rows: list[dict] = []
    todo = []
    for cfg in configs:
        row = rundir.finished_row(out / cfg.trial_id)
        if row is not None:
            rows.append(row)
        else:
            todo.append(cfg)
    payloads = [c.model_dump_json() for c in todo]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(payloads), unit="trial", desc=f"sweep ({len(rows)} already finished)")
    try:
        if backend == "ray":
            rows += _run_ray(payloads, bar)
        elif n_jobs <= 1:
            for p in payloads:
                rows.append(_advance(bar, _run_one(p)))
        else:
            # the workers must know teams and tasks registered here, notebook cells included
            from latte_lab.registry import pool_options

            with ProcessPoolExecutor(max_workers=n_jobs, **pool_options()) as pool:
                futures = [pool.submit(_run_one, p) for p in payloads]
                rows += [_advance(bar, fut.result()) for fut in as_completed(futures)]
    finally:
        if bar is not None:
            bar.close()
    return pd.DataFrame(rows)


def _advance(bar, row: dict) -> dict:
    """Moves the progress bar on by one finished trial, showing how it went."""
    if bar is not None:
        acc = row.get("accuracy")
        acc_s = "n/a" if acc is None or acc != acc else f"{acc:.2f}"
        bar.set_postfix_str(f"last: {row.get('task')} {row.get('team')} seed {row.get('seed')} "
                            f"success={row.get('success')} accuracy={acc_s} rounds={row.get('total_rounds')}",
                            refresh=False)
        bar.update(1)
    return row


def _run_ray(payloads: list[str], bar) -> list[dict]:
    try:
        import ray
    except ImportError:
        raise ConfigError("backend='ray' needs Ray: pip install 'latte_lab[distributed]'") from None
    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True)
    remote = ray.remote(_run_one)
    pending = [remote.remote(p) for p in payloads]
    rows = []
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        rows.append(_advance(bar, ray.get(done[0])))
    return rows
