"""OpenAI chat-completions client (also any OpenAI-compatible server: vLLM, Ollama, LM Studio).

Retries are the SDK's own (exponential backoff, honours ``Retry-After`` / ``retry-after-ms``, retries
408/409/429/5xx and connection errors, never 400/401/403). SDK exceptions are mapped onto the
latte_lab error hierarchy by :func:`map_sdk_error`, which the Anthropic client shares because both
SDKs expose the same exception classes. Every message is passed through :func:`redact`.

Parameter quirks of model families (the reason for :func:`chat_params`):

* ``o1*``, ``o3*``, ``o4*`` and ``gpt-5*`` take ``max_completion_tokens``; older models ``max_tokens``.
* The reasoning families ``o1``/``o3``/``o4`` and the original ``gpt-5``/``gpt-5-mini``/``gpt-5-nano``
  reject any temperature other than 1, so temperature is not sent to them. ``gpt-5.1``/``gpt-5.2``
  and everything else receive it (the paper's runs sent 0.7 to ``gpt-5.2``).
"""

from __future__ import annotations

import re
import time
from typing import Any

from latte_lab.errors import (
    AuthenticationError,
    ContextLengthError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
)
from latte_lab.models.base import ModelRequest, ModelResponse, Usage
from latte_lab.models.keys import get_api_key, redact

OPENAI_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MAX_RETRIES = 2  # the SDKs' default; enough for transient 429/5xx without hiding an outage
DEFAULT_TIMEOUT_S = 600.0  # one call; long agent replies at 4k tokens finish well within 10 minutes
MAX_COMPLETION_TOKENS_PREFIXES = ("o1", "o3", "o4", "gpt-5")  # families that renamed max_tokens
# Families that accept only the default temperature (1): o-series and the original gpt-5 models.
NO_TEMPERATURE_PATTERN = re.compile(r"^(o1|o3|o4)([-.].*)?$|^gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$")
CONTEXT_LENGTH_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "context window",
    "too many tokens",
)
ERROR_DETAIL_CHARS = 300  # enough of the provider's message to act on, short enough for a log line

FINISH_REASONS = {"stop": "stop", "length": "length", "content_filter": "refusal", "tool_calls": "stop"}


def uses_max_completion_tokens(model: str) -> bool:
    """True for model families that take ``max_completion_tokens`` instead of ``max_tokens``."""
    return model.startswith(MAX_COMPLETION_TOKENS_PREFIXES)


def accepts_temperature(model: str) -> bool:
    """False for families that reject a non-default temperature (see the module docstring)."""
    return NO_TEMPERATURE_PATTERN.match(model) is None


def chat_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for one request (pure; no I/O)."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    messages += [{"role": m.role, "content": m.content} for m in request.messages]
    params: dict[str, Any] = {"model": model, "messages": messages}
    limit_name = "max_completion_tokens" if uses_max_completion_tokens(model) else "max_tokens"
    params[limit_name] = request.max_tokens
    if accepts_temperature(model):
        params["temperature"] = request.temperature
    if request.top_p is not None:
        params["top_p"] = request.top_p
    if request.stop:
        params["stop"] = list(request.stop)
    return params


def _detail(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return redact(text[:ERROR_DETAIL_CHARS])


def _is_context_length(exc: Any) -> bool:
    haystack = f"{exc} {getattr(exc, 'body', '')} {getattr(exc, 'code', '')}".lower()
    return any(marker in haystack for marker in CONTEXT_LENGTH_MARKERS)


def map_sdk_error(
    exc: BaseException, sdk: Any, *, provider: str, model: str, env_var: str, base_url: str | None,
    max_retries: int, timeout_s: float,
) -> ModelError:
    """The latte_lab error for an exception raised by the ``openai`` or ``anthropic`` SDK module ``sdk``."""
    where = redact(f"{provider}/{model}" + (f" at {base_url}" if base_url else ""))
    detail = _detail(exc)
    if isinstance(exc, (sdk.AuthenticationError, sdk.PermissionDeniedError)):
        status = getattr(exc, "status_code", "")
        return AuthenticationError(
            f"{where} refused the API key (HTTP {status}): {detail}. Check {env_var} in the environment "
            f"or .env; it was not retried"
        )
    if isinstance(exc, sdk.RateLimitError):
        return RateLimitError(
            f"{where}: still rate limited after {max_retries} retries; lower concurrency or wait "
            f"({detail})"
        )
    if isinstance(exc, sdk.APIStatusError) and exc.status_code in (400, 413) and _is_context_length(exc):
        return ContextLengthError(
            f"{where}: the request is longer than the model's context window ({detail}); shorten the "
            f"history window or lower max_tokens. Not retried"
        )
    if isinstance(exc, sdk.APITimeoutError):
        return ModelTimeoutError(
            f"{where}: no answer within {timeout_s:g} s (after {max_retries} retries); raise timeout_s "
            f"or check the server"
        )
    if isinstance(exc, sdk.APIConnectionError):
        target = base_url or f"the {provider} API"
        return ModelError(
            f"{where}: could not connect to {target} ({detail}); is the server running and the base URL "
            f"right?"
        )
    if isinstance(exc, sdk.APIResponseValidationError):
        return ModelResponseError(f"{where}: the response did not have the expected shape ({detail})")
    if isinstance(exc, sdk.InternalServerError):
        return ModelError(
            f"{where}: server error HTTP {exc.status_code} after {max_retries} retries ({detail}); "
            f"try again later"
        )
    if isinstance(exc, sdk.APIStatusError):
        return ModelError(f"{where}: HTTP {exc.status_code} ({detail})")
    if isinstance(exc, ValueError):  # JSON decoding of a malformed body
        return ModelResponseError(f"{where}: the server sent a body that is not valid JSON ({detail})")
    return ModelError(f"{where}: {type(exc).__name__}: {detail}")


class OpenAIModel:
    """``openai/<model>`` through the official SDK, or an OpenAI-compatible server via ``base_url``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        provider: str = "openai",
    ):
        import openai

        self.provider = provider
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        key = api_key or get_api_key(OPENAI_KEY_ENV, provider=provider, base_url=base_url)
        self._sdk = openai
        self._client = openai.OpenAI(
            api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout_s
        )

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={self.base_url!r})"

    def _error(self, exc: BaseException, model: str) -> ModelError:
        return map_sdk_error(
            exc, self._sdk, provider=self.provider, model=model, env_var=OPENAI_KEY_ENV,
            base_url=self.base_url, max_retries=self.max_retries, timeout_s=self.timeout_s,
        )

    def generate(self, request: ModelRequest) -> ModelResponse:
        model = request.model or self.model
        start = time.perf_counter()
        try:
            completion = self._client.chat.completions.create(**chat_params(request, model))
        except (self._sdk.OpenAIError, ValueError) as exc:
            raise self._error(exc, model) from None
        latency = time.perf_counter() - start
        return parse_completion(completion, model=model, latency_s=latency, where=f"{self.provider}/{model}")


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
