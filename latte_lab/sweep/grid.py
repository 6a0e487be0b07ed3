"""A sweep's grid: its trials in interleaved order, and how many processes may run them.

>>> [(c.team, c.seed) for c in expand_grid({"task": "debug", "team": ["latte", "static"], "replicates": 2}, "out")]
[('latte', 0), ('static', 0), ('latte', 1), ('static', 1)]
>>> check_jobs("auto", 3, cpus=2), check_jobs(8, 2, cpus=2)   # never more processes than trials
(2, 2)
>>> check_jobs(0, 5, cpus=2)
Traceback (most recent call last):
latte_lab.errors.ConfigError: n_jobs must be a whole number from 1 to 8 (4 x this machine's 2 CPUs) or 'auto'; got 0
>>> expand_grid({"task": "debug", "seeds": [1, 1, 1]}, "out")
Traceback (most recent call last):
latte_lab.errors.ConfigError: the grid's 'seeds' lists 1 more than once: replicates need distinct seeds (e.g. [1, 2, 3], or replicates=3)
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError

JOBS_PER_CPU = 4  # trials mostly wait for model calls, so a few per CPU keep it busy; more only thrash
GRID_AXES = ("task", "team", "model")
SET_BY_THE_GRID = ("seed", "trial", "runs_dir")  # each trial's seed, replicate number and directory come from the grid


def expand_grid(grid: dict[str, Any] | Iterable[TrialConfig | dict], out: str | Path) -> list[TrialConfig]:
    """The configs of a grid, in interleaved order; every config's runs_dir is ``out``.

    ``grid`` maps task/team/model to a value or a list, ``replicates`` to a count (seeds 0..n-1 plus
    ``seed_offset``) or ``seeds`` to an explicit list; any other key is a TrialConfig field (a list there
    is also expanded). An empty list, or one naming a value twice (``seeds: [1, 1, 1]``), is a ConfigError
    naming its key. A list of configs (or dicts) is taken as it is. Conditions are interleaved
    (replicate-major order), so a sweep stopped half-way has every condition at a similar number of
    replicates. A trial listed twice is run once.
    """
    if not isinstance(grid, dict):
        configs = [c if isinstance(c, TrialConfig) else TrialConfig(**c) for c in grid]
        return _unique([c.model_copy(update={"runs_dir": str(out)}) for c in configs])
    grid = dict(grid)
    taken = [k for k in SET_BY_THE_GRID if k in grid]
    if taken:
        raise ConfigError(f"the grid sets {taken[0]!r}, which the sweep sets for each trial; give seeds as 'seeds' "
                          "(a list) or 'replicates' (with 'seed_offset'), and the directory as out")
    if "seeds" in grid:
        seeds = _axis("seeds", grid.pop("seeds"))
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise ConfigError(f"the grid's 'seeds' must be whole numbers; got {seeds!r}")
        grid.pop("replicates", None)
    else:
        n = int(grid.pop("replicates", 1))
        if n < 1:
            raise ConfigError("replicates must be at least 1")
        offset = int(grid.pop("seed_offset", 0))
        seeds = [offset + i for i in range(n)]
    axes = {k: _axis(k, v) if isinstance(v, list | tuple) else [v] for k, v in grid.items()}
    if "task" not in axes:
        raise ConfigError("a sweep grid needs at least 'task' (and usually 'team')")
    keys = list(axes)
    configs = []
    for rep, seed in enumerate(seeds):
        for combo in itertools.product(*(axes[k] for k in keys)):
            fields = dict(zip(keys, combo))
            configs.append(TrialConfig(**fields, seed=seed, trial=rep, runs_dir=str(out)))
    return _unique(configs)


def _axis(key: str, values: Any) -> list:
    """The values of one axis of a grid: a non-empty list without repeats, else a one-line ConfigError."""
    if not isinstance(values, list | tuple):
        raise ConfigError(f"the grid's {key!r} must be a list; got {values!r}")
    values = list(values)
    if not values:
        raise ConfigError(f"the grid's {key!r} is an empty list, so the sweep would have no trials; give it at "
                          "least one value")
    for i, value in enumerate(values):
        if value in values[:i]:
            hint = ("replicates need distinct seeds (e.g. [1, 2, 3], or replicates=3)" if key == "seeds"
                    else "each value is one condition; list it once")
            raise ConfigError(f"the grid's {key!r} lists {value!r} more than once: {hint}")
    return values


def _unique(configs: list[TrialConfig]) -> list[TrialConfig]:
    seen: dict[str, TrialConfig] = {}
    for cfg in configs:
        seen.setdefault(cfg.trial_id, cfg)
    if len(seen) < len(configs):
        warnings.warn(f"the grid lists {len(configs) - len(seen)} trial(s) more than once; each runs once",
                      stacklevel=3)
    return list(seen.values())


def max_jobs(cpus: int | None = None) -> int:
    """The most processes a sweep may use on this machine: :data:`JOBS_PER_CPU` per CPU."""
    return JOBS_PER_CPU * (cpus or os.cpu_count() or 1)


def check_jobs(n_jobs: int | str, n_trials: int, *, cpus: int | None = None) -> int:
    """The number of worker processes for ``n_trials`` trials: ``n_jobs`` (1 to :func:`max_jobs`) or
    ``"auto"`` (one per CPU), never more than there are trials; anything else is a ConfigError."""
    cpus = cpus or os.cpu_count() or 1
    top = max_jobs(cpus)
    if n_jobs == "auto":
        wanted = cpus
    elif isinstance(n_jobs, int) and not isinstance(n_jobs, bool) and 1 <= n_jobs <= top:
        wanted = n_jobs
    else:
        raise ConfigError(f"n_jobs must be a whole number from 1 to {top} ({JOBS_PER_CPU} x this machine's {cpus} "
                          f"CPUs) or 'auto'; got {n_jobs!r}")
    return max(1, min(wanted, n_trials))
