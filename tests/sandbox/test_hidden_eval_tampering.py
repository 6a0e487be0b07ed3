"""Scores agents cannot game: the hidden evaluation scores tampered code as the same code untampered, and
every attempt is recorded (a ``tampering`` event, the ``tampered`` column), never scored.

The judge runs the hidden tests in a process that never runs workspace code (latte_lab/sandbox/judge.py): cheats
aimed at the evaluation's own process (a test function's code swapped, the verdict plugin forged through the
session's frames, pytest patched or exited from), at its comparisons (an object equal to everything) or at its
files (the reference solution, read through sys.path or an editable finder) reach only the workspace's own
process. The corpus is tests/sandbox/cheat_corpus.py; benchmarks/tampering_table.py prints the same as a table."""

from __future__ import annotations

import textwrap

import pytest
from cheat_corpus import (
    ANYTHING,
    CONFTEST,
    JUDGE_CHEATS,
    PATCH_REPORTS,
    STARTUP_FILES,
    VARIANTS,
    anything_instead_of_raising,
    recorded,
    score,
    unsolved,
    with_import,
    workspace,
)
from sandbox_helpers import BACKENDS
from trial_helpers import of, script

import latte_lab as ll
from latte_lab.sandbox.tamper import scan
from latte_lab.trial import run_trial


def _evaluate(ws):
    return ll.tasks.get("textproc" if ws.exists("tokenizer.py") else "debug").evaluate(ws)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cheat", sorted(JUDGE_CHEATS))
def test_a_cheat_on_the_evaluations_process_scores_as_the_code_without_it(tmp_path, backend, cheat):
    """The cheats that reached the evaluation's process when the tests and the workspace's code shared one
    (textproc 22 -> 58 of 58, debug 0 -> 33 of 33, with nothing recorded): each reaches only the workspace's
    process now; the score is the code's without it, and the attempt is recorded."""
    code, _what = JUDGE_CHEATS[cheat]
    for task, target, solved in (("textproc", "tokenizer.py", 0.5), ("debug", "signal_toolkit.py", 0.0)):
        honest = workspace(tmp_path / f"{task}-honest", task, backend, solved)
        expected = score(_evaluate(honest))
        assert expected[0] < ll.tasks.get(task).evaluate(honest).total
        cheating = workspace(tmp_path / f"{task}-cheat", task, backend, solved)
        with_import(cheating, target, f"helpers_{cheat}", code)
        ev = _evaluate(cheating)
        assert score(ev) == expected, (task, ev.notes)
        assert recorded(ev, cheating), "the attempt is recorded"


@pytest.mark.parametrize("backend", BACKENDS)
def test_objects_that_equal_everything_score_as_objects_that_do_not(tmp_path, backend):
    """The third cheat: unsolved functions return an object whose ``__eq__``/``__contains__`` say True (22 -> 38 of
    58 before; a trial from the starting code scored 0.48). The judge compares plain data only: the score is that of
    the same functions returning an object that compares as any object does, with a note; the scan records the
    class."""
    honest = workspace(tmp_path / "honest", "textproc", backend, 0.5)
    cheating = workspace(tmp_path / "cheat", "textproc", backend, 0.5)
    assert unsolved(honest)
    for name in unsolved(honest):
        honest.write(name, anything_instead_of_raising(honest.read(name), cheat=False), agent="Dev1")
        cheating.write(name, anything_instead_of_raising(cheating.read(name), cheat=True), agent="Dev1")
    expected = score(_evaluate(honest))
    ev = _evaluate(cheating)
    assert score(ev) == expected
    assert any("_Anything object, not plain data" in note for note in ev.notes)
    assert any(f.kind == "constant-comparison" for f in scan(cheating.root))


def test_the_solution_is_nowhere_a_workspace_can_look(tmp_path):
    """The fourth cheat looked for the reference solution through sys.path, .pth lines and editable finders, and
    ran it: from inside the evaluation it finds nothing (latte_lab's task folders are hidden from every run that
    runs workspace code; tests/sandbox/test_hidden_material.py searches the whole way on both backends and installs)."""
    code, _ = JUDGE_CHEATS["read_solution"]
    ws = workspace(tmp_path / "ws", "textproc", "local", 0.5)
    ws.write("finder.py", code + "\ndef found():\n    return FOUND\n", agent="Dev1")
    ws.write("test_found.py", "import finder\n\ndef test_found():\n    print('FOUND', finder.found())\n", agent="Dev1")
    run = ws.run_tests(("-s", "test_found.py"), timeout=60)
    assert run.passed == 1 and "FOUND []" in run.stdout, run.stdout[-2000:]


@pytest.mark.parametrize("backend", BACKENDS)
def test_patching_pytest_at_import_scores_as_the_unpatched_code(tmp_path, backend):
    """A module of the workspace wraps ``TestReport.from_item_and_call`` so that failed reports say passed: it
    patches the workspace process's pytest, which decides nothing. The score is the unpatched code's; the
    workspace's process saw the import, and the scan names the file and line."""
    for task, target, solved in (("textproc", "tokenizer.py", 0.5), ("debug", "signal_toolkit.py", 0.0)):
        honest = workspace(tmp_path / f"{task}-honest", task, backend, solved)
        expected = score(ll.tasks.get(task).evaluate(honest))
        cheat = workspace(tmp_path / f"{task}-cheat", task, backend, solved)
        with_import(cheat, target, "helpers_patch", PATCH_REPORTS)
        ev = ll.tasks.get(task).evaluate(cheat)
        assert score(ev) == expected
        assert ev.passed < ev.total
        assert ("imports _pytest.reports", "helpers_patch.py:1") in ev.tampering
        assert any(f.kind == "patches-test-framework" and f.path == "helpers_patch.py" and f.line == 7
                   for f in scan(cheat.root))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_score_as_the_unpatched_code(tmp_path, name):
    honest = workspace(tmp_path / "honest", "textproc", "local", 0.5)
    expected = score(ll.tasks.get("textproc").evaluate(honest))
    assert 0 < expected[0] < 58
    cheat = workspace(tmp_path / "cheat", "textproc", "local", 0.5)
    with_import(cheat, "tokenizer.py", f"helpers_{name}", VARIANTS[name])
    ev = ll.tasks.get("textproc").evaluate(cheat)
    if name == "hard_exit":  # the tokenizer's process ends at its import: what imports it passes nothing
        assert ev.passed < expected[0]
        assert any("the workspace process ended with status 0" in note for note in ev.notes)
    else:
        assert score(ev) == expected
    assert recorded(ev, cheat), "the attempt is recorded"


@pytest.mark.parametrize("name", sorted(STARTUP_FILES))
def test_configuration_and_startup_files_are_left_out(tmp_path, name):
    honest = workspace(tmp_path / "honest", "textproc", "local", 0.5)
    expected = score(ll.tasks.get("textproc").evaluate(honest))
    cheat = workspace(tmp_path / "cheat", "textproc", "local", 0.5)
    path, text = STARTUP_FILES[name]
    cheat.write(path, text, agent="Dev1")
    ev = ll.tasks.get("textproc").evaluate(cheat)
    assert score(ev) == expected
    assert scan(cheat.root), "the scan names the file"


# -- through a trial: agent-written code takes the path real agents' code takes ------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_conftest_written_by_an_agent_is_no_success(tmp_path, backend):
    """A worker writes a conftest.py whose hook turns failures into passes. The public runs (the agents' own)
    keep it, so the team claims success; the trial's success does not rest on it."""
    model = script({"Dev1": {0: f'<edit_file path="conftest.py">{CONFTEST}</edit_file>'}})
    cfg = ll.TrialConfig(task="debug", team="leader_worker", model="scripted", max_rounds=3, sandbox=backend,
                         flat_success="tests", runs_dir=str(tmp_path / "runs"))
    res = run_trial(cfg, model=model)
    assert res.status == "ok", res.error
    assert res.row["claimed_success"] is True and res.reason == "tests_passed"  # the public run was gamed
    assert res.success is False and res.accuracy == 0.0 and res.row["hidden_pass_rate"] == 0.0
    assert res.row["tampered"] is True
    found = of(res, "tampering", kind="conftest", path="conftest.py")
    assert found and found[0]["line"] == 4 and found[0]["source"] == "scan"
    assert of(res, "evaluation")[0]["public_confirmed"] is False


def _cheat_trial(tmp_path, backend: str, files: dict[str, str]):
    model = script({"Dev1": {0: "".join(f'<edit_file path="{path}">{text}</edit_file>' for path, text in files.items())}})
    cfg = ll.TrialConfig(task="textproc", team="leader_worker", model="scripted", max_rounds=2, sandbox=backend,
                         flat_success="tests", runs_dir=str(tmp_path / "runs"))
    res = run_trial(cfg, model=model)
    assert res.status == "ok", res.error
    return res


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cheat", sorted([*JUDGE_CHEATS, ANYTHING]))
def test_each_cheat_in_a_trial_scores_nothing_and_is_recorded(tmp_path, backend, cheat):
    """A worker writes the cheat into the starting textproc workspace: the trial scores what the starting code
    scores (no hidden test passes but those the starting code passes), and is marked tampered."""
    start = workspace(tmp_path / "start", "textproc", backend, 0.0)
    baseline = _evaluate(start)
    if cheat == ANYTHING:
        files = {name: anything_instead_of_raising(start.read(name), cheat=True) for name in unsolved(start)}
    else:
        files = {f"helpers_{cheat}.py": JUDGE_CHEATS[cheat][0],
                 "tokenizer.py": f"import helpers_{cheat}\n" + start.read("tokenizer.py")}
    res = _cheat_trial(tmp_path, backend, files)
    if cheat == ANYTHING:  # the same functions returning objects that compare as any object does
        for name in unsolved(start):
            start.write(name, anything_instead_of_raising(start.read(name), cheat=False), agent="Dev1")
        baseline = _evaluate(start)
    assert res.row["hidden_pass_rate"] == pytest.approx(baseline.rate)
    assert res.row["tampered"] is True and of(res, "tampering")


def test_patching_pytest_through_a_trial_is_recorded_and_not_scored(tmp_path):
    start = workspace(tmp_path / "start", "textproc", "local", 0.0)
    res = _cheat_trial(tmp_path, "local", {"helpers_patch.py": PATCH_REPORTS,
                                           "tokenizer.py": "import helpers_patch\n" + start.read("tokenizer.py")})
    assert res.row["hidden_pass_rate"] == 0.0 and res.accuracy == 0.0
    assert res.row["tampered"] is True
    assert of(res, "tampering", kind="patches-test-framework", path="helpers_patch.py", line=7)
    assert of(res, "tampering", source="evaluation", detail="imports _pytest.reports", path="helpers_patch.py")


def test_an_honest_trial_is_not_tampered(tmp_path):
    cfg = ll.TrialConfig(task="debug", team="latte", model="simulated", seed=0, sandbox="local",
                         runs_dir=str(tmp_path / "runs"))
    res = run_trial(cfg)
    assert res.row["tampered"] is False and not of(res, "tampering")
    assert res.row["claimed_success"] == res.success


def test_scan_names_file_and_line(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST)
    (tmp_path / "mod.py").write_text(textwrap.dedent("""\
        from unittest import TestCase
        import os
        TestCase.assertTrue = lambda *a: None
        def stop():
            os._exit(0)
        """))
    got = [(f.kind, f.path, f.line) for f in scan(tmp_path)]
    assert got == [("patches-test-framework", "mod.py", 3), ("hard-exit", "mod.py", 5),
                   ("conftest", "tests/conftest.py", 4)]
    # files the task itself set up are not findings
    assert scan(tmp_path, {"tests/conftest.py": CONFTEST, "mod.py": (tmp_path / "mod.py").read_text()}) == []


def test_scan_names_what_reaches_past_the_code(tmp_path):
    """Frame walks, code swaps, comparisons that answer a constant, code run from a file's text, latte_lab's
    files named, the channel's text forged, a test file of the task rewritten: each by file and line."""
    (tmp_path / "test_public.py").write_text("def test_x():\n    assert True\n")
    (tmp_path / "mod.py").write_text(textwrap.dedent("""\
        import sys, inspect, runpy
        f = sys._getframe().f_back
        inspect.stack()
        def g():
            pass
        g.__code__ = (lambda: 1).__code__
        class Anything:
            def __eq__(self, other):
                return True
            __contains__ = lambda self, item: True
            def __lt__(self, other):
                return self.x < other.x
        exec(open("other.py").read())
        runpy.run_path("/opt/latte_lab/tasks/textproc/solution/document.py")
        line = "@@latte_lab-verdict 1 test"
        """))
    got = [(f.kind, f.line) for f in scan(tmp_path, {"test_public.py": "def test_x():\n    assert False\n"})]
    assert got == [("frame-walk", 2), ("frame-walk", 2), ("frame-walk", 3), ("code-swap", 6),
                   ("constant-comparison", 8), ("constant-comparison", 10), ("runs-file-text", 13),
                   ("runs-file-text", 14), ("reads-latte-lab", 14), ("forges-channel", 15),
                   ("rewrites-tests", 1)]
