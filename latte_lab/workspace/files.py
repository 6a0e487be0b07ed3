"""The workspace of a trial as agents see it: confined file access, a write log, and sandboxed scripts
and test runs (:mod:`latte_lab.sandbox`).

Every file action is confined to the workspace root: no absolute paths, no ``..`` out of it, no symlink
escapes, no write through a hard link (a run may link a host file into the workspace), and a named pipe, a
socket or a device in it is refused with a message, never opened as a file (reading a FIFO would block).
Every agent write is logged with the top-level symbols it changed (:mod:`.symbols`).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shutil
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from latte_lab.config import SANDBOXES
from latte_lab.errors import ConfigError, WorkspaceError
from latte_lab.sandbox import slots
from latte_lab.sandbox.limits import SCRIPT_TIMEOUT_SECONDS, TEST_TIMEOUT_SECONDS, SandboxLimits
from latte_lab.sandbox.pytest import (
    CACHE_DIR_NAMES,
    TestRun,
    default_memo_dir,
    memo_get,
    memo_key,
    memo_put,
    memo_storable,
    run_pytest,
)
from latte_lab.sandbox.request import RunRequest
from latte_lab.sandbox.run import OUTSIDE_WORKSPACE, RunResult, resolve_sandbox, run_sandboxed
from latte_lab.workspace.symbols import changed_symbols

SNAPSHOT_MAX_FILE_BYTES = 4 * 2**20  # snapshot_files skips larger files (data dumps, not deliverables)
# Top-level modules an agent may not create: a workspace file `json.py` or `signal.py` is imported
# instead of the standard library module (the workspace is first on sys.path) and breaks pytest
# itself. The released code blocked ~60 such names; we block every public stdlib module name.
STDLIB_SHADOW_NAMES = frozenset(name for name in sys.stdlib_module_names if not name.startswith("_"))


@dataclass(frozen=True)
class WriteRecord:
    """One logged write by an agent."""

    agent: str | None
    round: int | None
    path: str
    n_chars: int
    symbols: tuple[str, ...]  # changed top-level functions/classes/methods (or JSON keys, or "<file>")
    created: bool


class Workspace:
    """A trial's project directory, as agents see it.

    Public test runs are memoised by the workspace's content (``memo``); ``memo_dir`` also keeps them on
    disk, shared with every process naming the same directory (default: ``$LATTE_LAB_MEMO_DIR``, see
    :func:`~latte_lab.sandbox.pytest.default_memo_dir`).

    >>> import tempfile
    >>> ws = Workspace(tempfile.mkdtemp())
    >>> ws.write("pkg/mod.py", "def f():\\n    return 1\\n", agent="Dev1", round=1).symbols
    ('f',)
    >>> ws.list_files()
    ['pkg/mod.py']
    """

    def __init__(
        self,
        root: Path | str,
        *,
        memo: bool = True,
        memo_dir: Path | str | None = None,
        limits: SandboxLimits | None = None,
        sandbox: str = "auto",
    ):
        self.root = Path(root).expanduser()
        self.root.mkdir(parents=True, exist_ok=True)
        self.root = self.root.resolve()
        self.memo = memo
        self.memo_dir = Path(memo_dir).expanduser() if memo_dir is not None else default_memo_dir()
        self.limits = limits or SandboxLimits()
        if sandbox not in SANDBOXES:
            raise ConfigError(f"unknown sandbox {sandbox!r}; use one of {', '.join(SANDBOXES)}")
        self.sandbox = sandbox
        if sandbox == "bwrap":
            resolve_sandbox(sandbox)  # an unusable explicit choice fails here, not at the first run
        self.test_args: tuple[str, ...] = ()
        self.writes: list[WriteRecord] = []
        self._protected: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return f"<Workspace {self.root}>"

    @property
    def backend(self) -> str:
        """The sandbox backend the runs use: ``"bwrap"`` or ``"local"`` (``sandbox="auto"`` resolved)."""
        return resolve_sandbox(self.sandbox)

    # ---- paths ---------------------------------------------------------------------------------

    def resolve(self, path: str) -> tuple[str, Path]:
        """(relative posix path, absolute path) of an agent-supplied path, or WorkspaceError."""
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError(f"invalid path {path!r}: give a file path relative to the project root")
        raw = path.strip()
        if "\x00" in raw:
            raise WorkspaceError(f"invalid path {raw!r}: it contains a NUL character")
        text = raw.replace("\\", "/")
        if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:/", text):
            raise WorkspaceError(OUTSIDE_WORKSPACE.format(path=raw))
        while True:
            if text.startswith("./"):
                text = text[2:]
            elif text.startswith("repo/"):
                text = text[5:]
            else:
                break
        parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
        if not parts:
            raise WorkspaceError(f"path {raw!r} names the project root, not a file")
        plain = _plain_path(str(self.root), parts)
        if plain is not None:  # no link on the way and nothing to normalise: the path is itself
            return "/".join(parts), Path(plain)
        full = self.root.joinpath(*parts)
        try:
            resolved = full.resolve()
        except (OSError, RuntimeError) as exc:  # symlink loop
            raise WorkspaceError(f"path {raw!r} cannot be resolved: {exc}") from None
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise WorkspaceError(OUTSIDE_WORKSPACE.format(path=raw))
        if resolved == self.root:
            raise WorkspaceError(f"path {raw!r} names the project root, not a file")
        return resolved.relative_to(self.root).as_posix(), resolved

    def exists(self, path: str) -> bool:
        try:
            return self.resolve(path)[1].is_file()
        except WorkspaceError:
            return False

    def list_files(self) -> list[str]:
        """Relative posix paths of all files, sorted; hidden directories and caches skipped."""
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in CACHE_DIR_NAMES]
            rel_dir = Path(dirpath).relative_to(self.root)
            for name in filenames:
                if name.endswith(".pyc"):
                    continue
                found.append((rel_dir / name).as_posix())
        return sorted(found)

    def _near_names(self, rel: str) -> str:
        files = self.list_files()
        close = difflib.get_close_matches(rel, files, n=5, cutoff=0.5)
        by_name = [f for f in files if PurePosixPath(f).name == PurePosixPath(rel).name and f not in close]
        near = (close + by_name)[:5] or files[:10]
        return ", ".join(near) if near else "(the workspace is empty)"

    # ---- reading and writing -------------------------------------------------------------------

    def read(self, path: str, agent: str | None = None) -> str:
        """Text of a workspace file (undecodable bytes replaced). ``agent`` is for callers' logs."""
        rel, full = self.resolve(path)
        st = _lstat(full)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(f"{rel!r} is a directory; files in it: {self._near_names(rel + '/')}")
        if st is None:
            raise WorkspaceError(
                f"file {rel!r} does not exist in the workspace; near names: {self._near_names(rel)}"
            )
        return _read_bytes(full, rel).decode("utf-8", errors="replace")

    def _shadow_reason(self, rel: str) -> str | None:
        parts = PurePosixPath(rel).parts
        if parts[-1].endswith(".py"):
            if len(parts) == 1 and parts[0][:-3] in STDLIB_SHADOW_NAMES:
                return parts[0][:-3]
            if len(parts) == 2 and parts[1] == "__init__.py" and parts[0] in STDLIB_SHADOW_NAMES:
                return parts[0]
        return None

    def write(self, path: str, text: str, agent: str | None = None, round: int | None = None) -> WriteRecord:
        """Overwrite (or create) a file as an agent; logged in :attr:`writes`."""
        if not isinstance(text, str):
            raise WorkspaceError(f"file content for {path!r} must be text, got {type(text).__name__}")
        rel, full = self.resolve(path)
        if rel in self._protected:
            raise WorkspaceError(
                f"file {rel!r} is read-only: it is a public test file of the task; change the code it "
                "tests instead"
            )
        shadow = self._shadow_reason(rel)
        if shadow is not None:
            raise WorkspaceError(
                f"cannot write {rel!r}: it would shadow the standard library module {shadow!r} and break "
                f"imports and the test run; choose another name (e.g. '{shadow}_utils.py')"
            )
        st = _lstat(full)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(f"cannot write {rel!r}: it is a directory")
        if st is not None:
            _refuse(st, rel, "write")
        created = st is None
        before = None if created else _read_bytes(full, rel).decode("utf-8", errors="replace")
        _write_bytes(full, rel, text.encode("utf-8"))
        record = WriteRecord(
            agent=agent,
            round=round,
            path=rel,
            n_chars=len(text),
            symbols=changed_symbols(before, text, rel),
            created=created,
        )
        self.writes.append(record)
        return record

    def setup_file(self, path: str, text: str | bytes) -> None:
        """Write a starting file of the task: not logged, allowed on protected files."""
        rel, full = self.resolve(path)
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        _write_bytes(full, rel, data)
        if rel in self._protected:
            self._protected[rel] = data

    def protect(self, *paths: str) -> None:
        """Make files read-only to agents (public tests).

        ``write`` refuses them, and if a script or test run modifies or deletes one anyway, it is
        restored right after the run (with a note in the result).
        """
        for path in paths:
            rel, full = self.resolve(path)
            if _lstat(full) is None or full.is_dir():
                raise WorkspaceError(f"cannot protect {rel!r}: the file does not exist; set it up first")
            self._protected[rel] = _read_bytes(full, rel)

    @property
    def protected(self) -> tuple[str, ...]:
        return tuple(sorted(self._protected))

    def _restore_protected(self) -> list[str]:
        restored = []
        for rel, data in self._protected.items():
            full = self.root / rel
            try:
                _clear_parents(self.root, rel)  # a directory on the way replaced by a link or a file
                st = _lstat(full)
                if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and _read_bytes(full, rel) == data:
                    continue
                if st is not None and stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(full)
                elif st is not None:  # changed, a link, a FIFO, a socket, a device: replaced, never written through
                    full.unlink()
                _write_bytes(full, rel, data)
                restored.append(rel)
            except (OSError, WorkspaceError):
                continue
        return restored

    def snapshot_files(self) -> dict[str, str]:
        """{relative path: text} of every text file (binary and huge files and caches skipped)."""
        snapshot: dict[str, str] = {}
        for rel in self.list_files():
            full = self.root / rel
            st = _lstat(full)
            if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > SNAPSHOT_MAX_FILE_BYTES:
                continue  # a symlink, a FIFO, a socket, a device: not a file of the project
            try:
                snapshot[rel] = _read_bytes(full, rel).decode("utf-8")
            except (WorkspaceError, UnicodeDecodeError):
                continue
        return snapshot

    # ---- state at a round's end -----------------------------------------------------------------

    def state(self) -> dict | None:
        """The workspace's files (``{relative path: bytes}``; a directory as None, a link as ``("link", target)``),
        their modes (``{path: mode}`` where not 0o644 or 0o755 for a directory) and the write log; None when it holds
        what cannot be restored (a FIFO, a socket, a device, an unreadable entry)."""
        files: dict[str, bytes | tuple | None] = {}
        modes: dict[str, int] = {}
        stack = [(self.root, "")]
        while stack:
            directory, prefix = stack.pop()
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:
                return None
            for entry in entries:
                rel = prefix + entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        files[rel] = ("link", os.readlink(entry.path))
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        files[rel] = None
                        stack.append((Path(entry.path), rel + "/"))
                    elif stat.S_ISREG(st.st_mode):
                        with open(entry.path, "rb") as fh:
                            files[rel] = fh.read()
                    else:
                        return None
                except OSError:
                    return None
                mode = stat.S_IMODE(st.st_mode)
                if mode != (0o755 if stat.S_ISDIR(st.st_mode) else 0o644):
                    modes[rel] = mode
        return {"files": files, "modes": modes, "writes": list(self.writes)}

    def restore(self, state: dict) -> None:
        """Make the workspace hold exactly what :meth:`state` described (files, links, directories, modes) and take
        its write log; what the task set up and the state lacks is removed."""
        files, modes = state["files"], state["modes"]
        for dirpath, dirnames, filenames in os.walk(self.root, topdown=False):
            for name in dirnames + filenames:
                full = Path(dirpath) / name
                rel = full.relative_to(self.root).as_posix()
                kind = files.get(rel, False)
                is_dir = full.is_dir() and not full.is_symlink()
                if kind is False or (kind is None) != is_dir or isinstance(kind, tuple) != full.is_symlink():
                    shutil.rmtree(full) if is_dir else full.unlink()
        for rel in sorted(files):  # parents before what they hold
            content, full = files[rel], self.root / rel
            if content is None:
                full.mkdir(exist_ok=True)
            elif isinstance(content, tuple):
                if not full.is_symlink() or os.readlink(full) != content[1]:
                    full.unlink(missing_ok=True)
                    os.symlink(content[1], full)
                continue
            elif not full.exists() or full.read_bytes() != content:
                full.write_bytes(content)
            os.chmod(full, modes.get(rel, 0o755 if content is None else 0o644))
        self.writes = list(state["writes"])

    # ---- running -------------------------------------------------------------------------------

    def _with_restore_note(self, run: RunResult) -> RunResult:
        restored = self._restore_protected()
        if not restored:
            return run
        note = f"read-only files were modified by the run and have been restored: {', '.join(restored)}"
        return dataclasses.replace(run, notes=(*run.notes, note))

    @slots.bounded  # a core each: a sweep with many trials in flight runs as many at once as it has cores
    def run_script(self, path: str, *, timeout: float = SCRIPT_TIMEOUT_SECONDS) -> RunResult:
        """``python <path>`` in the workspace, sandboxed. A missing script raises WorkspaceError."""
        rel, full = self.resolve(path)
        st = _lstat(full)
        if st is None or stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(
                f"script {rel!r} does not exist in the workspace; near names: {self._near_names(rel)}"
            )
        _refuse(st, rel, "run")
        # the workspace is a directory its runs come back to (reuse): a backend may serve them from what it keeps
        run = run_sandboxed(RunRequest([sys.executable, rel], self.root, timeout=timeout, limits=self.limits,
                                       reuse=True), sandbox=self.backend)
        return self._with_restore_note(run)

    @slots.bounded
    def run_tests(
        self, args: Iterable[str] | None = None, *, timeout: float = TEST_TIMEOUT_SECONDS
    ) -> TestRun:
        """The public test command (``self.test_args`` unless ``args``), memoised by content."""
        test_args = tuple(str(a) for a in (self.test_args if args is None else args))
        key = None
        if self.memo:
            key = memo_key(self.root, test_args, self.limits, self.backend)
            hit = memo_get(self.memo_dir, key)
            if hit is not None:
                return dataclasses.replace(hit, cached=True)
        run = run_pytest(self.root, test_args, timeout=timeout, limits=self.limits, sandbox=self.backend)
        run = self._with_restore_note(run)  # type: ignore[assignment]
        storable = key is not None and memo_storable(run)
        # Only when the run itself changed no file: otherwise the result belongs to no stable state.
        if storable and memo_key(self.root, test_args, self.limits, self.backend) == key:
            memo_put(self.memo_dir, key, run)
        return run  # type: ignore[return-value]


def _plain_path(root: str, parts: list[str]) -> str | None:
    """``root/parts...`` when resolving it would give it back unchanged: no ``..``, and neither the root nor
    any existing component below it is a symbolic link (a component that does not exist has nothing below
    it that could be one). None otherwise, for the caller to resolve it. Two or three ``lstat`` calls
    instead of one per component from ``/``."""
    if ".." in parts:
        return None
    path = root
    for i, part in enumerate((None, *parts)):
        if i:
            path = f"{path}/{part}"
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return None
        except FileNotFoundError:
            return f"{path}/{'/'.join(parts[i:])}" if i < len(parts) else path
        except OSError:  # a file where a directory should be: resolving keeps the path as it is
            return None
    return path


# How a workspace file is opened: never through a symbolic link as its last component, never waiting (a FIFO
# without a writer or reader would block the open itself).
_OPEN_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


def _lstat(full: Path) -> os.stat_result | None:
    """The path's own status (a link not followed), None if nothing is there."""
    try:
        return os.lstat(full)
    except OSError:  # missing, or a file where a directory of the path should be
        return None


def _refuse(st: os.stat_result, rel: str, verb: str) -> None:
    """WorkspaceError unless ``st`` is a regular file (what it is instead, in one line)."""
    if stat.S_ISREG(st.st_mode):
        return
    kind = next((name for test, name in _SPECIAL_KINDS if test(st.st_mode)), "not a regular file")
    raise WorkspaceError(f"cannot {verb} {rel!r}: it is {kind}, not a regular file; use another path")


def _read_bytes(full: Path, rel: str) -> bytes:
    """The whole content of a regular file; a FIFO, socket, device or link is refused, never opened as one."""
    st = _lstat(full)
    if st is not None:
        _refuse(st, rel, "read")
    try:
        fd = os.open(full, os.O_RDONLY | _OPEN_FLAGS)
    except OSError as exc:
        raise WorkspaceError(f"cannot read {rel!r}: {exc.strerror or exc}") from None
    try:
        _refuse(os.fstat(fd), rel, "read")  # swapped for another kind of file since the check above
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise WorkspaceError(f"cannot read {rel!r}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _clear_parents(root: Path, rel: str) -> None:
    """Remove what stands where a directory of ``rel`` belongs (a symbolic link, a file), so that writing
    ``rel`` again stays inside ``root``."""
    path = root
    for part in PurePosixPath(rel).parts[:-1]:
        path = path / part
        st = _lstat(path)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            path.unlink()


def _write_bytes(full: Path, rel: str, data: bytes) -> None:
    """Write ``data`` as the file's whole content, in place; only into a regular file with no other name (a
    hard link may be the name of a file outside the workspace).

    Not by truncating to zero first: on ext4 a file emptied and rewritten is flushed to disk when it is
    closed (the ``auto_da_alloc`` safeguard), 0.2-1 ms per write against a few microseconds written over
    and cut to length. Neither way is atomic; the content is the same."""
    st = _lstat(full)
    if st is not None:
        _refuse(st, rel, "write")
    try:
        full.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | _OPEN_FLAGS, 0o666)
        try:
            st = os.fstat(fd)
            _refuse(st, rel, "write")
            if st.st_nlink > 1:
                raise WorkspaceError(f"cannot write {rel!r}: it is a hard link (one of {st.st_nlink} names of one "
                                     "file, which may lie outside the workspace); delete it and write the file anew")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
    except (NotADirectoryError, FileExistsError):
        raise WorkspaceError(
            f"cannot write {rel!r}: a parent of it is a file, not a directory; choose another path"
        ) from None
    except OSError as exc:
        raise WorkspaceError(f"cannot write {rel!r}: {exc.strerror or exc}") from None
