"""Running untrusted agent code: limits, process-tree control, a :class:`RunRequest` (what to run, where, within
which limits, what kind of run) run by :func:`run_sandboxed` on one of two backends, each owning its fast paths
(``bwrap``: a bubblewrap sandbox, and sandboxes kept between runs; ``local``: this user, with limits, and fork
servers), the pytest runner (JUnit results and a content memo), the hidden evaluation's judge, and probes that
measure what a backend stops.

>>> import sys, tempfile
>>> run = run_sandboxed([sys.executable, "-c", "print(6 * 7)"], tempfile.mkdtemp(), timeout=30)
>>> run.ok, run.stdout
(True, '42\\n')
"""

from latte_lab.sandbox.backends import Backend, backend_for
from latte_lab.sandbox.lifetime import Sandbox
from latte_lab.sandbox.limits import SandboxLimits
from latte_lab.sandbox.process import sandbox_processes, stop_sandbox
from latte_lab.sandbox.pytest import (
    TestRun,
    clear_memo,
    memo_key,
    outcomes_by_class,
    parse_junit,
    run_pytest,
    tree_digest,
)
from latte_lab.sandbox.request import RunRequest
from latte_lab.sandbox.run import OutputCapture, RunResult, resolve_sandbox, run_sandboxed
from latte_lab.sandbox.zygote import shutdown_zygotes

__all__ = [
    "Backend",
    "OutputCapture",
    "RunRequest",
    "RunResult",
    "Sandbox",
    "SandboxLimits",
    "TestRun",
    "backend_for",
    "clear_memo",
    "memo_key",
    "outcomes_by_class",
    "parse_junit",
    "resolve_sandbox",
    "run_pytest",
    "run_sandboxed",
    "sandbox_processes",
    "shutdown_zygotes",
    "stop_sandbox",
    "tree_digest",
]
