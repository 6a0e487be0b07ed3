"""What a task sets up in a fresh workspace, read once per task and process.

The hidden evaluation confirms a claim of success with the public tests as the task ships them, and the
scan for tampering (:func:`latte_lab.sandbox.tamper.scan`) leaves out files the task wrote itself.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path


def task_files(task) -> dict[str, bytes]:
    """``{relative path: content}`` of every file ``task.setup`` writes into an empty workspace (``task``: a
    :class:`~latte_lab.tasks.base.Task`).

    >>> import latte_lab as ll
    >>> sorted(task_files(ll.tasks.get("debug")))
    ['signal_toolkit.py', 'test_suite.py']
    """
    return dict(_task_files(type(task), task.id))


@functools.lru_cache(maxsize=32)
def _task_files(cls: type, task_id: str) -> tuple[tuple[str, bytes], ...]:
    from latte_lab.workspace import Workspace

    with tempfile.TemporaryDirectory(prefix="latte_lab-task-files-") as tmp:
        root = Path(tmp)
        cls().setup(Workspace(root, memo=False, sandbox="local"))
        files = []
        for directory, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                full = Path(directory) / name
                files.append((full.relative_to(root).as_posix(), full.read_bytes()))
    return tuple(files)
