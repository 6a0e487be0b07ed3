"""Task registry: ``names()``, ``get(name)`` and ``register``.

The built-in tasks (debug, eda, textproc) register themselves when first looked up; the released
code's names (``simple_eda``, ``debug_sprint``) are aliases (``latte_lab.config.TASK_ALIASES``). A
task of your own is a :class:`Task` subclass registered with a decorator, from a module or a notebook
cell; ``TrialConfig(task="mine")``, sweeps, replay and the analysis then accept it:

>>> import latte_lab as ll
>>> ll.tasks.names()[:3]
['debug', 'eda', 'textproc']
>>> ll.tasks.get("debug_sprint").id
'debug'
"""

from __future__ import annotations

from latte_lab.config import BUILTIN_TASKS, TASK_ALIASES
from latte_lab.registry import Registry
from latte_lab.tasks.base import EvalResult, Task, WorkUnit
from latte_lab.tasks.suite import run_hidden_suite

REGISTRY = Registry("task", name_attr="id", aliases=TASK_ALIASES, builtin=BUILTIN_TASKS)


def register(cls=None, /, **kw):
    """Class decorator adding a task: ``@register`` (uses ``cls.id``) or ``@register("my_task")``."""
    return REGISTRY.register(cls, **kw)


def names() -> list[str]:
    """Registered task ids: the built-ins, then any registered by the user."""
    return REGISTRY.names()


def get(name: str) -> Task:
    """A fresh instance of the task ``name`` (an id or an alias); an unknown name lists the known ones."""
    from latte_lab.errors import ConfigError, TaskError

    try:
        cls = REGISTRY.get(name)
    except ConfigError as exc:
        raise TaskError(str(exc)) from None
    return cls()


__all__ = ["REGISTRY", "EvalResult", "Task", "WorkUnit", "get", "names", "register", "run_hidden_suite"]
