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
