"""Ablations of what a simulated agent is shown: the model knows only what its prompts showed it.

- Take away the one observation that reveals a piece of hidden work, and no agent ever finds it (eda's data
  placeholder: ``test_simulated_ablations_data.py``).
- Replace the task's name wherever a prompt (or its frame) carries it, and no decision changes.
- Empty the files an agent has read from its view, and its patches stop being right.
- And no module of the simulated model but the fix book reads task internals.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from ablation_helpers import Wrapped, trial

import latte_lab as ll
from latte_lab.models.base import Message
from latte_lab.models.view import frame_of, view_from_prompt
from latte_lab.tasks.textproc import TextprocTask

SIM = Path(ll.__file__).parent / "models" / "sim"
APOSTROPHE_UNIT = "fix-Tokenizer-tokenize_words"  # the id every agent gives the tokenizer's hidden defect


# ------------------------------------------------------------------------------------ the grep ----

def test_no_module_but_the_fix_book_reads_task_internals():
    """The fix book is the only module of models/sim that imports the tasks, and it keeps no task id."""
    internals = re.compile(r"latte_lab\.tasks|from latte_lab import tasks|work_units|reference_solution|"
                           r"\.task\b|task_id|skill_for")
    offenders = {p.name: sorted(set(internals.findall(p.read_text())))
                 for p in sorted(SIM.glob("*.py")) if p.name != "fixbook.py"}
    assert {k: v for k, v in offenders.items() if v} == {}
    book = (SIM / "fixbook.py").read_text()
    assert "task.id" not in book and "task_id" not in book and ".work_units" not in book


def _masker(name: str):
    """Replaces a task id (whole word, any case) in the system prompt, every message and the frame by a
    neutral word of the same length (so token counts, which follow the prompt's length, stay the same)."""
    pat = re.compile(rf"\b{re.escape(name)}\b", re.IGNORECASE)
    word = "zqxj" * len(name)
    word = word[:len(name)]

    def change(request):
        system = pat.sub(word, request.system)
        messages = [Message(m.role, pat.sub(word, m.content)) for m in request.messages]
        frame = replace(frame_of(request.view), task=word)
        return replace(request, system=system, messages=messages, view=view_from_prompt(frame, system, messages))

    return change


def _no_reads(request):
    return replace(request, view=replace(request.view, files_read={}))


# --------------------------------------------------------------------------- the masked name ----

@pytest.mark.parametrize("task,team", [("debug", "latte"), ("textproc", "decentralized"), ("eda", "latte")])
def test_masking_the_task_name_in_every_prompt_changes_no_decision(tmp_path, task, team):
    plain, masked = Wrapped(), Wrapped(_masker(task))
    a = trial(task, team, 3, plain, tmp_path / "a", n_workers=3, max_rounds=10)
    b = trial(task, team, 3, masked, tmp_path / "b", n_workers=3, max_rounds=10)
    assert len(plain.replies) >= 5  # the trial did work (eda with 3 workers can end in 4 rounds)
    assert masked.replies == plain.replies
    assert (a.accuracy, a.rounds, a.tokens) == (b.accuracy, b.rounds, b.tokens)


# ------------------------------------------------------------------------------- no read files ----

@pytest.mark.slow
def test_a_model_shown_no_read_files_collapses(tmp_path):
    """The same trials with the files each agent read taken out of its view: its patches are blind."""
    seeds = range(2)
    base = [trial("textproc", "static", s, Wrapped(), tmp_path / f"a{s}", max_rounds=16).accuracy for s in seeds]
    blind = [trial("textproc", "static", s, Wrapped(_no_reads), tmp_path / f"b{s}", max_rounds=16).accuracy
             for s in seeds]
    assert min(base) >= 0.6, base
    assert max(blind) <= 0.2, blind


# --------------------------------------------------------------------- a symptom taken away ----

class PlainTextprocTask(TextprocTask):
    """textproc whose sample review is typed with plain apostrophes: nothing it states shows the defect."""

    id = "textproc_plain_apostrophes"
    description = TextprocTask.description.replace("\u2019", "'")


def _found_apostrophes(run_dir: Path) -> bool:
    """Whether any agent named the tokenizer's defect as work (its replies: a task, an announcement, a report)."""
    return any(APOSTROPHE_UNIT in json.loads(line).get("text", "")
               for events in run_dir.rglob("events.jsonl") for line in events.read_text().splitlines()
               if '"agent_reply"' in line)


@pytest.mark.slow
def test_hidden_work_whose_symptom_is_taken_away_is_never_found():
    """The tokenizer's defect shows only through the description's sample review: typed with plain
    apostrophes, no agent of 20 trials ever names it; as shipped, most short trials find it."""
    ll.tasks.register(PlainTextprocTask)
    assert "\u2019" in TextprocTask.description and "\u2019" not in PlainTextprocTask.description

    def found(task: str, seeds) -> int:
        n = 0
        for seed in seeds:
            with tempfile.TemporaryDirectory() as tmp:
                trial(task, "latte", seed, None, Path(tmp), n_workers=2, max_rounds=8)
                n += _found_apostrophes(Path(tmp))
        return n

    assert found(PlainTextprocTask.id, range(20)) == 0
    assert found("textproc", range(10)) >= 7  # the same trials with the symptom in the sample text
