"""What forks of one trial did, setting by setting: ``ll.viz.fork_outcomes(forks, parent)``.

Three panels over the rows of a fork sweep (``ll.fork_sweep``), one column of marks per setting: the share of
forks that succeeded with its Wilson interval (a share's interval, which stays within 0 and 1; see
:func:`latte_lab.analysis.inference.wilson_interval`), and the rounds and the tokens of every fork as a box
(its median line) with its mean marked and each fork a dot. The parent's own continuation, a dashed line, is
one draw of the unchanged setting. The key under the panels names every mark.

>>> import pandas as pd
>>> forks = pd.DataFrame({"model": ["simulated"] * 3 + ["simulated/careful"] * 3,
...                       "success": [True, False, True, True, True, True], "total_rounds": [30, 40, 33, 28, 29, 31],
...                       "total_tokens": [410_000, 520_000, 450_000, 380_000, 395_000, 402_000]})
>>> fig = fork_outcomes(forks)
>>> [ax.get_title() for ax in fig.axes]
['share of forks that succeed', 'rounds', 'tokens']
>>> fig.axes[2].get_ylabel()
'tokens (thousands)'
"""

from __future__ import annotations

from typing import Any

import latte_lab.viz.style as style

__all__ = ["fork_outcomes"]

PANELS = (("total_rounds", "rounds", "rounds", 1), ("total_tokens", "tokens", "tokens (thousands)", 1000))
"""(results column, panel title, y label, the unit its values are divided by)."""
LEVEL = 0.95  # the confidence of the success share's interval
SETTING_COLORS = ("C0", "C2", "C4", "C5", "C6")  # one per setting; C1 marks medians, C3 the parent
SHARE_TOP = 1.08  # the share panel's top: room above a share of 1 for its interval's cap and the parent's line
DOT_SPREAD = 0.08  # half the width over which a setting's forks are spread, so that equal values stay apart


def fork_outcomes(forks, parent: Any = None, *, by: str = "model", labels: dict[str, str] | None = None):
    """The outcomes of a fork sweep's rows per value of ``by`` (see the module docstring); returns the Figure.

    ``parent``: the forked trial's result (its continuation is drawn as a dashed line); ``labels``: a name
    for each setting on the x axis (default: the values of ``by``, in the order they first appear)."""
    import matplotlib.ticker as mticker
    import numpy as np
    from matplotlib.lines import Line2D

    from latte_lab.analysis.inference import wilson_interval

    settings = list(labels) if labels else list(dict.fromkeys(forks[by]))
    names = [(labels or {}).get(s, str(s)) for s in settings]
    colors = [SETTING_COLORS[i % len(SETTING_COLORS)] for i in range(len(settings))]
    xs = np.arange(1, len(settings) + 1)
    plt = style.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 4.2), layout="constrained")
    # the share of forks that succeed, with a share's interval (never past 0 or 1)
    wins = [int(forks.loc[forks[by] == s, "success"].astype(bool).sum()) for s in settings]
    counts = [int((forks[by] == s).sum()) for s in settings]
    shares = np.array([w / n if n else np.nan for w, n in zip(wins, counts)])
    bounds = np.array([wilson_interval(w, n, LEVEL) for w, n in zip(wins, counts)])
    axes[0].bar(xs, shares, color=colors, alpha=0.7)
    axes[0].errorbar(xs, shares, yerr=[shares - bounds[:, 0], bounds[:, 1] - shares], fmt="none", ecolor="black",
                     capsize=6, lw=1)
    axes[0].set_ylim(0, SHARE_TOP)
    axes[0].set_yticks(np.linspace(0, 1, 6))
    axes[0].set_ylabel("share")
    axes[0].set_title("share of forks that succeed")
    for ax, (column, title, ylabel, unit) in zip(axes[1:], PANELS):
        groups = [forks.loc[forks[by] == s, column].to_numpy(dtype=float) / unit for s in settings]
        ax.boxplot(groups, positions=xs, widths=0.5, showmeans=True, showfliers=False,
                   medianprops={"color": "C1", "lw": 1.5},
                   meanprops={"marker": "^", "markerfacecolor": "white", "markeredgecolor": "black"})
        for x, values, color in zip(xs, groups, colors):
            ax.scatter(x + np.linspace(-DOT_SPREAD, DOT_SPREAD, len(values)), values, s=12, alpha=0.5, color=color,
                       zorder=3)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        if unit != 1:
            ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    columns = ("success", "total_rounds", "total_tokens")
    for ax, column, unit in zip(axes, columns, (1, 1, 1000)):
        ax.set_xticks(xs, names)
        ax.set_xlim(0.4, len(settings) + 0.6)
        if parent is not None:
            ax.axhline(float(parent.row[column]) / unit, color="C3", ls="--", lw=1.2)
    handles = [Line2D([], [], color="black", marker="_", ls="none", markersize=12,
                      label=f"{LEVEL:.0%} interval (Wilson)"),
               Line2D([], [], color="C1", lw=1.5, label="median"),
               Line2D([], [], color="black", marker="^", markerfacecolor="white", ls="none", label="mean"),
               Line2D([], [], color="grey", marker="o", ls="none", alpha=0.5, markersize=4, label="one fork")]
    if parent is not None:
        handles.append(Line2D([], [], color="C3", ls="--", lw=1.2, label="the parent's own continuation"))
    style.legend_below(fig, handles)
    return style.finish(fig)
