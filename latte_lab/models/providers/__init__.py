"""Model providers through their official SDKs: ``openai/<model>`` (and any OpenAI-compatible server)
and ``anthropic/<model>``. Each SDK is imported when its client is built, not when this package is."""

from latte_lab.models.providers.anthropic import AnthropicModel
from latte_lab.models.providers.openai import OpenAIModel

__all__ = ["AnthropicModel", "OpenAIModel"]
