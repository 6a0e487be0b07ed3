"""What a simulated agent may write about a project's data: only what its prompts have shown.

A project's *data files* are the starting files an agent does not edit as code: not Python, not a public test
(``employee_data.csv``). Facts about them (a column's opaque name, a placeholder value) are evidence an
agent must have seen before it can write them. Two rules follow, both generic:

- **Evidence-gated constants** (:func:`gate_constant`): a module-level constant of a correct patch
  (``MISSING_VALUES = {"satisfaction": 99}``) keeps only the entries whose data values (a literal that is a
  header or a cell value of a data file) the project's public text or the agent's prompt shows. Without
  evidence of the placeholder, the agent writes ``MISSING_VALUES = {}``, as the description says to do when
  the data has none.
- **The data profile** (:func:`profile_script`): the check an agent runs on a data project, generic for any
  CSV file: each column's kind, range, distinct values, most common values and the values that lie apart
  from the rest. It prints the evidence; it names no test and knows nothing of the task.

Whether a data project's deliverable is right also depends on the profile having been seen
(``latte_lab.models.sim.work.p_correct``).
"""

from __future__ import annotations

import ast
import functools
import re

from latte_lab.models.sim import source as S
from latte_lab.models.sim.analysis import ANALYSIS_MARK
from latte_lab.workspace.symbols import AST_LOCK

PROFILE_PREFIX = "profile_"
PROFILE_MARK = "Profile of "  # the first line of a profile's output: "Profile of <file>: <n> rows"
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?")


def data_files(start: dict[str, str], public_tests: tuple[str, ...]) -> tuple[str, ...]:
    """The starting files that are data: not code, not a public test, and tabular (CSV)."""
    return tuple(sorted(p for p in start if p not in public_tests and p.lower().endswith(".csv")))


def number_token(value: float | int | str) -> str:
    """A number as a token: ``99``, ``99.0`` and ``"99"`` are all ``99``; ``9.30`` is ``9.3``."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    if f != f or f in (float("inf"), float("-inf")):
        return str(value)
    return str(int(f)) if f.is_integer() else repr(f)


@functools.lru_cache(maxsize=16)
def data_tokens(text: str) -> frozenset[str]:
    """The headers, words and numbers (as :func:`number_token`) of a data file's text."""
    return frozenset(number_token(t) if t[0].isdigit() else t for t in _TOKEN.findall(text))


_REPORT_MARKS = (PROFILE_MARK, ANALYSIS_MARK)  # the first lines of a profile's and of an analysis's output


def data_evidence(text: str, shown_files: dict[str, str], data_files: tuple[str, ...]) -> str:
    """What a prompt shows about a project's data, and nothing else: the data files it shows, and the reports
    of profiles and analyses it ran (from a report's first line to the first blank line). A number the
    description or a test id happens to hold is no evidence about the data.

    >>> data_evidence("Plan: 99 problems\\nProfile of d.csv: 3 rows\\nx: numeric, 1 to 99\\n\\nlater", {}, ("d.csv",))
    'Profile of d.csv: 3 rows\\nx: numeric, 1 to 99'
    """
    blocks = [shown_files[f] for f in data_files if f in shown_files]
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith(_REPORT_MARKS):
            j = i
            while j < len(lines) and lines[j].strip():
                j += 1
            blocks.append("\n".join(lines[i:j]))
            i = j
        i += 1
    return "\n".join(blocks)


def shown(token: str, text: str) -> bool:
    """Whether a text shows a token as a whole word (a number also as ``99.0``)."""
    if token[:1].isdigit():
        pattern = rf"(?<![\w.]){re.escape(token)}(?:\.0+)?(?![\w]|\.\d)"
    else:
        pattern = rf"(?<![\w]){re.escape(token)}(?![\w])"
    return re.search(pattern, text) is not None


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and not isinstance(node.value, (bool, type(None))):
        return number_token(node.value) if isinstance(node.value, (int, float)) else str(node.value)
    return None


def gate_constant(text: str, data: frozenset[str], evidence: str) -> str | None:
    """A module-level constant as an agent whose prompt shows ``evidence`` can write it.

    ``data``: the tokens of the project's data files. A literal of the constant that is one of them and that
    ``evidence`` does not show is unknown to the agent. A dict, list, tuple or set value loses the entries
    holding an unknown literal; any other value holding one cannot be written (None). Anything that is not a
    single assignment is returned as it is.

    >>> data = frozenset({"var_01", "var_02", "99"})
    >>> gate_constant('MISSING = {"satisfaction": 99}', data, "satisfaction (score 1-10)")
    'MISSING = {}'
    >>> gate_constant('MISSING = {"satisfaction": 99}', data, "var_01: numeric, 1 to 99")
    'MISSING = {"satisfaction": 99}'
    >>> gate_constant('COLUMNS = {"var_01": "a", "var_02": "b"}', data, "var_01 .. var_08")
    "COLUMNS = {'var_01': 'a'}"
    """
    try:
        with AST_LOCK:
            tree = ast.parse(text)
    except SyntaxError:
        return text
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Assign, ast.AnnAssign)) or tree.body[0].value is None:
        return text
    node = tree.body[0]

    def unknown(sub: ast.AST) -> bool:
        return any((tok := _literal(n)) is not None and tok in data and not shown(tok, evidence) for n in ast.walk(sub))

    if not unknown(node.value):
        return text
    value = node.value
    if isinstance(value, ast.Dict):
        keep = [(k, v) for k, v in zip(value.keys, value.values) if not (k is not None and unknown(k)) and not unknown(v)]
        node.value = ast.Dict(keys=[k for k, _ in keep], values=[v for _, v in keep])
    elif isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        elts = [e for e in value.elts if not unknown(e)]
        node.value = ast.Tuple(elts=elts, ctx=ast.Load()) if isinstance(value, ast.Tuple) else \
            ast.List(elts=elts, ctx=ast.Load()) if isinstance(value, ast.List) or not elts else ast.Set(elts=elts)
    else:
        return None
    with AST_LOCK:
        return ast.unparse(ast.fix_missing_locations(tree))


def data_literals(text: str, data: frozenset[str]) -> set[str]:
    """The literals of a constant's text that are data tokens."""
    try:
        with AST_LOCK:
            tree = ast.parse(text)
    except SyntaxError:
        return set()
    return {tok for n in ast.walk(tree) if (tok := _literal(n)) is not None and tok in data}


def is_constant(text: str) -> bool:
    """Whether a symbol's text is a module-level assignment (a constant, not a function or class)."""
    head = text.lstrip().split("=", 1)[0]
    return "=" in text and not text.lstrip().startswith(("def ", "class ", "async ", "@")) and \
        re.fullmatch(r"\s*[A-Za-z_]\w*\s*(?::[^=]*)?", head) is not None


def gate_symbols(out: dict[str, str], path: str, data: frozenset[str], evidence: str) -> dict[str, str]:
    """The symbols of a Python patch with every constant gated on the evidence (:func:`gate_constant`);
    a constant that cannot be written is left out."""
    if not data or S.kind(path) != "py":
        return out
    gated: dict[str, str] = {}
    for name, text in out.items():
        if is_constant(text):
            new = gate_constant(text, data, evidence)
            if new is None:
                continue
            gated[name] = new
        else:
            gated[name] = text
    return gated


def profile_path(data_file: str) -> str:
    return PROFILE_PREFIX + data_file.rsplit("/", 1)[-1].rsplit(".", 1)[0] + ".py"


def profile_script(data_file: str) -> str:
    """A generic profile of one CSV file: what a careful analyst prints before writing anything about it."""
    return f'''"""Profiles {data_file}: each column's kind, range, distinct and most common values (shared by the team)."""

import csv
from collections import Counter

PATH = {data_file!r}


def fmt(x):
    return str(int(x)) if float(x).is_integer() else f"{{x:g}}"


with open(PATH, newline="", encoding="utf-8") as fh:
    rows = list(csv.DictReader(fh))
print(f"{PROFILE_MARK}{{PATH}}: {{len(rows)}} rows")
for col in (rows[0] if rows else {{}}):
    values = [(r[col] or "").strip() for r in rows]
    empty = sum(1 for v in values if not v)
    nums = []
    for v in values:
        try:
            nums.append(float(v))
        except ValueError:
            pass
    common = ", ".join(f"{{v}} ({{n}})" for v, n in Counter(values).most_common(5))
    if nums and len(nums) == len(values) - empty:
        line = f"{{col}}: numeric, {{fmt(min(nums))}} to {{fmt(max(nums))}}, {{len(set(nums))}} distinct"
        distinct = sorted(set(nums))
        for end in (-1, 0):  # a value far from all the others (more than the others' whole span away)
            rest = distinct[:-1] if end == -1 else distinct[1:]
            if len(rest) >= 5 and abs(distinct[end] - (rest[-1] if end == -1 else rest[0])) > rest[-1] - rest[0]:
                count = sum(1 for x in nums if x == distinct[end])
                line += f"; {{fmt(distinct[end])}} ({{count}} rows) lies apart from the rest ({{fmt(rest[0])}} to {{fmt(rest[-1])}})"
    else:
        line = f"{{col}}: text, {{len(set(values))}} distinct"
    print(f"{{line}}; empty {{empty}}; most common: {{common}}")
'''
