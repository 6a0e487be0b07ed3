"""The simulated model: a seeded offline policy that plays every role of every team.

``SimulatedModel(profile="default")`` implements the :class:`~latte_lab.models.base.Model` protocol. It
reads the structured view of the agent's prompt (``request.view``) and the agent's own earlier replies,
uses the task's reference decomposition and solution as its skill, and answers in the same text
protocol a real model writes: a short rationale, then action tags. Its profile describes behaviour
only (how often a patch is right, how long a subtask takes, how often it re-reads, forgets to mark a
task complete, talks); team-level results emerge from the protocols.

What each role does (details in ``latte_lab.models.sim.policy``): a Lead offered exploration plans in
two turns (run the tests, then discover the units the description reveals); a Lead offered only
``discover_task`` while planning writes the whole plan at once with ``<plan_task>``; during execution a
graph Lead assigns ready tasks to idle workers, releases and reassigns on heartbeat alerts, asks for
reviews of high-stakes nodes and adds fix tasks when tests stay red. Workers claim, read, think for a
few rounds, write whole files with their unit's symbols spliced in, run the tests, and complete (or
retry, or add follow-up tasks). Without a graph the Lead directs by broadcast ("Dev2: work on X") and
certifies on green tests; peers announce "I'm taking X"; pipeline roles publish documents and the
Engineer writes one file per turn.

Tokens are estimated with :func:`latte_lab.models.base.estimate_tokens` (four characters per token) for
the input (system prompt and messages) and the output; latency is ``base_latency_s + output_tokens / tokens_per_second`` and drives the trial's
virtual clock.

Determinism: every reply is a function of (scope.seed, scope.agent, scope.call_index), the structured
view and the agent's own earlier replies; no global random state is used. Free tool-output text
(timings, paths) does not enter the seed, so a trial replays identically on any machine.

>>> SimulatedModel("careful")
SimulatedModel(profile='careful')
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import asdict

from latte_lab.errors import ModelError
from latte_lab.models.base import ModelRequest, ModelResponse, Usage, estimate_tokens
from latte_lab.models.sim.policy import decide
from latte_lab.models.sim.profiles import Profile, resolve_profile
from latte_lab.models.sim.skill import skill_for
from latte_lab.models.sim.text import reply_text
from latte_lab.models.sim.turn import Turn, stable_seed


def _decision_key(request: ModelRequest) -> str:
    """What the reply depends on, minus free tool-output text.

    Test and script output carries timings and absolute paths, and the engine cuts it to a tail of
    fixed length, so its exact text differs between two runs of the same trial. The policy reads only
    the structured parts (failing test ids, statuses, file contents, its own earlier replies), so the
    seed is taken from those and a trial replays identically anywhere.
    """
    v = request.view
    assert v is not None
    key = {
        "view": [v.task, v.role, v.agent, v.round, v.phase, list(v.allowed_actions), list(v.teammates),
                 v.current_task, [f.get("id") for f in v.frontier],
                 [[n.get("id"), n.get("status"), n.get("owner")] for n in v.graph],
                 list(v.test_failures), v.tests_passed, v.test_output is None, sorted(v.files_read.items()),
                 [[a.get("agent"), a.get("task")] for a in v.alerts], [m.get("sender") for m in v.messages]],
        "extra": {k: val for k, val in v.extra.items() if k != "workers"},
        "workers": v.extra.get("workers"),
        "own_replies": [m.content for m in request.messages if m.role == "assistant"],
    }
    return json.dumps(key, sort_keys=True, default=str)


class SimulatedModel:
    """Seeded offline agent model; see the module docstring.

    ``tasks`` optionally maps task ids to Task objects to use instead of the task registry (for tasks
    built in tests or notebooks).
    """

    def __init__(self, profile: str | Profile = "default", *, tasks: Mapping[str, object] | None = None):
        self.profile = resolve_profile(profile)
        self.tasks = tasks

    def __repr__(self) -> str:
        return f"SimulatedModel(profile={self.profile.name!r})"

    def generate(self, request: ModelRequest) -> ModelResponse:
        view = request.view
        if view is None:
            raise ModelError("the simulated model needs request.view (the structured AgentView of the prompt); "
                             "it is set by latte_lab's teams — build one with latte_lab.models.base.AgentView")
        skill = skill_for(view.task, self.tasks)  # type: ignore[arg-type]
        scope = request.scope
        rng = random.Random(stable_seed("call", scope.seed, scope.agent, scope.call_index, _decision_key(request)))
        turn = Turn(request=request, view=view, profile=self.profile, skill=skill, rng=rng)
        decide(turn)
        text = reply_text(turn.notes, turn.acts, self.profile.verbosity, rng)
        prompt_text = request.system + "".join(m.content for m in request.messages)
        usage = Usage(input_tokens=estimate_tokens(prompt_text), output_tokens=estimate_tokens(text))
        latency = self.profile.base_latency_s + usage.output_tokens / self.profile.tokens_per_second
        return ModelResponse(text=text, usage=usage, latency_s=round(latency, 6), cached=False,
                             finish_reason="stop", model=f"simulated/{self.profile.name}")

    def describe(self) -> dict:
        """The profile's parameters (for run directories and notebooks)."""
        return asdict(self.profile)
