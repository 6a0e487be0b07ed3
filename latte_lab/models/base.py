"""Typed records of the model layer and the ``Model`` protocol.

A :class:`ModelRequest` carries everything that determines a reply: provider, model, base URL,
system prompt, messages, sampling parameters and a :class:`Scope` (trial seed, agent, call index).
It may also carry an :class:`AgentView`: the structured form of what the agent's prompt shows.
Real providers ignore the view; the simulated model acts on it. The view is not part of the cache
key (the prompt text already reflects it). Teams give only the view's frame (``frame=``): the rest is
read from the prompt text the first time ``request.view`` is asked for, so a real provider's call never
pays for reading it.

Models that do not call a provider (simulated, scripted) report token usage with
:func:`estimate_tokens`.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from latte_lab.config import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE

CHARS_PER_TOKEN = 4  # rough English/code ratio of BPE tokenizers


def estimate_tokens(text: str, tokens_per_char: float = 1 / CHARS_PER_TOKEN) -> int:
    """Tokens for ``text``: its length times ``tokens_per_char``, rounded up (empty text is 0).

    >>> estimate_tokens("abcdefgh"), estimate_tokens("abcdefghi"), estimate_tokens("")
    (2, 3, 0)
    """
    return math.ceil(len(text) * tokens_per_char)


@dataclass(frozen=True)
class Scope:
    """Where a call sits in a trial; part of the cache key so identical prompts in two trials differ."""

    seed: int = 0
    agent: str = ""
    call_index: int = 0
    trial: str = ""  # trial id (hash of config and seed); empty outside trials

    def as_dict(self) -> dict:
        """``dataclasses.asdict(self)``, without its deep copy (every field is a plain value)."""
        return {"seed": self.seed, "agent": self.agent, "call_index": self.call_index, "trial": self.trial}


@dataclass(frozen=True)
class Message:
    role: str  # "user" or "assistant"
    content: str


@dataclass
class AgentView:
    """What one agent's prompt shows, in structured form (read by the simulated model only).

    The first seven fields are the call's *frame*, set by the team: who is asked, in which role, round
    and phase, with which actions and teammates. Every other field is read back from the prompt text by
    :func:`latte_lab.models.view.view_from_prompt`, so the view carries nothing the prompt does not show:
    what fell out of the history window is gone from it too.
    """

    task: str  # task id ("debug", "eda", "textproc", ...): which project the agent works on
    role: str  # lead | worker | peer | product_manager | architect | project_manager | engineer | qa
    agent: str  # this agent's name, e.g. "Dev2"
    round: int = 0  # 0 = planning
    phase: str = "execution"  # planning | execution | <pipeline phase name>
    allowed_actions: tuple[str, ...] = ()  # action tags this agent's prompt offers
    teammates: tuple[str, ...] = ()
    current_task: dict | None = None  # {"id", "title", "description", "status"} of its own node
    frontier: list[dict] = field(default_factory=list)  # [{"id","title","description"}] ready tasks offered
    graph: list[dict] = field(default_factory=list)  # lead: [{"id","title","status","owner","deps"}] shown
    test_output: str | None = None  # latest test output in the window
    test_failures: tuple[str, ...] = ()  # failing test ids named in that output
    tests_passed: bool | None = None
    messages: list[dict] = field(default_factory=list)  # this turn's new messages: [{"sender","text"}]
    files_read: dict[str, str] = field(default_factory=dict)  # path -> content as last read or written
    alerts: list[dict] = field(default_factory=list)  # this turn's heartbeat alerts [{"agent","task","rounds"}]
    script_output: list[str] = field(default_factory=list)  # run_script replies in the window, oldest first
    extra: dict[str, Any] = field(default_factory=dict)  # graph summary (workers, ready), documents, next file

    def to_dict(self) -> dict:
        return asdict(self)


class _ViewFromPrompt:
    """The ``view`` field of :class:`ModelRequest`: the view given, or else, for a request that carries a
    ``frame``, :func:`latte_lab.models.view.view_from_prompt` of the frame and the request's own prompt,
    read once on first access. A view read for one request and handed to another (``dataclasses.replace``
    copies it) is read anew from the other's prompt."""

    def __set_name__(self, owner, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, request, owner=None):
        if request is None:  # the dataclass asks the class for the field's default
            return None
        view = request.__dict__.get(self.slot)
        if request.frame is None:
            return view
        read_for = getattr(view, "_read_for", None)
        if view is None or (read_for is not None and read_for() is not request):
            from latte_lab.models.view import view_from_prompt

            view = view_from_prompt(request.frame, request.system, request.messages)
            view._read_for = weakref.ref(request)  # not a field: equality, asdict and repr leave it out
            request.__dict__[self.slot] = view
        return view

    def __set__(self, request, value) -> None:
        request.__dict__[self.slot] = value


@dataclass
class ModelRequest:
    provider: str  # openai | anthropic | simulated | scripted | replay
    model: str
    system: str
    messages: list[Message]
    temperature: float = DEFAULT_TEMPERATURE
    max_tokens: int = DEFAULT_MAX_TOKENS
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    base_url: str | None = None
    scope: Scope = field(default_factory=Scope)
    view: AgentView | None = _ViewFromPrompt()  # type: ignore[assignment]  # given, or read from the prompt
    frame: AgentView | None = None  # the view's frame (who, role, round, phase, actions), when view is not given

    def key_fields(self) -> dict:
        """The fields that determine the reply (the response-cache key is computed from these)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
            "system": self.system,
            "messages": [[m.role, m.content] for m in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "stop": list(self.stop) if self.stop else None,
            "scope": self.scope.as_dict(),
        }


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class ModelResponse:
    text: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0  # original latency of the call (kept when served from cache)
    cached: bool = False  # served from the response cache or a cassette (no tokens billed)
    finish_reason: str = "stop"  # stop | length | refusal | error
    model: str = ""


@runtime_checkable
class Model(Protocol):
    """Anything that turns a request into a response."""

    def generate(self, request: ModelRequest) -> ModelResponse: ...
