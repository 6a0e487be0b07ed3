"""Reading and splicing the symbols of a file, the way the simulated agent edits code (pure, no I/O).

A simulated agent writes whole files, like a real one: it takes the file as it last saw it, replaces
the parts its subtask changes, and writes the result. "Parts" are symbols: top-level functions,
classes, ``Class.method`` and simple top-level assignments in ``.py`` files, top-level keys in
``.json`` files. Other files are handled whole.

>>> src = "def f():\\n    return 1\\n"
>>> splice(src, "m.py", {"f": "def f():\\n    return 2\\n"})
'def f():\\n    return 2\\n'
>>> get_symbols(src, "m.py")["f"]
'def f():\\n    return 1'
"""

from __future__ import annotations

import ast
import json
import textwrap
from functools import lru_cache

from latte_lab.errors import LatteError
from latte_lab.workspace.symbols import AST_LOCK, python_outline

METHOD_INDENT = "    "  # indentation of a method inserted into a class that lacks it
JSON_INDENT = 2  # indentation of JSON files the agent writes


class SpliceError(LatteError):
    """A file could not be read as code or data, so its symbols cannot be replaced one by one."""


def kind(path: str) -> str:
    """``py``, ``json`` or ``whole`` (any other file is read and written as one piece)."""
    if path.endswith(".py"):
        return "py"
    if path.endswith(".json"):
        return "json"
    return "whole"


PARSE_CACHE_SIZE = 512  # distinct file versions whose symbol spans are kept (a trial sees a few dozen)


def _py_spans(source: str) -> dict[str, tuple[int, int, str]]:
    """name -> (first line index, end line index exclusive, indentation) of each symbol."""
    return dict(_py_spans_cached(source))


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _py_spans_cached(source: str) -> tuple:
    outline = python_outline(source)  # one parse per version, shared with the workspace's write log
    if outline is None:
        try:
            with AST_LOCK:
                ast.parse(source)
        except SyntaxError as exc:
            raise SpliceError(f"not valid Python ({exc.msg} at line {exc.lineno})") from None
        raise SpliceError("not valid Python")
    spans: dict[str, tuple[int, int, str]] = {}
    for st in outline:
        if st.kind in ("def", "class"):
            spans[st.name] = (st.first - 1, st.end, "")
            for name, first, end, col in st.methods:
                spans[f"{st.name}.{name}"] = (first - 1, end, " " * col)
        elif st.kind == "assign":
            spans[st.name] = (st.line - 1, st.end, "")
    return tuple(spans.items())


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _py_symbols(source: str) -> tuple:
    lines = source.splitlines()
    return tuple((name, textwrap.dedent("\n".join(lines[a:b]))) for name, (a, b, _) in _py_spans(source).items())


@lru_cache(maxsize=4 * PARSE_CACHE_SIZE)
def normalize_code(text: str) -> str:
    """Comparable form of a symbol's source: dedented, trailing spaces and blank ends removed."""
    lines = [line.rstrip() for line in textwrap.dedent(text).strip("\n").splitlines()]
    return "\n".join(lines).strip()


def get_symbols(source: str, path: str) -> dict[str, str]:
    """{symbol: text} of a file: dedented source for Python, JSON text of the value for JSON.

    Raises SpliceError when the file cannot be parsed (a truncated read, a syntax error).
    """
    k = kind(path)
    if k == "py":
        return dict(_py_symbols(source))
    if k == "json":
        data = _load_json(source)
        return {key: json.dumps(value, sort_keys=True) for key, value in data.items()}
    return {}


def _load_json(source: str) -> dict:
    if not source.strip():
        return {}
    try:
        data = json.loads(source)
    except json.JSONDecodeError as exc:
        raise SpliceError(f"not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise SpliceError("the JSON document is not an object, so it has no keys to replace")
    return data


def same_symbol(a: str | None, b: str | None, path: str) -> bool:
    """Whether two versions of one symbol are the same (JSON compared as values)."""
    if a is None or b is None:
        return a is b
    if kind(path) == "json":
        try:
            return json.loads(a) == json.loads(b)
        except json.JSONDecodeError:
            return a.strip() == b.strip()
    return normalize_code(a) == normalize_code(b)


def splice(source: str, path: str, replacements: dict[str, str]) -> str:
    """The file with each symbol replaced by the given text (appended when absent).

    Python: the new text is re-indented to the symbol's place; a missing ``Class.method`` goes at
    the end of its class, any other missing symbol at the end of the file. JSON: each key gets the
    given value (JSON text; anything unparsable is stored as a string).
    """
    k = kind(path)
    if k == "json":
        data = _load_json(source)
        for key, value in replacements.items():
            try:
                data[key] = json.loads(value)
            except json.JSONDecodeError:
                data[key] = value
        return json.dumps(data, indent=JSON_INDENT) + "\n"
    if k != "py":
        raise SpliceError(f"{path} has no symbols; write it whole")
    text = source
    for name, new in replacements.items():
        text = _splice_one(text, name, new)
    return text


def _splice_one(source: str, name: str, new: str) -> str:
    spans = _py_spans(source)
    lines = source.splitlines()
    body = textwrap.dedent(new).strip("\n").splitlines()
    if name in spans:
        a, b, indent = spans[name]
        block = [indent + line if line.strip() else "" for line in body]
        out = lines[:a] + block + lines[b:]
    elif "." in name and name.split(".", 1)[0] in spans:
        cls, _ = name.split(".", 1)
        _, b, _ = spans[cls]
        block = [METHOD_INDENT + line if line.strip() else "" for line in body]
        out = lines[:b] + [""] + block + lines[b:]
    else:
        while lines and not lines[-1].strip():
            lines.pop()
        out = lines + (["", ""] if lines else []) + body
    return "\n".join(out) + "\n"
