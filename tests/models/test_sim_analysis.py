"""The simulated agents' exploratory analysis (``latte_lab.models.sim.analysis``): data deliverables computed
from the report of a script the agent ran, never copied from a reference.

The script runs with the real interpreter on the eda task's data; the findings and the summary composed from
its report are judged by eda's hidden suite, run in-process as ``tests/tasks/test_task_eda.py`` does. With the
placeholder declared the composed deliverables pass every hidden test; without it they fail the tests that
need it, as an analyst who never noticed it would.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_task_eda import HIDDEN_PATH, run_hidden

import latte_lab as ll
from latte_lab.models.sim import analysis as A
from latte_lab.tasks.files import task_files

DATA = "employee_data.csv"
MODULE = Path(A.__file__)
FORM_TESTS = {  # what the form of the deliverables decides, not what they say about the data
    "TestOutputContract::test_config_exists", "TestOutputContract::test_config_importable",
    "TestOutputContract::test_findings_exists", "TestOutputContract::test_findings_has_all_categories",
    "TestOutputContract::test_categories_are_nonempty_lists", "TestOutputContract::test_entries_have_finding_and_evidence",
    "TestOutputContract::test_evidence_is_quantitative", "TestOutputContract::test_summary_exists",
    "TestOutputContract::test_summary_is_not_placeholder", "TestNarrative::test_length",
    "TestNarrative::test_mentions_churn", "TestNarrative::test_analytic_vocabulary",
}
NEED_THE_PLACEHOLDER = {
    "TestDataQuality::test_placeholder_declared", "TestDataQuality::test_missing_data_reports_the_placeholder",
    "TestPlantedFindings::test_satisfaction_direction_is_negative",
}


@pytest.fixture(scope="module")
def eda():
    return ll.tasks.get("eda")


@pytest.fixture(scope="module")
def data(eda) -> bytes:
    return task_files(eda)[DATA]


@pytest.fixture(scope="module")
def reference_config(eda) -> str:
    return eda.reference_solution()["config.py"]


@pytest.fixture(scope="module")
def hidden():
    import importlib.util

    spec = importlib.util.spec_from_file_location("eda_hidden_suite_for_analysis", HIDDEN_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def analyse(root: Path, data: bytes | str, config: str | None, name: str = DATA) -> str:
    """Runs the analysis script in ``root`` (the data file and, unless None, config.py written first) and
    returns its output; it must exit 0 with nothing on stderr."""
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    if config is not None:
        (root / "config.py").write_text(config, encoding="utf-8")
    script = A.analysis_path(name)
    (root / script).write_text(A.analysis_script(name), encoding="utf-8")
    run = subprocess.run([sys.executable, "-I", script], cwd=root, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    return run.stdout


def without_placeholder(config: str) -> str:
    out, n = re.subn(r"^MISSING_VALUES = .*$", "MISSING_VALUES = {}", config, flags=re.M)
    assert n == 1
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory, data, reference_config) -> dict[str, str]:
    """The script's report on eda's data: (a) with the reference schema, (b) with no placeholder declared."""
    root = tmp_path_factory.mktemp("analysis")
    return {"a": analyse(root / "a", data, reference_config),
            "b": analyse(root / "b", data, without_placeholder(reference_config))}


@pytest.fixture
def hidden_root(tmp_path, data) -> Path:
    (tmp_path / "data.csv").write_bytes(data)
    root = tmp_path / "ws"
    root.mkdir()
    return root


def deliverables(report: str, config: str) -> dict[str, str]:
    return {"config.py": config, "findings.json": A.compose_findings(report), "summary.txt": A.compose_summary(report)}


def facts(report: str) -> dict[tuple[str, str], A.Fact]:
    return {(f.kind, f.label): f for f in A.parse_report(report).facts}


# ----------------------------------------------------------------------------- the eda task ----

def test_with_the_placeholder_declared_the_composed_deliverables_pass_every_hidden_test(hidden, hidden_root, reports,
                                                                                         reference_config):
    outcomes = run_hidden(hidden, deliverables(reports["a"], reference_config), hidden_root)
    assert len(outcomes) == 33
    assert all(outcomes.values()), sorted(k for k, ok in outcomes.items() if not ok)


def test_an_undeclared_placeholder_is_taken_for_a_score_and_hides_the_driver(hidden, hidden_root, reports,
                                                                             reference_config):
    outcomes = run_hidden(hidden, deliverables(reports["b"], without_placeholder(reference_config)), hidden_root)
    failed = {k for k, ok in outcomes.items() if not ok}
    assert NEED_THE_PLACEHOLDER <= failed
    assert not FORM_TESTS & failed
    # nothing else that the placeholder does not touch fails: the schema, salary, the departments
    assert failed == NEED_THE_PLACEHOLDER | {"TestNarrative::test_satisfaction_driver_direction"}


def test_the_report_states_each_fact_on_a_line_of_its_own(reports):
    lines = reports["a"].splitlines()
    assert lines[0] == f"{A.ANALYSIS_MARK}{DATA}: 400 rows, 8 columns"
    assert lines[-1] == f"{A.END_MARK} of {DATA}: 400 rows, 8 columns, {len(lines) - 2} facts"
    got = A.parse_report(reports["a"])
    assert got.complete and len(got.facts) == len(lines) - 2  # every line between is a fact
    f = facts(reports["a"])
    assert f["placeholder", "satisfaction (var_01)"].fields == {"value": "99", "rows": "28", "total": "400",
                                                                 "share": "0.07"}
    assert f["target", "churned (var_02)"].num("rate") == 0.46
    sat = f["numeric", "satisfaction (var_01)"]
    assert (sat.num("n"), sat.num("missing"), sat.num("max")) == (372, 28, 10)  # the placeholder is left out
    assert (sat.name, sat.opaque) == ("satisfaction", "var_01")
    assert round(f["relation", "satisfaction (var_01)"].num("r"), 3) == -0.351
    assert f["shape", "salary (var_06)"].flag("bimodal") and not f["shape", "satisfaction (var_01)"].flag("bimodal")
    groups = [g.text("value") for g in A.parse_report(reports["a"]).of("group")]
    assert groups == ["Sales", "Support", "HR", "Engineering"]  # by target rate, highest first
    # (b): the placeholder is a score like any other: the naive figures, and what gives it away
    g = facts(reports["b"])
    sat = g["numeric", "satisfaction (var_01)"]
    assert (sat.num("n"), sat.num("missing"), sat.num("max")) == (400, None, 99)  # no missing value: no field
    assert abs(g["relation", "satisfaction (var_01)"].num("r")) < 0.05
    assert g["outliers", "satisfaction (var_01)"].num("iqr_outliers") == 28
    assert ("placeholder", "satisfaction (var_01)") not in g


def test_the_composed_findings_state_what_the_report_shows(reports):
    a = json.loads(A.compose_findings(reports["a"]))
    assert list(a) == sorted(A.FINDING_KEYS)
    rel = a["relationships"]
    assert rel[0]["finding"].startswith("satisfaction (var_01) is negatively related to churned: higher satisfaction "
                                        "goes with a lower churned rate")
    assert "Pearson r = -0.351" in rel[0]["supporting_evidence"]
    assert rel[1]["finding"].startswith("salary (var_06) is negatively related")
    assert all("no clear relationship" in e["finding"] for e in rel[2:])
    assert a["missing_data"][0]["supporting_evidence"] == "28 of 400 rows (7.0%) hold 99."
    assert any("salary (var_06) is bimodal" in e["finding"] for e in a["distributions"])
    assert any("tenure_months (var_03) is right-skewed" in e["finding"] for e in a["distributions"])
    assert any("satisfaction (var_01) is roughly uniform" in e["finding"] for e in a["distributions"])
    assert "Sales has the highest churned rate (56.8%) and Engineering the lowest (35.5%)" in \
        a["subgroup_effects"][0]["finding"]
    b = json.loads(A.compose_findings(reports["b"]))
    assert b["missing_data"][0]["finding"].startswith("No missing values were found")
    assert any(e["finding"].startswith("satisfaction (var_01) shows no clear relationship") for e in b["relationships"])
    assert any("satisfaction (var_01) is bimodal" in e["finding"] for e in b["distributions"])
    summary = A.compose_summary(reports["a"])
    assert len(summary.split()) >= A.MIN_SUMMARY_WORDS
    assert "The strongest driver of churned is satisfaction (var_01): it is negatively related" in summary


def test_composition_is_deterministic(reports):
    for report in reports.values():
        assert A.compose_findings(report) == A.compose_findings(report)
        assert A.compose_summary(report) == A.compose_summary(report)


# ------------------------------------------------------------------------- a half-written schema ----

@pytest.mark.parametrize("config", [
    None,
    "",
    "X = 1\n",
    "COLUMN_MAP = {\n",  # a syntax error
    "raise RuntimeError('not yet')\n",
    "import sys\nprint('hello from config')\nsys.exit(3)\n",
    "COLUMN_MAP = [1, 2]\nTARGET = 5\nNUMERIC_FEATURES = 'salary'\nCATEGORICAL_FEATURES = None\nMISSING_VALUES = 99\n",
    'COLUMN_MAP = {"var_01": "satisfaction", "var_99": "ghost", 3: None}\nTARGET = "nobody"\n'
    'NUMERIC_FEATURES = ["satisfaction", "ghost"]\nMISSING_VALUES = {"ghost": 1, "satisfaction": [99, None]}\n',
])
def test_the_script_survives_any_schema(tmp_path, data, config):
    out = analyse(tmp_path, data, config)
    lines = out.splitlines()
    assert lines[0] == f"{A.ANALYSIS_MARK}{DATA}: 400 rows, 8 columns"
    assert lines[-1].startswith(A.END_MARK)
    report = A.parse_report(out)
    assert report.complete and len(report.facts) == len(lines) - 2
    lacking = report.first("lacking")
    assert lacking is not None  # it says what it lacked
    findings = json.loads(A.compose_findings(out))
    assert all(findings[k] and all(re.search(r"\d", e["supporting_evidence"]) for e in findings[k])
               for k in A.FINDING_KEYS)
    assert len(A.compose_summary(out).split()) >= A.MIN_SUMMARY_WORDS


def test_the_script_survives_empty_cells_and_counts_them(tmp_path, data, reference_config):
    rng = random.Random(0)
    lines = data.decode().splitlines()
    blanked = set()
    for _ in range(30):  # blank 30 random cells of the eda table (not the header)
        i, j = rng.randrange(1, len(lines)), rng.randrange(8)
        cells = lines[i].split(",")
        cells[j] = ""
        lines[i] = ",".join(cells)
        blanked.add((i, j))
    out = analyse(tmp_path, "\n".join(lines) + "\n", reference_config)
    report = A.parse_report(out)
    assert report.complete and report.first("cells").num("empty") == len(blanked)
    assert report.first("cells").num("rows_with_empty") == len({i for i, _ in blanked})
    assert sum(f.num("cells") for f in report.of("empty")) == len(blanked)
    assert report.first("target").num("n") == 400 - sum(1 for _, j in blanked if j == 4)  # churned is the 5th column
    findings = json.loads(A.compose_findings(out))
    assert f"{len(blanked)} of 3,200 cells" in json.dumps(findings["missing_data"])


def test_a_numeric_target_is_described_by_its_mean(tmp_path):
    csv_text = "a,g,y\n" + "".join(f"{i},{'pq'[i % 2]},{2 * i + (i % 3)}\n" for i in range(1, 31))
    out = analyse(tmp_path, csv_text, 'TARGET = "y"\nNUMERIC_FEATURES = ["a"]\nCATEGORICAL_FEATURES = ["g"]\n',
                  name="n.csv")
    findings = json.loads(A.compose_findings(out))
    assert findings["relationships"][0]["finding"] == "a is positively related to y: higher a goes with higher y."
    assert findings["subgroup_effects"][0]["finding"].startswith("The mean y differs by g:")
    assert "The target y has a mean of" in findings["distributions"][0]["finding"]


def test_a_schema_with_errors_is_reported_and_the_rest_still_analysed(tmp_path, data):
    out = analyse(tmp_path, data, "COLUMN_MAP = {\n")
    report = A.parse_report(out)
    assert report.first("config").text("status").startswith("SyntaxError")
    assert report.first("lacking").text("names") == ",".join(A.SCHEMA_NAMES)
    # features inferred from the data: numbers and text, the identifier (all values distinct integers) left out
    numeric = report.first("schema", "NUMERIC_FEATURES").text("inferred").split(",")
    assert "var_07" not in numeric and "var_01" in numeric and len(numeric) == 6
    assert report.first("schema", "CATEGORICAL_FEATURES").text("inferred") == "var_04"
    assert report.first("target") is None and not report.of("relation")


def test_a_partial_schema_keeps_what_makes_sense(tmp_path, data):
    config = ('COLUMN_MAP = {"var_01": "satisfaction", "var_99": "ghost", 3: None}\nTARGET = "var_02"\n'
              'NUMERIC_FEATURES = ["satisfaction", "ghost"]\nMISSING_VALUES = {"ghost": 1, "satisfaction": [99, None]}\n')
    report = A.parse_report(analyse(tmp_path, data, config))
    assert report.first("schema", "COLUMN_MAP").text("state") == "partial"
    assert report.first("schema", "NUMERIC_FEATURES").text("unknown") == "ghost"
    assert report.first("target").label == "var_02"  # an opaque name is a column too
    assert [f.label for f in report.of("numeric")] == ["satisfaction (var_01)"]
    assert report.first("placeholder", "satisfaction (var_01)").num("rows") == 28
    assert report.first("schema", "CATEGORICAL_FEATURES").text("inferred") == "var_04"


# ------------------------------------------------------------------------------ generic data ----

LOANS = """id,income,region,defaulted,score
1,20,north,1,
2,25,north,1,3
3,30,south,1,4
4,35,south,0,-1
5,40,east,1,5
6,45,east,0,NA
7,50,north,0,6
8,55,south,0,7
9,60,east,0,-1
10,65,north,0,8
11,,south,1,2
12,75,east,0,9
"""


def test_placeholders_and_empty_cells_are_missing_and_nothing_else(tmp_path):
    config = ('COLUMN_MAP = {"id": "id", "income": "income", "region": "region", "defaulted": "defaulted", '
              '"score": "score"}\nTARGET = "defaulted"\nNUMERIC_FEATURES = ["income", "score"]\n'
              'CATEGORICAL_FEATURES = ["region"]\nMISSING_VALUES = {"score": -1}\n')
    out = analyse(tmp_path, LOANS, config, name="loans.csv")
    report = A.parse_report(out)
    score = report.first("numeric", "score")
    # -1 declared (2 rows), one empty cell: missing; "NA" is neither: not a number, and said so
    assert (score.num("n"), score.num("missing"), score.num("unparsed")) == (8, 3, 1)
    assert report.first("placeholder", "score").fields["rows"] == "2"
    assert report.first("empty", "score").num("cells") == 1 and report.first("empty", "income").num("cells") == 1
    assert report.first("cells").num("empty") == 2 and report.first("cells").num("rows_with_empty") == 2
    assert report.first("relation", "income").num("r") < -0.5
    findings = json.loads(A.compose_findings(out))
    claims = [e["finding"] for e in findings["relationships"]]
    assert claims[0].startswith("score is negatively related to defaulted") and "the strongest" in claims[0]
    assert claims[1] == "income is negatively related to defaulted: higher income goes with a lower defaulted rate."
    text = json.dumps(findings["missing_data"])
    assert "2 of 12 rows (16.7%) hold -1" in text and "2 of 60 cells (3.3%) are empty" in text
    assert "1 cells that are neither numbers nor a declared placeholder" in text
    subgroup = findings["subgroup_effects"][0]["finding"]
    assert re.search(r"differs by region: \w+ has the highest defaulted rate \([\d.]+%\) and \w+ the lowest", subgroup)
    summary = A.compose_summary(out)
    assert "defaulted" in summary and len(summary.split()) >= A.MIN_SUMMARY_WORDS


def test_without_a_declared_placeholder_or_an_empty_cell_no_missing_values_are_found(tmp_path):
    csv_text = "a,b,y\n" + "".join(f"{i},{'xy'[i % 2]},{int(i % 3 == 0)}\n" for i in range(1, 41))
    out = analyse(tmp_path, csv_text, 'TARGET = "y"\nNUMERIC_FEATURES = ["a"]\nCATEGORICAL_FEATURES = ["b"]\n'
                  "MISSING_VALUES = {}\n", name="t.csv")
    findings = json.loads(A.compose_findings(out))
    assert findings["missing_data"] == [{"finding": "No missing values were found: the schema declares no placeholder "
                                         "and no cell is empty.",
                                         "supporting_evidence": "0 of 120 cells are empty; 0 placeholders declared."}]
    assert findings["relationships"][0]["finding"].startswith("a shows no clear relationship with y")


def test_a_second_mode_needs_a_deep_trough_and_a_real_peak(tmp_path):
    rng = random.Random(3)
    two = [round(rng.gauss(20, 3), 1) for _ in range(150)] + [round(rng.gauss(60, 4), 1) for _ in range(150)]
    tail = [round(rng.expovariate(0.1), 1) for _ in range(300)]  # right-skewed with a thin far tail
    ints = [rng.randint(1, 8) for _ in range(300)]  # whole numbers: no empty bins between neighbours
    rows = "".join(f"{x},{t},{k},{int(rng.random() < 0.4)}\n" for x, t, k in zip(two, tail, ints))
    out = analyse(tmp_path, "two,tail,ints,y\n" + rows, 'TARGET = "y"\n', name="m.csv")
    report = A.parse_report(out)
    assert report.first("shape", "two").flag("bimodal")
    assert not report.first("shape", "tail").flag("bimodal") and not report.first("shape", "ints").flag("bimodal")
    shapes = {e["finding"] for e in json.loads(A.compose_findings(out))["distributions"]}
    assert any("two is bimodal" in s for s in shapes) and any("tail is right-skewed" in s for s in shapes)
    assert any("ints is roughly uniform" in s for s in shapes)


def test_a_missing_data_file_is_said_and_the_script_exits_cleanly(tmp_path):
    (tmp_path / "s.py").write_text(A.analysis_script("absent.csv"))
    run = subprocess.run([sys.executable, "-I", "s.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith(f"{A.ANALYSIS_MARK}absent.csv: 0 rows")
    assert A.parse_report(run.stdout).first("lacking").text("data").startswith("FileNotFoundError")


# ---------------------------------------------------------------------------------- composing ----

@pytest.mark.parametrize("text", ["", "no report here", "Analysis of", "Analysis of x.csv: many rows",
                                  "profile_data.py\nProfile of data.csv: 400 rows\n"])
def test_no_report_composes_nothing(text):
    assert A.parse_report(text) is None
    assert A.compose_findings(text) is None and A.compose_summary(text) is None


def test_a_report_cut_anywhere_never_breaks_composition(reports):
    rng = random.Random(0)
    for report in reports.values():
        cuts = sorted({rng.randrange(len(report)) for _ in range(150)} | {len(report.splitlines()[0]) + 1})
        for cut in cuts:
            text = report[:cut]
            findings, summary = A.compose_findings(text), A.compose_summary(text)
            if A.ANALYSIS_MARK + DATA + ": 400 rows, 8 columns" not in text:
                assert findings is None and summary is None
                continue
            value = json.loads(findings)
            assert sorted(value) == sorted(A.FINDING_KEYS)
            for key in A.FINDING_KEYS:
                assert value[key], key
                for e in value[key]:
                    assert e["finding"].strip() and re.search(r"\d", e["supporting_evidence"]), (cut, key)
            assert len(summary.split()) >= A.MIN_SUMMARY_WORDS, cut


def test_a_line_cut_short_is_dropped_not_misread(reports):
    line = next(x for x in reports["a"].splitlines() if x.startswith("relation: satisfaction"))
    text = reports["a"][: reports["a"].index(line) + len("relation: satisfaction (var_01): r=-0.3")]
    assert A.parse_report(text).first("relation", "satisfaction (var_01)") is None
    assert A.parse_report(text + "\n").first("relation", "satisfaction (var_01)").num("r") == -0.3
    assert not A.parse_report(text).complete


def test_the_last_report_of_a_prompt_counts(reports):
    prompt = (f"<observation>\n{reports['b']}</observation>\nI declared the placeholder.\n"
              f"<observation>\n{reports['a']}</observation>\n")
    assert A.compose_findings(prompt) == A.compose_findings(reports["a"])
    assert A.compose_findings(f"{reports['a']}\n{reports['b']}") == A.compose_findings(reports["b"])


def test_fuzzed_fact_lines_never_break_composition():
    rng = random.Random(1)
    kinds = ["target", "numeric", "shape", "outliers", "relation", "band", "categorical", "group", "placeholder",
             "empty", "cells", "schema"]
    keys = ["n", "rate", "r", "binary", "mean", "skew", "kurtosis", "min", "max", "distinct", "bimodal", "mode1",
            "mode2", "trough", "iqr_outliers", "at_min", "at_max", "low_rate", "high_rate", "value", "rows", "total",
            "empty", "entries", "low_max", "high_min", "groups", "hist", "unparsed", "share"]
    values = ["0", "1", "-1", "0.5", "nan", "yes", "no", '"x"', '"a,b"', "1e308", "-0", "3", "400"]
    for _ in range(300):
        lines = [f"{A.ANALYSIS_MARK}f.csv: {rng.randint(0, 9)} rows, {rng.randint(0, 9)} columns"]
        for _ in range(rng.randint(0, 25)):
            fields = " ".join(f"{rng.choice(keys)}={rng.choice(values)}" for _ in range(rng.randint(1, 6)))
            lines.append(f"{rng.choice(kinds)}: {rng.choice(['c', 'c (v1)', 'd (v2)', 'x: y'])}: {fields}")
        text = "\n".join(lines) + "\n"
        json.loads(A.compose_findings(text))
        assert A.compose_summary(text)


# ------------------------------------------------------------------------------- genericity ----

def test_the_module_names_no_task_and_reads_none():
    # the module, the report's reader beside it and the script's text (package data)
    text = "\n".join((MODULE.parent / name).read_text(encoding="utf-8")
                     for name in (MODULE.name, "analysis_report.py", "analyze.py.txt"))
    words = ["eda", "employee", "satisfaction", "churn", "churned", "salary", "dept", "department", "tenure",
             "tenure_months", "weekly_hours", "n_projects", "emp_id", "Engineering", "Sales", "Support", "HR",
             "hr", "var_0[1-8]", "99", "65,000", "simple_eda"]
    for word in words:
        flags = 0 if word[:1].isupper() else re.IGNORECASE
        assert not re.search(rf"(?<![\w]){word}(?![\w])", text, flags), word
    assert "latte_lab.tasks" not in text and "planted" not in text and "reference" not in text.lower()
    imports = re.findall(r"^\s*(?:from|import)\s+(latte_lab[\w.]*)", text, re.M)
    assert imports == ["latte_lab.models.sim.analysis_report"]  # standalone: nothing of the package but its reader


def test_a_report_whose_head_a_run_cut_off_is_read_from_its_end(reports):
    """A run's shown output keeps its last characters: the facts about the whole table come last, and the end
    line names the file and its size, so a report cut at its head still gives the target and the placeholder."""
    for key in ("a", "b"):
        full = A.parse_report(reports[key])
        for keep in (400, 1200, len(reports[key]) - 60):
            cut = "✅ Script completed:\n" + reports[key][-keep:]
            got = A.parse_report(cut)
            assert got is not None and got.complete and (got.file, got.rows, got.columns) == (DATA, 400, 8)
            assert got.target is not None and got.target.name == "churned"
            assert len(got.facts) < len(full.facts)
            assert got.facts == full.facts[-len(got.facts):]
        assert (A.parse_report("✅ Script completed:\n" + reports[key][-400:]).first("placeholder") is None) == (key == "b")


def test_of_two_runs_shown_the_later_counts_even_with_its_head_cut_off(reports):
    """A prompt showing an earlier run whole and a later one whose head was cut: the later one is read."""
    earlier, later = reports["b"], reports["a"]
    text = f"✅ Script completed:\n{earlier}\n\nsome reply\n\n✅ Script completed:\n{later[-1500:]}"
    got = A.parse_report(text)
    assert got.first("placeholder") is not None and got.complete
    assert A.parse_report(f"✅ Script completed:\n{later}\n\n✅ Script completed:\n{earlier}").first("placeholder") is None
