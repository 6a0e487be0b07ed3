"""The task interface every task package implements.

A task is a small software project: files to set up in a workspace, a description and success
criteria the agents see, a public test command, a hidden suite for scoring, a reference solution, and
the work units a reference decomposition would have (for the scheduling workloads and the task tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from latte_lab.config import DEFAULT_MAX_ROUNDS
from latte_lab.tasks.files import task_files
from latte_lab.tasks.suite import EvalResult, run_hidden_suite

if TYPE_CHECKING:  # pragma: no cover
    from latte_lab.workspace import Workspace


@dataclass(frozen=True)
class WorkUnit:
    """One subtask of a reference decomposition.

    ``files`` are the files the unit writes (empty for a unit that only runs checks). ``symbols`` names
    what the unit changes inside them: top-level functions, classes, ``Class.method`` names or
    assignments for ``.py`` files, top-level keys for ``.json`` files; empty means the whole file.
    ``tests`` are substrings of the test ids (e.g. ``"TestRms"``) or probe check ids that exercise the
    unit. ``visible`` is False for work the description does not reveal: it shows up only through an
    observation during execution (a test or a probe failing for a new reason), and a plan made from the
    description alone does not contain it.

    The decomposition is the task author's account of the work (the scheduling workloads and the task
    tests use it). The simulated model never reads it: its agents build their own units from what their
    prompts show (``latte_lab.models.sim.skill``).
    """

    id: str
    title: str
    description: str
    files: tuple[str, ...]
    symbols: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()
    visible: bool = True
    tests: tuple[str, ...] = ()
    effort: float = 1.0  # relative size of the unit (the scheduling workloads built from a task use it)


class Task:
    """Base class; subclasses set the class attributes and implement the methods.

    Register a subclass with ``@latte_lab.tasks.register`` (its ``id`` is the name). Methods:

    ``starting_files() -> {path: text}``
        The files of a fresh workspace, public tests included. Used by the default ``setup``.
    ``setup(workspace)``
        Called once per trial on an empty workspace. The default writes ``starting_files()``, makes
        ``public_tests`` read-only to agents and sets the public test command from ``test_args``.
    ``evaluate(workspace) -> EvalResult``
        Called once after the last round; scores the workspace as the team left it. The default runs
        the first public test file, as shipped, on a copy of the workspace (a task without a hidden
        suite, where the public suite is the criterion). Pass ``confirm=self.public_files()`` to
        :func:`~latte_lab.tasks.suite.run_hidden_suite` so the result says whether the public tests,
        as shipped, pass (``public_confirmed``).
    ``reference_solution() -> {path: text}``
        Files that pass every public and hidden test once written over the starting files.
    ``work_units() -> list[WorkUnit]``
        The reference decomposition (the simulated model does not read it).
    """

    id: str = ""
    title: str = ""
    description: str = ""  # what agents see
    success_criteria: str = ""
    default_max_rounds: int = DEFAULT_MAX_ROUNDS  # the paper's 40
    public_tests: tuple[str, ...] = ()  # relative paths of public test files (read-only to agents)
    test_args: tuple[str, ...] = ()  # pytest arguments of the public test command
    required_outputs: tuple[str, ...] = ()  # deliverables; a hidden evaluation notes missing ones
    accuracy_metric: str = "hidden_pass_rate"  # or "success" (debug: the public suite is the criterion)
    # installed libraries the hidden suite reads its data with (eda: pandas): the evaluation imports them before
    # the workspace's modules can be imported, so a workspace file `pandas.py` never stands in for the library
    hidden_imports: tuple[str, ...] = ()

    def starting_files(self) -> dict[str, str]:
        raise NotImplementedError(f"{type(self).__name__} must implement starting_files() or setup(workspace)")

    def setup(self, workspace: Workspace) -> None:
        for path, text in self.starting_files().items():
            workspace.setup_file(path, text)
        workspace.protect(*self.public_tests)
        workspace.test_args = self.test_args

    def evaluate(self, workspace: Workspace) -> EvalResult:
        if not self.public_tests:
            raise NotImplementedError(f"{type(self).__name__} has no public_tests: implement evaluate(workspace)")
        suite = self.public_tests[0]
        return run_hidden_suite(workspace, {suite: self.starting_files()[suite]}, suite,
                                required_outputs=self.required_outputs, skipped_as="error",
                                confirm=self.public_files(), imports=self.hidden_imports)

    def public_files(self) -> dict[str, str]:
        """The public test files as the task ships them ({path: text}): a hidden evaluation runs these
        copies, never the workspace's, to confirm a team's claim of success."""
        files = task_files(self)
        return {path: files[path].decode("utf-8") for path in self.public_tests if path in files}

    def reference_solution(self) -> dict[str, str]:
        raise NotImplementedError

    def work_units(self) -> list[WorkUnit]:
        raise NotImplementedError

    @property
    def official_name(self) -> str:
        """The released code's name for this task (``config.TASK_ALIASES``), else its id."""
        from latte_lab.config import TASK_ALIASES

        return next((alias for alias, name in TASK_ALIASES.items() if name == self.id), self.id)

    @property
    def public_test_command(self) -> list[str]:
        return ["python", "-m", "pytest", "-q", *self.test_args]

    def __repr__(self) -> str:
        return f"<Task {self.id}: {self.title}>"
