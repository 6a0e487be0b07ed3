"""Notebook 02's two team dropdowns, every option (tests/viz/test_notebook_widgets.py has the rest: a file of its
own, so that another of the suite's workers runs it)."""

from __future__ import annotations

import pytest
from test_notebook_widgets import explorer_failures


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_team_option_of_the_trial_explorer_runs():
    failures = explorer_failures(("form.team", "form.team2"))
    assert not failures, "\n".join(failures)
