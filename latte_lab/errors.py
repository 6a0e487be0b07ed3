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


class MissingExtraError(ConfigError):
    """A feature needs a package of an optional extra that is not installed; the message is one line naming
    the extra to install."""


def require_extra(module: str, extra: str, feature: str):
    """Imports ``module`` for ``feature``, or raises :class:`MissingExtraError`, one line naming the extra.

    Parameters
    ----------
    module : str
        The module to import, e.g. ``"openai"``.
    extra : str
        The latte_lab extra that installs it (``lab``, ``openai``, ``anthropic``, ``parquet``, ``distributed``).
    feature : str
        What needs it, as the message's subject, e.g. ``"the model 'openai/gpt-4o'"``.

    Returns
    -------
    module
        The imported module.

    >>> require_extra("json", "lab", "a test").__name__
    'json'
    >>> require_extra("no_such_module_xyz", "lab", "the trial form")
    Traceback (most recent call last):
    ...
    latte_lab.errors.MissingExtraError: the trial form needs the no_such_module_xyz package: pip install 'latte-lab[lab]'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split(".")[0]
        raise MissingExtraError(f"{feature} needs the {package} package: pip install 'latte-lab[{extra}]'") from None
