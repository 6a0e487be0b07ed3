"""latte_lab: run, replay and analyse teams of language agents that coordinate through task graphs.

>>> import latte_lab as ll
>>> g = ll.CoordinationGraph()
>>> g.discover("t1", deps=[], title="Fix rms", by="Lead")
>>> g.frontier()
['t1']
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from latte_lab.errors import (
    AuthenticationError,
    CacheMissError,
    ConfigError,
    ContextLengthError,
    DataError,
    LatteError,
    MissingAPIKeyError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    OperatorError,
    RateLimitError,
    TaskError,
    WorkspaceError,
)

# Public names resolved on first use, so `import latte_lab` does not import pandas, matplotlib or the
# provider SDKs until a notebook needs them.
_LAZY = {
    "CoordinationGraph": "latte_lab.graph",
    "Status": "latte_lab.graph",
    "parse_actions": "latte_lab.actions",
    "render_action": "latte_lab.actions",
    "ParseResult": "latte_lab.actions",
    "Workspace": "latte_lab.workspace",
    "TrialConfig": "latte_lab.trial",
    "TrialResult": "latte_lab.trial",
    "run_trial": "latte_lab.trial",
    "replay": "latte_lab.trial",
    "fork": "latte_lab.trial",
    "fork_sweep": "latte_lab.sweep.forks",
    "load_trial": "latte_lab.trial",
    "read_run": "latte_lab.rundir",
    "run_sweep": "latte_lab.sweep",
    "load_published": "latte_lab.analysis.loaders",
    "load_runs": "latte_lab.analysis.loaders",
    "make_model": "latte_lab.models",
}
_SUBMODULES = {"tasks", "analysis", "viz", "models", "metrics", "teams", "scheduling", "sweep", "workspace", "events",
               "rundir", "schema", "teaching", "sandbox", "graph"}
# Modules that moved: their old names import the new module, with a DeprecationWarning naming it.
MOVED_MODULES = {
    "latte_lab.dag": "latte_lab.graph.dag",
    "latte_lab.history": "latte_lab.graph.history",
    "latte_lab.sweepdir": "latte_lab.sweep.sweepdir",
    # ll.fork is the function (latte_lab.trial.fork); a module of that name would take its place in the package
    "latte_lab.fork": "latte_lab.forking",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import latte_lab.dag`` (an old name of :data:`MOVED_MODULES`) gives the module under its new name."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = MOVED_MODULES[spec.name]
        warnings.warn(f"{spec.name} is now {new}; import that instead", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        pass  # the module under its new name is imported already


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def _installed_version() -> str:
    """The installed distribution's version (pyproject.toml's, the one source); ``0+unknown`` for a copy of
    the source that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("latte_lab")
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str):
    if name == "__version__":
        value = globals()["__version__"] = _installed_version()
        return value
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES or f"latte_lab.{name}" in MOVED_MODULES:
        module = importlib.import_module(f"latte_lab.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'latte_lab' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)


__all__ = [
    "AuthenticationError",
    "CacheMissError",
    "ConfigError",
    "ContextLengthError",
    "DataError",
    "LatteError",
    "MissingAPIKeyError",
    "ModelError",
    "ModelResponseError",
    "ModelTimeoutError",
    "OperatorError",
    "RateLimitError",
    "TaskError",
    "WorkspaceError",
    "CoordinationGraph",
    "ParseResult",
    "Status",
    "TrialConfig",
    "TrialResult",
    "Workspace",
    "fork",
    "fork_sweep",
    "load_published",
    "load_runs",
    "load_trial",
    "make_model",
    "parse_actions",
    "read_run",
    "render_action",
    "replay",
    "run_sweep",
    "run_trial",
]
