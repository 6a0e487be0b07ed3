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
    assert {n: x for n, (x, _) in pos.items()} == {"a": 0.0, "b": 0.0, "c": 1.0, "a-verify": 1.0, "d": 2.0}
    assert pos["a"][1] > pos["b"][1]  # creation order, top to bottom


def test_graph_drawings_and_animation():
    res = simulate(diamond(3, durations=[1, 2, 3]), 2, "self")
    ax = ll.viz.draw_graph(res, round=1)
    assert ax.get_title() == "round 1: 5 nodes"
    assert ll.viz.draw_graph(res.graph).get_title().startswith("round 0")  # a live graph
    fig = ll.viz.graph_panels(res, rounds=[0, 1, 2, 3, 4, 5], ncols=3)
    assert sum(ax.axison is False for ax in fig.axes) == 6
    anim = ll.viz.animate(res, widget=False)
    frames = set(re.findall(r"frames\[(\d+)\] = ", anim.to_jshtml()))
    assert frames == {str(i) for i in range(len(res.snapshots))}  # one frame per round
    box = ll.viz.animate(res, widget=True)  # the slider and play button, without a front end
    assert box.children[0].children[1].max == len(res.snapshots) - 1
    with pytest.raises(ll.DataError, match="no graph snapshots"):
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
    assert len([p for p in ax.patches if p.get_width() > 0]) == len(iv)
    assert {t.get_text() for t in ax.get_yticklabels()} == set(iv["worker"])
    assert ll.viz.gantt(trial.event_list).get_xlim() == ax.get_xlim()


def test_gantt_of_a_team_without_a_graph_marks_acting_rounds():
    events = [{"type": "edit_file", "round": 1, "agent": "Dev2", "path": "a.py"},
              {"type": "run_tests", "round": 2, "agent": "Dev1"},
              {"type": "broadcast", "round": 2, "sender": "Lead", "message": "hi"},
              {"type": "broadcast", "round": 3, "sender": "System", "message": "ignored"}]
    ax = ll.viz.gantt(events)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Dev1", "Dev2", "Lead"]
    assert len(ax.collections) == 3


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
