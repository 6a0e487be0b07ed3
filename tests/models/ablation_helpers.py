"""What the ablation tests of the simulated model share: a model that changes what the simulated model is
shown and records its replies, and a trial run with it."""

from __future__ import annotations

from pathlib import Path

import latte_lab as ll
from latte_lab.models.sim import SimulatedModel


class Wrapped:
    """A model that changes what the simulated model is shown, and records the replies."""

    def __init__(self, change=None, **kw):
        self.inner = SimulatedModel(**kw)
        self.change = change
        self.replies: list[str] = []

    def generate(self, request):
        if self.change is not None:
            request = self.change(request)
        response = self.inner.generate(request)
        self.replies.append(response.text)
        return response

    def describe(self) -> dict:
        return self.inner.describe()


def trial(task: str, team: str, seed: int, model, tmp: Path, **kw):
    cfg = ll.TrialConfig(task=task, team=team, model="simulated", seed=seed, sandbox="local", **kw)
    return ll.run_trial(cfg, model=model, runs_dir=tmp)
