"""The outline of a Python file (``latte_lab.workspace.symbols.python_outline``): an edit of a version
parsed before re-parses only the statements it touched, and the result is always the whole parse's."""

from __future__ import annotations

from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latte_lab.workspace import symbols as S


def _sources() -> list[str]:
    out = []
    for task in ("debug", "textproc", "eda"):
        root = resources.files("latte_lab.tasks") / task
        for path in sorted(root.rglob("*")):
            if path.name.endswith((".py", ".py.txt")) and path.is_file() and "__pycache__" not in str(path):
                out.append(path.read_text(encoding="utf-8"))
    return out


SOURCES = _sources()
# Lines that open or close what a statement can span: brackets, strings, decorators, continuations, a
# second statement on the line, blank and comment lines.
ODD_LINES = ['"""', "'''", "x = (", ")", "]", "y = [1,", "@decorator", "def g(a,", "    b):", "    return a",
             "z = 1; w = 2", "v = 3 \\", "", "# a comment", "class K:", "    pass", "if z:", "else:", "    u = '''"]


@st.composite
def edits(draw):
    source = draw(st.sampled_from(SOURCES))
    lines = source.split("\n")
    for _ in range(draw(st.integers(1, 2))):
        a = draw(st.integers(0, len(lines)))
        b = draw(st.integers(a, min(len(lines), a + draw(st.sampled_from([1, 3, 12])))))
        donor = draw(st.sampled_from(SOURCES)).split("\n")
        c = draw(st.integers(0, len(donor)))
        new = donor[c : c + draw(st.sampled_from([0, 1, 3, 10]))]
        if draw(st.booleans()):
            new = new + [draw(st.sampled_from(ODD_LINES))]
        lines[a:b] = new
    return source, "\n".join(lines)


@st.composite
def statement_edits(draw):
    """Whole top-level statements replaced, removed or added: the edits agents make, which parse."""
    source = draw(st.sampled_from(SOURCES))
    lines = source.split("\n")
    outline = S._parse_outline(source) or ()
    donor = draw(st.sampled_from(SOURCES))
    donor_outline = S._parse_outline(donor) or ()
    for _ in range(draw(st.integers(1, 2))):
        new: list[str] = []
        if donor_outline and draw(st.booleans()):
            d = draw(st.sampled_from(donor_outline))
            new = donor.split("\n")[d.first - 1 : d.end]
        if outline and draw(st.booleans()):
            t = draw(st.sampled_from(outline))
            lines[t.first - 1 : t.end] = new
        else:
            at = draw(st.integers(0, len(lines)))
            lines[at:at] = ["", *new, ""]
        outline = ()  # later edits of the same file land anywhere
    return source, "\n".join(lines)


def _whole(source: str):
    return S._parse_outline(source)


@settings(max_examples=200, deadline=None)
@given(edits())
def test_an_edit_outlines_as_the_whole_parse_does(pair):
    old, new = pair
    S._OUTLINES.clear()
    assert S.python_outline(old) == _whole(old)
    assert S.python_outline(new) == _whole(new)


@settings(max_examples=200, deadline=None)
@given(statement_edits())
def test_statement_edits_outline_as_the_whole_parse_does(pair):
    old, new = pair
    S._OUTLINES.clear()
    S.python_outline(old)
    assert S.python_outline(new) == _whole(new)


def test_an_edit_of_one_function_reparses_only_that_function(monkeypatch):
    source = next(s for s in SOURCES if "def rms" in s)
    S._OUTLINES.clear()
    S.python_outline(source)
    parsed: list[str] = []
    real = S._parse_outline
    monkeypatch.setattr(S, "_parse_outline", lambda text, offset=0: parsed.append(text) or real(text, offset))
    edited = source.replace("def rms(xs):", "def rms(xs):\n    xs = list(xs)", 1)
    assert S.python_outline(edited) == real(edited)
    assert len(parsed) == 1 and "def rms" in parsed[0] and "def normalize" not in parsed[0]


@pytest.mark.parametrize("text", ["def f(:\n", "x = '\r'\r\ny = 2\r\n", "a = 1\x0cb = 2\n"])
def test_sources_that_do_not_parse_or_break_lines_oddly_are_parsed_whole(text):
    S._OUTLINES.clear()
    S.python_outline("a = 1\nb = 2\n")
    assert S.python_outline(text) == _whole(text)
