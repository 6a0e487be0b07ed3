"""The scheduling lesson's two editions come from one source: the student's (notebooks/) has no worked answer
and matches the source, the teacher's has one for every exercise and the guide; cells that would show an
answer wait for one; drawings label nodes with the ids the exercises use."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import nbformat  # noqa: E402

import latte_lab as ll  # noqa: E402
from latte_lab import teaching  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "teaching" / "04_teaching_scheduling.ipynb"
STUDENT = ROOT / "notebooks" / "04_teaching_scheduling.ipynb"


def test_the_student_notebook_is_the_sources_student_edition():
    student, _ = teaching.editions(SOURCE)
    shipped = nbformat.read(STUDENT, as_version=4)
    assert [c.source for c in shipped.cells] == [c.source for c in student.cells], \
        "notebooks/04 differs from teaching/04's student edition: run make class"
    assert not list((ROOT / "notebooks").glob("**/*solution*")), "solutions sit beside the student notebooks"


def test_the_student_edition_shows_no_answer_and_the_teachers_has_them_all():
    student, teacher = teaching.editions(SOURCE)
    student_code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
    for ex in teaching.EXERCISES:
        assert 'answer = None' in student_code and f'check("{ex}", answer' in student_code
    assert not re.search(r"^answer = (?!None)", student_code, flags=re.M)  # every answer is the student's
    assert "critical_path_length" not in student_code.split('check("ex2"')[0]  # not shown before exercise 2
    assert "lower_bound(" not in student_code.split('check("ex3"')[0]
    assert not any(c.metadata.get("tags") for c in student.cells)
    solutions = [c for c in teacher.cells if "solution" in c.metadata.get("tags", ())]
    assert sorted(re.search(r'check\("(ex\d)"', c.source)[1] for c in solutions) == sorted(teaching.EXERCISES)
    guide = "\n".join(c.source for c in teacher.cells if "teacher" in c.metadata.get("tags", ()))
    assert "Learning objectives" in guide and "90-minute" in guide and "wrong answers" in guide


def test_revealing_cells_wait_for_an_answer(capsys):
    teaching._ATTEMPTED.discard("ex6")
    assert not teaching.answered("ex6")
    assert "answer to ex6" in capsys.readouterr().out
    teaching.check("ex6", 1)  # a wrong answer is an answer: the cell may now show the right one
    assert teaching.answered("ex6")


def test_workload_drawings_label_nodes_with_their_ids():
    spec = teaching.setup("ex2")
    ax = ll.viz.scheduling.draw_workload(spec, critical_path=False)
    texts = {t.get_text() for t in ax.texts}
    assert set(spec.ids) <= texts and not any(re.fullmatch(r"T\d+", t) for t in texts)
    # the duration is beside its own node: at the node's height, to its right
    for nid, d in zip(spec.ids, spec.durations):
        node = next(t for t in ax.texts if t.get_text() == nid)
        label = next(t for t in ax.texts if t.get_text().startswith(f"{d} round") and
                     abs(t.get_position()[1] - node.get_position()[1]) < 0.2 and t.get_position()[0] > node.get_position()[0]
                     and t.get_position()[0] - node.get_position()[0] < 0.6)
        assert label is not None
