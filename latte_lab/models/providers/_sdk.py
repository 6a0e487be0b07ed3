"""What the provider clients share: the SDK client around one call (:class:`SDKModel`), error mapping and
the wording of failures.

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
from latte_lab.models.base import ModelRequest, ModelResponse
from latte_lab.models.call_header import headers_for
from latte_lab.models.keys import KEY_HOSTS, endpoint, get_api_key, key_variable, redact

CONTEXT_LENGTH_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "context window",
    "too many tokens",
)
ERROR_DETAIL_CHARS = 300  # enough of the provider's message to act on, short enough for a log line


def wire_text(text: str) -> str:
    """``text`` as a request body can carry it. The SDKs send UTF-8, which has no lone surrogate (a reply
    can hold one, and the next prompt repeats the reply): each becomes U+FFFD on the wire, while the prompt
    itself (its cache key, its cassette line) keeps it.

    >>> wire_text("ok \\udc80"), wire_text("plain")
    ('ok \ufffd', 'plain')
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # UTF-16 joins a split pair back into its character and marks lone halves
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


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
        variable = key_variable(env_var, base_url)
        home = "" if variable == env_var else f" ({env_var} goes only to {KEY_HOSTS.get(env_var, provider)})"
        return AuthenticationError(
            f"{where} refused the API key (HTTP {status}): {detail}. Check {variable}{home} in the environment "
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


class SDKModel:
    """A model served through an official SDK: the client with the SDK's own retries and timeout, the API
    key, timing and error mapping around each call. A provider module subclasses it and says how one
    request becomes a call (:meth:`_create`) and how the reply becomes a response (:meth:`_parse`)."""

    key_env = ""  # the environment variable holding the API key
    default_base_url = ""  # the provider's own API, where the key in key_env may go

    def __init__(self, sdk: Any, client_class: Any, root_error: type[BaseException], model: str, *, provider: str,
                 base_url: str | None, api_key: str | None, max_retries: int, timeout_s: float, http_client: Any):
        self.provider = provider
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        # where the calls go, decided here (base_url, else the SDK's base URL variable, else the provider's
        # API) and given to the SDK, so that the key chosen for it is the key that reaches it
        target = endpoint(self.key_env, base_url) or self.default_base_url
        self._target = target
        key = api_key or get_api_key(self.key_env, provider=provider, base_url=target)
        self._sdk = sdk
        self._sdk_error = root_error  # the SDK's own exceptions all derive from it
        self._client = client_class(
            api_key=key, base_url=target, max_retries=max_retries, timeout=timeout_s,
            http_client=http_client,  # the rate limiter's 429 hook, when one is set
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    def _create(self, request: ModelRequest, model: str) -> Any:  # pragma: no cover - every provider overrides
        raise NotImplementedError

    def _parse(self, reply: Any, *, model: str, latency_s: float, where: str) -> ModelResponse:  # pragma: no cover
        raise NotImplementedError

    def _call_options(self, request: ModelRequest) -> dict[str, Any]:
        """Options every call passes to the SDK: the call's frame and scope in a header, for a server on this
        machine only (:mod:`latte_lab.models.call_header`; the provider emulator answers from it)."""
        headers = headers_for(request, self._target)
        return {"extra_headers": headers} if headers else {}

    def _error(self, exc: BaseException, model: str) -> ModelError:
        return map_sdk_error(
            exc, self._sdk, provider=self.provider, model=model, env_var=self.key_env,
            base_url=self.base_url, max_retries=self.max_retries, timeout_s=self.timeout_s,
        )

    def generate(self, request: ModelRequest) -> ModelResponse:
        model = request.model or self.model
        start = time.perf_counter()
        try:
            reply = self._create(request, model)
        except (self._sdk_error, ValueError) as exc:
            raise self._error(exc, model) from None
        latency = time.perf_counter() - start
        return self._parse(reply, model=model, latency_s=latency, where=f"{self.provider}/{model}")
