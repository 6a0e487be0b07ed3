"""What the command's output says: a trial's summary explains its outcome and its accuracy, a warning is one
line, a sweep ends with its results per team and task, and no note cites a section that nothing defines."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pandas as pd
import pytest

import latte_lab as ll
from latte_lab.cli import format_warning, main, one_line_warnings
from latte_lab.cli import trial as trial_cli
from latte_lab.cli.sweep import results_table
from latte_lab.rundir import REASONS, TrialResult

REPO = Path(__file__).resolve().parents[2]


def _result(task: str, *, success: bool, reason: str, accuracy: float | None, claimed: bool | None = None,
            hidden: tuple[int, int] | None = None, status: str = "ok") -> TrialResult:
    ev = {"passed": hidden[0], "total": hidden[1]} if hidden else {}
    return TrialResult(
        config=ll.TrialConfig(task=task, seed=0), trial_id=f"{task}-latte-s0-x", status=status,
        error=None if status == "ok" else "RuntimeError: boom", success=success, accuracy=accuracy, rounds=12,
        input_tokens=1000, output_tokens=200, virtual_seconds=10.0, real_seconds=1.0, reason=reason, eval=ev,
        row={"claimed_success": success if claimed is None else claimed})


def test_a_hidden_pass_rate_says_what_it_counts_and_the_reason_what_it_means():
    text = _result("eda", success=True, reason="certified", accuracy=53 / 58, hidden=(53, 58)).summary()
    head, meaning, figures, where = text.splitlines()
    assert head == "eda-latte-s0-x: SUCCESS (certified)"  # short: a Gantt chart's title and the explorer show it
    assert meaning == ("  certified: an agent declared the work done while the public tests passed; the hidden "
                       "evaluation's run of the public tests confirmed it")
    assert figures.startswith("  accuracy 91% = share of the hidden tests passed (53 of 58) · rounds 12 · ")
    assert where == "  run directory: None"


def test_a_task_scored_by_success_says_so():
    text = _result("debug", success=True, reason="all_tasks_done", accuracy=1.0, hidden=(40, 40)).summary()
    assert "SUCCESS (all_tasks_done)\n  all_tasks_done: every task of the graph done and the public tests passing; " in text
    assert "accuracy 100% (this task scores success: 100% or 0%) · rounds 12" in text


def test_a_claim_the_evaluation_contradicted_says_why_it_is_no_success():
    text = _result("eda", success=False, claimed=True, reason="certified", accuracy=0.5, hidden=(5, 10)).summary()
    assert text.splitlines()[:2] == [
        "eda-latte-s0-x: no success (certified)",
        "  certified: an agent declared the work done while the public tests passed; but the public tests as "
        "shipped failed in the hidden evaluation, so no success"]


def test_the_round_budget_an_error_and_no_score_are_worded():
    text = _result("eda", success=False, reason="max_rounds", accuracy=None).summary()
    assert "no success (max_rounds)\n  max_rounds: the round budget ran out first\n" in text
    assert "accuracy n/a (the hidden evaluation gave no score)" in text
    text = _result("eda", success=False, reason="error", accuracy=None, status="error").summary()
    assert "no success (error) — ERROR: RuntimeError: boom\n  error: the trial failed\n" in text
    text = _result("eda", success=False, reason="made_up", accuracy=float("nan")).summary()
    assert "made_up: how the team reported its end" in text and "accuracy n/a" in text


def test_every_reason_a_team_or_the_trial_sets_is_worded():
    teams = "\n".join(p.read_text() for p in (REPO / "latte_lab" / "teams").glob("*.py"))
    found = set(re.findall(r"Outcome\((?:True|False), \"(\w+)\"", teams))  # Outcome(False, "tests_failed")
    found |= set(re.findall(r"else \"(\w+)\",\s*$", teams, re.MULTILINE))  # ... if ... else "certified",
    found |= set(re.findall(r"^\s+reason: str = \"(\w+)\"", teams, re.MULTILINE))  # Outcome's default
    trial = (REPO / "latte_lab" / "trial.py").read_text()
    found |= set(re.findall(r"return \"\w+\", [^\n]*?\"(\w+)\"", trial))  # _how_it_ended: "interrupted", ...
    found |= set(re.findall(r"else \"(\w+)\"\)?$", trial, re.MULTILINE)) & {"sweep_budget", "error"}
    assert {"all_tasks_done", "certified", "tests_passed", "tests_failed", "planning_failed",
            "qa_rounds_exhausted", "max_rounds", "interrupted", "budget"} <= found
    assert not found - set(REASONS), f"summary() has no words for: {sorted(found - set(REASONS))}"


def test_a_real_trial_summary_explains_itself(tmp_path, capsys):
    assert main(["run", "--task", "eda", "--team", "decentralized", "--max-rounds", "2", "--quiet",
                 "--runs-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "accuracy " in out and "= share of the hidden tests passed (" in out
    assert "no success (max_rounds)\n  max_rounds: the round budget ran out first\n" in out


def test_a_warning_is_one_line_without_its_source(monkeypatch, capsys):
    def noisy(args):
        warnings.warn("load_runs left out 2 attempts:\n  a.failed-1\n  b.failed-1", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(trial_cli, "_graph_demo", noisy)
    assert main(["graph-demo"]) == 0
    err = capsys.readouterr().err
    assert err == "latte-lab: warning: load_runs left out 2 attempts: a.failed-1 b.failed-1\n"
    assert warnings.showwarning.__module__ == "warnings"  # put back after the command


def test_warnings_filtered_out_stay_out_and_the_format_is_one_line(capsys):
    with one_line_warnings(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.warn("old", DeprecationWarning, stacklevel=1)
        warnings.warn("shown", RuntimeWarning, stacklevel=1)
    assert capsys.readouterr().err == "latte-lab: warning: shown\n"
    assert format_warning("a\n\n  b\tc") == "latte-lab: warning: a b c"


def test_a_sweep_ends_with_its_results_per_task_and_team(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--tasks", "debug", "eda", "--teams", "latte", "--replicates", "2", "--max-rounds", "2",
                 "--jobs", "2", "--out", str(out), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("task   team   trials  success  accuracy  rounds  tokens  errors")
    end = next(i for i, line in enumerate(lines) if line.startswith("success: "))  # what the columns mean
    table = lines[start + 1:end]
    assert [line.split()[:3] for line in table] == [["debug", "latte", "2"], ["eda", "latte", "2"]]
    assert "accuracy: the share of the task's hidden tests that pass" in " ".join(lines[end:])
    rows = ll.load_runs(out).trials
    eda = rows[rows["task"] == "eda"]
    assert table[1].split()[3:6] == ["0%", f"{eda['accuracy'].mean():.0%}", "2.0"]
    assert table[1].split()[6:] == [f"{eda['total_tokens'].mean():,.0f}", "0"]


def test_the_results_table_names_the_model_when_there_are_several_and_counts_errors():
    rows = pd.DataFrame({"task": ["eda"] * 4, "team": ["static"] * 4, "model": ["simulated", "simulated",
                         "simulated/careful", "simulated/careful"], "status": ["ok", "budget", "ok", "ok"],
                         "success": [True, False, False, True], "accuracy": [1.0, None, 0.5, 1.0],
                         "total_rounds": [10, 3, 20, 30], "total_tokens": [1000, 10, 3000, 5000]})
    assert results_table(rows).splitlines() == [
        "task  team    model              trials  success  accuracy  rounds  tokens  errors",
        "eda   static  simulated               2     100%      100%    10.0   1,000       1",
        "eda   static  simulated/careful       2      50%       75%    25.0   4,000       0",
    ]
    failed = rows.assign(status="error")
    assert results_table(failed).splitlines()[1].split()[3:] == ["2", "-", "-", "-", "-", "2"]


# Citations being reworded by their pages' owners: each entry fails (strict xfail) once its page no longer
# cites the reference document, so the entry is deleted with the citation.
KNOWN_CITATIONS: dict[str, str] = {}


@pytest.mark.parametrize("root", [
    "latte_lab", "notebooks", "teaching", "README.md", "docs",
    *(pytest.param(root, marks=pytest.mark.xfail(strict=True, reason=why)) for root, why in KNOWN_CITATIONS.items()),
])
def test_no_user_facing_text_cites_the_reference_document(root):
    """What users read (notes in the paper reference table, the docs, the notebooks, the CLI) cites only
    what they can open: the paper's own sections, or a page of these docs. Code comments may cite the
    implementation notes the maintainers keep; data, docs and output text may not."""
    path = REPO / root
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.suffix in (".md", ".csv", ".ipynb")]
    files += list((REPO / "latte_lab" / "cli").glob("*.py")) if root == "latte_lab" else []
    cited = [f"{p.relative_to(REPO)}:{i}" for p in files for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"reference (document )?§", line)]
    assert not cited, f"these lines cite a section no file here defines: {cited}"
