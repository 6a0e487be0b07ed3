"""Hidden suite of the eda task: checks the deliverables against the planted truth.

Copied, with ``_planted.json`` and ``_hidden_employee_data.csv``, into a temporary copy of the
workspace by ``EdaTask.evaluate``; agents never see it. Every check reads the deliverables lazily inside
the test, so a broken deliverable fails tests one by one instead of breaking collection. The text
checks accept many wordings (keyword sets, signed coefficients, per-department rates) but refuse a
claim in the wrong direction.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

HERE = Path.cwd()
CATEGORIES = ("distributions", "relationships", "subgroup_effects", "outliers", "missing_data")
MIN_SUMMARY_WORDS = 100
ANALYTIC_KEYWORDS = (
    "distribution", "correlat", "relationship", "subgroup", "outlier", "missing", "median",
    "mean", "percent", "rate", "bimodal", "department", "driver",
)
MIN_ANALYTIC_KEYWORDS = 4
MIN_REPORTED_CORRELATION = 0.1  # weaker coefficients are noise, not a claimed direction

# --- wording-robust text checks -------------------------------------------------------------------

_CLAUSE_SPLIT = re.compile(
    r"(?:[.;!?](?!\d)|,(?!\d)|:(?!\d)|\n|\bwhereas\b|\bwhile\b|\bbut\b|\bcompared (?:to|with)\b|\bvs\.?|\bversus\b)",
    re.IGNORECASE,
)
_SAT = r"satisf\w*"
_SAT_WORD = re.compile(r"satisf\w*")
_SAT_LOW_WORD = re.compile(r"(?:dissatisf|unsatisf|unhappy|disengag)\w*")
_CHURN = r"(?:churn\w*|attrition|turnover|leav\w*|left|quit\w*|exit\w*|retention|retain\w*)"
_CHURN_WORD = re.compile(_CHURN)
_RETENTION_WORD = re.compile(r"retention|retain\w*")
_UP_WORD = re.compile(
    r"(?:high|higher|highest|more|most|greater|greatest|elevated|increas\w*|larger|rises?|rising|"
    r"grows?|better|improv\w*|above|exceeds?)"
)
_DOWN_WORD = re.compile(
    r"(?:low|lower|lowest|less|least|fewer|fewest|reduc\w*|decreas\w*|declin\w*|drops?|dropping|"
    r"falls?|falling|smaller|below|poor|poorer|worse)"
)
_MAX_PAIR_DISTANCE = 5  # words between a level word and the noun it qualifies


def _clauses(text: str) -> list[str]:
    return [c for c in _CLAUSE_SPLIT.split(text) if c and c.strip()]


def _clause_levels(clause: str) -> tuple[set[str], set[str]]:
    """Levels ("up"/"down") the clause gives satisfaction and churn.

    Each level word is paired with the nearest noun (greedy by distance, one level per noun, a tie
    going to the noun that follows), so "churn is higher among low-satisfaction staff" pairs "low" with
    satisfaction and "higher" with churn. Retention words count as churn with the level flipped;
    "dissatisfied" is satisfaction with a low level built in.
    """
    words = re.findall(r"[a-z]+", clause.lower())
    nouns, levels = [], []
    sat: set[str] = set()
    for i, w in enumerate(words):
        if _SAT_LOW_WORD.fullmatch(w):
            sat.add("down")
        elif _SAT_WORD.fullmatch(w):
            nouns.append((i, "sat", False))
        elif _CHURN_WORD.fullmatch(w):
            nouns.append((i, "churn", _RETENTION_WORD.fullmatch(w) is not None))
        elif _UP_WORD.fullmatch(w):
            levels.append((i, "up"))
        elif _DOWN_WORD.fullmatch(w):
            levels.append((i, "down"))
    pairs = sorted(
        (abs(n[0] - lv[0]), 0 if n[0] > lv[0] else 1, li, ni)
        for li, lv in enumerate(levels)
        for ni, n in enumerate(nouns)
        if abs(n[0] - lv[0]) <= _MAX_PAIR_DISTANCE
    )
    used_levels: set[int] = set()
    used_nouns: set[int] = set()
    churn: set[str] = set()
    for _, _, li, ni in pairs:
        if li in used_levels or ni in used_nouns:
            continue
        used_levels.add(li)
        used_nouns.add(ni)
        level = levels[li][1]
        _, kind, flip = nouns[ni]
        if flip:
            level = "down" if level == "up" else "up"
        (sat if kind == "sat" else churn).add(level)
    return sat, churn


def satisfaction_direction(text: str) -> set[str]:
    """Directions of the satisfaction-churn relationship claimed in ``text`` ("negative"/"positive").

    Signals: words (negative/inverse vs positive), signed correlation coefficients, and clauses pairing
    a satisfaction level with a churn level ("low satisfaction ... higher churn"; "higher satisfaction
    ... better retention" is negative for churn).
    """
    found: set[str] = set()
    low = text.lower()
    # a statement about retention (and not churn) has the opposite sign for churn
    flip = bool(_RETENTION_WORD.search(low)) and not re.search(r"churn|attrition|turnover|leav|quit|exit", low)
    signs = {"negative": "positive", "positive": "negative"} if flip else {"negative": "negative", "positive": "positive"}
    if re.search(r"\b(?:negative(?:ly)?|inverse(?:ly)?|anti-?correlat\w*)\b", low):
        found.add(signs["negative"])
    if re.search(r"\bpositive(?:ly)?\s+(?:\w+\s+){0,2}(?:correlat|associat|relat|link)", low):
        found.add(signs["positive"])
    coefficient = (
        r"(?:\br\b|\brho\b|ρ|corr\w*|coefficient|pearson|spearman|biserial)[^\n]{0,40}?"
        r"(?<![\d.])([-−–]?)\s?(0?\.\d+|1\.0+)\b"
    )
    for m in re.finditer(coefficient, low):
        if float(m.group(2)) >= MIN_REPORTED_CORRELATION:
            found.add(signs["negative"] if m.group(1) else signs["positive"])
    for clause in _clauses(low):
        sat, churn = _clause_levels(clause)
        if len(sat) != 1 or len(churn) != 1:
            continue  # no pairing, or a clause naming both levels (a comparison read from its parts)
        found.add("negative" if sat != churn else "positive")
    return found


_BIMODAL = re.compile(
    r"\bbi-?modal\w*|\btwo[- ](?:\w+[- ]){0,2}(?:tiers?|modes?|peaks?|clusters?|groups?|bands?|levels?|"
    r"populations?|humps?|regimes?|segments?)\b|\b2 (?:tiers|modes|peaks|clusters|groups|bands)\b|"
    r"\btwo-tier\w*|\bdual[- ]\w+|\btiered\b|\bmixture of two\b",
    re.IGNORECASE,
)
_UNIMODAL = re.compile(r"\buni-?modal\b|\bsingle (?:mode|peak)\b|\bnot bi-?modal\b|\bno (?:evidence of )?bi-?modal", re.IGNORECASE)


def claims_bimodal(text: str) -> bool:
    return _BIMODAL.search(text) is not None and _UNIMODAL.search(text) is None


_HIGH_WORDS = re.compile(r"\b(?:highest|most|largest|greatest|max\w*|top|worst|peaks?)\b", re.IGNORECASE)
_LOW_WORDS = re.compile(r"\b(?:lowest|least|smallest|fewest|min\w*|best retention|bottom)\b", re.IGNORECASE)


_OTHER_METRIC = re.compile(
    r"\b(?:salar\w*|pay|wage\w*|compensation|tenure|hours?|satisf\w*|projects?|size|headcount|staff(?:ed)?)\b", re.IGNORECASE
)
_HEAD_COUNT = re.compile(r"\bn\s*[=:]\s*$")  # "(n=95" just before a number: a count, not a rate
RATE_WINDOW_CHARS = 40  # how far after a department name its rate is looked for


def department_claims(text: str, departments: list[str]) -> dict[str, set[str]]:
    """Departments claimed to have the highest and the lowest churn.

    Read two ways: per-department rates written as "<Dept> ... <percentage or 0.xx>" (all departments
    needed; head counts such as "n=95" are skipped), and superlatives paired with the nearest
    department name in the same clause (clauses about another metric, without a churn word, skipped).
    """
    claims: dict[str, set[str]] = {"highest": set(), "lowest": set()}
    rates = {}
    names = "|".join(departments)
    for d in departments:
        for m in re.finditer(rf"\b{d}\b", text, re.IGNORECASE):
            window = re.split(rf"\b(?:{names})\b", text[m.end() : m.end() + RATE_WINDOW_CHARS], flags=re.IGNORECASE)[0]
            for num in re.finditer(r"(?<![\d.])(\d{1,3}(?:\.\d+)?)\s*(%?)", window):
                if _HEAD_COUNT.search(window[: num.start()]):
                    continue
                value = float(num.group(1))
                if num.group(2) or ("." in num.group(1) and value <= 1):
                    rates.setdefault(d, value / 100 if num.group(2) else value)
                    break
            if d in rates:
                break
    if len(rates) == len(departments):
        claims["highest"].add(max(rates, key=rates.get))
        claims["lowest"].add(min(rates, key=rates.get))
    for clause in _clauses(text):
        positions = [(m.start(), m.end(), m.group(0)) for m in re.finditer(rf"\b(?:{names})\b", clause, re.IGNORECASE)]
        if not positions or (_OTHER_METRIC.search(clause) and not re.search(_CHURN, clause, re.IGNORECASE)):
            continue
        for key, pattern in (("highest", _HIGH_WORDS), ("lowest", _LOW_WORDS)):
            for w in pattern.finditer(clause):
                nearest = min(positions, key=lambda p, w=w: w.start() - p[1] if p[1] <= w.start() else p[0] - w.end())
                canon = next(d for d in departments if d.lower() == nearest[2].lower())
                claims[key].add(canon)
    return claims


# --- loading the deliverables ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def planted() -> dict:
    return json.loads((HERE / "_planted.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def data() -> pd.DataFrame:
    return pd.read_csv(HERE / "_hidden_employee_data.csv")


def _load_config():
    """The team's config module, imported afresh (it runs in the workspace's own process; its values come back
    as plain data)."""
    if not (HERE / "config.py").exists():
        pytest.fail("config.py is missing")
    sys.modules.pop("config", None)
    try:
        return importlib.import_module("config")
    except Exception as exc:  # noqa: BLE001 - any failure of the agents' module is a failed check
        pytest.fail(f"config.py does not import: {exc!r}")


@pytest.fixture
def config():
    return _load_config()


@pytest.fixture
def findings() -> dict:
    path = HERE / "findings.json"
    if not path.exists():
        pytest.fail("findings.json is missing")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        pytest.fail(f"findings.json is not valid JSON: {exc}")
    if not isinstance(value, dict):
        pytest.fail("findings.json is not a JSON object")
    return value


@pytest.fixture
def summary() -> str:
    path = HERE / "summary.txt"
    if not path.exists():
        pytest.fail("summary.txt is missing")
    return path.read_text(encoding="utf-8", errors="replace")


def _entry_text(entry) -> str:
    if isinstance(entry, dict):
        parts = [entry.get("finding", ""), entry.get("supporting_evidence", "")]
        parts += [v for k, v in entry.items() if k not in ("finding", "supporting_evidence")]
        return " ".join(json.dumps(p) if not isinstance(p, str) else p for p in parts)
    return json.dumps(entry) if not isinstance(entry, str) else entry


def _entries(findings: dict, categories) -> list[str]:
    out = []
    for c in categories:
        value = findings.get(c)
        if isinstance(value, list):
            out += [_entry_text(e) for e in value]
    return out


def _mentions(text: str, semantic: str, opaque: str, extra: tuple[str, ...] = ()) -> bool:
    words = (semantic, semantic.replace("_", " "), opaque, *extra)
    return any(re.search(rf"\b{re.escape(w)}", text, re.IGNORECASE) for w in words)


def _satisfaction_entries(findings: dict, planted: dict) -> list[str]:
    return [
        t for t in _entries(findings, ("relationships", "subgroup_effects"))
        if _mentions(t, "satisfaction", planted["satisfaction_column"], ("satisfied",))
    ]


# --- the suite ------------------------------------------------------------------------------------


class TestOutputContract:
    def test_config_exists(self):
        assert (HERE / "config.py").exists()

    def test_config_importable(self, config):
        assert config is not None

    def test_findings_exists(self):
        assert (HERE / "findings.json").exists()

    def test_findings_has_all_categories(self, findings):
        assert set(CATEGORIES) <= set(findings), f"missing: {set(CATEGORIES) - set(findings)}"

    def test_categories_are_nonempty_lists(self, findings):
        for c in CATEGORIES:
            assert isinstance(findings.get(c), list) and findings[c], c

    def test_entries_have_finding_and_evidence(self, findings):
        for c in CATEGORIES:
            for e in findings.get(c) or [None]:
                assert isinstance(e, dict) and str(e.get("finding", "")).strip(), c
                assert str(e.get("supporting_evidence", "")).strip(), c

    def test_evidence_is_quantitative(self, findings):
        for c in CATEGORIES:
            for e in findings.get(c) or [None]:
                evidence = json.dumps(e.get("supporting_evidence")) if isinstance(e, dict) else ""
                assert re.search(r"\d", evidence), f"{c}: supporting_evidence has no number"

    def test_summary_exists(self):
        assert (HERE / "summary.txt").exists()

    def test_summary_is_not_placeholder(self, summary):
        assert not re.search(r"\b(?:todo|tbd|lorem ipsum|placeholder)\b", summary, re.IGNORECASE)
        assert summary.strip()


class TestConfigCompleteness:
    def test_all_columns_mapped(self, config, planted):
        assert set(planted["column_map"]) <= set(config.COLUMN_MAP)

    def test_no_extra_keys(self, config, planted):
        assert set(config.COLUMN_MAP) <= set(planted["column_map"])

    def test_values_unique(self, config):
        values = list(config.COLUMN_MAP.values())
        assert len(values) == len(set(values))

    def test_values_use_the_given_names(self, config, planted):
        assert set(config.COLUMN_MAP.values()) == set(planted["column_map"].values())

    def test_target_among_values(self, config):
        assert config.TARGET in config.COLUMN_MAP.values()

    def test_features_among_values(self, config):
        features = list(config.NUMERIC_FEATURES) + list(config.CATEGORICAL_FEATURES)
        assert features and set(features) <= set(config.COLUMN_MAP.values())

    def test_feature_lists_disjoint_and_exclude_target(self, config):
        numeric, categorical = set(config.NUMERIC_FEATURES), set(config.CATEGORICAL_FEATURES)
        assert not numeric & categorical
        assert config.TARGET not in numeric | categorical


class TestConfigAccuracy:
    def test_target_column_is_binary(self, config, data):
        renamed = data.rename(columns=config.COLUMN_MAP)
        assert config.TARGET in renamed
        assert set(pd.unique(renamed[config.TARGET])) <= {0, 1}

    def test_target_is_the_churn_column(self, config, planted):
        inverse = {v: k for k, v in config.COLUMN_MAP.items()}
        assert config.TARGET == planted["target"]
        assert inverse.get(config.TARGET) == planted["target_column"]

    def test_mapping_matches_truth(self, config, planted):
        wrong = {k: v for k, v in planted["column_map"].items() if config.COLUMN_MAP.get(k) != v}
        assert not wrong, f"wrongly mapped columns: {sorted(wrong)}"

    def test_feature_types_match_data(self, config, data):
        renamed = data.rename(columns=config.COLUMN_MAP)
        for f in config.NUMERIC_FEATURES:
            assert pd.api.types.is_numeric_dtype(renamed[f]), f
        for f in config.CATEGORICAL_FEATURES:
            assert not pd.api.types.is_numeric_dtype(renamed[f]), f

    def test_feature_lists_complete(self, config, planted):
        assert set(config.NUMERIC_FEATURES) == set(planted["numeric_features"])
        assert set(config.CATEGORICAL_FEATURES) == set(planted["categorical_features"])


class TestPlantedFindings:
    def test_satisfaction_finding_exists(self, findings, planted):
        entries = _satisfaction_entries(findings, planted)
        assert entries and any(re.search(_CHURN, t, re.IGNORECASE) for t in entries)

    def test_satisfaction_direction_is_negative(self, findings, planted):
        directions = set().union(*[satisfaction_direction(t) for t in _satisfaction_entries(findings, planted)] or [set()])
        assert directions == {"negative"}, f"satisfaction-churn direction read as {sorted(directions) or 'absent'}"

    def test_salary_reported_bimodal(self, findings, planted):
        texts = [
            t for t in _entries(findings, CATEGORIES)
            if _mentions(t, "salary", planted["salary_column"], ("pay", "compensation", "wage"))
        ]
        assert texts, "no finding mentions salary"
        assert any(claims_bimodal(t) for t in texts), "no salary finding reports two tiers / bimodality"
        assert not any(_UNIMODAL.search(t) for t in texts), "a salary finding calls it unimodal"

    def test_department_entry_exists(self, findings, planted):
        texts = [
            t for t in _entries(findings, ("subgroup_effects", "relationships"))
            if _mentions(t, "dept", planted["dept_column"], ("department", *planted["departments"]))
        ]
        assert texts and any(re.search(_CHURN, t, re.IGNORECASE) for t in texts)

    @pytest.mark.parametrize("which", ["highest", "lowest"])
    def test_department_extremes(self, findings, planted, which):
        claims: set[str] = set()
        for t in _entries(findings, ("subgroup_effects", "relationships")):
            if re.search(_CHURN, t, re.IGNORECASE):
                claims |= department_claims(t, planted["departments"])[which]
        truth = planted[f"{which}_churn_dept"]
        assert claims == {truth}, f"{which} churn department read as {sorted(claims) or 'absent'}, expected {truth}"


class TestNarrative:
    def test_length(self, summary):
        assert len(summary.split()) >= MIN_SUMMARY_WORDS

    def test_mentions_churn(self, summary):
        assert re.search(r"\bchurn", summary, re.IGNORECASE)

    def test_satisfaction_driver_direction(self, summary):
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", summary) if re.search(_SAT, s, re.IGNORECASE)]
        directions = set().union(*[satisfaction_direction(s) for s in sentences] or [set()])
        assert directions == {"negative"}, f"summary reads satisfaction-churn as {sorted(directions) or 'absent'}"

    def test_analytic_vocabulary(self, summary):
        hits = [k for k in ANALYTIC_KEYWORDS if k in summary.lower()]
        assert len(hits) >= MIN_ANALYTIC_KEYWORDS, hits


class TestDataQuality:
    def test_placeholder_declared(self, config, planted):
        declared = getattr(config, "MISSING_VALUES", None)
        assert isinstance(declared, dict), "config.MISSING_VALUES is missing or not a dict"
        expected = planted["missing_values"]
        assert set(declared) == set(expected), f"placeholders declared for {sorted(declared)}"
        for column, value in expected.items():
            assert float(declared[column]) == float(value), f"{column}: {declared[column]!r}"

    def test_missing_data_reports_the_placeholder(self, findings, planted, data):
        texts = _entries(findings, ("missing_data",))
        for column, value in planted["missing_values"].items():
            opaque = {v: k for k, v in planted["column_map"].items()}[column]
            hits = [t for t in texts if _mentions(t, column, opaque) and re.search(rf"(?<![\d.]){value:g}(?![\d])", t)]
            assert hits, f"no missing_data entry names {column} and its placeholder {value:g}"
            count = planted["placeholder_rows"]
            share = f"{100 * count / len(data):.1f}"
            assert any(re.search(rf"(?<![\d.])(?:{count}|{share})(?![\d])", t) for t in hits), \
                f"the missing_data entry on {column} does not say how many rows ({count}) hold the placeholder"
