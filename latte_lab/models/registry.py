"""``make_model``: a model for a spec, wrapped in the response cache.

The spec rules (which forms exist, what ``base_url`` may go with) are
:func:`latte_lab.config.parse_model_spec`, shared with ``TrialConfig``; this module builds what a parsed
spec names. Provider SDKs are imported only when a provider client is built.

>>> make_model("simulated/careful")
SimulatedModel(profile='careful')
>>> make_model("scripted")
Traceback (most recent call last):
latte_lab.errors.ConfigError: 'scripted' is not made from a spec: construct ScriptedModel(replies) and pass it to run_trial(config, model=...)
"""

from __future__ import annotations

import os

from latte_lab.config import (
    DEFAULT_CACHE_MODE,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    check_cache_mode,
    parse_model_spec,
)
from latte_lab.errors import ConfigError
from latte_lab.models.base import Model
from latte_lab.models.cache import CachedModel, ResponseCache


def make_model(
    spec: str,
    *,
    base_url: str | None = None,
    cache: ResponseCache | str | os.PathLike | None = None,
    cache_mode: str = DEFAULT_CACHE_MODE,
    max_retries: int = DEFAULT_MAX_RETRIES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    **opts,
) -> Model:
    """A model for ``spec`` (see :data:`latte_lab.config.SPEC_FORMS`), wrapped in the response cache.

    Provider models are cached in ``cache`` (a :class:`ResponseCache`, or a path; None means the default
    cache) unless ``cache_mode='off'``. In ``replay`` mode no provider client is built, so no API key is
    needed and no network call can happen. The simulated model is free and deterministic, so it is
    cached only when a cache is passed explicitly. ``opts`` go to the model's constructor.

    Parameters
    ----------
    spec : str
        ``simulated``, ``simulated/<profile>``, ``openai/<model>``, ``anthropic/<model>``, or a model name with
        ``base_url`` (every form: :data:`latte_lab.config.SPEC_FORMS`).
    base_url : str, optional
        An OpenAI-compatible server (vLLM, Ollama, ...).
    cache : ResponseCache or str or PathLike, optional
        The response cache, or its path (default: ``$LATTE_LAB_CACHE``, else the user cache folder).
    cache_mode : str, optional
        ``read_write`` (default), ``replay`` (a miss is an error) or ``off``.
    max_retries : int, optional
        The SDK's retries of a failed call (default 2).
    timeout_s : float, optional
        Seconds one call may take (default 600).
    **opts
        Options of the provider's model class (``temperature`` handling, an ``http_client``, ...).

    Returns
    -------
    Model
        A model with ``generate(request) -> response``, wrapped in the response cache.
    """
    check_cache_mode(cache_mode)
    if max_retries < 0 or timeout_s <= 0:
        raise ConfigError("max_retries must be >= 0 and timeout_s > 0")
    provider, name = parse_model_spec(spec, base_url=base_url)
    if provider == "scripted":
        raise ConfigError("'scripted' is not made from a spec: construct ScriptedModel(replies) and pass it to "
                          "run_trial(config, model=...)")
    if provider == "simulated":
        from latte_lab.models.sim import SimulatedModel

        if cache is None or cache_mode == "off":
            return SimulatedModel(profile=name, **opts)
        inner = None if cache_mode == "replay" else SimulatedModel(profile=name, **opts)
    elif cache_mode == "replay":
        inner = None
    else:
        inner = _provider_model(provider, name, base_url=base_url, max_retries=max_retries, timeout_s=timeout_s,
                                **opts)
    if cache_mode == "off":
        return inner
    store = cache if isinstance(cache, ResponseCache) else ResponseCache(cache, read_only=cache_mode == "replay" or None)
    wrapped = CachedModel(inner, store, cache_mode)
    if inner is None:
        wrapped.provider, wrapped.model, wrapped.base_url = provider, name, base_url
    return wrapped


def _provider_model(provider: str, name: str, **kwargs) -> Model:
    """The SDK client of ``provider``, paced by its rate limiter when it has one (inside the cache, so
    cache hits never wait)."""
    from latte_lab.models import ratelimit

    limiter = ratelimit.limiter_for(provider, kwargs.get("base_url"))
    from latte_lab.errors import require_extra

    sdk = require_extra(provider, provider, f"the model '{provider}/{name}'")  # the extra is named as the SDK
    if provider == "openai":
        from latte_lab.models.providers.openai import OpenAIModel as cls
    else:
        from latte_lab.models.providers.anthropic import AnthropicModel as cls
    if limiter is None:
        return cls(name, **kwargs)
    kwargs.setdefault("http_client", ratelimit.http_client(sdk, limiter))
    return ratelimit.RateLimitedModel(cls(name, **kwargs), limiter)
