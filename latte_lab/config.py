"""``TrialConfig``: everything that determines a trial, validated with clear messages.

Defaults follow the paper. Every place where the authors' released code behaves differently in a way
that changes results is a field here; :meth:`TrialConfig.released` sets all of them at once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from latte_lab.errors import ConfigError

# The released code's and the published data's names, accepted wherever a team or task id is (the
# registries in latte_lab.teams and latte_lab.tasks resolve them; the loaders map published rows with them).
TEAM_ALIASES = {"dynamic": "latte", "no_graph": "leader_worker", "fixed": "static"}
TASK_ALIASES = {"simple_eda": "eda", "debug_sprint": "debug"}
# The built-in tasks and teams by name, with the module that defines each. Names are checked against these
# (and against what a user registered, once a registry exists) without importing any task or team: the
# registries in latte_lab.tasks and latte_lab.teams import a module when its class is first needed.
BUILTIN_TASKS = {"debug": "latte_lab.tasks.debug", "eda": "latte_lab.tasks.eda", "textproc": "latte_lab.tasks.textproc"}
BUILTIN_TEAMS = {"latte": "latte_lab.teams.latte", "static": "latte_lab.teams.static",
                 "leader_worker": "latte_lab.teams.leader_worker", "decentralized": "latte_lab.teams.decentralized",
                 "pipeline": "latte_lab.teams.pipeline"}
REGISTRY_MODULES = {"task": "latte_lab.tasks", "team": "latte_lab.teams"}  # where each kind's registry lives
DEFAULT_MAX_ROUNDS = 40  # the paper's round limit: Task.default_max_rounds, which the built-in tasks keep


def resolve_name(kind: str, name: str) -> str:
    """The registered name of a ``kind`` ("task" or "team") given by its name or an alias, found without
    importing any task or team; an unknown name is a ConfigError listing the known ones.

    A name a user registered is known once its registry's module is imported (registering imports it).

    >>> resolve_name("task", "debug_sprint"), resolve_name("team", "dynamic")
    ('debug', 'latte')
    """
    import sys

    registry_module = sys.modules.get(REGISTRY_MODULES[kind])
    if registry_module is not None and hasattr(registry_module, "REGISTRY"):
        return registry_module.REGISTRY.resolve(name)
    builtin, aliases = (BUILTIN_TASKS, TASK_ALIASES) if kind == "task" else (BUILTIN_TEAMS, TEAM_ALIASES)
    key = aliases.get(name, name) if isinstance(name, str) else name
    if key in builtin:
        return key
    raise ConfigError(f"unknown {kind} {name!r}; known {kind}s: {', '.join(builtin)} "
                      f"(aliases: {', '.join(sorted(aliases))})")

# --- defaults of the model layer (models/ imports them from here) ---
CacheMode = Literal["read_write", "replay", "off"]
CACHE_MODES: tuple[str, ...] = get_args(CacheMode)
Sandbox = Literal["auto", "bwrap", "local"]  # where agent code runs (latte_lab.sandbox.run.resolve_sandbox)
SANDBOXES: tuple[str, ...] = get_args(Sandbox)
DEFAULT_CACHE_MODE = "read_write"
BACKENDS = ("local", "ray")  # where a sweep's trials run (latte_lab.sweep.run_sweep)
DEFAULT_TEMPERATURE = 0.7  # the paper's sampling temperature (A4.4)
DEFAULT_MAX_TOKENS = 4096  # the paper's output cap per call (A4.4); the released code used 8,192
DEFAULT_MAX_RETRIES = 2  # the SDKs' default; enough for transient 429/5xx without hiding an outage
DEFAULT_TIMEOUT_S = 600.0  # one call; long agent replies at 4k tokens finish well within 10 minutes
# (requests, tokens) per minute for each provider's own API, shared by every trial of a sweep
# (latte_lab.models.ratelimit). The lowest paid tier of each provider's published limits as of 2025-10
# (OpenAI usage tier 1, gpt-4o class: 500 RPM, 30,000 TPM; Anthropic tier 1, Sonnet class: 50 RPM,
# 30,000 input TPM), so a new account is never refused; raise them to your tier's with
# $LATTE_LAB_RATE_LIMITS or run_sweep(rate_limits=...). Servers reached through base_url are not limited
# unless named there.
DEFAULT_RATE_LIMITS: dict[str, tuple[float | None, float | None]] = {
    "openai": (500, 30_000),
    "anthropic": (50, 30_000),
}

# --- model specs: the one set of rules, used by TrialConfig and latte_lab.models.make_model ---
MODEL_PROVIDERS = ("openai", "anthropic", "simulated", "scripted")
FREE_PROVIDERS = ("simulated", "scripted")  # local models: no bill, no price needed
DEFAULT_SIMULATED_PROFILE = "default"
SPEC_FORMS = (
    "simulated",
    "simulated/<profile>",
    "openai/<model>",
    "anthropic/<model>",
    "<model> with base_url=... (any OpenAI-compatible server: vLLM, Ollama, LM Studio)",
    "scripted (a label for a ScriptedModel passed to run_trial(model=...))",
)


def check_cache_mode(mode: str) -> str:
    """``mode`` when it is one of :data:`CACHE_MODES`, else a ConfigError listing them.

    >>> check_cache_mode("replay")
    'replay'
    """
    if mode not in CACHE_MODES:
        raise ConfigError(f"unknown cache mode {mode!r}; use one of {', '.join(CACHE_MODES)}")
    return mode


def parse_model_spec(spec: str, *, base_url: str | None = None) -> tuple[str, str]:
    """``(provider, model)`` for a model spec; a spec of no accepted form raises ConfigError listing them.

    >>> parse_model_spec("anthropic/claude-sonnet-4-5")
    ('anthropic', 'claude-sonnet-4-5')
    >>> parse_model_spec("simulated")
    ('simulated', 'default')
    >>> parse_model_spec("llama3.1:8b", base_url="http://localhost:11434/v1")
    ('openai', 'llama3.1:8b')

    ``base_url`` points ``openai/<model>``, ``anthropic/<model>`` or a bare model name at another server
    (a bare name is served through the OpenAI-compatible API, which names its models freely:
    ``llama3.1:8b``, ``org/model``); the simulated and scripted models take none.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"model spec must be a non-empty string; accepted forms: {'; '.join(SPEC_FORMS)}")
    spec = spec.strip()
    provider, sep, name = spec.partition("/")
    if provider in ("simulated", "scripted") and not sep:
        name = DEFAULT_SIMULATED_PROFILE if provider == "simulated" else provider
    elif not (sep and provider in MODEL_PROVIDERS and name.strip()):
        if base_url:
            return "openai", spec
        raise ConfigError(f"unknown model spec {spec!r}; accepted forms: {'; '.join(SPEC_FORMS)}")
    if base_url and provider in ("simulated", "scripted"):
        raise ConfigError(f"base_url {base_url!r} is for a model server, but {spec!r} runs locally; drop "
                          "base_url or use 'openai/<model>' / 'anthropic/<model>'")
    return provider, name.strip()


def _switch(default, *, released, **kw):
    """A protocol switch: a field whose value under ``TrialConfig.released()`` is ``released``."""
    return Field(default, json_schema_extra={"released": released}, **kw)


# Fields that say where things go or how calls are made, not what the trial is: left out of the trial id.
_NON_IDENTITY_FIELDS = {"runs_dir", "cache", "max_retries", "timeout_s", "cache_path", "max_dollars",
                        "max_billed_tokens", "sandbox"}


_LINEAGE_FIELDS = ("parent", "fork_round", "fork_changes")  # set on forks only (latte_lab.forking)


class TrialConfig(BaseModel):
    """One trial: a team of agents on a task with a model, a seed and protocol switches."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    task: str
    """Task id (``latte_lab.tasks.names()``): debug, eda, textproc; official names are accepted."""
    team: str = "latte"
    """Team structure (``latte_lab.teams.names()``): latte, static, leader_worker, decentralized, pipeline,
    or any registered with ``ll.teams.register``; official names are accepted."""
    model: str = "simulated"
    """Model spec (:func:`parse_model_spec`): ``simulated[/profile]``, ``openai/<model>``, ``anthropic/<model>``,
    a model name with ``base_url``, or ``scripted`` for a model passed to ``run_trial(model=...)``."""
    base_url: str | None = None
    """Base URL of an OpenAI-compatible server (vLLM, Ollama, LM Studio), or of a proxy for ``anthropic/<model>``."""
    n_workers: int = Field(4, ge=1, le=64)
    """Workers besides the Lead (decentralized: N+1 peers; pipeline: always its five roles)."""
    max_rounds: int | None = Field(None, ge=1, le=1000)
    """Round budget; None takes the task's default (40 in the paper)."""
    seed: int = 0
    """Seed of the trial: scopes every model call, drives the simulated model."""
    trial: int = 0
    """Replicate index within a sweep cell (recorded in the results row)."""
    temperature: float = Field(DEFAULT_TEMPERATURE, ge=0.0, le=2.0)
    """Sampling temperature of every agent (paper: 0.7)."""
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, ge=1)
    """Output cap per call (paper: 4,096; the released code used 8,192)."""
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    """Nucleus sampling; None leaves the provider default."""
    heartbeat: int = Field(4, ge=1)
    """H (paper: 4): silent rounds before a worker is flagged to the Lead (``heartbeat_rule``), and the
    Lead's idle limit unless ``lead_skip_limit`` is set."""
    planning_turns: int = Field(5, ge=1)
    """Lead turns allowed to produce the initial graph (graph teams)."""
    cache: CacheMode = DEFAULT_CACHE_MODE
    """Response cache mode for real providers: read_write, replay (a miss is an error), off."""
    cache_path: str | None = None
    """Response cache file; None uses $LATTE_LAB_CACHE, else $XDG_CACHE_HOME/latte_lab/responses.sqlite, else
    ~/.cache/latte_lab/responses.sqlite."""
    runs_dir: str = "runs"
    """Directory that receives one run directory per trial."""
    max_retries: int = Field(DEFAULT_MAX_RETRIES, ge=0)
    """SDK retries per call (429/5xx/connection errors; Retry-After honoured)."""
    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0)
    """Timeout of one model call."""
    max_dollars: float | None = Field(None, gt=0)
    """Budget: the trial stops with status ``budget`` before a call once its billed calls cost this much
    (list prices, latte_lab.models.budget); None = no limit. Not part of the trial id."""
    max_billed_tokens: int | None = Field(None, ge=1)
    """Budget in billed tokens (input + output of calls not served from a cache); None = no limit."""
    sandbox: Sandbox = "auto"
    """Where agent code runs: bwrap (a bubblewrap sandbox: no network, no view of the host), local (as
    this user, with limits only), auto: bwrap wherever it works, else local (said once per process)."""
    read_file_cap: int = Field(12000, ge=100)
    """Characters of a file returned by read_file. The released code returned 4,000, which cut the
    debug module in half; 12,000 shows every task file whole."""
    parent: str | None = None
    """A fork's parent run (its run directory), None for a trial run from round 0 (``latte_lab.forking``)."""
    fork_round: int | None = Field(None, ge=0)
    """The round after which a fork left its parent (0: after planning); the rounds up to it are the parent's,
    replayed from its cassette."""
    fork_changes: dict[str, object] | None = None
    """What a fork changed from its parent's config (field -> new value)."""

    # --- protocol switches: the paper's reading by default; every other reading is a value here, with the
    # released code's value in `released` (TrialConfig.released() sets them all; docs/fidelity.md has one
    # row per switch) ---
    heartbeat_rule: Literal["paper", "released"] = _switch("paper", released="released")
    """Which workers the heartbeat flags to the Lead. paper (Algorithm 1 step 1): a worker holding a task
    that has emitted no action in the last H rounds, again after every further H silent rounds; released:
    a task held >= H rounds with no edit or script run for >= H rounds, once per task."""
    lead_triggers: Literal["paper", "released"] = _switch("paper", released="released")
    """When the Lead runs. paper (Algorithm 1 step 3): the graph changed, a heartbeat fired, or the Lead has
    been idle ``lead_idle_limit`` rounds (the static Lead also runs in round 1, to assign every task, A5.4);
    released: also in round 1, whenever a message waits for it, and when nothing is ready and nobody works."""
    graph_change: Literal["any", "counts"] = _switch("any", released="counts")
    """What counts as "G_t has changed" for the Lead trigger. any: any operator applied since the Lead last
    ran (claims, releases, assignments, new nodes and edges); counts: only the node count or the number
    of finished nodes (released code)."""
    dispatch: Literal["paper", "busy_every_round", "released"] = _switch("paper", released="released")
    """Which workers run. paper (Algorithm 1 step 3): busy workers that received new context since their
    last turn, plus min(|frontier|, idle) idle ones; no filler message. busy_every_round: every busy
    worker every round, told "Continue working" when nothing is new, and one idle worker after a round
    in which nobody ran. released: a busy worker with no new message sits out every other round,
    otherwise as busy_every_round. The static team dispatches every worker every round (A5.4) unless
    dispatch is released (frontier-capped like LATTE)."""
    tool_time: Literal["parallel", "event_loop", "summed"] = _switch("parallel", released="event_loop")
    """How the virtual clock counts the tools (test and script runs) of agents acting in the same step.
    parallel (the paper: "All selected agents act in parallel"): each agent's model call and then its own
    tools run on a timeline of its own, and the step lasts as long as the longest; event_loop (released
    code: every worker's actions are processed synchronously in one event loop as its reply arrives): the
    tool runs of different agents take turns, in order of reply arrival, while the calls still in flight
    go on; summed (an earlier latte_lab reading): the step's longest call, then every agent's tools one
    after another. The orchestrator's own test runs come after the step in every reading."""
    lead_skip_limit: int | None = _switch(None, released=6, ge=1)
    """Rounds the Lead may stay idle before it is invoked anyway; None = H (paper), released: 6."""
    claim_resolution: Literal["order", "arrival"] = _switch("order", released="arrival")
    """order: contested claims resolved in the fixed processing order, losers get an error message;
    arrival: resolved in order of reply arrival (latency), losers get no message (released code)."""
    roles: Literal["paper", "official"] = _switch("paper", released="official")
    """paper: Lead-only Assign/Release/Close/Verify, Worker-only Claim/Complete, Assign only to a worker,
    verified status after a review; official: the released code's looser rules and no verified status."""
    unknown_deps: Literal["reject", "drop"] = _switch("reject", released="drop")
    """Discover with an unknown dependency: reject with a message, or drop the dependency (released)."""
    verify_reroute: Literal["unstarted", "all", "none"] = _switch("unstarted", released="all")
    """Successors of v that Verify(v) puts behind the review node: unstarted (pending/assigned; the Lead
    prompt's "must complete before downstream tasks proceed"), all (released code), none (A3's literal
    postcondition: only the edge v -> v-verify)."""
    worker_context: Literal["paper", "own_task"] = _switch("paper", released="own_task")
    """What a worker is shown of the graph with its task. paper (D4): its task and its direct
    predecessors (title, description, who finished them, the files they changed); own_task: its task only
    (released code)."""
    static_planning_explore: bool = _switch(True, released=True)
    """Static planning may run tests, read files and run scripts, as LATTE's (the same orchestrator, A5.4);
    False forbids them (an older latte_lab reading)."""
    edit_requires_task: bool = _switch(False, released=True)
    """A graph-team worker without a task may not edit an existing file (released code); the paper sets no
    such rule."""
    file_lock: bool = _switch(False, released=True)
    """Released code: the first agent to write a file in a round owns it for the rest of the round."""
    read_file_in_flat: bool = _switch(True, released=False)
    """Leader-Worker/decentralized: read_file works (the released code advertised it but ignored it)."""
    flat_success: Literal["certified", "tests"] = _switch("certified", released="tests")
    """Leader-Worker/decentralized success: tests green and an agent certifies (paper), or tests alone."""
    dedupe_actions: bool = _switch(True, released=True)
    """Drop exact duplicate actions within one reply (released behaviour; stops complete_task spam)."""

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        try:
            return resolve_name("task", value)
        except ConfigError as exc:  # its message lists the known tasks
            raise ValueError(str(exc)) from None

    @field_validator("team")
    @classmethod
    def _known_team(cls, value: str) -> str:
        try:
            return resolve_name("team", value)
        except ConfigError as exc:  # its message lists the known teams
            raise ValueError(str(exc)) from None

    @field_validator("model")
    @classmethod
    def _stripped(cls, value: str) -> str:
        return value.strip()

    @model_validator(mode="after")
    def _model_spec(self) -> TrialConfig:
        try:  # here, not on the field: whether a bare model name is valid depends on base_url
            parse_model_spec(self.model, base_url=self.base_url)
        except ConfigError as exc:
            raise ValueError(f"model: {exc}") from None
        return self

    def __init__(self, **data):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(_friendly(exc)) from None

    # --- derived values ---
    @property
    def rounds(self) -> int:
        """The round budget in effect."""
        if self.max_rounds is not None:
            return self.max_rounds
        import sys

        registry = sys.modules.get(REGISTRY_MODULES["task"])  # a task of the user's exists only once it is loaded
        if registry is not None and hasattr(registry, "REGISTRY"):
            return registry.REGISTRY.get(self.task).default_max_rounds
        return DEFAULT_MAX_ROUNDS  # a built-in task's (tests/package/test_layers.py checks they keep it)

    @property
    def lead_idle_limit(self) -> int:
        return self.lead_skip_limit if self.lead_skip_limit is not None else self.heartbeat

    @property
    def trial_id(self) -> str:
        """A stable id from the config and the seed: ``<task>-<team>-s<seed>-<hash>``."""
        ident = {k: v for k, v in self.model_dump().items() if k not in _NON_IDENTITY_FIELDS
                 and not (k in _LINEAGE_FIELDS and v is None)}  # a trial from round 0 keeps the id it always had
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.task}-{self.team}-s{self.seed}-{digest}"

    @classmethod
    def released(cls, **overrides) -> TrialConfig:
        """A config reproducing the released code's behaviour (reference §5.5 and §12)."""
        task = overrides.get("task")
        values = {name: extra["released"] for name, extra in _switches().items()}
        values.update(max_tokens=8192, read_file_cap=4000)
        if task is not None and resolve_name("task", task) == "debug":
            values["max_rounds"] = 35  # the released dispatcher's default for debug_sprint
        values.update(overrides)
        return cls(**values)

    @classmethod
    def preset(cls, name: str, **overrides) -> TrialConfig:
        """A config under a named reading of the protocol (:data:`PRESETS`), with ``overrides``; ``released``
        is :meth:`released`.

        >>> TrialConfig.preset("released_dispatch", task="debug").dispatch
        'busy_every_round'
        >>> TrialConfig.preset("relesed")
        Traceback (most recent call last):
        latte_lab.errors.ConfigError: unknown preset 'relesed'; presets: paper, released_dispatch, previous_defaults, released
        """
        if name == "released":
            return cls.released(**overrides)
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; presets: {', '.join([*PRESETS, 'released'])}")
        return cls(**{**PRESETS[name], **overrides})

    @classmethod
    def switches(cls) -> dict[str, object]:
        """Every protocol switch with its released-code value (field name -> value)."""
        return {name: extra["released"] for name, extra in _switches().items()}

    def to_json(self) -> str:
        return json.dumps(self.model_dump(), indent=2, sort_keys=True)


PRESETS: dict[str, dict[str, object]] = {
    "paper": {},  # every switch at the paper's rule (the defaults)
    # The released code's reading of the two rules that decide how often the Lead runs: every busy worker
    # re-engaged each round (told to continue when nothing is new) and "G_t has changed" counted as the
    # released code counts it (the node count or the number of finished nodes); everything else as the paper.
    "released_dispatch": {"dispatch": "busy_every_round", "graph_change": "counts"},
    # latte_lab's readings before the paper's became the defaults
    "previous_defaults": {"heartbeat_rule": "released", "lead_triggers": "released", "graph_change": "counts",
                          "dispatch": "busy_every_round", "worker_context": "own_task",
                          "static_planning_explore": False, "edit_requires_task": True, "tool_time": "summed"},
}
"""Named readings of the protocol for :meth:`TrialConfig.preset` (switch -> value); ``released`` (every switch
at the released code's value) is :meth:`TrialConfig.released`. docs/fidelity.md reports LATTE under each."""


def _switches() -> dict[str, dict]:
    return {name: f.json_schema_extra for name, f in TrialConfig.model_fields.items()
            if isinstance(f.json_schema_extra, dict) and "released" in f.json_schema_extra}


def _friendly(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"]
        msg = msg.removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            known = ", ".join(sorted(TrialConfig.model_fields))
            msg = f"unknown field; known fields: {known}"
        parts.append(f"{loc}: {msg}" if loc else msg)  # model-level checks name their field themselves
    return "invalid TrialConfig: " + "; ".join(parts)
