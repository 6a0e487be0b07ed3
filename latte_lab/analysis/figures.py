"""Figures 2-4 of the paper from a ``TrialData`` (published or ours).

Each ``figure*`` function returns a matplotlib Figure; the numbers behind Figure 2 come from
DataFrame functions (``expected_cost_per_success``, ``pareto_points``) so they can be tested and
tabulated. matplotlib and seaborn are imported inside the functions (``import latte_lab.analysis``
stays light). Constructions follow the released notebook (reference §10).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from latte_lab import dag, schema
from latte_lab.analysis import stats, style
from latte_lab.errors import DataError

FIGURE3A_OPERATORS = ("discover_task", "assign_task", "claim_task", "claim_blocked", "release_task",
                      "close_task", "create_verify_node")
"""Operators shown in Figure 3A, in the paper's order."""

FIGURE3B_TEAMS = ("latte", "static")  # dynamic vs static graph size
FIGURE3C_ROUNDS = (0, 2, 5, 11)  # the published example's panels
LAYOUT_X_STEP = 2.8  # horizontal distance between dependency depths (Figure 3C)
LAYOUT_Y_STEP = 2.2  # vertical distance between nodes of one depth
TITLE_CHARS = 13  # node titles are cut here in Figure 3C

FIGURE4_PANELS = (
    ("A", "cross_agent_overwrites", "Overwrites per trial"),
    ("B", "n_concurrent_collisions", "Concurrent writes per trial"),
    ("C", "wasted_chars", "Wasted characters per trial"),
    ("D", "total_messages", "Inter-agent messages per trial"),
    ("D", "total_message_chars", "Message characters per trial"),
    ("E", "idle_fraction", "Inactivity (idle fraction)"),
)
"""(panel letter, trial column, y label); the paper's 2 x 3 grid, D split into count and volume."""


# --- Figure 2 --------------------------------------------------------------------------------------

def expected_cost_per_success(trials: pd.DataFrame) -> pd.DataFrame:
    """Figure 2A numbers: per model, team and cost metric, the mean cost of successful trials with a
    positive cost divided by the pass rate (fraction of the model x team trials with public success,
    tasks pooled); the error is the SEM of those costs divided by the pass rate."""
    schema.require_columns(trials, ("model", "team", "success", "total_tokens", "wall_clock_seconds"))
    t = stats.usable(trials)
    rows = []
    for (model, team), g in t.groupby(["model", "team"]):
        ok = g["success"].fillna(False).astype(bool)
        rate = float(ok.mean()) if len(g) else 0.0
        for metric, col in stats.COST_FIELDS.items():
            vals = pd.to_numeric(g.loc[ok, col], errors="coerce")
            vals = vals[vals > 0]
            value = err = math.nan
            if rate > 0 and len(vals):
                value = float(vals.mean()) / rate
                err = stats.sem(vals) / rate
            rows.append({"model": model, "team": team, "metric": metric, "pass_rate": rate,
                         "n_success": len(vals), "expected_cost": value, "err": err})
    return pd.DataFrame(rows, columns=["model", "team", "metric", "pass_rate", "n_success",
                                       "expected_cost", "err"])


def pareto_points(trials: pd.DataFrame) -> pd.DataFrame:
    """Figure 2B numbers: per team the normalised token cost (successful trials) and accuracy (all
    trials) with SEMs, and whether the team is on the Pareto frontier (no other team is at least as
    cheap and as accurate and strictly better in one)."""
    s = stats.stats_5_1(trials)
    cost = s[s["metric"] == "tokens"].set_index("team")
    acc = s[s["metric"] == "accuracy"].set_index("team")
    teams = [t for t in schema.ordered(cost.index, schema.TEAM_ORDER) if t in acc.index]
    pts = pd.DataFrame({"team": teams, "cost": [float(cost.loc[t, "mean"]) for t in teams],
                        "cost_sem": [cost.loc[t, "sem"] for t in teams],
                        "accuracy": [acc.loc[t, "mean"] for t in teams],
                        "accuracy_sem": [acc.loc[t, "sem"] for t in teams]},
                       columns=["team", "cost", "cost_sem", "accuracy", "accuracy_sem"])
    on = []
    for _, p in pts.iterrows():
        dominated = ((pts["cost"] <= p["cost"]) & (pts["accuracy"] >= p["accuracy"])
                     & ((pts["cost"] < p["cost"]) | (pts["accuracy"] > p["accuracy"]))).any()
        on.append(not dominated)
    pts["on_frontier"] = on
    return pts


def figure2a(trials: pd.DataFrame):
    """Figure 2A: expected cost per success (tokens; wall clock seconds), one column per model."""
    plt = style.pyplot()
    style.apply_theme()
    data = expected_cost_per_success(trials)
    models = sorted(data["model"].unique())
    if not models:
        raise DataError("figure2a: no trials to plot")
    fig, axes = plt.subplots(2, len(models), figsize=(4.2 * len(models), 6.5), squeeze=False)
    for j, model in enumerate(models):
        for i, (metric, label) in enumerate((("tokens", "Expected tokens per success"),
                                             ("wall", "Expected wall clock per success (s)"))):
            ax = axes[i][j]
            d = data[(data["model"] == model) & (data["metric"] == metric)].dropna(subset=["expected_cost"])
            teams = schema.ordered(d["team"], schema.TEAM_ORDER)
            d = d.set_index("team").loc[teams] if teams else d
            x = np.arange(len(teams))
            ax.bar(x, d["expected_cost"] if teams else [], yerr=d["err"] if teams else None, capsize=3,
                   color=[style.team_color(t) for t in teams])
            ax.set_xticks(x, [schema.TEAM_LABELS.get(t, t) for t in teams], rotation=30, ha="right")
            ax.set_ylabel(label)
            if i == 0:
                ax.set_title(model)
    fig.suptitle("Figure 2A: expected cost per success")
    fig.tight_layout()
    return fig


def figure2b(trials: pd.DataFrame):
    """Figure 2B: accuracy vs normalised token cost per team, Pareto frontier dashed."""
    plt = style.pyplot()
    style.apply_theme()
    pts = pareto_points(trials)
    if pts.empty:
        raise DataError("figure2b: no team has both successful trials with a cost and an accuracy")
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    for _, p in pts.iterrows():
        ax.errorbar(p["cost"], p["accuracy"] * 100, xerr=p["cost_sem"], yerr=p["accuracy_sem"] * 100,
                    fmt="o", ms=8, capsize=3, color=style.team_color(p["team"]),
                    mec="black" if p["on_frontier"] else style.team_color(p["team"]),
                    label=schema.TEAM_LABELS.get(p["team"], p["team"]))
    front = pts[pts["on_frontier"]].sort_values("cost")
    if len(front) > 1:
        ax.plot(front["cost"], front["accuracy"] * 100, "k--", lw=1, label="Pareto frontier")
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.set_xlabel("Normalised token cost (1 = task mean of successful trials)")
    ax.set_ylabel("Accuracy (%)")
    ax.set_title("Figure 2B: accuracy vs token cost")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


# --- Figure 3 --------------------------------------------------------------------------------------

def figure3a(operator_usage: pd.DataFrame, team: str = "latte"):
    """Figure 3A: % of a team's runs using each operator at least once."""
    plt = style.pyplot()
    style.apply_theme()
    d = operator_usage[operator_usage["team"] == team].set_index("operator")
    ops = [op for op in FIGURE3A_OPERATORS if op in d.index]
    if not ops:
        raise DataError(f"figure3a: no operator usage for team {team!r}; teams present: "
                        f"{sorted(operator_usage['team'].unique())}")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    vals = d.loc[ops, "fraction"].astype(float) * 100
    ax.bar(range(len(ops)), vals, color=style.team_color(team))
    for i, v in enumerate(vals):
        ax.text(i, v + 1.5, f"{v:.0f}%", ha="center", fontsize=8)
    ax.set_xticks(range(len(ops)), [o.replace("_task", "").replace("create_verify_node", "verify")
                                    for o in ops], rotation=30, ha="right")
    ax.set_ylim(0, 115)
    ax.set_ylabel("% of runs using operator")
    ax.set_title(f"Figure 3A: operator usage ({schema.TEAM_LABELS.get(team, team)})")
    fig.tight_layout()
    return fig


def figure3b(trajectories: pd.DataFrame, teams=FIGURE3B_TEAMS):
    """Figure 3B: mean graph size per round with a ±SEM band, dynamic (LATTE) vs static."""
    plt = style.pyplot()
    style.apply_theme()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    drawn = 0
    for team in teams:
        d = trajectories[trajectories["team"] == team].sort_values("round")
        if d.empty:
            continue
        drawn += 1
        c = style.team_color(team)
        ax.plot(d["round"], d["mean"], marker="o", ms=4, color=c, label=schema.TEAM_LABELS.get(team, team))
        sem = d["sem"].fillna(0).astype(float)
        ax.fill_between(d["round"].astype(float), d["mean"] - sem, d["mean"] + sem, color=c, alpha=0.2)
    if not drawn:
        raise DataError(f"figure3b: no graph-size trajectories for teams {list(teams)}")
    ax.set_xlabel("Round")
    ax.set_ylabel("Nodes in graph (mean ± SEM)")
    ax.set_title("Figure 3B: graph size per round")
    ax.legend()
    fig.tight_layout()
    return fig


def _node_key(node: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", node)]


def graph_layout(snapshots: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Fixed positions for every node of a run: x = dependency depth x 2.8, nodes of one depth sorted by id
    and spaced 2.2 apart vertically. Each node keeps the dependencies of the last snapshot holding it, so
    nodes that vanished before the final snapshot are placed too."""
    deps: dict[str, list[str]] = {}
    for r in sorted(snapshots["round"].unique(), reverse=True):
        snap = snapshots[snapshots["round"] == r]
        for n, d in zip(snap["node"], snap["deps"]):
            deps.setdefault(n, list(d))
    return dag.layered_positions(deps, key=_node_key, x_step=LAYOUT_X_STEP, y_step=LAYOUT_Y_STEP)


def _node_label(node: str, title: str, is_verify: bool) -> str:
    digits = re.findall(r"\d+[a-z]?", node)
    short = f"T{digits[0]}" if digits else node[:6]
    if is_verify:
        short += "-V"
    title = str(title or "")
    return f"{short}\n{title[:TITLE_CHARS]}…" if len(title) > TITLE_CHARS else f"{short}\n{title}"


def figure3c(snapshots: pd.DataFrame, trial_id: str | None = None, rounds=FIGURE3C_ROUNDS):
    """Figure 3C: the graph of one run at a few rounds, fixed layout, status colours, new nodes
    outlined in orange. ``trial_id`` defaults to the first run in ``snapshots``; rounds missing from
    the run are replaced by evenly spaced available rounds."""
    plt = style.pyplot()
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
    pos = graph_layout(run)
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    fig, axes = plt.subplots(1, len(chosen), figsize=(4.2 * len(chosen), 4.2), squeeze=False)
    previous: set[str] = set()
    for ax, r in zip(axes[0], chosen):
        snap = run[run["round"] == r]
        present = set(snap["node"])
        for _, n in snap.iterrows():
            x0, y0 = pos[n["node"]]
            for d in n["deps"]:
                if d in pos and d in present:
                    ax.annotate("", xy=(x0, y0), xytext=pos[d],
                                arrowprops={"arrowstyle": "->", "color": "#616161", "lw": 0.8,
                                            "shrinkA": 14, "shrinkB": 14})
        for _, n in snap.iterrows():
            x0, y0 = pos[n["node"]]
            new = bool(previous) and n["node"] not in previous
            ax.scatter([x0], [y0], s=900, zorder=3, color=style.STATUS_COLORS.get(n["status"], "#FFFFFF"),
                       edgecolors=style.NEW_NODE_EDGE if new else "#424242", linewidths=3 if new else 0.8)
            ax.text(x0, y0, _node_label(n["node"], n["title"], n["is_verify"]), ha="center", va="center",
                    fontsize=5.5, zorder=4)
        added = len(present - previous) if previous else len(present)
        ax.set_title(f"Round {r}: {len(present)} nodes (+{added})", fontsize=9)
        ax.set_xlim(min(xs) - 1.6, max(xs) + 1.6)
        ax.set_ylim(min(ys) - 1.6, max(ys) + 1.6)
        ax.axis("off")
        previous = present
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=s, ms=8)
               for s, c in style.STATUS_COLORS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7, frameon=False)
    fig.suptitle(f"Figure 3C: graph evolution ({trial_id})", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


# --- Figure 4 --------------------------------------------------------------------------------------

def figure4(trials: pd.DataFrame):
    """Figure 4A-E: overwrites, concurrent writes, wasted characters, messages (count and characters)
    and inactivity per team: bar = mean, error = SEM, points jittered (seeded per bar). Sample: every
    trial having the metric; inactivity excludes MetaGPT (its idle fraction is a 0/0 artefact)."""
    plt = style.pyplot()
    style.apply_theme()
    schema.require_columns(trials, ("team",))
    t = stats.usable(trials)
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    for ax, (letter, col, label) in zip(axes.flat, FIGURE4_PANELS):
        d = t[["team", col]].dropna() if col in t.columns else pd.DataFrame(columns=["team", col])
        if col == "idle_fraction":
            d = d[d["team"] != "metagpt"]
        teams = schema.ordered(d["team"], schema.TEAM_ORDER)
        for i, team in enumerate(teams):
            vals = pd.to_numeric(d.loc[d["team"] == team, col]).to_numpy(dtype=float)
            c = style.team_color(team)
            ax.bar(i, vals.mean(), yerr=stats.sem(vals) if len(vals) > 1 else 0, capsize=4, color=c,
                   alpha=0.75, edgecolor="black", lw=0.6)
            rng = np.random.default_rng(i)
            jitter = rng.uniform(-style.JITTER_HALF_WIDTH, style.JITTER_HALF_WIDTH, len(vals))
            ax.scatter(i + jitter, vals, s=8, color="black", alpha=0.45, zorder=3)
        ax.set_xticks(range(len(teams)), [schema.TEAM_LABELS.get(x, x) for x in teams], rotation=25, ha="right")
        ax.set_ylabel(label)
        ax.set_title(f"{letter}", loc="left", fontweight="bold")
        if not teams:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle("Figure 4: coordination metrics per trial (mean ± SEM)")
    fig.tight_layout()
    return fig
