"""ScriptedModel: replies given in advance, for tests of the protocols, parser and engine.

No network, no randomness: each call takes the next reply (globally, or per agent), or asks a function.
Token usage is estimated from text length so ledgers and metrics see plausible numbers.

>>> from latte_lab.models.base import Message, ModelRequest, Scope
>>> model = ScriptedModel({"Dev1": ['<claim_task id="t1" />']})
>>> request = ModelRequest("scripted", "scripted", "You are Dev1.", [Message("user", "go")], scope=Scope(agent="Dev1"))
>>> reply = model.generate(request)
>>> reply.text, reply.usage.input_tokens, reply.usage.output_tokens
('<claim_task id="t1" />', 4, 6)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from latte_lab.errors import ConfigError, ModelError
from latte_lab.models.base import CHARS_PER_TOKEN, ModelRequest, ModelResponse, Usage, estimate_tokens


class ScriptedModel:
    """Returns ``replies`` in order.

    ``replies`` is a list of strings (shared by all agents, in call order), a dict agent -> list of
    strings (each agent consumes its own list), or a callable ``request -> str``. Running out raises
    :class:`ModelError`. ``latency_s`` is reported, not slept: the trial's virtual clock uses it.
    """

    provider = "scripted"
    base_url = None

    def __init__(
        self,
        replies: Sequence[str] | Mapping[str, Sequence[str]] | Callable[[ModelRequest], str],
        *,
        latency_s: float = 0.0,
        tokens_per_char: float = 1 / CHARS_PER_TOKEN,
        model: str = "scripted",
    ):
        if isinstance(replies, str) or not (callable(replies) or isinstance(replies, (Mapping, Sequence))):
            raise ConfigError("ScriptedModel replies must be a list of strings, a dict agent -> list, or a callable")
        self._replies = replies
        self._next: dict[str | None, int] = {}
        self._lock = threading.Lock()
        self.latency_s = latency_s
        self.tokens_per_char = tokens_per_char
        self.model = model
        self.calls: list[ModelRequest] = []  # every request received, for assertions in tests

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.calls)} calls made)"

    def _take(self, request: ModelRequest) -> str:
        if callable(self._replies) and not isinstance(self._replies, (Mapping, Sequence)):
            return self._replies(request)
        agent = request.scope.agent
        if isinstance(self._replies, Mapping):
            if agent not in self._replies:
                raise ModelError(
                    f"ScriptedModel has no replies for agent {agent!r}; scripted agents: "
                    f"{', '.join(map(repr, self._replies)) or 'none'}"
                )
            queue, slot = self._replies[agent], agent
        else:
            queue, slot = self._replies, None
        index = self._next.get(slot, 0)
        if index >= len(queue):
            who = f" for agent {agent!r}" if slot is not None else ""
            raise ModelError(f"ScriptedModel ran out of replies{who} after {len(queue)} calls")
        self._next[slot] = index + 1
        return queue[index]

    def generate(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            self.calls.append(request)
            text = self._take(request)
        if not isinstance(text, str):
            raise ModelError(f"ScriptedModel reply must be a string, got {type(text).__name__}")
        prompt = request.system + "".join(m.content for m in request.messages)
        usage = Usage(estimate_tokens(prompt, self.tokens_per_char), estimate_tokens(text, self.tokens_per_char))
        return ModelResponse(text=text, usage=usage, latency_s=self.latency_s, cached=False,
                             finish_reason="stop", model=self.model)
