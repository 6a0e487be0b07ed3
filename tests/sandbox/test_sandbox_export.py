"""Handing a bubblewrap sandbox's workspace back to the host (``export.apply_export``): the pass that applies a
plain workspace straight from the tar stream leaves exactly the files that extracting it into a temporary
directory and mirroring from there leaves, whatever the destination held before; a workspace with a link in it
takes the second way. Runs without bubblewrap: the tar streams are made here, as the sandbox's init makes them."""

from __future__ import annotations

import io
import os
import random
import stat
import tarfile
from pathlib import Path

import pytest

from latte_lab.sandbox import export

MODES = (0o644, 0o600, 0o755, 0o700, 0o777, 0o4755, 0o444, 0o640)


def export_of(directory: Path, names: list[str] | None = None, tar_format: int = tarfile.GNU_FORMAT) -> io.BytesIO:
    """The tar stream the sandbox's init writes for ``directory`` (``_child.export``), in a seekable buffer."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w|", format=tar_format) as tar:
        for name in sorted(os.listdir(directory)):
            if names is None or name in names:
                tar.add(directory / name, arcname=name)
    buf.seek(0)
    return buf


class Unseekable(io.RawIOBase):
    """The same bytes, read as a pipe is: apply_export then always extracts and mirrors."""

    def __init__(self, data: bytes):
        self._buf = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, b):
        chunk = self._buf.read(len(b))
        b[: len(chunk)] = chunk
        return len(chunk)


def tree(root: Path) -> dict[str, tuple]:
    """Every entry below ``root``: its kind, and a file's bytes and mode bits or a link's target."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
            else:
                found[rel] = ("special",)
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
    return found


def random_workspace(rng: random.Random, root: Path, *, links: bool) -> None:
    """Files (some empty, some of one size with different bytes), nested directories, odd modes; with
    ``links`` a symbolic link inside, one pointing out and a hard link."""
    root.mkdir(parents=True, exist_ok=True)
    dirs = [root]
    for i in range(rng.randint(1, 4)):
        d = rng.choice(dirs) / f"d{i}"
        d.mkdir(exist_ok=True)
        dirs.append(d)
    for i in range(rng.randint(1, 12)):
        path = rng.choice(dirs) / f"f{i}.{rng.choice(['py', 'txt', 'csv', 'xml'])}"
        path.write_bytes(bytes(rng.choice(b"ab\n") for _ in range(rng.choice([0, 3, 3, 50, 4000]))))
        os.chmod(path, rng.choice(MODES))
    if links:
        files = [p for p in root.rglob("*") if p.is_file()]
        (root / "inside").symlink_to(files[0].relative_to(root))
        (root / "outside").symlink_to("/etc/passwd")
        os.link(files[-1], root / "hard")


def random_destination(rng: random.Random, root: Path, shape: Path) -> None:
    """What the destination held before the run: some of ``shape``'s paths as something else (a file where a
    directory is, a directory or link where a file is, other bytes, other modes), extra files, a FIFO."""
    root.mkdir(parents=True, exist_ok=True)
    for path in sorted(shape.rglob("*")):
        rel = path.relative_to(shape)
        target = root / rel
        if any(p.is_symlink() or not p.is_dir() for p in (target.parent, *target.parent.parents) if root in p.parents):
            continue  # below what is not a directory here (never through a link, out of the test's folder)
        roll = rng.random()
        if path.is_dir() and not path.is_symlink():
            if roll < 0.2:
                target.write_text("a file where a directory goes")
            elif roll < 0.3:
                target.symlink_to("/tmp")
            else:
                target.mkdir()
        elif roll < 0.15:
            target.mkdir()
            (target / "inner.txt").write_text("x")
        elif roll < 0.25:
            target.symlink_to("/etc/hostname")
        elif roll < 0.6 and path.is_file():
            target.write_bytes(path.read_bytes())
            os.chmod(target, rng.choice(MODES))
        elif roll < 0.8 and path.is_file():
            target.write_bytes(bytes(len(path.read_bytes())))  # the same size, other bytes
    (root / "extra.py").write_text("left from before")
    (root / "extra_dir").mkdir(exist_ok=True)
    (root / "extra_dir" / "x").write_text("x")
    if rng.random() < 0.5:
        os.mkfifo(root / "fifo")


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("links", [False, True], ids=["plain", "with-links"])
def test_applying_from_the_stream_leaves_what_extracting_and_mirroring_leaves(tmp_path, seed, links):
    rng = random.Random(seed)
    workspace = tmp_path / "workspace"
    random_workspace(rng, workspace, links=links)
    names = None if seed % 3 else sorted(os.listdir(workspace))[:2]  # a run handing back only some entries
    data = export_of(workspace, names, tarfile.PAX_FORMAT if seed % 2 else tarfile.GNU_FORMAT).getvalue()
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    random_destination(random.Random(seed), fast, workspace)
    random_destination(random.Random(seed), slow, workspace)
    assert tree(fast) == tree(slow)
    export.apply_export(io.BytesIO(data), fast, names)
    export.apply_export(io.BufferedReader(Unseekable(data)), slow, names)
    assert tree(fast) == tree(slow)
    if names is None:
        expected = {rel: entry for rel, entry in tree(workspace).items() if rel != "outside"}  # a link out: skipped
        assert contents(fast) == {rel: entry[:2] for rel, entry in expected.items()}


def test_a_plain_workspace_is_applied_without_a_temporary_directory(tmp_path, monkeypatch):
    workspace = tmp_path / "workspace"
    random_workspace(random.Random(0), workspace, links=False)
    made = []
    real = export.tempfile.TemporaryDirectory
    monkeypatch.setattr(export.tempfile, "TemporaryDirectory", lambda *a, **k: made.append(1) or real(*a, **k))
    (tmp_path / "plain").mkdir()
    (tmp_path / "linked").mkdir()
    export.apply_export(export_of(workspace), tmp_path / "plain")
    assert made == [] and contents(tmp_path / "plain") == contents(workspace)
    (workspace / "link").symlink_to("f0.py")
    export.apply_export(export_of(workspace), tmp_path / "linked")
    assert made == [1] and contents(tmp_path / "linked") == contents(workspace)


def contents(root: Path) -> dict[str, tuple]:
    """``tree`` without the mode bits (the filter clears some: set-user-ID, write for others)."""
    return {rel: entry[:2] for rel, entry in tree(root).items()}


def test_an_unchanged_file_is_not_rewritten(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "same.py").write_text("x = 1\n")
    (workspace / "new.py").write_text("y = 2\n")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "same.py").write_text("x = 1\n")
    (dest / "new.py").write_text("y = 3\n")
    os.chmod(dest / "same.py", os.stat(workspace / "same.py").st_mode & 0o777)
    inode = (dest / "same.py").stat().st_ino
    before = (dest / "same.py").stat().st_mtime_ns
    os.utime(dest / "same.py", ns=(before - 10**9, before - 10**9))
    export.apply_export(export_of(workspace), dest)
    assert (dest / "same.py").stat().st_mtime_ns == before - 10**9 and (dest / "same.py").stat().st_ino == inode
    assert (dest / "new.py").read_text() == "y = 2\n"
