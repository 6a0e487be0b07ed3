"""What a simulated agent makes of its prompt is what the prompt's text says, and nothing the task keeps to itself:

- the description taken out of every prompt: the Lead's plan is empty (the tests and files it explores show
  failures, which are work no plan holds, and no part of a description);
- a file named alone: no unit beyond that file, and its description quotes only the prompt;
- any mix of a description's paragraphs: every unit's file, symbol and description line is in the text;
- the description reworded (the same meaning in other words): the trials' outcomes stay within noise.
"""

from __future__ import annotations

import random
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from ablation_helpers import Wrapped, trial
from hypothesis import given, settings
from hypothesis import strategies as st

import latte_lab as ll
from latte_lab.models.base import Message
from latte_lab.models.sim.skill import skill_from_text
from latte_lab.models.view import frame_of, view_from_prompt

TASKS = ("debug", "textproc", "eda")
REWORDED = Path(__file__).parent / "data" / "reworded_debug.md"


def _replacing(old: str, new: str):
    """A change of every prompt: ``old`` (a task's description) replaced by ``new``."""

    def change(request):
        system = request.system.replace(old, new)
        messages = [Message(m.role, m.content.replace(old, new)) for m in request.messages]
        return replace(request, system=system, messages=messages,
                       view=view_from_prompt(frame_of(request.view), system, messages))

    return change


def _discovered(replies: list[str]) -> list[str]:
    return re.findall(r'<(?:discover_task|plan_task) id="([^"]+)"', "\n".join(replies))


# ------------------------------------------------------------------------ no description, no plan ----

@pytest.mark.parametrize("task", TASKS)
def test_without_the_description_the_leads_plan_is_empty(tmp_path, task):
    described = ll.tasks.get(task).description
    plain, blank = Wrapped(), Wrapped(_replacing(described, ""))
    trial(task, "latte", 0, plain, tmp_path / "a", max_rounds=1)
    trial(task, "latte", 0, blank, tmp_path / "b", max_rounds=1)
    assert _discovered(plain.replies)  # as shipped, the Lead plans from the description
    assert not any(described[:60] in r for r in blank.replies)
    assert _discovered(blank.replies) == []


# --------------------------------------------------------------------------- a file named alone ----

@pytest.mark.parametrize("text,files", [
    ("Please finish pipeline.py and summarizer.py.", {"pipeline.py", "summarizer.py"}),
    ("Have a look at findings.json.", {"findings.json"}),
    ("Fix signal_toolkit.py.", set()),  # an existing module the text asks nothing particular of: no unit
    ("tokenizer.py", set()),
])
def test_a_file_named_alone_gives_no_unit_beyond_that_file(text, files):
    skill = skill_from_text(text)
    assert {f for u in skill.units for f in u.files} <= files
    for u in skill.units:
        assert u.deps == () or set(u.deps) <= {v.id for v in skill.units}
        body = u.description.split("\n", 1)[1] if "\n" in u.description else ""
        assert body.strip() in text, u.description  # it quotes the prompt, nothing else


# ---------------------------------------------------------------------- any text: only what it says ----

def _paragraphs(task: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n|\n(?=- |\d+\. )", ll.tasks.get(task).description) if p.strip()]


PARAGRAPHS = [(task, p) for task in TASKS for p in _paragraphs(task)]


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(range(len(PARAGRAPHS))), min_size=1, max_size=8, unique=True))
def test_the_units_of_any_text_hold_only_what_the_text_says(picked):
    text = "\n\n".join(PARAGRAPHS[i][1] for i in sorted(picked))
    skill = skill_from_text(text)
    lines = {ln.strip() for ln in text.splitlines() if ln.strip()}
    words = set(re.findall(r"[A-Za-z_]\w*", text))
    for u in skill.visible_units():
        assert all(f in text for f in u.files), (u.id, u.files)
        for sym in u.symbols:  # a name the text gives (a member: its own name and its class's)
            assert set(sym.split(".")) <= words | {"__init__"}, (u.id, sym)
        quoted = [ln.strip() for ln in u.description.splitlines()[1:] if ln.strip()]
        for ln in quoted:
            if ln.startswith((">>>", "Examples:")) or u.id.startswith("check-") and " calls " in ln:
                continue  # an example the text shows, a check's own sentence
            assert ln in lines or any(ln in x for x in lines) or ln.removeprefix("Make ") != ln, (u.id, ln)
        assert set(u.deps) <= {v.id for v in skill.units}


def test_the_reference_decides_no_unit_of_a_text():
    """Two texts that differ only in a word the reference knows give units that differ only there."""
    a = skill_from_text("Complete summarizer.py: Summarizer().summarize(text) returns one sentence.")
    b = skill_from_text("Complete summarizer.py: Summarizer().shorten(text) returns one sentence.")
    assert [u.id for u in a.units] == [u.id for u in b.units] == ["summarizer"]
    assert "summarize" in a.unit("summarizer").description and "summarize(" not in b.unit("summarizer").description


# ------------------------------------------------------------------- a reworded description ----

@pytest.mark.slow
def test_a_reworded_description_leaves_the_outcomes_within_noise(tmp_path):
    """debug's description in other words (the same functions, contracts and files): accuracy and rounds over
    the same 8 seeds differ by less than their noise (a two-sided permutation test at the 1% level; and the mean
    accuracy by at most 0.15)."""
    task = ll.tasks.get("debug")
    reworded = REWORDED.read_text(encoding="utf-8")
    assert reworded.strip() != task.description.strip()
    seeds = range(8)
    plain = [trial("debug", "latte", s, Wrapped(), tmp_path / f"a{s}") for s in seeds]
    other = [trial("debug", "latte", s, Wrapped(_replacing(task.description, reworded)), tmp_path / f"b{s}")
             for s in seeds]
    for measure in ("accuracy", "rounds"):
        x = [float(getattr(r, measure)) for r in plain]
        y = [float(getattr(r, measure)) for r in other]
        assert _permutation_p(x, y) > 0.01, (measure, x, y)
    assert abs(statistics.mean(r.accuracy for r in plain) - statistics.mean(r.accuracy for r in other)) <= 0.15


def _permutation_p(x: list[float], y: list[float], n: int = 4000) -> float:
    """Two-sided permutation p-value of the difference in means (seeded: the same every run)."""
    rng = random.Random(0)
    observed = abs(statistics.mean(x) - statistics.mean(y))
    pooled = x + y
    hits = 0
    for _ in range(n):
        rng.shuffle(pooled)
        if abs(statistics.mean(pooled[:len(x)]) - statistics.mean(pooled[len(x):])) >= observed - 1e-12:
            hits += 1
    return (hits + 1) / (n + 1)
