"""Profiles of the simulated model: behavioural parameters, each with its meaning, range and default.

A profile says how one agent works: how often its patch is right given what its prompt shows, how
often it checks before it writes, how it picks among ready tasks, how often it stalls or forgets to
report, how much it talks, and how fast it reads and writes. No field names a team, a task or an
outcome; each default is argued from what a current frontier model does with a prompt like the
paper's, independently of what it does to any team's results.

``calibrated`` (when the package holds the fit, :func:`calibrated_profile`) is the one profile whose values
come from data: five behaviour parameters fitted to the published LATTE and static trials as
``docs/calibration.md`` pre-registered; ``default`` stays a priori.

A profile can be named with overrides, as in a model spec: ``simulated/default?p_straggler=0.2``.

>>> sorted(set(PROFILES) - {"calibrated"})
['careful', 'default', 'fast']
>>> resolve_profile("simulated/careful").p_correct_patch
0.95
>>> resolve_profile("default?p_straggler=0.2&prefill_tokens_per_s=2000").p_straggler
0.2
>>> Profile(p_straggler=1.5)
Traceback (most recent call last):
latte_lab.errors.ConfigError: Profile.p_straggler must be a probability in [0, 1], got 1.5
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from urllib.parse import parse_qsl

from latte_lab.config import DEFAULT_SIMULATED_PROFILE
from latte_lab.errors import ConfigError

PROBABILITIES = ("p_correct_patch", "blind_factor", "unguided_factor", "upstream_factor", "p_observe_first",
                 "p_delegate", "p_straggler", "p_reread", "p_forget_complete", "chattiness", "p_split",
                 "p_complete_with_patch")


@dataclass(frozen=True)
class Profile:
    """Behavioural parameters of a simulated model (none of them names a team, a task or an outcome)."""

    name: str = "custom"

    # --- skill: the chance of a correct patch depends on what the prompt has shown ---
    p_correct_patch: float = 0.85
    """Chance that one unit's patch is correct when the agent's prompt shows everything the change
    needs: the current version of the file, an observation pointing at the unit (a failing test, the
    output of a check script) and the units it builds on, correct. Range 0-1. A wrong patch is the
    correct one with a single slip in it (``latte_lab.models.sim.mutate``). Default: current frontier
    models solve most self-contained function-level problems from a specification (HumanEval-style
    pass@1 above 0.9 for GPT-4o- and Claude-3.5-class models), and units here are about that size but
    sit in a larger file and come with their own conventions, so a little lower."""
    blind_factor: float = 0.1
    """Multiplier on that chance when the agent writes a file whose current version its prompt does not
    show (never read, or the read fell out of the history window): it must reconstruct the rest of the
    file and its conventions from memory. Range 0-1 (1: reading never matters). Default: rewriting a
    whole module unseen almost always breaks something that was in it."""
    unguided_factor: float = 0.5
    """Multiplier when no observation in the prompt points at the unit: no failing test names it, no
    check script output is about it, so the agent works from the description and the code alone.
    Range 0-1. Default: a careful reader still finds many bugs from a contract, but without a failing
    case to reproduce, roughly half the fixes miss the actual defect."""
    upstream_factor: float = 0.1
    """Multiplier when a unit the change builds on is not correct in the files the prompt shows (a
    summary written before the findings exist, a module written against a stub). Range 0-1. Default: the
    output must be consistent with inputs the agent has not seen, which it rarely guesses."""

    # --- work habits ---
    p_observe_first: float = 0.8
    """Chance that an agent runs the tests, or writes and runs a check script, before its first patch of
    a unit (else it patches from the description and the code it has read). Range 0-1. Default: the
    paper's worker prompts tell agents to run the tests to check their work, and agentic coding models
    usually reproduce a failure before fixing it, though not always."""
    p_reread: float = 0.5
    """Chance of re-reading a file right before patching it again (fewer lost updates, one more turn).
    Range 0-1. Default: an even chance: models re-read when they suspect the file moved, but often
    trust the copy in their context."""
    p_complete_with_patch: float = 0.25
    """Chance that an agent marks its task complete in the same reply that patches it and runs the tests, before
    it has seen them pass (A4.3: a reply carries several actions). Range 0-1. Default: the paper's worker prompt
    asks agents to run the tests before they mark a task complete, and models mostly wait for the result, but a
    confident model often reports the task done in the reply that makes the change."""
    p_forget_complete: float = 0.05
    """Chance of finishing a task without emitting complete_task (the work is in, the report is not).
    Range 0-1. Default: a small rate of dropped protocol steps, as seen in multi-step tool use."""
    p_straggler: float = 0.08
    """Chance that an agent stalls on a subtask it starts: it replies with no action for a while (an
    empty or rambling turn). Range 0-1. Default: null or action-less replies are a known failure of
    LLM agents in long tool loops (the paper's D3 names stalls and null outputs), at a few percent of
    subtasks."""
    straggler_turns: tuple[int, int] = (2, 5)
    """How many of its own turns a stalled agent stays silent, drawn uniformly from (low, high), in turns
    (0 <= low <= high). Default: a stall lasts a few turns before the model picks the thread up again."""

    # --- granularity: how work is cut into tasks ---
    seed_nodes: float = 4.0
    """How many tasks a Lead seeds while planning when its prompt presents the graph as a living document that
    workers extend ("propose an initial decomposition"; workers Discover the rest): the plan's units are grouped
    into about this many tasks (1 + a Poisson draw of mean ``seed_nodes - 1``, at most one per unit). A Lead told
    that the plan is final (the whole plan at once) writes one task per unit instead. Range 1-20, in tasks.
    Default: asked for an initial decomposition of a description of a few numbered parts, a model writes a
    handful of coarse tasks, one per part or group of parts, rather than one per function (the paper's Lead
    prompt: "build a wide graph, not a deep one")."""
    p_split: float = 0.5
    """Chance that a worker whose task covers several units splits the others off as new tasks (Discover, with
    only real ordering as dependencies) and keeps the first for itself, so that idle teammates can take them;
    otherwise it works through them all. Range 0-1. Default: the worker prompt asks for Discover "whenever you
    uncover work that isn't already in the task list" and for a wide graph; a model does so about half the time
    it holds a task of several parts."""
    max_patches: int = 3
    """Patches of the same units within one task before an agent decides the fault lies elsewhere (and reports
    it, or adds a fix task). Range 1-10, in patches. Default: a developer tries a couple of variations before
    suspecting another part of the code."""
    max_fix_attempts: int = 5
    """Follow-up fix tasks an agent adds for one unit whose checks keep failing (``<unit>-fix``, ``-fix-2``, ...).
    Range 1-10, in tasks. Default: after a handful of failed fix tasks a team stops filing new ones."""
    verify_min_successors: int = 3
    """Waiting tasks that must build on a finished task before a Lead asks for a review of it (Verify): the paper's
    Lead prompt asks for one when a task "is upstream of many other tasks". Range 1-10, in tasks. Default: a few."""

    # --- self-scheduling ---
    p_delegate: float = 0.5
    """Chance that a Lead, when it runs, assigns a given ready task to an idle worker; otherwise it
    leaves the task in the ready queue for workers to claim. Range 0-1. Default: the paper's Lead prompt
    says both "assign them all at once, one per available agent" and "teammates can self-assign from
    the ready queue ... not to manually dispatch every task"; a model follows either reading about as
    often. A Lead told that workers cannot self-assign assigns everything regardless."""
    claim_noise: float = 1.0
    """Spread of an idle worker's choice among ready tasks: each task's preference (the files it has in
    its context, how early the task sits in the list, where upstream work is) gets Gumbel noise of this
    scale, and the worker claims the best. Range 0 and up, in units of one preference step (0: always the
    same choice; above about 3: nearly uniform). Default: a model's pick among similar-looking tasks is
    only loosely predictable."""

    # --- talk ---
    verbosity: int = 60
    """Tokens of rationale per reply (±25%), besides the actions. Range 0 and up, in tokens. Default: a few
    sentences, as models write before tool calls at the paper's temperature 0.7."""
    chattiness: float = 0.2
    """Chance of an optional status broadcast in a turn. Range 0-1. Default: models asked to keep the
    team informed post an update now and then, not every turn."""

    # --- speed: latency = base + input / prefill rate + output / decode rate ---
    base_latency_s: float = 1.5
    """Seconds before the first output token of a short prompt (network, queueing). Range 0 and up, in
    seconds. Default: median
    time to first token of tiny prompts, 2.1 s for Claude Sonnet 4.6 and 0.9 s for GPT-5.4, in hourly
    OpenRouter probes of 15 frontier models (J. Wrede, "TTFT varies 13x across LLM providers", 2026)."""
    prefill_tokens_per_s: float = 5000.0
    """Input tokens read per second before the first output token. Range above 0, in tokens per second.
    Default: on shared APIs every extra
    prompt token adds about 0.04-0.24 ms to the time to first token (nirmalya.net, "Prompt size impact
    on LLM response", 2026-02), i.e. 4,000-25,000 tokens/s; the slow end, as agent prompts are long and
    uncached."""
    decode_tokens_per_s: float = 45.0
    """Output tokens written per second. Range above 0, in tokens per second. Default: median output
    throughput of 44 tokens/s for both
    Claude Sonnet 4.6 and GPT-5.4 in the same probes (Wrede 2026)."""

    def __post_init__(self) -> None:
        for name in PROBABILITIES:
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ConfigError(f"Profile.{name} must be a probability in [0, 1], got {v!r}")
        a, b = self.straggler_turns
        if a < 0 or b < a:
            raise ConfigError(f"Profile.straggler_turns must be (low, high) with 0 <= low <= high, got "
                              f"{self.straggler_turns!r}")
        if not 1.0 <= self.seed_nodes <= 20.0:
            raise ConfigError(f"Profile.seed_nodes must be in [1, 20], got {self.seed_nodes!r}")
        for name in ("max_patches", "max_fix_attempts", "verify_min_successors"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 1 <= v <= 10:
                raise ConfigError(f"Profile.{name} must be a whole number in [1, 10], got {v!r}")
        if self.claim_noise < 0 or self.verbosity < 0 or self.base_latency_s < 0:
            raise ConfigError("Profile.claim_noise, verbosity and base_latency_s must be >= 0")
        if self.prefill_tokens_per_s <= 0 or self.decode_tokens_per_s <= 0:
            raise ConfigError("Profile.prefill_tokens_per_s and decode_tokens_per_s must be > 0")

    def latency(self, input_tokens: int, output_tokens: int) -> float:
        """Seconds for one call: base + input / prefill rate + output / decode rate.

        >>> Profile().latency(5000, 90)
        4.5
        """
        return self.base_latency_s + input_tokens / self.prefill_tokens_per_s + output_tokens / self.decode_tokens_per_s

    def with_overrides(self, **values) -> Profile:
        """A copy with some parameters changed (validated like a new profile)."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigError(f"unknown simulated-profile parameter(s) {', '.join(unknown)}; known: "
                              f"{', '.join(n for n in fields if n != 'name')}")
        return dataclasses.replace(self, **values)


PROFILES: dict[str, Profile] = {
    DEFAULT_SIMULATED_PROFILE: Profile(name=DEFAULT_SIMULATED_PROFILE),
    # A deliberate model: checks before it writes, re-reads, rarely stalls; slower per token.
    "careful": Profile(name="careful", p_correct_patch=0.95, p_observe_first=0.95, p_reread=0.9, p_straggler=0.04,
                       straggler_turns=(1, 3), p_forget_complete=0.02, verbosity=110, chattiness=0.25,
                       base_latency_s=2.0, decode_tokens_per_s=35.0),
    # A quick, sloppier model: wrong more often, checks and re-reads less, stalls more; terse and fast.
    "fast": Profile(name="fast", p_correct_patch=0.7, p_observe_first=0.5, p_reread=0.15, p_straggler=0.15,
                    straggler_turns=(2, 6), p_forget_complete=0.15, verbosity=35, chattiness=0.1,
                    base_latency_s=0.8, decode_tokens_per_s=90.0),
}


CALIBRATION_FILE = "calibration.json"  # latte_lab/data: the record of the pre-registered fit (make calibrate)


def calibrated_profile() -> Profile | None:
    """The ``calibrated`` profile: the default profile with the five behaviour parameters that the
    pre-registered fit to the published LATTE and static trials chose (``docs/calibration.md``; the fit's
    record, every evaluation included, ships as ``latte_lab/data/calibration.json``). None when the package
    holds no fit."""
    import json
    from importlib import resources

    path = resources.files("latte_lab.data").joinpath(CALIBRATION_FILE)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        params = dict(record["best"]["params"])
    except (FileNotFoundError, KeyError, TypeError, ValueError):
        return None
    return PROFILES[DEFAULT_SIMULATED_PROFILE].with_overrides(name="calibrated", **params)


_CALIBRATED = calibrated_profile()
if _CALIBRATED is not None:
    PROFILES["calibrated"] = _CALIBRATED


def _coerce(name: str, text: str, current):
    try:
        if isinstance(current, tuple):
            return tuple(type(x)(v) for x, v in zip(current, text.split(","), strict=True))
        return type(current)(text)
    except (TypeError, ValueError):
        raise ConfigError(f"simulated-profile parameter {name}={text!r} is not a {type(current).__name__}"
                          + (" pair 'low,high'" if isinstance(current, tuple) else "")) from None


def resolve_profile(profile: str | Profile) -> Profile:
    """A Profile from a name (``"careful"``, ``"simulated/careful"``), a name with overrides
    (``"default?p_straggler=0.2&straggler_turns=3,6"``) or a Profile instance."""
    if isinstance(profile, Profile):
        return profile
    spec = str(profile or DEFAULT_SIMULATED_PROFILE)
    if spec.startswith("simulated"):
        spec = spec.partition("/")[2] or DEFAULT_SIMULATED_PROFILE
    name, _, query = spec.partition("?")
    name = name or DEFAULT_SIMULATED_PROFILE
    if name not in PROFILES:
        raise ConfigError(f"unknown simulated profile {name!r}; known profiles: {', '.join(sorted(PROFILES))} "
                          "(or pass Profile(...) for a custom one)")
    base = PROFILES[name]
    if not query:
        return base
    values = {}
    for key, text in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key == "name":
            raise ConfigError(f"{spec!r}: a profile's name is not a parameter to override")
        if not hasattr(base, key):
            base.with_overrides(**{key: None})  # raises the error listing the known parameters
        values[key] = _coerce(key, text, getattr(base, key))
    return base.with_overrides(name=spec, **values)
