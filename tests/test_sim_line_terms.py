"""The simulated model scans a prompt line by line, each distinct line once (``fixbook.line_terms``,
``Catalogue.ids_named``): the terms it finds must be those of one scan over the whole text, whatever the line
breaks (every kind ``str.splitlines`` knows) and wherever they fall."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from latte_lab.models.sim import fixbook
from latte_lab.models.sim.skill import catalogue

CATALOGUES = [catalogue(project) for project in fixbook.fix_book().projects]  # every registered task's
UNIT_IDS = sorted({u.id for cat in CATALOGUES for u in cat.units})
PIECES = UNIT_IDS + ["src/report.py", "data.csv", "notes.md", "x.json", "a-b/c_d.txt", "fix-rms", "fix-Tokenizer-tokenize",
          "check-peak_rate", "tokenize_words", "-", "/", ".", "_", "word", "py", " ", "\n", "\r\n", "\r", "\x0b",
          "\x0c", "\x1c", "\x85", "\u2028", "é", "fix-"]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@given(texts)
def test_paths_and_words_by_line_are_those_of_the_whole_text(text):
    assert fixbook.paths_in(text) == set(fixbook._PATH.findall(text))
    words = frozenset().union(*(fixbook.line_terms(line)[1] for line in text.splitlines()))
    assert words == frozenset(fixbook._WORD.findall(text))


@given(texts, st.sampled_from(range(len(CATALOGUES))))
def test_unit_ids_by_line_are_those_of_the_whole_text(text, which):
    cat = CATALOGUES[which]
    for _ in range(2):  # scanned, then from the cache
        assert cat.ids_named(text) == {m.group(1) for m in cat.id_pattern.finditer(text)}
