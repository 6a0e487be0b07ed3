"""The model layer: one protocol (``generate(request) -> response``), providers, cache, cassettes, costs.

>>> parse_model_spec("anthropic/claude-sonnet-4-5")
('anthropic', 'claude-sonnet-4-5')
>>> parse_model_spec("simulated")
('simulated', 'default')

Provider SDKs are imported only when a provider model is made, so ``import latte_lab.models`` is cheap.
"""

from __future__ import annotations

import os

from latte_lab.errors import ConfigError
from latte_lab.models.base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    AgentView,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    Scope,
    Usage,
)
from latte_lab.models.cache import (
    CACHE_MODES,
    KEY_SCHEMA_VERSION,
    CachedModel,
    CacheStats,
    ResponseCache,
    request_key,
)
from latte_lab.models.cassette import (
    Cassette,
    CassetteModel,
    RecordingModel,
    import_cassettes,
    read_cassette,
)
from latte_lab.models.keys import redact
from latte_lab.models.ledger import CostLedger
from latte_lab.models.scripted import ScriptedModel

SPEC_FORMS = (
    "openai/<model>",
    "anthropic/<model>",
    "simulated",
    "simulated/<profile>",
    "<model> with base_url=... (any OpenAI-compatible server: vLLM, Ollama, LM Studio)",
)
PROVIDERS = ("openai", "anthropic", "simulated")
DEFAULT_SIMULATED_PROFILE = "default"


def _forms() -> str:
    return "; ".join(SPEC_FORMS)


def parse_model_spec(spec: str, *, base_url: str | None = None) -> tuple[str, str]:
    """``(provider, model)`` for a model spec; unknown forms raise ConfigError listing the accepted ones."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"model spec must be a non-empty string; accepted forms: {_forms()}")
    spec = spec.strip()
    if spec == "scripted":
        raise ConfigError("'scripted' is not made from a spec: construct ScriptedModel(replies) directly")
    if spec == "simulated":
        return "simulated", DEFAULT_SIMULATED_PROFILE
    provider, sep, name = spec.partition("/")
    if sep and provider in PROVIDERS and name.strip():
        return provider, name.strip()
    if base_url:  # an OpenAI-compatible server names its models freely ("llama3.1:8b", "org/model")
        return "openai", spec
    raise ConfigError(f"unknown model spec {spec!r}; accepted forms: {_forms()}")


def _simulated(profile: str, **opts) -> Model:
    try:
        from latte_lab.models.simulated import SimulatedModel
    except ImportError as exc:
        raise ConfigError(f"the simulated model is unavailable ({exc}); use a provider model instead") from None
    return SimulatedModel(profile=profile, **opts)


def make_model(
    spec: str,
    *,
    base_url: str | None = None,
    cache: ResponseCache | str | os.PathLike | None = None,
    cache_mode: str = "read_write",
    max_retries: int = 2,
    timeout_s: float = 600.0,
    **opts,
) -> Model:
    """A model for ``spec`` (see :data:`SPEC_FORMS`), wrapped in the response cache.

    Provider models are cached in ``cache`` (a :class:`ResponseCache`, or a path; None means the default
    cache) unless ``cache_mode='off'``. In ``replay`` mode no provider client is built, so no API key is
    needed and no network call can happen. The simulated model is free and deterministic, so it is
    cached only when a cache is passed explicitly. ``opts`` go to the model's constructor.
    """
    if cache_mode not in CACHE_MODES:
        raise ConfigError(f"unknown cache mode {cache_mode!r}; use one of {', '.join(CACHE_MODES)}")
    if max_retries < 0 or timeout_s <= 0:
        raise ConfigError("max_retries must be >= 0 and timeout_s > 0")
    provider, name = parse_model_spec(spec, base_url=base_url)
    if provider == "simulated":
        if cache is None or cache_mode == "off":
            return _simulated(name, **opts)
        inner = None if cache_mode == "replay" else _simulated(name, **opts)
    elif cache_mode == "replay":
        inner = None
    elif provider == "openai":
        from latte_lab.models.openai_client import OpenAIModel

        inner = OpenAIModel(name, base_url=base_url, max_retries=max_retries, timeout_s=timeout_s, **opts)
    else:
        from latte_lab.models.anthropic_client import AnthropicModel

        inner = AnthropicModel(name, base_url=base_url, max_retries=max_retries, timeout_s=timeout_s, **opts)
    if cache_mode == "off":
        return inner
    store = cache if isinstance(cache, ResponseCache) else ResponseCache(cache)
    wrapped = CachedModel(inner, store, cache_mode)
    if inner is None:
        wrapped.provider, wrapped.model, wrapped.base_url = provider, name, base_url
    return wrapped


__all__ = [
    "CACHE_MODES",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TEMPERATURE",
    "KEY_SCHEMA_VERSION",
    "SPEC_FORMS",
    "AgentView",
    "CacheStats",
    "CachedModel",
    "Cassette",
    "CassetteModel",
    "CostLedger",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "RecordingModel",
    "ResponseCache",
    "Scope",
    "ScriptedModel",
    "Usage",
    "import_cassettes",
    "make_model",
    "parse_model_spec",
    "read_cassette",
    "redact",
    "request_key",
]
