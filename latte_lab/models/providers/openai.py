"""OpenAI chat-completions client (also any OpenAI-compatible server: vLLM, Ollama, LM Studio).

Retries are the SDK's own; SDK exceptions become latte_lab errors through
:func:`latte_lab.models.providers._sdk.map_sdk_error`, shared with the Anthropic client.

Parameter quirks of model families (the reason for :func:`chat_params`):

* ``o1*``, ``o3*``, ``o4*`` and ``gpt-5*`` take ``max_completion_tokens``; older models ``max_tokens``.
* The reasoning families ``o1``/``o3``/``o4`` and the original ``gpt-5``/``gpt-5-mini``/``gpt-5-nano``
  reject any temperature other than 1, so temperature is not sent to them. ``gpt-5.1``/``gpt-5.2``
  and everything else receive it (the paper's runs sent 0.7 to ``gpt-5.2``).

>>> from latte_lab.models.base import Message, ModelRequest
>>> request = ModelRequest("openai", "o3-mini", "Be brief.", [Message("user", "hi")], max_tokens=64)
>>> params = chat_params(request, "o3-mini")
>>> params["max_completion_tokens"], "temperature" in params, [m["role"] for m in params["messages"]]
(64, False, ['system', 'user'])
"""

from __future__ import annotations

import re
from typing import Any

from latte_lab.config import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from latte_lab.errors import ModelResponseError
from latte_lab.models.base import ModelRequest, ModelResponse, Usage
from latte_lab.models.keys import redact
from latte_lab.models.providers._sdk import SDKModel, wire_text

OPENAI_KEY_ENV = "OPENAI_API_KEY"
MAX_COMPLETION_TOKENS_PREFIXES = ("o1", "o3", "o4", "gpt-5")  # families that renamed max_tokens
# Families that accept only the default temperature (1): o-series and the original gpt-5 models.
NO_TEMPERATURE_PATTERN = re.compile(r"^(o1|o3|o4)([-.].*)?$|^gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$")
FINISH_REASONS = {"stop": "stop", "length": "length", "content_filter": "refusal", "tool_calls": "stop"}


def uses_max_completion_tokens(model: str) -> bool:
    """True for model families that take ``max_completion_tokens`` instead of ``max_tokens``."""
    return model.startswith(MAX_COMPLETION_TOKENS_PREFIXES)


def accepts_temperature(model: str) -> bool:
    """False for families that reject a non-default temperature (see the module docstring)."""
    return NO_TEMPERATURE_PATTERN.match(model) is None


def chat_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for one request (pure; no I/O)."""
    messages = [{"role": "system", "content": wire_text(request.system)}] if request.system else []
    messages += [{"role": m.role, "content": wire_text(m.content)} for m in request.messages]
    params: dict[str, Any] = {"model": model, "messages": messages}
    limit_name = "max_completion_tokens" if uses_max_completion_tokens(model) else "max_tokens"
    params[limit_name] = request.max_tokens
    if accepts_temperature(model):
        params["temperature"] = request.temperature
    if request.top_p is not None:
        params["top_p"] = request.top_p
    if request.stop:
        params["stop"] = [wire_text(s) for s in request.stop]
    return params


class OpenAIModel(SDKModel):
    """``openai/<model>`` through the official SDK, or an OpenAI-compatible server via ``base_url``."""

    key_env = OPENAI_KEY_ENV
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        http_client: Any = None,
        provider: str = "openai",
    ):
        from latte_lab.errors import require_extra

        openai = require_extra("openai", "openai", f"the model '{provider}/{model}'")
        super().__init__(openai, openai.OpenAI, openai.OpenAIError, model, provider=provider, base_url=base_url,
                         api_key=api_key, max_retries=max_retries, timeout_s=timeout_s, http_client=http_client)

    def _create(self, request: ModelRequest, model: str) -> Any:
        return self._client.chat.completions.create(**chat_params(request, model), **self._call_options(request))

    def _parse(self, reply: Any, *, model: str, latency_s: float, where: str) -> ModelResponse:
        return parse_completion(reply, model=model, latency_s=latency_s, where=where)


def parse_completion(completion: Any, *, model: str, latency_s: float, where: str) -> ModelResponse:
    """A :class:`ModelResponse` from a ChatCompletion object; unusable bodies raise ModelResponseError."""
    choices = getattr(completion, "choices", None)
    if not choices:
        raise ModelResponseError(f"{where}: the response has no choices ({redact(str(completion)[:200])})")
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    finish = FINISH_REASONS.get(getattr(choice, "finish_reason", None) or "stop", "stop")
    refusal = getattr(message, "refusal", None)
    if content is None and refusal:
        content, finish = refusal, "refusal"
    if content is None:
        raise ModelResponseError(
            f"{where}: the first choice has no text content (finish_reason="
            f"{getattr(choice, 'finish_reason', None)!r}); the model may have returned only tool calls or "
            f"spent its whole budget on reasoning: raise max_tokens"
        )
    usage = getattr(completion, "usage", None)
    tokens = Usage(
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
    )
    return ModelResponse(
        text=content, usage=tokens, latency_s=latency_s, cached=False, finish_reason=finish,
        model=getattr(completion, "model", None) or model,
    )
