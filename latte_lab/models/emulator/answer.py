"""How the emulator answers a chat request: with the simulated model, from the messages it received.

latte_lab's own clients send each call's frame and scope in the ``x-latte-lab-call`` header
(:mod:`latte_lab.models.call_header`): with it, the simulated model reads the prompt exactly as it does
inside the trial (:func:`latte_lab.models.view.view_from_prompt`), so its reply is the one the simulated
trial gets. Any other client gets a frame read from its system prompt, best effort (who the agent is, its
role, the action tags it is offered, its teammates) and a seed from the request's content; the reply is
still deterministic for a given request.

Usage is counted as the simulated model counts it (four characters per token) over the text received;
a reply longer than the request's ``max_tokens`` is cut there and says so (``length``), as a provider's is.

>>> frame, scope = frame_from_prompt("You are a software engineer on a team (Dev2) ... You are Dev1.\\n"
...                                  '<claim_task id="t" /> <run_tests />', [])
>>> frame.role, frame.agent, frame.allowed_actions, frame.teammates
('worker', 'Dev1', ('claim_task', 'run_tests'), ('Dev2',))
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from latte_lab.models.base import CHARS_PER_TOKEN, AgentView, Message, ModelRequest, Scope, estimate_tokens
from latte_lab.models.emulator.wire import ChatRequest

# Roles named in the system prompts of latte_lab's teams, in the order they are tried.
_ROLE_PHRASES = (
    ("You lead", "lead"),
    ("team of equals", "peer"),
    ("You are the Product Manager", "product_manager"),
    ("You are the Architect", "architect"),
    ("You are the Project Manager", "project_manager"),
    ("You are the QA Engineer", "qa"),
    ("You are the Engineer", "engineer"),
)
_PIPELINE_NAMES = {"product_manager": "ProductManager", "architect": "Architect", "project_manager": "ProjectManager",
                   "engineer": "Engineer", "qa": "QAEngineer"}
_AGENT = re.compile(r"\bYou are ([A-Z][A-Za-z0-9_]*)\.")
_TEAMMATES = re.compile(r"\(([A-Z][A-Za-z0-9_]*(?:, [A-Z][A-Za-z0-9_]*)*)\)")
_TAG = re.compile(r"<([a-z_]+)[\s/>]")
PLANNING_MARK = "PLANNING"  # the Lead's planning turn says so in its first message


def frame_from_prompt(system: str, messages: Sequence[Message]) -> tuple[AgentView, Scope]:
    """A frame and scope read from a prompt alone (for a client that sends no ``x-latte-lab-call``)."""
    from latte_lab.actions import ACTION_TAGS

    role = next((r for phrase, r in _ROLE_PHRASES if phrase in system), "worker")
    named = _AGENT.search(system)
    agent = "Lead" if role == "lead" else _PIPELINE_NAMES.get(role) or (named.group(1) if named else "Agent")
    tags = tuple(dict.fromkeys(t for t in _TAG.findall(system) if t in ACTION_TAGS))
    team = _TEAMMATES.search(system)
    teammates = tuple(n for n in team.group(1).split(", ") if n != agent) if team else ()
    calls = sum(1 for m in messages if m.role == "assistant")
    first_user = next((m.content for m in messages if m.role == "user"), "")
    phase = "planning" if role == "lead" and calls == 0 and PLANNING_MARK in first_user else "execution"
    round_ = 0 if phase == "planning" else calls + 1  # round 0 is the Lead's planning; everyone else acts from 1
    digest = hashlib.sha256(repr((system, [(m.role, m.content) for m in messages])).encode("utf-8")).digest()
    frame = AgentView(task="", role=role, agent=agent, round=round_, phase=phase, allowed_actions=tags,
                      teammates=teammates)
    return frame, Scope(seed=int.from_bytes(digest[:4], "big"), agent=agent, call_index=calls)


@dataclass(frozen=True)
class Answer:
    text: str
    input_tokens: int
    output_tokens: int
    finish: str  # stop | length


class Answerer:
    """The simulated model behind the emulator (one per emulator; calls are answered one at a time, as they
    are CPU work that Python threads would only interleave)."""

    def __init__(self, profile: str = "default"):
        from latte_lab.models.sim import SimulatedModel

        self.model = SimulatedModel(profile)
        self._lock = threading.Lock()

    def answer(self, request: ChatRequest, call: tuple[AgentView, Scope] | None) -> Answer:
        frame, scope = call if call is not None else frame_from_prompt(request.system, request.messages)
        model_request = ModelRequest(
            provider="simulated", model=self.model.profile.name, system=request.system,
            messages=list(request.messages), temperature=request.temperature, max_tokens=request.max_tokens,
            top_p=request.top_p, stop=request.stop, scope=scope, frame=frame,
        )
        with self._lock:
            response = self.model.generate(model_request)
        text, finish = response.text, "stop"
        if response.usage.output_tokens > request.max_tokens:
            text, finish = text[:request.max_tokens * CHARS_PER_TOKEN], "length"
        prompt = request.system + "".join(m.content for m in request.messages)
        return Answer(text=text, input_tokens=estimate_tokens(prompt), output_tokens=estimate_tokens(text),
                      finish=finish)


def prompt_tokens(request: ChatRequest) -> int:
    """The tokens of a request's prompt, as its reply's usage will count them."""
    return estimate_tokens(request.system + "".join(m.content for m in request.messages))


__all__ = ["Answer", "Answerer", "frame_from_prompt", "prompt_tokens"]
