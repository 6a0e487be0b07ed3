"""Local backend. Seconds for 20 repeated ``run_tests()`` of one unchanged small workspace, with and without the memo.

The workspace: a small module and three test files with 30 tests in all (a few fail, as mid-trial
workspaces do). Also prints the cost of the sandbox itself (a trivial script) and of hashing the tree
for the memo key, and 20 distinct (memo-missing) runs of the debug task's public suite through the exec
path (a fresh ``python -m pytest`` each) and through the pytest fork server (zygote).
Run: ``.venv/bin/python benchmarks/bench_workspace.py``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import latte_lab as ll
from latte_lab.sandbox import clear_memo, memo_key, run_pytest, zygote
from latte_lab.workspace import Workspace

REPEATS = 20  # run_tests calls per condition
TESTS_PER_FILE = 10  # three files -> 30 tests

MODULE = """
def clip(x, lo, hi):
    return max(lo, min(hi, x))


def mean(xs):
    return sum(xs) / len(xs)


def rms(xs):
    return mean([x * x for x in xs])  # planted bug: no square root
"""


def _test_file(name: str, n: int) -> str:
    lines = ["import math", "from toolkit import clip, mean, rms", "", f"class Test{name}:"]
    for i in range(n):
        if name == "Rms" and i % 3 == 0:
            body = f"assert math.isclose(rms([{i + 1}, {i + 1}]), {i + 1})"
        elif name == "Mean":
            body = f"assert mean([{i}, {i + 2}]) == {i + 1}"
        else:
            body = f"assert clip({i}, 2, 5) == {min(max(i, 2), 5)}"
        lines += [f"    def test_{i}(self):", f"        {body}", ""]
    return "\n".join(lines)


def build(root: Path, memo: bool) -> Workspace:
    ws = Workspace(root, memo=memo, sandbox="local")
    ws.setup_file("toolkit.py", MODULE)
    for name in ("Clip", "Mean", "Rms"):
        ws.setup_file(f"test_{name.lower()}.py", _test_file(name, TESTS_PER_FILE))
    ws.test_args = ("test_clip.py", "test_mean.py", "test_rms.py")
    return ws


def timed_runs(ws: Workspace) -> list[float]:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run = ws.run_tests()
        times.append(time.perf_counter() - start)
    assert run.total == 3 * TESTS_PER_FILE, run.stdout
    return times


def debug_distinct_runs(root: Path, use_zygote: bool) -> tuple[list[float], list[tuple]]:
    """REPEATS memo-missing runs of the debug task's public suite (the module differs by a comment)."""
    zygote.USE_ZYGOTE = use_zygote
    task = ll.tasks.get("debug")
    ws = Workspace(root, memo=True, sandbox="local")
    task.setup(ws)
    module = task.required_outputs[0]
    base = ws.read(module)
    times, outcomes = [], []
    for i in range(REPEATS):
        ws.setup_file(module, f"{base}\n# edit {i} ({'zygote' if use_zygote else 'exec'})\n")
        start = time.perf_counter()
        run = ws.run_tests()
        times.append(time.perf_counter() - start)
        assert not run.cached
        outcomes.append((run.returncode, run.passed, run.failed, run.errors, run.failed_tests))
    return times, outcomes


def bench_zygote(tmp: Path) -> None:
    clear_memo()
    zygote.shutdown_zygotes()
    by_exec, exec_outcomes = debug_distinct_runs(tmp / "debug-exec", use_zygote=False)
    zygote.USE_ZYGOTE = True
    start = time.perf_counter()
    run_pytest(tmp / "debug-exec", ["--collect-only"], timeout=60, sandbox="local")  # starts the zygote
    first = time.perf_counter() - start
    by_zygote, zygote_outcomes = debug_distinct_runs(tmp / "debug-zygote", use_zygote=True)
    assert exec_outcomes == zygote_outcomes, "exec path and zygote disagree"
    print(f"debug public suite, {REPEATS} distinct (memo-missing) runs, {exec_outcomes[0][2]} of 33 failing:")
    print(
        f"  exec path (fresh python -m pytest): {sum(by_exec):7.3f} s "
        f"(median {statistics.median(by_exec) * 1000:.0f} ms per run)"
    )
    print(
        f"  zygote (forked, pytest pre-imported): {sum(by_zygote):7.3f} s "
        f"(median {statistics.median(by_zygote) * 1000:.0f} ms per run; "
        f"zygote start-up + first run {first * 1000:.0f} ms, once per process)"
    )
    print(f"  same outcome on all {REPEATS} runs: {exec_outcomes == zygote_outcomes}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clear_memo()
        without = timed_runs(build(Path(tmp) / "plain", memo=False))
        clear_memo()
        ws = build(Path(tmp) / "memo", memo=True)
        with_memo = timed_runs(ws)
        run = ws.run_tests()
        print(f"workspace: 1 module + 3 test files, {run.total} tests ({run.passed} pass, {run.failed} fail)")
        print(
            f"{REPEATS} x run_tests() without memo: {sum(without):7.3f} s "
            f"(median {statistics.median(without) * 1000:.0f} ms per run)"
        )
        print(
            f"{REPEATS} x run_tests() with memo:    {sum(with_memo):7.3f} s "
            f"(first run {with_memo[0] * 1000:.0f} ms, then median "
            f"{statistics.median(with_memo[1:]) * 1e6:.0f} us per hit)"
        )
        start = time.perf_counter()
        for _ in range(200):
            memo_key(ws.root, ws.test_args, ws.limits)
        print(f"memo key (hash the tree): {(time.perf_counter() - start) / 200 * 1e6:.0f} us")
        ws.setup_file("noop.py", "pass\n")
        start = time.perf_counter()
        for _ in range(10):
            ws.run_script("noop.py")
        print(f"sandboxed no-op script: {(time.perf_counter() - start) / 10 * 1000:.0f} ms per run")
        bench_zygote(Path(tmp))


if __name__ == "__main__":
    main()
