"""No clipped label: every picture latte_lab draws (graphs, panels, Gantt charts, message flows, animation
frames, the scheduling lesson's plots) keeps each piece of text inside its canvas, measured on the canvas
the picture is shown on (animation frames and the explorer's PNGs are saved as they are, with no tight
bounding box to rescue a label that runs off the edge); no two panels' axis labels overlap."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import latte_lab as ll  # noqa: E402
from latte_lab import scheduling as sched  # noqa: E402

TOLERANCE_PX = 1.0  # antialiasing: a glyph may touch the edge


def clipped(fig) -> list[str]:
    """What of ``fig`` is drawn outside its canvas: each axis (its drawn tick labels and label), title, text,
    legend and figure-level text, as its text and how far it reaches."""
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
}


@pytest.mark.parametrize("name", FIGURES)
def test_no_label_outside_the_canvas(trials, name):
    import matplotlib.pyplot as plt

    try:
        problems = clipped(FIGURES[name](trials))
    finally:
        plt.close("all")
    assert not problems, "\n".join(problems)
