"""The scheduling lesson's two editions come from one source: the student's (notebooks/) has no worked answer
and matches the source, the teacher's has one for every exercise and the guide; cells that would show an
answer wait for one; drawings label nodes with the ids the exercises use."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import nbformat  # noqa: E402
import pytest  # noqa: E402

import latte_lab as ll  # noqa: E402
from latte_lab import teaching  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
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


def test_revealing_cells_open_on_a_right_answer_or_a_give_up(capsys):
    for ex in ("ex5", "ex6"):
        teaching._UNLOCKED.discard(ex)
    assert not teaching.unlocked("ex6")
    assert 'answer to ex6: answer it correctly above, or run ll.teaching.give_up("ex6")' in capsys.readouterr().out
    assert not teaching.check("ex6", 1)  # a wrong answer opens nothing
    assert not teaching.unlocked("ex6")
    assert teaching.check("ex6", teaching.EXERCISES["ex6"]._expected())
    assert teaching.unlocked("ex6") and not teaching.unlocked("ex5", "ex6")
    capsys.readouterr()
    teaching.give_up("ex5")
    assert "ex5 given up" in capsys.readouterr().out and teaching.unlocked("ex5", "ex6")


def test_every_revealing_cell_is_guarded():
    """A cell of the student edition that shows a computed answer (the library's critical path, lower bound,
    makespans) waits for unlocked(); no cell still uses the old rule (any answer opens it)."""
    student, _ = teaching.editions(SOURCE)
    code = [c.source for c in student.cells if c.cell_type == "code"]
    assert sum("ll.teaching.unlocked(" in c for c in code) == 6
    assert not any("answered(" in c for c in code)


def test_the_teachers_edition_runs_into_a_copy_with_its_answers(tmp_path, monkeypatch):
    """make class runs the teacher's edition (write_editions(..., execute=True)): here a lesson of two
    exercises, built like the real one, comes out with each answer printed beside its check, an HTML copy
    and the answer key."""
    lesson = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# a lesson"),
        nbformat.v4.new_code_cell("import latte_lab as ll\nspec2 = ll.teaching.setup('ex2')"),
        nbformat.v4.new_code_cell("answer = None\nll.teaching.check('ex2', answer)"),
        nbformat.v4.new_code_cell("answer = spec2.critical_path_length\nll.teaching.check('ex2', answer)",
                                  metadata={"tags": ["solution"]}),
        nbformat.v4.new_markdown_cell("**ex2.** common wrong answers", metadata={"tags": ["teacher"]}),
    ])
    source = tmp_path / "lesson.ipynb"
    nbformat.write(lesson, source)
    teacher = tmp_path / "teacher" / "lesson_teacher.ipynb"
    monkeypatch.setattr(teaching, "_answer_key", lambda: "# Answer key\n")  # the real one runs ex8's trial
    written = teaching.write_editions(source, tmp_path / "student.ipynb", teacher, execute=True)
    assert [p.name for p in written] == ["student.ipynb", "lesson_teacher.ipynb", "lesson_teacher.html",
                                         "answer-key.md"]
    ran = nbformat.read(teacher, as_version=4)
    solution = next(c for c in ran.cells if "solution" in c.metadata.get("tags", ()))
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in solution.outputs)
    expected = teaching.EXERCISES["ex2"]._expected()
    assert shown == f"✓ ex2 (critical path): {expected} is correct."
    page = (tmp_path / "teacher" / "lesson_teacher.html").read_text()
    assert f"{expected} is correct" in page and not re.search(r'<script\s+src="https?://', page)  # opens offline
    student = nbformat.read(tmp_path / "student.ipynb", as_version=4)
    assert not any(c.get("outputs") for c in student.cells if c.cell_type == "code")  # the student's: not run


def test_the_answer_key_lists_every_exercise(monkeypatch):
    monkeypatch.setattr(teaching, "_trial_efficiency", lambda **_: 0.5)  # ex8's trial: run by make class
    monkeypatch.setitem(teaching.EXERCISES, "ex8", teaching.EXERCISES["ex8"].__class__(
        *[getattr(teaching.EXERCISES["ex8"], f) for f in ("id", "title", "setup")], lambda **_: 0.5,
        teaching.EXERCISES["ex8"].grade))
    key = teaching._answer_key()
    for ex in teaching.EXERCISES.values():
        assert f"| {ex.id} | {ex.title} | `{teaching._shown(ex._expected())}` |" in key


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


@pytest.mark.slow
def test_the_real_teachers_edition_runs_with_every_answer_and_every_picture():
    """The lesson's teacher's edition, run as make class runs it: each solution prints its answer beside its
    check, every cell that waits for an answer opens, and every drawing cell shows an image."""
    import sys

    sys.path.insert(0, str(ROOT / "docs"))
    import hooks

    _, teacher = teaching.editions(SOURCE)
    ran = teaching.run_notebook(teacher)
    for cell in ran.cells:
        if "solution" in cell.metadata.get("tags", ()):
            shown = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
            assert re.fullmatch(r"✓ ex\d \(.*\): .* is correct\.", shown), (cell.source, shown)
    cells = hooks.drawing_cells(ran)
    print("teacher's edition: " + ", ".join(f"cell {d['cell']}: {d['images']}" for d in cells))
    assert sum(d["locked"] for d in cells) == 2 and all(d["images"] >= 1 for d in cells), cells
