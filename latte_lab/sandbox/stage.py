"""Staging directories: where a test run happens when it is not in its workspace's own directory.

Two per process, each made on first use and used by one run at a time: the public stage, where every
workspace's own test runs on the bwrap backend happen in turn (so that one kept sandbox serves them all,
:mod:`latte_lab.sandbox.warm`), and the hidden stage, where a copy of a workspace with a hidden suite added is
run (its kept sandbox is never sent a test file ahead and runs no agent's code).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from latte_lab.sandbox import bwrap, warm
from latte_lab.sandbox.run import WRITE_BACK_FAILED, RunResult, resolve_sandbox

TestRunT = TypeVar("TestRunT", bound=RunResult)


class Stage:
    """One staging directory of this process (``<tmp>/<prefix>…/<name>``), made on first use and removed at
    exit; one run at a time (another run meanwhile does without it). A forked child makes its own.

    Each holds a lock file that its process keeps locked (``flock``) while it lives; making a stage first
    removes those of the user's earlier ones whose lock is free, left by a process that was killed (the
    kernel drops the lock with the process, whatever PID namespace it ran in)."""

    LOCK_NAME = ".owner.lock"

    def __init__(self, prefix: str, name: str, base: str | None = None):
        self.prefix, self.name, self.base = prefix, name, base
        self.pid: int | None = None
        self.path: str | None = None
        self.lock = threading.Lock()
        self._owner_fd: int | None = None

    def after_fork(self) -> None:
        self.lock = threading.Lock()  # another thread may have held it at the fork; the directory is the parent's
        if self._owner_fd is not None:  # the parent's lock stays the parent's: it holds its own descriptor
            os.close(self._owner_fd)
            self._owner_fd = None

    def remove(self) -> None:
        path = self.path
        if path and self.pid == os.getpid():
            self.pid = self.path = None
            shutil.rmtree(path, ignore_errors=True)
            if self._owner_fd is not None:
                os.close(self._owner_fd)
                self._owner_fd = None

    def _make(self) -> str:
        self.remove_stale()
        path = tempfile.mkdtemp(prefix=self.prefix, dir=self.base)
        # locked under a temporary name, then renamed: no other process finds it unlocked
        fd = os.open(os.path.join(path, self.LOCK_NAME + ".new"), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(os.path.join(path, self.LOCK_NAME + ".new"), os.path.join(path, self.LOCK_NAME))
        self._owner_fd = fd
        return path

    def remove_stale(self) -> list[str]:
        """Remove the user's stages of this kind whose owner is gone; the paths removed."""
        base = self.base or tempfile.gettempdir()
        removed = []
        try:
            entries = list(os.scandir(base))
        except OSError:
            return removed
        for entry in entries:
            if not entry.name.startswith(self.prefix) or entry.path == self.path:
                continue
            try:
                if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                    continue
                fd = os.open(os.path.join(entry.path, self.LOCK_NAME), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue  # no lock file (being made, or not a stage): left alone
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its process lives
            else:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
            finally:
                os.close(fd)
        return removed

    @contextlib.contextmanager
    def use(self):
        """The directory, held for one run; None when another run holds it."""
        if not self.lock.acquire(blocking=False):
            yield None
            return
        try:
            try:
                if self.pid != os.getpid() or not os.path.isdir(self.path or ""):
                    self.pid, self.path = os.getpid(), self._make()
                    atexit.register(self.remove)
                directory = Path(self.path) / self.name
                directory.mkdir(exist_ok=True)
            except OSError:  # no room, or the base directory is not writable: the run does without
                self.pid = self.path = None
                directory = None
            yield directory
        finally:
            self.lock.release()


# Copies of a workspace with a hidden suite added (see hidden_copy).
EVAL_STAGE = Stage("latte_lab-eval-stage-", "repo")
# A workspace's own test runs on the bwrap backend (see run_staged). Named "workspace" as a trial's is, so
# that the paths a memoised run's output shows are dropped from replies as a trial's own are. Not under
# /tmp: a sandbox's /tmp is its own, and would show the directories leading to a workspace under it; a
# run sees /var/tmp, as every other host directory, read-only and as it is, in a sandbox of its own too.
PUBLIC_STAGE = Stage("latte_lab-stage-", "workspace", base="/var/tmp")


def _reset_stages_after_fork() -> None:
    EVAL_STAGE.after_fork()
    PUBLIC_STAGE.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_stages_after_fork)


def remove_stage() -> None:
    """Remove this process's staging directories, if it made them (at exit; a sweep's worker, whose exit
    skips atexit, calls it itself). The next run that needs one makes a new one."""
    EVAL_STAGE.remove()
    PUBLIC_STAGE.remove()


def empty_directory(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)


@contextlib.contextmanager
def hidden_copy(sandbox: str):
    """Where a run with extra files happens, and whether its sandbox may be kept: a fresh temporary directory;
    or, on the bwrap backend with warm sandboxes, this process's one staging directory for them (emptied before
    and after each use; one run at a time, another run meanwhile takes a temporary directory), so that one kept
    sandbox serves every such run of the process (:mod:`latte_lab.sandbox.warm`)."""
    if resolve_sandbox(sandbox) == "bwrap" and warm.warm_enabled():
        with EVAL_STAGE.use() as copy:
            if copy is not None:
                empty_directory(copy)
                try:
                    yield copy, True
                finally:
                    empty_directory(copy)  # a hidden suite stays on disk no longer than its run
                return
    with tempfile.TemporaryDirectory(prefix="latte_lab-eval-") as tmp:
        yield Path(tmp) / "repo", False


def run_staged(root: Path, sandbox: str, run_in: Callable[[Path, bool], TestRunT]) -> TestRunT:
    """A workspace's own test run, made by ``run_in(directory, staged)``. On the bwrap backend with warm
    sandboxes it happens in this process's public staging directory, made to hold exactly the workspace's
    files first and handed back to the workspace after, so that one kept sandbox serves the runs of every
    workspace of the process in turn (a trial's first run then costs what its later ones do, not a
    sandbox's start). The run's output shows the workspace's path where the staging directory's appeared,
    as a sandbox of the workspace's own shows it. Elsewhere, while another run holds the stage, or when the
    stage cannot take the workspace's files (a full disk, or what is neither a file, a directory nor a
    link): the run happens in the workspace itself, in a sandbox of its own or one kept for that workspace."""
    if resolve_sandbox(sandbox) == "bwrap" and warm.warm_enabled():
        with PUBLIC_STAGE.use() as stage:
            if stage is not None:
                source = root.resolve()
                try:
                    bwrap.mirror(source, stage, regular_only=True)
                    staged = True
                except OSError:
                    staged = False  # the run happens in the workspace itself, below
                try:
                    if staged:
                        run = _handed_on(run_in(stage, True), stage, source)
                        return _shown_as(run, str(stage), str(source))
                finally:
                    empty_directory(stage)  # a workspace's files stay in the stage no longer than its run
    return run_in(root, False)


def _handed_on(run: TestRunT, stage: Path, root: Path) -> TestRunT:
    """Make ``root`` hold what the run left in ``stage``, as a sandbox of the workspace's own hands it back;
    not when the stage itself could not take it back (then, as there, the run's changes are lost)."""
    if any(note.startswith(WRITE_BACK_FAILED) for note in run.notes):
        return run
    try:
        bwrap.mirror(stage, root)
    except OSError as exc:
        return dataclasses.replace(run, notes=(*run.notes, f"{WRITE_BACK_FAILED}: {exc}"))
    return run


def _shown_as(run: TestRunT, stage: str, root: str) -> TestRunT:
    """``run`` (made in ``stage``) with the workspace's path ``root`` where its texts show the stage's."""
    texts = {"stdout": run.stdout, "stderr": run.stderr}
    changed = {k: v.replace(stage, root) for k, v in texts.items() if stage in v}
    notes = tuple(note.replace(stage, root) for note in run.notes)
    if notes != run.notes:
        changed["notes"] = notes
    return dataclasses.replace(run, **changed) if changed else run
