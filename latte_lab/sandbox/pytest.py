"""Sandboxed pytest runs: results from pytest's JUnit XML report, and a memo keyed by the files' content.

Every run writes a JUnit report (xunit1, which records each test's file) into the directory it runs
in, under a hidden name (:data:`JUNIT_NAME`) removed right after the run; counts and failing node ids come from that report,
for public and hidden suites alike (:func:`parse_junit` is the one parser). A run that leaves no report
(a crash, a timeout, a usage error) counts as an error, never as a pass.

Test runs are memoised by content (:func:`tree_digest`): the same test arguments over byte-identical
files return the stored :class:`TestRun` with ``cached=True`` and the originally measured seconds, so a
trial's virtual clock stays deterministic and repeated runs are free. The memo lives in the process; with
a memo directory (``memo_dir``, or ``$LATTE_LAB_MEMO_DIR``: :func:`default_memo_dir`) it is also kept on
disk and shared by every process that names the same directory -- a sweep's workers, a notebook's kernel
and a script, the next session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from latte_lab.sandbox.backends import Backend, backend_for
from latte_lab.sandbox.limits import TEST_TIMEOUT_SECONDS, SandboxLimits
from latte_lab.sandbox.request import RunRequest
from latte_lab.sandbox.run import RunResult, confined, run_sandboxed

PYTEST_ARGS = ("-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider")  # the public test command
# Third-party pytest plugins installed beside latte_lab (nbval pulls in jsonschema, ...) add ~3 s to
# every test run and no task suite needs them; set to False to let the agents' runs load them.
PYTEST_DISABLE_PLUGIN_AUTOLOAD = True
# A run's report, in the directory it runs in (the one place every backend lets it write); removed
# before and after the run. A fixed name: pytest's argv, which test code can see, stays the same.
JUNIT_NAME = ".latte_lab-junit.xml"
JUNIT_OPTIONS = ("-o", "junit_family=xunit1")  # xunit1 records each test's file, which node ids need
JUNIT_MAX_BYTES = 16 * 2**20  # a larger report was not written by pytest for a task suite: unreadable
MEMO_SCHEMA_VERSION = 4  # bump when TestRun or the key changes, to invalidate on-disk memos
MEMO_DIR_VAR = "LATTE_LAB_MEMO_DIR"  # a directory that memoised test runs are shared through (default_memo_dir)
CACHE_DIR_NAMES = frozenset({"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache"})
# pytest's configuration files, in the order pytest prefers them, with the section that makes each one
# pytest's (None: the file counts whatever it holds).
CONFIG_FILES = (("pytest.ini", None), (".pytest.ini", None), ("pyproject.toml", "[tool.pytest"),
                ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]"))
WORKSPACE_ROOT_ARGS = ("--rootdir=.", "--confcutdir=.")  # node ids and conftest files from the workspace only
OUTCOMES = ("passed", "failed", "error", "skipped")
# The pytest versions latte_lab was tested with (pyproject's bound says the same). Test runs use pytest's public
# API only, whatever the version; outside the range a warning names it once.
TESTED_PYTEST = ((9, 0), (10, 0))
PYTEST_NORMAL_EXITS = (0, 1, 2, 5)  # all passed, some failed, interrupted by errors, no tests collected


@dataclass(frozen=True)
class TestRun(RunResult):
    """Outcome of a pytest run, with the counts from its JUnit report."""

    __test__ = False  # not a pytest test class, despite the name

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0  # skipped and xfailed
    failed_tests: tuple[str, ...] = ()  # node ids of failed tests, then of errored ones (as pytest -rfE lists them)
    cases: tuple[tuple[str, str], ...] = ()  # (node id, outcome) of every reported test, in report order
    cached: bool = False  # served from the content-addressed memo
    tampering: tuple[tuple[str, str], ...] = ()  # (what, file:line) a trusted session refused or undid

    @property
    def total(self) -> int:
        """Tests that ran to an outcome that counts for a pass rate (skipped excluded)."""
        return self.passed + self.failed + self.errors


# --------------------------------------------------------------------------------------------------
# JUnit reports
# --------------------------------------------------------------------------------------------------


def _node_id(case: ET.Element) -> str:
    """pytest's node id of a ``<testcase>`` of an xunit1 report."""
    classname, name, file = case.get("classname", ""), case.get("name", ""), case.get("file")
    if not classname:  # a module that failed to collect
        return file or name
    if file and file.endswith(".py"):
        module = file[:-3].replace("/", ".")
        if classname == module:
            return f"{file}::{name}"
        if classname.startswith(module + "."):
            classes = classname[len(module) + 1 :].split(".")
            return "::".join([file, *classes, name])
    return f"{classname.replace('.', '/')}.py::{name}"


def parse_junit(xml_text: str) -> tuple[tuple[str, str], ...]:
    """``(node id, outcome)`` of every test case of a pytest JUnit report (xunit1), in report order.

    Outcomes: ``passed`` (xpassed too), ``failed``, ``error`` (setup/teardown errors and modules that
    failed to collect), ``skipped`` (xfailed too). A test that fails and then errors in teardown is
    reported twice, as pytest counts it. Raises ``xml.etree.ElementTree.ParseError`` on malformed XML.

    >>> parse_junit('<testsuites><testsuite><testcase classname="test_a.TestX" name="test_y" file="test_a.py">'
    ...             '<failure message="assert 0"/></testcase></testsuite></testsuites>')
    (('test_a.py::TestX::test_y', 'failed'),)
    """
    cases = []
    for case in ET.fromstring(xml_text).iter("testcase"):
        kinds = {child.tag for child in case}
        if "error" in kinds:
            outcome = "error"
        elif "failure" in kinds:
            outcome = "failed"
        elif "skipped" in kinds:
            outcome = "skipped"
        else:
            outcome = "passed"
        cases.append((_node_id(case), outcome))
    return tuple(cases)


def outcomes_by_class(cases: Iterable[tuple[str, str]]) -> dict[str, dict[str, str]]:
    """``{innermost class (or module) name: {test name: outcome}}``; of a test reported twice the worse
    outcome is kept.

    >>> outcomes_by_class([("t.py::TestA::test_x[1]", "passed"), ("t.py::test_f", "failed")])
    {'TestA': {'test_x[1]': 'passed'}, 't': {'test_f': 'failed'}}
    """
    result: dict[str, dict[str, str]] = {}
    for node_id, outcome in cases:
        head, bracket, params = node_id.partition("[")
        parts = head.split("::")
        name = parts[-1] + bracket + params
        owner = parts[-2] if len(parts) > 2 else PurePosixPath(parts[0]).stem
        bucket = result.setdefault(owner, {})
        if bucket.get(name) not in ("failed", "error"):
            bucket[name] = outcome
    return result


def _read_report(path: Path) -> tuple[tuple[str, str], ...] | None:
    """The cases of the report at ``path`` (then removed), or None when there is no readable report."""
    try:
        if path.stat().st_size > JUNIT_MAX_BYTES:
            return None
        return parse_junit(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ET.ParseError):
        return None
    finally:
        try:
            path.unlink()
        except OSError:
            pass


def _test_run_from(run: RunResult, cases: tuple[tuple[str, str], ...] | None) -> TestRun:
    notes = list(run.notes)
    if "No module named pytest" in run.stderr:
        notes.append(f"pytest is not installed for {sys.executable}; install it with `pip install pytest`")
    counts = dict.fromkeys(OUTCOMES, 0)
    for _, outcome in cases or ():
        counts[outcome] += 1
    bad = [node for node, outcome in cases or () if outcome == "failed"]
    bad += [node for node, outcome in cases or () if outcome == "error"]
    errors = counts["error"]
    if (run.timed_out or cases is None) and errors == 0:
        errors = 1  # a timeout, crash or usage error counts as an error, never as a pass
        if not run.timed_out and not notes:
            notes.append("pytest ended without a result report (crash, usage or collection error)")
    elif run.returncode not in PYTEST_NORMAL_EXITS and errors == 0:
        errors = 1
        notes.append(f"pytest stopped with exit code {run.returncode} (a usage or internal error)")
    return TestRun(
        returncode=run.returncode,
        stdout=run.stdout,
        stderr=run.stderr,
        seconds=run.seconds,
        timed_out=run.timed_out,
        truncated=run.truncated,
        notes=tuple(notes),
        timeout=run.timeout,
        passed=counts["passed"],
        failed=counts["failed"],
        errors=errors,
        skipped=counts["skipped"],
        failed_tests=tuple(dict.fromkeys(bad)),
        cases=cases or (),
    )


# --------------------------------------------------------------------------------------------------
# Running pytest
# --------------------------------------------------------------------------------------------------


def _pytest_available() -> bool:
    return importlib.util.find_spec("pytest") is not None


_VERSION_CHECKED: dict[str, bool] = {}


def pytest_version_tested(version: str | None = None) -> bool:
    """Whether the installed pytest (or ``version``) lies in :data:`TESTED_PYTEST`; said once per process when not.

    >>> pytest_version_tested("9.2.0"), pytest_version_tested("8.4.1")
    (True, False)
    """
    if version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as installed

        try:
            version = installed("pytest")
        except PackageNotFoundError:
            return False
    if version in _VERSION_CHECKED:
        return _VERSION_CHECKED[version]
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit()) or "0"
        parts.append(int(digits))
    (low, high) = TESTED_PYTEST
    ok = low <= tuple(parts) < high
    _VERSION_CHECKED[version] = ok
    if not ok:
        import warnings

        warnings.warn(f"pytest {version} is outside the range latte_lab was tested with (>={low[0]}.{low[1]},"
                      f"<{high[0]}.{high[1]}): test runs use its public API only, as always; if one fails "
                      f"oddly, install a tested pytest with `pip install 'pytest>={low[0]}.{low[1]},<{high[0]}'`",
                      RuntimeWarning, stacklevel=2)
    return ok


def infrastructure_error(run: TestRun) -> str | None:
    """Why ``run`` says nothing about the code it was to test, in one line (pytest missing, the sandbox could
    not start the command), or None for a run that tested the code, whatever the outcome.

    >>> infrastructure_error(_pytest_missing(10)).startswith("pytest is not installed")
    True
    """
    for text in (*run.notes, run.stdout[:500], run.stderr[-2000:]):
        for line in text.splitlines():
            if "pytest is not installed" in line or line.startswith("sandbox: could not start"):
                return line.strip()
    return None


def runner_missing() -> str | None:
    """Why no trial could run its tests in this interpreter (one line), or None when pytest is there: a trial
    checks this before its first round."""
    if _pytest_available():
        return None
    return (f"pytest is not installed for {sys.executable}, and every trial runs its tests with it: "
            f"install it with `pip install 'pytest>={TESTED_PYTEST[0][0]}.{TESTED_PYTEST[0][1]},<{TESTED_PYTEST[1][0]}'`")


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


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a workspace (symlinks as links, caches skipped)."""
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*CACHE_DIR_NAMES))


def run_pytest(
    cwd: Path | str,
    args: Iterable[str] = (),
    *,
    timeout: float = TEST_TIMEOUT_SECONDS,
    limits: SandboxLimits | None = None,
    extra_files: Mapping[str, str] | None = None,
    sandbox: str | Backend = "auto",
) -> TestRun:
    """Run ``python -m pytest -q -rfE -p no:cacheprovider <args>`` in ``cwd``, sandboxed (``sandbox``:
    the backend, see :func:`~latte_lab.sandbox.backends.backend_for`), which may fork it from a process that has
    pytest imported already (:mod:`latte_lab.sandbox.backends`); the result is the same.

    With ``extra_files`` ({relative path: text}, e.g. a hidden suite) the run happens in a copy of ``cwd``, made
    in a scratch directory the backend gives (:meth:`~latte_lab.sandbox.backends.Backend.scratch`), with those
    files added, so they never appear in ``cwd``. Timeouts, crashes and collection errors come back as a TestRun
    with ``errors >= 1``, never as an exception.
    """
    # PYTEST_ARGS already has -q; a second one (-qq) would change what the agents are shown.
    args = [str(a) for a in args if str(a) not in ("-q", "--quiet")]
    if not _pytest_available():
        return _pytest_missing(timeout)
    backend = backend_for(sandbox)
    if not extra_files:  # the workspace's own run: a directory its caller runs in again
        return _run_in(Path(cwd), args, timeout, limits, backend, None, reuse=True)
    with backend.scratch() as (copy, reuse):
        copy_tree(Path(cwd), copy)
        for path, text in extra_files.items():
            full = confined(copy, path)
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text, encoding="utf-8")
        # The copy is removed after the run; of it, only the run's report is handed back.
        return _run_in(copy, args, timeout, limits, backend, [JUNIT_NAME], reuse=reuse)


def config_args(root: Path) -> list[str]:
    """Arguments that keep a run's pytest configuration inside its workspace.

    pytest looks for its configuration in the run's directory and then in every directory above it, so a
    workspace under a project (``runs/`` in a repository whose pyproject.toml configures pytest, say)
    would run with that project's options and print its warnings, and a trial's output would depend on
    where its runs folder is. The workspace's own configuration file, if it has one, is used; otherwise
    none (``-c /dev/null``); the workspace is the root directory either way, and no ``conftest.py`` above
    it is loaded (``--confcutdir``: without it, ``-c /dev/null`` also sends pytest looking for conftest
    files in every directory up to ``/``, which tripled a small suite's session).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> config_args(root)
    ['--rootdir=.', '--confcutdir=.', '-c', '/dev/null']
    >>> _ = (root / "setup.cfg").write_text("[metadata]\\nname = x\\n")
    >>> _ = (root / "tox.ini").write_text("[pytest]\\naddopts = -ra\\n")
    >>> config_args(root)
    ['--rootdir=.', '--confcutdir=.', '-c', 'tox.ini']
    """
    for name, section in CONFIG_FILES:
        path = root / name
        try:
            if path.is_file() and (section is None or section in path.read_text(encoding="utf-8", errors="replace")):
                return [*WORKSPACE_ROOT_ARGS, "-c", name]
        except OSError:
            continue
    return [*WORKSPACE_ROOT_ARGS, "-c", os.devnull]


def _run_in(root: Path, args: list[str], timeout: float, limits: SandboxLimits | None, backend: Backend,
            export: list[str] | None, *, reuse: bool) -> TestRun:
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} if PYTEST_DISABLE_PLUGIN_AUTOLOAD else {}
    report = root.resolve() / JUNIT_NAME
    report.unlink(missing_ok=True)
    pytest_args = [*PYTEST_ARGS[2:], *config_args(root), *args, f"--junitxml={report}", *JUNIT_OPTIONS]
    pytest_version_tested()  # warns once about an untested pytest
    request = RunRequest([sys.executable, *PYTEST_ARGS[:2], *pytest_args], root, timeout=timeout, limits=limits,
                         env=env, kind="pytest", export=export, reuse=reuse, report=JUNIT_NAME)
    return _test_run_from(run_sandboxed(request, sandbox=backend), _read_report(report))


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
                entries.append((rel, "symlink:" + hashlib.sha256(os.readlink(item.path).encode()).hexdigest()))
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


_SHARED_MEMO_DIR: list[Path] = []  # the memo directories of the sweeps this process works for (sharing_memo)


def default_memo_dir() -> Path | None:
    """The on-disk memo shared between processes: ``$LATTE_LAB_MEMO_DIR`` if set (``~`` expanded), else the
    memo directory of the sweep this process works for (:func:`sharing_memo`), else None.

    A workspace created without ``memo_dir`` uses it, and so does every trial (its public test runs and the
    hidden evaluation): set it once, for a notebook and the scripts beside it or for every sweep, and a
    workspace state that any of them has tested before costs nothing again.
    Entries are content-addressed and written atomically, so concurrent writers are safe; what a hit
    changes is only the run's ``cached`` flag and its measured seconds (which no trial result uses)."""
    value = os.environ.get(MEMO_DIR_VAR, "").strip()
    if value:
        return Path(value).expanduser()
    return _SHARED_MEMO_DIR[-1] if _SHARED_MEMO_DIR else None


@contextlib.contextmanager
def sharing_memo(memo_dir: Path | str):
    """For the ``with`` block, :func:`default_memo_dir` is ``memo_dir`` unless ``$LATTE_LAB_MEMO_DIR`` names one.

    A local sweep runs in one (its own ``<out>/.sweep/memo``, when none is set already), so that its workers,
    forked inside it, share their test runs: a trial of one seed reaching a state that a trial of another
    seed tested runs no session. Around a series of sweeps (evaluations of a fit on the same seeds, say)
    it makes them share one memo."""
    _SHARED_MEMO_DIR.append(Path(memo_dir).expanduser())
    try:
        yield
    finally:
        _SHARED_MEMO_DIR.pop()


@functools.lru_cache(maxsize=64)
def _limits_fields(limits: SandboxLimits) -> dict:
    """``dataclasses.asdict(limits)``, made once per limits (frozen, so it cannot change): a trial's every test
    run asks for its memo key, and the deep copy was a sixth of the key's time. Callers only read it."""
    return dataclasses.asdict(limits)


def memo_key(root: Path | str, args: Iterable[str], limits: SandboxLimits, sandbox: str = "local",
             extra_files: Mapping[str, str] | None = None) -> str:
    """SHA-256 over the test arguments, every file's content hash, the limits, the backend (``"bwrap"``
    or ``"local"``: what a test can reach differs) and the interpreter; with ``extra_files`` (a hidden
    suite run on a copy of the workspace), their content too."""
    payload = {
        "v": MEMO_SCHEMA_VERSION,
        "sandbox": sandbox,
        "python": sys.executable,
        "args": list(args),
        "limits": _limits_fields(limits),
        "plugins": not PYTEST_DISABLE_PLUGIN_AUTOLOAD,
        "files": tree_digest(root),
    }
    if extra_files:
        payload["extra_files"] = sorted((path, hashlib.sha256(text.encode()).hexdigest())
                                        for path, text in extra_files.items())
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _from_json(data: dict) -> TestRun:
    data = dict(data)
    data["cases"] = tuple(tuple(case) for case in data.get("cases", ()))
    data["tampering"] = tuple(tuple(item) for item in data.get("tampering", ()))
    return TestRun(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def memo_get(memo_dir: Path | None, key: str) -> TestRun | None:
    """The memoised run for ``key`` (in memory, else in ``memo_dir``), or None."""
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
    if hit is not None or memo_dir is None:
        return hit
    try:
        run = _from_json(json.loads((memo_dir / f"{key}.json").read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        return None  # a corrupt or old-format entry is a miss
    with _MEMO_LOCK:
        _MEMO[key] = run
    return run


def memo_storable(run: TestRun) -> bool:
    """Whether ``run`` may be memoised: a run that timed out, or found no pytest, says nothing stable about
    the files."""
    return not run.timed_out and "pytest is not installed" not in run.stdout


def memo_put(memo_dir: Path | None, key: str, run: TestRun) -> None:
    """Remember ``run`` for ``key`` in memory and, with ``memo_dir``, on disk (atomically)."""
    with _MEMO_LOCK:
        _MEMO[key] = run
    if memo_dir is None:
        return
    tmp = memo_dir / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        memo_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(dataclasses.asdict(run)))
        os.replace(tmp, memo_dir / f"{key}.json")  # concurrent trials never read half a file
    except OSError as exc:  # a full disk or a read-only directory: the run itself stands, kept in memory
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        _warn_memo_unwritable(memo_dir, exc)


_MEMO_WARNED: set[Path] = set()


def _warn_memo_unwritable(memo_dir: Path, exc: OSError) -> None:
    import warnings

    with _MEMO_LOCK:
        if memo_dir in _MEMO_WARNED:
            return
        _MEMO_WARNED.add(memo_dir)
    warnings.warn(f"test-run memo directory {memo_dir} is not writable ({exc.strerror or exc}); runs are "
                  f"memoised in this process only", RuntimeWarning, stacklevel=3)
