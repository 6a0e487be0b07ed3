"""What the provider clients share: error mapping and the wording of failures.

The ``openai`` and ``anthropic`` SDKs are generated from the same template (Stainless), so they expose
the same exception classes (``AuthenticationError``, ``RateLimitError``, ``APIStatusError``, ...) and
the same retry policy: exponential backoff, ``Retry-After`` / ``retry-after-ms`` honoured, 408/409/429
and 5xx and connection errors retried, never 400/401/403. :func:`map_sdk_error` turns any of them into
the latte_lab error hierarchy; every message passes through :func:`~latte_lab.models.keys.redact`.

>>> import openai
>>> err = map_sdk_error(openai.APIConnectionError(request=None), openai, provider="openai",
...                     model="gpt-4o", env_var="OPENAI_API_KEY", base_url="http://127.0.0.1:9",
...                     max_retries=2, timeout_s=60)
>>> type(err).__name__, str(err).split(";")[0]
('ModelError', 'openai/gpt-4o at http://127.0.0.1:9: could not connect to http://127.0.0.1:9 (Connection error.)')
"""

from __future__ import annotations

from typing import Any

from latte_lab.errors import (
    AuthenticationError,
    ContextLengthError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
)
from latte_lab.models.keys import redact

CONTEXT_LENGTH_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "context window",
    "too many tokens",
)
ERROR_DETAIL_CHARS = 300  # enough of the provider's message to act on, short enough for a log line


def error_detail(exc: BaseException) -> str:
    """The exception's message on one line, cut to :data:`ERROR_DETAIL_CHARS`, secrets masked."""
    text = " ".join(str(exc).split())
    return redact(text[:ERROR_DETAIL_CHARS])


def is_context_length(exc: Any) -> bool:
    """True when a 400/413 says the prompt does not fit (each provider words it differently)."""
    haystack = f"{exc} {getattr(exc, 'body', '')} {getattr(exc, 'code', '')}".lower()
    return any(marker in haystack for marker in CONTEXT_LENGTH_MARKERS)


def map_sdk_error(
    exc: BaseException, sdk: Any, *, provider: str, model: str, env_var: str, base_url: str | None,
    max_retries: int, timeout_s: float,
) -> ModelError:
    """The latte_lab error for an exception raised by the ``openai`` or ``anthropic`` SDK module ``sdk``."""
    where = redact(f"{provider}/{model}" + (f" at {base_url}" if base_url else ""))
    detail = error_detail(exc)
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
    if isinstance(exc, sdk.APIStatusError) and exc.status_code in (400, 413) and is_context_length(exc):
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
