"""How a latte_lab picture appears in a notebook: once, below the cell that drew it, whatever the cell ends with.

The convention of every drawing function of :mod:`latte_lab.viz`:

- A function that draws on an Axes returns the Axes (``draw_graph``, ``gantt``, ``flow``, the scheduling
  plots). Its figure stays open in pyplot, so the notebook's inline backend shows it when the cell ends, and
  it can still be drawn on (``ax.set_xlim(...)``, ``plt.title(...)``) in the same cell.
- A function that makes a whole picture returns it (a matplotlib Figure: ``graph_panels``, the paper's
  figures, ``straggler_figure``; a :class:`~latte_lab.viz.graph.GraphDrawing` from ``draw``; a
  :class:`~latte_lab.viz.animation.TrialAnimation` from ``animate``) through :func:`shown`: the notebook
  shows it when the cell ends, unless the cell's own result already showed it.

So ``ll.viz.graph_panels(res)``, ``ll.viz.graph_panels(res);`` and ``fig = ll.viz.graph_panels(res)`` each
show the picture once; ``fig`` on the last line of a later cell (or ``display(fig)``) shows it again.
Outside a notebook kernel (a script, a terminal, a sweep's worker) nothing is shown; a returned Figure is
closed in pyplot (``savefig`` still works), so a loop of them does not pile up open figures.

>>> import latte_lab as ll
>>> res = ll.scheduling.simulate(ll.scheduling.chain(3), n_workers=2)
>>> fig = ll.viz.graph_panels(res)            # not in a notebook: nothing is shown, nothing stays open
>>> import matplotlib.pyplot as plt
>>> fig.number in plt.get_fignums()
False
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["not_shown", "shown"]

_pending: list[Any] = []  # pictures made by the running cell, shown when it ends (unless it was its result)
_state = {"hooked": None}  # the shell whose post_run_cell event shows them
_quiet = threading.local()  # depth of not_shown() blocks in this thread


def _kernel():
    """The shell of the IPython kernel running this code, or None (a script, a terminal IPython)."""
    import sys

    if "IPython" not in sys.modules:  # nothing imported IPython: certainly no kernel (and no import to pay)
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def _inline() -> bool:
    """Whether matplotlib draws through the notebook's inline backend (the kernel's default)."""
    import matplotlib

    return "inline" in str(matplotlib.get_backend()).lower()


def shown(obj: Any) -> Any:
    """``obj``, arranged to be shown once below the notebook cell that made it (see the module's text).

    A Figure is closed in pyplot, so the inline backend does not show it a second time, and shown by the
    kernel when the cell ends. Where matplotlib draws some other way (an interactive backend) a Figure is
    left to it. Inside :func:`not_shown`, or outside a cell (a widget's callback), nothing is arranged.
    """
    from matplotlib.figure import Figure

    shell = _kernel()
    is_figure = isinstance(obj, Figure)
    if is_figure and (shell is None or _inline()):
        import matplotlib.pyplot as plt

        plt.close(obj)
    if shell is None or getattr(_quiet, "depth", 0) or (is_figure and not _inline()) or not _in_cell(shell):
        return obj
    _hook(shell)
    if not any(p is obj for p in _pending):
        _pending.append(obj)
    return obj


def _in_cell(shell) -> bool:
    """Whether the kernel is running a cell (not a widget's callback, which answers a comm message)."""
    try:
        parent = shell.kernel.get_parent()
    except (AttributeError, TypeError):  # an older kernel: take it for a cell
        return True
    return (parent or {}).get("header", {}).get("msg_type") == "execute_request"


@contextlib.contextmanager
def not_shown() -> Iterator[None]:
    """Pictures made inside the block are not shown (a writer that saves them, such as ``write_all``)."""
    _quiet.depth = getattr(_quiet, "depth", 0) + 1
    try:
        yield
    finally:
        _quiet.depth -= 1


def _hook(shell) -> None:
    if _state["hooked"] is not shell:
        shell.events.register("post_run_cell", _cell_ends)
        _state["hooked"] = shell


def _cell_ends(result=None) -> None:
    """Shows every picture of the cell that its result did not already show, in the order they were made."""
    pending = list(_pending)
    _pending.clear()
    if not pending:
        return
    from IPython.display import display

    already = getattr(result, "result", None)
    for obj in pending:
        if obj is not already:
            display(obj)
