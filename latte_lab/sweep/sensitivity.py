"""The sensitivity study's runner: every team on every task for a number of seeds, at the base profile of the
simulated model and at each parameter of a grid varied one at a time around it (``make sensitivity``).

What the study reports is analysis over its per-trial rows (:mod:`latte_lab.analysis.sensitivity_results`,
``ll.analysis.sensitivity(rows)``); this module makes the configs, runs or resumes them with
:func:`latte_lab.run_sweep` and gathers the rows.

>>> configs = sensitivity_configs({"p_straggler": [0.0]}, seeds=1, tasks=["debug"], teams=["latte"], readings={})
>>> [c["model"] for c in configs]
['simulated/default', 'simulated/default?p_straggler=0.0']

``python -m latte_lab.sweep.sensitivity`` runs (or resumes) the study and writes its per-trial CSV, by
default the copy shipped in ``latte_lab/data`` (``--collect`` writes what is finished without running).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from latte_lab.analysis.sensitivity_results import (
    BASE_PROFILE,
    DATA_FILE,
    DEFAULT_GRID,
    DEFAULT_READINGS,
    DEFAULT_SEEDS,
    TASKS,
    TEAMS,
    markdown,
    model_spec,
    reading_of,
    setting_of,
    summarise,
    trial_rows,
)
from latte_lab.errors import ConfigError, DataError

__all__ = ["collect", "main", "run", "sensitivity_configs"]


def _seed_list(seeds: int | Iterable[int]) -> list[int]:
    return list(range(seeds)) if isinstance(seeds, int) else list(seeds)


def sensitivity_configs(grid: dict[str, Sequence] | None = None, seeds: int | Iterable[int] = DEFAULT_SEEDS, *,
                        tasks: Sequence[str] = TASKS, teams: Sequence[str] = TEAMS, base: str = BASE_PROFILE,
                        grid_seeds: int | Iterable[int] | None = None, grid_tasks: Sequence[str] | None = None,
                        readings: dict[str, Sequence[str]] | None = None, **trial) -> list[dict]:
    """TrialConfig fields of every trial of the study: the base profile, then each parameter at each of
    its values with the others at base, then each reading of the protocol (``readings``: switch -> values,
    default :data:`DEFAULT_READINGS`; ``{}`` for none) at the base profile, for every task, team and seed
    (seed-major, so a study stopped half-way has every setting at a similar number of seeds).
    ``grid_seeds`` (default: ``seeds``) are the seeds of the varied settings, when the base profile gets
    more than they do, and ``grid_tasks`` (default: ``tasks``) their tasks.

    >>> [c.get("dispatch") for c in sensitivity_configs({}, 1, tasks=["debug"], teams=["latte"],
    ...                                                 readings={"dispatch": ["released"]})]
    [None, 'released']
    """
    from latte_lab.config import TrialConfig
    from latte_lab.models.sim.profiles import resolve_profile

    grid = DEFAULT_GRID if grid is None else grid
    readings = DEFAULT_READINGS if readings is None else readings
    switches = TrialConfig.switches()
    for name, values in readings.items():
        if name not in switches:
            raise ConfigError(f"sensitivity: {name!r} is not a protocol switch; switches: {', '.join(switches)}")
        for value in values:
            TrialConfig(task=tasks[0], **{name: value})  # an unknown value fails here, naming the allowed ones
    seed_list = _seed_list(seeds)
    varied_seeds = set(seed_list if grid_seeds is None else _seed_list(grid_seeds))
    varied_tasks = set(tasks if grid_tasks is None else grid_tasks)
    if not seed_list:
        raise ConfigError("sensitivity needs at least one seed")
    specs = [model_spec(base=base)]
    for parameter, values in grid.items():
        for value in values:
            spec = model_spec(parameter, value, base)
            resolve_profile(spec.partition("/")[2])  # an unknown parameter or bad value fails here, listing them
            specs.append(spec)
    settings = [(spec, {}) for spec in specs] + [(specs[0], {name: value}) for name, values in readings.items()
                                                  for value in values]
    return [dict(task=task, team=team, model=spec, seed=seed, **switch, **trial)
            for seed in sorted(set(seed_list) | varied_seeds) for i, (spec, switch) in enumerate(settings)
            for task in tasks for team in teams
            if (seed in varied_seeds and task in varied_tasks if i else seed in seed_list)]


def run(grid=None, seeds: int | Iterable[int] = DEFAULT_SEEDS, *, out: str | Path = "runs/sensitivity",
        n_jobs: int = 2, tasks: Sequence[str] = TASKS, teams: Sequence[str] = TEAMS, base: str = BASE_PROFILE,
        progress: bool = True, grid_seeds: int | Iterable[int] | None = None,
        grid_tasks: Sequence[str] | None = None) -> "pd.DataFrame":  # noqa: F821
    """Runs (or resumes) the study and returns its per-trial rows."""
    from latte_lab.sweep import run_sweep

    configs = sensitivity_configs(grid, seeds, tasks=tasks, teams=teams, base=base, grid_seeds=grid_seeds,
                                  grid_tasks=grid_tasks)
    return trial_rows(run_sweep(configs, out=out, n_jobs=n_jobs, progress=progress))


def collect(grid=None, seeds: int | Iterable[int] = DEFAULT_SEEDS, *, out: str | Path = "runs/sensitivity",
            tasks: Sequence[str] = TASKS, teams: Sequence[str] = TEAMS, base: str = BASE_PROFILE,
            grid_seeds: int | Iterable[int] | None = None,
            grid_tasks: Sequence[str] | None = None) -> "pd.DataFrame":  # noqa: F821
    """The per-trial rows of the study's trials finished under ``out``, without running any: for each
    setting only the seeds at which every one of its tasks and every team has finished, so each setting
    compares teams on the same seeds (for a study stopped part-way)."""
    from latte_lab.sweep import dry_run

    configs = sensitivity_configs(grid, seeds, tasks=tasks, teams=teams, base=base, grid_seeds=grid_seeds,
                                  grid_tasks=grid_tasks)
    planned: dict[tuple, set] = {}
    for c in configs:
        reading = reading_of(c)
        setting = (reading, None) if reading is not None else setting_of(c["model"])
        planned.setdefault(_key(*setting), set()).add((c["task"], c["team"]))
    done = dry_run(configs, out).done
    rows = trial_rows(list(done.values()))
    if rows.empty:
        raise DataError(f"no finished trials of the study under {out}; run it first (make sensitivity)")
    finished: dict[tuple, set] = {}
    for r in rows.itertuples():
        finished.setdefault((*_key(r.parameter, r.value), r.seed), set()).add((r.task, r.team))
    keep = [finished[(*_key(p, v), seed)] >= planned[_key(p, v)]
            for p, v, seed in zip(rows["parameter"], rows["value"], rows["seed"])]
    if not any(keep):
        raise DataError(f"no seed under {out} has finished every task and team yet; let the study run longer")
    return rows[keep].reset_index(drop=True)


def _key(parameter, value) -> tuple:
    """A setting as a dictionary key (the baseline's value is None or NaN, which never equals itself)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return parameter, None
    return parameter, float(value)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Run (or resume) the sensitivity study and write its per-trial CSV.")
    ap.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    ap.add_argument("--grid-seeds", type=int, default=None,
                    help="seeds of each varied setting (default: --seeds); the base profile always gets --seeds")
    ap.add_argument("--grid-tasks", default=None,
                    help="comma-separated tasks of each varied setting (default: every task)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="runs/sensitivity", help="where the trials' run directories go")
    from importlib.resources import files

    ap.add_argument("--write", default=str(files("latte_lab.data").joinpath(DATA_FILE)),
                    help="the per-trial CSV to write (default: the copy shipped in latte_lab/data)")
    ap.add_argument("--markdown", action="store_true", help="also print the baseline's tables as Markdown")
    ap.add_argument("--collect", action="store_true",
                    help="run nothing: write the trials already finished under --out (whole seeds of each setting)")
    args = ap.parse_args(argv)
    grid_tasks = args.grid_tasks.split(",") if args.grid_tasks else None
    try:
        if args.collect:
            rows = collect(None, args.seeds, out=args.out, grid_seeds=args.grid_seeds, grid_tasks=grid_tasks)
        else:
            rows = run(None, args.seeds, out=args.out, n_jobs=args.jobs, grid_seeds=args.grid_seeds,
                       grid_tasks=grid_tasks)
    except (ConfigError, DataError) as exc:
        sys.exit(f"error: {exc}")
    rows = rows.sort_values(["parameter", "value", "task", "team", "seed"], na_position="first")
    rows.to_csv(args.write, index=False, float_format="%.6g")
    print(f"{len(rows)} trials written to {args.write}")
    print(summarise(rows).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    main()
