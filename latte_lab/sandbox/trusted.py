"""Hidden evaluations whose verdicts the code under test cannot steer.

A hidden evaluation runs a task's own test files (its hidden suite, and the pristine copies of its
public tests, which confirm a team's claim of success) against a throwaway copy of a workspace. Agents
write that workspace, so the copy leaves out what could change how pytest runs rather than what the code
does: every ``conftest.py``, ``sitecustomize``/``usercustomize`` modules, ``.pth`` files, byte code
without its source, and caches (pytest reads no configuration file of the workspace either: ``-c
/dev/null``, ``--noconftest``). Symbolic links that leave the workspace and special files (FIFOs,
sockets, devices) are left out too, and each is named in the run's notes.

The session is run by ``_trusted_boot.py`` with an empty ``PYTHONPATH``: in a child forked from the trusted
evaluation server (``_trusted_server.py``: a process that has imported pytest, pluggy, unittest and the boot
script from the installed packages and runs no workspace code; on the bubblewrap backend, the init of a kept
sandbox of its own), which then does what ``python -s -P <boot script>`` does; or, where the server is off
(:func:`use_server`) or cannot start, in that fresh interpreter. What it reports comes over a signed channel
(see that file's docstring), checked here:
a test passes only when a correctly signed, correctly numbered line says so. Whatever the session saw
the code under test try (patching pytest or unittest, registering hooks, forging channel lines) comes
back as :attr:`TestRun.tampering`, and was undone or refused before any verdict.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from latte_lab.sandbox import stage
from latte_lab.sandbox.limits import TEST_TIMEOUT_SECONDS, SandboxLimits
from latte_lab.sandbox.run import confined, run_sandboxed
from latte_lab.sandbox.zygote import IMPORT_OPTION

BOOT_SCRIPT = str(Path(__file__).with_name("_trusted_boot.py"))
BOOT_NAME = ".latte_lab-trusted-boot.py"  # the boot script's copy in the evaluated copy (never imported)
CHANNEL_PREFIX = "@@latte_lab-verdict "  # _trusted_boot.PREFIX
# pytest arguments of every trusted session: no workspace configuration or conftest, no cache, no
# third-party plugin (PYTEST_DISABLE_PLUGIN_AUTOLOAD), short tracebacks for the evaluation's output.
# ``--confcutdir=.``: with ``-c /dev/null`` alone the conftest boundary is ``/dev``, and pytest collects down to
# the copy from the directory below ``/``, listing every directory on the way (each entry of ``/tmp`` where the
# copy is a temporary directory).
SESSION_ARGS = ("-q", "-rfE", "--tb=short", "-p", "no:cacheprovider", "--noconftest", "--rootdir=.",
                "--confcutdir=.", "-c", os.devnull)
SESSION_ENV = {"PYTHONPATH": "", "PYTHONNOUSERSITE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
# Files of a workspace that change how Python or pytest start, rather than what the code does.
LEFT_OUT_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
LEFT_OUT_SUFFIXES = (".pth", ".pyc", ".pyo")
CACHE_DIR_NAMES = frozenset({"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache"})
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
USE_SERVER = True  # sessions forked from the trusted evaluation server; False: a fresh interpreter each
SERVER_DISABLE_VAR = "LATTE_LAB_NO_TRUSTED_SERVER"  # =1 in the environment: a fresh interpreter each


def import_options(imports: Iterable[str]) -> list[str]:
    """The boot script's leading ``--import=<library>`` arguments for ``imports`` (which also key the memo of a
    hidden evaluation); ValueError for a name that is not a module name.

    >>> import_options(["pandas"])
    ['--import=pandas']
    """
    imports = list(imports)
    bad = [name for name in imports if not MODULE_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"imports must be module names (such as 'pandas'), not {bad}")
    return [f"{IMPORT_OPTION}{name}" for name in imports]


def use_server() -> bool:
    """Whether hidden evaluations are forked from the trusted evaluation server (:data:`USE_SERVER` and no
    ``LATTE_LAB_NO_TRUSTED_SERVER=1``; the local backend's fork servers must be on too, and the bubblewrap
    backend's kept sandboxes)."""
    return USE_SERVER and os.environ.get(SERVER_DISABLE_VAR, "").strip().lower() in ("", "0", "false")


def copy_for_evaluation(src: Path, dst: Path) -> list[str]:
    """Copy the workspace ``src`` to ``dst`` without what :data:`LEFT_OUT_NAMES` and
    :data:`LEFT_OUT_SUFFIXES` name, caches, links that leave ``src`` and special files; the notes on
    what was left out, one each.

    >>> import tempfile
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


def read_channel(stderr: str) -> tuple[dict, str]:
    """What a trusted session reported (see ``_trusted_boot.py``), and ``stderr`` without its lines.

    Returns ``{"tests": {node: outcome}, "collected": [node, ...] | None, "collect_errors": [...],
    "tampering": [(what, where), ...], "ended": bool}``. Only the first key line is taken; a line with a
    wrong signature or out of order is itself reported as tampering and otherwise ignored.
    """
    found = {"tests": {}, "collected": None, "collect_errors": [], "tampering": [], "ended": False}
    mac = None
    expected = 1
    kept = []
    for line in stderr.splitlines(keepends=True):
        if not line.startswith(CHANNEL_PREFIX):
            if line.strip() or kept:
                kept.append(line)
            continue
        rest = line[len(CHANNEL_PREFIX):].rstrip("\n")
        tag, _, body = rest.partition(" ")
        if tag == "key":
            if mac is None:
                try:
                    mac = hmac.new(bytes.fromhex(body.strip()), digestmod=hashlib.sha256)
                except ValueError:
                    found["tampering"].append(("a malformed key line on the verdict channel", ""))
            else:
                found["tampering"].append(("a second key line on the verdict channel", ""))
            continue
        check = mac.copy() if mac is not None else None
        if check is not None:
            check.update(body.encode("ascii", "replace"))
        seq, _, record = body.partition(" ")
        kind, _, payload = record.partition(" ")
        if check is None or not hmac.compare_digest(check.hexdigest(), tag) or seq != str(expected):
            found["tampering"].append(("a forged or out-of-order line on the verdict channel", ""))
            continue
        expected += 1
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        if kind == "test":
            found["tests"][data["node"]] = data["outcome"]
        elif kind == "collected":
            found["collected"] = list(data["nodes"])
        elif kind == "collect_error":
            found["collect_errors"].append(data["node"])
        elif kind == "tamper":
            found["tampering"].append((str(data["what"]), str(data["where"])))
        elif kind == "end":
            found["ended"] = True
    return found, "".join(kept)


def run_trusted_pytest(
    root: Path | str,
    test_files: Mapping[str, str],
    run_paths: Iterable[str],
    *,
    timeout: float = TEST_TIMEOUT_SECONDS,
    limits: SandboxLimits | None = None,
    sandbox: str = "auto",
    extra_files: Mapping[str, str] | None = None,
    imports: Iterable[str] = (),
):
    """Run ``run_paths`` (test files among ``test_files``, {relative path: text}) on a copy of ``root`` made
    by :func:`copy_for_evaluation`, with ``test_files`` and ``extra_files`` (data the tests read) written
    over it, in a trusted session; a :class:`~latte_lab.sandbox.pytest.TestRun` whose cases are the
    session's signed verdicts and whose ``tampering`` lists what it refused or undid. Never raises for
    anything the code under test does.

    ``imports``: installed libraries the tests read their data with (``("pandas",)``), imported from the
    interpreter's site-packages before the copy joins ``sys.path`` (a module of the workspace by that name
    never stands in for one). A session that names any is forked from the trusted server's mode that has numpy
    and pandas loaded already (``_trusted_boot.LIBRARIES``; another library is imported in the session itself).
    Raises ValueError for a name that is not a module name."""
    from latte_lab.sandbox.pytest import TestRun

    options = import_options(imports)
    run_paths = [str(p) for p in run_paths]
    with stage.hidden_copy(sandbox) as (copy, staged):
        notes = copy_for_evaluation(Path(root), copy)
        for path, text in {**(extra_files or {}), **test_files}.items():
            full = confined(copy, path)
            full.parent.mkdir(parents=True, exist_ok=True)
            if full.is_symlink() or full.is_dir():
                _remove(full)
            full.write_text(text, encoding="utf-8")
        boot = copy / BOOT_NAME
        if boot.is_symlink() or boot.is_dir():
            _remove(boot)
        shutil.copyfile(BOOT_SCRIPT, boot)
        boot_args = [*options, *test_files, "--", *SESSION_ARGS, *run_paths]
        argv = [sys.executable, "-s", "-P", BOOT_NAME, *boot_args]
        run = run_sandboxed(argv, copy, timeout=timeout, limits=limits, env=SESSION_ENV, sandbox=sandbox,
                            export_names=[], keep_sandbox=staged, trusted=boot_args if use_server() else None)
    found, stderr = read_channel(run.stderr)
    tests: dict[str, str] = found["tests"]
    cases = list(tests.items())
    for node in found["collected"] or ():
        if node not in tests:
            cases.append((node, "error"))  # collected, never given a verdict: a crash or an exit mid-run
    cases += [(node, "error") for node in found["collect_errors"]]
    counts = {outcome: sum(1 for _, o in cases if o == outcome) for outcome in ("passed", "failed", "error", "skipped")}
    errors = counts["error"]
    if not found["ended"]:
        notes.append("the evaluation's session ended before its last report (a crash, an exit or a timeout): "
                     "tests without a verdict count as errors")
        errors = max(errors, 1)
    notes += list(run.notes)
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
