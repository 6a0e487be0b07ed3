"""The simulated model: a seeded offline policy that plays every role of every team.

``SimulatedModel(profile="default")`` implements the :class:`~latte_lab.models.base.Model` protocol. It
reads the agent's prompt (the structured view the engine reads back from the prompt text, and the agent's
own earlier replies in its window), works out from that text what work exists and where (its own units,
``latte_lab.models.sim.skill``), takes the content of a correct patch from the fix book
(``latte_lab.models.sim.fixbook``), and answers in the same text protocol a real model writes: a short rationale, then action tags. Its
profile describes behaviour only; team-level results emerge from the protocols.

What an agent knows comes from its prompt: its chance of writing a unit correctly depends on whether the
prompt shows the current file, an observation pointing at the unit, and the units it builds on correct
(``latte_lab.models.sim.work``); work the description does not reveal is found only through
observations; what falls out of the history window is forgotten. What each role does is described in
``latte_lab.models.sim.policy`` and the modules it names.

Tokens are estimated with :func:`latte_lab.models.base.estimate_tokens` (four characters per token) for
the input (system prompt and messages) and the output. Latency is ``base_latency_s + input_tokens /
prefill_tokens_per_s + output_tokens / decode_tokens_per_s`` and drives the trial's virtual clock.

Determinism: every reply is a function of (scope.seed, scope.agent, scope.call_index), the view (the
frame's task id excluded: a project is known by its text and files, never by name) and the agent's own
earlier replies; no global random state is used. Tool output is normalised before it enters
a prompt (timings, paths and addresses removed), so a trial replays identically on any machine.

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
from latte_lab.models.sim.fixbook import fix_book
from latte_lab.models.sim.policy import decide
from latte_lab.models.sim.profiles import Profile, resolve_profile
from latte_lab.models.sim.text import reply_text
from latte_lab.models.sim.turn import Turn, stable_seed


def _decision_key(request: ModelRequest) -> str:
    """What the reply depends on: the view (read from the prompt text) and the agent's own replies."""
    v = request.view
    assert v is not None
    key = {
        "view": [v.role, v.agent, v.round, v.phase, list(v.allowed_actions), list(v.teammates),
                 v.current_task, v.frontier, v.graph, list(v.test_failures), v.tests_passed,
                 sorted(v.files_read), [m.get("sender") for m in v.messages], v.alerts, len(v.script_output)],
        "extra": v.extra,
        "own_replies": [m.content for m in request.messages if m.role == "assistant"],
    }
    return json.dumps(key, sort_keys=True, default=str)


class SimulatedModel:
    """Seeded offline agent model; see the module docstring.

    ``tasks`` optionally maps names to Task objects whose files and reference solutions join the fix book
    (for tasks built in tests or notebooks); the names are not used.
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
        book = fix_book(self.tasks)
        scope = request.scope
        rng = random.Random(stable_seed("call", scope.seed, scope.agent, scope.call_index, _decision_key(request)))
        turn = Turn(request=request, view=view, profile=self.profile, book=book, rng=rng)
        decide(turn)
        text = reply_text(turn.notes, turn.acts, self.profile.verbosity, rng)
        prompt_text = request.system + "".join(m.content for m in request.messages)
        usage = Usage(input_tokens=estimate_tokens(prompt_text), output_tokens=estimate_tokens(text))
        latency = self.profile.latency(usage.input_tokens, usage.output_tokens)
        return ModelResponse(text=text, usage=usage, latency_s=round(latency, 6), cached=False,
                             finish_reason="stop", model=f"simulated/{self.profile.name}")

    def describe(self) -> dict:
        """The profile's parameters (for run directories and notebooks)."""
        return asdict(self.profile)
