"""What a bubblewrap sandbox hands back: the workspace it left, as a tar stream, made the host directory's content
(:func:`apply_export`); and one directory made equal to another (:func:`mirror`), with which a run staged in a
copy of its workspace hands its files on.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

WRITE_BACK_FAILED = "the workspace could not be written back"  # a note's start: the run's changes are lost


def apply_export(stream, root: Path, names: list[str] | None = None) -> None:
    """Make ``root`` hold exactly the files of the tar ``stream`` (the sandbox's workspace at its end);
    with ``names``, only those top-level entries of ``root`` are touched.

    Members that would land outside ``root`` (absolute names, ``..``, links pointing out) and special
    files are skipped; unchanged files are not rewritten.

    A workspace of directories and regular files (every run's, nearly) is applied straight from the
    stream, each file compared with ``root``'s in memory (:func:`_apply_plain`); one with a link in it is
    extracted into a temporary directory first and mirrored from there, which gives the same files.
    """
    if stream.seekable():
        start = stream.tell()
        if _apply_plain(stream, root, names):
            return
        stream.seek(start)
    with tempfile.TemporaryDirectory(prefix="latte_lab-export-") as tmp:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            tar.extractall(tmp, filter=_safe)
        mirror(Path(tmp), root, names)


# A directory that does not exist: the filter's check that a member stays inside it is then a check of the
# member's name alone, as it is for the extraction into a fresh temporary directory that this pass replaces.
_CLEAN_DESTINATION = "/nonexistent/latte_lab-export"


def _apply_plain(stream, root: Path, names: list[str] | None) -> bool:
    """What :func:`apply_export` does by extracting and mirroring, done in one pass: every member kept by the
    same filter lands in ``root`` as the mirror would leave it (a file's bytes and its filtered mode bits, a
    directory made), and whatever else ``root`` holds (within ``names``) is removed. False, with ``root``
    perhaps half done, as soon as a member is anything else (a link) or comes before its directory: the
    caller then applies the whole stream the other way, which makes ``root`` right whatever this left."""
    wanted: set[str] = set()
    directories = {""}  # made real directories of root in this pass (a file's parent must be one)
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            kept = _safe(member, _CLEAN_DESTINATION)  # judged as the extraction into an empty directory judges it
            if kept is None:
                continue
            rel = PurePosixPath(kept.name).as_posix()
            parent = rel.rpartition("/")[0]
            if rel in ("", ".") or rel.startswith("/") or ".." in rel.split("/") or parent not in directories:
                return False
            target = root / rel
            if kept.isdir():
                if target.is_symlink() or (target.exists() and not target.is_dir()):
                    _remove(target)
                target.mkdir(exist_ok=True)
                directories.add(rel)
            elif kept.isreg() and kept.mode is not None:
                data = tar.extractfile(member).read()
                if target.is_symlink() or target.is_dir():
                    _remove(target)
                try:
                    st = target.lstat()
                except FileNotFoundError:
                    st = None
                if st is not None and not stat.S_ISREG(st.st_mode):  # a FIFO, a socket: never read
                    target.unlink()
                    st = None
                if st is None or st.st_size != len(data) or target.read_bytes() != data:
                    with open(target, "wb") as fh:
                        fh.write(data)
                    st = None
                if st is None or stat.S_IMODE(st.st_mode) != kept.mode & 0o777:
                    os.chmod(target, kept.mode & 0o777)
            else:
                return False
            wanted.add(rel)
    _remove_unwanted(root, wanted, names)
    return True


def _safe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def mirror(src: Path, dst: Path, names: list[str] | None = None, *, regular_only: bool = False) -> None:
    """Make ``dst`` equal to ``src`` (files, symlinks, directories; with ``names`` only those top-level
    entries), touching only what differs. ``regular_only``: a special file in ``src`` (a FIFO, a device)
    raises ``shutil.SpecialFileError`` instead of being read as a file."""
    wanted: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = Path(dirpath).relative_to(src)
        for name in dirnames + filenames:
            rel = rel_dir / name
            wanted.add(rel.as_posix())
            s, d = src / rel, dst / rel
            if s.is_symlink():
                if not d.is_symlink() or os.readlink(d) != os.readlink(s):
                    _remove(d)
                    os.symlink(os.readlink(s), d)
            elif s.is_dir():
                if d.is_symlink() or (d.exists() and not d.is_dir()):
                    _remove(d)
                d.mkdir(exist_ok=True)
            else:
                if regular_only and not stat.S_ISREG(s.lstat().st_mode):
                    raise shutil.SpecialFileError(f"{s} is not a regular file")
                if d.is_symlink() or d.is_dir():
                    _remove(d)
                if not d.exists() or d.stat().st_size != s.stat().st_size or d.read_bytes() != s.read_bytes():
                    shutil.copyfile(s, d)
                os.chmod(d, s.stat().st_mode & 0o777)
        dirnames[:] = [n for n in dirnames if not (src / rel_dir / n).is_symlink()]
    _remove_unwanted(dst, wanted, names)


def _remove_unwanted(dst: Path, wanted: set[str], names: list[str] | None) -> None:
    """Remove every entry of ``dst`` (within the top-level ``names``) whose relative path is not ``wanted``."""
    for dirpath, dirnames, filenames in os.walk(dst, topdown=False):
        rel_dir = Path(dirpath).relative_to(dst)
        for name in dirnames + filenames:
            rel = (rel_dir / name).as_posix()
            if rel not in wanted and (names is None or rel.split("/", 1)[0] in names):
                _remove(dst / rel)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists():  # a FIFO, a socket, a device node
        path.unlink()
