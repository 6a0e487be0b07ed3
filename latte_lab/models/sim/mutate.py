"""How the simulated agent gets a unit wrong: a generic mutation of the correct version (pure).

A failed patch is the reference version of the unit with one slip in it, of the kinds programmers
make: a comparison off by its boundary (``<`` for ``<=``), an operator swapped (``+`` for ``-``), a
constant off by one, a call left out (``x`` for ``sqrt(x)``), a literal changed, two values of a
mapping swapped, or, in prose and data, a claim turned around ("higher" for "lower"). Nothing here
knows a task: any registered task's units are mutated the same way, from its reference solution.

>>> import random
>>> mutate_code("def f(xs):\\n    return max(xs) - min(xs)\\n", random.Random(0))
'def f(xs):\\n    return max(xs) + min(xs)'
>>> mutate_text("Churn is higher among low earners.", random.Random(0))
'Churn is lower among low earners.'
"""

from __future__ import annotations

import ast
import json
import random
import re

from latte_lab.models.sim.source import kind
from latte_lab.workspace.symbols import AST_LOCK

_COMPARE_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
                 ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In}
_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
               ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
_BOOL_SWAP = {ast.And: ast.Or, ast.Or: ast.And}
# Words whose opposite turns a claim around; generic English, no domain in it.
_OPPOSITES = {
    "higher": "lower", "lower": "higher", "highest": "lowest", "lowest": "highest", "more": "less",
    "less": "more", "most": "least", "least": "most", "increase": "decrease", "decrease": "increase",
    "increases": "decreases", "decreases": "increases", "positive": "negative", "negative": "positive",
    "positively": "negatively", "negatively": "positively", "strong": "weak", "weak": "strong",
    "above": "below", "below": "above", "largest": "smallest", "smallest": "largest", "rises": "falls",
    "falls": "rises", "bimodal": "unimodal", "two": "one", "left": "right", "right": "left",
}
_WORD = re.compile(r"\b(" + "|".join(sorted(_OPPOSITES, key=len, reverse=True)) + r")\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class _Sites(ast.NodeVisitor):
    """Every place a slip can happen, as (kind, node)."""

    def __init__(self) -> None:
        self.sites: list[tuple[str, ast.AST]] = []

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Compare) and any(type(op) in _COMPARE_SWAP for op in node.ops):
            self.sites.append(("compare", node))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
            self.sites.append(("binop", node))
        elif isinstance(node, ast.BoolOp) and type(node.op) in _BOOL_SWAP:
            self.sites.append(("boolop", node))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool):
            self.sites.append(("number", node))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and 0 < len(node.value) <= 40 \
                and not node.value.startswith(("\n", " ")):
            self.sites.append(("string", node))
        elif isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
                and isinstance(node.func, (ast.Name, ast.Attribute)):
            self.sites.append(("call", node))
        elif isinstance(node, ast.Dict) and len(node.values) >= 2:
            self.sites.append(("dict", node))
        elif isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) >= 2 and isinstance(node.ctx, ast.Load):
            self.sites.append(("sequence", node))
        super().generic_visit(node)


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
    return out


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, new: ast.AST) -> None:
        self.target, self.new = target, new

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return self.new
        return super().visit(node)


def _slip(kind_: str, node: ast.AST, rng: random.Random) -> ast.AST | None:
    if kind_ == "compare":
        ops = [_COMPARE_SWAP.get(type(op), type(op))() for op in node.ops]
        return ast.Compare(left=node.left, ops=ops, comparators=node.comparators)
    if kind_ == "binop":
        return ast.BinOp(left=node.left, op=_BINOP_SWAP[type(node.op)](), right=node.right)
    if kind_ == "boolop":
        return ast.BoolOp(op=_BOOL_SWAP[type(node.op)](), values=node.values)
    if kind_ == "number":
        v = node.value
        return ast.Constant(v + 1 if isinstance(v, int) else v * 1.5 if v else 1.0)
    if kind_ == "string":
        v = node.value
        return ast.Constant(v[: max(1, len(v) // 2)] if len(v) > 3 else v.upper() if v.lower() == v else v.lower())
    if kind_ == "call":
        return node.args[0]
    if kind_ == "dict":
        i, j = rng.sample(range(len(node.values)), 2)
        values = list(node.values)
        values[i], values[j] = values[j], values[i]
        return ast.Dict(keys=node.keys, values=values)
    if kind_ == "sequence":
        elts = list(node.elts)
        del elts[rng.randrange(len(elts))]
        return type(node)(elts=elts, ctx=node.ctx)
    return None


def mutate_code(source: str, rng: random.Random) -> str | None:
    """``source`` (a function, class or assignment) with one slip, as normalised source; None when it
    offers no place for one or cannot be parsed."""
    with AST_LOCK:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return None
        finder = _Sites()
        finder.visit(tree)
        skip = _docstring_nodes(tree)
        position = {id(n): i for i, n in enumerate(ast.walk(tree))}
        sites = [(k, position[id(n)]) for k, n in finder.sites if id(n) not in skip]
        rng.shuffle(sites)
        before = ast.unparse(tree)
        for kind_, index in sites:
            copy = ast.parse(source)  # a fresh tree per attempt: a slip never leaks into the next one
            node = list(ast.walk(copy))[index]
            new = _slip(kind_, node, rng)
            if new is None:
                continue
            mutated = ast.fix_missing_locations(_Replace(node, ast.copy_location(new, node)).visit(copy))
            text = ast.unparse(mutated)
            if text != before:
                return text
    return None


def mutate_text(text: str, rng: random.Random) -> str | None:
    """Prose with one claim turned around (a word swapped for its opposite), else one sentence dropped;
    None when the text has nothing to change."""
    hits = list(_WORD.finditer(text))
    if hits:
        m = rng.choice(hits)
        word = m.group(0)
        new = _OPPOSITES[word.lower()]
        new = new.capitalize() if word[0].isupper() else new
        return text[: m.start()] + new + text[m.end():]
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    if len(sentences) >= 2:
        del sentences[rng.randrange(len(sentences))]
        return " ".join(sentences)
    return None


def _mutate_json_value(value, rng: random.Random):
    """A JSON value with one slip in its text (found by walking its strings)."""
    strings: list[tuple[list, object]] = []

    def walk(v, path):
        if isinstance(v, str):
            strings.append((path, v))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, path + [i])
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, path + [k])

    walk(value, [])
    rng.shuffle(strings)
    for path, s in strings:
        new = mutate_text(s, rng)
        if new is not None and new != s:
            out = json.loads(json.dumps(value))
            cur = out
            for p in path[:-1]:
                cur = cur[p]
            if path:
                cur[path[-1]] = new
                return out
            return new
    return None


def mutate_symbol(text: str, path: str, rng: random.Random) -> str | None:
    """One symbol's text (Python source, or JSON text of a value) with one slip; None if impossible."""
    k = kind(path)
    if k == "py":
        return mutate_code(text, rng)
    if k == "json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return mutate_text(text, rng)
        new = _mutate_json_value(value, rng)
        return None if new is None else json.dumps(new, sort_keys=True)
    return mutate_text(text, rng)


def mutate_file(text: str, path: str, rng: random.Random) -> str | None:
    """A whole file with one slip: prose and data by their text, code by one of its statements."""
    if kind(path) == "py":
        return mutate_code(text, rng)
    if kind(path) == "json":
        return mutate_symbol(text, path, rng)
    return mutate_text(text, rng)
