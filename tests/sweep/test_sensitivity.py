"""The sensitivity study: its design, the counts it reads from events, its summary, the shipped results."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import latte_lab as ll
from latte_lab.analysis import sensitivity_results as S
from latte_lab.errors import ConfigError, DataError
from latte_lab.sweep import sensitivity as study


def test_analysis_summarises_and_the_sweep_runs():
    """ll.analysis.sensitivity is a plain function over the study's rows; running a grid is the sweep's."""
    assert ll.analysis.sensitivity is S.sensitivity and ll.analysis.load_sensitivity is S.load_sensitivity
    pd.testing.assert_frame_equal(ll.analysis.sensitivity(_rows()), S.summarise(_rows()))
    with pytest.raises(DataError, match=r"ll\.sweep\.sensitivity\.run\(grid, seeds\)"):
        ll.analysis.sensitivity({"p_straggler": [0.0]})
    assert study.DEFAULT_GRID is S.DEFAULT_GRID and callable(study.run) and callable(study.main)
    with pytest.raises(AttributeError, match="latte_lab.sweep.sensitivity"):
        ll.analysis.sensitivity_configs  # noqa: B018


def test_the_study_runs_from_the_command_line(tmp_path):
    """``python -m latte_lab.sweep.sensitivity`` (make sensitivity): --collect over a folder with nothing finished
    says so in one line."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "latte_lab.sweep.sensitivity", "--collect", "--seeds", "1",
                           "--out", str(tmp_path / "none"), "--write", str(tmp_path / "rows.csv")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.strip().startswith("error: no finished trials of the study")
    assert not (tmp_path / "rows.csv").exists()


def test_one_parameter_at_a_time_around_the_base_profile():
    configs = study.sensitivity_configs({"p_straggler": [0.0, 0.3], "prefill_tokens_per_s": [1000]}, seeds=2,
                                    tasks=["debug", "eda"], teams=["latte", "static"], readings={})
    specs = list(dict.fromkeys(c["model"] for c in configs))
    assert specs == ["simulated/default", "simulated/default?p_straggler=0.0", "simulated/default?p_straggler=0.3",
                     "simulated/default?prefill_tokens_per_s=1000"]
    assert len(configs) == 4 * 2 * 2 * 2 and [c["seed"] for c in configs[:16]] == [0] * 16  # seed-major
    assert [S.setting_of(s) for s in specs] == [("baseline", None), ("p_straggler", 0.0), ("p_straggler", 0.3),
                                                ("prefill_tokens_per_s", 1000.0)]
    fewer = study.sensitivity_configs({"p_straggler": [0.0]}, seeds=3, grid_seeds=1, tasks=["debug"], teams=["latte"],
                                      readings={})
    assert [(c["model"], c["seed"]) for c in fewer] == [("simulated/default", 0), ("simulated/default?p_straggler=0.0", 0),
                                                        ("simulated/default", 1), ("simulated/default", 2)]
    narrow = study.sensitivity_configs({"p_straggler": [0.0]}, seeds=1, grid_tasks=["eda"], tasks=["debug", "eda"],
                                   teams=["latte"], readings={})
    assert [(c["model"], c["task"]) for c in narrow] == [("simulated/default", "debug"), ("simulated/default", "eda"),
                                                         ("simulated/default?p_straggler=0.0", "eda")]
    with pytest.raises(ConfigError, match="known: .*p_correct_patch"):
        study.sensitivity_configs({"patience": [1]}, seeds=1)
    with pytest.raises(ConfigError, match="probability"):
        study.sensitivity_configs({"p_straggler": [2.0]}, seeds=1)
    # every default parameter is a behaviour parameter of the profile, none names a team or task
    from latte_lab.models.sim import Profile

    assert all(hasattr(Profile(), p) for p in S.DEFAULT_GRID)


def _rows(latte_tokens=100.0, lw_tokens=400.0):
    rows = []
    for task in ("debug", "eda"):
        for team, tokens, acc, ovw in (("latte", latte_tokens, 1.0, 2), ("leader_worker", lw_tokens, 0.8, 8),
                                       ("decentralized", 500.0, 0.9, 10), ("static", 300.0, 0.5, 1),
                                       ("pipeline", 200.0, 0.25, 0)):
            for seed in (0, 1):
                rows.append({"task": task, "team": team, "model": "simulated/default", "seed": seed, "status": "ok",
                             "accuracy": acc, "total_tokens": tokens, "wall_clock_seconds": tokens / 10,
                             "total_rounds": 10, "cross_agent_overwrites": ovw, "parameter": "baseline",
                             "value": math.nan, "self_claims": 1, "claim_conflicts": 0,
                             "discovered_after_planning": 1, "releases": 0, "lead_fraction": 0.5})
    return pd.DataFrame(rows)


def test_summary_ratios_and_gaps():
    s = S.summarise(_rows())
    row = s.iloc[0]
    assert row["parameter"] == "baseline" and row["trials"] == 20
    assert row["token_ratio_vs_leader_worker"] == pytest.approx(0.25)
    assert row["token_ratio_vs_decentralized"] == pytest.approx(0.2)
    assert row["wall_ratio_vs_leader_worker"] == pytest.approx(0.25)
    assert row["overwrite_ratio_vs_decentralized"] == pytest.approx(0.2)
    assert row["accuracy_gap_vs_static"] == pytest.approx(0.5) and row["accuracy_gap_vs_pipeline"] == pytest.approx(0.75)
    # a setting that ran fewer tasks: every setting is then summarised over the tasks they share
    varied = _rows().query("task == 'eda' and seed == 1").assign(parameter="p_straggler", value=0.25)
    both = S.summarise(pd.concat([_rows(), varied]))
    assert list(both["tasks"]) == ["eda", "eda"] and list(both["trials"]) == [5, 5]
    assert list(both["seeds"]) == [1, 1]  # and at the seeds they share
    table = S.team_table(_rows())
    assert table.loc[("all", "latte"), "trials"] == 4 and table.loc[("debug", "static"), "total_tokens"] == 300.0


def test_directions_against_the_papers_printed_numbers():
    d = S.directions(_rows())
    tokens = d[(d["metric"] == "tokens") & (d["task"] == "all")].set_index("versus")
    assert tokens.loc["leader_worker", "paper_latte_better"] and tokens.loc["leader_worker", "ours_latte_better"]
    assert tokens.loc["leader_worker", "same_direction"]
    dearer = S.directions(_rows(latte_tokens=900.0))  # LATTE made the most expensive: every token direction flips
    assert not dearer[(dearer["metric"] == "tokens")]["same_direction"].any()
    assert set(d["versus"]) == {"leader_worker", "decentralized", "static", "pipeline"}
    level = d[(d["metric"] == "accuracy") & (d["task"] == "debug")].set_index("versus")
    assert level.loc["decentralized", "paper_direction"] == "tie"  # printed 100 ± 0 for both
    assert not level.loc["decentralized", "same_direction"]  # here LATTE's 1.0 beats 0.9: a difference, said so
    pooled = d[(d["metric"] == "tokens") & (d["task"] == "all")].set_index("versus")
    assert pooled.loc["leader_worker", "paper_latte"] == 148  # Table 2's pooled cell, not §5.1's relative mean


def test_markdown_puts_the_paper_beside_and_marks_every_difference():
    text = S.markdown(_rows())
    assert "| debug | latte | 100 | 100 | 0 | 227 |" in text  # ours, then the paper's Table 2 cell
    assert "| eda | pipeline | 25 | 75 |" in text  # the paper's MetaGPT beside our pipeline
    assert "| rounds in which the Lead ran (%) | latte | 30.8 | 50.0 |" in text  # A6.3 beside the baseline's counts
    dearer = S.markdown(_rows(latte_tokens=900.0))
    token_rows = [line for line in dearer.splitlines() if line.startswith("| tokens |")]
    assert len(token_rows) == 4 and all("**differs**: paper cheaper, here dearer" in line for line in token_rows)


def test_the_shipped_study_covers_the_grid_and_summarises():
    rows = S.load_sensitivity()
    settings = rows.groupby(["parameter", "value"], dropna=False).size()
    assert len(settings) == 1 + sum(len(v) for v in S.DEFAULT_GRID.values()) + sum(
        len(v) for v in S.DEFAULT_READINGS.values())
    counts = rows.groupby(["parameter", "value", "task", "team"], dropna=False)["seed"].nunique()
    assert (counts.loc[S.BASELINE] == S.DEFAULT_SEEDS).all()  # the must-show table: 10 seeds of every cell
    varied = counts.drop(index=S.BASELINE, level="parameter")
    assert varied.nunique() == 1  # every varied setting at the same number of seeds, on every team
    tasks = rows.groupby(["parameter", "value"], dropna=False)["task"].agg(frozenset)
    assert set(tasks.loc[S.BASELINE].iloc[0]) == set(S.TASKS) and tasks.drop(index=S.BASELINE, level="parameter").nunique() == 1
    assert set(rows["team"]) == set(S.TEAMS) and set(rows["task"]) == set(S.TASKS)
    assert (rows["status"] == "ok").all()
    summary = ll.analysis.sensitivity(rows=rows)
    assert len(summary) == len(settings) and summary["token_ratio_vs_leader_worker"].notna().all()
    assert summary["tasks"].nunique() == 1  # every setting summarised over the same tasks


def test_readings_of_the_protocol_are_settings_of_the_study_at_the_base_profile():
    configs = study.sensitivity_configs({}, seeds=1, tasks=["debug"], teams=["latte"],
                                        readings={"dispatch": ["busy_every_round"], "graph_change": ["counts"]})
    assert [(c["model"], c.get("dispatch"), c.get("graph_change")) for c in configs] == [
        ("simulated/default", None, None), ("simulated/default", "busy_every_round", None),
        ("simulated/default", None, "counts")]
    assert S.reading_of(configs[2]) == "graph_change=counts" and S.reading_of(configs[0]) is None
    with pytest.raises(ll.ConfigError, match="not a protocol switch"):
        study.sensitivity_configs({}, seeds=1, readings={"p_reread": ["x"]})
    with pytest.raises(ll.ConfigError, match="dispatch"):
        study.sensitivity_configs({}, seeds=1, readings={"dispatch": ["sometimes"]})
