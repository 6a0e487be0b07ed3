"""The shared workspace of a trial: confined file access, a write log, sandboxed scripts and tests.

Agents' code is untrusted. Everything they run goes through :func:`run_sandboxed`:

* a new session (``start_new_session=True``) so the whole process group can be signalled;
* resource limits (CPU, address space, file size, processes) set *in the child* by the small wrapper
  :mod:`latte_lab._sandbox_child`, which then ``execv``s the target (no ``preexec_fn``);
* an environment built from an allowlist; no variable whose name contains KEY, SECRET or TOKEN ever
  reaches the child, even when allowlisted;
* stdin from ``/dev/null``; stdout/stderr read in chunks while the child runs, keeping only the first
  and last half of :data:`OUTPUT_CAPTURE_BYTES` per stream, so printing 100 MB costs no memory;
* a wall-clock timeout that sends SIGTERM to every process of the run, waits a short grace period,
  then SIGKILLs whatever is left.

"Every process of the run" is found three ways (Linux ``/proc``; elsewhere only the process group):
the process group / session of the child, every descendant by parent pid, and every process whose
initial environment carries this run's random marker (:data:`SANDBOX_MARKER_VAR`). A grandchild that
calls ``setsid()`` leaves the group and, once its parent died, the parent-pid tree, but keeps the
marker unless it ``exec``s with a scrubbed environment; that last case (a deliberate escape with
``setsid`` + ``execve(env={})`` + double fork) is not contained. Processes a script leaves behind when
it exits normally are stopped too: a run is a discrete step, nothing survives it.

Fork bombs: RLIMIT_NPROC is not enforced by the kernel for root, so while a run is going the parent
also counts the run's processes every :data:`PROCESS_CHECK_INTERVAL_SECONDS` and stops the whole run
when it exceeds ``SandboxLimits.max_processes``; the CPU limit bounds busy loops whose parent is gone;
the timeout bounds everything else.

The wrapper is started as ``python -I -S .../latte_lab/_sandbox_child.py <limits json> -- <argv>``
(the file path, equivalent to ``-m latte_lab._sandbox_child`` but immune to a workspace file or
directory named ``latte_lab`` or ``resource`` on the path, and ~20 ms faster).

What this sandbox is *not*: a security boundary against a deliberately hostile script. Agent code runs
as the same user with the same file system: it cannot see API keys through its environment, but it
could read files by absolute path (a ``.env``) or, as the same user, other processes' ``/proc/<pid>/
environ`` (a shell or Jupyter server that exported a key). Confinement of *file actions* (read/write
through this class) is strict; for untrusted models beyond "buggy", run trials in a container or as a
separate user. As root, RLIMIT_NPROC is not enforced by the kernel (our process counting still is).

Test runs (:func:`run_pytest`) do not start a new interpreter each time: a pre-warmed fork server
(:mod:`latte_lab._zygote`, "the zygote"; see that section below) that has imported pytest forks each run,
saving the 0.3-0.7 s of interpreter start-up and imports per run. Everything above holds for those runs
too (same environment, limits set in the child, new session, capped pipes, timeout, process-count
watchdog, process-tree kill); ``USE_ZYGOTE = False`` or ``LATTE_LAB_NO_ZYGOTE=1`` selects the exec path,
which is also the automatic fallback. Scripts (:meth:`Workspace.run_script`) always take the exec path.

Test runs are memoised by content (:func:`tree_digest`): the same test arguments over byte-identical
files return the stored :class:`TestRun` with ``cached=True`` and the originally measured seconds, so
a trial's virtual clock stays deterministic and repeated runs are free.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import fcntl
import functools
import hashlib
import importlib.util
import json
import math
import os
import re
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from latte_lab.errors import ConfigError, WorkspaceError

# --------------------------------------------------------------------------------------------------
# Tunables
# --------------------------------------------------------------------------------------------------

SCRIPT_TIMEOUT_SECONDS = 60  # an agent's analysis script; the released code had no timeout at all
TEST_TIMEOUT_SECONDS = 300  # a whole pytest run of a task suite (hidden suites run ~50 tests)
SIGTERM_GRACE_SECONDS = 1.0  # time to exit cleanly after SIGTERM before SIGKILL
KILL_DEADLINE_SECONDS = 5.0  # give up re-killing after this (processes in D state cannot die sooner)
PIPE_DRAIN_SECONDS = 1.0  # after the child exits, how long to keep reading what is still buffered
PROCESS_CHECK_INTERVAL_SECONDS = 0.2  # how often a running sandbox's process count is checked
CPU_LIMIT_SECONDS = 300  # RLIMIT_CPU per process; also capped at the call's timeout + 1 s
CPU_LIMIT_SLACK_SECONDS = 1  # CPU limit = timeout + this, so the wall timeout normally fires first
ADDRESS_SPACE_BYTES = 2 * 2**30  # RLIMIT_AS: numpy+pandas+matplotlib+pytest fit in well under 1 GiB
FILE_SIZE_BYTES = 64 * 2**20  # RLIMIT_FSIZE: no task deliverable is anywhere near this size
MAX_PROCESSES = 128  # room for a multiprocessing pool; a fork bomb beyond this is stopped
OUTPUT_CAPTURE_BYTES = 2**20  # per stream kept in memory (head half + tail half), the rest elided
READ_CHUNK_BYTES = 2**16  # one pipe read
PIPE_BUFFER_BYTES = 2**20  # requested pipe capacity (Linux F_SETPIPE_SZ) for fewer wake-ups

AGENT_OUTPUT_CAP_CHARS = 4000  # default cap of RunResult.agent_text (script reply: 3 000 + 1 000)
SCRIPT_STDOUT_TAIL_CHARS = 3000  # reference §6: run_script reply keeps the last 3 000 chars of stdout
SCRIPT_STDERR_TAIL_CHARS = 1000  # reference §6: ... and the last 1 000 chars of stderr
TEST_OUTPUT_TAIL_CHARS = 1500  # reference §6: run_tests reply keeps the last 1 500 chars of pytest stdout
PLANNING_TEST_OUTPUT_TAIL_CHARS = 2000  # reference §6: during planning the test reply keeps 2 000
SNAPSHOT_MAX_FILE_BYTES = 4 * 2**20  # snapshot_files skips larger files (data dumps, not deliverables)

SANDBOX_MARKER_VAR = "LATTE_SANDBOX_RUN"  # env var whose random value tags every process of one run
PYTEST_ARGS = ("-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider")  # the public test command
# Third-party pytest plugins installed beside latte_lab (nbval pulls in jsonschema, ...) add ~3 s to
# every test run and no task suite needs them; set to False to let the agents' runs load them.
PYTEST_DISABLE_PLUGIN_AUTOLOAD = True
MEMO_SCHEMA_VERSION = 1  # bump when TestRun or the key changes, to invalidate on-disk memos
CACHE_DIR_NAMES = frozenset({"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache"})

# Top-level modules an agent may not create: a workspace file `json.py` or `signal.py` is imported
# instead of the standard library module (the workspace is first on sys.path) and breaks pytest
# itself. The released code blocked ~60 such names; we block every public stdlib module name.
STDLIB_SHADOW_NAMES = frozenset(name for name in sys.stdlib_module_names if not name.startswith("_"))

# Environment: only these names are copied from the parent (and only if their name contains none of
# FORBIDDEN_ENV_WORDS); the variables in _sandbox_env() are then set explicitly.
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM", "SYSTEMROOT")
FORBIDDEN_ENV_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL")

_CHILD_SCRIPT = str(Path(__file__).with_name("_sandbox_child.py"))

# The pytest fork server (see "The zygote" below and latte_lab/_zygote.py).
USE_ZYGOTE = True  # run pytest in children forked from a pre-warmed server; False: always exec
ZYGOTE_DISABLE_VAR = "LATTE_LAB_NO_ZYGOTE"  # =1 in the environment also disables it
ZYGOTE_START_TIMEOUT_SECONDS = 60.0  # interpreter start + pytest imports, on a loaded machine
ZYGOTE_REPLY_TIMEOUT_SECONDS = 10.0  # request sent -> the forked child's pid is back
ZYGOTE_REAPER_EXIT_SECONDS = 0.5  # after a run's status: how long to wait for its reaper to exit
ZYGOTE_MAX_START_FAILURES = 3  # after this many failed starts the process stays on the exec path
_ZYGOTE_SCRIPT = str(Path(__file__).with_name("_zygote.py"))


# --------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed run. ``None`` leaves a limit unset."""

    cpu_seconds: int | None = CPU_LIMIT_SECONDS
    """RLIMIT_CPU per process; the call additionally caps it at ``ceil(timeout) + 1``."""
    address_space_bytes: int | None = ADDRESS_SPACE_BYTES
    """RLIMIT_AS: allocations beyond it raise MemoryError in the child instead of swapping the host."""
    file_size_bytes: int | None = FILE_SIZE_BYTES
    """RLIMIT_FSIZE: a runaway writer gets EFBIG instead of filling the disk."""
    max_processes: int | None = MAX_PROCESSES
    """Processes of one run (RLIMIT_NPROC on top of the user's count, plus the parent's own count)."""
    output_bytes: int = OUTPUT_CAPTURE_BYTES
    """Bytes kept per output stream (first half + last half)."""
    sigterm_grace_seconds: float = SIGTERM_GRACE_SECONDS
    """Time between SIGTERM and SIGKILL at a timeout."""

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "address_space_bytes", "file_size_bytes", "max_processes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigError(f"SandboxLimits.{name} must be a positive int or None, got {value!r}")
        if not isinstance(self.output_bytes, int) or self.output_bytes < 2:
            raise ConfigError(f"SandboxLimits.output_bytes must be an int >= 2, got {self.output_bytes!r}")
        if self.sigterm_grace_seconds < 0:
            raise ConfigError("SandboxLimits.sigterm_grace_seconds must be >= 0")


@dataclass(frozen=True)
class RunResult:
    """Outcome of one sandboxed command."""

    returncode: int  # negative: killed by that signal (POSIX convention of subprocess)
    stdout: str  # captured (head + elision note + tail when longer than the capture limit)
    stderr: str
    seconds: float  # wall time
    timed_out: bool
    truncated: bool  # some output was elided
    notes: tuple[str, ...] = ()  # what went wrong, in words an agent understands (limits hit, ...)
    timeout: float | None = None  # the timeout the run had (for the timeout message)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def agent_text(self, cap: int = AGENT_OUTPUT_CAP_CHARS) -> str:
        """Notes, the tail of stdout and the tail of stderr, at most ``cap`` characters in all.

        Stdout gets three quarters of the budget and stderr the rest (the reference's 3 000 + 1 000
        split); a stream that needs less gives its share to the other.
        """
        if cap <= 0:
            return ""
        notes = "".join(f"{note}\n" for note in self.notes)
        budget = max(cap - len(notes), 0)
        label = "\n[stderr]\n" if self.stderr else ""
        err_budget = min(len(self.stderr), max(budget // 4 - len(label), 0))
        out = _tail(self.stdout, budget - err_budget - len(label))
        err = _tail(self.stderr, budget - len(out) - len(label))
        return _tail(notes + out + (label + err if self.stderr else ""), cap)


@dataclass(frozen=True)
class TestRun(RunResult):
    """Outcome of a pytest run, with the counts parsed from its output."""

    __test__ = False  # not a pytest test class, despite the name

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failed_tests: tuple[str, ...] = ()  # node ids of FAILED and ERROR entries of the short summary
    cached: bool = False  # served from the content-addressed memo

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def total(self) -> int:
        """Tests that ran to an outcome that counts for a pass rate (skipped excluded)."""
        return self.passed + self.failed + self.errors


@dataclass(frozen=True)
class WriteRecord:
    """One logged write by an agent."""

    agent: str | None
    round: int | None
    path: str
    n_chars: int
    symbols: tuple[str, ...]  # changed top-level functions/classes/methods (or JSON keys, or "<file>")
    created: bool


# --------------------------------------------------------------------------------------------------
# Symbols (pure)
# --------------------------------------------------------------------------------------------------

FILE_SYMBOL = "<file>"  # the whole file changed and could not be split into symbols
MODULE_SYMBOL = "<module>"  # module-level code outside defs/classes (imports, constants) changed


def _node_span(node: ast.AST) -> tuple[int, int]:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno or node.lineno


SYMBOL_CACHE_SIZE = 64  # parsed files kept; a trial touches a handful of files, each a few KB
_AST_LOCK = threading.Lock()


def _segment(lines: list[str], span: tuple[int, int]) -> str:
    return "".join(lines[span[0] - 1 : span[1]]).rstrip("\r\n")


@functools.lru_cache(maxsize=SYMBOL_CACHE_SIZE)
def _python_symbols(source: str) -> tuple[dict[str, str], str] | None:
    """({name: segment}, module-level remainder) or None when the source does not parse.

    Cached: every write parses the file before and after, and "before" is the previous write's
    "after". Callers must not mutate the returned dict (``extract_symbols`` hands out a copy).
    """
    try:
        with _AST_LOCK:  # CPython 3.11's ast.parse is not safe from several threads at once
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = source.splitlines(keepends=True)
    symbols: dict[str, str] = {}
    covered: set[int] = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        span = _node_span(node)
        symbols[node.name] = _segment(lines, span)
        covered.update(range(span[0], span[1] + 1))
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    symbols[f"{node.name}.{item.name}"] = _segment(lines, _node_span(item))
    remainder = "\n".join(
        line.rstrip() for i, line in enumerate(lines, 1) if i not in covered and line.strip()
    )
    return symbols, remainder


def _class_shell(symbols: dict[str, str], cls: str) -> str:
    """A class's source with its methods removed: what changes when bases/attributes/docstring do."""
    text = symbols[cls]
    for name, seg in symbols.items():
        if name.startswith(cls + ".") and seg:
            text = text.replace(seg, "", 1)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def extract_symbols(source: str, path: str) -> dict[str, str]:
    """Named parts of a file: ``{name: source segment}``.

    ``.py``: top-level functions and classes by name and methods as ``Class.method``; a segment is
    the exact source lines (decorators included, indentation kept) without the final newline, so
    ``source.replace(old_segment, new_segment)`` splices a new version in. ``.json`` (an object):
    top-level keys mapped to their value as indented JSON text. Anything else, or a file that does not
    parse: ``{}``.

    >>> extract_symbols("def f():\\n    return 1\\n\\nclass A:\\n    def m(self):\\n        pass\\n", "x.py")
    {'f': 'def f():\\n    return 1', 'A': 'class A:\\n    def m(self):\\n        pass', 'A.m': '    def m(self):\\n        pass'}
    """
    if path.endswith(".py"):
        parsed = _python_symbols(source)
        return dict(parsed[0]) if parsed else {}
    if path.endswith(".json"):
        try:
            data = json.loads(source)
        except ValueError:
            return {}
        if isinstance(data, dict):
            return {str(k): json.dumps(v, indent=2, sort_keys=True) for k, v in data.items()}
    return {}


def _diff_keys(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changed = [name for name, seg in after.items() if before.get(name) != seg]
    changed += [name for name in before if name not in after]
    return changed


def changed_symbols(before: str | None, after: str, path: str) -> tuple[str, ...]:
    """What an edit of ``path`` from ``before`` (None: new file) to ``after`` changed.

    ``.py``: changed, added or removed top-level functions, classes and ``Class.method`` names; a
    class name itself is listed when the class is added/removed or its code outside its methods
    changed (bases, attributes, docstring), so two agents editing different methods of one class do
    not collide; :data:`MODULE_SYMBOL` when module-level code (imports, constants) changed.
    ``.json``: changed top-level keys. If either version does not parse, or for other file types,
    ``("<file>",)``. Identical contents: ``()``. Order: as in ``after``, then removed names.

    >>> changed_symbols("def f():\\n    return 1\\n", "def f():\\n    return 2\\n", "m.py")
    ('f',)
    >>> changed_symbols(None, "{\\"a\\": 1}", "x.json")
    ('a',)
    >>> changed_symbols("def f(:", "def f(): pass", "m.py")
    ('<file>',)
    """
    if before == after:
        return ()
    if path.endswith(".py"):
        new = _python_symbols(after)
        old = _python_symbols(before) if before is not None else ({}, "")
        if new is None or old is None:
            return (FILE_SYMBOL,)
        (old_syms, old_rest), (new_syms, new_rest) = old, new
        result: list[str] = []
        if old_rest != new_rest:
            result.append(MODULE_SYMBOL)
        for name in _diff_keys(old_syms, new_syms):
            is_class = "." not in name and any(k.startswith(name + ".") for k in (*old_syms, *new_syms))
            if (
                is_class
                and name in old_syms
                and name in new_syms
                and _class_shell(old_syms, name) == _class_shell(new_syms, name)
            ):
                continue  # only methods changed; they are listed by their own names
            result.append(name)
        return tuple(result) if result else (MODULE_SYMBOL,)
    if path.endswith(".json"):
        try:
            new_data = json.loads(after)
            old_data = json.loads(before) if before is not None else {}
        except ValueError:
            return (FILE_SYMBOL,)
        if not isinstance(new_data, dict) or not isinstance(old_data, dict):
            return (FILE_SYMBOL,)
        keys = _diff_keys(extract_symbols(json.dumps(old_data), ".json"), extract_symbols(after, ".json"))
        return tuple(keys) if keys else (FILE_SYMBOL,)
    return (FILE_SYMBOL,)


# --------------------------------------------------------------------------------------------------
# Output capture and agent replies (pure)
# --------------------------------------------------------------------------------------------------


def _tail(text: str, n: int) -> str:
    if n <= 0:
        return ""
    return text if len(text) <= n else text[-n:]


class OutputCapture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest.

    Memory stays O(limit) whatever the child prints.
    """

    def __init__(self, limit: int = OUTPUT_CAPTURE_BYTES):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        if len(chunk) >= self.half:
            self.tail = bytearray(chunk[-self.half :])
        else:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def elided(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.elided <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        return f"{head}\n[... {self.elided} bytes elided ...]\n{tail}"


def _format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "its time limit"
    return f"{seconds:g} s"


def script_reply(
    run: RunResult,
    *,
    stdout_chars: int = SCRIPT_STDOUT_TAIL_CHARS,
    stderr_chars: int = SCRIPT_STDERR_TAIL_CHARS,
) -> str:
    """The message an agent gets for ``<run_script>`` (reference §4.1, with clear failure notes).

    >>> script_reply(RunResult(0, "hi\\n", "", 0.1, False, False))
    '✅ Script completed:\\nhi\\n'
    """
    if run.timed_out:
        header = f"⏱️ Script timed out after {_format_seconds(run.timeout)} and was stopped:"
    elif run.returncode == 0:
        header = "✅ Script completed:"
    else:
        header = f"❌ Script exited with code {run.returncode}:"
    parts = [header, *run.notes]
    text = "\n".join(parts) + "\n" + _tail(run.stdout, stdout_chars)
    if run.stderr:
        text += f"\n[stderr]\n{_tail(run.stderr, stderr_chars)}"
    return text


def tests_reply(run: TestRun, *, tail_chars: int = TEST_OUTPUT_TAIL_CHARS) -> str:
    """The message an agent gets for ``<run_tests>`` (reference §4.1).

    >>> tests_reply(TestRun(0, "3 passed in 0.01s", "", 0.2, False, False, passed=3))
    '✅ Tests passed!'
    """
    if run.ok:
        return "✅ Tests passed!"
    if run.timed_out:
        header = f"⏱️ Tests timed out after {_format_seconds(run.timeout)} and were stopped:"
    else:
        header = "❌ Tests failed:"
    output = run.stdout if run.stdout.strip() else run.stderr
    return "\n".join([header, *run.notes, _tail(output, tail_chars)])


# --------------------------------------------------------------------------------------------------
# pytest output parsing (pure)
# --------------------------------------------------------------------------------------------------

_SUMMARY_LINE = re.compile(r"\bin \d+(?:\.\d+)?s\b")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")
_SHORT_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+)(?: - .*)?$")


def parse_pytest_output(stdout: str) -> dict[str, object]:
    """Counts and failing node ids from ``pytest -q -rfE`` output.

    >>> parse_pytest_output("FAILED t.py::TestA::test_x - assert 1 == 2\\n1 failed, 2 passed in 0.1s")
    {'passed': 2, 'failed': 1, 'errors': 0, 'skipped': 0, 'failed_tests': ('t.py::TestA::test_x',), 'summary_found': True}
    """
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    summary_found = False
    failed_tests: list[str] = []
    for line in stdout.splitlines():
        stripped = line.strip().strip("=").strip()
        match = _SHORT_SUMMARY.match(line.strip())
        if match and match.group(2) not in failed_tests:
            failed_tests.append(match.group(2))
        if _SUMMARY_LINE.search(stripped) and (_COUNT.search(stripped) or "no tests ran" in stripped):
            summary_found = True
            counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
            for number, kind in _COUNT.findall(stripped):
                n = int(number)
                if kind in ("passed", "xpassed"):
                    counts["passed"] += n
                elif kind == "failed":
                    counts["failed"] += n
                elif kind.startswith("error"):
                    counts["errors"] += n
                elif kind in ("skipped", "xfailed"):
                    counts["skipped"] += n
    return {**counts, "failed_tests": tuple(failed_tests), "summary_found": summary_found}


# --------------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[str, int, int, int]] | None:
    """{pid: (state, ppid, pgid, sid)} from /proc, or None where /proc is unavailable."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table: dict[int, tuple[str, int, int, int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            table[int(name)] = (fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]))
        except (OSError, IndexError, ValueError):
            continue
    return table


def _has_marker(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read()
    except OSError:
        return False


def sandbox_processes(leader: int, marker: str | None = None) -> set[int]:
    """Live (non-zombie) processes belonging to the sandbox run whose first process is ``leader``.

    Members: the leader's session and process group (``start_new_session`` makes both equal to its
    pid), every descendant by parent pid, and (if ``marker`` is given) every process whose environment
    carries ``SANDBOX_MARKER_VAR=marker``. Empty where /proc is unavailable.
    """
    table = _proc_table()
    if table is None:
        return set()
    me = os.getpid()
    members = {
        pid for pid, (_, _, pgid, sid) in table.items() if pid != me and (pgid == leader or sid == leader)
    }
    if leader in table:
        members.add(leader)
    if marker:
        needle = f"{SANDBOX_MARKER_VAR}={marker}".encode()
        members |= {pid for pid in table if pid != me and pid not in members and _has_marker(pid, needle)}
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(members)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in members and child != me:
                members.add(child)
                stack.append(child)
    return {pid for pid in members if table.get(pid, ("Z",))[0] not in ("Z", "X")}


def _signal_all(leader: int, pids: Iterable[int], sig: int) -> None:
    try:
        os.killpg(leader, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_sandbox(leader: int, marker: str | None, grace: float) -> int:
    """SIGTERM every process of the run, wait up to ``grace`` s, then SIGKILL until none is left.

    Returns how many processes were found. Safe to call when everything has already exited.
    """
    members = sandbox_processes(leader, marker)
    found = set(members)
    if not members and _proc_table() is not None:
        return 0  # everything already exited (the usual case after a normal run)
    _signal_all(leader, members, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while members and time.monotonic() < deadline:
        time.sleep(0.02)
        members = sandbox_processes(leader, marker)
        found |= members
    kill_deadline = time.monotonic() + KILL_DEADLINE_SECONDS
    while True:
        _signal_all(leader, members, signal.SIGKILL)
        time.sleep(0.01)
        members = sandbox_processes(leader, marker)
        found |= members
        if not members or time.monotonic() > kill_deadline:
            break
    return len(found)


def _sandbox_env(
    root: Path, home: str, marker: str, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", os.defpath)])
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        HOME=home,
        TMPDIR=home,
        PYTHONPATH=str(root),
        PYTHONHASHSEED="0",  # deterministic set/dict iteration of str keys across runs
        PYTHONDONTWRITEBYTECODE="1",  # no __pycache__ in the workspace (keeps the memo key stable)
        PYTHONUNBUFFERED="1",  # output printed before a timeout is not lost in a buffer
        PYTHONIOENCODING="utf-8",
        MPLBACKEND="Agg",
        MPLCONFIGDIR=str(Path(tempfile.gettempdir()) / f"latte_lab-mplconfig-{os.getuid()}"),
        OMP_NUM_THREADS="1",  # BLAS thread pools reserve address space; one thread fits the AS limit
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        NO_COLOR="1",
    )
    env.update(extra or {})
    env[SANDBOX_MARKER_VAR] = marker
    return {k: v for k, v in env.items() if not any(word in k.upper() for word in FORBIDDEN_ENV_WORDS)}


def _limit_notes(
    run_stderr: str, returncode: int, limits: SandboxLimits, cpu: int | None, timed_out: bool
) -> list[str]:
    notes = []
    if "MemoryError" in run_stderr or "Cannot allocate memory" in run_stderr:
        cap = limits.address_space_bytes
        size = f" ({cap / 2**30:g} GiB address space)" if cap else ""
        notes.append(f"memory limit exceeded{size}: the script tried to allocate more memory than allowed")
    if returncode == -signal.SIGXCPU:
        notes.append(f"CPU time limit exceeded ({cpu} s of CPU per process)")
    elif returncode == -signal.SIGKILL and not timed_out:
        notes.append("killed by SIGKILL (CPU hard limit or the system's out-of-memory killer)")
    if "File too large" in run_stderr or returncode == -signal.SIGXFSZ:
        cap = limits.file_size_bytes
        size = f" ({cap / 2**20:g} MiB per file)" if cap else ""
        notes.append(f"file size limit exceeded{size}")
    if "Resource temporarily unavailable" in run_stderr and "fork" in run_stderr.lower():
        notes.append("process limit reached: the script could not start more processes")
    return notes


def run_sandboxed(
    argv: list[str],
    cwd: Path | str,
    *,
    timeout: float,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
) -> RunResult:
    """Run ``argv`` in ``cwd`` inside the sandbox described in the module docstring.

    ``env`` adds variables to the allowlisted environment (names with KEY/SECRET/TOKEN are still
    dropped). Never raises for anything the child does (timeouts, limits, crashes, huge output); raises
    :class:`ConfigError` for a non-positive timeout and :class:`WorkspaceError` if ``cwd`` is missing.
    Always the exec path (a fresh interpreter); :func:`run_pytest` may use the zygote instead.
    """
    return _run_sandboxed(argv, cwd, timeout=timeout, limits=limits, env=env)


def _run_sandboxed(
    argv: list[str],
    cwd: Path | str,
    *,
    timeout: float,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    pytest_args: list[str] | None = None,
) -> RunResult:
    """:func:`run_sandboxed`; with ``pytest_args`` (``argv`` being ``python -m pytest *pytest_args``)
    the run is forked from the zygote when it is enabled and up, else ``argv`` is exec'd as usual."""
    limits = limits or SandboxLimits()
    if not isinstance(timeout, (int, float)) or not timeout > 0 or math.isinf(timeout):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    root = Path(cwd)
    if not root.is_dir():
        raise WorkspaceError(f"cannot run in {str(root)!r}: the directory does not exist")
    marker = uuid.uuid4().hex
    cpu = limits.cpu_seconds
    if cpu is not None:
        cpu = min(cpu, math.ceil(timeout) + CPU_LIMIT_SLACK_SECONDS)
    child_limits = {
        "cpu": cpu,
        "as": limits.address_space_bytes,
        "fsize": limits.file_size_bytes,
        "nproc": limits.max_processes,
    }
    wrapper = [sys.executable, "-I", "-S", _CHILD_SCRIPT, json.dumps(child_limits), "--", *argv]
    out, err = OutputCapture(limits.output_bytes), OutputCapture(limits.output_bytes)
    notes: list[str] = []
    timed_out = too_many = False
    with tempfile.TemporaryDirectory(prefix="latte_lab-home-") as home:
        child_env = _sandbox_env(root.resolve(), home, marker, env)
        start = time.monotonic()
        proc: subprocess.Popen | _ZygoteRun | None = None
        if pytest_args is not None and zygote_enabled():
            proc = _zygote_launch(root, child_env, child_limits, pytest_args)
        if proc is None:
            proc = subprocess.Popen(
                wrapper,
                cwd=root,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        # A zygote run's leader is its reaper, one process more than the run itself.
        overhead = 1 if isinstance(proc, _ZygoteRun) else 0
        try:
            timed_out, too_many = _pump(proc, out, err, start + timeout, limits, marker, overhead)
        finally:
            # Stop the run (at a timeout) or whatever it left behind (after a normal exit).
            grace = limits.sigterm_grace_seconds if (timed_out or proc.poll() is None) else 0.0
            stop_sandbox(proc.pid, marker, grace)
            _drain(proc, out, err)
            returncode = proc.wait()
        seconds = time.monotonic() - start
    if too_many:
        notes.append(
            f"process limit exceeded: the script started more than {limits.max_processes} processes "
            "(fork bomb?); all of them were stopped"
        )
    stdout, stderr = out.text(), err.text()
    if not too_many:
        notes += _limit_notes(stderr, returncode, limits, cpu, timed_out)
    truncated = out.elided > 0 or err.elided > 0
    if truncated:
        notes.append(
            f"output truncated: kept the first and last {limits.output_bytes // 2 // 1024} KiB "
            f"of {out.total} bytes on stdout and {err.total} bytes on stderr"
        )
    return RunResult(
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        seconds=round(seconds, 6),
        timed_out=timed_out,
        truncated=truncated,
        notes=tuple(dict.fromkeys(notes)),
        timeout=float(timeout),
    )


def _enlarge_pipe(fd: int) -> None:
    if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux only
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BUFFER_BYTES)
        except OSError:
            pass  # above /proc/sys/fs/pipe-max-size for unprivileged users: keep the default


def _pump(
    proc: subprocess.Popen | _ZygoteRun,
    out: OutputCapture,
    err: OutputCapture,
    deadline: float,
    limits: SandboxLimits,
    marker: str,
    overhead: int = 0,
) -> tuple[bool, bool]:
    """Read both pipes until the child exits or the deadline passes. Returns (timed_out, too_many).

    ``overhead``: processes of the run's tree that are not the run's own (a zygote run's reaper).
    """
    sel = selectors.DefaultSelector()
    for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
        _enlarge_pipe(stream.fileno())
        sel.register(stream.fileno(), selectors.EVENT_READ, capture)
    next_check = time.monotonic() + PROCESS_CHECK_INTERVAL_SECONDS
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return True, False
            if proc.poll() is not None:
                return False, False
            if limits.max_processes is not None and now >= next_check:
                next_check = now + PROCESS_CHECK_INTERVAL_SECONDS
                if len(sandbox_processes(proc.pid)) - overhead > limits.max_processes:
                    return False, True
            if not sel.get_map():  # both pipes closed: only the exit (or the deadline) is left to wait for
                try:
                    proc.wait(timeout=max(min(deadline - now, next_check - now, 0.1), 0.001))
                except subprocess.TimeoutExpired:
                    pass
                continue
            wait = max(min(deadline - now, next_check - now, 0.1), 0.0)
            for key, _ in sel.select(wait):
                chunk = os.read(key.fd, READ_CHUNK_BYTES)
                if chunk:
                    key.data.feed(chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()


def _drain(proc: subprocess.Popen | _ZygoteRun, out: OutputCapture, err: OutputCapture) -> None:
    """Read what is left in the pipes (bounded in time: a stray writer cannot hold us)."""
    sel = selectors.DefaultSelector()
    for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
        if stream is not None and not stream.closed:
            sel.register(stream.fileno(), selectors.EVENT_READ, capture)
    deadline = time.monotonic() + PIPE_DRAIN_SECONDS
    try:
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(max(deadline - time.monotonic(), 0)):
                chunk = os.read(key.fd, READ_CHUNK_BYTES)
                if chunk:
                    key.data.feed(chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# --------------------------------------------------------------------------------------------------
# The zygote: a pre-warmed fork server for pytest runs
# --------------------------------------------------------------------------------------------------
#
# A fresh `python -m pytest` spends 0.3-0.7 s starting the interpreter and importing pytest before it
# runs a single test; a trial makes ~40 such runs. The zygote (latte_lab/_zygote.py) is one long-lived
# interpreter per (interpreter, start-up environment) that has imported pytest and nothing from any
# workspace; each test run is a child forked from it. Limits travel with each request (they are set in
# the forked child), so one zygote serves every SandboxLimits.
#
# * Started lazily by the first test run of this process, through the same allowlisted environment as
#   any sandbox run minus the per-run variables (PYTHONPATH, run marker; HOME/TMPDIR are its own empty
#   directory), in a new session, with cwd in that directory: it never holds a key, never sees a
#   workspace. Shut down at exit (atexit: its control socket is closed, it exits on EOF).
# * Everything of a run other than how the process starts is shared with the exec path: the environment
#   (_sandbox_env: the child's os.environ is replaced by it), the rlimits (apply_limits of
#   _sandbox_child), the pipes and their capped reading (_pump/_drain), the timeout, the process-count
#   watchdog and the process-tree kill (stop_sandbox, with the run's reaper as leader: every process of
#   the run, even a setsid()'d double fork, is a descendant of the reaper, a Linux child subreaper).
# * Fallback: if the zygote cannot start, dies, or does not answer, the run takes the exec path (a
#   RuntimeWarning once per process); a dead zygote is restarted transparently by the next run; after
#   ZYGOTE_MAX_START_FAILURES failed starts the process stays on the exec path.
# * Threads: any number of threads may run tests at once. Sending a request is serialised by a lock
#   (a few microseconds); the zygote forks each request at once, and every run then has its own pipes
#   and its own reply socket, so runs proceed concurrently (the zygote itself is single-threaded).
# * Known differences from the exec path, none visible to a task suite: modules pytest and its
#   built-in plugins import are already imported when the run starts (a workspace file `pytest.py` or
#   `pluggy.py`, which would break the exec path's pytest, is not imported), the run's process is a
#   child of the reaper rather than of this process, and /proc/<pid>/environ of a forked (not exec'd)
#   process shows the zygote's environment (the run marker is found in os.environ and in everything the
#   run exec's; the reaper makes the marker unnecessary for the kill).


def zygote_enabled() -> bool:
    """True when test runs go through the zygote: :data:`USE_ZYGOTE`, no ``LATTE_LAB_NO_ZYGOTE=1``,
    a platform with ``fork`` and file-descriptor passing, and not given up after failed starts."""
    if not USE_ZYGOTE or os.environ.get(ZYGOTE_DISABLE_VAR, "").strip().lower() not in ("", "0", "false"):
        return False
    if not (hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(socket, "SOCK_SEQPACKET")):
        return False
    return _ZYGOTE_STATE["start_failures"] < ZYGOTE_MAX_START_FAILURES


class _ZygoteError(Exception):
    """The zygote could not start or serve a request; the caller falls back to the exec path."""


class _Zygote:
    """The parent's handle on one zygote process."""

    def __init__(self, env: Mapping[str, str]):
        self.owner = os.getpid()  # a forked copy of this process (a sweep worker) starts its own
        self.home = tempfile.mkdtemp(prefix="latte_lab-zygote-")
        self.lock = threading.Lock()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log_path = Path(self.home) / "zygote.log"
        try:
            with open(log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, _ZYGOTE_SCRIPT, str(theirs.fileno())],
                    cwd=self.home,
                    env={**env, "HOME": self.home, "TMPDIR": self.home},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as exc:
            mine.close()
            self._remove_home()
            raise _ZygoteError(f"could not start the zygote: {exc}") from None
        finally:
            theirs.close()
        self.sock = mine
        try:
            mine.settimeout(ZYGOTE_START_TIMEOUT_SECONDS)
            ready = json.loads(mine.recv(4096) or b"{}")
            if "ready" not in ready:
                raise _ZygoteError("exited during start-up")
            self.pid = int(ready["ready"])
            mine.settimeout(None)
        except (OSError, ValueError, _ZygoteError) as exc:
            try:
                detail = log_path.read_bytes()[-2000:].decode("utf-8", "replace").strip()
            except OSError:
                detail = ""
            self.close()
            raise _ZygoteError(f"the zygote did not start ({exc}){': ' + detail if detail else ''}") from None

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None and self.sock.fileno() >= 0

    def send(self, data: bytes, fds: list[int]) -> None:
        with self.lock:
            try:
                socket.send_fds(self.sock, [data], fds)
            except OSError as exc:
                raise _ZygoteError(f"the zygote is not answering: {exc}") from None

    def _remove_home(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)

    def close(self) -> None:
        """Stop the zygote: EOF on its control socket, then SIGKILL if it lingers. Idempotent.

        In a process forked from the owner (a sweep worker) only that process's copy of the socket
        is closed: the zygote belongs to the owner.
        """
        if self.owner != os.getpid():
            try:
                self.sock.close()
            except OSError:
                pass
            return
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        self._remove_home()


class _ZygoteRun:
    """One run forked by the zygote, with the part of ``subprocess.Popen`` the sandbox uses.

    ``pid`` is the run's reaper (the leader for :func:`stop_sandbox`: the run's process is its child
    and everything the run leaves behind ends up below it); ``child_pid`` the pytest process.
    """

    def __init__(self, sock: socket.socket, out_r: int, err_r: int, child_pid: int, leader: int):
        self._sock: socket.socket | None = sock
        self.stdout = open(out_r, "rb", buffering=0)  # noqa: SIM115 - closed by _drain
        self.stderr = open(err_r, "rb", buffering=0)  # noqa: SIM115
        self.pid = leader
        self.child_pid = child_pid
        self.returncode: int | None = None

    def _close_sock(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _receive(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` (None: forever) for the run's exit status."""
        if self.returncode is not None or self._sock is None:
            return
        readable, _, _ = select.select([self._sock], [], [], timeout)
        if not readable:
            return
        try:
            data = self._sock.recv(65536)
            message = json.loads(data) if data else {}
        except (OSError, ValueError):
            message = {}
        if "status" not in message:
            # EOF without a status: the reaper was killed (with the run, at a timeout) first.
            self.returncode = -signal.SIGKILL
            self._close_sock()
            return
        self.returncode = os.waitstatus_to_exitcode(int(message["status"]))
        if not message.get("orphans"):
            # The reaper exits right after reporting; wait for that (EOF) so the kill step finds
            # nothing left and returns at once.
            if select.select([self._sock], [], [], ZYGOTE_REAPER_EXIT_SECONDS)[0]:
                try:
                    self._sock.recv(16)
                except OSError:
                    pass
        self._close_sock()

    def poll(self) -> int | None:
        self._receive(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired("pytest (zygote)", timeout or 0)
            self._receive(remaining)
        return self.returncode


_ZYGOTES: dict[tuple, _Zygote] = {}
_ZYGOTE_LOCK = threading.Lock()
_ZYGOTE_STATE = {"start_failures": 0, "warned": False, "atexit": False}


def _zygote_after_fork_in_child() -> None:
    """A process forked from this one (a sweep worker) starts its own zygote when it needs one; the
    lock may have been held by another thread at the fork."""
    global _ZYGOTE_LOCK
    _ZYGOTE_LOCK = threading.Lock()
    inherited = list(_ZYGOTES.values())
    _ZYGOTES.clear()
    for zygote in inherited:
        zygote.close()  # only our copy of its socket


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_zygote_after_fork_in_child)


def _zygote_warn(reason: str) -> None:
    with _ZYGOTE_LOCK:
        if _ZYGOTE_STATE["warned"]:
            return
        _ZYGOTE_STATE["warned"] = True
    warnings.warn(
        f"latte_lab: pytest fork server unavailable, test runs use a fresh interpreter: {reason}",
        RuntimeWarning,
        stacklevel=4,
    )


def _zygote_start_env(child_env: Mapping[str, str]) -> dict[str, str]:
    """The run's environment without its per-run variables: what the zygote starts with."""
    per_run = {"PYTHONPATH", "HOME", "TMPDIR", SANDBOX_MARKER_VAR, "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    return {k: v for k, v in child_env.items() if k not in per_run}


def _zygote_get(child_env: Mapping[str, str]) -> _Zygote | None:
    """The live zygote for this interpreter and start-up environment, started if need be."""
    env = _zygote_start_env(child_env)
    key = (sys.executable, tuple(sorted(env.items())))
    with _ZYGOTE_LOCK:
        zygote = _ZYGOTES.get(key)
        if zygote is not None and zygote.alive():
            return zygote
        if zygote is not None:  # died (or inherited from the process we were forked from)
            del _ZYGOTES[key]
            zygote.close()
        if _ZYGOTE_STATE["start_failures"] >= ZYGOTE_MAX_START_FAILURES:
            return None
        try:
            zygote = _Zygote(env)
        except _ZygoteError as exc:
            _ZYGOTE_STATE["start_failures"] += 1
            error = str(exc)
        else:
            _ZYGOTES[key] = zygote
            if not _ZYGOTE_STATE["atexit"]:
                import atexit

                atexit.register(shutdown_zygotes)
                _ZYGOTE_STATE["atexit"] = True
            return zygote
    _zygote_warn(error)
    return None


def shutdown_zygotes() -> None:
    """Stop every zygote this process started (registered with atexit; safe to call any time:
    the next test run starts a new one)."""
    with _ZYGOTE_LOCK:
        zygotes = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for zygote in zygotes:
        zygote.close()


def _zygote_launch(
    root: Path, child_env: Mapping[str, str], child_limits: Mapping[str, int | None], pytest_args: list[str]
) -> _ZygoteRun | None:
    """Start one pytest run in a child of the zygote; None (after a warning) to use the exec path."""
    zygote = _zygote_get(child_env)
    if zygote is None:
        return None
    request = json.dumps(
        {
            "cwd": os.path.abspath(root),
            "env": dict(child_env),
            "limits": dict(child_limits),
            "args": list(pytest_args),
        }
    ).encode()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        try:
            try:
                zygote.send(request, [out_w, err_w, theirs.fileno()])
            except _ZygoteError:
                if zygote.alive():
                    raise
                # It died since the last run (nothing was sent): restart it, once, transparently.
                zygote = _zygote_get(child_env)
                if zygote is None:
                    raise
                zygote.send(request, [out_w, err_w, theirs.fileno()])
        finally:
            os.close(out_w)
            os.close(err_w)
            theirs.close()
        mine.settimeout(ZYGOTE_REPLY_TIMEOUT_SECONDS)
        try:
            data = mine.recv(65536)
            reply = json.loads(data) if data else {}
        except (OSError, ValueError) as exc:
            raise _ZygoteError(f"no answer from the zygote: {exc}") from None
        if "pid" not in reply:
            raise _ZygoteError(str(reply.get("error", "the zygote closed the request unanswered")))
        mine.settimeout(None)
        return _ZygoteRun(mine, out_r, err_r, int(reply["pid"]), int(reply["leader"]))
    except _ZygoteError as exc:
        for fd in (out_r, err_r):
            os.close(fd)
        mine.close()
        _zygote_warn(str(exc))  # a dead zygote is restarted by the next run
        return None


# --------------------------------------------------------------------------------------------------
# pytest
# --------------------------------------------------------------------------------------------------


def _pytest_available() -> bool:
    return importlib.util.find_spec("pytest") is not None


def _test_run_from(run: RunResult, *, cached: bool = False) -> TestRun:
    parsed = parse_pytest_output(run.stdout)
    errors = int(parsed["errors"])
    notes = list(run.notes)
    if "No module named pytest" in run.stderr:
        notes.append(f"pytest is not installed for {sys.executable}; install it with `pip install pytest`")
    if (run.timed_out or not parsed["summary_found"]) and errors == 0:
        errors = 1  # a timeout, crash or collection failure counts as an error, never as a pass
        if not run.timed_out and not notes:
            notes.append("pytest ended without a summary line (crash or collection error)")
    return TestRun(
        returncode=run.returncode,
        stdout=run.stdout,
        stderr=run.stderr,
        seconds=run.seconds,
        timed_out=run.timed_out,
        truncated=run.truncated,
        notes=tuple(notes),
        timeout=run.timeout,
        passed=int(parsed["passed"]),
        failed=int(parsed["failed"]),
        errors=errors,
        skipped=int(parsed["skipped"]),
        failed_tests=tuple(parsed["failed_tests"]),  # type: ignore[arg-type]
        cached=cached,
    )


def _pytest_missing(timeout: float) -> TestRun:
    message = f"pytest is not installed for {sys.executable}; install it with `pip install pytest`"
    return TestRun(
        returncode=4,
        stdout=message,
        stderr="",
        seconds=0.0,
        timed_out=False,
        truncated=False,
        notes=(message,),
        timeout=float(timeout),
        errors=1,
    )


def _copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(
        src, dst, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*CACHE_DIR_NAMES)
    )


def run_pytest(
    cwd: Path | str,
    args: Iterable[str] = (),
    *,
    timeout: float = TEST_TIMEOUT_SECONDS,
    limits: SandboxLimits | None = None,
    extra_files: Mapping[str, str] | None = None,
) -> TestRun:
    """Run ``python -m pytest -q -rfE -p no:cacheprovider <args>`` in ``cwd``, sandboxed.

    With the zygote enabled (:data:`USE_ZYGOTE`, not ``LATTE_LAB_NO_ZYGOTE=1``) the pytest process is
    forked from a pre-warmed server instead of exec'd; the result is the same (see "The zygote").

    With ``extra_files`` ({relative path: text}, e.g. a hidden suite) the run happens in a temporary
    copy of ``cwd`` with those files added, so they never appear in ``cwd``. Timeouts, crashes and
    collection errors come back as a TestRun with ``errors >= 1``, never as an exception.
    """
    # PYTEST_ARGS already has -q; a second one (-qq) would drop the summary line the counts come from.
    args = [str(a) for a in args if str(a) not in ("-q", "--quiet")]
    if not _pytest_available():
        return _pytest_missing(timeout)
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} if PYTEST_DISABLE_PLUGIN_AUTOLOAD else {}
    argv = [sys.executable, *PYTEST_ARGS, *args]
    pytest_args = [*PYTEST_ARGS[2:], *args]  # what follows `python -m pytest`, for the zygote
    run_kw = {"timeout": timeout, "limits": limits, "env": env, "pytest_args": pytest_args}
    if not extra_files:
        return _test_run_from(_run_sandboxed(argv, cwd, **run_kw))
    with tempfile.TemporaryDirectory(prefix="latte_lab-eval-") as tmp:
        copy = Path(tmp) / "repo"
        _copy_tree(Path(cwd), copy)
        staging = Workspace(copy, memo=False)
        for path, text in extra_files.items():
            staging.setup_file(path, text)
        return _test_run_from(_run_sandboxed(argv, copy, **run_kw))


# --------------------------------------------------------------------------------------------------
# The memo
# --------------------------------------------------------------------------------------------------

_MEMO: dict[str, TestRun] = {}
_MEMO_LOCK = threading.Lock()


def clear_memo() -> None:
    """Forget every in-memory memoised test run (on-disk memo directories are left alone)."""
    with _MEMO_LOCK:
        _MEMO.clear()


def tree_digest(root: Path | str) -> list[tuple[str, str]]:
    """Sorted ``(relative posix path, SHA-256 of content)`` of every file under ``root``.

    Cache directories (:data:`CACHE_DIR_NAMES`) are skipped; a symlink contributes its target string
    (never what it points to, which may be outside). Contents are hashed every time: task workspaces
    are a few small files, so this costs well under a millisecond and cannot be fooled by a rewrite
    within one mtime tick, unlike a stat-based shortcut.
    """
    root = Path(root)
    entries: list[tuple[str, str]] = []
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            items = list(os.scandir(directory))
        except OSError:
            continue
        for item in items:
            rel = f"{prefix}{item.name}"
            if item.is_symlink():
                entries.append(
                    (rel, "symlink:" + hashlib.sha256(os.readlink(item.path).encode()).hexdigest())
                )
            elif item.is_dir():
                if item.name not in CACHE_DIR_NAMES:
                    stack.append((Path(item.path), rel + "/"))
            elif item.is_file():
                digest = hashlib.sha256()
                try:
                    with open(item.path, "rb") as fh:
                        for block in iter(lambda: fh.read(1 << 20), b""):
                            digest.update(block)
                except OSError:
                    continue
                entries.append((rel, digest.hexdigest()))
    entries.sort()
    return entries


def memo_key(root: Path | str, args: Iterable[str], limits: SandboxLimits) -> str:
    """SHA-256 over the test arguments, every file's content hash, the limits and the interpreter."""
    payload = {
        "v": MEMO_SCHEMA_VERSION,
        "python": sys.executable,
        "args": list(args),
        "limits": dataclasses.asdict(limits),
        "plugins": not PYTEST_DISABLE_PLUGIN_AUTOLOAD,
        "files": tree_digest(root),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _memo_load(memo_dir: Path | None, key: str) -> TestRun | None:
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
    if hit is not None or memo_dir is None:
        return hit
    path = memo_dir / f"{key}.json"
    try:
        data = json.loads(path.read_text())
        run = TestRun(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        return None  # a corrupt or old-format entry is a miss
    with _MEMO_LOCK:
        _MEMO[key] = run
    return run


def _memo_store(memo_dir: Path | None, key: str, run: TestRun) -> None:
    with _MEMO_LOCK:
        _MEMO[key] = run
    if memo_dir is None:
        return
    memo_dir.mkdir(parents=True, exist_ok=True)
    tmp = memo_dir / f".{key}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(dataclasses.asdict(run)))
    os.replace(tmp, memo_dir / f"{key}.json")  # atomic: concurrent trials never read half a file


# --------------------------------------------------------------------------------------------------
# The workspace
# --------------------------------------------------------------------------------------------------

_OUTSIDE = "path {path!r} is outside the workspace; use a path relative to the project root"


class Workspace:
    """A trial's project directory, as agents see it.

    >>> import tempfile
    >>> ws = Workspace(tempfile.mkdtemp())
    >>> ws.write("pkg/mod.py", "def f():\\n    return 1\\n", agent="Dev1", round=1).symbols
    ('f',)
    >>> ws.list_files()
    ['pkg/mod.py']
    """

    def __init__(
        self,
        root: Path | str,
        *,
        memo: bool = True,
        memo_dir: Path | str | None = None,
        agent_output_cap: int = AGENT_OUTPUT_CAP_CHARS,
        limits: SandboxLimits | None = None,
    ):
        self.root = Path(root).expanduser()
        self.root.mkdir(parents=True, exist_ok=True)
        self.root = self.root.resolve()
        self.memo = memo
        self.memo_dir = Path(memo_dir) if memo_dir is not None else None
        self.agent_output_cap = agent_output_cap
        self.limits = limits or SandboxLimits()
        self.test_args: tuple[str, ...] = ()
        self.writes: list[WriteRecord] = []
        self._protected: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return f"<Workspace {self.root}>"

    # ---- paths ---------------------------------------------------------------------------------

    def resolve(self, path: str) -> tuple[str, Path]:
        """(relative posix path, absolute path) of an agent-supplied path, or WorkspaceError."""
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError(f"invalid path {path!r}: give a file path relative to the project root")
        raw = path.strip()
        if "\x00" in raw:
            raise WorkspaceError(f"invalid path {raw!r}: it contains a NUL character")
        text = raw.replace("\\", "/")
        if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:/", text):
            raise WorkspaceError(_OUTSIDE.format(path=raw))
        while True:
            if text.startswith("./"):
                text = text[2:]
            elif text.startswith("repo/"):
                text = text[5:]
            else:
                break
        parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
        if not parts:
            raise WorkspaceError(f"path {raw!r} names the project root, not a file")
        full = self.root.joinpath(*parts)
        try:
            resolved = full.resolve()
        except (OSError, RuntimeError) as exc:  # symlink loop
            raise WorkspaceError(f"path {raw!r} cannot be resolved: {exc}") from None
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise WorkspaceError(_OUTSIDE.format(path=raw))
        if resolved == self.root:
            raise WorkspaceError(f"path {raw!r} names the project root, not a file")
        return resolved.relative_to(self.root).as_posix(), resolved

    def exists(self, path: str) -> bool:
        try:
            return self.resolve(path)[1].is_file()
        except WorkspaceError:
            return False

    def list_files(self) -> list[str]:
        """Relative posix paths of all files, sorted; hidden directories and caches skipped."""
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in CACHE_DIR_NAMES]
            rel_dir = Path(dirpath).relative_to(self.root)
            for name in filenames:
                if name.endswith(".pyc"):
                    continue
                found.append((rel_dir / name).as_posix())
        return sorted(found)

    def _near_names(self, rel: str) -> str:
        files = self.list_files()
        close = difflib.get_close_matches(rel, files, n=5, cutoff=0.5)
        by_name = [f for f in files if PurePosixPath(f).name == PurePosixPath(rel).name and f not in close]
        near = (close + by_name)[:5] or files[:10]
        return ", ".join(near) if near else "(the workspace is empty)"

    # ---- reading and writing -------------------------------------------------------------------

    def read(self, path: str, agent: str | None = None) -> str:
        """Text of a workspace file (undecodable bytes replaced). ``agent`` is for callers' logs."""
        rel, full = self.resolve(path)
        if full.is_dir():
            raise WorkspaceError(f"{rel!r} is a directory; files in it: {self._near_names(rel + '/')}")
        if not full.is_file():
            raise WorkspaceError(
                f"file {rel!r} does not exist in the workspace; near names: {self._near_names(rel)}"
            )
        return full.read_bytes().decode("utf-8", errors="replace")

    def _shadow_reason(self, rel: str) -> str | None:
        parts = PurePosixPath(rel).parts
        if parts[-1].endswith(".py"):
            if len(parts) == 1 and parts[0][:-3] in STDLIB_SHADOW_NAMES:
                return parts[0][:-3]
            if len(parts) == 2 and parts[1] == "__init__.py" and parts[0] in STDLIB_SHADOW_NAMES:
                return parts[0]
        return None

    def write(self, path: str, text: str, agent: str | None = None, round: int | None = None) -> WriteRecord:
        """Overwrite (or create) a file as an agent; logged in :attr:`writes`."""
        if not isinstance(text, str):
            raise WorkspaceError(f"file content for {path!r} must be text, got {type(text).__name__}")
        rel, full = self.resolve(path)
        if rel in self._protected:
            raise WorkspaceError(
                f"file {rel!r} is read-only: it is a public test file of the task; change the code it "
                "tests instead"
            )
        shadow = self._shadow_reason(rel)
        if shadow is not None:
            raise WorkspaceError(
                f"cannot write {rel!r}: it would shadow the standard library module {shadow!r} and break "
                f"imports and the test run; choose another name (e.g. '{shadow}_utils.py')"
            )
        if full.is_dir():
            raise WorkspaceError(f"cannot write {rel!r}: it is a directory")
        created = not full.exists()
        before = None if created else full.read_bytes().decode("utf-8", errors="replace")
        _write_bytes(full, rel, text.encode("utf-8"))
        record = WriteRecord(
            agent=agent,
            round=round,
            path=rel,
            n_chars=len(text),
            symbols=changed_symbols(before, text, rel),
            created=created,
        )
        self.writes.append(record)
        return record

    def setup_file(self, path: str, text: str | bytes) -> None:
        """Write a starting file of the task: not logged, allowed on protected files."""
        rel, full = self.resolve(path)
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        _write_bytes(full, rel, data)
        if rel in self._protected:
            self._protected[rel] = data

    def protect(self, *paths: str) -> None:
        """Make files read-only to agents (public tests).

        ``write`` refuses them, and if a script or test run modifies or deletes one anyway, it is
        restored right after the run (with a note in the result).
        """
        for path in paths:
            rel, full = self.resolve(path)
            if not full.is_file():
                raise WorkspaceError(f"cannot protect {rel!r}: the file does not exist; set it up first")
            self._protected[rel] = full.read_bytes()

    @property
    def protected(self) -> tuple[str, ...]:
        return tuple(sorted(self._protected))

    def _restore_protected(self) -> list[str]:
        restored = []
        for rel, data in self._protected.items():
            full = self.root / rel
            try:
                if full.is_file() and not full.is_symlink() and full.read_bytes() == data:
                    continue
                if full.is_symlink() or full.is_file():
                    full.unlink()
                elif full.is_dir():
                    shutil.rmtree(full)
                full.parent.mkdir(parents=True, exist_ok=True)
                full.write_bytes(data)
                restored.append(rel)
            except OSError:
                continue
        return restored

    def snapshot_files(self) -> dict[str, str]:
        """{relative path: text} of every text file (binary and huge files and caches skipped)."""
        snapshot: dict[str, str] = {}
        for rel in self.list_files():
            full = self.root / rel
            try:
                if full.is_symlink() or full.stat().st_size > SNAPSHOT_MAX_FILE_BYTES:
                    continue
                snapshot[rel] = full.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        return snapshot

    # ---- running -------------------------------------------------------------------------------

    def _with_restore_note(self, run: RunResult) -> RunResult:
        restored = self._restore_protected()
        if not restored:
            return run
        note = f"read-only files were modified by the run and have been restored: {', '.join(restored)}"
        return dataclasses.replace(run, notes=(*run.notes, note))

    def run_script(self, path: str, *, timeout: float = SCRIPT_TIMEOUT_SECONDS) -> RunResult:
        """``python <path>`` in the workspace, sandboxed. A missing script raises WorkspaceError."""
        rel, full = self.resolve(path)
        if not full.is_file():
            raise WorkspaceError(
                f"script {rel!r} does not exist in the workspace; near names: {self._near_names(rel)}"
            )
        run = run_sandboxed([sys.executable, rel], self.root, timeout=timeout, limits=self.limits)
        return self._with_restore_note(run)

    def run_tests(
        self, args: Iterable[str] | None = None, *, timeout: float = TEST_TIMEOUT_SECONDS
    ) -> TestRun:
        """The public test command (``self.test_args`` unless ``args``), memoised by content."""
        test_args = tuple(str(a) for a in (self.test_args if args is None else args))
        key = None
        if self.memo:
            key = memo_key(self.root, test_args, self.limits)
            hit = _memo_load(self.memo_dir, key)
            if hit is not None:
                return dataclasses.replace(hit, cached=True)
        run = run_pytest(self.root, test_args, timeout=timeout, limits=self.limits)
        run = self._with_restore_note(run)  # type: ignore[assignment]
        storable = key is not None and not run.timed_out and "pytest is not installed" not in run.stdout
        # Only when the run itself changed no file: otherwise the result belongs to no stable state.
        if storable and memo_key(self.root, test_args, self.limits) == key:
            _memo_store(self.memo_dir, key, run)
        return run  # type: ignore[return-value]

    def script_reply(self, run: RunResult) -> str:
        """:func:`script_reply` within this workspace's ``agent_output_cap`` (3:1 stdout:stderr)."""
        cap = self.agent_output_cap
        text = script_reply(
            run,
            stdout_chars=min(SCRIPT_STDOUT_TAIL_CHARS, cap * 3 // 4),
            stderr_chars=min(SCRIPT_STDERR_TAIL_CHARS, cap // 4),
        )
        return _cap_reply(text, cap)

    def tests_reply(self, run: TestRun) -> str:
        return _cap_reply(tests_reply(run), self.agent_output_cap)


def _write_bytes(full: Path, rel: str, data: bytes) -> None:
    try:
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
    except (NotADirectoryError, FileExistsError):
        raise WorkspaceError(
            f"cannot write {rel!r}: a parent of it is a file, not a directory; choose another path"
        ) from None
    except OSError as exc:
        raise WorkspaceError(f"cannot write {rel!r}: {exc.strerror or exc}") from None


def _cap_reply(text: str, cap: int) -> str:
    """Keep the first line (the verdict) and the tail, at most ``cap`` characters in all."""
    if len(text) <= cap:
        return text
    first, _, rest = text.partition("\n")
    marker = "\n[... earlier output elided ...]\n"
    keep = max(cap - len(first) - len(marker), 0)
    return (first + marker + _tail(rest, keep))[:cap]


__all__ = [
    "ADDRESS_SPACE_BYTES",
    "AGENT_OUTPUT_CAP_CHARS",
    "CPU_LIMIT_SECONDS",
    "FILE_SIZE_BYTES",
    "MAX_PROCESSES",
    "OUTPUT_CAPTURE_BYTES",
    "PLANNING_TEST_OUTPUT_TAIL_CHARS",
    "SCRIPT_STDERR_TAIL_CHARS",
    "SCRIPT_STDOUT_TAIL_CHARS",
    "SCRIPT_TIMEOUT_SECONDS",
    "STDLIB_SHADOW_NAMES",
    "TEST_OUTPUT_TAIL_CHARS",
    "TEST_TIMEOUT_SECONDS",
    "OutputCapture",
    "RunResult",
    "SandboxLimits",
    "TestRun",
    "Workspace",
    "WriteRecord",
    "changed_symbols",
    "clear_memo",
    "extract_symbols",
    "memo_key",
    "parse_pytest_output",
    "run_pytest",
    "run_sandboxed",
    "sandbox_processes",
    "script_reply",
    "stop_sandbox",
    "tests_reply",
    "tree_digest",
]
