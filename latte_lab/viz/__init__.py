"""Every picture latte_lab draws: the coordination graph at a round, its animation, the message flow of
teams without a graph, who did what when, scheduling plots, notebook widgets, the trial viewer's page, and
the paper's figures.

- :mod:`latte_lab.viz.graph`: ``layout``, ``draw`` (displays itself, hover for details), ``draw_graph``
  (on an Axes), ``graph_panels``;
- :mod:`latte_lab.viz.animation`: ``animate`` (an offline player; ``.save("trial.gif")``);
- :mod:`latte_lab.viz.flow`: ``flow`` (agents as lanes, broadcasts as arrows), ``round_lines``;
- :mod:`latte_lab.viz.gantt`: ``gantt``, ``activity``;
- :mod:`latte_lab.viz.scheduling`: workloads, makespan curves, straggler runs, ``explore``;
- :mod:`latte_lab.viz.widgets`: ``trial_form`` (the trial explorer), ``compare``;
- :mod:`latte_lab.viz.forks`: ``fork_outcomes`` (what forks of one trial did, per setting);
- :mod:`latte_lab.viz.viewer`: ``build_page`` (a trial's, a sweep's or two trials' HTML page), ``transcript``;
- :mod:`latte_lab.viz.figures`: the paper's ``figure2a`` ... ``figure4``, ``graph_layout`` (Figure 3C's fixed
  positions), ``sensitivity_figure``;
- :mod:`latte_lab.viz.paper`: ``write_all`` (every figure, table and report.md: ``latte-lab figures``);
- :mod:`latte_lab.viz.graph_drawing`: the one renderer of coordination graphs, which every graph picture uses.

Every figure follows :mod:`latte_lab.viz.style` (``TEAM_PALETTE``, ``STATUS_COLORS``, paper sizes and fonts).
In a notebook every picture shows once below the cell that drew it, whatever the cell ends with (``;`` or
not): :mod:`latte_lab.viz.notebook` says how.
Names are resolved on first use and matplotlib, networkx drawing and ipywidgets are imported inside the
functions, so importing latte_lab stays fast.

>>> import latte_lab as ll
>>> res = ll.scheduling.simulate(ll.scheduling.chain(3), n_workers=2)
>>> ax = ll.viz.draw_graph(res, round=1)
>>> ax = ll.viz.gantt(res)
"""

from __future__ import annotations

import importlib

# binding gantt and flow here keeps ll.viz.gantt and ll.viz.flow the functions, not their modules
from latte_lab.viz.animation import TrialAnimation, animate
from latte_lab.viz.flow import flow, round_lines
from latte_lab.viz.gantt import activity, gantt
from latte_lab.viz.graph import STATUS_COLORS, GraphDrawing, draw, draw_graph, graph_panels, layout

_LAZY = {"trial_form": "widgets", "compare": "widgets", "TrialForm": "widgets",  # widgets pull in the config
         "transcript": "viewer", "build_page": "viewer",
         # the paper's figures and their writer pull in pandas and the analysis
         **dict.fromkeys(("figure2a", "figure2b", "figure3a", "figure3b", "figure3c", "figure4", "graph_layout",
                          "sensitivity_figure"), "figures"),
         "write_all": "paper", "TEAM_PALETTE": "style", "fork_outcomes": "forks"}
_SUBMODULES = {"graph", "scheduling", "widgets", "animation", "viewer", "figures", "paper", "style", "graph_drawing",
               "notebook", "forks"}

__all__ = ["STATUS_COLORS", "TEAM_PALETTE", "GraphDrawing", "TrialAnimation", "TrialForm", "activity", "animate",
           "build_page", "compare", "draw", "draw_graph", "figure2a", "figure2b", "figure3a", "figure3b", "figure3c",
           "figure4", "flow", "fork_outcomes", "gantt", "graph_layout", "graph_panels", "layout", "round_lines", "scheduling",
           "sensitivity_figure", "transcript", "trial_form", "write_all"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"latte_lab.viz.{_LAZY[name]}"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"latte_lab.viz.{name}")
    else:
        raise AttributeError(f"module 'latte_lab.viz' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)
