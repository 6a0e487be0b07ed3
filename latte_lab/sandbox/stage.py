"""Staging directories, the bubblewrap backend's: where a run happens when it is not in its workspace's own
directory.

Two per process, each made on first use and used by one run at a time: the public stage, where every workspace's
own test runs and scripts on the bwrap backend happen in turn (so that one kept sandbox serves them all,
:mod:`latte_lab.sandbox.warm`; :class:`Staging`), and the hidden stage, the scratch directory where a copy of a
workspace with a hidden suite added is run (its kept sandbox runs no agent's code; :func:`scratch`).
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
from pathlib import Path

from latte_lab.sandbox.export import WRITE_BACK_FAILED, mirror
from latte_lab.sandbox.request import RunResult


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

    def take(self) -> Path | None:
        """The directory, held for one run until :meth:`give_back`; None when another run holds it (or it cannot be
        made: no room, or the base directory is not writable)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if self.pid != os.getpid() or not os.path.isdir(self.path or ""):
                self.pid, self.path = os.getpid(), self._make()
                atexit.register(self.remove)
            directory = Path(self.path) / self.name
            directory.mkdir(exist_ok=True)
            return directory
        except OSError:  # the run does without
            self.pid = self.path = None
            self.lock.release()
            return None

    def give_back(self) -> None:
        self.lock.release()

    def holds(self, path: Path) -> bool:
        """Whether ``path`` is this stage's directory."""
        return self.path is not None and self.pid == os.getpid() and path == Path(self.path) / self.name


# Copies of a workspace with a hidden suite added (see scratch).
EVAL_STAGE = Stage("latte_lab-eval-stage-", "repo")
# A workspace's own runs on the bwrap backend (see Staging). Named "workspace" as a trial's is, so
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


def is_stage(path: Path) -> bool:
    """Whether ``path`` is one of this process's staging directories."""
    return EVAL_STAGE.holds(path) or PUBLIC_STAGE.holds(path)


@contextlib.contextmanager
def scratch(kept: bool):
    """A directory to fill and run in (a copy of a workspace with a hidden suite added), and whether a sandbox kept
    for it may serve the run: with ``kept``, this process's one staging directory for such copies, emptied before
    and after each use, so that one kept sandbox serves every such run of the process; a fresh temporary directory
    without, or while another run holds the stage."""
    copy = EVAL_STAGE.take() if kept else None
    if copy is not None:
        try:
            empty_directory(copy)
            yield copy, True
        finally:
            try:
                empty_directory(copy)  # a hidden suite stays on disk no longer than its run
            finally:
                EVAL_STAGE.give_back()
        return
    with tempfile.TemporaryDirectory(prefix="latte_lab-eval-") as tmp:
        yield Path(tmp) / "repo", False


class Staging:
    """A workspace's run in this process's public stage: :meth:`take` makes the stage hold exactly the workspace's
    files (None when another run holds it, or when the stage cannot take them: a full disk, or what is neither a
    file, a directory nor a link); :meth:`hand_on` gives the workspace what the run left, with the run's texts
    showing the workspace's path where the stage's appeared, as a sandbox of the workspace's own shows it;
    :meth:`release` empties the stage and lets it go. So one kept sandbox serves the runs of every workspace of
    the process in turn (a trial's first run then costs what its later ones do, not a sandbox's start)."""

    def __init__(self, root: Path, path: Path, report: str | None = None):
        self.root, self.path, self.report = root, path, report

    @classmethod
    def take(cls, root: Path, report: str | None = None) -> Staging | None:
        """``report``: the run's report for its caller (:class:`~latte_lab.sandbox.request.RunRequest`), handed on
        even when the rest cannot be."""
        path = PUBLIC_STAGE.take()
        if path is None:
            return None
        staging = cls(root.resolve(), path, report)
        try:
            mirror(staging.root, path, regular_only=True)
        except OSError:
            staging.release()
            return None
        return staging

    def hand_on(self, run: RunResult) -> RunResult:
        report = self.path / self.report if self.report is not None else None
        if report is not None and report.is_file() and not report.is_symlink():
            try:
                shutil.copyfile(report, self.root / self.report)
            except OSError:
                pass  # (then the caller finds no report: a run that says nothing)
        if not any(note.startswith(WRITE_BACK_FAILED) for note in run.notes):
            try:
                mirror(self.path, self.root)
            except OSError as exc:
                run = dataclasses.replace(run, notes=(*run.notes, f"{WRITE_BACK_FAILED}: {exc}"))
        # (when the stage itself could not take the run's files back, as there, the run's changes are lost)
        stage, root = str(self.path), str(self.root)
        texts = {"stdout": run.stdout, "stderr": run.stderr}
        changed = {k: v.replace(stage, root) for k, v in texts.items() if stage in v}
        notes = tuple(note.replace(stage, root) for note in run.notes)
        if notes != run.notes:
            changed["notes"] = notes
        return dataclasses.replace(run, **changed) if changed else run

    def release(self) -> None:
        try:
            empty_directory(self.path)  # a workspace's files stay in the stage no longer than its run
        finally:
            PUBLIC_STAGE.give_back()
