"""The calibration's process moments and the validation (docs/calibration.md, the second pre-registration), on
synthetic trials whose answers are known, and on the published data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from latte_lab.analysis import validation as V
from latte_lab.sweep import calibrate as C

OUTCOMES = ("accuracy", "total_tokens", "wall_clock_seconds", "total_rounds")


def _trials(diffs: dict[tuple[str, str], float], n: int = 30, noise: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Trials of latte and the other teams where, for every outcome, latte's mean minus the team's is the given
    difference (per task and team)."""
    rng = np.random.default_rng(seed)
    rows = []
    for task in V.TASKS:
        for team in ("latte", *V.OTHERS, "metagpt"):
            d = 0.0 if team == "latte" else diffs.get((task, team), 0.0)
            for _ in range(n):
                rows.append({"task": task, "team": team,
                             **{col: 1.0 - d + noise * rng.standard_normal() for col in OUTCOMES}})
    return pd.DataFrame(rows)


def test_the_papers_clear_effects_are_reproduced_level_or_reversed():
    sim = _trials({("debug", "leader_worker"): 0.5, ("eda", "leader_worker"): -0.5, ("textproc", "leader_worker"): 0.5,
                   ("debug", "static"): 0.5})
    paper = _trials({("debug", "leader_worker"): 0.5, ("eda", "leader_worker"): 0.5, ("textproc", "leader_worker"): 0.0,
                     ("debug", "static"): 0.0}, seed=1)
    paper.loc[paper["team"] == "pipeline", "team"] = "dropped"  # the pipeline stands beside the published metagpt
    table = V.effects_table(sim, paper, n_boot=500)
    assert len(table) == 3 * 4 * 4 and set(table["measure"]) == {"accuracy", "tokens", "wall", "rounds"}
    lw = table[table["versus"] == "leader_worker"].set_index(["task", "measure"])
    assert lw.loc[("debug", "rounds"), "verdict"] == "reproduced"
    assert lw.loc[("eda", "tokens"), "verdict"] == "reversed"
    assert not lw.loc[("textproc", "wall"), "clear"] and lw.loc[("textproc", "wall"), "verdict"] == "not clear"
    st = table[table["versus"] == "static"].set_index(["task", "measure"])
    assert not st.loc[("debug", "accuracy"), "clear"]  # the paper's side is level: no clear effect to reproduce
    level = V.effects_table(_trials({}), _trials({("eda", "decentralized"): 0.5}, seed=2), n_boot=500)
    dec = level[(level["versus"] == "decentralized") & (level["task"] == "eda")]
    assert set(dec["verdict"]) == {"no difference"}
    counts = V.effect_counts(table)
    assert counts["clear"] == 8 and counts["reproduced"] == 4 and counts["reversed"] == 4
    assert counts["no difference"] == 0 and counts["comparisons"] == 48


def test_published_process_moments_and_the_loss():
    pub = V.published_moments()
    assert len(pub) == 26 and (pub["scale"] > 0).all()
    assert set(pub.index.get_level_values("moment")) == {
        "graph_r0", "graph_r3", "graph_r6", "graph_r9", "graph_r12", "overwrites", "messages", "idle",
        "share_release_task", "share_create_verify_node", "share_close_task", "share_discover_task_skipped"}
    assert not {"rounds", "accuracy", "tokens", "output_tokens_per_call"} & set(pub.index.get_level_values("moment"))
    assert pub.loc[("overwrites", "debug", "latte"), "value"] == pytest.approx(
        V.published_trials("debug", "latte")["cross_agent_overwrites"].mean())
    assert 3.5 < pub.loc[("graph_r0", "all", "latte"), "value"] < 4.0  # the paper's 3.8 seeded nodes
    exact = pub["value"].copy()
    assert V.moment_loss(exact, pub) == 0.0
    moved = exact.copy()
    moved[("messages", "eda", "static")] += pub.loc[("messages", "eda", "static"), "scale"] * 2
    assert V.moment_loss(moved, pub) == pytest.approx(4.0)
    assert V.moment_loss(exact.drop(("idle", "eda", "latte")), pub) == pytest.approx(V.MISSING_PENALTY)


def test_our_moments_read_trajectories_from_rows_and_from_a_csv(tmp_path):
    rows = pd.DataFrame({"task": ["debug", "eda", "debug"], "team": ["latte", "latte", "static"],
                         "graph_size_per_round": [[2, 3, 3, 5], [4, 4], [8]],
                         "cross_agent_overwrites": [1, 3, 2], "total_messages": [4, 6, 8], "idle_fraction": [0.5, 0.7, 0.0],
                         "op_release_task": [1, 0, 0], "op_close_task": [0, 0, 2]})
    m = V.moments(rows)
    assert m[("graph_r0", "all", "latte")] == 3.0 and m[("graph_r3", "all", "latte")] == 5.0  # only who got there
    assert m[("graph_r0", "all", "static")] == 8.0
    assert m[("share_release_task", "all", "latte")] == 0.5 and m[("share_close_task", "all", "static")] == 1.0
    assert np.isnan(m[("share_create_verify_node", "all", "latte")])  # the rows lack the column
    csv = tmp_path / "t.csv"
    rows.assign(graph_size_per_round=[json.dumps(s) for s in rows["graph_size_per_round"]]).to_csv(csv, index=False)
    again = V.moments(pd.read_csv(csv))
    assert again[("graph_r3", "all", "latte")] == 5.0


def test_the_search_box_and_the_model_spec():
    assert C.clip([0.0, 1.5, 2.0, -1.0, 5.0, 0.5]) == [1.0, 1.0, 1.0, 0.0, 0.3, 0.5]
    params = C.as_params([3.456, 0.1, 0.333, 0.5, 0.05, 0.777])
    assert params == {"seed_nodes": 3.46, "p_split": 0.1, "p_reread": 0.33, "chattiness": 0.5, "p_straggler": 0.05,
                      "p_delegate": 0.78}
    import latte_lab as ll
    from latte_lab.models.sim.profiles import resolve_profile

    cfg = ll.TrialConfig(task="debug", model=C.spec(params))
    prof = resolve_profile(cfg.model.split("/", 1)[1])
    assert (prof.seed_nodes, prof.p_delegate, prof.p_correct_patch) == (3.46, 0.78, 0.85)  # the rest: default


def test_validate_sim_reads_a_study_and_names_a_missing_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="make validate-sim"):
        V.validate_sim(tmp_path / "none.csv")
    study = _trials({}, n=5).assign(model="simulated/default")
    for col in ("cross_agent_overwrites", "total_messages", "idle_fraction"):
        study[col] = 1
    out = V.validate_sim(study, n_boot=200)
    assert list(out.summary().index) == ["default"] and out.summary().loc["default", "comparisons"] == 48
    assert "clear effects" in repr(out) and len(out.clear_effects("default")) == out.summary().loc["default", "clear"]


def test_latte_process_sets_our_figures_beside_the_papers():
    rows = pd.DataFrame({"task": ["debug", "debug", "eda", "textproc"], "team": "latte",
                         "total_rounds": [10, 20, 8, 9], "graph_size_initial": [3, 5, 2, 4],
                         "graph_size_final": [9, 9, 2, 7], "lead_active_fraction": [0.5, 0.3, 0.2, 0.4],
                         "cross_agent_overwrites": [4, 6, 1, 2]})
    t = V.latte_process(rows)
    assert list(t.index) == list(V.TASKS) and t.loc["debug", "trials"] == 2
    assert (t.loc["debug", "rounds"], t.loc["debug", "graph at round 0"], t.loc["debug", "discovered after planning"]) \
        == (15.0, 4.0, 5.0)
    assert t.loc["debug", "rounds (paper)"] == pytest.approx(V.published_trials("debug", "latte")["total_rounds"].mean())
    assert t.loc["eda", "Lead ran (paper)"] == 0.308 and t.loc["textproc", "overwrites"] == 2.0
