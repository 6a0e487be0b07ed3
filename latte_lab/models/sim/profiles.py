"""Profiles of the simulated model: behavioural parameters, each with its meaning and range.

A profile says how an agent works (how often a patch is right, how long a subtask takes, how often it
re-reads, forgets to mark a task complete, talks, how fast it answers); none of its fields names a team,
a task or an outcome.

>>> sorted(PROFILES)
['careful', 'default', 'fast']
>>> resolve_profile("simulated/careful").p_correct_patch
0.97
>>> Profile(p_straggler=1.5)
Traceback (most recent call last):
latte_lab.errors.ConfigError: Profile.p_straggler must be a probability in [0, 1], got 1.5
"""

from __future__ import annotations

from dataclasses import dataclass

from latte_lab.config import DEFAULT_SIMULATED_PROFILE
from latte_lab.errors import ConfigError


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
    DEFAULT_SIMULATED_PROFILE: Profile(name=DEFAULT_SIMULATED_PROFILE),
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
    name = str(profile or DEFAULT_SIMULATED_PROFILE)
    if name.startswith("simulated"):
        name = name.partition("/")[2] or DEFAULT_SIMULATED_PROFILE
    if name not in PROFILES:
        raise ConfigError(f"unknown simulated profile {name!r}; known profiles: {', '.join(sorted(PROFILES))} "
                          "(or pass Profile(...) for a custom one)")
    return PROFILES[name]
