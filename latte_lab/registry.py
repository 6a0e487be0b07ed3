"""Name -> class registries for teams and tasks, and how worker processes of a sweep see them.

``latte_lab.teams`` and ``latte_lab.tasks`` each hold one :class:`Registry`. Built-in entries come from
modules imported on first use (so ``import latte_lab`` stays fast); a user registers more from any
module or notebook cell::

    @ll.teams.register("mine")
    class Mine(ll.teams.LatteTeam): ...

    ll.TrialConfig(task="debug", team="mine")   # validated against the registry

A sweep's worker processes must know the same names. :func:`pool_options` gives the
``ProcessPoolExecutor`` arguments that make them: an initializer that imports the modules holding
user registrations and, when a registration lives in ``__main__`` (a notebook cell or a script), the
``fork`` start method, the only one under which a child process inherits classes defined there.

>>> r = Registry("widget", aliases={"old": "new"})
>>> @r.register("new")
... class New: pass
>>> r.resolve("old"), r.names(), r.get("new") is New
('new', ['new'], True)
>>> r.get("nope")
Traceback (most recent call last):
...
latte_lab.errors.ConfigError: unknown widget 'nope'; known widgets: new (aliases: old)
"""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from latte_lab.errors import ConfigError

__all__ = ["Registry", "install", "pool_options", "user_entries"]

_REGISTRIES: dict[str, Registry] = {}  # kind -> registry, for the worker-process hook


class Registry:
    """Classes by name, with aliases, built-ins loaded lazily and a clear error for unknown names.

    Parameters
    ----------
    kind:
        What is registered ("team", "task"): used in messages and as the registry's key.
    name_attr:
        The class attribute that holds an entry's name (``name`` for teams, ``id`` for tasks).
    builtin:
        The built-in entries' names, each with the module that defines it (imported on the first lookup that
        needs a class; importing it registers the entry). A built-in name resolves without importing anything.
    aliases:
        Other names accepted for an entry (the released code's names), alias -> name.
    """

    def __init__(self, kind: str, *, name_attr: str = "name", builtin: Mapping[str, str] | None = None,
                 aliases: Mapping[str, str] | None = None):
        self.kind = kind
        self.name_attr = name_attr
        self._builtin_names = dict(builtin or {})
        self._builtin_modules = tuple(dict.fromkeys(self._builtin_names.values()))
        self._loaded = not self._builtin_modules  # the imports of the built-ins are under way or done
        self._ready = self._loaded  # ... and done
        self._load_lock = threading.RLock()  # trials run in threads look names up at once
        self._entries: dict[str, type] = {}
        self._aliases: dict[str, str] = dict(aliases or {})
        _REGISTRIES[kind] = self

    # ----- registration -----
    def register(self, obj: type | str | None = None, /, *, aliases: Iterable[str] = (),
                 replace: bool = False) -> Any:
        """Adds a class under a name; usable as ``@register``, ``@register("name")`` or ``register(cls)``.

        Without a name the class's ``name_attr`` attribute is used, and the class gets
        the registered name in that attribute. Registering the same name again is allowed for the same
        class (re-running a notebook cell) or with ``replace=True``; otherwise it is an error, so a user
        team cannot silently shadow a built-in.
        """
        if isinstance(obj, type):
            return self._add(obj, None, tuple(aliases), replace)
        if obj is not None and not isinstance(obj, str):
            raise ConfigError(f"register() takes a class or a {self.kind} name, got {type(obj).__name__}")

        def decorator(cls: type) -> type:
            return self._add(cls, obj, tuple(aliases), replace)

        return decorator

    def _add(self, cls: type, name: str | None, aliases: tuple[str, ...], replace: bool) -> type:
        attr = self.name_attr
        name = name if name is not None else getattr(cls, attr, "")
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ConfigError(f"a {self.kind} needs a non-empty name without surrounding spaces: "
                              f"@register(\"my_{self.kind}\") or set {cls.__name__}.{attr}")
        if not self._builtin(cls):  # a user entry: the built-ins must be known before checking for clashes
            self._load()
        old = self._entries.get(name)
        if old is not None and old is not cls and not replace and _where(old) != _where(cls):
            raise ConfigError(f"{self.kind} {name!r} is already registered ({_where(old)}); pick another name "
                              "or pass replace=True")
        if name in self._aliases and self._aliases[name] != name:
            raise ConfigError(f"{name!r} is an alias of {self.kind} {self._aliases[name]!r}; pick another name")
        for alias in aliases:
            if alias in self._entries or self._aliases.get(alias, name) != name:
                raise ConfigError(f"alias {alias!r} of {self.kind} {name!r} is already taken")
        setattr(cls, attr, name)
        self._entries[name] = cls
        self._aliases.update((a, name) for a in aliases)
        return cls

    def _builtin(self, cls: type) -> bool:
        return cls.__module__ in self._builtin_modules

    def _load(self) -> None:
        if self._ready:
            return
        with self._load_lock:  # another thread waits here until the imports are done
            if self._loaded:  # done, or under way in this very thread (a registration during the imports)
                return
            self._loaded = True
            for module in self._builtin_modules:
                importlib.import_module(module)
            self._ready = True

    # ----- lookups -----
    def names(self) -> list[str]:
        """Registered names, built-ins first (in declaration order), then the user's, in order added."""
        self._load()
        # Built-ins register on import, and imports may come in any order (doctest collection, a user
        # importing latte_lab.teams.static first): order them by their module's declaration.
        rank = {module: i for i, module in enumerate(self._builtin_modules)}
        builtin = sorted((n for n, c in self._entries.items() if self._builtin(c)),
                         key=lambda n: rank[self._entries[n].__module__])
        return builtin + [n for n, c in self._entries.items() if not self._builtin(c)]

    def aliases(self) -> dict[str, str]:
        """alias -> registered name."""
        self._load()
        return dict(self._aliases)

    def resolve(self, name: str) -> str:
        """The registered name for ``name`` or one of its aliases; unknown names list the known ones. A
        built-in name resolves without importing its module."""
        key = self._aliases.get(name, name) if isinstance(name, str) else name
        if key in self._builtin_names or key in self._entries:
            return key
        self._load()
        if key not in self._entries:
            alias_note = f" (aliases: {', '.join(sorted(self._aliases))})" if self._aliases else ""
            raise ConfigError(f"unknown {self.kind} {name!r}; known {self.kind}s: "
                              f"{', '.join(self.names())}{alias_note}")
        return key

    def get(self, name: str) -> type:
        """The class registered under ``name`` (or an alias of it)."""
        key = self.resolve(name)
        if key not in self._entries:
            self._load()
        return self._entries[key]

    def is_builtin(self, name: str) -> bool:
        return self._builtin(self.get(name))

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str) and self._aliases.get(name, name) in self._builtin_names:
            return True
        self._load()
        return isinstance(name, str) and self._aliases.get(name, name) in self._entries

    def user_entries(self) -> list[tuple[str, str, str]]:
        """(name, module, qualname) of every registration that is not a built-in."""
        self._load()
        return [(n, c.__module__, c.__qualname__) for n, c in self._entries.items() if not self._builtin(c)]


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# ----------------------------------------------------------------------------------- worker processes

def user_entries() -> dict[str, list[tuple[str, str, str]]]:
    """kind -> (name, module, qualname) of the user's registrations, in every registry loaded so far."""
    return {kind: reg.user_entries() for kind, reg in _REGISTRIES.items() if reg.user_entries()}


def install(entries: Mapping[str, list[tuple[str, str, str]]]) -> None:
    """Worker-process initializer: imports the modules that hold the parent's registrations.

    Importing a module runs its ``@register`` decorators. Entries defined in ``__main__`` are already
    present in a forked child; in any other child they cannot exist, which :func:`pool_options` refuses
    before the pool starts.
    """
    for kind, rows in entries.items():
        registry = _REGISTRIES.get(kind) or _registry_for(kind)
        for name, module, _qualname in rows:
            if name in registry or module == "__main__":
                continue
            importlib.import_module(module)
            if name not in registry:
                raise ConfigError(f"importing {module} did not register {kind} {name!r} in the worker process")


def _registry_for(kind: str) -> Registry:
    importlib.import_module({"team": "latte_lab.teams", "task": "latte_lab.tasks"}.get(kind, "latte_lab"))
    if kind not in _REGISTRIES:
        raise ConfigError(f"no {kind} registry in latte_lab")
    return _REGISTRIES[kind]


def pool_options(start_method: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``ProcessPoolExecutor`` so that its workers know every registered name.

    Registrations from importable modules are re-imported in each worker. Registrations in
    ``__main__`` (a notebook cell) need the ``fork`` start method; where it is unavailable, or when
    ``start_method`` asks for another one, this raises a ConfigError saying how to proceed.
    """
    entries = user_entries()
    options: dict[str, Any] = {"initializer": install, "initargs": (entries,)}
    in_main = [f"{kind} {name!r}" for kind, rows in entries.items() for name, module, _ in rows
               if module == "__main__" or not _importable(module)]
    if in_main:
        method = start_method or "fork"
        if method != "fork" or "fork" not in multiprocessing.get_all_start_methods():
            raise ConfigError(
                f"{', '.join(in_main)} is defined in __main__ (a notebook cell or script), which worker processes "
                f"started with {method!r} cannot see; move it into an importable module, or run with n_jobs=1")
        options["mp_context"] = multiprocessing.get_context("fork")
    elif start_method is not None:
        options["mp_context"] = multiprocessing.get_context(start_method)
    return options


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
