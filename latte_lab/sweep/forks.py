"""Many forks of one recorded trial at one round (:func:`fork_sweep`), run as a sweep."""

from __future__ import annotations

import itertools
from pathlib import Path

from latte_lab.errors import ConfigError
from latte_lab.forking import check_intervention, fork_config, parent_config, recorded_rounds

__all__ = ["fork_sweep"]


def fork_sweep(run_dir: str | Path, at_round: int, grid: dict[str, list], *, out: str | Path | None = None,
               **sweep_options):
    """Many forks of one trial at one round: every combination of ``grid``'s values ({field: [values]}, the
    changes of :func:`fork`; ``seed`` as a list gives replicates), run by :func:`~latte_lab.sweep.run_sweep`
    (exactly once, resumable, local or Ray: ``sweep_options``). Returns its DataFrame, with ``parent`` and
    ``fork_round`` columns.

    Parameters
    ----------
    run_dir : str or Path
        The recorded trial to fork.
    at_round : int
        The round after which every fork leaves it.
    grid : dict
        ``{field: [values]}``: every combination is one fork's changes.
    out : str or Path, optional
        The sweep directory (default: ``forks/<run dir name>-fork<at_round>`` beside ``run_dir``).
    **sweep_options
        Passed to :func:`~latte_lab.sweep.run_sweep` (``n_jobs``, ``backend``, ``progress``, ...).

    Returns
    -------
    pandas.DataFrame
        One results row per fork, in grid order.

    >>> fork_sweep("runs/debug-latte-s0-033bd68aea", 20, {"seed": list(range(20)),
    ...            "heartbeat_rule": ["paper", "released"]}, n_jobs=2)            # doctest: +SKIP
    """
    from latte_lab.sweep import run_sweep

    run_dir = Path(run_dir)
    parent = parent_config(run_dir)
    recorded = recorded_rounds(run_dir)
    if recorded is not None and at_round > recorded:
        raise ConfigError(f"cannot fork {run_dir.name} at round {at_round}: it ended after round {recorded}")
    for key, values in grid.items():
        if not isinstance(values, (list, tuple, range)) or not len(values):
            raise ConfigError(f"fork_sweep grid[{key!r}] must be a non-empty list of values")
    keys = list(grid)
    configs = []
    for combo in itertools.product(*(list(grid[k]) for k in keys)):
        changes = dict(zip(keys, combo))
        if changes.get("intervene") is not None:
            changes["intervene"] = check_intervention(run_dir, at_round, changes["intervene"])
        configs.append(fork_config(parent, at_round, run_dir, **changes))
    out = Path(out) if out is not None else run_dir.parent / "forks" / f"{run_dir.name}-fork{at_round}"
    return run_sweep(configs, out, **sweep_options)
