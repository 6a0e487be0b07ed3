"""What an edit changed: the top-level functions, classes and methods (or JSON keys) of two versions of a
file, compared by their source segments (AST)."""

from __future__ import annotations

import ast
import functools
import json
import re
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass

from latte_lab.sandbox.threads import AST_LOCK  # every parse in latte_lab takes it (sim and tasks import it from here)

FILE_SYMBOL = "<file>"  # the whole file changed and could not be split into symbols
MODULE_SYMBOL = "<module>"  # module-level code outside defs/classes (imports, constants) changed
SYMBOL_CACHE_SIZE = 64  # parsed files kept; a trial touches a handful of files, each a few KB
# ---- the outline of a Python file: its top-level statements, parsed once per version ----------------


@dataclass(frozen=True)
class Statement:
    """One top-level statement of a module: what kind, its name, and where it is (1-based lines).

    ``kind`` is ``"def"`` (functions, async ones too), ``"class"``, ``"assign"`` (an assignment, annotated
    or not, to one plain name) or ``"other"``. ``first`` is the first line with decorators, ``line`` the
    statement's own first line, ``end`` its last line. ``methods`` (classes only): ``(name, first, end,
    col_offset)`` of each function defined directly in the class body, in order.
    """

    kind: str
    name: str | None
    first: int
    line: int
    end: int
    methods: tuple[tuple[str, int, int, int], ...] = ()

    def shifted(self, by: int) -> Statement:
        if not by:
            return self
        return Statement(self.kind, self.name, self.first + by, self.line + by, self.end + by,
                         tuple((n, a + by, b + by, c) for n, a, b, c in self.methods))


OUTLINE_CACHE_SIZE = 512  # distinct file versions kept (a trial sees a few dozen, a sweep's process more)
OUTLINE_BASES = 4  # recently outlined versions an edit is compared with, to re-parse only what it changed
# Characters str.splitlines() breaks at that Python's tokenizer does not (or counts differently): a source
# holding one is always parsed whole, so that line numbers mean the same to both.
_ODD_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_OUTLINES: OrderedDict[str, tuple[Statement, ...] | None] = OrderedDict()
_OUTLINE_LOCK = threading.Lock()


def _statement(node: ast.stmt, offset: int = 0) -> Statement:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        kind, name, methods = "def", node.name, ()
    elif isinstance(node, ast.ClassDef):
        kind, name = "class", node.name
        methods = tuple(
            (item.name, min([item.lineno] + [d.lineno for d in item.decorator_list]) + offset,
             item.end_lineno + offset, item.col_offset)
            for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
    else:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        named = len(targets) == 1 and isinstance(targets[0], ast.Name)
        kind, name, methods = ("assign", targets[0].id, ()) if named else ("other", None, ())
    return Statement(kind, name, first + offset, node.lineno + offset, (node.end_lineno or node.lineno) + offset, methods)


def _parse_outline(source: str, offset: int = 0) -> tuple[Statement, ...] | None:
    try:
        # Warnings about the agents' code (an invalid escape in a string, say) are not the user's.
        with AST_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tuple(_statement(node, offset) for node in tree.body)


def _common_prefix(a: list[str], b: list[str]) -> int:
    """How many leading items ``a`` and ``b`` share (bisection over slice comparisons, done in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _reparse(old: str, outline: tuple[Statement, ...], new: str) -> tuple[Statement, ...] | None:
    """The outline of ``new`` from the outline of ``old``, parsing only the top-level statements the
    change touches; None when that cannot be done exactly (the caller parses ``new`` whole).

    Exact because the lines before the first touched statement and after the last one are the same text
    as in ``old``, where they parsed as whole statements from a clean start (a top-level statement begins
    at column 0, outside any bracket or string); the text between them is parsed on its own, so if it
    parses it also ends clean and the rest reads as before, only moved."""
    a, b = old.split("\n"), new.split("\n")
    head = _common_prefix(a, b)
    tail = _common_prefix(a[head:][::-1], b[head:][::-1])
    changed_from, changed_to = head + 1, len(a) - tail  # 1-based lines of old that changed (may be empty)
    n = len(outline)
    i = 0  # outline[:i]: statements kept at the top (wholly on unchanged lines)
    while i < n and outline[i].end < changed_from:
        i += 1
    while 0 < i < n and outline[i].first <= outline[i - 1].end:  # a cut between statements sharing a line
        i -= 1
    j = i  # outline[j:]: statements kept at the bottom
    while j < n and outline[j].first <= changed_to:
        j += 1
    while 0 < j < n and outline[j - 1].end >= outline[j].first:
        j += 1
    if j - i > max(2, n // 2):  # most of the file changed: one parse of it is as cheap
        return None
    start = outline[i - 1].end if i else 0  # last line kept as is at the top
    stop = outline[j].first if j < n else len(a) + 1  # first line kept as is at the bottom (old numbering)
    shift = len(b) - len(a)
    if start and a[start - 1].endswith("\\"):  # a line continued into the changed text
        return None
    middle_lines = b[start : stop - 1 + shift]
    if middle_lines and middle_lines[-1].endswith("\\"):
        return None
    parsed = _parse_outline("\n".join(middle_lines), start)
    if parsed is None:
        return None
    return (*outline[:i], *parsed, *(s.shifted(shift) for s in outline[j:]))


def python_outline(source: str, base: str | None = None) -> tuple[Statement, ...] | None:
    """The top-level statements of a Python source, or None when it does not parse.

    One parse per version for everything that reads one (the write log's symbol diffs, the simulated
    agents' edits): kept for the last :data:`OUTLINE_CACHE_SIZE` versions, and an edit of a version seen
    before (``base``, the version it was made from, when the caller knows it; else the most recent ones)
    re-parses only the statements it touched (same result as a whole parse, which tests check).

    >>> [(s.kind, s.name, s.first, s.end) for s in python_outline("import os\\n\\n@dec\\ndef f():\\n    pass\\n")]
    [('other', None, 1, 1), ('def', 'f', 3, 5)]
    """
    with _OUTLINE_LOCK:
        if source in _OUTLINES:
            _OUTLINES.move_to_end(source)
            return _OUTLINES[source]
        bases = []
        if base is not None and _OUTLINES.get(base) is not None:
            bases.append((base, _OUTLINES[base]))
        for seen, seen_outline in reversed(_OUTLINES.items()):
            if len(bases) >= OUTLINE_BASES:
                break
            if seen_outline is not None and seen is not base:
                bases.append((seen, seen_outline))
    outline = None
    if not _ODD_LINE_BREAKS.search(source):
        for seen, seen_outline in bases:
            if not _ODD_LINE_BREAKS.search(seen):
                outline = _reparse(seen, seen_outline, source)
                if outline is not None:
                    break
    if outline is None:
        outline = _parse_outline(source)
    with _OUTLINE_LOCK:
        _OUTLINES[source] = outline
        while len(_OUTLINES) > OUTLINE_CACHE_SIZE:
            _OUTLINES.popitem(last=False)
    return outline


def _segment(lines: list[str], span: tuple[int, int]) -> str:
    return "".join(lines[span[0] - 1 : span[1]]).rstrip("\r\n")


@functools.lru_cache(maxsize=SYMBOL_CACHE_SIZE)
def _python_symbols(source: str) -> tuple[dict[str, str], str] | None:
    """({name: segment}, module-level remainder) or None when the source does not parse.

    Cached: every write compares the file before and after, and "before" is the previous write's
    "after". Callers must not mutate the returned dict (``extract_symbols`` hands out a copy).
    """
    outline = python_outline(source)
    if outline is None:
        return None
    lines = source.splitlines(keepends=True)
    symbols: dict[str, str] = {}
    covered: set[int] = set()
    for st in outline:
        if st.kind not in ("def", "class"):
            continue
        span = (st.first, st.end)
        symbols[st.name] = _segment(lines, span)
        covered.update(range(span[0], span[1] + 1))
        for name, first, end, _col in st.methods:
            symbols[f"{st.name}.{name}"] = _segment(lines, (first, end))
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
        if before is not None:
            python_outline(after, base=before)  # the new version, re-parsed where it differs from the old
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

