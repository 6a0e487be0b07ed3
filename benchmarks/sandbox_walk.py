"""The walk of run_pytest's ``sandbox`` argument: every function of latte_lab.sandbox a test run passes through on
its way from ``run_pytest`` to the start of the run's process, as a listing of the calls (indented by depth; comprehensions count as part
of their function), with
the number of stops (calls) and of returns (a call that came back before the process started: a question asked on
the way, a detour). Straight down is one call per level and no return.

The walk ends at the run's start: the first call of ``subprocess.Popen`` (a fresh interpreter) or of a fork server's
hand-over (``hand_over``). A first, untraced run starts the fork servers and kept sandboxes, so the traced run is a
trial's typical one; the memo is cleared before it.

Usage: python benchmarks/sandbox_walk.py [--backend local|bwrap|both]   (run it from a checkout, with its .venv,
to compare an older commit's walk with this one's)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import latte_lab.sandbox as sandbox_package

SANDBOX_DIR = os.path.dirname(os.path.abspath(sandbox_package.__file__))
STARTS = ("hand_over",)  # a fork server is handed the run
COMPREHENSIONS = ("<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>")  # parts of the function they are in


class Walk:
    def __init__(self):
        self.lines: list[list] = []  # [depth, name, returned]
        self.stack: list[tuple[int, int]] = []  # (frame id, line index) of the calls under way
        self.stops = self.returns = 0
        self.chain: list[str] = []  # the calls under way when the run started
        self.done = False

    def __call__(self, frame, event, arg):
        if self.done:
            return
        code = frame.f_code
        if event == "call":
            if code.co_filename.startswith(SANDBOX_DIR) and not code.co_name.startswith(COMPREHENSIONS):
                self.lines.append([len(self.stack), f"{Path(code.co_filename).stem}.{code.co_qualname}", False])
                self.stack.append((id(frame), len(self.lines) - 1))
                self.stops += 1
                if code.co_name in STARTS:
                    self._started()
            elif code.co_name == "__init__" and code.co_filename == subprocess.__file__:
                self.lines.append([len(self.stack), "subprocess.Popen (the run's process)", False])
                self._started()
        elif event == "return" and self.stack and self.stack[-1][0] == id(frame):
            self.lines[self.stack.pop()[1]][2] = True
            self.returns += 1

    def _started(self) -> None:
        self.chain = [self.lines[i][1] for _, i in self.stack]
        self.done = True


def walk(backend: str) -> Walk:
    from latte_lab.sandbox import clear_memo, run_pytest

    root = Path(tempfile.mkdtemp(prefix="latte_lab-walk-"))
    (root / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    run_pytest(root, sandbox=backend)  # starts what the backend keeps between runs
    (root / "test_one.py").write_text("def test_one():\n    assert 2 + 2 == 4\n")
    clear_memo()
    tracer = Walk()
    sys.setprofile(tracer)
    try:
        run = run_pytest(root, sandbox=backend)
    finally:
        sys.setprofile(None)
    assert run.passed == 1, (run.stdout, run.stderr)
    return tracer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="both", choices=("local", "bwrap", "both"))
    args = parser.parse_args()
    for backend in ("local", "bwrap") if args.backend == "both" else (args.backend,):
        tracer = walk(backend)
        hops = [name.split(".")[0] for _, name, _ in tracer.lines]
        modules = [m for i, m in enumerate(hops) if i == 0 or m != hops[i - 1]]
        print(f"sandbox={backend!r}: {tracer.stops} stops, {tracer.returns} returns before the run starts; "
              f"the run starts {len(tracer.chain)} calls down: {' > '.join(tracer.chain)}")
        print(f"  modules in the order the walk enters them ({len(modules)} entries): {' > '.join(modules)}")
        for depth, name, returned in tracer.lines:
            print(f"  {'  ' * depth}{name}{'  (returned)' if returned else ''}")


if __name__ == "__main__":
    main()
