"""A griffe extension that lets latte_lab's docstrings, written for ``help()`` and doctest, read well on
the documentation site.

- Sphinx roles (``:class:`~latte_lab.graph.CoordinationGraph```, ``:func:`run_trial```) become links
  to the API reference when the target is documented there, and code text otherwise.
- Doctest examples (``>>>`` lines and their expected output) become Python console code blocks instead
  of Markdown block quotes.
- A reStructuredText ``::`` before an indented block becomes ``:`` (the block is Markdown code already).

Only the rendered text changes; the docstrings in the package stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj):`(?P<tilde>~?)(?P<target>[^`]+)`")
TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$")  # :attr:`shown text <target>`
FENCE = re.compile(r"^\s*(```|~~~)[\w+-]*\s*$")  # a fence line holds the fence and a language only


def _qualify(target: str, obj: griffe.Object) -> str:
    """A role target as a full dotted path: ``.files`` is relative to the object's package, a bare name
    to its module."""
    module = obj if obj.is_module else obj.module
    if target.startswith("."):
        package = module.path if module.is_package else module.path.rpartition(".")[0]
        return package + target
    if "." not in target:
        return f"{module.path}.{target}"
    return target


def _roles(text: str, obj: griffe.Object) -> str:
    def link(match: re.Match) -> str:
        target = match["target"].strip()
        titled = TITLED.match(target)
        if titled:
            shown, target = titled["title"], titled["target"]
        else:
            shown = target.rsplit(".", 1)[-1] if match["tilde"] else target.lstrip(".")
        return f'<autoref identifier="{_qualify(target, obj)}" optional><code>{shown}</code></autoref>'

    return ROLE.sub(link, text)


def _doctests(text: str) -> str:
    """Wraps each run of doctest lines (``>>>``, ``...``, expected output up to a blank line) in a fence."""
    out: list[str] = []
    in_fence = False
    in_example = False
    for line in text.splitlines():
        stripped = line.strip()
        if in_example and not stripped:
            out.append("```")
            in_example = False
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and not in_example and stripped.startswith(">>>"):
            out.append("```pycon")
            in_example = True
        if not in_example and not in_fence and line.rstrip().endswith("::") and not stripped.startswith(">>>"):
            line = line.rstrip()[:-1]
        out.append(line)
    if in_example:
        out.append("```")
    return "\n".join(out)


class DocstringsForTheSite(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = _doctests(_roles(obj.docstring.value, obj))
            stack.extend(member for member in obj.members.values() if not member.is_alias)
