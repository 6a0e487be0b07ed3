"""The judge of a hidden evaluation (latte_lab/sandbox/judge.py, _judge_session.py, _workspace_host.py): hidden
tests written plainly run in a process that never runs workspace code; the workspace answers with plain data;
what it cannot answer (a hang, a death, a flood, a limit, an object that is not data) fails that test with a
note, and the rest of the suite runs on."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sandbox_helpers import BACKENDS

from latte_lab.sandbox import judge as judge_mod
from latte_lab.sandbox.judge import run_judged


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_test_{name}", Path(judge_mod.__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SESSION = _load("_judge_session")
HOST = _load("_workspace_host")


def judged(root: Path, files: dict[str, str], tests: dict[str, str], backend: str = "local", **kwargs):
    """A run of ``tests`` (hidden: in the judge only) against a workspace holding ``files``."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    tests = {name: textwrap.dedent(text) for name, text in tests.items()}
    return run_judged(root, tests, list(tests), sandbox=backend, timeout=kwargs.pop("timeout", 120), **kwargs)


def outcomes(run) -> dict[str, str]:
    return {node.split("::", 1)[1]: outcome for node, outcome in run.cases}


SHAPES = '''
    import math

    class ShapeError(ValueError):
        pass

    class Counter:
        def __init__(self, start=0):
            self.count = start
            self.history = []

        def add(self, n=1):
            if n < 0:
                raise ShapeError(f"cannot add {n}")
            self.count += n
            self.history.append(n)
            return self

        def __len__(self):
            return len(self.history)

        def __iter__(self):
            return iter(self.history)

    def area(r):
        return math.pi * r * r

    def describe():
        return {"name": "circle", 3: None, (1, 2): {1.5, 2.5}, "raw": b"\\x00\\x01", "t": (1, [2, 3])}

    def apply(steps, value):
        for step in steps:
            value = step(value)
        return value

    def squares(n):
        return (i * i for i in range(n))

    def frame():
        import numpy, pandas
        return pandas.DataFrame({"x": numpy.arange(3), "y": ["a", "b", "c"]}), numpy.eye(2)
'''

PLAIN_TESTS = '''
    import math
    from functools import partial

    import numpy
    import pytest

    from shapes import Counter, ShapeError, apply, area, describe, frame, squares
    import shapes

    def test_values_and_floats():
        assert area(1) == pytest.approx(math.pi) and isinstance(area(2.0), float)

    def test_an_object_with_state_stays_in_the_workspace():
        c = Counter(5)
        c.add(2).add(3)
        assert c.count == 10 and c.history == [2, 3] and len(c) == 2 and list(c) == [2, 3]
        c.count = 0
        assert c.count == 0 and isinstance(c, Counter)

    def test_a_workspace_exception_is_raised_here_as_its_builtin_kind():
        with pytest.raises(ValueError, match="cannot add -1"):
            Counter().add(-1)

    def test_plain_data_keeps_its_types():
        d = describe()
        assert d == {"name": "circle", 3: None, (1, 2): {1.5, 2.5}, "raw": b"\\x00\\x01", "t": (1, [2, 3])}
        assert isinstance(d["t"], tuple) and isinstance(d[(1, 2)], set)

    def test_the_tests_functions_are_called_back():
        calls = []

        def double(x):
            calls.append(x)
            return 2 * x

        assert apply([double, partial(pow, 2), double], 3) == 128 and calls == [3, 64]

    def test_iterables_arrays_and_frames():
        assert list(squares(4)) == [0, 1, 4, 9]
        df, eye = frame()
        assert list(df.columns) == ["x", "y"] and df["x"].tolist() == [0, 1, 2] and df["y"].tolist() == ["a", "b", "c"]
        assert isinstance(eye, numpy.ndarray) and eye.dtype == numpy.float64 and (eye == numpy.eye(2)).all()

    def test_a_missing_name_is_an_attribute_error():
        assert not hasattr(shapes, "nothing_here") and getattr(shapes, "nothing_here", 7) == 7
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_hidden_tests_written_plainly_judge_a_workspace_module(tmp_path, backend):
    run = judged(tmp_path / "ws", {"shapes.py": SHAPES}, {"test_hidden.py": PLAIN_TESTS}, backend)
    assert set(outcomes(run).values()) == {"passed"} and run.passed == 7, run.stdout[-3000:]
    assert run.tampering == ()


CHEATS = '''
    class Anything:
        def __eq__(self, other):
            return True
        def __contains__(self, item):
            return True
        def __bool__(self):
            return True

    class Text(str):
        def __eq__(self, other):
            return True
        __hash__ = str.__hash__

    def answer():
        return Anything()

    def word():
        return Text("wrong")
'''

CHEAT_TESTS = '''
    from cheat import answer, word

    def test_equal():
        assert answer() == 42

    def test_in():
        assert 42 in answer()

    def test_truth():
        assert answer()

    def test_a_str_subclass_is_compared_as_its_value():
        assert word() == "right"

    def test_an_honest_value_after_them():
        assert word() == "wrong"
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_object_that_equals_everything_is_never_compared(tmp_path, backend):
    """The judge compares plain data only: a workspace object is refused (the test fails with a note), and a
    subclass of str crosses as its value, whatever its __eq__ says."""
    run = judged(tmp_path / "ws", {"cheat.py": CHEATS}, {"test_hidden.py": CHEAT_TESTS}, backend)
    assert outcomes(run) == {"test_equal": "failed", "test_in": "failed", "test_truth": "failed",
                             "test_a_str_subclass_is_compared_as_its_value": "failed",
                             "test_an_honest_value_after_them": "passed"}
    notes = "\n".join(run.notes)
    assert "test_equal: compared a cheat.Anything object, not plain data" in notes
    assert "test_in: searched (in) a cheat.Anything object" in notes and "test_truth: asked for the truth" in notes


LIMITS = '''
    import os, sys

    def spin():
        while True:
            pass

    def leave(code):
        os._exit(code)

    def flood():
        block = "x" * 2**20
        for _ in range(64):
            sys.stdout.write(block)

    def recurse(n=0):
        return recurse(n + 1)

    def hoard():
        return bytearray(2**40)

    def fine():
        return "fine"
'''

LIMIT_TESTS = '''
    from limits import fine, flood, hoard, leave, recurse, spin

    def test_1_hang():
        spin()

    def test_2_ok():
        assert fine() == "fine"

    def test_3_exit():
        leave(3)

    def test_4_ok():
        assert fine() == "fine"

    def test_5_flood():
        flood()

    def test_6_recursion():
        recurse()

    def test_7_memory():
        hoard()

    def test_8_ok():
        assert fine() == "fine"
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_test_that_hits_a_limit_fails_with_a_note_and_the_suite_goes_on(tmp_path, backend):
    start = time.monotonic()
    run = judged(tmp_path / "ws", {"limits.py": LIMITS}, {"test_hidden.py": LIMIT_TESTS}, backend, call_timeout=2)
    seconds = time.monotonic() - start
    assert outcomes(run) == {"test_1_hang": "failed", "test_2_ok": "passed", "test_3_exit": "failed",
                             "test_4_ok": "passed", "test_5_flood": "failed", "test_6_recursion": "failed",
                             "test_7_memory": "failed", "test_8_ok": "passed"}, run.stdout[-3000:]
    notes = dict(note.split(": ", 1) for note in run.notes if note.startswith("test_hidden.py::"))
    assert notes["test_hidden.py::test_1_hang"].startswith("time limit: the workspace code did not answer within 2 s")
    assert notes["test_hidden.py::test_3_exit"].startswith("the workspace process ended with status 3")
    assert notes["test_hidden.py::test_5_flood"].startswith("output limit")
    assert notes["test_hidden.py::test_6_recursion"] == "the workspace code hit its recursion limit (RecursionError)"
    assert notes["test_hidden.py::test_7_memory"] == "the workspace code hit its memory limit (MemoryError)"
    assert seconds < 60  # a recursion bomb is one exception, not minutes of tracebacks


NEVER_HERE = '''
    import os
    HOST_CWD = os.getcwd()
    HOST_PID = os.getpid()
    open("ran-here.txt", "w").write("the workspace's code ran in this directory")
'''

NEVER_TESTS = '''
    import importlib.util, os
    from pathlib import Path

    import pytest

    import here

    def test_the_module_ran_in_another_process_and_directory():
        assert here.HOST_PID != os.getpid() and here.HOST_CWD != os.getcwd()
        assert not Path("ran-here.txt").exists()  # the judge's copy of the workspace is data only

    def test_the_judge_refuses_to_run_a_workspace_file():
        spec = importlib.util.spec_from_file_location("here_again", Path("here.py").resolve())
        with pytest.raises(RuntimeError, match="never runs workspace code"):
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        with pytest.raises(RuntimeError, match="never runs workspace code"):
            compile(Path("here.py").read_text(), str(Path("here.py").resolve()), "exec")

    def test_its_files_are_read_as_data():
        assert Path("here.py").read_text().lstrip().startswith("import os")  # its source, as text
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_judge_never_runs_workspace_code(tmp_path, backend):
    run = judged(tmp_path / "ws", {"here.py": NEVER_HERE}, {"test_hidden.py": NEVER_TESTS}, backend)
    assert set(outcomes(run).values()) == {"passed"}, run.stdout[-3000:]
    assert not (tmp_path / "ws" / "ran-here.txt").exists()  # the workspace's own copy is never written back


def test_a_data_file_the_tests_bring_stays_with_the_judge(tmp_path):
    """``extra_files`` (expected values) lie in the judge's directory; the workspace's code cannot read them."""
    snoop = '''
        import os
        def look():
            return sorted(os.listdir(".")), os.path.exists("expected.json")
    '''
    tests = '''
        import json
        from pathlib import Path
        from snoop import look

        def test_expected_is_here_and_not_there():
            names, found = look()
            assert json.loads(Path("expected.json").read_text()) == {"answer": 42}
            assert found is False and "expected.json" not in names and "test_hidden.py" not in names
    '''
    run = judged(tmp_path / "ws", {"snoop.py": snoop}, {"test_hidden.py": tests},
                 extra_files={"expected.json": json.dumps({"answer": 42})})
    assert run.passed == 1, run.stdout[-3000:]


def test_tests_import_installed_libraries_not_the_workspaces(tmp_path):
    """A workspace module named like an installed library (``pandas.py``) never stands in for it in the judge;
    the workspace's own code gets its own module, as in the agents' runs."""
    files = {"pandas.py": "IS_THE_WORKSPACES = True\n", "uses.py": "import pandas\nFLAG = hasattr(pandas, 'IS_THE_WORKSPACES')\n"}
    tests = '''
        import pandas
        import uses

        def test_installed_here_the_workspaces_there():
            assert hasattr(pandas, "DataFrame") and not hasattr(pandas, "IS_THE_WORKSPACES")
            assert uses.FLAG is True
    '''
    run = judged(tmp_path / "ws", files, {"test_hidden.py": tests}, imports=("pandas",))
    assert run.passed == 1, run.stdout[-3000:]


def test_imports_must_be_module_names(tmp_path):
    with pytest.raises(ValueError, match="module names"):
        run_judged(tmp_path, {"test_x.py": "def test_x(): pass\n"}, ["test_x.py"], imports=["pandas; rm"])


# -- the codec ----------------------------------------------------------------------------------------------------


class _Link:
    """Enough of the judge's link for decoding: no worker, no callbacks."""

    generation = 1
    callbacks: dict = {}
    released: list = []

    def remote_for(self, handle, name):
        return ("remote", handle, name)

    def remote_for_path(self, path, name):
        return ("path", path, name)

    def callback_number(self, function):
        return 1


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4)
    | st.frozensets(st.integers() | st.text(max_size=3), max_size=4),
    max_leaves=20)


@given(plain)
def test_plain_data_crosses_unchanged_both_ways(value):
    values = HOST.Values(worker=None)
    wire = json.loads(json.dumps(values.encode(value)))
    assert SESSION.decode(_Link(), wire) == value
    back = json.loads(json.dumps(SESSION.encode(_Link(), value)))
    assert values.decode(back) == value


@pytest.mark.parametrize("wire", [
    {"t": [1], "d": []},  # two tags
    {"x": 1},  # an unknown tag
    {"d": [[[1], 2]]},  # an unhashable key
    {"d": [[1]]},  # a malformed item
    {"s": [[1, 2]]},  # an unhashable set item
    {"b": "not base64!"},
    {"nd": ["|O", [1], "AAAA"]},  # an object array
    {"nd": ["<f8", [3], "AAAAAAAAAAA="]},  # data that does not fill the shape
    {"nd": ["<f8", [-1], ""]},
    {"cb": 99},  # no such function
    {"o": "X"},  # an opaque value where none is asked for
    {"h": "1", "type": "X"},  # a handle that is not a number
    "a value nested deeper than the protocol allows",
])
def test_the_judge_decodes_strictly(wire):
    if wire == "a value nested deeper than the protocol allows":
        wire = [1]
        for _ in range(SESSION.MAX_DEPTH + 2):
            wire = [wire]
    with pytest.raises(SESSION.ProtocolError):
        SESSION.decode(_Link(), wire)


def test_an_error_the_worker_describes_raises_only_builtin_kinds():
    error = SESSION.remote_error({"types": ["KeyboardInterrupt", "BaseException"], "type": "Mine", "message": "stop",
                                  "traceback": ""})
    assert type(error) is SESSION.RemoteError and not isinstance(error, KeyboardInterrupt)
    error = SESSION.remote_error({"types": ["KeyError", "LookupError", "Exception"], "type": "mod.Missing",
                                  "message": "'k'", "traceback": "Traceback ...\nmod.Missing: 'k'"})
    assert isinstance(error, KeyError) and error.remote_type == "mod.Missing"
    with pytest.raises(SESSION.ProtocolError):
        SESSION.remote_error({"types": "KeyError", "type": 1})


def test_the_session_files_spell_what_the_client_spells():
    """The session and host scripts run without latte_lab, so they keep their own copies of these names."""
    from latte_lab.sandbox import zygote

    assert SESSION.IMPORT_OPTION == zygote.IMPORT_OPTION
    assert SESSION.MAX_FRAME_BYTES == HOST.MAX_FRAME_BYTES
    assert SESSION.CALL_TIMEOUT_SECONDS == judge_mod.CALL_TIMEOUT_SECONDS
    assert HOST.OUTPUT_CAP_BYTES == judge_mod.OUTPUT_CAP_BYTES
    from latte_lab.sandbox.request import RunRequest

    judge = RunRequest([sys.executable, "-s", "-P", "session.py", f"{SESSION.IMPORT_OPTION}pandas", "--"], ".",
                       timeout=1, kind="judge")
    assert zygote.server_mode(judge) == zygote.TRUSTED_LIBRARIES_MODE
    server_text = Path(zygote.__file__).with_name("_trusted_server.py").read_text()
    assert f'LIBRARIES_MODE = "{zygote.TRUSTED_LIBRARIES_MODE}"' in server_text
    assert os.path.basename(judge_mod.JUDGE_SCRIPT) == "_judge_session.py"
