"""An ablation of what a simulated agent is shown (with ``test_simulated_ablations.py``): eda's hidden unit, the
satisfaction column's placeholder 99, shows only through the data profile agents run; take the value out of
every prompt and no team ever declares it. A file of its own, so that the suite's workers can run it beside the
other ablations."""

from __future__ import annotations

import re
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from ablation_helpers import Wrapped, trial

from latte_lab.models.base import Message
from latte_lab.models.view import frame_of, view_from_prompt

# ------------------------------------------------- the data's placeholder, taken out of every prompt ----

PLACEHOLDER = re.compile(r"(?<![\w.])99(?:\.0+)?(?![\w]|\.\d)")  # eda's satisfaction placeholder, as a number


def _hide_placeholder(request):
    """Every prompt with the placeholder value taken out (the profile still runs and shows the rest)."""
    system = PLACEHOLDER.sub("", request.system)
    messages = [Message(m.role, PLACEHOLDER.sub("", m.content)) for m in request.messages]
    return replace(request, system=system, messages=messages,
                   view=view_from_prompt(frame_of(request.view), system, messages))


def _declares_placeholder(run_dir: Path) -> bool:
    """Whether the team's config.py ends up declaring a placeholder for satisfaction."""
    return any(re.search(r"MISSING_VALUES\s*=\s*\{[^}]*satisfaction", c.read_text())
               for c in run_dir.rglob("workspace/config.py"))


@pytest.mark.slow
def test_the_data_placeholder_is_declared_only_when_a_prompt_showed_it():
    """eda's hidden unit (satisfaction's placeholder 99) shows only through the data profile agents run: with
    the value taken out of every prompt, no team of 20 trials declares it; as shipped, the same trials do."""

    def declared(change, seeds) -> int:
        n = 0
        for seed in seeds:
            with tempfile.TemporaryDirectory() as tmp:
                trial("eda", "latte", seed, Wrapped(change), Path(tmp), n_workers=2, max_rounds=6)
                n += _declares_placeholder(Path(tmp))
        return n

    assert declared(_hide_placeholder, range(20)) == 0
    assert declared(None, range(5)) >= 4


DATA_QUALITY = ("TestDataQuality::test_placeholder_declared", "TestDataQuality::test_missing_data_reports_the_placeholder")
SATISFACTION = ("TestPlantedFindings::test_satisfaction_direction_is_negative",)


@pytest.mark.slow
def test_findings_written_without_the_placeholder_fail_its_hidden_tests():
    """The findings are computed from the analysis an agent ran with the team's schema, never copied: with the
    placeholder taken out of every prompt, no schema declares it, the analysis takes 99 for a score, and the
    data-quality tests and the satisfaction finding fail in at least 9 of 10 trials that wrote their findings;
    as shipped, the same test passes them in some (it can tell the two apart)."""

    def outcomes(change, seeds) -> list[tuple[bool, bool]]:
        out = []
        for seed in seeds:
            with tempfile.TemporaryDirectory() as tmp:
                res = trial("eda", "latte", seed, Wrapped(change), Path(tmp))
                if "findings.json" in res.eval.get("missing_outputs", ["findings.json"]):
                    continue  # nothing written: the test says nothing about what was written
                bad = set(res.eval["failed_tests"])
                out.append((all(t in bad for t in DATA_QUALITY), all(t in bad for t in SATISFACTION)))
        return out

    hidden = outcomes(_hide_placeholder, range(10))
    assert len(hidden) >= 9, hidden
    assert sum(dq for dq, _ in hidden) >= 9 and sum(sat for _, sat in hidden) >= 9, hidden
    shipped = outcomes(None, range(5))
    assert sum(not dq for dq, _ in shipped) >= 2 and sum(not sat for _, sat in shipped) >= 2, shipped
