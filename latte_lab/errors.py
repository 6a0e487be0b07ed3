"""The latte_lab exception hierarchy: one root, specific subclasses.

Every error names what was wrong and what the user can do about it.
"""

from __future__ import annotations


class LatteError(Exception):
    """Root of every error latte_lab raises on purpose."""


class ConfigError(LatteError, ValueError):
    """A trial, sweep or model configuration is invalid."""


class OperatorError(LatteError):
    """A graph operator's precondition does not hold; the graph is left unchanged."""

    def __init__(self, operator: str, node: str | None, reason: str):
        self.operator = operator
        self.node = node
        self.reason = reason
        where = f" on node {node!r}" if node is not None else ""
        super().__init__(f"{operator}{where} rejected: {reason}")


class WorkspaceError(LatteError):
    """A file action was refused (outside the workspace, read-only, missing file, ...)."""


class TaskError(LatteError):
    """Unknown task, or a task's files are missing or inconsistent."""


class ModelError(LatteError):
    """A model call failed; the message says what to do."""


class MissingAPIKeyError(ModelError):
    """The provider's API key is not set in the environment or .env."""


class AuthenticationError(ModelError):
    """The provider refused the API key."""


class RateLimitError(ModelError):
    """Still rate limited after the configured retries."""


class ContextLengthError(ModelError):
    """The request is longer than the model's context window."""


class ModelTimeoutError(ModelError):
    """A call did not finish within its timeout."""


class ModelResponseError(ModelError):
    """The provider answered with something that is not a usable response."""


class CacheMissError(ModelError):
    """Replay mode found no cached response for a request."""


class DataError(LatteError):
    """A data file (published results, run directory) is missing or malformed."""
