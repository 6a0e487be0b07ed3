"""Tests of the sandboxed pytest runner: results from the JUnit report (public and hidden suites), the
agreement of its counts with pytest's own summary, extra files, the exec path and the zygote."""

from __future__ import annotations

import re
import textwrap

import pytest
from sandbox_helpers import BACKENDS

from latte_lab.errors import WorkspaceError
from latte_lab.sandbox import clear_memo, outcomes_by_class, parse_junit, run_pytest, zygote
from latte_lab.sandbox import pytest as sbpytest
from latte_lab.workspace import Workspace

pytestmark = pytest.mark.usefixtures("no_shared_memo")  # tests of the memo and the runs: in-process only

SUITE = (
    "from mod import double\n\n"
    "class TestDouble:\n"
    "    def test_two(self):\n        assert double(2) == 4\n\n"
    "    def test_zero(self):\n        assert double(0) == 0\n\n"
    "def test_neg():\n    assert double(-1) == -2\n"
)


@pytest.fixture
def project(tmp_path) -> Workspace:
    clear_memo()
    ws = Workspace(tmp_path / "proj")
    ws.setup_file("mod.py", "def double(x):\n    return x + 2\n")
    ws.setup_file("test_suite.py", SUITE)
    ws.setup_file("data.txt", "v1\n")
    ws.protect("test_suite.py")
    ws.test_args = ("test_suite.py",)
    return ws


def test_missing_pytest_gives_clear_message(project, monkeypatch):
    monkeypatch.setattr(sbpytest, "_pytest_available", lambda: False)
    run = project.run_tests()
    assert run.errors == 1 and "pytest is not installed" in run.stdout and "pip install pytest" in run.stdout


def test_run_pytest_with_extra_files_leaves_workspace_untouched(project):
    hidden = "from mod import double\n\ndef test_hidden():\n    assert double(3) == 6\n"
    before = project.snapshot_files()
    run = run_pytest(project.root, ["test_hidden.py"], timeout=60, extra_files={"test_hidden.py": hidden})
    assert run.failed == 1 and run.failed_tests == ("test_hidden.py::test_hidden",)
    assert project.snapshot_files() == before and not project.exists("test_hidden.py")
    with pytest.raises(WorkspaceError, match="outside"):
        run_pytest(project.root, [], extra_files={"../evil.py": "x"})


def test_exec_path_and_zygote_give_the_same_test_run(project, monkeypatch):
    # Test runs use the pytest fork server by default; the exec path stays available (and is the
    # fallback). tests/sandbox/test_sandbox_zygote_parity.py covers parity on every task suite,
    # test_sandbox_zygote_guarantees.py the sandbox guarantees.
    monkeypatch.delenv(zygote.ZYGOTE_DISABLE_VAR, raising=False)
    runs = {}
    for mode, disabled in (("exec", "1"), ("zygote", "0")):
        monkeypatch.setenv(zygote.ZYGOTE_DISABLE_VAR, disabled)
        assert zygote.zygote_enabled() is (mode == "zygote")
        runs[mode] = run_pytest(project.root, ["test_suite.py"], timeout=60, sandbox="local")
    fields = ("returncode", "passed", "failed", "errors", "failed_tests", "timed_out", "notes")
    assert [getattr(runs["exec"], f) for f in fields] == [getattr(runs["zygote"], f) for f in fields]
    assert runs["exec"].failed_tests == ("test_suite.py::TestDouble::test_zero", "test_suite.py::test_neg")


# ---- JUnit reports ---------------------------------------------------------------------------------

VARIANTS = '''
import pytest


class TestA:
    def test_ok(self):
        pass

    def test_bad(self):
        assert 0

    @pytest.mark.parametrize("x", [1, 2])
    def test_p(self, x):
        assert x == 1

    @pytest.mark.xfail
    def test_xfail(self):
        assert 0

    @pytest.mark.xfail
    def test_xpass(self):
        pass

    @pytest.mark.skip
    def test_skip(self):
        pass

    class TestInner:
        def test_in(self):
            assert 0


@pytest.fixture
def broken():
    yield
    raise RuntimeError("teardown")


def test_fail_and_teardown(broken):
    assert 0


def test_missing(nofixture):
    pass
'''


def test_junit_counts_and_node_ids_match_pytest_summary(tmp_path):
    clear_memo()
    ws = Workspace(tmp_path / "ws", memo=False)
    ws.setup_file("test_variants.py", VARIANTS)
    ws.setup_file("sub/test_s.py", "def test_s():\n    assert 0\n")
    run = ws.run_tests(("test_variants.py", "sub/test_s.py"), timeout=60)
    # pytest's own line: 5 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 2 errors
    summary = run.stdout.strip().splitlines()[-1]
    said = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", summary)}
    assert (run.passed, run.failed, run.errors, run.skipped) == (
        said["passed"] + said["xpassed"], said["failed"], said["errors"], said["skipped"] + said["xfailed"])
    assert run.failed_tests == (
        "test_variants.py::TestA::test_bad",
        "test_variants.py::TestA::test_p[2]",
        "test_variants.py::TestA::TestInner::test_in",
        "test_variants.py::test_fail_and_teardown",
        "sub/test_s.py::test_s",
        "test_variants.py::test_missing",
    )
    for node in run.failed_tests:  # the ids pytest itself prints in its short summary
        assert re.search(rf"^(FAILED|ERROR) {re.escape(node)}( |$)", run.stdout, re.M), node
    assert ("test_variants.py::TestA::test_xfail", "skipped") in run.cases
    assert not (ws.root / sbpytest.JUNIT_NAME).exists() and ws.list_files() == ["sub/test_s.py", "test_variants.py"]
    by_class = outcomes_by_class(run.cases)
    assert by_class["TestA"] == {"test_ok": "passed", "test_bad": "failed", "test_p[1]": "passed",
                                 "test_p[2]": "failed", "test_xfail": "skipped", "test_xpass": "passed",
                                 "test_skip": "skipped"}
    assert by_class["test_variants"]["test_fail_and_teardown"] == "failed"  # the worse of its two reports
    assert by_class["TestInner"] == {"test_in": "failed"}


def test_collection_error_is_an_error_with_the_module_id(tmp_path):
    ws = Workspace(tmp_path / "ws", memo=False)
    ws.setup_file("test_col.py", "import nope\n")
    run = ws.run_tests(("test_col.py",), timeout=60)
    assert (run.passed, run.failed, run.errors) == (0, 0, 1) and run.failed_tests == ("test_col.py",)
    assert "ERROR test_col.py" in run.stdout


def test_no_report_or_a_usage_error_counts_as_an_error(tmp_path):
    ws = Workspace(tmp_path / "ws", memo=False)
    ws.setup_file("test_ok.py", "def test_ok():\n    pass\n")
    run = ws.run_tests(("missing_file.py",), timeout=60)  # a usage error: an empty report
    assert run.errors == 1 and run.passed == 0 and not run.ok and run.returncode == 4
    assert any("exit code 4" in note for note in run.notes)
    crash = ws.run_tests(("test_ok.py", "-p", "no:junitxml"), timeout=60)  # the report option is gone
    assert crash.errors == 1 and not crash.ok
    assert any("without a result report" in note for note in crash.notes)


def test_parse_junit_reads_xunit1_ids():
    xml = textwrap.dedent("""\
        <testsuites><testsuite>
        <testcase classname="pkg.test_m.TestA.TestB" name="test_x[a-1]" file="pkg/test_m.py" line="3"/>
        <testcase classname="pkg.test_m" name="test_f" file="pkg/test_m.py"><skipped type="pytest.xfail"/></testcase>
        <testcase classname="" name="test_c" file="test_c.py"><error message="collection failure"/></testcase>
        <testcase classname="helpers.test_h" name="test_g" file="elsewhere.py"><failure message="x"/></testcase>
        </testsuite></testsuites>""")
    assert parse_junit(xml) == (
        ("pkg/test_m.py::TestA::TestB::test_x[a-1]", "passed"),
        ("pkg/test_m.py::test_f", "skipped"),
        ("test_c.py", "error"),
        ("helpers/test_h.py::test_g", "failed"),
    )
    with pytest.raises(Exception):  # noqa: B017 - ElementTree's ParseError
        parse_junit("<testsuite><testcase")


def test_oversized_or_broken_report_is_no_report(tmp_path, monkeypatch):
    report = tmp_path / "r.xml"
    report.write_text("<testsuite><testcase")
    assert sbpytest._read_report(report) is None and not report.exists()
    report.write_text("<testsuite>" + " " * 100 + "</testsuite>")
    monkeypatch.setattr(sbpytest, "JUNIT_MAX_BYTES", 50)
    assert sbpytest._read_report(report) is None and not report.exists()


THREE_FAILING = "".join(f"def test_{i}():\n    assert {i} == -1\n\n" for i in range(3))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("use_zygote", [True, False])
def test_configuration_comes_from_the_workspace_never_from_above(tmp_path, monkeypatch, backend, use_zygote):
    """A workspace under a project whose pytest configuration stops at the first failure (``-x``) and whose
    conftest.py errors every test runs with pytest's defaults; a configuration file of the workspace's own
    is honoured."""
    monkeypatch.setattr(zygote, "USE_ZYGOTE", use_zygote)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -x\nsome_plugin_option = 1\n")
    (tmp_path / "conftest.py").write_text("def pytest_runtest_setup(item):\n    raise RuntimeError('from above')\n")
    ws = Workspace(tmp_path / "runs" / "ws", memo=False, sandbox=backend)
    ws.setup_file("test_three.py", THREE_FAILING)
    run = ws.run_tests(("test_three.py",), timeout=60)
    assert (run.failed, run.passed) == (3, 0), run.stdout
    assert "Unknown config option" not in run.stdout and "warning" not in run.stdout
    assert [node for node, _ in run.cases] == [f"test_three.py::test_{i}" for i in range(3)]  # ids from the workspace
    ws.setup_file("tox.ini", "[pytest]\naddopts = -x\n")
    assert ws.run_tests(("test_three.py",), timeout=60).failed == 1


def test_a_killed_processs_stage_is_removed_by_the_next_one_and_a_live_ones_kept(tmp_path):
    import fcntl
    import os
    import subprocess
    import sys

    from latte_lab.sandbox.stage import Stage

    base = tmp_path / "base"
    base.mkdir()
    make_and_die = (
        "import os, sys\nfrom latte_lab.sandbox.stage import Stage\n"
        f"stage = Stage('latte_lab-stage-', 'workspace', base={str(base)!r})\n"
        "d = stage.take()\n(d / 'left.py').write_text('x = 1')\nprint(stage.path, flush=True)\n"
        "os.kill(os.getpid(), 9)\n")
    killed = subprocess.run([sys.executable, "-c", make_and_die], capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9, killed.stderr
    dead = killed.stdout.strip()
    assert os.path.exists(os.path.join(dead, "workspace", "left.py"))  # what a kill leaves

    live = base / "latte_lab-stage-live"  # a stage whose process still holds its lock
    live.mkdir()
    fd = os.open(live / Stage.LOCK_NAME, os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    unowned = base / "latte_lab-stage-no-lock"  # no lock file: not known to be a stage, left alone
    unowned.mkdir()
    other = base / "latte_lab-eval-stage-x"  # another kind's
    other.mkdir()
    try:
        stage = Stage("latte_lab-stage-", "workspace", base=str(base))
        directory = stage.take()
        assert directory is not None and directory.is_dir() and stage.take() is None  # one run at a time
        stage.give_back()
        assert not os.path.exists(dead)
        assert live.is_dir() and unowned.is_dir() and other.is_dir()
        again = Stage("latte_lab-stage-", "workspace", base=str(base))
        assert again.remove_stale() == []  # the first one's process (this one) lives: kept
        stage.remove()
        assert not os.path.exists(directory)
    finally:
        os.close(fd)
    assert Stage("latte_lab-stage-", "workspace", base=str(base)).remove_stale() == [str(live)]


def test_a_pytest_outside_the_tested_range_runs_with_one_warning(tmp_path, monkeypatch):
    """Outside TESTED_PYTEST runs go on as ever (pytest's public API is all they use), with the same counts, and a
    warning names the tested range once."""
    from latte_lab.sandbox import pytest as sandbox_pytest

    assert sandbox_pytest.pytest_version_tested()  # the locked pytest is in the tested range
    monkeypatch.setattr(sandbox_pytest, "_VERSION_CHECKED", {})
    monkeypatch.setattr("importlib.metadata.version", lambda name: "10.0.1" if name == "pytest" else "0")
    (tmp_path / "test_a.py").write_text("def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    with pytest.warns(RuntimeWarning, match=r"pytest 10.0.1 is outside the range .*\(>=9.0,<10.0\)") as said:
        run = sandbox_pytest.run_pytest(tmp_path, ["test_a.py"], timeout=60, sandbox="local")
        again = sandbox_pytest.run_pytest(tmp_path, ["test_a.py"], timeout=60, sandbox="local")
    assert len(said) == 1
    assert (run.passed, run.failed, again.passed, again.failed) == (1, 1, 1, 1)
