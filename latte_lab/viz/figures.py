"""Figures 2-4 of the paper from a ``TrialData`` (published or ours), and the sensitivity study's figure.

Each ``figure*`` function returns a matplotlib Figure; the numbers behind Figure 2 come from the DataFrame
functions of :mod:`latte_lab.analysis.stats` (``expected_cost_per_success``, ``pareto_points``), so they can
be tested and tabulated without drawing. The figures are drawn with matplotlib alone (no seaborn), imported
inside the functions so that importing this module stays light. Constructions follow the released notebook
(reference §10). ``ll.viz.figure2a`` ... ``ll.viz.figure4`` are these functions (``ll.analysis.figure2a`` ... are
their deprecated old names).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

import latte_lab.viz.graph_drawing as graph_drawing
import latte_lab.viz.style as style
from latte_lab import schema
from latte_lab.analysis import stats
from latte_lab.errors import DataError

FIGURE3A_OPERATORS = ("discover_task", "assign_task", "claim_task", "complete_task", "claim_blocked",
                      "release_task", "close_task", "create_verify_node")
"""Operators shown in Figure 3A, in the paper's order (Discover, Assign, Claim, Complete, Release, Close,
Verify; refused claims beside Claim). A bar appears when the data have the operator: the published
operator_usage.json has no Complete."""
OPERATOR_LABELS = {"discover_task": "Discover", "assign_task": "Assign", "claim_task": "Claim",
                   "complete_task": "Complete", "claim_blocked": "Claim refused", "release_task": "Release",
                   "close_task": "Close", "create_verify_node": "Verify"}

FIGURE3B_TEAMS = ("latte", "static")  # dynamic vs static graph size
FIGURE3C_ROUNDS = (0, 2, 5, 11)  # the published example's panels

FIGURE4_PANELS = (
    ("A", "cross_agent_overwrites", "Overwrites per trial"),
    ("B", "n_concurrent_collisions", "Concurrent writes per trial"),
    ("C", "wasted_chars", "Wasted characters per trial"),
    ("D", "total_messages", "Messages per trial"),
    ("E", "total_message_chars", "Message characters per trial"),
    ("F", "idle_fraction", "Idle fraction of agent-rounds"),
)
"""(panel letter, trial column, y label): the paper's 2 x 3 grid. The paper's panel D shows messages as a
count and as characters; here they are panels D and E, and inactivity is F, so every letter is unique."""


def _thousands(ax) -> None:
    """Large counts on the y axis as 50k, 100k, ... (short tick labels that stay at 7 pt)."""
    from matplotlib.ticker import FuncFormatter

    top = ax.get_ylim()[1]
    if top >= 10_000:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:.0f}k"))


# --- Figure 2 --------------------------------------------------------------------------------------

def figure2a(trials: pd.DataFrame):
    """Figure 2A: expected cost per success (tokens; wall clock), one column per model; two-column width."""
    data = stats.expected_cost_per_success(trials)
    models = sorted(data["model"].unique())
    if not models:
        raise DataError("figure2a: no trials to plot")
    with style.theme():
        fig, axes = style.figure("two", 4.4, 2, len(models), squeeze=False)
        for j, model in enumerate(models):
            for i, (metric, label, scale) in enumerate((("tokens", "Tokens per success (k)", 1e-3),
                                                        ("wall", "Wall clock per success (min)", 1 / 60))):
                ax = axes[i][j]
                d = data[(data["model"] == model) & (data["metric"] == metric)].dropna(subset=["expected_cost"])
                teams = schema.ordered(d["team"], schema.TEAM_ORDER)
                d = d.set_index("team").loc[teams] if teams else d
                x = np.arange(len(teams))
                ax.bar(x, d["expected_cost"] * scale if teams else [],
                       yerr=d["err"] * scale if teams else None, capsize=2,
                       color=[style.team_color(t) for t in teams], error_kw={"lw": 0.8})
                ax.set_xticks(x, [schema.TEAM_LABELS.get(t, t) for t in teams], rotation=30, ha="right")
                ax.set_ylabel(label)
                ax.grid(axis="x", visible=False)
                if i == 0:
                    ax.set_title(model, fontsize=style.FONT_PT)
    return style.finish(fig)


def figure2b(trials: pd.DataFrame):
    """Figure 2B: accuracy against normalised token cost per team (mean ± SEM), with the Pareto frontier
    drawn as the staircase that bounds the region every frontier team dominates; one-column width."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    pts = stats.pareto_points(trials)
    if pts.empty:
        raise DataError("figure2b: no team has both successful trials with a cost and an accuracy")
    with style.theme():
        fig, ax = style.figure("one", 3.3)
        for _, p in pts.iterrows():
            c = style.team_color(p["team"])
            ax.errorbar(p["cost"], p["accuracy"] * 100, xerr=p["cost_sem"], yerr=p["accuracy_sem"] * 100, fmt="o",
                        ms=6, capsize=2, color=c, mec="black" if p["on_frontier"] else c, mew=1.2, zorder=3,
                        elinewidth=0.8)
        ax.margins(x=0.08, y=0.12)
        ax.autoscale_view()
        (x0, x1), (y0, _) = ax.get_xlim(), ax.get_ylim()
        front = pts[pts["on_frontier"]].sort_values("cost")
        xs, ys = [float(front["cost"].iloc[0])], [y0]
        for cost, acc in zip(front["cost"], front["accuracy"] * 100):
            xs += [cost, cost]
            ys += [ys[-1] if len(ys) > 1 else y0, acc]
        xs.append(x1)
        ys.append(ys[-1])
        xs, ys = xs[1:], ys[1:]
        ax.plot(xs, ys, color="black", ls="--", lw=0.9, zorder=2)
        ax.fill_between(xs, y0, ys, step=None, color="#98a2b3", alpha=0.15, lw=0, zorder=1)
        ax.set_xlim(x0, x1)
        ax.set_ylim(bottom=y0)
        ax.axvline(1.0, color="grey", ls=":", lw=0.9)
        ax.set_xlabel("Token cost (1 = task mean of successful trials)")
        ax.set_ylabel("Accuracy (%)")
        handles = [Line2D([], [], marker="o", ls="", color=style.team_color(t), ms=5,
                          label=schema.TEAM_LABELS.get(t, t)) for t in pts["team"]]
        handles += [Line2D([], [], marker="o", ls="", mfc="white", mec="black", mew=1.2, ms=5,
                           label="on the Pareto frontier"),
                    Line2D([], [], color="black", ls="--", lw=0.9, label="Pareto frontier"),
                    Patch(color="#98a2b3", alpha=0.3, label="dominated by a frontier team"),
                    Line2D([], [], color="grey", ls=":", lw=0.9, label="task mean cost"),
                    Line2D([], [], color="black", lw=0.8, marker="|", label="± SEM")]
        style.legend_below(fig, handles, ncol=2)
    return style.finish(fig)


# --- Figure 3 --------------------------------------------------------------------------------------

def figure3a(operator_usage: pd.DataFrame, team: str = "latte"):
    """Figure 3A: % of a team's runs using each operator at least once (a bar per operator the data have)."""
    d = operator_usage[operator_usage["team"] == team].set_index("operator")
    ops = [op for op in FIGURE3A_OPERATORS if op in d.index]
    if not ops:
        raise DataError(f"figure3a: no operator usage for team {team!r}; teams present: "
                        f"{sorted(operator_usage['team'].unique())}")
    with style.theme():
        fig, ax = style.figure("one", 2.4)
        vals = d.loc[ops, "fraction"].astype(float) * 100
        ax.bar(range(len(ops)), vals, color=style.team_color(team), width=0.7)
        for i, v in enumerate(vals):
            ax.text(i, v + 2, f"{v:.0f}%", ha="center", fontsize=style.MIN_FONT_PT)
        ax.set_xticks(range(len(ops)), [OPERATOR_LABELS[o] for o in ops], rotation=30, ha="right")
        ax.set_ylim(0, 112)
        ax.set_ylabel(f"{schema.TEAM_LABELS.get(team, team)} runs using it (%)")
        ax.grid(axis="x", visible=False)
    return style.finish(fig)


def figure3b(trajectories: pd.DataFrame, teams=FIGURE3B_TEAMS):
    """Figure 3B: mean graph size per round with a ±SEM band, dynamic (LATTE) vs static; one column."""
    from matplotlib.patches import Patch

    with style.theme():
        fig, ax = style.figure("one", 2.5)
        drawn = []
        for team in teams:
            d = trajectories[trajectories["team"] == team].sort_values("round")
            if d.empty:
                continue
            drawn.append(team)
            c = style.team_color(team)
            ax.plot(d["round"], d["mean"], marker="o", ms=3, color=c, label=schema.TEAM_LABELS.get(team, team))
            sem = d["sem"].fillna(0).astype(float)
            ax.fill_between(d["round"].astype(float), d["mean"] - sem, d["mean"] + sem, color=c, alpha=0.2, lw=0)
        if not drawn:
            raise DataError(f"figure3b: no graph-size trajectories for teams {list(teams)}")
        ax.set_xlabel("Round")
        ax.set_ylabel("Nodes in the graph")
        ax.xaxis.set_major_locator(style.pyplot().MaxNLocator(integer=True))
        handles, _ = ax.get_legend_handles_labels()
        handles.append(Patch(color="#98a2b3", alpha=0.4, label="± SEM"))
        ax.legend(handles=handles, frameon=False)
    return style.finish(fig)


def _node_key(node: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", node)]


def graph_layout(snapshots: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Fixed positions, in inches, for every node of a run: the layout Figure 3C draws
    (:func:`latte_lab.viz.graph_drawing.plan` over every round: a column per dependency depth, spaced
    by label width), so nodes that vanished before the final snapshot are placed too."""
    if snapshots.empty:
        raise DataError("graph_layout: no snapshots to lay out")
    return dict(graph_drawing.plan(snapshot_records(snapshots)).pos)


def _short_id(node: str) -> str:
    """The run's own number for a node: task-9 -> T9, task-2a -> T2a, task-2-verify -> V2."""
    digits = re.findall(r"\d+[a-z]?", node)
    if not digits:
        return node[:4]
    return ("V" if node.endswith("verify") else "T") + digits[0]


VERIFY_PREFIX = "verify: "


def _verify_title(node: dict, titles: dict) -> str:
    """A verify node's title with "…" where the recording cut the reviewed node's title short (the released
    code keeps its first characters: "verify: Create config.py w"), so a reader sees it was cut there, not
    here."""
    title = node["title"] if isinstance(node["title"], str) else ""
    reviewed = titles.get(str(node["node"]).removesuffix("-verify"))
    if node.get("is_verify") and title.startswith(VERIFY_PREFIX) and isinstance(reviewed, str):
        shown = title[len(VERIFY_PREFIX):]
        if shown and len(shown) < len(reviewed) and reviewed.startswith(shown):
            return title + "…"
    return title


def snapshot_records(run: pd.DataFrame) -> list[dict]:
    """One run's snapshot rows as ``{"round", "graph": {"nodes": [...]}}`` records, the form every graph
    drawing takes (node ids sorted naturally, so T1, T2, ... follow the run's own numbering)."""
    rows: dict = {}
    titles = dict(zip(run["node"], run["title"]))
    for n in run[["round", "node", "title", "status", "owner", "deps", "is_verify"]].to_dict("records"):
        rows.setdefault(n["round"], []).append(n)
    records = []
    for r in sorted(rows):
        nodes = [{"id": n["node"], "title": _verify_title(n, titles), "status": n["status"],
                  "agent": None if pd.isna(n["owner"]) else n["owner"], "deps": list(n["deps"]),
                  "is_verify": bool(n["is_verify"])}
                 for n in sorted(rows[r], key=lambda n: _node_key(n["node"]))]
        records.append({"round": int(r), "graph": {"nodes": nodes}})
    return records


def figure3c(snapshots: pd.DataFrame, trial_id: str | None = None, rounds=FIGURE3C_ROUNDS):
    """Figure 3C: the graph of one run at a few rounds on one fixed layout: status colours, owners under
    the nodes, nodes new since the previous panel ringed, and the key of node titles below; two-column
    width. ``trial_id`` defaults to the first run in ``snapshots``; rounds missing from the run are replaced
    by evenly spaced available rounds."""
    if snapshots.empty:
        raise DataError("figure3c: no snapshots (graph teams write snapshots.jsonl; the published "
                        "folder has example_run_snapshots.json)")
    trial_id = trial_id or snapshots["trial_id"].iloc[0]
    run = snapshots[snapshots["trial_id"] == trial_id]
    if run.empty:
        raise DataError(f"figure3c: no snapshots for trial {trial_id!r}")
    available = sorted(run["round"].unique())
    chosen = [r for r in rounds if r in available]
    if len(chosen) < min(len(rounds), len(available)):
        chosen = sorted({available[int(i)] for i in np.linspace(0, len(available) - 1,
                                                                  min(len(rounds), len(available)))})
    records = snapshot_records(run)
    short = {n: _short_id(n) for n in run["node"].unique()}
    fig = graph_drawing.panels(records, [int(r) for r in chosen], max_width=style.TWO_COLUMN, short=short,
                               title=lambda snap, r, added: f"Round {r}: {len(snap['graph']['nodes'])} nodes (+{added})")
    return style.finish(fig)


# --- Figure 4 --------------------------------------------------------------------------------------

def figure4(trials: pd.DataFrame):
    """Figure 4A-F: overwrites, concurrent writes, wasted characters, messages (count and characters) and
    the idle fraction per team: bar = mean, whisker = SEM, dots = trials (jitter seeded per bar); two-column
    width. Sample: every trial having the metric; the idle fraction excludes MetaGPT (its idle fraction is a
    0/0 artefact)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    schema.require_columns(trials, ("team",))
    t = stats.usable(trials)
    with style.theme():
        fig, axes = style.figure("two", 4.6, 2, 3)
        shown: list[str] = []
        for ax, (letter, col, label) in zip(axes.flat, FIGURE4_PANELS):
            d = t[["team", col]].dropna() if col in t.columns else pd.DataFrame(columns=["team", col])
            if col == "idle_fraction":
                d = d[d["team"] != "metagpt"]
            teams = schema.ordered(d["team"], schema.TEAM_ORDER)
            samples = [pd.to_numeric(d.loc[d["team"] == team, col]).to_numpy(dtype=float) for team in teams]
            if teams:  # one bar container and one scatter per panel: the same picture as one per team, drawn faster
                ax.bar(range(len(teams)), [v.mean() for v in samples],
                       yerr=[stats.sem(v) if len(v) > 1 else 0 for v in samples], capsize=2,
                       color=[style.team_color(t) for t in teams], alpha=0.75, edgecolor="black", lw=0.5,
                       error_kw={"lw": 0.8})
                jitter = [np.random.default_rng(i).uniform(-style.JITTER_HALF_WIDTH, style.JITTER_HALF_WIDTH, len(v))
                          for i, v in enumerate(samples)]  # seeded per bar
                ax.scatter(np.concatenate([i + j for i, j in enumerate(jitter)]), np.concatenate(samples), s=3,
                           color="black", alpha=0.4, zorder=3, lw=0)
            shown += [t for t in teams if t not in shown]
            ax.set_xticks(range(len(teams)), [schema.TEAM_LABELS.get(x, x) for x in teams], rotation=30,
                          ha="right")
            ax.set_ylabel(label)
            ax.grid(axis="x", visible=False)
            _thousands(ax)
            style.panel_label(ax, letter)
            if not teams:
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        handles = [Patch(facecolor=style.team_color(x), edgecolor="black", lw=0.5, alpha=0.75,
                         label=schema.TEAM_LABELS.get(x, x)) for x in shown]
        handles += [Line2D([], [], color="black", lw=0.8, marker="_", ms=6, label="bar: mean, whisker: SEM"),
                    Line2D([], [], ls="", marker="o", ms=2.5, color="black", alpha=0.5, label="one trial")]
        style.legend_below(fig, handles, ncol=len(handles))
    return style.finish(fig)


# --- the sensitivity study ---------------------------------------------------------------------------

SENSITIVITY_PANELS = (("token_ratio_vs_leader_worker", "tokens vs Leader-Worker", 1.0),
                      ("token_ratio_vs_decentralized", "tokens vs decentralized", 1.0),
                      ("wall_ratio_vs_leader_worker", "wall clock vs Leader-Worker", 1.0),
                      ("overwrite_ratio_vs_decentralized", "overwrites vs decentralized", 1.0),
                      ("accuracy_gap_vs_static", "accuracy gap to static", 0.0),
                      ("accuracy_gap_vs_pipeline", "accuracy gap to the pipeline", 0.0))
"""(summary column, panel title, the value at which LATTE and the other team are level)."""


def sensitivity_figure(summary: pd.DataFrame):
    """LATTE's ratios and gaps per setting of the sensitivity study, one panel per comparison (a matplotlib
    Figure). ``summary``: ``ll.analysis.sensitivity(rows)``, one row per setting."""
    from latte_lab.analysis.sensitivity_results import BASELINE

    missing = [col for col, _, _ in SENSITIVITY_PANELS if col not in summary.columns] + [
        c for c in ("parameter", "value") if c not in summary.columns]
    if missing:
        raise DataError(f"sensitivity_figure: the summary lacks {missing}; pass ll.analysis.sensitivity(rows)")
    plt = style.pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(13, 3.2 + 0.28 * len(summary)), sharey=False)
    labels = [p if p == BASELINE or v is None or v != v else f"{p}={v:g}"  # a reading's name holds its value
              for p, v in zip(summary["parameter"], summary["value"])]
    for axis, (col, title, even) in zip(axes.flat, SENSITIVITY_PANELS):
        axis.barh(labels, summary[col], color=["#444" if lab == BASELINE else "#4C72B0" for lab in labels])
        axis.axvline(even, color="#c44", lw=1)
        axis.set_title(f"LATTE {title}", fontsize=10)
        axis.invert_yaxis()
        axis.tick_params(labelsize=8)
    fig.tight_layout()
    return style.finish(fig)
