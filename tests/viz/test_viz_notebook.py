"""In a notebook every latte_lab picture shows once below the cell that drew it, whatever the cell ends with
(latte_lab.viz.notebook): run in a real kernel, each kind of drawing function, ended with a ``;``, assigned,
or as the cell's result, gives exactly one image; a widget's own player is not shown a second time; outside a
kernel nothing is shown and no figure stays open."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

import latte_lab as ll
from latte_lab.teaching import run_notebook

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs"))
import hooks  # noqa: E402  (docs/ is not a package)

SETUP = """import latte_lab as ll
res = ll.scheduling.simulate(ll.scheduling.chain(4), n_workers=2)
trial = ll.run_trial(ll.TrialConfig(task="debug", team="latte", seed=0, max_rounds=2, sandbox="local",
                                    runs_dir=__import__("tempfile").mkdtemp()))"""
CELLS = [  # (source, images it must show)
    ("ll.viz.graph_panels(res, ncols=3);", 1),
    ("ll.viz.graph_panels(res, ncols=3)", 1),
    ("fig = ll.viz.graph_panels(res, ncols=3)\nprint('drawn')", 1),
    ("fig", 1),  # a later cell shows it again when asked
    ("ll.viz.draw(trial);", 1),
    ("ll.viz.draw(trial)", 1),
    ("ll.viz.scheduling.straggler_figure(ll.scheduling.chain(4), 2, 0.5, heartbeat=1, seed=1)", 1),
    ("ll.viz.gantt(res);", 1),
    ("ax = ll.viz.draw_graph(res)\nax.set_title('mine');", 1),
    ("anim = ll.viz.animate(res)", 1),
    ("ll.viz.animate(res);", 1),
    ("a = ll.viz.graph_panels(res, ncols=3)\nb = ll.viz.draw(trial)", 2),
    ("with ll.viz.notebook.not_shown():\n    quiet = ll.viz.graph_panels(res, ncols=3)", 0),
    ("print('no drawing')", 0),
]


@pytest.fixture(scope="module")
def ran():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SETUP)]
                                  + [nbformat.v4.new_code_cell(src) for src, _ in CELLS])
    return run_notebook(nb)


@pytest.mark.parametrize("i", range(len(CELLS)), ids=[src.splitlines()[0] for src, _ in CELLS])
def test_each_picture_shows_once_whatever_the_cell_ends_with(ran, i):
    cell = ran.cells[i + 1]
    images = [o for o in cell.outputs if any(k.startswith("image/") for k in o.get("data", {}))
              or "<img" in str(o.get("data", {}).get("text/html", ""))]
    assert len(images) == CELLS[i][1], (cell.source, [list(o.get("data", {})) for o in cell.outputs])


def test_drawing_cells_are_found_and_counted(ran):
    found = {d["cell"]: d for d in hooks.drawing_cells(ran)}
    assert set(found) == {i + 1 for i, (src, _) in enumerate(CELLS) if "ll.viz." in src}
    assert all(found[i + 1]["images"] == n for i, (src, n) in enumerate(CELLS) if i + 1 in found)


def test_outside_a_notebook_nothing_shows_and_nothing_stays_open():
    import matplotlib.pyplot as plt

    res = ll.scheduling.simulate(ll.scheduling.chain(3), n_workers=2)
    before = set(plt.get_fignums())
    figs = [ll.viz.graph_panels(res), ll.viz.scheduling.straggler_figure(ll.scheduling.chain(3), 2, 0.5)]
    assert set(plt.get_fignums()) == before and all(f.axes for f in figs)
