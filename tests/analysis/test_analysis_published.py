"""Reproduction of the paper's numbers from the authors' published data.

The data are the copy bundled with latte_lab (or $LATTE_PUBLISHED_DIR when set). Expected numbers come
from the bundled paper_reference.csv (as printed in the paper) and, for what the paper does not print or
prints wrongly, from reference §11 (written below).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

import latte_lab as ll
from latte_lab.analysis import report, schema, stats
from latte_lab.viz import figures, graph_drawing


@pytest.fixture(scope="module")
def pub():
    return ll.load_published()


@pytest.fixture(scope="module")
def trials(pub):
    return pub.trials


@pytest.fixture(scope="module")
def ref():
    return report.paper_reference()


@pytest.fixture(scope="module")
def t2(trials):
    return stats.table2(trials)


UNITS = {"accuracy": ("acc", 100.0), "tokens": ("tokens", 1e-3), "wall": ("wall", 1 / 60)}


def _cell(t2, metric, task, team, model="all"):
    key, scale = UNITS[metric]
    row = t2[(t2["model"] == model) & (t2["task"] == task) & (t2["team"] == team)].iloc[0]
    return row[f"{key}_mean"] * scale, row[f"{key}_sem"] * scale


# --- loader ----------------------------------------------------------------------------------------

# trials per task x team and accuracy n (reference §11 trial-count table)
COUNTS = {
    ("eda", "latte"): (20, 19), ("eda", "leader_worker"): (20, 19), ("eda", "decentralized"): (20, 19),
    ("eda", "static"): (20, 18), ("eda", "metagpt"): (19, 9),
    ("debug", "latte"): (20, 20), ("debug", "leader_worker"): (20, 20), ("debug", "decentralized"): (20, 20),
    ("debug", "static"): (16, 16), ("debug", "metagpt"): (19, 19),
    ("textproc", "latte"): (19, 18), ("textproc", "leader_worker"): (20, 18),
    ("textproc", "decentralized"): (20, 19), ("textproc", "static"): (20, 19), ("textproc", "metagpt"): (12, 12),
}


def test_trial_counts_match_reference(trials):
    got = trials.groupby(["task", "team"]).agg(n=("trial_id", "size"), n_acc=("accuracy", "count"))
    assert {k: (int(v.n), int(v.n_acc)) for k, v in got.iterrows()} == COUNTS


def test_schema_names_models_and_joins(trials):
    assert list(trials.columns[: len(schema.TRIAL_COLUMNS)]) == list(schema.TRIAL_COLUMNS)
    assert set(trials["team"]) == {"latte", "leader_worker", "decentralized", "static", "metagpt"}
    assert set(trials["model"]) == {"anthropic/claude-sonnet-4-6", "openai/gpt-5.2"}
    assert set(trials["source"]) == {"published"}
    # the debug MetaGPT cell is 9 results rows plus the 10 runs of the extra CSVs
    mg = trials[(trials["task"] == "debug") & (trials["team"] == "metagpt")]
    assert mg["run_dir"].str.startswith("debug_sprint_").sum() == 10
    # the one run that logged 0 tokens has tokens and wall clock missing
    assert trials["total_tokens"].isna().sum() == 1 and trials["wall_clock_seconds"].isna().sum() == 1
    # every non-MetaGPT row but that one has event metrics (234 runs in event_metrics.json)
    assert trials["cross_agent_overwrites"].notna().sum() == 234
    # accuracy rule: debug uses public success, eda/textproc the hidden rate
    debug = trials[trials["task"] == "debug"]
    assert (debug["accuracy"] == debug["success"].astype(float)).all()
    eda = trials[(trials["task"] == "eda") & trials["hidden_pass_rate"].notna()]
    assert (eda["accuracy"] == eda["hidden_pass_rate"]).all()


def test_published_side_tables(pub):
    ou = pub.operator_usage.set_index(["team", "operator"])["fraction"]
    assert ou[("latte", "release_task")] == pytest.approx(29 / 69)  # reference §11.4: 42.0 % of 69
    traj = pub.trajectories[pub.trajectories["team"] == "latte"]
    assert traj["round"].tolist() == list(range(16))
    assert traj["mean"].iloc[0] == pytest.approx(3.75, abs=0.01)  # reference §11.4 seed size
    assert pub.snapshots["round"].nunique() == 12


# --- Table 2 ---------------------------------------------------------------------------------------

def test_table2_54_cells_reproduce_exactly(t2, ref):
    rows = ref[ref["section"] == "Table 2"]
    assert len(rows) == 60
    exact = 0
    for _, r in rows.iterrows():
        mean, sem = _cell(t2, r["metric"], r["task"], r["team"])
        dec = int(r["decimals"])
        same = (float(f"{mean:.{dec}f}") == r["value"]) and (float(f"{sem:.{dec}f}") == r["sem"])
        assert same == (r["status"] == "exact"), (r["id"], mean, sem)
        exact += same
    assert exact == 54


def test_table2_deviations_are_explained(t2, ref, trials):
    dev = ref[(ref["section"] == "Table 2") & (ref["status"] == "deviation")].set_index("id")
    assert len(dev) == 6
    ok = stats.table2(trials[trials["success"]])
    for rid, r in dev.iterrows():
        metric, task, team = r["metric"], r["task"], r["team"]
        mean, sem = _cell(t2, metric, task, team)
        dec = int(r["decimals"])
        if r["explained_by"] == "successful_only":
            m2, s2 = _cell(ok, metric, task, team)
            assert (round(m2), round(s2)) == (r["value"], r["sem"]), rid
        elif r["explained_by"] == "copy_of_debug":
            debug = ref[ref["id"] == f"table2/{metric}/debug/{team}"].iloc[0]
            assert (r["value"], r["sem"]) == (debug["value"], debug["sem"]), rid
        elif r["explained_by"] == "typo":
            assert float(f"{mean:.{dec}f}") == r["value"] and float(f"{sem:.{dec}f}") != r["sem"]
        else:
            pytest.fail(f"unexplained deviation {rid}")


def test_table2_csv_form_and_pooling(t2, trials):
    assert list(t2.columns) == ["model", "task", "team", "n_acc", "acc_mean", "acc_sem", "n_tokens",
                                "tokens_mean", "tokens_sem", "n_wall", "wall_mean", "wall_sem"]
    # 3 models (2 + pooled) x 4 tasks (3 + aggregate) x 5 teams
    assert len(t2) == 60
    # the aggregate pools per-trial values (not a mean of task means)
    agg = t2[(t2["model"] == "all") & (t2["task"] == "all") & (t2["team"] == "latte")].iloc[0]
    latte = trials[trials["team"] == "latte"]
    assert agg["tokens_mean"] == pytest.approx(latte["total_tokens"].mean())
    assert agg["n_acc"] == latte["accuracy"].notna().sum()


# --- §5.1 ------------------------------------------------------------------------------------------

def _agrees(value, printed, decimals, rule):
    if rule == "less_than":
        return value < printed
    rounded = float(f"{value:.{decimals}f}")
    truncated = math.floor(value * 10**decimals + 1e-9) / 10**decimals
    return printed in (rounded, truncated)


def test_section51_means_and_p_values(trials, ref):
    s = stats.stats_5_1(trials).set_index(["metric", "team"])
    rows = ref[ref["section"] == "§5.1"]
    assert len(rows) == 27  # 15 means + 12 p-values
    for _, r in rows.iterrows():
        got = s.loc[(r["metric"], r["team"]), "mean" if r["quantity"] == "mean" else "p"]
        value = got * r["scale"]
        assert _agrees(value, r["value"], int(r["decimals"]), r["rule"]), (r["id"], value, r["paper_text"])


def test_section51_sample_sizes_and_p_range(trials):
    s = stats.stats_5_1(trials).set_index(["metric", "team"])
    assert s.loc[("tokens", "latte"), "n"] == 58  # successful LATTE runs with tokens (reference §11.2)
    acc_n = [s.loc[("accuracy", t), "n"] for t in ("latte", "static", "metagpt", "leader_worker", "decentralized")]
    assert acc_n == [57, 53, 40, 57, 58]
    tok_p = s.xs("tokens", level="metric")["p"].dropna()
    assert tok_p.max() == pytest.approx(8.3e-4, rel=0.01) and tok_p.min() < 3e-7
    assert s.loc[("wall", "decentralized"), "p"] == pytest.approx(0.348, abs=5e-4)
    assert pd.isna(s.loc[("tokens", "latte"), "u"])


# --- §5.3 ------------------------------------------------------------------------------------------

def test_section53_printed_values(trials, ref):
    s = stats.section53(trials).set_index(["metric", "team"])
    rows = ref[(ref["section"] == "§5.3") & (ref["status"] == "exact")]
    assert len(rows) == 24  # 13 means + 11 p-values
    for _, r in rows.iterrows():
        got = s.loc[(r["metric"], r["team"]), "mean" if r["quantity"] == "mean" else "p"]
        assert _agrees(got * r["scale"], r["value"], int(r["decimals"]), r["rule"]), (r["id"], got)


def test_section53_reference_values_and_known_errors(trials, ref):
    """Reference §11.3: computed values, the sample, and how the paper's wrong numbers arise."""
    s = stats.section53(trials).set_index(["metric", "team"])
    mean = s["mean"]
    assert [int(s.loc[("cross_agent_overwrites", t), "n"]) for t in
            ("latte", "leader_worker", "decentralized", "static")] == [58, 60, 60, 56]
    assert [round(mean[("wasted_chars", t)]) for t in ("latte", "leader_worker", "decentralized")] == \
        [5237, 50673, 83299]
    assert round(mean[("total_message_chars", "latte")]) == 24484
    assert mean[("total_messages", "leader_worker")] == pytest.approx(31.47, abs=0.005)
    assert [round(100 * mean[("active_fraction_released", t)], 1) for t in
            ("latte", "leader_worker", "decentralized", "static")] == [48.8, 80.0, 100.0, 45.6]
    # static (not reported in the text): overwrites 2.2, collisions 0, wasted 0, messages 27.2
    assert [round(mean[(m, "static")], 1) for m in ("cross_agent_overwrites", "n_concurrent_collisions",
                                                   "wasted_chars", "total_messages")] == [2.2, 0.0, 0.0, 27.2]
    dev = ref[(ref["section"] == "§5.3") & (ref["status"] == "deviation")].set_index("id")
    for team in ("leader_worker", "decentralized"):
        printed = dev.loc[f"5.3/wasted_chars/{team}/mean", "value"]
        assert printed != round(mean[("wasted_chars", team)])
        assert round(mean[("wasted_chars", team)] - mean[("wasted_chars", "latte")]) == printed
    printed = int(dev.loc["5.3/total_message_chars/latte/mean", "value"])
    ours = round(mean[("total_message_chars", "latte")])
    assert printed != ours and sorted(str(printed)) == sorted(str(ours))
    # node completion times cannot be computed without events
    assert "node_completion_mean_s" not in s.index.get_level_values("metric")


# --- comparison report -----------------------------------------------------------------------------

def test_compare_with_paper_flags_known_deviations_only(pub, ref):
    cmp = report.compare_with_paper(pub, ref)
    assert len(cmp) == len(ref)
    assert (cmp["agrees"] == (cmp["status"] == "exact")).all()
    assert not cmp["note"].str.contains("UNEXPECTED").any()
    known = cmp[cmp["status"] == "deviation"]
    assert known["note"].str.startswith("known deviation").all() and len(known) == 9
    # a mean ± SEM cell shows both, as the paper prints them (both are compared): an agreeing one reads the same
    cells = cmp[cmp["quantity"] == "mean_sem"]
    assert len(cells) and cells["ours"].str.contains(" ± ").all()
    agreeing = cells[cells["agrees"]]
    assert len(agreeing) and (agreeing["ours"] == agreeing["paper"]).all()
    assert (~cells["agrees"]).any()  # the published data have such a cell (a misprinted SEM, reference §11.1)
    for _, row in cells[~cells["agrees"]].iterrows():  # e.g. a misprinted SEM: the mean agrees, the cell shows why not
        assert row["ours"] != row["paper"] and row["ours"].count(" ± ") == 1, row.to_dict()


def test_the_report_accounts_for_every_printed_number(pub, ref):
    """report.md's sentence: those that agree, differ for known reasons, differ otherwise and cannot be
    recomputed add up to every number the paper prints, and each that does not agree is in a table."""
    import re

    cmp = report.compare_with_paper(pub, ref)
    text, sections = report.comparison_summary(cmp)
    agree, total, known, other, unknown = map(int, re.search(
        r"^(\d+) of (\d+) printed numbers agree .* (\d+) differ for known reasons .*; (\d+) differ otherwise; "
        r"(\d+) cannot be recomputed from the published data", text).groups())
    assert total == len(cmp) and agree + known + other + unknown == total and unknown == cmp["agrees"].isna().sum()
    assert unknown > 0  # the node completion times: the published data have no events
    assert sum(len(rows) for _, rows in sections) == total - agree


# --- beyond the paper ------------------------------------------------------------------------------

def test_robust_statistics(trials):
    r = stats.robust_statistics(trials)
    base = r[r["team"] != "latte"]
    assert (base["p_holm"] >= base["p"] - 1e-15).all()
    assert ((r["ci_low"] <= r["mean"]) & (r["mean"] <= r["ci_high"])).all()
    tok = r[(r["metric"] == "tokens") & (r["team"] != "latte")]
    assert (tok["rank_biserial"] > 0).all()  # LATTE cheaper than every baseline
    again = stats.robust_statistics(trials)
    pd.testing.assert_frame_equal(r, again)  # seeded bootstrap


def test_cost_regression(trials):
    coefs, anova = stats.cost_regression(trials, "tokens")
    terms = set(coefs["term"])
    assert {"Intercept", "team[T.static]", "team[T.metagpt]", "task[T.eda]", "model[T.openai/gpt-5.2]"} <= terms
    c = coefs.set_index("term")
    assert c.loc["team[T.decentralized]", "coef"] > 0 and c.loc["team[T.decentralized]", "p"] < 0.01
    assert coefs.attrs["n"] == 231  # successful runs with tokens
    assert set(anova["term"]) == {"team", "task", "model", "Residual"}


# --- figures ---------------------------------------------------------------------------------------

def test_figure_numbers(trials):
    pts = stats.pareto_points(trials).set_index("team")
    assert pts["on_frontier"].to_dict() == {"latte": True, "leader_worker": False, "decentralized": False,
                                            "static": False, "metagpt": False}
    e = stats.expected_cost_per_success(trials)
    assert (e["expected_cost"] > 0).all() and set(e["metric"]) == {"tokens", "wall"}
    one = e[(e["model"] == "openai/gpt-5.2") & (e["team"] == "latte") & (e["metric"] == "tokens")].iloc[0]
    g = trials[(trials["model"] == "openai/gpt-5.2") & (trials["team"] == "latte")]
    rate = g["success"].mean()
    assert one["expected_cost"] == pytest.approx(g.loc[g["success"], "total_tokens"].mean() / rate)


def test_figures_render(pub):
    import matplotlib.pyplot as plt

    f2a = figures.figure2a(pub.trials)
    assert len(f2a.axes) == 4
    assert len(figures.figure2b(pub.trials).axes) == 1
    assert len(figures.figure3a(pub.operator_usage).axes[0].patches) == 7
    assert len(figures.figure3b(pub.trajectories).axes[0].lines) == 2
    f3c = figures.figure3c(pub.snapshots)
    titles = [a.get_title(loc="left") for a in f3c.axes[:4]]
    assert [t.split(":")[0] for t in titles] == ["Round 0", "Round 2", "Round 5", "Round 11"]
    assert titles[0].startswith("Round 0: 3 nodes")  # the Lead plans 3 tasks
    f4 = figures.figure4(pub.trials)
    assert len(f4.axes) == 6
    assert len(f4.axes[5].patches) == 4  # inactivity excludes MetaGPT
    plt.close("all")


def test_graph_layout_is_fixed_and_uses_final_depths(pub):
    pos = figures.graph_layout(pub.snapshots)
    x = {n: p[0] for n, p in pos.items()}
    assert x["task-1"] < x["task-2"] < x["task-2-verify"] < x["task-3"]  # task-1 > task-2 > verify > task-3
    assert pos == figures.graph_layout(pub.snapshots)
    assert pos == graph_drawing.plan(figures.snapshot_records(pub.snapshots)).pos  # the one layout (Figure 3C's)
