"""No clipped label: every picture latte_lab draws (graphs, panels, Gantt charts, message flows, animation
frames, the scheduling lesson's plots, every figure the notebooks draw and every figure ``latte-lab figures``
writes) keeps each piece of text inside its canvas, measured on the canvas the picture is shown on (animation
frames, the explorer's PNGs and ``latte-lab figures``' files are saved as they are, with no tight bounding box
to rescue a label that runs off the edge); no two panels' axis labels overlap. A last test keeps the list
complete: every drawing function a notebook calls is drawn here."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import latte_lab as ll  # noqa: E402
from latte_lab import scheduling as sched  # noqa: E402

TOLERANCE_PX = 1.0  # antialiasing: a glyph may touch the edge


def clipped(fig, saved: bool = False) -> list[str]:
    """What of ``fig`` is drawn outside its canvas, at the resolution it is shown at and, with ``saved``, at the
    one ``latte-lab figures`` saves it at (text is hinted to each, so its width moves a little): each axis (its
    drawn tick labels and label), title, text, legend and figure-level text, as its text and how far it
    reaches."""
    from latte_lab.viz.style import FIG_DPI

    shown = fig.dpi
    out = _clipped_at(fig)
    if not saved:
        return out
    fig.set_dpi(FIG_DPI)
    try:
        return out + [f"at {FIG_DPI} dpi: {p}" for p in _clipped_at(fig) if p not in out]
    finally:
        fig.set_dpi(shown)


def _clipped_at(fig) -> list[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):  # a Figure pyplot does not manage
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    out = []
    for what, box in _parts(fig, renderer):
        if box is None or box.width == 0:
            continue
        if box.x0 < -TOLERANCE_PX or box.y0 < -TOLERANCE_PX or box.x1 > W + TOLERANCE_PX or box.y1 > H + TOLERANCE_PX:
            out.append(f"{what} at x {box.x0:.0f}..{box.x1:.0f} of {W:.0f}, y {box.y0:.0f}..{box.y1:.0f} of {H:.0f}")
    labels = [(ax.xaxis.label.get_text(), ax.xaxis.label.get_window_extent(renderer)) for ax in fig.axes
              if ax.get_visible() and ax.axison and _shown(ax.xaxis.label)]
    out += [f"axis labels {a!r} and {b!r} overlap" for i, (a, box_a) in enumerate(labels)
            for b, box_b in labels[i + 1:] if box_a.overlaps(box_b)]
    return out


def _shown(t) -> bool:
    return t.get_visible() and bool(t.get_text().strip())


def _parts(fig, renderer):
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        if ax.axison:
            for axis in (ax.xaxis, ax.yaxis):
                if axis.get_visible():
                    labels = [t.get_text() for t in axis.get_ticklabels() if _shown(t)][:4]
                    yield f"axis {axis.get_label_text()!r} ticks {labels}", axis.get_tightbbox(renderer)
        for t in [ax.title, ax._left_title, ax._right_title, *ax.texts]:
            if _shown(t) and not _clipped_by_axes(t, renderer):
                yield repr(t.get_text()), t.get_window_extent(renderer)
        if ax.get_legend() is not None:
            yield "legend", ax.get_legend().get_window_extent(renderer)
    for t in fig.texts:
        if _shown(t):
            yield repr(t.get_text()), t.get_window_extent(renderer)
    for legend in fig.legends:
        yield "figure legend", legend.get_window_extent(renderer)


def _clipped_by_axes(t, renderer) -> bool:
    """A text drawn clipped to its axes (a data label past the limits) is not shown, so it cannot run off."""
    clip = t.get_clip_box() if t.get_clip_on() else None
    return clip is not None and not clip.overlaps(t.get_window_extent(renderer))


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    return {team: ll.run_trial(ll.TrialConfig(task="textproc", team=team, seed=0, max_rounds=6, runs_dir=str(runs)))
            for team in ("latte", "pipeline", "decentralized")}


def _frame(res, which: str):
    anim = ll.viz.animate(res)
    anim._draw_frame(getattr(anim, "start", 0) if which == "first" else len(anim) - 1)
    return anim.fig


SPEC = sched.random_dag(24, layers=4, max_deps=2, seed=0)
PAPER = ("figure2a", "figure2b", "figure3a", "figure3b", "figure3c", "figure4")


def _published():
    if "pub" not in _CACHE:
        _CACHE["pub"] = ll.load_published()
    return _CACHE["pub"]


_CACHE: dict = {}


def _paper(name: str):
    """A figure as ``latte-lab figures`` draws it from the bundled published data (latte_lab.viz.paper)."""
    from latte_lab.viz import paper

    return paper._make_figure(name, _published())


def _forks():
    import pandas as pd

    return pd.DataFrame({"model": ["simulated"] * 20 + ["simulated/careful"] * 20,
                         "success": [True] * 19 + [False] + [True] * 20, "total_rounds": list(range(26, 46)) * 2,
                         "total_tokens": [340_000 + 6_000 * i for i in range(40)]})


def _teaching_trial(t):
    return sched.from_trial(t["latte"])

FIGURES = {  # name -> the Figure, from the module's three short trials
    "draw latte": lambda t: ll.viz.draw(t["latte"]).fig,
    "draw pipeline (its message flow)": lambda t: ll.viz.draw(t["pipeline"]),
    "graph_panels latte": lambda t: ll.viz.graph_panels(t["latte"]),
    **{f"gantt {team}": (lambda t, team=team: ll.viz.gantt(t[team], pyplot=False).figure)
       for team in ("latte", "pipeline", "decentralized")},
    "flow pipeline": lambda t: ll.viz.flow(t["pipeline"]).figure,
    **{f"animation {team} {which} frame": (lambda t, team=team, which=which: _frame(t[team], which))
       for team in ("latte", "pipeline", "decentralized") for which in ("first", "last")},
    "draw_workload": lambda t: ll.viz.scheduling.draw_workload(SPEC).figure,
    "plot_makespan": lambda t: ll.viz.scheduling.plot_makespan(sched.compare(SPEC, [1, 2, 4], ["self", "static"])).figure,
    "straggler_figure": lambda t: ll.viz.scheduling.straggler_figure(SPEC, 4, 0.2, heartbeat=1, seed=1, pyplot=False),
    "plot_discovery": lambda t: ll.viz.scheduling.plot_discovery(sched.compare_discovery(
        sched.random_dag(30, layers=5, max_deps=1, seed=2), [0.0, 0.3, 0.6], 8, seeds=range(2)))[0].figure,
    # what the notebooks draw besides: 01's round-0 graph, 02's flow of a decentralized team, 04's lesson
    "draw latte round 0": lambda t: ll.viz.draw(t["latte"], round=0).fig,
    "flow decentralized": lambda t: ll.viz.flow(t["decentralized"]).figure,
    "draw_graph with ids (04)": lambda t: ll.viz.draw_graph(SPEC.to_graph(), title="24 subtasks, all pending",
                                                            ids=True).figure,
    "draw_graph exercise 1 (04)": lambda t: ll.viz.draw_graph(
        ll.teaching.setup("ex1"), title="exercise 1: which nodes are on the frontier?", ids=True).figure,
    "draw_workload without its critical path (04)": lambda t: ll.viz.scheduling.draw_workload(
        ll.teaching.setup("ex2"), critical_path=False).figure,
    "draw_workload with hidden nodes (04)": lambda t: ll.viz.scheduling.draw_workload(
        ll.teaching.setup("ex7").with_discovery(0.6, seed=0)).figure,
    "graph_panels of a schedule, 5 columns (04)": lambda t: ll.viz.graph_panels(
        sched.simulate(SPEC, n_workers=3, policy="self"), rounds=[0, 8, 16, 24], ncols=5),
    "gantt of a schedule (04)": lambda t: ll.viz.gantt(sched.simulate(SPEC, n_workers=3, policy="self")).figure,
    "plot_efficiency (04)": lambda t: ll.viz.scheduling.plot_efficiency(_teaching_trial(t)).figure,
    "sensitivity_figure (05)": lambda t: ll.viz.sensitivity_figure(ll.analysis.sensitivity(
        rows=ll.analysis.load_sensitivity())),
    "figure4 of own trials (06)": lambda t: ll.viz.figure4(ll.load_runs(t["latte"].run_dir.parent).trials),
    "fork_outcomes (07)": lambda t: ll.viz.fork_outcomes(_forks(), t["latte"]),
    # every figure latte-lab figures writes (and notebook 03 shows)
    **{f"{name} (latte-lab figures, 03)": (lambda t, name=name: _paper(name)) for name in PAPER},
}
DRAWN = {"draw", "graph_panels", "gantt", "flow", "animate", "draw_graph", "draw_workload", "plot_makespan",
         "straggler_figure", "explore", "plot_discovery", "plot_efficiency", "sensitivity_figure", "fork_outcomes",
         *PAPER}
"""The drawing functions the figures above cover (``explore`` draws ``straggler_figure``'s picture)."""


@pytest.mark.parametrize("name", FIGURES)
def test_no_label_outside_the_canvas(trials, name):
    import matplotlib.pyplot as plt

    try:
        problems = clipped(FIGURES[name](trials), saved="latte-lab figures" in name)
    finally:
        plt.close("all")
    assert not problems, "\n".join(problems)


def test_every_drawing_function_a_notebook_calls_is_checked_here():
    import sys
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "docs"))
    import hooks

    called = set()
    for path in [*(root / "notebooks").glob("*.ipynb"), root / "teaching" / "04_teaching_scheduling.ipynb"]:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                called |= {c.rsplit(".", 1)[-1] for c in hooks.drawing_calls(cell.source)}
    assert called - {"subplots", "figure"} <= DRAWN, called - DRAWN  # pyplot's own figures are the notebook's
