"""The ``eda`` task (paper: "Data Analysis"; released code: ``simple_eda``).

A 400-row HR table with eight opaque column names and no data dictionary. The team writes a shared
column schema (``config.py``), structured findings (``findings.json``) and a narrative
(``summary.txt``). The public suite checks the form of those files; the hidden suite checks them
against the planted truth (true mapping, satisfaction as the dominant negative churn driver, bimodal
salary, department churn extremes, the satisfaction placeholder) with wording-robust but
direction-aware text checks.

Hidden work: the satisfaction column holds a placeholder (99) for unanswered surveys
(``generator.PLACEHOLDER``). Nothing in the description says so; it shows when the data is analysed
(any profile of that column), and an analysis that misses it finds satisfaction unrelated to churn.
Declaring it (``MISSING_VALUES`` in config.py) is the hidden unit ``data_quality``; the analyses and the
summary depend on it.

Missing deliverables: the released evaluator drops such runs from Table 2; ``evaluate`` still scores
them (every test reading a missing file fails) and lists the missing files in
``EvalResult.missing_outputs`` so an analysis can drop them the released way.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources  # not `files`: the task's files/ folder has that name
from typing import TYPE_CHECKING

from latte_lab.tasks import register
from latte_lab.tasks.base import EvalResult, Task, WorkUnit
from latte_lab.tasks.suite import run_hidden_suite

if TYPE_CHECKING:  # pragma: no cover
    from latte_lab.workspace import Workspace

DATA_FILE = "employee_data.csv"
PUBLIC_SUITE = "test_suite.py"
HIDDEN_SUITE = "test_hidden.py"
HIDDEN_PLANTED = "_planted.json"  # names the hidden suite reads from its working directory
HIDDEN_DATA = "_hidden_employee_data.csv"  # the suite's own copy: agents may edit theirs


def _package_text(*parts: str) -> str:
    return resources.files(__name__).joinpath(*parts).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _data() -> str:
    return _package_text("files", DATA_FILE)


@lru_cache(maxsize=1)
def planted() -> dict:
    """The true mapping and planted properties (for the hidden suite and tests; never for agents)."""
    return json.loads(_package_text("hidden", "planted.json"))


@lru_cache(maxsize=1)
def _solution() -> dict[str, str]:
    from latte_lab.tasks.eda import solution  # pandas: imported only when a solution is needed

    return solution.build(_data(), planted()["column_map"], planted()["missing_values"])


DESCRIPTION = """\
Exploratory data analysis of an HR dataset.

The workspace holds employee_data.csv: 400 employee records with 8 columns named var_01 .. var_08.
The names are opaque and there is no data dictionary: work out what each column is from its values.
The 8 columns are, in some order: emp_id (employee id), dept (department: Engineering, Sales,
Support or HR), tenure_months, n_projects, weekly_hours, salary, satisfaction (score 1-10) and
churned (1 if the employee left, else 0). Use exactly these semantic names.

Produce three deliverables in the workspace root:

1. config.py - the shared schema every analysis script imports:
   COLUMN_MAP: dict mapping each of the 8 opaque names to its semantic name (all 8, no others);
   TARGET: the semantic name of the outcome column to explain (a str);
   NUMERIC_FEATURES: list of the semantic names of the numeric predictor columns;
   CATEGORICAL_FEATURES: list of the semantic names of the categorical predictor columns;
   MISSING_VALUES: dict mapping a semantic column name to the placeholder value that column uses
   for a missing answer ({} when the data has none).
   Classify the predictors by data type: every numeric predictor goes in NUMERIC_FEATURES, every
   text-valued one in CATEGORICAL_FEATURES. The id column and the target are not features.

2. findings.json - a JSON object with exactly these five keys, each a non-empty list of entries:
   "distributions", "relationships", "subgroup_effects", "outliers", "missing_data".
   Every entry is an object {"finding": "<one-sentence claim>", "supporting_evidence": "<numbers
   that back it: rates, correlations, counts, means>"}. Name columns by their semantic name
   (the opaque name may follow in parentheses). State every relationship with its direction in
   words (for example "X is negatively related to churn: higher X goes with lower churn"), say
   what a distribution's shape is (skewed, uniform, bimodal, ...), and for a subgroup effect name
   the groups with the highest and the lowest rate.

3. summary.txt - a narrative of at least 100 words for a manager: what the target is, the main
   drivers of churn and their direction, and the other notable patterns.

Explore the data with scripts (run_script) before writing conclusions; the findings are judged
on whether they are true of the data, not only on their form.
"""

SUCCESS = """\
The public form tests (python -m pytest -q test_suite.py) pass, and the deliverables are correct:
the private suite checks the column mapping and feature schema against the data and whether the
findings and summary report the data's main patterns with the right directions."""


@register
class EdaTask(Task):
    id = "eda"
    title = "Exploratory analysis of an opaque HR dataset"
    description = DESCRIPTION
    success_criteria = SUCCESS
    public_tests = (PUBLIC_SUITE,)
    test_args = (PUBLIC_SUITE,)
    required_outputs = ("config.py", "findings.json", "summary.txt")
    accuracy_metric = "hidden_pass_rate"
    hidden_imports = ("pandas",)  # the hidden suite reads the data and the deliverables with it

    def setup(self, workspace: Workspace) -> None:
        workspace.setup_file(DATA_FILE, _data())
        workspace.setup_file(PUBLIC_SUITE, _package_text("files", PUBLIC_SUITE))
        workspace.protect(*self.public_tests)
        workspace.test_args = self.test_args

    def hidden_files(self) -> dict[str, str]:
        """What ``evaluate`` adds to the temporary copy (never to the agents' workspace)."""
        return {
            HIDDEN_SUITE: _package_text("hidden", HIDDEN_SUITE),
            HIDDEN_PLANTED: json.dumps(planted()),
            HIDDEN_DATA: _data(),
        }

    def evaluate(self, workspace: Workspace) -> EvalResult:
        return run_hidden_suite(
            workspace, self.hidden_files(), HIDDEN_SUITE, required_outputs=self.required_outputs,
            confirm=self.public_files(), imports=self.hidden_imports,
        )

    def reference_solution(self) -> dict[str, str]:
        return dict(_solution())

    def work_units(self) -> list[WorkUnit]:
        return [
            WorkUnit(
                id="config",
                title="Identify the columns and write config.py",
                description="Profile employee_data.csv (dtypes, ranges, distinct values) to tell which "
                "opaque column is which, then write COLUMN_MAP, TARGET and the feature lists.",
                files=("config.py",),
                symbols=("COLUMN_MAP", "TARGET", "NUMERIC_FEATURES", "CATEGORICAL_FEATURES", "ID_COLUMN"),
                tests=("TestConfigCompleteness", "TestConfigAccuracy", "TestOutputContract::test_config", "config::"),
                effort=1.5,
            ),
            WorkUnit(
                id="findings_univariate",
                title="Distributions, outliers and missing data",
                description="Describe each column's distribution (salary's shape in particular), count "
                "outliers and missing values; write those three findings.json categories.",
                files=("findings.json",),
                symbols=("distributions", "outliers", "missing_data"),
                deps=("config", "data_quality"),
                tests=("TestPlantedFindings::test_salary", "TestDataQuality::test_missing_data",
                       "TestOutputContract::test_findings", "findings_univariate::"),
            ),
            WorkUnit(
                id="findings_relationships",
                title="Churn relationships and subgroup effects",
                description="Relate each feature to churn (direction and strength) and compare churn "
                "across departments and salary tiers; write relationships and subgroup_effects.",
                files=("findings.json",),
                symbols=("relationships", "subgroup_effects"),
                deps=("config", "data_quality"),
                tests=("TestPlantedFindings::test_satisfaction", "TestPlantedFindings::test_department",
                       "findings_relationships::"),
                effort=1.5,
            ),
            WorkUnit(
                id="summary",
                title="Write summary.txt",
                description="Synthesize the findings into a narrative of at least 100 words.",
                files=("summary.txt",),
                deps=("findings_univariate", "findings_relationships"),
                tests=("TestNarrative", "TestOutputContract::test_summary", "summary::"),
            ),
            WorkUnit(
                id="data_quality",
                title="Treat the satisfaction placeholder as missing",
                description="The satisfaction column holds a placeholder value outside its 1-10 scale for "
                "unanswered surveys; declare it in config.MISSING_VALUES so every analysis drops those rows.",
                files=("config.py",),
                symbols=("MISSING_VALUES",),
                deps=("config",),
                visible=False,
                tests=("TestDataQuality::test_placeholder_declared", "data_quality::"),
                effort=0.5,
            ),
        ]


__all__ = ["EdaTask", "planted"]
