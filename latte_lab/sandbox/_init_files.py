"""A sandbox init's work with files: the host's workspace copied in before a run (:func:`copy_in`), the workspace
the run left written out as a tar stream (:func:`export`), and whether a run filled a file system (:func:`full`).

Loaded by path by ``_child.py`` (a one-off bubblewrap sandbox's init) and ``_sandbox_server.py`` (a kept one's);
only the standard library is imported.
"""

import os
import sys

FULL_MARGIN_BYTES = 64 * 1024  # a tmpfs with less room than this left was filled by the run


def copy_in(src: str, dst: str, only: str | None = None) -> bool:
    """Copy the tree ``src`` into ``dst``; False (after a message) when not every file made it. With ``only``, a
    pattern: the regular files of ``src`` whose names match it, each as far as it can be copied (a cache, which
    the run can do without), and always True."""
    import shutil

    if only is not None:
        import fnmatch

        try:
            os.makedirs(dst, exist_ok=True)
            names = fnmatch.filter(os.listdir(src), only)
        except OSError:
            names = []
        for name in names:
            path = os.path.join(src, name)
            try:
                if os.path.isfile(path) and not os.path.islink(path):
                    shutil.copy2(path, os.path.join(dst, name))
            except OSError:
                pass
        return True
    try:
        os.makedirs(dst, exist_ok=True)
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True, ignore=_special_files)
    except (OSError, shutil.Error) as exc:
        sys.stderr.write(f"sandbox: could not copy the workspace into the sandbox: {str(exc)[:500]}\n")
        return False
    return True


def _special_files(directory: str, names: list) -> list:
    """The FIFOs, sockets and devices among ``names``: not copied (reading a FIFO would block the copy)."""
    import stat

    skipped = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(directory, name)).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skipped.append(name)
    return skipped


def export(fd: int, directory: str, names: list | None) -> None:
    """A tar stream of ``directory`` (or of its entries ``names``) on ``fd``. GNU format: the default (pax) writes an
    extended header before every member to keep the fraction of a second of its modification time, which the host
    never uses, and reading those headers was a third of the host's work to take a workspace back."""
    import tarfile

    with os.fdopen(fd, "wb") as stream, tarfile.open(fileobj=stream, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(os.listdir(directory)):
            if names is None or name in names:
                tar.add(os.path.join(directory, name), arcname=name)


def full(path: str) -> bool:
    """Whether the file system of ``path`` has (nearly) no room left: writes were refused."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < FULL_MARGIN_BYTES
