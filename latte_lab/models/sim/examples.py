"""The examples of a project description and the check scripts that run them (pure).

A project description may show what the finished code returns (``>>> expr`` and the expected output). An agent
turns the examples of one module into a check script (``check_<module>.py``), which prints ``PASSED``/``FAILED
<module>.<symbol> - <difference>`` lines through a small helper module every check script imports
(``check_helpers.py``, written by whichever agent needs it first). Nothing here knows a task: any text's examples
are read the same way.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from latte_lab.workspace.symbols import AST_LOCK

CHECK_HELPERS = "check_helpers.py"  # the shared module every check script imports (agents write it)
CHECK_PREFIX = "check_"  # a check script: check_<module>.py, one per module checked, shared by the team


def _named(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


_IMPORT = re.compile(r"^(?:from\s+([\w.]+)\s+import\s+(.+)|import\s+([\w.]+))$")
_MEMBER = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\([^()]*\))?\s*\.\s*([A-Za-z_]\w*)")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Example:
    """One example of a project description: ``>>> expr`` and the output the user expects."""

    check: str  # <module>.<symbol>: what the example exercises
    module: str
    setup: str  # the imports stated before it
    expr: str
    expected: str


def examples_in(text: str) -> tuple[Example, ...]:
    """The ``>>>`` examples of a text whose call can be traced to an imported module."""
    names: dict[str, str] = {}  # imported name -> module
    imports: list[str] = []
    out: list[Example] = []
    if not text or ">>> " not in text:
        return ()
    lines = text.splitlines()
    # the lines that can start an example (a fast substring test first; most of a prompt has none)
    starts = [k for k, raw in enumerate(lines) if ">>> " in raw and raw.strip().startswith(">>> ")]
    for k in starts:  # (an example's expected lines stop at the next ">>> " line, so none of them is a start)
        line = lines[k].strip()
        i = k + 1
        code = line[4:].strip()
        if m := _IMPORT.match(code):
            imports.append(code)
            if m.group(3):
                names[m.group(3)] = m.group(3)
            else:
                for part in m.group(2).split(","):
                    names[part.split(" as ")[-1].strip()] = m.group(1)
            continue
        expected = []
        while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(">>> "):
            expected.append(lines[i].strip())
            i += 1
        if not expected:
            continue
        check = module = None
        if m := next((m for m in _MEMBER.finditer(code) if m.group(1) in names), None):
            module = names[m.group(1)]
            check = f"{module}.{m.group(2)}" if module == m.group(1) else f"{module}.{m.group(1)}.{m.group(2)}"
        elif m := next((m for m in _CALL.finditer(code) if m.group(1) in names), None):
            module = names[m.group(1)]
            check = f"{module}.{m.group(1)}"
        if check is None or module is None or not _complete(code, tuple(expected)):
            continue  # an example cut short (a listing that truncates task texts) is not one to run
        out.append(Example(check=check, module=module, setup=_setup(code, tuple(imports)), expr=code,
                           expected="\n".join(expected)))
    return tuple({(e.check, e.expr): e for e in reversed(out)}.values())[::-1]


@functools.lru_cache(maxsize=4096)
def _setup(code: str, imports: tuple[str, ...]) -> str:
    """The imports stated so far that an example's code uses."""
    return "\n".join(imp for imp in imports if any(_named(n.split(" as ")[-1].strip(), code) for n in
                                                  re.split(r",|\bimport\b", imp.split(" import ", 1)[-1]) if n.strip()))


@functools.lru_cache(maxsize=4096)
def _complete(code: str, expected: tuple[str, ...]) -> bool:
    """Whether an example's expression and its expected output are whole Python expressions."""
    try:
        with AST_LOCK:  # compiling builds an AST: one thread at a time (CPython 3.11)
            compile(code, "<example>", "eval")
            compile("\n".join(expected), "<expected>", "eval")
    except (SyntaxError, ValueError):
        return False
    return True


CHECK_HELPERS_TEXT = '''"""Runs examples and prints one PASSED/FAILED line per example (shared by the check scripts)."""

import importlib
import sys

sys.path.insert(0, ".")


def run(examples):
    """examples: (check id, setup code, expression, expected output as the user wrote it)."""
    for check, setup, expr, expected in examples:
        scope = {}
        try:
            for name in list(sys.modules):
                if name.split(".")[0] in {line.split()[1] for line in setup.splitlines() if line.split()}:
                    del sys.modules[name]
            importlib.invalidate_caches()
            exec(setup, scope)
            got = eval(expr, scope)
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            print(f"FAILED {check} - {expr} raised {type(exc).__name__}: {exc}"[:300])
            continue
        try:
            ok = got == eval(expected, {})
        except Exception:  # noqa: BLE001 - expected output that is not an expression: compare the text
            ok = repr(got) == expected or str(got) == expected
        print(f"PASSED {check}" if ok else f"FAILED {check} - {expr} gave {got!r}, expected {expected}"[:300])
'''


def check_script(module: str, examples: Iterable[Example]) -> str:
    """The check script of one module: its examples, run by the shared helpers."""
    rows = ",\n".join(f"    ({e.check!r}, {e.setup!r}, {e.expr!r}, {e.expected!r})" for e in examples)
    return (f'"""Checks {module} against the examples of the project description."""\n\n'
            f"from check_helpers import run\n\nrun([\n{rows},\n])\n")


def check_path(module: str) -> str:
    return f"{CHECK_PREFIX}{module}.py"
