"""Analysis of trials: loaders, Table 2, the numbers behind Figures 2-4, the §5.1/§5.3 statistics and what
the paper lacks, as DataFrames and numbers.

The same functions take the authors' published data (``ll.load_published``) or our own sweep results
(``ll.load_runs``); both give ``TrialData.trials`` in the schema of :mod:`latte_lab.schema`.
Names resolve on first use so that ``import latte_lab.analysis`` does not import pandas or scipy, and
nothing in this package imports matplotlib: every picture is drawn by :mod:`latte_lab.viz`.

The paper's figures are drawn by :mod:`latte_lab.viz` (``ll.viz.figure2a`` ... ``ll.viz.figure4``); the old names
``ll.analysis.figure2a`` ... ``figure4`` still give them, with a DeprecationWarning.

>>> import latte_lab as ll
>>> callable(ll.analysis.table2)
True
"""

from __future__ import annotations

import importlib

_LAZY = {
    # loaders
    "load_published": "latte_lab.analysis.loaders",
    "load_runs": "latte_lab.analysis.loaders",
    "load": "latte_lab.analysis.loaders",
    "TrialData": "latte_lab.analysis.loaders",
    "is_published_dir": "latte_lab.analysis.loaders",
    # tables and statistics
    "table2": "latte_lab.analysis.stats",
    "format_table2": "latte_lab.analysis.stats",
    "normalised_costs": "latte_lab.analysis.stats",
    "stats_5_1": "latte_lab.analysis.stats",
    "section53": "latte_lab.analysis.stats",
    "robust_statistics": "latte_lab.analysis.stats",
    "cost_regression": "latte_lab.analysis.stats",
    "bootstrap_ci": "latte_lab.analysis.stats",
    "wilson_interval": "latte_lab.analysis.inference",
    "rank_biserial": "latte_lab.analysis.stats",
    "sem": "latte_lab.analysis.stats",
    # the numbers behind Figure 2
    "expected_cost_per_success": "latte_lab.analysis.stats",
    "pareto_points": "latte_lab.analysis.stats",
    # paper comparison and report
    "paper_reference": "latte_lab.analysis.report",
    "compare_with_paper": "latte_lab.analysis.report",
    "write_tables": "latte_lab.analysis.report",
    "formatted": "latte_lab.analysis.report",
    "format_p": "latte_lab.analysis.report",
    "format_number": "latte_lab.analysis.report",
    "task_names": "latte_lab.analysis.report",
    # when does LATTE help: the sensitivity study's results (latte_lab.sweep.sensitivity runs the study)
    "sensitivity": "latte_lab.analysis.sensitivity_results",
    "load_sensitivity": "latte_lab.analysis.sensitivity_results",
    "team_table": "latte_lab.analysis.sensitivity_results",
    "directions": "latte_lab.analysis.sensitivity_results",
    "coordination_counts": "latte_lab.analysis.sensitivity_results",
    # how close the simulated model comes to the published trials (docs/calibration.md)
    "validate_sim": "latte_lab.analysis.validation",
}
# The paper's figures, drawn by viz: their old names here, deprecated (see the module docstring); resolved on first
# use, so tests/package/test_layers.py counts them as the one documented reference from analysis up to viz.
_LAZY_DEPRECATED = {
    "figure2a": "latte_lab.viz.figures",
    "figure2b": "latte_lab.viz.figures",
    "figure3a": "latte_lab.viz.figures",
    "figure3b": "latte_lab.viz.figures",
    "figure3c": "latte_lab.viz.figures",
    "figure4": "latte_lab.viz.figures",
}
_MOVED = {  # names this package no longer has, and where they are
    "graph_layout": "ll.viz.graph_layout (latte_lab.viz.figures)",
    "TEAM_PALETTE": "ll.viz.TEAM_PALETTE (latte_lab.viz.style)",
    "write_all": "ll.viz.write_all (latte_lab.viz.paper)",
    "sensitivity_configs": "latte_lab.sweep.sensitivity.sensitivity_configs",
    "style": "latte_lab.viz.style",
    "graph_drawing": "latte_lab.viz.graph_drawing",
}

__all__ = [
    "coordination_counts",
    "directions",
    "load_sensitivity",
    "validate_sim",
    "sensitivity",
    "team_table",
    "TrialData",
    "bootstrap_ci",
    "wilson_interval",
    "compare_with_paper",
    "cost_regression",
    "expected_cost_per_success",
    "format_number",
    "format_p",
    "format_table2",
    "formatted",
    "is_published_dir",
    "load",
    "load_published",
    "load_runs",
    "normalised_costs",
    "paper_reference",
    "pareto_points",
    "rank_biserial",
    "robust_statistics",
    "schema",
    "section53",
    "sem",
    "stats_5_1",
    "table2",
    "task_names",
    "write_tables",
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _LAZY_DEPRECATED:
        import warnings

        warnings.warn(f"ll.analysis.{name} is ll.viz.{name} (viz draws every figure, analysis returns numbers); "
                      "call that instead", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_LAZY_DEPRECATED[name]), name)
    if name == "schema":
        return importlib.import_module("latte_lab.schema")
    if name in _MOVED:
        raise AttributeError(f"latte_lab.analysis has no {name!r} (analysis returns DataFrames and numbers): "
                             f"it is {_MOVED[name]}")
    raise AttributeError(f"module 'latte_lab.analysis' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
