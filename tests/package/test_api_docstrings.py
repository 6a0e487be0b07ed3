"""Every public function (the functions ``latte_lab/__init__.py`` exports, which docs/api shows) documents
each of its parameters in a numpy-style Parameters section, and what it returns in a Returns section."""

from __future__ import annotations

import inspect
import re

import pytest

import latte_lab as ll

PUBLIC_FUNCTIONS = sorted(n for n in ll.__all__ if inspect.isfunction(getattr(ll, n)))


def sections(doc: str) -> dict[str, list[str]]:
    """numpy-style sections of a docstring: header -> its lines (dedented)."""
    lines = inspect.cleandoc(doc).splitlines()
    found: dict[str, list[str]] = {}
    current = None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"} and line.strip():
            current = line.strip()
            found[current] = []
        elif current is not None and not (line.strip() and set(line.strip()) == {"-"}):
            found[current].append(line)
    return found


def documented_parameters(doc: str) -> set[str]:
    names = set()
    for line in sections(doc).get("Parameters", []):
        if line and not line[0].isspace():  # a parameter's line; its description is indented
            head = line.split(" : ")[0]
            names.update(n.strip() for n in head.split(","))
    return names


def test_the_public_functions_are_found():
    assert {"run_trial", "run_sweep", "read_run", "load_runs", "fork", "replay", "make_model"} <= set(PUBLIC_FUNCTIONS)


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_each_public_function_documents_each_parameter_and_what_it_returns(name):
    func = getattr(ll, name)
    doc = func.__doc__ or ""
    expected = set()
    for p in inspect.signature(func).parameters.values():
        expected.add({p.VAR_KEYWORD: f"**{p.name}", p.VAR_POSITIONAL: f"*{p.name}"}.get(p.kind, p.name))
    documented = documented_parameters(doc)
    assert expected <= documented, f"ll.{name} does not document {sorted(expected - documented)}"
    assert not documented - expected, f"ll.{name} documents parameters it does not have: {sorted(documented - expected)}"
    returns = [line for line in sections(doc).get("Returns", []) if line.strip()]
    assert returns and re.match(r"^\S", returns[0]), f"ll.{name} has no Returns section"


def test_the_check_finds_a_missing_parameter():
    def f(a, b, **kw):
        """Doc.

        Parameters
        ----------
        a : int
            The a.
        """
    assert documented_parameters(f.__doc__) == {"a"}
