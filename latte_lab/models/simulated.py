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

Tokens are estimated as ``len(text) / CHARS_PER_TOKEN`` (4) for the input (system prompt and messages)
and the output; latency is ``base_latency_s + output_tokens / tokens_per_second`` and drives the trial's
virtual clock.

Determinism: every reply is a function of (scope.seed, scope.agent, scope.call_index), the structured
view and the agent's own earlier replies; no global random state is used. Free tool-output text
(timings, paths) does not enter the seed, so a trial replays identically on any machine.

>>> from latte_lab.models.simulated import PROFILES
>>> sorted(PROFILES)
['careful', 'default', 'fast']
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from latte_lab.errors import ConfigError, ModelError
from latte_lab.models.base import ModelRequest, ModelResponse, Usage
from latte_lab.models.sim.policy import Turn, decide, stable_seed
from latte_lab.models.sim.skill import skill_for
from latte_lab.models.sim.text import CHARS_PER_TOKEN, estimate_tokens, reply_text

__all__ = ["CHARS_PER_TOKEN", "PROFILES", "Profile", "SimulatedModel", "estimate_tokens", "resolve_profile"]


@dataclass(frozen=True)
class Profile:
    """Behavioural parameters of a simulated model (none of them names a team or an outcome)."""

    name: str = "custom"
    p_correct_patch: float = 0.85
    """Probability that one unit's patch is the correct one (else its plausible wrong variant)."""
    rounds_per_unit: tuple[float, float] = (0.5, 2.0)
    """Rounds of thought before the first write on a unit of effort 1 (uniform in this range)."""
    p_straggler: float = 0.08
    """Probability that a subtask takes much longer than usual (a straggler)."""
    straggler_extra_rounds: tuple[int, int] = (5, 9)
    """Extra rounds a straggling subtask takes (uniform integer range)."""
    p_reread: float = 0.5
    """Probability of re-reading a file right before writing it (fewer lost updates, one more turn)."""
    p_forget_complete: float = 0.05
    """Probability of finishing a task without emitting complete_task (for a while)."""
    verbosity: int = 60
    """Tokens of rationale per reply (±25%)."""
    chattiness: float = 0.2
    """Probability of an optional status broadcast in a turn."""
    base_latency_s: float = 2.0
    """Seconds of latency per call before the first output token."""
    tokens_per_second: float = 60.0
    """Output speed; latency = base_latency_s + output tokens / tokens_per_second."""

    def __post_init__(self) -> None:
        for name in ("p_correct_patch", "p_straggler", "p_reread", "p_forget_complete", "chattiness"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"Profile.{name} must be a probability in [0, 1], got {v!r}")
        lo, hi = self.rounds_per_unit
        if lo < 0 or hi < lo:
            raise ConfigError(f"Profile.rounds_per_unit must be (low, high) with 0 <= low <= high, got "
                              f"{self.rounds_per_unit!r}")
        a, b = self.straggler_extra_rounds
        if a < 0 or b < a:
            raise ConfigError(f"Profile.straggler_extra_rounds must be (low, high) with 0 <= low <= high, got "
                              f"{self.straggler_extra_rounds!r}")
        if self.verbosity < 0 or self.base_latency_s < 0 or self.tokens_per_second <= 0:
            raise ConfigError("Profile.verbosity and base_latency_s must be >= 0 and tokens_per_second > 0")


PROFILES: dict[str, Profile] = {
    "default": Profile(name="default"),
    # A deliberate model: nearly always right, slower per subtask and per token, re-reads before
    # writing, rarely forgets to close its task.
    "careful": Profile(name="careful", p_correct_patch=0.97, rounds_per_unit=(1.0, 2.5), p_straggler=0.05,
                       straggler_extra_rounds=(4, 8), p_reread=0.9, p_forget_complete=0.02, verbosity=110,
                       chattiness=0.25, base_latency_s=3.0, tokens_per_second=40.0),
    # A quick, sloppier model: wrong more often, rarely re-reads, more stragglers and forgotten
    # completions, terse and fast.
    "fast": Profile(name="fast", p_correct_patch=0.6, rounds_per_unit=(0.3, 1.2), p_straggler=0.15,
                    straggler_extra_rounds=(5, 10), p_reread=0.15, p_forget_complete=0.15, verbosity=35,
                    chattiness=0.1, base_latency_s=1.0, tokens_per_second=120.0),
}


def resolve_profile(profile: str | Profile) -> Profile:
    """A Profile from a name (``"careful"``, ``"simulated/careful"``) or a Profile instance."""
    if isinstance(profile, Profile):
        return profile
    name = str(profile or "default")
    if name.startswith("simulated"):
        name = name.partition("/")[2] or "default"
    if name not in PROFILES:
        raise ConfigError(f"unknown simulated profile {name!r}; known profiles: {', '.join(sorted(PROFILES))} "
                          "(or pass Profile(...) for a custom one)")
    return PROFILES[name]


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
