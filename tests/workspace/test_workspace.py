"""Tests of the workspace: confinement, the write log with its AST symbols, and scripts and test runs
through the workspace (protected files, the memo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from latte_lab.errors import ConfigError, LatteError, WorkspaceError
from latte_lab.sandbox import SandboxLimits, clear_memo
from latte_lab.workspace import STDLIB_SHADOW_NAMES, Workspace, changed_symbols, extract_symbols

pytestmark = pytest.mark.usefixtures("no_shared_memo")  # tests of the memo: in-process only


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path / "repo")


# ---- confinement -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["../x.py", "a/../../x.py", "/etc/passwd", "~/x.py", "repo/../../x"])
def test_escapes_are_rejected(ws, bad):
    with pytest.raises(WorkspaceError, match="outside the workspace; use a path relative to the project"):
        ws.write(bad, "x")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.read(bad)
    assert not ws.exists(bad)


def test_symlink_escapes_are_rejected(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (ws.root / "link_dir").symlink_to(outside)
    (ws.root / "link_file.txt").symlink_to(outside / "secret.txt")
    for path in ("link_dir/secret.txt", "link_file.txt", "link_dir/new.py"):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            ws.read(path)
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            ws.write(path, "x")
    assert (outside / "secret.txt").read_text() == "s3cret"
    assert not (outside / "new.py").exists()


def test_prefixes_stripped_and_inner_dotdot_allowed(ws):
    rec = ws.write("repo/pkg/mod.py", "X = 1\n", agent="Dev1", round=2)
    assert rec.path == "pkg/mod.py"
    assert ws.read("./pkg/mod.py") == "X = 1\n"
    assert ws.read("pkg/sub/../mod.py") == "X = 1\n"
    assert ws.exists("repo/pkg/mod.py") and not ws.exists("pkg/other.py")
    assert ws.list_files() == ["pkg/mod.py"]


def test_missing_file_message_lists_near_names(ws):
    ws.setup_file("signal_toolkit.py", "x = 1\n")
    with pytest.raises(WorkspaceError, match="does not exist.*signal_toolkit.py"):
        ws.read("signal_tolkit.py")
    with pytest.raises(WorkspaceError, match="script 'nope.py' does not exist"):
        ws.run_script("nope.py")


def test_stdlib_shadow_writes_refused(ws):
    assert STDLIB_SHADOW_NAMES >= {"json", "signal", "os", "re", "typing"}
    assert STDLIB_SHADOW_NAMES <= set(sys.stdlib_module_names)
    for name in ("json.py", "signal.py", "string/__init__.py"):
        with pytest.raises(WorkspaceError, match="shadow the standard library module"):
            ws.write(name, "x = 1\n")
        assert not (ws.root / name).exists()
    # task module names and nested files are fine
    for name in ("formatter.py", "tokenizer.py", "keywords.py", "pkg/json.py"):
        ws.write(name, "x = 1\n")


def test_protected_files_read_only_and_restored_after_runs(ws):
    ws.setup_file("test_suite.py", "def test_ok():\n    assert True\n")
    ws.protect("test_suite.py")
    with pytest.raises(WorkspaceError, match="read-only"):
        ws.write("./test_suite.py", "def test_ok():\n    pass\n", agent="Dev1")
    ws.setup_file("test_suite.py", "def test_ok():\n    assert 1 == 1\n")  # setup may change it
    ws.setup_file("vandal.py", "open('test_suite.py', 'w').write('broken(')\n")
    run = ws.run_script("vandal.py")
    assert run.ok
    assert any("restored: test_suite.py" in note for note in run.notes)
    assert ws.read("test_suite.py") == "def test_ok():\n    assert 1 == 1\n"
    assert ws.writes == []
    with pytest.raises(WorkspaceError, match="does not exist"):
        ws.protect("missing_test.py")


def test_bad_inputs_raise_latte_errors(ws):
    with pytest.raises(WorkspaceError):
        ws.write("a.py", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(WorkspaceError, match="project root"):
        ws.read("./")
    ws.setup_file("s.py", "print(1)\n")
    with pytest.raises(ConfigError, match="timeout"):
        ws.run_script("s.py", timeout=0)
    with pytest.raises(ConfigError, match="cpu_seconds"):
        SandboxLimits(cpu_seconds=0)
    assert issubclass(WorkspaceError, LatteError)


def test_list_and_snapshot_skip_hidden_caches_and_binary(ws):
    ws.setup_file("a.py", "A = 1\n")
    ws.setup_file("data/table.csv", "x,y\n1,2\n")
    ws.setup_file(".git/config", "[core]\n")
    ws.setup_file("__pycache__/a.cpython-311.pyc", b"\x00\x01")
    ws.setup_file("figures/plot.png", b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert ws.list_files() == ["a.py", "data/table.csv", "figures/plot.png"]
    assert ws.snapshot_files() == {"a.py": "A = 1\n", "data/table.csv": "x,y\n1,2\n"}


# ---- write log and symbols --------------------------------------------------------------------

BASE = '''import math

SCALE = 2


def rms(xs):
    return sum(x * x for x in xs) / len(xs)


@staticmethod
def helper():
    return 1


class Document:
    """A document."""

    def __init__(self, text):
        self.text = text

    def words(self):
        return self.text.split()
'''


def test_write_log_function_method_class_and_module_edits(ws):
    rec = ws.write("doc.py", BASE, agent="Dev1", round=1)
    assert rec.created and rec.agent == "Dev1" and rec.round == 1 and rec.n_chars == len(BASE)
    assert rec.symbols == ("<module>", "rms", "helper", "Document", "Document.__init__", "Document.words")

    fixed = BASE.replace("/ len(xs)", "/ len(xs)) ** 0.5").replace("return sum(", "return (sum(")
    rec = ws.write("doc.py", fixed, agent="Dev2", round=2)
    assert not rec.created and rec.symbols == ("rms",)

    method = fixed.replace("return self.text.split()", "return self.text.lower().split()")
    assert ws.write("doc.py", method, agent="Dev1", round=3).symbols == ("Document.words",)

    added = method + "\n    def add_metadata(self, key, value):\n        self.metadata = {key: value}\n"
    assert ws.write("doc.py", added).symbols == ("Document.add_metadata",)

    shell = added.replace('"""A document."""', '"""A text document."""')
    assert ws.write("doc.py", shell).symbols == ("Document",)

    module = shell.replace("SCALE = 2", "SCALE = 3")
    assert ws.write("doc.py", module).symbols == ("<module>",)

    removed = module.replace("@staticmethod\ndef helper():\n    return 1\n", "")
    assert ws.write("doc.py", removed).symbols == ("helper",)

    broken = removed + "\ndef oops(:\n"
    assert ws.write("doc.py", broken).symbols == ("<file>",)
    assert ws.write("doc.py", removed).symbols == ("<file>",)
    assert ws.write("doc.py", removed).symbols == ()
    assert [w.path for w in ws.writes] == ["doc.py"] * 10


def test_json_and_other_files_symbols(ws):
    assert ws.write("findings.json", json.dumps({"a": [1], "b": 2})).symbols == ("a", "b")
    assert ws.write("findings.json", json.dumps({"a": [1], "b": 3, "c": 0})).symbols == ("b", "c")
    assert ws.write("findings.json", json.dumps({"b": 3, "c": 0})).symbols == ("a",)
    assert ws.write("findings.json", "{not json").symbols == ("<file>",)
    assert ws.write("summary.txt", "words").symbols == ("<file>",)
    assert ws.write("summary.txt", "words").symbols == ()


def test_extract_symbols_segments_splice_back():
    syms = extract_symbols(BASE, "doc.py")
    assert list(syms) == ["rms", "helper", "Document", "Document.__init__", "Document.words"]
    assert syms["helper"].startswith("@staticmethod\ndef helper")
    assert syms["Document.words"] == "    def words(self):\n        return self.text.split()"
    new_words = "    def words(self):\n        return [w.strip('.') for w in self.text.split()]"
    spliced = BASE.replace(syms["Document.words"], new_words)
    assert changed_symbols(BASE, spliced, "doc.py") == ("Document.words",)
    assert extract_symbols("def broken(:", "x.py") == {}
    assert extract_symbols('{"k": {"x": 1}}', "f.json") == {"k": '{\n  "x": 1\n}'}
    assert extract_symbols("text", "notes.md") == {}


# ---- test runs and the memo ---------------------------------------------------------------------

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


def test_run_tests_counts_and_node_ids(project):
    run = project.run_tests()
    assert (run.passed, run.failed, run.errors, run.total) == (1, 2, 0, 3)
    assert run.failed_tests == ("test_suite.py::TestDouble::test_zero", "test_suite.py::test_neg")
    assert not run.ok and not run.cached
    project.write("mod.py", "def double(x):\n    return 2 * x\n", agent="Dev1", round=1)
    fixed = project.run_tests()
    assert fixed.ok and fixed.passed == 3 and fixed.failed_tests == ()


def test_collection_error_and_timeout_are_errors_not_exceptions(project):
    project.write("mod.py", "def double(x:\n")
    run = project.run_tests()
    assert run.errors >= 1 and run.passed == 0 and not run.ok
    project.write("mod.py", "import time\ntime.sleep(30)\ndef double(x):\n    return 2 * x\n")
    run = project.run_tests(timeout=1.5)
    assert run.timed_out and run.errors >= 1 and not run.ok


def test_memo_hit_is_identical_and_any_change_misses(project, tmp_path):
    first = project.run_tests()
    second = project.run_tests()
    assert second.cached and not first.cached
    assert second == first.__class__(**{**first.__dict__, "cached": True})
    assert second.seconds == first.seconds
    project.setup_file("data.txt", "v2\n")  # a file the tests never read still changes the key
    third = project.run_tests()
    assert not third.cached
    assert project.run_tests(args=("test_suite.py", "-k", "neg")).cached is False
    other = Workspace(tmp_path / "other", memo=False)
    for rel, text in project.snapshot_files().items():
        other.setup_file(rel, text)
    assert not other.run_tests(("test_suite.py",)).cached
    assert not other.run_tests(("test_suite.py",)).cached


def test_memo_on_disk_survives_a_new_process_memo(project, tmp_path):
    memo_dir = tmp_path / "memo"
    disk = Workspace(project.root, memo_dir=memo_dir)
    first = disk.run_tests(("test_suite.py",))
    assert len(list(memo_dir.glob("*.json"))) == 1
    clear_memo()
    again = Workspace(project.root, memo_dir=memo_dir).run_tests(("test_suite.py",))
    assert again.cached and again.failed_tests == first.failed_tests and again.seconds == first.seconds
    (next(memo_dir.glob("*.json"))).write_text("{corrupt")
    clear_memo()
    assert not Workspace(project.root, memo_dir=memo_dir).run_tests(("test_suite.py",)).cached


SHARED_MEMO_CHILD = """
import json, sys
from latte_lab.workspace import Workspace
run = Workspace(sys.argv[1]).run_tests(("test_suite.py",))
print(json.dumps([run.cached, run.failed_tests, run.stdout]))
"""


def test_the_memo_directory_from_the_environment_is_shared_with_other_processes(project, tmp_path, monkeypatch):
    """$LATTE_LAB_MEMO_DIR: a workspace state tested in one process is a hit in another (a sweep's workers,
    a notebook and a script); an unwritable directory warns once and the run still counts."""
    memo_dir = tmp_path / "shared-memo"
    monkeypatch.setenv("LATTE_LAB_MEMO_DIR", str(memo_dir))
    copy = Workspace(tmp_path / "copy")  # the same files elsewhere: the key is the content, not the place
    for rel, text in project.snapshot_files().items():
        copy.setup_file(rel, text)
    assert copy.memo_dir == memo_dir
    outputs = []
    for root in (project.root, copy.root):
        child = subprocess.run([sys.executable, "-c", SHARED_MEMO_CHILD, str(root)], capture_output=True, text=True,
                               timeout=120, env={**os.environ, "LATTE_LAB_SANDBOX": "local"})
        assert child.returncode == 0, child.stderr
        outputs.append(json.loads(child.stdout))
    (cached_first, failed, stdout), (cached_second, failed_again, stdout_again) = outputs
    assert (cached_first, cached_second) == (False, True)
    assert failed_again == failed and stdout_again == stdout and len(failed) == 2
    clear_memo()
    here = Workspace(project.root).run_tests(("test_suite.py",))
    assert here.cached and list(here.failed_tests) == failed
    monkeypatch.setenv("LATTE_LAB_MEMO_DIR", str(tmp_path / "data.txt-is-a-file" / "memo"))
    (tmp_path / "data.txt-is-a-file").write_text("not a directory\n")
    clear_memo()
    project.setup_file("data.txt", "v3\n")
    with pytest.warns(RuntimeWarning, match="not writable"):
        run = Workspace(project.root).run_tests(("test_suite.py",))
    assert not run.cached and len(run.failed_tests) == 2
    assert Workspace(project.root).run_tests(("test_suite.py",)).cached  # kept in the process


def test_the_hidden_evaluation_is_memoised_by_content_too(tmp_path, monkeypatch):
    """A trial's hidden evaluation uses the workspace's memo: a workspace state evaluated before (in any
    process sharing the memo directory) is scored from the stored run, with the same result."""
    import latte_lab as ll
    from latte_lab.sandbox import judge

    calls = []
    real = judge.run_judged
    monkeypatch.setattr(judge, "run_judged", lambda *a, **k: calls.append(a) or real(*a, **k))
    task = ll.tasks.get("debug")
    memo_dir = tmp_path / "memo"
    ws = Workspace(tmp_path / "ws", memo_dir=memo_dir, sandbox="local")
    task.setup(ws)
    first = task.evaluate(ws)
    clear_memo()
    again = task.evaluate(Workspace(ws.root, memo_dir=memo_dir, sandbox="local"))
    assert again == first and len(calls) == 1
    ws.write(task.required_outputs[0], ws.read(task.required_outputs[0]) + "\n# changed\n")
    task.evaluate(ws)
    assert len(calls) == 2  # another state: run again
    unmemoised = Workspace(ws.root, memo=False, sandbox="local")
    assert task.evaluate(unmemoised).passed == task.evaluate(unmemoised).passed and len(calls) == 4


def test_duplicate_quiet_flag_keeps_the_summary(project):
    run = project.run_tests(args=("-q", "test_suite.py"))
    assert (run.passed, run.failed, run.errors) == (1, 2, 0)


def test_write_under_a_file_is_a_clear_error(ws):
    ws.write("notes.txt", "x")
    with pytest.raises(WorkspaceError, match="parent of it is a file"):
        ws.write("notes.txt/inner.py", "y")
    assert len(ws.writes) == 1
