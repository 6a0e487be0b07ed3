"""Task registry: ``names()`` and ``get(name)``.

Tasks register themselves by id; official names from the released code (``simple_eda``,
``debug_sprint``) are accepted as aliases.
"""

from __future__ import annotations

from latte_lab.errors import TaskError
from latte_lab.tasks.base import EvalResult, Task, WorkUnit

_REGISTRY: dict[str, type[Task]] = {}
_ALIASES = {"simple_eda": "eda", "debug_sprint": "debug"}


def register(cls: type[Task]) -> type[Task]:
    """Class decorator adding a task to the registry."""
    _REGISTRY[cls.id] = cls
    return cls


def _load_builtin() -> None:
    # Imported lazily so that `import latte_lab` stays fast.
    import importlib

    for mod in ("debug", "eda", "textproc"):
        try:
            importlib.import_module(f"latte_lab.tasks.{mod}")
        except ModuleNotFoundError as exc:  # a task package still being written
            if exc.name != f"latte_lab.tasks.{mod}":
                raise


def names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def get(name: str) -> Task:
    _load_builtin()
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        raise TaskError(f"unknown task {name!r}; known tasks: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[key]()


__all__ = ["EvalResult", "Task", "WorkUnit", "get", "names", "register"]
