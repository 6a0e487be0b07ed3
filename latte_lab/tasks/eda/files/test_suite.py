"""Public form checks for the three deliverables (config.py, findings.json, summary.txt).

These tests check the FORM of the deliverables only. Passing them does not mean the analysis is
right: the team's findings are also scored by a private suite against the task description.
"""

import importlib
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATEGORIES = ["distributions", "relationships", "subgroup_effects", "outliers", "missing_data"]
MIN_SUMMARY_WORDS = 100


def load_config():
    sys.path.insert(0, str(HERE))
    try:
        sys.modules.pop("config", None)
        return importlib.import_module("config")
    finally:
        sys.path.remove(str(HERE))


def load_findings():
    return json.loads((HERE / "findings.json").read_text(encoding="utf-8"))


class TestConfig:
    def test_exists(self):
        assert (HERE / "config.py").exists(), "config.py is missing"

    def test_importable(self):
        load_config()

    def test_column_map(self):
        cmap = load_config().COLUMN_MAP
        assert isinstance(cmap, dict) and cmap

    def test_target(self):
        target = load_config().TARGET
        assert isinstance(target, str) and target

    def test_numeric_features(self):
        features = load_config().NUMERIC_FEATURES
        assert isinstance(features, list) and features

    def test_categorical_features(self):
        features = load_config().CATEGORICAL_FEATURES
        assert isinstance(features, list) and features

    def test_feature_lists_do_not_overlap(self):
        config = load_config()
        assert not set(config.NUMERIC_FEATURES) & set(config.CATEGORICAL_FEATURES)


class TestFindingsJson:
    def test_exists(self):
        assert (HERE / "findings.json").exists(), "findings.json is missing"

    def test_valid_json(self):
        assert isinstance(load_findings(), dict)

    def test_has_categories(self):
        missing = [c for c in CATEGORIES if c not in load_findings()]
        assert not missing, f"missing categories: {missing}"

    def test_categories_are_lists(self):
        findings = load_findings()
        for c in CATEGORIES:
            assert isinstance(findings.get(c), list), c

    def test_categories_not_empty(self):
        findings = load_findings()
        for c in CATEGORIES:
            assert findings.get(c), f"{c} is empty"

    def test_entries_have_finding(self):
        for c in CATEGORIES:
            for entry in load_findings().get(c) or []:
                assert isinstance(entry, dict) and entry.get("finding"), c

    def test_entries_have_evidence(self):
        for c in CATEGORIES:
            for entry in load_findings().get(c) or [None]:
                assert isinstance(entry, dict) and str(entry.get("supporting_evidence", "")).strip(), c


class TestSummary:
    def test_exists(self):
        assert (HERE / "summary.txt").exists(), "summary.txt is missing"

    def test_length(self):
        words = (HERE / "summary.txt").read_text(encoding="utf-8").split()
        assert len(words) >= MIN_SUMMARY_WORDS, f"{len(words)} words, need {MIN_SUMMARY_WORDS}"

    def test_not_placeholder(self):
        text = (HERE / "summary.txt").read_text(encoding="utf-8")
        assert not re.search(r"\b(todo|tbd|lorem ipsum|placeholder)\b", text, re.IGNORECASE)
