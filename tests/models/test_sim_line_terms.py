"""The simulated model scans a prompt line by line, each distinct line once (``fixbook.line_terms``,
``Catalogue.ids_named``): the terms it finds must be those of one scan over the whole text, whatever the line
breaks (every kind ``str.splitlines`` knows) and wherever they fall."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from latte_lab.models.sim import fixbook
from latte_lab.models.sim.units import catalogue, units_from_text

CATALOGUES = [catalogue(project) for project in fixbook.fix_book().projects]  # every registered task's
# the units each task's own description lines give (what a prompt quoting them would show)
UNIT_IDS = sorted({u.id for cat in CATALOGUES for u in units_from_text(cat, ["\n".join(cat.project.lines)], {})})
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


PROJECTS = fixbook.fix_book().projects
DESCRIPTION_LINES = sorted({line for p in PROJECTS for line in p.lines})
prompt_parts = st.lists(st.lists(st.sampled_from(PIECES + DESCRIPTION_LINES + [f"  {DESCRIPTION_LINES[0]} and more"]),
                                 max_size=12).map("".join), max_size=5)


@given(prompt_parts)
def test_a_prompt_given_in_parts_picks_and_scores_as_its_joined_text(parts):
    text = "\n".join(parts)
    joined_long = "\n".join({line.strip() for line in text.splitlines() if len(line.strip()) >= fixbook.MIN_TEXT_LINE})
    groups = [fixbook.part_terms(part)[2] for part in parts]
    for project in PROJECTS:  # description lines found part by part and line by line, as by one substring search
        for _ in range(2):
            assert project.lines_shown(groups) == sum(1 for line in project.lines if line in joined_long)
    fresh = fixbook.FixBook(list(PROJECTS))
    assert fresh.project_for({}, parts) is fixbook.FixBook(list(PROJECTS)).project_for({}, text)
