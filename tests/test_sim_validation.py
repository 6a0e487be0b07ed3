"""The calibration's moments and the held-out validation (docs/calibration.md), on synthetic trials whose
answers are known, and on the published data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from latte_lab.analysis import validation as V
from latte_lab.sweep import calibrate as C


def _trials(diffs: dict[tuple[str, str], float], n: int = 30, noise: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Trials of latte and the held-out teams where, for every measure, latte's mean minus the team's is the
    given difference (per task and team)."""
    rng = np.random.default_rng(seed)
    rows = []
    for task in V.TASKS:
        for team in ("latte", *V.HELD_OUT, "metagpt"):
            d = 0.0 if team == "latte" else diffs.get((task, team), 0.0)
            for _ in range(n):
                base = 1.0 - d  # latte is at 1.0, the others at 1 - d
                rows.append({"task": task, "team": team, "accuracy": base + noise * rng.standard_normal(),
                             "total_tokens": base + noise * rng.standard_normal(),
                             "wall_clock_seconds": base + noise * rng.standard_normal()})
    return pd.DataFrame(rows)


def test_only_comparisons_resolved_on_both_sides_count_and_signs_decide():
    sim = _trials({("debug", "leader_worker"): 0.5, ("eda", "leader_worker"): -0.5, ("textproc", "leader_worker"): 0.5})
    paper = _trials({("debug", "leader_worker"): 0.5, ("eda", "leader_worker"): 0.5, ("textproc", "leader_worker"): 0.0},
                    seed=1)
    paper.loc[paper["team"] == "pipeline", "team"] = "dropped"  # the pipeline stands beside the published metagpt
    table = V.direction_table(sim, paper, n_boot=500)
    assert len(table) == 27 and set(table["task"]) == set(V.TASKS)  # per-task rows only, no pooled row
    lw = table[table["versus"] == "leader_worker"].set_index(["task", "measure"])
    assert lw.loc[("debug", "accuracy"), "agree"] and lw.loc[("debug", "accuracy"), "resolved"]
    assert lw.loc[("eda", "tokens"), "resolved"] and not lw.loc[("eda", "tokens"), "agree"]
    assert not lw.loc[("textproc", "wall"), "resolved"]  # the paper's side is level: not counted
    resolved, agree, rate = V.agreement(table)
    assert (resolved, agree) == (6, 3) and rate == pytest.approx(0.5)


def test_published_moments_and_the_loss():
    pub = V.published_moments()
    assert len(pub) == 25 and (pub["scale"] > 0).all()
    assert pub.loc[("rounds", "debug", "latte"), "value"] == pytest.approx(
        V.published_trials("debug", "latte")["total_rounds"].mean())
    exact = pub["value"].copy()
    assert V.moment_loss(exact, pub) == 0.0
    moved = exact.copy()
    moved[("rounds", "debug", "latte")] += pub.loc[("rounds", "debug", "latte"), "scale"] * 2
    assert V.moment_loss(moved, pub) == pytest.approx(4.0)
    assert V.moment_loss(exact.drop(("rounds", "eda", "static")), pub) == pytest.approx(100.0)  # a missing cell


def test_the_search_box_and_the_model_spec():
    assert C.clip([0.0, 1.0, 2.0, -1.0, 5000.0]) == [0.5, 0.3, 1.0, 0.0, 1500.0]
    params = C.as_params([0.8123, 0.1, 0.333, 0.5, 200.4])
    assert params == {"p_correct_patch": 0.81, "p_straggler": 0.1, "p_reread": 0.33, "p_delegate": 0.5, "verbosity": 200}
    import latte_lab as ll

    cfg = ll.TrialConfig(task="debug", model=C.spec(params))
    from latte_lab.models.sim.profiles import resolve_profile

    prof = resolve_profile(cfg.model.split("/", 1)[1])
    assert (prof.p_correct_patch, prof.verbosity) == (0.81, 200)


def test_validate_sim_reads_a_study_and_names_a_missing_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="make validate-sim"):
        V.validate_sim(tmp_path / "none.csv")
    study = _trials({}, n=5).assign(model="simulated/default")
    for col in ("total_rounds", "total_output_tokens", "dispatched_agent_rounds", "cross_agent_overwrites", "n_release"):
        study[col] = 1
    out = V.validate_sim(study, n_boot=200)
    assert list(out.summary().index) == ["default"] and out.summary().loc["default", "comparisons"] == 27
    assert "Held-out validation" in repr(out)
