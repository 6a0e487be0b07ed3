"""Hidden evaluations whose verdicts no workspace code can reach: a judge that never runs the code it judges.

A hidden evaluation runs a task's own test files (its hidden suite, and the pristine copies of its public tests,
which confirm a team's claim of success) against what a team left in its workspace. It is two processes:

* **the judge** (``_judge_session.py``): a pytest session that runs the tests and decides every verdict. It runs
  on the host, outside every sandbox, forked from the trusted evaluation server (``_trusted_server.py``) or as a
  fresh ``python -s -P`` interpreter, in a directory of its own under :func:`~latte_lab.sandbox.paths.judge_root`
  that holds the tests, the data they read (expected values among them) and a copy of the workspace's files, read
  there as data only: an audit hook refuses to compile or run any of them. It imports the workspace's modules as
  proxies and runs no line of their code.
* **the workspace's process** (``_workspace_host.py``): started by the sandbox as an agent's script is, on the
  trial's backend, in a throwaway copy of the workspace that holds nothing hidden. Its workers import the
  workspace's modules and run their code, one call at a time, as the judge asks; what comes back is plain data
  (None, bool, int, float, str, bytes, lists, tuples, dicts, sets, numpy arrays, pandas frames), decoded by the
  judge with strict types. Objects with state stay in the worker behind handles.

The two talk over a socket pair made here (the judge's standard input and the host's), and nothing else: no test,
expected value, verdict or file of the judge ever reaches a process that runs workspace code, and no process that
runs workspace code can read them (:mod:`latte_lab.sandbox.paths`: latte_lab's package and the judges' directory
are hidden from every untrusted run, on both backends). So code that special-cases a test, swaps a test's code,
walks the session's frames, forges its reports or returns objects that equal everything scores as the same code
without the attempt: each of these reaches only the worker. What the worker saw workspace code try (frame walks,
code swaps, pytest's internals, latte_lab's files) and any message out of protocol come back as
:attr:`TestRun.tampering`, recorded, never scored.

A test whose call into the workspace hangs, dies, floods its output or hits a recursion or memory limit fails
with a note saying which (:attr:`TestRun.notes`), and the rest of the suite runs on a new worker.

The copies leave out what would change how Python starts rather than what the code does (``conftest.py``,
``sitecustomize``/``usercustomize``, ``.pth``, byte code, caches) and links leaving the workspace and special
files, each named in the notes (:func:`copy_for_evaluation`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from latte_lab.sandbox.backends import Backend, backend_for
from latte_lab.sandbox.limits import TEST_TIMEOUT_SECONDS, SandboxLimits
from latte_lab.sandbox.paths import judge_root
from latte_lab.sandbox.request import RunRequest
from latte_lab.sandbox.run import RunResult, confined, run_sandboxed
from latte_lab.sandbox.zygote import IMPORT_OPTION

JUDGE_SCRIPT = str(Path(__file__).with_name("_judge_session.py"))
HOST_SCRIPT = str(Path(__file__).with_name("_workspace_host.py"))
HOST_NAME = ".latte_lab-host.py"  # the host script's copy in the workspace's copy (a script run; never imported)
HOST_VALUES_SCRIPT = str(Path(__file__).with_name("_workspace_values.py"))  # what the host loads by path
HOST_VALUES_NAME = ".latte_lab-host-values.py"  # its copy beside the host's
REPORT_NAME = ".latte_lab-report.jsonl"  # the judge's report, in its own directory
# pytest arguments of every judge's session: no workspace configuration or conftest, no cache, no third-party
# plugin (PYTEST_DISABLE_PLUGIN_AUTOLOAD), short tracebacks, test modules imported without touching sys.path.
# ``--confcutdir=.``: with ``-c /dev/null`` alone pytest would look for conftest files down from ``/``.
SESSION_ARGS = ("-q", "-rfE", "--tb=short", "-p", "no:cacheprovider", "--noconftest", "--rootdir=.",
                "--confcutdir=.", "-c", os.devnull, "--import-mode=importlib")
SESSION_ENV = {"PYTHONPATH": "", "PYTHONNOUSERSITE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
CALL_TIMEOUT_SECONDS = 10.0  # one call of a test into the workspace; a task may ask for more
HOST_GRACE_SECONDS = 10.0  # the workspace's process outlives the judge's timeout by this much at most
OUTPUT_CAP_BYTES = 8 * 2**20  # what one worker may print before it is stopped (a test then fails with a note)
# Files of a workspace that change how Python or pytest start, rather than what the code does.
LEFT_OUT_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
LEFT_OUT_SUFFIXES = (".pth", ".pyc", ".pyo")
CACHE_DIR_NAMES = frozenset({"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache"})
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def import_options(imports: Iterable[str]) -> list[str]:
    """The judge's leading ``--import=<library>`` arguments for ``imports`` (which also key the memo of a
    hidden evaluation); ValueError for a name that is not a module name.

    >>> import_options(["pandas"])
    ['--import=pandas']
    """
    imports = list(imports)
    bad = [name for name in imports if not MODULE_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"imports must be module names (such as 'pandas'), not {bad}")
    return [f"{IMPORT_OPTION}{name}" for name in imports]


def copy_for_evaluation(src: Path, dst: Path) -> list[str]:
    """Copy the workspace ``src`` to ``dst`` without what :data:`LEFT_OUT_NAMES` and
    :data:`LEFT_OUT_SUFFIXES` name, caches, links that leave ``src`` and special files; the notes on
    what was left out, one each.

    >>> src, dst = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp()) / "copy"
    >>> _ = (src / "conftest.py").write_text("def pytest_runtest_makereport(): pass")
    >>> _ = (src / "mod.py").write_text("x = 1")
    >>> os.mkfifo(src / "pipe")
    >>> os.symlink("/etc/passwd", src / "link")
    >>> copy_for_evaluation(src, dst)
    ['conftest.py: left out of the evaluation (it changes how pytest runs)', 'link: left out of the evaluation (a link to /etc/passwd, outside the workspace)', 'pipe: left out of the evaluation (a FIFO)']
    >>> sorted(p.name for p in dst.iterdir())
    ['mod.py']
    """
    notes: list[str] = []
    root = src.resolve()
    dst.mkdir(parents=True, exist_ok=True)
    stack = [(root, dst, "")]
    while stack:
        directory, target, prefix = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            notes.append(f"{prefix or '.'}: not readable ({exc.strerror or exc})")
            continue
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                link = os.readlink(entry.path)
                inside = Path(os.path.realpath(entry.path)).is_relative_to(root)
                if inside and not os.path.isabs(link):
                    os.symlink(link, target / entry.name)
                else:
                    notes.append(f"{rel}: left out of the evaluation (a link to {link}, outside the workspace)")
            elif stat.S_ISDIR(info.st_mode):
                if entry.name in CACHE_DIR_NAMES:
                    continue
                (target / entry.name).mkdir(exist_ok=True)
                stack.append((Path(entry.path), target / entry.name, rel + "/"))
            elif stat.S_ISREG(info.st_mode):
                if entry.name in LEFT_OUT_NAMES or entry.name.endswith(LEFT_OUT_SUFFIXES):
                    notes.append(f"{rel}: left out of the evaluation (it changes how pytest runs)"
                                 if entry.name == "conftest.py" else
                                 f"{rel}: left out of the evaluation (it changes how Python starts or imports)")
                    continue
                shutil.copyfile(entry.path, target / entry.name, follow_symlinks=False)
            else:
                notes.append(f"{rel}: left out of the evaluation (a {_kind(info.st_mode)})")
    return sorted(notes)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def workspace_modules(copy: Path, test_files: Iterable[str]) -> list[str]:
    """The top-level modules and packages of the workspace's copy (``x.py``, ``pkg/``) that a test's import reaches
    in the workspace's process; the evaluation's own test files are not among them.

    >>> root = Path(tempfile.mkdtemp())
    >>> for name in ("a.py", "test_a.py", "notes.txt", ".hidden.py"):
    ...     _ = (root / name).write_text("")
    >>> (root / "pkg").mkdir()
    >>> workspace_modules(root, ["test_a.py"])
    ['a', 'pkg']
    """
    own = {Path(p).parts[0].removesuffix(".py") for p in test_files}
    names = set()
    for entry in os.scandir(copy):
        name = entry.name
        if name.startswith(".") or name in CACHE_DIR_NAMES:
            continue
        if entry.is_dir(follow_symlinks=False):
            names.add(name)
        elif name.endswith(".py"):
            names.add(name[:-3])
    return sorted(n for n in names - own if n.isidentifier())


def read_report(path: Path) -> dict:
    """What the judge reported (see ``_judge_session.py``): ``{"tests": {node: outcome}, "collected": [node, ...] |
    None, "collect_errors": [...], "notes": [(node, text), ...], "tampering": [(what, where), ...], "ended":
    bool}``. The judge alone writes the file; a line that does not parse (a judge killed mid-line) is skipped."""
    found: dict = {"tests": {}, "collected": None, "collect_errors": [], "notes": [], "tampering": [], "ended": False}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "test" in record:
            found["tests"][record["test"]] = record["outcome"]
        elif "collected" in record:
            found["collected"] = list(record["collected"])
        elif "collect_error" in record:
            found["collect_errors"].append(record["collect_error"])
        elif "note" in record:
            found["notes"].append((record["note"], record["text"]))
        elif "tampering" in record:
            found["tampering"].append((str(record["tampering"]), str(record["where"])))
        elif "end" in record:
            found["ended"] = True
    return found


def run_judged(
    root: Path | str,
    test_files: Mapping[str, str],
    run_paths: Iterable[str],
    *,
    timeout: float = TEST_TIMEOUT_SECONDS,
    limits: SandboxLimits | None = None,
    sandbox: str | Backend = "auto",
    extra_files: Mapping[str, str] | None = None,
    imports: Iterable[str] = (),
    call_timeout: float = CALL_TIMEOUT_SECONDS,
):
    """Run ``run_paths`` (test files among ``test_files``, {relative path: text}) in a judge's session against the
    workspace at ``root``, with ``extra_files`` (data the tests read) beside them in the judge's directory only; a
    :class:`~latte_lab.sandbox.pytest.TestRun` of the judge's verdicts, whose ``tampering`` lists what the workspace
    was seen trying and whose ``notes`` say what was left out of the copies and why a test met a limit. Never
    raises for anything the code under test does.

    ``imports``: installed libraries the tests read their data with (``("pandas",)``), imported in the judge from
    site-packages first (a session that names any is forked from the trusted server's mode that has numpy and
    pandas loaded). ``call_timeout``: seconds one call of a test into the workspace may take. Raises ValueError for
    a name that is not a module name."""
    from latte_lab.sandbox.pytest import TestRun

    options = import_options(imports)
    run_paths = [str(p) for p in run_paths]
    limits = limits or SandboxLimits()
    host_runs: list[RunResult] = []
    backend = backend_for(sandbox)
    with tempfile.TemporaryDirectory(prefix="judge-", dir=judge_root()) as judge_dir, \
            backend.scratch() as (copy, reuse):
        judge = Path(judge_dir)
        notes = copy_for_evaluation(Path(root), copy)
        copy_for_evaluation(Path(root), judge)  # the workspace's files, read there as data
        for path, text in {**(extra_files or {}), **test_files}.items():
            full = confined(judge, path)
            full.parent.mkdir(parents=True, exist_ok=True)
            if full.is_symlink() or full.is_dir():
                _remove(full)
            full.write_text(text, encoding="utf-8")
        for script, name in ((HOST_SCRIPT, HOST_NAME), (HOST_VALUES_SCRIPT, HOST_VALUES_NAME)):
            host = copy / name
            if host.is_symlink() or host.is_dir():
                _remove(host)
            shutil.copyfile(script, host)
        args = [*options, f"--report={judge / REPORT_NAME}",
                f"--modules={','.join(workspace_modules(copy, test_files))}",
                f"--trusted={','.join(test_files)}", f"--call-timeout={call_timeout:g}",
                "--", *SESSION_ARGS, *run_paths]
        judge_end, host_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # the workspace's process: an agent's script, as far as the sandbox goes, that hands back nothing
        config = {"output_cap": OUTPUT_CAP_BYTES, "values": HOST_VALUES_NAME}
        host = RunRequest([sys.executable, HOST_NAME, json.dumps(config)], copy,
                          timeout=timeout + HOST_GRACE_SECONDS, limits=limits, kind="script", export=[], reuse=reuse,
                          stdin=host_end.detach())
        worker = threading.Thread(target=lambda: host_runs.append(run_sandboxed(host, sandbox=backend)),
                                  name="latte_lab-workspace-host", daemon=True)
        worker.start()
        try:  # the judge: trusted, on the host, whatever the backend (backend_for)
            run = run_sandboxed(RunRequest([sys.executable, "-s", "-P", JUDGE_SCRIPT, *args], judge, timeout=timeout,
                                           limits=limits, env=SESSION_ENV, kind="judge", stdin=judge_end.detach()),
                                sandbox=backend)
        finally:
            worker.join()
        found = read_report(judge / REPORT_NAME)
    tests: dict[str, str] = found["tests"]
    cases = list(tests.items())
    for node in found["collected"] or ():
        if node not in tests:
            cases.append((node, "error"))  # collected, never given a verdict: a crash or an exit mid-run
    cases += [(node, "error") for node in found["collect_errors"]]
    counts = {o: sum(1 for _, outcome in cases if outcome == o) for o in ("passed", "failed", "error", "skipped")}
    errors = counts["error"]
    if not found["ended"]:
        notes.append("the judge's session ended before its last report (a timeout?): tests without a verdict "
                     "count as errors")
        errors = max(errors, 1)
    notes += [f"{node}: {text}" for node, text in found["notes"]]
    notes += list(run.notes)
    stderr = run.stderr
    if host_runs:
        host_run = host_runs[0]
        notes += [f"the workspace's process: {note}" for note in host_run.notes]
        output = (host_run.stdout + host_run.stderr).strip()
        if output:
            stderr += f"\n--- what the workspace's code printed ---\n{output}\n"
    bad = [node for node, outcome in cases if outcome == "failed"] + [node for node, o in cases if o == "error"]
    return TestRun(
        returncode=run.returncode, stdout=run.stdout, stderr=stderr, seconds=run.seconds, timed_out=run.timed_out,
        truncated=run.truncated, notes=tuple(dict.fromkeys(notes)), timeout=run.timeout,
        passed=counts["passed"], failed=counts["failed"], errors=errors, skipped=counts["skipped"],
        failed_tests=tuple(dict.fromkeys(bad)), cases=tuple(cases),
        tampering=tuple(dict.fromkeys(found["tampering"])),
    )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
