"""Pictures: one layout, one Gantt chart, the graph drawings and animation, the scheduling plots."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import latte_lab as ll  # noqa: E402
from latte_lab.scheduling import compare, diamond, random_dag, simulate  # noqa: E402
from latte_lab.scheduling.trials import attempts  # noqa: E402
from latte_lab.viz import scheduling as sviz  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    # busy workers every round: under the paper's dispatch a simulated worker that thinks silently for a few
    # rounds is not re-engaged, and on this seed no node finishes (docs/fidelity.md, measured section)
    cfg = ll.TrialConfig(task="eda", team="latte", model="simulated", seed=1, n_workers=3,
                         dispatch="busy_every_round", runs_dir=str(tmp_path_factory.mktemp("runs")))
    return ll.run_trial(cfg)


def test_public_names_keep_working():
    for name in ("draw_graph", "animate", "gantt", "graph_panels", "layout", "activity", "trial_form", "compare"):
        assert callable(getattr(ll.viz, name)), name
    assert ll.viz.scheduling is sviz and set(ll.viz.STATUS_COLORS) >= {"pending", "done", "verified"}
    for name, home in (("plot_gantt", "ll.viz.gantt"), ("draw_workload", "ll.viz.scheduling.draw_workload"),
                       ("explore", "ll.viz.scheduling.explore")):
        with pytest.raises(AttributeError, match=home.replace(".", r"\.")):
            getattr(ll.scheduling, name)


def test_scheduling_imports_no_drawing_library():
    import subprocess
    import sys

    code = ("import sys, latte_lab.scheduling as s; s.simulate(s.random_dag(20), 3).row(); "
            "print(sorted(m for m in ('matplotlib', 'seaborn', 'ipywidgets', 'latte_lab.viz') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_layout_uses_the_deepest_dependency_over_all_rounds():
    g = ll.CoordinationGraph()
    g.discover("a", by="Lead"); g.discover("b", by="Lead"); g.discover("c", ["b"], by="Lead")
    first = g.snapshot()
    g.claim("a", "Dev1"); g.complete("a", "Dev1")
    g.verify("a", by="Lead")  # a-verify sits between a and its successors (none here)
    g.discover("d", ["a-verify", "c"], by="Lead")
    pos = ll.viz.layout([{"round": 0, "graph": first}, {"round": 1, "graph": g.snapshot()}])
    assert pos.plan.depth == {"a": 0, "b": 0, "c": 1, "a-verify": 1, "d": 2}
    xs = {n: x for n, (x, _) in pos.items()}
    assert xs["a"] == xs["b"] < xs["c"] == xs["a-verify"] < xs["d"]
    assert pos["a"][1] > pos["b"][1]  # creation order, top to bottom
    assert pos.plan.short == {"a": "T1", "b": "T2", "c": "T3", "d": "T4", "a-verify": "V1"}


def _chain_graph(n_nodes: int, width: int, seed: int = 0) -> ll.CoordinationGraph:
    """A layered graph with long titles, some nodes owned, done or in progress, and a verify node."""
    import random

    rng = random.Random(seed)
    g = ll.CoordinationGraph()
    words = "parse load clean tokenize merge summarise verify export render plot index rank".split()
    ids = []
    for i in range(n_nodes):
        deps = rng.sample(ids[-width:], k=min(len(ids[-width:]), rng.randint(0, 2))) if i >= width else []
        title = " ".join(rng.choice(words) for _ in range(rng.randint(2, 9)))
        g.discover(f"n{i}", deps, by="Lead", title=f"{title} for unit {i}")
        ids.append(f"n{i}")
    g.claim("n0", "Dev1"); g.complete("n0", "Dev1"); g.verify("n0", by="Lead")
    g.claim("n1", "Dev2")
    return g


def _overlaps(a, b, tol=0.5) -> bool:
    return a.x0 < b.x1 - tol and b.x0 < a.x1 - tol and a.y0 < b.y1 - tol and b.y0 < a.y1 - tol


def test_graph_of_30_nodes_is_readable():
    g = _chain_graph(30, 6)
    d = ll.viz.draw(g)
    fig, ax = d.fig, d.ax
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    texts = [t for t in ax.texts if t.get_visible() and t.get_text()]
    assert len(texts) >= 3 * 30  # short id, title and owner/status line per node
    assert min(t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text()) >= 7
    boxes = [t.get_window_extent(r) for t in texts]
    clashes = [(texts[i].get_text(), texts[j].get_text()) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
               if _overlaps(boxes[i], boxes[j])]
    assert clashes == []
    nodes = [p for p in ax.patches if p.get_gid()]
    labels = [t for t in texts if t.get_text() not in d.plan.short.values()]
    assert not [t.get_text() for t in labels for p in nodes if _overlaps(t.get_window_extent(r), p.get_window_extent(r))]
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"pending", "assigned", "in progress", "done", "verified", "depends on"} <= legend
    assert {"verify node (Vk reviews Tk)", "edge through a review"} <= legend  # n0 has a verify node
    assert "Dev2 · in progress" in {t.get_text() for t in texts}
    fig_box = fig.bbox
    assert all(fig_box.x0 <= b.x0 and b.x1 <= fig_box.x1 for b in boxes)  # nothing clipped at the edges


def test_graph_of_200_nodes_switches_labels_off_and_offers_a_hover_table():
    d = ll.viz.draw(_chain_graph(200, 12))
    assert d.plan.mode == "none" and not [t for t in d.ax.texts if t.get_text()]
    html = d._repr_html_()
    assert html.count("<title>") == 201 and "<details>" in html and "n199" in html  # 200 and a verify node
    assert d.fig.get_figwidth() < 30 and d.fig.get_figheight() < 30  # tall columns wrap
    assert len(d.table()) == 201


def test_draw_rings_new_nodes_and_keeps_positions_across_rounds():
    g = ll.CoordinationGraph()
    g.discover("a", by="Lead", title="first")
    first = {"round": 0, "graph": g.snapshot()}
    g.discover("b", ["a"], by="Lead", title="second")
    snaps = [first, {"round": 1, "graph": g.snapshot()}]
    d0, d1 = ll.viz.draw(snaps, round=0), ll.viz.draw(snaps, round=1)
    assert d0.plan.pos == d1.plan.pos  # computed from the final graph
    assert "new this round" in {t.get_text() for t in d1.fig.legends[0].get_texts()}
    assert "new this round" not in {t.get_text() for t in d0.fig.legends[0].get_texts()}
    assert "T2 b" in d1._repr_html_() and "T2 b" not in d0._repr_html_()


def test_graph_drawings_panels_and_animation():
    res = simulate(diamond(3, durations=[1, 2, 3]), 2, "self")
    ax = ll.viz.draw_graph(res, round=1)
    assert ax.get_title() == "round 1 · 5 nodes · 1 done"
    assert ll.viz.draw_graph(res.graph).get_title().startswith("round 0")  # a live graph
    fig = ll.viz.graph_panels(res, rounds=[0, 1, 2, 3, 4, 5], ncols=3)
    assert sum(ax.axison is False for ax in fig.axes) == 6
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert len(set(titles)) == 6 and titles[0] == "round 0 · 0/5 done"
    anim = ll.viz.animate(res)
    frames = set(re.findall(r"frames\[(\d+)\] = ", anim.to_jshtml()))
    assert frames == {str(i) for i in range(len(res.snapshots))}  # one frame per round
    with pytest.raises(ll.DataError, match="nothing to animate"):
        ll.viz.animate([])


def test_one_gantt_for_simulations():
    res = simulate(random_dag(12, seed=0), 3, "self", straggler_p=0.4, heartbeat=0, seed=2)
    ax = ll.viz.gantt(res)
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert len(bars) == len(res.intervals) and ax.get_xlabel() == "round"
    widths = sorted(p.get_width() for p in bars)
    assert widths == sorted((res.intervals["end"] - res.intervals["start"]).tolist())
    assert any(line.get_xdata()[0] == res.lower_bound for line in ax.lines)
    assert sum(p.get_hatch() == "///" for p in bars) == res.n_released > 0
    assert [t.get_text() for t in ax.get_yticklabels()] == ["W1", "W2", "W3"]


def test_one_gantt_for_trials(trial):
    iv = attempts(trial)
    done = set(iv.loc[iv["outcome"] == "done", "node"])
    assert done and done <= {n["id"] for n in trial.snapshots[-1]["graph"]["nodes"]}
    assert (iv["end"] > iv["start"]).all()
    ax = ll.viz.gantt(trial)
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert len(bars) == len(iv)
    labels = [t for t in ax.texts if t.get_text()]
    assert labels and {t.get_text() for t in labels} <= set(ll.viz.layout(trial).plan.short.values())
    assert all(t.get_clip_on() and t.get_clip_box() is not None for t in labels)  # a label never spills into the next bar
    assert {t.get_text() for t in ax.get_yticklabels()} == set(iv["worker"])
    assert ll.viz.gantt(trial.event_list).get_xlim() == ax.get_xlim()


def test_gantt_of_a_team_without_a_graph_marks_acting_rounds():
    events = [{"type": "edit_file", "round": 1, "agent": "Dev2", "path": "a.py"},
              {"type": "run_tests", "round": 2, "agent": "Dev1"},
              {"type": "broadcast", "round": 2, "sender": "Lead", "message": "hi"},
              {"type": "broadcast", "round": 3, "sender": "System", "message": "ignored"}]
    ax = ll.viz.gantt(events)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Lead", "Dev1", "Dev2"]
    assert len(ax.patches) == 3  # one bar per agent and round it acted in
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["edited a file", "ran the tests", "only messaged"]


def test_scheduling_plots():
    spec = random_dag(12, seed=0)
    ax = sviz.draw_workload(spec)
    assert "critical path" in ax.get_title()
    red = [p for p in ax.patches if p.get_edgecolor()[:3] == pytest.approx((0.839, 0.157, 0.157), abs=0.01)]
    assert len(red) == len(spec.critical_path()) - 1  # one red arrow per critical edge
    hidden = sviz.draw_workload(spec.with_hidden(["t5", "t9"]), critical_path=False)
    assert "critical path" not in hidden.get_title()
    assert not [p for p in hidden.patches if p.get_edgecolor()[:3] == pytest.approx((0.839, 0.157, 0.157), abs=0.01)]
    assert any(c.get_linestyle()[0][1] is not None for c in hidden.collections)  # the dashed ring of hidden nodes
    runs = compare(spec, [1, 2, 3], ["self", "static"])
    assert sviz.plot_makespan(runs).get_ylabel() == "makespan (rounds)"
    fig = sviz.straggler_figure(spec, 3, 0.4, heartbeat=0, seed=2)
    assert len(fig.axes) == 2 and fig.axes[0].get_xlim() == fig.axes[1].get_xlim()
    workers, p = sviz.explore(spec, n_workers=2, max_workers=4)
    workers.value = 3  # moving a slider redraws in place
    assert (workers.max, p.value) == (4, 0.2)


def test_discovery_plots():
    from latte_lab.scheduling import compare_discovery

    df = compare_discovery(random_dag(30, layers=4, max_deps=1, seed=1), [0.0, 0.5], 4, seeds=[0, 1])
    left, right = sviz.plot_discovery(df)
    assert {t.get_text() for t in left.get_legend().get_texts()} == set(df["team"]) | {"lower bound (all nodes known)"}
    assert right.get_ylabel() == "stalled worker-rounds per run" and left.get_ylim()[0] == 0
    fig = sviz.discovery_figure(random_dag(20, seed=2), rates=[0.0, 0.4], n_workers=3, seeds=[0])
    assert len(fig.axes) == 2


def test_list_schedules_and_a_trial_against_the_schedulers():
    from latte_lab.scheduling import from_trial, graham_example, heft, list_schedule

    ax = ll.viz.gantt(list_schedule(graham_example(), 4, priority="fifo"))
    assert len([p for p in ax.patches if p.get_width() > 0]) == 9 and "Graham" in ax.get_title()
    assert [t.get_text() for t in ll.viz.gantt(heft(graham_example(), (2, 1, 1))).get_yticklabels()] == \
        ["W1", "W2", "W3"]

    class Trial:
        event_list = [{"type": "claim_task", "round": 1, "agent": "Dev1", "task": "a"},
                      {"type": "complete_task", "round": 3, "agent": "Dev1", "task": "a"}]
        snapshots = [{"round": 3, "graph": {"nodes": [{"id": "a", "deps": [], "status": "done"}]}}]

    ax = sviz.plot_efficiency(from_trial(Trial()))
    assert [t.get_text() for t in ax.get_yticklabels()][0] == "team (recorded)" and len(ax.patches) == 6


def test_fork_outcomes_draws_a_share_interval_within_0_and_1_and_names_every_mark():
    import pandas as pd

    forks = pd.DataFrame({"model": ["a"] * 20 + ["b"] * 20, "success": [True] * 19 + [False] + [True] * 20,
                          "total_rounds": list(range(20, 40)) * 2, "total_tokens": [460_000 + i for i in range(40)]})
    fig = ll.viz.fork_outcomes(forks, labels={"a": "same agents", "b": "careful"})
    share = fig.axes[0]
    caps = [line for line in share.get_lines() if line.get_marker() == "_"]  # the interval's caps
    tops = [y for line in caps for y in line.get_ydata()]
    assert tops and min(tops) >= 0.0 and max(tops) <= 1.0  # a share's interval: never past 1 (Wald's is 1.05)
    assert max(tops) == 1.0 and min(tops) == pytest.approx(ll.analysis.wilson_interval(19, 20)[0])
    assert fig.axes[2].get_ylabel() == "tokens (thousands)" and max(fig.axes[2].get_ylim()) < 1000
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"median", "mean", "one fork"} <= set(legend) and any("Wilson" in t for t in legend)
    assert [t.get_text() for t in share.get_xticklabels()] == ["same agents", "careful"]


def test_no_notebook_writes_into_the_repository():
    """Run All keeps to temporary folders: no notebook names a path outside its own folder (``../figures``)."""
    import ast
    from pathlib import Path

    import nbformat

    for path in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                strings = [n.value for n in ast.walk(ast.parse(cell.source))
                           if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                assert not [s for s in strings if s.startswith("../") or "/figures" in s], (path.name, cell.source)
