"""Running a hidden test suite against a copy of a workspace, with per-class counts.

Shared by every task (debug scores its public suite this way). The suite runs in a temporary copy of the workspace
plus the hidden files, so hidden tests never reach the agents' workspace. Outcomes come from
pytest's JUnit XML report, read by the sandbox's pytest runner as for every test run
(:func:`latte_lab.sandbox.pytest.parse_junit`); the denominators come from the suite's source (test methods per class,
``pytest.mark.parametrize`` with a literal list counted per value), so a suite that fails to collect
still scores 0 of its full size instead of 0 of 0.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from latte_lab.errors import TaskError
from latte_lab.workspace.symbols import AST_LOCK

if TYPE_CHECKING:  # pragma: no cover
    from latte_lab.workspace import Workspace

@dataclass
class EvalResult:
    """Outcome of a task's hidden suite (or public suite, for tasks without one)."""

    passed: int
    failed: int
    errors: int
    per_class: dict[str, tuple[int, int]] = field(default_factory=dict)  # class -> (passed, total)
    missing_outputs: tuple[str, ...] = ()  # required deliverables absent from the workspace
    output: str = ""
    public_confirmed: bool | None = None  # the task's public tests, as shipped, all passed in the same session
    tampering: tuple[tuple[str, str], ...] = ()  # (what, where) the evaluation refused or undid while it ran
    notes: tuple[str, ...] = ()  # what the evaluation left out of its copy (conftest.py, links, FIFOs), and why
    failed_tests: tuple[str, ...] = ()  # "Class::test" of each hidden test that ran and did not pass

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0



def _parametrize_width(decorator: ast.expr) -> int:
    """Cases one ``@pytest.mark.parametrize("x", [...])`` decorator makes (1 if not literal)."""
    if (
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Attribute)
        and decorator.func.attr == "parametrize"
        and len(decorator.args) >= 2
        and isinstance(decorator.args[1], (ast.List, ast.Tuple))
    ):
        return len(decorator.args[1].elts)
    return 1


def count_tests(source: str) -> dict[str, int]:
    """Test cases per ``Test*`` class of a suite's source."""
    return dict(_count_tests(source))


@functools.lru_cache(maxsize=16)  # a task's hidden suite is the same text in every trial
def _count_tests(source: str) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = {}
    with AST_LOCK:
        tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            n = 0
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    width = 1
                    for d in item.decorator_list:
                        width *= _parametrize_width(d)
                    n += width
            counts[node.name] = n
    return tuple(counts.items())


def run_hidden_suite(
    workspace: Workspace,
    hidden: Mapping[str, str],
    suite_path: str,
    *,
    required_outputs: tuple[str, ...] = (),
    missing: tuple[str, ...] | None = None,
    timeout: float | None = None,
    skipped_as: str = "failed",
    confirm: Mapping[str, str] | None = None,
    imports: tuple[str, ...] = (),
    call_timeout: float | None = None,
) -> EvalResult:
    """Run ``suite_path`` (one of ``hidden``) against ``workspace`` in a judge's session
    (:func:`latte_lab.sandbox.judge.run_judged`: the tests and ``hidden``'s data stay in a process that never runs
    workspace code; the workspace's code runs in a sandboxed process of its own and answers with plain data).

    ``confirm``: the task's public test files as shipped ({path: text}), run in the same session; the
    result's ``public_confirmed`` says whether they all passed, which is what a team's claim of success
    rests on. ``missing`` overrides the default "required output absent from the workspace" check;
    ``timeout`` overrides the workspace's test timeout; ``imports``: installed libraries the suite reads its
    data with (:attr:`latte_lab.tasks.base.Task.hidden_imports`); ``call_timeout``: seconds one call of a test
    into the workspace may take (:data:`latte_lab.sandbox.judge.CALL_TIMEOUT_SECONDS` by default); scoring as in
    :func:`score`.

    The suite is written as any pytest suite is (``from greet import greet``): the judge imports the workspace's
    modules as proxies whose calls run in the workspace's own process and answer with plain data.
    """
    from latte_lab.sandbox.judge import import_options, run_judged
    from latte_lab.sandbox.limits import SandboxLimits
    from latte_lab.sandbox.pytest import memo_get, memo_key, memo_put, memo_storable, outcomes_by_class

    if suite_path not in hidden:
        raise TaskError(f"hidden suite {suite_path!r} is not among the hidden files {sorted(hidden)}")
    totals = count_tests(hidden[suite_path])
    if missing is None:
        missing = tuple(p for p in required_outputs if not workspace.exists(p))
    confirm = dict(confirm or {})
    test_files = {path: text for path, text in {**hidden, **confirm}.items() if path.endswith(".py")}
    data_files = {path: text for path, text in hidden.items() if path not in test_files}
    run_paths = [suite_path, *(path for path in confirm if path != suite_path)]
    # memoised by the workspace's and the evaluation's files, as public runs are (the workspace's memo)
    key = run = None
    if workspace.memo:
        timeouts = [f"--call-timeout={call_timeout:g}"] if call_timeout is not None else []
        key = memo_key(workspace.root, ["judge", *import_options(imports), *timeouts, *run_paths],
                       SandboxLimits(), workspace.backend,
                       {**test_files, **data_files})
        run = memo_get(workspace.memo_dir, key)
    if run is None:
        run = run_judged(workspace.root, test_files, run_paths, extra_files=data_files, imports=imports,
                         sandbox=workspace.backend, **({"timeout": timeout} if timeout is not None else {}),
                         **({"call_timeout": call_timeout} if call_timeout is not None else {}))
        if key is not None and memo_storable(run):
            memo_put(workspace.memo_dir, key, run)
    suite_cases = [(node, outcome) for node, outcome in run.cases if _file_of(node) == suite_path]
    outcomes = outcomes_by_class(suite_cases)
    output = run.stdout[-4000:] + (run.stderr[-2000:] if run.stderr else "")
    result = score(totals, outcomes, tuple(missing), output, skipped_as=skipped_as)
    result.tampering = tuple(run.tampering)
    result.notes = tuple(run.notes)
    if confirm:
        confirm_cases = [outcome for node, outcome in run.cases if _file_of(node) in confirm]
        ended = not any(note.startswith("the judge's session ended") for note in run.notes)
        result.public_confirmed = bool(ended and confirm_cases and all(o == "passed" for o in confirm_cases))
    return result


def _file_of(node_id: str) -> str:
    return node_id.split("::", 1)[0]


def score(totals: Mapping[str, int], outcomes: Mapping[str, Mapping[str, str]], missing: tuple[str, ...],
          output: str, *, skipped_as: str = "failed") -> EvalResult:
    """Folds per-test outcomes (``outcomes_by_class``) into an EvalResult with per-class counts.

    Denominators are the suite's own (``totals``): tests that never ran (a collection error, a
    timeout) count as errors. Skipped tests count as ``skipped_as`` ("failed" or "error"): a test the
    deliverables made pytest skip was not passed.
    """
    if skipped_as not in ("failed", "error"):
        raise TaskError(f"skipped_as must be 'failed' or 'error', not {skipped_as!r}")
    bad = ("failed", "skipped") if skipped_as == "failed" else ("failed",)
    per_class: dict[str, tuple[int, int]] = {}
    passed = failed = errors = 0
    for cls, total in totals.items():
        got = list(outcomes.get(cls, {}).values())
        n_passed = min(sum(o == "passed" for o in got), total)
        n_failed = min(sum(o in bad for o in got), total - n_passed)
        per_class[cls] = (n_passed, total)
        passed += n_passed
        failed += n_failed
        errors += total - n_passed - n_failed
    not_passed = tuple(f"{cls}::{name}" for cls in totals for name, o in outcomes.get(cls, {}).items() if o != "passed")
    return EvalResult(passed=passed, failed=failed, errors=errors, per_class=per_class,
                      missing_outputs=tuple(missing), output=output, failed_tests=not_passed)
