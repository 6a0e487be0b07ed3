"""Exercises of the scheduling lesson (notebook 04) and a checker that answers with a verdict and a hint.

Each exercise owns its material (``setup``), computes its reference answer from the library (never typed
in), and grades an answer: ``check`` returns a one-line verdict, with a hint when the answer is wrong, and
never the answer itself (a right answer is repeated, so the teacher's edition shows every answer beside its
check). The reference answers are kept out of what a student calls: no public name returns one. A cell whose
output would show an answer opens only once the student has answered correctly or given up
(``if ll.teaching.unlocked("ex4"): ...``; ``ll.teaching.give_up("ex4")``).

The lesson has one source, ``teaching/04_teaching_scheduling.ipynb``: cells tagged ``solution`` (worked
answers) and ``teacher`` (the guide) are kept only in the teacher's edition; :func:`write_editions` (``make
class``) writes the student edition to ``notebooks/`` and the teacher's edition apart from it, and runs the
teacher's edition so that its copy shows every answer.

>>> import latte_lab as ll
>>> spec = ll.teaching.setup("ex2")        # the workload of exercise 2
>>> ll.teaching.check("ex2", None)
… ex2 (critical path): no answer yet; replace None with yours.
>>> verdict = ll.teaching.check("ex2", spec.total_work)
>>> verdict.ok, str(verdict).startswith("✗ ex2 (critical path): not yet. Hint:")
(False, True)
>>> ll.teaching.check("ex2", spec.critical_path_length) == ll.teaching.Verdict(
...     "ex2", "critical path", True, answer=spec.critical_path_length)
True
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from latte_lab.errors import LatteError

__all__ = ["EXERCISES", "Exercise", "Verdict", "check", "editions", "exercises", "give_up", "setup", "unlocked",
           "write_editions"]

BOUND_WORKERS = 2  # ex3: team size
TRIAL_SEEDS = range(10)  # ex7: seeds averaged over
DISCOVERY_RATE = 0.6  # ex7: the discovery probability asked about
NUMBER_TOLERANCE = 0.051  # answers asked "to one decimal" or "to two decimals" may round either way
TEACHER_TAGS = ("solution", "teacher")  # cells the student edition leaves out: worked answers, the guide
_UNLOCKED: set[str] = set()  # exercises answered correctly, or given up, in this kernel (unlocked() opens their cells)
TEACHER_SUFFIX = "_teacher"  # the teacher's edition: <name>_teacher.ipynb beside its answer key


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`check`: ``ok`` is True, False, or None (no answer given)."""

    exercise: str
    title: str
    ok: bool | None
    hint: str = ""
    answer: Any = None
    """The answer given, repeated in the verdict when it is right (never the reference answer)."""

    def __bool__(self) -> bool:
        return self.ok is True

    def __str__(self) -> str:
        head = f"{self.exercise} ({self.title})"
        if self.ok is None:
            return f"… {head}: no answer yet; replace None with yours."
        if self.ok:
            return f"✓ {head}: {_shown(self.answer)} is correct."
        return f"✗ {head}: not yet. Hint: {self.hint}"

    __repr__ = __str__


def _shown(value: Any) -> str:
    """An answer as a verdict or the answer key writes it: ``14``, ``3.0``, ``['plots', 'docs']`` (numpy's
    numbers as Python's)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return repr(float(value))
    if isinstance(value, list | tuple):
        return repr([str(v) if isinstance(v, str) else v for v in value])
    return repr(value)


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    setup: Callable[[], Any]
    """The material the exercise is about (a graph, a workload, a trial configuration)."""
    _expected: Callable[..., Any] = dataclasses.field(repr=False)
    # the reference answer, computed from the keyword context passed to check(); private: the students' install
    # holds it (the checker needs it), but no public name hands it out
    grade: Callable[[Any, Any], str | None] = dataclasses.field(repr=False)
    """(given, expected) -> None when right, else a hint that does not give the answer away."""


# --------------------------------------------------------------------------------------------- material

def _frontier_graph():
    from latte_lab.graph import LEAD, CoordinationGraph

    g = CoordinationGraph()
    for nid, deps in (("plan", []), ("load", ["plan"]), ("clean", ["load"]), ("stats", ["clean"]),
                      ("plots", ["clean"]), ("model", ["stats"]), ("report", ["plots", "model"]),
                      ("docs", []), ("lint", ["plan"])):
        g.discover(nid, deps, title=nid, by=LEAD)
    for nid, worker in (("plan", "W1"), ("load", "W1"), ("clean", "W2")):
        g.claim(nid, worker)
        g.complete(nid, worker)
    g.claim("stats", "W1")
    g.assign("lint", "W2", by=LEAD)
    return g


def _workload():
    from latte_lab.scheduling import random_dag

    return random_dag(10, layers=4, max_deps=2, seed=3)


def _scaling_workload():  # ex4
    from latte_lab.scheduling import random_dag

    return random_dag(16, layers=4, max_deps=2, seed=5)


def _discovery_workload():
    from latte_lab.scheduling import random_dag

    return random_dag(60, layers=6, max_deps=1, seed=2)


DISCOVERY_WORKERS = 8  # ex7: team size


def _trial_config():
    from latte_lab.config import TrialConfig

    # seed 0: a trial that finishes under the paper's dispatch, well behind its bound (the workers spend
    # rounds thinking), so the lesson has a gap to discuss; the tests recompute its answer from the trial
    return TrialConfig(task="eda", team="latte", model="simulated", seed=0, n_workers=3)


# --------------------------------------------------------------------------------------------- answers

def _number(given: Any) -> float | None:
    if isinstance(given, bool) or not isinstance(given, numbers.Real):
        return None
    return float(given)


def _grade_number(hints: Callable[[float, float], str | None], *, tolerance: float = 1e-9):
    def grade(given: Any, expected: float) -> str | None:
        x = _number(given)
        if x is None:
            return f"answer with a number, not {type(given).__name__}."
        if abs(x - expected) <= tolerance:
            return None
        return hints(x, expected)
    return grade


def _grade_frontier(given: Any, expected: list[str]) -> str | None:
    g = _frontier_graph()
    if isinstance(given, str) or not hasattr(given, "__iter__"):
        return "answer with a list of node ids, e.g. ['a', 'b']."
    given = list(given)
    for nid in given:
        if nid not in g:
            return f"{nid!r} is not a node of this graph; use the ids written in the nodes (g1.nodes() lists them)."
        status = str(g.status(nid))
        if status in ("done", "verified"):
            return f"{nid!r} is finished; the frontier is work that can start now."
        if status in ("assigned", "in_progress"):
            return f"{nid!r} is already {status.replace('_', ' ')}: the frontier holds only pending nodes."
        waiting = [d for d in g.deps(nid) if str(g.status(d)) not in ("done", "verified")]
        if waiting:
            return f"{nid!r} still waits for {waiting[0]!r}, which is not done."
    if len(set(given)) != len(given):
        return "a node appears twice."
    if set(given) != set(expected):
        return "a pending node whose dependencies are all done is missing; a node with no dependencies counts too."
    return None


def _critical_path_hints(x: float, expected: float) -> str:
    spec = _workload()
    longest_by_count = _longest_chain_nodes(spec)
    if x == spec.total_work:
        return "that is the total work of all nodes; the critical path is a single chain of dependencies."
    if x == longest_by_count:
        return "you counted nodes; add up the durations (the number under each node) along a chain."
    if x < expected:
        return "a heavier chain exists: start from a node without dependencies and always follow the successor " \
               "with the longest remaining chain."
    return "no chain is that heavy: every step along the chain must follow a dependency edge."


def _longest_chain_nodes(spec) -> int:
    from latte_lab.graph import dag

    return len(dag.critical_path(dict(zip(spec.ids, spec.deps))))


def _lower_bound_hints(x: float, expected: float) -> str:
    spec = _workload()
    work = spec.total_work / BOUND_WORKERS
    if math.isclose(x, work) and work != math.ceil(work):
        return "rounds are whole: round the work bound up."
    if x == min(spec.critical_path_length, math.ceil(work)):
        return "both bounds must hold at once: take the larger one."
    if x < expected:
        return "one of the two bounds (critical path, total work / N rounded up) is larger than that."
    return "that is more than either bound: recompute the critical path and the total work / N."


def _graham3_hints(x: float, expected: float) -> str:
    spec = _graham()
    if x == spec.total_work:
        return "three workers share the work: play the list round by round, each free worker taking the first " \
               "ready task in the list."
    if x < spec.critical_path_length:
        return "no schedule beats the critical path; compute it first."
    return "write the schedule round by round: at each round, free workers take the earliest ready tasks of the " \
           "list T1, T2, ..., T9, in that order."


def _graham4_hints(x: float, expected: float) -> str:
    spec = _graham()
    if x < spec.critical_path_length:
        return "more workers cannot beat the critical path."
    if x < expected:
        return "play it round by round: with 4 workers, which task does the worker freed at round 3 take, and " \
               "which tasks are left for later?"
    return "play it round by round: with 4 workers, T4 finishes earlier; list which tasks are ready at rounds " \
           "2 and 3."


def _graham():
    from latte_lab.scheduling import graham_example

    return graham_example()


def _scaling_makespans() -> list[int]:
    from latte_lab.scheduling import simulate

    spec = _scaling_workload()
    return [simulate(spec, n).makespan for n in range(1, len(spec) + 1)]


def _scaling_answer(**_: Any) -> int:
    ms = _scaling_makespans()
    return ms.index(min(ms)) + 1


def _scaling_hints(x: float, expected: float) -> str:
    if x != int(x) or x < 1:
        return "answer with a whole number of workers."
    if x < expected:
        return "with that many workers the team is still slower than with more: compare ceil(work / N) with the " \
               "critical path, and look at how wide the frontier gets."
    return "fewer workers already reach the fastest makespan; extra ones sit idle (see res.rounds['frontier'])."


def _discovery_gap(**_: Any) -> float:
    from latte_lab.scheduling import compare_discovery

    df = compare_discovery(_discovery_workload(), [DISCOVERY_RATE], DISCOVERY_WORKERS,
                           policies=(("self", True), ("self", False)), seeds=TRIAL_SEEDS)
    mean = df.groupby("team")["makespan"].mean()
    return round(float(mean["self (planned)"] - mean["self (Discover)"]), 1)


def _discovery_hints(x: float, expected: float) -> str:
    if x < 0 <= expected:
        return "subtract the Discovering team's mean makespan from the planned team's, not the other way round."
    return "use compare_discovery with the exercise's workload, 8 workers, discovery 0.6 and seeds 0-9, keep " \
           "only 'self' teams, and take the difference of the mean makespans (one decimal)."


def _trial_efficiency(*, trial: Any = None, **_: Any) -> float:
    from latte_lab.scheduling import from_trial

    if trial is None:
        from latte_lab.trial import run_trial

        with tempfile.TemporaryDirectory() as tmp:
            trial = run_trial(_trial_config(), runs_dir=tmp)
            return round(from_trial(trial).efficiency, 2)
    return round(from_trial(trial).efficiency, 2)


def _efficiency_hints(x: float, expected: float) -> str:
    if x > 1:
        return "efficiency is at most 1: divide the lower bound by the team's actual makespan."
    return "take from_trial(res): its lower_bound divided by its actual_makespan, to two decimals " \
           "(not a simulated policy's row)."


def _const(make: Callable[[], Any]) -> Callable[..., Any]:
    return lambda **_: make()


EXERCISES: dict[str, Exercise] = {e.id: e for e in (
    Exercise("ex1", "frontier", _frontier_graph, _const(lambda: _frontier_graph().frontier()), _grade_frontier),
    Exercise("ex2", "critical path", _workload, _const(lambda: _workload().critical_path_length),
             _grade_number(_critical_path_hints)),
    Exercise("ex3", "lower bound with 2 workers", _workload, _const(lambda: _workload().lower_bound(BOUND_WORKERS)),
             _grade_number(_lower_bound_hints)),
    Exercise("ex4", "when more workers stop helping", _scaling_workload, _scaling_answer,
             _grade_number(_scaling_hints)),
    Exercise("ex5", "Graham's list on 3 workers", _graham,
             _const(lambda: _list_makespan(3)), _grade_number(_graham3_hints)),
    Exercise("ex6", "Graham's list on 4 workers", _graham,
             _const(lambda: _list_makespan(4)), _grade_number(_graham4_hints)),
    Exercise("ex7", "planned vs Discover", _discovery_workload, _discovery_gap,
             _grade_number(_discovery_hints, tolerance=NUMBER_TOLERANCE)),
    Exercise("ex8", "a real trial's efficiency", _trial_config, _trial_efficiency,
             _grade_number(_efficiency_hints, tolerance=NUMBER_TOLERANCE)),
)}


def _list_makespan(n_workers: int) -> int:
    from latte_lab.scheduling import list_schedule

    return list_schedule(_graham(), n_workers, priority="fifo").makespan


def _exercise(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise LatteError(f"unknown exercise {exercise_id!r}; the exercises are {', '.join(EXERCISES)}") from None


def exercises():
    """The exercises: id and title (a pandas DataFrame)."""
    import pandas as pd

    return pd.DataFrame([(e.id, e.title) for e in EXERCISES.values()], columns=["exercise", "title"])


def setup(exercise_id: str) -> Any:
    """The material of an exercise: the graph, workload or trial configuration its questions are about."""
    return _exercise(exercise_id).setup()


def check(exercise_id: str, answer: Any, **context: Any) -> Verdict:
    """A one-line verdict on ``answer``, with a hint when it is wrong (never the answer); a right answer is
    repeated in it, and opens the cells that show the exercise's answer (:func:`unlocked`).

    ``context`` passes what an exercise measures, e.g. ``trial=res`` for ex8 (otherwise ex8 runs its trial,
    a few seconds).
    """
    ex = _exercise(exercise_id)
    if answer is None:
        return Verdict(ex.id, ex.title, None)
    hint = ex.grade(answer, ex._expected(**context))
    if hint is None:
        _UNLOCKED.add(ex.id)
    return Verdict(ex.id, ex.title, hint is None, hint or "", answer if hint is None else None)


def give_up(*exercise_ids: str) -> None:
    """Opens the cells that show these exercises' answers without a right answer (a student who is stuck).

    >>> give_up("ex3")
    ex3 given up: the cells that show its answer open when you run them.
    >>> unlocked("ex3")
    True
    """
    ids = [_exercise(e).id for e in exercise_ids]
    _UNLOCKED.update(ids)
    print(f"{' and '.join(ids)} given up: the cells that show {'its answer' if len(ids) == 1 else 'their answers'} "
          "open when you run them.")


def unlocked(*exercise_ids: str) -> bool:
    """True once every one of these exercises was answered correctly in :func:`check` or given up
    (:func:`give_up`); otherwise prints what to do first and returns False. Guards a cell whose output shows
    an answer: a wrong answer does not open it.

    >>> unlocked("ex5")
    (this cell shows the answer to ex5: answer it correctly above, or run ll.teaching.give_up("ex5"), then run this cell again)
    False
    """
    missing = [_exercise(e).id for e in exercise_ids if e not in _UNLOCKED]
    if missing:
        quoted = ", ".join(f'"{m}"' for m in missing)
        print(f"(this cell shows the answer to {' and '.join(missing)}: answer {'it' if len(missing) == 1 else 'them'} "
              f"correctly above, or run ll.teaching.give_up({quoted}), then run this cell again)")
    return not missing


answered = unlocked  # the former name of unlocked (a wrong answer no longer opens a cell)


def editions(source) -> tuple[Any, Any]:
    """The (student, teacher) editions of a lesson notebook (a path or an nbformat notebook): the student's
    leaves out the cells tagged ``solution`` or ``teacher``; both have their outputs cleared."""
    import copy

    import nbformat

    nb = nbformat.read(str(source), as_version=4) if not hasattr(source, "cells") else source
    teacher = copy.deepcopy(nb)
    for cell in teacher.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    student = copy.deepcopy(teacher)
    student.cells = [c for c in student.cells if not set(c.metadata.get("tags", ())) & set(TEACHER_TAGS)]
    for cell in student.cells:
        cell.metadata.pop("tags", None)
    return student, teacher


def write_editions(source, student, teacher, *, execute: bool = False) -> list[Any]:
    """Writes the two editions of ``source`` (see :func:`editions`) to the paths ``student`` and ``teacher``;
    returns the paths written.

    ``execute=True`` (``make class``) also runs the teacher's edition in a fresh kernel and writes it with
    its outputs, every solution cell showing its answer beside its check, as ``teacher`` (with an HTML copy
    beside it, for a browser or a printer) and every exercise's answer as ``answer-key.md`` in the same folder.
    """
    from pathlib import Path

    import nbformat

    student_nb, teacher_nb = editions(source)
    written = []
    if execute:
        teacher_nb = run_notebook(teacher_nb)
    for nb, path in ((student_nb, student), (teacher_nb, teacher)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))
        written.append(Path(path))
    if execute:
        written.append(Path(teacher).with_suffix(".html"))
        written[-1].write_text(offline_html(teacher_nb), encoding="utf-8")
        written.append(Path(teacher).parent / "answer-key.md")
        written[-1].write_text(_answer_key(), encoding="utf-8")
    return written


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def offline_html(nb) -> str:
    """``nb`` (run) as one HTML page that opens from disk with no network: no script from a CDN (nbconvert's
    require.js and MathJax; the lesson has no formulas), and each widget (a control that needs a kernel) shown
    as a line saying so instead of being drawn by ipywidgets' manager from unpkg.com."""
    import copy
    import re

    from nbconvert import HTMLExporter

    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if WIDGET_VIEW in out.get("data", {}):
                out["data"] = {"text/html": "<p><em>(an interactive control: it works when the notebook runs in "
                                            "Jupyter)</em></p>"}
    page, _ = HTMLExporter().from_notebook_node(nb)
    return re.sub(r'<script\s+src="https?://[^"]*">\s*</script>', "", page)


NOTEBOOK_CELL_TIMEOUT = 300  # seconds one cell of the lesson may take when make class runs it (ex8: a trial)


def run_notebook(nb):
    """``nb`` run top to bottom in a fresh kernel of this Python, in a temporary folder, with the notebook's
    own inline figures (not this process's matplotlib backend); returns it with its outputs. A cell that raises
    is a LatteError naming it."""
    import copy
    import os

    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = copy.deepcopy(nb)
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    with tempfile.TemporaryDirectory(prefix="latte-lesson-") as tmp:
        # IPC sockets in the temporary folder: no TCP port to choose (or to find taken), nothing on the network
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(tmp, "kernel"))
        client = NotebookClient(nb, km=km, timeout=NOTEBOOK_CELL_TIMEOUT, resources={"metadata": {"path": tmp}})
        try:
            client.execute(env=env)
        except CellExecutionError as exc:
            raise LatteError(f"the lesson failed while it ran: {str(exc).strip().splitlines()[-1]}") from None
    return nb


def _answer_key() -> str:
    """Every exercise's answer, computed by the library as :func:`check` does, as a Markdown table (what
    ``make class`` writes beside the teacher's edition; ex8 runs its trial, a few seconds)."""
    rows = ["| exercise | title | answer |", "|---|---|---|"]
    for ex in EXERCISES.values():
        rows.append(f"| {ex.id} | {ex.title} | `{_shown(ex._expected())}` |")
    return ("# Answer key: the scheduling lesson\n\nFor the teacher: not part of the class zip. Each answer is computed "
            "by latte_lab as `ll.teaching.check` grades it (numbers asked to one or two decimals accept either "
            "rounding).\n\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":  # python -m latte_lab.teaching SOURCE STUDENT TEACHER [--execute] (make class)
    import sys

    for path in write_editions(*sys.argv[1:4], execute="--execute" in sys.argv[4:]):
        print(f"wrote {path}")
