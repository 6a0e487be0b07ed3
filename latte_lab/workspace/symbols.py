"""What an edit changed: the top-level functions, classes and methods (or JSON keys) of two versions of a
file, compared by their source segments (AST)."""

from __future__ import annotations

import ast
import functools
import json
import threading

FILE_SYMBOL = "<file>"  # the whole file changed and could not be split into symbols
MODULE_SYMBOL = "<module>"  # module-level code outside defs/classes (imports, constants) changed
SYMBOL_CACHE_SIZE = 64  # parsed files kept; a trial touches a handful of files, each a few KB
_AST_LOCK = threading.Lock()


def _node_span(node: ast.AST) -> tuple[int, int]:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno or node.lineno


def _segment(lines: list[str], span: tuple[int, int]) -> str:
    return "".join(lines[span[0] - 1 : span[1]]).rstrip("\r\n")


@functools.lru_cache(maxsize=SYMBOL_CACHE_SIZE)
def _python_symbols(source: str) -> tuple[dict[str, str], str] | None:
    """({name: segment}, module-level remainder) or None when the source does not parse.

    Cached: every write parses the file before and after, and "before" is the previous write's
    "after". Callers must not mutate the returned dict (``extract_symbols`` hands out a copy).
    """
    try:
        with _AST_LOCK:  # CPython 3.11's ast.parse is not safe from several threads at once
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = source.splitlines(keepends=True)
    symbols: dict[str, str] = {}
    covered: set[int] = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        span = _node_span(node)
        symbols[node.name] = _segment(lines, span)
        covered.update(range(span[0], span[1] + 1))
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    symbols[f"{node.name}.{item.name}"] = _segment(lines, _node_span(item))
    remainder = "\n".join(
        line.rstrip() for i, line in enumerate(lines, 1) if i not in covered and line.strip()
    )
    return symbols, remainder


def _class_shell(symbols: dict[str, str], cls: str) -> str:
    """A class's source with its methods removed: what changes when bases/attributes/docstring do."""
    text = symbols[cls]
    for name, seg in symbols.items():
        if name.startswith(cls + ".") and seg:
            text = text.replace(seg, "", 1)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def extract_symbols(source: str, path: str) -> dict[str, str]:
    """Named parts of a file: ``{name: source segment}``.

    ``.py``: top-level functions and classes by name and methods as ``Class.method``; a segment is
    the exact source lines (decorators included, indentation kept) without the final newline, so
    ``source.replace(old_segment, new_segment)`` splices a new version in. ``.json`` (an object):
    top-level keys mapped to their value as indented JSON text. Anything else, or a file that does not
    parse: ``{}``.

    >>> extract_symbols("def f():\\n    return 1\\n\\nclass A:\\n    def m(self):\\n        pass\\n", "x.py")
    {'f': 'def f():\\n    return 1', 'A': 'class A:\\n    def m(self):\\n        pass', 'A.m': '    def m(self):\\n        pass'}
    """
    if path.endswith(".py"):
        parsed = _python_symbols(source)
        return dict(parsed[0]) if parsed else {}
    if path.endswith(".json"):
        try:
            data = json.loads(source)
        except ValueError:
            return {}
        if isinstance(data, dict):
            return {str(k): json.dumps(v, indent=2, sort_keys=True) for k, v in data.items()}
    return {}


def _diff_keys(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changed = [name for name, seg in after.items() if before.get(name) != seg]
    changed += [name for name in before if name not in after]
    return changed


def changed_symbols(before: str | None, after: str, path: str) -> tuple[str, ...]:
    """What an edit of ``path`` from ``before`` (None: new file) to ``after`` changed.

    ``.py``: changed, added or removed top-level functions, classes and ``Class.method`` names; a
    class name itself is listed when the class is added/removed or its code outside its methods
    changed (bases, attributes, docstring), so two agents editing different methods of one class do
    not collide; :data:`MODULE_SYMBOL` when module-level code (imports, constants) changed.
    ``.json``: changed top-level keys. If either version does not parse, or for other file types,
    ``("<file>",)``. Identical contents: ``()``. Order: as in ``after``, then removed names.

    >>> changed_symbols("def f():\\n    return 1\\n", "def f():\\n    return 2\\n", "m.py")
    ('f',)
    >>> changed_symbols(None, "{\\"a\\": 1}", "x.json")
    ('a',)
    >>> changed_symbols("def f(:", "def f(): pass", "m.py")
    ('<file>',)
    """
    if before == after:
        return ()
    if path.endswith(".py"):
        new = _python_symbols(after)
        old = _python_symbols(before) if before is not None else ({}, "")
        if new is None or old is None:
            return (FILE_SYMBOL,)
        (old_syms, old_rest), (new_syms, new_rest) = old, new
        result: list[str] = []
        if old_rest != new_rest:
            result.append(MODULE_SYMBOL)
        for name in _diff_keys(old_syms, new_syms):
            is_class = "." not in name and any(k.startswith(name + ".") for k in (*old_syms, *new_syms))
            if (
                is_class
                and name in old_syms
                and name in new_syms
                and _class_shell(old_syms, name) == _class_shell(new_syms, name)
            ):
                continue  # only methods changed; they are listed by their own names
            result.append(name)
        return tuple(result) if result else (MODULE_SYMBOL,)
    if path.endswith(".json"):
        try:
            new_data = json.loads(after)
            old_data = json.loads(before) if before is not None else {}
        except ValueError:
            return (FILE_SYMBOL,)
        if not isinstance(new_data, dict) or not isinstance(old_data, dict):
            return (FILE_SYMBOL,)
        keys = _diff_keys(extract_symbols(json.dumps(old_data), ".json"), extract_symbols(after, ".json"))
        return tuple(keys) if keys else (FILE_SYMBOL,)
    return (FILE_SYMBOL,)

