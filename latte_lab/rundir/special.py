"""Symlinks and special files in a run directory: a run directory that leaves the process that ran it (into a
sweep directory, from a Ray node) holds regular files and directories only.

A symlink or special file an agent left in its workspace (a FIFO, a socket, a device) is replaced by an entry of
``special_files.json`` saying what it was (``{"workspace/passwd": "symlink -> /etc/passwd", "workspace/pipe":
"fifo"}``; :func:`record_special_files`). Such a file cannot travel from a Ray node safely, and a reader that opens
every file of a run directory would follow the link or block on the FIFO.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from latte_lab.errors import DataError
from latte_lab.rundir.format import read_json, write_json_atomic

__all__ = ["SPECIAL_FILES", "describe_special", "note_special_files", "read_special_files", "record_special_files",
           "walk_run_dir"]

SPECIAL_FILES = "special_files.json"  # in a run directory: {relative path: what was there} (record_special_files)


def walk_run_dir(run_dir: str | Path) -> Iterator[tuple[Path, str, os.stat_result | None, OSError | None]]:
    """``(path, name relative to run_dir, lstat or None, error or None)`` of everything under ``run_dir``,
    each directory before what it holds, names sorted; symlinks are never followed. A directory that cannot
    be listed, or an entry that cannot be stat'ed, comes with its error."""
    run_dir = Path(run_dir)
    stack = [run_dir]
    while stack:
        directory = stack.pop()
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            yield directory, directory.relative_to(run_dir).as_posix(), None, exc
            continue
        for name in names:
            path = directory / name
            rel = path.relative_to(run_dir).as_posix()
            try:
                st = os.lstat(path)
            except OSError as exc:
                yield path, rel, None, exc
                continue
            yield path, rel, st, None
            if stat.S_ISDIR(st.st_mode):
                stack.append(path)


def describe_special(path: str | Path, st: os.stat_result) -> str | None:
    """What a symlink or special file is, in a few words (``symlink -> /etc/passwd``, ``fifo``, ``socket``,
    ``character device 1:3``); None for a regular file or a directory."""
    mode = st.st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISLNK(mode):
        try:
            return f"symlink -> {os.readlink(path)}"
        except OSError:
            return "symlink (its target could not be read)"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "character" if stat.S_ISCHR(mode) else "block"
        return f"{kind} device {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    return f"special file (mode {oct(stat.S_IFMT(mode))})"


def read_special_files(run_dir: str | Path) -> dict[str, str]:
    """The run directory's :data:`SPECIAL_FILES` entries; ``{}`` when it has none (or the file is damaged)."""
    path = Path(run_dir) / SPECIAL_FILES
    try:
        return read_json(path) if path.exists() else {}
    except DataError:
        return {}


def note_special_files(run_dir: str | Path, entries: dict[str, str]) -> None:
    """Adds ``entries`` to the run directory's :data:`SPECIAL_FILES` (written whole or not at all)."""
    if entries:
        write_json_atomic(Path(run_dir) / SPECIAL_FILES, {**read_special_files(run_dir), **entries})


def record_special_files(run_dir: str | Path) -> dict[str, str]:
    """Replaces every symlink and special file under ``run_dir`` by an entry of its :data:`SPECIAL_FILES`
    (see the module docstring); returns the entries. Regular files and directories are left as they are;
    nothing is ever followed or opened. The entries are written before anything is removed, so a failure
    (a full disk) leaves the files where they were."""
    found = {rel: what for path, rel, st, _ in walk_run_dir(run_dir)
             if st is not None and (what := describe_special(path, st)) is not None}
    note_special_files(run_dir, found)
    left = {}
    for rel in found:
        try:
            os.unlink(Path(run_dir) / rel)
        except OSError as exc:
            left[rel] = f"{found[rel]} (left in place: {exc.strerror})"
    note_special_files(run_dir, left)
    return {**found, **left}
