"""Pictures of a trial or a scheduling run: the coordination graph at a round, its animation, who did what
when, scheduling plots, and notebook widgets.

- :mod:`latte_lab.viz.graph`: ``layout``, ``draw_graph``, ``graph_panels``, ``animate``;
- :mod:`latte_lab.viz.gantt`: ``gantt``, ``activity``;
- :mod:`latte_lab.viz.scheduling`: workloads, makespan curves, straggler runs, ``explore``;
- :mod:`latte_lab.viz.widgets`: ``trial_form``, ``compare``.

Names are resolved on first use and matplotlib, networkx drawing and ipywidgets are imported inside the
functions, so importing latte_lab stays fast.

>>> import latte_lab as ll
>>> res = ll.scheduling.simulate(ll.scheduling.chain(3), n_workers=2)
>>> ax = ll.viz.draw_graph(res, round=1)
>>> ax = ll.viz.gantt(res)
"""

from __future__ import annotations

import importlib

# graph and gantt import nothing heavy; binding gantt here also keeps ll.viz.gantt the function, not its module
from latte_lab.viz.gantt import activity, gantt
from latte_lab.viz.graph import STATUS_COLORS, animate, draw_graph, graph_panels, layout

_LAZY = {"trial_form": "widgets", "compare": "widgets"}  # widgets pull in the trial configuration
_SUBMODULES = {"graph", "scheduling", "widgets"}

__all__ = ["STATUS_COLORS", "activity", "animate", "compare", "draw_graph", "gantt", "graph_panels", "layout",
           "scheduling", "trial_form"]


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
