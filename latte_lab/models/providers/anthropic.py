"""Anthropic Messages client over the official SDK.

Retries, Retry-After and error mapping work as for OpenAI (see :mod:`latte_lab.models.providers._sdk`).
The reply is the concatenation of all text blocks (the released code took only the first block, which
drops text after a thinking or tool block).

Sampling parameters: ``anthropic`` 1.0 removed ``temperature``/``top_p`` from ``messages.create``'s
signature (the SDK's migration guide says to pass them through ``extra_body``; the wire payload is
unchanged), and the API accepts only the default temperature for models released after Opus 4.6. So
temperature and top_p travel in ``extra_body``, and ``send_temperature=False`` omits temperature for
models that reject it (the request's temperature still keys the cache).

>>> from latte_lab.models.base import Message, ModelRequest
>>> request = ModelRequest("anthropic", "claude-x", "Be brief.", [Message("user", "hi")], max_tokens=64)
>>> message_params(request, "claude-x")
{'model': 'claude-x', 'max_tokens': 64, 'messages': [{'role': 'user', 'content': 'hi'}], 'extra_body': {'temperature': 0.7}, 'system': 'Be brief.'}
"""

from __future__ import annotations

from typing import Any

from latte_lab.config import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from latte_lab.errors import ModelResponseError
from latte_lab.models.base import ModelRequest, ModelResponse, Usage
from latte_lab.models.keys import redact
from latte_lab.models.providers._sdk import SDKModel, wire_text

ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}


def message_params(request: ModelRequest, model: str, *, send_temperature: bool = True) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for one request (pure; no I/O)."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": [{"role": m.role, "content": wire_text(m.content)} for m in request.messages],
    }
    sampling: dict[str, Any] = {}
    if send_temperature:
        sampling["temperature"] = request.temperature
    if request.top_p is not None:
        sampling["top_p"] = request.top_p
    if sampling:
        params["extra_body"] = sampling
    if request.system:
        params["system"] = wire_text(request.system)
    if request.stop:
        params["stop_sequences"] = [wire_text(s) for s in request.stop]
    return params


class AnthropicModel(SDKModel):
    """``anthropic/<model>`` through the official SDK."""

    key_env = ANTHROPIC_KEY_ENV
    default_base_url = "https://api.anthropic.com"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        http_client: Any = None,
        send_temperature: bool = True,
    ):
        from latte_lab.errors import require_extra

        anthropic = require_extra("anthropic", "anthropic", f"the model 'anthropic/{model}'")
        self.send_temperature = send_temperature
        super().__init__(anthropic, anthropic.Anthropic, anthropic.AnthropicError, model, provider="anthropic",
                         base_url=base_url, api_key=api_key, max_retries=max_retries, timeout_s=timeout_s,
                         http_client=http_client)

    def _create(self, request: ModelRequest, model: str) -> Any:
        return self._client.messages.create(**message_params(request, model, send_temperature=self.send_temperature),
                                           **self._call_options(request))

    def _parse(self, reply: Any, *, model: str, latency_s: float, where: str) -> ModelResponse:
        return parse_message(reply, model=model, latency_s=latency_s, where=where)


def parse_message(message: Any, *, model: str, latency_s: float, where: str) -> ModelResponse:
    """A :class:`ModelResponse` from an Anthropic Message; unusable bodies raise ModelResponseError."""
    blocks = getattr(message, "content", None)
    if not isinstance(blocks, list):
        raise ModelResponseError(f"{where}: the response has no content blocks ({redact(str(message)[:200])})")
    texts = [getattr(b, "text", None) for b in blocks if getattr(b, "type", None) == "text"]
    stop_reason = getattr(message, "stop_reason", None)
    finish = STOP_REASONS.get(stop_reason or "end_turn", "stop")
    if not texts and finish != "refusal":
        raise ModelResponseError(
            f"{where}: the response has no text block (stop_reason={stop_reason!r}); raise max_tokens "
            f"if the model spent its budget on thinking"
        )
    usage = getattr(message, "usage", None)
    tokens = Usage(
        input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
    )
    return ModelResponse(
        text="".join(t for t in texts if t), usage=tokens, latency_s=latency_s, cached=False,
        finish_reason=finish, model=getattr(message, "model", None) or model,
    )
