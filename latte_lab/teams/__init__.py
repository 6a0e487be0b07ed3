"""Team registry: ``names()``, ``get(name)`` and ``register``; the team classes to build on.

A team is a protocol: who acts in each round, what each agent sees and which actions it may use. The
built-in teams (one module each: ``latte``, ``static``, ``leader_worker``, ``decentralized``,
``pipeline``) register themselves when first looked up; the released code's names (``dynamic``,
``no_graph``, ``fixed``) are aliases (``latte_lab.config.TEAM_ALIASES``). A team of your own is a
subclass registered with a decorator, from a module or a notebook cell; ``TrialConfig(team=...)``,
sweeps, replay and the analysis then accept it. The hooks a subclass implements are documented on
:class:`~latte_lab.teams.engine.Team`.

>>> import latte_lab as ll
>>> ll.teams.names()
['latte', 'static', 'leader_worker', 'decentralized', 'pipeline']
>>> ll.teams.get("dynamic") is ll.teams.LatteTeam
True
"""

from __future__ import annotations

import importlib

from latte_lab.config import BUILTIN_TEAMS, TEAM_ALIASES
from latte_lab.registry import Registry

REGISTRY = Registry("team", name_attr="name", aliases=TEAM_ALIASES, builtin=BUILTIN_TEAMS)

# Classes to subclass, resolved on first use so that `import latte_lab.teams` stays light.
_LAZY = {
    "Team": "latte_lab.teams.engine", "Agent": "latte_lab.teams.engine", "Outcome": "latte_lab.teams.engine",
    "GraphTeam": "latte_lab.teams.graph_team", "FlatTeam": "latte_lab.teams.flat",
    "LatteTeam": "latte_lab.teams.latte", "StaticTeam": "latte_lab.teams.static",
    "LeaderWorkerTeam": "latte_lab.teams.leader_worker", "DecentralizedTeam": "latte_lab.teams.decentralized",
    "PipelineTeam": "latte_lab.teams.pipeline",
}


def register(cls=None, /, **kw):
    """Class decorator adding a team: ``@register("my_team")`` or ``@register`` (uses ``cls.name``).

    ``aliases=("other",)`` adds more names; registering a name twice is an error unless it is the
    same class again (a re-run notebook cell) or ``replace=True``.
    """
    return REGISTRY.register(cls, **kw)


def names() -> list[str]:
    """Registered team names: the built-ins, then any registered by the user."""
    return REGISTRY.names()


def get(name: str) -> type:
    """The team class registered as ``name`` (or an alias); an unknown name lists the known ones."""
    return REGISTRY.get(name)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'latte_lab.teams' has no attribute {name!r}")


__all__ = ["REGISTRY", "get", "names", "register", *_LAZY]
