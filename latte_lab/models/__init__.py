"""The model layer: one protocol (``generate(request) -> response``), providers, cache, cassettes, costs.

>>> import latte_lab as ll
>>> model = ll.make_model("simulated")
>>> model
SimulatedModel(profile='default')
>>> parse_model_spec("openai/gpt-4o")
('openai', 'gpt-4o')

Layout: ``base`` (records, the ``Model`` protocol, token estimates), ``registry`` (``make_model``),
``providers/`` (OpenAI, Anthropic, their shared SDK helpers), ``sim/`` (the simulated model),
``scripted``, ``cache``, ``cassette``, ``keys`` (API keys and redaction), ``ledger`` (tokens and dollars).
Spec rules and defaults live in :mod:`latte_lab.config`. Provider SDKs are imported only when a provider
model is made, so ``import latte_lab.models`` is cheap.
"""

from __future__ import annotations

import importlib

from latte_lab.config import (
    CACHE_MODES,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    SPEC_FORMS,
    parse_model_spec,
)
from latte_lab.models.base import (
    CHARS_PER_TOKEN,
    AgentView,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    Scope,
    Usage,
    estimate_tokens,
)
from latte_lab.models.cache import CachedModel, CacheStats, ResponseCache
from latte_lab.models.cassette import (
    Cassette,
    CassetteModel,
    RecordingModel,
    import_cassettes,
    read_cassette,
)
from latte_lab.models.keys import redact
from latte_lab.models.ledger import CostLedger, load_prices
from latte_lab.models.providers import AnthropicModel, OpenAIModel
from latte_lab.models.registry import make_model
from latte_lab.models.request_keys import KEY_SCHEMA_VERSION, request_key
from latte_lab.models.scripted import ScriptedModel

# The simulated model imports the task layer (its skill is a task's reference solution): resolved on use.
_LAZY = {"SimulatedModel": "latte_lab.models.sim", "Profile": "latte_lab.models.sim", "PROFILES": "latte_lab.models.sim"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'latte_lab.models' has no attribute {name!r}")


__all__ = [
    "CACHE_MODES",
    "CHARS_PER_TOKEN",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TEMPERATURE",
    "KEY_SCHEMA_VERSION",
    "PROFILES",
    "SPEC_FORMS",
    "AgentView",
    "AnthropicModel",
    "CacheStats",
    "CachedModel",
    "Cassette",
    "CassetteModel",
    "CostLedger",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OpenAIModel",
    "Profile",
    "RecordingModel",
    "ResponseCache",
    "Scope",
    "ScriptedModel",
    "SimulatedModel",
    "Usage",
    "estimate_tokens",
    "import_cassettes",
    "load_prices",
    "make_model",
    "parse_model_spec",
    "read_cassette",
    "redact",
    "request_key",
]
